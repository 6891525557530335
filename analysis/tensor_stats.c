/*
** Tensor statistics: the streaming, multi-threaded, bit-reproducible implementation of
** qs_tensor_stats_compute() (interface and field meanings in tensor_stats.h).
**
** The data is read twice, in chunks of STATS_CHUNK elements (a constant: it is part of the
** definition of the result, never derived from the thread count):
**
**   pass 1  per chunk: counts, min/max/absmax, the chunk mean (sum in double) and the central
**           moment sums M2..M4 about it (a second loop while the chunk is in cache), a 65536-bin
**           histogram of the top 16 bits of each value's order-preserving key, and the matrix
**           view's row/column absmax.  Chunk partials are merged strictly in chunk order with
**           the pairwise (Chan/Pebay) formulas, incrementally through a small window.
**   pass 2  with the global mean/std known: the outlier count, and for the (at most 2*QS_NPCT)
**           top-16 buckets that hold the ranks the percentiles need, 65536-bin histograms of
**           the low 16 key bits.  Together they give exact order statistics.
**
** Everything else that is merged across threads is an integer count or a maximum, which do not
** depend on order, so the result is bit-identical for any nthreads.  Inner loops keep LANES
** independent accumulators combined in a fixed order: the C semantics fix every rounding, so
** the compiler may vectorise them (and gcc does, at -O2) without changing a bit.  FP
** contraction is switched off below for the same reason (-march with FMA must not change bits).
**
** Conventions for degenerate input (n_finite = number of finite values):
**   - NaN and +-Inf are counted (n_nan, n_inf) and excluded from everything else, including
**     the matrix view's absmax vectors.  -0.0 and +0.0 are both zeros and compare equal; a
**     percentile is never -0.0.
**   - n_finite = 0 (empty, all NaN/Inf): min, max, mean, absmax and all percentiles are NaN;
**     std, kurtosis, zero_frac and outlier_frac are 0.
**   - n_finite < 2 or all finite values equal: std = 0 and kurtosis = 0, so no outliers.
**   - Percentiles follow numpy's default 'linear' method (position (n_finite-1)*p/100, lerp
**     between the two neighbouring order statistics, computed in double as numpy's _lerp does).
**   - Matrix view: if rows+cols > 64M the view is skipped (rows = cols = 0, no error).  An empty
**     absmax vector summarises as all zeros.  Median of an even-length vector = mean of the two
**     middle values.  top_cols: descending absmax, ties to the lower column index.
**
** Memory: per thread one chunk buffer, a 65536-bin histogram, in pass 2 one more per selected
** bucket, and (when cols <= STATS_CHUNK) a column accumulator; shared: rows + cols absmax
** entries and a merge window of 4*nthreads chunk partials.  Nothing is O(numel).
*/
/* No a*b+c -> fma: clang contracts by default, gcc does under -std=gnu* (not -std=c11). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "tensor_stats.h"
#include "../kernels/pool.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define STATS_CHUNK ((size_t)1 << 20)      /* elements per chunk; changing it changes bits */
#define LANES 8                            /* independent accumulators per inner loop */
#define NBIN 65536                         /* 16-bit radix histograms */
#define MAX_AXES ((uint64_t)64 << 20)      /* rows + cols above this: no matrix view */
#define MAX_THREADS QS_POOL_MAX
#define NRANK (2 * QS_NPCT)                /* order statistics the percentiles need */
#define NO_SLOT 0xff

/* Top-16 key buckets that hold finite values.  Keys of NaN/Inf fall only outside this range
** (below: negative Inf/NaN; above: positive), so the histograms need no finiteness test. */
#define FINITE_BIN_LO 0x0080
#define FINITE_BIN_HI 0xff7f

const double qs_stat_pcts[QS_NPCT] = {0.1, 1, 5, 25, 50, 75, 95, 99, 99.9};

/* Statistics of one chunk (or of a merged prefix of chunks). */
typedef struct part {
    uint64_t nf, nnan, ninf, nzero;
    float mn, mx, amax;
    double mean, m2, m3, m4;
} part;

typedef struct job job;

typedef struct worker {       /* one per pool slot */
    job *j;
    float *buf;                 /* one chunk */
    uint64_t *hist;             /* pass 1: NBIN counts of key >> 16 */
    float *colacc;              /* pass 1, cols <= STATS_CHUNK: this thread's column absmax */
    uint64_t *low;              /* pass 2: nsel * NBIN counts of key & 0xffff */
    uint64_t nout;              /* pass 2: outliers */
    qs_err err;                 /* the reader's message */
} worker;

struct job {
    qs_read_fn read;
    void *ctx;
    int serial;                 /* reads must not overlap */
    pthread_mutex_t read_mu;
    uint64_t numel, nchunks;
    int nthreads, pass;
    worker *w;                  /* nthreads of them, indexed by pool slot */
    /* matrix view (rows == 0: none) */
    uint64_t rows, cols;
    _Atomic uint32_t *rowmax, *colmax;   /* float bits of nonnegative values: order-preserving */
    /* pass 1: in-order merge of chunk partials through a window of wsize slots */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    part *win;
    unsigned char *ready;
    uint64_t wsize, frontier;
    part total;
    /* pass 2 */
    double mean, thr;           /* outlier if |x - mean| > thr; thr < 0: do not count */
    uint8_t *slot;              /* NBIN entries: bucket -> low-histogram slot, or NO_SLOT */
    int nsel;
    /* first error (lowest chunk index that failed), under mu */
    atomic_int stop;
    int failed;
    uint64_t err_chunk;
    qs_err err;
    /* the entry point's own (the pool threads do not use them) */
    uint64_t *hist;             /* NBIN: pass 1's top-16 histogram, all threads' */
    uint64_t *vh;               /* NBIN: the matrix view's scratch for medians */
};

/* ---- keys ------------------------------------------------------------------------------ */

static inline uint32_t f2bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static inline float bits2f(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* Order-preserving key: unsigned order of keys = numeric order of floats; -0.0 is mapped to
** +0.0 first so that the two zeros get one key. */
static inline uint32_t f2key(uint32_t b)
{
    /* Branch-free: signs are random in real data, and a mispredicted branch per element
    ** costs more than the whole histogram update. */
    b &= -(uint32_t)((b << 1) != 0);
    uint32_t neg = (uint32_t)-(int32_t)(b >> 31);   /* all ones for negative values */
    return b ^ (neg | 0x80000000u);
}

static inline float key2f(uint32_t k)
{
    return bits2f((k & 0x80000000u) ? k & 0x7fffffffu : ~k);
}

static inline int is_finite_f(float v)
{
    return fabsf(v) <= FLT_MAX;
}

/* Selecting with bit masks, not ?:, because gcc (with the default -ftrapping-math) will not
** if-convert a float->double conversion it has sunk into a branch, and then does not vectorise. */
static inline uint32_t fin_mask32(float v)
{
    return -(uint32_t)((f2bits(v) & 0x7f800000u) != 0x7f800000u);
}

/* v if finite, else +0. */
static inline float fin0(float v)
{
    return bits2f(f2bits(v) & fin_mask32(v));
}

/* d if v is finite, else +0. */
static inline double fin0d(float v, double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    b &= -(uint64_t)(fin_mask32(v) & 1);
    memcpy(&d, &b, sizeof d);
    return d;
}

/* ---- per-chunk kernels (vectorisable: fixed lanes, fixed combination order) ------------ */

static inline double lanesum(const double *s)
{
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Counts, min/max/absmax and the sum of finite values of x[0..n). */
static void chunk_counts(const float *restrict x, size_t n, part *p, double *sum)
{
    /* Few accumulators, integer tests on the bits, and min/max in the `a < b ? a : b` form
    ** that maps onto minps/maxps: this loop is load/store bound at -O2 without AVX.  The Inf
    ** count is n - finite - NaN, absmax = max(-min, max). */
    int32_t nf[LANES] = {0}, nn[LANES] = {0}, nz[LANES] = {0};
    float mn[LANES], mx[LANES];
    for (int j = 0; j < LANES; j++) { mn[j] = INFINITY; mx[j] = -INFINITY; }
    size_t nb = n - n % LANES, i;

#define COUNT_ONE(v, j)                                                  \
    do {                                                                 \
        int32_t mag_ = (int32_t)(f2bits(v) & 0x7fffffffu);               \
        int32_t f_ = mag_ < 0x7f800000;                                  \
        nf[j] += f_;                                                     \
        nn[j] += mag_ > 0x7f800000;                                      \
        nz[j] += mag_ == 0;                                              \
        float lo_ = f_ ? (v) : INFINITY, hi_ = f_ ? (v) : -INFINITY;     \
        mn[j] = lo_ < mn[j] ? lo_ : mn[j];                               \
        mx[j] = hi_ > mx[j] ? hi_ : mx[j];                               \
    } while (0)

    for (i = 0; i < nb; i += LANES)
        for (int j = 0; j < LANES; j++) COUNT_ONE(x[i + j], j);
    for (i = nb; i < n; i++) COUNT_ONE(x[i], (int)(i - nb));
#undef COUNT_ONE

    /* The sum has its own loop: gcc vectorises float->double work poorly when mixed with the
    ** 32-bit counters above. */
    double s[LANES] = {0};
    for (i = 0; i < nb; i += LANES)
        for (int j = 0; j < LANES; j++) s[j] += (double)fin0(x[i + j]);
    for (i = nb; i < n; i++) s[i - nb] += (double)fin0(x[i]);

    memset(p, 0, sizeof *p);
    p->mn = INFINITY;
    p->mx = -INFINITY;
    for (int j = 0; j < LANES; j++) {
        p->nf += nf[j];
        p->nnan += nn[j];
        p->nzero += nz[j];
        p->mn = mn[j] < p->mn ? mn[j] : p->mn;
        p->mx = mx[j] > p->mx ? mx[j] : p->mx;
    }
    p->ninf = n - p->nf - p->nnan;
    if (p->nf) p->amax = -p->mn > p->mx ? -p->mn : p->mx;
    *sum = lanesum(s);
}

/* Central moment sums of the finite values of x[0..n) about mean. */
static void chunk_moments(const float *restrict x, size_t n, double mean, part *p)
{
    double a2[LANES] = {0}, a3[LANES] = {0}, a4[LANES] = {0};
    size_t nb = n - n % LANES, i;

#define MOM_ONE(v, j)                                                    \
    do {                                                                 \
        double d_ = fin0d((v), (double)fin0(v) - mean);                  \
        double d2_ = d_ * d_;                                            \
        a2[j] += d2_;                                                    \
        a3[j] += d2_ * d_;                                               \
        a4[j] += d2_ * d2_;                                              \
    } while (0)

    for (i = 0; i < nb; i += LANES)
        for (int j = 0; j < LANES; j++) MOM_ONE(x[i + j], j);
    for (i = nb; i < n; i++) MOM_ONE(x[i], (int)(i - nb));
#undef MOM_ONE

    p->m2 = lanesum(a2);
    p->m3 = lanesum(a3);
    p->m4 = lanesum(a4);
}

/* Largest |v| over the finite values of x[0..n) (0 if none). */
static float seg_absmax(const float *restrict x, size_t n)
{
    float am[LANES] = {0};
    size_t nb = n - n % LANES, i;
    for (i = 0; i < nb; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float a = fabsf(fin0(x[i + j]));
            am[j] = a > am[j] ? a : am[j];
        }
    for (i = nb; i < n; i++) {
        float a = fabsf(fin0(x[i]));
        am[0] = a > am[0] ? a : am[0];
    }
    float m = 0.0f;
    for (int j = 0; j < LANES; j++) m = am[j] > m ? am[j] : m;
    return m;
}

/* acc[k] = max(acc[k], |x[k]|) over finite x[k]. */
static void col_absmax(float *restrict acc, const float *restrict x, size_t n)
{
    size_t nb = n - n % LANES, i;
    for (i = 0; i < nb; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float a = fabsf(fin0(x[i + j]));
            acc[i + j] = a > acc[i + j] ? a : acc[i + j];
        }
    for (i = nb; i < n; i++) {
        float a = fabsf(fin0(x[i]));
        acc[i] = a > acc[i] ? a : acc[i];
    }
}

/* Number of finite x with |x - mean| > thr. */
static uint64_t chunk_outliers(const float *restrict x, size_t n, double mean, double thr)
{
    uint32_t c[LANES] = {0};
    size_t nb = n - n % LANES, i;
    for (i = 0; i < nb; i += LANES)
        for (int j = 0; j < LANES; j++)
            c[j] += (fabs((double)x[i + j] - mean) > thr) & is_finite_f(x[i + j]);
    for (i = nb; i < n; i++) c[0] += (fabs((double)x[i] - mean) > thr) & is_finite_f(x[i]);
    uint64_t t = 0;
    for (int j = 0; j < LANES; j++) t += c[j];
    return t;
}

/* Histogram of top key bits.  Non-finite values land outside [FINITE_BIN_LO, FINITE_BIN_HI]. */
static void chunk_hist_hi(const float *restrict x, size_t n, uint64_t *restrict h)
{
    for (size_t i = 0; i < n; i++) h[f2key(f2bits(x[i])) >> 16]++;
}

/* Histograms of low key bits for the values in the selected buckets. */
static void chunk_hist_lo(const float *restrict x, size_t n, const uint8_t *restrict slot,
                          uint64_t *restrict low)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t k = f2key(f2bits(x[i]));
        unsigned s = slot[k >> 16];
        if (s != NO_SLOT) low[(size_t)s * NBIN + (k & 0xffffu)]++;
    }
}

/* ---- merging ---------------------------------------------------------------------------- */

/* a = a followed by b (Chan et al. / Pebay pairwise update for M2..M4). */
static void part_merge(part *a, const part *b)
{
    a->nnan += b->nnan;
    a->ninf += b->ninf;
    a->nzero += b->nzero;
    a->mn = b->mn < a->mn ? b->mn : a->mn;
    a->mx = b->mx > a->mx ? b->mx : a->mx;
    a->amax = b->amax > a->amax ? b->amax : a->amax;
    if (b->nf == 0) return;
    if (a->nf == 0) {
        a->nf = b->nf;
        a->mean = b->mean;
        a->m2 = b->m2;
        a->m3 = b->m3;
        a->m4 = b->m4;
        return;
    }
    double na = (double)a->nf, nb = (double)b->nf, n = na + nb;
    double d = b->mean - a->mean, dn = d / n, dn2 = dn * dn;
    double t = d * dn * na * nb;   /* d^2 na nb / n */
    double m4 = a->m4 + b->m4 + t * dn2 * (na * na - na * nb + nb * nb) +
                6.0 * dn2 * (na * na * b->m2 + nb * nb * a->m2) + 4.0 * dn * (na * b->m3 - nb * a->m3);
    double m3 = a->m3 + b->m3 + t * dn * (na - nb) + 3.0 * dn * (na * b->m2 - nb * a->m2);
    a->m2 = a->m2 + b->m2 + t;
    a->m3 = m3;
    a->m4 = m4;
    a->mean = a->mean + dn * nb;
    a->nf += b->nf;
}

static void atomic_maxf(_Atomic uint32_t *p, float v)
{
    uint32_t nb = f2bits(v);
    uint32_t cur = atomic_load_explicit(p, memory_order_relaxed);
    while (nb > cur && !atomic_compare_exchange_weak_explicit(p, &cur, nb, memory_order_relaxed,
                                                              memory_order_relaxed)) {
    }
}

/* ---- workers ---------------------------------------------------------------------------- */

static void record_error(job *j, uint64_t chunk, const qs_err *e)
{
    pthread_mutex_lock(&j->mu);
    if (!j->failed || chunk < j->err_chunk) {
        j->failed = 1;
        j->err_chunk = chunk;
        if (e->msg[0])
            memcpy(j->err.msg, e->msg, sizeof j->err.msg);
        else
            qs_fail(&j->err, "read failed at element %llu",
                    (unsigned long long)(chunk * STATS_CHUNK));
    }
    atomic_store(&j->stop, 1);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* Hand chunk c's partial to the in-order merge; waits while c is a full window ahead. */
static void submit_part(job *j, uint64_t c, const part *p)
{
    pthread_mutex_lock(&j->mu);
    while (!atomic_load(&j->stop) && c >= j->frontier + j->wsize) pthread_cond_wait(&j->cv, &j->mu);
    if (!atomic_load(&j->stop)) {
        j->win[c % j->wsize] = *p;
        j->ready[c % j->wsize] = 1;
        int moved = 0;
        while (j->ready[j->frontier % j->wsize]) {
            size_t s = j->frontier % j->wsize;
            j->ready[s] = 0;
            part_merge(&j->total, &j->win[s]);
            j->frontier++;
            moved = 1;
        }
        if (moved) pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
}

static void pass1_chunk(worker *w, uint64_t c, uint64_t start, size_t len)
{
    job *j = w->j;
    const float *x = w->buf;
    part p;
    double sum;
    chunk_counts(x, len, &p, &sum);
    if (p.nf) {
        p.mean = sum / (double)p.nf;
        chunk_moments(x, len, p.mean, &p);
    }
    chunk_hist_hi(x, len, w->hist);

    /* Matrix view: walk the row segments of the chunk (it may start and end mid-row). */
    if (j->rows) {
        uint64_t g = start;
        size_t off = 0;
        while (off < len) {
            uint64_t r = g / j->cols, col = g % j->cols;
            size_t seg = (size_t)(j->cols - col < len - off ? j->cols - col : len - off);
            float m = seg_absmax(x + off, seg);
            if (seg == j->cols)   /* whole row in this chunk: nobody else writes it */
                atomic_store_explicit(&j->rowmax[r], f2bits(m), memory_order_relaxed);
            else
                atomic_maxf(&j->rowmax[r], m);
            if (w->colacc)
                col_absmax(w->colacc + col, x + off, seg);
            else   /* cols > chunk: the chunk touches each column at most once */
                for (size_t k = 0; k < seg; k++) {
                    float a = fabsf(x[off + k]);
                    if (a <= FLT_MAX) atomic_maxf(&j->colmax[col + k], a);
                }
            off += seg;
            g += seg;
        }
    }
    submit_part(j, c, &p);
}

static void pass2_chunk(worker *w, size_t len)
{
    job *j = w->j;
    if (j->thr >= 0) w->nout += chunk_outliers(w->buf, len, j->mean, j->thr);
    if (j->nsel) chunk_hist_lo(w->buf, len, j->slot, w->low);
}

/* One chunk on the pool (kernels/pool.h): chunks go out in increasing order, so the merge window
** of submit_part only ever waits for lower chunks that are being worked on. */
static void chunk_task(void *ctx, size_t c, int slot)
{
    job *j = ctx;
    worker *w = &j->w[slot];
    if (atomic_load_explicit(&j->stop, memory_order_relaxed)) return;
    uint64_t start = (uint64_t)c * STATS_CHUNK;
    size_t len = (size_t)(j->numel - start < STATS_CHUNK ? j->numel - start : STATS_CHUNK);
    w->err.msg[0] = 0;
    if (j->serial) pthread_mutex_lock(&j->read_mu);
    int rc = j->read(j->ctx, start, len, w->buf, &w->err);
    if (j->serial) pthread_mutex_unlock(&j->read_mu);
    if (rc != 0) {
        record_error(j, c, &w->err);
        return;
    }
    if (j->pass == 1)
        pass1_chunk(w, c, start, len);
    else
        pass2_chunk(w, len);
}

/* Run one pass on up to nthreads pool threads (slot 0 is the calling thread). */
static int run_pass(job *j, int pass, qs_err *e)
{
    j->pass = pass;
    atomic_store(&j->stop, 0);
    qs_pool_for(j->nthreads, (size_t)j->nchunks, chunk_task, j);
    if (j->failed) {
        memcpy(e->msg, j->err.msg, sizeof e->msg);
        return -1;
    }
    return 0;
}

/* ---- order statistics ------------------------------------------------------------------- */

/* Bin of h[lo..hi] that holds the rank-th element (0-based); rank becomes the rank inside it. */
static unsigned hist_find(const uint64_t *h, unsigned lo, unsigned hi, uint64_t *rank)
{
    unsigned b = lo;
    for (; b < hi; b++) {
        if (*rank < h[b]) break;
        *rank -= h[b];
    }
    return b;
}

/* numpy's _lerp: a + (b-a) t, or b - (b-a)(1-t) for t >= 0.5 (exact at both ends). */
static double lerp_np(double a, double b, double t)
{
    double d = b - a;
    return t >= 0.5 ? b - d * (1.0 - t) : a + d * t;
}

/* Sort key of element i of an absmax vector (nonnegative floats: the bits are the key). */
static inline uint32_t vkey(const _Atomic uint32_t *v, uint64_t i)
{
    return atomic_load_explicit(&v[i], memory_order_relaxed);
}

/* The rank-th smallest value of v[0..n) by two radix-histogram passes (no copy). */
static void vec_select(const _Atomic uint32_t *v, uint64_t n, uint64_t rank, uint64_t *h, float *out)
{
    memset(h, 0, NBIN * sizeof *h);
    for (uint64_t i = 0; i < n; i++) h[vkey(v, i) >> 16]++;
    unsigned hi = hist_find(h, 0, NBIN - 1, &rank);
    memset(h, 0, NBIN * sizeof *h);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t k = vkey(v, i);
        if ((k >> 16) == hi) h[k & 0xffffu]++;
    }
    unsigned lo = hist_find(h, 0, NBIN - 1, &rank);
    *out = bits2f((uint32_t)hi << 16 | lo);
}

static void axis_summary(const _Atomic uint32_t *v, uint64_t n, uint64_t *h, qs_axis_summary *s)
{
    memset(s, 0, sizeof *s);
    if (n == 0) return;
    float mn = INFINITY, mx = -1.0f;
    double sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        float x = bits2f(vkey(v, i));
        if (x > mx) { mx = x; s->argmax = i; }
        mn = x < mn ? x : mn;
        sum += x;
    }
    float m0, m1;
    vec_select(v, n, (n - 1) / 2, h, &m0);
    vec_select(v, n, n / 2, h, &m1);
    s->min = mn;
    s->max = mx;
    s->mean = sum / (double)n;
    s->median = ((double)m0 + (double)m1) * 0.5;
}

/* Top QS_TOPK columns by absmax, descending; scanning upward and inserting after equals puts
** ties in index order. */
static void top_columns(const _Atomic uint32_t *v, uint64_t n, qs_tensor_stats *st)
{
    int k = 0;
    for (uint64_t i = 0; i < n; i++) {
        double x = bits2f(vkey(v, i));
        if (k == QS_TOPK && !(x > st->top_cols_absmax[k - 1])) continue;
        int p = k < QS_TOPK ? k++ : QS_TOPK - 1;
        while (p > 0 && x > st->top_cols_absmax[p - 1]) {
            st->top_cols[p] = st->top_cols[p - 1];
            st->top_cols_absmax[p] = st->top_cols_absmax[p - 1];
            p--;
        }
        st->top_cols[p] = i;
        st->top_cols_absmax[p] = x;
    }
    st->ntop = k;
}

/* ---- entry point, step by step ---------------------------------------------------------- */

static int no_memory(qs_err *e)
{
    return qs_fail(e, "out of memory computing tensor statistics");
}

/* The matrix view must cover the elements exactly; one too large to keep its absmax vectors is
** skipped (*rows = 0), not an error. */
static int check_view(uint64_t numel, uint64_t *rows, uint64_t cols, qs_err *e)
{
    if (!*rows) return 0;
    if (cols == 0 ? numel != 0 : (*rows > UINT64_MAX / cols || *rows * cols != numel))
        return qs_fail(e, "matrix view %llux%llu does not match %llu elements",
                       (unsigned long long)*rows, (unsigned long long)cols,
                       (unsigned long long)numel);
    if (*rows > MAX_AXES || cols > MAX_AXES || *rows + cols > MAX_AXES) *rows = 0;
    return 0;
}

/* The job's parameters (threads: no more than chunks) and its locks.  Nothing to free on failure. */
static int job_init(job *j, qs_read_fn read, void *ctx, int read_threadsafe, uint64_t numel,
                    uint64_t rows, uint64_t cols, int nthreads, qs_err *e)
{
    j->read = read;
    j->ctx = ctx;
    j->serial = !read_threadsafe;
    j->numel = numel;
    j->nchunks = numel / STATS_CHUNK + (numel % STATS_CHUNK != 0);
    j->rows = rows;
    j->cols = rows ? cols : 0;
    int T = nthreads < 1 ? 1 : nthreads > MAX_THREADS ? MAX_THREADS : nthreads;
    if ((uint64_t)T > j->nchunks) T = j->nchunks ? (int)j->nchunks : 1;
    j->nthreads = T;
    j->wsize = 4 * (uint64_t)T;
    j->total.mn = INFINITY;
    j->total.mx = -INFINITY;

    if (pthread_mutex_init(&j->mu, NULL) != 0) return qs_fail(e, "cannot create a mutex");
    if (pthread_mutex_init(&j->read_mu, NULL) != 0) {
        pthread_mutex_destroy(&j->mu);
        return qs_fail(e, "cannot create a mutex");
    }
    if (pthread_cond_init(&j->cv, NULL) != 0) {
        pthread_mutex_destroy(&j->read_mu);
        pthread_mutex_destroy(&j->mu);
        return qs_fail(e, "cannot create a condition variable");
    }
    return 0;
}

/* The buffers of both passes but pass 2's low histograms (their number is known after pass 1). */
static int job_alloc(job *j, qs_err *e)
{
    int T = j->nthreads;
    size_t buflen = j->numel < STATS_CHUNK ? (size_t)j->numel : STATS_CHUNK;
    int col_local = j->rows && j->cols <= STATS_CHUNK;
    worker *w = j->w = calloc((size_t)T, sizeof *w);
    j->win = calloc((size_t)j->wsize, sizeof *j->win);
    j->ready = calloc((size_t)j->wsize, 1);
    j->hist = calloc(NBIN, sizeof *j->hist);
    j->vh = calloc(NBIN, sizeof *j->vh);
    j->slot = malloc(NBIN);
    if (!w || !j->win || !j->ready || !j->hist || !j->vh || !j->slot) return no_memory(e);
    if (j->rows) {
        j->rowmax = calloc((size_t)j->rows, sizeof *j->rowmax);
        j->colmax = calloc(j->cols ? (size_t)j->cols : 1, sizeof *j->colmax);
        if (!j->rowmax || !j->colmax) return no_memory(e);
    }
    for (int t = 0; t < T; t++) {
        w[t].j = j;
        w[t].buf = malloc((buflen ? buflen : 1) * sizeof(float));
        w[t].hist = calloc(NBIN, sizeof(uint64_t));
        if (!w[t].buf || !w[t].hist) return no_memory(e);
        if (col_local && j->cols && !(w[t].colacc = calloc((size_t)j->cols, sizeof(float)))) return no_memory(e);
    }
    return 0;
}

static void job_free(job *j)
{
    if (j->w)
        for (int t = 0; t < j->nthreads; t++) {
            free(j->w[t].buf);
            free(j->w[t].hist);
            free(j->w[t].colacc);
            free(j->w[t].low);
        }
    free(j->w);
    free(j->win);
    free(j->ready);
    free(j->rowmax);
    free(j->colmax);
    free(j->hist);
    free(j->vh);
    free(j->slot);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->read_mu);
    pthread_mutex_destroy(&j->mu);
}

/* Pass 1 over every chunk, merged in chunk order into j->total; the threads' top-16 histograms
** summed into j->hist. */
static int pass1(job *j, qs_err *e)
{
    if (j->numel && run_pass(j, 1, e) != 0) return -1;
    if (j->frontier != j->nchunks)
        return qs_fail(e, "internal error: %llu of %llu chunks merged",
                       (unsigned long long)j->frontier, (unsigned long long)j->nchunks);
    for (int t = 0; t < j->nthreads; t++)
        for (size_t b = 0; b < NBIN; b++) j->hist[b] += j->w[t].hist[b];
    return 0;
}

/* Counts and moments from the merged pass-1 partial (the conventions for n_finite = 0 and for
** constant data are in the header comment). */
static void moments(const part *p, uint64_t numel, qs_tensor_stats *st)
{
    uint64_t nf = p->nf;
    st->n = numel;
    st->n_finite = nf;
    st->n_nan = p->nnan;
    st->n_inf = p->ninf;
    st->n_zero = p->nzero;
    if (nf == 0) {
        st->min = st->max = st->mean = st->absmax = NAN;
        for (int k = 0; k < QS_NPCT; k++) st->pct[k] = NAN;
        return;
    }
    st->min = p->mn;
    st->max = p->mx;
    st->absmax = p->amax;
    st->mean = p->mean;
    st->zero_frac = (double)p->nzero / (double)nf;
    if (nf >= 2 && p->mn != p->mx && p->m2 > 0) {
        double n = (double)nf;
        st->std = sqrt(p->m2 / n);
        st->kurtosis = n * p->m4 / (p->m2 * p->m2);
    }
}

/* The order statistics the percentiles need: for each percentile two neighbouring ranks and the
** weight between them, and for each rank its top-16 bucket and its rank inside that bucket. */
typedef struct {
    double t[QS_NPCT];
    uint64_t rank[NRANK];
    uint32_t bucket[NRANK];
} ranks;

/* The ranks from n_finite, their buckets from the top-16 histogram, and a low-histogram slot for
** each bucket that holds one (j->slot, j->nsel). */
static void pick_ranks(job *j, uint64_t nf, ranks *r)
{
    memset(j->slot, NO_SLOT, NBIN);
    for (int k = 0; k < QS_NPCT; k++) {
        double pos = (double)(nf - 1) * (qs_stat_pcts[k] / 100.0);
        double fl = floor(pos);
        r->t[k] = pos - fl;
        r->rank[2 * k] = (uint64_t)fl;
        r->rank[2 * k + 1] = (uint64_t)fl + 1 < nf ? (uint64_t)fl + 1 : nf - 1;
    }
    for (int i = 0; i < NRANK; i++) {
        uint64_t rk = r->rank[i];
        r->bucket[i] = hist_find(j->hist, FINITE_BIN_LO, FINITE_BIN_HI, &rk);
        r->rank[i] = rk;   /* now the rank inside the bucket */
        if (j->slot[r->bucket[i]] == NO_SLOT) j->slot[r->bucket[i]] = (uint8_t)j->nsel++;
    }
}

/* Pass 2 (n_finite > 0): the outlier count about the mean, and the low histograms of the ranks'
** buckets, all threads' summed into w[0].low, whence the exact percentiles. */
static int percentiles(job *j, qs_tensor_stats *st, qs_err *e)
{
    uint64_t nf = st->n_finite;
    worker *w = j->w;
    ranks r;
    pick_ranks(j, nf, &r);
    j->mean = st->mean;
    j->thr = st->std > 0 ? 6.0 * st->std : -1.0;

    for (int t = 0; t < j->nthreads; t++)
        if (!(w[t].low = calloc((size_t)j->nsel * NBIN, sizeof(uint64_t)))) return no_memory(e);
    if (run_pass(j, 2, e) != 0) return -1;
    uint64_t nout = 0;
    for (int t = 0; t < j->nthreads; t++) {
        nout += w[t].nout;
        if (t > 0)
            for (size_t b = 0; b < (size_t)j->nsel * NBIN; b++) w[0].low[b] += w[t].low[b];
    }
    st->outlier_frac = (double)nout / (double)nf;
    double os[NRANK];
    for (int i = 0; i < NRANK; i++) {
        uint64_t rk = r.rank[i];
        const uint64_t *lh = w[0].low + (size_t)j->slot[r.bucket[i]] * NBIN;
        unsigned lo = hist_find(lh, 0, NBIN - 1, &rk);
        os[i] = key2f(r.bucket[i] << 16 | lo);
    }
    for (int k = 0; k < QS_NPCT; k++) st->pct[k] = lerp_np(os[2 * k], os[2 * k + 1], r.t[k]);
    return 0;
}

/* The matrix view: the threads' local column absmax merged, then both vectors summarised. */
static void matrix_view(job *j, qs_tensor_stats *st)
{
    for (int t = 0; t < j->nthreads; t++)
        if (j->w[t].colacc)
            for (uint64_t c = 0; c < j->cols; c++) atomic_maxf(&j->colmax[c], j->w[t].colacc[c]);
    st->rows = j->rows;
    st->cols = j->cols;
    axis_summary(j->rowmax, j->rows, j->vh, &st->row_absmax);
    axis_summary(j->colmax, j->cols, j->vh, &st->col_absmax);
    top_columns(j->colmax, j->cols, st);
}

int qs_tensor_stats_compute(qs_read_fn read, void *ctx, int read_threadsafe, uint64_t numel,
                            uint64_t rows, uint64_t cols, int nthreads, qs_tensor_stats *out,
                            qs_err *e)
{
    qs_tensor_stats st;
    job j;
    memset(&st, 0, sizeof st);   /* also zeroes padding: results are memcmp-comparable */
    memset(&j, 0, sizeof j);
    memset(out, 0, sizeof *out);
    if (!read && numel) return qs_fail(e, "no read function");
    if (check_view(numel, &rows, cols, e)) return -1;
    if (job_init(&j, read, ctx, read_threadsafe, numel, rows, cols, nthreads, e)) return -1;

    int rc = job_alloc(&j, e);
    if (rc == 0) rc = pass1(&j, e);
    if (rc == 0) {
        moments(&j.total, numel, &st);
        if (st.n_finite) rc = percentiles(&j, &st, e);
    }
    if (rc == 0) {
        if (j.rows) matrix_view(&j, &st);
        memcpy(out, &st, sizeof st);   /* not `*out = st`: padding must be copied too */
    }
    job_free(&j);
    return rc;
}
