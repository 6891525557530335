#!/usr/bin/env bash
# Model loaders: full-precision GGUF (F32, F16, BF16; llama and qwen2) and Hugging Face safetensors
# directories (single file and sharded, llama and qwen2 with Q/K/V biases and tied embeddings), all
# generated here by tests/llm/make_tiny_gguf.py and make_tiny_hf.py (nothing downloaded, nothing
# committed); logits checked against the independent float64 forward tests/llm/torch_ref.py, also for a
# head_dim other than dim / heads.  Model families (docs/llm.md): Qwen3, Llama 3, Mistral, Mixtral,
# Qwen2-MoE and Qwen3-MoE in both forms, each against the reference on the many-row and the few-row
# paths, evaluated under w=mxfp4, and refused by training.  Then damaged directories, the index's weight_map, FIFOs in place of
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

# --- model families through the architecture table (docs/llm.md): GGUF and Hugging Face forms of each,
# C logits against torch_ref.py on 20 positions (prefill tiles) and 7 (few-row products, attention loop),
# then llm eval with the weights in MXFP4 (every expert matrix rounded too)
python3 - "$T/text.txt" <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(70)) + "\n")
PY
SHORT=$(echo "$IDS" | cut -d, -f1-7)
for v in qwen3 llama3 mistral mixtral qwen2moe qwen3moe; do
  $PY "$ROOT/tests/llm/make_tiny_gguf.py" --variant $v "$T/$v.gguf"
  $PY "$ROOT/tests/llm/make_tiny_hf.py" $v "$T/hf-$v"
  for m in "$T/$v.gguf" "$T/hf-$v"; do
    n=$(basename "$m")
    ok "$n: logits" "$QS" llm logits --model "$m" --prompt-ids "$IDS" -o "$T/$n.npy"
    ok "$n: agrees with the float64 reference to 1e-4" $PY "$ROOT/tests/llm/torch_ref.py" "$m" "$IDS" "$T/$n.npy" 1e-4
    ok "$n: logits of 7 positions" "$QS" llm logits --model "$m" --prompt-ids "$SHORT" -o "$T/$n-s.npy"
    ok "$n: 7 positions agree with the reference to 1e-4" $PY "$ROOT/tests/llm/torch_ref.py" "$m" "$SHORT" "$T/$n-s.npy" 1e-4
    ok "$n: llm eval w=mxfp4" "$QS" llm eval --model "$m" --text "$T/text.txt" --ctx 32 --chunks 2 --config w=mxfp4 --json
    check "$n: w=mxfp4 moves the distribution (0 < KL < 10, finite)" \
      "$PY -c 'import json,sys; c=json.load(open(sys.argv[1]))[\"configs\"][0]; print(c[\"kl_mean\"]); sys.exit(not 0 < c[\"kl_mean\"] < 10)' $T/out"
  done
done
check "mistral: the sliding window (5) matters at 20 positions (logits differ from a window-less run)" \
  "$PY - $T <<'PY'
import sys, numpy as np
sys.path.insert(0, '$ROOT/tests/llm'); import torch_ref
hp_load = torch_ref.load
def nowin(p):
    hp, get = hp_load(p); hp['swa'] = 0; return hp, get
torch_ref.load = nowin
ids = [int(t) for t in '$IDS'.split(',')]
ref = torch_ref.forward(sys.argv[1] + '/mistral.gguf', ids)
c = np.load(sys.argv[1] + '/mistral.gguf.npy')
d = np.abs(c - ref).max() / np.abs(ref).max(); print(d); sys.exit(not d > 1e-2)
PY"
TR=(--text "$T/text.txt" --val-text "$T/text.txt" --ctx 16 --batch 2 --steps 1 --val-seqs 1)
refuses "train refuses Qwen3 (QK-norm), naming it" 1 "^qscope: qwen3: training does not run QK-norm \(per-head Q/K RMSNorm\)$" \
  "$QS" train --init "$T/qwen3.gguf" "${TR[@]}" --out "$T/ck1"
refuses "train refuses a mixture of experts" 1 "^qscope: qwen2moe: training does not run mixture-of-experts FFNs$" \
  "$QS" train --init "$T/hf-qwen2moe" "${TR[@]}" --out "$T/ck2"
refuses "train refuses Llama 3 RoPE factors (its checkpoints could not carry them)" 1 "llama: training does not run RoPE frequency factors" \
  "$QS" train --init "$T/llama3.gguf" "${TR[@]}" --out "$T/ck3"
refuses "train refuses a sliding window shorter than its context" 1 "mistral: training does not run sliding-window attention \(window 5 < 16 positions\)" \
  "$QS" train --init "$T/hf-mistral" "${TR[@]}" --out "$T/ck4"
refuses "rl grpo refuses a mixture of experts" 1 "mixtral: training does not run mixture-of-experts FFNs" \
  "$QS" rl grpo --model "$T/hf-mixtral" --prompts 2 --group 2 --max-new 4 --steps 1 --name moe --quiet
ok "llm bench runs on a mixture of experts (expert 0 stands for the FFN in its SGEMM rate)" \
  "$QS" llm bench --model "$T/mixtral.gguf" --eval-ctx 32
ok "bench eval runs on a mixture of experts" "$QS" bench eval --model "$T/qwen2moe.gguf" --text "$T/text.txt" --ctx 32 --chunks 2 --reps 1
refuses "bench rl --sample refuses a mixture of experts (the batched decoder)" 1 \
  "^qscope: llama: the batched decoder \(bench rl --sample\) does not run mixture-of-experts FFNs$" \
  "$QS" bench rl --sample --model "$T/mixtral.gguf" --quick
# rotations (rot=, rht=, kernels/llm_rot*.c) are exact in FP32: they must carry the QK-norm gains, and refuse
# the models whose routers and experts they would not rotate
ok "qwen3: llm eval rot=hadamard and rht=16 without rounding" "$QS" --db "$T/rot.db" llm eval --model "$T/qwen3.gguf" \
  --text "$T/text.txt" --ctx 32 --chunks 2 --config rot=hadamard --config rht=16 --json
check "qwen3: both leave the FP32 model unchanged (|KL| < 1e-6)" \
  "$PY -c 'import json,sys; c=json.load(open(sys.argv[1]))[\"configs\"]; print([x[\"kl_mean\"] for x in c]); sys.exit(not all(abs(x[\"kl_mean\"]) < 1e-6 for x in c))' $T/out"
refuses "rot= refuses a mixture of experts" 1 "^qscope: qwen2moe: rot=/rht= are not supported on mixture-of-experts layers$" \
  "$QS" --db "$T/rot.db" llm eval --model "$T/qwen2moe.gguf" --text "$T/text.txt" --ctx 32 --chunks 2 --config w=mxfp4,rot=hadamard
# calibration transforms (smooth=, :gptq, :awq) fold into and round the dense FFN's matrices: run on Qwen3, refused on experts
tac "$T/text.txt" | rev > "$T/calib.txt"
ok "qwen3: llm eval w=mxfp4:gptq and smooth=0.5 with a calibration text" "$QS" --db "$T/rot.db" llm eval --model "$T/qwen3.gguf" \
  --text "$T/text.txt" --calib "$T/calib.txt" --calib-chunks 1 --ctx 32 --chunks 2 --config w=mxfp4:gptq --config smooth=0.5
refuses "smooth=/gptq refuse a mixture of experts" 1 "mixture-of-experts layers are not supported \(dense FFNs only\)" \
  "$QS" --db "$T/rot.db" llm eval --model "$T/qwen2moe.gguf" --text "$T/text.txt" --calib "$T/calib.txt" --calib-chunks 1 --ctx 32 --chunks 2 --config w=mxfp4:gptq
# --weights mapped runs the Llama block's products on typed weights: Mistral's window runs, Qwen3's QK-norm and experts are refused
ok "mistral: llm eval --weights mapped" "$QS" --db "$T/map.db" llm eval --model "$T/mistral.gguf" --text "$T/text.txt" --ctx 32 --chunks 2 --weights mapped --config w=mxfp4
refuses "--weights mapped refuses Qwen3's QK-norm" 1 "qwen3: --weights mapped runs the Llama/Qwen2/Mistral block only, not QK-norm" \
  "$QS" --db "$T/map.db" llm eval --model "$T/qwen3.gguf" --text "$T/text.txt" --ctx 32 --chunks 2 --weights mapped
refuses "--weights mapped refuses experts" 1 "--weights mapped runs the Llama/Qwen2/Mistral block only, not mixture-of-experts FFNs" \
  "$QS" --db "$T/map.db" llm eval --model "$T/qwen2moe.gguf" --text "$T/text.txt" --ctx 32 --chunks 2 --weights mapped
# importance matrices (llm imatrix, w=F:imatrix=) have no per-expert entries here: refused, not a NULL matrix
refuses "llm imatrix refuses a mixture of experts" 1 "^qscope: qwen2moe: importance matrices of mixture-of-experts layers are not supported$" \
  "$QS" llm imatrix --model "$T/qwen2moe.gguf" --text "$T/text.txt" --ctx 32 --chunks 2 -o "$T/im.gguf"
ok "llm imatrix runs on Qwen3" "$QS" llm imatrix --model "$T/qwen3.gguf" --text "$T/text.txt" --ctx 32 --chunks 2 -o "$T/im3.gguf"
refuses "w=F:imatrix= refuses a mixture of experts" 1 "qwen2moe: importance matrices of mixture-of-experts layers are not supported" \
  "$QS" --db "$T/rot.db" llm eval --model "$T/qwen2moe.gguf" --text "$T/text.txt" --ctx 32 --chunks 2 --config "w=q4_0:imatrix=$T/im3.gguf"
ok "llm sensitivity runs on a mixture of experts (the experts' weights rounded per layer)" \
  "$QS" llm sensitivity --model "$T/qwen2moe.gguf" --text "$T/text.txt" --ctx 32 --chunks 1 --format mxfp4 --sites w,ffn_down_in

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
cp -r "$T/hf-llama" "$T/bad7"; sed -i 's/"rope_scaling": null/"rope_scaling": {"rope_type": "yarn", "factor": 4.0}/' "$T/bad7/config.json"
refuses "rope_scaling other than llama3 / linear refused" 1 "bad7/config.json: \"rope_scaling\" type 'yarn' is not supported \(llama3, linear\)" \
  "$QS" llm logits --model "$T/bad7" --prompt-ids 1 -o "$T/x.npy"
sed -i 's/"rope_type": "yarn", "factor": 4.0/"rope_type": "llama3", "factor": 8.0/' "$T/bad7/config.json"
refuses "rope_scaling llama3 without its frequencies refused" 1 "bad7/config.json: \"rope_scaling\" llama3 needs low_freq_factor" \
  "$QS" llm logits --model "$T/bad7" --prompt-ids 1 -o "$T/x.npy"
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
