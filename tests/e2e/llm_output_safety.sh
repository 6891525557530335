#!/usr/bin/env bash
# Model-derived text never reaches the terminal raw, and machine output keeps every path and name:
# a GGUF whose general.name and filler vocabulary tokens spell an OSC 0 title, ESC[2J and a C1 CSI,
# a Hugging Face directory whose config.json `_name_or_path` does the same, and a model directory
# and --text file whose paths hold an invalid UTF-8 byte, through llm generate, eval, sensitivity,
# score, capture, bench and tokenize.  Terminal output must be valid UTF-8 without control characters
# (generated text keeps its newlines); --json and stored results keep a non-UTF-8 path escaped with
# its *_bytes_hex (store/json_out.h).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
if ! $PY -c "import numpy" 2>/dev/null; then skip_all "python3-numpy not installed"; fi

# clean FILE...: valid UTF-8 with no C0 control (except newline and tab), DEL or C1 character
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
        if (o < 0x20 and c not in '\n\t') or o == 0x7f or 0x80 <= o <= 0x9f:
            print('# %s: raw control U+%04X at %d: %r' % (p, o, i, s[max(0, i - 20):i + 20])); sys.exit(1)
PYEOF
}
# run NAME CMD...: stdout and stderr into $T/NAME.out / .err; passes when CMD exits 0 and prints
# nothing raw (NAME *_json: stdout is JSON, which escapes C0 itself and may hold any other character)
run() {
  local n=$1 rc=0 o; shift; _n=$((_n + 1)); "$@" >"$T/$n.out" 2>"$T/$n.err" || rc=$?
  case $n in *_json) o=();; *) o=("$T/$n.out");; esac
  if [ "$rc" -ne 0 ]; then echo "not ok $_n - $n exited $rc"; echo "# cmd: $*"; sed 's/^/#   /' "$T/$n.err" | head -5
  elif ! clean "${o[@]}" "$T/$n.err"; then echo "not ok $_n - $n prints raw control bytes"
  else echo "ok $_n - $n: exits 0, prints no raw control byte"; fi
}
jq_() { local f=$1 x=$2; shift 2; $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print($x)" "$f" "$@"; }

HOST=$'\e]0;pwned\a\e[2Jevil\u009b31m'                # what the hostile metadata says
SEEN='\x1b]0;pwned\x07\x1b[2Jevil\u009b31m'           # how the terminal must show it
D=$T/$'m\xff'                                         # a directory whose name is not UTF-8
mkdir -p "$D"
# mk_host.py ROOT OUT.gguf [NAME]: tiny.gguf's architecture with general.name NAME (default HOST)
cat > "$T/mk_host.py" <<'PY'
import sys
sys.path.insert(0, sys.argv[1] + "/tests/llm")
import gguf_io as g
import make_tiny_gguf as m
HOST = sys.argv[3] if len(sys.argv) > 3 else "\x1b]0;pwned\x07\x1b[2Jevil\u009b31m"
add = g.Writer.add_kv
def add_kv(self, key, typ, val, elem=None):
    if key == "general.name":
        val = HOST
    if key == "tokenizer.ggml.tokens":   # the filler tokens spell the escapes too
        val = [HOST + t[7:] if t.startswith("<extra_") else t for t in val]
    return add(self, key, typ, val, elem)
g.Writer.add_kv = add_kv
weights = m.weights
def small(*a, **k):   # a tiny (tied) embedding: near-uniform sampling reaches every token
    W = weights(*a, **k)
    W["token_embd.weight"] *= 1e-3
    return W
m.weights = small
m.build(sys.argv[2], False, 11)
PY
$PY "$T/mk_host.py" "$ROOT" "$D/host.gguf"
$PY - "$D/t.txt" <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(random.choice(w) for _ in range(400)) + "\n")
PY
M=$D/host.gguf

# --- generate: the model's name on the "loaded" line, its tokens in the text
run generate "$QS" llm generate --model "$M" --prompt-ids 1,40,41 --tokens 48 --seqs 2 --seed 3
check "generate: the loaded line shows the name and the path escaped" \
  'grep -qF "loaded $T/m\\xff/host.gguf ($SEEN," "$T/generate.err"'
check "generate: hostile tokens were sampled and are shown escaped" '[ "$(grep -cF "$SEEN" "$T/generate.out")" -ge 1 ]'
check "generate: two sequences, each between its --- lines" '[ "$(grep -c "^--- " "$T/generate.out")" = 4 ]'
run tokenize "$QS" llm tokenize --model "$M" --prompt "the"

# --- eval: header, --json and the stored result keep the paths
E=(llm eval --model "$M" --text "$D/t.txt" --ctx 32 --chunks 2 --config a=mxfp4)
run eval_json "$QS" "${E[@]}" --json
check "eval --json: model path escaped, with its exact bytes" \
  '[ "$(jq_ "$T/eval_json.out" "bytes.fromhex(d[\"model\"][\"path_bytes_hex\"]) == sys.argv[2].encode(\"utf-8\", \"surrogateescape\") and d[\"model\"][\"path\"].endswith(\"m\\\\xff/host.gguf\")" "$M")" = True ]'
check "eval --json: model name as the file says it (JSON escapes the controls)" \
  '[ "$(jq_ "$T/eval_json.out" "d[\"model\"][\"name\"] == sys.argv[2]" "$HOST")" = True ]'
check "eval --json: text path with its exact bytes" \
  '[ "$(jq_ "$T/eval_json.out" "bytes.fromhex(d[\"text\"][\"path_bytes_hex\"]) == sys.argv[2].encode(\"utf-8\", \"surrogateescape\")" "$D/t.txt")" = True ]'
sqlite3 "$QSCOPE_DB" "SELECT data FROM result WHERE kind = 'llm_eval' AND format = 'reference'" > "$T/stored.json"
check "eval: the stored result names the model and the text (with its bytes)" \
  '[ "$(jq_ "$T/stored.json" "d[\"run\"][\"model\"] == sys.argv[2] and bytes.fromhex(d[\"run\"][\"text_bytes_hex\"]) == sys.argv[3].encode(\"utf-8\", \"surrogateescape\")" "$HOST" "$D/t.txt")" = True ]'
run eval_table "$QS" "${E[@]}"
check "eval table: model, name and text escaped in the header" \
  'grep -qF "model $T/m\\xff/host.gguf ($SEEN; " "$T/eval_table.out" && grep -qF "text $T/m\\xff/t.txt: " "$T/eval_table.out"'
run plot_kl bash -c "LANG=C.UTF-8 '$QS' plot kl -o - --width 120"

# --- sensitivity
S=(llm sensitivity --model "$M" --text "$D/t.txt" --ctx 32 --chunks 2 --format mxfp4 --sites attn_in,w)
run sens_json "$QS" "${S[@]}" --json
check "sensitivity --json: model and text paths with their bytes, the name kept" \
  '[ "$(jq_ "$T/sens_json.out" "bytes.fromhex(d[\"model\"][\"path_bytes_hex\"]) == sys.argv[2].encode(\"utf-8\", \"surrogateescape\") and \"path_bytes_hex\" in d[\"text\"] and d[\"model\"][\"name\"] == sys.argv[3]" "$M" "$HOST")" = True ]'
run sens_table "$QS" "${S[@]}"
check "sensitivity table: the header escaped" 'grep -qF "model $T/m\\xff/host.gguf ($SEEN; " "$T/sens_table.out"'
run report "$QS" report --format md --no-plots --claims none -o "$T/rep"
check "report: the stored name escaped" 'clean "$T/rep/report.md" && grep -qF "\\x1b]0;pwned" "$T/rep/report.md"'

# --- score, capture and bench record or print the model too
run score_json "$QS" llm score --model "$M" --tokens 4 --seqs 2 --prompts 1 --prompt "naïve café au lait with a long prompt" --name s --json
sqlite3 "$QSCOPE_DB" "SELECT metadata FROM rl_run WHERE name = 's'" > "$T/meta.json"
check "score: the stored run keeps the model path's bytes, the name and the prompt label" \
  '[ "$(jq_ "$T/meta.json" "bytes.fromhex(d[\"model\"][\"path_bytes_hex\"]) == sys.argv[2].encode(\"utf-8\", \"surrogateescape\") and d[\"model\"][\"name\"] == sys.argv[3] and len(d[\"prompt_ids\"]) == 1" "$M" "$HOST")" = True ]'
run capture "$QS" llm capture --model "$M" --tokens 4 --prefix $'cap\e[2J'
check "capture: the prefix escaped" 'grep -qF "under cap\\x1b[2J:*" "$T/capture.err"'
check "capture: the tensors' metadata keep the model path's bytes" \
  '[ "$(sqlite3 "$QSCOPE_DB" "SELECT count(*) FROM tensor WHERE json_extract(metadata, '"'"'$.model.path_bytes_hex'"'"') IS NOT NULL")" -ge 1 ]'
run bench "$QS" llm bench --model "$M" --tokens 8 --seqs 1 --reps 1 --eval-ctx 0
check "bench: the model's name escaped" 'grep -qF "model $SEEN: " "$T/bench.out"'

# --- Hugging Face: _name_or_path, and the directory's name when there is none
$PY "$ROOT/tests/llm/make_tiny_hf.py" llama "$T/hf" >/dev/null
$PY - "$T/hf/config.json" "$HOST" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["_name_or_path"] = sys.argv[2]; json.dump(c, open(sys.argv[1], "w"))
PY
run hf_generate "$QS" llm generate --model "$T/hf" --prompt-ids 1,40 --tokens 4 --seqs 1
check "hf: _name_or_path escaped on the loaded line" 'grep -qF "($SEEN, 2 layers" "$T/hf_generate.err"'
$PY "$ROOT/tests/llm/make_tiny_hf.py" llama "$D/hf"$'\xfe' >/dev/null
run hf_eval_json "$QS" llm eval --model "$D/hf"$'\xfe' --text "$D/t.txt" --ctx 32 --chunks 2 --json
check "hf without _name_or_path: the directory's name, kept with its bytes" \
  '[ "$(jq_ "$T/hf_eval_json.out" "bytes.fromhex(d[\"model\"][\"name_bytes_hex\"]) == b\"hf\\xfe\"")" = True ]'

# --- llm text: an output directory that is not UTF-8
$PY "$ROOT/tests/llm/make_rdata.py" "$T/rd" >/dev/null
run text_json "$QS" llm text --rdb "$T/rd/Rdata.rdb" -o "$D/txt" --json
check "llm text --json: every text, its file path with its bytes" \
  '[ "$(jq_ "$T/text_json.out" "len(d[\"texts\"]) == 2 and bytes.fromhex(d[\"texts\"][0][\"file_bytes_hex\"]) == (sys.argv[2] + \"/firstbook.txt\").encode(\"utf-8\", \"surrogateescape\")" "$D/txt")" = True ]'
run text_table "$QS" llm text --rdb "$T/rd/Rdata.rdb" -o "$D/txt"
check "llm text table: the path escaped" 'grep -qF "$T/m\\xff/txt/firstbook.txt" "$T/text_table.out"'

# --- a long name in a 3-byte script: the places that cut it for a title (60 or 100 bytes) cut between
# characters, so no report section or plot that carries it is dropped as invalid UTF-8
LONG=$($PY -c 'print("\u91cf" * 45)') LONG3=$($PY -c 'print("\u91cf" * 33)') LONG2=$($PY -c 'print("\u91cf" * 20)')
$PY "$T/mk_host.py" "$ROOT" "$T/long.gguf" "$LONG"
run long_eval_json "$QS" llm eval --model "$T/long.gguf" --text "$D/t.txt" --ctx 32 --chunks 2 --config a=mxfp4 --json
check "long name: kept in --json (the loader's 127 bytes, escaped where they end mid-character)" \
  '[ "$(jq_ "$T/long_eval_json.out" "d[\"model\"][\"name\"].startswith(\"\\u91cf\" * 42)")" = True ]'
run long_sens_json "$QS" llm sensitivity --model "$T/long.gguf" --text "$D/t.txt" --ctx 32 --chunks 2 --format mxfp4 --sites w --json
run long_report "$QS" report --format md --claims none -o "$T/longrep"
check "long name: the report keeps both of its model sections, with their plots" \
  'grep -q "^## Model-level evaluation: $LONG3 on t.txt" "$T/longrep/report.md" && grep -q "^## Model-level sensitivity: $LONG3 at mxfp4" "$T/longrep/report.md" && grep -qF "![Per-token KL(reference \|\| config): $LONG2, t.txt" "$T/longrep/report.md" && grep -qF "![mean KL, one (layer, site) at mxfp4: $LONG2, t.txt" "$T/longrep/report.md"'
done_testing
