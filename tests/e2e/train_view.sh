#!/usr/bin/env bash
# Stored training runs shown: `qscope plot loss` (PNG, terminal, refusals), the report's "Training
# runs" section and the workbench's Training view (golden screens through tmux, as tests/e2e/tui.sh),
# on a database made by SQL inserts (deterministic): sweeps of bf16 and hif4 over three seeds, mxfp4
# over two, and a lone fp32 run of another model that is still running.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

# PNG facts from the file itself (as tests/e2e/plot.sh): size, tEXt chunks, IDAT inflates to the size
pnginfo() {
  $PY - "$1" <<'PY'
import struct, sys, zlib
b = open(sys.argv[1], 'rb').read()
assert b[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
p, info, idat = 8, {}, b''
while p < len(b):
    n, t = struct.unpack('>I4s', b[p:p + 8]); d = b[p + 8:p + 8 + n]
    assert zlib.crc32(t + d) & 0xffffffff == struct.unpack('>I', b[p + 8 + n:p + 12 + n])[0], 'bad CRC'
    if t == b'IHDR': info['size'] = '%dx%d' % struct.unpack('>II', d[:8])
    elif t == b'tEXt': k, v = d.split(b'\0', 1); info[k.decode()] = v.decode('latin-1')
    elif t == b'IDAT': idat += d
    p += 12 + n
raw = zlib.decompress(idat)
w, h = map(int, info['size'].split('x'))
assert len(raw) == h * (1 + 3 * w), 'unexpected pixel data size'
for k in sorted(info): print('%s=%s' % (k, info[k]))
PY
}

# an empty database first: nothing to plot
$QS info >/dev/null 2>&1 || echo "# info failed"
refuses "plot loss without training runs is refused" 1 "no training runs yet" $QS plot loss -o "$T/x.png"
check "no PNG was written" "[ ! -e '$T/x.png' ]"

# the runs: validation every 5 steps; at step 20 it is 1.9 + 0.1 * seed + the recipe's offset
# (bf16 0, hif4 0.1, mxfp4 0.2): bf16 2.0/2.1/2.2, hif4 2.1/2.2/2.3, mxfp4 2.2/2.3
sqlite3 "$QSCOPE_DB" <<'SQL'
WITH r(id, name, recipe, seed, off) AS (VALUES (1,'bf16-s1','bf16',1,0.0),(2,'bf16-s2','bf16',2,0.0),(3,'bf16-s3','bf16',3,0.0),
  (4,'hif4-s1','hif4',1,0.1),(5,'hif4-s2','hif4',2,0.1),(6,'hif4-s3','hif4',3,0.1),(7,'mxfp4-s1','mxfp4',1,0.2),(8,'mxfp4-s2','mxfp4',2,0.2))
INSERT INTO train_run(id, name, recipe, seed, sweep, status, steps, steps_done, val0, val_final, model, options, data_hash,
  tool_version, created_at, finished_at)
SELECT id, name, recipe, seed, 'pre', 'done', 20, 20, 5.5, 1.9 + 0.1 * seed + off, '{"layers":2,"dim":64}',
  '{"batch":8,"seed":' || seed || '}', 'abc', '0', '2026-01-01T00:00:00Z', '2026-01-01T00:01:00Z' FROM r;
INSERT INTO train_run(id, name, recipe, seed, status, steps, steps_done, val0, model, options, data_hash, tool_version, created_at)
VALUES (9, 'solo-fp32', 'fp32', 7, 'running', 50, 10, 5.6, '{"layers":1,"dim":32}', '{"batch":4,"seed":7}', 'def', '0', '2026-01-01T00:00:00Z');
WITH RECURSIVE s(step) AS (SELECT 1 UNION ALL SELECT step + 1 FROM s WHERE step < 20)
INSERT INTO train_step(run_id, step, train_loss, val_loss, grad_norm, lr, tok_s)
SELECT r.id, step, 1.8 + 0.1 * r.seed + (r.id - 1) / 3 * 0.1 + 40.0 / (step + 20),
  CASE WHEN step % 5 = 0 AND r.id <= 8 THEN 0.9 + 0.1 * r.seed + (r.id - 1) / 3 * 0.1 + 40.0 / (step + 20) END, 1.0, 0.001, 1000
FROM s, train_run r WHERE r.id <= 8 OR step <= 10;
WITH RECURSIVE s(step) AS (SELECT 5 UNION ALL SELECT step + 5 FROM s WHERE step < 20),
 l(layer) AS (SELECT 0 UNION ALL SELECT layer + 1 FROM l WHERE layer < 2),
 o(k, op) AS (VALUES (0,'fwd.x'),(1,'fwd.w'),(2,'dgrad.dy'),(3,'dgrad.w'),(4,'wgrad.dy'),(5,'wgrad.x'))
INSERT INTO train_opstat(run_id, step, layer, operand, n, underflow, clipped, nonfinite)
SELECT r.id, step, layer, op, 1000, CASE WHEN r.recipe = 'bf16' THEN 0 ELSE 0.001 * (k + 1) * (layer + 1) * step / 5 END,
  0.0001 * k, CASE WHEN k = 4 AND layer = 2 THEN 0.5 ELSE 0 END
FROM s, l, o, train_run r WHERE r.id <= 8;
SQL
before=$(dbdump)

# ---- plot loss: PNGs
ok "plot loss with a baseline writes a PNG" $QS plot loss -o "$T/l.png" --baseline bf16
ok "the PNG parses: chunks, CRCs, pixel data" pnginfo "$T/l.png"
check "two panels: 1000 x (600 + 300)" "pnginfo '$T/l.png' > '$T/info' && grep -qx 'size=1000x900' '$T/info'"
check "qscope:formats names the runs drawn" \
  "pnginfo '$T/l.png' > '$T/info' && grep -qx 'qscope:formats=bf16-s1,bf16-s2,bf16-s3,hif4-s1,hif4-s2,hif4-s3,mxfp4-s1,mxfp4-s2,solo-fp32' '$T/info'"
ok "plot loss without a baseline" $QS plot loss 'hif4-*' 'bf16-*' -o "$T/m.png" --width 640 --height 400
check "one panel of the size asked" "pnginfo '$T/m.png' > '$T/info' && grep -qx 'size=640x400' '$T/info'"
check "only the runs matching the patterns" "pnginfo '$T/m.png' > '$T/info' && grep -qx 'qscope:formats=bf16-s1,bf16-s2,bf16-s3,hif4-s1,hif4-s2,hif4-s3' '$T/info'"

# ---- plot loss: the terminal
ok "plot loss in the terminal" $QS plot loss -o - --term ascii --width 110 --height 30
cp "$T/out" "$T/term.txt"
check "title: the validation loss of the 9 runs" "grep -q 'validation loss of 9 training runs' '$T/term.txt'"
check "three seeds: one curve with a 95% t-interval" "grep -q 'bf16 (3 seeds, 95% t-interval)' '$T/term.txt'"
check "two seeds: min..max" "grep -q 'mxfp4 (2 seeds, min..max)' '$T/term.txt'"
check "a lone run by its name" "grep -q -- '- solo-fp32' '$T/term.txt'"
check "the bands are named under the plot" "grep -q 'dotted: its band' '$T/term.txt'"
ok "--train plots the training loss" $QS plot loss 'hif4-*' -o - --term ascii --train
check "the training loss, not the validation loss" "grep -q 'training loss of 3 training runs' '$T/out' && ! grep -q 'validation loss' '$T/out'"
ok "a baseline run by its name" $QS plot loss 'hif4-s1' -o - --term ascii --baseline bf16-s1
check "the gap panel under the loss" "grep -q 'relative gap to bf16-s1' '$T/out' && grep -qF '(loss - baseline) / baseline (%)' '$T/out'"
ok "a baseline recipe" $QS plot loss 'hif4-*' -o - --term ascii --baseline bf16 --height 40
cp "$T/out" "$T/gap.txt"
check "the gap panel names the baseline's seeds" "grep -q 'relative gap to bf16 (3 seeds, 95% t-interval)' '$T/gap.txt'"
# hif4's mean is bf16's + 0.1 at every measured step: 0% at step 0, 0.1 / 2.1 = 4.8% at step 20
check "the gap axis reaches 4.5% and not 6%" "grep -qE '^ *4\.5[+|]' '$T/gap.txt' && ! grep -qE '^ *6(\.0)?[+|]' '$T/gap.txt'"

# ---- plot loss: refusals, the database unchanged
refuses "no matching run" 1 "no training run matches 'nope\*'" $QS plot loss 'nope*' -o "$T/n.png"
check "no PNG for a refusal" "[ ! -e '$T/n.png' ]"
refuses "an unknown baseline" 1 "--baseline 'fp8' is neither a training run nor the recipe of one" $QS plot loss -o "$T/n.png" --baseline fp8
check "no PNG for an unknown baseline" "[ ! -e '$T/n.png' ]"
refuses "--val and --train together" 2 "exclude each other" $QS plot loss -o - --val --train
refuses "--baseline belongs to plot loss" 2 "are for .plot loss." $QS plot transfer -f int4 -o - --baseline bf16
refuses "formats are not runs" 2 "loss takes run patterns" $QS plot loss -f mxfp4 -o -
check "the refusals left the database unchanged" "[ '$(dbdump)' = '$before' ]"

# ---- the report
ok "report on a database of training runs only" $QS report -o "$T/rep" --claims none
check "the Training runs section" "grep -q '^## Training runs' '$T/rep/report.md'"
check "bf16: mean 2.1 ± 4.303 * 0.1 / sqrt(3), the baseline" \
  "grep -qF '| bf16 | bf16 (3 seeds, 95% t-interval) | 2 layers x 64 | 3 | 20 | 5.5000 | 2.1000 ± 0.2484 (95% t) | baseline |' '$T/rep/report.md'"
check "hif4: 2.2, +4.76% vs bf16" "grep -qF '| 2.2000 ± 0.2484 (95% t) | +4.76% vs bf16 |' '$T/rep/report.md'"
check "mxfp4: two seeds, min..max, +7.14%" "grep -qF '| 2.2500 (min 2.2000, max 2.3000) | +7.14% vs bf16 |' '$T/rep/report.md'"
check "fp32 of another model: no final loss yet, the baseline of its model" \
  "grep -qF '| fp32 | solo-fp32 | 1 layers x 32 | 1 | 0 | 5.6000 | - | baseline |' '$T/rep/report.md'"
check "the loss and gap plots are written and linked" \
  "pnginfo '$T/rep/train_loss.png' >/dev/null && pnginfo '$T/rep/train_gap.png' >/dev/null && grep -qF '(train_loss.png)' '$T/rep/report.md'"
ok "the JSON report" $QS report -o "$T/repj" --claims none --format json
check "the JSON carries the section" "$PY -c \"
import json; d = json.load(open('$T/repj/report.json')); s = [x for x in d['sections'] if x['id'] == 'train'][0]
assert s['title'] == 'Training runs' and len(s['rows']) == 4 and s['rows'][1][7] == '+4.76% vs bf16', s\""
ok "the HTML report" $QS report -o "$T/reph" --claims none --format html
check "the HTML has the section and embeds its plots" "grep -q 'Training runs' '$T/reph/report.html' && grep -q 'data:image/png;base64' '$T/reph/report.html'"
QSCOPE_DB="$T/other.db" $QS gen gaussian --n 4096 --seed 1 --name g >/dev/null 2>&1 || echo "# gen failed"
ok "a report without training runs" env QSCOPE_DB="$T/other.db" $QS report -o "$T/rep2" --claims none
check "has no Training runs section" "grep -q '^# ' '$T/rep2/report.md' && ! grep -q 'Training runs' '$T/rep2/report.md'"

# ---- the workbench's Training view (driven as in tests/e2e/tui.sh)
command -v tmux >/dev/null || { skip "the Training view's screens" "tmux not installed"; done_testing; }
GOLD="$ROOT/tests/e2e/golden/tui"
SOCK="qstrain$$"
TM() { tmux -L "$SOCK" -f /dev/null "$@"; }
nstart=0
at_exit 'TM kill-server 2>/dev/null'
COLS=100 ROWS=30
start() {  # start [ENV...] : the workbench in a fresh tmux session of COLS x ROWS
  rm -f "$T/exit"
  TM kill-server 2>/dev/null
  nstart=$((nstart + 1)); SOCK="qstrain$$-$nstart"   # a fresh server each time
  TM new-session -d -s w -x "$COLS" -y "$ROWS" \
    "cd '$T' && env $* LANG=C.UTF-8 LC_ALL=C.UTF-8 QSCOPE_DB='$QSCOPE_DB' QSCOPE_EXPORT_DIR='$T' '$QS' tui; echo \$? > '$T/exit'; sleep 600"
  wait_for "Tensors"
}
screen() { TM capture-pane -p -t w | sed -e "s|$T|<tmp>|g" -e 's/20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9:]*Z/<time>/g' \
  -e 's/[01][0-9]-[0-3][0-9] [0-2][0-9]:[0-5][0-9]/<time>/g' >"$T/.screen" && cat "$T/.screen"; }
wait_for() {  # wait_for REGEX : until the screen shows it (30 s)
  for _ in $(seq 300); do screen | grep -qE -- "$1" && return 0; sleep 0.1; done
  return 1
}
keys() { TM send-keys -t w "$@"; sleep 0.3; }
golden() {  # golden NAME : the screen equals tests/e2e/golden/tui/NAME.txt (QS_REGEN=1 rewrites it)
  local name=$1 f="$GOLD/$1.txt"
  if [ "${QS_REGEN:-0}" = 1 ]; then sleep 0.5; screen >"$T/$name.txt"; mkdir -p "$GOLD"; cp "$T/$name.txt" "$f"
  else for _ in $(seq 100); do screen >"$T/$name.txt"; cmp -s "$f" "$T/$name.txt" && break; sleep 0.1; done; fi
  _n=$((_n + 1))
  if [ -f "$f" ] && diff -u "$f" "$T/$name.txt" >"$T/diff"; then echo "ok $_n - screen $name matches its golden"
  else echo "not ok $_n - screen $name differs from $f"; sed 's/^/#   /' "$T/diff" | head -40; fi
}

start
keys 9
wait_for "VAL0"
golden train
keys j j j
golden train-hif4
keys m
wait_for "operand statistics of step 5"
golden train-hif4-step5
keys a
golden train-all
keys G
golden train-running
COLS=80 ROWS=24
start
keys 9
wait_for "VAL0"
golden train-80x24
keys Q
check "the workbench quit cleanly" "for _ in \$(seq 50); do [ -s '$T/exit' ] && break; sleep 0.1; done; [ \"\$(cat '$T/exit')\" = 0 ]"
COLS=100 ROWS=30
QSCOPE_DB="$T/other.db" start
keys 9
wait_for "No training runs"
golden train-empty

done_testing
