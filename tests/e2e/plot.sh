#!/usr/bin/env bash
# `qscope plot` end to end: PNGs with provenance and DPI, terminal pictures, errors.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

# PNG facts from the file itself (no imaging library): size, pHYs, tEXt/iTXt chunks, IDAT inflates
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
    elif t == b'pHYs':
        x, y, u = struct.unpack('>IIB', d); info['dpi'] = '%.0f' % (x * 0.0254); assert u == 1 and x == y
    elif t == b'tEXt': k, v = d.split(b'\0', 1); info[k.decode()] = v.decode('latin-1')
    elif t == b'iTXt': k, r = d.split(b'\0', 1); info[k.decode()] = r[2:].split(b'\0', 2)[2].decode()
    elif t == b'IDAT': idat += d
    p += 12 + n
raw = zlib.decompress(idat)
w, h = map(int, info['size'].split('x'))
assert len(raw) == h * (1 + 3 * w), 'unexpected pixel data size'
for k in sorted(info): print('%s=%s' % (k, info[k]))
PY
}

$QS gen llm-act --shape 128x256 --seed 1 --name act >/dev/null 2>&1
$QS gen gaussian --n 20000 --seed 2 --name g >/dev/null 2>&1

ok "err-hist of two formats writes a PNG" $QS plot err-hist act -f mxfp4,nvfp4 -o "$T/a.png"
check "file(1) calls it a 1000 x 600 RGB PNG" "file '$T/a.png' | grep -q 'PNG image data, 1000 x 600, 8-bit/color RGB'"
ok "the PNG parses: chunks, CRCs, pixel data" pnginfo "$T/a.png"
cp "$T/out" "$T/a.info"
check "pHYs says 100 dpi" "grep -qx 'dpi=100' $T/a.info"
check "Software is qscope VERSION" "grep -qx 'Software=qscope $(cat "$ROOT/VERSION")' $T/a.info"
check "qscope:command is the command line" "grep -q '^qscope:command=.*plot err-hist act -f mxfp4,nvfp4 -o' $T/a.info"
check "qscope:database is the database path" "grep -q '^qscope:database=.*test.db' $T/a.info"
check "qscope:tensor-hashes names the tensor and its hash" "grep -Eq '^qscope:tensor-hashes=act=[0-9a-f]{32}$' $T/a.info"
check "qscope:formats lists the formats" "grep -qx 'qscope:formats=mxfp4,nvfp4' $T/a.info"
check "qscope:options holds the format options as JSON" "grep -q '^qscope:options={.*\"scale_rule\":\"floor\"' $T/a.info"
ok "--width/--height/--dpi" $QS plot err-hist act -f fp8_e4m3 --width 640 --height 400 --dpi 150 -o "$T/b.png"
check "size and DPI follow the options" "file '$T/b.png' | grep -q '640 x 400' && $PY -c \"
import struct; b=open('$T/b.png','rb').read(); i=b.index(b'pHYs'); x=struct.unpack('>I', b[i+4:i+8])[0]; assert round(x*0.0254)==150, x\""
ok "--dpi alone scales the default size (10 x 6 inches)" bash -c "$QS plot transfer -f fp4_e2m1 --dpi 50 -o '$T/c.png' && file '$T/c.png' | grep -q '500 x 300'"

for k in "value-hist act -f fp8_e4m3" "value-hist g" "pareto act" "pareto act -f fp8_e4m3,mxfp4,nvfp4,int8" \
         "block-heatmap act -f mxfp4" "block-heatmap act -f nvfp4 --axis 0" "transfer -f fp8_e4m3" "transfer -f mxfp4 --amax 6" \
         "err-hist g --abs -f bf16,fp16 --logx"; do
  ok "plot $k" $QS plot $k -o "$T/k.png"
done
ok "per-format options in the list" $QS plot err-hist act -f 'mxfp4,mxfp4:scale-rule=rceil' -o "$T/d.png"
# every label carries the options that differ from the format's default, and only those
ok "err-hist with options" bash -c "LANG=C.UTF-8 $QS plot err-hist act -f 'fp8_e4m3:sat,nvfp4:nvfp4=torchao,mxfp4:block=32' -o - > '$T/lab.txt' && $QS plot err-hist act -f 'fp8_e4m3:sat,nvfp4:nvfp4=torchao,mxfp4:block=32' -o '$T/lab.png'"
check "the legend names fp8_e4m3:sat and nvfp4:torchao" "grep -qF 'fp8_e4m3:sat' $T/lab.txt && grep -qF 'nvfp4:torchao' $T/lab.txt"
check "qscope:formats carries the canonical labels (block=32 is mxfp4's default)" "pnginfo '$T/lab.png' > '$T/lab.info' && grep -qx 'qscope:formats=fp8_e4m3:sat,nvfp4:torchao,mxfp4' '$T/lab.info'"
ok "the title can be replaced" bash -c "$QS plot transfer -f int4 --title 'my title' -o '$T/e.png'"

# terminal
ok "-o - draws braille in a UTF-8 locale" bash -c "LANG=C.UTF-8 $QS plot err-hist act -f mxfp4,nvfp4 -o - > '$T/t.txt'"
check "braille dots in the picture" "$PY -c \"import sys; t=open('$T/t.txt', encoding='utf-8').read(); sys.exit(0 if sum(0x2801 <= ord(c) <= 0x28ff for c in t) > 50 else 1)\""
check "the legend names both formats with distinct glyphs" "grep -qF '●─ mxfp4' $T/t.txt && grep -qF '■─ nvfp4' $T/t.txt"
check "axis title and log tick labels" "grep -q 'relative error' $T/t.txt && grep -qF '2⁻' $T/t.txt"
check "no colour escapes with NO_COLOR" "! grep -q \$'\\033' $T/t.txt"
check "--term ascii is plain ASCII" "no_match '[^ -~]' $QS plot transfer -f fp4_e2m1 -o - --term ascii"
ok "--term block uses half blocks" bash -c "LANG=C.UTF-8 $QS plot transfer -f fp4_e2m1 -o - --term block | grep -qF -e ▀ -e ▄ -e █"
check "the C locale falls back to ASCII" "no_match '[^ -~]' env LANG=C LC_ALL=C $QS plot pareto act -f fp8_e4m3,mxfp4 -o -"
ok "terminal size options" bash -c "[ \$(LANG=C.UTF-8 $QS plot transfer -f fp4_e2m1 -o - --width 60 --height 16 | wc -l) -le 16 ]"
ok "heatmap in the terminal" bash -c "LANG=C.UTF-8 $QS plot block-heatmap act -f mxfp4 -o - | grep -qF -e ░ -e ▒ -e ▓ -e █"

# errors
# a stored result whose effective bits are -inf (NaN/Inf outputs) is not drawn as "exact" (stored
# non-finite numbers are null plus their reason): the note is the same as for a fresh computation
$QS gen gaussian --n 4096 --scale 1000 --seed 3 --name big >/dev/null 2>&1
$QS analyze big -f fp8_e4m3,fp32,bf16 >/dev/null 2>&1
ok "pareto from stored results" bash -c "$QS plot pareto big -f fp8_e4m3,fp32,bf16 -o - | tail -1 >'$T/st.txt'"
ok "pareto computed afresh" bash -c "$QS plot pareto big -f fp8_e4m3,fp32,bf16 --fresh -o - | tail -1 >'$T/fr.txt'"
check "stored: fp32 exact, fp8_e4m3 NaN/Inf" "grep -qx 'not shown: exact on this data: fp32; NaN/Inf outputs: fp8_e4m3' '$T/st.txt'"
check "... as afresh" "cmp -s '$T/st.txt' '$T/fr.txt'"

refuses "unknown kind is a usage error" 2 "unknown plot kind .nonsense." $QS plot nonsense act -o "$T/x.png"
refuses "missing -o is a usage error" 2 "give -o FILE.png" $QS plot err-hist act
refuses "missing tensor is a usage error" 2 "err-hist needs a tensor name" $QS plot err-hist -o "$T/x.png"
refuses "unknown format is a usage error" 2 "unknown format .fp7." $QS plot err-hist act -f fp7 -o "$T/x.png"
refuses "unknown tensor is a runtime error" 1 "no tensor named .nope." $QS plot err-hist nope -o "$T/x.png"
check "the error names the tensor" "grep -q \"nope\" $T/err"
refuses "block-heatmap of a 1-D tensor" 1 "needs a 2-D tensor" $QS plot block-heatmap g -f mxfp4 -o "$T/x.png"
refuses "trajectory without data says so" 1 "no trajectory data" $QS plot trajectory -o "$T/x.png"
check "... in words" "grep -q 'no trajectory data in this database yet' $T/err"
sqlite3 "$QSCOPE_DB" "INSERT INTO result(tensor_hash, kind, format, options, tool_version, data) VALUES('-', 'trajectory', '-', '{}', 'test',
  '{\"ylabel\": \"KL(rollout || train)\", \"series\": [{\"name\": \"bf16\", \"x\": [0,1,2,3], \"y\": [0.001,0.002,-0.004,0.01]},
                                                  {\"name\": \"fp16\", \"x\": [0,1,2,3], \"y\": [0.0001,0.0003,0.0002,0.0001]}]}')"
ok "stored trajectory data is drawn" $QS plot trajectory -o "$T/tr.png"
ok "... and in the terminal" bash -c "LANG=C.UTF-8 $QS plot trajectory -o - | grep -qF 'fp16'"
refuses "msd without data" 1 "no msd data in this database" $QS plot msd -o -
refuses "attn without data" 1 "no attn data in this database" $QS plot attn -o -
refuses "an unwritable path is a runtime error" 1 "^qscope: /nonexistent/dir/x.png: " $QS plot transfer -f fp4_e2m1 -o /nonexistent/dir/x.png
check "no partial files are left behind" "[ -z \"\$(ls $T | grep tmp)\" ]"
refuses "bad --dpi" 2 "bad --dpi .0." $QS plot transfer -f fp4_e2m1 --dpi 0 -o "$T/x.png"
refuses "bad --range" 2 "--range is LO,HI with LO < HI" $QS plot transfer -f fp4_e2m1 --range 3,1 -o "$T/x.png"
done_testing
