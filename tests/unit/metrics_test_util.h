/*
** Helpers of the analysis engine's tests (test_metrics*.c): an in-memory reader, LLM-like random
** tensors, and comparisons.
*/
#ifndef QS_METRICS_TEST_UTIL_H
#define QS_METRICS_TEST_UTIL_H

#include "test_util.h"

#include <float.h>
#include <math.h>
#include <pthread.h>

#include <jansson.h>

#include "../../analysis/metrics.h"
#include "../../kernels/cast_scale.h"
#include "../../kernels/format.h"
#include "../../kernels/format_apply.h"
#include "../../kernels/hifloat.h"
#include "../../kernels/llm.h"
#include "../../kernels/minifloat.h"
#include "../../kernels/simd.h"

/* ---- helpers ---------------------------------------------------------------------------------- */

typedef struct src {
    const float *x;
    uint64_t n;
    uint64_t fail_at;        /* a read touching this element fails (UINT64_MAX: never) */
    int reads;
} src;

static inline int rd_mem(void *ctx, uint64_t start, size_t n, float *out, qs_err *e)
{
    src *s = ctx;
    if (start + n > s->n) return qs_fail(e, "read past the end");
    if (s->fail_at != UINT64_MAX && s->fail_at >= start && s->fail_at < start + n)
        return qs_fail(e, "disk on fire at %llu", (unsigned long long)s->fail_at);
    __atomic_add_fetch(&s->reads, 1, __ATOMIC_RELAXED);
    memcpy(out, s->x + start, n * sizeof(float));
    return 0;
}

typedef struct outbuf { float *y; } outbuf;
static inline int wr_mem(void *ctx, uint64_t start, size_t n, const float *y, qs_err *e)
{
    (void)e;
    memcpy(((outbuf *)ctx)->y + start, y, n * sizeof(float));
    return 0;
}

static uint64_t rng_state;
static inline uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline double unif(void) { return (double)(rng() >> 11) * 0x1p-53; }
static inline double gauss(void)
{
    double u = unif(), v = unif();
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* LLM-like: Gaussian with outlier columns, some exact zeros and tiny values. */
static inline float *make_tensor(uint64_t rows, uint64_t cols, uint64_t seed)
{
    rng_state = seed;
    float *x = malloc(rows * cols * sizeof(float));
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) {
            double v = gauss() * 0.05;
            if (c % 37 == 5) v *= 40;
            uint64_t k = rng() % 1000;
            if (k < 5) v = 0;
            else if (k < 10) v *= 1e-6;
            else if (k < 12) v *= 3000;
            else if (k < 14) v *= 1e-38;   /* float subnormals: subnormal errors, binned by their true log */
            x[r * cols + c] = (float)v;
        }
    return x;
}

static inline qs_apply mk_apply(const char *name)
{
    qs_apply a;
    memset(&a, 0, sizeof a);
    a.f = qs_format_find(name);
    assert_non_null(a.f);
    a.axis = 1;
    a.gran = QS_GRAN_BLOCK;
    return a;
}

static inline int run(const qs_apply *a, uint64_t rows, uint64_t cols, const float *x, int threads, int blocks,
               qs_analysis *an, qs_err *e)
{
    src s = {x, rows * cols, UINT64_MAX, 0};
    qs_analyze_opts o;
    memset(&o, 0, sizeof o);
    o.threads = threads;
    o.blocks = blocks;
    return qs_analyze(a, rows, cols, rd_mem, &s, 1, &o, an, e);
}

static inline uint64_t hist_total(const qs_hist *h)
{
    uint64_t t = h->zero + h->under + h->over + h->nonfinite;
    for (int i = 0; i < h->nbins; i++) t += h->counts[i];
    return t;
}

static inline void assert_close(double a, double b, double rtol)
{
    if (isnan(a) || isnan(b)) {
        if (!(isnan(a) && isnan(b))) fail_msg("%.17g vs %.17g", a, b);
        return;
    }
    if (isinf(a) || isinf(b)) {
        if (a != b) fail_msg("%.17g vs %.17g", a, b);
        return;
    }
    if (!(fabs(a - b) <= rtol * fmax(fabs(a), fabs(b)) + 1e-300)) fail_msg("%.17g vs %.17g (rtol %g)", a, b, rtol);
}

static inline int log4bin_ref(double a)
{
    /* floor(4 log2 a), exactly: binade from frexp, then compare m^4 with 2^k in long double
    ** (the edges 2^(k/4) are irrational, and long double has 11 bits to spare over double) */
    int ex;
    double m = frexp(a, &ex);   /* a = m 2^ex, m in [0.5, 1) */
    m *= 2;
    ex -= 1;
    long double m4 = (long double)m * m * m * m;
    int j = (m4 >= 2.0L) + (m4 >= 4.0L) + (m4 >= 8.0L);
    return 4 * ex + j;
}

static inline void href_log4(uint64_t *c, int nb, int lo, uint64_t *under, uint64_t *over, double a)
{
    int i = log4bin_ref(a) - 4 * lo;
    if (i < 0) (*under)++;
    else if (i >= nb) (*over)++;
    else c[i]++;
}

/* the same for fl32(a) (a float that rounds to 0 is below every histogram) */
static inline void href_log4f(uint64_t *c, int nb, int lo, uint64_t *under, uint64_t *over, double a)
{
    float f = (float)a;
    if (f == 0) { (*under)++; return; }
    if (isinf(f)) { (*over)++; return; }
    href_log4(c, nb, lo, under, over, (double)f);
}

/* Two results with the same bits. */
static void same_analysis(const qs_analysis *a, const qs_analysis *b)
{
    assert_memory_equal(&a->m, &b->m, sizeof a->m);
    const qs_hist *ha[] = {&a->value, &a->abs_err, &a->rel_err, &a->ulp_err, &a->scale_code, &a->block_err};
    const qs_hist *hb[] = {&b->value, &b->abs_err, &b->rel_err, &b->ulp_err, &b->scale_code, &b->block_err};
    for (int k = 0; k < 6; k++) {
        assert_int_equal(ha[k]->nbins, hb[k]->nbins);
        if (ha[k]->nbins) assert_memory_equal(ha[k]->counts, hb[k]->counts, (size_t)ha[k]->nbins * 8);
        assert_true(ha[k]->zero == hb[k]->zero && ha[k]->under == hb[k]->under && ha[k]->over == hb[k]->over &&
                    ha[k]->nonfinite == hb[k]->nonfinite);
    }
    assert_int_equal(a->nblocks, b->nblocks);
    if (a->block_rmse) {
        assert_memory_equal(a->block_rmse, b->block_rmse, a->nblocks * 4);
        assert_memory_equal(a->block_absmax, b->block_absmax, a->nblocks * 4);
        assert_memory_equal(a->block_ratio, b->block_ratio, a->nblocks * 4);
    }
    if (a->block_scale_code) assert_memory_equal(a->block_scale_code, b->block_scale_code, a->nblocks);
    if (a->row_rmse) {
        assert_memory_equal(a->row_rmse, b->row_rmse, a->rows * 4);
        assert_memory_equal(a->col_rmse, b->col_rmse, a->cols * 4);
    }
}

#endif
