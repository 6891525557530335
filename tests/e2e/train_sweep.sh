#!/usr/bin/env bash
# qscope train --sweep and the pre-training claim (issue 26 item 5): a sweep runs every (recipe, seed)
# seed-major under a name that depends on the configuration only; bad specs are usage errors; the
# claim hif4.pretrain gives a verdict in --quick from make data's texts, and says so when they are
# not there.  The claim's arithmetic on stored runs is tests/unit/test_claims_train.c.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
P="It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife. "
for i in $(seq 200); do printf '%s' "$P"; done > "$T/train.txt"
for i in $(seq 20); do printf '%s' "$P"; done > "$T/val.txt"
SW=(--text "$T/train.txt" --val-text "$T/val.txt" --layers 1 --dim 32 --heads 2 --ctx 16 --batch 4 --steps 3 --val-seqs 2)

ok "a sweep of 2 recipes x 2 seeds" $QS train "${SW[@]}" --sweep recipes=bf16,hif4,seeds=1,2 --json
cp "$T/out" "$T/s1.json"
check "four runs, seed-major, named SWEEP-RECIPE-sSEED, each trained" "$PY -c '
import json,sys; j=json.load(open(sys.argv[1])); r=j[\"runs\"]; s=j[\"sweep\"]
assert s.startswith(\"sweep-\") and len(s)==14, s
assert [(x[\"recipe\"],x[\"seed\"]) for x in r]==[(\"bf16\",1),(\"hif4\",1),(\"bf16\",2),(\"hif4\",2)], r
assert all(x[\"name\"]==\"%s-%s-s%d\"%(s,x[\"recipe\"],x[\"seed\"]) for x in r)
assert all(x[\"final_val_loss\"] < x[\"initial_val_loss\"] for x in r)
assert r[0][\"initial_val_loss\"]==r[1][\"initial_val_loss\"] and r[0][\"initial_val_loss\"]!=r[2][\"initial_val_loss\"]
' $T/s1.json"
ok "a run of the sweep equals the single run of that recipe and seed" $QS train "${SW[@]}" --recipe hif4 --seed 2 --json
check "same final validation loss" "$PY -c '
import json,sys; a=json.load(open(sys.argv[1]))[\"runs\"][3]; b=json.load(open(sys.argv[2])); assert a[\"final_val_loss\"]==b[\"final_val_loss\"], (a,b)' $T/s1.json $T/out"
ok "the same configuration, other recipes and seeds" $QS train "${SW[@]}" --sweep recipes=mxfp4,seeds=5 --json
check "the same sweep name" "$PY -c '
import json,sys; assert json.load(open(sys.argv[1]))[\"sweep\"]==json.load(open(sys.argv[2]))[\"sweep\"]' $T/s1.json $T/out"
ok "another learning rate" $QS train "${SW[@]}" --lr 2e-3 --sweep recipes=mxfp4,seeds=5 --json
check "another sweep name" "$PY -c '
import json,sys; assert json.load(open(sys.argv[1]))[\"sweep\"]!=json.load(open(sys.argv[2]))[\"sweep\"]' $T/s1.json $T/out"
ok "text output: a header and one line per run" $QS train "${SW[@]}" --sweep recipes=fp32,seeds=1,2
check "header names the sweep and its size" "grep -q '^sweep sweep-[0-9a-f]\{8\}: 2 runs (1 recipes x 2 seeds)' $T/out && [ \$(grep -c -- '-fp32-s[12] ' $T/out) -eq 2 ]"

refuses "an unknown recipe in --sweep" 2 "unknown training recipe 'mxfp5'" $QS train "${SW[@]}" --sweep recipes=bf16,mxfp5
refuses "an unknown key" 2 "unknown key 'runs'" $QS train "${SW[@]}" --sweep runs=3
refuses "a bad seed" 2 "seed 'x' is not a whole number" $QS train "${SW[@]}" --sweep seeds=1,x
refuses "a repeated seed" 2 "seed 1 given twice" $QS train "${SW[@]}" --sweep seeds=1,1
refuses "--sweep with --recipe" 2 "--sweep sets the recipe and seed" $QS train "${SW[@]}" --sweep default --recipe hif4
refuses "--sweep with --out" 2 "--sweep sets the recipe and seed" $QS train "${SW[@]}" --sweep default --out "$T/ck"

# the claim, --quick: a reduced sweep trained in memory on make data's texts
if [ -f "$ROOT/data/text/persuasion.txt" ] && [ -f "$ROOT/data/text/emma.txt" ]; then
  ok "claims --quick --only hif4.pretrain" bash -c "cd '$ROOT' && $QS claims --quick --only hif4.pretrain --json"
  check "a verdict, the four recipes' gaps, marked quick" "$PY -c '
import json,sys; c=json.load(open(sys.argv[1]))[\"claims\"]; assert len(c)==1; x=c[0]
assert x[\"id\"]==\"hif4.pretrain\" and x[\"verdict\"] in (\"reproduced\",\"differs\",\"inconclusive\"), x
assert all(r+\" \" in x[\"measured\"] for r in (\"hif4\",\"mxfp4\",\"nvfp4\",\"mxfp8\")), x[\"measured\"]
assert \"QUICK\" in x[\"detail\"] and \"3 seeds\" in x[\"detail\"] and x[\"value\"] is not None, x
' $T/out"
else
  skip "claims --quick --only hif4.pretrain" "make data's texts are not in data/text"
  skip "a verdict, the four recipes' gaps, marked quick" "make data's texts are not in data/text"
fi
ok "claims --quick without make data's texts" bash -c "cd '$T' && $QS claims --quick --only hif4.pretrain --json"
check "inconclusive, saying why" "$PY -c '
import json,sys; x=json.load(open(sys.argv[1]))[\"claims\"][0]; assert x[\"verdict\"]==\"inconclusive\" and \"make data\" in x[\"measured\"], x' $T/out"
done_testing
