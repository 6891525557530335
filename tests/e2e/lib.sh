# Helpers for end-to-end tests: TAP output, a fresh database per test file, fixtures dir.
# Usage in a test: `source "$(dirname "$0")/lib.sh"`, then `ok "description" command...`.
set -u
QS=${QS_BIN:?QS_BIN not set (run through tests/run.sh)}
ROOT=${QS_ROOT:?}
FIX="$ROOT/tests/fixtures"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export QSCOPE_DB="$T/test.db"
export NO_COLOR=1
_n=0

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
dbdump() { sqlite3 "${1:-$QSCOPE_DB}" .dump 2>/dev/null | sha256sum | cut -d' ' -f1; }
