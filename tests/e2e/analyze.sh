#!/usr/bin/env bash
# analyze and report: metrics against numpy, caching, --force, CSV/JSON, blocks, Ctrl-C,
# and a report on the demo database checked (files, PNGs, HTML images, numbers = analyze --json).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

$QS gen llm-act --shape 256x512 --seed 5 -o "$T/a.npy" 2>/dev/null
$QS import --copy "$T/a.npy" >/dev/null 2>&1
ok "analyze two formats" bash -c "$QS analyze a -f mxfp4,fp8_e5m2 --json > $T/an1.json"
ok "first run computes, the second reuses" bash -c "
  python3 -c 'import json; r=json.load(open(\"$T/an1.json\")); assert [x[\"cached\"] for x in r]==[False,False], r' &&
  $QS analyze a -f mxfp4,fp8_e5m2 --json | python3 -c 'import json,sys; r=json.load(sys.stdin); assert [x[\"cached\"] for x in r]==[True,True]'"
ok "--force recomputes" bash -c "$QS analyze a -f mxfp4 --force --json | python3 -c 'import json,sys; assert not json.load(sys.stdin)[0][\"cached\"]'"
ok "metrics equal an independent numpy computation on quant's output" bash -c "
  $QS quant -f mxfp4 $T/a.npy -o $T/q.npy 2>/dev/null && $PY - $T/a.npy $T/q.npy $T/an1.json" <<'PY'
import sys, json, numpy as np
x = np.load(sys.argv[1]).astype(np.float64); q = np.load(sys.argv[2]).astype(np.float64)
m = json.load(open(sys.argv[3]))[0]["metrics"]
e = q - x
mse = (e * e).mean(); sqnr = 10 * np.log10((x * x).sum() / (e * e).sum())
eff = -0.5 * np.log2((e * e).sum() / (x * x).sum())
cos = (x * q).sum() / np.sqrt((x * x).sum() * (q * q).sum())
under = ((x != 0) & (q == 0)).mean()
for k, v in [("mse", mse), ("sqnr_db", sqnr), ("eff_bits_energy", eff), ("cosine", cos), ("underflow_frac", under),
             ("max_abs_err", np.abs(e).max()), ("mean_err", e.mean())]:
    assert abs(m[k] - v) <= 1e-9 * max(1, abs(v)), (k, m[k], v)
assert abs(m["eff_bits_sqnr"] - (m["sqnr_db"] - 1.76) / 6.02) < 1e-12
# error energy by source: the flushed values' share of sum e^2, the shares summing to 1
ee = m["err_energy"]
u = (x != 0) & (q == 0)
assert abs(ee["underflow"] - (e[u] ** 2).sum() / (e * e).sum()) <= 1e-9, (ee, (e[u] ** 2).sum() / (e * e).sum())
assert abs(ee["underflow"] + ee["clip"] + ee["rounding"] - 1) < 1e-12, ee
PY
ok "results are stored with their histograms" bash -c "[ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM result WHERE kind IN ('metrics','hist')\") -eq 4 ]"
ok "--csv has a header and one row per format" bash -c "[ \$($QS analyze a -f mxfp4,nvfp4,hif8 --csv | wc -l) -eq 4 ]"
ok "per-format options: one row each" bash -c "$QS analyze a -f mxfp4,mxfp4:scale-rule=rceil --json | python3 -c '
import json,sys; r=json.load(sys.stdin); assert [x[\"options\"][\"scale_rule\"] for x in r]==[\"floor\",\"rceil\"], r'"
ok "--blocks stores per-block arrays" bash -c "$QS analyze a -f mxfp4 --blocks >/dev/null && [ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM result_blob WHERE name IN ('scale_code','rmse')\") -eq 2 ]"
check "per-block scale codes: one byte per block of 32" "[ \$(sqlite3 $QSCOPE_DB \"SELECT length(data) FROM result_blob WHERE name='scale_code'\") -eq \$((256*512/32)) ]"
fails "unknown tensor" 1 $QS analyze nosuch -f mxfp4
fails "no formats" 2 $QS analyze a
fails "bad per-format option" 2 $QS analyze a -f mxfp4:bogus=1
# a tensor beyond E4M3's 448: the table says why its numbers are -inf
$QS gen gaussian --shape 64x64 --seed 3 -o "$T/over448.npy" >/dev/null 2>&1
$PY -c "import numpy as np; x=np.load('$T/over448.npy'); x[0,:3]=[1000,-600,3e4]; np.save('$T/over448.npy', x)"
$QS import --copy "$T/over448.npy" >/dev/null 2>&1
ok "analyze: a row with values that became NaN names them in MAIN ERROR" bash -c "
  $QS analyze over448 -f fp8_e4m3,fp8_e4m3:sat > $T/o448.txt 2>&1; cat $T/o448.txt;
  grep -q '^over448 .* -inf .*NaN/Inf 0\.073%' $T/o448.txt && grep -q '^ *TENSOR .*MAIN ERROR' $T/o448.txt &&
  grep -q '^over448 .*clipping [0-9>]' $T/o448.txt"
# the default differs from llm eval's (issue 28): a raw cast that overflows says so, once per format, on stderr
# (both tensors overflow E4M3: a's outlier channels reach past 448)
ok "analyze: an unscaled FP8 cast that overflows gets a one-line note naming the scaled option" bash -c "
  $QS analyze over448 a -f fp8_e4m3,fp8_e4m3:scale=row,mxfp4 --json > $T/o448.json 2> $T/o448.err &&
  python3 -c 'import json; assert len(json.load(open(\"$T/o448.json\"))) == 6' &&
  [ \$(grep -c note: $T/o448.err) = 1 ] &&
  grep -q '^qscope: note: fp8_e4m3 overflowed on 2 tensors (up to 0.0732% of the values became NaN/Inf): analyze casts unscaled by default (scale=none, the raw format; llm eval scales per row); -f fp8_e4m3:scale=row (or --scale row|tensor)' $T/o448.err"
ok "analyze: no note when nothing overflows, or the cast is scaled" bash -c "
  $QS analyze over448 a -f fp8_e4m3:scale=row,mxfp4,bf16 > /dev/null 2> $T/o448b.err && $QS analyze a -f fp8_e5m2 > /dev/null 2>> $T/o448b.err &&
  ! grep -q note: $T/o448b.err"
ok "analyze: saturating raw casts get the note too" bash -c "
  $QS analyze over448 -f fp8_e4m3:sat > /dev/null 2> $T/o448c.err && grep -q 'note: fp8_e4m3:sat overflowed .*saturated or became NaN/Inf.*-f fp8_e4m3:sat:scale=row' $T/o448c.err"
ok "analyze --csv: the energy shares of every row sum to 1" bash -c "$QS analyze over448 a -f mxfp4,fp8_e4m3 --csv | python3 -c '
import csv, sys
rows = list(csv.DictReader(sys.stdin)); assert len(rows) == 4, rows
for r in rows: assert abs(sum(float(r[k]) for k in (\"err_underflow\", \"err_clip\", \"err_rounding\")) - 1) < 1e-8, r'   # printed with 9 digits"

# Ctrl-C: nothing half-stored
$QS gen gaussian --shape 4096x4096 --name big >/dev/null 2>&1
before=$(sqlite3 "$QSCOPE_DB" "SELECT count(*) FROM result")
$QS analyze big -f fp8_e4m3,mxfp4,nvfp4,hif4,hif8,mxfp6_e2m3,int8,int4,m2xfp4,bf16 --force >/dev/null 2>"$T/int.err" &
pid=$!
sleep 0.4
kill -INT $pid 2>/dev/null; wait $pid; irc=$?
check "Ctrl-C exits with 130 (or finished first)" "[ $irc = 130 ] || [ $irc = 0 ]"
check "every stored metrics result has its histograms (no half-stored pair)" \
  "[ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM result WHERE kind='metrics'\") = \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM result WHERE kind='hist'\") ]"
ok "database consistent after the interrupt" $QS check

# a report on the demo database
export QSCOPE_DB="$T/demo.db"
QSCOPE_SAMPLE_DIR=none $QS demo >/dev/null 2>&1   # the synthetic set only: the counts below are for it
ok "report (markdown) on the demo database" $QS report --claims none -o "$T/rep" --formats mxfp4,nvfp4,fp8_e5m2,int8:gran=row
ok "report.md and its PNGs exist" bash -c "[ -s $T/rep/report.md ] && ls $T/rep/t*.png | wc -l | grep -qx 18"
ok "every PNG decodes with the right size and carries provenance" $PY - "$T/rep" <<'PY'
import sys, glob, struct, zlib
for p in glob.glob(sys.argv[1] + "/t*.png"):   # the claims' PNGs: tests/e2e/claims.sh
    b = open(p, "rb").read()
    assert b[:8] == b"\x89PNG\r\n\x1a\n", p
    w, h = struct.unpack(">II", b[16:24]); assert (w, h) == (1000, 600), (p, w, h)
    assert b"tEXt" in b and b"qscope:tensor-hashes" in b and b"pHYs" in b, p
    # decompress the image data to be sure it is whole
    i, idat = 8, b""
    while i < len(b):
        n = struct.unpack(">I", b[i:i+4])[0]; t = b[i+4:i+8]
        if t == b"IDAT": idat += b[i+8:i+8+n]
        i += 12 + n
    assert len(zlib.decompress(idat)) == h * (1 + 3 * w) or len(zlib.decompress(idat)) == h * (1 + 4 * w), p
PY
ok "report.md references every PNG" bash -c "for f in $T/rep/*.png; do grep -q \"(\$(basename \$f))\" $T/rep/report.md || exit 1; done"
ok "HTML report is one file with every image embedded" bash -c "$QS report --claims none -o $T/reph --format html --formats mxfp4,nvfp4 >/dev/null && [ \$(grep -o 'data:image/png;base64,' $T/reph/report.html | wc -l) -eq \$(ls $T/reph/*.png | wc -l) ] && ! grep -q 'src=\"t0' $T/reph/report.html"
ok "report.json numbers equal analyze --json" bash -c "$QS report --claims none -o $T/repj --format json --formats mxfp4,nvfp4 >/dev/null && $QS analyze --all -f mxfp4,nvfp4 --json > $T/all.json && python3 - $T/repj/report.json $T/all.json" <<'PY'
import sys, json
rep, an = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
want = {(r["tensor"], r["format"]): r["metrics"] for r in an}
n = 0
for t in rep["tensors"]:
    for r in t["results"]:
        assert r["metrics"] == want[(t["name"], r["format"])], (t["name"], r["format"]); n += 1
assert n == len(want) == 18, (n, len(want))
PY
ok "report.csv has a row per tensor and format" bash -c "$QS report --claims none -o $T/repc --format csv --formats mxfp4,nvfp4 >/dev/null && [ \$(wc -l < $T/repc/report.csv) -eq 19 ]"
fails "report with no matching tensor" 1 $QS report --claims none -o "$T/none" --tensors 'zzz*'

# Scaled element casts (scale=tensor|row|col, docs/formats.md): the scaling default of llm/attn in
# analyze and quant, on a database of their own.
QC="$QS --db $T/cs.db"
$QS gen gaussian --shape 64x512 --seed 11 -o "$T/g.npy" 2>/dev/null
$QC import --copy "$T/g.npy" >/dev/null 2>&1
ok "hif8:scale=row is its own result: cached apart from the raw cast, options and label" bash -c "
  $QC analyze g -f hif8 --json > $T/cs0.json && $QC analyze g -f hif8:scale=row,hif8 --json > $T/cs1.json &&
  python3 -c 'import json; a=json.load(open(\"$T/cs0.json\")); b=json.load(open(\"$T/cs1.json\"))
assert [x[\"cached\"] for x in b]==[False,True], b
assert \"scale\" not in a[0][\"options\"] and b[0][\"options\"][\"scale\"]==\"row\", (a, b)
assert b[0][\"metrics\"][\"sum_e2\"] != b[1][\"metrics\"][\"sum_e2\"]' &&
  $QC analyze g -f hif8:scale=row | grep -q '^g  *hif8:scale=row '"
ok "quant --scale row is llm's per-row rounding: Q(x*s)/s, s = fl32(15/absmax), around the raw cast" bash -c "
  $QS quant -f hif8 --scale row $T/g.npy -o $T/qr.npy 2>/dev/null && $PY - $T/g.npy $T/qr.npy '$QS' 15" <<'PY'
import sys, subprocess, numpy as np
x = np.load(sys.argv[1]); q = np.load(sys.argv[2]); target = float(sys.argv[4])
amax = np.abs(x).max(axis=1).astype(np.float64)
s = (target / amax).astype(np.float32)[:, None]; inv = (amax / target).astype(np.float32)[:, None]
xs = (x * s).astype(np.float32)
out = subprocess.run([sys.argv[3], "quant", "-f", "hif8"], input="\n".join("%.9g" % v for v in xs.ravel()),
                     capture_output=True, text=True, check=True).stdout.split()
want = (np.array(out, dtype=np.float32).reshape(x.shape) * inv).astype(np.float32)
assert want.tobytes() == q.tobytes(), np.argwhere(want != q)[:5]
PY
ok "analyze hif8:scale=row measures that output (and 32 bits per row of scale)" bash -c "
  $QC analyze g -f hif8:scale=row --json > $T/cs2.json && $PY - $T/g.npy $T/qr.npy $T/cs2.json" <<'PY'
import sys, json, numpy as np
x = np.load(sys.argv[1]).astype(np.float64); q = np.load(sys.argv[2]).astype(np.float64)
m = json.load(open(sys.argv[3]))[0]["metrics"]
e = q - x
assert abs(m["sum_e2"] - (e * e).sum()) <= 1e-9 * (e * e).sum(), m["sum_e2"]
assert abs(m["eff_bits_energy"] + 0.5 * np.log2((e * e).sum() / (x * x).sum())) < 1e-9
assert m["bits_per_elem"] == 8 + 32 * 64 / (64 * 512), m["bits_per_elem"]
PY
ok "HiF8 absmax->15 beats absmax->2^15 (no mantissa at the top) on Gaussian rows" bash -c "
  $PY - $T/g.npy $T/cs2.json '$QS'" <<'PY'
import sys, json, subprocess, numpy as np
x = np.load(sys.argv[1]); eff15 = json.load(open(sys.argv[2]))[0]["metrics"]["eff_bits_energy"]
amax = np.abs(x).max(axis=1).astype(np.float64)
s = (32768.0 / amax).astype(np.float32)[:, None]; inv = (amax / 32768.0).astype(np.float32)[:, None]
out = subprocess.run([sys.argv[3], "quant", "-f", "hif8"], input="\n".join("%.9g" % v for v in (x * s).astype(np.float32).ravel()),
                     capture_output=True, text=True, check=True).stdout.split()
q = (np.array(out, dtype=np.float32).reshape(x.shape) * inv).astype(np.float64); xd = x.astype(np.float64)
eff_top = -0.5 * np.log2(((q - xd) ** 2).sum() / (xd * xd).sum())
print("# hif8 scale=row (absmax->15): %.3f effective bits; absmax->2^15: %.3f" % (eff15, eff_top))
assert eff15 > eff_top + 1.5, (eff15, eff_top)
PY
ok "scale=col: one scale per column (bits 8 + 32/64)" bash -c "$QC analyze g -f fp8_e4m3:scale=col --json | python3 -c '
import json,sys; m=json.load(sys.stdin)[0][\"metrics\"]; assert m[\"bits_per_elem\"]==8.5 and m[\"clip_frac\"]==0, m'"
fails "scale= refused for mxfp4" 2 $QC analyze g -f mxfp4:scale=row
check "the message names the format" "grep -q 'format mxfp4 takes no scale=row' $T/err"
fails "scale= refused for bf16" 2 $QC analyze g -f bf16:scale=tensor
fails "an unknown scale value" 2 $QC analyze g -f hif8:scale=block

# --- a TENSOR argument is the tensor of that exact name first, a glob only when no tensor has it
QN=("$QS" --db "$T/names.db")
for n in 'w[0]' w0 w1; do "${QN[@]}" gen gaussian --n 64 --seed 3 --name "$n" >/dev/null 2>&1; done
names() { "${QN[@]}" analyze "$@" -f mxfp4 --json | $PY -c 'import json,sys; print(" ".join(r["tensor"] for r in json.load(sys.stdin)))'; }
check "an existing name is that tensor alone ('w[0]', not the pattern matching w0)" '[ "$(names "w[0]")" = "w[0]" ]'
check "a name no tensor has is a glob" '[ "$(names "w[01]")" = "w0 w1" ] && [ "$(names "w*")" = "w0 w1 w[0]" ]'
check "a name and a glob together: each tensor once" '[ "$(names "w[0]" "w?")" = "w[0] w0 w1" ]'
done_testing
