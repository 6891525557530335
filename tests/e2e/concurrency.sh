#!/usr/bin/env bash
# Concurrent use: writers (analyze and quant --name of an embedded tensor, gen, import --copy, rm,
# report, import-log, ais, msd/resq --tensor, sim grpo) and readers (ls, show, info) run at the same
# time for a while, then the workbench analyzes while another process commits.
# No command fails and none reports "database is locked": a second writer waits for the first.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
DUR=${QS_CONC_SECONDS:-6}
R="$FIX/rl"

$QS gen gaussian --shape 512x1024 --seed 1 --name emb >/dev/null 2>&1
$PY -c "import numpy as np; np.save('$T/small.npy', np.random.default_rng(3).standard_normal((64,256)).astype(np.float32))"
$QS import --copy "$T/small.npy" >/dev/null 2>&1
$QS quant emb -f int8 --name q0 >/dev/null 2>&1
check "setup: an embedded tensor" "$QS ls emb --json | grep -q '\"blob\"'"

end=$((SECONDS + DUR))
log="$T/logs"; mkdir -p "$log"
# each loop appends one line per command: "rc=N cmd"; stderr of every command is kept
loop() {   # loop NAME CMD...
  local name=$1; shift
  local i=0
  while [ $SECONDS -lt $end ]; do
    i=$((i + 1))
    "$@" "$i" >/dev/null 2>>"$log/$name.err"
    echo "rc=$? $name $i" >>"$log/rc"
  done
}
analyze_emb() { $QS analyze emb --force -f fp8_e4m3,fp8_e5m2,mxfp4,mxfp8_e4m3,nvfp4,int8,int4,bf16; }
quant_emb()   { $QS quant emb -f mxfp4 --name "q$1"; }
gen_tiny()    { $QS gen uniform --shape 4x4 --seed "$1" --name "tiny$(( $1 % 5 ))"; }
import_rm()   { $QS import --copy "$T/small.npy" --prefix "imp$1" && $QS rm "imp$1"; }
# (report reads tensors nobody replaces meanwhile: one replaced between lookup and read is a conflict,
# "changed or removed by another process since it was looked up", not a lock)
report_q()    { $QS report -o "$T/rep$1" --format json --tensors 'q*' --formats mxfp4,int8; }
rl_log()      { $QS import-log "$R/small.csv" --run "run$1" && $QS ais "run$1"; }
kernels()     { $QS msd --tensor emb --N 64 --model none && $QS resq --tensor emb -f nvfp4 --n 32 &&
                $QS sim grpo --formats mxfp4 --methods exact,none --seeds 1 --steps 6 --batch 8 --T 6 --name "sim$1"; }
readers()     { $QS ls && $QS show emb && $QS info && $QS ls --stale; }

loop analyze analyze_emb & pids="$!"
loop quant quant_emb & pids="$pids $!"
loop gen gen_tiny & pids="$pids $!"
loop import import_rm & pids="$pids $!"
loop report report_q & pids="$pids $!"
loop rl rl_log & pids="$pids $!"
loop kernels kernels & pids="$pids $!"
loop read readers & pids="$pids $!"
wait $pids

n_total=$(wc -l <"$log/rc")
n_fail=$(grep -vc '^rc=0 ' "$log/rc")
n_analyze=$(grep -c '^rc=0 analyze' "$log/rc")
n_gen=$(grep -c '^rc=0 gen' "$log/rc")
locked=$(cat "$log"/*.err | grep -ci 'locked\|busy')
check "$n_total commands ran, every one succeeded ($n_fail failed)" "[ $n_fail = 0 ]"
[ "$n_fail" = 0 ] || { grep -v '^rc=0 ' "$log/rc" | head -5; head -5 "$log"/*.err; } | sed 's/^/# /'
check "no 'database is locked' or busy error ($locked)" "[ $locked = 0 ]"
check "analyze completed while others committed ($n_analyze runs, $n_gen gens)" "[ $n_analyze -ge 1 ] && [ $n_gen -ge 3 ]"
check "every writer made progress" "(for w in quant import report rl kernels read; do grep -q \"^rc=0 \$w\" $log/rc || exit 1; done)"
ok "database is consistent afterwards" $QS check
# the stored results are the ones a quiet rerun computes
$QS analyze emb --json -f mxfp4 >"$T/a1.json" 2>/dev/null
$QS analyze emb --json --force -f mxfp4 >"$T/a2.json" 2>/dev/null
check "stored mxfp4 result equals a recomputation" \
  "$PY -c \"import json; a=json.load(open('$T/a1.json'))[0]; b=json.load(open('$T/a2.json'))[0]; assert a['cached'] and a['metrics']==b['metrics']\""

# llm score keeps its model work outside the write transaction: meanwhile another writer gets the
# write lock within 1 s (it does not hold the lock for the whole run)
export QSCOPE_DB="$T/llm.db"
$QS info >/dev/null 2>&1
$QS llm score --model "$FIX/llm/tiny.gguf" --tokens 200 --seqs 12 --prompts 4 --name long >/dev/null 2>"$T/score.err" & spid=$!
probes=0 blocked=0
while kill -0 $spid 2>/dev/null; do
  probes=$((probes + 1))
  sqlite3 -cmd ".timeout 1000" "$QSCOPE_DB" "BEGIN IMMEDIATE; COMMIT;" >/dev/null 2>&1 || blocked=$((blocked + 1))
  sleep 0.05
done
wait $spid; src=$?
check "llm score succeeded" "[ $src = 0 ] && [ \"\$(sqlite3 $QSCOPE_DB 'SELECT count(*) FROM rl_token')\" -gt 1000 ]"
check "a writer never waited 1 s for it ($blocked of $probes probes blocked)" "[ $blocked = 0 ] && [ $probes -ge 3 ]"

# the workbench's worker: an analysis started in the TUI while another process keeps committing
if command -v tmux >/dev/null; then
  SOCK="qsconc$$"
  TM() { tmux -L "$SOCK" -f /dev/null "$@"; }
  at_exit 'TM kill-server 2>/dev/null'
  export QSCOPE_DB="$T/tui.db"
  $QS gen gaussian --shape 1024x2048 --seed 1 --name big >/dev/null 2>&1
  TM new-session -d -s w -x 100 -y 30 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 QSCOPE_DB='$QSCOPE_DB' '$QS' tui; sleep 600"
  for _ in $(seq 300); do TM capture-pane -p -t w | grep -q Tensors && break; sleep 0.1; done
  TM send-keys -t w g; sleep 0.3; TM send-keys -t w j Enter   # analyze 'big' under the 12 default formats
  gens=0 genfail=0
  tend=$((SECONDS + 120))
  while [ $SECONDS -lt $tend ]; do   # commit tiny tensors until the analysis ends (bounded)
    gens=$((gens + 1))
    $QS gen uniform --shape 4x4 --seed $gens --name "tiny$((gens % 3))" >/dev/null 2>&1 || genfail=$((genfail + 1))
    TM capture-pane -p -t w | grep -qE "analyzed big|stopped" && break
  done
  TM capture-pane -p -t w >"$T/screen"
  check "workbench analysis completes while $gens gens commit ($genfail failed)" \
    "grep -q 'analyzed big: 12 formats computed' $T/screen && [ $genfail = 0 ]"
  grep -q "analyzed big" "$T/screen" || tail -2 "$T/screen" | sed 's/^/# /'
  TM kill-server 2>/dev/null
else
  skip "workbench analysis completes while gens commit" "tmux not installed"
fi
done_testing
