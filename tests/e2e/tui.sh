#!/usr/bin/env bash
# The workbench (`qscope tui`) driven through tmux: keys go in with send-keys, screens come out with
# capture-pane and are compared with golden screens in tests/e2e/golden/tui/ (timestamps and temp
# paths masked).  Regenerate after an intended change with QS_REGEN=1 and read the diff.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tui_lib.bash"   # start, screen, wait_for, keys, golden

# fixed content: nine seeded generated tensors, two RL runs, a stored trajectory (with a title, as `qscope ais` writes),
# an attention, a ResQ and two MSD results (one malformed)
# (the tensors of `qscope demo`, made with `qscope gen` so that a change of the demo set does not move
# the goldens)
mk() { "$QS" gen "$@" >/dev/null 2>&1 || echo "# gen $* failed"; }
mk gaussian --shape 1024x1024 --scale 0.02 --seed 1 --name demo:gaussian-w
mk laplace --shape 1024x1024 --scale 0.02 --seed 2 --name demo:laplace-w
mk student-t --shape 1024x1024 --scale 0.02 --nu 3 --seed 3 --name demo:student-t3-w
mk student-t --shape 512x512 --scale 0.02 --nu 10 --seed 4 --name demo:student-t10-w
mk uniform --shape 256x256 --scale 1 --seed 5 --name demo:uniform
mk lognormal --n 65536 --seed 6 --name demo:lognormal
mk llm-act --shape 512x2048 --seed 7 --name demo:llm-act
mk llm-act --shape 256x1536 --scale 0.5 --seed 8 --name demo:llm-act-ffn
mk gaussian --n 1048576 --seed 9 --name demo:gaussian-1d
sed "s/@VERSION@/$(cat "$ROOT/VERSION")/g" <<'EOF' | sqlite3 "$QSCOPE_DB"
INSERT INTO rl_run(id,name,label,source) VALUES (1,'bf16-vs-fp8','precision mismatch without training','sim'),(2,'fp8-ais','AIS-R correction','sim');
WITH RECURSIVE s(step) AS (SELECT 0 UNION ALL SELECT step+1 FROM s WHERE step<39),
 q(seq) AS (SELECT 0 UNION ALL SELECT seq+1 FROM q WHERE seq<3),
 p(pos) AS (SELECT 0 UNION ALL SELECT pos+1 FROM p WHERE pos<15)
INSERT INTO rl_token(run_id,step,seq,pos,token_id,lp_rollout,lp_train,mask)
 SELECT r.id, step, seq, pos, (step*7+seq*13+pos*5)%1000, -1.0 - ((step*31+seq*17+pos*7)%100)/100.0,
   -1.0 - ((step*31+seq*17+pos*7)%100)/100.0 + (r.id*0.01 + step*0.0005*r.id) * (((step*13+seq*7+pos*3)%21)-10)/10.0, 1
 FROM s, q, p, (SELECT 1 AS id UNION SELECT 2) r;
INSERT INTO result(tensor_hash,kind,format,options,tool_version,data) VALUES
 ('run:bf16-vs-fp8','trajectory','fp8','{"run":"bf16-vs-fp8","set":"mismatch"}','@VERSION@','{"title":"bf16-vs-fp8: mismatch by method","xlabel":"training step","ylabel":"mean |dlogp|","series":[{"name":"TIS","x":[0,1,2,3,4,5],"y":[0.01,0.012,0.015,0.02,0.03,0.05]},{"name":"AIS-R","x":[0,1,2,3,4,5],"y":[0.01,0.011,0.011,0.012,0.012,0.013]}]}'),
 ('k:resq','resq','int4','{}','@VERSION@','{"xlabel":"layer","ylabel":"relative error","series":[{"name":"no correction","x":[0,1,2,3],"y":[0.2,0.25,0.3,0.33]},{"name":"ResQ","x":[0,1,2,3],"y":[0.05,0.06,0.06,0.07]}]}'),
 ('k:attn','attn','fp8_e4m3','{}','@VERSION@','{"ylabel":"max abs error","series":[{"name":"fp8","x":[128,256,512,1024],"y":[0.001,0.002,0.003,0.005]},{"name":"mxfp4","x":[128,256,512,1024],"y":[0.01,0.02,0.025,0.04]}]}'),
 ('k:msd','msd','mxfp4','{}','@VERSION@','{"ylabel":"effective bits","series":[{"name":"mxfp4","x":[1,2,3,4],"y":[3.1,4.0,4.6,5.0]}]}'),
 ('k:bad','msd','broken','{}','@VERSION@','{"nope":1}');
EOF
# stored `llm eval` results of the tiny GGUF model on a fixed text (the Model view)
python3 - "$T/evtext.txt" <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(70)) + "\n")
PY
"$QS" llm eval --model "$FIX/llm/tiny.gguf" --text "$T/evtext.txt" --ctx 64 --chunks 6 --config a=mxfp4 --config kv=fp8_e4m3 \
  --config w=mxfp4 >/dev/null 2>&1 || echo "# llm eval failed"
"$QS" llm sensitivity --model "$FIX/llm/tiny.gguf" --text "$T/evtext.txt" --ctx 64 --chunks 4 --format mxfp4 --kl-target 0.05 \
  >/dev/null 2>&1 || echo "# llm sensitivity failed"

COLS=100 ROWS=30
# A PNG that decodes: signature, IHDR, inflated IDAT of the right size, IEND (python3 is only a test tool)
png_ok() {
  /usr/bin/python3 - "$1" <<'EOF'
import sys, struct, zlib
d = open(sys.argv[1], 'rb').read()
assert d[:8] == b'\x89PNG\r\n\x1a\n'
i, idat, text, w = 8, b'', {}, 0
while i < len(d):
    n, t = struct.unpack('>I4s', d[i:i + 8]); c = d[i + 8:i + 8 + n]; i += 12 + n
    if t == b'IHDR': w, h, bd, ct = struct.unpack('>IIBB', c[:10])
    if t == b'IDAT': idat += c
    if t == b'tEXt': k, v = c.split(b'\0', 1); text[k.decode()] = v.decode('latin-1')
raw = zlib.decompress(idat)
assert len(raw) == h * (1 + w * 3), (len(raw), w, h)
assert 'qscope:command' in text and 'qscope:database' in text, text
EOF
}

# ---- Tensors, Formats (results computed in the background), Histogram, Blocks, Inspector
start NO_COLOR=1
golden tensors
# the mouse (X10 reports, as ncurses asks of this TERM): a click selects a row, the wheel scrolls
mouse() { TM send-keys -t w -l $'\e[M'"$(printf "\\x$(printf %x $((32 + $1)))\\x$(printf %x $((33 + $2)))\\x$(printf %x $((33 + $3)))")"; sleep 0.2; }
mouse 0 5 7; mouse 3 5 7
check "a click selects the row under the pointer" 'screen | grep -q "^>demo:llm-act-ffn " && screen | grep -q "Tensors 5/9"'
mouse 65 5 7
check "the wheel scrolls down three rows" 'screen | grep -q "Tensors 8/9"'
mouse 64 5 7
check "and up three rows" 'screen | grep -q "Tensors 5/9"'
keys g
keys j Enter
wait_for "analyzed demo:gaussian-w" || echo "# analysis did not finish"
golden formats
check "the Formats cursor starts on the best block format at <= 4.5 bits (not bf16, which has no blocks)" \
  'screen | grep -q "^>hif4 "'
keys g                               # the cursor stays where the user puts it
# the workbench stores what `qscope analyze --blocks` stores: the CLI reuses all 12 results
"$QS" analyze demo:gaussian-w --blocks --json \
  -f bf16,fp8_e4m3,fp8_e5m2,hif8,mxfp8_e4m3,mxfp6_e2m3,mxfp4,nvfp4,hif4,m2xfp4,int8:gran=row,int4:block=32 >"$T/an.json" 2>/dev/null
check "analyze --blocks reuses the 12 results the workbench computed" '[ "$(grep -c "\"cached\": true" "$T/an.json")" = 12 ]'
keys s s
golden formats-sorted-eff
keys s s s s s
keys Tab
wait_for "relative error"
golden histogram
keys v v v
golden histogram-values
keys e
check "e exports the histogram as a PNG (path in the status line)" 'wait_for "exported <tmp>/qscope-value-hist"'
check "the exported PNG decodes and carries provenance" 'png_ok "$T"/qscope-value-hist-demo_gaussian-w-bf16.png'
# a block format's value histogram is the CLI's: Q(x) drawn, the grid labelled as one block's
nj=0
for _ in $(seq 12); do screen | grep -q "on the grid of nvfp4" && break; keys j; nj=$((nj + 1)); done
check "value histogram of nvfp4: Q(x) and the grid of one block, as qscope plot value-hist draws it" \
  'wait_for "Q\(x\) under nvfp4" && screen | grep -q "nvfp4 values (block absmax"'
for _ in $(seq $nj); do keys k; done
keys 2
keys g j j j j j j
keys Enter
wait_for "blocks of 32"
golden blocks-mxfp4
keys w
golden blocks-worst
keys Enter
wait_for "E8M0 scale"
golden inspector-mxfp4-nvfp4
# the inspector re-encodes the block itself: its RMSE must be the one the analysis stored
same_rmse() {  # line 2 ends with the stored RMSE; the first "RMSE" line below it is format A's
  local f="$T/$1.txt" a b
  a=$(sed -n 2p "$f" | sed -n 's/.*RMSE //p'); b=$(grep -m1 '^ *RMSE ' "$f" | awk '{print $2}')
  [ -n "$a" ] && [ "$a" = "$b" ]
}
check "the re-encoded block has the stored block RMSE (mxfp4)" 'same_rmse inspector-mxfp4-nvfp4'
keys j j j
keys b
wait_for "side by side"
golden inspector-second-format
keys Right
golden inspector-next-block
keys b b b b b b b                   # ... int8:row, int4:b32, bf16, fp8_e4m3, fp8_e5m2, hif8
wait_for "side by side: hif8"
golden inspector-hif8-fields
keys h h h

# ---- search, filter, sort in Tensors
keys 1
keys / llm Enter
golden search-llm
keys n
keys F
keys t3 Enter
golden filter-t3
keys F C-u Enter
keys s s s
golden sort-kurtosis

# ---- RL runs, stored trajectories, Kernels (one malformed result), Help
keys 5
wait_for "bf16-vs-fp8"
golden rl-runs
keys m
golden rl-runs-p95
keys Tab
golden rl-stored-trajectory
keys 6
golden kernels
keys j
golden kernels-msd-malformed
keys 8 j
wait_for "reference PPL"
golden model
keys s
check "s sorts the configs by KL mean (smallest first)" 'wait_for "configs sorted by KL mean" && screen | grep -A3 "reference PPL" | sed -n "2p" | grep -q "kv=fp8_e4m3"'
check "sorting keeps the cursor on its configuration (a=mxfp4, now last of its run)" 'screen | grep -q "^>  a=mxfp4 "'
golden model-sort-kl
keys S
check "S reverses: largest KL first" 'wait_for "KL mean, descending" && screen | grep -A3 "reference PPL" | sed -n "2p" | grep -q "a=mxfp4"'
check "... the cursor still on a=mxfp4" 'screen | grep -q "^>  a=mxfp4 "'
keys s
check "s again sorts by dPPL" 'wait_for "configs sorted by dPPL"'
# Enter (Right, l) on a configuration: its statistics in place of the plot, in the Model view; h: the plot again
keys Enter
check "Enter in the Model view shows the config's statistics (not another view)" \
  'wait_for "a=mxfp4: 186 tokens scored" && screen | head -1 | grep -q "qscope  Model " && screen | grep -Eq "^  KL mean +0\.9[0-9]+ ± 0\.1"'
golden model-details
check "the standard errors keep significant digits (no ±0.0000)" '! screen | grep -Eq "±0\.0+( |$)"'
keys h
check "h returns to the KL plot" 'wait_for "fraction of tokens per bin" && screen | head -1 | grep -q "qscope  Model "'
keys Right
check "Right shows the statistics too" 'wait_for "a=mxfp4: 186 tokens scored"'
keys l
check "l returns to the plot (Enter, Right and l toggle)" 'wait_for "fraction of tokens per bin"'
keys g v
golden model-run-cdf
keys e
check "e exports the KL plot as a PNG" 'wait_for "exported <tmp>/qscope-kl-" || { screen | sed "s/^/# /"; false; }'
check "the exported PNG decodes and carries provenance" 'png_ok "$(ls "$T"/qscope-kl-*.png | head -1)"'
keys v s
keys G
wait_for "sensitivity to mxfp4"
golden model-sensitivity
check "the plan's BF16 cells are marked B and the note says so" 'screen | grep -q "B: BF16 in the plan for mean KL <= 0.05 (met: measured KL"'
keys g
keys '?'
golden help

# ---- the : command line (runs in the worker; output view; list reloaded)
keys : "gen gaussian --n 4096 --seed 3 --name cmdline:g" Enter
wait_for "command finished"
golden command-output
keys 1 G
golden tensors-after-command

# ---- f: choose formats; o: options (validated, then the missing result is computed)
keys 1 g Enter
wait_for "(rounding|underflow|clipping|NaN/Inf) [0-9<>]|exact *$"   # MAIN ERROR: the results are loaded
keys f
wait_for "formats to compare"
golden choose-formats
keys c j Space j j j j j j j j j j j j j j j Space Enter   # clear, then bf16 and mxint8
keys g
wait_for "^>bf16"
golden formats-two
keys j o
wait_for "options of mxint8"
keys j Right Right Right
golden options-popup
keys Enter
wait_for "mxint8:rceil"
wait_for "analyzed demo:uniform: 1 format computed and stored" || echo "# analysis did not finish"
golden formats-rceil
# a non-default option shows in the row's label: saturation on bf16 reads bf16:sat
keys k o
wait_for "options of bf16"
keys j j j j j Right Enter
check "o sets saturation and the row says bf16:sat" 'wait_for "^>bf16:sat "'
check "the status line says it was computed and stored" 'wait_for "analyzed demo:uniform: 1 format computed and stored"'

# ---- a long job runs in the background: the interface answers, Esc cancels
keys 1 g
keys : bench Enter                   # `qscope bench` takes many seconds
wait_for "running: qscope bench"
keys j
check "keys work while a job runs (cursor moved, job still running)" 'screen | grep -q "Tensors 2/10" && screen | grep -q "Esc cancels"'
keys Escape
check "Esc cancels the job and says so" 'wait_for "command cancelled"'
check "the cancelled command's output is shown" 'wait_for "qscope bench"'
keys 1 g

# ---- resize: re-layout at once; too small: a message
TM resize-window -t w -x 72 -y 20; sleep 0.5
golden resized-72x20
check "72 columns: the Tensors view still says how many columns it dropped" 'screen | grep -Eq "\[\+3 columns at [0-9]+\+ cols\]"'
TM resize-window -t w -x 40 -y 10; sleep 0.5
golden too-small
TM resize-window -t w -x "$COLS" -y "$ROWS"; sleep 0.5

# ---- clean quit: exit 0, terminal restored (no alternate screen)
keys Q
for _ in $(seq 50); do [ -s "$T/exit" ] && break; sleep 0.1; done
check "Q quits with exit status 0" '[ "$(cat "$T/exit" 2>/dev/null)" = 0 ]'
check "the terminal is restored (alternate screen off)" '[ "$(TM display -p -t w "#{alternate_on}")" = 0 ]'

# ---- a common 80 x 24 terminal is first class: every view fits (columns drop, names are cut in the
# middle, the legend stays off the data, hint bar and status line abbreviate by rule)
COLS=80 ROWS=24 start NO_COLOR=1
golden tensors-80x24
check "80x24 Tensors: the dropped columns are named, with the width that shows them" 'screen | grep -Eq "\[\+2 columns at [0-9]+\+ cols: OUTLIERS, RESULTS\]"'
keys / gaussian-w Enter Enter
wait_for "^>bf16 +16\.000"
golden formats-80x24
keys Enter                           # the natural path: Enter, Enter, Enter lands in a block
check "Enter from Formats shows the blocks of the best format" 'wait_for "blocks of 64"'
golden blocks-80x24
keys Enter
golden inspector-80x24
check "the re-encoded block has the stored block RMSE (hif4)" 'same_rmse inspector-80x24'
# the widest code fields (bf16's 16 bits) beside hif4 at 80 columns: no number is cut (issue 28)
for _ in $(seq 12); do screen | grep -q "side by side: bf16" && break; keys b; done
golden inspector-80x24-bf16
whole_numbers() {  # every element row ends in a whole number, every detail line in ")"
  screen | grep -E "^[> ] +[0-9]+ " | awk '{print $NF}' | grep -Evq '^-?[0-9.]+(e[-+][0-9]+)?%?$' && return 1
  screen | grep -E "^ [AB] [a-z]" | tail -n 2 | grep -vq ')$' && return 1
  return 0
}
check "80x24 inspector with bf16: every element's Q(x) and error whole, the detail lines whole" whole_numbers
for _ in $(seq 12); do screen | grep -q "side by side: int8:row" && break; keys b; done
check "80x24 inspector with int8:row: numbers whole" whole_numbers
keys 3
wait_for "relative error"
golden histogram-80x24
keys 5
wait_for "bf16-vs-fp8"
check "at 80 columns the steps' range gives way before the label is cut" 'screen | grep -q "precision mismatch without training *2560 *40 *160"'
golden rl-80x24
keys Tab
check "80x24 stored trajectories: a cut WHAT ends in '...'" 'wait_for "^[> ][0-9]+ +[^ ].*\.\.\. +[a-z]"'
keys Tab
keys 6
golden kernels-80x24
keys 8 j
golden model-80x24
# a wide table in the Output view scrolls sideways, the title line says which columns show
cp "$FIX/llm/tiny.gguf" "$T/tiny.gguf"   # relative to $T (the workbench runs there): the golden holds no path
keys : "llm eval --model tiny.gguf --text evtext.txt --ctx 64 --chunks 6 --config a=mxfp4" Enter
wait_for "command finished" || echo "# the command did not finish"
check "80x24 Output: a table wider than the screen says so in the title line" 'screen | grep -Eq "\[columns 1-78 of [0-9]+, h/l scroll\]"'
check "... and the hint bar names the keys" 'screen | tail -n 1 | grep -q "h/l scroll"'
check "the right-hand columns are off screen at first" '! screen | grep -qE "RMS dp +cor"'
keys l l l
check "l scrolls right: the right-hand columns show" 'wait_for "RMS dp +cor" && screen | grep -Eq "\[columns [0-9]+-[0-9]+ of [0-9]+"'
golden output-80x24-scrolled
keys h h h
check "h scrolls back to the first column" 'wait_for "\[columns 1-78 of"'
keys 2 f
wait_for "formats to compare"
check "the format chooser at 80x24 says it has more formats than rows" 'screen | grep -Eq "1-[0-9]+ of [0-9]+, j/k scrolls"'
check "... and cut descriptions end in '...'" 'screen | grep -Eq "fp8_e4m3 +OCP FP8 E4M3FN: .*\\.\\.\\. *│"'
keys Escape
keys '?'
golden help-80x24
check "the hint bar of every 80-column screen fits whole: it still ends in its help key" \
  '(for f in "$T"/*-80x24.txt; do tail -n 1 "$f" | grep -Eq "\\? help|q close" || exit 1; done)'
keys Q

# ---- a large terminal, 120 x 40
COLS=120 ROWS=40 start NO_COLOR=1
golden tensors-120x40
keys Enter
wait_for "analyzed demo:gaussian-1d|stored"
golden formats-120x40
keys 1 / gaussian-w Enter Enter      # 16384 blocks: the longest numbers of the panel
wait_for "^>bf16 +16\.000"
keys Enter
wait_for "blocks of 64"
check "120x40 Blocks: the side panel's lines are whole (the error rank ends in the block count)" \
  'screen | grep -Eq "rank +[0-9]+ of [0-9]+$" && ! screen | grep -Eq "rank .* by err?o?$"'
golden blocks-120x40
keys h h
keys 5
wait_for "bf16-vs-fp8"
check "the RL list gives the logged steps with their range, as qscope runs does" 'wait_for "bf16-vs-fp8 .* 40 \(0\.\.39\) "'
golden rl-120x40
keys 6
golden kernels-120x40
keys 8 j
golden model-120x40
keys Q

# ---- TERM=vt100: ASCII glyphs, no colour
start TERM=vt100
golden vt100-tensors
keys j Enter
wait_for "analyzed demo:gaussian-1d" || echo "# analysis did not finish"
keys g j j j j j j Enter
wait_for "blocks of 32"
golden vt100-blocks
keys Enter
golden vt100-inspector
check "the re-encoded block has the stored block RMSE (mxfp4, 1-D)" 'same_rmse vt100-inspector'
keys 8 j
golden vt100-model
check "ASCII: the Model view writes +- and no other non-ASCII character" \
  'screen | grep -q "+29.4+-90.6" && ! screen | LC_ALL=C grep -q "[^ -~]"'
keys q q q q
for _ in $(seq 50); do [ -s "$T/exit" ] && break; sleep 0.1; done
check "q from the first view quits with exit status 0" '[ "$(cat "$T/exit" 2>/dev/null)" = 0 ]'

# ---- Ctrl-C: the terminal is restored all the same (exit 130)
start NO_COLOR=1
keys C-c
for _ in $(seq 50); do [ -s "$T/exit" ] && break; sleep 0.1; done
check "Ctrl-C ends the workbench with status 130" '[ "$(cat "$T/exit" 2>/dev/null)" = 130 ]'
check "and restores the terminal" '[ "$(TM display -p -t w "#{alternate_on}")" = 0 ]'

# ---- colour on (NO_COLOR unset): same text, colour attributes present
start -u NO_COLOR
keys / gaussian-w Enter
keys Enter
wait_for "(rounding|underflow|clipping|NaN/Inf) [0-9<>]|exact *$"
check "with colour the screen carries SGR colour codes" 'TM capture-pane -e -p -t w >"$T/.sgr" && grep -q $'"'"'\e\[3[0-9]'"'"' "$T/.sgr"'
check "with colour the text is the same as without" 'diff -q <(screen | sed -n 1,27p) <(sed -n 1,27p "$GOLD/formats.txt") >/dev/null'
keys Q

# ---- activations beyond E4M3's 448: the Formats row says why fp8_e4m3 reads -inf
start NO_COLOR=1
keys / llm-act Enter
keys Enter
wait_for "analyzed demo:llm-act" || wait_for "analyzed demo:llm-act" || echo "# analysis did not finish"
check "fp8_e4m3 on outliers beyond 448: -inf, and MAIN ERROR gives the share of values that became NaN" \
  'screen | grep -Eq "^.fp8_e4m3 .* -inf .* NaN/Inf [0-9.]+%"'
TM resize-window -t w -x 80 -y 24; sleep 0.5
check "where MAIN ERROR does not fit, EFF BITS says NaN/Inf instead of -inf" 'screen | grep -Eq "^.fp8_e4m3 +8\.000 +NaN/Inf +-inf "'
keys Q

# ---- a monkey: 600 pseudo-random keys (fixed seed) over every view; the workbench must survive
start NO_COLOR=1
KEYSET=(j k g G h l Enter Escape Tab / n N s S f o r v L a w b m e 1 2 3 4 5 6 7 '?' PPage NPage Left Right Up Down Space x c)
seed=${QS_MONKEY_SEED:-12345}
for batch in $(seq ${QS_MONKEY_BATCHES:-30}); do
  ks=()
  for _ in $(seq 20); do seed=$(( (seed * 1103515245 + 12345) % 2147483648 )); ks+=("${KEYSET[$(( (seed >> 8) % ${#KEYSET[@]} ))]}"); done
  TM send-keys -t w "${ks[@]}"; sleep 0.15
  [ -s "$T/exit" ] && break
done
sleep 1
keys Escape Escape 1
if [ -s "$T/exit" ]; then check "the workbench survives 600 random keys" 'false'   # q from the first view quits: start again
else check "the workbench survives 600 random keys" 'wait_for "qscope"'; fi
keys Q
for _ in $(seq 50); do [ -s "$T/exit" ] && break; sleep 0.1; done
check "and quits cleanly after them" '[ "$(cat "$T/exit" 2>/dev/null)" = 0 ]'

# ---- a tensor bf16 holds exactly: the Pareto plot names the format it cannot place, as `plot pareto` does
/usr/bin/python3 -c "import numpy as np; np.save('$T/exact.npy', (np.arange(-64, 64, dtype=np.float32) / 8).reshape(8, 16))"
QSCOPE_DB="$T/exact.db" "$QS" import --copy "$T/exact.npy" >/dev/null 2>&1
ROWS=40 QSCOPE_DB="$T/exact.db" start NO_COLOR=1   # room for the plot under 12 rows
keys Enter
wait_for "analyzed exact" || echo "# analysis did not finish"
check "the Pareto plot under the Formats table says bf16 is exact and not drawn" 'wait_for "not shown: exact on this data: bf16"'
keys Q

# ---- metrics stored without per-block data (`report` or `analyze` first, as a new user may): the
# workbench still computes the blocks, so Enter -> Enter from a tensor lands on a Blocks map
QSCOPE_DB="$T/noblk.db" "$QS" gen gaussian --shape 256x256 --seed 1 --name g >/dev/null 2>&1
QSCOPE_DB="$T/noblk.db" "$QS" report -o "$T/noblk" --claims none >/dev/null 2>&1
QSCOPE_DB="$T/noblk.db" start NO_COLOR=1
keys Enter
wait_for "analyzed g" || echo "# analysis did not finish"
keys Enter
check "Enter -> Enter after a report: the Blocks view has blocks, not 'No per-block results'" 'wait_for "blocks of [0-9]+ \(along rows\)"'
keys Q

# ---- the Kernels list at 80x24: a long WHAT is shown whole (KIND, which WHAT repeats, and the
# year and seconds of CREATED give way first)
QSCOPE_DB="$T/kx.db" "$QS" msd --M 16 --K 1024 --N 1024 --bits-samples 65536 >/dev/null 2>&1
COLS=80 ROWS=24 QSCOPE_DB="$T/kx.db" start NO_COLOR=1
keys 6
check "80x24 Kernels list: the msd experiment's WHAT is whole" 'wait_for "msd: [0-9]+ recipes x [0-9]+ passes, GEMM 16x1024x1024 gaussian +<time> *$"'
keys Q

# ---- a configuration without one finite row (issue 28; stored before the rule: PPL 1, KL 0 beside
# scored 0): the Model view says FAILED with its count, never those numbers
sqlite3 "$QSCOPE_DB" "UPDATE result SET data = json_set(data, '$.scored', 0, '$.ppl', 1.0, '$.kl_mean', 0.0,
  '$.nonfinite.logit_rows', 186) WHERE kind = 'llm_eval' AND format = 'kv=fp8_e4m3'"
start NO_COLOR=1
keys 8
check "Model view: the failed config reads FAILED (186 of 186 rows non-finite), no statistics" \
  'wait_for "kv=fp8_e4m3 +FAILED \(186 of 186 rows non-finite\): no statistics" && ! screen | grep -E "kv=fp8_e4m3 .*[0-9]\.[0-9]"'
keys Q
for size in "80 24" "120 40"; do   # the same at a common and a wide terminal (the wide one has more columns)
  read -r COLS ROWS <<<"$size"
  start NO_COLOR=1
  keys 8
  check "${COLS}x$ROWS Model view: FAILED with its count, no statistics" \
    'wait_for "kv=fp8_e4m3 +FAILED \(186 of 186 rows non-finite\): no statistics" && ! screen | grep -E "kv=fp8_e4m3 .*[0-9]\.[0-9]"'
  keys j j
  keys Enter
  check "${COLS}x$ROWS: its statistics say FAILED too, no numbers" 'wait_for "FAILED: 186 of 186 rows non-finite, no statistics" && ! screen | grep -Eq "^  KL mean +[0-9]"'
  keys Q
done
COLS=100 ROWS=30

export QSCOPE_DB="$T/empty.db"
start NO_COLOR=1
golden empty-tensors
keys 5
golden empty-rl
keys 6
golden empty-kernels
keys 8
golden empty-model
keys Q
fails "tui without a terminal is a usage error" 2 "$QS" tui </dev/null
check "the message says a terminal is needed" 'grep -q "needs a terminal" "$T/err"'
fails "an unknown format in --formats is a usage error" 2 "$QS" tui --formats mxfp4,nope
check "which names the format" 'grep -q "unknown format .nope." "$T/err"'
fails "an unknown option is a usage error" 2 "$QS" tui --bogus
ok "info prints the database summary" "$QS" info
done_testing
