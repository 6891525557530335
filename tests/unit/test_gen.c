/*
** Unit tests for the synthetic tensor generators (datasets/gen.c): determinism, independence
** from chunking, moments of every distribution, the llm-act outlier structure, names, and golden
** values that pin the generator's exact bits.
**
** Statistical checks use fixed seeds, so they are deterministic; the tolerances are still set at
** several standard errors so that a legitimate change of the generator does not trip them.
*/
#include "test_util.h"

#include <math.h>

#include "../../datasets/gen.h"

static qs_gen_spec spec(qs_gen_kind kind, uint64_t seed, uint64_t rows, uint64_t cols)
{
    qs_gen_spec s;
    memset(&s, 0, sizeof s);
    qs_gen_defaults(&s);
    s.kind = kind;
    s.seed = seed;
    s.rows = rows;
    s.cols = cols;
    return s;
}

static float *gen_all(const qs_gen_spec *s, size_t n)
{
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    qs_gen_fill(s, 0, n, x);
    return x;
}

typedef struct moments { double mean, std, kurt; } moments;

static moments moments_of(const float *x, size_t n)
{
    moments m = {0, 0, 0};
    for (size_t i = 0; i < n; i++) m.mean += x[i];
    m.mean /= (double)n;
    double m2 = 0, m4 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - m.mean;
        m2 += d * d;
        m4 += d * d * d * d;
    }
    m2 /= (double)n;
    m4 /= (double)n;
    m.std = sqrt(m2);
    m.kurt = m4 / (m2 * m2);
    return m;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_abs(const float *x, size_t n)
{
    double *a = malloc(n * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++) a[i] = fabs(x[i]);
    qsort(a, n, sizeof *a, cmp_double);
    double m = a[n / 2];
    free(a);
    return m;
}

static double frac_abs_below(const float *x, size_t n, double t)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += fabs(x[i]) < t;
    return (double)c / (double)n;
}

#define assert_near(v, want, tol)                                                                \
    do {                                                                                         \
        double v_ = (v), w_ = (want), t_ = (tol);                                                \
        if (!(fabs(v_ - w_) <= t_)) fail_msg("%s = %.6g, want %.6g +- %.3g", #v, v_, w_, t_);    \
    } while (0)

/* One spec of every kind, with shapes that exercise llm-act's column blocks. */
static qs_gen_spec kind_spec(int k, uint64_t seed, uint64_t n)
{
    if (k == QS_GEN_LLM_ACT) return spec(QS_GEN_LLM_ACT, seed, n / 300, 300);
    qs_gen_spec s = spec((qs_gen_kind)k, seed, n, 0);
    if (k == QS_GEN_STUDENT_T) s.nu = 4.5;   /* non-integer: the Gamma sampler */
    return s;
}

static void test_defaults(void **state)
{
    qs_gen_spec s;
    memset(&s, 0xff, sizeof s);
    s.kind = QS_GEN_LAPLACE;
    s.seed = 7;
    s.rows = 3;
    s.cols = 4;
    qs_gen_defaults(&s);
    assert_int_equal(s.kind, QS_GEN_LAPLACE);   /* kind, seed and shape are left alone */
    assert_int_equal(s.seed, 7);
    assert_int_equal(s.rows, 3);
    assert_int_equal(s.cols, 4);
    assert_true(s.scale == 1.0 && s.nu == 3.0 && s.sigma == 1.0);
    assert_int_equal(s.lognormal_signed, 1);
    assert_int_equal(s.outlier_channels, 0);
    assert_true(s.outlier_min == 20.0 && s.outlier_max == 100.0);
}

static void test_determinism(void **state)
{
    const size_t n = 30000;
    for (int k = 0; k < QS_GEN_COUNT; k++) {
        qs_gen_spec a = kind_spec(k, 1234, n), b = kind_spec(k, 1235, n);
        float *x = gen_all(&a, n), *y = gen_all(&a, n), *z = gen_all(&b, n);
        assert_memory_equal(x, y, n * sizeof *x);
        size_t same = 0;
        for (size_t i = 0; i < n; i++) same += memcmp(&x[i], &z[i], sizeof *x) == 0;
        if (same > n / 1000) fail_msg("%s: seeds 1234 and 1235 agree on %zu of %zu elements",
                                      qs_gen_name((qs_gen_kind)k), same, n);
        free(x);
        free(y);
        free(z);
    }
}

/* Filling [0, n) in odd-sized pieces, in any order, gives the same bits as one call. */
static void test_chunk_independence(void **state)
{
    static const size_t pieces[] = {1, 7, 13, 255, 257, 1000, 3, 4099, 2};
    const size_t n = 30000;
    qs_gen_spec extra[] = {
        spec(QS_GEN_LLM_ACT, 9, n, 0),          /* 1-D: one token of n channels */
        spec(QS_GEN_LLM_ACT, 9, n / 1000, 1000), /* a partial last column block */
        spec(QS_GEN_LLM_ACT, 9, n / 7, 7),       /* many rows per piece */
        spec(QS_GEN_STUDENT_T, 9, n, 0),         /* nu = 3: the exact chi-square path */
        spec(QS_GEN_LLM_ACT, 9, (uint64_t)1 << 40, 0), /* a window costs its size, not C */
    };
    const int nextra = (int)(sizeof extra / sizeof extra[0]);
    for (int k = 0; k < QS_GEN_COUNT + nextra; k++) {
        qs_gen_spec s = k < QS_GEN_COUNT ? kind_spec(k, 77, n) : extra[k - QS_GEN_COUNT];
        float *whole = gen_all(&s, n);
        float *parts = malloc(n * sizeof *parts);
        assert_non_null(parts);
        memset(parts, 0xee, n * sizeof *parts);
        /* Back to front, so no piece can lean on state left by the previous one. */
        size_t bounds[200], nb = 0, at = 0;
        while (at < n) {
            bounds[nb++] = at;
            size_t p = pieces[nb % (sizeof pieces / sizeof pieces[0])];
            at = at + p < n ? at + p : n;
        }
        for (size_t b = nb; b-- > 0;) {
            size_t end = b + 1 < nb ? bounds[b + 1] : n;
            qs_gen_fill(&s, bounds[b], end - bounds[b], parts + bounds[b]);
        }
        assert_memory_equal(whole, parts, n * sizeof *whole);
        /* And a window far into the counter space agrees with its own sub-windows. */
        uint64_t far = (uint64_t)1 << 40;
        qs_gen_fill(&s, far, 1000, whole);
        qs_gen_fill(&s, far + 400, 600, parts + 400);
        qs_gen_fill(&s, far, 400, parts);
        assert_memory_equal(whole, parts, 1000 * sizeof *whole);
        free(whole);
        free(parts);
    }
}

#define NBIG 2000000

static void test_gaussian_moments(void **state)
{
    qs_gen_spec s = spec(QS_GEN_GAUSSIAN, 1, NBIG, 0);
    s.scale = 2.5;
    float *x = gen_all(&s, NBIG);
    moments m = moments_of(x, NBIG);
    assert_near(m.mean, 0.0, 0.01);
    assert_near(m.std, 2.5, 0.01);
    assert_near(m.kurt, 3.0, 0.05);
    assert_near(frac_abs_below(x, NBIG, 2.5), 0.682689, 0.002);
    free(x);
}

static void test_laplace_moments(void **state)
{
    qs_gen_spec s = spec(QS_GEN_LAPLACE, 2, NBIG, 0);
    s.scale = 1.5;
    float *x = gen_all(&s, NBIG);
    moments m = moments_of(x, NBIG);
    assert_near(m.mean, 0.0, 0.01);
    assert_near(m.std, 1.5, 0.01);
    assert_near(m.kurt, 6.0, 0.3);
    assert_near(median_abs(x, NBIG), 1.5 / sqrt(2.0) * log(2.0), 0.005);   /* b ln 2 */
    free(x);
}

static void test_uniform_moments(void **state)
{
    qs_gen_spec s = spec(QS_GEN_UNIFORM, 3, NBIG, 0);
    s.scale = 3.0;
    float *x = gen_all(&s, NBIG);
    float lo = x[0], hi = x[0];
    for (size_t i = 0; i < NBIG; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    assert_true(lo >= -3.0f && hi <= 3.0f);
    assert_true(lo < -2.999f && hi > 2.999f);
    moments m = moments_of(x, NBIG);
    assert_near(m.mean, 0.0, 0.01);
    assert_near(m.std, 3.0 / sqrt(3.0), 0.005);
    assert_near(m.kurt, 1.8, 0.01);
    free(x);
}

static void test_student_t(void **state)
{
    /* P(|t| < 1) by numerical integration of the t density, for the exact chi-square path
    ** (integer nu <= 40) and for the Marsaglia-Tsang path (non-integer, nu > 40, nu < 2). */
    static const struct { double nu, p1; } cases[] = {
        {5, 0.636783}, {5.5, 0.640747}, {1.5, 0.548865}, {42, 0.676963},
        {1, 0.5}, {1.0000001, 0.5}, {0.7, 0.449613},
    };
    float *x = malloc(NBIG * sizeof *x);
    assert_non_null(x);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        qs_gen_spec s = spec(QS_GEN_STUDENT_T, 4 + c, NBIG, 0);
        s.nu = cases[c].nu;
        qs_gen_fill(&s, 0, NBIG, x);
        double p = frac_abs_below(x, NBIG, 1.0);
        if (fabs(p - cases[c].p1) > 0.0015)
            fail_msg("nu %g: P(|t|<1) = %.5f, want %.5f", cases[c].nu, p, cases[c].p1);
        if (cases[c].nu == 5) {
            moments m = moments_of(x, NBIG);
            assert_near(m.mean, 0.0, 0.01);
            assert_near(m.std, sqrt(5.0 / 3.0), 0.03);
            /* Kurtosis 9, but its estimator has infinite variance for nu = 5: loose band. */
            assert_true(m.kurt > 6.5 && m.kurt < 14.0);
        }
        if (cases[c].nu == 42) assert_near(moments_of(x, NBIG).std, sqrt(42.0 / 40.0), 0.005);
    }
    /* scale multiplies. */
    qs_gen_spec s = spec(QS_GEN_STUDENT_T, 11, 1000, 0);
    float y[1000];
    qs_gen_fill(&s, 0, 1000, x);
    s.scale = 4.0;
    qs_gen_fill(&s, 0, 1000, y);
    for (int i = 0; i < 1000; i++) assert_true(fabsf(y[i] - 4.0f * x[i]) <= 1e-6f * fabsf(y[i]));
    free(x);
}

static void test_lognormal(void **state)
{
    qs_gen_spec s = spec(QS_GEN_LOGNORMAL, 5, NBIG, 0);
    s.scale = 2.0;
    s.sigma = 0.5;
    float *x = gen_all(&s, NBIG);
    assert_near(median_abs(x, NBIG), 2.0, 0.01);
    size_t neg = 0;
    for (size_t i = 0; i < NBIG; i++) {
        neg += x[i] < 0;
        x[i] = (float)log(fabs(x[i]) / 2.0);
    }
    assert_near((double)neg / NBIG, 0.5, 0.002);
    moments m = moments_of(x, NBIG);   /* log|x/scale| ~ N(0, sigma^2) */
    assert_near(m.mean, 0.0, 0.005);
    assert_near(m.std, 0.5, 0.003);

    s.lognormal_signed = 0;
    qs_gen_fill(&s, 0, NBIG, x);
    for (size_t i = 0; i < NBIG; i++)
        if (!(x[i] > 0)) fail_msg("unsigned lognormal x[%zu] = %g", i, x[i]);
    assert_near(median_abs(x, NBIG), 2.0, 0.01);
    free(x);
}

/* Column absmax over rows [1, R) (row 0 is the BOS token); returns the median. */
static double column_absmax(const float *x, uint64_t R, uint64_t C, double *am)
{
    for (uint64_t c = 0; c < C; c++) am[c] = 0;
    for (uint64_t r = 1; r < R; r++)
        for (uint64_t c = 0; c < C; c++)
            if (fabs(x[r * C + c]) > am[c]) am[c] = fabs(x[r * C + c]);
    double *sorted = malloc(C * sizeof *sorted);
    assert_non_null(sorted);
    memcpy(sorted, am, C * sizeof *sorted);
    qsort(sorted, C, sizeof *sorted, cmp_double);
    double med = sorted[C / 2];
    free(sorted);
    return med;
}

static void test_llm_act_outliers(void **state)
{
    static const struct { uint64_t R, C; int n_out; double omin, omax; int want; } cases[] = {
        {2048, 1024, 0, 20, 100, 4},    /* defaults: max(1, C/256) outliers, x20..100 */
        {1024, 1000, 10, 50, 50, 10},   /* explicit count, fixed factor, C not a block multiple */
        {512, 300, 0, 20, 100, 1},      /* C < 256: still one outlier channel */
        {512, 300, -1, 20, 100, 0},     /* negative: none */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint64_t R = cases[k].R, C = cases[k].C;
        qs_gen_spec s = spec(QS_GEN_LLM_ACT, 100 + k, R, C);
        s.outlier_channels = cases[k].n_out;
        s.outlier_min = cases[k].omin;
        s.outlier_max = cases[k].omax;
        float *x = gen_all(&s, R * C);
        double *am = malloc(C * sizeof *am);
        assert_non_null(am);
        double med = column_absmax(x, R, C, am);
        /* Ordinary channels: base std scale*exp(0.3 Z) spreads the absmax ratio to within a few x;
        ** outlier channels are lifted by the factor, so omin/4 separates them cleanly. */
        int n_out = 0;
        for (uint64_t c = 0; c < C; c++) {
            double ratio = am[c] / med;
            if (ratio < cases[k].omin / 4) continue;
            n_out++;
            if (ratio > cases[k].omax * 4)
                fail_msg("case %zu: column %llu absmax ratio %.1f above %g", k,
                         (unsigned long long)c, ratio, cases[k].omax * 4);
        }
        if (n_out != cases[k].want)
            fail_msg("case %zu: %d outlier columns, want %d", k, n_out, cases[k].want);
        /* Median column absmax of ~R normals of std ~scale: about 3.5. */
        assert_true(med > 2.5 && med < 5.0);
        free(am);
        free(x);
    }
}

/* Row 0 (BOS) holds 1 or 2 massive activations; a 1-D llm-act is one ordinary token: the same
** values as row 0 of a matrix with as many columns, minus the massive ones. */
static void test_llm_act_bos(void **state)
{
    const uint64_t R = 512, C = 1024;
    for (uint64_t seed = 0; seed < 8; seed++) {
        qs_gen_spec m = spec(QS_GEN_LLM_ACT, seed, R, C), v = spec(QS_GEN_LLM_ACT, seed, C, 0);
        float *x = gen_all(&m, R * C), *row = gen_all(&v, C);
        double *am = malloc(C * sizeof *am);
        assert_non_null(am);
        column_absmax(x, R, C, am);
        int massive = 0;
        for (uint64_t c = 0; c < C; c++) {
            if (fabs(x[c]) > 30 * am[c]) {   /* 200..500 std of its channel */
                massive++;
                assert_true(fabs(row[c]) < 2 * am[c]);   /* an ordinary value in the 1-D token */
            } else {
                assert_memory_equal(&x[c], &row[c], sizeof *x);
            }
        }
        if (massive < 1 || massive > 2) fail_msg("seed %llu: %d massive activations in row 0",
                                                 (unsigned long long)seed, massive);
        free(am);
        free(x);
        free(row);
    }
}

static void test_names(void **state)
{
    static const char *const want[QS_GEN_COUNT] = {
        "gaussian", "laplace", "student-t", "uniform", "lognormal", "llm-act",
    };
    for (int k = 0; k < QS_GEN_COUNT; k++) {
        qs_gen_kind got = QS_GEN_COUNT;
        assert_string_equal(qs_gen_name((qs_gen_kind)k), want[k]);
        assert_int_equal(qs_gen_from_name(want[k], &got), 0);
        assert_int_equal(got, k);
        const char *d = qs_gen_describe((qs_gen_kind)k);
        assert_non_null(d);
        assert_true(strlen(d) > 10 && strlen(d) < 90 && !strchr(d, '\n'));
    }
    static const struct { const char *name; qs_gen_kind k; } alias[] = {
        {"normal", QS_GEN_GAUSSIAN}, {"student_t", QS_GEN_STUDENT_T}, {"t", QS_GEN_STUDENT_T},
    };
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++) {
        qs_gen_kind got = QS_GEN_COUNT;
        assert_int_equal(qs_gen_from_name(alias[i].name, &got), 0);
        assert_int_equal(got, alias[i].k);
    }
    qs_gen_kind got = QS_GEN_UNIFORM;
    assert_int_equal(qs_gen_from_name("gauss", &got), -1);
    assert_int_equal(qs_gen_from_name("", &got), -1);
    assert_int_equal(qs_gen_from_name("Gaussian", &got), -1);
    assert_int_equal(got, QS_GEN_UNIFORM);   /* untouched on failure */
    assert_non_null(qs_gen_name(QS_GEN_COUNT));
    assert_non_null(qs_gen_describe(QS_GEN_COUNT));
}

static void assert_bits(const float *x, const uint32_t *want, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        uint32_t got;
        memcpy(&got, &x[i], 4);
        if (got != want[i])
            fail_msg("%s[%d] = %.9g (0x%08x), golden 0x%08x: the generator changed", what, i,
                     x[i], got, want[i]);
    }
}

/* Golden bits, pasted from this implementation.  If a change of the generator is intended,
** update them and say so in the commit: every tensor generated before changes too. */
static void test_golden(void **state)
{
    float x[4];
    qs_gen_spec g = spec(QS_GEN_GAUSSIAN, 42, 4, 0);
    qs_gen_fill(&g, 0, 4, x);
    static const uint32_t gauss42[4] = {
        0xbe6cf925u /* -0.231419161 */, 0x3dbd0f39u /* 0.0923141912 */,
        0xc004e329u /* -2.07636476 */, 0x3ed3b9d9u /* 0.41352728 */,
    };
    assert_bits(x, gauss42, 4, "gaussian seed 42");

    qs_gen_spec t = spec(QS_GEN_STUDENT_T, 42, 4, 0);
    t.nu = 4.5;
    qs_gen_fill(&t, 0, 4, x);
    static const uint32_t t42[4] = {
        0xbe70894bu /* -0.234898731 */, 0x3d96a892u /* 0.0735637099 */,
        0xc01bdaa9u /* -2.43522096 */, 0x3f0226e3u /* 0.508405864 */,
    };
    assert_bits(x, t42, 4, "student-t(4.5) seed 42");

    qs_gen_spec l = spec(QS_GEN_LLM_ACT, 42, 16, 64);
    qs_gen_fill(&l, 64, 4, x);   /* row 1: ordinary token */
    static const uint32_t llm42[4] = {
        0x3fb55a75u /* 1.41682303 */, 0x3f1fc93du /* 0.624164402 */,
        0x3e420a15u /* 0.189491585 */, 0xbf256de5u /* -0.646208107 */,
    };
    assert_bits(x, llm42, 4, "llm-act seed 42 row 1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_chunk_independence),
        cmocka_unit_test(test_gaussian_moments),
        cmocka_unit_test(test_laplace_moments),
        cmocka_unit_test(test_uniform_moments),
        cmocka_unit_test(test_student_t),
        cmocka_unit_test(test_lognormal),
        cmocka_unit_test(test_llm_act_outliers),
        cmocka_unit_test(test_llm_act_bos),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_golden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
