/*
** `qscope bench kernels` and `qscope bench --score`.
**
** bench kernels: OpenBLAS SGEMM GFLOP/s and, in the same run, FlashAttention-2 (L=4096, d=128),
** AMLA on the same shape, and the MSD two-pass INT8 GEMM against one SGEMM of the same shape, with
** one thread and then two.  Targets: FA2 ≥ 40 % of SGEMM, AMLA no slower than FA2 (same P
** dtype), MSD ≤ 2.3× SGEMM.  Min and median of repeated runs; outputs are checked in the same run.
**
** bench --score: a CANN-Bench-style scorecard (spec msd-attention.md §D.2).  Per case: a precision
** gate against an FP64 golden with the per-dtype MERE/MARE thresholds (small-value positions fall back
** to error counting against the plain C baseline), and the hardware-anchored score
** (T_base − T_HW)/((T_cand − T_HW) + (T_base − T_HW)) with T_base the plain C baseline measured now and
** T_HW = max(bytes/BW, flops/SGEMM peak) of this machine measured at start.  Per operator
** Score = 100·[0.2·δ_cr + (1/N)·Σ δ_acc·(0.3 + 0.5·score)].  Fresh inputs every iteration (new seed,
** generated outside the timed region), warm-up 3, repeat 5, min time.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>
#include <jansson.h>

#include "bench_util.h"
#include "cli.h"
#include "../../kernels/blas_threads.h"
#include "kernel_cli.h"
#include "../../analysis/kernel_exp.h"
#include "../../analysis/kernel_model.h"
#include "../../kernels/attn.h"
#include "../../kernels/msd.h"
#include "../../kernels/qs_version.h"
#include "../../store/json_out.h"

typedef struct { double min, med; } tm2;

static tm2 stats(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, qs_bench_cmp);
    return (tm2){t[0], n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2])};
}

static void cpu_name(char *buf, size_t cap)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[1024];
    snprintf(buf, cap, "unknown");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(buf, cap, "%s", strchr(line, ':') + 2);
            buf[strcspn(buf, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
}

static void fill(float *x, size_t n, uint64_t seed, double scale) { qs_gen_matrix(QS_GEN_GAUSSIAN, seed, n, 1, scale, x); }

/* The naive OpenBLAS baseline STYLE.md §4.5 asks for: S = QKᵀ for the whole head (one SGEMM),
** a row softmax, O = PV (one SGEMM); materialises L×L scores per head. */
static int naive_attn(const qs_attn_shape *s, const float *Q, const float *K, const float *V, float *O, float *S, int th)
{
    if (th == 1) qs_blas_serial_begin();   /* else the start-up count */
    float sc = (float)(1.0 / sqrt((double)s->d));
    for (size_t h = 0; h < s->H; h++) {
        size_t hk = h / (s->H / s->Hkv);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s->Lq, (int)s->Lk, (int)s->d, sc, Q + h * s->Lq * s->d,
                    (int)s->d, K + hk * s->Lk * s->d, (int)s->d, 0.0f, S, (int)s->Lk);
        for (size_t i = 0; i < s->Lq; i++) {
            float *r = S + i * s->Lk, m = -INFINITY, sum = 0;
            for (size_t j = 0; j < s->Lk; j++) m = r[j] > m ? r[j] : m;
            for (size_t j = 0; j < s->Lk; j++) { r[j] = expf(r[j] - m); sum += r[j]; }
            for (size_t j = 0; j < s->Lk; j++) r[j] /= sum;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s->Lq, (int)s->dv, (int)s->Lk, 1.0f, S, (int)s->Lk,
                    V + hk * s->Lk * s->dv, (int)s->dv, 0.0f, O + h * s->Lq * s->dv, (int)s->dv);
    }
    if (th == 1) qs_blas_serial_end();
    return 0;
}

static json_t *row(const char *what, double work, const char *unit, tm2 t, const char *note)
{
    return json_pack("{s:s,s:s,s:f,s:f,s:f,s:f,s:s}", "benchmark", what, "unit", unit, "min_s", t.min, "median_s", t.med,
                     "best_rate", work / t.min, "median_rate", work / t.med, "note", note ? note : "");
}

/* The correctness checks of a kernels run: FA2 (FP32 P) against FP64 on head 0, AMLA against FA2, MSD
** against the dequantized-FP32 SGEMM (W is overwritten with the dequantized weights, y with its
** product).  *bad is set when one fails; NULL (after the message) when memory or the reference fail. */
static json_t *kernel_checks(const float *Q, const float *K, const float *V, const float *O, const float *O2, size_t L,
                             size_t d, size_t n, const float *x, float *W, const int8_t *Wq, const float *sig, float *y,
                             const float *y2, size_t Mm, size_t Nm, size_t Km, int *bad)
{
    qs_err e = {{0}};
    qs_cmp cm;
    double *ref = malloc(n * sizeof(double)), *ym = malloc(Mm * Nm * sizeof(double));
    if (!ref || !ym) { free(ref); free(ym); qs_cli_error(QS_EXIT_ERR, "out of memory"); return NULL; }
    for (size_t i = 0; i < n; i++) ref[i] = O[i];
    qs_cmp_f(O2, ref, n, &cm);
    json_t *checks = json_object();
    qs_json_set_num(checks, "amla_vs_fa2_rel_l2", cm.rel_l2);
    {   /* FA2 (FP32 P) against the FP64 reference on head 0 */
        qs_attn_shape s1 = {1, 1, L, L, d, d};
        double *r1 = malloc(L * d * sizeof(double));
        qs_cmp c1;
        if (!r1 || qs_attn_ref(&s1, 0, 0, Q, K, V, r1, NULL, &e)) {
            free(r1); free(ref); free(ym); json_decref(checks);
            qs_cli_error(QS_EXIT_ERR, "bench: reference failed");
            return NULL;
        }
        qs_cmp_f(O, r1, L * d, &c1);
        free(r1);
        qs_json_set_num(checks, "fa2_vs_fp64_rel_l2", c1.rel_l2);
        qs_json_set_num(checks, "fa2_vs_fp64_max_abs", c1.max_abs);
        if (!(c1.rel_l2 < 1e-5)) { *bad = 1; fprintf(stderr, "qscope: bench: FA2 disagrees with FP64 (rel L2 %.3g)\n", c1.rel_l2); }
    }
    if (!(cm.rel_l2 < 1e-2)) { *bad = 1; fprintf(stderr, "qscope: bench: AMLA and FA2 disagree (rel L2 %.3g)\n", cm.rel_l2); }
    for (size_t i = 0; i < Nm * Km; i++) W[i] = (float)Wq[i] * sig[i / Km];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Mm, (int)Nm, (int)Km, 1.0f, x, (int)Km, W, (int)Km, 0.0f, y, (int)Nm);
    for (size_t i = 0; i < Mm * Nm; i++) ym[i] = y[i];
    qs_cmp_f(y2, ym, Mm * Nm, &cm);
    qs_json_set_num(checks, "msd_vs_dequant_sgemm_rel_l2", cm.rel_l2);
    if (!(cm.rel_l2 < 1e-3)) { *bad = 1; fprintf(stderr, "qscope: bench: MSD result looks wrong (rel L2 %.3g)\n", cm.rel_l2); }
    free(ref); free(ym);
    return checks;
}

/* The text report of a kernels run. */
static void print_kernels(qs_cli *cli, const char *cpu, double load, json_t *rows, json_t *targets, json_t *checks, int reps)
{
    printf("%s%s%s  (%ld cores, load average %.2f at the end: other processes share the cores)\n", qs_c_bold(cli), cpu,
           qs_c_off(cli), sysconf(_SC_NPROCESSORS_ONLN), load);
    printf("OpenBLAS %s (core %s); FLOPs = 4*H*Lq*Lk*d (both matmuls)\n", openblas_get_config(), openblas_get_corename());
    printf("%s%-46s %10s %10s  %-16s %s%s\n", qs_c_head(cli), "BENCHMARK", "BEST", "MEDIAN", "UNIT", "NOTE", qs_c_off(cli));
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r)
        printf("%-46s %10.1f %10.1f  %-16s %s\n", json_string_value(json_object_get(r, "benchmark")),
               json_real_value(json_object_get(r, "best_rate")), json_real_value(json_object_get(r, "median_rate")),
               json_string_value(json_object_get(r, "unit")), json_string_value(json_object_get(r, "note")));
    printf("\n%sTARGETS%s\n", qs_c_bold(cli), qs_c_off(cli));
    json_array_foreach(targets, i, r)
        printf("  %-48s %8.3f  (ratio of minima %.3f; limit %.2f)  %s\n", json_string_value(json_object_get(r, "target")),
               json_real_value(json_object_get(r, "value")), json_real_value(json_object_get(r, "ratio_of_minima")),
               json_real_value(json_object_get(r, "limit")), json_is_true(json_object_get(r, "met")) ? "met" : "NOT MET");
    printf("time ratios are the median of per-repetition ratios (the two kernels run back to back); FA2's\n"
           "fraction is best FA2 rate / best SGEMM rate\n");
    printf("checks: FA2 vs FP64 (head 0) rel L2 %.3g, max |diff| %.3g; AMLA vs FA2 rel L2 %.3g, MSD vs dequant SGEMM "
           "rel L2 %.3g; %d runs each, min used\n",
           json_real_value(json_object_get(checks, "fa2_vs_fp64_rel_l2")), json_real_value(json_object_get(checks, "fa2_vs_fp64_max_abs")),
           json_real_value(json_object_get(checks, "amla_vs_fa2_rel_l2")),
           json_real_value(json_object_get(checks, "msd_vs_dequant_sgemm_rel_l2")), reps);
}

static int run_kernels(qs_cli *cli, int quick, int json)
{
    size_t L = quick ? 1024 : 4096, d = 128, H = 4;
    int reps = quick ? 3 : 7;
    qs_attn_shape s = {H, H, L, L, d, d};
    size_t n = H * L * d;
    float *Q = malloc(n * 4), *K = malloc(n * 4), *V = malloc(n * 4), *O = malloc(n * 4), *O2 = malloc(n * 4);
    size_t G = quick ? 1024 : 2048;
    float *A = malloc(G * G * 4), *B = malloc(G * G * 4), *C = malloc(G * G * 4);
    size_t Mm = quick ? 128 : 512, Nm = quick ? 1024 : 4096, Km = quick ? 1024 : 4096;
    float *x = malloc(Mm * Km * 4), *W = malloc(Nm * Km * 4), *sig = malloc(Nm * 4);
    qs_i8_pack wp = {0};
    float *y = malloc(Mm * Nm * 4), *y2 = malloc(Mm * Nm * 4);
    int8_t *Wq = malloc(Nm * Km);
    void *ws = malloc(qs_msd_gemm_ws_bytes(Mm, Nm, Km, 2));
    float *Sn = malloc(L * L * 4), *On = malloc(n * 4);
    /* MLA decode (the MQA form, FlashMLA's setting): 128 query heads, one latent KV head, d_qk 576,
    ** d_v 512, V = K[:, :512] */
    size_t Lm = quick ? 2048 : 8192;
    qs_attn_shape sm = {128, 1, 1, Lm, 576, 512};
    float *Qm = malloc(128 * 576 * 4), *Km2 = malloc(Lm * 576 * 4), *Vm = malloc(Lm * 512 * 4), *Om = malloc(128 * 512 * 4);
    if (!Sn || !On || !Qm || !Km2 || !Vm || !Om) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    fill(Qm, 128 * 576, 8, 1); fill(Km2, Lm * 576, 9, 1);
    for (size_t t = 0; t < Lm; t++) memcpy(Vm + t * 512, Km2 + t * 576, 512 * 4);
    double flm = qs_attn_flops(&sm, 0);
    if (!Q || !K || !V || !O || !O2 || !A || !B || !C || !x || !W || !sig || !y || !y2 || !Wq || !ws)
        return qs_cli_error(QS_EXIT_ERR, "out of memory");
    fill(Q, n, 1, 1); fill(K, n, 2, 1); fill(V, n, 3, 1); fill(A, G * G, 4, 1); fill(B, G * G, 5, 1);
    fill(x, Mm * Km, 6, 1); fill(W, Nm * Km, 7, 0.02);
    for (size_t i = 0; i < Mm * Km; i++) x[i] = qs_bf16_round(x[i]);
    qs_quant_w_i8(W, Nm, Km, Wq, sig);
    qs_err e = {{0}};
    if (qs_i8_pack_make(Wq, Nm, Km, &wp, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    json_t *rows = json_array(), *targets = json_array();
    int bad = 0;
    double fl = qs_attn_flops(&s, 0);
    /* The kernels are timed round-robin inside one loop (sgemm, FA2, FA2 bf16, AMLA, sgemm MxNxK, MSD)
    ** so that load from other processes hits all of them alike; min over the repetitions. */
    for (int th = 1; th <= 2; th++) {
        enum { SG, FA, FB, AM, S1, MS, NV, MF, MA, S2, M2, NK };
        double t[NK][16];
        qs_attn_cfg c = {0};
        c.threads = th;
        for (int r = -1; r < reps && !bad; r++) {
            for (int k = 0; k < NK && !bad; k++) {
                double t0 = qs_now_s();
                int rc = 0;
                switch (k) {
                case SG: case S1:
                    if (th == 1) qs_blas_serial_begin();
                    if (k == SG) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)G, (int)G, (int)G, 1.0f, A, (int)G, B, (int)G, 0.0f, C, (int)G);
                    else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Mm, (int)Nm, (int)Km, 1.0f, x, (int)Km, W, (int)Km, 0.0f, y, (int)Nm);
                    if (th == 1) qs_blas_serial_end();
                    break;
                case FA: c.p = QS_P_FP32; rc = qs_attn_fa2(&s, &c, Q, K, V, O, NULL, &e); break;
                case FB: c.p = QS_P_BF16; rc = qs_attn_fa2(&s, &c, Q, K, V, O2, NULL, &e); break;
                case AM: c.p = QS_P_BF16; rc = qs_attn_amla(&s, &c, Q, K, V, O2, &e); break;
                case MS: rc = qs_msd_gemm_i8(x, Mm, Km, Wq, &wp, sig, Nm, 2, QS_I8GEMM_SGEMM, th, y2, ws, &e); break;
                case NV: rc = naive_attn(&s, Q, K, V, On, Sn, th); break;
                case MF: c.p = QS_P_BF16; rc = qs_attn_fa2(&sm, &c, Qm, Km2, Vm, Om, NULL, &e); break;
                case MA: c.p = QS_P_BF16; rc = qs_attn_amla(&sm, &c, Qm, Km2, Vm, Om, &e); break;
                case S2:   /* decode shape: 16 tokens */
                    if (th == 1) qs_blas_serial_begin();
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 16, (int)Nm, (int)Km, 1.0f, x, (int)Km, W, (int)Km, 0.0f, y, (int)Nm);
                    if (th == 1) qs_blas_serial_end();
                    break;
                case M2: rc = qs_msd_gemm_i8(x, 16, Km, Wq, &wp, sig, Nm, 2, QS_I8GEMM_SGEMM, th, y2, ws, &e); break;
                }
                if (rc) { bad = 1; fprintf(stderr, "qscope: bench: %s\n", e.msg); }
                if (r >= 0) t[k][r] = qs_now_s() - t0;
            }
        }
        if (bad) break;
        /* paired ratios (same repetition, adjacent in time) are robust to load that comes and goes */
        double pr_am[16], pr_ms[16];
        for (int r = 0; r < reps; r++) { pr_am[r] = t[AM][r] / t[FB][r]; pr_ms[r] = t[MS][r] / t[S1][r]; }
        tm2 pam = stats(pr_am, reps), pms = stats(pr_ms, reps);
        tm2 ts[NK];
        for (int k = 0; k < NK; k++) ts[k] = stats(t[k], reps);
        double sg_rate = 2.0 * G * G * G / ts[SG].min / 1e9;
        char nm[96], note[160];
        snprintf(nm, sizeof nm, "sgemm %zu^3 (%d thr)", G, th);
        json_array_append_new(rows, row(nm, 2.0 * G * G * G / 1e9, "GFLOP/s", ts[SG], "OpenBLAS"));
        static const char *vn[3] = {"fa2 fp32", "fa2 P bf16", "amla P bf16"};
        for (int v = 0; v < 3; v++) {
            snprintf(nm, sizeof nm, "%s L=%zu d=%zu H=%zu (%d thr)", vn[v], L, d, H, th);
            snprintf(note, sizeof note, "%.0f%% of sgemm", 100 * fl / ts[FA + v].min / 1e9 / sg_rate);
            json_array_append_new(rows, row(nm, fl / 1e9, "GFLOP/s", ts[FA + v], note));
        }
        snprintf(nm, sizeof nm, "naive sgemm+softmax+sgemm L=%zu (%d thr)", L, th);
        snprintf(note, sizeof note, "%.0f%% of sgemm; materialises LxL", 100 * fl / ts[NV].min / 1e9 / sg_rate);
        json_array_append_new(rows, row(nm, fl / 1e9, "GFLOP/s", ts[NV], note));
        static const char *mn[2] = {"fa2 P bf16", "amla P bf16"};
        for (int v = 0; v < 2; v++) {
            snprintf(nm, sizeof nm, "%s MLA decode h=128 L=%zu (%d thr)", mn[v], Lm, th);
            snprintf(note, sizeof note, "%.1f GB/s of K/V; d_qk 576, d_v 512", (double)Lm * (576 + 512) * 4 / ts[MF + v].min / 1e9);
            json_array_append_new(rows, row(nm, flm / 1e9, "GFLOP/s", ts[MF + v], note));
        }
        double frac = fl / ts[FA].min / 1e9 / sg_rate;
        snprintf(nm, sizeof nm, "FA2 >= 40%% of SGEMM GFLOP/s (%d thr)", th);
        json_array_append_new(targets, qs_json_add_nums(json_pack("{s:s,s:b}", "target", nm, "met", frac >= 0.40),
                                                 "value", frac, "ratio_of_minima", frac, "limit", 0.40, (char *)NULL));
        double ar = ts[AM].min / ts[FB].min;
        snprintf(nm, sizeof nm, "AMLA time <= FA2 time, both P bf16 (%d thr)", th);
        json_array_append_new(targets, qs_json_add_nums(json_pack("{s:s,s:b}", "target", nm, "met", pam.med <= 1.0),
                                                 "value", pam.med, "ratio_of_minima", ar, "limit", 1.0, (char *)NULL));
        snprintf(nm, sizeof nm, "sgemm %zux%zux%zu (%d thr)", Mm, Nm, Km, th);
        json_array_append_new(rows, row(nm, 2.0 * Mm * Nm * Km / 1e9, "GFLOP/s", ts[S1], "M x N x K"));
        snprintf(nm, sizeof nm, "msd 2-pass int8 %zux%zux%zu (%d thr)", Mm, Nm, Km, th);
        snprintf(note, sizeof note, "%.2fx sgemm; decompose+exact int GEMM+combine", ts[MS].min / ts[S1].min);
        json_array_append_new(rows, row(nm, 2.0 * Mm * Nm * Km / 1e9, "GFLOP/s (1 GEMM)", ts[MS], note));
        snprintf(nm, sizeof nm, "sgemm 16x%zux%zu (%d thr)", Nm, Km, th);
        json_array_append_new(rows, row(nm, 2.0 * 16 * Nm * Km / 1e9, "GFLOP/s", ts[S2], "decode shape, FP32 weights"));
        snprintf(nm, sizeof nm, "msd 2-pass int8 16x%zux%zu (%d thr)", Nm, Km, th);
        snprintf(note, sizeof note, "%.2fx sgemm; same packed FP32 panel", ts[M2].min / ts[S2].min);
        json_array_append_new(rows, row(nm, 2.0 * 16 * Nm * Km / 1e9, "GFLOP/s (1 GEMM)", ts[M2], note));
        double mr = ts[MS].min / ts[S1].min;
        snprintf(nm, sizeof nm, "MSD 2-pass INT8 <= 2.3x one SGEMM (%d thr)", th);
        json_array_append_new(targets, qs_json_add_nums(json_pack("{s:s,s:b}", "target", nm, "met", pms.med <= 2.3),
                                                 "value", pms.med, "ratio_of_minima", mr, "limit", 2.3, (char *)NULL));
    }
    if (bad) return QS_EXIT_ERR;
    /* correctness in the same run: FA2 and AMLA against each other, MSD against dequant-fp32 SGEMM */
    json_t *checks = kernel_checks(Q, K, V, O, O2, L, d, n, x, W, Wq, sig, y, y2, Mm, Nm, Km, &bad);
    if (!checks) return QS_EXIT_ERR;
    char cpu[256];
    cpu_name(cpu, sizeof cpu);
    double la[3] = {0, 0, 0};
    if (getloadavg(la, 3) < 0) la[0] = -1;
    json_t *out = json_pack("{s:s,s:I,s:s,s:f,s:s,s:s,s:o,s:o,s:o}", "cpu", cpu, "cores", (json_int_t)sysconf(_SC_NPROCESSORS_ONLN), "qscope",
                            QS_VERSION " " QS_GIT_REV, "loadavg_1min", la[0], "openblas_core", openblas_get_corename(),
                            "openblas_config", openblas_get_config(), "results", rows, "targets", targets, "checks", checks);
    if (json) {
        char *sj = json_dumps(out, JSON_INDENT(2));
        puts(sj);
        free(sj);
    } else {
        print_kernels(cli, cpu, la[0], rows, targets, checks, reps);
    }
    json_decref(out);
    free(Q); free(K); free(V); free(O); free(O2); free(A); free(B); free(C); free(x); free(W); free(sig); free(y);
    qs_i8_pack_free(&wp);
    free(y2); free(Wq); free(ws); free(Sn); free(On); free(Qm); free(Km2); free(Vm); free(Om);
    return bad ? QS_EXIT_ERR : QS_EXIT_OK;
}

/* ---------------- scorecard ---------------- */

typedef struct { const char *name; double T, mare, small, small_abs, cancel; } gate_t;
static const gate_t GATE_FP32 = {"fp32", 0x1p-13, 0x1p-10, 0x1p-14, 0x1p-30, 0x1p-8};
static const gate_t GATE_BF16 = {"bf16", 0x1p-7, 0x1p-4, 0x1p-8, 0x1p-16, 0x1p-3};

/* Precision gate: MERE/MARE over the normal positions; small-value and cancellation positions are
** error-counted (|a − g| > small_abs) and must not exceed 2× the baseline's count. */
static int gate(const gate_t *g, const float *a, const float *base, const double *gold, size_t n, json_t *info)
{
    double sum = 0, mx = 0;
    size_t cnt = 0, ec = 0, eb = 0, spec = 0;
    for (size_t i = 0; i < n; i++) {
        double gv = gold[i], av = a[i];
        if (!isfinite(av)) return json_object_set_new(info, "nonfinite", json_true()), 0;
        int small = fabs(gv) < g->small, cancel = fabs(av) < g->cancel && fabs(gv) < g->cancel && !small;
        if (small || cancel) {
            spec++;
            ec += fabs(av - gv) > g->small_abs;
            eb += fabs((double)base[i] - gv) > g->small_abs;
            continue;
        }
        double re = fabs(av - gv) / (fabs(gv) + 1e-7);
        sum += re;
        mx = re > mx ? re : mx;
        cnt++;
    }
    double mere = cnt ? sum / cnt : 0;
    int ok = mere < g->T && mx < g->mare && (double)ec / (double)(eb > 1 ? eb : 1) <= 2.0;
    json_object_set_new(info, "dtype_gate", json_string(g->name));
    qs_json_set_num(info, "mere", mere);
    qs_json_set_num(info, "mare", mx);
    json_object_set_new(info, "small_positions", json_integer((json_int_t)spec));
    json_object_set_new(info, "small_errors", json_integer((json_int_t)ec));
    json_object_set_new(info, "small_errors_baseline", json_integer((json_int_t)eb));
    json_object_set_new(info, "pass", json_boolean(ok));
    return ok;
}

typedef enum { OP_FA, OP_AMLA, OP_MSD } opkind;
typedef struct { const char *op, *cas; opkind k; qs_attn_shape s; int causal; size_t M, N, K; } scase;

static double hw_score(double tb, double tc, double thw)
{
    double den = (tc - thw) + (tb - thw);
    if (!(tb > 0) || !(tc > 0) || !(den > 0)) return 0;
    return (tb - thw) / den;
}

static int run_score(qs_cli *cli, int quick, int json)
{
    int th = 2;
    /* The roofline must bound the machine from above: the best SGEMM rate seen with one or two
    ** threads (on a shared VM two threads can measure slower than one) and the best triad. */
    double p1 = qs_measure_sgemm_gflops(quick ? 512 : 1024, 1, 5), p2 = qs_measure_sgemm_gflops(quick ? 512 : 1024, th, 5);
    double peak = (p1 > p2 ? p1 : p2) * 1e9, bw = qs_measure_bandwidth(th), bw1 = qs_measure_bandwidth(1);
    bw = bw > bw1 ? bw : bw1;
    size_t L = quick ? 512 : 1024;
    scase cs[] = {
        {"flash_attention_fp32", "H=2 L=%zu d=128", OP_FA, {2, 2, 0, 0, 128, 128}, 0, 0, 0, 0},
        {"flash_attention_fp32", "H=2 L=%zu d=128 causal", OP_FA, {2, 2, 0, 0, 128, 128}, 1, 0, 0, 0},
        {"amla_mla_decode_bf16", "H=32 Lq=1 Lk=4L d=576 dv=512", OP_AMLA, {32, 1, 1, 0, 576, 512}, 0, 0, 0, 0},
        {"msd_w8a16_gemm", "M=16 N=K=2048", OP_MSD, {0}, 0, 16, 2048, 2048},
        {"msd_w8a16_gemm", "M=128 N=K=2048", OP_MSD, {0}, 0, 128, 2048, 2048},
    };
    int ncs = (int)(sizeof cs / sizeof *cs);
    json_t *cases = json_array(), *ops = json_object();
    qs_err e = {{0}};
    for (int ci = 0; ci < ncs; ci++) {
        scase *c = &cs[ci];
        char cname[96];
        snprintf(cname, sizeof cname, c->cas, L);
        size_t nin, nout;
        double flops, bytes;
        if (c->k != OP_MSD) {
            c->s.Lk = c->k == OP_AMLA ? 4 * L : L;
            if (!c->s.Lq) c->s.Lq = L;
            nin = c->s.H * c->s.Lq * c->s.d + c->s.Hkv * c->s.Lk * (c->s.d + c->s.dv);
            nout = c->s.H * c->s.Lq * c->s.dv;
            flops = qs_attn_flops(&c->s, c->causal);
            bytes = 4.0 * (double)(nin + nout);
        } else {
            nin = c->M * c->K + c->N * c->K;
            nout = c->M * c->N;
            flops = 2.0 * c->M * c->N * c->K;
            bytes = 4.0 * c->M * c->K + 1.0 * c->N * c->K + 4.0 * c->N + 4.0 * c->M * c->N;
        }
        float *in = malloc(nin * 4), *oc = malloc(nout * 4), *ob = malloc(nout * 4), *sig = NULL, *Wd = NULL;
        qs_i8_pack wp = {0};
        double *gold = malloc(nout * 8);
        int8_t *Wq = NULL;
        if (c->k == OP_MSD) { Wq = malloc(c->N * c->K); sig = malloc(c->N * 4); Wd = malloc(c->N * c->K * 4); }
        if (!in || !oc || !ob || !gold || (c->k == OP_MSD && (!Wq || !sig || !Wd))) return qs_cli_error(QS_EXIT_ERR, "out of memory");
        double tc[8], tb[8];
        int fail = 0, reps = 5, warm = 3;
        qs_attn_cfg cfg = {0};
        cfg.threads = th;
        cfg.causal = c->causal;
        cfg.p = c->k == OP_AMLA ? QS_P_BF16 : QS_P_FP32;
        for (int it = -warm; it < reps && !fail; it++) {
            fill(in, nin, 1000 + (uint64_t)ci * 100 + (uint64_t)(it + warm), 1);   /* fresh inputs every iteration */
            if (c->k == OP_AMLA)   /* MLA: V is the first dv columns of K */
                for (size_t t = 0; t < c->s.Lk; t++) memcpy(in + c->s.H * c->s.d + c->s.Lk * c->s.d + t * c->s.dv, in + c->s.H * c->s.d + t * c->s.d, c->s.dv * 4);
            const float *Qp = in, *Kp = in + c->s.H * c->s.Lq * c->s.d, *Vp = Kp + c->s.Hkv * c->s.Lk * c->s.d;
            if (c->k == OP_MSD) {
                for (size_t i = 0; i < c->M * c->K; i++) in[i] = qs_bf16_round(in[i]);
                for (size_t i = 0; i < c->N * c->K; i++) in[c->M * c->K + i] *= 0.02f;
                qs_quant_w_i8(in + c->M * c->K, c->N, c->K, Wq, sig);
                qs_i8_pack_free(&wp);   /* weight packing happens once per weight, outside the timed call */
                if (qs_i8_pack_make(Wq, c->N, c->K, &wp, &e)) { fail = 1; break; }
            }
            double t0 = qs_now_s();
            int rc = c->k == OP_FA ? qs_attn_fa2(&c->s, &cfg, Qp, Kp, Vp, oc, NULL, &e)
                     : c->k == OP_AMLA ? qs_attn_amla(&c->s, &cfg, Qp, Kp, Vp, oc, &e)
                                       : qs_msd_gemm_i8(in, c->M, c->K, Wq, &wp, sig, c->N, 2, QS_I8GEMM_SGEMM, th, oc, NULL, &e);
            double t1 = qs_now_s();
            int rb = c->k == OP_MSD ? qs_msd_gemm_i8(in, c->M, c->K, Wq, NULL, sig, c->N, 2, QS_I8GEMM_INT, 1, ob, NULL, &e)
                                    : qs_attn_plain(&c->s, &cfg, Qp, Kp, Vp, ob, &e);
            double t2 = qs_now_s();
            if (rc || rb) { fail = 1; break; }
            if (it >= 0) { tc[it] = t1 - t0; tb[it] = t2 - t1; }
        }
        json_t *info = json_object();
        int acc = 0;
        if (!fail) {   /* golden of the last iteration's inputs */
            const float *Qp = in, *Kp = in + c->s.H * c->s.Lq * c->s.d, *Vp = Kp + c->s.Hkv * c->s.Lk * c->s.d;
            if (c->k != OP_MSD) fail = qs_attn_ref(&c->s, c->causal, 0, Qp, Kp, Vp, gold, NULL, &e) != 0;
            else {
                for (size_t nn = 0; nn < c->N; nn++)
                    for (size_t k = 0; k < c->K; k++) Wd[nn * c->K + k] = (float)Wq[nn * c->K + k] * sig[nn];
                fail = qs_gemm_ref(in, Wd, c->M, c->N, c->K, gold) != 0;
            }
            if (!fail) acc = gate(c->k == OP_FA ? &GATE_FP32 : &GATE_BF16, oc, ob, gold, nout, info);
        }
        tm2 sc = stats(tc, reps), sb = stats(tb, reps);
        double thw = fmax(bytes / bw, flops / peak);
        double sco = fail ? 0 : hw_score(sb.min, sc.min, thw);
        json_object_set_new(info, "op", json_string(c->op));
        json_object_set_new(info, "case", json_string(cname));
        json_object_set_new(info, "runtime_ok", json_boolean(!fail));
        qs_json_set_num(info, "t_cand_us", fail ? NAN : sc.min * 1e6);
        qs_json_set_num(info, "t_base_us", fail ? NAN : sb.min * 1e6);
        qs_json_set_num(info, "t_hw_us", thw * 1e6);
        qs_json_set_num(info, "speedup", fail ? 0 : sb.min / sc.min);
        qs_json_set_num(info, "score", sco);
        json_object_set_new(info, "accuracy_pass", json_boolean(acc));
        json_array_append_new(cases, info);
        json_t *op = json_object_get(ops, c->op);
        if (!op) { op = json_pack("{s:i,s:i,s:f}", "n", 0, "runtime_fail", 0, "sum", 0.0); json_object_set_new(ops, c->op, op); }
        json_object_set_new(op, "n", json_integer(json_integer_value(json_object_get(op, "n")) + 1));
        if (fail) json_object_set_new(op, "runtime_fail", json_integer(json_integer_value(json_object_get(op, "runtime_fail")) + 1));
        qs_json_set_num(op, "sum", json_real_value(json_object_get(op, "sum")) + (acc ? 0.3 + 0.5 * sco : 0));
        free(in); free(oc); free(ob); free(gold); free(Wq); free(sig); free(Wd);
        qs_i8_pack_free(&wp);
    }
    double total = 0;
    const char *k;
    json_t *op;
    json_object_foreach(ops, k, op) {
        double nn = (double)json_integer_value(json_object_get(op, "n"));
        double dcr = (nn - (double)json_integer_value(json_object_get(op, "runtime_fail"))) / nn;
        double sc = 100 * (0.2 * dcr + json_real_value(json_object_get(op, "sum")) / nn);
        qs_json_set_num(op, "score", sc);
        total += sc;
    }
    json_t *out = json_pack("{s:f,s:f,s:i,s:o,s:o,s:f}", "sgemm_peak_gflops", peak / 1e9, "bandwidth_gbs", bw / 1e9, "threads",
                            th, "cases", cases, "operators", ops, "total", total);
    if (json) {
        char *sj = json_dumps(out, JSON_INDENT(2));
        puts(sj);
        free(sj);
    } else {
        printf("%sCANN-Bench-style scorecard%s: SGEMM peak %.1f GFLOP/s, bandwidth %.1f GB/s (best of 1 and %d threads, "
               "measured now); candidates run with %d threads\n", qs_c_bold(cli), qs_c_off(cli), peak / 1e9, bw / 1e9, th, th);
        printf("%s%-22s %-30s %5s %10s %10s %10s %10s %8s %7s%s\n", qs_c_head(cli), "OPERATOR", "CASE", "GATE", "MERE", "T_CAND us",
               "T_BASE us", "T_HW us", "SPEEDUP", "SCORE", qs_c_off(cli));
        size_t i;
        json_t *r;
        json_array_foreach(cases, i, r)
            printf("%-22s %-30s %5s %10.3g %10.1f %10.1f %10.1f %8.1f %7.3f\n", json_string_value(json_object_get(r, "op")),
                   json_string_value(json_object_get(r, "case")), json_is_true(json_object_get(r, "accuracy_pass")) ? "pass" : "FAIL",
                   json_real_value(json_object_get(r, "mere")), json_real_value(json_object_get(r, "t_cand_us")),
                   json_real_value(json_object_get(r, "t_base_us")), json_real_value(json_object_get(r, "t_hw_us")),
                   json_real_value(json_object_get(r, "speedup")), json_real_value(json_object_get(r, "score")));
        json_object_foreach(ops, k, op) printf("  %-24s %6.1f / 100\n", k, json_real_value(json_object_get(op, "score")));
        printf("  %-24s %6.1f / %d\n", "total", total, 100 * (int)json_object_size(ops));
        printf("score = (T_base - T_HW)/((T_cand - T_HW) + (T_base - T_HW)); T_base = plain C baseline, T_HW = roofline bound\n");
    }
    json_decref(out);
    return QS_EXIT_OK;
}

int qs_bench_kernels(qs_cli *cli, int quick, int json, int score)
{
    return score ? run_score(cli, quick, json) : run_kernels(cli, quick, json);
}
