#!/usr/bin/env bash
# qscope train stores its runs (issue 26, item 4): the run row (model, options, data hash, tool
# version), a row per completed step, val0/val_final, status; default names made unique; --no-store
# and bad input store nothing (the database's dump unchanged); Ctrl-C stops after the step in progress
# (status stopped, exit 130, the checkpoint written), kill -9 leaves 'running' with the completed steps;
# train --csv; `qscope runs` lists, --json, --rm and --export training runs.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
DB="$QSCOPE_DB"
sq() { sqlite3 "$DB" "$@"; }
P="The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun. "
for i in $(seq 60); do printf '%s' "$P"; done > "$T/train.txt"
for i in $(seq 8); do printf '%s' "$P"; done > "$T/val.txt"
printf 'short' > "$T/short.txt"
S=(--layers 1 --dim 32 --heads 2 --ffn 64 --ctx 16 --batch 4 --steps 6 --eval-every 3 --val-seqs 4 --seed 7)
A=(--text "$T/train.txt" --val-text "$T/val.txt" --layers 1 --dim 32 --heads 2 --ffn 64 --ctx 16 --batch 4
   --steps 6 --eval-every 3 --val-seqs 4 --seed 7)
RUN=train/fp32/s7

ok "train stores its run" $QS train "${A[@]}" --json
cp "$T/out" "$T/r1.json"
check "one run row, status done, 6 of 6 steps, the default name train/RECIPE/sSEED" \
  "[ \"\$(sq \"SELECT name, status, steps, steps_done, recipe, seed FROM train_run\")\" = '$RUN|done|6|6|fp32|7' ]"
check "a row per step, val_loss only where measured (steps 3 and 6)" \
  "[ \"\$(sq \"SELECT count(*), count(val_loss), group_concat(CASE WHEN val_loss IS NOT NULL THEN step END) FROM train_step\")\" = '6|2|3,6' ]"
V0=$($PY -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["initial_val_loss"]))' "$T/r1.json")
VF=$($PY -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["final_val_loss"]))' "$T/r1.json")
check "val0 and val_final are the JSON's initial and final validation loss, exactly" \
  "[ \"\$(sq \"SELECT val0 = $V0 AND val_final = $VF AND finished_at IS NOT NULL FROM train_run\")\" = 1 ]"
check "every step's train loss and gradient norm as the JSON has them, exactly" "$PY -c '
import json,sqlite3,sys
s=json.load(open(sys.argv[1]))[\"steps\"]
got=sqlite3.connect(sys.argv[2]).execute(\"SELECT train_loss, grad_norm FROM train_step ORDER BY step\").fetchall()
sys.exit(got != [(r[\"train_loss\"], r[\"grad_norm\"]) for r in s])' $T/r1.json $DB"
check "model JSON: shape, parameter count, tokenizer" "$PY -c '
import json,sys; m=json.loads(sys.argv[1])
p=256*32+32+1*(2*32+2*32*32+2*32*32+3*64*32)
sys.exit(not (m[\"layers\"]==1 and m[\"dim\"]==32 and m[\"heads\"]==2 and m[\"ffn\"]==64 and m[\"vocab\"]==256 and m[\"ctx\"]==16 and m[\"params\"]==p and m[\"tokenizer\"]==\"bytes\"))' \"\$(sq 'SELECT model FROM train_run')\""
check "options JSON: training options, recipe and its operands, the texts" "$PY -c '
import json,sys; o=json.loads(sys.argv[1]); t=sys.argv[2]
sys.exit(not (o[\"batch\"]==4 and o[\"steps\"]==6 and o[\"eval_every\"]==3 and o[\"seed\"]==7 and o[\"lr\"]==3e-3 and o[\"recipe\"][\"name\"]==\"fp32\" and o[\"recipe\"][\"operands\"][\"wgrad.dy\"]==\"fp32\" and o[\"texts\"]==[t+\"/train.txt\"] and o[\"val_text\"]==t+\"/val.txt\"))' \"\$(sq 'SELECT options FROM train_run')\" $T"
VER=$($QS --version | awk '{print $2}')
check "data hash (32 hex digits) and tool version" \
  "sq \"SELECT data_hash, tool_version FROM train_run\" | grep -qxE '[0-9a-f]{32}\\|$VER'"
check "an fp32 run stores no operand statistics" "[ \"\$(sq 'SELECT count(*) FROM train_opstat')\" = 0 ]"

ok "the same run again" $QS train "${A[@]}" --out "$T/ck"
check "... is stored as $RUN-2, with the same data hash and its checkpoint directory" \
  "[ \"\$(sq \"SELECT b.name, a.data_hash = b.data_hash, b.checkpoint = '$T/ck' FROM train_run a, train_run b WHERE a.name='$RUN' AND b.name <> a.name\")\" = '$RUN-2|1|1' ]"
check "the text output names the run" "grep -q 'run $RUN-2\$' $T/out"
ok "another validation text, --name" $QS train "${A[@]}" --val-text "$T/train.txt" --steps 1 --name mine
check "... another data hash" "[ \"\$(sq \"SELECT count(DISTINCT data_hash) FROM train_run\")\" = 2 ]"
H=$(dbdump)
refuses "--name taken: refused, naming it" 1 "'mine' exists already" $QS train "${A[@]}" --name mine
check "... and nothing stored" "[ \"\$(dbdump)\" = '$H' ]"
ok "--no-store" $QS train "${A[@]}" --no-store --json
check "... stores nothing" "[ \"\$(dbdump)\" = '$H' ]"
check "... and its JSON names no run" "! grep -q '\"run\"' $T/out"
refuses "an unknown recipe: exit 2" 2 "unknown training recipe" $QS train "${A[@]}" --recipe fp5
check "... nothing stored" "[ \"\$(dbdump)\" = '$H' ]"
refuses "a text shorter than one batch window: exit 2" 2 "short.txt: validation text has 5 tokens, fewer than ctx\\+1" \
  $QS train "${A[@]}" --val-text "$T/short.txt"
check "... nothing stored" "[ \"\$(dbdump)\" = '$H' ]"
refuses "a training text shorter than one window: exit 2" 2 "training text has 5 tokens" $QS train "${S[@]}" --text "$T/short.txt" --val-text "$T/val.txt"
refuses "a shape that does not divide: exit 2" 2 "not a multiple of --heads" $QS train "${A[@]}" --dim 33
refuses "KV heads that do not divide the heads: exit 2" 2 "not a multiple of 3 KV heads" $QS train "${A[@]}" --heads 4 --kv-heads 3
check "... nothing stored" "[ \"\$(dbdump)\" = '$H' ]"
refuses "--json with --csv" 2 "--json and --csv" $QS train "${A[@]}" --json --csv
refuses "--name with --no-store" 2 "drop it with --no-store" $QS train "${A[@]}" --name x --no-store
check "... nothing stored" "[ \"\$(dbdump)\" = '$H' ]"
ok "train --db FILE (after the command) stores there" $QS train "${A[@]}" --steps 1 --db "$T/other.db"
check "... the run is in that database, not the default one" \
  "[ \"\$(sqlite3 $T/other.db 'SELECT count(*) FROM train_run')\" = 1 ] && [ \"\$(dbdump)\" = '$H' ]"

# A run that fails after it began (here: the database refuses step 3, as a full disk would) ends
# 'failed' with the error's line, keeping the steps before.
sq "CREATE TRIGGER boom BEFORE INSERT ON train_step WHEN NEW.step = 3 BEGIN SELECT RAISE(ABORT, 'no room for step 3'); END;"
refuses "a failure during the run: exit 1 with the error" 1 "no room for step 3" $QS train "${A[@]}" --name failing
check "... status failed, the error stored, steps 1-2 kept" \
  "[ \"\$(sq \"SELECT status, steps_done, error LIKE '%no room for step 3%', finished_at IS NOT NULL FROM train_run WHERE name='failing'\")\" = 'failed|2|1|1' ]"
check "... in one line on stderr (the run's state is in \`qscope runs\`)" "[ \$(wc -l < $T/err) -eq 1 ]"
sq "DROP TRIGGER boom;"

# --csv: the steps as CSV instead of the text
ok "train --csv" $QS train "${A[@]}" --csv --name csvrun
cp "$T/out" "$T/csv.out"
check "--csv: a header, one row per step, val_loss empty where not measured, nothing else" "$PY -c '
import csv,sys; r=list(csv.reader(open(sys.argv[1])))
sys.exit(not (r[0]==[\"step\",\"train_loss\",\"val_loss\",\"grad_norm\",\"lr\",\"tok_s\"] and len(r)==7 and [x[0] for x in r[1:]]==[str(i) for i in range(1,7)] and [x[2]!=\"\" for x in r[1:]]==[False,False,True,False,False,True]))' $T/csv.out"
check "--csv: the same losses as the stored run's, exactly" "$PY -c '
import csv,sqlite3,sys; r=list(csv.reader(open(sys.argv[1])))[1:]
db=sqlite3.connect(sys.argv[2]).execute(\"SELECT train_loss FROM train_step s JOIN train_run r ON r.id=s.run_id WHERE r.name=?1 ORDER BY step\", (\"csvrun\",)).fetchall()
sys.exit(not r or [float(x[1]) for x in r] != [x[0] for x in db])' $T/csv.out $DB"

# Ctrl-C: the step in progress completes and is stored, then status stopped, exit 130, the checkpoint
# of that step.  kill -9: status running with every completed step.
LONG=("${A[@]}" --steps 1000000 --eval-every 0)
wait_steps() {   # wait_steps NAME N : until run NAME has stored N steps (at most ~20 s)
  for _ in $(seq 200); do
    [ "$(sq "SELECT coalesce(max(steps_done), 0) >= $2 FROM train_run WHERE name='$1'" 2>/dev/null)" = 1 ] && return 0
    sleep 0.1
  done
  return 1
}
$QS train "${LONG[@]}" --name int --out "$T/ckint" >"$T/int.out" 2>"$T/int.err" &
pid=$!
wait_steps int 3; kill -INT $pid; wait $pid; rc=$?
check "SIGINT: exit 130" "[ $rc = 130 ]"
check "... status stopped, every completed step stored (>= 3), steps_done = the rows" \
  "[ \"\$(sq \"SELECT status, steps_done >= 3, steps_done = (SELECT count(*) FROM train_step WHERE run_id=id), error LIKE 'stopped by SIGINT after step %' FROM train_run WHERE name='int'\")\" = 'stopped|1|1|1' ]"
check "... says what was kept" "grep -qE 'stopped by SIGINT after step [0-9]+; [0-9]+ of 1000000 steps kept in run int, checkpoint' $T/int.err"
check "... and wrote the checkpoint" "[ -s $T/ckint/model.safetensors ] && [ -s $T/ckint/config.json ]"
$QS train "${LONG[@]}" --name term >/dev/null 2>&1 &
pid=$!
wait_steps term 2; kill -TERM $pid; wait $pid; rc=$?
check "SIGTERM: exit 143, status stopped" "[ $rc = 143 ] && [ \"\$(sq \"SELECT status FROM train_run WHERE name='term'\")\" = stopped ]"
$QS train "${LONG[@]}" --name killed >/dev/null 2>&1 &
pid=$!
wait_steps killed 3; kill -KILL $pid; { wait $pid; } 2>/dev/null; rc=$?
check "kill -9: status running with every completed step (>= 3)" \
  "[ $rc = 137 ] && [ \"\$(sq \"SELECT status, steps_done >= 3, steps_done = (SELECT count(*) FROM train_step WHERE run_id=id) FROM train_run WHERE name='killed'\")\" = 'running|1|1' ]"

# qscope runs
ok "runs lists the training runs" $QS runs
cp "$T/out" "$T/runs.out"
check "... in their section, with recipe, seed, status, steps done/planned, val0 -> final" \
  "grep -q '^training runs\$' $T/runs.out && grep -qE '^train/fp32/s7 +fp32 +7 done +6/6 +[0-9.]+ -> [0-9.]+ +20' $T/runs.out && grep -qE '^killed +fp32 +7 running +[0-9]+/1000000 ' $T/runs.out"
ok "runs --json" $QS runs --json
cp "$T/out" "$T/runs.json"
check "... the training runs under train_runs, the RL runs under rl_runs" "$PY -c '
import json,sys; j=json.load(open(sys.argv[1])); t={r[\"run\"]: r for r in j[\"train_runs\"]}
r=t[\"train/fp32/s7\"]
sys.exit(not (j[\"rl_runs\"]==[] and r[\"status\"]==\"done\" and r[\"steps_done\"]==6 and r[\"val_final\"]==float(sys.argv[2]) and r[\"model\"][\"dim\"]==32 and r[\"options\"][\"batch\"]==4 and t[\"int\"][\"status\"]==\"stopped\"))' $T/runs.json $VF"
ok "runs PATTERN filters training runs too" $QS runs 'train/*'
check "... only the matching ones" "grep -q '^train/fp32/s7-2 ' $T/out && ! grep -q '^killed ' $T/out"
ok "runs --export NAME -o FILE.csv" $QS runs --export $RUN -o "$T/exp.csv"
check "... the steps as train --csv writes them, losses exact" "$PY -c '
import csv,json,sys; r=list(csv.reader(open(sys.argv[1]))); s=json.load(open(sys.argv[2]))[\"steps\"]
sys.exit(not (r[0]==[\"step\",\"train_loss\",\"val_loss\",\"grad_norm\",\"lr\",\"tok_s\"] and len(r)==7 and [float(x[1]) for x in r[1:]]==[x[\"train_loss\"] for x in s] and [x[2] for x in r[1:]].count(\"\")==4))' $T/exp.csv $T/r1.json"
H=$(dbdump)
refuses "runs --rm of an unknown name removes nothing" 1 "no run named 'nope'" $QS runs --rm $RUN nope
check "... the database unchanged" "[ \"\$(dbdump)\" = '$H' ]"
ok "runs --rm NAME removes a training run" $QS runs --rm $RUN
check "... its row and its steps (cascade), not the others'" \
  "[ \"\$(sq \"SELECT count(*) FROM train_run WHERE name='$RUN'\")\" = 0 ] && [ \"\$(sq 'SELECT count(*) FROM train_step WHERE run_id NOT IN (SELECT id FROM train_run)')\" = 0 ] && [ \"\$(sq \"SELECT steps_done FROM train_run WHERE name='$RUN-2'\")\" = 6 ]"

# Under a recipe every step stores its operands' statistics: per (layer, operand) of the 1-layer
# model, 6 rows a step (the head stays FP32, so no head rows), fractions within 0..1, and mxfp4's
# small values do underflow somewhere (a sum that fails when the counts are not wired through)
ok "a --recipe mxfp4 run" $QS train "${A[@]}" --steps 3 --recipe mxfp4 --name opst
check "... 3 steps x 1 layer x 6 operands of statistics" \
  "[ \"\$(sq \"SELECT count(*), count(DISTINCT operand), max(layer), min(n) > 0 FROM train_opstat JOIN train_run r ON r.id = run_id WHERE r.name='opst'\")\" = '18|6|0|1' ]"
check "... fractions in 0..1, some underflow, nothing non-finite" \
  "[ \"\$(sq \"SELECT min(underflow) >= 0, max(underflow) <= 1, sum(underflow) > 0, max(clipped) <= 1, sum(nonfinite) FROM train_opstat JOIN train_run r ON r.id = run_id WHERE r.name='opst'\")\" = '1|1|1|1|0.0' ]"

done_testing
