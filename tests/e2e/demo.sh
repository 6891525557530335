#!/usr/bin/env bash
# The first run: `qscope demo` (what `make run` opens) gives every view of the workbench real content —
# tensors with the MiniLM sample, an RL run, stored msd / attn / resq results — and the natural path
# Enter, Enter, Enter from a tensor reaches a block.  Driven through tmux at 80 x 24.
source "$(dirname "$0")/lib.sh"

SOCK="qsdemo$$"
TM() { tmux -L "$SOCK" -f /dev/null "$@"; }
at_exit 'TM kill-server 2>/dev/null'
S() { sqlite3 "$QSCOPE_DB" "$1"; }

ok "qscope demo" bash -c "cd $T && $QS demo 2> $T/demo.err"
check "the generated tensors and the MiniLM sample" \
  "[ \$(S \"SELECT count(*) FROM tensor WHERE name GLOB 'demo:*'\") -ge 9 ] && [ \$(S \"SELECT count(*) FROM tensor WHERE name GLOB 'minilm-sample:*'\") -ge 1 ]"
check "a simulated RL run with logged tokens" \
  "[ \$(S \"SELECT count(*) FROM rl_run WHERE name GLOB 'sim/grpo/*'\") -ge 2 ] && [ \$(S 'SELECT count(*) FROM rl_token') -gt 0 ]"
check "stored msd, attn and resq results and a trajectory" \
  "(for k in msd attn resq trajectory; do [ \$(S \"SELECT count(*) FROM result WHERE kind='\$k'\") -ge 1 ] || exit 1; done)"
ok "a second demo leaves the database as it is" bash -c "$QS demo 2> $T/demo2.err && grep -q 'already has the demo set' $T/demo2.err"
check "... one set of runs" "[ \$(S \"SELECT count(*) FROM rl_run WHERE name = 'sim/grpo/mxfp4/none/seed0'\") -eq 1 ]"

command -v tmux >/dev/null || { skip "the workbench part" "tmux not installed"; done_testing; }
TM new-session -d -s w -x 80 -y 24 \
  "cd '$T' && env NO_COLOR=1 LANG=C.UTF-8 LC_ALL=C.UTF-8 QSCOPE_DB='$QSCOPE_DB' '$QS' tui; sleep 600"
screen() { TM capture-pane -p -t w >"$T/.screen" && cat "$T/.screen"; }   # whole: see tui.sh
wait_for() { for _ in $(seq 300); do screen | grep -qE -- "$1" && return 0; sleep 0.1; done; return 1; }
keys() { TM send-keys -t w "$@"; sleep 0.3; }
view() { screen > "$T/$1.txt"; }

check "Tensors: the demo set and the real-weight sample" 'wait_for "^>demo:" && screen | grep -q "^ minilm-sampl"'
view tensors
keys Enter
check "Formats: every format of the first tensor analysed in the background" 'wait_for "analyzed demo:gaussian-1d"'
view formats
check "... the cursor on a block format, not on bf16" '! grep -q "^>bf16" "$T/formats.txt" && grep -q "^>" "$T/formats.txt"'
keys Enter
check "Enter: the Blocks view shows that format's blocks" 'wait_for "blocks of [0-9]+"'
keys Enter
check "Enter: the Inspector shows the block's elements" 'wait_for "RMSE" && screen | grep -q "INPUT"'
keys 3
check "Histogram: the error histograms are drawn" 'wait_for "relative error" && screen | grep -q "└"'
keys 5
check "RL runs: the simulated runs and their mismatch plot" 'wait_for "sim/grpo/mxfp4/none/seed0" && wait_for "training step"'
keys Tab
check "RL, Tab: the stored trajectory" 'wait_for "RESULT" && screen | grep -q "└"'
keys 6
check "Kernels: the msd, attn and resq results, one plotted" \
  'wait_for " resq " && screen | grep -Eq " msd[: ]" && screen | grep -q " attn " && screen | grep -q "└"'   # at 80 columns WHAT names the kind
view kernels
check "... its many series leave the data area alone: the legend is cut short ('+N more')" \
  'grep -Eq "\+[0-9]+ more" "$T/kernels.txt"'
keys Q
done_testing
