#!/usr/bin/env bash
# analyze --json --blocks of the gen kinds, the demo set and hand-made edge-case .npy files under
# every format and option variant, base vs new; then the stored rows.  Args: OUT JOBS [SIMD]
OUT=$1; JOBS=$2; SIMDV=${3:-}; DATA=${DATA:?}
source "$(dirname "$0")/lib.sh"
[ -n "$SIMDV" ] && QS_VENV="QS_SIMD=$SIMDV"
FORMATS=$("$NEW_BIN" formats | awk 'NR>1{print $1}' | paste -sd,)
V="mxfp4:scale-rule=ceil,mxfp4:scale-rule=even,mxfp4:scale-rule=rceil,mxfp4:scale-rule=uos,mxfp4:scale-rule=uos=6.5"
V="$V,mxfp4:block=16,mxfp4:block=64,mxfp4:axis=0,mxfp8_e4m3:axis=0,nvfp4:axis=0,hif4:axis=0,int8:axis=0"
V="$V,mxfp4:round=tz,mxfp4:round=rtz,mxfp4:round=sr,mxfp4:round=sr:seed=5,mxfp6_e2m3:round=sr,mxint8:block=16"
V="$V,mxfp4:floor-log2f,mxfp4:zero-positive,mxfp8_e4m3:flush-subnormal-blocks,mxfp8_e4m3:nonfinite-block=te,mxint8:zero-block-scale=01"
V="$V,int8:gran=row,int8:gran=col,int8:gran=block:block=32,int4:gran=row,int4:gran=col,int4:gran=block:block=16"
V="$V,nvfp4:nvfp4=torchao,nvfp4:nvfp4=te,nvfp4:block=32,m2xfp4:m2x=es,m2xfp4:m2x=em"
V="$V,hif4:round=rne,hif4:round=ta,hif4:sat,nvfp4:round=sr,hif8:sat,hif8:round=ta,mxfp4:nonfinite-block=te,hif8:round=hr,hif8:round=sr,hif8:scale=row,hif8:scale=tensor"
V="$V,fp8_e4m3:sat,fp8_e5m2:sat,fp8_e4m3:scale=tensor,fp8_e4m3:scale=row,bf16:round=sr,fp16:round=rtz,fp6_e3m2:round=tz,fp4_e2m1:scale=row"
for s in base new; do
  for k in gaussian laplace student-t uniform lognormal; do runq $s gen $k --shape 40x96 --seed 3 -o "$OUT/$s/g-$k.npy" >/dev/null; done
  runq $s gen llm-act --shape 48x128 --seed 2 -o "$OUT/$s/g-llm-act.npy" >/dev/null
  runq $s gen gaussian --n 777 -o "$OUT/$s/g-odd.npy" >/dev/null
  runq $s demo > /dev/null 2>&1
  cp "$DATA"/*.npy "$OUT/$s/"
  for f in "$OUT/$s/"*.npy; do b=$(basename "$f" .npy); runq $s import --prefix "x-$b" "$f" > /dev/null; done
done
for f in "$OUT"/new/*.npy; do cmp_files "gen-$(basename "$f")" "$(basename "$f")"; done
cmp_cmd ls ls
TENS=$(runq new ls | awk 'NR>1{print $1}')
# at most 64 formats per run: the registry's formats, then the variants
for t in $TENS; do cmp_cmd "analyze-$t-j$JOBS${SIMDV:+-$SIMDV}" analyze "$t" -f "$FORMATS" --blocks --json -j "$JOBS"
  cmp_cmd "analyze-$t-var-j$JOBS${SIMDV:+-$SIMDV}" analyze "$t" -f "$V" --blocks --json -j "$JOBS"
  cmp_cmd "analyze-$t-col-j$JOBS${SIMDV:+-$SIMDV}" analyze "$t" -f fp8_e5m2:scale=col,hif8:scale=col --blocks --json -j "$JOBS"; done
cmp_cmd "analyze-all-table" analyze --all -f "$FORMATS" -j "$JOBS"
cmp_cmd "analyze-all-csv" analyze --all -f "$V" --csv -j "$JOBS"
# a global option form, too
cmp_cmd "analyze-global-opts" analyze 'x-*' -f mxfp4,mxfp6_e3m2,mxint8 --scale-rule rceil --block 16 --round tz --zero-positive --force --json --blocks -j "$JOBS"
cmp_cmd "analyze-global-gran" analyze 'x-*' -f int8,int4 --gran block --block 32 --axis 0 --force --json -j "$JOBS"
cmp_db "db-j$JOBS${SIMDV:+-$SIMDV}"
renorm
