#!/usr/bin/env bash
# Reference vectors of ggml's quantizers for tests/unit/test_format_ggml.c (kernels/format_ggml*.c).
#   bash tests/verify/ggml_ref_gen.sh GGML_SRC [OUTDIR]
# GGML_SRC: a checkout of github.com/ggml-org/ggml (src/ggml-quants.c, include/ggml.h, ...), never
# copied into this repository.  Builds, in a scratch directory, ggml-quants.c as ggml's CMake builds
# ggml-base (gcc -O3 -std=gnu11, no -march: no FMA contraction) with the small driver below, and
# writes to OUTDIR (default tests/verify/ggml_vectors):
#   input.f32       the inputs: 16 cases of 256 float32 (little-endian), see case_fill()
#   TYPE.bin        ggml's blocks of the 4096 inputs for each type, rows of 256 values:
#                   quantize_row_TYPE_ref (q4_0 q4_1 q5_0 q5_1 q8_0 q8_1 q2_k q3_k q4_k q5_k q6_k q8_k),
#                   quantize_iq4_nl / quantize_iq4_xs with no importance matrix (what llama-quantize calls)
#   TYPE.imat.bin   the same inputs as 16 rows of 256 through quantize_TYPE(x, dst, 16, 256, qw) with the
#                   importances qw = imatrix.f32 (256 values, two of them 0): ggml's quantize_*_impl
#   imatrix.f32     those importances
#   deq.txt         per type, FNV-1a 64 of the float32 bits of ggml's dequantize_row_TYPE of those blocks
#                   (q8_1 has none: d * q)
#   source.txt      the ggml commit the vectors came from
#   q8_0_cpu.bin, q8_1_cpu.bin  with GGML_CPU_LIB=path/libggml-cpu.so (a ggml CPU backend built for x86
#                   with AVX2 or better, e.g. llama.cpp's): its quantize_row_q8_0 / q8_1, the SIMD
#                   activation quantizers llama.cpp's CPU dot products use (qscope's q8_0/q8_1 --round rne)
set -eu
SRC=$(cd "${1:?usage: ggml_ref_gen.sh GGML_SRC [OUTDIR]}" && pwd)
OUT=${2:-$(cd "$(dirname "$0")" && pwd)/ggml_vectors}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
cat > "$W/gen.c" <<'CEOF'
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
#include "ggml-quants.h"

/* the few ggml.c functions ggml-quants.c references */
void ggml_abort(const char *file, int line, const char *fmt, ...) { fprintf(stderr, "abort %s:%d %s\n", file, line, fmt); exit(1); }
const char *ggml_type_name(enum ggml_type t) { (void)t; return "?"; }
size_t ggml_type_size(enum ggml_type t) { (void)t; return 0; }
/* bytes of a row of n values: the quantize_* drivers step through rows with it */
size_t ggml_row_size(enum ggml_type t, int64_t n)
{
    switch (t) {
    case GGML_TYPE_Q4_0: return (size_t)n / 32 * 18;
    case GGML_TYPE_Q4_1: return (size_t)n / 32 * 20;
    case GGML_TYPE_Q5_0: return (size_t)n / 32 * 22;
    case GGML_TYPE_Q5_1: return (size_t)n / 32 * 24;
    case GGML_TYPE_Q8_0: return (size_t)n / 32 * 34;
    case GGML_TYPE_Q2_K: return (size_t)n / 256 * 84;
    case GGML_TYPE_Q3_K: return (size_t)n / 256 * 110;
    case GGML_TYPE_Q4_K: return (size_t)n / 256 * 144;
    case GGML_TYPE_Q5_K: return (size_t)n / 256 * 176;
    case GGML_TYPE_Q6_K: return (size_t)n / 256 * 210;
    default: fprintf(stderr, "ggml_row_size: type %d\n", (int)t); exit(1);
    }
}

#define N 4096
static uint64_t s = 0x853c49e6748fea9bull;
static double u01(void) { s = s * 6364136223846793005ull + 1442695040888963407ull; return ((s >> 11) + 0.5) * 0x1p-53; }
static double gauss(void) { return sqrt(-2 * log(u01())) * cos(6.283185307179586 * u01()); }

/* case c of 256 values */
static void case_fill(int c, float *x)
{
    for (int i = 0; i < 256; i++) {
        double g = gauss();
        float v;
        switch (c) {
        case 0: v = (float)g; break;                                   /* N(0, 1) */
        case 1: v = (float)(0.02 * g); break;                          /* weight-like */
        case 2: v = 0.0f; break;                                       /* all zeros */
        case 3: v = (float)(0.01 * g); if (i == 77) v = 3.5f; break;   /* a single outlier */
        case 4: v = (float)(1e-39 * g); break;                         /* FP32 subnormal range */
        case 5: v = (float)(65504.0 * (2 * u01() - 1)); if (i % 37 == 0) v = i & 1 ? -65504.0f : 65504.0f; break;  /* near FP16 max */
        case 6: v = -(float)fabs(g); break;                            /* negative only */
        case 7: v = (float)fabs(0.1 * g) + 0.05f; break;               /* positive only, offset */
        case 8: v = (float)(2 * u01() - 1); break;                     /* uniform */
        case 9: v = i % 32 ? 0.125f * (float)((int)(u01() * 16) - 8) : 2.0f; break;   /* on a grid: ties */
        case 10: v = (float)ldexp(g, (i / 16) - 8); break;             /* magnitudes by sub-block */
        case 11: v = 0.5f; if (i >= 128) v = -1.5f; break;             /* constant halves */
        case 12: v = (float)g; if (i % 3 == 0) v = i % 2 ? -0.0f : 0.0f; break;   /* zeros and -0 in data */
        case 13: v = (float)(1e-16 * g); break;                        /* below ggml's all-zero threshold */
        case 14: v = (float)(g * g * g); break;                        /* heavy tails */
        default: v = (float)(1e-3 * g) + (i % 16 == 5 ? -0.2f : 0.0f); break;   /* an outlier per 16 */
        }
        x[i] = v;
    }
}

static uint64_t fnv(const float *y, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const uint8_t *p = (const uint8_t *)y;
    for (size_t i = 0; i < 4 * n; i++) { h ^= p[i]; h *= 0x100000001b3ull; }
    return h;
}

typedef void (*qfn)(const float *x, void *y, int64_t k);
typedef size_t (*qwfn)(const float *src, void *dst, int64_t nrow, int64_t n_per_row, const float *qw);
typedef void (*dfn)(const void *x, float *y, int64_t k);
static void q_iq4nl(const float *x, void *y, int64_t k) { quantize_iq4_nl(x, y, 1, k, NULL); }
static void q_iq4xs(const float *x, void *y, int64_t k) { quantize_iq4_xs(x, y, 1, k, NULL); }

int main(int argc, char **argv)
{
    const char *out = argv[1];
    (void)argc;
    static float x[N], y[N];
    for (int c = 0; c < 16; c++) case_fill(c, x + 256 * c);
    char path[4096];
    snprintf(path, sizeof path, "%s/input.f32", out);
    FILE *f = fopen(path, "wb");
    fwrite(x, 4, N, f);
    fclose(f);
    static const struct { const char *name; qfn q; dfn d; int blk, bytes; } T[] = {
        {"q4_0", (qfn)quantize_row_q4_0_ref, (dfn)dequantize_row_q4_0, 32, 18},
        {"q4_1", (qfn)quantize_row_q4_1_ref, (dfn)dequantize_row_q4_1, 32, 20},
        {"q5_0", (qfn)quantize_row_q5_0_ref, (dfn)dequantize_row_q5_0, 32, 22},
        {"q5_1", (qfn)quantize_row_q5_1_ref, (dfn)dequantize_row_q5_1, 32, 24},
        {"q8_0", (qfn)quantize_row_q8_0_ref, (dfn)dequantize_row_q8_0, 32, 34},
        {"q8_1", (qfn)quantize_row_q8_1_ref, NULL, 32, 36},
        {"q2_k", (qfn)quantize_row_q2_K_ref, (dfn)dequantize_row_q2_K, 256, 84},
        {"q3_k", (qfn)quantize_row_q3_K_ref, (dfn)dequantize_row_q3_K, 256, 110},
        {"q4_k", (qfn)quantize_row_q4_K_ref, (dfn)dequantize_row_q4_K, 256, 144},
        {"q5_k", (qfn)quantize_row_q5_K_ref, (dfn)dequantize_row_q5_K, 256, 176},
        {"q6_k", (qfn)quantize_row_q6_K_ref, (dfn)dequantize_row_q6_K, 256, 210},
        {"q8_k", (qfn)quantize_row_q8_K_ref, (dfn)dequantize_row_q8_K, 256, 292},
        {"iq4_nl", q_iq4nl, (dfn)dequantize_row_iq4_nl, 32, 18},
        {"iq4_xs", q_iq4xs, (dfn)dequantize_row_iq4_xs, 256, 136},
    };
    snprintf(path, sizeof path, "%s/deq.txt", out);
    FILE *h = fopen(path, "w");
    for (size_t t = 0; t < sizeof T / sizeof T[0]; t++) {
        size_t nb = N / T[t].blk, nbytes = nb * T[t].bytes;
        uint8_t *b = calloc(nbytes, 1);
        for (int r = 0; r < N / 256; r++) T[t].q(x + 256 * r, b + (size_t)r * (256 / T[t].blk) * T[t].bytes, 256);
        snprintf(path, sizeof path, "%s/%s.bin", out, T[t].name);
        f = fopen(path, "wb");
        fwrite(b, 1, nbytes, f);
        fclose(f);
        if (T[t].d) {
            T[t].d(b, y, N);
            fprintf(h, "%s %016llx\n", T[t].name, (unsigned long long)fnv(y, N));
        }
        free(b);
    }
    fclose(h);
    static float qw[256];
    for (int i = 0; i < 256; i++) qw[i] = (float)(0.05 + 2 * u01() * u01());
    qw[7] = qw[100] = 0.0f;
    qw[200] = 50.0f;
    snprintf(path, sizeof path, "%s/imatrix.f32", out);
    f = fopen(path, "wb");
    fwrite(qw, 4, 256, f);
    fclose(f);
    static const struct { const char *name; qwfn q; int blk, bytes; } TW[] = {
        {"q4_0", quantize_q4_0, 32, 18}, {"q4_1", quantize_q4_1, 32, 20}, {"q5_0", quantize_q5_0, 32, 22},
        {"q5_1", quantize_q5_1, 32, 24}, {"q8_0", quantize_q8_0, 32, 34}, {"q2_k", quantize_q2_K, 256, 84},
        {"q3_k", quantize_q3_K, 256, 110}, {"q4_k", quantize_q4_K, 256, 144}, {"q5_k", quantize_q5_K, 256, 176},
        {"q6_k", quantize_q6_K, 256, 210}, {"iq4_nl", quantize_iq4_nl, 32, 18}, {"iq4_xs", quantize_iq4_xs, 256, 136},
    };
    for (size_t t = 0; t < sizeof TW / sizeof TW[0]; t++) {
        size_t nbytes = (size_t)(N / TW[t].blk) * TW[t].bytes;
        uint8_t *b = calloc(nbytes, 1);
        TW[t].q(x, b, N / 256, 256, qw);
        snprintf(path, sizeof path, "%s/%s.imat.bin", out, TW[t].name);
        f = fopen(path, "wb");
        fwrite(b, 1, nbytes, f);
        fclose(f);
        free(b);
    }
    const char *lib = getenv("GGML_CPU_LIB");
    if (lib && *lib) {
        void *so = dlopen(lib, RTLD_NOW);
        if (!so) { fprintf(stderr, "%s\n", dlerror()); return 1; }
        static const char *const cpu[] = {"q8_0", "q8_1"};
        static const int cbytes[] = {34, 36};
        for (int t = 0; t < 2; t++) {
            char sym[64];
            snprintf(sym, sizeof sym, "quantize_row_%s", cpu[t]);
            qfn q = (qfn)dlsym(so, sym);
            if (!q) { fprintf(stderr, "%s: no %s\n", lib, sym); return 1; }
            size_t nbytes = (size_t)(N / 32) * cbytes[t];
            uint8_t *b = calloc(nbytes, 1);
            for (int r = 0; r < N / 256; r++) q(x + 256 * r, b + (size_t)r * 8 * cbytes[t], 256);
            snprintf(path, sizeof path, "%s/%s_cpu.bin", out, cpu[t]);
            f = fopen(path, "wb");
            fwrite(b, 1, nbytes, f);
            fclose(f);
            free(b);
        }
    }
    return 0;
}
CEOF
gcc -O3 -std=gnu11 -DNDEBUG -I"$SRC/include" -I"$SRC/src" -c "$SRC/src/ggml-quants.c" -o "$W/q.o"
gcc -O2 -std=gnu11 -I"$SRC/include" -I"$SRC/src" "$W/gen.c" "$W/q.o" -o "$W/gen" -lm -ldl
"$W/gen" "$OUT"
if git -C "$SRC" rev-parse HEAD >/dev/null 2>&1; then echo "ggml $(git -C "$SRC" rev-parse HEAD)" > "$OUT/source.txt"; fi
ls -l "$OUT"
