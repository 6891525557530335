/*
** The nvfp4 family's fused operand kernel (kernels/llm_fakeq_nvfp4.c) and its 16x16 tiles give the bits
** and the counts of the generic path (QS_FAKEQ_FAST=0: copy, RHT, qs_fakeq_matrix, qs_llm_opstat):
** random shapes with edges (not multiples of 16 or 64, one row or column), both axes, RHT, SR, one and
** two threads, in place, values with zeros, FP32 subnormals, huge values, NaN/Inf and E2M1 ties; and
** every operand of the nvfp4 and nvfp4-1d presets through qs_llm_recipe_operand(_stat).
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/llm_fakeq_fast.h"
#include "../../kernels/llm_fakeq_nvfp4.h"
#include "../../kernels/llm_fakeq_par.h"
#include "../../kernels/llm_recipe.h"
#include "../../kernels/simd.h"
#include "../../kernels/sr.h"

static uint64_t rs = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(uint64_t n)
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return rs % n;
}

/* kind 0: normal-ish with outliers; 1: E2M1 ties (multiples of 0.25 up to 6); extras: zeros, FP32
** subnormals, outliers, with specials huge values (up to 3e38) and NaN/Inf. */
static void fill(float *x, size_t n, int kind, int specials)
{
    for (size_t i = 0; i < n; i++) {
        double u = qs_sr_uniform(rs, i) * 2 - 1;
        x[i] = kind ? (float)((int)(u * 24) * 0.25) : (float)(u * (i % 97 == 0 ? 40.0 : 0.05));
        uint64_t k = rnd(1000);
        if (k < 20) x[i] = 0;
        else if (k < 30) x[i] = (float)(u * 1e-39);   /* FP32 subnormal */
        else if (k < 50) x[i] *= 1e-6f;
        else if (k < 52) x[i] = specials ? (float)(u * 3e38) : x[i] * 30.0f;
        else if (k < 55) x[i] *= 3.0f;
        else if (specials && k == 55) x[i] = rnd(2) ? NAN : -INFINITY;
    }
}

static void fast(int on) { setenv("QS_FAKEQ_FAST", on ? "1" : "0", 1); }

static void counts_equal(const qs_llm_opstat *a, const qs_llm_opstat *b, const char *what)
{
    if (a->n != b->n || a->underflow != b->underflow || a->clipped != b->clipped || a->nonfinite != b->nonfinite)
        fail_msg("%s: counts n %llu/%llu under %llu/%llu clip %llu/%llu nonfinite %llu/%llu", what,
                 (unsigned long long)a->n, (unsigned long long)b->n, (unsigned long long)a->underflow,
                 (unsigned long long)b->underflow, (unsigned long long)a->clipped, (unsigned long long)b->clipped,
                 (unsigned long long)a->nonfinite, (unsigned long long)b->nonfinite);
}

static int have_avx512(void)
{
#if defined(__x86_64__)
    return qs_simd_level() >= QS_SIMD_AVX512 && __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

/* qs_llm_fakeq_par(_stat) with the kernel against the generic path and the unfused counts. */
static void test_par(void **st)
{
    (void)st;
    if (!have_avx512()) tu_skip("cpu: no AVX-512 DQ, the nvfp4 kernel takes nothing");
    const qs_format *f = qs_format_find("nvfp4");
    assert_non_null(f);
    int taken = 0;
    for (int it = 0; it < 240; it++) {
        size_t R = 1 + rnd(300), C = 1 + rnd(300);
        if (it % 5 == 0) { R = 16 * (1 + rnd(20)); C = 64 * (1 + rnd(6)); }
        if (it % 7 == 0) { if (rnd(2)) R = 1 + rnd(2); else C = 1 + rnd(2); }
        size_t n = R * C;
        float *x = malloc(n * 4), *t = malloc(n * 4), *y1 = malloc(n * 4), *y2 = malloc(n * 4);
        fill(x, n, it % 3 == 1, it % 4 == 0);
        qs_apply a;
        memset(&a, 0, sizeof a);
        a.f = f;
        a.gran = QS_GRAN_BLOCK;
        a.axis = (int)rnd(2);
        if (rnd(2)) { a.o.round = QS_RND_SR; a.o.seed = rnd(1u << 30); a.o.index0 = rnd(1000); }
        if (it % 9 == 0) a.o.tensor_scale = 0.5f + (float)rnd(100);   /* given, not the matrix's */
        int rht = a.axis == 0 ? (int)rnd(2) : 0, threads = 1 + (int)rnd(2), inplace = (int)rnd(2);
        uint64_t seed = rnd(1u << 30);
        char what[160];
        snprintf(what, sizeof what, "%zux%zu axis %d rht %d sr %d threads %d in place %d ts %g", R, C, a.axis, rht,
                 a.o.round == QS_RND_SR, threads, inplace, a.o.tensor_scale);
        qs_err e = {{0}};
        fast(1);
        if (!qs_llm_fakeq_fast_ok(&a, a.axis, rht, 1)) fail_msg("%s: the kernel declines", what);
        taken++;
        /* the kernel, with statistics */
        qs_llm_opstat s1 = {0, 0, 0, 0}, s2 = {0, 0, 0, 0};
        if (inplace) memcpy(y1, x, n * 4);
        if (qs_llm_fakeq_par_stat(&a, inplace ? y1 : x, y1, R, C, rht, seed, threads, &s1, &e))
            fail_msg("%s: %s", what, e.msg);
        /* the generic path: transform, quantize, count apart */
        fast(0);
        memcpy(t, x, n * 4);
        if (rht) qs_llm_rht16(t, R, C, a.axis, seed, 0);
        assert_int_equal(qs_llm_fakeq_par(&a, t, y2, R, C, 0, seed, threads, &e), 0);
        assert_int_equal(qs_llm_opstat_add(&a, 0, t, y2, R, C, &s2, &e), 0);
        if (memcmp(y1, y2, n * 4)) {
            for (size_t i = 0; i < n; i++)
                if (memcmp(y1 + i, y2 + i, 4))
                    fail_msg("%s: element (%zu, %zu) x %a seen %a: %a, generic %a", what, i / C, i % C, x[i], t[i],
                             y1[i], y2[i]);
        }
        counts_equal(&s1, &s2, what);
        /* without statistics, in place or not, against the generic path with the RHT inside par */
        assert_int_equal(qs_llm_fakeq_par(&a, x, y2, R, C, rht, seed, threads, &e), 0);
        fast(1);
        memcpy(y1, x, n * 4);
        assert_int_equal(qs_llm_fakeq_par(&a, inplace ? y1 : x, y1, R, C, rht, seed, threads, &e), 0);
        if (memcmp(y1, y2, n * 4)) fail_msg("%s: without statistics the values differ", what);
        free(x); free(t); free(y1); free(y2);
    }
    assert_true(taken > 200);
    /* below AVX-512 the kernel takes nothing (the generic path is the portable one) */
    qs_apply a;
    memset(&a, 0, sizeof a);
    a.f = f;
    a.gran = QS_GRAN_BLOCK;
    qs_simd_force(QS_SIMD_AVX2);
    assert_int_equal(qs_llm_fakeq_fast_ok(&a, 1, 0, 0), 0);
    assert_int_equal(qs_fq_nvfp4_tiles_ok(&a), 0);
    qs_simd_force(-1);
    assert_int_equal(qs_fq_nvfp4_ok(&a, 1, 1, 0), 0);   /* RHT along rows: not taken */
    a.o.nvfp4 = QS_NVFP4_TORCHAO;
    assert_int_equal(qs_fq_nvfp4_ok(&a, 0, 0, 0), 0);
}

/* Every operand of the presets, with and without statistics, in place or not, kernel against generic. */
static void test_presets(void **st)
{
    (void)st;
    if (!have_avx512()) tu_skip("cpu: no AVX-512 DQ, the nvfp4 kernel takes nothing");
    static const char *const presets[] = {"nvfp4", "nvfp4-1d"};
    static const size_t shapes[][2] = {{256, 1024}, {1030, 72}, {200, 328}, {37, 45}, {1, 300}, {300, 1},
                                       {16, 16}, {64, 256}, {17, 33}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int kind = 0; kind < 3; kind++) {
            size_t R = shapes[s][0], C = shapes[s][1], n = R * C;
            float *x = malloc(n * 4), *y1 = malloc(n * 4), *y2 = malloc(n * 4);
            fill(x, n, kind == 1, kind == 2);
            for (size_t p = 0; p < 2; p++) {
                qs_llm_recipe r;
                qs_err e = {{0}};
                assert_int_equal(qs_llm_recipe_preset(presets[p], &r, &e), 0);
                for (int op = 0; op < QS_OP_COUNT; op++)
                    for (int stat = 0; stat < 2; stat++)
                        for (int inplace = 0; inplace < 2; inplace++) {
                            qs_llm_opstat s1 = {0, 0, 0, 0}, s2 = {0, 0, 0, 0};
                            char what[160];
                            snprintf(what, sizeof what, "%s %s %zux%zu kind %d stat %d in place %d", presets[p],
                                     qs_llm_operand_name(op), R, C, kind, stat, inplace);
                            float *o[2] = {y1, y2};
                            qs_llm_opstat *so[2] = {&s1, &s2};
                            for (int k = 0; k < 2; k++) {
                                fast(k == 0);
                                if (inplace) memcpy(o[k], x, n * 4);
                                if (qs_llm_recipe_operand_stat(&r, op, inplace ? o[k] : x, R, C, 5, o[k], NULL,
                                                               stat ? so[k] : NULL, &e))
                                    fail_msg("%s: %s", what, e.msg);
                            }
                            if (memcmp(y1, y2, n * 4)) fail_msg("%s: values differ", what);
                            counts_equal(&s1, &s2, what);
                        }
            }
            free(x); free(y1); free(y2);
        }
    fast(1);
}

/* The tile kernel directly: bands of rows on their own give the whole matrix's tiles. */
static void test_tiles(void **st)
{
    (void)st;
    if (!have_avx512()) tu_skip("cpu: no AVX-512 DQ, the nvfp4 kernel takes nothing");
    for (int it = 0; it < 40; it++) {
        size_t R = 1 + rnd(80), C = 1 + rnd(80), n = R * C;
        float *x = malloc(n * 4), *y1 = malloc(n * 4), *y2 = malloc(n * 4);
        fill(x, n, it % 2, it % 3 == 0);
        qs_apply a;
        memset(&a, 0, sizeof a);
        a.f = qs_format_find("nvfp4");
        a.gran = QS_GRAN_BLOCK;
        qs_err e = {{0}};
        fast(1);
        memcpy(y1, x, n * 4);
        assert_int_equal(qs_llm_fakeq_tiles16(&a, y1, R, C, &e), 0);
        fast(0);
        memcpy(y2, x, n * 4);
        assert_int_equal(qs_llm_fakeq_tiles16(&a, y2, R, C, &e), 0);
        if (memcmp(y1, y2, n * 4)) fail_msg("tiles %zux%zu: values differ", R, C);
        free(x); free(y1); free(y2);
    }
    fast(1);
}

/* qs_llm_absmax2: the finite absmax as it is and after qs_llm_rht16 down the columns, in row bands on
** one or two threads, against a copy transformed and scanned (edge shapes: a final partial band, one
** row or column, NaN/Inf and huge values). */
static float finite_max(const float *x, size_t n)
{
    float m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && fabsf(x[i]) > m) m = fabsf(x[i]);
    return m;
}

static void test_absmax2(void **st)
{
    (void)st;
    if (!have_avx512()) tu_skip("cpu: no AVX-512 DQ, qs_llm_absmax2 declines");
    static const size_t shapes[][2] = {{1, 40}, {15, 3}, {16, 16}, {200, 328}, {1030, 72}, {33, 1}, {512, 17}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
        for (int specials = 0; specials < 2; specials++)
            for (int threads = 1; threads <= 2; threads++) {
                size_t R = shapes[k][0], C = shapes[k][1], n = R * C;
                float *x = malloc(n * sizeof *x), *t = malloc(n * sizeof *x);
                assert_true(x && t);
                fill(x, n, 0, specials);
                memcpy(t, x, n * sizeof *x);
                qs_llm_rht16(t, R, C, 0, 99 + k, 0);
                float p = -1, h = -1;
                assert_int_equal(qs_llm_absmax2(x, R, C, 99 + k, threads, &p, &h), 0);
                if (p != finite_max(x, n) || h != finite_max(t, n))
                    fail_msg("%zux%zu specials %d threads %d: %g %g, want %g %g", R, C, specials, threads, p, h,
                             finite_max(x, n), finite_max(t, n));
                free(x);
                free(t);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_par),
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_tiles),
        cmocka_unit_test(test_absmax2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
