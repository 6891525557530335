#!/usr/bin/env bash
# The test runner can fail: tests/run.sh on fake suites (a skip, a suite that plans nothing, a plan
# that does not match, a missing plan, a crash, a script that ends early, a cmocka skip, a unit
# binary never built) counts each as it should, in normal and in strict mode (QS_STRICT_SKIPS=1),
# and its last line is "N passed, N failed, N skipped"; lib.sh's no_match and refuses never pass a
# command killed by a signal.
source "$(dirname "$0")/lib.sh"

mkdir -p "$T/e2e" "$T/src" "$T/bin"
fake() { printf '%s\n' "$2" >"$T/e2e/$1.sh"; }   # fake NAME SCRIPT
fake pass      $'echo "ok 1 - a"\necho "ok 2 - b"\necho "1..2"'
fake skip      $'echo "ok 1 - a"\necho "ok 2 - b # SKIP tmux not installed"\necho "1..2"'
fake skipall   'echo "1..0 # SKIP tmux not installed"'
fake skipcpu   $'echo "ok 1 - x # SKIP cpu: no AVX-512 here"\necho "1..1"'
fake mismatch  $'echo "ok 1 - a"\necho "ok 2 - b"\necho "1..3"'
fake noplan    'echo "ok 1 - a"'
fake twoplans  $'echo "1..1"\necho "ok 1 - a"\necho "1..1"'
fake crash     $'echo "ok 1 - a"\necho "1..1"\nkill -SEGV $$'
fake notok     $'echo "ok 1 - a"\necho "not ok 2 - b"\necho "1..2"'
fake early     $'source "$QS_ROOT/tests/e2e/lib.sh"\nok a true\n[ -n "$QS_ROOT" ] && exit 0\nok b true\ndone_testing'
fake libskip   $'source "$QS_ROOT/tests/e2e/lib.sh"\nskip_all "mpirun is not installed"'
fake libfull   $'source "$QS_ROOT/tests/e2e/lib.sh"\nok a true\nskip b "asan: not here"\ncheck c "[ 1 = 1 ]"\ndone_testing'
# a cmocka binary: its plan first, a skip with tu_skip's reason comment just before it
: >"$T/src/test_fake.c"; : >"$T/src/test_unbuilt.c"
printf '%s\n' '#!/bin/sh' 'echo 1..2' 'echo "ok 1 - test_a"' 'echo "# SKIP cpu: no AVX2, so no SIMD path to compare"' \
  'echo "not ok 2 # SKIP test_b"' 'echo "# ok - tests"' >"$T/bin/test_fake"
chmod +x "$T/bin/test_fake"

# rt WANT-LAST-LINE WANT-RC [VAR=VALUE...] [SUITE...] : tests/run.sh on the fake suites
rt() {
  local want=$1 wrc=$2 rc vars=(); shift 2
  while [[ "${1:-}" == *=* ]]; do vars+=("$1"); shift; done
  env -u QS_STRICT_SKIPS -u QS_FUZZ_SMOKE QS_TEST_E2E_DIR="$T/e2e" QS_TEST_UNIT_SRC="$T/src" QS_TEST_UNIT_BIN="$T/bin" \
    ${vars[@]+"${vars[@]}"} bash "$ROOT/tests/run.sh" "$@" >"$T/rt.out" 2>"$T/rt.err" </dev/null
  rc=$?
  [ "$rc" = "$wrc" ] && [ "$(tail -n 1 "$T/rt.out")" = "$want" ] && return 0
  echo "exit $rc, wanted $wrc; last line wanted: $want" >&2; cat "$T/rt.out" "$T/rt.err" >&2; return 1
}
S=QS_STRICT_SKIPS=1
ok "a passing suite" rt "2 passed, 0 failed, 0 skipped" 0 e2e/pass
ok "a skip is counted as skipped, not passed" rt "1 passed, 0 failed, 1 skipped" 0 e2e/skip
ok "... and fails in strict mode (a missing tool)" rt "1 passed, 1 failed, 0 skipped" 1 $S e2e/skip
check "... saying which skip" "grep -q 'skipped under QS_STRICT_SKIPS=1: ok 2 - b # SKIP tmux not installed' $T/rt.err"
ok "a suite that plans nothing (1..0 # SKIP) is one skipped result" rt "0 passed, 0 failed, 1 skipped" 0 e2e/skipall
ok "... and a failure in strict mode" rt "0 passed, 1 failed, 0 skipped" 1 $S e2e/skipall
ok "a cpu: skip stays a skip in strict mode" rt "0 passed, 0 failed, 1 skipped" 0 $S e2e/skipcpu
ok "a plan that does not match the results fails" rt "2 passed, 1 failed, 0 skipped" 1 e2e/mismatch
check "... saying so" "grep -q 'plan 1..3 but 2 results' $T/rt.err"
ok "no plan fails" rt "1 passed, 1 failed, 0 skipped" 1 e2e/noplan
ok "two plans fail" rt "1 passed, 1 failed, 0 skipped" 1 e2e/twoplans
ok "a suite killed by a signal fails, whatever it printed" rt "1 passed, 1 failed, 0 skipped" 1 e2e/crash
check "... saying how it exited" "grep -q 'FAIL e2e/crash: exited 139' $T/rt.err"
ok "a not ok fails" rt "1 passed, 1 failed, 0 skipped" 1 e2e/notok
ok "lib.sh: a script that exits before done_testing fails" rt "1 passed, 1 failed, 0 skipped" 1 e2e/early
check "... saying so" "grep -q 'not ok 2 - the script ended before done_testing (exit 0)' $T/rt.err"
ok "lib.sh: skip_all plans nothing, with the reason" rt "0 passed, 1 failed, 0 skipped" 1 $S e2e/libskip
ok "lib.sh: ok, skip, check and the plan at exit" rt "2 passed, 0 failed, 1 skipped" 0 $S e2e/libfull
ok "cmocka: a skip takes tu_skip's reason (cpu:), allowed in strict mode" rt "1 passed, 0 failed, 1 skipped" 0 $S test_fake
ok "a unit suite whose binary was not built fails" rt "0 passed, 1 failed, 0 skipped" 1 test_unbuilt
ok "every suite at once (fuzz-smoke only when asked)" rt "13 passed, 7 failed, 6 skipped" 1
check "one line per suite, then the totals alone" "[ \$(grep -c ' passed, ' $T/rt.out) = 15 ]"
ok "an unknown suite is a usage error (exit 2)" rt "" 2 e2e/nosuch
check "... with the usage line" "grep -q '^usage: tests/run.sh' $T/rt.err"
ok "--list names every suite, one a line" bash -c "QS_TEST_E2E_DIR=$T/e2e QS_TEST_UNIT_SRC=$T/src bash $ROOT/tests/run.sh --list > $T/list"
check "... unit, e2e and fuzz-smoke, never lib.sh" \
  "grep -qx test_fake $T/list && grep -qx e2e/pass $T/list && grep -qx fuzz-smoke $T/list && ! grep -qx e2e/lib $T/list && [ \$(wc -l < $T/list) = 15 ]"

# lib.sh's helpers for negative checks
check "no_match: a command that prints nothing and dies of a signal is no pass" "! no_match x sh -c 'kill -SEGV \$\$'"
check "no_match: a command that fails is no pass" "! no_match x false"
check "no_match: a clean run without the pattern passes" "no_match x echo y"
r=$(refuses "x" 1 "bad" sh -c 'echo bad >&2; kill -SEGV $$' 2>&1)
check "refuses: a signal is no clean refusal, whatever the message" "[[ '$r' == 'not ok '* ]]"
r=$(refuses "x" 1 "bad" sh -c 'echo bad >&2; exit 1' 2>&1)
check "refuses: exit 1 with the message is" "[[ '$r' == 'ok '* ]]"
check "dbdump: a database that cannot be dumped equals no other" "[ \"\$(dbdump $T/nodir/x.db 2>/dev/null)\" != \"\$(dbdump $T/nodir/x.db 2>/dev/null)\" ]"
done_testing
