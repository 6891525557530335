/*
** Claims about kernels: Multi-Scale Dequant (error bound, effective bits, KV traffic), AMLA's
** rescaling error, and Rollout-ResQ.  The measurements call the kernels of kernels/msd.h,
** kernels/attn.h and kernels/resq.h and the traffic model of analysis/kernel_model.h.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "claims.h"
#include "kernel_model.h"
#include "../datasets/gen.h"
#include "../kernels/attn.h"
#include "../kernels/format.h"
#include "../kernels/msd.h"
#include "../kernels/resq.h"

#define APPEND(buf, ...) snprintf((buf) + strlen(buf), sizeof(buf) - strlen(buf), __VA_ARGS__)

/* ---- MSD INT8: the two-pass bound --------------------------------------------------------------- */

/* Rows that sit on the rounding ties of both passes, one float beside them, zeros, +-amax, tiny values,
** and amax from 2^-30 to 2^29: 64 rows of K. */
static void adversarial_rows(float *x, size_t K)
{
    for (size_t r = 0; r < 64; r++) {
        float M = ldexpf(1.0f + (float)(r % 7) / 7.0f, (int)(r % 60) - 30);
        float *row = x + r * K;
        for (size_t k = 0; k < K; k++) {
            size_t j = k % 16;
            double a1 = (double)((k * 37 + r) % 127), a2 = (double)((k * 11 + r) % 254);
            double t = j < 4 ? a1 + 0.5 : j < 8 ? a1 + (a2 + 0.5) / 254.0 : (double)(k % 127);
            float v = (float)(t / 127.0 * (double)M);
            if (j == 1 || j == 5) v = nextafterf(v, INFINITY);
            if (j == 2 || j == 6) v = nextafterf(v, 0.0f);
            if (j == 9) v = 0;
            if (j == 10) v = 1e-30f * M;
            if (k & 1) v = -v;
            row[k] = v;
        }
        row[0] = M;                      /* the row's absmax, exactly */
        if (K > 1) row[1] = -M;
    }
}

/* Largest |x - x^| / (M/64516) over the elements, the comparison done exactly: |x - x^| <= M/64516
** iff |32258 x - M (254 a1 + a2)| <= M/2, both products exact in double. */
static double bound_ratio(const float *x, const int8_t *a, const float *amax, size_t R, size_t K, size_t *viol)
{
    double worst = 0;
    for (size_t r = 0; r < R; r++) {
        double M = amax[r];
        if (!(M > 0)) continue;
        for (size_t k = 0; k < K; k++) {
            double a1 = a[r * K + k], a2 = a[R * K + r * K + k];
            double d = fabs(32258.0 * (double)x[r * K + k] - M * (254.0 * a1 + a2));
            if (d > M / 2) (*viol)++;
            worst = fmax(worst, d / (M / 2));
        }
    }
    return worst;
}

static int msd_bound(int quick, qs_claim_out *o, qs_err *e)
{
    const size_t K = 4096, R = quick ? 16 : 256, RA = 64;
    float *x = malloc((R > RA ? R : RA) * K * sizeof(float)), *amax = malloc((R > RA ? R : RA) * sizeof(float));
    int8_t *a = malloc(2 * (R > RA ? R : RA) * K);
    if (!x || !amax || !a) { free(x); free(amax); free(a); return qs_fail(e, "out of memory"); }
    const qs_gen_kind kinds[3] = {QS_GEN_GAUSSIAN, QS_GEN_UNIFORM, QS_GEN_STUDENT_T};
    size_t viol = 0, n = 0;
    double worst = 0;
    for (int d = 0; d < 4; d++) {
        size_t rows = d < 3 ? R : RA;
        if (d < 3) qs_gen_matrix(kinds[d], 4000 + (uint64_t)d, R, K, 1.0, x);
        else adversarial_rows(x, K);
        if (qs_msd_decompose_i8(x, rows, K, 2, a, amax, e)) { free(x); free(amax); free(a); return -1; }
        worst = fmax(worst, bound_ratio(x, a, amax, rows, K, &viol));
        n += rows * K;
    }
    free(x); free(amax); free(a);
    o->value = worst;
    snprintf(o->measured, sizeof o->measured, "%zu violations in %zu values; largest error %.4f of the bound", viol, n,
             worst);
    snprintf(o->detail, sizeof o->detail,
             "Two-pass INT8 decomposition (per-row absmax M, a1 = R(127x/M), a2 = R(254(127x/M - a1)), round half "
             "away) of %zu Gaussian, uniform and Student-t rows of K = %zu (seeds 4000..4002) and 64 adversarial rows "
             "(values on both passes' ties, one float beside them, zeros, +-M, 1e-30 M, M from 2^-30 to 2^29); the "
             "bound |x - x^| <= M/64516 checked exactly per element.", R, K);
    o->verdict = viol == 0 ? QS_VERDICT_REPRODUCED : QS_VERDICT_DIFFERS;
    return 0;
}

static int msd_int8_bits(int quick, qs_claim_out *o, qs_err *e)
{
    const size_t K = 4096, R = quick ? 16 : 256, n = R * K;
    float *x = malloc(n * sizeof(float)), *amax = malloc(R * sizeof(float));
    int8_t *a = malloc(2 * n);
    double *xr = malloc(n * sizeof(double));
    if (!x || !amax || !a || !xr) { free(x); free(amax); free(a); free(xr); return qs_fail(e, "out of memory"); }
    double bound[2], rms[2];
    for (int d = 0; d < 2; d++) {
        qs_gen_matrix(d ? QS_GEN_UNIFORM : QS_GEN_GAUSSIAN, 4100 + (uint64_t)d, R, K, 1.0, x);
        if (qs_msd_decompose_i8(x, R, K, 2, a, amax, e)) { free(x); free(amax); free(a); free(xr); return -1; }
        qs_msd_reconstruct_i8(a, amax, R, K, 2, xr);
        bound[d] = qs_eff_bits_bound(x, xr, R, K);
        rms[d] = qs_eff_bits_rms(x, xr, n);
    }
    free(x); free(amax); free(a); free(xr);
    o->value = bound[0];
    snprintf(o->measured, sizeof o->measured, "%.2f (max error); RMS %.2f Gaussian, %.2f uniform", bound[0], rms[0], rms[1]);
    snprintf(o->detail, sizeof o->detail,
             "Two-pass INT8 MSD of %zu rows x %zu (N(0,1) and U(-1,1), seeds 4100/4101). Max-error bits "
             "log2(M / max|x - x^|) = %.3f on Gaussian rows (log2 64516 = 15.977 is the bound's value); RMS bits "
             "-1/2 log2(sum e^2 / sum x^2): the paper's figure matches the max-error reading on any data and the RMS "
             "reading on uniform data.", R, K, bound[0]);
    o->verdict = fabs(bound[0] - 15.98) <= 0.02 ? QS_VERDICT_REPRODUCED : QS_VERDICT_DIFFERS;
    return 0;
}

/* Effective bits (RMS definition) of single-pass MXFP8 E4M3 and two-pass MXFP4 (reconstructed). */
static int mx_bits(const char *fmt, qs_scale_rule r1, qs_scale_rule rres, int passes, qs_gen_kind kind, uint64_t seed,
                   size_t R, size_t K, double *bits, qs_err *e)
{
    const qs_format *f = qs_format_find(fmt);
    if (!f) return qs_fail(e, "format %s is not in the registry", fmt);
    size_t n = R * K;
    float *x = malloc(n * sizeof(float)), *parts = malloc((size_t)passes * n * sizeof(float));
    double *xr = malloc(n * sizeof(double));
    if (!x || !parts || !xr) { free(x); free(parts); free(xr); return qs_fail(e, "out of memory"); }
    qs_gen_matrix(kind, seed, R, K, 1.0, x);
    qs_msd_mx c;
    memset(&c, 0, sizeof c);
    c.f = f;
    c.o1.scale_rule = r1;
    c.o_res.scale_rule = rres;
    c.pass2_shift = -1;
    int rc = qs_msd_decompose_mx(&c, x, R, K, passes, parts, e);
    if (!rc) {
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            for (int p = 0; p < passes; p++) s += parts[(size_t)p * n + i];
            xr[i] = s;
        }
        *bits = qs_eff_bits_rms(x, xr, n);
    }
    free(x); free(parts); free(xr);
    return rc;
}

static int msd_mxfp8_bits(int quick, qs_claim_out *o, qs_err *e)
{
    const size_t K = 4096, R = quick ? 16 : 256;
    double nc, fl;
    if (mx_bits("mxfp8_e4m3", QS_SCALE_RCEIL, QS_SCALE_RCEIL, 1, QS_GEN_GAUSSIAN, 4200, R, K, &nc, e) ||
        mx_bits("mxfp8_e4m3", QS_SCALE_FLOOR, QS_SCALE_FLOOR, 1, QS_GEN_GAUSSIAN, 4200, R, K, &fl, e))
        return -1;
    o->value = nc;
    snprintf(o->measured, sizeof o->measured, "%.2f (OCP floor scale: %.2f)", nc, fl);
    snprintf(o->detail, sizeof o->detail,
             "Single-pass MXFP8 E4M3 of %zu x %zu N(0,1) values (seed 4200), blocks of 32 along K, RNE; RMS bits "
             "-1/2 log2(sum e^2 / sum x^2) with the no-clip scale 2^ceil(log2(amax/448)) (rceil). The paper's "
             "definition is not in the accessible text; this one reproduces 5.24 (spec formats-mx.md 6).", R, K);
    o->verdict = fabs(nc - 5.24) <= 0.03 ? QS_VERDICT_REPRODUCED : QS_VERDICT_DIFFERS;
    return 0;
}

static int msd_mxfp4_bits(int quick, qs_claim_out *o, qs_err *e)
{
    const size_t K = 4096, R = quick ? 16 : 256;
    double g, u, g1;
    if (mx_bits("mxfp4", QS_SCALE_RCEIL, QS_SCALE_RCEIL, 2, QS_GEN_GAUSSIAN, 4300, R, K, &g, e) ||
        mx_bits("mxfp4", QS_SCALE_RCEIL, QS_SCALE_RCEIL, 2, QS_GEN_UNIFORM, 4301, R, K, &u, e) ||
        mx_bits("mxfp4", QS_SCALE_RCEIL, QS_SCALE_RCEIL, 1, QS_GEN_GAUSSIAN, 4300, R, K, &g1, e))
        return -1;
    o->value = u;
    snprintf(o->measured, sizeof o->measured, "%.2f uniform, %.2f Gaussian (one pass %.2f)", u, g, g1);
    snprintf(o->detail, sizeof o->detail,
             "RECONSTRUCTED recipe (spec msd-attention.md A.3): pass 1 MXFP4 with the no-clip scale "
             "2^ceil(log2(amax/6)), the residual MXFP4-quantized with its own block scale; %zu x %zu values, "
             "U(-1,1) (seed 4301) and N(0,1) (seed 4300); RMS bits. ", R, K);
    int ok = fabs(u - 6.6) <= 0.1 && fabs(g - 6.6) <= 0.1;
    if (!ok)
        APPEND(o->detail, "The paper's ~6.6 is reached on uniform data only; on Gaussian data the reconstruction gives "
                          "%.2f. The paper's data, scale rules and definition are unknown (its 'alpha/64' bound is "
                          "undefined).", g);
    o->verdict = ok ? QS_VERDICT_REPRODUCED : QS_VERDICT_DIFFERS;
    return 0;
}

static int msd_kv_traffic(int quick, qs_claim_out *o, qs_err *e)
{
    (void)quick;
    json_t *l = qs_model_kv_ledger(2);
    if (!l) return qs_fail(e, "out of memory");
    double stacked = NAN, per = NAN;
    size_t i;
    json_t *r;
    json_array_foreach(l, i, r) {
        const char *p = json_string_value(json_object_get(r, "path"));
        if (p && !strcmp(p, "reduction")) {
            stacked = json_number_value(json_object_get(r, "stacked"));
            per = json_number_value(json_object_get(r, "per_component"));
        }
    }
    json_decref(l);
    o->value = per;
    snprintf(o->measured, sizeof o->measured, "%.1fx (one GEMM per component), %.1fx (stacked)", per, stacked);
    snprintf(o->detail, sizeof o->detail,
             "RECONSTRUCTED byte ledger per cached KV element (analysis/kernel_model.c): dequantize-then-GEMM moves "
             "1 (INT8 read) + 2 (BF16 write) + 2 (BF16 read) = 5 bytes; two-pass MSD reads the INT8 element once "
             "per component GEMM (2 bytes: 2.5x, the paper's 'up to 2.5x') or once for a stacked GEMM (1 byte: 5x). "
             "A model, not a measurement: this CPU has no HBM/cube split.");
    /* two constants of our own ledger: agreement shows the model matches the paper's arithmetic only */
    o->verdict = fabs(per - 2.5) < 1e-9 ? QS_VERDICT_MODEL : QS_VERDICT_DIFFERS;
    return 0;
}

/* ---- AMLA --------------------------------------------------------------------------------------- */

static int amla_error(int quick, qs_claim_out *o, qs_err *e)
{
    qs_attn_shape s = {quick ? 16 : 32, 1, 1, quick ? 1024 : 4096, 576, 512};
    size_t nq = s.H * s.Lq * s.d, nk = s.Hkv * s.Lk * s.d, nv = s.Hkv * s.Lk * s.dv, no = s.H * s.Lq * s.dv;
    float *Q = malloc(nq * 4), *K = malloc(nk * 4), *V = malloc(nv * 4), *O = malloc(no * 4);
    double *R = malloc(no * 8);
    int rc = -1;
    if (!Q || !K || !V || !O || !R) { qs_fail(e, "out of memory"); goto out; }
    qs_gen_matrix(QS_GEN_GAUSSIAN, 4400, s.H * s.Lq, s.d, 1.0, Q);
    qs_gen_matrix(QS_GEN_GAUSSIAN, 4401, s.Hkv * s.Lk, s.d, 1.0, K);
    for (size_t t = 0; t < s.Hkv * s.Lk; t++) memcpy(V + t * s.dv, K + t * s.d, s.dv * 4);   /* MLA: V = K[:, :512] */
    qs_attn_cfg c;
    memset(&c, 0, sizeof c);
    c.bc = 512;
    c.p = QS_P_BF16;
    c.threads = 2;
    if (qs_attn_ref(&s, 0, 0, Q, K, V, R, NULL, e)) goto out;
    qs_cmp fa, am, an;
    if (qs_attn_fa2(&s, &c, Q, K, V, O, NULL, e)) goto out;
    qs_cmp_f(O, R, no, &fa);
    if (qs_attn_amla(&s, &c, Q, K, V, O, e)) goto out;
    qs_cmp_f(O, R, no, &am);
    c.amla_nocomp = 1;
    if (qs_attn_amla(&s, &c, Q, K, V, O, e)) goto out;
    qs_cmp_f(O, R, no, &an);
    double ratio = am.rel_l2 / fa.rel_l2;
    o->value = ratio;
    snprintf(o->measured, sizeof o->measured, "AMLA/FA2 error %.3f (rel. L2 %.2e vs %.2e)", ratio, am.rel_l2, fa.rel_l2);
    snprintf(o->detail, sizeof o->detail,
             "MLA decode: %zu query heads on 1 KV head, d_qk 576, d_v 512 (V = K[:, :512]), Lk %zu, key tiles of 512, "
             "P rounded to BF16 before PV (both kernels), N(0,1) Q and K (seeds 4400/4401); relative L2 error against "
             "the FP64 reference. Without AMLA's 1.5 eps compensation term: %.2e (%.2fx FA2).", s.H, s.Lk, an.rel_l2,
             an.rel_l2 / fa.rel_l2);
    o->verdict = ratio <= 1.10 ? QS_VERDICT_REPRODUCED : QS_VERDICT_DIFFERS;
    rc = 0;
out:
    free(Q); free(K); free(V); free(O); free(R);
    return rc;
}

/* ---- Rollout-ResQ ------------------------------------------------------------------------------- */

static int resq_mechanism(int quick, qs_claim_out *o, qs_err *e)
{
    const size_t m = quick ? 64 : 256, d = quick ? 512 : 2048, n = quick ? 128 : 512;
    float *X = malloc(m * d * 4), *W = malloc(n * d * 4), *Wq = malloc(n * d * 4), *Y = malloc(m * n * 4),
          *Yw = malloc(m * n * 4);
    int rc = -1;
    if (!X || !W || !Wq || !Y || !Yw) { qs_fail(e, "out of memory"); goto out; }
    qs_gen_matrix(QS_GEN_LLM_ACT, 4500, m, d, 1.0, X);
    qs_gen_matrix(QS_GEN_GAUSSIAN, 4501, n, d, 0.02, W);
    const char *fmts[2] = {"hif4", "mxfp4"};
    double und[2], act[2][QS_RESQ_COUNT], rec[2][QS_RESQ_COUNT];
    for (int k = 0; k < 2; k++) {
        qs_apply a;
        memset(&a, 0, sizeof a);
        a.f = qs_format_find(fmts[k]);
        if (!a.f) { qs_fail(e, "format %s is not in the registry", fmts[k]); goto out; }
        a.axis = 1;
        a.gran = QS_GRAN_BLOCK;
        if (qs_fakeq_matrix(&a, W, n, d, Wq, e)) goto out;
        /* X Q(W)^T in double: the reference that isolates the activation error */
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                double s = 0;
                for (size_t t = 0; t < d; t++) s += (double)X[i * d + t] * Wq[j * d + t];
                Yw[i * n + j] = (float)s;
            }
        for (int sp = 0; sp < QS_RESQ_COUNT; sp++) {
            qs_resq_stats st;
            if (qs_resq_layer(&a, X, m, d, Wq, n, (qs_resq_sparse)sp, 32, 64, Y, &st, e)) goto out;
            double num = 0, den = 0;
            for (size_t i = 0; i < m * n; i++) {
                double df = (double)Y[i] - Yw[i];
                num += df * df;
                den += (double)Yw[i] * Yw[i];
            }
            act[k][sp] = sqrt(num / den);
            rec[k][sp] = st.recovered;
            und[k] = st.underflow;
        }
    }
    double gain_h = act[0][QS_RESQ_NONE] / act[0][QS_RESQ_24], gain_m = act[1][QS_RESQ_NONE] / act[1][QS_RESQ_24];
    o->value = act[0][QS_RESQ_NONE] / act[1][QS_RESQ_NONE];
    snprintf(o->measured, sizeof o->measured, "act. error HiF4 %.3f, MXFP4 %.3f; 2:4 cuts it %.1fx / %.1fx",
             act[0][QS_RESQ_NONE], act[1][QS_RESQ_NONE], gain_h, gain_m);
    snprintf(o->detail, sizeof o->detail,
             "RECONSTRUCTED method (spec formats-hifloat.md 4). LLM-like activations %zu x %zu with outlier channels "
             "(seed 4500), Gaussian weights %zu x %zu (seed 4501), both FP4; relative L2 of the layer output against "
             "X Q(W)^T (the activation error ResQ targets). Underflow (non-zero activations quantized to 0): HiF4 "
             "%.1f %%, MXFP4 %.1f %%. Of those, restored by the correction: dense %.0f / %.0f %%, 2:4 %.0f / %.0f %%, "
             "50 %% channels %.0f / %.0f %%, 50 %% 32x64 blocks %.0f / %.0f %% (HiF4 / MXFP4). After 2:4 the errors "
             "are %.4f / %.4f. The paper's GSM8K gaps (4.9 -> 1.1 points HiF4, 13.6 -> 5.3 MXFP4) need RL training "
             "of Qwen2.5-3B: not measurable here.",
             m, d, n, d, 100 * und[0], 100 * und[1], 100 * rec[0][QS_RESQ_DENSE], 100 * rec[1][QS_RESQ_DENSE],
             100 * rec[0][QS_RESQ_24], 100 * rec[1][QS_RESQ_24], 100 * rec[0][QS_RESQ_CH50], 100 * rec[1][QS_RESQ_CH50],
             100 * rec[0][QS_RESQ_BLK50], 100 * rec[1][QS_RESQ_BLK50], act[0][QS_RESQ_24], act[1][QS_RESQ_24]);
    int ok = act[0][QS_RESQ_NONE] < act[1][QS_RESQ_NONE] && gain_h >= 3 && gain_m >= 3;
    o->verdict = ok ? QS_VERDICT_REPRODUCED : QS_VERDICT_DIFFERS;
    double xs[QS_RESQ_COUNT];
    for (int sp = 0; sp < QS_RESQ_COUNT; sp++) xs[sp] = sp;
    qs_line_data sd[2] = {{"HiF4", QS_RESQ_COUNT, xs, act[0]}, {"MXFP4", QS_RESQ_COUNT, xs, act[1]}};
    o->fig = qs_plot_lines("Rollout-ResQ: activation error by correction (0 none, 1 dense, 2 2:4, 3 ch50, 4 blk50)",
                           "variant", QS_AX_LINEAR, "relative L2 vs X Q(W)^T", QS_AX_LOG10, sd, 2);
    rc = 0;
out:
    free(X); free(W); free(Wq); free(Y); free(Yw);
    return rc;
}

static int resq_gsm8k(int quick, qs_claim_out *o, qs_err *e)
{
    (void)quick;
    (void)e;
    snprintf(o->measured, sizeof o->measured, "-");
    snprintf(o->detail, sizeof o->detail,
             "GRPO training of Qwen2.5-3B on GSM8K with FP4 rollouts (about 100 GB of accelerator memory for 10 hours "
             "per run in the paper) is out of reach of a CPU; resq.mechanism measures the layer-level effect instead.");
    o->verdict = QS_VERDICT_NOT_CPU;
    return 0;
}

const qs_claim qs_claims_kernels[] = {
    {"msd.int8-bound", "Multi-Scale Dequant (arXiv 2605.13915)",
     "two-pass INT8 decomposition error never exceeds M/64516 per element", "M/64516", "no violation", 1, msd_bound},
    {"msd.int8-bits", "Multi-Scale Dequant (arXiv 2605.13915)", "two-pass INT8 gives ~15.98 effective bits", "15.98",
     "±0.02", 1, msd_int8_bits},
    {"msd.mxfp8-bits", "Multi-Scale Dequant (arXiv 2605.13915)", "single-pass MXFP8 gives 5.24 effective bits", "5.24",
     "±0.03", 0, msd_mxfp8_bits},
    {"msd.mxfp4-bits", "Multi-Scale Dequant (arXiv 2605.13915)",
     "two-pass MXFP4 gives ~6.6 effective bits (reconstructed recipe)", "~6.6", "±0.1 on Gaussian and uniform", 0,
     msd_mxfp4_bits},
    {"msd.kv-traffic", "Multi-Scale Dequant (arXiv 2605.13915)",
     "KV-cache HBM traffic reduced up to 2.5x (reconstructed traffic model)", "2.5x", "exact (model)", 0,
     msd_kv_traffic},
    {"amla.error", "AMLA (Ascend MLA kernels)",
     "add-instead-of-multiply rescaling keeps FA2's error on MLA decode (<= 1.10x is the project target; the paper "
     "gives no figure)", "none (target 1.10x)", "project target: ratio <= 1.10",
     0, amla_error},
    {"resq.mechanism", "HiFloat4 RL (arXiv 2607.26515)",
     "FP4 rollout error is activation underflow, worse for MXFP4; the quantized residual (2:4) recovers it",
     "HiF4 < MXFP4", "ordering + >= 3x", 0, resq_mechanism},
    {"resq.gsm8k", "HiFloat4 RL (arXiv 2607.26515)", "Rollout-ResQ-S2:4 closes the GSM8K gap to BF16",
     "4.9->1.1 / 13.6->5.3", "-", 0, resq_gsm8k},
};
const size_t qs_claims_kernels_n = sizeof qs_claims_kernels / sizeof qs_claims_kernels[0];
