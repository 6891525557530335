#!/usr/bin/env bash
# Model loaders: full-precision GGUF (F32, F16, BF16; llama and qwen2) and Hugging Face safetensors
# directories (single file and sharded, llama and qwen2 with Q/K/V biases and tied embeddings), all
# generated here by tests/llm/make_tiny_gguf.py and make_tiny_hf.py (nothing downloaded, nothing
# committed); logits checked against the independent float64 forward tests/llm/torch_ref.py, also for a
# head_dim other than dim / heads.  Then damaged directories, the index's weight_map, FIFOs in place of
# files, and a file shrinking during the load.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
$PY -c "import numpy" 2>/dev/null || skip_all "python3-numpy not installed"
IDS=$(cat "$FIX/llm/tiny_ids.txt")
for v in f32 f16 bf16 qwen2 qwen2-f32 qwen2-hd24; do   # hd24: head_dim 24 != dim / heads (key_length)
  $PY "$ROOT/tests/llm/make_tiny_gguf.py" --variant $v "$T/$v.gguf"
  ok "gguf $v: logits" "$QS" llm logits --model "$T/$v.gguf" --prompt-ids "$IDS" -o "$T/$v.npy"
  ok "gguf $v: agrees with the float64 reference to 1e-4" $PY "$ROOT/tests/llm/torch_ref.py" "$T/$v.gguf" "$IDS" "$T/$v.npy" 1e-4
done
check "bf16 gguf: loaded as bf16 weights" '"$QS" llm logits --model "$T/bf16.gguf" --prompt-ids 1 -o "$T/x.npy" 2>&1 | grep -q "bf16 x16"'
for v in llama llama-sh qwen2 llama-hd; do   # llama-hd: config.json head_dim 24 != hidden / heads
  $PY "$ROOT/tests/llm/make_tiny_hf.py" $v "$T/hf-$v"
  ok "hf $v: logits" "$QS" llm logits --model "$T/hf-$v" --prompt-ids "$IDS" -o "$T/hf-$v.npy"
  ok "hf $v: agrees with the float64 reference to 1e-4" $PY "$ROOT/tests/llm/torch_ref.py" "$T/hf-$v" "$IDS" "$T/hf-$v.npy" 1e-4
done
ok "hf llama: tokenizer.json vocabulary and merges (\"a b\" form) tokenize" "$QS" llm tokenize --model "$T/hf-llama" --prompt "the quantize is"
check "hf llama: same ids as the GGUF vocabulary" '[ "$(cat "$T/out")" = "$("$QS" llm tokenize --model "$FIX/llm/tiny.gguf" --prompt "the quantize is" 2>/dev/null)" ]'
ok "hf llama-sh: merges as [\"a\", \"b\"] pairs tokenize the same" "$QS" llm tokenize --model "$T/hf-llama-sh" --prompt "the quantize is"
check "hf llama-sh: same ids" '[ "$(cat "$T/out")" = "$("$QS" llm tokenize --model "$FIX/llm/tiny.gguf" --prompt "the quantize is" 2>/dev/null)" ]'
ok "hf: sampling runs (generate)" "$QS" llm generate --model "$T/hf-qwen2" --prompt-ids 1,40,41 --tokens 4 --seqs 1
ok "hf qwen2: score runs and stores" "$QS" llm score --model "$T/hf-qwen2" --tokens 4 --seqs 2 --prompts 1 --name q
ok "hf qwen2: Split-regex pre-tokenizer tokenizes" "$QS" llm tokenize --model "$T/hf-qwen2" --prompt "the quantize is naïve"
check "hf qwen2: same ids as the GGUF vocabulary on text both pre-tokenizers split alike" '[ "$(cat "$T/out")" = "$("$QS" llm tokenize --model "$FIX/llm/tiny.gguf" --prompt "the quantize is naïve" 2>/dev/null)" ]'

# --- damaged directories: one line naming the file at fault
cp -r "$T/hf-qwen2" "$T/bad1"; rm "$T/bad1/model-00002-of-00003.safetensors"
fails "missing shard" 1 "$QS" llm logits --model "$T/bad1" --prompt-ids 1 -o "$T/x.npy"
check "missing shard: named" 'grep -q "bad1/model-00002-of-00003.safetensors: cannot open" "$T/err" && [ "$(wc -l < "$T/err")" = 1 ]'
cp -r "$T/hf-qwen2" "$T/bad2"; sed -i 's/"model-00001-of-00003.safetensors"/"..\/..\/etc\/passwd"/' "$T/bad2/model.safetensors.index.json"
fails "index pointing outside the directory" 1 "$QS" llm logits --model "$T/bad2" --prompt-ids 1 -o "$T/x.npy"
check "outside: index named" 'grep -q "bad2/model.safetensors.index.json: weight_map" "$T/err"'
cp -r "$T/hf-llama" "$T/bad3"; sed -i 's/"hidden_size": 64/"hidden_size": 65/' "$T/bad3/config.json"
fails "config inconsistent with the heads" 1 "$QS" llm logits --model "$T/bad3" --prompt-ids 1 -o "$T/x.npy"
check "config: named" 'grep -q "bad3/config.json: " "$T/err"'
cp -r "$T/hf-llama" "$T/bad4"; sed -i 's/"num_hidden_layers": 2/"num_hidden_layers": 2000/' "$T/bad4/config.json"
fails "config claiming far more parameters than the files hold" 1 "$QS" llm logits --model "$T/bad4" --prompt-ids 1 -o "$T/x.npy"
check "claims: refused before allocating" 'grep -q "more than the file holds" "$T/err"'
cp -r "$T/hf-llama" "$T/bad5"; head -c 3000 "$T/hf-llama/model.safetensors" > "$T/bad5/model.safetensors"
fails "truncated safetensors" 1 "$QS" llm logits --model "$T/bad5" --prompt-ids 1 -o "$T/x.npy"
check "truncated: file named" 'grep -q "bad5/model.safetensors: " "$T/err"'
cp -r "$T/hf-llama" "$T/bad6"; printf '{"model": {"type": "BPE", "vocab": {"a": 999}}}' > "$T/bad6/tokenizer.json"
fails "tokenizer id outside the vocabulary" 1 "$QS" llm logits --model "$T/bad6" --prompt-ids 1 -o "$T/x.npy"
check "tokenizer: named" 'grep -q "bad6/tokenizer.json: vocabulary entry" "$T/err"'
$PY "$ROOT/tests/llm/make_tiny_gguf.py" --variant qwen2-hd24 "$T/vd.gguf"
$PY - "$T/vd.gguf" <<'PY'
import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read())
k = b"qwen2.attention.value_length"; i = b.index(k) + len(k) + 4   # after the key and its u32 type
b[i:i + 4] = (16).to_bytes(4, "little"); open(p, "wb").write(b)
PY
refuses "value head size != key head size refused" 1 "vd.gguf: value head size 16 != key head size 24" \
  "$QS" llm logits --model "$T/vd.gguf" --prompt-ids 1 -o "$T/x.npy"
cp -r "$T/hf-llama" "$T/bad7"; sed -i 's/"rope_scaling": null/"rope_scaling": {"type": "llama3"}/' "$T/bad7/config.json"
fails "rope_scaling refused" 1 "$QS" llm logits --model "$T/bad7" --prompt-ids 1 -o "$T/x.npy"
mkdir "$T/empty"
fails "directory without config.json" 1 "$QS" llm logits --model "$T/empty" --prompt-ids 1 -o "$T/x.npy"
check "no config: named" 'grep -q "empty/config.json: cannot open" "$T/err"'
cp -r "$T/hf-qwen2" "$T/bad8"; sed -i 's/"rope_scaling": null/"use_sliding_window": true, "rope_scaling": null/' "$T/bad8/config.json"
fails "sliding-window attention refused" 1 "$QS" llm logits --model "$T/bad8" --prompt-ids 1 -o "$T/x.npy"
check "sliding window: config named" 'grep -q "bad8/config.json: sliding-window attention is not supported" "$T/err"'

# --- the index's weight_map decides which shard a tensor comes from (issue 24 #8)
# shard 2 also carries a (different) copy of a tensor that shard 1 holds and the index maps to shard 1
cp -r "$T/hf-qwen2" "$T/dup"
$PY - "$T/dup" <<'PY'
import json, struct, sys
d = sys.argv[1]
def read(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]
h1, b1 = read(d + "/model-00001-of-00003.safetensors")
h2, b2 = read(d + "/model-00002-of-00003.safetensors")
name = next(k for k in h1 if k != "__metadata__")
s, e = h1[name]["data_offsets"]
h2[name] = dict(h1[name], data_offsets=[len(b2), len(b2) + e - s])
b2 = b2 + bytes(x ^ 0x40 for x in b1[s:e])
h = json.dumps(h2).encode(); h += b" " * ((-len(h)) % 8)
open(d + "/model-00002-of-00003.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b2)
PY
refuses "tensor in two shards refused" 1 "dup/model-00002-of-00003.safetensors: tensor '.*' is also in model-00001-of-00003.safetensors" \
  "$QS" llm logits --model "$T/dup" --prompt-ids 1 -o "$T/x.npy"
check "two shards: one line" '[ "$(wc -l < "$T/err")" = 1 ]'
# the index maps a tensor to a shard that does not hold it
cp -r "$T/hf-qwen2" "$T/mismap"
$PY - "$T/mismap/model.safetensors.index.json" <<'PY'
import json, sys
p = sys.argv[1]; j = json.load(open(p)); wm = j["weight_map"]
k = next(k for k, v in wm.items() if v.startswith("model-00001"))
wm[k] = "model-00003-of-00003.safetensors"
json.dump(j, open(p, "w"))
PY
refuses "tensor missing from its mapped shard refused" 1 "mismap/model-00003-of-00003.safetensors: holds no tensor '.*' \(model.safetensors.index.json maps it there\)" \
  "$QS" llm logits --model "$T/mismap" --prompt-ids 1 -o "$T/x.npy"

# --- a FIFO (or other non-regular file) in place of a model file is refused, not opened blocking (issue 24 #4)
cp -r "$T/hf-qwen2" "$T/fifo1"; rm "$T/fifo1/config.json"; mkfifo "$T/fifo1/config.json"
refuses "FIFO as config.json refused" 1 "fifo1/config.json: not a regular file" \
  timeout 10 "$QS" llm logits --model "$T/fifo1" --prompt-ids 1 -o "$T/x.npy"
cp -r "$T/hf-qwen2" "$T/fifo2"; rm "$T/fifo2/model-00002-of-00003.safetensors"; mkfifo "$T/fifo2/model-00002-of-00003.safetensors"
refuses "FIFO as a shard refused" 1 "fifo2/model-00002-of-00003.safetensors: not a regular file" \
  timeout 10 "$QS" llm logits --model "$T/fifo2" --prompt-ids 1 -o "$T/x.npy"
cp -r "$T/hf-llama" "$T/fifo3"; rm "$T/fifo3/tokenizer.json"; mkfifo "$T/fifo3/tokenizer.json"
refuses "FIFO as tokenizer.json refused" 1 "fifo3/tokenizer.json: not a regular file" \
  timeout 10 "$QS" llm logits --model "$T/fifo3" --prompt-ids 1 -o "$T/x.npy"
mkfifo "$T/fifo.gguf"
refuses "FIFO as a GGUF model refused" 1 "fifo.gguf: not a regular file" \
  timeout 10 "$QS" llm logits --model "$T/fifo.gguf" --prompt-ids 1 -o "$T/x.npy"
mkfifo "$T/fifo.txt"
refuses "FIFO as llm eval --text refused" 1 "fifo.txt: not a regular file" \
  timeout 10 "$QS" llm eval --model "$FIX/llm/tiny.gguf" --text "$T/fifo.txt" --ctx 64

# --- a model file that shrinks during the load: its path is named once (issue 24 #12)
cp "$FIX/llm/tiny.gguf" "$T/shrink.gguf"
QSCOPE_TEST_FILE_HOOK=shrink@3 "$QS" llm logits --model "$T/shrink.gguf" --prompt-ids 1 -o "$T/x.npy" 2>"$T/err"
check "gguf shrinking during the load: path named once" \
  '[ "$(grep -o "shrink.gguf" "$T/err" | wc -l)" = 1 ] && grep -q "shrank while it was being read" "$T/err"'
cp -r "$T/hf-llama" "$T/shrinkdir"
QSCOPE_TEST_FILE_HOOK=shrink@3 "$QS" llm logits --model "$T/shrinkdir" --prompt-ids 1 -o "$T/x.npy" 2>"$T/err"
check "hf shard shrinking during the load: one path, the shard's" \
  '[ "$(grep -o "shrinkdir" "$T/err" | wc -l)" = 1 ] && grep -q "shrinkdir/model.safetensors: .*shrank" "$T/err"'
done_testing
