/*
** Unit tests for analysis/tensor_stats.c: every statistic against a plain double-precision
** two-pass reference (sort-based for the percentiles, which must match bit for bit), the
** degenerate inputs (empty, all-NaN, single, constant, +-0, +-Inf), the matrix view, outlier
** counting, determinism across thread counts (memcmp of the whole result), serialised reads,
** and read errors in either pass.
*/
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <time.h>

#include "../../analysis/tensor_stats.h"
#include "../../kernels/pool.h"

/* STATS_CHUNK of tensor_stats.c: sizes below are chosen around its multiples. */
#define CHUNK ((uint64_t)1 << 20)

/* ---- deterministic random data ------------------------------------------------------------ */

static uint64_t sm_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double unif(uint64_t *s)   /* [0, 1) */
{
    return (double)(sm_next(s) >> 11) * 0x1.0p-53;
}

static double gauss(uint64_t *s)  /* Box-Muller */
{
    double u1 = unif(s), u2 = unif(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static float *gauss_data(uint64_t n, uint64_t seed, double mean, double sd)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (uint64_t i = 0; i < n; i++) x[i] = (float)(mean + sd * gauss(&seed));
    return x;
}

/* ---- readers -------------------------------------------------------------------------------- */

typedef struct arr_reader {
    const float *x;
    uint64_t n;
    uint64_t fail_at;        /* fail any read covering this element (UINT64_MAX: never) */
    long fail_after;         /* fail every call after this many (-1: never) */
    int silent;              /* fail without a message */
    int slow;                /* sleep inside the read, to expose overlapping calls */
    atomic_int inflight, max_inflight;
    atomic_long calls;
} arr_reader;

static void reader_init(arr_reader *r, const float *x, uint64_t n)
{
    memset(r, 0, sizeof *r);
    r->x = x;
    r->n = n;
    r->fail_at = UINT64_MAX;
    r->fail_after = -1;
    atomic_init(&r->inflight, 0);
    atomic_init(&r->max_inflight, 0);
    atomic_init(&r->calls, 0);
}

static int arr_read(void *ctx, uint64_t start, size_t n, float *out, qs_err *e)
{
    arr_reader *r = ctx;
    int k = atomic_fetch_add(&r->inflight, 1) + 1;
    int m = atomic_load(&r->max_inflight);
    while (k > m && !atomic_compare_exchange_weak(&r->max_inflight, &m, k)) {
    }
    long call = atomic_fetch_add(&r->calls, 1);
    int rc = 0;
    if (start > r->n || n > r->n - start)
        rc = qs_fail(e, "read past the end");
    else if ((r->fail_at >= start && r->fail_at - start < n) ||
             (r->fail_after >= 0 && call >= r->fail_after))
        rc = r->silent ? -1 : qs_fail(e, "injected read failure at element %llu",
                                      (unsigned long long)start);
    else {
        memcpy(out, r->x + start, n * sizeof *out);
        if (r->slow) {
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
    }
    atomic_fetch_sub(&r->inflight, 1);
    return rc;
}

/* Element i is a function of i only: tensors of any size without memory. */
static int gen_read(void *ctx, uint64_t start, size_t n, float *out, qs_err *e)
{
    for (size_t k = 0; k < n; k++) out[k] = (float)((start + k) * 2654435761u % 1000u) - 500.0f;
    return 0;
}

/* Compute with nthreads = 1, 2, 3: the three results must be byte-identical. */
static void stats_all_threads(const float *x, uint64_t n, uint64_t rows, uint64_t cols,
                              qs_tensor_stats *out)
{
    qs_tensor_stats s[3];
    for (int t = 0; t < 3; t++) {
        arr_reader r;
        qs_err e = {{0}};
        reader_init(&r, x, n);
        memset(&s[t], 0xa5, sizeof s[t]);   /* padding must not leak into the comparison */
        int rc = qs_tensor_stats_compute(arr_read, &r, 1, n, rows, cols, t + 1, &s[t], &e);
        if (rc != 0) fprintf(stderr, "error: %s\n", e.msg);
        assert_int_equal(rc, 0);
    }
    assert_memory_equal(&s[0], &s[1], sizeof s[0]);
    assert_memory_equal(&s[0], &s[2], sizeof s[0]);
    *out = s[0];
}

/* ---- reference -------------------------------------------------------------------------------- */

typedef struct ref {
    uint64_t nf, nnan, ninf, nzero, nout;
    double min, max, absmax, mean, std, kurt;
    double pct[QS_NPCT];
} ref;

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* numpy's 'linear' percentile over sorted v[0..n) (same _lerp as numpy). */
static double np_percentile(const float *v, uint64_t n, double p)
{
    double pos = (double)(n - 1) * (p / 100.0);
    double fl = floor(pos), t = pos - fl;
    uint64_t lo = (uint64_t)fl, hi = lo + 1 < n ? lo + 1 : n - 1;
    double a = v[lo], b = v[hi], d = b - a;
    return t >= 0.5 ? b - d * (1.0 - t) : a + d * t;
}

static void ref_stats(const float *x, uint64_t n, ref *r)
{
    memset(r, 0, sizeof *r);
    float *f = malloc((n ? n : 1) * sizeof *f);
    assert_non_null(f);
    double sum = 0;
    r->min = INFINITY;
    r->max = -INFINITY;
    for (uint64_t i = 0; i < n; i++) {
        float v = x[i];
        if (isnan(v)) { r->nnan++; continue; }
        if (isinf(v)) { r->ninf++; continue; }
        if (v == 0) { r->nzero++; v = 0.0f; }   /* -0 sorts and reports as +0 */
        f[r->nf++] = v;
        sum += v;
        r->min = fmin(r->min, v);
        r->max = fmax(r->max, v);
        r->absmax = fmax(r->absmax, fabs(v));
    }
    if (r->nf == 0) {
        free(f);
        return;
    }
    r->mean = sum / (double)r->nf;
    double m2 = 0, m4 = 0;
    for (uint64_t i = 0; i < r->nf; i++) {
        double d = f[i] - r->mean;
        m2 += d * d;
        m4 += d * d * d * d;
    }
    r->std = sqrt(m2 / (double)r->nf);
    r->kurt = m2 > 0 ? (double)r->nf * m4 / (m2 * m2) : 0;
    for (uint64_t i = 0; i < r->nf; i++)
        if (r->std > 0 && fabs(f[i] - r->mean) > 6 * r->std) r->nout++;
    qsort(f, r->nf, sizeof *f, cmp_float);
    for (int k = 0; k < QS_NPCT; k++) r->pct[k] = np_percentile(f, r->nf, qs_stat_pcts[k]);
    free(f);
}

static void assert_close(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol)) {
        fprintf(stderr, "got %.17g want %.17g (tol %.3g)\n", got, want, tol);
        fail();
    }
}

/* Everything but the matrix view, against the reference. */
static void check_against_ref(const float *x, uint64_t n, const qs_tensor_stats *s)
{
    ref r;
    ref_stats(x, n, &r);
    assert_int_equal(s->n, n);
    assert_int_equal(s->n_finite, r.nf);
    assert_int_equal(s->n_nan, r.nnan);
    assert_int_equal(s->n_inf, r.ninf);
    assert_int_equal(s->n_zero, r.nzero);
    if (r.nf == 0) {
        assert_true(isnan(s->min) && isnan(s->max) && isnan(s->mean));
        for (int k = 0; k < QS_NPCT; k++) assert_true(isnan(s->pct[k]));
        return;
    }
    assert_true(s->min == r.min);
    assert_true(s->max == r.max);
    assert_true(s->absmax == r.absmax);
    double scale = r.std + fabs(r.mean);
    assert_close(s->mean, r.mean, 1e-12 * scale);
    assert_close(s->std, r.std, 1e-10 * r.std);
    assert_close(s->kurtosis, r.kurt, 1e-9 * r.kurt);
    assert_true(s->zero_frac == (double)r.nzero / (double)r.nf);
    assert_true(s->outlier_frac == (double)r.nout / (double)r.nf);
    for (int k = 0; k < QS_NPCT; k++) {
        if (memcmp(&s->pct[k], &r.pct[k], sizeof(double)) != 0) {
            fprintf(stderr, "pct %g: got %.17g want %.17g (n=%llu)\n", qs_stat_pcts[k], s->pct[k],
                    r.pct[k], (unsigned long long)n);
            fail();
        }
    }
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_pct_table(void **state)
{
    const double want[QS_NPCT] = {0.1, 1, 5, 25, 50, 75, 95, 99, 99.9};
    assert_memory_equal(qs_stat_pcts, want, sizeof want);
}

static void test_random_sizes(void **state)
{
    const uint64_t sizes[] = {1, 2, 3, 7, 8, 9, 17, 1000, 4099, CHUNK - 1, CHUNK, CHUNK + 1,
                              2 * CHUNK + 12345};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint64_t n = sizes[i];
        float *x = gauss_data(n, 1000 + i, 3.0, 2.0);
        qs_tensor_stats s;
        stats_all_threads(x, n, 0, 0, &s);
        check_against_ref(x, n, &s);
        assert_int_equal(s.rows, 0);
        assert_int_equal(s.ntop, 0);
        free(x);
    }
    /* Skewed data over several chunks: M3 enters the merged M4, so an error there shows. */
    uint64_t n = 4 * CHUNK + 3, seed = 77;
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (uint64_t i = 0; i < n; i++) x[i] = (float)exp(1.5 * gauss(&seed) + (double)(i / CHUNK));
    qs_tensor_stats s;
    stats_all_threads(x, n, 0, 0, &s);
    check_against_ref(x, n, &s);
    free(x);
}

/* Heavy ties, many binades, and one top-16 bucket holding everything. */
static void test_percentiles_exact(void **state)
{
    uint64_t n = CHUNK + 777, seed = 7;
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    qs_tensor_stats s;

    for (uint64_t i = 0; i < n; i++) x[i] = (float)(sm_next(&seed) % 10) - 4.0f;
    stats_all_threads(x, n, 0, 0, &s);
    check_against_ref(x, n, &s);

    for (uint64_t i = 0; i < n; i++) {
        double m = exp(unif(&seed) * 160.0 - 80.0);
        x[i] = (float)(sm_next(&seed) & 1 ? m : -m);
    }
    stats_all_threads(x, n, 0, 0, &s);
    check_against_ref(x, n, &s);

    for (uint64_t i = 0; i < n; i++) x[i] = 1.0f + (float)(sm_next(&seed) % 5000) * 0x1p-23f;
    stats_all_threads(x, n, 0, 0, &s);
    check_against_ref(x, n, &s);

    /* Small n: every percentile position lands on or between specific elements. */
    for (uint64_t m = 1; m <= 40; m++) {
        for (uint64_t i = 0; i < m; i++) x[i] = (float)gauss(&seed);
        stats_all_threads(x, m, 0, 0, &s);
        check_against_ref(x, m, &s);
    }
    free(x);
}

static void test_nonfinite_and_zeros(void **state)
{
    const float x[] = {NAN, -0.0f, INFINITY, 1.0f, -INFINITY, 0.0f, -2.0f, -NAN, 3.0f, -0.0f};
    uint64_t n = sizeof x / sizeof *x;
    qs_tensor_stats s;
    stats_all_threads(x, n, 0, 0, &s);
    check_against_ref(x, n, &s);
    assert_int_equal(s.n_nan, 2);
    assert_int_equal(s.n_inf, 2);
    assert_int_equal(s.n_zero, 3);
    assert_int_equal(s.n_finite, 6);
    assert_true(s.min == -2.0 && s.max == 3.0 && s.absmax == 3.0);
    assert_close(s.mean, 1.0 / 3.0, 1e-15);
    assert_true(s.zero_frac == 0.5);
    /* sorted finite: -2 0 0 0 1 3; median sits between two zeros, which compare equal */
    assert_true(s.pct[4] == 0.0 && !signbit(s.pct[4]));

    /* Only -0 and +0: one value. */
    const float z[] = {-0.0f, 0.0f, -0.0f, 0.0f};
    stats_all_threads(z, 4, 0, 0, &s);
    assert_true(s.std == 0 && s.kurtosis == 0 && s.zero_frac == 1.0);
    for (int k = 0; k < QS_NPCT; k++) assert_true(s.pct[k] == 0.0 && !signbit(s.pct[k]));

    /* Large, with NaN/Inf sprinkled over several chunks. */
    uint64_t m = 2 * CHUNK + 99, seed = 11;
    float *y = gauss_data(m, 5, -1.0, 0.5);
    for (int k = 0; k < 3000; k++) {
        uint64_t i = sm_next(&seed) % m;
        y[i] = k % 3 == 0 ? NAN : k % 3 == 1 ? INFINITY : -INFINITY;
    }
    for (int k = 0; k < 500; k++) y[sm_next(&seed) % m] = k & 1 ? -0.0f : 0.0f;
    y[CHUNK - 1] = NAN;
    y[CHUNK] = INFINITY;
    stats_all_threads(y, m, 0, 0, &s);
    check_against_ref(y, m, &s);
    free(y);
}

static void test_constant(void **state)
{
    uint64_t n = 2 * CHUNK + 3;
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    const float vals[] = {0.7f, -3.25e-5f, 0.0f, 1e30f};
    for (size_t v = 0; v < sizeof vals / sizeof *vals; v++) {
        for (uint64_t i = 0; i < n; i++) x[i] = vals[v];
        qs_tensor_stats s;
        stats_all_threads(x, n, 0, 0, &s);
        assert_int_equal(s.n_finite, n);
        assert_true(s.mean == (double)vals[v]);
        assert_true(s.min == (double)vals[v] && s.max == (double)vals[v]);
        assert_true(s.std == 0 && s.kurtosis == 0 && s.outlier_frac == 0);
        assert_true(s.zero_frac == (vals[v] == 0 ? 1.0 : 0.0));
        for (int k = 0; k < QS_NPCT; k++) assert_true(s.pct[k] == (double)vals[v]);
    }
    free(x);
}

static void test_empty_allnan_single(void **state)
{
    qs_tensor_stats s;
    qs_err e = {{0}};

    /* Empty: no reads at all. */
    arr_reader r;
    reader_init(&r, NULL, 0);
    assert_int_equal(qs_tensor_stats_compute(arr_read, &r, 1, 0, 0, 0, 4, &s, &e), 0);
    assert_int_equal(atomic_load(&r.calls), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(s.n_finite, 0);
    assert_true(isnan(s.min) && isnan(s.max) && isnan(s.mean) && isnan(s.absmax));
    assert_true(s.std == 0 && s.kurtosis == 0 && s.zero_frac == 0 && s.outlier_frac == 0);
    for (int k = 0; k < QS_NPCT; k++) assert_true(isnan(s.pct[k]));

    float nan100[100];
    for (int i = 0; i < 100; i++) nan100[i] = i % 7 ? NAN : INFINITY;
    stats_all_threads(nan100, 100, 10, 10, &s);
    check_against_ref(nan100, 100, &s);
    assert_int_equal(s.n_finite, 0);
    assert_true(s.std == 0 && s.kurtosis == 0);
    assert_int_equal(s.rows, 10);
    assert_true(s.row_absmax.max == 0 && s.col_absmax.max == 0);

    const float one = 5.0f;
    stats_all_threads(&one, 1, 0, 0, &s);
    assert_true(s.min == 5 && s.max == 5 && s.mean == 5 && s.std == 0 && s.kurtosis == 0);
    for (int k = 0; k < QS_NPCT; k++) assert_true(s.pct[k] == 5.0);

    const float two[] = {1.0f, 3.0f};
    stats_all_threads(two, 2, 0, 0, &s);
    assert_true(s.mean == 2 && s.std == 1 && s.kurtosis == 1);
    assert_true(s.pct[4] == 2.0);
    check_against_ref(two, 2, &s);
}

static void test_outliers(void **state)
{
    uint64_t n = CHUNK + CHUNK / 2;
    float *x = gauss_data(n, 99, 10.0, 1.0);
    const uint64_t at[] = {5, 77777, CHUNK - 1, CHUNK + 3, n - 1};
    for (int k = 0; k < 5; k++) x[at[k]] = k & 1 ? -90.0f : 110.0f;   /* ~100 sigma */
    qs_tensor_stats s;
    stats_all_threads(x, n, 0, 0, &s);
    check_against_ref(x, n, &s);
    assert_true(s.outlier_frac * (double)n >= 5.0 - 1e-9);
    assert_true(s.outlier_frac * (double)n <= 10.0);   /* a 6-sigma Gaussian draw is rare */
    free(x);
}

/* ---- matrix view -------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void ref_axis(const double *v, uint64_t n, qs_axis_summary *s)
{
    memset(s, 0, sizeof *s);
    if (n == 0) return;
    double *c = malloc(n * sizeof *c), sum = 0;
    assert_non_null(c);
    s->min = INFINITY;
    s->max = -1;
    for (uint64_t i = 0; i < n; i++) {
        if (v[i] > s->max) { s->max = v[i]; s->argmax = i; }
        s->min = fmin(s->min, v[i]);
        sum += v[i];
        c[i] = v[i];
    }
    s->mean = sum / (double)n;
    qsort(c, n, sizeof *c, cmp_double);
    s->median = (c[(n - 1) / 2] + c[n / 2]) * 0.5;
    free(c);
}

static void check_matrix(const float *x, uint64_t rows, uint64_t cols, const qs_tensor_stats *s)
{
    double *rv = calloc(rows ? rows : 1, sizeof *rv), *cv = calloc(cols ? cols : 1, sizeof *cv);
    assert_true(rv && cv);
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) {
            double a = fabs(x[r * cols + c]);
            if (!isfinite(a)) continue;
            rv[r] = fmax(rv[r], a);
            cv[c] = fmax(cv[c], a);
        }
    qs_axis_summary ra, ca;
    ref_axis(rv, rows, &ra);
    ref_axis(cv, cols, &ca);
    assert_int_equal(s->rows, rows);
    assert_int_equal(s->cols, cols);
    assert_memory_equal(&s->row_absmax, &ra, sizeof ra);
    assert_memory_equal(&s->col_absmax, &ca, sizeof ca);
    /* top columns: selection by repeated scan (strictly greater wins, so ties keep index order) */
    int want = cols < QS_TOPK ? (int)cols : QS_TOPK;
    assert_int_equal(s->ntop, want);
    unsigned char *taken = calloc(cols ? cols : 1, 1);
    assert_non_null(taken);
    for (int k = 0; k < want; k++) {
        uint64_t best = UINT64_MAX;
        for (uint64_t c = 0; c < cols; c++)
            if (!taken[c] && (best == UINT64_MAX || cv[c] > cv[best])) best = c;
        taken[best] = 1;
        assert_int_equal(s->top_cols[k], best);
        assert_true(s->top_cols_absmax[k] == cv[best]);
    }
    free(taken);
    free(rv);
    free(cv);
}

static float *unif_data(uint64_t n, uint64_t seed)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (uint64_t i = 0; i < n; i++) x[i] = (float)(unif(&seed) * 2.0 - 1.0);
    return x;
}

static void test_matrix_view(void **state)
{
    uint64_t rows = 1500, cols = 1000, n = rows * cols;   /* row 1048 straddles chunks 0 and 1 */
    float *x = unif_data(n, 3);
    x[1234 * cols + 567] = -50.0f;
    x[10 * cols + 999] = 40.0f;
    x[1048 * cols + 576] = 45.0f;
    x[1049 * cols + 0] = -45.0f;     /* row 1049's absmax ties row 1048's: argmax stays 1234 */
    x[7 * cols + 100] = 30.0f;       /* tie between columns 100 and 50: 50 must come first */
    x[1400 * cols + 50] = -30.0f;
    x[5 * cols + 5] = INFINITY;      /* not finite: ignored by the absmax vectors */
    x[6 * cols + 6] = NAN;
    qs_tensor_stats s;
    stats_all_threads(x, n, rows, cols, &s);
    check_against_ref(x, n, &s);
    check_matrix(x, rows, cols, &s);
    assert_int_equal(s.row_absmax.argmax, 1234);
    assert_true(s.row_absmax.max == 50.0);
    assert_int_equal(s.col_absmax.argmax, 567);
    const uint64_t top[6] = {567, 0, 576, 999, 50, 100};   /* ties: lower index first */
    for (int k = 0; k < 6; k++) assert_int_equal(s.top_cols[k], top[k]);
    free(x);

    /* Ties at the maximum: argmax is the first row/column that reaches it. */
    const float t[3 * 4] = {1, -7, 2, 0,
                            7, 3, NAN, -1,
                            0, 2, -7, 7};
    stats_all_threads(t, 12, 3, 4, &s);
    check_matrix(t, 3, 4, &s);
    assert_int_equal(s.row_absmax.argmax, 0);
    assert_int_equal(s.col_absmax.argmax, 0);
    assert_true(s.row_absmax.median == 7 && s.col_absmax.median == 7);
    assert_true(s.col_absmax.min == 7 && s.row_absmax.mean == 7);
    const uint64_t tt[4] = {0, 1, 2, 3};
    for (int k = 0; k < 4; k++) assert_int_equal(s.top_cols[k], tt[k]);
}

/* Shapes that take the other code paths: columns wider than a chunk (shared column maxima),
** one column (every row whole), few columns, and fewer columns than QS_TOPK. */
static void test_matrix_shapes(void **state)
{
    const uint64_t shapes[][2] = {{2, CHUNK + CHUNK / 2}, {3, CHUNK}, {300001, 1}, {400000, 3},
                                  {1, 5}, {7, 9}, {CHUNK + 5, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        uint64_t rows = shapes[i][0], cols = shapes[i][1], n = rows * cols;
        float *x = unif_data(n, 40 + i);
        x[n / 3] = 9.0f;
        qs_tensor_stats s;
        stats_all_threads(x, n, rows, cols, &s);
        check_against_ref(x, n, &s);
        check_matrix(x, rows, cols, &s);
        free(x);
    }
}

static void test_matrix_limits(void **state)
{
    qs_tensor_stats s;
    qs_err e = {{0}};
    /* rows + cols > 64M: the view is skipped without an error. */
    uint64_t big = ((uint64_t)64 << 20) + 1;
    assert_int_equal(qs_tensor_stats_compute(gen_read, NULL, 1, 0, big, 0, 2, &s, &e), 0);
    assert_int_equal(s.rows, 0);
    assert_int_equal(s.cols, 0);
    assert_int_equal(s.ntop, 0);
    /* A shape that does not match numel is an error. */
    assert_int_equal(qs_tensor_stats_compute(gen_read, NULL, 1, 100, 3, 33, 2, &s, &e), -1);
    assert_non_null(strstr(e.msg, "3x33"));
    e.msg[0] = 0;
    assert_int_equal(qs_tensor_stats_compute(gen_read, NULL, 1, 6, UINT64_MAX / 2, 4, 2, &s, &e), -1);
    assert_true(e.msg[0] != 0);
    /* Generated input, several chunks, many threads. */
    uint64_t n = 3 * CHUNK + 1;
    assert_int_equal(qs_tensor_stats_compute(gen_read, NULL, 1, n, n, 1, 8, &s, &e), 0);
    assert_int_equal(s.n_finite, n);
    assert_true(s.min == -500 && s.max == 499 && s.absmax == 500);
    assert_true(s.row_absmax.max == 500 && s.col_absmax.max == 500);
}

/* ---- threads and reads ---------------------------------------------------------------------- */

static void test_serialised_reads(void **state)
{
    uint64_t n = 6 * CHUNK + 5;
    float *x = gauss_data(n, 17, 0.0, 1.0);
    qs_tensor_stats a, b;
    qs_err e = {{0}};
    arr_reader r;

    reader_init(&r, x, n);
    assert_int_equal(qs_tensor_stats_compute(arr_read, &r, 1, n, 0, 0, 1, &a, &e), 0);
    assert_int_equal(atomic_load(&r.max_inflight), 1);
    assert_int_equal(atomic_load(&r.calls), 14);   /* 7 chunks, two passes */

    reader_init(&r, x, n);
    r.slow = 1;
    assert_int_equal(qs_tensor_stats_compute(arr_read, &r, 0, n, 0, 0, 3, &b, &e), 0);
    assert_int_equal(atomic_load(&r.max_inflight), 1);
    assert_memory_equal(&a, &b, sizeof a);
    free(x);
}

/* Statistics asked for 2 threads from inside a pool task run inline on one thread: the chunks (more
** than the merge window of 8) must still be merged in order, with the same bits as one thread. */
typedef struct { const float *x; uint64_t n; qs_tensor_stats s[2]; int rc[2]; } nest_job;

static void nest_task(void *ctx, size_t t, int slot)
{
    (void)slot;
    nest_job *j = ctx;
    arr_reader r;
    reader_init(&r, j->x, j->n);
    qs_err e = {{0}};
    j->rc[t] = qs_tensor_stats_compute(arr_read, &r, 1, j->n, 0, 0, 2, &j->s[t], &e);
}

static void test_nested_in_pool(void **state)
{
    uint64_t n = 11 * CHUNK + 5;
    float *x = gauss_data(n, 29, 0.5, 2.0);
    qs_tensor_stats a;
    qs_err e = {{0}};
    arr_reader r;
    reader_init(&r, x, n);
    assert_int_equal(qs_tensor_stats_compute(arr_read, &r, 1, n, 0, 0, 1, &a, &e), 0);
    nest_job j = {x, n, {{0}}, {-1, -1}};
    qs_pool_for(2, 2, nest_task, &j);
    for (int t = 0; t < 2; t++) {
        assert_int_equal(j.rc[t], 0);
        assert_memory_equal(&a, &j.s[t], sizeof a);
    }
    free(x);
}

static void test_read_failure(void **state)
{
    uint64_t n = 3 * CHUNK + 10;
    float *x = gauss_data(n, 23, 0.0, 1.0);
    for (int t = 1; t <= 3; t++) {
        qs_tensor_stats s;
        qs_err e = {{0}};
        arr_reader r;

        /* Pass 1: the read of chunk 2 fails. */
        reader_init(&r, x, n);
        r.fail_at = 2 * CHUNK + 10;
        assert_int_equal(qs_tensor_stats_compute(arr_read, &r, 1, n, 0, 0, t, &s, &e), -1);
        assert_string_equal(e.msg, "injected read failure at element 2097152");

        /* Pass 2: everything after the first four calls fails. */
        reader_init(&r, x, n);
        r.fail_after = 4;
        e.msg[0] = 0;
        assert_int_equal(qs_tensor_stats_compute(arr_read, &r, 0, n, 2, n / 2, t, &s, &e), -1);
        assert_non_null(strstr(e.msg, "injected read failure"));

        /* A reader that gives no message still yields one. */
        reader_init(&r, x, n);
        r.fail_at = 5;
        r.silent = 1;
        e.msg[0] = 0;
        assert_int_equal(qs_tensor_stats_compute(arr_read, &r, 1, n, 0, 0, t, &s, &e), -1);
        assert_string_equal(e.msg, "read failed at element 0");
    }
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pct_table),
        cmocka_unit_test(test_random_sizes),
        cmocka_unit_test(test_percentiles_exact),
        cmocka_unit_test(test_nonfinite_and_zeros),
        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_empty_allnan_single),
        cmocka_unit_test(test_outliers),
        cmocka_unit_test(test_matrix_view),
        cmocka_unit_test(test_matrix_shapes),
        cmocka_unit_test(test_matrix_limits),
        cmocka_unit_test(test_serialised_reads),
        cmocka_unit_test(test_read_failure),
        cmocka_unit_test(test_nested_in_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
