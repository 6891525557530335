/*
** The analysis engine (interface, definitions and conventions in metrics.h): one streaming pass
** that fake-quantizes a tensor exactly as kernels/format_apply.c does and accumulates error metrics,
** histograms and per-block / per-row / per-column statistics, on `threads` threads, bit-identical
** for any thread count.
**
** Work is cut into bands whose boundaries depend only on the shape and the format (never on the
** thread count).  Threads claim bands in any order; each band's partial sums (double, LANES
** independent accumulators combined in a fixed order) go to a window of slots and are merged
** strictly in band order by whichever thread completes the band at the frontier.  Histograms,
** counts and maxima are order-independent and are summed per thread at the end.  Per-block arrays
** are written in place (every block belongs to exactly one band).  FP contraction is off, so the
** bits do not depend on the compiler's choices either.
**
** Band layouts (mirroring format_apply):
**   rows    each row is a run; bands of whole rows (about BAND elements);
**   pieces  rows longer than a band: bands are pieces of one row cut at block boundaries;
**   cols    axis 0 with blocks: columns are runs, bands of whole block-rows (a multiple of the block);
**   mem     int8/int4 with one scale per tensor or per column (granularity tensor/col, or axis 0
**           without a block size): the run is the whole tensor or a whole column, so, as in
**           format_apply, the tensor is held in memory (fake-quantized first), then analysed in
**           row bands (tensor) or block-row bands (columns).
**
** Block scales without a full encode ("proxy"): for int8/int4, MX and NVFP4 the block scale is a
** function of the block's largest magnitude alone (int: largest finite |x|; MX/NVFP4: largest
** magnitude bits, NaN and Inf included, which make a NaN block).  So per band the engine encodes
** one representative value per block with the format's own encode at block size 1 (n/32 values
** instead of n), and decodes the element codes "1.0" and "largest" with that metadata: the block's
** decoded scale S and its saturation level Qtop, by the format's own arithmetic.  The tests check
** the resulting scale codes against a full encode for every scale rule and variant.  HiF4 and
** M2XFP scales depend on every element, so those two run encode + decode (bit-identical to fakeq,
** as tested in tests/unit/test_format_*.c) in place of fakeq.
*/
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "metrics.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../kernels/fbits.h"
#include "../kernels/hifloat.h"
#include "../kernels/simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MET_X86 1
#else
#define MET_X86 0
#endif

#define BAND ((size_t)1 << 20)     /* elements per band (as format_apply); changing it changes bits */
#define LANES 8
#define MAX_THREADS 64

/* Histogram layouts (documented in metrics.h). */
#define HV_LO (-160)
#define HV_HI 130
#define HV_N ((HV_HI - HV_LO) * 4)
#define HR_LO (-80)
#define HR_HI 16
#define HR_N ((HR_HI - HR_LO) * 4)
#define HU_N 64

/* Mantissa fields (52 bits) of the smallest doubles >= 2^(k/4), k = 1, 2, 3: bin edges inside a
** binade for the 4-bins-per-binade log2 histograms (computed exactly, with integer arithmetic). */
#define T1 0x306fe0a31b716ull
#define T2 0x6a09e667f3bcdull
#define T3 0xae89f995ad3aeull

enum { FAM_CAST, FAM_PROXY, FAM_HIF4, FAM_M2X };
enum { PM_ROWS, PM_PIECES, PM_COLS, PM_MEM_T, PM_MEM_C };

static inline uint64_t d2u(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }

/* floor(4 log2 a) for a > 0 finite (normal double). */
static inline int log4bin(double a)
{
    uint64_t b = d2u(a), m = b & 0xfffffffffffffull;
    int E = (int)(b >> 52) - 1023;
    return 4 * E + (m >= T1) + (m >= T2) + (m >= T3);
}

/* floor(4 log2 f) from the bits of a float f > 0: exact, since the edges 2^(k/4) compare with the
** 23-bit mantissa field through these ceilings of (2^(j/4) - 1) 2^23.  Zero and subnormals land far
** below every histogram's lowest bin (they are "under"), Inf above the highest. */
#define TF1 0x1837f1u
#define TF2 0x3504f4u
#define TF3 0x5744fdu
static inline int log4bin_f(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    b &= 0x7fffffffu;
    uint32_t m = b & 0x7fffffu;
    return 4 * ((int)(b >> 23) - 127) + (m >= TF1) + (m >= TF2) + (m >= TF3);
}

/* floor(log2 a) for a >= 0 (0 -> -1023). */
static inline int ilog2d(double a) { return (int)(d2u(a) >> 52 & 0x7ff) - 1023; }

/* ---- the format's profile ---------------------------------------------------------------- */

typedef struct prof {
    const qs_format *f;
    qs_qopts o;              /* resolved: block, NVFP4 tensor scale */
    int fam;
    int byte_scale;          /* metadata starts with a one-byte scale code */
    int finite_rep;          /* int: block representative = largest finite |x| */
    int m2x_es;
    uint32_t code_one, code_top;
    float cast_top;          /* casts: largest finite value */
    double ovf;              /* casts: |x| > ovf and a non-finite q counts as clipped */
    int elo, ehi;            /* element grid spacing sp[E - elo] for binades E, clamped */
    double sp[300], isp[300];   /* spacing and its inverse (powers of two) */
    int tapered, mb;         /* tapered: spacing from the table; else sp[E] = 2^(E - mb) */
    int allpow2;             /* every block scale is a power of two (MX, M2XFP em) */
    size_t seg;              /* values per scale segment (0: the whole run / block) */
} prof;

static void grid_minifloat(prof *p, int elo, int ehi, int mbits)
{
    p->mb = mbits;
    p->elo = elo;
    p->ehi = ehi;
    for (int E = elo; E <= ehi; E++) p->sp[E - elo] = ldexp(1.0, E - mbits);
}

static void grid_uniform(prof *p, double step)
{
    int ex;
    frexp(step, &ex);
    p->mb = 1 - ex;          /* step = 2^-mb (every uniform grid here has a power-of-two step) */
    p->elo = p->ehi = 0;
    p->sp[0] = step;
}

/* Grid from a code table (HiF8): spacing in binade E = next value after the smallest value >= 2^E,
** minus that value (the previous step where there is no next value). */
static int grid_table(prof *p)
{
    const qs_format *f = p->f;
    float v[256];
    int n = 0;
    for (unsigned c = 0; c < f->ncodes && c < 256; c++) {
        float x = f->code_value(c);
        if (x > 0 && x <= FLT_MAX) v[n++] = x;
    }
    /* sort, unique */
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && v[k - 1] > v[k]; k--) { float t = v[k]; v[k] = v[k - 1]; v[k - 1] = t; }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || v[i] != v[m - 1]) v[m++] = v[i];
    if (m < 2) return -1;
    p->tapered = 1;
    p->elo = ilog2d(v[0]);
    p->ehi = ilog2d(v[m - 1]);
    if (p->ehi - p->elo >= 300) return -1;
    for (int E = p->elo; E <= p->ehi; E++) {
        double lo = ldexp(1.0, E);
        int i = 0;
        while (i < m && v[i] < lo) i++;
        double s = i + 1 < m ? (double)v[i + 1] - v[i] : (double)v[m - 1] - v[m - 2];
        if (E == p->elo) s = v[0];   /* below the smallest value: the step from 0 */
        p->sp[E - p->elo] = s;
    }
    return 0;
}

static int prof_init1(prof *p, const qs_apply *a, const qs_qopts *o, qs_err *e);

static int prof_init(prof *p, const qs_apply *a, const qs_qopts *o, qs_err *e)
{
    if (prof_init1(p, a, o, e)) return -1;
    for (int E = p->elo; E <= p->ehi; E++) p->isp[E - p->elo] = 1.0 / p->sp[E - p->elo];
    return 0;
}

static int prof_init1(prof *p, const qs_apply *a, const qs_qopts *o, qs_err *e)
{
    const qs_format *f = a->f;
    memset(p, 0, sizeof *p);
    p->f = f;
    p->o = *o;
    p->ovf = INFINITY;
    const char *fam = f->family;
    if (f->block == 1) {
        p->fam = FAM_CAST;
        p->cast_top = (float)f->max_finite;
        p->ovf = f->max_finite;
        if (f->ebits > 0)
            grid_minifloat(p, ilog2d(f->min_normal), ilog2d(f->max_finite), f->mbits);
        else if (f->code_value) {
            if (grid_table(p)) return qs_fail(e, "format %s: cannot derive its grid", f->name);
        } else
            return qs_fail(e, "format %s: unknown element grid", f->name);
        return 0;
    }
    if (!strcmp(fam, "int")) {
        p->fam = FAM_PROXY;
        p->finite_rep = 1;
        p->code_one = 1;
        p->code_top = (1u << (f->elem_bits - 1)) - 1;
        grid_uniform(p, 1.0);
        return 0;
    }
    if (!strcmp(fam, "mx") || !strcmp(fam, "nvfp4")) {
        p->fam = FAM_PROXY;
        p->byte_scale = 1;
        p->allpow2 = !strcmp(fam, "mx");
        if (!f->code_value) return qs_fail(e, "format %s: no code table", f->name);
        int one = -1, top = -1;
        float tv = 0;
        for (unsigned c = 0; c < f->ncodes; c++) {
            float v = f->code_value(c);
            if (v == 1.0f && one < 0) one = (int)c;
            if (v > tv && v <= FLT_MAX) { tv = v; top = (int)c; }
        }
        if (one < 0 || top < 0) return qs_fail(e, "format %s: no code for 1.0", f->name);
        p->code_one = (uint32_t)one;
        p->code_top = (uint32_t)top;
        if (f->ebits > 0)
            grid_minifloat(p, 1 - f->bias, ilog2d(tv), f->mbits);
        else
            grid_uniform(p, (double)f->code_value(1));   /* MXINT8: 1/64 */
        return 0;
    }
    if (!strcmp(fam, "hifloat") && f->block == QS_HIF4_UNIT && f->meta_bytes == QS_HIF4_META) {
        p->fam = FAM_HIF4;
        p->byte_scale = 1;
        p->seg = 4;
        grid_uniform(p, 0.25);
        return 0;
    }
    if (!strcmp(fam, "m2xfp")) {
        p->fam = FAM_M2X;
        p->byte_scale = 1;
        p->seg = 8;
        p->m2x_es = o->m2x == QS_M2X_ES;
        p->allpow2 = !p->m2x_es;
        grid_minifloat(p, 0, 2, 1);
        return 0;
    }
    return qs_fail(e, "format %s: family '%s' is not supported by the analysis", f->name, fam);
}

/* ---- plan --------------------------------------------------------------------------------- */

typedef struct plan {
    int mode;
    uint64_t rows, cols, n;
    size_t blk;              /* block size of the runs (0: the whole run) */
    size_t band_rows;        /* rows, cols, mem: rows per band */
    size_t piece;            /* pieces: elements per piece */
    uint64_t npr;            /* pieces per row */
    uint64_t nbands;
    int colruns;             /* runs are columns */
    int blockstats;          /* per-block statistics in the band pass */
    uint64_t nbr, nbc;       /* blocks per row (row runs) / per column (col runs) */
    uint64_t nblocks;
    size_t max_len, max_nr, max_nc, max_blocks, max_segs;
    int twod;                /* row and column RMSE */
    int colacc;              /* column partial sums (2-D, or mem col for the block RMSE) */
} plan;

static void band_geom(const plan *p, uint64_t b, uint64_t *r0, size_t *nr, uint64_t *c0, size_t *nc)
{
    if (p->npr) {
        uint64_t r = b / p->npr, k = b % p->npr;
        *r0 = r;
        *nr = 1;
        *c0 = k * p->piece;
        *nc = (size_t)(p->cols - *c0 < p->piece ? p->cols - *c0 : p->piece);
        return;
    }
    *r0 = b * p->band_rows;
    *nr = (size_t)(p->rows - *r0 < p->band_rows ? p->rows - *r0 : p->band_rows);
    *c0 = 0;
    *nc = (size_t)p->cols;
}

static int plan_init(plan *p, const prof *pf, const qs_apply *a, uint64_t rows, uint64_t cols, qs_err *e)
{
    memset(p, 0, sizeof *p);
    p->rows = rows;
    p->cols = cols;
    p->n = rows * cols;
    const qs_format *f = pf->f;
    int whole = a->gran == QS_GRAN_TENSOR;
    int col = a->gran == QS_GRAN_COL || (a->gran == QS_GRAN_BLOCK && a->axis == 0);
    size_t blk = qs_format_block(f, &pf->o);
    p->blk = blk;
    if (whole) p->mode = PM_MEM_T;
    else if (col && blk == 0) p->mode = PM_MEM_C;
    else if (col) p->mode = PM_COLS;
    else {
        size_t piece = blk ? (BAND / blk) * blk : (size_t)cols;
        if (piece == 0) piece = blk;
        if (piece >= cols) p->mode = PM_ROWS;
        else {
            p->mode = PM_PIECES;
            p->piece = piece;
            p->npr = (cols + piece - 1) / piece;
        }
    }
    p->twod = rows > 1;
    if (p->n == 0) { p->nbands = 0; return 0; }
    switch (p->mode) {
    case PM_ROWS:
    case PM_MEM_T:
        if (p->mode == PM_MEM_T && cols > BAND) {
            /* in memory: any cut works (the one block is summarised at the end) */
            p->piece = BAND;
            p->npr = (cols + BAND - 1) / BAND;
            p->nbands = rows * p->npr;
            p->max_nr = 1;
            p->max_nc = BAND;
            break;
        }
        p->band_rows = (size_t)(BAND / cols);
        if (p->band_rows == 0) p->band_rows = 1;
        if (p->band_rows > rows) p->band_rows = (size_t)rows;
        p->nbands = (rows + p->band_rows - 1) / p->band_rows;
        p->max_nr = p->band_rows;
        p->max_nc = (size_t)cols;
        break;
    case PM_PIECES:
        p->nbands = rows * p->npr;
        p->max_nr = 1;
        p->max_nc = p->piece;
        break;
    case PM_COLS:
    case PM_MEM_C: {
        size_t unit = p->mode == PM_COLS ? blk : 1;
        size_t k = (size_t)(BAND / ((uint64_t)unit * cols));
        if (k == 0) k = 1;
        if (cols > SIZE_MAX / sizeof(double) / unit) return qs_fail(e, "tensor too large");
        p->band_rows = k * unit;
        if (p->band_rows > rows) p->band_rows = (size_t)rows;
        p->nbands = (rows + p->band_rows - 1) / p->band_rows;
        p->max_nr = p->band_rows;
        p->max_nc = (size_t)cols;
        p->colruns = 1;
        break;
    }
    }
    p->max_len = p->max_nr * p->max_nc;
    /* blocks */
    int blocky = pf->fam != FAM_CAST;
    if (!blocky) p->nblocks = 0;
    else if (p->mode == PM_MEM_T) p->nblocks = 1;
    else if (p->mode == PM_MEM_C) p->nblocks = cols;
    else if (p->colruns) {
        p->nbc = (rows + blk - 1) / blk;
        p->nblocks = cols * p->nbc;
    } else {
        p->nbr = blk ? (cols + blk - 1) / blk : 1;
        p->nblocks = rows * p->nbr;
    }
    p->blockstats = blocky && p->mode != PM_MEM_T && p->mode != PM_MEM_C;
    size_t rl = p->colruns ? p->max_nr : p->max_nc, nruns = p->colruns ? p->max_nc : p->max_nr;
    size_t bpr = p->blockstats && p->blk ? (rl + p->blk - 1) / p->blk : 1;
    p->max_blocks = nruns * bpr;
    size_t spr = pf->seg ? bpr * (p->blk / pf->seg) : bpr;
    p->max_segs = nruns * spr;
    p->colacc = p->twod || p->mode == PM_MEM_C;
    return 0;
}

/* ---- histograms --------------------------------------------------------------------------- */

/* Counts with five extra slots after the n bins: zero, under, over, non-finite, and "skip" (values a
** histogram does not count: non-finite inputs for the error histograms). */
enum { S_ZERO = 0, S_UNDER, S_OVER, S_NONF, S_SKIP, NSLOT };

/* A histogram's counters: n bins then NSLOT special slots, in HCOPIES copies (stride n + NSLOT)
** that consecutive values increment in turn, so that runs of equal bins (errors cluster) do not
** chain every increment through one memory location; summed when merged. */
#define HCOPIES 4
typedef struct hacc {
    uint64_t *c;
    int n;
} hacc;

static inline void h_log4(hacc *h, int off, double a)
{
    int i = log4bin(a) + off;
    h->c[i < 0 ? h->n + S_UNDER : i >= h->n ? h->n + S_OVER : i]++;
}

/* ---- accumulators --------------------------------------------------------------------------- */

#define CH 512   /* values per kernel chunk: the bin-index arrays stay in L1 */

/* Lane accumulators: lane L sums the values at run positions = L (mod LANES), each lane a sequential
** sum, combined at the end in a fixed order. */
typedef struct kl {
    double sx2[LANES], se2[LANES], se[LANES], sxq[LANES], sq2[LANES], srel[LANES];
    double maxae[LANES], maxrel[LANES];
    int64_t nfin[LANES], nunder[LANES], nclip[LANES], nnonf[LANES];
} kl;

typedef struct bstat {       /* one block: squared-error lanes, finite inputs, largest |x| */
    double se2[LANES];
    int64_t nf[LANES];
    float amax[LANES];
} bstat;

/* Constants of one segment (values sharing one element scale S). */
typedef struct kpar {
    double F, ovf;           /* relative-error floor; casts: |x| > ovf with non-finite q is clipped */
    uint32_t qtop;           /* float bits of the saturation level */
    double S, invS;          /* element scale; 1/S when S is a power of two (exact), else 0 */
    int Es;                  /* S = ms 2^Es, ms in [1,2): ms is the mantissa field of S */
    uint64_t ms;
    int elo, ehi;
    const double *isp;       /* 1 / grid spacing per binade, elo..ehi (tapered grids) */
    int tapered, mb;         /* else 1 / spacing = 2^(mb - E) */
    int nv, nr, nu;          /* bins of the value/abs (same), rel and ulp histograms */
    int novalue;             /* the value histogram was given (opts.value_hist): skip its bins */
} kpar;

/* ---- job, workers --------------------------------------------------------------------------- */

typedef struct bpart {       /* one band's partial results, merged in band order */
    double sx2, se2, se, sxq, sq2, srel;
    double maxae, maxrel;
    uint64_t nfin, nunder, nclip, nnonf, nelem;
    uint64_t r0, c0;
    size_t nr, nc;
    double *row_se2, *col_se2;
    uint32_t *row_nf, *col_nf;
    int ready;
} bpart;

typedef struct job job;

typedef struct worker {
    job *j;
    int id;
    float *x, *xt, *q;       /* band input, transposed input, fake-quantized (run layout) */
    uint32_t *codes;
    uint8_t *meta;
    float *reps;             /* proxy: one representative per block */
    uint32_t *pcodes;
    uint8_t *pmeta;
    float *pS, *pQ;
    double *segS;            /* per segment: element scale (sanitised) and saturation level bits */
    uint32_t *segQb;
    double *bse2;            /* per block of the current run */
    uint64_t *bnf;
    float *bam;
    uint8_t *bcode;
    double *bscale;
    float *colmax_mem;       /* mem col: not used */
    kl acc;                  /* the band's lanes */
    int simd;                /* qs_simd_level() */
    uint32_t iv[CH], ia[CH], ir[CH], iu[CH];   /* bin indices of a chunk */
    float fa[CH], fr[CH], fu[CH];              /* fl32 of |e|, rel and ulp error, for the bins */
    int32_t sp[CH];                            /* -1, or the special slot of the error histograms */
    /* histograms */
    hacc hv, ha, hr, hu, hb, hs;
    qs_err err;
    pthread_t th;
} worker;

struct job {
    const prof *pf;
    const plan *p;
    qs_an_read rd;
    void *rctx;
    int serial;
    pthread_mutex_t read_mu, mu;
    pthread_cond_t cv;
    int nthreads;
    double F;                /* relative-error floor (absolute) */
    int novalue;             /* opts.value_hist given: the kernels skip the value histogram */
    /* window */
    bpart *slots;
    uint64_t wsize, frontier;
    _Atomic uint64_t next;
    uint64_t done_elems;
    /* totals */
    bpart tot;
    double *row_se2, *col_se2;
    uint32_t *row_nf, *col_nf;
    /* per-block outputs (NULL when not requested) */
    uint8_t *bk_code;
    float *bk_absmax, *bk_ratio, *bk_rmse;
    /* mem modes */
    float *X, *Y;
    double memS;
    float memQ;
    double *colS;
    float *colQ;
    /* errors */
    atomic_int stop;
    int failed;
    uint64_t err_band;
    qs_err err;
    /* progress */
    int (*progress)(void *, uint64_t, uint64_t);
    void *pctx;
    uint64_t pbase, ptotal;
    int cancelled;
};

static void record_error(job *j, uint64_t band, const char *msg)
{
    pthread_mutex_lock(&j->mu);
    if (!j->failed || band < j->err_band) {
        j->failed = 1;
        j->err_band = band;
        snprintf(j->err.msg, sizeof j->err.msg, "%s", msg && msg[0] ? msg : "read failed");
    }
    atomic_store(&j->stop, 1);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* ---- the per-value kernel ------------------------------------------------------------------- */

static inline double lanesum(const double *s)
{
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static inline uint64_t lanesum_i(const int64_t *s)
{
    uint64_t t = 0;
    for (int L = 0; L < LANES; L++) t += (uint64_t)s[L];
    return t;
}

static inline double lanemax(const double *s)
{
    double m = 0;
    for (int L = 0; L < LANES; L++) m = s[L] > m ? s[L] : m;
    return m;
}

static inline double u2d(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
static inline double dmask(double v, uint64_t m) { return u2d(d2u(v) & m); }

/* One value: every quantity, branch-free, into lane L (the scalar and the vectorised loops run
** exactly these operations, so their results are identical; v = e / S is a division here and a
** multiplication by 1/S there when every S is a power of two: the same value). */
static inline __attribute__((always_inline)) void elem(const kpar *P, float xv, float qv, int L, kl *a,
                                                       bstat *bs, uint32_t *iv, float *fa, float *fr,
                                                       float *fu, int32_t *sp, bstat *rs, double *va, uint32_t *vn)
{
    uint32_t xa = f2u(xv) & 0x7fffffffu, qa = f2u(qv) & 0x7fffffffu;
    uint64_t xf = xa < 0x7f800000u, qf = qa < 0x7f800000u;
    uint64_t ok = xf & qf, bad = xf & (qf ^ 1);
    uint64_t mxf = -xf, mok = -ok, mbad = -bad;
    double xd = dmask((double)xv, mxf), qd = dmask((double)qv, mok);
    double xo = dmask(xd, mok);
    double ev = qd - xo, ae = fabs(ev), e2 = ev * ev;
    double ib = dmask(INFINITY, mbad);          /* +inf for a finite input turned NaN/Inf */
    double ax = fabs(xd);
    double den = ax > P->F ? ax : P->F;
    den = den > DBL_MIN ? den : DBL_MIN;
    double rel = ae / den;
    double e2b = e2 + ib;
    a->sx2[L] += xo * xo;
    a->se2[L] += e2b;
    a->se[L] += ev;
    a->sxq[L] += xo * qd;
    a->sq2[L] += qd * qd;
    a->srel[L] += rel + ib;
    double aeb = ae + ib, relb = rel + ib;
    a->maxae[L] = aeb > a->maxae[L] ? aeb : a->maxae[L];
    a->maxrel[L] = relb > a->maxrel[L] ? relb : a->maxrel[L];
    a->nfin[L] += (int64_t)xf;
    a->nnonf[L] += (int64_t)bad;
    a->nunder[L] += (int64_t)(ok & (xa != 0) & (qa == 0));
    a->nclip[L] += (int64_t)((ok & (qa == P->qtop) & (qa < xa)) | (bad & (ax > P->ovf)));
    if (bs) {
        bs->se2[L] += e2b;
        bs->nf[L] += (int64_t)xf;
        float axf = u2f(xa & (uint32_t)mxf);
        bs->amax[L] = axf > bs->amax[L] ? axf : bs->amax[L];
    }
    if (rs) {   /* the run's total and the element-wise sums of the other axis (e2b = 0 for NaN/Inf x) */
        rs->se2[L] += e2b;
        rs->nf[L] += (int64_t)xf;
        va[0] += e2b;
        vn[0] += (uint32_t)xf;
    }
    /* bins: the value histogram here; the error histograms from fa/fr/fu/sp (err_bins) */
    int nv = P->nv;
    if (!P->novalue) {
        int bx = log4bin(ax) + 4 * -HV_LO;
        bx = bx < 0 ? nv + S_UNDER : bx >= nv ? nv + S_OVER : bx;
        *iv = (uint32_t)(xa == 0 ? nv + S_ZERO : xf ? bx : nv + S_NONF);
    }
    int special = !xf ? S_SKIP : bad ? S_NONF : S_ZERO;
    int isspec = !ok | (ae == 0);
    *sp = isspec ? special : -1;
    *fa = (float)ae;
    *fr = (float)rel;
    /* ulps: binade of |x|/S from the bits (exact: both have 24-bit significands), grid spacing */
    uint64_t xbits = d2u(ax);
    int Et = (int)(xbits >> 52) - 1023 - P->Es - ((xbits & 0xfffffffffffffull) < P->ms);
    Et = Et < P->elo ? P->elo : Et > P->ehi ? P->ehi : Et;
    double isp = P->tapered ? P->isp[Et - P->elo] : u2d((uint64_t)(1023 + P->mb - Et) << 52);
    *fu = (float)(ev / P->S * isp);
}

/* The element scales of a run: one per segment of g values (g = 0: one for the whole run), already
** sanitised (ulp scale S > 0 or 0, finite; qtop = float bits of the saturation level, 0xffffffff
** when nothing can clip), and the blocks (B values, B = 0: none) whose statistics go to bse2, bnf,
** bam per block. */
typedef struct kscale {
    size_t g;
    const double *S;
    const uint32_t *Qb;
    int allpow2;
    size_t B;
    double *bse2;
    uint64_t *bnf;
    float *bam;
} kscale;

static inline double san_S(double S) { return S >= 0 && S <= DBL_MAX ? S : 1.0; }
static inline uint32_t san_Q(float Q)
{
    uint32_t b = f2u(fabsf(Q));
    return b < 0x7f800000u && b != 0 ? b : 0xffffffffu;   /* 0 or NaN/Inf: nothing clips */
}

static void set_scale(kpar *P, double S, uint32_t Qb)
{
    uint64_t sb = d2u(S);
    P->S = S;
    P->Es = (int)(sb >> 52 & 0x7ff) - 1023;
    P->ms = sb & 0xfffffffffffffull;
    P->qtop = Qb;
}

static void block_flush(bstat *b, const kscale *ks, size_t bi)
{
    float m = 0;
    for (int L = 0; L < LANES; L++) m = b->amax[L] > m ? b->amax[L] : m;
    ks->bse2[bi] = lanesum(b->se2);
    ks->bnf[bi] = lanesum_i(b->nf);
    ks->bam[bi] = m;
    memset(b, 0, sizeof *b);
}
#if MET_X86
/* Groups of LANES values of a run chunk with AVX-512, positions p0 + 8g: lane L of every vector is
** lane L of the scalar accumulators, and every operation is the scalar one (max_pd(a, b) = a > b ?
** a : b as the scalar code writes it; floor = roundscale toward -inf; no FMA: contraction is off;
** block sums reduced in lanesum's order), so the results are bit-identical to elem()'s. */
__attribute__((target("avx512f,avx512dq,avx512vl")))
static void groups_avx512(const kpar *P, const kscale *ks, size_t m, const float *x, const float *q, size_t p0,
                          size_t ng, kl *a, bstat *bsm, uint32_t *iv, float *fa, float *fr, float *fu, int32_t *sp,
                          bstat *rs, double *va, uint32_t *vn)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), expm = _mm256_set1_epi32(0x7f800000);
    const __m512d F = _mm512_set1_pd(P->F), dmin = _mm512_set1_pd(DBL_MIN), inf = _mm512_set1_pd(INFINITY);
    const __m512d ovf = _mm512_set1_pd(P->ovf), one = _mm512_set1_pd(1.0);
    const __m512i absd = _mm512_set1_epi64(0x7fffffffffffffffll), mant = _mm512_set1_epi64(0xfffffffffffffll);
    const __m512i t1 = _mm512_set1_epi64((long long)T1), t2 = _mm512_set1_epi64((long long)T2),
                  t3 = _mm512_set1_epi64((long long)T3), e1023 = _mm512_set1_epi64(1023);
    const __m512i one64 = _mm512_set1_epi64(1);
    const __m256i zero32 = _mm256_setzero_si256(), one32 = _mm256_set1_epi32(1);
    const __m256i offv = _mm256_set1_epi32(4 * -HV_LO);
    const int nv = P->nv;
    const __m256i nvv = _mm256_set1_epi32(nv);
    const __m256i elo = _mm256_set1_epi32(P->elo), ehi = _mm256_set1_epi32(P->ehi);
    const __m256i mbv = _mm256_set1_epi32(1023 + P->mb);
    const size_t g = ks->g, B = ks->B;
    const int bstats = B != 0, rows = rs != NULL, pow2 = ks->allpow2;
    __m512d sx2 = _mm512_loadu_pd(a->sx2), se2 = _mm512_loadu_pd(a->se2), se = _mm512_loadu_pd(a->se);
    __m512d sxq = _mm512_loadu_pd(a->sxq), sq2 = _mm512_loadu_pd(a->sq2), srel = _mm512_loadu_pd(a->srel);
    __m512d mae = _mm512_loadu_pd(a->maxae), mrel = _mm512_loadu_pd(a->maxrel);
    __m512i nfin = _mm512_loadu_si512(a->nfin), nund = _mm512_loadu_si512(a->nunder);
    __m512i ncl = _mm512_loadu_si512(a->nclip), nnf = _mm512_loadu_si512(a->nnonf);
    __m512d bse2 = _mm512_loadu_pd(bsm->se2);
    __m512i bnf = _mm512_loadu_si512(bsm->nf);
    __m256 bam = _mm256_loadu_ps(bsm->amax);
    __m512d rse2 = rows ? _mm512_loadu_pd(rs->se2) : _mm512_setzero_pd();
    __m512i rnf = rows ? _mm512_loadu_si512(rs->nf) : _mm512_setzero_si512();
    /* the current scale (vectors), refreshed when the segment changes */
    size_t cur = (size_t)-1;
    __m512d Sv = one, invS = one;
    __m256i qtop = zero32, se52 = zero32;
    __m512i msv = _mm512_setzero_si512();
    for (size_t gi = 0; gi < ng; gi++) {
        size_t i = gi * LANES, p = p0 + i;
        size_t sg = g ? p / g : 0;
        if (sg != cur) {
            if (g == 4) {
                Sv = _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_set1_pd(ks->S[sg])), _mm256_set1_pd(ks->S[sg + 1]), 1);
                qtop = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi32((int)ks->Qb[sg])),
                                               _mm_set1_epi32((int)ks->Qb[sg + 1]), 1);
                cur = (size_t)-1;   /* two segments per group: refresh every group */
            } else {
                Sv = _mm512_set1_pd(ks->S[sg]);
                qtop = _mm256_set1_epi32((int)ks->Qb[sg]);
                cur = sg;
            }
            __m512i sb = _mm512_castpd_si512(Sv);
            se52 = _mm512_cvtepi64_epi32(_mm512_srli_epi64(sb, 52));
            msv = _mm512_and_si512(sb, mant);
            if (pow2) invS = _mm512_div_pd(one, Sv);
        }
        __m256 xs = _mm256_loadu_ps(x + i), qs = _mm256_loadu_ps(q + i);
        __m256i xa = _mm256_and_si256(_mm256_castps_si256(xs), absm), qa = _mm256_and_si256(_mm256_castps_si256(qs), absm);
        __mmask8 xf = _mm256_cmplt_epu32_mask(xa, expm), qf = _mm256_cmplt_epu32_mask(qa, expm);
        __mmask8 ok = xf & qf, bad = xf & (__mmask8)~qf;
        __m512d xd = _mm512_maskz_mov_pd(xf, _mm512_cvtps_pd(xs)), qd = _mm512_maskz_mov_pd(ok, _mm512_cvtps_pd(qs));
        __m512d xo = _mm512_maskz_mov_pd(ok, xd);
        __m512d ev = _mm512_sub_pd(qd, xo);
        __m512d ae = _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(ev), absd));
        __m512d e2 = _mm512_mul_pd(ev, ev);
        __m512d ib = _mm512_maskz_mov_pd(bad, inf);
        __m512d ax = _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(xd), absd));
        __m512d den = _mm512_max_pd(_mm512_max_pd(ax, F), dmin);
        __m512d rel = _mm512_div_pd(ae, den);
        __m512d e2b = _mm512_add_pd(e2, ib);
        sx2 = _mm512_add_pd(sx2, _mm512_mul_pd(xo, xo));
        se2 = _mm512_add_pd(se2, e2b);
        se = _mm512_add_pd(se, ev);
        sxq = _mm512_add_pd(sxq, _mm512_mul_pd(xo, qd));
        sq2 = _mm512_add_pd(sq2, _mm512_mul_pd(qd, qd));
        srel = _mm512_add_pd(srel, _mm512_add_pd(rel, ib));
        mae = _mm512_max_pd(_mm512_add_pd(ae, ib), mae);
        mrel = _mm512_max_pd(_mm512_add_pd(rel, ib), mrel);
        nfin = _mm512_mask_add_epi64(nfin, xf, nfin, one64);
        nnf = _mm512_mask_add_epi64(nnf, bad, nnf, one64);
        __mmask8 xnz = _mm256_cmpneq_epu32_mask(xa, zero32), qz = _mm256_cmpeq_epu32_mask(qa, zero32);
        nund = _mm512_mask_add_epi64(nund, ok & xnz & qz, nund, one64);
        __mmask8 clip = (ok & _mm256_cmpeq_epu32_mask(qa, qtop) & _mm256_cmplt_epu32_mask(qa, xa)) |
                        (bad & _mm512_cmp_pd_mask(ax, ovf, _CMP_GT_OQ));
        ncl = _mm512_mask_add_epi64(ncl, clip, ncl, one64);
        if (bstats) {
            bse2 = _mm512_add_pd(bse2, e2b);
            bnf = _mm512_mask_add_epi64(bnf, xf, bnf, one64);
            __m256 axf = _mm256_castsi256_ps(_mm256_maskz_mov_epi32(xf, xa));
            bam = _mm256_max_ps(axf, bam);
            if ((p + LANES) % B == 0 || p + LANES == m) {   /* block end: lanesum's order */
                __m512d r1 = _mm512_add_pd(bse2, _mm512_permute_pd(bse2, 0x55));
                __m512d r2 = _mm512_add_pd(r1, _mm512_permutex_pd(r1, 0x4e));
                __m512d r3 = _mm512_add_pd(r2, _mm512_shuffle_f64x2(r2, r2, 0x4e));
                size_t b = p / B;
                ks->bse2[b] = _mm512_cvtsd_f64(r3);
                ks->bnf[b] = (uint64_t)_mm512_reduce_add_epi64(bnf);
                float am[LANES], mx = 0;
                _mm256_storeu_ps(am, bam);
                for (int L = 0; L < LANES; L++) mx = am[L] > mx ? am[L] : mx;
                ks->bam[b] = mx;
                bse2 = _mm512_setzero_pd();
                bnf = _mm512_setzero_si512();
                bam = _mm256_setzero_ps();
            }
        }
        if (rows) {
            rse2 = _mm512_add_pd(rse2, e2b);
            rnf = _mm512_mask_add_epi64(rnf, xf, rnf, one64);
            _mm512_storeu_pd(va + i, _mm512_add_pd(_mm512_loadu_pd(va + i), e2b));
            __m256i c = _mm256_loadu_si256((const __m256i *)(vn + i));
            _mm256_storeu_si256((__m256i *)(vn + i), _mm256_mask_add_epi32(c, xf, c, one32));
        }
        /* bins: floor(4 log2 v) from the bits */
#define LOG4(v, off) ({                                                                                  \
        __m512i b_ = _mm512_castpd_si512(v), m_ = _mm512_and_si512(b_, mant);                               \
        __m512i k_ = _mm512_slli_epi64(_mm512_sub_epi64(_mm512_srli_epi64(b_, 52), e1023), 2);             \
        k_ = _mm512_mask_add_epi64(k_, _mm512_cmpge_epu64_mask(m_, t1), k_, one64);                        \
        k_ = _mm512_mask_add_epi64(k_, _mm512_cmpge_epu64_mask(m_, t2), k_, one64);                        \
        k_ = _mm512_mask_add_epi64(k_, _mm512_cmpge_epu64_mask(m_, t3), k_, one64);                        \
        _mm256_add_epi32(_mm512_cvtepi64_epi32(k_), off); })
#define CLAMPBIN(b, n) _mm256_mask_mov_epi32(_mm256_mask_mov_epi32(b, _mm256_cmpgt_epi32_mask(zero32, b),          \
                                             _mm256_add_epi32(n, _mm256_set1_epi32(S_UNDER))),                       \
                                             _mm256_cmpge_epi32_mask(b, n), _mm256_add_epi32(n, _mm256_set1_epi32(S_OVER)))
        if (!P->novalue) {
            __m256i bx = CLAMPBIN(LOG4(ax, offv), nvv);
            bx = _mm256_mask_mov_epi32(_mm256_add_epi32(nvv, _mm256_set1_epi32(S_NONF)), xf, bx);
            bx = _mm256_mask_mov_epi32(bx, (__mmask8)~xnz, _mm256_add_epi32(nvv, _mm256_set1_epi32(S_ZERO)));
            _mm256_storeu_si256((__m256i *)(iv + i), bx);
        }
        __m256i special = _mm256_mask_mov_epi32(_mm256_set1_epi32(S_ZERO), bad, _mm256_set1_epi32(S_NONF));
        special = _mm256_mask_mov_epi32(special, (__mmask8)~xf, _mm256_set1_epi32(S_SKIP));
        __mmask8 isspec = (__mmask8)~ok | _mm512_cmp_pd_mask(ae, _mm512_setzero_pd(), _CMP_EQ_OQ);
        _mm256_storeu_si256((__m256i *)(sp + i), _mm256_mask_mov_epi32(_mm256_set1_epi32(-1), isspec, special));
        _mm256_storeu_ps(fa + i, _mm512_cvtpd_ps(ae));
        _mm256_storeu_ps(fr + i, _mm512_cvtpd_ps(rel));
#undef LOG4
#undef CLAMPBIN
        /* ulps */
        __m512i xb = _mm512_castpd_si512(ax);
        __m256i Et = _mm256_sub_epi32(_mm512_cvtepi64_epi32(_mm512_srli_epi64(xb, 52)), se52);
        __mmask8 lt = _mm512_cmplt_epu64_mask(_mm512_and_si512(xb, mant), msv);
        Et = _mm256_mask_sub_epi32(Et, lt, Et, one32);
        Et = _mm256_min_epi32(_mm256_max_epi32(Et, elo), ehi);
        __m512d isp = P->tapered ? _mm512_i32gather_pd(_mm256_sub_epi32(Et, elo), P->isp, 8)
                                 : _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_cvtepi32_epi64(_mm256_sub_epi32(mbv, Et)), 52));
        __m512d vv = _mm512_mul_pd(pow2 ? _mm512_mul_pd(ev, invS) : _mm512_div_pd(ev, Sv), isp);
        _mm256_storeu_ps(fu + i, _mm512_cvtpd_ps(vv));
    }
    _mm512_storeu_pd(a->sx2, sx2); _mm512_storeu_pd(a->se2, se2); _mm512_storeu_pd(a->se, se);
    _mm512_storeu_pd(a->sxq, sxq); _mm512_storeu_pd(a->sq2, sq2); _mm512_storeu_pd(a->srel, srel);
    _mm512_storeu_pd(a->maxae, mae); _mm512_storeu_pd(a->maxrel, mrel);
    _mm512_storeu_si512(a->nfin, nfin); _mm512_storeu_si512(a->nunder, nund);
    _mm512_storeu_si512(a->nclip, ncl); _mm512_storeu_si512(a->nnonf, nnf);
    _mm512_storeu_pd(bsm->se2, bse2);
    _mm512_storeu_si512(bsm->nf, bnf);
    _mm256_storeu_ps(bsm->amax, bam);
    if (rows) {
        _mm512_storeu_pd(rs->se2, rse2);
        _mm512_storeu_si512(rs->nf, rnf);
    }
}
#endif

/* ---- error-histogram bins of a chunk (second pass, from fa/fr/fu/sp) ------------------------------
** abs_err: floor(4 log2 fa) (a subnormal fa is exact and binned by its true logarithm); rel_err:
** floor(4 log2 fr); ulp_err: floor(32 fu) + 32; sp >= 0 puts the value in that special slot. */
static inline uint32_t log_bin(float f, int off, int n)
{
    int b = (f < FLT_MIN ? log4bin((double)f) : log4bin_f(f)) + off;
    return (uint32_t)(b < 0 ? n + S_UNDER : b >= n ? n + S_OVER : b);
}
static inline uint32_t ulp_bin(float fu, int n)
{
    float t = floorf(fu * 32.0f);
    return t >= -32.0f && t < (float)(n - 32) ? (uint32_t)((int)t + 32) : t < -32.0f ? (uint32_t)(n + S_UNDER)
                                                                                      : (uint32_t)(n + S_OVER);
}
static void err_bins_c(worker *w, size_t i0, size_t k)
{
    for (size_t i = i0; i < k; i++) {
        int s = w->sp[i];
        w->ia[i] = s >= 0 ? (uint32_t)(HV_N + s) : log_bin(w->fa[i], 4 * -HV_LO, HV_N);
        w->ir[i] = s >= 0 ? (uint32_t)(HR_N + s) : log_bin(w->fr[i], 4 * -HR_LO, HR_N);
        w->iu[i] = s >= 0 ? (uint32_t)(HU_N + s) : ulp_bin(w->fu[i], HU_N);
    }
}
#if MET_X86
__attribute__((target("avx512f,avx512dq")))
static size_t err_bins_avx512(worker *w, size_t k)
{
    const __m512i mant23 = _mm512_set1_epi32(0x7fffff), e127 = _mm512_set1_epi32(127), one = _mm512_set1_epi32(1);
    const __m512i tf1 = _mm512_set1_epi32((int)TF1), tf2 = _mm512_set1_epi32((int)TF2), tf3 = _mm512_set1_epi32((int)TF3);
    const __m512i zero = _mm512_setzero_si512(), fmin = _mm512_set1_epi32(0x00800000);
    const __m512 m32 = _mm512_set1_ps(-32.0f), hi = _mm512_set1_ps((float)(HU_N - 32)), s32 = _mm512_set1_ps(32.0f);
#define LOG4F(bits, off, n) ({                                                                             \
        __m512i m_ = _mm512_and_si512(bits, mant23);                                                          \
        __m512i k_ = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_srli_epi32(bits, 23), e127), 2);               \
        k_ = _mm512_mask_add_epi32(k_, _mm512_cmpge_epu32_mask(m_, tf1), k_, one);                            \
        k_ = _mm512_mask_add_epi32(k_, _mm512_cmpge_epu32_mask(m_, tf2), k_, one);                            \
        k_ = _mm512_mask_add_epi32(k_, _mm512_cmpge_epu32_mask(m_, tf3), k_, one);                            \
        k_ = _mm512_add_epi32(k_, _mm512_set1_epi32(off));                                                    \
        __mmask16 u_ = _mm512_cmpgt_epi32_mask(zero, k_), o_ = _mm512_cmpge_epi32_mask(k_, _mm512_set1_epi32(n));   \
        k_ = _mm512_mask_mov_epi32(k_, u_, _mm512_set1_epi32((n) + S_UNDER));                                 \
        _mm512_mask_mov_epi32(k_, o_, _mm512_set1_epi32((n) + S_OVER)); })
    size_t i = 0;
    for (; i + 16 <= k; i += 16) {
        __m512i s = _mm512_loadu_si512(w->sp + i);
        __mmask16 spec = _mm512_cmpge_epi32_mask(s, zero);
        __m512i ab = _mm512_and_si512(_mm512_loadu_si512(w->fa + i), _mm512_set1_epi32(0x7fffffff));
        __m512i ba = LOG4F(ab, 4 * -HV_LO, HV_N);
        __m512i br = LOG4F(_mm512_and_si512(_mm512_loadu_si512(w->fr + i), _mm512_set1_epi32(0x7fffffff)), 4 * -HR_LO, HR_N);
        __m512 t = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(w->fu + i), s32), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        __mmask16 inr = _mm512_cmp_ps_mask(t, m32, _CMP_GE_OQ) & _mm512_cmp_ps_mask(t, hi, _CMP_LT_OQ);
        __mmask16 und = _mm512_cmp_ps_mask(t, m32, _CMP_LT_OQ);
        __m512i bu = _mm512_add_epi32(_mm512_cvttps_epi32(_mm512_maskz_mov_ps(inr, t)), _mm512_set1_epi32(32));
        bu = _mm512_mask_mov_epi32(_mm512_set1_epi32(HU_N + S_OVER), inr, bu);
        bu = _mm512_mask_mov_epi32(bu, und, _mm512_set1_epi32(HU_N + S_UNDER));
        _mm512_storeu_si512(w->ia + i, _mm512_mask_add_epi32(ba, spec, s, _mm512_set1_epi32(HV_N)));
        _mm512_storeu_si512(w->ir + i, _mm512_mask_add_epi32(br, spec, s, _mm512_set1_epi32(HR_N)));
        _mm512_storeu_si512(w->iu + i, _mm512_mask_add_epi32(bu, spec, s, _mm512_set1_epi32(HU_N)));
        __mmask16 sub = ~spec & _mm512_cmplt_epu32_mask(ab, fmin);   /* subnormal |e|: its true bin */
        while (sub) {
            int L = __builtin_ctz(sub);
            sub &= (__mmask16)(sub - 1);
            w->ia[i + (size_t)L] = log_bin(w->fa[i + (size_t)L], 4 * -HV_LO, HV_N);
        }
    }
#undef LOG4F
    return i;
}
#endif
static void err_bins(worker *w, size_t k)
{
    size_t i = 0;
#if MET_X86
    if (w->simd >= QS_SIMD_AVX512) i = err_bins_avx512(w, k);
#endif
    err_bins_c(w, i, k);
}

static inline void count_bins(uint64_t *c, size_t stride, const uint32_t *idx, size_t k)
{
    uint64_t *c1 = c + stride, *c2 = c1 + stride, *c3 = c2 + stride;
    size_t t = 0;
    for (; t + 4 <= k; t += 4) {
        c[idx[t]]++;
        c1[idx[t + 1]]++;
        c2[idx[t + 2]]++;
        c3[idx[t + 3]]++;
    }
    for (; t < k; t++) c[idx[t]]++;
}

/* One run x[0..m), q[0..m): metrics, histograms, block statistics (ks) and, with rs, the run's
** total squared error and the element-wise sums va/vn of the other axis. */
static void kern_run(worker *w, const float *x, const float *q, size_t m, const kscale *ks, bstat *rs, double *va,
                     uint32_t *vn)
{
    const job *j = w->j;
    const prof *pf = j->pf;
    kpar P;
    P.F = j->F;
    P.ovf = pf->ovf;
    P.elo = pf->elo;
    P.ehi = pf->ehi;
    P.isp = pf->isp;
    P.tapered = pf->tapered;
    P.mb = pf->mb;
    P.nv = HV_N;
    P.nr = HR_N;
    P.nu = HU_N;
    P.invS = 0;
    P.novalue = j->novalue;
    size_t g = ks->g, B = ks->B;
    bstat blk;
    memset(&blk, 0, sizeof blk);
    int vec = MET_X86 && w->simd >= QS_SIMD_AVX512 && (g == 0 || g % LANES == 0 || g == 4) &&
              (B == 0 || B % LANES == 0 || B >= m);
    size_t cur = (size_t)-1;
    kl *a = &w->acc;
    uint64_t *cv = w->hv.c, *ca = w->ha.c, *cr = w->hr.c, *cu = w->hu.c;
    for (size_t o = 0; o < m; o += CH) {
        size_t k = m - o < CH ? m - o : CH, i = 0;
#if MET_X86
        if (vec && k >= LANES) {
            size_t ng = k / LANES;
            groups_avx512(&P, ks, m, x + o, q + o, o, ng, a, &blk, w->iv, w->fa, w->fr, w->fu, w->sp, rs,
                          rs ? va + o : NULL, rs ? vn + o : NULL);
            i = ng * LANES;
        }
#else
        (void)vec;
#endif
        for (; i < k; i++) {
            size_t p = o + i, sg = g ? p / g : 0;
            if (sg != cur) {
                set_scale(&P, ks->S[sg], ks->Qb[sg]);
                cur = sg;
            }
            elem(&P, x[p], q[p], (int)(p & (LANES - 1)), a, B ? &blk : NULL, w->iv + i, w->fa + i, w->fr + i, w->fu + i, w->sp + i,
                 rs, rs ? va + p : NULL, rs ? vn + p : NULL);
            if (B && ((p + 1) % B == 0 || p + 1 == m)) block_flush(&blk, ks, p / B);
        }
        err_bins(w, k);
        if (!P.novalue) count_bins(cv, HV_N + NSLOT, w->iv, k);
        count_bins(ca, HV_N + NSLOT, w->ia, k);
        count_bins(cr, HR_N + NSLOT, w->ir, k);
        count_bins(cu, HU_N + NSLOT, w->iu, k);
    }
}


/* ---- per band: fake-quantize, block scales, kernels ----------------------------------------- */

/* Largest magnitude bits of x[0..n) (NaN/Inf included) or largest finite |x|, as a float: an
** integer max, exact in any order, so the AVX-512 path gives the same bits. */
static float block_rep_c(const float *x, size_t n, int finite)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = f2u(x[i]) & 0x7fffffffu;
        if (finite && a >= 0x7f800000u) a = 0;
        m = a > m ? a : m;
    }
    return u2f(m);
}
#if MET_X86
__attribute__((target("avx512f")))
static float block_rep_avx512(const float *x, size_t n, int finite)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), expm = _mm512_set1_epi32(0x7f800000);
    __m512i m = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i a = _mm512_and_si512(_mm512_loadu_si512(x + i), absm);
        if (finite) a = _mm512_maskz_mov_epi32(_mm512_cmplt_epu32_mask(a, expm), a);
        m = _mm512_max_epu32(m, a);
    }
    uint32_t r = _mm512_reduce_max_epu32(m);
    float t = block_rep_c(x + i, n - i, finite);
    uint32_t tb = f2u(t);
    return u2f(tb > r ? tb : r);
}
#endif
static float block_rep(const worker *w, const float *x, size_t n, int finite)
{
#if MET_X86
    if (w->simd >= QS_SIMD_AVX512) return block_rep_avx512(x, n, finite);
#endif
    (void)w;
    return block_rep_c(x, n, finite);
}

/* Proxy: scale code / decoded scale / saturation level of nb blocks from their representatives. */
static int proxy_scales(worker *w, size_t nb, qs_err *e)
{
    const prof *pf = w->j->pf;
    const qs_format *f = pf->f;
    qs_qopts o = pf->o;
    o.block = 1;
    o.index0 = 0;
    float ts = 0;
    if (f->encode(f, &o, w->reps, nb, w->pcodes, w->pmeta, &ts, e)) return -1;
    for (size_t i = 0; i < nb; i++) w->pcodes[i] = pf->code_one;
    if (f->decode(f, &o, w->pcodes, w->pmeta, ts, nb, w->pS, e)) return -1;
    for (size_t i = 0; i < nb; i++) w->pcodes[i] = pf->code_top;
    if (f->decode(f, &o, w->pcodes, w->pmeta, ts, nb, w->pQ, e)) return -1;
    for (size_t i = 0; i < nb; i++) {
        w->bscale[i] = w->pS[i];
        w->segS[i] = san_S(w->pS[i]);
        w->segQb[i] = san_Q(w->pQ[i]);
        if (pf->byte_scale) w->bcode[i] = w->pmeta[i * (size_t)f->meta_bytes];
    }
    return 0;
}

/* HiF4 / M2XFP: encode + decode one run, and the per-segment scales from the metadata. */
static int coded_run(worker *w, const float *x, size_t len, uint64_t index0, float *q, size_t seg0, size_t blk0,
                     qs_err *e)
{
    const prof *pf = w->j->pf;
    const qs_format *f = pf->f;
    qs_qopts o = pf->o;
    o.index0 += index0;
    float ts = 0;
    if (f->encode(f, &o, x, len, w->codes, w->meta, &ts, e)) return -1;
    if (f->decode(f, &o, w->codes, w->meta, ts, len, q, e)) return -1;
    size_t B = w->j->p->blk, nb = (len + B - 1) / B;
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *m = w->meta + b * (size_t)f->meta_bytes;
        size_t ns = (B / pf->seg);
        w->bcode[blk0 + b] = m[0];
        if (pf->fam == FAM_HIF4) {
            qs_hif4_meta hm;
            qs_hif4_meta_load(m, &hm);
            double val = qs_hif4_e6m2_value(hm.e6m2);
            w->bscale[blk0 + b] = hm.e6m2 == 0xFF ? NAN : val;
            for (size_t k = 0; k < ns; k++) {
                size_t i = k * pf->seg;
                int d = ((hm.e1_8 >> (i / 8)) & 1) + ((hm.e1_16 >> (i / 4)) & 1);
                float s = (float)(val * (double)(1 << d) * 0.25);
                w->segS[seg0 + b * ns + k] = san_S(hm.e6m2 == 0xFF ? NAN : 4.0 * (double)s);
                w->segQb[seg0 + b * ns + k] = san_Q(7.0f * s);
            }
        } else {
            float X = m[0] == 0 ? u2f(0x00400000u) : u2f((uint32_t)m[0] << 23);
            w->bscale[blk0 + b] = m[0] == 0xFF ? NAN : (double)X;
            for (size_t k = 0; k < ns; k++) {
                unsigned fld = (m[1] >> (2 * k)) & 3u;
                float cs = pf->m2x_es ? X * (1.0f + 0.25f * (float)fld) : X;
                w->segS[seg0 + b * ns + k] = san_S(m[0] == 0xFF ? NAN : (double)cs);
                w->segQb[seg0 + b * ns + k] = san_Q(6.0f * cs);
            }
        }
    }
    return 0;
}

static void transpose(const float *restrict a, size_t nr, size_t nc, float *restrict t)
{
    for (size_t i = 0; i < nr; i++)
        for (size_t c = 0; c < nc; c++) t[c * nr + i] = a[i * nc + c];
}

/* Run k of a band with blocks: one kernel call, then the statistics of each block. */
static void band_blocks(worker *w, size_t k, const float *xk, const float *qk, size_t rlen, uint64_t r0, uint64_t c0,
                        size_t bpr, size_t spr, bstat *rs, double *va, uint32_t *vn)
{
    job *j = w->j;
    const plan *p = j->p;
    const prof *pf = j->pf;
    size_t blk = p->blk, bl = blk ? blk : rlen;
    kscale ks;
    ks.B = bl;
    ks.bse2 = w->bse2;
    ks.bnf = w->bnf;
    ks.bam = w->bam;
    ks.allpow2 = pf->allpow2;
    if (pf->fam == FAM_PROXY) {
        ks.g = bl;
        ks.S = w->segS + k * bpr;
        ks.Qb = w->segQb + k * bpr;
    } else {
        ks.g = pf->seg;
        ks.S = w->segS + k * spr;
        ks.Qb = w->segQb + k * spr;
    }
    kern_run(w, xk, qk, rlen, &ks, rs, va, vn);
    uint64_t gb = p->colruns ? (c0 + k) * p->nbc + r0 / blk : (r0 + k) * p->nbr + (blk ? c0 / blk : 0);
    for (size_t i = 0; i < bpr; i++) {
        size_t bidx = k * bpr + i;
        double bsc = w->bscale[bidx];
        float bam = w->bam[i];
        double rmse = w->bnf[i] ? sqrt(w->bse2[i] / (double)w->bnf[i]) : NAN;
        if (rmse == 0) w->hb.c[HV_N + S_ZERO]++;
        else if (!(rmse <= DBL_MAX)) w->hb.c[HV_N + S_NONF]++;
        else h_log4(&w->hb, -4 * HV_LO, rmse);
        if (pf->byte_scale) w->hs.c[w->bcode[bidx]]++;
        uint64_t g2 = gb + i;
        if (j->bk_absmax) {
            j->bk_absmax[g2] = bam;
            j->bk_rmse[g2] = (float)rmse;
            j->bk_ratio[g2] = bsc > 0 && bsc <= DBL_MAX ? (float)((double)bam / bsc) : NAN;
            if (j->bk_code) j->bk_code[g2] = w->bcode[bidx];
        }
    }
}

static int do_band(worker *w, uint64_t b, bpart *sl, qs_err *e)
{
    job *j = w->j;
    const plan *p = j->p;
    const prof *pf = j->pf;
    const qs_format *f = pf->f;
    uint64_t r0, c0;
    size_t nr, nc;
    band_geom(p, b, &r0, &nr, &c0, &nc);
    uint64_t start = r0 * p->cols + c0;
    size_t len = nr * nc;
    int mem = p->mode == PM_MEM_T || p->mode == PM_MEM_C;
    const float *x;
    if (mem) x = j->X + start;
    else {
        if (j->serial) pthread_mutex_lock(&j->read_mu);
        int rc = j->rd(j->rctx, start, len, w->x, e);
        if (j->serial) pthread_mutex_unlock(&j->read_mu);
        if (rc) {
            if (!e->msg[0]) qs_fail(e, "read failed at element %llu", (unsigned long long)start);
            return -1;
        }
        x = w->x;
    }
    /* runs */
    size_t nruns = p->colruns ? nc : nr, rlen = p->colruns ? nr : nc;
    const float *xr = x;
    float *qr = w->q;
    if (p->colruns) {
        transpose(x, nr, nc, w->xt);
        xr = w->xt;
        if (mem) transpose(j->Y + start, nr, nc, w->q);
    } else if (mem)
        qr = j->Y + start;
    /* blocks of each run */
    size_t blk = p->blk, bpr = 1, spr = 1;
    if (p->blockstats) {
        bpr = blk ? (rlen + blk - 1) / blk : 1;
        spr = pf->seg ? bpr * (blk / pf->seg) : bpr;
    }
    if (!mem) {
        for (size_t k = 0; k < nruns; k++) {
            uint64_t index0 = p->colruns ? (c0 + k) * p->rows + r0 : (r0 + k) * p->cols + c0;
            const float *xk = xr + k * rlen;
            float *qk = qr + k * rlen;
            if (pf->fam == FAM_HIF4 || pf->fam == FAM_M2X) {
                if (coded_run(w, xk, rlen, index0, qk, k * spr, k * bpr, e)) return -1;
            } else {
                qs_qopts o = pf->o;
                o.index0 += index0;
                if (f->fakeq(f, &o, xk, rlen, qk, e)) return -1;
                if (pf->fam == FAM_PROXY) {
                    size_t bl = blk ? blk : rlen;
                    for (size_t i = 0; i < bpr; i++) {
                        size_t s = i * bl, m = rlen - s < bl ? rlen - s : bl;
                        w->reps[k * bpr + i] = block_rep(w, xk + s, m, pf->finite_rep);
                    }
                }
            }
        }
        if (pf->fam == FAM_PROXY && proxy_scales(w, nruns * bpr, e)) return -1;
    }
    /* kernels.  Rows and columns (2-D): each run's total in lanes by position (rs), and the
    ** element-wise sums of the other axis (va/vn), both in the band partial. */
    int acc2 = p->colacc;
    if (acc2) {
        memset(sl->row_se2, 0, nr * sizeof *sl->row_se2);
        memset(sl->row_nf, 0, nr * sizeof *sl->row_nf);
        memset(sl->col_se2, 0, nc * sizeof *sl->col_se2);
        memset(sl->col_nf, 0, nc * sizeof *sl->col_nf);
    }
    double *ra = p->colruns ? sl->col_se2 : sl->row_se2, *va = p->colruns ? sl->row_se2 : sl->col_se2;
    uint32_t *rn = p->colruns ? sl->col_nf : sl->row_nf, *vn = p->colruns ? sl->row_nf : sl->col_nf;
    bstat rsb, *rs = acc2 ? &rsb : NULL;
    for (size_t k = 0; k < nruns; k++) {
        const float *xk = xr + k * rlen, *qk = qr + k * rlen;
        if (rs) memset(rs, 0, sizeof *rs);
        if (mem || !p->blockstats) {   /* one scale for the run: in-memory modes, element casts */
            double S = 1.0;
            float Q = pf->cast_top;
            if (mem) {
                S = p->mode == PM_MEM_C ? j->colS[c0 + k] : j->memS;
                Q = p->mode == PM_MEM_C ? j->colQ[c0 + k] : j->memQ;
            }
            double Ss = san_S(S);
            uint32_t Qb = san_Q(Q);
            kscale ks = {0, &Ss, &Qb, (d2u(Ss) & 0xfffffffffffffull) == 0, 0, NULL, NULL, NULL};
            kern_run(w, xk, qk, rlen, &ks, rs, va, vn);
        } else
            band_blocks(w, k, xk, qk, rlen, r0, c0, bpr, spr, rs, va, vn);
        if (rs) {
            ra[k] = lanesum(rs->se2);
            rn[k] = (uint32_t)lanesum_i(rs->nf);
        }
    }

    /* band partial */
    const kl *A = &w->acc;
    sl->sx2 = lanesum(A->sx2);
    sl->se2 = lanesum(A->se2);
    sl->se = lanesum(A->se);
    sl->sxq = lanesum(A->sxq);
    sl->sq2 = lanesum(A->sq2);
    sl->srel = lanesum(A->srel);
    sl->maxae = lanemax(A->maxae);
    sl->maxrel = lanemax(A->maxrel);
    sl->nfin = lanesum_i(A->nfin);
    sl->nunder = lanesum_i(A->nunder);
    sl->nclip = lanesum_i(A->nclip);
    sl->nnonf = lanesum_i(A->nnonf);
    sl->nelem = len;
    sl->r0 = r0;
    sl->c0 = c0;
    sl->nr = nr;
    sl->nc = nc;
    memset(&w->acc, 0, sizeof w->acc);
    return 0;
}

/* Merge one band partial into the totals (called in band order, under the mutex). */
static void merge_part(job *j, const bpart *s)
{
    bpart *t = &j->tot;
    t->sx2 += s->sx2;
    t->se2 += s->se2;
    t->se += s->se;
    t->sxq += s->sxq;
    t->sq2 += s->sq2;
    t->srel += s->srel;
    t->maxae = s->maxae > t->maxae ? s->maxae : t->maxae;
    t->maxrel = s->maxrel > t->maxrel ? s->maxrel : t->maxrel;
    t->nfin += s->nfin;
    t->nunder += s->nunder;
    t->nclip += s->nclip;
    t->nnonf += s->nnonf;
    t->nelem += s->nelem;
    if (j->p->colacc) {
        for (size_t i = 0; i < s->nr; i++) {
            j->row_se2[s->r0 + i] += s->row_se2[i];
            j->row_nf[s->r0 + i] += s->row_nf[i];
        }
        for (size_t i = 0; i < s->nc; i++) {
            j->col_se2[s->c0 + i] += s->col_se2[i];
            j->col_nf[s->c0 + i] += s->col_nf[i];
        }
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    job *j = w->j;
    for (;;) {
        if (atomic_load(&j->stop)) break;
        uint64_t b = atomic_fetch_add(&j->next, 1);
        if (b >= j->p->nbands) break;
        pthread_mutex_lock(&j->mu);
        while (!atomic_load(&j->stop) && b >= j->frontier + j->wsize) pthread_cond_wait(&j->cv, &j->mu);
        pthread_mutex_unlock(&j->mu);
        if (atomic_load(&j->stop)) break;
        bpart *sl = &j->slots[b % j->wsize];
        w->err.msg[0] = 0;
        if (do_band(w, b, sl, &w->err)) {
            record_error(j, b, w->err.msg);
            break;
        }
        pthread_mutex_lock(&j->mu);
        sl->ready = 1;
        int moved = 0;
        while (j->frontier < j->p->nbands && j->slots[j->frontier % j->wsize].ready) {
            bpart *s = &j->slots[j->frontier % j->wsize];
            merge_part(j, s);
            j->done_elems += s->nelem;
            s->ready = 0;
            j->frontier++;
            moved = 1;
        }
        if (moved) pthread_cond_broadcast(&j->cv);
        uint64_t done = j->done_elems;
        pthread_mutex_unlock(&j->mu);
        if (w->id == 0 && j->progress && j->progress(j->pctx, j->pbase + done, j->ptotal)) {
            pthread_mutex_lock(&j->mu);
            j->cancelled = 1;
            pthread_mutex_unlock(&j->mu);
            record_error(j, 0, "cancelled");
            break;
        }
    }
    return NULL;
}

/* ---- entry point ---------------------------------------------------------------------------- */

static void hist_set(qs_hist *h, int kind, int nbins, double lo, double hi)
{
    h->kind = kind;
    h->nbins = nbins;
    h->lo = lo;
    h->hi = hi;
}

static int hist_alloc(qs_hist *h)
{
    if (h->nbins == 0) return 0;
    h->counts = calloc((size_t)h->nbins, sizeof *h->counts);
    return h->counts ? 0 : -1;
}

static void hist_add(qs_hist *h, const hacc *a)
{
    if (!h->counts || !a->c) return;
    for (int k = 0; k < HCOPIES; k++) {
        const uint64_t *c = a->c + (size_t)k * (size_t)(a->n + NSLOT);
        for (int i = 0; i < h->nbins; i++) h->counts[i] += c[i];
        h->zero += c[a->n + S_ZERO];
        h->under += c[a->n + S_UNDER];
        h->over += c[a->n + S_OVER];
        h->nonfinite += c[a->n + S_NONF];
    }
}

static void worker_free(worker *w)
{
    free(w->x); free(w->xt); free(w->q); free(w->codes); free(w->meta);
    free(w->reps); free(w->pcodes); free(w->pmeta); free(w->pS); free(w->pQ);
    free(w->segS); free(w->segQb); free(w->bcode); free(w->bscale); free(w->bse2); free(w->bnf); free(w->bam);
    free(w->hv.c); free(w->ha.c); free(w->hr.c); free(w->hu.c); free(w->hb.c); free(w->hs.c);
}

static int worker_alloc(worker *w, const plan *p, const prof *pf)
{
    size_t L = p->max_len ? p->max_len : 1, nb = p->max_blocks ? p->max_blocks : 1;
    size_t ns = p->max_segs ? p->max_segs : 1, mb = pf->f->meta_bytes > 0 ? (size_t)pf->f->meta_bytes : 1;
    int mem = p->mode == PM_MEM_T || p->mode == PM_MEM_C;
    size_t run = p->colruns ? p->max_nr : p->max_nc;
    if (!mem && !(w->x = malloc(L * sizeof(float)))) return -1;
    if (p->colruns && !(w->xt = malloc(L * sizeof(float)))) return -1;
    if (!(w->q = malloc(L * sizeof(float)))) return -1;
    if (pf->fam == FAM_HIF4 || pf->fam == FAM_M2X) {
        size_t nbr = run / (p->blk ? p->blk : 1) + 1;
        if (!(w->codes = malloc((run ? run : 1) * sizeof(uint32_t))) || !(w->meta = malloc(nbr * mb))) return -1;
    }
    if (!(w->reps = malloc(nb * sizeof(float))) || !(w->pcodes = malloc(nb * sizeof(uint32_t))) ||
        !(w->pmeta = malloc(nb * mb)) || !(w->pS = malloc(nb * sizeof(float))) ||
        !(w->pQ = malloc(nb * sizeof(float))) || !(w->bcode = malloc(nb)) ||
        !(w->bscale = malloc(nb * sizeof(double))) || !(w->segS = malloc(ns * sizeof(double))) ||
        !(w->segQb = malloc(ns * sizeof(uint32_t))) || !(w->bse2 = malloc(nb * sizeof(double))) ||
        !(w->bnf = malloc(nb * sizeof(uint64_t))) || !(w->bam = malloc(nb * sizeof(float))))
        return -1;
    hacc *h[6] = {&w->hv, &w->ha, &w->hr, &w->hu, &w->hb, &w->hs};
    int n[6] = {HV_N, HV_N, HR_N, HU_N, HV_N, 256};
    for (int k = 0; k < 6; k++) {
        h[k]->n = n[k];
        if (!(h[k]->c = calloc(HCOPIES * ((size_t)n[k] + NSLOT), sizeof(uint64_t)))) return -1;
    }
    return 0;
}

/* Progress + cancellation from the calling thread outside the band pass. */
static int tick(job *j, uint64_t done, qs_err *e)
{
    if (j->progress && j->progress(j->pctx, done, j->ptotal)) {
        j->cancelled = 1;
        return qs_fail(e, "cancelled");
    }
    return 0;
}

static int read_chunked(job *j, uint64_t n, float *dst, float *amax, uint64_t pbase, qs_err *e)
{
    float m = 0;
    for (uint64_t s = 0; s < n;) {
        size_t k = n - s > BAND ? BAND : (size_t)(n - s);
        float *buf = dst + (dst == j->X ? s : 0);
        e->msg[0] = 0;
        if (j->rd(j->rctx, s, k, buf, e)) {
            if (!e->msg[0]) qs_fail(e, "read failed at element %llu", (unsigned long long)s);
            return -1;
        }
        for (size_t i = 0; i < k; i++) {
            float v = fabsf(buf[i]);
            if (v > m && v != INFINITY) m = v;
        }
        s += k;
        if (tick(j, pbase + s, e)) return -1;
    }
    *amax = m;
    return 0;
}

int qs_analyze(const qs_apply *a, uint64_t rows, uint64_t cols, qs_an_read rd, void *rctx, int read_threadsafe,
               const qs_analyze_opts *opts, qs_analysis *out, qs_err *e)
{
    qs_analyze_opts od;
    memset(&od, 0, sizeof od);
    if (opts) od = *opts;
    memset(out, 0, sizeof *out);
    if (!a || !a->f) return qs_fail(e, "no format");
    if (cols && rows > UINT64_MAX / cols) return qs_fail(e, "tensor too large");
    uint64_t n = rows * cols;
    if (n && !rd) return qs_fail(e, "no read function");
    if (!(od.rel_floor >= 0) || isinf(od.rel_floor)) return qs_fail(e, "relative-error floor must be >= 0");
    double rel_floor = od.rel_floor > 0 ? od.rel_floor : QS_REL_FLOOR_DEFAULT;

    qs_qopts o = a->o;
    if (qs_qopts_check(a->f, &o, e)) return -1;
    if (a->gran == QS_GRAN_ROW || a->gran == QS_GRAN_COL || a->gran == QS_GRAN_TENSOR) {
        if (a->f->block != 0)
            return qs_fail(e, "format %s has fixed blocks: granularity '%s' needs int8 or int4", a->f->name,
                           qs_gran_name(a->gran));
        o.block = 0;
    }

    job j;
    memset(&j, 0, sizeof j);
    prof pf;
    plan p;
    worker *w = NULL;
    int T = 0, rc = -1, sync_init = 0;
    j.rd = rd;
    j.rctx = rctx;
    j.serial = !read_threadsafe;
    j.progress = od.progress;
    if (od.value_hist) {
        const qs_hist *vh = od.value_hist;
        uint64_t tot = vh->zero + vh->under + vh->over + vh->nonfinite;
        for (int i = 0; vh->counts && i < vh->nbins; i++) tot += vh->counts[i];
        if (vh->kind != 0 || vh->nbins != HV_N || vh->lo != HV_LO || vh->hi != HV_HI || !vh->counts || tot != n)
            return qs_fail(e, "the given value histogram is not this tensor's (%llu values for %llu)",
                           (unsigned long long)tot, (unsigned long long)n);
        j.novalue = 1;
    }
    j.pctx = od.progress_ctx;

    /* absmax: given, or one reading pass */
    int prepass = !od.absmax_known && n > 0;
    int memmode = 0;
    if (prof_init(&pf, a, &o, e)) return -1;
    if (plan_init(&p, &pf, a, rows, cols, e)) return -1;
    memmode = p.mode == PM_MEM_T || p.mode == PM_MEM_C;
    j.ptotal = n * (uint64_t)(1 + prepass + memmode);
    float amax = 0;
    if (prepass) {
        float *buf = malloc((n < BAND ? (size_t)n : BAND) * sizeof(float));
        if (!buf) return qs_fail(e, "out of memory");
        int r = read_chunked(&j, n, buf, &amax, 0, e);
        free(buf);
        if (r) return -1;
    } else if (od.absmax_known) {
        if (!(od.absmax >= 0) || !(od.absmax <= FLT_MAX)) return qs_fail(e, "absmax must be finite and >= 0");
        amax = (float)od.absmax;
    }
    if (!strcmp(a->f->family, "nvfp4") && !(o.tensor_scale > 0)) o.tensor_scale = amax > 0 ? amax : 0;
    pf.o = o;
    j.F = rel_floor * (double)amax;
    j.pf = &pf;
    j.p = &p;

    /* outputs */
    qs_analysis *an = out;
    an->rows = rows;
    an->cols = cols;
    hist_set(&an->value, 0, HV_N, HV_LO, HV_HI);
    hist_set(&an->abs_err, 0, HV_N, HV_LO, HV_HI);
    hist_set(&an->rel_err, 0, HR_N, HR_LO, HR_HI);
    hist_set(&an->ulp_err, 1, HU_N, -1, 1);
    hist_set(&an->scale_code, 2, pf.byte_scale ? 256 : 0, 0, 256);
    hist_set(&an->block_err, 0, p.nblocks ? HV_N : 0, HV_LO, HV_HI);
    if (hist_alloc(&an->value) || hist_alloc(&an->abs_err) || hist_alloc(&an->rel_err) || hist_alloc(&an->ulp_err) ||
        hist_alloc(&an->scale_code) || hist_alloc(&an->block_err))
        goto oom;
    an->nblocks = p.nblocks;
    if (od.blocks && p.nblocks) {
        size_t nb = (size_t)p.nblocks;
        if (!(an->block_absmax = malloc(nb * sizeof(float))) || !(an->block_ratio = malloc(nb * sizeof(float))) ||
            !(an->block_rmse = malloc(nb * sizeof(float))))
            goto oom;
        if (pf.byte_scale && !(an->block_scale_code = malloc(nb))) goto oom;
        j.bk_absmax = an->block_absmax;
        j.bk_ratio = an->block_ratio;
        j.bk_rmse = an->block_rmse;
        j.bk_code = an->block_scale_code;
    }
    if (p.colacc && n) {
        if (!(j.row_se2 = calloc((size_t)rows, sizeof(double))) || !(j.row_nf = calloc((size_t)rows, sizeof(uint32_t))) ||
            !(j.col_se2 = calloc((size_t)cols, sizeof(double))) || !(j.col_nf = calloc((size_t)cols, sizeof(uint32_t))))
            goto oom;
    }
    if (p.twod && n) {
        if (!(an->row_rmse = malloc((size_t)rows * sizeof(float))) || !(an->col_rmse = malloc((size_t)cols * sizeof(float))))
            goto oom;
    }

    /* threads and the window */
    T = od.threads < 1 ? 1 : od.threads > MAX_THREADS ? MAX_THREADS : od.threads;
    if ((uint64_t)T > p.nbands) T = p.nbands ? (int)p.nbands : 1;
    j.nthreads = T;
    j.wsize = 2 * (uint64_t)T;
    if (pthread_mutex_init(&j.mu, NULL)) { qs_fail(e, "cannot create a mutex"); goto fail; }
    if (pthread_mutex_init(&j.read_mu, NULL)) { pthread_mutex_destroy(&j.mu); qs_fail(e, "cannot create a mutex"); goto fail; }
    if (pthread_cond_init(&j.cv, NULL)) {
        pthread_mutex_destroy(&j.mu);
        pthread_mutex_destroy(&j.read_mu);
        qs_fail(e, "cannot create a condition variable");
        goto fail;
    }
    sync_init = 1;
    if (!(j.slots = calloc((size_t)j.wsize, sizeof *j.slots))) goto oom;
    if (p.colacc)
        for (uint64_t s = 0; s < j.wsize; s++) {
            bpart *sl = &j.slots[s];
            size_t nr = p.max_nr ? p.max_nr : 1, nc = p.max_nc ? p.max_nc : 1;
            if (!(sl->row_se2 = malloc(nr * sizeof(double))) || !(sl->row_nf = malloc(nr * sizeof(uint32_t))) ||
                !(sl->col_se2 = malloc(nc * sizeof(double))) || !(sl->col_nf = malloc(nc * sizeof(uint32_t))))
                goto oom;
        }
    if (!(w = calloc((size_t)T, sizeof *w))) goto oom;
    for (int t = 0; t < T; t++) {
        w[t].j = &j;
        w[t].id = t;
        w[t].simd = MET_X86 ? qs_simd_level() : QS_SIMD_SCALAR;
        if (worker_alloc(&w[t], &p, &pf)) goto oom;
    }

    /* in-memory modes: the whole tensor, fake-quantized first */
    if (memmode && n) {
        if (n > SIZE_MAX / sizeof(float)) { qs_fail(e, "tensor too large"); goto fail; }
        j.X = malloc((size_t)n * sizeof(float));
        j.Y = malloc((size_t)n * sizeof(float));
        if (!j.X || !j.Y) goto oom;
        float am2;
        if (read_chunked(&j, n, j.X, &am2, n * (uint64_t)prepass, e)) goto fail;
        const qs_format *f = pf.f;
        if (p.mode == PM_MEM_T) {
            if (f->fakeq(f, &o, j.X, (size_t)n, j.Y, e)) goto fail;
            w[0].reps[0] = block_rep(&w[0], j.X, (size_t)n, pf.finite_rep);
            if (proxy_scales(&w[0], 1, e)) goto fail;
            j.memS = w[0].pS[0];
            j.memQ = w[0].pQ[0];
        } else {
            float *cx = malloc((size_t)rows * sizeof(float)), *cy = malloc((size_t)rows * sizeof(float));
            j.colS = malloc((size_t)cols * sizeof(double));
            j.colQ = malloc((size_t)cols * sizeof(float));
            if (!cx || !cy || !j.colS || !j.colQ) { free(cx); free(cy); goto oom; }
            int bad = 0;
            for (uint64_t c = 0; c < cols && !bad; c++) {
                for (uint64_t i = 0; i < rows; i++) cx[i] = j.X[i * cols + c];
                qs_qopts oc = o;
                oc.index0 += c * rows;
                if (f->fakeq(f, &oc, cx, (size_t)rows, cy, e)) bad = 1;
                for (uint64_t i = 0; i < rows; i++) j.Y[i * cols + c] = cy[i];
                w[0].reps[c] = block_rep(&w[0], cx, (size_t)rows, pf.finite_rep);
            }
            free(cx);
            free(cy);
            if (bad || proxy_scales(&w[0], (size_t)cols, e)) goto fail;
            for (uint64_t c = 0; c < cols; c++) {
                j.colS[c] = w[0].pS[c];
                j.colQ[c] = w[0].pQ[c];
            }
            if (j.bk_absmax)
                for (uint64_t c = 0; c < cols; c++) j.bk_absmax[c] = w[0].reps[c];
        }
    }

    /* the band pass */
    j.pbase = n * (uint64_t)(prepass + memmode);
    if (p.nbands) {
        int started = 1;
        for (int t = 1; t < T; t++) {
            if (pthread_create(&w[t].th, NULL, worker_main, &w[t]) != 0) {
                record_error(&j, 0, "cannot create a worker thread");
                break;
            }
            started++;
        }
        if (!atomic_load(&j.stop)) worker_main(&w[0]);
        for (int t = 1; t < started; t++) pthread_join(w[t].th, NULL);
        if (j.failed) {
            memcpy(e->msg, j.err.msg, sizeof e->msg);
            goto fail;
        }
        if (tick(&j, j.ptotal, e)) goto fail;   /* the last bands may have been merged by another thread */
        if (j.frontier != p.nbands) { qs_fail(e, "internal error: %llu of %llu bands merged",
                                              (unsigned long long)j.frontier, (unsigned long long)p.nbands); goto fail; }
    }

    /* results */
    {
        const bpart *t = &j.tot;
        qs_metrics *m = &an->m;
        m->n = n;
        m->n_finite = t->nfin;
        m->rel_floor = rel_floor;
        m->sum_x2 = t->sx2;
        m->sum_e2 = t->se2;
        if (t->nfin) {
            double nf = (double)t->nfin;
            m->mse = t->se2 / nf;
            m->rmse = sqrt(m->mse);
            if (t->se2 == 0) {
                m->sqnr_db = m->eff_bits_energy = m->eff_bits_sqnr = INFINITY;
            } else {
                m->sqnr_db = 10.0 * log10(t->sx2 / t->se2);
                m->eff_bits_energy = -0.5 * log2(t->se2 / t->sx2);
                m->eff_bits_sqnr = (m->sqnr_db - 1.76) / 6.02;
            }
            m->max_abs_err = t->maxae;
            m->max_rel_err = t->maxrel;
            m->mean_rel_err = t->srel / nf;
            m->mean_err = t->nnonf ? NAN : t->se / nf;
            m->cosine = t->nnonf || !(t->sx2 > 0) || !(t->sq2 > 0) ? NAN : t->sxq / (sqrt(t->sx2) * sqrt(t->sq2));
            m->underflow_frac = (double)t->nunder / nf;
            m->clip_frac = (double)t->nclip / nf;
            m->nonfinite_frac = (double)t->nnonf / nf;
        } else {
            m->mse = m->rmse = m->sqnr_db = m->eff_bits_energy = m->eff_bits_sqnr = NAN;
            m->max_abs_err = m->max_rel_err = m->mean_rel_err = m->mean_err = m->cosine = NAN;
        }
        const qs_format *f = pf.f;
        m->bits_per_elem = f->elem_bits;
        if (n && p.nblocks) m->bits_per_elem += f->meta_bits * (double)p.nblocks / (double)n;
        if (n && !strcmp(f->family, "nvfp4")) m->bits_per_elem += 32.0 / (double)n;

        for (int k = 0; k < T; k++) {
            if (!j.novalue) hist_add(&an->value, &w[k].hv);
            hist_add(&an->abs_err, &w[k].ha);
            hist_add(&an->rel_err, &w[k].hr);
            hist_add(&an->ulp_err, &w[k].hu);
            hist_add(&an->block_err, &w[k].hb);
            hist_add(&an->scale_code, &w[k].hs);
        }
        if (j.novalue) {
            const qs_hist *vh = od.value_hist;
            memcpy(an->value.counts, vh->counts, (size_t)vh->nbins * sizeof *vh->counts);
            an->value.zero = vh->zero;
            an->value.under = vh->under;
            an->value.over = vh->over;
            an->value.nonfinite = vh->nonfinite;
        }
        if (memmode && n) {
            /* one block per tensor or per column: statistics from the totals */
            uint64_t nb = p.mode == PM_MEM_T ? 1 : cols;
            for (uint64_t b = 0; b < nb; b++) {
                double se2 = p.mode == PM_MEM_T ? t->se2 : j.col_se2[b];
                uint64_t nf = p.mode == PM_MEM_T ? t->nfin : j.col_nf[b];
                double S = p.mode == PM_MEM_T ? j.memS : j.colS[b];
                float bam = p.mode == PM_MEM_T ? amax : w[0].reps[b];
                double rmse = nf ? sqrt(se2 / (double)nf) : NAN;
                qs_hist *h = &an->block_err;
                if (rmse == 0) h->zero++;
                else if (!(rmse <= DBL_MAX)) h->nonfinite++;
                else {
                    int i = log4bin(rmse) - 4 * HV_LO;
                    if (i < 0) h->under++;
                    else if (i >= h->nbins) h->over++;
                    else h->counts[i]++;
                }
                if (j.bk_absmax) {
                    j.bk_absmax[b] = bam;
                    j.bk_rmse[b] = (float)rmse;
                    j.bk_ratio[b] = S > 0 && S <= DBL_MAX ? (float)((double)bam / S) : NAN;
                }
            }
        }
        if (p.twod && n) {
            for (uint64_t r = 0; r < rows; r++)
                an->row_rmse[r] = j.row_nf[r] ? (float)sqrt(j.row_se2[r] / j.row_nf[r]) : NAN;
            for (uint64_t c = 0; c < cols; c++)
                an->col_rmse[c] = j.col_nf[c] ? (float)sqrt(j.col_se2[c] / j.col_nf[c]) : NAN;
        }
    }
    rc = 0;
    goto done;
oom:
    qs_fail(e, "out of memory in the analysis");
fail:
    rc = -1;
done:
    if (w) {
        for (int t = 0; t < T; t++) worker_free(&w[t]);
        free(w);
    }
    if (j.slots)
        for (uint64_t s = 0; s < j.wsize; s++) {
            free(j.slots[s].row_se2); free(j.slots[s].row_nf); free(j.slots[s].col_se2); free(j.slots[s].col_nf);
        }
    free(j.slots);
    free(j.row_se2); free(j.row_nf); free(j.col_se2); free(j.col_nf);
    free(j.X); free(j.Y); free(j.colS); free(j.colQ);
    if (sync_init) {
        pthread_cond_destroy(&j.cv);
        pthread_mutex_destroy(&j.read_mu);
        pthread_mutex_destroy(&j.mu);
    }
    if (rc) qs_analysis_free(out);
    return rc;
}

void qs_analysis_free(qs_analysis *an)
{
    if (!an) return;
    free(an->value.counts); free(an->abs_err.counts); free(an->rel_err.counts);
    free(an->ulp_err.counts); free(an->scale_code.counts); free(an->block_err.counts);
    free(an->block_scale_code); free(an->block_absmax); free(an->block_ratio); free(an->block_rmse);
    free(an->row_rmse); free(an->col_rmse);
    memset(an, 0, sizeof *an);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

/* Finite numbers as JSON reals; +-Inf as the strings "inf" / "-inf"; NaN as null. */
static json_t *jnum(double v)
{
    if (isnan(v)) return json_null();
    if (isinf(v)) return json_string(v > 0 ? "inf" : "-inf");
    return json_real(v);
}

static json_t *metrics_obj(const qs_metrics *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "n", json_integer((json_int_t)m->n));
    json_object_set_new(o, "n_finite", json_integer((json_int_t)m->n_finite));
#define R(k) json_object_set_new(o, #k, jnum(m->k))
    R(mse); R(rmse); R(sqnr_db); R(eff_bits_energy); R(eff_bits_sqnr); R(max_abs_err); R(max_rel_err);
    R(mean_rel_err); R(rel_floor); R(mean_err); R(cosine); R(underflow_frac); R(clip_frac); R(nonfinite_frac);
    R(bits_per_elem); R(sum_x2); R(sum_e2);
#undef R
    return o;
}

char *qs_metrics_json(const qs_metrics *m)
{
    json_t *o = metrics_obj(m);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(o);
    return s;
}

static json_t *hist_obj(const qs_hist *h)
{
    if (h->nbins <= 0 || !h->counts) return json_null();
    static const char *const scale[] = {"log2", "linear", "code"};
    json_t *o = json_object(), *ed = json_array(), *ct = json_array();
    json_object_set_new(o, "scale", json_string(h->kind >= 0 && h->kind < 3 ? scale[h->kind] : "?"));
    for (int i = 0; i <= h->nbins; i++) {
        double v = h->lo + (h->hi - h->lo) * (double)i / (double)h->nbins;
        json_array_append_new(ed, h->kind == 2 ? json_integer((json_int_t)v) : json_real(v));
    }
    for (int i = 0; i < h->nbins; i++) json_array_append_new(ct, json_integer((json_int_t)h->counts[i]));
    json_object_set_new(o, "edges", ed);
    json_object_set_new(o, "counts", ct);
    json_object_set_new(o, "zero", json_integer((json_int_t)h->zero));
    json_object_set_new(o, "under", json_integer((json_int_t)h->under));
    json_object_set_new(o, "over", json_integer((json_int_t)h->over));
    json_object_set_new(o, "nonfinite", json_integer((json_int_t)h->nonfinite));
    return o;
}

char *qs_hists_json(const qs_analysis *an)
{
    json_t *o = json_object();
    json_object_set_new(o, "value", hist_obj(&an->value));
    json_object_set_new(o, "abs_err", hist_obj(&an->abs_err));
    json_object_set_new(o, "rel_err", hist_obj(&an->rel_err));
    json_object_set_new(o, "ulp_err", hist_obj(&an->ulp_err));
    json_object_set_new(o, "scale_code", hist_obj(&an->scale_code));
    json_object_set_new(o, "block_err", hist_obj(&an->block_err));
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}
