# The workbench driven through tmux, shared by tests/e2e/tui*.sh (sourced after lib.sh; not a suite
# itself): a fresh tmux server per `start`, keys in with send-keys, screens out with capture-pane
# (timestamps and temp paths masked), golden screens in tests/e2e/golden/tui/ (QS_REGEN=1 rewrites).
GOLD="$ROOT/tests/e2e/golden/tui"
SOCK="qstui$$"
TM() { tmux -L "$SOCK" -f /dev/null "$@"; }
nstart=0
command -v tmux >/dev/null || skip_all "tmux not installed"
at_exit 'TM kill-server 2>/dev/null'
COLS=${COLS:-100} ROWS=${ROWS:-30}
start() {  # start [ENV...] : the workbench in a fresh tmux session of COLS x ROWS
  rm -f "$T/exit"
  TM kill-server 2>/dev/null
  nstart=$((nstart + 1)); SOCK="qstui$$-$nstart"   # a fresh server each time
  TM new-session -d -s w -x "$COLS" -y "$ROWS" \
    "cd '$T' && env $* LANG=C.UTF-8 LC_ALL=C.UTF-8 QSCOPE_DB='$QSCOPE_DB' QSCOPE_EXPORT_DIR='$T' '$QS' tui; echo \$? > '$T/exit'; sleep 600"
  wait_for "Tensors"
}
# (through a file: a `screen | grep -q` that stops reading early must not break the pipe of a producer
# still writing, which pipefail would count as a failure)
screen() { TM capture-pane -p -t w | sed -e "s|$T|<tmp>|g" -e 's/20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9:]*Z/<time>/g' \
  -e 's/[01][0-9]-[0-3][0-9] [0-2][0-9]:[0-5][0-9]/<time>/g' >"$T/.screen" && cat "$T/.screen"; }
wait_for() {  # wait_for REGEX : until the screen shows it (30 s: sanitizer builds on a loaded machine are slow)
  for _ in $(seq 300); do screen | grep -qE -- "$1" && return 0; sleep 0.1; done
  return 1
}
keys() { TM send-keys -t w "$@"; sleep 0.3; }
golden() {  # golden NAME : the screen equals tests/e2e/golden/tui/NAME.txt (within 10 s: keys are asynchronous)
  local name=$1 f="$GOLD/$1.txt"
  if [ "${QS_REGEN:-0}" = 1 ]; then sleep 0.5; screen >"$T/$name.txt"; mkdir -p "$GOLD"; cp "$T/$name.txt" "$f"
  else for _ in $(seq 100); do screen >"$T/$name.txt"; cmp -s "$f" "$T/$name.txt" && break; sleep 0.1; done; fi
  _n=$((_n + 1))
  if [ -f "$f" ] && diff -u "$f" "$T/$name.txt" >"$T/diff"; then echo "ok $_n - screen $name matches its golden"
  else echo "not ok $_n - screen $name differs from $f"; sed 's/^/#   /' "$T/diff" | head -40; fi
}
