/*
** The fused HiF4 training-operand kernel (kernels/llm_fakeq_hif4.c, AVX-512) gives the bits of the
** generic path (qs_fakeq_matrix: the registry's hif4 fakeq along the axis) and the counts of the
** single-thread statistics path it replaces (qs_llm_opstat_quantize, and qs_llm_opstat_add), on
** random shapes with edges (1 row or column, not multiples of 16 or 64), both axes, TA and RNE, one
** and two threads, in place or not, with zeros, -0, subnormals, values that clamp the scale at 2^-48
** or 49152, NaN and Inf, and units of ties; qs_llm_fakeq_par with QS_FAKEQ_FAST=0 and without; and
** every operand of the hif4 recipe through qs_llm_recipe_operand_stat against copy + quantize + count.
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/llm_fakeq_fast.h"
#include "../../kernels/llm_fakeq_par.h"
#include "../../kernels/llm_recipe.h"
#include "../../kernels/resq.h"
#include "../../kernels/simd.h"
#include "../../kernels/sr.h"

static uint64_t rs = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(uint64_t n)
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return rs % n;
}

/* Normal values with outliers; mode 1 adds zeros, -0, subnormals, tiny and huge values and (specials)
** NaN/Inf; mode 2 is ties: multiples of 1/8 below 7 with a 7 every 16 along both axes, so every whole
** unit has E6M2 1.0 and its elements fall on every level's half steps. */
static void fill(float *x, size_t R, size_t C, uint64_t seed, int mode, int specials)
{
    for (size_t i = 0; i < R * C; i++) {
        double u = qs_sr_uniform(seed, i) * 2 - 1;
        x[i] = (float)(u * (i % 97 == 0 ? 40.0 : 0.05));
        if (mode == 2) {
            size_t r = i / C, c = i % C;
            x[i] = (r + c) % 16 == 0 ? 7.0f : (float)rnd(56) * 0.125f;
            if (rnd(2)) x[i] = -x[i];
            continue;
        }
        if (mode != 1) continue;
        uint64_t k = rnd(1000);
        if (k < 20) x[i] = 0;
        else if (k < 25) x[i] = -0.0f;
        else if (k < 30) x[i] = (float)(u * 1e-40);     /* subnormal */
        else if (k < 60) x[i] *= 1e-6f;
        else if (k < 62) x[i] = (float)(u * 1e-16);     /* a unit of these clamps SF at 2^-48 */
        else if (k < 64) x[i] = (float)(u * 0x1p-45);   /* near the clamp: q from 0 to 7, clips */
        else if (k < 67) x[i] *= 3e3f;
        else if (k < 69) x[i] = (float)(u * 1e6);       /* SF clamps at 49152; clips */
        else if (k < 70) x[i] = (float)(u * 3e38);
        else if (specials && k == 70) x[i] = rnd(2) ? NAN : -INFINITY;
        else if (specials && k == 71) x[i] = INFINITY;
    }
    if (mode == 1 && R * C > 3 && rnd(2)) {   /* whole rows and columns of tiny values: SF clamps at 2^-48 */
        size_t r = rnd(R), c0 = rnd(C);
        double m = rnd(2) ? 1e-30 : 0x1p-44;
        for (size_t c = 0; c < C; c++) x[r * C + c] = (float)(qs_sr_uniform(seed, c) * m);
        for (size_t r0 = 0; r0 < R; r0++) x[r0 * C + c0] = (float)(qs_sr_uniform(seed, r0) * m);
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
    for (size_t i = 0; i < n; i++) {
        uint32_t u, v;
        memcpy(&u, a + i, 4);
        memcpy(&v, b + i, 4);
        if (u != v) fail_msg("%s: element %zu: %08x (%g) against %08x (%g)", what, i, u, (double)a[i], v, (double)b[i]);
    }
}

static int have_avx512(void) { return qs_simd_level() >= QS_SIMD_AVX512; }

static qs_apply hif4_apply(int axis, int rne)
{
    qs_apply a;
    memset(&a, 0, sizeof a);
    a.f = qs_format_find("hif4");
    assert_non_null(a.f);
    a.gran = QS_GRAN_BLOCK;
    a.axis = axis;
    a.o.round = rne ? QS_RND_RNE : QS_RND_DEFAULT;
    return a;
}

/* Fused quantization + counts against the old single-thread path and the generic quantizer. */
static void test_against_old_path(void **st)
{
    (void)st;
    if (!have_avx512()) tu_skip("cpu: no AVX-512, the fused HiF4 kernel does not run");
    static const size_t edge[] = {1, 2, 3, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200};
    qs_llm_opstat tot = {0, 0, 0, 0};
    for (int it = 0; it < 240; it++) {
        size_t R, C;
        if (it < 40) { R = edge[rnd(13)]; C = edge[rnd(13)]; }
        else if (it % 5 == 0) { R = 64 * (1 + rnd(12)); C = 16 * (1 + rnd(40)); }
        else { R = 1 + rnd(400); C = 1 + rnd(400); }
        size_t n = R * C;
        int axis = (int)rnd(2), rne = (int)rnd(2), threads = 1 + (int)rnd(2), inplace = (int)rnd(2);
        int mode = (int)rnd(3), specials = it % 4 == 1;
        float *x = malloc(n * 4), *yq = malloc(n * 4), *yg = malloc(n * 4), *yf = malloc(n * 4);
        fill(x, R, C, 100 + (uint64_t)it, mode, specials);
        qs_apply a = hif4_apply(axis, rne);
        char what[160];
        snprintf(what, sizeof what, "%zux%zu axis %d %s threads %d %s mode %d specials %d", R, C, axis,
                 rne ? "rne" : "ta", threads, inplace ? "in place" : "apart", mode, specials);
        assert_int_equal(qs_llm_fakeq_fast_ok(&a, axis, 0, 1), 1);
        qs_err e = {{0}};
        /* the old path: one thread, the codec run per run, then the counts */
        qs_llm_opstat sq = {0, 0, 0, 0}, sg = {0, 0, 0, 0}, sf = {0, 0, 0, 0};
        assert_int_equal(qs_llm_opstat_quantize(&a, x, yq, R, C, &sq, &e), 0);
        assert_int_equal(qs_fakeq_matrix(&a, x, R, C, yg, &e), 0);
        assert_int_equal(qs_llm_opstat_add(&a, 0, x, yg, R, C, &sg, &e), 0);
        bits_equal(yq, yg, n, what);   /* (the two old paths agree) */
        counts_equal(&sq, &sg, what);
        /* the fused kernel on the pool */
        float *in = x;
        if (inplace) { memcpy(yf, x, n * 4); in = yf; }
        int rc = qs_llm_fakeq_par_stat(&a, in, yf, R, C, 0, 7, threads, &sf, &e);
        if (rc) fail_msg("%s: rc %d %s", what, rc, e.msg);
        bits_equal(yf, yg, n, what);
        counts_equal(&sf, &sg, what);
        tot.underflow += sf.underflow; tot.clipped += sf.clipped; tot.nonfinite += sf.nonfinite;
        /* without statistics, against the generic path (QS_FAKEQ_FAST=0) */
        if (inplace) memcpy(yf, x, n * 4);
        assert_int_equal(qs_llm_fakeq_par(&a, in, yf, R, C, 0, 7, threads, &e), 0);
        bits_equal(yf, yg, n, what);
        setenv("QS_FAKEQ_FAST", "0", 1);
        assert_int_equal(qs_llm_fakeq_fast_ok(&a, axis, 0, 0), 0);
        assert_int_equal(qs_llm_fakeq_par(&a, x, yq, R, C, 0, 7, threads, &e), 0);
        unsetenv("QS_FAKEQ_FAST");
        bits_equal(yq, yg, n, what);
        free(x); free(yq); free(yg); free(yf);
    }
    assert_true(tot.underflow > 0 && tot.clipped > 0 && tot.nonfinite > 0);   /* every count was exercised */
}

/* Products that round onto a half step in float but lie off it: units whose E6M2 is 1.25, 1.5 or 1.75
** (REC 0.80078125, 0.66796875, 0.5703125: not powers of two) with the maximum in every group (so
** every element's multiplier is REC) and elements a few ulps around (k + 1/2) / REC; and units whose
** group maxima lie a few ulps around 2 / REC and 4 / REC (the flags' compares).  TA, RNE and the
** flags must follow the exact product (the residual's sign), as the generic path's double arithmetic. */
static void test_residual_ties(void **st)
{
    (void)st;
    if (!have_avx512()) tu_skip("cpu: no AVX-512, the fused HiF4 kernel does not run");
    static const float vmax[3] = {8.75f, 10.5f, 12.25f};
    static const double rec[3] = {0.80078125, 0.66796875, 0.5703125};
    const size_t R = 27, C = 7 * 64;   /* 147 + 42 units, one per (scale, k or flag, offset), 7 to a row */
    float *x = calloc(R * C, 4), *xt = malloc(R * C * 4), *y1 = malloc(R * C * 4), *y2 = malloc(R * C * 4);
    size_t u = 0, hits = 0;
    for (int m = 0; m < 3; m++)
        for (int k = 0; k < 7; k++)
            for (int off = -3; off <= 3; off++, u++) {
                double h = k + 0.5;
                float c = (float)(h / rec[m]);
                for (int i = 0; i < abs(off); i++) c = nextafterf(c, off < 0 ? 0.0f : 100.0f);
                if ((float)(c * rec[m]) == (float)h && c * rec[m] != h) hits++;
                float *v = x + u * 64;
                for (int i = 0; i < 64; i++) v[i] = i % 4 == 0 ? vmax[m] : (i & 1 ? -c : c);
            }
    for (int m = 0; m < 3; m++)   /* group maxima around 2 / REC and 4 / REC: the flags' compares */
        for (int f = 2; f <= 4; f += 2)
            for (int off = -3; off <= 3; off++, u++) {
                float c = (float)(f / rec[m]);
                for (int i = 0; i < abs(off); i++) c = nextafterf(c, off < 0 ? 0.0f : 100.0f);
                if ((float)(c * rec[m]) == (float)f && c * rec[m] != f) hits++;
                float *v = x + u * 64;
                v[0] = vmax[m];
                for (int i = 4; i < 64; i++) v[i] = i % 4 == 0 ? c : i % 4 == 1 ? -c / 3 : i % 4 == 2 ? c / 5 : 0.1f;
            }
    assert_true(hits >= 6);   /* the data reach the case */
    for (size_t i = 0; i < R; i++)   /* axis 0 takes the transpose: x is R x C, xt is C x R */
        for (size_t j = 0; j < C; j++) xt[j * R + i] = x[i * C + j];
    for (int axis = 0; axis <= 1; axis++)
        for (int rne = 0; rne <= 1; rne++) {
            const float *in = axis ? x : xt;   /* down columns: xt's columns are x's rows */
            qs_apply a = hif4_apply(axis, rne);
            qs_err e = {{0}};
            qs_llm_opstat s1 = {0, 0, 0, 0}, s2 = {0, 0, 0, 0};
            assert_int_equal(qs_llm_fakeq_par_stat(&a, in, y1, axis ? R : C, axis ? C : R, 0, 1, 2, &s1, &e), 0);
            assert_int_equal(qs_llm_opstat_quantize(&a, in, y2, axis ? R : C, axis ? C : R, &s2, &e), 0);
            char what[64];
            snprintf(what, sizeof what, "residual ties axis %d %s", axis, rne ? "rne" : "ta");
            bits_equal(y1, y2, R * C, what);
            counts_equal(&s1, &s2, what);
        }
    free(x); free(xt); free(y1); free(y2);
}

/* Large operands (several tasks on the pool, long columns): one thread and two give the old bits
** and counts. */
static void test_large_threads(void **st)
{
    (void)st;
    if (!have_avx512()) tu_skip("cpu: no AVX-512, the fused HiF4 kernel does not run");
    static const size_t shapes[][2] = {{1024, 256}, {256, 1024}, {1030, 72}, {77, 1111}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int axis = 0; axis <= 1; axis++) {
            size_t R = shapes[s][0], C = shapes[s][1], n = R * C;
            float *x = malloc(n * 4), *yg = malloc(n * 4), *y = malloc(n * 4);
            fill(x, R, C, 5 + s, 1, 1);
            qs_apply a = hif4_apply(axis, (int)s & 1);
            qs_err e = {{0}};
            qs_llm_opstat sg = {0, 0, 0, 0};
            assert_int_equal(qs_llm_opstat_quantize(&a, x, yg, R, C, &sg, &e), 0);
            for (int threads = 1; threads <= 2; threads++) {
                qs_llm_opstat sf = {0, 0, 0, 0};
                char what[96];
                snprintf(what, sizeof what, "%zux%zu axis %d threads %d", R, C, axis, threads);
                assert_int_equal(qs_llm_fakeq_par_stat(&a, x, y, R, C, 0, 1, threads, &sf, &e), 0);
                bits_equal(y, yg, n, what);
                counts_equal(&sf, &sg, what);
            }
            free(x); free(yg); free(y);
        }
}

/* Below AVX-512 (QS_SIMD=avx2) the kernel declines and the generic path gives the same bits. */
static void test_declines(void **st)
{
    (void)st;
    qs_apply a = hif4_apply(1, 0);
    assert_int_equal(qs_fq_hif4_ok(&a, 1, 1, 1), 0);   /* no RHT */
    a.o.round = QS_RND_SR;
    assert_int_equal(qs_fq_hif4_ok(&a, 1, 0, 1), 0);
    a.o.round = QS_RND_DEFAULT;
    a.f = qs_format_find("hif8");
    assert_int_equal(qs_fq_hif4_ok(&a, 1, 0, 1), 0);
    a.f = qs_format_find("hif4");
    if (!have_avx512()) return;
    assert_int_equal(qs_fq_hif4_ok(&a, 1, 0, 1), 1);
    qs_simd_force(QS_SIMD_AVX2);
    assert_int_equal(qs_fq_hif4_ok(&a, 1, 0, 1), 0);
    size_t R = 130, C = 200, n = R * C;
    float *x = malloc(n * 4), *y1 = malloc(n * 4), *y2 = malloc(n * 4);
    fill(x, R, C, 3, 1, 1);
    qs_err e = {{0}};
    assert_int_equal(qs_llm_fakeq_par(&a, x, y1, R, C, 0, 1, 2, &e), 0);
    qs_simd_force(-1);
    assert_int_equal(qs_llm_fakeq_par(&a, x, y2, R, C, 0, 1, 2, &e), 0);
    bits_equal(y2, y1, n, "avx2 generic against the fused kernel");
    free(x); free(y1); free(y2);
}

/* Every operand of the hif4 recipe with statistics (in place and not) against what the code before the
** fused kernel computed: copy, qs_fakeq_matrix along the operand's axis, qs_llm_opstat_add. */
static void test_recipe_operands(void **st)
{
    (void)st;
    static const size_t shapes[][2] = {{256, 1024}, {1030, 72}, {128, 256}, {33, 70}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        size_t R = shapes[k][0], C = shapes[k][1], n = R * C;
        float *x = malloc(n * 4), *y1 = malloc(n * 4), *y2 = malloc(n * 4);
        fill(x, R, C, 7 + k, k & 1 ? 1 : 0, k == 3);
        qs_llm_recipe r;
        qs_err e = {{0}};
        assert_int_equal(qs_llm_recipe_preset("hif4", &r, &e), 0);
        for (int op = 0; op < QS_OP_COUNT; op++) {
            const qs_llm_slot *sl = &r.op[op];
            assert_true(sl->on && !sl->sr && !sl->rht && !sl->tile2d);
            qs_apply a = sl->a;
            a.axis = qs_llm_operand_axis(op);
            qs_llm_opstat s1 = {0, 0, 0, 0}, s2 = {0, 0, 0, 0}, s3 = {0, 0, 0, 0};
            assert_int_equal(qs_fakeq_matrix(&a, x, R, C, y2, &e), 0);
            assert_int_equal(qs_llm_opstat_add(&a, 0, x, y2, R, C, &s2, &e), 0);
            char what[120];
            snprintf(what, sizeof what, "hif4 %s %zux%zu", qs_llm_operand_name(op), R, C);
            assert_int_equal(qs_llm_recipe_operand_stat(&r, op, x, R, C, 3, y1, NULL, &s1, &e), 0);
            bits_equal(y1, y2, n, what);
            counts_equal(&s1, &s2, what);
            memcpy(y1, x, n * 4);
            assert_int_equal(qs_llm_recipe_operand_stat(&r, op, y1, R, C, 3, y1, NULL, &s3, &e), 0);
            bits_equal(y1, y2, n, what);
            counts_equal(&s3, &s2, what);
        }
        free(x); free(y1); free(y2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_old_path),
        cmocka_unit_test(test_residual_ties),
        cmocka_unit_test(test_large_threads),
        cmocka_unit_test(test_declines),
        cmocka_unit_test(test_recipe_operands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
