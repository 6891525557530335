#!/usr/bin/env bash
# Stored `llm eval` results read back: `qscope plot kl` (PNG with provenance, N series; terminal;
# CDF; errors) and the report's Model-level evaluation section, whose numbers are `llm eval --json`'s;
# a stored `llm sensitivity` table and plan in the report and in `plot sensitivity`.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
TINY="$FIX/llm/tiny.gguf"
jq_() { $PY -c "import json,sys; d=json.load(open('$1')); print($2)"; }

fails "plot kl on an empty database names the command to run" 1 $QS plot kl -o "$T/none.png"
check "the message says llm eval" "grep -q 'llm eval --model' $T/err"

$PY - "$T/text.txt" <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(70)) + "\n")
PY
ok "llm eval: three configs stored" $QS llm eval --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 6 --config a=mxfp4 --config kv=fp8_e4m3 --config w=mxfp4 --json
cp "$T/out" "$T/e.json"
HASH=$(jq_ "$T/e.json" 'd["model"]["hash"]')

# PNG facts: size, text chunks; and the pixels of each palette colour (Okabe-Ito: series 0 blue, 1 orange, 2 green)
pnginfo() {
  $PY - "$1" <<'PY'
import struct, sys, zlib
b = open(sys.argv[1], 'rb').read()
assert b[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
p, info, idat = 8, {}, b''
while p < len(b):
    n, t = struct.unpack('>I4s', b[p:p + 8]); d = b[p + 8:p + 8 + n]
    if t == b'IHDR': w, h, depth, ctype = struct.unpack('>IIBB', d[:10]); info['size'] = '%dx%d' % (w, h)
    elif t == b'tEXt': k, v = d.split(b'\0', 1); info[k.decode()] = v.decode('latin-1')
    elif t == b'iTXt': k, r = d.split(b'\0', 1); info[k.decode()] = r[2:].split(b'\0', 2)[2].decode()
    elif t == b'IDAT': idat += d
    p += 12 + n
raw = zlib.decompress(idat)
assert ctype == 2 and depth == 8, 'RGB8 expected'
# undo the PNG row filters
stride, prev, px = 3 * w, bytearray(3 * w), []
for y in range(h):
    f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = row[i - 3] if i >= 3 else 0; up = prev[i]; c = prev[i - 3] if i >= 3 else 0
        if f == 1: row[i] = (row[i] + a) & 255
        elif f == 2: row[i] = (row[i] + up) & 255
        elif f == 3: row[i] = (row[i] + (a + up) // 2) & 255
        elif f == 4:
            pa, pb, pc = abs(up - c), abs(a - c), abs(a + up - 2 * c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else up if pb <= pc else c)) & 255
    px.append(bytes(row)); prev = row
pal = [(0x00, 0x72, 0xB2), (0xE6, 0x9F, 0x00), (0x00, 0x9E, 0x73)]
for k, col in enumerate(pal):
    n = sum(1 for r in px for i in range(0, stride, 3) if abs(r[i] - col[0]) < 24 and abs(r[i + 1] - col[1]) < 24 and abs(r[i + 2] - col[2]) < 24)
    info['pixels%d' % k] = str(n)
for k in sorted(info): print('%s=%s' % (k, info[k]))
PY
}

ok "plot kl of two configs writes a PNG" $QS plot kl --config a=mxfp4 --config kv=fp8_e4m3 -o "$T/kl.png"
ok "it parses" pnginfo "$T/kl.png"
cp "$T/out" "$T/kl.info"
check "1000 x 600" "grep -qx 'size=1000x600' $T/kl.info"
check "qscope:formats are the two config labels" "grep -qx 'qscope:formats=a=mxfp4;kv=fp8_e4m3' $T/kl.info"
check "qscope:tensor-hashes is the model's hash" "grep -qx 'qscope:tensor-hashes=$HASH' $T/kl.info"
check "qscope:options says kl, ctx 64, the half convention" "grep -q '^qscope:options={.*\"ctx\":64.*\"kind\":\"kl\".*\"score\":\"half\"' $T/kl.info"
check "two series drawn: blue and orange pixels, no green" \
  "[ \$(sed -n 's/^pixels0=//p' $T/kl.info) -gt 200 ] && [ \$(sed -n 's/^pixels1=//p' $T/kl.info) -gt 200 ] && [ \$(sed -n 's/^pixels2=//p' $T/kl.info) -lt 20 ]"
ok "plot kl of every config (three series)" $QS plot kl -o "$T/kl3.png"
check "three series drawn" "pnginfo $T/kl3.png > $T/kl3.info && [ \$(sed -n 's/^pixels2=//p' $T/kl3.info) -gt 200 ]"
check "a weight config carries the weight-grid caveat in the image's note (provenance unchanged)" \
  "grep -qx 'qscope:formats=a=mxfp4;kv=fp8_e4m3;w=mxfp4' $T/kl3.info"

ok "terminal: every config in the legend" bash -c "LANG=C.UTF-8 $QS plot kl -o - --width 200 > '$T/t.txt'"
check "legend lists a=mxfp4, kv=fp8_e4m3, w=mxfp4" "grep -qF 'a=mxfp4' $T/t.txt && grep -qF 'kv=fp8_e4m3' $T/t.txt && grep -qF 'w=mxfp4' $T/t.txt"
check "log x axis of KL in nats; the caveat under the plot" "grep -q 'KL divergence per token (nats)' $T/t.txt && grep -q 'weights already on a 4-bit grid (q4_1)' $T/t.txt"
ok "--cdf" bash -c "LANG=C.UTF-8 $QS plot kl --cdf --config kv=fp8_e4m3 -o - > '$T/c.txt'"
check "CDF axis, one config, no caveat (no weight format)" "grep -q 'fraction of tokens with KL <= x' $T/c.txt && ! grep -q 'w=mxfp4' $T/c.txt && ! grep -q '4-bit grid' $T/c.txt"
fails "an unknown config is a usage error listing the stored ones" 2 $QS plot kl --config a=fp4 -o "$T/x.png"
check "it lists them" "grep -q 'it has: a=mxfp4, kv=fp8_e4m3, w=mxfp4' $T/err"
fails "--model that matches nothing" 1 $QS plot kl --model nosuchmodel -o "$T/x.png"
fails "--config is only for kl" 2 $QS plot transfer -f mxfp4 --config a=mxfp4 -o "$T/x.png"

# the report section: the table holds llm eval --json's numbers
ok "a database of model evaluations only has a report" $QS report -o "$T/r0" --formats mxfp4 --claims none
check "with the section and no tensor" "grep -q '^## Model-level evaluation' $T/r0/report.md"
$QS gen gaussian --name g --shape 64x64 >/dev/null
ok "report (json)" $QS report -o "$T/rj" --format json --formats mxfp4 --claims none
ok "report (md)" $QS report -o "$T/rm" --formats mxfp4 --claims none
check "a Model-level evaluation section with its KL plot" \
  "grep -q '^## Model-level evaluation: qscope tiny llama on text.txt (ctx 64)' $T/rm/report.md && [ -s $T/rm/llm_eval_kl-1.png ]"
check "it states the scoring convention and the caveat" \
  "grep -q \"llama.cpp's convention: positions ctx/2\" $T/rm/report.md && grep -q '^- \*\*w=mxfp4\*\*: weights already on a 4-bit grid (q4_1)' $T/rm/report.md"
check "the numbers are llm eval --json's (reference, then each config)" "$PY - '$T/e.json' '$T/rj/report.json' <<'PY'
import json, sys
e = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
s = [x for x in r['sections'] if x['id'] == 'llm_eval-1'][0]
rows = s['rows']
ref = e['reference']
assert rows[0][:2] == ['reference (FP32)', '%.4g ± %.2g' % (ref['ppl'], ref['ppl_se'])], rows[0]
for c, row in zip(e['configs'], rows[1:]):
    lo, hi = c['dppl_rel_ci95']
    want = [c['label'], '%.4g ± %.2g' % (c['ppl'], c['ppl_se']), '%+.2f [%+.2f, %+.2f]' % (100 * c['dppl_rel'], 100 * lo, 100 * hi),
            '%.4g' % c['kl_mean'], '%.4g' % c['kl_median'], '%.4g' % c['kl_p99'], '%.4g' % c['kl_max'], '%.2f' % (100 * c['top1_agree']), '%.4g' % c['dp_rms']]
    assert row == want, (row, want)
assert len(rows) == 1 + len(e['configs'])
PY"
ok "report (html)" $QS report -o "$T/rh" --format html --formats mxfp4 --claims none
check "the HTML summary links the section" "grep -q 'href=\"#s-llm_eval-1\"' $T/rh/report.html && grep -q 'id=\"s-llm_eval-1\"' $T/rh/report.html"

# sensitivity: the report's section lists the most sensitive cells with the plan's choice, and the heatmap
ok "llm sensitivity with a plan" $QS llm sensitivity --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 4 --format mxfp4 --kl-target 0.05 --json
cp "$T/out" "$T/s.json"
ok "report with it" $QS report -o "$T/rs" --format json --formats mxfp4 --claims none
check "the sensitivity section: the largest KL first, BF16 where the plan promoted, the stored values" "$PY - '$T/s.json' '$T/rs/report.json' <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
sec = [x for x in r['sections'] if x['id'] == 'llm_sens-1'][0]
L, S = s['layers'], len(s['sites'])
cells = sorted(((s['kl_mean'][l][k], l, k) for l in range(L) for k in range(S)), key=lambda t: -t[0])[:12]
bf = s['plan']['bf16'] if 'bf16' in s['plan'] else None
for (kl, l, k), row in zip(cells, sec['rows']):
    assert row[0] == str(l) and row[1] == s['sites'][k] and row[2] == '%.4g' % kl, (row, l, k, kl)
    if bf is not None: assert row[4] == ('BF16' if bf[l][k] else 'mxfp4'), (row, bf[l][k])
assert 'kept in BF16' in sec['intro'] and 'measured by one evaluation' in sec['intro']
PY"
ok "report (md) with the heatmap" $QS report -o "$T/rs2" --formats mxfp4 --claims none
check "the heatmap PNG is written and linked" "[ -s $T/rs2/llm_sensitivity-1.png ] && grep -q '](llm_sensitivity-1.png)' $T/rs2/report.md"
ok "plot sensitivity: the heatmap with the plan's cells" bash -c "LANG=C.UTF-8 $QS plot sensitivity -o - --width 120 > '$T/sens.txt' && $QS plot sensitivity -o '$T/sens.png'"
check "the terminal picture marks the BF16 cells and says so" "grep -q 'B: BF16 in the plan for mean KL <= 0.05 (met: measured KL ' $T/sens.txt && grep -q 'B' $T/sens.txt"
check "the PNG's provenance names the model's hash and the format" \
  "pnginfo $T/sens.png > $T/sens.info && grep -qx 'qscope:tensor-hashes=$HASH' $T/sens.info && grep -qx 'qscope:formats=mxfp4' $T/sens.info"
done_testing
