#!/usr/bin/env bash
# qscope llm eval on the committed tiny GGUF model: JSON shape, scoring conventions, storage and
# reuse, errors, and the reference perplexity against the independent float64 forward pass
# (tests/llm/torch_ref.py --ppl) when numpy is available.
source "$(dirname "$0")/lib.sh"
TINY="$FIX/llm/tiny.gguf"
q() { sqlite3 "$QSCOPE_DB" "$1"; }
jq_() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }

# a deterministic ASCII text of ~1200 tiny-model tokens
python3 - "$T/text.txt" <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(70)) + "\n")
PY
head -c 100 "$T/text.txt" > "$T/short.txt"   # < 2 x 64 tokens

E=(llm eval --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 6)
ok "eval: reference + 4 configs, --json" "$QS" "${E[@]}" --config a=mxfp4 --config kv=fp8_e4m3 --config w=bf16,a=bf16 --config a=fp32 --json --save-ids "$T/ids.txt"
cp "$T/out" "$T/e1.json"
check "JSON: one object with model, text, tokens, ctx, reference, configs, seconds" \
  '[ "$(jq_ "$T/e1.json" "all(k in d for k in [\"model\",\"text\",\"tokens\",\"ctx\",\"reference\",\"configs\",\"seconds\"]) and d[\"ctx\"] == 64 and len(d[\"configs\"]) == 4")" = True ]'
check "half convention: 6 chunks x 31 scored positions (32..62)" '[ "$(jq_ "$T/e1.json" "d[\"scored_tokens\"], d[\"score\"], d[\"reference\"][\"scored\"]")" = "186 half 186" ]'
check "config fields: label, ppl, kl_mean, kl_median, kl_p99, kl_max, top1_agree, dppl interval" \
  '[ "$(jq_ "$T/e1.json" "all(all(k in c for k in [\"label\",\"ppl\",\"kl_mean\",\"kl_median\",\"kl_p99\",\"kl_max\",\"top1_agree\",\"dp_rms\",\"dppl_rel\",\"dppl_rel_ci95\",\"cor_ln_ppl\",\"kl_hist\"]) for c in d[\"configs\"])")" = True ]'
check "labels in order" '[ "$(jq_ "$T/e1.json" "\",\".join(c[\"label\"] for c in d[\"configs\"])")" = "a=mxfp4,kv=fp8_e4m3,w=bf16,a=bf16,fp32" ]'
check "mxfp4: KL > 0, quantiles ordered, CI brackets dPPL" \
  '[ "$(jq_ "$T/e1.json" "(lambda c: c[\"kl_mean\"] > 0.001 and c[\"kl_min\"] <= c[\"kl_median\"] <= c[\"kl_p90\"] <= c[\"kl_p99\"] <= c[\"kl_max\"] and c[\"dppl_rel_ci95\"][0] <= c[\"dppl_rel\"] <= c[\"dppl_rel_ci95\"][1] and 0 <= c[\"top1_agree\"] <= 1)(d[\"configs\"][0])")" = True ]'
check "KL histogram holds every scored token" \
  '[ "$(jq_ "$T/e1.json" "all(sum(c[\"kl_hist\"][\"counts\"]) + c[\"kl_hist\"][\"zero\"] + c[\"kl_hist\"][\"under\"] + c[\"kl_hist\"][\"over\"] == 186 for c in d[\"configs\"])")" = True ]'
check "fp32 config equals the reference: KL 0 exactly, same top 100%, same ppl" \
  '[ "$(jq_ "$T/e1.json" "(lambda c: c[\"kl_max\"] == 0 and c[\"top1_agree\"] == 1 and c[\"ppl\"] == d[\"reference\"][\"ppl\"])(d[\"configs\"][3])")" = True ]'
check "bf16 is closer to the reference than mxfp4" '[ "$(jq_ "$T/e1.json" "d[\"configs\"][2][\"kl_mean\"] < d[\"configs\"][0][\"kl_mean\"]")" = True ]'
check "nothing non-finite" '[ "$(jq_ "$T/e1.json" "sum(c[\"nonfinite\"][\"logit_rows\"] + c[\"nonfinite\"][\"activation_values\"] for c in d[\"configs\"] + [d[\"reference\"]])")" = 0 ]'
check "stored: 5 results of kind llm_eval keyed by the model hash, with per-token arrays" \
  '[ "$(q "SELECT count(*), count(DISTINCT tensor_hash) FROM result WHERE kind = '"'"'llm_eval'"'"'")" = "5|1" ] && [ "$(q "SELECT count(*) FROM result_blob b JOIN result r ON r.id = b.result_id WHERE r.kind = '"'"'llm_eval'"'"' AND length(b.data) = 186 * 4")" = 13 ]'
check "first run computed everything" '[ "$(jq_ "$T/e1.json" "[c[\"cached\"] for c in d[\"configs\"]] + [d[\"reference\"][\"cached\"]]")" = "[False, False, False, False, False]" ]'

# --- reuse: the same evaluation again is read from the database
ok "eval again" "$QS" "${E[@]}" --config a=mxfp4 --config kv=fp8_e4m3 --config w=bf16,a=bf16 --config a=fp32 --json
cp "$T/out" "$T/e2.json"
check "second run: every variant reused, identical numbers" \
  '[ "$(jq_ "$T/e2.json" "all(c[\"cached\"] for c in d[\"configs\"]) and d[\"reference\"][\"cached\"] and d[\"configs\"][0][\"kl_mean\"] == json.load(open(\"$T/e1.json\"))[\"configs\"][0][\"kl_mean\"]")" = True ]'
ok "a new config next to a stored one" "$QS" "${E[@]}" --config a=mxfp4 --config a=hif8 --config a=nvfp4 --json
cp "$T/out" "$T/e3.json"
check "only the new configs are computed" '[ "$(jq_ "$T/e3.json" "[c[\"cached\"] for c in d[\"configs\"]]")" = "[True, False, False]" ]'
check "hif8 (scaled to 15, not 2^15) is closer to the reference than nvfp4" '[ "$(jq_ "$T/e3.json" "d[\"configs\"][1][\"kl_mean\"] < d[\"configs\"][2][\"kl_mean\"]")" = True ]'
ok "--force recomputes" "$QS" "${E[@]}" --config a=mxfp4 --json --force
check "--force: not cached" '[ "$(jq_ "$T/out" "d[\"configs\"][0][\"cached\"] or d[\"reference\"][\"cached\"]")" = False ]'

# --- configurations with the same weight format share one rounded copy: same numbers as alone
ok "two configs on mxfp4 weights" "$QS" "${E[@]}" --config w=mxfp4 --config w=mxfp4,a=mxfp4 --config w=nvfp4 --json --force
cp "$T/out" "$T/shared.json"
ok "the second alone" "$QS" "${E[@]}" --config w=mxfp4,a=mxfp4 --json --force
check "shared weights: identical KL and ppl" \
  '[ "$(jq_ "$T/out" "(d[\"configs\"][0][\"kl_mean\"], d[\"configs\"][0][\"ppl\"]) == (lambda c: (c[\"kl_mean\"], c[\"ppl\"]))(json.load(open(\"$T/shared.json\"))[\"configs\"][1])")" = True ]'

# --- the table and the other convention
ok "table output" "$QS" "${E[@]}" --config a=mxfp4
check "table names the convention, the reference and the config" \
  'grep -q "scoring: second half of each chunk" "$T/out" && grep -q "^reference fp32" "$T/out" && grep -q "^a=mxfp4" "$T/out" && grep -q "reused from the database" "$T/out"'
ok "--score all" "$QS" "${E[@]}" --score all --json
check "all positions: 6 chunks x 63" '[ "$(jq_ "$T/out" "d[\"scored_tokens\"], d[\"score\"]")" = "378 all" ]'
ok "weights on a Q4_1 model carry the grid note" "$QS" "${E[@]}" --config w=mxfp4
check "note about the Q4_1 grid" 'grep -q "already quantized" "$T/out"'

# --- the reference perplexity against an independent float64 forward pass (numpy/torch)
if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
  cut -d, -f1-384 "$T/ids.txt" > "$T/ids6.txt"   # the 6 chunks of 64 evaluated
  ref=$(/usr/bin/python3 "$ROOT/tests/llm/torch_ref.py" "$TINY" --ppl "$T/ids6.txt" 64 half | awk '{print $2}')
  check "reference ppl = exp(mean NLL) of torch_ref.py --ppl to 1e-5" \
    '[ "$(jq_ "$T/e1.json" "abs(d[\"reference\"][\"ppl\"] / $ref - 1) < 1e-5")" = True ]'
  # a vocabulary that adds BOS (tiny.gguf's weights): BOS starts the ids and replaces each chunk's first token
  /usr/bin/python3 "$ROOT/tests/llm/make_tiny_gguf.py" --bos "$T/bos.gguf"
  ok "eval with a BOS-adding vocabulary" "$QS" llm eval --model "$T/bos.gguf" --text "$T/text.txt" --ctx 64 --chunks 6 --json --save-ids "$T/bids.txt"
  cp "$T/out" "$T/bos.json"
  check "BOS recorded; the ids are BOS + the text's ids" \
    '[ "$(jq_ "$T/bos.json" "d[\"bos\"]")" = 1 ] && [ "$(cut -d, -f1 "$T/bids.txt")" = 1 ] && [ "$(cut -d, -f2- "$T/bids.txt")" = "$(cat "$T/ids.txt")" ]'
  cut -d, -f1-384 "$T/bids.txt" > "$T/bids6.txt"
  bref=$(/usr/bin/python3 "$ROOT/tests/llm/torch_ref.py" "$T/bos.gguf" --ppl "$T/bids6.txt" 64 half 1 | awk '{print $2}')
  check "BOS: reference ppl = torch_ref.py --ppl with BOS replacement to 1e-5, and differs from no BOS" \
    '[ "$(jq_ "$T/bos.json" "abs(d[\"reference\"][\"ppl\"] / $bref - 1) < 1e-5 and d[\"reference\"][\"ppl\"] != json.load(open(\"$T/e1.json\"))[\"reference\"][\"ppl\"]")" = True ]'
else
  skip "reference perplexity against tests/llm/torch_ref.py" "python3-numpy not installed"
fi

# --- the bench case (a measurement, not timed here: only its shape)
ok "llm bench reports the eval case" "$QS" llm bench --model "$TINY" --act-format mxfp4 --tokens 8 --seqs 1 --reps 1 --eval-ctx 32 --eval-chunks 2
check "eval case: tokens/s and % of SGEMM for the reference and the config" \
  'grep -q "llm eval case: ctx 32, 2 chunks" "$T/out" && grep -Eq "^reference fp32 +[0-9.]+ +[0-9.]+ +[0-9]+%" "$T/out" && grep -q "^reference + w=fp32 a=mxfp4" "$T/out"'

ok "llm bench with fewer tokens than its 8-token warm-up (overflowed its buffers before)" \
  "$QS" llm bench --model "$TINY" --tokens 2 --seqs 1 --reps 1 --kv-format fp8_e4m3 --eval-ctx 0

# --- a configuration without one finite row is FAILED, never PPL 1, dPPL 0 and KL 0 (issue 28), and stays
# so when reused: a result stored before the rule (scored 0 beside PPL 1 and KL 0) stands in for one
F=(llm eval --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 2)
ok "eval a=fp8_e4m3 and a=bf16" "$QS" "${F[@]}" --config a=fp8_e4m3 --config a=bf16
q "UPDATE result SET data = json_set(data, '$.scored', 0, '$.ppl', 1.0, '$.ppl_se', 0.0, '$.kl_mean', 0.0, '$.dppl_rel', 0.0,
   '$.dppl_rel_ci95', json('[0.0,0.0]'), '$.nonfinite.logit_rows', 62) WHERE kind = 'llm_eval' AND format = 'a=fp8_e4m3'
   AND options LIKE '%\"chunks\":2,%';
   UPDATE result SET data = json_set(data, '$.scored', 57, '$.nonfinite.logit_rows', 5) WHERE kind = 'llm_eval'
   AND format = 'a=bf16' AND options LIKE '%\"chunks\":2,%'"
ok "the same evaluation reused" "$QS" "${F[@]}" --config a=fp8_e4m3 --config a=bf16
check "table: the config reads FAILED with its count, no numbers; the other keeps its numbers" \
  'grep -q "reused from the database" "$T/out" && grep -Eq "^a=fp8_e4m3 +- FAILED \(62 of 62 rows non-finite\): no statistics$" "$T/out" && grep -Eq "^a=bf16 +[0-9][0-9.e+]*±" "$T/out"'
check "stderr: FAILED for it, the partial one's warning survives reuse" \
  'grep -q "a=fp8_e4m3: FAILED: no finite logit row (62 of 62 non-finite)" "$T/err" && grep -q "a=bf16: 5 non-finite logit rows (left out of the statistics)" "$T/err"'
ok "reused, --json" "$QS" "${F[@]}" --config a=fp8_e4m3 --config a=bf16 --json
check "JSON: failed true with null statistics; the others failed false with numbers" \
  '[ "$(jq_ "$T/out" "[(c[\"failed\"], c[\"ppl\"], c[\"kl_mean\"], c[\"dppl_rel\"], c[\"dppl_rel_ci95\"], c[\"nonfinite\"][\"logit_rows\"]) for c in d[\"configs\"]][0], d[\"configs\"][1][\"failed\"], d[\"configs\"][1][\"ppl\"] > 1, d[\"reference\"][\"failed\"]")" = "(True, None, None, None, None, 62) False True False" ]'
ok "report with the failed config" "$QS" report -o "$T/rf" --format json --formats mxfp4 --claims none
check "report: its row has no numbers and its note says FAILED" "/usr/bin/python3 - '$T/rf/report.json' <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rows = [(row, n) for s in r['sections'] if s['id'].startswith('llm_eval') for row, n in zip(s['rows'], s['notes']) if row[0] == 'a=fp8_e4m3']
assert rows and all(set(row[1:]) == {'-'} and n.startswith('FAILED: 62 of 62') for row, n in rows), rows
PY"

# every SIMD level gives the same numbers (the portable exp rows follow the vector paths' order): the
# table of a fresh evaluation under QS_SIMD=scalar equals the CPU's own level's
for L in scalar avx2; do
  ok "eval under QS_SIMD=$L" env QS_SIMD=$L "$QS" --db "$T/simd-$L.db" llm eval --model "$TINY" --text "$T/text.txt" \
    --ctx 64 --chunks 2 --config a=mxfp4 --json
  /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(repr([(c.get('ppl'), c.get('kl_mean')) for c in [d['reference']] + d['configs']]))" "$T/out" > "$T/simd-$L.txt"
done
check "QS_SIMD=scalar and avx2: the same PPL and KL bits" 'cmp -s "$T/simd-scalar.txt" "$T/simd-avx2.txt" && grep -q "[0-9]" "$T/simd-scalar.txt"'

# the real thing, when make data has filled data/: unscaled FP8 activations overflow SmolLM2's residual stream
REAL="$ROOT/data/models/SmolLM2-135M-Instruct.Q4_1.gguf" NOVEL="$ROOT/data/text/persuasion.txt"
if [ -s "$REAL" ] && [ -s "$NOVEL" ]; then
  R=(llm eval --model "$REAL" --text "$NOVEL" --ctx 64 --chunks 1 --unscaled-casts --config a=fp8_e4m3 --json)
  ok "real: unscaled a=fp8_e4m3" "$QS" "${R[@]}"
  check "real: FAILED with null statistics" '[ "$(jq_ "$T/out" "(lambda c: (c[\"failed\"], c[\"scored\"], c[\"ppl\"], c[\"kl_mean\"]))(d[\"configs\"][0])")" = "(True, 0, None, None)" ] && grep -q "FAILED" "$T/err"'
  ok "real: again, reused" "$QS" "${R[@]}"
  check "real: still FAILED" '[ "$(jq_ "$T/out" "(lambda c: (c[\"cached\"], c[\"failed\"], c[\"ppl\"]))(d[\"configs\"][0])")" = "(True, True, None)" ] && grep -q "FAILED" "$T/err"'
else
  skip "real: a configuration without one finite row" "data: no data/models/SmolLM2-135M-Instruct.Q4_1.gguf (make data)"
fi

# --- errors: one line, database unchanged
before=$(dbdump)
fails "text too short" 2 "$QS" llm eval --model "$TINY" --text "$T/short.txt" --ctx 64
check "too short: one-line error naming the file" '[ "$(wc -l < "$T/err")" -le 2 ] && tail -n 1 "$T/err" | grep -q "short.txt: .* too short for --ctx 64"'
refuses "missing text: the file and the reason" 1 '^qscope: .*/none\.txt: cannot open: No such file or directory$' \
  "$QS" llm eval --model "$TINY" --text "$T/none.txt"
refuses "missing text, --json" 1 'none\.txt: cannot open: No such file or directory' "$QS" llm eval --model "$TINY" --text "$T/none.txt" --json
refuses "llm sensitivity: missing text" 1 '^qscope: .*/none\.txt: cannot open: No such file or directory$' \
  "$QS" llm sensitivity --model "$TINY" --text "$T/none.txt" --format mxfp4 --ctx 64
ok "a repeated --config is evaluated once" \
  bash -c "'$QS' --db '$T/dup.db' llm eval --model '$TINY' --text '$T/text.txt' --ctx 64 --chunks 1 --config a=mxfp4 --config w=mxfp4 --config a=mxfp4 --json > '$T/dup.json' 2> '$T/dup.err'"
check "... with a note naming it, and two configurations in the JSON" \
  "grep -q 'note: --config a=mxfp4 repeats configuration 1 (a=mxfp4): evaluated once' '$T/dup.err' && /usr/bin/python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); sys.exit(0 if [c[\"label\"] for c in a[\"configs\"]] == [\"a=mxfp4\", \"w=mxfp4\"] else 1)' '$T/dup.json'"
fails "bad config key" 2 "$QS" llm eval --model "$TINY" --text "$T/text.txt" --config x=mxfp4
fails "unknown format" 2 "$QS" llm eval --model "$TINY" --text "$T/text.txt" --config a=fp7
fails "resq without activations" 2 "$QS" llm eval --model "$TINY" --text "$T/text.txt" --config resq=dense
fails "ctx beyond the model" 2 "$QS" llm eval --model "$TINY" --text "$T/text.txt" --ctx 4096
fails "bad --score" 2 "$QS" llm eval --model "$TINY" --text "$T/text.txt" --score odd
check "database unchanged by the failures" '[ "$(dbdump)" = "$before" ]'

# --- the defaults of `make data`: data/models/SmolLM2-... and data/text/persuasion.txt under the working directory
mkdir -p "$T/wd/data/models" "$T/wd/data/text"
fails "no --model and no data/: usage error" 2 bash -c "cd '$T/wd' && '$QS' llm eval --ctx 64 --chunks 1"
check "... which names the default model and make data" 'grep -q "SmolLM2-135M-Instruct.Q4_1.gguf is missing: run .make data." "$T/err"'
ln -s "$TINY" "$T/wd/data/models/SmolLM2-135M-Instruct.Q4_1.gguf"
cp "$T/text.txt" "$T/wd/data/text/persuasion.txt"
ok "llm eval with neither --model nor --text uses make data's model and text" \
  bash -c "cd '$T/wd' && '$QS' llm eval --ctx 64 --chunks 1 --config kv=fp8_e4m3 --json > '$T/def.json'"
check "... and its JSON names that model and text" \
  "/usr/bin/python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); print(a[\"model\"][\"path\"], a[\"text\"])' '$T/def.json' | grep -q 'data/models/SmolLM2-135M-Instruct.Q4_1.gguf.*persuasion.txt'"
done_testing
