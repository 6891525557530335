#!/usr/bin/env bash
# llm eval's transforms rot= (QuaRot's rotation folded into the weights, online Hadamard before
# down_proj) and rht=16 (the NVFP4 recipe's random Hadamard transform of both GEMM operands): on
# generated tiny models (tied and untied, Q/K/V biases, head_dim != dim/heads) the transformed FP32
# model is the reference (KL ~0, same top token); labels and stored keys carry the transform and its
# seed, stored results are reused, keys without a transform keep their old form; widths no Hadamard
# construction covers, bad specs and the commands that do not support the keys are refused in one
# line.  On SmolLM2 (data/): rot=hadamard lowers the KL of w=mxfp4,a=mxfp4.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
jq_() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }
python3 - "$T/text.txt" <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(70)) + "\n")
PY
X=(--config rot=hadamard --config rot=hadamard:seed=3 --config rot=random:seed=2 --config rht=16 --config rot=hadamard:seed=1,rht=16:seed=5)
MODELS="$FIX/llm/tiny.gguf"
if $PY -c "import numpy" 2>/dev/null; then
  for v in f32 qwen2-f32 qwen2-hd24; do
    $PY "$ROOT/tests/llm/make_tiny_gguf.py" --variant $v "$T/$v.gguf"; MODELS="$MODELS $T/$v.gguf"
  done
else
  skip "generated f32, qwen2 and head_dim-24 models" "python3-numpy not installed"
fi
for m in $MODELS; do
  b=$(basename "$m" .gguf)
  ok "$b: reference and 5 transforms" "$QS" llm eval --model "$m" --text "$T/text.txt" --ctx 64 --chunks 3 "${X[@]}" --json
  check "$b: every transform computes the reference's function (KL max < 1e-6, same top token)" \
    '[ "$(jq_ "$T/out" "all(c[\"kl_max\"] < 1e-6 and c[\"top1_agree\"] == 1 for c in d[\"configs\"]) and len(d[\"configs\"]) == 5")" = True ]'
done

# labels, stored keys, reuse
E=(llm eval --model "$FIX/llm/tiny.gguf" --text "$T/text.txt" --ctx 64 --chunks 3)
ok "formats with and without transforms" "$QS" "${E[@]}" --config w=mxfp4,a=mxfp4 --config w=mxfp4,a=mxfp4,rot=hadamard:seed=3 \
  --config w=mxfp4,a=mxfp4,rht=16 --config a=nvfp4,kv=fp8_e4m3,rot=random,rht=16:seed=2 --json
cp "$T/out" "$T/f.json"
check "labels carry the transform and its seed" \
  '[ "$(jq_ "$T/f.json" "\";\".join(c[\"label\"] for c in d[\"configs\"])")" = "w=mxfp4,a=mxfp4;w=mxfp4,a=mxfp4,rot=hadamard:seed=3;w=mxfp4,a=mxfp4,rht=16;a=nvfp4,kv=fp8_e4m3,rot=random:seed=0,rht=16:seed=2" ]'
check "stored keys carry it (and only where set: older keys stay valid)" \
  '[ "$(jq_ "$T/f.json" "[c[\"numerics\"].get(\"transform\") for c in d[\"configs\"]]")" = "[None, {'"'"'rot'"'"': '"'"'hadamard:seed=3'"'"'}, {'"'"'rht'"'"': '"'"'16'"'"'}, {'"'"'rot'"'"': '"'"'random:seed=0'"'"', '"'"'rht'"'"': '"'"'16:seed=2'"'"'}]" ]'
check "the transforms change what the formats see" \
  '[ "$(jq_ "$T/f.json" "len(set(c[\"kl_mean\"] for c in d[\"configs\"][:3])) == 3 and all(c[\"kl_mean\"] > 0 for c in d[\"configs\"])")" = True ]'
ok "again" "$QS" "${E[@]}" --config w=mxfp4,a=mxfp4,rot=hadamard:seed=3 --config w=mxfp4,a=mxfp4,rot=hadamard:seed=4 --json
check "the same transform is reused, another seed computed" \
  '[ "$(jq_ "$T/out" "[c[\"cached\"] for c in d[\"configs\"]]")" = "[True, False]" ] && [ "$(jq_ "$T/out" "d[\"configs\"][0][\"kl_mean\"]")" = "$(jq_ "$T/f.json" "d[\"configs\"][1][\"kl_mean\"]")" ]'
ok "rot=none, rht=none are no transform" "$QS" "${E[@]}" --config a=mxfp4,rot=none,rht=none --json
check "rot=none: the plain configuration's label and key" \
  '[ "$(jq_ "$T/out" "(d[\"configs\"][0][\"label\"], \"transform\" in d[\"configs\"][0][\"numerics\"])")" = "('"'"'a=mxfp4'"'"', False)" ]'

# refusals: one line, nothing stored
if [ -n "$(ls "$T"/f32.gguf 2>/dev/null)" ]; then
  $PY - "$ROOT/tests/llm" "$T/w100.gguf" <<'PY'
import sys; sys.path.insert(0, sys.argv[1]); import make_tiny_gguf as m; import gguf_io as g
m.build(sys.argv[2], True, 31, nl=1, dim=48, ffn=100, lin=g.GGML_F32, emb=g.GGML_F32)
PY
  refuses "an FFN width no construction covers (100)" 1 "^qscope: rot: FFN width \(down=0 drops the online Hadamard\): no Hadamard matrix of order 100 " \
    "$QS" llm eval --model "$T/w100.gguf" --text "$T/text.txt" --ctx 64 --chunks 1 --config rot=hadamard
  check "one line" '[ "$(wc -l < "$T/err")" = 1 ]'
  ok "down=0 leaves the FFN width alone" "$QS" llm eval --model "$T/w100.gguf" --text "$T/text.txt" --ctx 64 --chunks 1 --config rot=hadamard:down=0 --json
  check "down=0: still the reference's function" '[ "$(jq_ "$T/out" "d[\"configs\"][0][\"kl_max\"] < 1e-6")" = True ]'
  refuses "rht=16 on widths not multiples of 16" 1 "rht=16: a linear layer's input width \(dim 48, heads x head_dim 48, ffn 100\) is not a multiple of 16" \
    "$QS" llm eval --model "$T/w100.gguf" --text "$T/text.txt" --ctx 64 --chunks 1 --config rht=16
else
  skip "widths no construction covers" "python3-numpy not installed"
fi
refuses "unknown rotation" 2 "rot=walsh: not a rotation" "$QS" "${E[@]}" --config rot=walsh
refuses "rot given twice" 2 "rot given twice" "$QS" "${E[@]}" --config rot=hadamard,rot=random
refuses "rht other than 16" 2 "rht=32: only the 16-point" "$QS" "${E[@]}" --config rht=32
refuses "bad seed" 2 "'-3' is not a valid value of seed" "$QS" "${E[@]}" --config rot=hadamard:seed=-3
refuses "rl grpo rollouts refuse them" 2 "--rollout: rot= and rht= are supported by llm eval only" \
  "$QS" rl grpo --model "$FIX/llm/tiny.gguf" --rollout w=mxfp4,rot=hadamard
refuses "bench eval refuses them" 2 "rot= and rht= are supported by llm eval only" \
  "$QS" bench eval --model "$FIX/llm/tiny.gguf" --text "$T/text.txt" --ctx 64 --chunks 2 --config rht=16
refuses "train has no such operand" 2 "unknown operand 'rot'" "$QS" train --op rot=hadamard --steps 1

# SmolLM2: the rotation lowers W4A4 MXFP4's KL (measured: docs/llm.md)
REAL="$ROOT/data/models/SmolLM2-135M-Instruct.Q4_1.gguf" NOVEL="$ROOT/data/text/persuasion.txt"
if [ -s "$REAL" ] && [ -s "$NOVEL" ]; then
  ok "SmolLM2: w=mxfp4,a=mxfp4 without and with rot=hadamard" "$QS" llm eval --model "$REAL" --text "$NOVEL" --ctx 256 --chunks 2 \
    --config w=mxfp4,a=mxfp4 --config w=mxfp4,a=mxfp4,rot=hadamard --json
  echo "# SmolLM2 KL mean: $(jq_ "$T/out" "' vs '.join('%s %.4f' % (c['label'], c['kl_mean']) for c in d['configs'])")"
  check "SmolLM2: rot=hadamard lowers the KL" '[ "$(jq_ "$T/out" "d[\"configs\"][1][\"kl_mean\"] < d[\"configs\"][0][\"kl_mean\"]")" = True ]'
else
  skip "SmolLM2: rot=hadamard lowers the KL of w=mxfp4,a=mxfp4" "data: no data/models/SmolLM2-135M-Instruct.Q4_1.gguf or data/text/persuasion.txt (make data)"
fi
done_testing
