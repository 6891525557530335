/*
** Tests of the analysis engine's mechanics (analysis/metrics*.c): the same bits on any thread count
** and on the portable path, layouts, the value histogram handed over, failing reads, progress and
** cancellation, errors, scaled element casts.  The definitions are tested in test_metrics.c.
*/
#include "test_util.h"

#include "metrics_test_util.h"

static void test_threads_identical(void **st)
{
    (void)st;
    struct { const char *f; uint64_t rows, cols; int axis; qs_gran g; } c[] = {
        {"fp8_e4m3", 2600, 1000, 1, QS_GRAN_BLOCK},   /* 20 row bands */
        {"mxfp4", 2600, 1000, 1, QS_GRAN_BLOCK},
        {"mxfp4", 2600, 1000, 0, QS_GRAN_BLOCK},      /* column runs */
        {"nvfp4", 1, 2600000, 1, QS_GRAN_BLOCK},      /* 1-D: pieces of one row */
        {"int8", 2600, 1000, 1, QS_GRAN_ROW},
        {"int8", 1300, 1000, 1, QS_GRAN_COL},         /* in memory, per column */
        {"int8", 1300, 1000, 1, QS_GRAN_TENSOR},
        {"hif4", 1200, 1024, 1, QS_GRAN_BLOCK},
        {"bf16", 700, 1000, 1, QS_GRAN_BLOCK},         /* a pow2 grid down to 2^-133 */
        {"hif8", 700, 1000, 1, QS_GRAN_BLOCK},         /* tapered grid */
        {"fp8_e5m2", 700, 1000, 1, QS_GRAN_BLOCK},     /* overflow to Inf: infinite errors */
        {"m2xfp4", 600, 1024, 1, QS_GRAN_BLOCK},       /* a scale per 8 values */
        {"mxint8", 700, 1000, 1, QS_GRAN_BLOCK},
        {"nvfp4", 700, 1000, 0, QS_GRAN_BLOCK},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        float *x = make_tensor(c[k].rows, c[k].cols, 500 + k);
        x[12345] = NAN;
        for (uint64_t i = 777; i < c[k].rows * c[k].cols; i += 9973) x[i] = (i & 1 ? 1e30f : -3e36f) * (float)(i % 7);
        qs_apply a = mk_apply(c[k].f);
        a.axis = c[k].axis;
        a.gran = c[k].g;
        qs_analysis an[3];
        for (int t = 0; t < 3; t++) {
            qs_err e = {{0}};
            if (run(&a, c[k].rows, c[k].cols, x, t + 1, 1, &an[t], &e)) fail_msg("%s: %s", c[k].f, e.msg);
        }
        same_analysis(&an[0], &an[1]);
        same_analysis(&an[0], &an[2]);
        /* the portable path gives the same bits as the vectorised one */
        qs_analysis sc;
        qs_err e = {{0}};
        qs_simd_force(QS_SIMD_SCALAR);
        int rc = run(&a, c[k].rows, c[k].cols, x, 2, 1, &sc, &e);
        qs_simd_force(-1);
        assert_int_equal(rc, 0);
        same_analysis(&an[0], &sc);
        qs_analysis_free(&sc);
        for (int t = 0; t < 3; t++) qs_analysis_free(&an[t]);
        free(x);
    }
}

/* A sweep passes the value histogram of its first format to the others: same results as computing
** it again; a histogram of another tensor is refused. */
static void test_value_hist_reuse(void **st)
{
    (void)st;
    const uint64_t R = 300, C = 256;
    float *x = make_tensor(R, C, 77);
    x[99] = INFINITY;
    qs_apply a = mk_apply("fp8_e4m3"), b = mk_apply("mxfp4");
    qs_analysis first, again, reused;
    qs_err e = {{0}};
    assert_int_equal(run(&a, R, C, x, 2, 0, &first, &e), 0);
    assert_int_equal(run(&b, R, C, x, 2, 1, &again, &e), 0);
    src s = {x, R * C, UINT64_MAX, 0};
    qs_analyze_opts o;
    memset(&o, 0, sizeof o);
    o.threads = 2;
    o.blocks = 1;
    o.value_hist = &first.value;
    assert_int_equal(qs_analyze(&b, R, C, rd_mem, &s, 1, &o, &reused, &e), 0);
    same_analysis(&again, &reused);
    char *j1 = qs_hists_json(&again), *j2 = qs_hists_json(&reused);
    assert_string_equal(j1, j2);
    free(j1);
    free(j2);
    qs_analysis_free(&reused);
    /* another tensor's histogram (one element fewer) */
    qs_analysis other;
    assert_int_equal(run(&a, R, C - 1, x, 1, 0, &other, &e), 0);
    o.value_hist = &other.value;
    assert_int_equal(qs_analyze(&b, R, C, rd_mem, &s, 1, &o, &reused, &e), -1);
    assert_non_null(strstr(e.msg, "value histogram"));
    qs_analysis_free(&other);
    qs_analysis_free(&first);
    qs_analysis_free(&again);
    free(x);
}

/* Axis 0 of x is axis 1 of x transposed: same histograms and blocks, rows <-> columns. */
static void test_axis0_vs_axis1(void **st)
{
    (void)st;
    uint64_t R = 96, C = 80;
    float *x = make_tensor(R, C, 21), *xt = malloc(R * C * sizeof(float));
    for (uint64_t r = 0; r < R; r++)
        for (uint64_t c = 0; c < C; c++) xt[c * R + r] = x[r * C + c];
    const char *names[] = {"mxfp4", "nvfp4", "hif4", "fp8_e4m3"};
    for (int k = 0; k < 4; k++) {
        qs_apply a0 = mk_apply(names[k]), a1 = mk_apply(names[k]);
        a0.axis = 0;
        qs_analysis p, q;
        qs_err e = {{0}};
        assert_int_equal(run(&a0, R, C, x, 2, 1, &p, &e), 0);
        assert_int_equal(run(&a1, C, R, xt, 2, 1, &q, &e), 0);
        assert_memory_equal(p.value.counts, q.value.counts, (size_t)p.value.nbins * 8);
        assert_memory_equal(p.abs_err.counts, q.abs_err.counts, (size_t)p.abs_err.nbins * 8);
        assert_memory_equal(p.ulp_err.counts, q.ulp_err.counts, (size_t)p.ulp_err.nbins * 8);
        assert_true(p.m.clip_frac == q.m.clip_frac && p.m.underflow_frac == q.m.underflow_frac);
        assert_true(p.m.max_abs_err == q.m.max_abs_err);
        assert_close(p.m.mse, q.m.mse, 1e-12);
        assert_int_equal(p.nblocks, q.nblocks);
        if (p.nblocks) {
            assert_memory_equal(p.block_rmse, q.block_rmse, p.nblocks * 4);
            assert_memory_equal(p.block_ratio, q.block_ratio, p.nblocks * 4);
        }
        for (uint64_t r = 0; r < R; r++) assert_close(p.row_rmse[r], q.col_rmse[r], 1e-6);
        for (uint64_t c = 0; c < C; c++) assert_close(p.col_rmse[c], q.row_rmse[c], 1e-6);
        qs_analysis_free(&p);
        qs_analysis_free(&q);
    }
    free(x);
    free(xt);
}

/* A read that fails midway: the call fails with the reader's message and leaks nothing. */
static void test_read_failure(void **st)
{
    (void)st;
    uint64_t R = 3000, C = 1000;
    float *x = make_tensor(R, C, 41);
    const char *names[] = {"fp8_e4m3", "mxfp4", "int8"};
    for (int k = 0; k < 3; k++)
        for (int known = 0; known < 2; known++)
            for (int t = 1; t <= 2; t++) {
                qs_apply a = mk_apply(names[k]);
                if (k == 2) a.gran = QS_GRAN_TENSOR;
                src s = {x, R * C, 2100000, 0};
                qs_analyze_opts o;
                memset(&o, 0, sizeof o);
                o.threads = t;
                o.blocks = 1;
                o.absmax_known = known;
                o.absmax = 1;
                qs_analysis an;
                qs_err e = {{0}};
                assert_int_equal(qs_analyze(&a, R, C, rd_mem, &s, 0, &o, &an, &e), -1);
                assert_non_null(strstr(e.msg, "disk on fire at 2100000"));
                assert_null(an.value.counts);
                assert_null(an.block_rmse);
            }
    free(x);
}

typedef struct pstate {
    int calls, cancel_after;
    uint64_t last, total;
    pthread_t caller;
    int wrong_thread, backwards;
} pstate;

static int prog(void *ctx, uint64_t done, uint64_t total)
{
    pstate *p = ctx;
    if (!pthread_equal(pthread_self(), p->caller)) p->wrong_thread = 1;
    if (done < p->last || done > total) p->backwards = 1;
    p->last = done;
    p->total = total;
    return ++p->calls == p->cancel_after;
}

static void test_progress_and_cancel(void **st)
{
    (void)st;
    uint64_t R = 4000, C = 1000;
    float *x = make_tensor(R, C, 51);
    for (int known = 0; known < 2; known++)
        for (int t = 1; t <= 2; t++) {
            qs_apply a = mk_apply("mxfp4");
            src s = {x, R * C, UINT64_MAX, 0};
            pstate ps = {0, 0, 0, 0, pthread_self(), 0, 0};
            qs_analyze_opts o;
            memset(&o, 0, sizeof o);
            o.threads = t;
            o.blocks = 1;
            o.absmax_known = known;
            o.absmax = 10;
            o.progress = prog;
            o.progress_ctx = &ps;
            qs_analysis an;
            qs_err e = {{0}};
            assert_int_equal(qs_analyze(&a, R, C, rd_mem, &s, 1, &o, &an, &e), 0);
            assert_false(ps.wrong_thread);
            assert_false(ps.backwards);
            assert_true(ps.calls >= 2);
            assert_int_equal(ps.total, R * C * (known ? 1 : 2));
            assert_int_equal(ps.last, ps.total);
            qs_analysis_free(&an);
            /* cancel at the first call, then at the second */
            for (int at = 1; at <= 2; at++) {
                pstate pc = {0, at, 0, 0, pthread_self(), 0, 0};
                o.progress_ctx = &pc;
                assert_int_equal(qs_analyze(&a, R, C, rd_mem, &s, 1, &o, &an, &e), -1);
                assert_string_equal(e.msg, "cancelled");
                assert_int_equal(pc.calls, at);
                assert_null(an.value.counts);
            }
        }
    free(x);
}

/* The format's options are validated; block formats refuse per-row granularity, as format_apply. */
/* The value histogram's quarter-octave bin of every one of the 2^23 significands in [1, 2), from the
** engine itself: the AVX-512 kernel takes the quarter as the exponent of fl32(fl32(m^2)^2)
** (metrics_kernel_avx512.c, log4f_raw), the portable one compares with thresholds (raw_log4f); both
** must give floor(4 log2 m) exactly.  (On a CPU without AVX-512 both runs take the other paths.) */
static void test_log4_bins_every_significand(void **st)
{
    (void)st;
    const uint64_t rows = 2048, cols = 4096;   /* 2^23 values */
    float *x = malloc(rows * cols * sizeof *x);
    uint64_t want[4] = {0};
    for (uint32_t f = 0; f < (1u << 23); f++) {
        uint32_t b = 0x3f800000u | f;
        memcpy(&x[f], &b, 4);
        want[log4bin_ref((double)x[f])]++;
    }
    qs_apply a = mk_apply("bf16");
    for (int scalar = 0; scalar < 2; scalar++) {
        qs_analysis an;
        qs_err e = {{0}};
        if (scalar) qs_simd_force(QS_SIMD_SCALAR);
        int rc = run(&a, rows, cols, x, 2, 0, &an, &e);
        qs_simd_force(-1);
        if (rc) fail_msg("%s", e.msg);
        for (int j = 0; j < 4; j++)   /* bin 4 (0 - HV_LO) + j holds [2^(j/4), 2^((j+1)/4)) */
            if (an.value.counts[4 * 160 + j] != want[j])
                fail_msg("%s path, quarter %d: %llu values, want %llu", scalar ? "portable" : qs_simd_name(qs_simd_level()), j,
                         (unsigned long long)an.value.counts[4 * 160 + j], (unsigned long long)want[j]);
        assert_int_equal(hist_total(&an.value), rows * cols);
        qs_analysis_free(&an);
    }
    free(x);
}

static void test_errors(void **st)
{
    (void)st;
    float x[4] = {1, 2, 3, 4};
    qs_apply a = mk_apply("mxfp4");
    a.gran = QS_GRAN_ROW;
    qs_analysis an;
    qs_err e = {{0}};
    assert_int_equal(run(&a, 1, 4, x, 1, 0, &an, &e), -1);
    assert_non_null(strstr(e.msg, "fixed blocks"));
    a = mk_apply("fp8_e4m3");
    a.o.round = QS_RND_HR;
    assert_int_equal(run(&a, 1, 4, x, 1, 0, &an, &e), -1);
    assert_non_null(strstr(e.msg, "does not support rounding"));
}

/* ---- scaled element casts (scale=tensor|row|col, kernels/cast_scale.h) ----------------------- */

static float *apply_mem(const qs_apply *a, uint64_t rows, uint64_t cols, const float *x, qs_err *e, int *rc)
{
    float *y = malloc(rows * cols * sizeof(float));
    src s = {x, rows * cols, UINT64_MAX, 0};
    outbuf ob = {y};
    *rc = qs_format_apply(a, rows, cols, rd_mem, &s, wr_mem, &ob, e);
    return y;
}

/* format_apply's scaled cast is qs_cast_scaled (llm's per-token rounding) on each tensor/row/column,
** bit for bit, whatever the run direction, and the analysis measures exactly that q. */
static void test_cast_scale(void **st)
{
    (void)st;
    const char *names[] = {"hif8", "fp8_e4m3", "fp6_e2m3"};
    const uint64_t R = 37, C = 300, n = R * C;
    for (size_t k = 0; k < 3; k++)
        for (int cs = QS_CSCALE_TENSOR; cs <= QS_CSCALE_COL; cs++)
            for (int axis = 0; axis <= 1; axis++) {
                float *x = make_tensor(R, C, 900 + k);
                for (uint64_t c = 0; c < C; c++) x[3 * C + c] = 0;   /* an all-zero row: cast unscaled */
                x[5 * C + 7] = NAN;
                x[6 * C + 9] = INFINITY;
                qs_apply a = mk_apply(names[k]);
                a.axis = axis;
                a.cscale = cs;
                qs_err e = {{0}};
                int rc;
                float *y = apply_mem(&a, R, C, x, &e, &rc);
                if (rc) fail_msg("%s: %s", names[k], e.msg);
                /* the reference: qs_cast_scaled on each scale's run */
                float *want = malloc(n * sizeof(float)), *t = malloc(n * sizeof(float)), *u = malloc(n * sizeof(float));
                uint64_t nrun = cs == QS_CSCALE_TENSOR ? 1 : cs == QS_CSCALE_ROW ? R : C;
                uint64_t len = cs == QS_CSCALE_TENSOR ? n : cs == QS_CSCALE_ROW ? C : R;
                for (uint64_t r = 0; r < nrun; r++) {
                    for (uint64_t i = 0; i < len; i++) t[i] = x[cs == QS_CSCALE_COL ? i * C + r : r * len + i];
                    assert_int_equal(qs_cast_scaled(a.f, &a.o, t, (size_t)len, u, &e), 0);
                    for (uint64_t i = 0; i < len; i++) want[cs == QS_CSCALE_COL ? i * C + r : r * len + i] = u[i];
                }
                for (uint64_t i = 0; i < n; i++)
                    if (memcmp(&y[i], &want[i], 4) && !(isnan(y[i]) && isnan(want[i])))
                        fail_msg("%s scale=%s axis %d: element %llu: %a vs qs_cast_scaled %a", names[k], qs_cscale_name(cs),
                                 axis, (unsigned long long)i, (double)y[i], (double)want[i]);
                /* llm's per-token rounding of the same rows (kernels/llm.c) */
                if (cs == QS_CSCALE_ROW)
                    for (uint64_t r = 0; r < R; r++) {
                        assert_int_equal(qs_llm_fakeq_row(&a, 1, x + r * C, (int)C, u, &e), 0);
                        for (uint64_t i = 0; i < C; i++)
                            if (memcmp(&y[r * C + i], &u[i], 4) && !(isnan(u[i]) && isnan(y[r * C + i])))
                                fail_msg("%s row %llu: analyze/quant %a vs llm %a", names[k], (unsigned long long)r,
                                         (double)y[r * C + i], (double)u[i]);
                    }
                /* scaled differs from the raw cast */
                qs_apply raw = a;
                raw.cscale = 0;
                float *y0 = apply_mem(&raw, R, C, x, &e, &rc);
                assert_int_equal(rc, 0);
                assert_true(memcmp(y, y0, n * sizeof(float)) != 0);
                /* the analysis: the same q (error energy), the scales' bits, 1 or 2 threads, scalar or AVX-512 */
                qs_analysis an, an1, sc;
                assert_int_equal(run(&a, R, C, x, 2, 0, &an, &e), 0);
                double se2 = 0, sx2 = 0;
                for (uint64_t i = 0; i < n; i++)
                    if (isfinite(x[i])) { double d = (double)y[i] - x[i]; se2 += d * d; sx2 += (double)x[i] * x[i]; }
                assert_close(an.m.sum_e2, se2, 1e-9);
                assert_close(an.m.sum_x2, sx2, 1e-12);
                assert_close(an.m.bits_per_elem, a.f->elem_bits + 32.0 * (double)nrun / (double)n, 1e-15);
                assert_true(an.m.clip_frac == 0);
                assert_int_equal(run(&a, R, C, x, 1, 0, &an1, &e), 0);
                same_analysis(&an, &an1);
                qs_simd_force(QS_SIMD_SCALAR);
                rc = run(&a, R, C, x, 2, 0, &sc, &e);
                qs_simd_force(-1);
                assert_int_equal(rc, 0);
                same_analysis(&an, &sc);
                qs_analysis_free(&an);
                qs_analysis_free(&an1);
                qs_analysis_free(&sc);
                free(x); free(y); free(y0); free(want); free(t); free(u);
            }
    /* one long row (pieces of a row): scale=row is one scale */
    {
        const uint64_t L = 300000;
        float *x = make_tensor(1, L, 77);
        qs_apply a = mk_apply("fp8_e4m3");
        a.cscale = QS_CSCALE_ROW;
        qs_err e = {{0}};
        int rc;
        float *y = apply_mem(&a, 1, L, x, &e, &rc), *want = malloc(L * sizeof(float));
        assert_int_equal(rc, 0);
        assert_int_equal(qs_cast_scaled(a.f, &a.o, x, (size_t)L, want, &e), 0);
        assert_memory_equal(y, want, L * sizeof(float));
        qs_analysis an, sc;
        assert_int_equal(run(&a, 1, L, x, 2, 0, &an, &e), 0);
        qs_simd_force(QS_SIMD_SCALAR);
        rc = run(&a, 1, L, x, 2, 0, &sc, &e);
        qs_simd_force(-1);
        assert_int_equal(rc, 0);
        same_analysis(&an, &sc);
        double se2 = 0;
        for (uint64_t i = 0; i < L; i++) { double d = (double)want[i] - x[i]; se2 += d * d; }
        assert_close(an.m.sum_e2, se2, 1e-9);
        qs_analysis_free(&an);
        qs_analysis_free(&sc);
        free(x); free(y); free(want);
    }
    /* refused: formats without a scale target, and scale=col on a 1-D tensor */
    const char *no[] = {"mxfp4", "bf16", "int8", "nvfp4"};
    float x[64] = {1, 2, 3};
    for (size_t k = 0; k < 4; k++) {
        qs_apply a = mk_apply(no[k]);
        a.cscale = QS_CSCALE_ROW;
        qs_err e = {{0}};
        int rc;
        float *y = apply_mem(&a, 2, 32, x, &e, &rc);
        assert_int_not_equal(rc, 0);
        assert_non_null(strstr(e.msg, no[k]));
        free(y);
        qs_analysis an;
        assert_int_not_equal(run(&a, 2, 32, x, 1, 0, &an, &e), 0);
    }
    qs_apply a = mk_apply("hif8");
    a.cscale = QS_CSCALE_COL;
    qs_err e = {{0}};
    int rc;
    float *y = apply_mem(&a, 1, 64, x, &e, &rc);
    assert_int_not_equal(rc, 0);
    free(y);
}

/* Why HiF8's target is 15: on Gaussian rows, absmax -> 15 keeps the bulk in HiF8's 3-mantissa-bit
** binades; absmax -> 2^15 (max_finite) puts it where 1 or 0 bits are left. */
static void test_hif8_target(void **st)
{
    (void)st;
    const uint64_t R = 64, C = 1024, n = R * C;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *t = malloc(C * sizeof(float));
    rng_state = 4242;
    for (uint64_t i = 0; i < n; i++) x[i] = (float)gauss();
    qs_apply a = mk_apply("hif8");
    a.cscale = QS_CSCALE_ROW;
    qs_err e = {{0}};
    qs_analysis an;
    assert_int_equal(run(&a, R, C, x, 2, 0, &an, &e), 0);
    double se2 = 0, sx2 = 0;
    for (uint64_t r = 0; r < R; r++) {   /* the old recipe: s = fl32(2^15 / absmax) */
        float amax = 0;
        for (uint64_t c = 0; c < C; c++) amax = fmaxf(amax, fabsf(x[r * C + c]));
        float s = (float)(32768.0 / amax), inv = (float)(amax / 32768.0);
        for (uint64_t c = 0; c < C; c++) t[c] = x[r * C + c] * s;
        assert_int_equal(a.f->fakeq(a.f, &a.o, t, (size_t)C, y + r * C, &e), 0);
        for (uint64_t c = 0; c < C; c++) {
            double d = (double)(y[r * C + c] * inv) - x[r * C + c];
            se2 += d * d;
            sx2 += (double)x[r * C + c] * x[r * C + c];
        }
    }
    double eff15 = -0.5 * log2(se2 / sx2);
    /* about 5.2 effective bits against about 3.3 (docs/formats.md) */
    if (!(an.m.eff_bits_energy > eff15 + 1.5))
        fail_msg("hif8 absmax->15: %.3f effective bits, absmax->2^15: %.3f", an.m.eff_bits_energy, eff15);
    qs_analysis_free(&an);
    free(x); free(y); free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_identical),
        cmocka_unit_test(test_axis0_vs_axis1),
        cmocka_unit_test(test_value_hist_reuse),
        cmocka_unit_test(test_read_failure),
        cmocka_unit_test(test_progress_and_cancel),
        cmocka_unit_test(test_log4_bins_every_significand),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_cast_scale),
        cmocka_unit_test(test_hif8_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
