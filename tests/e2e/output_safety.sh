#!/usr/bin/env bash
# Outside text never reaches the terminal raw, and machine output keeps every name and every number
# well-typed: tensors, files and RL runs named with ESC[2J, an OSC 0 window title, a newline, a C1
# CSI byte (0x9b), DEL and invalid UTF-8 go through import, ls, show, analyze, runs, ais and report;
# no raw control byte may appear on stdout or stderr, every --json output must be valid JSON listing
# every tensor, and a non-finite metric must be null with its reason, never a string.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

# clean FILE...: valid UTF-8 with no C0 control (except newline), DEL or C1 character
clean() {
  $PY - "$@" <<'PYEOF'
import sys
for p in sys.argv[1:]:
    b = open(p, 'rb').read()
    try:
        s = b.decode('utf-8')
    except UnicodeDecodeError as e:
        print('# %s: invalid UTF-8 at byte %d' % (p, e.start)); sys.exit(1)
    for i, c in enumerate(s):
        o = ord(c)
        if (o < 0x20 and c != '\n') or o == 0x7f or 0x80 <= o <= 0x9f:
            print('# %s: raw control U+%04X at %d: %r' % (p, o, i, s[max(0, i - 20):i + 20])); sys.exit(1)
PYEOF
}
# run NAME CMD...: CMD's stdout and stderr into $T/NAME.out / $T/NAME.err; passes when it exits ${RC:-0}
run() { local n=$1 rc=0; shift; _n=$((_n + 1)); "$@" >"$T/$n.out" 2>"$T/$n.err" || rc=$?
  if [ "$rc" -eq "${RC:-0}" ]; then echo "ok $_n - $n exits $rc"
  else echo "not ok $_n - $n exited $rc"; echo "# cmd: $*"; sed 's/^/#   /' "$T/$n.out" "$T/$n.err" | head -10; fi; }
safe() { local n=$1; _n=$((_n + 1)); if clean "$T/$n.out" "$T/$n.err"; then echo "ok $_n - $n prints no raw control byte"
  else echo "not ok $_n - $n prints raw control bytes"; fi; }

N1=$'cls\e[2J' N2=$'title\e]0;pwned\a' N3=$'row\nforged' N4=$'csi\x9b2J' N5=$'del\x7f' N6=$'bad\xff\xfe'
mkdir "$T/in"
i=0
for n in "$N1" "$N2" "$N3" "$N4" "$N5" "$N6"; do
  i=$((i + 1)); "$QS" gen gaussian --shape 16x64 --seed $i -o "$T/in/$n.npy" >/dev/null 2>&1
done
"$QS" gen gaussian --n 64 --seed 9 --name $'gen|pipe\e[31m' >/dev/null 2>&1
printf 'not a npy' > "$T/in/"$'broken\e]0;x\a.npy'

RC=1 run import "$QS" import --keep-going "$T/in"       # the broken file fails
check "import of the good files" "grep -c '^added' '$T/import.out' | grep -qx 6"
safe import
run ls "$QS" ls
safe ls
check "ls lists 7 tensors, one line each" "[ \$(tail -n +2 '$T/ls.out' | wc -l) -eq 7 ]"
check "ls shows the escaped names" "grep -qF 'cls\\x1b[2J' '$T/ls.out' && grep -qF 'row\\nforged' '$T/ls.out' && grep -qF 'bad\\xff\\xfe' '$T/ls.out' && grep -qF 'csi\\x9b2J' '$T/ls.out'"
i=0
for n in "$N1" "$N2" "$N3" "$N4" "$N5" "$N6"; do i=$((i + 1)); run show$i "$QS" show "$n"; safe show$i; done
run analyze "$QS" analyze --all -f mxfp4,fp32
safe analyze
run analyze_csv "$QS" analyze --all -f mxfp4 --csv
safe analyze_csv
check "analyze --csv: one well-formed record per tensor" "$PY -c '
import csv,sys; r=list(csv.reader(open(sys.argv[1], newline=\"\", encoding=\"utf-8\")))
assert len(r) == 8 and all(len(x) == len(r[0]) for x in r), r' '$T/analyze_csv.out'"

# machine output: valid JSON, every tensor, names lossless, numbers numbers
"$QS" ls --json >"$T/ls.json" 2>/dev/null
"$QS" analyze --all -f mxfp4,fp32 --json >"$T/an.json" 2>/dev/null
"$QS" report --format json --no-plots --claims none -o "$T/rep" >/dev/null 2>&1
check "ls --json lists every tensor, names with their bytes" "$PY -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert len(d) == 7, len(d)
b = [bytes.fromhex(x[\"name_bytes_hex\"]) for x in d if \"name_bytes_hex\" in x]
assert sorted(b) == [b\"bad\\xff\\xfe\", b\"csi\\x9b2J\"], b
assert \"row\\nforged\" in [x[\"name\"] for x in d]
for x in d:
    for k in (\"absmax\", \"kurtosis\", \"outlier_frac\"): assert x[k] is None or isinstance(x[k], (int, float)), x' '$T/ls.json'"
NUMCHECK='
def nums(m):
    for k, v in m.items():
        if k == "nonfinite_values": assert all(w in ("inf", "-inf", "nan") for w in v.values()) and all(m[f] is None for f in v); continue
        if isinstance(v, dict): nums(v); continue
        assert v is None or isinstance(v, (int, float)), (k, v)
'
check "analyze --json: every tensor x format, numbers or null with a reason" "$PY -c '$NUMCHECK
import json,sys; d=json.load(open(sys.argv[1]))
assert len(d) == 14, len(d)
for r in d: nums(r[\"metrics\"])
fp = [r for r in d if r[\"format\"] == \"fp32\"][0][\"metrics\"]
assert fp[\"eff_bits_energy\"] is None and fp[\"nonfinite_values\"][\"eff_bits_energy\"] == \"inf\", fp' '$T/an.json'"
check "report --format json: every tensor, numbers or null with a reason" "$PY -c '$NUMCHECK
import json,sys; d=json.load(open(sys.argv[1]))
assert len(d[\"tensors\"]) == 7, len(d[\"tensors\"])
for t in d[\"tensors\"]:
    for r in t[\"results\"]: nums(r[\"metrics\"])' '$T/rep/report.json'"
run show_json "$QS" show --json "$N6"
check "show --json of a non-UTF-8 name is valid JSON with its bytes" "$PY -c '
import json,sys; d=json.load(open(sys.argv[1])); assert bytes.fromhex(d[\"name_bytes_hex\"]) == b\"bad\\xff\\xfe\"' '$T/show_json.out'"
run plot "$QS" plot err-hist "$N1" -f mxfp4 -o - --term ascii
safe plot
check "a terminal plot's title shows the escaped name" "grep -qF 'cls\\x1b[2J' '$T/plot.out'"

# RL logs: run names, labels and seq_ids with the same characters
# (control characters below U+0020 in ids are refused by import-log; DEL, C1 and invalid UTF-8 are not)
printf 'step,seq_id,tok_idx,lp_rollout,lp_train\n0,s\x7f,0,-1,-1.1\n0,s\x7f,1,-2,-2\n0,q\x9b\xff,0,-1,-1\n1,\xc2\x9b2J,0,-1,-1.2\n' > "$T/log.csv"
run import_log "$QS" import-log "$T/log.csv" --run "$N1" --label "$N3"
safe import_log
"$QS" import-log "$T/log.csv" --run "$N6" >/dev/null 2>&1
run runs "$QS" runs
safe runs
check "runs: one line per run" "[ \$(tail -n +2 '$T/runs.out' | wc -l) -eq 2 ]"
"$QS" runs --json >"$T/runs.json" 2>/dev/null
check "runs --json lists both runs" "$PY -c '
import json,sys; d=json.load(open(sys.argv[1]))[\"rl_runs\"]; assert len(d) == 2, d
assert [bytes.fromhex(x[\"run_bytes_hex\"]) for x in d if \"run_bytes_hex\" in x] == [b\"bad\\xff\\xfe\"]' '$T/runs.json'"
run export "$QS" runs --export "$N1" -o -
safe export
check "export escapes the seq_ids" "grep -qF 'q\\x9b\\xff' '$T/export.out' && grep -qF 's\\x7f' '$T/export.out' && grep -qF '\\u009b2J' '$T/export.out'"
run ais "$QS" ais "$N1" --no-store
safe ais
"$QS" ais "$N6" --json --no-store >"$T/ais.json" 2>/dev/null
check "ais --json of a non-UTF-8 run is valid JSON, step fields numbers or null" "$PY -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d[\"run_bytes_hex\"] == \"626164fffe\"
for st in d[\"steps\"]:
    for k, v in st.items(): assert k == \"nonfinite_values\" or v is None or isinstance(v, (int, float)), (k, v)' '$T/ais.json'"
"$QS" info --json >"$T/info.json" 2>/dev/null; "$QS" check --json >"$T/check.json" 2>/dev/null
check "info --json and check --json stay valid JSON with every name" "$PY -c '
import json,sys; i=json.load(open(sys.argv[1])); c=json.load(open(sys.argv[2]))
assert len(i[\"largest\"]) == 7 and c[\"tensors_checked\"] == 7' '$T/info.json' '$T/check.json'"

# Markdown report: escaped names, pipes escaped inside table cells
run report "$QS" report --no-plots --claims none -o "$T/md"
safe report
cp "$T/md/report.md" "$T/report_md.out"; : >"$T/report_md.err"
safe report_md
check "report md escapes the pipe of a name" "grep -qF 'gen\\|pipe\\x1b[31m' '$T/md/report.md'"
check "report md: the RL table has one row per run" "[ \$(grep -c '^| ' '$T/md/report.md' | tr -d ' ') -ge 1 ] && ! grep -q '^forged' '$T/md/report.md'"

# the workbench draws the same escaped names (tmux as in tui.sh)
if command -v tmux >/dev/null; then
  SOCK="qsout$$"
  TM() { tmux -L "$SOCK" -f /dev/null "$@"; }
  at_exit 'TM kill-server 2>/dev/null'
  TM new-session -d -s w -x 100 -y 30 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 QSCOPE_DB='$QSCOPE_DB' '$QS' tui; sleep 600"
  for _ in $(seq 300); do TM capture-pane -p -t w | grep -q 'row\\nforged' && break; sleep 0.1; done
  TM capture-pane -p -t w >"$T/tui.txt"
  check "the workbench lists the names escaped" "grep -qF 'cls\\x1b[2J' '$T/tui.txt' && grep -qF 'bad\\xff\\xfe' '$T/tui.txt' && grep -qF 'row\\nforged' '$T/tui.txt' && grep -qF 'title\\x1b]0;pwned\\x07' '$T/tui.txt'"
  TM send-keys -t w q
  TM kill-server 2>/dev/null
else
  skip "the workbench lists the names escaped" "tmux not installed"
fi
done_testing
