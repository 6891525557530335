/*
** Tests of the MSD kernels (kernels/msd.c): the INT8 decomposition and its element-wise bound
** M/64516 (evaluated exactly) on random and adversarial inputs, the exact integer GEMM (against an
** int32 loop, at K where plain FP32 sums are provably inexact), the assembled W8A16 GEMM bound, the
** effective-bit figures of the spec (15.98, 5.24, MXFP4 two-pass on Gaussian and uniform data) and
** the error paths.
*/
#include "test_util.h"

#include <math.h>

#include <cblas.h>

#include "../../analysis/kernel_exp.h"
#include "../../analysis/kernel_model.h"
#include "../../kernels/format.h"
#include "../../kernels/msd.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t xs(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

/* exact check |x − (M/127)(a1 + a2/254)| ≤ M/64516  <=>  |32258x − M(254a1 + a2)| ≤ M/2 */
static size_t violations2(const float *x, const int8_t *a, const float *am, size_t R, size_t K)
{
    size_t bad = 0;
    for (size_t r = 0; r < R; r++)
        for (size_t k = 0; k < K; k++) {
            double M = am[r];
            double num = fabs(32258.0 * x[r * K + k] - M * (254.0 * a[r * K + k] + a[R * K + r * K + k]));
            bad += num > M / 2;
        }
    return bad;
}

static void test_round_half_away(void **st)
{
    (void)st;
    /* row absmax 127 so t = x: ties go away from zero in both passes */
    float x[6] = {127, 2.5f, -2.5f, 0.5f, -0.5f, 3.0f + 0.5f / 254};
    int8_t a[12];
    float am;
    qs_err e;
    assert_int_equal(qs_msd_decompose_i8(x, 1, 6, 2, a, &am, &e), 0);
    assert_true(am == 127);
    assert_int_equal(a[0], 127); assert_int_equal(a[1], 3); assert_int_equal(a[2], -3);
    assert_int_equal(a[3], 1); assert_int_equal(a[4], -1); assert_int_equal(a[5], 3);
    assert_int_equal(a[6 + 1], -127); assert_int_equal(a[6 + 2], 127);   /* 254·(2.5 − 3) = −127 */
    assert_int_equal(a[6 + 5], 1);                                        /* 254·(0.5/254) = 0.5 → 1 */
}

static void test_bound_random_and_adversarial(void **st)
{
    (void)st;
    size_t R = 64, K = 2048;
    float *x = malloc(R * K * 4), am[64];
    int8_t *a = malloc(3 * R * K);
    qs_err e;
    for (int kind = 0; kind < 4; kind++) {
        if (kind < 3) qs_gen_matrix(kind == 0 ? QS_GEN_GAUSSIAN : kind == 1 ? QS_GEN_UNIFORM : QS_GEN_STUDENT_T, 11 + kind, R, K, 1, x);
        else   /* adversarial: exact ties of both passes, one ulp beside them, zeros, ±amax, tiny values */
            for (size_t r = 0; r < R; r++) {
                float M = ldexpf(1.0f + (float)(r % 5) / 7, (int)(r % 60) - 30);
                for (size_t k = 0; k < K; k++) {
                    uint64_t u = xs();
                    int a1 = (int)(u % 254) - 127, a2 = (int)((u >> 20) % 254) - 127, sel = (int)((u >> 40) % 6);
                    double t = a1 + 0.5 + (a2 + 0.5) / 254.0;
                    if (sel == 1) t = a1 + 0.5;
                    if (sel == 2) t = nextafter(a1 + 0.5, -1000);
                    if (sel == 3) t = 0;
                    if (sel == 4) t = 1e-30;
                    if (t > 127) t = 127;
                    if (t < -127) t = -127;
                    x[r * K + k] = (float)(t / 127.0 * M);
                }
                x[r * K + r] = (r & 1) ? -M : M;
            }
        assert_int_equal(qs_msd_decompose_i8(x, R, K, 2, a, am, &e), 0);
        assert_int_equal(violations2(x, a, am, R, K), 0);
        /* the bound is tight: some element reaches at least 99% of it */
        double worst = 0;
        double *xr = malloc(R * K * sizeof(double));
        qs_msd_reconstruct_i8(a, am, R, K, 2, xr);
        for (size_t r = 0; r < R; r++)
            for (size_t k = 0; k < K; k++) worst = fmax(worst, fabs(x[r * K + k] - xr[r * K + k]) / (am[r] / 64516.0));
        assert_true(worst > 0.99 && worst < 1.0 + 1e-9);
        /* three passes: bound M/(127·254²·2) */
        assert_int_equal(qs_msd_decompose_i8(x, R, K, 3, a, am, &e), 0);
        qs_msd_reconstruct_i8(a, am, R, K, 3, xr);
        for (size_t r = 0; r < R; r++)
            for (size_t k = 0; k < K; k++)
                assert_true(fabs(x[r * K + k] - xr[r * K + k]) <= am[r] / 16387064.0 * (1 + 1e-6) + 1e-300);
        free(xr);
    }
    /* a deliberately wrong decomposition (second component off by one) is caught */
    a[R * K + 5] += a[R * K + 5] < 127 ? 1 : -1;
    assert_true(violations2(x, a, am, R, K) > 0);
    free(x); free(a);
}

static void test_exact_gemm(void **st)
{
    (void)st;
    size_t R = 6, N = 5, K = 4096;   /* 4096·127² = 6.6e7 > 2^24: one FP32 sum is not exact */
    int8_t *A = malloc(R * K), *B = malloc(N * K);
    for (size_t i = 0; i < R * K; i++) A[i] = (int8_t)((xs() % 2) ? 127 : 125);
    for (size_t i = 0; i < N * K; i++) B[i] = (int8_t)((xs() % 3) ? 127 : -127 + (int)(xs() % 3));
    int32_t *c1 = malloc(R * N * 4), *c2 = malloc(R * N * 4);
    qs_err e;
    int nch = 0;
    assert_int_equal(qs_i8_gemm_exact(A, R, B, NULL, N, K, c1, QS_I8GEMM_SGEMM, 1, &nch, &e), 0);
    assert_int_equal(qs_i8_gemm_exact(A, R, B, NULL, N, K, c2, QS_I8GEMM_INT, 1, NULL, &e), 0);
    assert_memory_equal(c1, c2, R * N * 4);
    assert_true(nch >= 4);   /* the bound forces chunks of at most ~1024 */
    /* a single FP32 SGEMM over the whole K is NOT exact here (so the test above can fail) */
    float *Af = malloc(R * K * 4), *Bf = malloc(N * K * 4), *Cf = malloc(R * N * 4);
    for (size_t i = 0; i < R * K; i++) Af[i] = A[i];
    for (size_t i = 0; i < N * K; i++) Bf[i] = B[i];
    int mism = 0;
    for (int rep = 0; rep < 3 && !mism; rep++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)R, (int)N, (int)K, 1.0f, Af, (int)K, Bf, (int)K, 0.0f, Cf, (int)N);
        for (size_t i = 0; i < R * N; i++) mism += (int64_t)Cf[i] != c2[i];
        /* also a plain left-to-right FP32 loop */
        for (size_t r = 0; r < R; r++)
            for (size_t n = 0; n < N; n++) {
                float s = 0;
                for (size_t k = 0; k < K; k++) s += Af[r * K + k] * Bf[n * K + k];
                mism += (int64_t)s != c2[r * N + n];
            }
    }
    assert_true(mism > 0);
    /* typical data: K = 4096 in one chunk, still exact */
    float *x = malloc(16 * K * 4);
    float am[16];
    int8_t *a = malloc(2 * 16 * K);
    qs_gen_matrix(QS_GEN_GAUSSIAN, 3, 16, K, 1, x);
    assert_int_equal(qs_msd_decompose_i8(x, 16, K, 2, a, am, &e), 0);
    float *W = malloc(N * K * 4), sig[5];
    qs_gen_matrix(QS_GEN_GAUSSIAN, 4, N, K, 0.02, W);
    qs_quant_w_i8(W, N, K, B, sig);
    qs_i8_pack p;
    assert_int_equal(qs_i8_pack_make(B, N, K, &p, &e), 0);
    int32_t *d1 = malloc(32 * N * 4), *d2 = malloc(32 * N * 4);
    assert_int_equal(qs_i8_gemm_exact(a, 32, B, &p, N, K, d1, QS_I8GEMM_SGEMM, 2, &nch, &e), 0);
    assert_int_equal(qs_i8_gemm_exact(a, 32, B, NULL, N, K, d2, QS_I8GEMM_INT, 1, NULL, &e), 0);
    assert_memory_equal(d1, d2, 32 * N * 4);
    assert_int_equal(nch, 1);
    /* errors: K too large for INT32, a pack of the wrong shape */
    assert_int_equal(qs_i8_gemm_exact(a, 1, B, NULL, 1, QS_MSD_MAX_K + 1, d1, QS_I8GEMM_SGEMM, 1, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "exceeds"));
    assert_int_equal(qs_i8_gemm_exact(a, 1, B, &p, N, K - 1, d1, QS_I8GEMM_SGEMM, 1, NULL, &e), -1);
    qs_i8_pack_free(&p);
    free(A); free(B); free(c1); free(c2); free(Af); free(Bf); free(Cf); free(x); free(a); free(W); free(d1); free(d2);
}

static void test_msd_gemm_bound(void **st)
{
    (void)st;
    size_t M = 8, K = 3000, N = 64;
    float *x = malloc(M * K * 4), *W = malloc(N * K * 4), *y = malloc(M * N * 4), sig[64];
    int8_t *Wq = malloc(N * K);
    qs_gen_matrix(QS_GEN_LAPLACE, 5, M, K, 1, x);
    for (size_t i = 0; i < M * K; i++) x[i] = qs_bf16_round(x[i]);
    x[3] = 40;   /* an outlier makes the row scale coarse */
    qs_gen_matrix(QS_GEN_GAUSSIAN, 6, N, K, 0.02, W);
    qs_quant_w_i8(W, N, K, Wq, sig);
    qs_err e;
    for (int meth = 0; meth < 2; meth++) {
        assert_int_equal(qs_msd_gemm_i8(x, M, K, Wq, NULL, sig, N, 2, meth ? QS_I8GEMM_INT : QS_I8GEMM_SGEMM, 2, y, NULL, &e), 0);
        for (size_t m = 0; m < M; m++) {
            double am = 0;
            for (size_t k = 0; k < K; k++) am = fmax(am, fabs(x[m * K + k]));
            for (size_t n = 0; n < N; n++) {
                double ref = 0, sw = 0;
                for (size_t k = 0; k < K; k++) { ref += (double)x[m * K + k] * Wq[n * K + k] * sig[n]; sw += abs(Wq[n * K + k]); }
                double bnd = sig[n] * sw * am / 64516.0 + fabs(ref) * 1.2e-7;
                assert_true(fabs(y[m * N + n] - ref) <= bnd);
            }
        }
    }
    /* non-finite activations are refused */
    x[7] = NAN;
    assert_int_equal(qs_msd_gemm_i8(x, M, K, Wq, NULL, sig, N, 2, QS_I8GEMM_SGEMM, 1, y, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "non-finite"));
    assert_int_equal(qs_msd_gemm_i8(x, M, K, Wq, NULL, sig, N, 4, QS_I8GEMM_SGEMM, 1, y, NULL, &e), -1);
    free(x); free(W); free(y); free(Wq);
}

/* Random shapes (K not a multiple of the 256-column unit, 1–3 passes, 1 or 2 threads): the SGEMM
** integer path equals the int32 loop bit for bit and the combined output agrees. */
static void test_random_shapes(void **st)
{
    (void)st;
    for (int it = 0; it < 40; it++) {
        size_t M = 1 + xs() % 20, K = 1 + xs() % 3000, N = 1 + xs() % 70;
        int passes = 1 + (int)(xs() % 3), th = 1 + (int)(xs() % 2);
        float *x = malloc(M * K * 4), *W = malloc(N * K * 4), *y1 = malloc(M * N * 4), *y2 = malloc(M * N * 4), sig[70];
        int8_t *Wq = malloc(N * K);
        qs_gen_matrix(it % 2 ? QS_GEN_STUDENT_T : QS_GEN_UNIFORM, 900 + (uint64_t)it, M, K, 3, x);
        qs_gen_matrix(QS_GEN_GAUSSIAN, 950 + (uint64_t)it, N, K, 0.02, W);
        qs_quant_w_i8(W, N, K, Wq, sig);
        qs_err e;
        qs_i8_pack p;
        assert_int_equal(qs_i8_pack_make(Wq, N, K, &p, &e), 0);
        assert_int_equal(qs_msd_gemm_i8(x, M, K, Wq, &p, sig, N, passes, QS_I8GEMM_SGEMM, th, y1, NULL, &e), 0);
        assert_int_equal(qs_msd_gemm_i8(x, M, K, Wq, NULL, sig, N, passes, QS_I8GEMM_INT, 1, y2, NULL, &e), 0);
        assert_memory_equal(y1, y2, M * N * 4);   /* exact integer sums, the same combine */
        qs_i8_pack_free(&p);
        free(x); free(W); free(y1); free(y2); free(Wq);
    }
}

static double bits_int8(qs_gen_kind k, int passes, int bound)
{
    size_t R = 256, K = 4096;
    float *x = malloc(R * K * 4), am[256];
    int8_t *a = malloc(3 * R * K);
    double *xr = malloc(R * K * 8);
    qs_err e;
    qs_gen_matrix(k, 21, R, K, 1, x);
    qs_msd_decompose_i8(x, R, K, passes, a, am, &e);
    qs_msd_reconstruct_i8(a, am, R, K, passes, xr);
    double b = bound ? qs_eff_bits_bound(x, xr, R, K) : qs_eff_bits_rms(x, xr, R * K);
    free(x); free(a); free(xr);
    return b;
}

static double bits_mx(const char *fmt, qs_scale_rule r1, qs_scale_rule r2, int shift, qs_gen_kind k, int passes)
{
    size_t R = 512, K = 4096, n = R * K;
    float *x = malloc(n * 4), *parts = malloc(3 * n * 4);
    double *xr = calloc(n, 8);
    qs_msd_mx c;
    memset(&c, 0, sizeof c);
    c.f = qs_format_find(fmt);
    c.o1.scale_rule = r1;
    c.o_res.scale_rule = r2;
    c.pass2_shift = shift;
    qs_err e;
    qs_gen_matrix(k, 22, R, K, 1, x);
    assert_int_equal(qs_msd_decompose_mx(&c, x, R, K, passes, parts, &e), 0);
    for (int p = 0; p < passes; p++)
        for (size_t i = 0; i < n; i++) xr[i] += parts[(size_t)p * n + i];
    double b = qs_eff_bits_rms(x, xr, n);
    free(x); free(parts); free(xr);
    return b;
}

static void test_effective_bits(void **st)
{
    (void)st;
    /* INT8: log2(64516) = 15.977 worst case; the same on uniform data by RMS; ~8 and ~24 for 1 and 3 passes */
    double b2 = bits_int8(QS_GEN_UNIFORM, 2, 1);
    assert_true(b2 >= log2(64516.0) - 1e-9 && b2 < 16.1);
    assert_true(fabs(bits_int8(QS_GEN_UNIFORM, 2, 0) - 15.98) < 0.03);
    assert_true(fabs(bits_int8(QS_GEN_UNIFORM, 1, 0) - 7.99) < 0.03);
    assert_true(fabs(bits_int8(QS_GEN_UNIFORM, 3, 0) - 23.97) < 0.05);
    assert_true(fabs(bits_int8(QS_GEN_GAUSSIAN, 2, 0) - 14.8) < 0.15);   /* amax ≈ 4σ on N(0,1) rows */
    /* INT4 (CANN INT4-KV constants): four passes reach log2(2·7.49·14.98³) = 15.62 bits worst case */
    {
        size_t R = 64, K = 4096;
        float *x = malloc(R * K * 4), am[64];
        int8_t *a = malloc(4 * R * K);
        double *xr = malloc(R * K * 8);
        qs_err e;
        qs_gen_matrix(QS_GEN_UNIFORM, 5, R, K, 1, x);
        for (int p = 1; p <= 4; p++) {
            assert_int_equal(qs_msd_decompose_gen(x, R, K, p, 7.49, 14.98, a, am, &e), 0);
            for (size_t i = 0; i < (size_t)p * R * K; i++) assert_true(a[i] >= -7 && a[i] <= 7);
            qs_msd_reconstruct_gen(a, am, R, K, p, 7.49, 14.98, xr);
            double want = log2(2 * 7.49 * pow(14.98, p - 1));
            assert_true(qs_eff_bits_bound(x, xr, R, K) >= want - 1e-6);
            assert_true(fabs(qs_eff_bits_rms(x, xr, R * K) - want) < 0.05);
        }
        assert_int_equal(qs_msd_decompose_gen(x, R, K, 5, 7.49, 14.98, a, am, &e), -1);
        assert_int_equal(qs_msd_decompose_gen(x, R, K, 2, 7.49, 20, a, am, &e), -1);
        free(x); free(a); free(xr);
    }
    /* MXFP8 E4M3 single pass, no-clip scale, Gaussian: 3 + 2.236 = 5.236 (analytic); OCP floor 5.09 */
    assert_true(fabs(bits_mx("mxfp8_e4m3", QS_SCALE_RCEIL, QS_SCALE_RCEIL, -1, QS_GEN_GAUSSIAN, 1) - 5.236) < 0.02);
    assert_true(fabs(bits_mx("mxfp8_e4m3", QS_SCALE_FLOOR, QS_SCALE_FLOOR, -1, QS_GEN_GAUSSIAN, 1) - 5.09) < 0.03);
    /* MXFP4 two-pass (reconstructed recipe): 6.16 Gaussian, 6.60 uniform (no-clip rules); single pass 3.1 */
    assert_true(fabs(bits_mx("mxfp4", QS_SCALE_RCEIL, QS_SCALE_RCEIL, -1, QS_GEN_GAUSSIAN, 2) - 6.16) < 0.04);
    assert_true(fabs(bits_mx("mxfp4", QS_SCALE_RCEIL, QS_SCALE_RCEIL, -1, QS_GEN_UNIFORM, 2) - 6.60) < 0.04);
    assert_true(fabs(bits_mx("mxfp4", QS_SCALE_FLOOR, QS_SCALE_FLOOR, -1, QS_GEN_GAUSSIAN, 2) - 6.08) < 0.04);
    assert_true(fabs(bits_mx("mxfp4", QS_SCALE_RCEIL, QS_SCALE_RCEIL, 3, QS_GEN_UNIFORM, 2) - 6.60) < 0.05);
    assert_true(fabs(bits_mx("mxfp4", QS_SCALE_FLOOR, QS_SCALE_FLOOR, -1, QS_GEN_GAUSSIAN, 1) - 3.1) < 0.05);
}

static void test_mx_errors_and_bf16(void **st)
{
    (void)st;
    qs_msd_mx c;
    memset(&c, 0, sizeof c);
    c.f = qs_format_find("int8");
    c.pass2_shift = 2;
    float x[32] = {1}, parts[96];
    qs_err e;
    assert_int_equal(qs_msd_decompose_mx(&c, x, 1, 32, 2, parts, &e), -1);
    assert_non_null(strstr(e.msg, "MX format"));
    c.f = qs_format_find("mxfp4");
    assert_int_equal(qs_msd_decompose_mx(&c, x, 1, 32, 0, parts, &e), -1);
    /* BF16 RNE: ties to even, carries, Inf/NaN kept */
    assert_true(qs_bf16_round(1.00390625f) == 1.0f);
    assert_true(qs_bf16_round(1.01171875f) == 1.015625f);
    assert_true(qs_bf16_round(nextafterf(1.00390625f, 2.0f)) == 1.0078125f);
    assert_true(isinf(qs_bf16_round(INFINITY)));
    assert_true(isnan(qs_bf16_round(NAN)));
    assert_true(qs_fp16_round(1.00048828125f) == 1.0f);
    assert_true(qs_fp16_round(65519.0f) == 65504.0f);
    assert_true(isinf(qs_fp16_round(65520.0f)));
}

static void test_model(void **st)
{
    (void)st;
    qs_hw hw;
    assert_int_equal(qs_hw_profile("ascend910", 1, &hw), 0);
    assert_int_equal(qs_hw_profile("tpu", 1, &hw), -1);
    assert_int_equal(qs_hw_profile("h100", 1, &hw), 0);
    json_t *rows = qs_model_table(&hw, 2, 1.0);
    json_t *r = json_array_get(rows, 0);   /* M = 1, N = K = 4096 */
    assert_int_equal(json_integer_value(json_object_get(r, "M")), 1);
    double M = 1, N = 4096, K = 4096;
    double bdeq = N * K * 5 + 2 * M * K + 2 * M * N, bmsd = N * K + 2 * M * K + 2 * M * K + 8 * M * N + 2 * M * N;
    double tpipe = fmax(N * K / hw.r_vec, fmax(2 * M * N * K / hw.p_bf16, bdeq / hw.bw));
    double tmsd = 2 * M * K / hw.r_vec + fmax(4 * M * N * K / hw.p_low, bmsd / hw.bw) + M * N / hw.r_vec;
    assert_true(fabs(json_real_value(json_object_get(r, "t_dequant_pipelined_us")) - tpipe * 1e6) < 1e-9 * tpipe * 1e6 + 1e-12);
    assert_true(fabs(json_real_value(json_object_get(r, "t_msd_us")) - tmsd * 1e6) < 1e-9 * tmsd * 1e6 + 1e-12);
    assert_true(json_real_value(json_object_get(r, "speedup_vs_pipelined")) > 4);   /* decode: weight bytes 1 vs 5 */
    json_decref(rows);
    json_t *l = qs_model_kv_ledger(2);
    json_t *red = json_array_get(l, 3);
    assert_true(json_real_value(json_object_get(red, "per_component")) == 2.5);
    assert_true(json_real_value(json_object_get(red, "stacked")) == 5.0);
    json_decref(l);
}

/* a stored kernel experiment is named by what it covers, not by the one format of its row */
static void test_kx_label(void **st)
{
    (void)st;
    char b[200];
    const char *mo = "{\"input\": {\"K\": 4096, \"M\": 16, \"N\": 4096, \"dist\": \"gaussian\", \"kind\": \"msd-gemm\"}}";
    const char *md = "{\"series\": [{\"name\": \"INT8 RMS bits (gaussian)\", \"x\": [1, 2, 3], \"y\": [8, 16, 24]},"
                     "{\"name\": \"INT8 RMS bits (uniform)\", \"x\": [1, 2, 3], \"y\": [8, 16, 24]},"
                     "{\"name\": \"mxfp4 RMS bits (gaussian, reconstructed recipe)\", \"x\": [1, 2], \"y\": [3, 6]}]}";
    qs_kx_label("msd", mo, md, b, sizeof b);
    assert_string_equal(b, "msd: 2 recipes x 3 passes, GEMM 16x4096x4096 gaussian");
    const char *ao = "{\"input\": {\"L\": [256, 512, 1024, 2048], \"mla\": false}, \"kv\": \"fp8_e4m3\"}";
    const char *ad = "{\"series\": [{\"name\": \"FA2 fp32\", \"x\": [256, 2048], \"y\": [1e-7, 2e-7]},"
                     "{\"name\": \"FA2, KV cache fp8_e4m3\", \"x\": [256, 2048], \"y\": [0.01, 0.02]}]}";
    qs_kx_label("attn", ao, ad, b, sizeof b);
    assert_string_equal(b, "attn L=256..2048, KV fp8_e4m3, 2 kernels");
    qs_kx_label("resq", "{\"formats\": \"hif4,mxfp4\", \"input\": {\"m\": 256, \"d\": 2048, \"n\": 1024}}", md, b, sizeof b);
    assert_string_equal(b, "resq hif4,mxfp4, 256x2048 -> 1024");
    /* a malformed result says what is wrong with it */
    qs_kx_label("msd", "{}", "{\"nope\": 1}", b, sizeof b);
    assert_string_equal(b, "msd, malformed: no \"series\" list");
    qs_kx_label("attn", NULL, "not json", b, sizeof b);
    assert_string_equal(b, "attn, malformed: not JSON");
    qs_kx_label("resq", NULL, "{\"series\": {}}", b, sizeof b);
    assert_string_equal(b, "resq, malformed: \"series\" is not a list");
    qs_kx_label("msd", NULL, "{\"series\": []}", b, sizeof b);
    assert_string_equal(b, "msd, malformed: \"series\" is empty");
}

/* The FP64 reference GEMM: y = x·wᵀ of FP32 inputs in double, against a plain loop. */
static void test_gemm_ref(void **st)
{
    (void)st;
    enum { M = 5, N = 7, K = 33 };
    float x[M * K], w[N * K];
    uint64_t r = 12345;
    for (size_t i = 0; i < M * K; i++) { r = r * 6364136223846793005ull + 1442695040888963407ull; x[i] = (float)((int64_t)(r >> 40) - (1 << 23)) / 4096.0f; }
    for (size_t i = 0; i < N * K; i++) { r = r * 6364136223846793005ull + 1442695040888963407ull; w[i] = (float)((int64_t)(r >> 40) - (1 << 23)) / 8192.0f; }
    double y[M * N];
    assert_int_equal(qs_gemm_ref(x, w, M, N, K, y), 0);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double want = 0;
            for (int k = 0; k < K; k++) want += (double)x[m * K + k] * (double)w[n * K + k];
            assert_true(y[m * N + n] == want);   /* 24-bit by 23-bit products: every partial sum is exact in double */
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_half_away),
        cmocka_unit_test(test_gemm_ref),
        cmocka_unit_test(test_bound_random_and_adversarial),
        cmocka_unit_test(test_exact_gemm),
        cmocka_unit_test(test_msd_gemm_bound),
        cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_effective_bits),
        cmocka_unit_test(test_mx_errors_and_bf16),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_kx_label),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
