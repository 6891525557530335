# Helpers for end-to-end tests: TAP output, a fresh database per test file, fixtures dir.
# Usage in a test: `source "$(dirname "$0")/lib.sh"`, then `ok "description" command...`, and last
# `done_testing`.  At exit lib.sh prints the plan "1..N" (tests/run.sh checks it against the results);
# a script that exits before done_testing (an `exit` in the middle, a bash error) gets one more
# "not ok" saying so.  Pipelines fail when any stage fails (pipefail): a consumer that stops reading
# early (`grep -q`, `head`) reads a file, not a pipe from a producer whose status matters.
set -u
set -o pipefail
QS=${QS_BIN:?QS_BIN not set (run through tests/run.sh)}
ROOT=${QS_ROOT:?}
FIX="$ROOT/tests/fixtures"
T=$(mktemp -d)
export QSCOPE_DB="$T/test.db"
export NO_COLOR=1
_n=0 _qs_done=0 _qs_planned=0 _qs_cleanup=()

at_exit() { _qs_cleanup+=("$1"); }   # at_exit 'SHELL CODE' : also run it at exit (before $T goes)
_qs_exit() {
  local rc=$? c
  if [ "$_qs_planned" = 0 ]; then
    if [ "$_qs_done" = 0 ]; then _n=$((_n + 1)); echo "not ok $_n - the script ended before done_testing (exit $rc)"; fi
    echo "1..$_n"
  fi
  for c in ${_qs_cleanup[@]+"${_qs_cleanup[@]}"}; do eval "$c"; done
  rm -rf "$T"
}
trap _qs_exit EXIT
done_testing() { _qs_done=1; exit 0; }   # the script's last word: every test ran
skip_all() {   # skip_all REASON : the whole script cannot run here (tests/run.sh: see its strict mode)
  echo "1..0 # SKIP $1"; _qs_planned=1 _qs_done=1; exit 0
}
skip() {       # skip DESC REASON : one test that cannot run here
  _n=$((_n + 1)); echo "ok $_n - $1 # SKIP $2"
}

ok() {   # ok DESC CMD... : passes when CMD exits 0
  local d=$1; shift
  _n=$((_n + 1))
  if "$@" >"$T/out" 2>"$T/err"; then echo "ok $_n - $d"
  else echo "not ok $_n - $d"; echo "# cmd: $*"; sed 's/^/#   /' "$T/out" "$T/err" | head -20; fi
}
fails() {  # fails DESC EXPECTED_RC CMD... : passes when CMD exits with EXPECTED_RC
  local d=$1 want=$2; shift 2
  _n=$((_n + 1))
  "$@" >"$T/out" 2>"$T/err"; local rc=$?
  if [ "$rc" -eq "$want" ]; then echo "ok $_n - $d"
  else echo "not ok $_n - $d (exit $rc, wanted $want)"; echo "# cmd: $*"; sed 's/^/#   /' "$T/out" "$T/err" | head -20; fi
}
refuses() {  # refuses DESC RC PATTERN CMD... : passes when CMD is refused cleanly: it exits RC (1 or 2,
             # never a signal) and its stderr matches the extended regex PATTERN (the one-line message)
  local d=$1 want=$2 pat=$3; shift 3
  _n=$((_n + 1))
  "$@" >"$T/out" 2>"$T/err"; local rc=$?
  if [ "$rc" -eq "$want" ] && [ "$rc" -ge 1 ] && [ "$rc" -le 2 ] && grep -qE -- "$pat" "$T/err"; then echo "ok $_n - $d"
  else echo "not ok $_n - $d (exit $rc, wanted $want with /$pat/)"; echo "# cmd: $*"; sed 's/^/#   /' "$T/out" "$T/err" | head -20; fi
}
check() {  # check DESC SHELL-EXPRESSION : passes when the expression is true
  local d=$1; shift
  _n=$((_n + 1))
  if eval "$1"; then echo "ok $_n - $d"; else echo "not ok $_n - $d"; echo "# failed: $1"; fi
}
no_match() {  # no_match PATTERN CMD... : true when CMD exits 0 and no line of its stdout matches the
              # extended regex PATTERN (bytes, C locale).  A crash that printed nothing is no pass.
  local pat=$1; shift
  "$@" >"$T/nm.out" 2>"$T/nm.err" || { echo "# no_match: $* exited $?"; sed 's/^/#   /' "$T/nm.err" | head -5; return 1; }
  ! LC_ALL=C grep -qE -- "$pat" "$T/nm.out"
}
asan_build() { grep -q __asan_init <(nm "$QS" 2>/dev/null); }   # is $QS the sanitizer build?
dbdump() {   # dbdump [DB] : a hash of the database's SQL dump; a failed dump equals no other
  local h
  if h=$(sqlite3 "${1:-$QSCOPE_DB}" .dump | sha256sum); then echo "${h%% *}"
  else echo "# dbdump: sqlite3 could not dump ${1:-$QSCOPE_DB}" >&2; echo "dump-failed-$RANDOM$RANDOM"; fi
}
