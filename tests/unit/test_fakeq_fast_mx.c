/*
** The MX family's fused operand kernel (kernels/llm_fakeq_mx.c) gives the generic path's bits and
** counts: qs_llm_fakeq_par(_stat) with the kernel against the same calls under QS_FAKEQ_FAST=0 plus
** qs_llm_opstat_add, for every MX element type, scale rules floor and rceil, blocks of 16, 32, 48 and
** 64, both axes, at AVX-512 and AVX2 (two kernels), one and two threads, in place or not, on shapes
** with edges (1 row, 1 column, not multiples of 16/32/64) and values with zeros, whole-zero blocks,
** FP32 subnormals, values near FLT_MAX, NaN, +-Inf and rounding ties; and through
** qs_llm_recipe_operand_stat for the mxfp4 and mxfp8 presets.
*/
#include "test_util.h"

#include <float.h>
#include <math.h>

#include "../../kernels/llm_fakeq_fast.h"
#include "../../kernels/llm_fakeq_par.h"
#include "../../kernels/llm_recipe.h"
#include "../../kernels/simd.h"

static uint64_t rs = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(uint64_t n)
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return rs % n;
}
static double uni(void) { return (double)rnd(1u << 30) / (double)(1u << 30); }

static void fast_on(int on)
{
    if (on) unsetenv("QS_FAKEQ_FAST");
    else setenv("QS_FAKEQ_FAST", "0", 1);
}

/* Values with every edge: scales that vary by block, zeros, subnormals, huge, ties, and (specials) NaN/Inf;
** then whole runs (along either axis) of zeros, of subnormals, of grid values (ties), and of values
** near tiny (the element's max x 2^-127, where rceil's code is 0 or 1). */
static void fill(float *x, size_t R, size_t C, int specials, double tiny)
{
    size_t n = R * C;
    for (size_t i = 0; i < n; i++) {
        double s = ldexp(1.0, (int)((i / 32 + i / C) % 23) - 11);
        float v = (float)((uni() * 2 - 1) * s);
        uint64_t k = rnd(1000);
        if (k < 30) v = k & 1 ? -0.0f : 0.0f;
        else if (k < 50) v = (float)((uni() * 2 - 1) * 1e-39);
        else if (k < 60) v = (float)((rnd(2) ? -1 : 1) * FLT_MAX * (0.5 + 0.5 * uni()));
        else if (k < 200) v = (float)ldexp((double)((int)rnd(2047) - 1023), -(int)rnd(14));   /* ties */
        else if (specials && k < 203) v = k == 200 ? NAN : k == 201 ? INFINITY : -INFINITY;
        x[i] = v;
    }
    for (int j = 0; j < 10; j++) {   /* runs of 40 down a column or along a row */
        size_t r = rnd(R), c = rnd(C);
        int kind = (int)rnd(4), down = (int)rnd(2);
        double sc = tiny * (0.5 + 0.75 * uni());
        for (size_t i = 0; i < 40; i++) {
            size_t rr = down ? r + i : r, cc = down ? c : c + i;
            if (rr >= R || cc >= C) break;
            float *v = &x[rr * C + cc];
            if (kind == 0) *v = 0.0f;
            else if (kind == 1) *v = (float)(uni() * 1e-40);
            else if (kind == 2) *v = (float)(((int)rnd(57) - 28) * 0.25);
            else *v = (float)((uni() * 2 - 1) * sc);   /* amax near tiny: rceil's subnormal rule */
        }
    }
}

static void counts_equal(const qs_llm_opstat *a, const qs_llm_opstat *b, const char *what)
{
    if (a->n != b->n || a->underflow != b->underflow || a->clipped != b->clipped || a->nonfinite != b->nonfinite)
        fail_msg("%s: counts n %llu/%llu under %llu/%llu clip %llu/%llu nonfinite %llu/%llu", what,
                 (unsigned long long)a->n, (unsigned long long)b->n, (unsigned long long)a->underflow,
                 (unsigned long long)b->underflow, (unsigned long long)a->clipped, (unsigned long long)b->clipped,
                 (unsigned long long)a->nonfinite, (unsigned long long)b->nonfinite);
}

static void bits_equal(const float *a, const float *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, 4))
            fail_msg("%s: value %zu: %a (fast) vs %a (generic)", what, i, (double)a[i], (double)b[i]);
}

static int have_avx2(void)
{
    return qs_simd_level() >= QS_SIMD_AVX2;
}

/* One operand: the generic path's bits and counts, then the kernel's at 1 and 2 threads, in place or not. */
static void one_case(const qs_apply *a, const float *x, size_t R, size_t C, const char *what0)
{
    size_t n = R * C;
    float *ref = malloc(n * 4), *y = malloc(n * 4);
    qs_err e = {{0}};
    qs_llm_opstat sref = {0, 0, 0, 0};
    fast_on(0);
    assert_false(qs_llm_fakeq_fast_ok(a, a->axis, 0, 1));
    assert_int_equal(qs_llm_fakeq_par(a, x, ref, R, C, 0, 1, 1, &e), 0);
    assert_int_equal(qs_llm_opstat_add(a, 0, x, ref, R, C, &sref, &e), 0);
    fast_on(1);
    if (!qs_llm_fakeq_fast_ok(a, a->axis, 0, 1) || !qs_fq_mx_ok(a, a->axis, 0, 1)) fail_msg("%s: not taken", what0);
    char what[200];
    for (int threads = 1; threads <= 2; threads++)
        for (int inplace = 0; inplace <= 1; inplace++) {
            snprintf(what, sizeof what, "%s threads %d%s", what0, threads, inplace ? " in place" : "");
            qs_llm_opstat s = {0, 0, 0, 0};
            memcpy(y, x, n * 4);
            int rc = qs_llm_fakeq_par_stat(a, inplace ? y : x, y, R, C, 0, 1, threads, &s, &e);
            if (rc) fail_msg("%s: rc %d (%s)", what, rc, e.msg);
            bits_equal(y, ref, n, what);
            counts_equal(&s, &sref, what);
            memcpy(y, x, n * 4);
            assert_int_equal(qs_llm_fakeq_par(a, inplace ? y : x, y, R, C, 0, 1, threads, &e), 0);
            bits_equal(y, ref, n, what);
        }
    free(ref);
    free(y);
}

static void shapes_formats(void)
{
    static const char *const fmts[] = {"mxfp4", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxint8"};
    static const size_t edges[][2] = {{1, 1}, {1, 37}, {37, 1}, {1, 1000}, {1000, 1}, {33, 17}, {64, 64},
                                      {65, 129}, {32, 16}, {200, 328}, {31, 95}, {97, 200}};
    size_t ne = sizeof edges / sizeof *edges;
    for (size_t it = 0; it < ne + 70; it++) {
        size_t R = it < ne ? edges[it][0] : 1 + rnd(300), C = it < ne ? edges[it][1] : 1 + rnd(300);
        float *x = malloc(R * C * 4);
        qs_apply a;
        memset(&a, 0, sizeof a);
        a.f = qs_format_find(fmts[it % 6]);
        assert_non_null(a.f);
        fill(x, R, C, it % 3 != 1, ldexp(a.f->max_finite, -254));
        a.gran = QS_GRAN_BLOCK;
        a.o.scale_rule = rnd(2) ? QS_SCALE_RCEIL : QS_SCALE_FLOOR;
        static const int blocks[] = {0, 0, 16, 48, 64, 32};
        a.o.block = blocks[rnd(6)];
        if (rnd(4) == 0) a.o.round = QS_RND_RNE;
        for (int axis = 0; axis <= 1; axis++) {
            a.axis = axis;
            char what[160];
            snprintf(what, sizeof what, "%s %s block %d %zux%zu axis %d", a.f->name,
                     a.o.scale_rule == QS_SCALE_RCEIL ? "rceil" : "floor", a.o.block, R, C, axis);
            one_case(&a, x, R, C, what);
        }
        free(x);
    }
}

/* At each vector level the CPU has (AVX-512 and AVX2 are two kernels). */
static void test_shapes_formats(void **st)
{
    (void)st;
    if (!have_avx2()) tu_skip("cpu: no AVX2, the MX kernel takes nothing");
    for (int lvl = qs_simd_cpu(); lvl >= QS_SIMD_AVX2; lvl--) {
        qs_simd_force(lvl);
        print_message("# %s\n", qs_simd_name(qs_simd_level()));
        shapes_formats();
    }
    qs_simd_force(-1);
}

/* The mxfp4 and mxfp8 presets' operands with statistics, out of place and in place (fresh copies). */
static void recipes(void)
{
    static const char *const presets[] = {"mxfp4", "mxfp8"};
    static const size_t shapes[][2] = {{256, 1024}, {1030, 72}, {33, 65}, {1, 40}, {129, 1}};
    for (size_t p = 0; p < 2; p++)
        for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
            size_t R = shapes[k][0], C = shapes[k][1], n = R * C;
            float *x = malloc(n * 4), *y1 = malloc(n * 4), *y2 = malloc(n * 4);
            fill(x, R, C, k != 0, p ? 448 * 0x1p-127 : 6 * 0x1p-127);
            qs_llm_recipe r;
            qs_err e = {{0}};
            assert_int_equal(qs_llm_recipe_preset(presets[p], &r, &e), 0);
            for (int op = 0; op < QS_OP_COUNT; op++)
                for (int inplace = 0; inplace <= 1; inplace++) {
                    qs_llm_opstat s1 = {0, 0, 0, 0}, s2 = {0, 0, 0, 0};
                    fast_on(1);
                    memcpy(y1, x, n * 4);
                    const float *in1 = inplace ? y1 : x, *in2 = inplace ? y2 : x;
                    assert_int_equal(qs_llm_recipe_operand_stat(&r, op, in1, R, C, 3, y1, NULL, &s1, &e), 0);
                    fast_on(0);
                    memcpy(y2, x, n * 4);
                    assert_int_equal(qs_llm_recipe_operand_stat(&r, op, in2, R, C, 3, y2, NULL, &s2, &e), 0);
                    fast_on(1);
                    char what[120];
                    snprintf(what, sizeof what, "%s %s %zux%zu%s", presets[p], qs_llm_operand_name(op), R, C,
                             inplace ? " in place" : "");
                    bits_equal(y1, y2, n, what);
                    counts_equal(&s1, &s2, what);
                    assert_true(s1.n == n);
                }
            free(x); free(y1); free(y2);
        }
}

static void test_recipes(void **st)
{
    (void)st;
    if (!have_avx2()) tu_skip("cpu: no AVX2, the MX kernel takes nothing");
    for (int lvl = qs_simd_cpu(); lvl >= QS_SIMD_AVX2; lvl--) {
        qs_simd_force(lvl);
        recipes();
    }
    qs_simd_force(-1);
}

/* What the kernel declines (the generic path runs): other rounding, rules, variants, blocks, RHT, and
** every operand below AVX2. */
static void test_declines(void **st)
{
    (void)st;
    qs_apply a;
    memset(&a, 0, sizeof a);
    a.f = qs_format_find("mxfp4");
    a.gran = QS_GRAN_BLOCK;
    int base = qs_fq_mx_ok(&a, 1, 0, 1);
    assert_int_equal(base, have_avx2());
    assert_false(qs_fq_mx_ok(&a, 1, 1, 1));   /* RHT */
    qs_apply b = a;
    b.o.round = QS_RND_SR;
    assert_false(qs_fq_mx_ok(&b, 0, 0, 0));
    b = a; b.o.scale_rule = QS_SCALE_CEIL; assert_false(qs_fq_mx_ok(&b, 0, 0, 0));
    b = a; b.o.scale_rule = QS_SCALE_UOS; assert_false(qs_fq_mx_ok(&b, 0, 0, 0));
    b = a; b.o.flush_subnormal_blocks = 1; assert_false(qs_fq_mx_ok(&b, 0, 0, 0));
    b = a; b.o.zero_positive = 1; assert_false(qs_fq_mx_ok(&b, 0, 0, 0));
    b = a; b.o.nan_block_te = 1; assert_false(qs_fq_mx_ok(&b, 0, 0, 0));
    b = a; b.o.zero_block_scale = 1; assert_false(qs_fq_mx_ok(&b, 0, 0, 0));
    b = a; b.o.floor_log2f = 1; assert_false(qs_fq_mx_ok(&b, 0, 0, 0));
    b = a; b.o.block = 8; assert_false(qs_fq_mx_ok(&b, 0, 0, 0));
    b = a; b.o.block = 40; assert_false(qs_fq_mx_ok(&b, 0, 0, 0));
    b = a; b.f = qs_format_find("nvfp4"); assert_false(qs_fq_mx_ok(&b, 0, 0, 0));
    b = a; b.cscale = QS_CSCALE_TENSOR; assert_false(qs_fq_mx_ok(&b, 0, 0, 0));
    qs_simd_force(QS_SIMD_SCALAR);
    assert_false(qs_fq_mx_ok(&a, 1, 0, 1));
    qs_simd_force(-1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes_formats),
        cmocka_unit_test(test_recipes),
        cmocka_unit_test(test_declines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
