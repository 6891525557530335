#!/usr/bin/env bash
# The quant / formats / explain command-line contract: stdin numbers in, %.9g values out.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
q() { local f=$1; shift; printf '%s\n' "$@" | $QS quant -f $f; }
eq() {  # eq DESC EXPECTED-OUTPUT COMMAND...
  local d=$1 want=$2; shift 2
  local got; got=$("$@" 2>&1 | tr '\n' ' ' | sed 's/ $//')
  _n=$((_n + 1))
  if [ "$got" = "$want" ]; then echo "ok $_n - $d"; else echo "not ok $_n - $d"; echo "#   want: $want"; echo "#   got:  $got"; fi
}

eq "fp8_e4m3: exact values, RNE tie to even at 464, overflow to NaN, -0 kept, nan/inf" \
   "1 448 448 nan -0 0 nan nan" q fp8_e4m3 1 448 464 500 -0 1e-9 nan inf
eq "fp8_e4m3 --sat saturates" "448 -448 448" bash -c "printf '500 -inf inf' | $QS quant -f fp8_e4m3 --sat"
eq "hex floats, exponents and spellings are read" "12 -0.25 inf -inf nan" \
   bash -c "printf '0x1.8p+3 -2.5e-1 inf -inf nan' | $QS quant -f fp32"
eq "each input is rounded to float32 first" "0.100000001" bash -c "echo 0.1 | $QS quant -f fp32"
eq "bf16 RNE tie goes to even" "1 1.015625" q bf16 1.00390625 1.01171875
eq "bf16 --round ta ties away" "1.0078125" bash -c "echo 1.00390625 | $QS quant -f bf16 --round ta"
eq "fp16 overflow to inf" "65504 inf" q fp16 65504 65520
eq "fp4_e2m1 grid and saturation" "0 0.5 1 1.5 2 3 4 6 6" q fp4_e2m1 0.2 0.6 1.1 1.4 2.4 2.6 4.5 5.5 100
eq "mxfp4 codes and the E8M0 scale per value" "0x2 0x7f 0x4 0x7f 0x5 0x7f 0x6 0x7f" \
   bash -c "printf '1 2 3 4' | $QS quant -f mxfp4 --codes"
eq "mxfp4 FLOOR scale clamps the block max to 6·X" "1 2 3 6 6" q mxfp4 1 2 3 6 7.9
eq "empty input gives empty output" "" bash -c "printf '' | $QS quant -f mxfp4"
ok "mxfp4: 33 values are two blocks (the last one alone: 1000 -> 6 x 2^7)" bash -c \
   "[ \"\$( (seq 1 32; echo 1000) | $QS quant -f mxfp4 | tail -1)\" = 768 ]"
refuses "a bad token is a runtime error" 1 "stdin: value 2 \('two'\) is not a number" bash -c "echo '1 two 3' | $QS quant -f fp16"
check "the error names the token" "grep -q \"value 2 ('two')\" $T/err"
refuses "unknown format is a usage error" 2 "unknown format .fp7." $QS quant -f fp7
refuses "unsupported rounding is a usage error" 2 "does not support rounding .hr." $QS quant -f mxfp4 --round hr
refuses "scale rule on a plain cast is a usage error" 2 "--scale-rule does not apply" $QS quant -f fp16 --scale-rule ceil
ok "every registry format answers on stdin" bash -c "for f in \$($QS formats --json | python3 -c 'import json,sys; print(\" \".join(x[\"name\"] for x in json.load(sys.stdin)))'); do printf '0.1 -2 3.5 1e-3 7\n' | $QS quant -f \$f | wc -l | grep -qx 5 || { echo \$f; exit 1; }; done"

# formats and explain
ok "formats --json lists the issue's formats" bash -c "$QS formats --json | python3 -c '
import json,sys
names={f[\"name\"] for f in json.load(sys.stdin)}
want=\"fp32 bf16 fp16 fp8_e4m3 fp8_e5m2 fp6_e3m2 fp6_e2m3 fp4_e2m1 e8m0 hif8 mxfp8_e4m3 mxfp8_e5m2 mxfp6_e3m2 mxfp6_e2m3 mxfp4 mxint8 nvfp4 hif4 m2xfp4 int8 int4\".split()
missing=[w for w in want if w not in names]
assert not missing, missing'"
ok "formats --json: fp8_e4m3 facts" bash -c "$QS formats --json | python3 -c '
import json,sys
f={x[\"name\"]:x for x in json.load(sys.stdin)}[\"fp8_e4m3\"]
assert f[\"max_finite\"]==448 and f[\"min_subnormal\"]==2**-9 and f[\"min_normal\"]==2**-6 and not f[\"has_inf\"] and f[\"has_nan\"], f'"
ok "explain shows the code, fields, neighbours and error" bash -c "$QS explain -f fp8_e4m3 0.3 | grep -q 'neighbours' && $QS explain -f fp8_e4m3 0.3 | grep -q '^code *0x'"
eq "explain --table lists all 16 FP4 codes" "17" bash -c "$QS explain -f fp4_e2m1 --table | wc -l"
ok "explain of a block format shows the scale" bash -c "$QS explain -f mxfp4 1 2 3 4 | grep -q 'E8M0 scale'"
ok "explain describes every block format's metadata in the row's words" bash -c "
  $QS explain -f hif4 1 2 3 4 | grep -q '^block 0 .*(E6M2 0x' && $QS explain -f int8 1 2 3 4 | grep -q 'FP32 scale' &&
  $QS explain -f m2xfp4 1 2 | grep -q 'sub-group fields' && $QS explain -f nvfp4 1 2 | grep -q 'UE4M3 block scale 0x.*tensor amax 2'"
ok "explain takes negative values" bash -c "$QS explain -f bf16 -1.5 | grep -q '^value *-1.5'"

# files and database tensors
$QS gen llm-act --shape 64x128 --seed 3 -o "$T/a.npy" 2>/dev/null
ok "quant a .npy file" $QS quant -f mxfp4 "$T/a.npy" -o "$T/q.npy"
ok "the result is on the MXFP4 grid, block by block, and has the input's shape" $PY - "$T/a.npy" "$T/q.npy" <<'PY'
import sys, numpy as np
a, q = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.shape == q.shape == (64, 128)
grid = np.array([0, .5, 1, 1.5, 2, 3, 4, 6])
for blk_a, blk_q in zip(a.reshape(-1, 32), q.reshape(-1, 32)):
    e = np.floor(np.log2(np.abs(blk_a).max())) - 2
    r = np.abs(blk_q) / 2.0 ** e
    assert np.all(np.isin(r, grid)), (r, e)
PY
ok "--axis 0 blocks run down the columns" bash -c "$QS quant -f mxfp4 --axis 0 $T/a.npy -o $T/q0.npy && ! cmp -s $T/q.npy $T/q0.npy"
ok "int8 per-row scales" $QS quant -f int8 --gran row "$T/a.npy" -o "$T/qi.npy"
ok "int8 per-row: each row's absmax is exact" $PY -c "
import numpy as np
a, q = np.load('$T/a.npy'), np.load('$T/qi.npy')
assert np.allclose(np.abs(q).max(1), np.abs(a).max(1), rtol=1e-6)"
$QS import --copy "$T/a.npy" >/dev/null 2>&1
ok "quant a database tensor stores the result with provenance" $QS quant -f nvfp4 a --name a_nvfp4
ok "the stored result records format, options and input hash" bash -c "$QS show a_nvfp4 --json | python3 -c '
import json,sys
m=json.load(sys.stdin)[\"metadata\"]
assert m[\"options\"][\"format\"]==\"nvfp4\" and m[\"options\"][\"nvfp4\"]==\"te\" and len(m[\"input_hash\"])==32 and m[\"quantized_from\"]==\"a\", m'"

# library variants (spec formats-mx.md §2.8; docs/formats.md "Library variants")
eq "T28: exponent bits by default" "6 1" bash -c "printf '0x1.fffffep+2 1' | $QS quant -f mxfp4"
eq "T28: --floor-log2f is ggml's floorf(log2f(amax)) (glibc rounds log2f up: scale 2^1)" "8 1" \
   bash -c "printf '0x1.fffffep+2 1' | $QS quant -f mxfp4 --floor-log2f"
eq "T10: ggml CPU elements = --round tz --zero-positive" "6 0.5 1.5 3 -0.5 0 2 4" \
   bash -c "printf '6 0.75 1.75 3.5 -0.75 -0.25 2.5 5' | $QS quant -f mxfp4 --round tz --zero-positive --floor-log2f"
eq "T10 codes and scale" "0x7 0x7f 0x1 0x7f 0x3 0x7f 0x5 0x7f 0x9 0x7f 0x0 0x7f 0x4 0x7f 0x6 0x7f" \
   bash -c "printf '6 0.75 1.75 3.5 -0.75 -0.25 2.5 5' | $QS quant -f mxfp4 --round tz --zero-positive --codes"
eq "--round tz alone keeps -0" "6 -0" bash -c "printf '6 -0.25' | $QS quant -f mxfp4 --round tz"
eq "--round tz on an element cast: ties toward zero" "0 0.5 1.5 4 -3" \
   bash -c "printf '0.25 0.75 1.75 5 -3.5' | $QS quant -f fp4_e2m1 --round tz"
eq "--round tz: e5m2 61440 goes down to 57344 (RNE overflows to inf)" "57344 inf" \
   bash -c "echo 61440 | $QS quant -f fp8_e5m2 --round tz; echo 61440 | $QS quant -f fp8_e5m2"
eq "zeros keep their sign by default (fp4 +nan -> -0: ml_dtypes)" "-0 -0 -0 6 -0" \
   bash -c "printf -- '-0 -1e-9 nan' | $QS quant -f fp4_e2m1; printf '6 -0.2' | $QS quant -f mxfp4"
eq "--zero-positive: +0 only (casts and MX)" "0 0 0 6 0" \
   bash -c "printf -- '-0 -1e-9 nan' | $QS quant -f fp4_e2m1 --zero-positive; printf '6 -0.2' | $QS quant -f mxfp4 --zero-positive"
eq "T23: FP32-subnormal block quantized normally by default" "1.01019046e-39 2.98465363e-40" \
   bash -c "printf '1e-39 3e-40' | $QS quant -f mxfp8_e4m3"
eq "T23: --flush-subnormal-blocks (microxcaling) gives zeros, signs kept" "0 -0 0x00 0x00 0x80 0x00" \
   bash -c "printf '1e-39 -3e-40' | $QS quant -f mxfp8_e4m3 --flush-subnormal-blocks; printf '1e-39 -3e-40' | $QS quant -f mxfp8_e4m3 --flush-subnormal-blocks --codes"
eq "T7: an Inf makes the block NaN (scale 0xFF) by default" "nan nan nan" bash -c "printf '1 inf 2' | $QS quant -f mxfp4"
eq "T7: --nonfinite-block te: scale 0xFE, Inf saturates" "0x0 0xfe 0x7 0xfe 0x0 0xfe 0 inf 0" \
   bash -c "printf '1 inf 2' | $QS quant -f mxfp4 --nonfinite-block te --codes; printf '1 inf 2' | $QS quant -f mxfp4 --nonfinite-block te"
eq "--nonfinite-block te: a NaN still gives a NaN block" "nan nan nan" \
   bash -c "printf '1 inf nan' | $QS quant -f mxfp8_e4m3 --nonfinite-block te"
eq "T5: all-zero block scale 0x00 by default, 0x01 as microxcaling INT8" "0x00 0x00 0x00 0x01" \
   bash -c "echo 0 | $QS quant -f mxint8 --codes; echo 0 | $QS quant -f mxint8 --codes --zero-block-scale 01"
eq "--zero-block-scale 0x7f (MXAttention) under floor" "0x0 0x7f" bash -c "echo 0 | $QS quant -f mxfp4 --codes --zero-block-scale 0x7f"
ok "explain takes the variant options" bash -c "$QS explain -f mxfp4 --zero-block-scale 7f 0 -0 | grep -q 'metadata 0x7f' && $QS explain -f mxfp4 --floor-log2f 0x1.fffffep+2 | grep -q 'metadata 0x80'"
ok "help quant lists the variants" bash -c "$QS help quant | grep -q -- '--floor-log2f' && $QS help quant | grep -q -- '--nonfinite-block' && $QS help quant | grep -q 'tz'"
refuses "--floor-log2f on a plain cast is a usage error" 2 "--floor-log2f does not apply" $QS quant -f fp16 --floor-log2f
refuses "--floor-log2f with another scale rule is a usage error" 2 "--floor-log2f is the arithmetic of --scale-rule floor" $QS quant -f mxfp4 --floor-log2f --scale-rule rceil
refuses "--zero-positive on e8m0 (no zero) is a usage error" 2 "--zero-positive does not apply" $QS quant -f e8m0 --zero-positive
refuses "--round tz on nvfp4 is a usage error" 2 "does not support rounding .tz." $QS quant -f nvfp4 --round tz
refuses "--zero-block-scale ff (NaN) is a usage error" 2 "--zero-block-scale takes an E8M0 code" $QS quant -f mxfp4 --zero-block-scale ff
refuses "--nonfinite-block takes nan or te" 2 "--nonfinite-block is nan or te" $QS quant -f mxfp4 --nonfinite-block zero
refuses "--flush-subnormal-blocks on int8 is a usage error" 2 "--flush-subnormal-blocks does not apply" $QS quant -f int8 --flush-subnormal-blocks
ok "variants are recorded in the stored options; defaults add no keys" bash -c "$QS quant -f mxfp4 a --name a_ggml --round tz --zero-positive --floor-log2f --zero-block-scale 01 >/dev/null && $QS show a_ggml --json | python3 -c '
import json,sys
o=json.load(sys.stdin)[\"metadata\"][\"options\"]
assert o[\"round\"]==\"tz\" and o[\"floor_log2f\"] is True and o[\"zero_positive\"] is True and o[\"zero_block_scale\"]==1, o
assert \"flush_subnormal_blocks\" not in o and \"nonfinite_block\" not in o, o' && $QS show a_nvfp4 --json | python3 -c '
import json,sys
o=json.load(sys.stdin)[\"metadata\"][\"options\"]
assert set(o)=={\"format\",\"round\",\"block\",\"gran\",\"axis\",\"sat\",\"nvfp4\"}, o'"
done_testing
