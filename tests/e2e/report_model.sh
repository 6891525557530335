#!/usr/bin/env bash
# `qscope report` with a model-level evaluation and tensors (issue 28): the evaluation opens the
# report; the tensors are chosen by --tensors GLOB (default: none beside a model evaluation, else
# the first 16), the report says how many it left out; the HTML stands alone (every image a
# data: URI that decodes as a PNG) and the closing message says what needs the directory.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
TINY="$FIX/llm/tiny.gguf"

$PY - "$T/text.txt" <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(70)) + "\n")
PY
refuses "an empty database: nothing to report" 1 "empty\.db: nothing to report: no tensors, model evaluations, RL runs, kernel results or training runs" \
  env QSCOPE_DB="$T/empty.db" $QS report -o "$T/e" --claims none
ok "a database of RL runs only still has a report" bash -c "QSCOPE_DB='$T/rl.db' $QS sim grpo --formats mxfp4 --methods none --seeds 1 --steps 20 --log-every 10 >/dev/null && \
  QSCOPE_DB='$T/rl.db' $QS report -o '$T/rl' --claims none"
check "with its RL section" "grep -q '^## RL runs' $T/rl/report.md"

# 18 tensors: more than the default 16
for i in $(seq -w 1 18); do $QS gen gaussian --name "t$i" --shape 16x32 --seed "$((10#$i))" >/dev/null || echo "gen t$i failed"; done

ok "report without a model evaluation" $QS report -o "$T/a" --formats mxfp4 --claims none --no-plots
check "the first 16 of 18 tensors, by name" \
  "[ \$(grep -c '^### t' $T/a/report.md) = 16 ] && grep -q '^### t01' $T/a/report.md && grep -q '^### t16' $T/a/report.md && ! grep -q '^### t17' $T/a/report.md"
check "the report says how many it left out and how to include them" \
  "grep -qF \"The first 16 of 18 tensors (by name) are shown, the default without --tensors; 2 left out. \\\`--tensors GLOB\\\` chooses the tensors, \\\`--tensors '*'\\\` includes all.\" $T/a/report.md"
check "so does the closing message" "grep -qF \"2 tensor(s) left out (--tensors GLOB chooses, --tensors '*' includes all)\" $T/err"
ok "--tensors '*': all of them" $QS report -o "$T/b" --formats mxfp4 --claims none --no-plots --tensors '*'
check "18 tensors, nothing left out" "[ \$(grep -c '^### t' $T/b/report.md) = 18 ] && ! grep -q 'left out' $T/b/report.md $T/err"
ok "--tensors 't0[2-4]'" $QS report -o "$T/c" --format json --formats mxfp4 --claims none --tensors 't0[2-4]'
check "the three it matches, and the JSON says which" "$PY - $T/c/report.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert [t['name'] for t in d['tensors']] == ['t02', 't03', 't04'], d['tensors']
s = d['tensor_scope']
assert s == {'glob': 't0[2-4]', 'in_database': 18, 'shown': 3, 'left_out': 15}, s
assert d['tensor_note'] == \"3 of the 18 tensors in the database match --tensors 't0[2-4]'.\", d['tensor_note']
PY"
before=$(dbdump)
refuses "a glob that matches nothing" 1 "no tensor matches --tensors 'zz\\*' \\(18 tensors in the database; \`qscope ls\` lists them\\)" \
  $QS report -o "$T/d" --formats mxfp4 --claims none --tensors 'zz*'
refuses "a glob whose set is not closed" 2 "--tensors 't\\[1': '\\[' opens a set that no '\\]' closes" \
  $QS report -o "$T/d" --formats mxfp4 --claims none --tensors 't[1'
refuses "an empty glob" 2 "--tensors '': an empty pattern matches no tensor" $QS report -o "$T/d" --claims none --tensors ''
check "refusals leave the database unchanged" '[ "$(dbdump)" = "$before" ]'

ok "llm eval stores a model-level evaluation" $QS llm eval --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 4 --config a=mxfp4 --config w=mxfp4
ok "llm sensitivity stores a table and a plan" $QS llm sensitivity --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 2 --format mxfp4 --sites attn_in,kv --kl-target 0.01
ok "msd stores a kernel result" $QS msd
ok "report (md) beside a model evaluation" $QS report -o "$T/m" --formats mxfp4 --claims none
check "the model-level evaluation first, then the tensors' part, then the other sections" "$PY - $T/m/report.md <<'PY'
import sys
h = [l for l in open(sys.argv[1]).read().splitlines() if l.startswith('## ')]
assert h[0].startswith('## Model-level evaluation') and h[1].startswith('## Model-level sensitivity'), h
assert h[2:] == ['## Tensors: which format, and why', '## Kernel experiments: Multi-Scale Dequant'], h
PY"
check "no tensor by default, and the report says so and how to include them" \
  "! grep -q '^### t' $T/m/report.md && grep -qF \"The per-tensor format rankings of the 18 tensors in the database are left out: with a model-level evaluation stored, a report shows none by default. \\\`--tensors GLOB\\\` includes the matching tensors, \\\`--tensors '*'\\\` all of them.\" $T/m/report.md"
check "the Markdown needs its directory, and the message says so" \
  "grep -qE 'written to .*/m/report.md with its [0-9]+ PNG image\\(s\\) beside it in .*/m/: keep the directory together' $T/err && grep -q '](llm_eval_kl-1.png)' $T/m/report.md"
ok "report (html) with two tensors" $QS report -o "$T/h" --format html --formats mxfp4 --claims none --tensors 't0[12]'
check "the HTML: contents and headings in the order model evaluation, tensors, other sections" "$PY - $T/h/report.html <<'PY'
import re, sys
h = open(sys.argv[1]).read()
toc = re.findall(r'<li><a href=\"#([^\"]+)\">', h[h.index('<nav class=\"toc\">'):h.index('</nav>')])
assert toc == ['s-llm_eval-1', 's-llm_sens-1', 't1', 't2', 's-msd'], toc
heads = re.findall(r'<h[23] id=\"([^\"]+)\"', h)
assert heads == ['summary', 's-llm_eval-1', 's-llm_sens-1', 'tensors', 't1', 't2', 's-msd'], heads
PY"
check "the HTML refers to nothing outside itself: every src= a data: URI, no link to a file" \
  "! grep -oE '(src|href)=\"[^\"#][^\"]*\"' $T/h/report.html | grep -v '^src=\"data:image/png;base64,' | grep -q . && grep -q 'src=\"data:image/png;base64,' $T/h/report.html"
check "every inlined image decodes: base64, PNG signature, chunk CRCs, IHDR, the inflated pixels' size" "$PY - $T/h/report.html <<'PY'
import base64, re, struct, sys, zlib
h = open(sys.argv[1]).read()
imgs = re.findall(r'src=\"data:image/png;base64,([^\"]*)\"', h)
assert len(imgs) >= 5, len(imgs)
for u in imgs:
    d = base64.b64decode(u, validate=True)
    assert d[:8] == b'\\x89PNG\\r\\n\\x1a\\n'
    p, idat, w = 8, b'', 0
    while p < len(d):
        n, t = struct.unpack('>I4s', d[p:p + 8]); c = d[p + 8:p + 8 + n]
        assert zlib.crc32(t + c) == struct.unpack('>I', d[p + 8 + n:p + 12 + n])[0], t
        if t == b'IHDR': w, ht, depth, ctype = struct.unpack('>IIBB', c[:10])
        if t == b'IDAT': idat += c
        p += 12 + n
    assert t == b'IEND' and w > 0 and len(zlib.decompress(idat)) == ht * (1 + 3 * w * depth // 8), (w, ht)
PY"
if command -v file >/dev/null; then
  check "file(1) agrees on the first image" \
    "grep -m1 -o 'src=\"data:image/png;base64,[^\"]*' $T/h/report.html | cut -d, -f2 | base64 -d > $T/img.png && file $T/img.png | grep -q 'PNG image data'"
fi
check "the message says the HTML stands alone" \
  "grep -qE 'written to .*/h/report.html: one self-contained file, its [0-9]+ image\\(s\\) inlined \\(the PNG files in .*/h/ are copies\\)' $T/err"
done_testing
