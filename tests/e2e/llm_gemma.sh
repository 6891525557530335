#!/usr/bin/env bash
# Gemma 2 and Gemma 3 (kernels/llm_gemma.c, store/llm_arch_gemma.c): generated tiny models in GGUF form
# (tests/llm/make_tiny_gguf.py: norms as llama.cpp's converter stores them, w + 1) and Hugging Face form
# (make_tiny_hf.py: Gemma's (1 + w) norms, sandwich-norm names, config.json keys), logits against the
# independent float64 forward tests/llm/torch_ref.py (GeGLU, embedding scale, sandwich norms, soft-caps,
# query_pre_attn_scalar, sliding-window layers, per-layer RoPE base and linear scaling, QK-norm);
# refusals (training, unsupported Gemma keys); with `make data` and llama.cpp's llama-perplexity
# (QS_LLAMA_PERPLEXITY, or under LLAMA_BUILD), Gemma-3 270M's perplexity against llama.cpp's.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
$PY -c "import numpy" 2>/dev/null || skip_all "python3-numpy not installed"
IDS=$(cat "$FIX/llm/tiny_ids.txt")

for v in gemma2 gemma3 gemma3-plain; do
  $PY "$ROOT/tests/llm/make_tiny_gguf.py" --variant $v "$T/$v.gguf"
  ok "gguf $v: logits" "$QS" llm logits --model "$T/$v.gguf" --prompt-ids "$IDS" -o "$T/$v.npy"
  ok "gguf $v: agrees with the float64 reference to 1e-4" $PY "$ROOT/tests/llm/torch_ref.py" "$T/$v.gguf" "$IDS" "$T/$v.npy" 1e-4
done
for v in gemma2 gemma3; do
  $PY "$ROOT/tests/llm/make_tiny_hf.py" $v "$T/hf-$v"
  ok "hf $v: logits" "$QS" llm logits --model "$T/hf-$v" --prompt-ids "$IDS" -o "$T/hf-$v.npy"
  ok "hf $v: agrees with the float64 reference ((1 + w) norms) to 1e-4" $PY "$ROOT/tests/llm/torch_ref.py" "$T/hf-$v" "$IDS" "$T/hf-$v.npy" 1e-4
done
# transformers 5 spells the RoPE of Gemma 3 as rope_parameters per attention type: the same model
cp -r "$T/hf-gemma3" "$T/hf-g3-rp"
$PY - "$T/hf-g3-rp/config.json" <<'PY'
import json, sys
p = sys.argv[1]; c = json.load(open(p))
full = dict(rope_theta=c.pop("rope_theta"), **c.pop("rope_scaling"))
c["rope_parameters"] = {"full_attention": full, "sliding_attention": {"rope_type": "default", "rope_theta": c.pop("rope_local_base_freq")}}
json.dump(c, open(p, "w"))
PY
ok "hf gemma3 with rope_parameters: logits" "$QS" llm logits --model "$T/hf-g3-rp" --prompt-ids "$IDS" -o "$T/rp.npy"
check "...equal those of rope_theta / rope_local_base_freq / rope_scaling" "cmp -s '$T/rp.npy' '$T/hf-gemma3.npy'"
# the same checkpoint with GGUF-form norms (w + 1 stored, read as (1 + w)) must not agree: the form matters
cp -r "$T/hf-gemma2" "$T/hf-g2-plus1"
$PY - "$T/hf-g2-plus1/model.safetensors" <<'PY'
import json, struct, sys
import numpy as np
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); n, = struct.unpack_from("<Q", b, 0); h = json.loads(b[8:8 + n])
for k, d in h.items():
    if k != "__metadata__" and k.endswith("norm.weight"):
        s, e = d["data_offsets"]; a = np.frombuffer(bytes(b[8 + n + s:8 + n + e]), "<f4") + 1
        b[8 + n + s:8 + n + e] = a.astype("<f4").tobytes()
open(p, "wb").write(bytes(b))
PY
ok "hf gemma2 with w + 1 stored: logits" "$QS" llm logits --model "$T/hf-g2-plus1" --prompt-ids "$IDS" -o "$T/p1.npy"
check "...differ from the reference's (the loader adds the 1 itself)" "! $PY '$ROOT/tests/llm/torch_ref.py' '$T/hf-gemma2' '$IDS' '$T/p1.npy' 1e-3 >/dev/null"

for i in $(seq 40); do echo "the quantize is the system user $i, and the assistant's answer is here."; done > "$T/text.txt"
ok "gemma3: eval with activation and weight formats runs" "$QS" llm eval --model "$T/gemma3.gguf" --text "$T/text.txt" \
  --ctx 32 --chunks 2 --config a=mxfp4 --config w=q4_k,kv=fp8_e4m3
ok "gemma2: generate runs (the forward pass, KV cache position by position)" "$QS" llm generate --model "$T/gemma2.gguf" \
  --prompt-ids 1,40,41 --tokens 8 --seqs 1
refuses "train --init of a Gemma model is refused in one line" 1 "^qscope: training runs the Llama block only: Gemma's" \
  "$QS" train --init "$T/gemma2.gguf" --text "$T/text.txt" --val-text "$T/text.txt" --steps 1 --no-store --out "$T/tr"
check "...in one line" '[ "$(wc -l < "$T/err")" = 1 ]'
refuses "rl grpo on a Gemma model is refused in one line" 1 "^qscope: training runs the Llama block only" \
  "$QS" rl grpo --model "$T/gemma2.gguf" --steps 1

# unsupported Gemma keys: one line naming config.json
cp -r "$T/hf-gemma3" "$T/bad1"; sed -i 's/"rope_type": "linear"/"rope_type": "yarn"/' "$T/bad1/config.json"
refuses "gemma3 rope_scaling other than linear" 1 "bad1/config.json: \"rope_scaling\" other than linear" \
  "$QS" llm logits --model "$T/bad1" --prompt-ids 1 -o "$T/x.npy"
cp -r "$T/hf-gemma2" "$T/bad2"; sed -i 's/"hidden_activation": "gelu_pytorch_tanh"/"hidden_activation": "relu"/' "$T/bad2/config.json"
refuses "gemma2 activation other than gelu_pytorch_tanh" 1 "bad2/config.json: hidden_activation 'relu' is not supported" \
  "$QS" llm logits --model "$T/bad2" --prompt-ids 1 -o "$T/x.npy"
cp -r "$T/hf-gemma3" "$T/bad3"
$PY - "$T/bad3/config.json" <<'PY'
import json, sys
p = sys.argv[1]; c = json.load(open(p)); c["layer_types"][1] = "full_attention"; json.dump(c, open(p, "w"))
PY
refuses "gemma3 layer_types without a period" 1 "bad3/config.json: \"layer_types\" is not a periodic pattern" \
  "$QS" llm logits --model "$T/bad3" --prompt-ids 1 -o "$T/x.npy"
cp -r "$T/hf-gemma2" "$T/bad4"
sed -i 's/"query_pre_attn_scalar": 32/"query_pre_attn_scalar": "x"/' "$T/bad4/config.json"
refuses "gemma2 query_pre_attn_scalar not a number" 1 "bad4/config.json: query_pre_attn_scalar is not a number" \
  "$QS" llm logits --model "$T/bad4" --prompt-ids 1 -o "$T/x.npy"

# ---- the real model: Gemma-3 270M (make data) against llama.cpp's llama-perplexity -----------------
REAL="$ROOT/data/models/gemma-3-270m-q4_k_m.gguf"
TEXT="$ROOT/data/text/persuasion.txt"
LP=${QS_LLAMA_PERPLEXITY:-}
[ -n "$LP" ] || LP=$(find "${LLAMA_BUILD:-$ROOT/build/llama-peer}" -name llama-perplexity -type f -perm -u+x 2>/dev/null | head -1)
if [ ! -s "$REAL" ] || [ ! -s "$TEXT" ]; then
  skip "Gemma-3 270M: PPL on Persuasion agrees with llama-perplexity" "data: ${REAL#$ROOT/} or ${TEXT#$ROOT/} not fetched (make data)"
elif [ -z "$LP" ] || [ ! -x "$LP" ]; then
  skip "Gemma-3 270M: PPL on Persuasion agrees with llama-perplexity" "data: llama-perplexity not built (QS_LLAMA_PERPLEXITY, or LLAMA_BUILD; tests/bench/llama_peer.sh builds it)"
else
  export LD_LIBRARY_PATH="$(dirname "$LP")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  ok "Gemma-3 270M: llm eval, 4 chunks of 512 (and activations rounded to Q8_0)" "$QS" llm eval --model "$REAL" \
    --text "$TEXT" --ctx 512 --chunks 4 --config a=q8_0 --json
  cp "$T/out" "$T/qs.json"
  ok "llama-perplexity on the same text, ctx and chunks" "$LP" -m "$REAL" -f "$TEXT" -c 512 --chunks 4 -t 2
  cp "$T/err" "$T/lp.log"; cat "$T/out" >> "$T/lp.log"
  # Tolerances from llama.cpp's own arithmetic: it multiplies the Q5_0/Q8_0 weights with activations
  # rounded to Q8_0 (and Q4_K/Q6_K with Q8_K), qscope's reference with FP32 ones.  Measured on these 4
  # chunks: llama.cpp 36.0142, qscope's FP32 reference 35.8756 (-0.39%), qscope with a=q8_0 36.0241
  # (+0.03%; a=q8_0 moves qscope's PPL by +0.41%, a=q8_k by +1.25%).  So: the reference within 1%
  # (what rounding the activations as llama.cpp does can move), a=q8_0 within 0.3%.
  check "Gemma-3 270M: PPL within 1% of llama-perplexity's, with a=q8_0 within 0.3%" "$PY - '$T/qs.json' '$T/lp.log' <<'PY'
import json, re, sys
q = json.load(open(sys.argv[1]))
ref, q8 = q['reference']['ppl'], q['configs'][0]['ppl']
lp = float(re.findall(r'Final estimate: PPL = ([0-9.]+)', open(sys.argv[2]).read())[-1])
print('# llama.cpp %.4f, qscope %.4f (%+.2f%%), a=q8_0 %.4f (%+.2f%%)' % (lp, ref, 100 * (ref / lp - 1), q8, 100 * (q8 / lp - 1)))
sys.exit(0 if abs(ref / lp - 1) < 0.01 and abs(q8 / lp - 1) < 0.003 else 1)
PY"
fi
done_testing
