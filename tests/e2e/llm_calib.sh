#!/usr/bin/env bash
# llm eval's calibration transforms (smooth=, w=F:gptq, w=F:awq with --calib FILE) on the committed
# tiny GGUF model: labels and stored keys name the transform and the calibration text's hash, results
# are reused, FP32 smoothing leaves the model's output unchanged, GPTQ lowers KL below plain rounding;
# the refusals; and on SmolLM2 (data/) the KL of MXFP4 weights with and without each.
source "$(dirname "$0")/lib.sh"
TINY="$FIX/llm/tiny.gguf"
jq_() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }
q() { sqlite3 "$QSCOPE_DB" "$1"; }

python3 - "$T" <<'PY'
import random, sys
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
for seed, name in ((7, "text.txt"), (8, "calib.txt")):
    random.seed(seed)
    open(sys.argv[1] + "/" + name, "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(70)) + "\n")
PY
cp "$T/text.txt" "$T/same.txt"
head -c 30 "$T/calib.txt" > "$T/short.txt"   # < 64 tiny-model tokens
E=("$QS" llm eval --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 6)

ok "eval: plain, gptq, gptq act-order, awq, smooth, smooth+a" "${E[@]}" --calib "$T/calib.txt" --calib-chunks 4 --json \
  --config w=mxfp4 --config w=mxfp4:gptq --config w=mxfp4:gptq:act-order --config w=mxfp4:awq --config smooth=0.5 \
  --config smooth=0.5:norm,a=mxfp4 --config w=q4_k:gptq:damp=0.05:gblock=32 --config w=nvfp4:awq:grid=10
cp "$T/out" "$T/e1.json"
check "labels name the transform, its options and the calibration hash" \
  '[ "$(jq_ "$T/e1.json" "\";\".join(c[\"label\"].split(\",calib=\")[0] for c in d[\"configs\"])")" = "w=mxfp4;w=mxfp4:gptq;w=mxfp4:gptq:act-order;w=mxfp4:awq;smooth=0.5;smooth=0.5:norm,a=mxfp4;w=q4_k:gptq:damp=0.05:gblock=32;w=nvfp4:awq:grid=10" ] && [ "$(jq_ "$T/e1.json" "len(set(c[\"label\"].split(\",calib=\")[1] for c in d[\"configs\"][1:]))")" = 1 ]'
check "the stored key holds the transform and the full calibration hash, ctx and chunks" \
  '[ "$(jq_ "$T/e1.json" "(lambda t: (t[\"gptq\"][\"damp\"], t[\"gptq\"][\"act_order\"], t[\"gptq\"][\"block\"], len(t[\"calib\"][\"text\"]), t[\"calib\"][\"ctx\"], t[\"calib\"][\"chunks\"]))(d[\"configs\"][2][\"numerics\"][\"transform\"])")" = "(0.01, True, 128, 32, 64, 4)" ] && [ "$(jq_ "$T/e1.json" "\"transform\" in d[\"configs\"][0][\"numerics\"]")" = False ]'
check "FP32 smoothing: the same output (KL max < 1e-6, same top token)" \
  '[ "$(jq_ "$T/e1.json" "(lambda c: c[\"kl_max\"] < 1e-6 and c[\"top1_agree\"] == 1)(d[\"configs\"][4])")" = True ]'
check "GPTQ lowers KL below plain rounding (mxfp4, with and without act-order)" \
  '[ "$(jq_ "$T/e1.json" "d[\"configs\"][1][\"kl_mean\"] < d[\"configs\"][0][\"kl_mean\"] and d[\"configs\"][2][\"kl_mean\"] < d[\"configs\"][0][\"kl_mean\"]")" = True ]'
check "AWQ lowers KL below plain rounding on mxfp4" '[ "$(jq_ "$T/e1.json" "d[\"configs\"][3][\"kl_mean\"] < d[\"configs\"][0][\"kl_mean\"]")" = True ]'
ok "the same evaluation again" "${E[@]}" --calib "$T/calib.txt" --calib-chunks 4 --json --config w=mxfp4:gptq --config smooth=0.5
check "reused from the database, the same numbers" \
  '[ "$(jq_ "$T/out" "[c[\"cached\"] for c in d[\"configs\"]]")" = "[True, True]" ] && [ "$(jq_ "$T/out" "d[\"configs\"][0][\"kl_mean\"]")" = "$(jq_ "$T/e1.json" "d[\"configs\"][1][\"kl_mean\"]")" ]'
ok "the table names the calibration text" "${E[@]}" --calib "$T/calib.txt" --calib-chunks 4 --config w=mxfp4:gptq
check "header: calibration text, its tokens, chunks and hash" 'grep -qE "^calibration text .*calib.txt: [0-9]+ tokens, 4 chunks of 64 from the FP32 reference \(xxh3 [0-9a-f]{8}\)" "$T/out"'
ok "another calibration size is another result" "${E[@]}" --calib "$T/calib.txt" --calib-chunks 3 --json --config w=mxfp4:gptq
check "computed anew" '[ "$(jq_ "$T/out" "d[\"configs\"][0][\"cached\"]")" = False ]'

n0=$(q "SELECT count(*) FROM result")
refuses "the evaluation text as calibration text" 2 "same content" "${E[@]}" --calib "$T/same.txt" --config w=mxfp4:gptq
refuses "a transform without --calib" 2 "needs a calibration text" "${E[@]}" --config smooth=0.5
refuses "--calib without a transform" 2 "no configuration uses it" "${E[@]}" --calib "$T/calib.txt" --config w=mxfp4
refuses "a calibration text shorter than a chunk" 2 "shorter than one calibration chunk" "${E[@]}" --calib "$T/short.txt" --config w=mxfp4:awq
refuses "a missing calibration text" 1 "nope.txt" "${E[@]}" --calib "$T/nope.txt" --config w=mxfp4:awq
refuses "smooth out of [0, 1]" 2 "migration strength" "${E[@]}" --calib "$T/calib.txt" --config smooth=1.5
refuses "gptq without a weight format" 2 "give a weight format" "${E[@]}" --calib "$T/calib.txt" --config w=fp32:gptq
refuses "gptq and awq together" 2 "one of :gptq and :awq" "${E[@]}" --calib "$T/calib.txt" --config w=mxfp4:gptq:awq
refuses "gptq with rot=" 2 "cannot be combined with rot=, rht= or imatrix=" "${E[@]}" --calib "$T/calib.txt" --config w=mxfp4:gptq,rot=hadamard
refuses "smooth with rht=" 2 "cannot be combined with rot=, rht= or imatrix=" "${E[@]}" --calib "$T/calib.txt" --config smooth=0.5,rht=16
refuses "act-order without gptq" 2 ":act-order follows :gptq" "${E[@]}" --calib "$T/calib.txt" --config w=mxfp4:awq:act-order
refuses "GPTQ on M2XFP (no per-element grid)" 2 "m2xfp4: its metadata refines" "${E[@]}" --calib "$T/calib.txt" --config w=m2xfp4:gptq
refuses "GPTQ with stochastic rounding" 2 "stochastic rounding is refused" "${E[@]}" --calib "$T/calib.txt" --config w=mxfp4:round=sr:gptq
refuses "a transform in bench eval" 2 "are .llm eval. configurations" "$QS" bench eval --model "$TINY" --text "$T/text.txt" --ctx 64 \
  --chunks 2 --reps 2 --config w=mxfp4:gptq
check "refusals left the database unchanged" '[ "$(q "SELECT count(*) FROM result")" = "$n0" ]'

# --- SmolLM2 on Persuasion, Emma as calibration text (KL of MXFP4 weights with and without each)
M="$ROOT/data/models/SmolLM2-135M-Instruct.Q4_1.gguf" P="$ROOT/data/text/persuasion.txt" C="$ROOT/data/text/emma.txt"
if [ -r "$M" ] && [ -r "$P" ] && [ -r "$C" ]; then
  # (each configuration holds a copy of the FP32 model, 0.54 GB, and the capture 0.8 GB of Hessians)
  ok "SmolLM2: mxfp4 weights plain, GPTQ, AWQ" "$QS" llm eval --model "$M" --text "$P" --chunks 2 --calib "$C" --calib-chunks 2 \
    --json --config w=mxfp4 --config w=mxfp4:gptq --config w=mxfp4:awq
  cp "$T/out" "$T/s.json"
  check "SmolLM2: GPTQ and AWQ lower KL below plain MXFP4 rounding" \
    '[ "$(jq_ "$T/s.json" "d[\"configs\"][1][\"kl_mean\"] < d[\"configs\"][0][\"kl_mean\"] and d[\"configs\"][2][\"kl_mean\"] < d[\"configs\"][0][\"kl_mean\"]")" = True ]'
else
  skip "SmolLM2: mxfp4 weights plain, GPTQ, AWQ" "data: no SmolLM2 GGUF or Austen novels (make data)"
  skip "SmolLM2: GPTQ and AWQ below plain" "data: absent"
fi
done_testing
