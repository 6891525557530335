#!/usr/bin/env bash
# Model loaders: full-precision GGUF (F32, F16, BF16; llama and qwen2) and Hugging Face safetensors
# directories (single file and sharded, llama and qwen2 with Q/K/V biases and tied embeddings), all
# generated here by tests/llm/make_tiny_gguf.py and make_tiny_hf.py (nothing downloaded, nothing
# committed); logits checked against the independent float64 forward tests/llm/torch_ref.py.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
$PY -c "import numpy" 2>/dev/null || skip_all "python3-numpy not installed"
IDS=$(cat "$FIX/llm/tiny_ids.txt")
for v in f32 f16 bf16 qwen2 qwen2-f32; do
  $PY "$ROOT/tests/llm/make_tiny_gguf.py" --variant $v "$T/$v.gguf"
  ok "gguf $v: logits" "$QS" llm logits --model "$T/$v.gguf" --prompt-ids "$IDS" -o "$T/$v.npy"
  ok "gguf $v: agrees with the float64 reference to 1e-4" $PY "$ROOT/tests/llm/torch_ref.py" "$T/$v.gguf" "$IDS" "$T/$v.npy" 1e-4
done
check "bf16 gguf: loaded as bf16 weights" '"$QS" llm logits --model "$T/bf16.gguf" --prompt-ids 1 -o "$T/x.npy" 2>&1 | grep -q "bf16 x16"'
for v in llama llama-sh qwen2; do
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
cp -r "$T/hf-llama" "$T/bad7"; sed -i 's/"rope_scaling": null/"rope_scaling": {"type": "llama3"}/' "$T/bad7/config.json"
fails "rope_scaling refused" 1 "$QS" llm logits --model "$T/bad7" --prompt-ids 1 -o "$T/x.npy"
mkdir "$T/empty"
fails "directory without config.json" 1 "$QS" llm logits --model "$T/empty" --prompt-ids 1 -o "$T/x.npy"
check "no config: named" 'grep -q "empty/config.json: cannot open" "$T/err"'
cp -r "$T/hf-qwen2" "$T/bad8"; sed -i 's/"rope_scaling": null/"use_sliding_window": true, "rope_scaling": null/' "$T/bad8/config.json"
fails "sliding-window attention refused" 1 "$QS" llm logits --model "$T/bad8" --prompt-ids 1 -o "$T/x.npy"
check "sliding window: config named" 'grep -q "bad8/config.json: sliding-window attention is not supported" "$T/err"'
done_testing
