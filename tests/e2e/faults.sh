#!/usr/bin/env bash
# Bad input and faults: every malformed file gives one line "FILE: what is wrong", exit 1, and
# leaves the database byte-for-byte unchanged; SIGKILL mid-import leaves a consistent database;
# an import and readers run at the same time without "database is locked".
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

$QS gen gaussian --shape 32x32 --name seed >/dev/null 2>&1
$PY -c "import numpy as np; np.save('$T/good.npy', np.ones((4,4), np.float32))"
sqlite3 "$QSCOPE_DB" 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null
dump0=$(dbdump); file0=$(sha256sum < "$QSCOPE_DB")

# malformed inputs made here, plus the committed corpus
mkdir -p "$T/bad"
: > "$T/bad/empty.npy"
head -c 1000 /dev/urandom > "$T/bad/noise.safetensors"
head -c 70 "$T/good.npy" > "$T/bad/truncated.npy"
printf 'GGUF\003\000\000\000' > "$T/bad/short.gguf"
printf 'PK\005\006' > "$T/bad/eocd-only.npz"
n=0
for f in "$T"/bad/* "$FIX"/bad/*; do
  [ -f "$f" ] || continue
  n=$((n + 1))
  b=$(basename "$f")
  # exit 1 (never a signal) with one line, and the whole of stderr is that line
  refuses "$b rejected" 1 "^qscope: $(printf '%s' "$f" | sed 's/[][\\.*^$+?(){}|]/\\&/g'): " "$QS" import "$T/good.npy" "$f"
  echo "#   ${b}: $(head -1 "$T/err")"
  check "$b: error message is a single line" "[ \$(wc -l < $T/err) -eq 1 ]"
done
check "at least 20 malformed files tried" "[ $n -ge 20 ]"
check "database dump unchanged after all bad imports" "[ \"\$(dbdump)\" = '$dump0' ]"
check "database file byte-for-byte unchanged" "[ \"\$(sha256sum < $QSCOPE_DB)\" = '$file0' ]"
check "the good file in the same command was not stored either" "no_match name $QS ls good --json"
refuses "--keep-going still exits 1, naming the bad file" 1 "noise.safetensors: " $QS import --keep-going "$T/good.npy" "$T/bad/noise.safetensors"
ok "... and stores the good file" bash -c "$QS ls good --json > $T/kg.json && grep -q name $T/kg.json"

# SIGKILL in the middle of a large embedded import
$PY -c "import numpy as np; np.save('$T/big.npy', np.random.default_rng(1).standard_normal((8192, 8192)).astype(np.float32))"
$QS import --copy "$T/big.npy" >/dev/null 2>&1 &
pid=$!
# kill once the write transaction is well under way (its WAL has grown past 32 MB of 256)
for _ in $(seq 1 600); do
  [ "$(stat -c %s "$QSCOPE_DB-wal" 2>/dev/null || echo 0)" -gt 33554432 ] && break
  sleep 0.02
done
alive=0; kill -0 $pid 2>/dev/null && alive=1
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
check "import was still running when killed" "[ $alive = 1 ]"
ok "database is consistent after SIGKILL" $QS check
check "no half-imported tensor is visible" "no_match name $QS ls big --json"
ok "the next import completes" $QS import --copy "$T/big.npy"
ok "and the data reads back with every chunk" $QS check

# an import and readers at the same time
$PY -c "import numpy as np; np.save('$T/big2.npy', np.random.default_rng(2).standard_normal((4096, 8192)).astype(np.float32))"
$QS import --copy "$T/big2.npy" >"$T/imp.out" 2>"$T/imp.err" &
pid=$!
reads=0 readfail=0
while kill -0 $pid 2>/dev/null; do
  if $QS ls >/dev/null 2>"$T/rerr" && $QS info >/dev/null 2>>"$T/rerr"; then reads=$((reads + 1)); else readfail=$((readfail + 1)); cat "$T/rerr"; fi
done
wait $pid; irc=$?
check "import alongside readers succeeded" "[ $irc = 0 ]"
check "readers never failed ($reads ok, $readfail failed)" "[ $readfail = 0 ] && [ $reads -ge 1 ]"
check "no 'database is locked' anywhere" "! grep -qi locked $T/imp.err $T/rerr"
# two writers: the second waits for the first (busy timeout) instead of failing
$PY -c "import numpy as np; np.save('$T/c1.npy', np.ones((2048,4096),np.float32)); np.save('$T/c2.npy', np.zeros((2048,4096),np.float32))"
$QS import --copy "$T/c1.npy" >/dev/null 2>"$T/w1" & p1=$!
$QS import --copy "$T/c2.npy" >/dev/null 2>"$T/w2" & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
check "two concurrent imports both succeed" "[ $r1 = 0 ] && [ $r2 = 0 ]"
ok "final database is consistent" $QS check
done_testing
