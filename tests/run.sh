#!/usr/bin/env bash
# qscope test runner.  Runs every unit-test binary (cmocka, TAP output), every end-to-end script
# in tests/e2e/ (TAP lines from tests/e2e/lib.sh) and, with QS_FUZZ_SMOKE=1, a short libFuzzer
# smoke over the committed seed corpora.  Prints a line per suite and each failure, then, last,
# "N passed, N failed, N skipped" alone on a line.  Exit status 0 when nothing failed.
#
#   tests/run.sh [SUITE...]   only the named suites: e2e/NAME (tests/e2e/NAME.sh), test_NAME (a unit
#                             binary), fuzz-smoke (run when named even without QS_FUZZ_SMOKE)
#   tests/run.sh --list       the suite names, one a line
#
# A suite fails when it exits non-zero (a crash, a timeout), when a result is "not ok", when it has
# no plan ("1..N") or more than one, or when its number of results differs from its plan.  A suite
# that plans nothing ("1..0 # SKIP why") counts as one skipped result, never as nothing.
#
# Skips.  Each "ok N - what # SKIP why" (and cmocka's "not ok N # SKIP test", whose reason is the
# "# SKIP why" comment tests/unit/test_util.h's tu_skip prints just before it) counts as skipped.
# With QS_STRICT_SKIPS=1 (`make test`, `make asan`: .ci/deps installed every tool) a skip is a
# failure unless its reason starts with a tag of a reason that holds on every such machine:
#   cpu:   this CPU lacks the feature under test (AVX2, AVX-512)
#   asan:  the sanitizer build cannot run it (ASan cannot start under `ulimit -v`)
#   data:  it needs what `make data` downloads, which `make test` never fetches
# A missing tool (tmux, mpirun, python3-numpy, script) has no tag: strict mode fails on it.
#
# The suite directories can be pointed elsewhere (tests/e2e/runner.sh runs this on fake suites):
# QS_TEST_E2E_DIR (e2e scripts), QS_TEST_UNIT_SRC (tests/unit: the unit suites' names) and
# QS_TEST_UNIT_BIN (where their binaries are, default $QS_BUILD/tests).
set -u
cd "$(dirname "$0")/.."
BUILD=${QS_BUILD:-build}
E2E_DIR=${QS_TEST_E2E_DIR:-tests/e2e}
UNIT_SRC=${QS_TEST_UNIT_SRC:-tests/unit}
UNIT_BIN=${QS_TEST_UNIT_BIN:-$PWD/$BUILD/tests}
STRICT=${QS_STRICT_SKIPS:-0}
STRICT_OK='^(cpu|asan|data):'
export QS_BIN="$PWD/$BUILD/qscope"
export QS_ROOT="$PWD"
export NO_COLOR=1

suites() {
  local f n
  for f in "$UNIT_SRC"/test_*.c; do [ -e "$f" ] && n=${f##*/} && echo "${n%.c}"; done
  for f in "$E2E_DIR"/*.sh; do [ -e "$f" ] && n=${f##*/} && [ "$n" != lib.sh ] && echo "e2e/${n%.sh}"; done
  echo fuzz-smoke
}
usage() { echo "usage: tests/run.sh [--list] [SUITE...]  (suites: tests/run.sh --list)" >&2; exit 2; }

all=$(suites)
want=()
for a in "$@"; do
  case $a in
    --list) echo "$all"; exit 0 ;;
    -h|--help) usage ;;
    -*) echo "tests/run.sh: unknown option '$a'" >&2; usage ;;
    *) grep -qxF -- "$a" <<<"$all" || { echo "tests/run.sh: unknown suite '$a'" >&2; usage; } ; want+=("$a") ;;
  esac
done
if [ ${#want[@]} -eq 0 ]; then
  for s in $all; do [ "$s" != fuzz-smoke ] || [ "${QS_FUZZ_SMOKE:-0}" = 1 ] && want+=("$s"); done
fi

pass=0 fail=0 skip=0
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

# tap LOG: "PASS FAIL SKIP" and, one a line after it, why results failed (bad plan, strict skips).
tap() {
  awk -v strict="$STRICT" -v okre="$STRICT_OK" '
    function result(bad,   r, why) {
      n++
      if (match($0, /#[ \t]*[Ss][Kk][Ii][Pp]([ \t:]|$)/)) {
        why = substr($0, RSTART + RLENGTH); sub(/^[ \t:]+/, "", why)
        if (pending != "") why = pending
        if (strict == 1 && why !~ okre) { f++; msg = msg "\nskipped under QS_STRICT_SKIPS=1: " $0 (pending != "" ? " (" pending ")" : "") }
        else s++
      } else if (bad) f++
      else p++
      pending = ""
    }
    /^# SKIP / { pending = substr($0, 8); next }
    /^ok( |$)/ { result(0); next }
    /^not ok( |$)/ { result(1); next }
    /^1\.\.[0-9]+/ {
      plans++; plan = $0; sub(/^1\.\./, "", plan); sub(/[^0-9].*/, "", plan)
      if (plan == 0) { zero = $0; sub(/^1\.\.0[ \t]*/, "", zero) }
    }
    END {
      if (plans == 0) { f++; msg = msg "\nno plan (1..N): the suite ended early or printed none" }
      else if (plans > 1) { f++; msg = msg "\n" plans " plans" }
      else if (plan + 0 != n) { f++; msg = msg "\nplan 1.." plan " but " n " results" }
      else if (n == 0) {   # 1..0: the whole suite skipped, one skipped result
        $0 = "ok - (whole suite) " (zero == "" ? "# SKIP no reason given" : zero); result(0)
      }
      printf "%d %d %d%s\n", p, f, s, msg
    }' "$1"
}

# count NAME LOG RC : count one suite's results; a crash or a bad plan counts as a failure
count() {
  local name=$1 log=$2 rc=$3 p f s why
  { read -r p f s; why=$(cat); } < <(tap "$log")
  if [ "$rc" -ne 0 ]; then why="exited $rc${why:+$'\n'}$why"; [ "$f" -eq 0 ] && f=1; fi
  if [ "$f" -gt 0 ]; then
    { echo "FAIL $name:${why:+ ${why//$'\n'/$'\n  '}}"
      # each failure with the diagnostic lines right after it (a suite's passing checks may print '#' lines too)
      awk '/^not ok/ {n = 12; print; next} /^ok / {n = 0} n > 0 && /^#/ {print; n--}' "$log" | head -60
      [ "$rc" -ne 0 ] && tail -20 "$log.err"; } >&2
  fi
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
  printf '%-34s %4d passed, %d failed, %d skipped\n' "$name" "$p" "$f" "$s"
}

for s in "${want[@]}"; do
  log="$logdir/${s//\//_}.log"
  case $s in
    test_*)
      if [ -x "$UNIT_BIN/$s" ]; then
        (cd tests && CMOCKA_MESSAGE_OUTPUT=TAP timeout 600 "$UNIT_BIN/$s") >"$log" 2>"$log.err"; rc=$?
      else echo "not built: $UNIT_BIN/$s" >"$log.err"; : >"$log"; rc=127; fi ;;
    e2e/*) timeout 900 bash "$E2E_DIR/${s#e2e/}.sh" >"$log" 2>"$log.err"; rc=$? ;;
    fuzz-smoke) bash tests/fuzz/run.sh smoke >"$log" 2>"$log.err"; rc=$? ;;
  esac
  count "$s" "$log" "$rc"
done

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
