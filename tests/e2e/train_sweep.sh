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
S=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["sweep"])' $T/s1.json)
sq() { sqlite3 "$QSCOPE_DB" "$1"; }
check "stored: four done runs of the sweep, their final validation loss as printed" "[ \"\$(sq \"SELECT count(*) FROM train_run WHERE sweep='$S' AND status='done'\")\" = 4 ] && $PY -c '
import json,sys; r={x[\"name\"]:x[\"final_val_loss\"] for x in json.load(open(sys.argv[1]))[\"runs\"]}
rows=[l.split(\"|\") for l in sys.argv[2].split()]; assert len(rows)==4 and all(abs(r[n]-float(v))<=1e-12*abs(r[n]) for n,v in rows), (r,rows)' $T/s1.json \"\$(sq \"SELECT name, val_final FROM train_run WHERE sweep='$S'\")\""
ok "the same sweep again" $QS train "${SW[@]}" --sweep recipes=bf16,hif4,seeds=1,2 --json
check "every run reported as stored, nothing run or stored again" "$PY -c '
import json,sys; a=json.load(open(sys.argv[1]))[\"runs\"]; b=json.load(open(sys.argv[2]))[\"runs\"]
assert all(x[\"stored_before\"] for x in b) and [x[\"final_val_loss\"] for x in a]==[x[\"final_val_loss\"] for x in b], b' $T/s1.json $T/out && [ \"\$(sq 'SELECT count(*) FROM train_run')\" = 4 ]"
sq "UPDATE train_run SET status='running', steps_done=1 WHERE name='$S-hif4-s1'"
ok "a sweep with a run left unfinished (killed)" $QS train "${SW[@]}" --sweep recipes=bf16,hif4,seeds=1,2 --json
check "that run is trained again (same loss), the others are not" "$PY -c '
import json,sys; b=json.load(open(sys.argv[1]))[\"runs\"]; a=json.load(open(sys.argv[2]))[\"runs\"]
assert [x[\"stored_before\"] for x in b]==[True,False,True,True] and [x[\"final_val_loss\"] for x in a]==[x[\"final_val_loss\"] for x in b], b' $T/out $T/s1.json && [ \"\$(sq \"SELECT count(*) FROM train_run WHERE status='done'\")\" = 4 ]"
ok "--no-store: a sweep that stores nothing" $QS train "${SW[@]}" --sweep recipes=mxfp8,seeds=1 --no-store
check "nothing stored" "[ \"\$(sq 'SELECT count(*) FROM train_run')\" = 4 ]"
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
refuses "--sweep with --recipe" 2 "--sweep sets the recipe, seed and name" $QS train "${SW[@]}" --sweep default --recipe hif4
refuses "--sweep with --name" 2 "--sweep sets the recipe, seed and name" $QS train "${SW[@]}" --sweep default --name x
refuses "--sweep with --out" 2 "--sweep sets the recipe, seed and name" $QS train "${SW[@]}" --sweep default --out "$T/ck"

# the claim, --quick: a reduced sweep trained in memory on the texts of data/text (make data's; the
# claim reads them relative to the working directory, so without make data a directory of its own
# holds two small committed-text novels and the check still runs)
CQ="$ROOT"
if ! { [ -f "$ROOT/data/text/persuasion.txt" ] && [ -f "$ROOT/data/text/emma.txt" ]; }; then
  CQ="$T/cq"; mkdir -p "$CQ/data/text"
  for i in $(seq 30); do cat "$ROOT/tests/fixtures/train/text.txt"; done > "$CQ/data/text/emma.txt"
  for i in $(seq 8); do cat "$ROOT/tests/fixtures/train/text.txt"; done > "$CQ/data/text/persuasion.txt"
fi
ok "claims --quick --only hif4.pretrain" bash -c "cd '$CQ' && $QS claims --quick --only hif4.pretrain --json"
check "a verdict, the four recipes' gaps, marked quick" "$PY -c '
import json,sys; c=json.load(open(sys.argv[1]))[\"claims\"]; assert len(c)==1; x=c[0]
assert x[\"id\"]==\"hif4.pretrain\" and x[\"verdict\"] in (\"reproduced\",\"differs\",\"inconclusive\"), x
assert all(r+\" \" in x[\"measured\"] for r in (\"hif4\",\"mxfp4\",\"nvfp4\",\"mxfp8\")), x[\"measured\"]
assert \"QUICK\" in x[\"detail\"] and \"3 seeds\" in x[\"detail\"] and x[\"value\"] is not None, x
' $T/out"
ok "claims --quick without make data's texts" bash -c "cd '$T' && $QS claims --quick --only hif4.pretrain --json"
check "inconclusive, saying why" "$PY -c '
import json,sys; x=json.load(open(sys.argv[1]))[\"claims\"][0]; assert x[\"verdict\"]==\"inconclusive\" and \"make data\" in x[\"measured\"], x' $T/out"
done_testing
