#!/usr/bin/env bash
# The workbench as reviewers saw it (issue 28): results written by another process show without a
# key press (cursors stay on their items); a coarse log axis at 80x24 puts no series on a tick row a
# decade away; the Model view's KL plot keeps its rows at 80x24 with long config labels, its x title
# on its own line; its table columns stay in line with "-" cells and show small values in
# significant digits.  Screens through tmux (tests/e2e/tui_lib.bash).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tui_lib.bash"   # start, screen, wait_for, keys, golden

python3 - "$T/evtext.txt" <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(70)) + "\n")
PY
eval_run() { "$QS" llm eval --model "$FIX/llm/tiny.gguf" --text "$T/evtext.txt" --ctx 64 --chunks 4 "$@" >/dev/null 2>&1 || echo "# llm eval $* failed"; }
eval_run --config a=mxfp4 --config kv=fp8_e4m3
"$QS" gen gaussian --shape 64x64 --seed 1 --name live:first >/dev/null 2>&1

# ---- results written by another process show within seconds, no key pressed
COLS=100 ROWS=30 start NO_COLOR=1
shown_within() {  # shown_within SECONDS REGEX : the screen shows it before SECONDS pass (no key sent)
  for _ in $(seq $(($1 * 10))); do screen | grep -qE -- "$2" && return 0; sleep 0.1; done
  return 1
}
"$QS" gen gaussian --shape 64x64 --seed 2 --name live:second >/dev/null 2>&1
check "a tensor made by another process appears in the Tensors view within 5 s, no key pressed" 'shown_within 5 "live:second"'
keys 8
wait_for "kv=fp8_e4m3"
keys j j
check "the Model view's cursor is on kv=fp8_e4m3" 'screen | grep -q "^>  kv=fp8_e4m3 "'
eval_run --config w=mxfp4
check "an llm eval run by another process shows in the Model view within 5 s" 'shown_within 5 "^ +w=mxfp4 +\* "'
check "... and the cursor stays on its configuration" 'screen | grep -q "^>  kv=fp8_e4m3 "'
keys G
eval_run --config a=nvfp4 --ctx 32   # another run (ctx 32): listed before... after the first run
check "a new run shows, the cursor stays on the last row it was on" 'shown_within 5 "a=nvfp4" && screen | grep -q "^>  a=nvfp4 " || screen | grep -q "^>  w=mxfp4 "'
keys Q

# ---- the Kernels view at 80x24: 14 attention kernels from 5e-7 to 0.15 on 4 rows of a log axis
export QSCOPE_DB="$T/k.db"
"$QS" attn --L 256,512 >/dev/null 2>&1 || echo "# attn failed"
sqlite3 "$QSCOPE_DB" "INSERT INTO result(tensor_hash,kind,format,options,tool_version,data) VALUES
 ('k:resq','resq','int4','{}','$(cat "$ROOT/VERSION")','{\"xlabel\":\"layer\",\"ylabel\":\"relative error\",\"series\":[{\"name\":\"no correction\",\"x\":[0,1,2,3],\"y\":[0.2,0.25,0.3,0.33]}]}'),
 ('k:msd','msd','mxfp4','{}','$(cat "$ROOT/VERSION")','{\"ylabel\":\"effective bits\",\"series\":[{\"name\":\"mxfp4\",\"x\":[1,2,3,4],\"y\":[3.1,4.0,4.6,5.0]}]}')"
COLS=80 ROWS=24 start NO_COLOR=1
keys 6
wait_for "attn L=256..512"
# series F-J are the MXFP4 kernels (0.14-0.15); C, D, E, L, N are 1.4e-3-3.3e-3; A, B 5e-7
check "80x24 Kernels: the 0.15 series (F-J) are drawn, on no row labelled 10^-2 or below" \
  'screen | grep -Eq "^ +│ +[F-J]" && ! screen | grep -Eq "^10⁻[0-9]┤.*[F-J]"'
check "... the 1.5e-3 series are on the 10^-2 row, the 5e-7 ones on the 10^-6 row" \
  'screen | grep -Eq "^10⁻²┤ +[CDELN]" && screen | grep -Eq "^10⁻⁶┤ +[AB]"'
golden kernels-attn-80x24
keys Q

# ---- the KL plot at 80x24 with long config labels (the legend goes under the plot), under a list
# of two runs (it was 3 rows high, its title and x title beside 3 rows of data)
export QSCOPE_DB="$T/kl.db"
eval_run --config a=mxfp4 --config kv=fp8_e4m3 --config w=mxfp4 --config a=nvfp4   # a first run fills the list
eval_run --ctx 32 --config w=mxfp4,a=mxfp4,kv=fp8_e4m3 --config w=nvfp4,a=nvfp4,kv=fp8_e4m3 --config w=hif4,a=hif4,kv=fp8_e5m2
COLS=80 ROWS=24 start NO_COLOR=1
keys 8
wait_for "reference PPL"
keys j j j j j                       # the second run's line: its three configs in one plot
wait_for "^>reference PPL .* ctx 32"
plot_rows() {  # rows of the plot's data area: from the first y-axis row to the axis line
  screen | awk '/[┤│]/ && !/└/ {n++} /└/ {exit} END {print n + 0}'
}
check "80x24 Model view, a run of 3 long-labelled configs: the KL plot has at least 6 rows" '[ "$(plot_rows)" -ge 6 ]'
check "the x title has its own line, under the tick labels" 'screen | grep -A2 "└" | tail -n 1 | grep -Eq "^ +KL divergence per token \(nats\) *$"'
golden model-long-labels-80x24
keys j
check "one config: at least 6 rows too" '[ "$(plot_rows)" -ge 6 ]'
check "long labels are cut in the middle, where they differ (~)" 'screen | grep -Eq "^>  w=mxf~kv=fp8_e4m3\*"'
keys Q

# ---- table cells: a "-" cell keeps the row in line; small values keep their digits
export QSCOPE_DB="$T/cells.db"
eval_run --config a=mxfp4 --config kv=fp8_e4m3 --config w=mxfp4
sqlite3 "$QSCOPE_DB" "UPDATE result SET data = json_set(data, '$.dppl_rel_ci95', json('[null, null]')) WHERE kind = 'llm_eval' AND format = 'a=mxfp4';
 UPDATE result SET data = json_set(data, '$.dppl_rel', 0.00003, '$.dppl_rel_ci95', json('[0.00001, 0.00005]'), '$.dp_rms', 0.00003)
 WHERE kind = 'llm_eval' AND format = 'kv=fp8_e4m3'"
for size in "80 24" "120 40"; do
  read -r COLS ROWS <<<"$size"
  start NO_COLOR=1
  keys 8
  wait_for "kv=fp8_e4m3"
  screen | grep -E "^[> ]  (a=mxfp4|kv=fp8_e4m3|w=mxfp4) " >"$T/rows"
  check "${COLS}x$ROWS Model view: the config rows (one with a '-' interval) end in the same column" \
    '[ "$(wc -l <"$T/rows")" = 3 ] && [ "$(python3 -c "import sys; print(len({len(l.rstrip()) for l in open(sys.argv[1], encoding=\"utf-8\")}))" "$T/rows")" = 1 ]'
  check "${COLS}x$ROWS: a small dPPL interval keeps a significant digit (+3e-3±2e-3, not +0.00±0.00)" \
    'grep -Eq " \+3e-3±2e-3 " "$T/rows" && ! grep -Eq "[+-]0(\.0+)?±0(\.0+)? " "$T/rows"'
  check "${COLS}x$ROWS: an RMS dp of 3e-05 is not 0.0000" 'grep "kv=fp8_e4m3" "$T/rows" | grep -q "3e-05" && ! grep -q " 0\.0000" "$T/rows"'
  golden "model-cells-${COLS}x$ROWS"
  keys Q
done
# ---- the RL view: `llm score` runs count prompts, training runs steps; one axis never holds both
export QSCOPE_DB="$T/rl.db"
"$QS" import-log "$FIX/rl/small.csv" --run train-steps >/dev/null 2>&1 || echo "# import-log failed"
"$QS" llm score --model "$FIX/llm/tiny.gguf" --tokens 8 --seqs 2 --prompts 3 --name score-prompts >/dev/null 2>&1 || echo "# llm score failed"
COLS=100 ROWS=30 start NO_COLOR=1
keys 5
wait_for "score-prompts"
check "RL view, an llm score run selected: the x axis counts prompts and the training run is left out, said so" \
  'wait_for "prompt \(llm score: no training\)" && screen | grep -q "mean |dlogp| (nats) per prompt" && screen | grep -q "1 training run not drawn"'
keys j
check "... a training run selected: the x axis counts training steps, the llm score run left out, said so" \
  'wait_for "^ +training step *$" && screen | grep -q "per step" && screen | grep -q "1 llm score run not drawn"'
keys Q

done_testing
