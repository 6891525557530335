/* Latency / HBM-traffic model and hardware profiles (see kernel_model.h). */
#include "kernel_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "../kernels/blas_threads.h"
#include "../kernels/pool.h"
#include "../kernels/qs_clock.h"

double qs_measure_sgemm_gflops(int n, int threads, int reps)
{
    size_t nn = (size_t)n * n;
    float *a = malloc(nn * 4), *b = malloc(nn * 4), *c = malloc(nn * 4);
    if (!a || !b || !c) { free(a); free(b); free(c); return 0; }
    for (size_t i = 0; i < nn; i++) { a[i] = (float)((i * 37) % 101) / 101.0f - 0.5f; b[i] = (float)((i * 53) % 97) / 97.0f - 0.5f; }
    if (threads == 1) qs_blas_serial_begin();   /* else the start-up count */
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = qs_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double t = qs_now_s() - t0;
        best = t < best ? t : best;
    }
    if (threads == 1) qs_blas_serial_end();
    free(a); free(b); free(c);
    return 2.0 * n * (double)n * n / best / 1e9;
}

typedef struct { float *src, *dst; size_t n, parts; } bwjob;
static void bw_task(void *p, size_t i, int slot)
{
    (void)slot;
    bwjob *j = p;
    size_t lo = j->n * i / j->parts, hi = j->n * (i + 1) / j->parts;
    for (size_t k = lo; k < hi; k++) j->dst[k] = j->src[k] * 1.0001f + 0.5f;   /* triad-like */
}

double qs_measure_bandwidth(int threads)
{
    size_t n = (size_t)32 << 20;   /* 128 MiB per array: well beyond the caches */
    float *a = malloc(n * 4), *b = malloc(n * 4);
    if (!a || !b) { free(a); free(b); return 0; }
    memset(a, 0, n * 4); memset(b, 0, n * 4);
    if (threads < 1) threads = 1;
    if (threads > 16) threads = 16;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        bwjob jb = {a, b, n, (size_t)threads};
        double t0 = qs_now_s();
        qs_pool_for(threads, (size_t)threads, bw_task, &jb);   /* one range per thread of the pool */
        double t = qs_now_s() - t0;
        best = t < best ? t : best;
    }
    volatile float sink = b[n / 3];
    (void)sink;
    free(a); free(b);
    return 8.0 * (double)n / best;   /* read + write */
}

static double measure_dequant(void)   /* one thread */
{
    size_t n = (size_t)8 << 20;
    signed char *q = malloc(n);
    unsigned short *o = malloc(n * 2);
    if (!q || !o) { free(q); free(o); return 0; }
    for (size_t i = 0; i < n; i++) q[i] = (signed char)(i * 31);
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = qs_now_s();
        for (size_t i = 0; i < n; i++) {   /* int8 -> fp32 -> scale -> bf16 (truncating) */
            float v = (float)q[i] * 0.0123f;
            unsigned u;
            memcpy(&u, &v, 4);
            o[i] = (unsigned short)(u >> 16);
        }
        double t = qs_now_s() - t0;
        best = t < best ? t : best;
    }
    volatile unsigned short sink = o[n / 2];
    (void)sink;
    free(q); free(o);
    return (double)n / best;   /* one thread */
}

const char *qs_hw_names(void) { return "ascend910, h100, cpu, custom:pbf16=X:plow=X:rvec=X:bw=X"; }

int qs_hw_profile(const char *name, int threads, qs_hw *hw)
{
    memset(hw, 0, sizeof *hw);
    snprintf(hw->name, sizeof hw->name, "%s", name);
    if (!strcmp(name, "ascend910")) {
        hw->p_bf16 = 320e12; hw->p_low = 640e12; hw->r_vec = 2e12; hw->bw = 1.6e12;
        snprintf(hw->note, sizeof hw->note, "Ascend-910B-like: BF16 cube 320T, INT8 640T, vector 2e12 elem/s (guess), HBM 1.6 TB/s");
        return 0;
    }
    if (!strcmp(name, "h100")) {
        hw->p_bf16 = 989e12; hw->p_low = 1979e12; hw->r_vec = 8e12; hw->bw = 3.35e12;
        snprintf(hw->note, sizeof hw->note, "H100-SXM-like: BF16 989T dense, INT8/FP8 1979T, vector 8e12 elem/s (guess), HBM 3.35 TB/s");
        return 0;
    }
    if (!strncmp(name, "custom:", 7)) {   /* custom:pbf16=320e12:plow=640e12:rvec=2e12:bw=1.6e12 */
        const char *p = name + 7;
        while (*p) {
            char key[16];
            size_t kl = strcspn(p, "=");
            if (kl == 0 || kl >= sizeof key || p[kl] != '=') return -1;
            memcpy(key, p, kl);
            key[kl] = 0;
            char *end;
            double v = strtod(p + kl + 1, &end);
            if (end == p + kl + 1 || !(v >= 1 && v <= 1e30) || (*end && *end != ':')) return -1;   /* per second */
            if (!strcmp(key, "pbf16")) hw->p_bf16 = v;
            else if (!strcmp(key, "plow")) hw->p_low = v;
            else if (!strcmp(key, "rvec")) hw->r_vec = v;
            else if (!strcmp(key, "bw")) hw->bw = v;
            else return -1;
            p = *end ? end + 1 : end;
        }
        if (!(hw->p_bf16 > 0 && hw->r_vec > 0 && hw->bw > 0)) return -1;
        if (!(hw->p_low > 0)) hw->p_low = 2 * hw->p_bf16;
        snprintf(hw->name, sizeof hw->name, "custom");
        snprintf(hw->note, sizeof hw->note, "user profile: P_bf16 %.3g, P_low %.3g, vector %.3g elem/s, %.3g B/s", hw->p_bf16,
                 hw->p_low, hw->r_vec, hw->bw);
        return 0;
    }
    if (!strcmp(name, "cpu")) {
        double g = qs_measure_sgemm_gflops(1024, threads, 3) * 1e9;
        hw->p_bf16 = g; hw->p_low = g;   /* the INT8 GEMM is emulated on SGEMM: same rate */
        hw->r_vec = measure_dequant();
        hw->bw = qs_measure_bandwidth(threads);
        snprintf(hw->note, sizeof hw->note, "this CPU, measured now (%d thread%s): SGEMM %.1f GFLOP/s, dequant (1 thread) %.2f Gelem/s, copy %.1f GB/s",
                 threads, threads > 1 ? "s" : "", g / 1e9, hw->r_vec / 1e9, hw->bw / 1e9);
        return 0;
    }
    return -1;
}

json_t *qs_model_table(const qs_hw *hw, int k, double bw_elem)
{
    static const int Ms[] = {1, 4, 16, 64, 256, 1024};
    static const struct { int N, K; } NK[] = {{4096, 4096}, {14336, 4096}, {4096, 14336}};
    json_t *rows = json_array();
    for (size_t a = 0; a < sizeof NK / sizeof *NK; a++)
        for (size_t b = 0; b < sizeof Ms / sizeof *Ms; b++) {
            double M = Ms[b], N = NK[a].N, K = NK[a].K;
            double bytes_deq = N * K * (bw_elem + 4) + 2 * M * K + 2 * M * N;
            double bytes_msd = N * K * bw_elem + 2 * M * K + k * M * K + 4.0 * k * M * N + 2 * M * N;
            double tv = N * K / hw->r_vec, tc = 2 * M * N * K / hw->p_bf16, tm = bytes_deq / hw->bw;
            double t_pipe = fmax(tv, fmax(tc, tm)), t_stall = tv + fmax(tc, tm);
            double t_msd = k * M * K / hw->r_vec + fmax(2.0 * k * M * N * K / hw->p_low, bytes_msd / hw->bw) + M * N / hw->r_vec;
            json_array_append_new(rows, json_pack("{s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "M", (int)M, "N", (int)N, "K",
                                                  (int)K, "t_dequant_pipelined_us", t_pipe * 1e6, "t_dequant_stalled_us",
                                                  t_stall * 1e6, "t_msd_us", t_msd * 1e6, "speedup_vs_pipelined",
                                                  t_pipe / t_msd, "speedup_vs_stalled", t_stall / t_msd, "bytes_dequant",
                                                  bytes_deq, "bytes_msd", bytes_msd));
        }
    return rows;
}

json_t *qs_model_kv_ledger(int k)
{
    json_t *l = json_array();
    json_array_append_new(l, json_pack("{s:s,s:f,s:s}", "path", "dequant baseline", "bytes_per_elem", 5.0, "terms",
                                       "vector reads int8 (1) + writes bf16 to HBM (2) + cube reads bf16 (2)"));
    json_array_append_new(l, json_pack("{s:s,s:f,s:s}", "path", "MSD, stacked component GEMM", "bytes_per_elem", 1.0,
                                       "terms", "cube reads int8 once for all passes (CANN dataflow)"));
    json_array_append_new(l, json_pack("{s:s,s:f,s:s}", "path", "MSD, one GEMM per component", "bytes_per_elem", (double)k,
                                       "terms", "cube reads the int8 tile once per component GEMM (paper's latency model?)"));
    json_array_append_new(l, json_pack("{s:s,s:f,s:f}", "path", "reduction", "stacked", 5.0, "per_component", 5.0 / k));
    return l;
}
