#!/usr/bin/env bash
# Larger than memory: quant (file and --name), import (reference and --copy), show, analyze and
# plot (histograms, block heatmap) run on a 320 MiB tensor under `ulimit -v` of 128 MiB and give exactly the outputs of an
# unlimited run.  ulimit -v counts address space, mappings included, so this holds only because
# tensors are read in windows (pread) and written in blocks: nothing maps or buffers the whole file.
# OpenBLAS (linked, idle here) would map a 128 MiB buffer per worker thread at start-up; under the limit
# qscope caps its threads itself (app/cli/blas_limit.c), so nothing here sets OPENBLAS_NUM_THREADS.
source "$(dirname "$0")/lib.sh"
unset OPENBLAS_NUM_THREADS GOTO_NUM_THREADS OMP_NUM_THREADS
LIMIT_KB=131072                      # 128 MiB
R=8192 C=10240                       # 83,886,080 f32 values: 320 MiB, 2.5x the limit
lim() { (ulimit -v $LIMIT_KB && exec "$@"); }
# AddressSanitizer reserves terabytes of address space for its shadow at start, so an instrumented
# qscope cannot start under any `ulimit -v`: the sanitizer build runs the "limited" half unlimited
# (what it still checks: the same outputs from two runs, with ASan watching the streaming code).
if asan_build; then
  qs_lim() { "$@"; }
  skip "qscope under ulimit -v" "asan: AddressSanitizer cannot start under a limit"
else
  qs_lim() { lim "$@"; }
fi
res() { sqlite3 "$1" "SELECT r.tensor_hash, r.kind, r.format, r.options, r.data, b.name, hex(b.data) FROM result r
                      LEFT JOIN result_blob b ON b.result_id = r.id ORDER BY 1, 2, 3, 4, 6"; }
hashes() { sqlite3 "$1" "SELECT name, hash, storage FROM tensor ORDER BY name"; }
stats() { sqlite3 "$1" "SELECT t.name, s.* FROM tensor_stats s JOIN tensor t ON t.id = s.tensor_id ORDER BY 1" | cut -d'|' -f1,3-; }

ok "generate a 320 MiB tensor" $QS gen uniform --shape ${R}x$C --seed 3 -o "$T/big.npy"
check "it is over twice the limit" "[ \$(stat -c %s $T/big.npy) -gt \$((2 * LIMIT_KB * 1024)) ]"
ln "$T/big.npy" "$T/copy.npy"        # the same bytes under a second path for import --copy
MAPIT="import mmap, sys; f = open(sys.argv[1], 'rb'); m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ); m[-1]"
ok "mapping the whole file works without the limit" /usr/bin/python3 -c "$MAPIT" "$T/big.npy"
fails "and fails under it (the limit bites)" 1 lim /usr/bin/python3 -c "$MAPIT" "$T/big.npy"

for run in free lim; do
  [ $run = free ] && L= || L=qs_lim
  D="$T/$run.db"
  ok "$run: import (reference)" $L $QS --db "$D" import "$T/big.npy"
  ok "$run: show" $L $QS --db "$D" show big --json
  grep -v '"imported_at"\|"path"' "$T/out" > "$T/show.$run"
  ok "$run: analyze -f mxfp4,int8" $L $QS --db "$D" analyze big -f mxfp4,int8
  ok "$run: quant -f nvfp4 FILE -o OUT" $L $QS quant -f nvfp4 "$T/big.npy" -o "$T/q.$run.npy"
  ok "$run: quant -f int8 (one scale per tensor) FILE -o OUT" $L $QS quant -f int8 "$T/big.npy" -o "$T/i.$run.npy"
  ok "$run: quant TENSOR --name (stored)" $L $QS --db "$D" quant big -f fp8_e4m3 --name bigq
  ok "$run: import --copy" $L $QS --db "$D" import --copy "$T/copy.npy"
done
check "quant nvfp4: same bytes under the limit" "cmp -s $T/q.free.npy $T/q.lim.npy"
check "quant int8: same bytes under the limit" "cmp -s $T/i.free.npy $T/i.lim.npy"
check "analyze: same results and blobs" "[ \"\$(res $T/free.db | sha256sum)\" = \"\$(res $T/lim.db | sha256sum)\" ] && [ \$(res $T/lim.db | wc -l) -ge 2 ]"
check "quant --name and import --copy: same tensors (hashes)" "[ \"\$(hashes $T/free.db)\" = \"\$(hashes $T/lim.db)\" ]"
check "and the same statistics" "[ \"\$(stats $T/free.db)\" = \"\$(stats $T/lim.db)\" ]"
check "show: the same" "cmp -s $T/show.free $T/show.lim"
check "the copy is embedded" "sqlite3 $T/lim.db \"SELECT storage FROM tensor WHERE name='copy'\" | grep -qx blob"
ok "analyze of the embedded copy under the limit" qs_lim $QS --db "$T/lim.db" analyze copy -f hif8
ok "plot err-hist (histograms of the values and errors) under the limit" \
  qs_lim $QS --db "$T/lim.db" plot err-hist big -f nvfp4 -o "$T/p.png"
check "a PNG" "[ \"\$(head -c 4 $T/p.png | tail -c 3)\" = PNG ]"
ok "plot block-heatmap (per-block RMSE, one row of tiles held at a time) under the limit" \
  qs_lim $QS --db "$T/lim.db" plot block-heatmap big -f mxfp4 -o "$T/h.png"
done_testing
