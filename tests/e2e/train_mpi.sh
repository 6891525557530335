#!/usr/bin/env bash
# `mpirun -np N qscope train`: data-parallel training of one run.  -np 1 is the serial run bit for
# bit; -np 2 equals it up to the gradients' summation order (over 30 steps: losses to 2e-6 relative,
# gradient norms to 1e-3, step 1's to 2e-6; the initial validation loss bit for bit) and reruns are
# bit-identical; rank 0 alone prints and writes the checkpoint; a rank killed or stopped (SIGSTOP,
# --rank-timeout) ends the run with one line and no checkpoint.  See docs/scale.md, "Training".
source "$(dirname "$0")/lib.sh"

command -v mpirun >/dev/null 2>&1 || skip_all "mpirun is not installed (Debian: openmpi-bin)"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPI=(timeout 120 mpirun --oversubscribe)
asan_build && MPI+=(-x "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
[ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)
PY=/usr/bin/python3

cd "$T"
P="The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun. \
A small model learns to spell the words of this little story, one byte at a time. "
for i in $(seq 300); do printf '%s' "$P"; done > train.txt
for i in $(seq 20); do printf '%s' "$P"; done > val.txt
TR=(--text "$T/train.txt" --val-text "$T/val.txt" --layers 2 --dim 64 --heads 4 --ctx 32 --steps 30 --lr 3e-3
    --warmup 10 --eval-every 10 --val-seqs 12 --seed 7 --json)
# same A B TOL [GTOL]: every step's train_loss and val_loss within TOL relative (0: equal bits), its
# grad_norm within GTOL (default TOL; step 1's within TOL), the same steps measured, and both initial
# validation losses bit for bit
CMP='import json, sys
a, b, tol = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3])
gtol = float(sys.argv[4]) if len(sys.argv) > 4 else tol
assert a["initial_val_loss"] == b["initial_val_loss"], ("val0", a["initial_val_loss"], b["initial_val_loss"])
assert len(a["steps"]) == len(b["steps"]) == 30
bad = []
for x, y in zip(a["steps"], b["steps"]):
    assert ("val_loss" in x) == ("val_loss" in y)
    for k in ("train_loss", "grad_norm", "val_loss"):
        t = gtol if k == "grad_norm" and x["step"] > 1 else tol
        if k in x and abs(x[k] - y[k]) > t * abs(x[k]): bad.append((x["step"], k, x[k], y[k]))
print(bad[:3])
sys.exit(len(bad) > 0)'
same() { $PY -c "$CMP" "$@" >>cmp.log 2>&1; }

ok "serial: batch 8, 30 steps" "$QS" train "${TR[@]}" --batch 8 --out "$T/cks"
cp "$T/out" s.json
ok "-np 1: batch 8" "${MPI[@]}" -np 1 "$QS" train "${TR[@]}" --batch 8
cp "$T/out" p1.json
check "-np 1: the serial run bit for bit" "same s.json p1.json 0"
ok "-np 2: batch 8, a checkpoint" "${MPI[@]}" -np 2 "$QS" train "${TR[@]}" --batch 8 --out "$T/ck2" --name dp2
cp "$T/out" p2.json
check "-np 2: one run stored (by rank 0), done, its 30 steps' losses those printed bit for bit" \
  "$PY -c 'import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
runs = db.execute(\"SELECT id, status FROM train_run WHERE name LIKE ?\", (\"dp2%\",)).fetchall()
a = [r[0] for r in db.execute(\"SELECT train_loss FROM train_step WHERE run_id = ? ORDER BY step\", (runs[0][0],))]
b = [r[\"train_loss\"] for r in json.load(open(sys.argv[2]))[\"steps\"]]
sys.exit(len(runs) != 1 or runs[0][1] != \"done\" or len(a) != 30 or a != b)' '$QSCOPE_DB' p2.json"
check "-np 2: one JSON document (rank 0 prints alone), ranks 2" \
  "$PY -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))[\"ranks\"] != 2)' p2.json"
check "-np 2: the serial run's losses to 2e-6 relative, gradient norms to 1e-3, val0 bit for bit" "same s.json p2.json 2e-6 1e-3"
check "-np 2: not simply the serial run (the windows are cut over two ranks)" "! same s.json p2.json 0"
ok "-np 2 again" "${MPI[@]}" -np 2 "$QS" train "${TR[@]}" --batch 8
cp "$T/out" p2b.json
check "-np 2 rerun: bit-identical losses and gradient norms" "same p2.json p2b.json 0"
check "-np 2: the checkpoint written (by rank 0)" "[ -s ck2/model.safetensors ] && [ -s ck2/config.json ]"
ok "the -np 2 checkpoint loads in llm eval" "$QS" llm eval --model "$T/ck2" --text val.txt --ctx 32 --chunks 2 --json

# batch 4 x accum 2: each rank computes one whole micro-batch; the first step's loss is the serial one
ok "serial: batch 4, accum 2" "$QS" train "${TR[@]}" --batch 4 --accum 2
cp "$T/out" sa.json
ok "-np 2: batch 4, accum 2" "${MPI[@]}" -np 2 "$QS" train "${TR[@]}" --batch 4 --accum 2
cp "$T/out" pa.json
check "-np 2, accum 2: step 1's train loss bit for bit, the run as above" \
  "$PY -c 'import json,sys; f=lambda p: json.load(open(p))[\"steps\"][0][\"train_loss\"]; sys.exit(f(sys.argv[1]) != f(sys.argv[2]))' sa.json pa.json && same sa.json pa.json 2e-6 1e-3"
# under a recipe the stored operand statistics are every rank's: step 1's rows as the serial run's
ok "serial: mxfp4, batch 4, accum 2" "$QS" train "${TR[@]}" --batch 4 --accum 2 --steps 2 --recipe mxfp4 --name ops1
ok "-np 2: mxfp4, batch 4, accum 2" "${MPI[@]}" -np 2 "$QS" train "${TR[@]}" --batch 4 --accum 2 --steps 2 --recipe mxfp4 --name ops2
OPS="SELECT layer, operand, n, underflow, clipped, nonfinite FROM train_opstat JOIN train_run ON id = run_id WHERE step = 1 AND name = '%s' ORDER BY layer, operand"
check "-np 2 under a recipe: step 1's operand statistics (counts of both ranks) equal the serial run's" \
  "a=\$(sqlite3 '$QSCOPE_DB' \"\$(printf \"$OPS\" ops1)\") && [ -n \"\$a\" ] && [ \"\$a\" = \"\$(sqlite3 '$QSCOPE_DB' \"\$(printf \"$OPS\" ops2)\")\" ]"
check "-np 2: a different --seed gives other losses" \
  "${MPI[*]} -np 2 '$QS' train ${TR[*]} --batch 8 --seed 8 >p2s.json 2>/dev/null && ! same p2.json p2s.json 1e-3"

refuses "-np 3, batch 8: the windows do not divide over the ranks" 2 \
  'qscope train: --batch x --accum \(8 windows a step\) is not a multiple of the 3 MPI ranks' \
  "${MPI[@]}" -np 3 "$QS" train "${TR[@]}" --batch 8

# a loss that turns NaN under the ranks (tests/e2e/train_nonfinite.sh's case): every rank stops at the
# same step after the sum; one line, exit 1
refuses "-np 2, --lr 10 under unscaled fp8 forward inputs: the loss is not finite, one line" 1 \
  '^qscope: step [0-9]+: the loss is not finite \(lower --lr\?; run it without mpirun to find where values first became non-finite\)$' \
  "${MPI[@]}" -np 2 "$QS" train "${TR[@]}" --batch 4 --steps 20 --lr 10 --clip 0 --warmup 0 --op fwd.x=fp8_e4m3
check "the non-finite stop: one line from qscope" "[ \$(grep -c '^qscope' $T/err) -eq 1 ]"

# --sweep under mpirun: whole runs on the ranks, rank 0 stores them; the rows of the serial sweep
SW=(--text "$T/train.txt" --val-text "$T/val.txt" --layers 1 --dim 32 --heads 2 --ctx 16 --batch 4 --steps 6
    --eval-every 3 --val-seqs 4 --sweep recipes=fp32,mxfp4,seeds=1,2)
ROWS='import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for r in db.execute("SELECT name, status, sweep, recipe, seed, steps_done, val0, val_final, model, options, data_hash FROM train_run ORDER BY name"): print(r)
for r in db.execute("SELECT name, step, train_loss, val_loss, grad_norm, lr FROM train_step JOIN train_run ON id = run_id ORDER BY name, step"): print(r)
for r in db.execute("SELECT name, step, layer, operand, n, underflow, clipped, nonfinite FROM train_opstat JOIN train_run ON id = run_id ORDER BY name, step, layer, operand"): print(r)'
ok "serial sweep: 2 recipes x 2 seeds" "$QS" --db "$T/sw1.db" train "${SW[@]}"
ok "-np 2 sweep: 2 recipes x 2 seeds" "${MPI[@]}" -np 2 "$QS" --db "$T/sw2.db" train "${SW[@]}" --json
cp "$T/out" sw2.json
check "-np 2 sweep: 4 runs done, their rows (runs, every step, operand statistics) the serial sweep's bit for bit" \
  "$PY -c '$ROWS' sw1.db >sw1.rows && $PY -c '$ROWS' sw2.db >sw2.rows && [ \$(grep -c \"'done'\" sw2.rows) = 4 ] && cmp -s sw1.rows sw2.rows"
check "-np 2 sweep: runs on both ranks, in run order, one JSON document from rank 0" \
  "$PY -c 'import json,sys; r=json.load(open(sys.argv[1]))[\"runs\"]; sys.exit(sorted(x[\"rank\"] for x in r) != [0,0,1,1] or [x[\"name\"].split(\"-\",2)[2] for x in r] != [\"fp32-s1\",\"mxfp4-s1\",\"fp32-s2\",\"mxfp4-s2\"])' sw2.json"
before=$(dbdump "$T/sw2.db")
ok "-np 2 sweep again: the stored runs are not run again" "${MPI[@]}" -np 2 "$QS" --db "$T/sw2.db" train "${SW[@]}"
check "... four 'stored' lines, the database unchanged" "[ \$(grep -c 'stored, 0 s' '$T/out') = 4 ] && [ \"\$(dbdump '$T/sw2.db')\" = '$before' ]"

# a rank killed or stopped mid-run: one line from qscope, no checkpoint, nothing printed
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
rank_pid() {   # rank_pid JOB RANK: the pid of that rank of the mpirun started as JOB, once it runs
  local c i
  for i in $(seq 400); do
    for c in $(descendants "$1"); do
      tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$c"; return; }
    done
    sleep 0.05
  done
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
stopped=()
cleanup() {
  local p
  for p in "${stopped[@]}"; do
    [ "$(cat /proc/"$p"/comm 2>/dev/null)" = qscope ] && { kill -CONT "$p"; kill -KILL "$p"; } 2>/dev/null
  done
}
at_exit cleanup
# disrupt SIGNAL RANK NAME: a long -np 2 run, RANK sent SIGNAL once it has computed for 0.3 s
disrupt() {
  local sig=$1 r=$2 job start v
  rm -rf ckk
  start=$(date +%s)
  timeout 60 "${MPI[@]:2}" -np 2 "$QS" --rank-timeout 3 train "${TR[@]}" --batch 8 --steps 100000 --out "$T/ckk" \
    --name "$3" >dis.out 2>dis.err &
  job=$!
  v=$(rank_pid $job "$r")
  for _ in $(seq 200); do [ -n "$v" ] && [ "$(cpu_ticks "$v")" -ge 30 ] && break; sleep 0.05; done
  [ -n "$v" ] && { [ "$sig" = STOP ] && stopped+=("$v"); kill -"$sig" "$v"; }
  wait $job; drc=$?
  secs=$(($(date +%s) - start))
  victim=$v
}
disrupt KILL 1 killed
check "kill -9 of rank 1: found and killed" "[ -n '$victim' ]"
check "kill -9 of rank 1: the job ends, non-zero (mpirun's exit $drc after $secs s)" \
  "[ $drc -ne 0 ] && [ $drc -ne 124 ] && [ $secs -lt 40 ]"
check "kill -9 of rank 1: one line from qscope" \
  "[ \$(grep -c '^qscope:' dis.err) = 1 ] && grep -qx 'qscope: the MPI job was stopped (a rank died, was killed or interrupted); the training run stopped and nothing more of it was stored' dis.err"
check "kill -9 of rank 1: no JSON printed, no checkpoint" "[ ! -s dis.out ] && [ ! -e ckk/model.safetensors ]"
check "kill -9 of rank 1: the stored run keeps its completed steps, as many as steps_done" \
  "sqlite3 '$QSCOPE_DB' \"SELECT steps_done, (SELECT count(*) FROM train_step WHERE run_id = id), status FROM train_run WHERE name = 'killed'\" | grep -qE '^([1-9][0-9]*)\\|\\1\\|running$'"
disrupt STOP 1 stopped
check "SIGSTOP of rank 1: exit 1 by itself (exit $drc after $secs s)" "[ -n '$victim' ] && [ $drc -eq 1 ] && [ $secs -lt 40 ]"
check "SIGSTOP of rank 1: one line naming rank 1" \
  "[ \$(grep -c '^qscope:' dis.err) = 1 ] && grep -qE '^qscope: rank 1 was silent for [0-9]+ s \(--rank-timeout 3\): the MPI job was stopped; the training run stopped and nothing more of it was stored$' dis.err"
check "SIGSTOP of rank 1: no JSON printed, no checkpoint" "[ ! -s dis.out ] && [ ! -e ckk/model.safetensors ]"

# a rank killed during a sweep: one line, and nothing of the sweep stored
rm -f swk.db*
"$QS" --db "$T/swk.db" runs >/dev/null 2>&1
before=$(dbdump "$T/swk.db")
timeout 60 "${MPI[@]:2}" -np 2 "$QS" --db "$T/swk.db" train "${SW[@]}" --steps 100000 >swk.out 2>swk.err &
job=$!
v=$(rank_pid $job 1)
for _ in $(seq 200); do [ -n "$v" ] && [ "$(cpu_ticks "$v")" -ge 30 ] && break; sleep 0.05; done
[ -n "$v" ] && kill -9 "$v"
wait $job; krc=$?
check "kill -9 of rank 1 in a sweep: non-zero (exit $krc), one line from qscope" \
  "[ -n '$v' ] && [ $krc -ne 0 ] && [ $krc -ne 124 ] && [ \$(grep -c '^qscope:' swk.err) = 1 ] && grep -q '^qscope: the MPI job was stopped' swk.err"
check "kill -9 of rank 1 in a sweep: nothing stored" "[ \"\$(dbdump '$T/swk.db')\" = '$before' ]"
done_testing
