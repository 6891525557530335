#!/usr/bin/env bash
# qscope llm sensitivity on the committed tiny GGUF model: JSON shape, the layers x sites table,
# FP32 = KL 0, the plan and its stored verification, storage and reuse, errors.
source "$(dirname "$0")/lib.sh"
TINY="$FIX/llm/tiny.gguf"
q() { sqlite3 "$QSCOPE_DB" "$1"; }
jq_() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }

python3 - "$T/text.txt" <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(70)) + "\n")
PY
S=(llm sensitivity --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 4 --format mxfp4)

ok "sensitivity, all six sites, --json" "$QS" "${S[@]}" --json
cp "$T/out" "$T/s1.json"
L=$(python3 -c "import json; print(json.load(open('$T/s1.json'))['layers'])")
check "JSON: model, text, tokens, ctx, format, sites, layers, kl_mean/dppl [L][S], bits_fp32, site_params, plan" \
  '[ "$(jq_ "$T/s1.json" "all(k in d for k in [\"model\",\"text\",\"tokens\",\"ctx\",\"format\",\"sites\",\"layers\",\"kl_mean\",\"dppl\",\"bits_fp32\",\"site_params\",\"plan\"]) and d[\"sites\"] == [\"attn_in\",\"attn_out\",\"ffn_in\",\"ffn_down_in\",\"kv\",\"w\"] and len(d[\"kl_mean\"]) == d[\"layers\"] and all(len(r) == 6 for r in d[\"kl_mean\"] + d[\"dppl\"]) and d[\"format\"] == \"mxfp4\" and d[\"ctx\"] == 64")" = True ]'
check "every (layer, site) at mxfp4 has KL > 0; the ranking covers all of them" \
  '[ "$(jq_ "$T/s1.json" "all(x > 0 for r in d[\"kl_mean\"] for x in r) and len(d[\"plan\"][\"order\"]) == 6 * d[\"layers\"] and not d[\"cached\"]")" = True ]'
check "bits: activation sites per token, w in parameters; bits_fp32 = 32 x all elements" \
  '[ "$(jq_ "$T/s1.json" "[p[\"unit\"] for p in d[\"site_params\"]] == [\"per_token\"]*5 + [\"parameters\"] and abs(d[\"bits_fp32\"] - 32 * d[\"layers\"] * sum(p[\"elements\"] for p in d[\"site_params\"])) < 1e-6 and d[\"bits_format\"] == 4.25")" = True ]'
check "one llm_sensitivity row stored, no plan row without a target" \
  '[ "$(q "SELECT count(*) FROM result WHERE kind = '"'"'llm_sensitivity'"'"'")" = 1 ] && [ "$(q "SELECT count(*) FROM result WHERE kind = '"'"'llm_plan'"'"'")" = 0 ]'
before=$(dbdump)
ok "second run" "$QS" "${S[@]}" --json
check "second run reuses the stored result (cached, database unchanged, same table)" \
  '[ "$(jq_ "$T/out" "d[\"cached\"] and d[\"kl_mean\"] == json.load(open(\"$T/s1.json\"))[\"kl_mean\"]")" = True ] && [ "$(dbdump)" = "$before" ]'
ok "--force recomputes" "$QS" "${S[@]}" --json --force
check "--force: not cached, same numbers" '[ "$(jq_ "$T/out" "not d[\"cached\"] and d[\"kl_mean\"] == json.load(open(\"$T/s1.json\"))[\"kl_mean\"]")" = True ]'

ok "text table" "$QS" "${S[@]}" --sites ffn_down_in,kv
check "table: one row per layer, the largest of each site marked" \
  '[ "$(grep -cE "^ +[0-9]+ " "$T/out")" -ge "$L" ] && [ "$(grep -o "\*" "$T/out" | wc -l)" -ge 3 ] && grep -q "ffn_down_in" "$T/out"'

ok "format fp32" "$QS" llm sensitivity --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 4 --format fp32 --sites attn_in,kv,w --json
check "fp32 variants: KL exactly 0 everywhere" '[ "$(jq_ "$T/out" "all(x == 0 for r in d[\"kl_mean\"] for x in r)")" = True ]'

ok "plan for a KL target" "$QS" "${S[@]}" --sites attn_in,ffn_down_in --kl-target 0.0001 --json
cp "$T/out" "$T/p1.json"
check "plan: promotions in ranking order, bf16 table, predicted and measured KL" \
  '[ "$(python3 -c "
import json; d = json.load(open(\"$T/p1.json\")); p = d[\"plan\"]; k = p[\"steps\"]
ok = [(s[\"layer\"], s[\"site\"]) for s in p[\"order\"][:k]] == [(s[\"layer\"], s[\"site\"]) for s in p[\"promoted\"]]
ok = ok and sum(map(sum, p[\"bf16\"])) == k and p[\"measured\"][\"kl_mean\"] >= 0 and \"predicted_kl\" in p and p[\"bits_avg\"][\"all\"] > 4.25
print(ok)")" = True ]'
check "plan verification stored (llm_plan row with its measured KL)" \
  '[ "$(q "SELECT count(*) FROM result WHERE kind = '"'"'llm_plan'"'"' AND json_extract(data, '"'"'$.measured.kl_mean'"'"') IS NOT NULL")" = 1 ]'
ok "plan for a bits budget (text)" "$QS" "${S[@]}" --sites attn_in,ffn_down_in --bits-budget 5
check "budget plan printed with predicted vs measured" 'grep -q "predicted KL" "$T/out" && grep -q "measured KL" "$T/out" && grep -q "not additive" "$T/out"'
check "two plan rows now" '[ "$(q "SELECT count(*) FROM result WHERE kind = '"'"'llm_plan'"'"'")" = 2 ]'

fails "plot sensitivity without data" 1 "$QS" --db "$T/empty.db" plot sensitivity -o "$T/none.png"
ok "plot sensitivity (PNG heatmap of the latest table)" "$QS" plot sensitivity -o "$T/sens.png"
check "a PNG was written" '[ "$(head -c 4 "$T/sens.png" | tail -c 3)" = PNG ]'
# issue 28: sites were numbers with a key in the x title, layer ticks sat on cell edges (a "2" under
# layers 0..1), and the footnote's target read as met next to a measured KL above it
ok "plot sensitivity in the terminal" "$QS" plot sensitivity -o - --term block --width 140 --height 24
check "the x ticks name the sites under their cells; no numbered key" \
  'grep -Eq "^ +attn_in +ffn_down_in *$" "$T/out" && ! grep -q "site: 0" "$T/out"'
check "one layer tick per layer, none past the last layer" \
  '[ "$(grep -cE "^[0-9]+(┤|\+)" "$T/out")" = "$L" ] && ! grep -qE "^$L(┤|\+)" "$T/out"'
check "the footnote: the plan's target and its measured KL as llm sensitivity prints them" \
  'grep -Eq "^B: BF16 in the plan for average bits <= 5 \(measured KL ([0-9]\.[0-9]{5}|[0-9]\.[0-9]e-[0-9]+)±([0-9]\.[0-9]{5}|[0-9]\.[0-9]e-[0-9]+)\); predicted KL ([0-9]\.[0-9]{5}|[0-9]\.[0-9]e-[0-9]+|0); [0-9]+ cells?, [0-9.]+ bits$" "$T/out"'
ok "a KL-target plan, stored last" "$QS" "${S[@]}" --sites attn_in,ffn_down_in --kl-target 0.00001 --force
m=$(sed -n 's/^plan verified.*measured KL \([0-9.e+-]*\)±.*/\1/p' "$T/out")
ok "plot sensitivity of it" "$QS" plot sensitivity -o - --term block --width 140 --height 24
check "its footnote gives the same measured KL and says whether it meets the target" \
  'grep -Eq "^B: BF16 in the plan for mean KL <= 1e-05 \((met|missed): measured KL $m±[0-9.e+-]+\); predicted" "$T/out"'

# A plan that misses its KL target says so and refines.  fp4_e2m1 on the tiny model: the first plan for
# 0.41 (4 promotions, predicted 0.407) measures ~0.52; the next round promotes up to predicted 0.029.
R=(llm sensitivity --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 4 --format fp4_e2m1)
ok "plan whose first verification misses the target (--json)" "$QS" "${R[@]}" --kl-target 0.41 --json
cp "$T/out" "$T/r1.json"; cp "$T/err" "$T/r1.err"
check "refine: round 1 missed (measured > 0.41), round 2 promoted more and meets it; the plan is the last round" \
  '[ "$(python3 -c "
import json; p = json.load(open(\"$T/r1.json\"))[\"plan\"]; r = p[\"refine\"]
ok = len(r) == 2 and not r[0][\"met\"] and r[0][\"measured\"][\"kl_mean\"] > 0.41 and r[1][\"met\"] and r[1][\"steps\"] > r[0][\"steps\"]
ok = ok and p[\"target_met\"] and p[\"steps\"] == r[1][\"steps\"] and p[\"measured\"][\"kl_mean\"] == r[1][\"measured\"][\"kl_mean\"] <= 0.41
ok = ok and [(s[\"layer\"], s[\"site\"]) for s in p[\"order\"][:p[\"steps\"]]] == [(s[\"layer\"], s[\"site\"]) for s in p[\"promoted\"]]
ok = ok and r[0][\"predicted_kl\"] <= 0.41 and r[1][\"bits_avg\"][\"all\"] > r[0][\"bits_avg\"][\"all\"]
print(ok)")" = True ]'
check "the miss and the refinement are said on stderr while computing" 'grep -q "misses the target 0.41; refining with" "$T/r1.err"'
check "the rounds are stored in the llm_plan row" \
  '[ "$(q "SELECT json_array_length(data, '"'"'$.refine'"'"') FROM result WHERE kind = '"'"'llm_plan'"'"' AND options LIKE '"'"'%fp4_e2m1%'"'"'")" = 2 ]'
ok "the same plan as text (reused)" "$QS" "${R[@]}" --kl-target 0.41
check "text: the first plan missed, the rounds, and that the refined plan meets the target" \
  'grep -q "the first plan missed the KL target 0.41" "$T/out" && [ "$(grep -cE "^ +[12] +[0-9]+ .*(missed|meets the target)$" "$T/out")" = 2 ] && grep -q "refined plan meets the KL target 0.41 after 2 rounds" "$T/out"'
q "UPDATE result SET data = json_remove(data, '\$.refine') WHERE kind = 'llm_plan' AND options LIKE '%fp4_e2m1%'"
ok "a KL-target plan stored without rounds (an older qscope)" "$QS" "${R[@]}" --kl-target 0.41 --json
check "... is made again, with its rounds" '[ "$(jq_ "$T/out" "len(d[\"plan\"][\"refine\"]) == 2 and d[\"plan\"][\"target_met\"]")" = True ]'
B=$(python3 -c "import json; print(json.load(open('$T/r1.json'))['plan']['order'][5]['bits_avg'])")
ok "refinement within a bits budget of 6 promotions" "$QS" "${R[@]}" --kl-target 0.41 --bits-budget "$B"
check "the budget stops it: the plan still misses, and says the budget is spent" \
  'grep -q "still misses the KL target 0.41: the bits budget" "$T/out" && grep -q "the bits budget is spent" "$T/err" && grep -q "^plan: 6 promotions" "$T/out"'
ok "a target that every cell at BF16 misses" "$QS" "${R[@]}" --kl-target 0.000001
check "... says it misses and why it cannot be refined" 'grep -q "misses the KL target 1e-06 and cannot be refined: every cell is at BF16" "$T/out" && grep -q "every cell is promoted" "$T/err"'

before=$(dbdump)
fails "unknown site" 2 "$QS" "${S[@]}" --sites attn_in,mlp
fails "no --format" 2 "$QS" llm sensitivity --model "$TINY" --text "$T/text.txt"
fails "unknown format" 2 "$QS" "${S[@]}" --format fp7
fails "negative target" 2 "$QS" "${S[@]}" --kl-target -1
fails "missing text" 1 "$QS" llm sensitivity --model "$TINY" --text "$T/none.txt" --format mxfp4
check "missing text: one line naming the file" '[ "$(wc -l < "$T/err")" = 1 ] && grep -q "none.txt" "$T/err"'
check "errors leave the database unchanged" '[ "$(dbdump)" = "$before" ]'
done_testing
