#!/usr/bin/env bash
# The quant / formats / explain command-line contract (issue 3): stdin numbers in, %.9g values out.
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
fails "a bad token is a runtime error" 1 bash -c "echo '1 two 3' | $QS quant -f fp16"
check "the error names the token" "grep -q \"value 2 ('two')\" $T/err"
fails "unknown format is a usage error" 2 $QS quant -f fp7
fails "unsupported rounding is a usage error" 2 $QS quant -f mxfp4 --round hr
fails "scale rule on a plain cast is a usage error" 2 $QS quant -f fp16 --scale-rule ceil
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
