#!/usr/bin/env bash
# qscope test runner.  Runs every unit-test binary (cmocka, TAP output), every end-to-end script
# in tests/e2e/ (TAP lines from tests/e2e/lib.sh) and, with QS_FUZZ_SMOKE=1, a short libFuzzer
# smoke over the committed seed corpora.  Prints each failure, then, last, "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
BUILD=${QS_BUILD:-build}
export QS_BIN="$PWD/$BUILD/qscope"
export QS_ROOT="$PWD"
export NO_COLOR=1
pass=0 fail=0
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

count() {  # count TAP results of one suite; a crash or a missing plan counts as a failure
  local name=$1 log=$2 rc=$3
  local p f
  p=$(grep -cE '^ok [0-9]+' "$log")
  f=$(grep -cE '^not ok [0-9]+' "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "FAIL $name: exited $rc" >&2; tail -20 "$log" >&2; fi
  if [ "$f" -gt 0 ]; then grep -E '^not ok|^#' "$log" | head -40 >&2; fi
  pass=$((pass + p)); fail=$((fail + f))
  printf '%-34s %4d passed, %d failed\n' "$name" "$p" "$f"
}

for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  n=$(basename "$t")
  (cd tests && CMOCKA_MESSAGE_OUTPUT=TAP timeout 600 "../$t") >"$logdir/$n.log" 2>&1
  count "$n" "$logdir/$n.log" $?
done

for t in tests/e2e/*.sh; do
  [ "$(basename "$t")" = lib.sh ] && continue
  n=$(basename "$t" .sh)
  timeout 900 bash "$t" >"$logdir/$n.log" 2>&1
  count "e2e/$n" "$logdir/$n.log" $?
done

if [ "${QS_FUZZ_SMOKE:-0}" = 1 ]; then
  bash tests/fuzz/run.sh smoke >"$logdir/fuzz.log" 2>&1
  count "fuzz-smoke" "$logdir/fuzz.log" $?
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
