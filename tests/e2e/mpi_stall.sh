#!/usr/bin/env bash
# A rank that stalls under `mpirun` (SIGSTOP: it sends nothing at all) ends the job after
# --rank-timeout seconds with one line naming it, exit 1, the database unchanged; a stalled rank 0
# is found by the others alike.  A unit of work longer than the timeout is not silence (the beats
# come from a thread).  --rank-timeout takes a whole number of seconds.
source "$(dirname "$0")/lib.sh"

refuses "--rank-timeout abc: a usage error" 2 '^qscope: --rank-timeout needs a whole number of seconds' "$QS" --rank-timeout abc ls
refuses "--rank-timeout -1: a usage error" 2 '^qscope: --rank-timeout needs a whole number' "$QS" --rank-timeout=-1 ls
refuses "--rank-timeout without a value: a usage error" 2 '^qscope: --rank-timeout needs' "$QS" --rank-timeout
ok "--rank-timeout 0 without mpirun: accepted" "$QS" --rank-timeout 0 formats
check "qscope --help documents --rank-timeout and its default" "'$QS' --help | grep -q 'rank-timeout SECONDS (default 300'"

if ! command -v mpirun >/dev/null 2>&1; then
  skip "mpi stall" "mpirun is not installed (Debian: openmpi-bin)"
  done_testing
fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPI=(mpirun --oversubscribe)
# LeakSanitizer off inside the ranks of the sanitizer build: Open MPI's own allocations outlive
# MPI_Finalize, partly in dlclose'd components with no name to suppress (see mpi.sh)
asan_build && MPI+=(-x "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
[ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)

# the processes this script stopped: resumed and killed on the way out, whatever happened
stopped=()
cleanup() {
  local p
  for p in "${stopped[@]}"; do
    [ "$(cat /proc/"$p"/comm 2>/dev/null)" = qscope ] && { kill -CONT "$p"; kill -KILL "$p"; } 2>/dev/null
  done
}
at_exit cleanup
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

cd "$T"
"$QS" gen gaussian --shape 2048x1024 --seed 9 -o long.npy >/dev/null 2>&1
"$QS" --db base.db import long.npy >/dev/null 2>&1
LONG=$(for k in $(seq 1 60); do printf 'mxfp4:round=sr:seed=%d,' $k; done)
before=$(dbdump base.db)

# stall NP RANK: run a long sweep on NP ranks with --rank-timeout 3, SIGSTOP RANK once it computes
stall() {
  local np=$1 r=$2 job v start
  rm -f s.db*; cp base.db s.db
  start=$(date +%s)
  timeout 60 "${MPI[@]}" -np "$np" "$QS" --rank-timeout 3 --db "$T/s.db" analyze --all -f "${LONG%,}" -j 1 >stall.out 2>stall.err &
  job=$!
  v=$(rank_pid $job "$r")
  for _ in $(seq 200); do [ -n "$v" ] && [ "$(cpu_ticks "$v")" -ge 30 ] && break; sleep 0.05; done
  [ -n "$v" ] && { stopped+=("$v"); kill -STOP "$v"; }
  wait $job; src=$?
  secs=$(($(date +%s) - start))
  victim=$v
}

stall 2 1
check "SIGSTOP of rank 1 (-np 2): found and stopped mid-run" "[ -n '$victim' ]"
check "SIGSTOP of rank 1: the job ends by itself with exit 1 (exit $src after $secs s)" "[ $src -eq 1 ] && [ $secs -lt 40 ]"
check "SIGSTOP of rank 1: one line from qscope, naming rank 1" \
  "[ \$(grep -c '^qscope:' stall.err) = 1 ] && grep -qE '^qscope: rank 1 was silent for [0-9]+ s \(--rank-timeout 3\): the MPI job was stopped; nothing of it was stored$' stall.err"
check "SIGSTOP of rank 1: no row printed" "! grep -q mxfp4 stall.out"
check "SIGSTOP of rank 1: the database unchanged" "[ \"\$(dbdump s.db)\" = '$before' ]"
check "SIGSTOP of rank 1: the stopped rank is gone" "! kill -0 $victim 2>/dev/null || [ \"\$(awk '{print \$3}' /proc/$victim/stat)\" = Z ]"

stall 3 2
check "SIGSTOP of rank 2 (-np 3): exit 1 (exit $src after $secs s)" "[ -n '$victim' ] && [ $src -eq 1 ] && [ $secs -lt 40 ]"
check "SIGSTOP of rank 2: one line, naming rank 2" \
  "[ \$(grep -c '^qscope:' stall.err) = 1 ] && grep -q '^qscope: rank 2 was silent for' stall.err"
check "SIGSTOP of rank 2: the database unchanged" "[ \"\$(dbdump s.db)\" = '$before' ]"

stall 2 0
check "SIGSTOP of rank 0: the other rank ends the job, exit 1 (exit $src after $secs s)" "[ -n '$victim' ] && [ $src -eq 1 ] && [ $secs -lt 40 ]"
check "SIGSTOP of rank 0: one line, naming rank 0" \
  "[ \$(grep -c '^qscope:' stall.err) = 1 ] && grep -qE '^qscope: rank 1: rank 0 was silent for [0-9]+ s' stall.err"
check "SIGSTOP of rank 0: the database unchanged" "[ \"\$(dbdump s.db)\" = '$before' ]"

# a unit far longer than the timeout (ais.degrade: seconds on rank 1; amla.error on rank 0) is work, not silence
"$QS" --db one.db claims --quick --only 'a*' >claims1.txt 2>/dev/null
ok "--rank-timeout 2, a unit of many seconds: the job succeeds" "${MPI[@]}" -np 2 "$QS" --rank-timeout 2 --db "$T/np.db" claims --quick --only 'a*'
check "--rank-timeout 2: the single process's claims" "cmp -s '$T/out' claims1.txt"
# without the watchdog (0) the layer runs as before
rm -f s.db*; cp base.db s.db
ok "--rank-timeout 0 under mpirun: runs" "${MPI[@]}" -np 2 "$QS" --rank-timeout 0 --db "$T/s.db" analyze --all -f mxfp4,nvfp4 -j 1
check "--rank-timeout 0: both results stored" "[ \"\$(sqlite3 s.db 'SELECT count(*) FROM result')\" -ge 2 ]"
done_testing
