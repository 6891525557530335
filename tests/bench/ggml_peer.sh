#!/bin/sh
# Peer benchmark for `qscope bench formats`: ggml's own quantize/dequantize speed for MXFP4 and
# NVFP4 (tests/test-quantize-perf.cpp), built CPU-only from a local ggml checkout.
#
#   tests/bench/ggml_peer.sh GGML_CHECKOUT [BUILD_DIR]
#
# GGML_CHECKOUT is a checkout of ggml-org/ggml that you provide (this script downloads nothing:
# no clone, no FetchContent; it is not part of `make test` or `make bench`, and ggml is never
# committed here).  BUILD_DIR defaults to $TMPDIR/ggml-peer-build ($TMPDIR: /tmp).
#
# Build: cmake Release, static, CPU backend only, GGML_NATIVE=ON (-march=native, as a user
# building ggml on this machine gets), OpenMP/BLAS/accelerators off; only the target
# test-quantize-perf.  Run: pinned to CPU 0 (taskset), one thread (the tool calls the row
# functions directly, it never starts threads), for --type mxfp4 and --type nvfp4, ops
# quantize_row_q_reference, quantize_row_q (ggml-cpu's from_float) and dequantize_row_q, on
# 4096 and 655360 values (L1/L3-sized, 200 iterations) and on 16777216 values (qscope's bench
# size, 15 iterations).  ggml's input is its own 0.1 + 2*cos(i): not qscope's Gaussian.
#
# ggml prints "min cycles/32 vals" and "avg cycles/32 vals" counted with RDTSCP, i.e. in TSC
# ticks, not core clock cycles.  So the conversion to M elem/s uses the TSC rate, which this
# script measures (a 0.5 s CLOCK_MONOTONIC interval against RDTSCP, tiny C program) and prints
# next to /proc/cpuinfo "cpu MHz":  M elem/s = tsc_MHz * 32 / cycles_per_32.
set -eu

src=${1:?usage: $0 GGML_CHECKOUT [BUILD_DIR]}
bld=${2:-${TMPDIR:-/tmp}/ggml-peer-build}
[ -f "$src/tests/test-quantize-perf.cpp" ] || { echo "$src: not a ggml checkout" >&2; exit 2; }

commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)

cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_BUILD_TESTS=ON -DGGML_BUILD_EXAMPLES=OFF -DGGML_NATIVE=ON \
    -DGGML_OPENMP=OFF -DGGML_BLAS=OFF -DGGML_CPU_KLEIDIAI=OFF -DGGML_ZENDNN=OFF \
    -DFETCHCONTENT_FULLY_DISCONNECTED=ON >"$bld.cmake.log" 2>&1 \
    || { cat "$bld.cmake.log" >&2; exit 1; }
cmake --build "$bld" --target test-quantize-perf -j "$(nproc)" >"$bld.build.log" 2>&1 \
    || { tail -40 "$bld.build.log" >&2; exit 1; }
bin=$(find "$bld" -name test-quantize-perf -type f -perm -u+x | head -1)

# TSC rate: RDTSCP ticks over 0.5 s of CLOCK_MONOTONIC.
cat >"$bld/tsc_rate.c" <<'EOF'
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(void)
{
    unsigned a;
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now(); unsigned long long c0 = __rdtscp(&a);
        while (now() - t0 < 0.5) {}
        double t1 = now(); unsigned long long c1 = __rdtscp(&a);
        double mhz = (double)(c1 - c0) / (t1 - t0) / 1e6;
        if (r == 0 || mhz < best) best = mhz;
    }
    printf("%.1f\n", best);
    return 0;
}
EOF
cc -O2 -o "$bld/tsc_rate" "$bld/tsc_rate.c"
tsc=$("$bld/tsc_rate")
cpuinfo_mhz=$(awk -F: '/^cpu MHz/ {gsub(/ /, "", $2); print $2; exit}' /proc/cpuinfo)

echo "ggml commit $commit"
echo "binary $bin"
echo "TSC measured ${tsc} MHz (RDTSCP vs CLOCK_MONOTONIC); /proc/cpuinfo cpu MHz ${cpuinfo_mhz}"

out="$bld/quantize-perf.txt"
: >"$out"
for t in mxfp4 nvfp4; do
    ops="--op quantize_row_q_reference --op quantize_row_q --op dequantize_row_q"
    # shellcheck disable=SC2086
    taskset -c 0 "$bin" --type "$t" $ops --size 4096 --size 655360 -i 200 >>"$out"
    # shellcheck disable=SC2086
    taskset -c 0 "$bin" --type "$t" $ops --size 16777216 -i 15 >>"$out"
done
cat "$out"

# Summary: one line per type/op/size, min and avg cycles/32 values and the M elem/s they give.
echo
awk -v tsc="$tsc" '
    /^[a-z0-9_]+$/                 { type = $1 }
    /^  [a-z_]+$/                  { op = $1; sub(/^ +/, "", op) }
    /^    [0-9]+ values/           { size = $1 }
    /min cycles\/32 vals/          { mn = $NF }
    /avg cycles\/32 vals/          { av = $NF;
        printf "%-6s %-25s %9d  min %8.2f  avg %8.2f cycles/32  ->  %7.1f (min)  %7.1f (avg) M elem/s\n",
               type, op, size, mn, av, tsc * 32 / mn, tsc * 32 / av }
' "$out"
