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
** magnitude bits, NaN and Inf included, which make a NaN block).  MX and NVFP4 get the code, the
** element scale S and the saturation level Qtop from their scale rule (qs_mx_fakeq_scales, along
** with the fake-quantization; qs_nvfp4_block_scales); int8/int4 encode one representative per block
** at block size 1 and decode the element codes "1.0" and "largest".  The tests check the codes
** against a full encode for every scale rule and variant.  HiF4 and M2XFP scales depend on every element: HiF4 takes q and the
** metadata from qs_hif4_fakeq_meta_run, M2XFP runs encode + decode (both bit-identical to fakeq, as
** tested in tests/unit/test_format_*.c).
**
** The per-value kernel (AVX-512, portable path elem() with the same bits) works on chunks of CH run
** positions in two passes of 16 lanes: sums, counts and block/row statistics; then the bins of the
** value and error histograms, stored relative to each histogram's window and counted by hs_count
** (bit-sliced adder trees; values outside the window directly).
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
#include "../store/json_out.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MET_X86 1
#else
#define MET_X86 0
#endif

#define BAND ((size_t)1 << 17)     /* elements per band: x and q of a band stay in L2; changing it changes bits */
#define LANES 16
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

/* Ceilings of (2^(j/4) - 1) 2^23: the edges 2^(j/4) against a float's 23-bit significand field. */
#define TF1 0x1837f1u
#define TF2 0x3504f4u
#define TF3 0x5744fdu

/* floor(log2 a) for a >= 0 (0 -> -1023). */
static inline int ilog2d(double a) { return (int)(d2u(a) >> 52 & 0x7ff) - 1023; }

/* ---- the format's profile ---------------------------------------------------------------- */

typedef struct prof {
    const qs_format *f;
    qs_qopts o;              /* resolved: block, NVFP4 tensor scale */
    int fam;
    int byte_scale;          /* metadata starts with a one-byte scale code */
    int mx;                  /* an MX format (scales from qs_mx_fakeq_scales) */
    int finite_rep;          /* int: block representative = largest finite |x| */
    int m2x_es;
    uint32_t code_one, code_top;
    float cast_top;          /* casts: largest finite value */
    int elo, ehi;            /* element grid spacing sp[E - elo] for binades E, clamped */
    double sp[300], isp[300];   /* spacing and its inverse (powers of two) */
    float isp32[300];        /* 32 / spacing (tapered grids: the kernel's table) */
    float Ff;                /* relative-error floor, fl32 (at least the smallest subnormal) */
    int tapered, mb;         /* tapered: spacing from the table; else sp[E] = 2^(E - mb) */
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
    for (int E = p->elo; E <= p->ehi; E++) {
        p->isp[E - p->elo] = 1.0 / p->sp[E - p->elo];
        p->isp32[E - p->elo] = (float)(32.0 * p->isp[E - p->elo]);
    }
    return 0;
}

static int prof_init1(prof *p, const qs_apply *a, const qs_qopts *o, qs_err *e)
{
    const qs_format *f = a->f;
    memset(p, 0, sizeof *p);
    p->f = f;
    p->o = *o;
    qs_family fam = f->family;
    if (f->block == 1) {
        p->fam = FAM_CAST;
        p->cast_top = (float)f->max_finite;
        if (f->ebits > 0)
            grid_minifloat(p, ilog2d(f->min_normal), ilog2d(f->max_finite), f->mbits);
        else if (f->code_value) {
            if (grid_table(p)) return qs_fail(e, "format %s: cannot derive its grid", f->name);
        } else
            return qs_fail(e, "format %s: unknown element grid", f->name);
        return 0;
    }
    if (fam == QS_FAM_INT) {
        p->fam = FAM_PROXY;
        p->finite_rep = 1;
        p->code_one = 1;
        p->code_top = (1u << (f->elem_bits - 1)) - 1;
        grid_uniform(p, 1.0);
        return 0;
    }
    if (fam == QS_FAM_MX || fam == QS_FAM_NVFP4) {
        p->fam = FAM_PROXY;
        p->byte_scale = 1;
        p->mx = fam == QS_FAM_MX;
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
    if (fam == QS_FAM_HIFLOAT && f->block == QS_HIF4_UNIT && f->meta_bytes == QS_HIF4_META) {
        p->fam = FAM_HIF4;
        p->byte_scale = 1;
        p->seg = 4;
        grid_uniform(p, 0.25);
        return 0;
    }
    if (fam == QS_FAM_M2XFP) {
        p->fam = FAM_M2X;
        p->byte_scale = 1;
        p->seg = 8;
        p->m2x_es = o->m2x == QS_M2X_ES;
        grid_minifloat(p, 0, 2, 1);
        return 0;
    }
    return qs_fail(e, "format %s: family '%s' is not supported by the analysis", f->name, qs_family_name(fam));
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

/* Counts: n bins then NSLOT special slots.  Zero and non-finite are filled from the counters at the
** end (no per-value work); under and over by the values that fall outside the bins. */
enum { S_ZERO = 0, S_UNDER, S_OVER, S_NONF, NSLOT };

/* The kernels bin in "raw" coordinates, shifted into a histogram's bins by its offset: log2
** histograms 4 * (biased float32 exponent) + the quarter, i.e. floor(4 log2 v) + 508 (a subnormal's
** true logarithm, which is below 0); ulp floor(32 v), clamped to [-64, 64].  RAW_SENT: not binned by
** this histogram. */
#define RAW_SENT INT32_MIN
#define RAW_OFF_V (4 * -127 - 4 * HV_LO)   /* value, abs_err, block_err */
#define RAW_OFF_R (4 * -127 - 4 * HR_LO)

typedef struct hacc {
    uint64_t *c;             /* n + NSLOT */
    int n, off;              /* bins; raw -> bin index */
} hacc;

static inline void h_raw(hacc *h, int32_t raw, uint64_t k)
{
    int64_t i = (int64_t)raw + h->off;
    h->c[i < 0 ? h->n + S_UNDER : i >= h->n ? (int64_t)h->n + S_OVER : i] += k;
}

/* Raw log2 bin of a float >= 0 from its bits, exact (subnormals by their true logarithm; 0, e.g. a
** relative error that underflowed, below every histogram). */
static inline int32_t raw_log4f(uint32_t b)
{
    uint32_t m;
    int32_t E;
    if (b == 0) return -100000;
    if (b >= 0x00800000u) {
        m = b & 0x7fffffu;
        E = (int32_t)(b >> 23);
    } else {                 /* b * 2^-149: normalise; the significand has at most 23 bits */
        int k = 31 - __builtin_clz(b);
        m = (b << (23 - k)) & 0x7fffffu;
        E = k - 22;
    }
    return 4 * E + (m >= TF1) + (m >= TF2) + (m >= TF3);
}

/* Window counters (AVX-512 path): a histogram's bins [base, base + 32 ns) counted as 16 lanes x 32
** bit-sliced counters per stream of 32 bins: each value adds the one-hot word 1 << (raw - base - 32 s)
** in its lane; 16 words at a time go through a carry-save adder tree (Harley-Seal) into planes 0..3
** (weights 1, 2, 4, 8), whose carry-outs (weight 16) go 16 at a time through a second tree into
** planes 4..7, whose carry-out ripples into planes 8.. (plane p has weight 2^p throughout).  A value
** outside the window is counted directly.  Each worker chooses a window from the first values it
** bins, widens or moves it when it misses too many (hs_count) and flushes it into the counts at the
** end: the counts are the same for any window, only the speed differs. */
#define CH 1024   /* values per kernel chunk (a multiple of 512): the bin arrays stay in L1 */
#define HS_NS 4
#define HS_PL 24
typedef struct hwin {
    uint32_t pl[HS_NS][HS_PL][16] __attribute__((aligned(64)));
    int32_t base;
    int ns, set, top;        /* streams; window chosen; planes 0..top-1 may be non-zero */
    int nsw;                 /* streams of the next log2 window (2, more after many misses) */
    uint32_t buf[HS_NS][16][16] __attribute__((aligned(64)));   /* carry words of weight 16, waiting */
    int nbuf;
    uint64_t words;          /* words per lane since the last flush */
    uint64_t nout;           /* values counted outside the window since then */
    int32_t gbase;           /* the kernel's current chunk: bins stored relative to gbase, */
    uint32_t gwidth;         /* flagged in om (a bit per value) when >= gwidth (hwin_arm) */
    uint16_t om[CH / 16 + 32];   /* + padding for the 32-mask loads */
} hwin;
#define D_SENT INT32_MAX     /* a window-relative bin: not binned (no one-hot: shifts >= 32 give 0) */

/* ---- accumulators --------------------------------------------------------------------------- */

/* Lane accumulators: lane L sums the values at run positions = L (mod LANES), each lane a sequential
** sum, combined at the end in a fixed order (lanesum).  Counts and maxima are order-independent. */
typedef struct kl {
    double sx2[LANES], se2[LANES], se[LANES], sxe[LANES], srel[LANES];
    double seu[LANES], sec[LANES], ser[LANES];   /* finite e^2 of underflows, clips, the rest */
    float srelf[LANES];      /* relative errors summed in float32 within a chunk of CH run positions */
    float maxae[LANES], maxrel[LANES];
    uint64_t nfin, nunder, nclip, nnonf;
} kl;

typedef struct bstat {       /* one block or run: squared-error lanes, finite inputs, largest |x| */
    double se2[LANES];
    uint64_t nf;
    float amax;
} bstat;

/* Constants of one segment (values sharing one element scale S). */
typedef struct kpar {
    float Ff;                /* relative-error floor (fl32, at least the smallest subnormal) */
    uint32_t qtop;           /* float bits of the saturation level */
    float Sf;                /* element scale (a float32 value) */
    int SE;                  /* floor(log2 S) */
    uint32_t SM;             /* S's normalised 23-bit significand field */
    int elo, ehi;
    const float *isp32;      /* 32 / grid spacing per binade, elo..ehi (tapered grids) */
    int tapered, mb;         /* else 32 / spacing = 2^(mb + 5 - E) */
    int novalue;             /* the value histogram was given (opts.value_hist): skip its bins */
} kpar;

/* ---- job, workers --------------------------------------------------------------------------- */

typedef struct bpart {       /* one band's partial results, merged in band order */
    double sx2, se2, se, sxe, srel;
    double seu, sec, ser;
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
    float *kSf;              /* per segment of the band (seg_put): element scale, floor(log2 S), its */
    int32_t *kSE;            /* significand, saturation level bits (padded by 16 for the kernel's loads) */
    uint32_t *kSM, *kQb;
    int pow2, se0;           /* every segment of the band so far: S a power of two; S = 1 */
    double *bse2;            /* per block of the current run */
    uint64_t *bnf;
    float *bam;
    uint8_t *bcode;
    double *bscale;
    uint32_t *bslot;         /* block_err slots of a run's blocks */
    kl acc;                  /* the band's lanes */
    int simd;                /* qs_simd_level() */
    int32_t bv[CH], ba[CH], br[CH], bu[CH];   /* raw bins of a chunk */
    hwin *wv, *wa, *wr, *wu;                  /* AVX-512 window counters */
    /* histograms */
    hacc hv, ha, hr, hu, hb, hs;
    uint32_t *hb4, *hs4;     /* block_err and scale-code counts of the band, 4 interleaved copies */
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
    /* scaled casts (cscale): per scale, the cast's (s, inv) and the kernel's S = inv and saturation level */
    int cscale;
    float *cs, *ci, *cSf;
    int32_t *cSE;
    uint32_t *cSM, *cQb;
    int cpow2, cse0;
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

/* Lanes L and L + 8 first, then ((0+1)+(2+3))+((4+5)+(6+7)): the AVX-512 reduction's order. */
static inline double lanesum(const double *s)
{
    double t[8];
    for (int L = 0; L < 8; L++) t[L] = s[L] + s[L + 8];
    return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
}

static inline double lanemaxf(const float *s)
{
    float m = 0;
    for (int L = 0; L < LANES; L++) m = s[L] > m ? s[L] : m;
    return m;
}

/* floor(log2(|x| / S)) clamped to the grid's binades, exact: from the double bits of |x| (every float,
** subnormals included, is a normal double) against S's exponent and significand. */
static inline int grid_binade(const kpar *P, float ax)
{
    uint64_t xb = d2u((double)ax);
    int Et = (int)(xb >> 52) - 1023 - P->SE - ((xb & 0xfffffffffffffull) < ((uint64_t)P->SM << 29));
    return Et < P->elo ? P->elo : Et > P->ehi ? P->ehi : Et;
}

/* The three error bins of a value with a non-zero finite error (shared by the portable path and the
** AVX-512 path's rare exact fix-ups): fe = fl32(e), relf = fl32(|fe| / den), 32 x the ulp error
** fl32(fl32(fe / S) * 32 / spacing) (a power-of-two spacing scales exactly, as ldexpf and vscalefps
** do, whatever the exponent: bf16's 2^-133 spacing has no float32 inverse). */
static inline void err_bins1(const kpar *P, float ax, float fe, float relf, int32_t *ba, int32_t *br, int32_t *bu)
{
    *ba = raw_log4f(f2u(fe) & 0x7fffffffu);
    *br = raw_log4f(f2u(relf));
    int Et = grid_binade(P, ax);
    float v = fe / P->Sf;
    float t = floorf(P->tapered ? v * P->isp32[Et - P->elo] : ldexpf(v, P->mb + 5 - Et));
    t = t > -64.0f ? t : -64.0f;
    t = t < 64.0f ? t : 64.0f;
    *bu = (int32_t)t;
}

/* One value: every quantity, branch-free, into lane L (the AVX-512 loop runs exactly these
** operations: its results are identical). */
static inline __attribute__((always_inline)) void elem(const kpar *P, float xv, float qv, int L, kl *a, bstat *bs,
                                                       int32_t *bv, int32_t *ba, int32_t *br, int32_t *bu, bstat *rs,
                                                       double *va, uint32_t *vn)
{
    uint32_t xa = f2u(xv) & 0x7fffffffu, qa = f2u(qv) & 0x7fffffffu;
    int xf = xa < 0x7f800000u, qf = qa < 0x7f800000u;
    int ok = xf & qf, bad = xf & (qf ^ 1);
    double xd = ok ? (double)xv : 0.0;
    float fe = ok ? qv - xv : 0.0f, fae = fabsf(fe);   /* e = fl32(q - x), exact unless |q| and |x| differ 2x */
    double ev = fe;
    double e2 = ev * ev;
    double e2b = bad ? INFINITY : e2;
    float ax = u2f(xf ? xa : 0);
    float den = ax > P->Ff ? ax : P->Ff;
    float relf = fae / den;
    a->sx2[L] += xd * xd;
    if (!bs && !rs) a->se2[L] += e2b;   /* else summed by block, then by run (block_flush, kern_run) */
    a->se[L] += ev;
    a->sxe[L] += xd * ev;
    a->srelf[L] += bad ? INFINITY : relf;
    float aeb = bad ? INFINITY : fae, relb = bad ? INFINITY : relf;
    a->maxae[L] = aeb > a->maxae[L] ? aeb : a->maxae[L];
    a->maxrel[L] = relb > a->maxrel[L] ? relb : a->maxrel[L];
    a->nfin += (uint64_t)xf;
    a->nnonf += (uint64_t)bad;
    int und = ok & (xa != 0) & (qa == 0), clp = ok & (qa == P->qtop) & (qa < xa);
    a->nunder += (uint64_t)und;
    a->nclip += (uint64_t)clp;
    /* the finite error energy by source (e2 = 0 where q or x is NaN/Inf; + 0.0 leaves a lane's bits
    ** as the AVX-512 path's masked add does) */
    a->seu[L] += und ? e2 : 0.0;
    a->sec[L] += clp ? e2 : 0.0;
    a->ser[L] += (ok & !und & !clp) ? e2 : 0.0;
    if (bs) {
        bs->se2[L] += e2b;
        bs->nf += (uint64_t)xf;
        bs->amax = ax > bs->amax ? ax : bs->amax;
    }
    if (rs) {   /* the run's total and the element-wise sums of the other axis (e2b = 0 for NaN/Inf x);
                ** vn counts the non-finite inputs (do_band turns them into finite counts) */
        if (!bs) rs->se2[L] += e2b;
        va[0] += e2b;
        vn[0] += (uint32_t)(xf ^ 1);
    }
    if (!P->novalue) *bv = xf && xa ? raw_log4f(xa) : RAW_SENT;
    if (ok && fae != 0) err_bins1(P, ax, fe, relf, ba, br, bu);
    else *ba = *br = *bu = RAW_SENT;
}

/* The element scales of a run: one per segment of g values (g = 0: one for the whole run), already
** sanitised (ulp scale S > 0 or 0, finite; qtop = float bits of the saturation level, 0xffffffff
** when nothing can clip), and the blocks (B values, B = 0: none) whose statistics go to bse2, bnf,
** bam per block. */
typedef struct kscale {
    size_t g;
    const float *Sf;         /* per segment, as scale_parts gives them */
    const int32_t *SE;
    const uint32_t *SM, *Qb;
    int pow2, se0;           /* all S powers of two; all S = 1 */
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

/* S (a float32 value) as the kernel reads it: fl32, floor(log2 S) and the normalised significand. */
static void scale_parts(double S, float *Sf, int32_t *SE, uint32_t *SM)
{
    uint64_t sb = d2u(S);
    *Sf = (float)S;
    *SE = S > 0 ? (int32_t)(sb >> 52 & 0x7ff) - 1023 : -1023;
    *SM = (uint32_t)((sb & 0xfffffffffffffull) >> 29);
}

/* Segment i of the band: scale S (sanitised) and saturation level bits. */
static inline void seg_put(worker *w, size_t i, double S, uint32_t Qb)
{
    if (S >= 0x1p-126 && S <= FLT_MAX) {   /* a normal float: its own bits */
        float Sf = (float)S;
        uint32_t b = f2u(Sf);
        w->kSf[i] = Sf;
        w->kSE[i] = (int32_t)(b >> 23) - 127;
        w->kSM[i] = b & 0x7fffffu;
        w->kQb[i] = Qb;
        w->pow2 &= w->kSM[i] == 0;
        w->se0 &= w->kSE[i] == 0;
        return;
    }
    scale_parts(S, &w->kSf[i], &w->kSE[i], &w->kSM[i]);
    w->kQb[i] = Qb;
    w->pow2 &= w->kSM[i] == 0 && S > 0;
    w->se0 &= w->kSE[i] == 0;
}

static void set_scale(kpar *P, const kscale *ks, size_t sg)
{
    P->Sf = ks->Sf[sg];
    P->SE = ks->SE[sg];
    P->SM = ks->SM[sg];
    P->qtop = ks->Qb[sg];
}

static void block_flush(bstat *b, const kscale *ks, size_t bi, double *up)
{
    ks->bse2[bi] = lanesum(b->se2);
    for (int L = 0; L < LANES; L++) up[L] += b->se2[L];   /* into the run's (or the band's) lanes */
    ks->bnf[bi] = b->nf;
    ks->bam[bi] = b->amax;
    memset(b, 0, sizeof *b);
}

/* ---- window counters --------------------------------------------------------------------------- */

static void hwin_flush(hwin *W, hacc *h)
{
    if (W->set)
        for (int s = 0; s < W->ns; s++) {
            uint64_t cnt[32] = {0};
            for (int p = 0; p < W->top; p++) {
                uint32_t *v = W->pl[s][p];
                for (int L = 0; L < 16; L++) {
                    for (uint32_t bits = v[L]; bits; bits &= bits - 1) cnt[__builtin_ctz(bits)] += (uint64_t)1 << p;
                    v[L] = 0;
                }
            }
            for (int t = 0; t < W->nbuf; t++)
                for (int L = 0; L < 16; L++)
                    for (uint32_t bits = W->buf[s][t][L]; bits; bits &= bits - 1) cnt[__builtin_ctz(bits)] += 16;
            for (int k = 0; k < 32; k++)
                if (cnt[k]) h_raw(h, W->base + 32 * s + k, cnt[k]);
        }
    W->nbuf = 0;
    W->set = 0;
    W->top = 8;
    W->words = W->nout = 0;
}

/* The window as the AVX-512 kernel reads it for the next chunk: bins are stored as d = raw - gbase,
** and a binned value with d >= gwidth (unsigned) raises the chunk's flag (no window yet: all do).
** The kernel assigns the flags of its groups; those from group g0 on (the portable tail) are
** cleared here for the tail's |= (a memset of the whole array costs more than the rest). */
static void hwin_arm(hwin *W, size_t g0, size_t ngr)
{
    W->gbase = W->set ? W->base : 0;
    W->gwidth = W->set ? 32u * (uint32_t)W->ns : 0;
    for (size_t g = g0; g < ngr; g++) W->om[g] = 0;
}

#if MET_X86
/* Choose the window of a histogram from a chunk's bins (raw = d + gbase): the highest bin present,
** 2 binades of room above it (log2 histograms); ulp: all 64 bins, [-1, 1) ulp (the central 32 hold
** every correctly rounded value, but a clipped one misses them, and misses cost more than a stream). */
static void hwin_choose(hwin *W, const int32_t *d, size_t k, int ulp)
{
    int32_t hi = INT32_MIN;
    for (size_t i = 0; i < k; i++)
        if (d[i] != D_SENT && d[i] + W->gbase > hi) hi = d[i] + W->gbase;
    if (hi == INT32_MIN) return;   /* nothing binned yet */
    if (ulp) {
        W->ns = 2;
        W->base = -32;
    } else {
        W->ns = W->nsw < 2 ? 2 : W->nsw;
        W->base = hi + 8 - 32 * W->ns + 1;
    }
    W->set = 1;
}

/* Place a log2 window from the histogram counted so far (a first chunk can mislead: an outlier's
** block): the placement of 2 streams holding most of it, the highest such; one stream more while
** the best still misses more than 1 in 128. */
static void hwin_place(hwin *W, const hacc *h)
{
    uint64_t tot = 0;
    for (int i = 0; i < h->n + NSLOT; i++) tot += h->c[i];
    for (int ns = 2; ns <= HS_NS; ns++) {
        const int w = 32 * ns;
        uint64_t run = 0, most = 0;
        int best = h->n - w;
        for (int b = h->n - 1; b >= 0; b--) {   /* windows [b, b + w) of bins, from the highest down */
            run += h->c[b];
            if (b + w < h->n) run -= h->c[b + w];
            if (run > most) {
                most = run;
                best = b;
            }
        }
        W->ns = ns;
        W->base = best - h->off;
        if ((tot - most) * 128 <= tot) break;
    }
    W->nsw = W->ns;
    W->set = 1;
}

#define CSA(h, l, a, b, c)                                                   \
    do {                                                                      \
        __m512i a_ = (a), b_ = (b), c_ = (c);                                 \
        h = _mm512_ternarylogic_epi32(a_, b_, c_, 0xe8);                      \
        l = _mm512_ternarylogic_epi32(a_, b_, c_, 0x96);                      \
    } while (0)

/* Add a carry word into planes p.. of a stream (ripple; the carry dies out fast). */
__attribute__((target("avx512f")))
static inline void hs_ripple(hwin *W, uint32_t (*pl)[16], int p, __m512i c)
{
    while (p < HS_PL && _mm512_test_epi32_mask(c, c)) {
        if (p + 1 > W->top) W->top = p + 1;
        __m512i v = _mm512_load_si512(pl[p]);
        _mm512_store_si512(pl[p], _mm512_xor_si512(v, c));
        c = _mm512_and_si512(v, c);
        p++;
    }
}

/* 16 words into the 4 planes st[0..3] (weights 1, 2, 4, 8 of the tree's unit); returns the carry-out
** word (weight 16 units). */
__attribute__((target("avx512f"), always_inline))
static inline __m512i hs_tree16(const __m512i *wd, uint32_t (*st)[16])
{
    __m512i ones = _mm512_load_si512(st[0]), twos = _mm512_load_si512(st[1]);
    __m512i fours = _mm512_load_si512(st[2]), eights = _mm512_load_si512(st[3]);
    __m512i twosA, twosB, foursA, foursB, eightsA, eightsB, sixteens;
    CSA(twosA, ones, ones, wd[0], wd[1]);
    CSA(twosB, ones, ones, wd[2], wd[3]);
    CSA(foursA, twos, twos, twosA, twosB);
    CSA(twosA, ones, ones, wd[4], wd[5]);
    CSA(twosB, ones, ones, wd[6], wd[7]);
    CSA(foursB, twos, twos, twosA, twosB);
    CSA(eightsA, fours, fours, foursA, foursB);
    CSA(twosA, ones, ones, wd[8], wd[9]);
    CSA(twosB, ones, ones, wd[10], wd[11]);
    CSA(foursA, twos, twos, twosA, twosB);
    CSA(twosA, ones, ones, wd[12], wd[13]);
    CSA(twosB, ones, ones, wd[14], wd[15]);
    CSA(foursB, twos, twos, twosA, twosB);
    CSA(eightsB, fours, fours, foursA, foursB);
    CSA(sixteens, eights, eights, eightsA, eightsB);
    _mm512_store_si512(st[0], ones);
    _mm512_store_si512(st[1], twos);
    _mm512_store_si512(st[2], fours);
    _mm512_store_si512(st[3], eights);
    return sixteens;
}
/* The same tree over the one-hot words 1 << (d[16 t + L] - sh), t = 0..15. */
__attribute__((target("avx512f"), always_inline))
static inline __m512i hs_tree16_oh(const int32_t *d, __m512i sh, uint32_t (*st)[16])
{
    const __m512i one = _mm512_set1_epi32(1);
    __m512i wd[16];
    for (int t = 0; t < 16; t++) wd[t] = _mm512_sllv_epi32(one, _mm512_sub_epi32(_mm512_loadu_si512(d + 16 * t), sh));
    return hs_tree16(wd, st);
}

/* Both streams of a two-stream window in one pass (one load of each d, two independent chains). */
__attribute__((target("avx512f"), always_inline))
static inline void hs_tree16_oh2(const int32_t *d, int s0, uint32_t (*st0)[16], uint32_t (*st1)[16], uint32_t *c0,
                                 uint32_t *c1)
{
    const __m512i one = _mm512_set1_epi32(1), sh0 = _mm512_set1_epi32(32 * s0), sh = _mm512_set1_epi32(32 * s0 + 32);
    __m512i o0 = _mm512_load_si512(st0[0]), t0 = _mm512_load_si512(st0[1]);
    __m512i f0 = _mm512_load_si512(st0[2]), e0 = _mm512_load_si512(st0[3]);
    __m512i o1 = _mm512_load_si512(st1[0]), t1 = _mm512_load_si512(st1[1]);
    __m512i f1 = _mm512_load_si512(st1[2]), e1 = _mm512_load_si512(st1[3]);
    __m512i tA0, tB0, fA0, fB0, eA0, eB0, x0, tA1, tB1, fA1, fB1, eA1, eB1, x1;
#define PAIR(t, ta, tb)                                                                                  \
    do {                                                                                                  \
        __m512i v_ = _mm512_loadu_si512(d + 16 * (t)), u_ = _mm512_loadu_si512(d + 16 * ((t) + 1));      \
        CSA(ta##0, o0, o0, _mm512_sllv_epi32(one, s0 ? _mm512_sub_epi32(v_, sh0) : v_),                     \
            _mm512_sllv_epi32(one, s0 ? _mm512_sub_epi32(u_, sh0) : u_));                                   \
        CSA(ta##1, o1, o1, _mm512_sllv_epi32(one, _mm512_sub_epi32(v_, sh)),                                \
            _mm512_sllv_epi32(one, _mm512_sub_epi32(u_, sh)));                                              \
        (void)tb;                                                                                         \
    } while (0)
    PAIR(0, tA, 0); PAIR(2, tB, 0);
    CSA(fA0, t0, t0, tA0, tB0); CSA(fA1, t1, t1, tA1, tB1);
    PAIR(4, tA, 0); PAIR(6, tB, 0);
    CSA(fB0, t0, t0, tA0, tB0); CSA(fB1, t1, t1, tA1, tB1);
    CSA(eA0, f0, f0, fA0, fB0); CSA(eA1, f1, f1, fA1, fB1);
    PAIR(8, tA, 0); PAIR(10, tB, 0);
    CSA(fA0, t0, t0, tA0, tB0); CSA(fA1, t1, t1, tA1, tB1);
    PAIR(12, tA, 0); PAIR(14, tB, 0);
    CSA(fB0, t0, t0, tA0, tB0); CSA(fB1, t1, t1, tA1, tB1);
    CSA(eB0, f0, f0, fA0, fB0); CSA(eB1, f1, f1, fA1, fB1);
    CSA(x0, e0, e0, eA0, eB0); CSA(x1, e1, e1, eA1, eB1);
#undef PAIR
    _mm512_store_si512(st0[0], o0); _mm512_store_si512(st0[1], t0);
    _mm512_store_si512(st0[2], f0); _mm512_store_si512(st0[3], e0);
    _mm512_store_si512(st1[0], o1); _mm512_store_si512(st1[1], t1);
    _mm512_store_si512(st1[2], f1); _mm512_store_si512(st1[3], e1);
    _mm512_store_si512(c0, x0);
    _mm512_store_si512(c1, x1);
}
#undef CSA

/* Count a chunk's k bins d[] (relative to gbase, D_SENT: not binned).  A new window rebases them;
** the values flagged outside it (om) are counted directly and replaced by D_SENT; then 256 values at
** a time go through the adder trees, whole vectors by ripple, the rest directly. */
__attribute__((target("avx512f,avx512bw")))
static void hs_count(hwin *W, hacc *h, int32_t *d, size_t k, int ulp)
{
    if (!W->set) hwin_choose(W, d, k, ulp);
    if (!W->set) return;   /* nothing binned */
    const uint32_t width = 32u * (uint32_t)W->ns;
    const size_t ngr = (k + 15) / 16;
    if (W->gbase != W->base) {   /* a new window: rebase and flag again (bins outside give no one-hot) */
        const int32_t shift = W->gbase - W->base;
        memset(W->om, 0, sizeof W->om);
        for (size_t i = 0; i < k; i++)
            if (d[i] != D_SENT) {
                d[i] += shift;
                if ((uint32_t)d[i] >= width) W->om[i / 16] |= (uint16_t)(1u << (i % 16));
            }
    }
    /* count the bins outside the window directly: the groups with a flag, 32 masks at a time */
    for (size_t g0 = 0; g0 < ngr; g0 += 32) {
        __m512i om = _mm512_loadu_si512(W->om + g0);   /* om has CH / 16 + 1 entries, padded */
        for (uint32_t nz = _mm512_test_epi16_mask(om, om); nz; nz &= nz - 1) {
            size_t g = g0 + (size_t)__builtin_ctz(nz);
            if (g >= ngr) break;
            for (unsigned o = W->om[g]; o; o &= o - 1) {
                size_t i = g * 16 + (size_t)__builtin_ctz(o);
                h_raw(h, d[i] + W->base, 1);
                W->nout++;
                d[i] = D_SENT;
            }
        }
    }
    if (W->words > ((uint64_t)1 << (HS_PL - 2))) {   /* keep the counters below 2^HS_PL */
        int32_t base = W->base;
        int ns = W->ns;
        hwin_flush(W, h);
        W->base = base;
        W->ns = ns;
        W->set = 1;
    }
    const __m512i one = _mm512_set1_epi32(1);
    const int ns = W->ns;
    size_t i = 0;
    for (; i + 256 <= k; i += 256) {
        int s2 = 0;
        for (; s2 + 1 < ns; s2 += 2)
            hs_tree16_oh2(d + i, s2, W->pl[s2], W->pl[s2 + 1], W->buf[s2][W->nbuf], W->buf[s2 + 1][W->nbuf]);
        if (s2 < ns)
            _mm512_store_si512(W->buf[s2][W->nbuf], hs_tree16_oh(d + i, _mm512_set1_epi32(32 * s2), W->pl[s2]));
        if (++W->nbuf == 16) {   /* the second tree, every 4096 values */
            for (int s = 0; s < ns; s++) {
                __m512i c16[16];
                for (int t = 0; t < 16; t++) c16[t] = _mm512_load_si512(W->buf[s][t]);
                hs_ripple(W, W->pl[s], 8, hs_tree16(c16, W->pl[s] + 4));
            }
            W->nbuf = 0;
        }
        W->words += 16;
    }
    for (; i + 16 <= k; i += 16) {
        __m512i v = _mm512_loadu_si512(d + i);
        for (int s = 0; s < ns; s++) hs_ripple(W, W->pl[s], 0, _mm512_sllv_epi32(one, _mm512_sub_epi32(v, _mm512_set1_epi32(32 * s))));
        W->words++;
    }
    for (; i < k; i++)
        if (d[i] != D_SENT) h_raw(h, d[i] + W->base, 1);
    /* a window that misses more than 1 value in 16 is chosen again from the next chunk; a log2 window
    ** that misses more than 1 in 128 of its first 64K values placed from the counts so far (hwin_place) */
    if (W->nout > W->words && W->words * 16 >= 4096) hwin_flush(W, h);
    else if (!ulp && W->ns < HS_NS && W->nout * 8 > W->words && W->words * 16 >= 65536) {
        hwin_flush(W, h);
        hwin_place(W, h);
    }
}

/* Floor(4 log2 v) + 508 + 127 from the bits of normal floats (16 lanes): 4 x the biased exponent
** plus the quarter, which is the exponent of fl32(fl32(m^2)^2) for the significand m in [1, 2)
** (+127): the two roundings never cross an edge 2^(j/4) (all 2^23 significands checked, in
** tests/unit/test_metrics.c), and two multiplies cost less than three compares. */
#define LOG4F(bits) ({                                                                                     \
        __m512 m_ = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(bits, mant23, onef, 0xea)); /* (b&m)|1 */  \
        __m512 m2_ = _mm512_mul_ps(m_, m_);                                                                  \
        __m512i q_ = _mm512_srli_epi32(_mm512_castps_si512(_mm512_mul_ps(m2_, m2_)), 23);                   \
        _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(bits, 21), _mm512_set1_epi32(0x3fc)), q_); })

/* Reduce 16 double lanes (lo: 0..7, hi: 8..15) in lanesum's order. */
__attribute__((target("avx512f")))
static inline double red16(__m512d lo, __m512d hi)
{
    __m512d t = _mm512_add_pd(lo, hi);
    __m512d r1 = _mm512_add_pd(t, _mm512_permute_pd(t, 0x55));
    __m512d r2 = _mm512_add_pd(r1, _mm512_permutex_pd(r1, 0x4e));
    __m512d r3 = _mm512_add_pd(r2, _mm512_shuffle_f64x2(r2, r2, 0x4e));
    return _mm512_cvtsd_f64(r3);
}

/* Kernel variants (compile-time flags of groups_body). */
enum {
    GV_BST = 1,      /* per-block statistics */
    GV_ROWS = 2,     /* the run's total and the other axis' element-wise sums */
    GV_POW2 = 4,     /* every element scale a power of two: the binade of |x| / S by exponents alone */
    GV_NOVAL = 8,    /* no value histogram */
    GV_TAP = 16,     /* tapered grid: 32 / spacing from the table (needs POW2 with S = 1) */
    GV_G4 = 32,      /* a segment per 4 values */
    GV_G8 = 64       /* a segment per 8 values */
};

/* A histogram's bins of 16 values relative to the window: d = raw - gbase where binned, D_SENT
** elsewhere; binned values outside the window flag the chunk.  raw is biased by bias (LOG4F's 127). */
#define WIN_STORE(dst, raw, bias, msk, W)                                                                \
    do {                                                                                                  \
        __m512i d_ = _mm512_sub_epi32(raw, _mm512_set1_epi32((W)->gbase + (bias)));                       \
        (W)->om[gi] = _mm512_mask_cmpge_epu32_mask(msk, d_, _mm512_set1_epi32((int)(W)->gwidth));         \
        _mm512_storeu_si512(dst, _mm512_mask_mov_epi32(dsent, msk, d_));                                  \
    } while (0)

/* Groups of 16 values of a run chunk with AVX-512, run positions p0 + 16 g: lane L of the vectors is
** lane L of the portable accumulators and every operation gives elem()'s bits (max_ps(a, b) = a > b ?
** a : b as elem writes it; floor by the conversion's rounding; fused multiply-adds only where the
** product is exact; division by a power of two as a scaling), so the results are bit-identical.
** Zero or subnormal inputs and subnormal errors are binned by err_bins1 after the loop (rare);
** non-finite outputs take a rare branch.  Bins are stored relative to the windows (WIN_STORE). */
__attribute__((target("avx512f,avx512dq,avx512vl,fma"), always_inline))
static inline void groups_body(const int V, const kpar *P, const worker *w, const kscale *ks, size_t m, const float *x,
                               const float *q, size_t p0, size_t ng, kl *a, bstat *bsm, int32_t *bv, int32_t *ba,
                               int32_t *br, int32_t *bu, bstat *rs, double *va, uint32_t *vn)
{
    const int bstats = V & GV_BST, rows = V & GV_ROWS, pow2 = V & GV_POW2, noval = V & GV_NOVAL, tap = V & GV_TAP;
    const int g4 = V & GV_G4, g8 = V & GV_G8;
    const int wantbam = w->j->bk_absmax != NULL;   /* block maxima only for the per-block arrays */
    hwin *Wv = w->wv, *Wa = w->wa, *Wr = w->wr, *Wu = w->wu;
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), expm = _mm512_set1_epi32(0x7f800000);
    const __m512i mant23 = _mm512_set1_epi32(0x7fffff), one = _mm512_set1_epi32(1);
    const __m512i onef = _mm512_set1_epi32(0x3f800000);
    const __m512i fmin = _mm512_set1_epi32(0x00800000), dsent = _mm512_set1_epi32(D_SENT), zero = _mm512_setzero_si512();
    const __m512 Ff = _mm512_set1_ps(P->Ff), lo64 = _mm512_set1_ps(-64.0f), hi64 = _mm512_set1_ps(64.0f);
    const __m512i elo = _mm512_set1_epi32(P->elo), ehi = _mm512_set1_epi32(P->ehi), cmb5 = _mm512_set1_epi32(P->mb + 5);
    const size_t g = ks->g, B = ks->B;
    __m512d sx2a = _mm512_loadu_pd(a->sx2), sx2b = _mm512_loadu_pd(a->sx2 + 8);
    __m512d se2a = _mm512_loadu_pd(a->se2), se2b = _mm512_loadu_pd(a->se2 + 8);
    __m512d sea = _mm512_loadu_pd(a->se), seb = _mm512_loadu_pd(a->se + 8);
    __m512d sxea = _mm512_loadu_pd(a->sxe), sxeb = _mm512_loadu_pd(a->sxe + 8);
    __m512d seua = _mm512_loadu_pd(a->seu), seub = _mm512_loadu_pd(a->seu + 8);
    __m512d seca = _mm512_loadu_pd(a->sec), secb = _mm512_loadu_pd(a->sec + 8);
    __m512d sera = _mm512_loadu_pd(a->ser), serb = _mm512_loadu_pd(a->ser + 8);
    __m512 srl = _mm512_loadu_ps(a->srelf);
    __m512 mae = _mm512_loadu_ps(a->maxae), mrel = _mm512_loadu_ps(a->maxrel);
    __m512i cnt = zero;      /* per lane: underflows + 65536 x clipped (at most 32 of each per call) */
    uint64_t nfin = 0;
    __m512d bsa = _mm512_setzero_pd(), bsb = bsa, rsa = bsa, rsb = bsa;
    __m512 bam = _mm512_setzero_ps();
    uint64_t bnf0 = 0;
    if (bstats) {
        bsa = _mm512_loadu_pd(bsm->se2);
        bsb = _mm512_loadu_pd(bsm->se2 + 8);
        bam = _mm512_set1_ps(bsm->amax);
        bnf0 = bsm->nf;
    }
    if (rows) {
        rsa = _mm512_loadu_pd(rs->se2);
        rsb = _mm512_loadu_pd(rs->se2 + 8);
    }
    /* the current scale (vectors), refreshed when the segment changes (g = 4 or 8: per group);
    ** segment and block ends are counted down (no division in the loop) */
    size_t blk_end = bstats ? (p0 / B + 1) * B : 0;
    if (bstats && blk_end > m) blk_end = m;
    uint16_t fixm[CH / 16];
    __m512 Sv = _mm512_set1_ps(1.0f);
    __m512i SMv = zero, qtop = zero, c127 = zero;
    __m512 nSE = _mm512_setzero_ps();     /* -floor(log2 S), for the scaling by 1 / S */
    const int s1 = pow2 && ks->se0;       /* every S is 1 */
    const __m512i gidx = g4 ? _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0)
                            : _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    /* two passes over the chunk (fewer live registers): sums, counts, block and row statistics and
    ** fl32(e) into fes[]; then the bins */
    float fes[CH];
    int anybad = 0;
/* Segments: the element-scale vectors are set once per run of vectors inside one segment (the whole
** chunk for g = 0; a vector for g = 4 or 8, whose lanes span several segments). */
#define SEG_BEGIN                                                                                        \
    for (size_t gi = 0, sg = g && !(g4 || g8) ? p0 / g : 0; gi < ng;) {                                  \
        size_t gend, p_ = p0 + gi * 16;                                                                   \
        if (g4 || g8) {                                                                                   \
            sg = g4 ? p_ >> 2 : p_ >> 3;                                                                  \
            gend = gi + 1;                                                                                \
            Sv = _mm512_permutexvar_ps(gidx, _mm512_loadu_ps(ks->Sf + sg));                                \
            __m512i SEv = _mm512_permutexvar_epi32(gidx, _mm512_loadu_si512(ks->SE + sg));                 \
            SMv = _mm512_permutexvar_epi32(gidx, _mm512_loadu_si512(ks->SM + sg));                         \
            qtop = _mm512_permutexvar_epi32(gidx, _mm512_loadu_si512(ks->Qb + sg));                        \
            c127 = _mm512_add_epi32(SEv, _mm512_set1_epi32(127));                                          \
            nSE = _mm512_cvtepi32_ps(_mm512_sub_epi32(zero, SEv));                                         \
        } else {                                                                                          \
            gend = g ? gi + ((sg + 1) * g - p_) / 16 : ng;                                                 \
            if (gend > ng) gend = ng;                                                                     \
            Sv = _mm512_set1_ps(ks->Sf[sg]);                                                               \
            SMv = _mm512_set1_epi32((int)ks->SM[sg]);                                                      \
            qtop = _mm512_set1_epi32((int)ks->Qb[sg]);                                                     \
            c127 = _mm512_set1_epi32(127 + ks->SE[sg]);                                                    \
            nSE = _mm512_set1_ps((float)-ks->SE[sg]);                                                      \
        }                                                                                                 \
        for (; gi < gend; gi++) {                                                                         \
            size_t i = gi * 16, p = p0 + i;
#define SEG_END                                                                                          \
        }                                                                                                 \
        if (g && !(g4 || g8)) sg++;                                                                       \
    }
    SEG_BEGIN
        __m512 xs = _mm512_loadu_ps(x + i), qs = _mm512_loadu_ps(q + i);
        __m512i xa = _mm512_and_si512(_mm512_castps_si512(xs), absm), qa = _mm512_and_si512(_mm512_castps_si512(qs), absm);
        __mmask16 xf = _mm512_cmplt_epu32_mask(xa, expm), qf = _mm512_cmplt_epu32_mask(qa, expm);
        __mmask16 ok = xf & qf, bad = xf & (__mmask16)~qf;
        __m512d xda = _mm512_maskz_cvtps_pd((__mmask8)ok, _mm512_castps512_ps256(xs));
        __m512d xdb = _mm512_maskz_cvtps_pd((__mmask8)(ok >> 8), _mm512_extractf32x8_ps(xs, 1));
        __m512 fe_ = _mm512_maskz_sub_ps(ok, qs, xs);
        __m512d eva = _mm512_cvtps_pd(_mm512_castps512_ps256(fe_)), evb = _mm512_cvtps_pd(_mm512_extractf32x8_ps(fe_, 1));
        __m512d e2a = _mm512_mul_pd(eva, eva), e2b = _mm512_mul_pd(evb, evb);
        _mm512_storeu_ps(fes + i, fe_);
        if (bad) {   /* a finite input turned NaN/Inf: infinite error */
            const __m512d inf = _mm512_set1_pd(INFINITY);
            e2a = _mm512_mask_mov_pd(e2a, (__mmask8)bad, inf);
            e2b = _mm512_mask_mov_pd(e2b, (__mmask8)(bad >> 8), inf);
            anybad = 1;
            a->nnonf += (uint64_t)__builtin_popcount(bad);
        }
        /* x^2, e^2 and x e are exact in double (24- and 25-bit significands), so a fused multiply-add
        ** rounds exactly as elem's product then sum: the same bits, on the multiply pipes */
        sx2a = _mm512_fmadd_pd(xda, xda, sx2a);
        sx2b = _mm512_fmadd_pd(xdb, xdb, sx2b);
        if (!bstats && !rows) {   /* else summed by block, then by run */
            se2a = _mm512_add_pd(se2a, e2a);
            se2b = _mm512_add_pd(se2b, e2b);
        }
        sea = _mm512_add_pd(sea, eva);
        seb = _mm512_add_pd(seb, evb);
        sxea = _mm512_fmadd_pd(xda, eva, sxea);
        sxeb = _mm512_fmadd_pd(xdb, evb, sxeb);
        __mmask16 xnz = _mm512_test_epi32_mask(xa, xa);
        nfin += (uint64_t)__builtin_popcount(xf);
        __mmask16 mu = _mm512_mask_cmpeq_epi32_mask(ok & xnz, qa, zero);
        __mmask16 mc = _mm512_mask_cmplt_epu32_mask(_mm512_mask_cmpeq_epi32_mask(ok, qa, qtop), qa, xa);
        __mmask16 mr = ok & (__mmask16)~(mu | mc);
        cnt = _mm512_mask_add_epi32(cnt, mu, cnt, one);
        cnt = _mm512_mask_add_epi32(cnt, mc, cnt, _mm512_set1_epi32(65536));
        /* the finite error energy by source: masked adds with the count masks (mr leaves out NaN/Inf) */
        seua = _mm512_mask_add_pd(seua, (__mmask8)mu, seua, e2a);
        seub = _mm512_mask_add_pd(seub, (__mmask8)(mu >> 8), seub, e2b);
        seca = _mm512_mask_add_pd(seca, (__mmask8)mc, seca, e2a);
        secb = _mm512_mask_add_pd(secb, (__mmask8)(mc >> 8), secb, e2b);
        sera = _mm512_mask_add_pd(sera, (__mmask8)mr, sera, e2a);
        serb = _mm512_mask_add_pd(serb, (__mmask8)(mr >> 8), serb, e2b);
        if (bstats) {
            bsa = _mm512_add_pd(bsa, e2a);
            bsb = _mm512_add_pd(bsb, e2b);
            if (wantbam) bam = _mm512_max_ps(_mm512_castsi512_ps(_mm512_maskz_mov_epi32(xf, xa)), bam);
            if (p + 16 == blk_end) {   /* block end: lanesum's order */
                size_t bi = p / B;
                blk_end = blk_end + B < m ? blk_end + B : m;
                ks->bse2[bi] = red16(bsa, bsb);
                if (rows) {
                    rsa = _mm512_add_pd(rsa, bsa);
                    rsb = _mm512_add_pd(rsb, bsb);
                } else {
                    se2a = _mm512_add_pd(se2a, bsa);
                    se2b = _mm512_add_pd(se2b, bsb);
                }
                ks->bnf[bi] = bnf0 + nfin;
                if (wantbam) ks->bam[bi] = _mm512_reduce_max_ps(bam);
                bsa = bsb = _mm512_setzero_pd();
                bnf0 = 0 - nfin;
                bam = _mm512_setzero_ps();
            }
        }
        if (rows) {
            if (!bstats) {
                rsa = _mm512_add_pd(rsa, e2a);
                rsb = _mm512_add_pd(rsb, e2b);
            }
            _mm512_storeu_pd(va + i, _mm512_add_pd(_mm512_loadu_pd(va + i), e2a));
            _mm512_storeu_pd(va + i + 8, _mm512_add_pd(_mm512_loadu_pd(va + i + 8), e2b));
            if (xf != 0xffff) {   /* non-finite inputs per position (vn counts those) */
                __m512i c = _mm512_loadu_si512(vn + i);
                _mm512_storeu_si512(vn + i, _mm512_mask_add_epi32(c, (__mmask16)~xf, c, one));
            }
        }
    SEG_END
    SEG_BEGIN
        (void)p;
        __m512i xa = _mm512_and_si512(_mm512_loadu_si512(x + i), absm);
        __m512 fe = _mm512_loadu_ps(fes + i);
        __m512i feb = _mm512_and_si512(_mm512_castps_si512(fe), absm);
        __m512 fae = _mm512_castsi512_ps(feb);
        __m512 relf = _mm512_div_ps(fae, _mm512_max_ps(_mm512_castsi512_ps(xa), Ff));
        srl = _mm512_add_ps(srl, relf);
        mae = _mm512_max_ps(fae, mae);
        mrel = _mm512_max_ps(relf, mrel);
        __mmask16 binned = _mm512_test_epi32_mask(feb, feb);   /* e != 0 (0 for NaN/Inf x or q) */
        /* finite, non-zero inputs: the value histogram's (without it, only binned errors need fixing) */
        __mmask16 xin = noval ? 0 : _mm512_mask_test_epi32_mask(_mm512_cmplt_epu32_mask(xa, expm), xa, xa);
        if (!noval) WIN_STORE(bv + i, LOG4F(xa), 127, xin, Wv);
        WIN_STORE(ba + i, LOG4F(feb), 127, binned, Wa);
        WIN_STORE(br + i, LOG4F(_mm512_castps_si512(relf)), 127, binned, Wr);
        __m512i Et = _mm512_sub_epi32(_mm512_srli_epi32(xa, 23), c127);
        if (!pow2) Et = _mm512_mask_sub_epi32(Et, _mm512_cmplt_epu32_mask(_mm512_and_si512(xa, mant23), SMv), Et, one);
        Et = _mm512_min_epi32(_mm512_max_epi32(Et, elo), ehi);
        __m512 v;
        if (tap) v = _mm512_mul_ps(fe, _mm512_i32gather_ps(_mm512_sub_epi32(Et, elo), P->isp32, 4));
        else {
            /* fe / S: S = 1 exactly (casts), a power of two (scaling: the same rounding), else divided */
            __m512 q_ = s1 ? fe : pow2 ? _mm512_scalef_ps(fe, nSE) : _mm512_div_ps(fe, Sv);
            v = _mm512_scalef_ps(q_, _mm512_cvtepi32_ps(_mm512_sub_epi32(cmb5, Et)));
        }
        v = _mm512_min_ps(_mm512_max_ps(v, lo64), hi64);
        WIN_STORE(bu + i, _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), 0, binned, Wu);
        /* zero or subnormal input (value and ulp bins), subnormal error (abs bin): exact, after the loop */
        fixm[gi] = _mm512_mask_cmplt_epu32_mask(xin | binned, xa, fmin) | _mm512_mask_cmplt_epu32_mask(binned, feb, fmin);
    SEG_END
#undef SEG_BEGIN
#undef SEG_END
    if (anybad) {   /* infinite errors: the sums and maxima are +inf (the lane does not matter) */
        srl = _mm512_mask_mov_ps(srl, 1, _mm512_set1_ps(INFINITY));
        mae = _mm512_mask_mov_ps(mae, 1, _mm512_set1_ps(INFINITY));
        mrel = _mm512_mask_mov_ps(mrel, 1, _mm512_set1_ps(INFINITY));
    }
    for (size_t gi = 0; gi < ng; gi++)
        for (unsigned fix = fixm[gi]; fix; fix &= fix - 1) {
            size_t i = gi * 16 + (size_t)__builtin_ctz(fix), p = p0 + i, sg = g ? p / g : 0;
            float xl = u2f(f2u(x[i]) & 0x7fffffffu);
            int32_t rv = raw_log4f(f2u(xl)), ra, rr, ru;
            if (!noval) {
                bv[i] = rv - Wv->gbase;
                Wv->om[gi] |= (uint16_t)(((uint32_t)bv[i] >= Wv->gwidth) << (i % 16));
            }
            if (ba[i] != D_SENT) {
                float fel = q[i] - x[i];
                kpar Pl = *P;
                Pl.Sf = ks->Sf[sg];
                Pl.SE = ks->SE[sg];
                Pl.SM = ks->SM[sg];
                float den = xl > P->Ff ? xl : P->Ff;
                err_bins1(&Pl, xl, fel, fabsf(fel) / den, &ra, &rr, &ru);
                ba[i] = ra - Wa->gbase;
                br[i] = rr - Wr->gbase;
                bu[i] = ru - Wu->gbase;
                Wa->om[gi] |= (uint16_t)(((uint32_t)ba[i] >= Wa->gwidth) << (i % 16));
                Wr->om[gi] |= (uint16_t)(((uint32_t)br[i] >= Wr->gwidth) << (i % 16));
                Wu->om[gi] |= (uint16_t)(((uint32_t)bu[i] >= Wu->gwidth) << (i % 16));
            }
        }
    _mm512_storeu_pd(a->sx2, sx2a); _mm512_storeu_pd(a->sx2 + 8, sx2b);
    _mm512_storeu_pd(a->se2, se2a); _mm512_storeu_pd(a->se2 + 8, se2b);
    _mm512_storeu_pd(a->se, sea); _mm512_storeu_pd(a->se + 8, seb);
    _mm512_storeu_pd(a->sxe, sxea); _mm512_storeu_pd(a->sxe + 8, sxeb);
    _mm512_storeu_pd(a->seu, seua); _mm512_storeu_pd(a->seu + 8, seub);
    _mm512_storeu_pd(a->sec, seca); _mm512_storeu_pd(a->sec + 8, secb);
    _mm512_storeu_pd(a->ser, sera); _mm512_storeu_pd(a->ser + 8, serb);
    _mm512_storeu_ps(a->srelf, srl);
    _mm512_storeu_ps(a->maxae, mae); _mm512_storeu_ps(a->maxrel, mrel);
    uint32_t c = (uint32_t)_mm512_reduce_add_epi32(cnt);
    a->nfin += nfin;
    a->nunder += c & 0xffffu;
    a->nclip += c >> 16;
    if (bstats) {
        _mm512_storeu_pd(bsm->se2, bsa); _mm512_storeu_pd(bsm->se2 + 8, bsb);
        bsm->nf = bnf0 + nfin;
        if (wantbam) bsm->amax = _mm512_reduce_max_ps(bam);
    }
    if (rows) {
        _mm512_storeu_pd(rs->se2, rsa);
        _mm512_storeu_pd(rs->se2 + 8, rsb);
    }
}
#undef LOG4F
#undef WIN_STORE

#define GV_ARGS P, w, ks, m, x, q, p0, ng, a, bsm, bv, ba, br, bu, rs, va, vn
#define GV_PARAMS const kpar *P, const worker *w, const kscale *ks, size_t m, const float *x, const float *q, size_t p0, \
                  size_t ng, kl *a, bstat *bsm, int32_t *bv, int32_t *ba, int32_t *br, int32_t *bu, bstat *rs,          \
                  double *va, uint32_t *vn
#define GV_FN(V) __attribute__((target("avx512f,avx512dq,avx512vl,fma"))) static void groups_##V(GV_PARAMS) { groups_body(V, GV_ARGS); }
GV_FN(0) GV_FN(1) GV_FN(2) GV_FN(3) GV_FN(4) GV_FN(5) GV_FN(6) GV_FN(7)
GV_FN(8) GV_FN(9) GV_FN(10) GV_FN(11) GV_FN(12) GV_FN(13) GV_FN(14) GV_FN(15)
GV_FN(20) GV_FN(22) GV_FN(28) GV_FN(30)
GV_FN(33) GV_FN(35) GV_FN(41) GV_FN(43)
GV_FN(65) GV_FN(67) GV_FN(73) GV_FN(75) GV_FN(69) GV_FN(71) GV_FN(77) GV_FN(79)
__attribute__((target("avx512f,avx512dq,avx512vl,fma")))
static void groups_any(int V, GV_PARAMS) { groups_body(V, GV_ARGS); }

static void groups_avx512(int V, GV_PARAMS)
{
    switch (V) {
#define GV_CASE(V) case V: groups_##V(GV_ARGS); return;
    GV_CASE(0) GV_CASE(1) GV_CASE(2) GV_CASE(3) GV_CASE(4) GV_CASE(5) GV_CASE(6) GV_CASE(7)
    GV_CASE(8) GV_CASE(9) GV_CASE(10) GV_CASE(11) GV_CASE(12) GV_CASE(13) GV_CASE(14) GV_CASE(15)
    GV_CASE(20) GV_CASE(22) GV_CASE(28) GV_CASE(30)
    GV_CASE(33) GV_CASE(35) GV_CASE(41) GV_CASE(43)
    GV_CASE(65) GV_CASE(67) GV_CASE(73) GV_CASE(75) GV_CASE(69) GV_CASE(71) GV_CASE(77) GV_CASE(79)
#undef GV_CASE
    default: groups_any(V, GV_ARGS);
    }
}
#endif

/* One run x[0..m), q[0..m): metrics, histograms, block statistics (ks) and, with rs, the run's
** total squared error and finite inputs and, per position, the squared errors (va) and non-finite
** inputs (vn) of the other axis. */
static void kern_run(worker *w, const float *x, const float *q, size_t m, const kscale *ks, bstat *rs, double *va,
                     uint32_t *vn)
{
    const job *j = w->j;
    const prof *pf = j->pf;
    kpar P;
    P.Ff = pf->Ff;
    P.elo = pf->elo;
    P.ehi = pf->ehi;
    P.isp32 = pf->isp32;
    P.tapered = pf->tapered;
    P.mb = pf->mb;
    P.novalue = j->novalue;
    size_t g = ks->g, B = ks->B;
    int se0 = ks->se0, pow2 = ks->pow2;
    bstat blk;
    memset(&blk, 0, sizeof blk);
    int avx = MET_X86 && w->simd >= QS_SIMD_AVX512;
    int vec = avx && (g == 0 || g % 16 == 0 || g == 4 || g == 8) && (B == 0 || B % 16 == 0 || B >= m) &&
              (!pf->tapered || (pow2 && se0));
    int V = (B ? GV_BST : 0) | (rs ? GV_ROWS : 0) | (pow2 ? GV_POW2 : 0) | (P.novalue ? GV_NOVAL : 0) |
            (pf->tapered ? GV_TAP : 0) | (g == 4 ? GV_G4 : g == 8 ? GV_G8 : 0);
    size_t cur = (size_t)-1;
    kl *a = &w->acc;
    uint64_t nf0 = a->nfin;
    hwin *win[4] = {w->wv, w->wa, w->wr, w->wu};
    int32_t *bins[4] = {w->bv, w->ba, w->br, w->bu};
    hacc *hh[4] = {&w->hv, &w->ha, &w->hr, &w->hu};
    for (size_t o = 0; o < m; o += CH) {
        size_t k = m - o < CH ? m - o : CH, i = 0;
        if (avx) {
            size_t g0 = vec ? k / 16 : 0;
            for (int h = 0; h < 4; h++) hwin_arm(win[h], g0, (k + 15) / 16);
        }
#if MET_X86
        if (vec && k >= 16) {
            size_t ng = k / 16;
            groups_avx512(V, &P, w, ks, m, x + o, q + o, o, ng, a, &blk, w->bv, w->ba, w->br, w->bu, rs,
                          rs ? va + o : NULL, rs ? vn + o : NULL);
            i = ng * 16;
        }
#else
        (void)vec;
        (void)V;
#endif
        size_t i0 = i;
        for (; i < k; i++) {
            size_t p = o + i, sg = g ? p / g : 0;
            if (sg != cur) {
                set_scale(&P, ks, sg);
                cur = sg;
            }
            elem(&P, x[p], q[p], (int)(p & (LANES - 1)), a, B ? &blk : NULL, w->bv + i, w->ba + i, w->br + i, w->bu + i,
                 rs, rs ? va + p : NULL, rs ? vn + p : NULL);
            if (B && ((p + 1) % B == 0 || p + 1 == m)) block_flush(&blk, ks, p / B, rs ? rs->se2 : a->se2);
        }
        cur = (size_t)-1;
        for (int L = 0; L < LANES; L++) {   /* the chunk's float32 relative-error sums */
            a->srel[L] += (double)a->srelf[L];
            a->srelf[L] = 0;
        }
        if (avx) {
#if MET_X86
            /* the portable values' raw bins, relative to the windows like the kernel's */
            for (int h = P.novalue ? 1 : 0; h < 4; h++)
                for (size_t t = i0; t < k; t++) {
                    int32_t r = bins[h][t];
                    if (r == RAW_SENT) bins[h][t] = D_SENT;
                    else {
                        bins[h][t] = r - win[h]->gbase;
                        if ((uint32_t)bins[h][t] >= win[h]->gwidth) win[h]->om[t / 16] |= (uint16_t)(1u << (t % 16));
                    }
                }
            for (int h = P.novalue ? 1 : 0; h < 4; h++) hs_count(win[h], hh[h], bins[h], k, h == 3);
#endif
            continue;
        }
        for (size_t t = 0; t < k; t++) {
            if (!P.novalue && w->bv[t] != RAW_SENT) h_raw(&w->hv, w->bv[t], 1);
            if (w->ba[t] != RAW_SENT) {
                h_raw(&w->ha, w->ba[t], 1);
                h_raw(&w->hr, w->br[t], 1);
                h_raw(&w->hu, w->bu[t], 1);
            }
        }
    }
    if (rs) {
        rs->nf = a->nfin - nf0;
        for (int L = 0; L < LANES; L++) a->se2[L] += rs->se2[L];   /* the run's lanes into the band's */
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

/* The representatives of a run's blocks of bl values (the last one may be shorter). */
#if MET_X86
__attribute__((target("avx512f")))
static size_t block_reps_avx512(const float *x, size_t n, size_t bl, int finite, float *out)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), expm = _mm512_set1_epi32(0x7f800000);
    size_t b = 0;
    if (bl % 16) return 0;
    for (; (b + 1) * bl <= n; b++) {
        const float *xb = x + b * bl;
        __m512i m = _mm512_setzero_si512();
        for (size_t i = 0; i < bl; i += 16) {
            __m512i a = _mm512_and_si512(_mm512_loadu_si512(xb + i), absm);
            if (finite) a = _mm512_maskz_mov_epi32(_mm512_cmplt_epu32_mask(a, expm), a);
            m = _mm512_max_epu32(m, a);
        }
        out[b] = u2f(_mm512_reduce_max_epu32(m));
    }
    return b;
}
#endif
static void block_reps(const worker *w, const float *x, size_t n, size_t bl, int finite, float *out)
{
    size_t b = 0;
#if MET_X86
    if (w->simd >= QS_SIMD_AVX512) b = block_reps_avx512(x, n, bl, finite, out);
#endif
    for (; b * bl < n; b++) out[b] = block_rep(w, x + b * bl, n - b * bl < bl ? n - b * bl : bl, finite);
}

/* Largest finite |x| (encode's tensor scale when none is given). */
static float finite_max(const float *x, size_t n)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = f2u(x[i]) & 0x7fffffffu;
        if (a < 0x7f800000u && a > m) m = a;
    }
    return u2f(m);
}

/* Proxy: scale code / decoded scale / saturation level of nb blocks from their representatives
** (MX: already given by qs_mx_fakeq_scales with the band's fake-quantization). */
#if MET_X86
/* proxy_scales' loop for MX blocks, 16 at a time. */
__attribute__((target("avx512f,avx512dq")))
static size_t mx_segs_avx512(worker *w, size_t nb, int *se0)
{
    const __m512i c255 = _mm512_set1_epi32(255), c127 = _mm512_set1_epi32(127), zero = _mm512_setzero_si512();
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000), ones = _mm512_set1_epi32(-1);
    __mmask16 nz = 0;
    size_t i = 0;
    for (; i + 16 <= nb; i += 16) {
        __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w->bcode + i)));
        __mmask16 nan = _mm512_cmpeq_epi32_mask(c, c255);
        __m512 S = _mm512_loadu_ps(w->pS + i);
        _mm512_storeu_pd(w->bscale + i, _mm512_cvtps_pd(_mm512_castps512_ps256(S)));
        _mm512_storeu_pd(w->bscale + i + 8, _mm512_cvtps_pd(_mm512_extractf32x8_ps(S, 1)));
        _mm512_storeu_ps(w->kSf + i, _mm512_mask_mov_ps(S, nan, _mm512_set1_ps(1.0f)));
        __m512i se = _mm512_maskz_mov_epi32((__mmask16)~nan, _mm512_sub_epi32(c, c127));
        _mm512_storeu_si512(w->kSE + i, se);
        _mm512_storeu_si512(w->kSM + i, zero);
        __m512i qb = _mm512_and_si512(_mm512_loadu_si512(w->pQ + i), absm);
        __mmask16 ok = _mm512_cmplt_epu32_mask(qb, inf) & _mm512_test_epi32_mask(qb, qb);
        _mm512_storeu_si512(w->kQb + i, _mm512_mask_mov_epi32(ones, ok, qb));
        nz |= _mm512_test_epi32_mask(se, se);
    }
    if (nz) *se0 = 0;
    return i;
}
#endif

static int proxy_scales(worker *w, size_t nb, qs_err *e)
{
    const prof *pf = w->j->pf;
    const qs_format *f = pf->f;
    qs_qopts o = pf->o;
    o.block = 1;
    o.index0 = 0;
    int mx = pf->mx, nv = f->scale_kind == QS_SK_UE4M3;
    if (mx || nv) {   /* the scale rule directly (same codes and scales as encode + decode, tested) */
        if (nv && qs_nvfp4_block_scales(f, &o, o.tensor_scale != 0 ? o.tensor_scale : finite_max(w->reps, nb), w->reps,
                                        nb, w->bcode, w->pS, w->pQ, e))
            return -1;
        if (mx) {   /* S = 2^(code - 127): its exponent is the code's (NaN block: S = 1, nothing clips) */
            int se0 = w->se0;
            size_t i = 0;
#if MET_X86
            if (w->simd >= QS_SIMD_AVX512) i = mx_segs_avx512(w, nb, &se0);
#endif
            for (; i < nb; i++) {
                unsigned c = w->bcode[i];
                int nan = c == 0xFF;
                w->bscale[i] = w->pS[i];
                w->kSf[i] = nan ? 1.0f : w->pS[i];
                w->kSE[i] = nan ? 0 : c == 0 ? -127 : (int32_t)c - 127;
                w->kSM[i] = 0;
                w->kQb[i] = san_Q(w->pQ[i]);
                se0 &= w->kSE[i] == 0;
            }
            w->se0 = se0;
            return 0;
        }
        for (size_t i = 0; i < nb; i++) {
            w->bscale[i] = w->pS[i];
            seg_put(w, i, san_S(w->pS[i]), san_Q(w->pQ[i]));
        }
        return 0;
    }
    float ts = 0;
    if (f->encode(f, &o, w->reps, nb, w->pcodes, w->pmeta, &ts, e)) return -1;
    for (size_t i = 0; i < nb; i++) w->pcodes[i] = pf->code_one;
    if (f->decode(f, &o, w->pcodes, w->pmeta, ts, nb, w->pS, e)) return -1;
    for (size_t i = 0; i < nb; i++) w->pcodes[i] = pf->code_top;
    if (f->decode(f, &o, w->pcodes, w->pmeta, ts, nb, w->pQ, e)) return -1;
    for (size_t i = 0; i < nb; i++) {
        w->bscale[i] = w->pS[i];
        seg_put(w, i, san_S(w->pS[i]), san_Q(w->pQ[i]));
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
    if (pf->fam == FAM_HIF4) {   /* fakeq (= decode(encode), tested) with the metadata as encode's */
        qs_hif4_fakeq_meta_run(w->simd, x, len, q, w->meta, o.round == QS_RND_RNE);
    } else {
        float ts = 0;
        if (f->encode(f, &o, x, len, w->codes, w->meta, &ts, e)) return -1;
        if (f->decode(f, &o, w->codes, w->meta, ts, len, q, e)) return -1;
    }
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
            /* the unit's three element scales (micro-group flags 0, 1, 2), then each segment's */
            size_t t = seg0 + b * ns;
            for (int d = 0; d < 3; d++) {
                float s = (float)(val * (double)(1 << d) * 0.25);
                seg_put(w, t + (size_t)d, san_S(hm.e6m2 == 0xFF ? NAN : 4.0 * (double)s), san_Q(7.0f * s));
            }
            float sf[3] = {w->kSf[t], w->kSf[t + 1], w->kSf[t + 2]};
            int32_t se[3] = {w->kSE[t], w->kSE[t + 1], w->kSE[t + 2]};
            uint32_t sm[3] = {w->kSM[t], w->kSM[t + 1], w->kSM[t + 2]}, qb[3] = {w->kQb[t], w->kQb[t + 1], w->kQb[t + 2]};
            for (size_t k = 0; k < ns; k++) {
                size_t i = k * pf->seg;
                int d = ((hm.e1_8 >> (i / 8)) & 1) + ((hm.e1_16 >> (i / 4)) & 1);
                w->kSf[t + k] = sf[d];
                w->kSE[t + k] = se[d];
                w->kSM[t + k] = sm[d];
                w->kQb[t + k] = qb[d];
            }
        } else {
            float X = m[0] == 0 ? u2f(0x00400000u) : u2f((uint32_t)m[0] << 23);
            w->bscale[blk0 + b] = m[0] == 0xFF ? NAN : (double)X;
            for (size_t k = 0; k < ns; k++) {
                unsigned fld = (m[1] >> (2 * k)) & 3u;
                float cs = pf->m2x_es ? X * (1.0f + 0.25f * (float)fld) : X;
                seg_put(w, seg0 + b * ns + k, san_S(m[0] == 0xFF ? NAN : (double)cs), san_Q(6.0f * cs));
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
/* A block's slot in the block_err counts: zero, non-finite (no finite input, NaN/Inf), or its bin. */
static inline uint32_t rmse_slot(double rmse)
{
    if (rmse == 0) return HV_N + S_ZERO;
    if (!(rmse <= DBL_MAX)) return HV_N + S_NONF;
    int i = log4bin(rmse) - 4 * HV_LO;
    return (uint32_t)(i < 0 ? HV_N + S_UNDER : i >= HV_N ? HV_N + S_OVER : i);
}

#if MET_X86
/* sqrt(se2 / nf) of n blocks (NaN without finite input: 0 / 0), into se2, and their slots, 8 at a
** time: IEEE division and square root, the portable loop's bits; log4bin from the bits. */
__attribute__((target("avx512f,avx512dq")))
static size_t block_rmse_avx512(double *se2, const uint64_t *nf, size_t n, uint32_t *slot)
{
    const __m512i mant = _mm512_set1_epi64(0xfffffffffffffll), t1 = _mm512_set1_epi64((long long)T1);
    const __m512i t2 = _mm512_set1_epi64((long long)T2), t3 = _mm512_set1_epi64((long long)T3);
    const __m512i one = _mm512_set1_epi64(1), off = _mm512_set1_epi64(-4 * 1023 - 4 * HV_LO);
    const __m512i nb = _mm512_set1_epi64(HV_N), e7ff = _mm512_set1_epi64(0x7ff);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i c = _mm512_loadu_si512(nf + i);
        __m512d r = _mm512_sqrt_pd(_mm512_div_pd(_mm512_loadu_pd(se2 + i), _mm512_cvtepu64_pd(c)));
        __mmask8 none = _mm512_cmpeq_epi64_mask(c, _mm512_setzero_si512());
        r = _mm512_mask_mov_pd(r, none, _mm512_set1_pd(NAN));
        _mm512_storeu_pd(se2 + i, r);
        __m512i b = _mm512_castpd_si512(r), m = _mm512_and_si512(b, mant);
        __m512i ex = _mm512_and_si512(_mm512_srli_epi64(b, 52), e7ff);
        __m512i k = _mm512_add_epi64(_mm512_slli_epi64(ex, 2), off);
        k = _mm512_mask_add_epi64(k, _mm512_cmpge_epu64_mask(m, t1), k, one);
        k = _mm512_mask_add_epi64(k, _mm512_cmpge_epu64_mask(m, t2), k, one);
        k = _mm512_mask_add_epi64(k, _mm512_cmpge_epu64_mask(m, t3), k, one);
        k = _mm512_mask_mov_epi64(k, _mm512_cmplt_epi64_mask(k, _mm512_setzero_si512()), _mm512_set1_epi64(HV_N + S_UNDER));
        k = _mm512_mask_mov_epi64(k, _mm512_cmpge_epi64_mask(k, nb), _mm512_set1_epi64(HV_N + S_OVER));
        /* zero (a normal double's log4bin is exact; 0 and subnormals cannot be an RMSE of floats
        ** except 0 itself) and non-finite */
        k = _mm512_mask_mov_epi64(k, _mm512_cmpeq_epi64_mask(b, _mm512_setzero_si512()), _mm512_set1_epi64(HV_N + S_ZERO));
        k = _mm512_mask_mov_epi64(k, _mm512_cmpeq_epi64_mask(ex, e7ff), _mm512_set1_epi64(HV_N + S_NONF));
        _mm256_storeu_si256((__m256i *)(slot + i), _mm512_cvtepi64_epi32(k));
    }
    return i;
}
#endif

#if MET_X86
__attribute__((target("avx512f")))
static size_t add_f64_avx512(double *restrict d, const double *restrict s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm512_storeu_pd(d + i, _mm512_add_pd(_mm512_loadu_pd(d + i), _mm512_loadu_pd(s + i)));
    return i;
}

__attribute__((target("avx512f")))
static size_t rsub_u32_avx512(uint32_t *d, uint32_t a, size_t n)   /* d[i] = a - d[i] */
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_si512(d + i, _mm512_sub_epi32(_mm512_set1_epi32((int)a), _mm512_loadu_si512(d + i)));
    return i;
}

__attribute__((target("avx512f")))
static size_t add_u32_avx512(uint32_t *restrict d, const uint32_t *restrict s, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_si512(d + i, _mm512_add_epi32(_mm512_loadu_si512(d + i), _mm512_loadu_si512(s + i)));
    return i;
}
#endif

/* Count n slots (u32 or u8) into 4 interleaved tables of nb counters: neighbouring blocks often
** share a slot, and one table would chain every increment on the previous store. */
static void count4(uint32_t *c, size_t nb, const uint32_t *s32, const uint8_t *s8, size_t n)
{
    size_t i = 0;
#define SL(t) (s32 ? s32[t] : s8[t])
    for (; i + 4 <= n; i += 4) {
        c[SL(i)]++;
        c[nb + SL(i + 1)]++;
        c[2 * nb + SL(i + 2)]++;
        c[3 * nb + SL(i + 3)]++;
    }
    for (; i < n; i++) c[SL(i)]++;
#undef SL
}

/* Fold the 4 tables into the histogram's counts (once per band: the tables cannot overflow). */
static void fold4(uint64_t *h, uint32_t *c, size_t nb)
{
    for (size_t i = 0; i < nb; i++) {
        h[i] += (uint64_t)c[i] + c[nb + i] + c[2 * nb + i] + c[3 * nb + i];
        c[i] = c[nb + i] = c[2 * nb + i] = c[3 * nb + i] = 0;
    }
}

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
    size_t s0 = pf->fam == FAM_PROXY ? k * bpr : k * spr;
    ks.g = pf->fam == FAM_PROXY ? bl : pf->seg;
    ks.Sf = w->kSf + s0;
    ks.SE = w->kSE + s0;
    ks.SM = w->kSM + s0;
    ks.Qb = w->kQb + s0;
    ks.pow2 = w->pow2;
    ks.se0 = w->se0;
    kern_run(w, xk, qk, rlen, &ks, rs, va, vn);
    uint64_t gb = p->colruns ? (c0 + k) * p->nbc + r0 / blk : (r0 + k) * p->nbr + (blk ? c0 / blk : 0);
    /* each block's RMSE (in place of its squared-error sum) and its block_err slot */
    size_t i = 0;
#if MET_X86
    if (w->simd >= QS_SIMD_AVX512) i = block_rmse_avx512(w->bse2, w->bnf, bpr, w->bslot);
#endif
    for (; i < bpr; i++) {
        double rmse = w->bnf[i] ? sqrt(w->bse2[i] / (double)w->bnf[i]) : NAN;
        w->bse2[i] = rmse;
        w->bslot[i] = rmse_slot(rmse);
    }
    const uint8_t *bcode = w->bcode + k * bpr;
    count4(w->hb4, (size_t)w->hb.n + NSLOT, w->bslot, NULL, bpr);
    if (pf->byte_scale) count4(w->hs4, 256, NULL, bcode, bpr);
    if (j->bk_absmax)
        for (i = 0; i < bpr; i++) {
            double bsc = w->bscale[k * bpr + i];
            float bam = w->bam[i];
            uint64_t g2 = gb + i;
            j->bk_absmax[g2] = bam;
            j->bk_rmse[g2] = (float)w->bse2[i];
            j->bk_ratio[g2] = bsc > 0 && bsc <= DBL_MAX ? (float)((double)bam / bsc) : NAN;
            if (j->bk_code) j->bk_code[g2] = bcode[i];
        }
}

/* Scaled casts: the index of run k's first scale (a band starts at row r0, column c0) and the stride
** of the scales along the run (1 when the scale changes along it: per row on column runs, per column
** on row runs). */
static size_t cs_index(const job *j, uint64_t r0, uint64_t c0, size_t k)
{
    const plan *p = j->p;
    uint64_t r = p->colruns ? r0 : r0 + k, c = p->colruns ? c0 + k : c0;
    return j->cscale == QS_CSCALE_ROW ? (size_t)r : j->cscale == QS_CSCALE_COL ? (size_t)c : 0;
}
static size_t cs_stride(const job *j, int colruns)
{
    return (j->cscale == QS_CSCALE_ROW && colruns) || (j->cscale == QS_CSCALE_COL && !colruns);
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
    w->pow2 = w->se0 = 1;   /* seg_put clears them */
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
                if (pf->mx) {   /* the fake-quantizer hands out each block's scale */
                    if (qs_mx_fakeq_scales(f, &o, xk, rlen, qk, w->bcode + k * bpr, w->pS + k * bpr, w->pQ + k * bpr, e))
                        return -1;
                } else if (j->cscale) {   /* format_apply's scaled cast: the same (s, inv) by position */
                    size_t k0 = cs_index(j, r0, c0, k), st = cs_stride(j, p->colruns);
                    if (qs_cast_scaled_apply(f, &o, xk, rlen, j->cs + k0, j->ci + k0, st, qk, e)) return -1;
                } else {
                    if (f->fakeq(f, &o, xk, rlen, qk, e)) return -1;
                    if (pf->fam == FAM_PROXY) block_reps(w, xk, rlen, blk ? blk : rlen, pf->finite_rep, w->reps + k * bpr);
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
        if (j->cscale) {   /* scaled casts: the ulp scale S = inv, per run or per element */
            size_t k0 = cs_index(j, r0, c0, k);
            kscale ks = {cs_stride(j, p->colruns), j->cSf + k0, j->cSE + k0, j->cSM + k0, j->cQb + k0, j->cpow2, j->cse0, 0,
                         NULL, NULL, NULL};
            kern_run(w, xk, qk, rlen, &ks, rs, va, vn);
        } else if (mem || !p->blockstats) {   /* one scale for the run: in-memory modes, element casts */
            double S = 1.0;
            float Q = pf->cast_top;
            if (mem) {
                S = p->mode == PM_MEM_C ? j->colS[c0 + k] : j->memS;
                Q = p->mode == PM_MEM_C ? j->colQ[c0 + k] : j->memQ;
            }
            double Ss = san_S(S);
            float Sf;
            int32_t SE;
            uint32_t SM, Qb = san_Q(Q);
            scale_parts(Ss, &Sf, &SE, &SM);
            kscale ks = {0, &Sf, &SE, &SM, &Qb, SM == 0 && Ss > 0, SE == 0, 0, NULL, NULL, NULL};
            kern_run(w, xk, qk, rlen, &ks, rs, va, vn);
        } else
            band_blocks(w, k, xk, qk, rlen, r0, c0, bpr, spr, rs, va, vn);
        if (rs) {
            ra[k] = lanesum(rs->se2);
            rn[k] = (uint32_t)rs->nf;
        }
    }
    if (p->blockstats) {
        fold4(w->hb.c, w->hb4, (size_t)w->hb.n + NSLOT);
        if (pf->byte_scale) fold4(w->hs.c, w->hs4, 256);
    }
    if (acc2) {   /* the kernels counted non-finite inputs per position of the other axis */
        size_t i = 0;
#if MET_X86
        if (w->simd >= QS_SIMD_AVX512) i = rsub_u32_avx512(vn, (uint32_t)nruns, rlen);
#endif
        for (; i < rlen; i++) vn[i] = (uint32_t)nruns - vn[i];
    }

    /* band partial */
    const kl *A = &w->acc;
    sl->sx2 = lanesum(A->sx2);
    sl->se2 = lanesum(A->se2);
    sl->se = lanesum(A->se);
    sl->sxe = lanesum(A->sxe);
    sl->srel = lanesum(A->srel);
    sl->seu = lanesum(A->seu);
    sl->sec = lanesum(A->sec);
    sl->ser = lanesum(A->ser);
    sl->maxae = lanemaxf(A->maxae);
    sl->maxrel = lanemaxf(A->maxrel);
    sl->nfin = A->nfin;
    sl->nunder = A->nunder;
    sl->nclip = A->nclip;
    sl->nnonf = A->nnonf;
    sl->nelem = len;
    sl->r0 = r0;
    sl->c0 = c0;
    sl->nr = nr;
    sl->nc = nc;
    memset(&w->acc, 0, sizeof w->acc);
    return 0;
}

/* d[i] += s[i]: element-wise, so any vector width gives the same bits (a band's column sums hold
** one double per column: the scalar loop showed in profiles of wide tensors). */
static void add_f64(double *restrict d, const double *restrict s, size_t n)
{
    size_t i = 0;
#if MET_X86
    if (qs_simd_level() >= QS_SIMD_AVX512) i = add_f64_avx512(d, s, n);
#endif
    for (; i < n; i++) d[i] += s[i];
}

static void add_u32(uint32_t *restrict d, const uint32_t *restrict s, size_t n)
{
    size_t i = 0;
#if MET_X86
    if (qs_simd_level() >= QS_SIMD_AVX512) i = add_u32_avx512(d, s, n);
#endif
    for (; i < n; i++) d[i] += s[i];
}

/* Merge one band partial into the totals (called in band order, under the mutex). */
static void merge_part(job *j, const bpart *s)
{
    bpart *t = &j->tot;
    t->sx2 += s->sx2;
    t->se2 += s->se2;
    t->se += s->se;
    t->sxe += s->sxe;
    t->srel += s->srel;
    t->seu += s->seu;
    t->sec += s->sec;
    t->ser += s->ser;
    t->maxae = s->maxae > t->maxae ? s->maxae : t->maxae;
    t->maxrel = s->maxrel > t->maxrel ? s->maxrel : t->maxrel;
    t->nfin += s->nfin;
    t->nunder += s->nunder;
    t->nclip += s->nclip;
    t->nnonf += s->nnonf;
    t->nelem += s->nelem;
    if (j->p->colacc) {
        add_f64(j->row_se2 + s->r0, s->row_se2, s->nr);
        add_u32(j->row_nf + s->r0, s->row_nf, s->nr);
        add_f64(j->col_se2 + s->c0, s->col_se2, s->nc);
        add_u32(j->col_nf + s->c0, s->col_nf, s->nc);
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
    const uint64_t *c = a->c;
    for (int i = 0; i < h->nbins; i++) h->counts[i] += c[i];
    h->zero += c[a->n + S_ZERO];
    h->under += c[a->n + S_UNDER];
    h->over += c[a->n + S_OVER];
    h->nonfinite += c[a->n + S_NONF];
}

/* Values in the bins, under or over. */
static uint64_t hist_binned(const qs_hist *h)
{
    uint64_t t = h->under + h->over;
    for (int i = 0; i < h->nbins; i++) t += h->counts[i];
    return t;
}

static void worker_free(worker *w)
{
    free(w->x); free(w->xt); free(w->q); free(w->codes); free(w->meta);
    free(w->reps); free(w->pcodes); free(w->pmeta); free(w->pS); free(w->pQ);
    free(w->bcode); free(w->bslot); free(w->bscale); free(w->bse2); free(w->bnf); free(w->bam);
    free(w->hv.c); free(w->ha.c); free(w->hr.c); free(w->hu.c); free(w->hb.c); free(w->hs.c);
    free(w->kSf); free(w->kSE); free(w->kSM); free(w->kQb); free(w->hb4); free(w->hs4);
    free(w->wv); free(w->wa); free(w->wr); free(w->wu);
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
        !(w->bscale = malloc(nb * sizeof(double))) || !(w->bse2 = malloc(nb * sizeof(double))) ||
        !(w->bslot = malloc(nb * sizeof(uint32_t))) ||
        !(w->bnf = malloc(nb * sizeof(uint64_t))) || !(w->bam = malloc(nb * sizeof(float))))
        return -1;
    size_t nk = (ns > nb ? ns : nb) + 16;   /* a run's segments, padded for 16-lane loads */
    if (!(w->kSf = calloc(nk, sizeof(float))) || !(w->kSE = calloc(nk, sizeof(int32_t))) ||
        !(w->kSM = calloc(nk, sizeof(uint32_t))) || !(w->kQb = calloc(nk, sizeof(uint32_t))))
        return -1;
    hacc *h[6] = {&w->hv, &w->ha, &w->hr, &w->hu, &w->hb, &w->hs};
    int n[6] = {HV_N, HV_N, HR_N, HU_N, HV_N, 256};
    int off[6] = {RAW_OFF_V, RAW_OFF_V, RAW_OFF_R, HU_N / 2, 0, 0};
    for (int k = 0; k < 6; k++) {
        h[k]->n = n[k];
        h[k]->off = off[k];
        if (!(h[k]->c = calloc((size_t)n[k] + NSLOT, sizeof(uint64_t)))) return -1;
    }
    if (!(w->hb4 = calloc(4 * ((size_t)HV_N + NSLOT), sizeof(uint32_t))) || !(w->hs4 = calloc(4 * 256, sizeof(uint32_t))))
        return -1;
    hwin **hw[4] = {&w->wv, &w->wa, &w->wr, &w->wu};
    for (int k = 0; k < 4; k++) {
        void *m = NULL;
        if (posix_memalign(&m, 64, sizeof(hwin))) return -1;
        memset(m, 0, sizeof(hwin));
        *hw[k] = m;
        (*hw[k])->top = 8;
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
    if (a->f->has_tensor_scale && !(o.tensor_scale > 0)) o.tensor_scale = amax > 0 ? amax : 0;
    pf.o = o;
    j.F = rel_floor * (double)amax;
    pf.Ff = (float)j.F > 0 ? (float)j.F : u2f(1);
    j.pf = &pf;
    j.p = &p;

    /* scaled casts: one more reading pass for the absmax of each scale's run (format_apply's scales) */
    size_t ncs = 0;
    if (a->cscale) {
        if (pf.fam != FAM_CAST) { qs_fail(e, "format %s takes no scale=", a->f->name); goto fail; }
        if (qs_cast_scales(a, rows, cols, rd, rctx, &j.cs, &j.ci, &ncs, e)) goto fail;
        j.cscale = a->cscale;
        if (!(j.cSf = calloc(ncs + 16, sizeof(float))) || !(j.cSE = calloc(ncs + 16, sizeof(int32_t))) ||
            !(j.cSM = calloc(ncs + 16, sizeof(uint32_t))) || !(j.cQb = calloc(ncs + 16, sizeof(uint32_t))))
            goto oom;
        j.cpow2 = j.cse0 = 1;
        for (size_t i = 0; i < ncs; i++) {
            /* an unscaled run (s = 0) keeps S = 1 and the cast's top; else q = Q(x s) inv lives on the
            ** grid times inv, and nothing clips: the run's absmax maps onto the target (<= max_finite), and
            ** an absmax landing on max_finite * inv, a hair below x after fl32(inv), is rounding, not clipping */
            double S = j.cs[i] != 0 ? (double)j.ci[i] : 1.0;
            float top = j.cs[i] != 0 ? 0.0f : pf.cast_top;
            scale_parts(san_S(S), &j.cSf[i], &j.cSE[i], &j.cSM[i]);
            j.cQb[i] = san_Q(top);
            j.cpow2 &= j.cSM[i] == 0 && S > 0;
            j.cse0 &= j.cSE[i] == 0;
        }
    }

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
            /* sum x q = sum x^2 + sum x e, sum q^2 = sum x^2 + 2 sum x e + sum e^2 (metrics.h) */
            double sxq = t->sx2 + t->sxe, sq2 = (t->sx2 + 2.0 * t->sxe) + t->se2;
            m->cosine = t->nnonf || !(t->sx2 > 0) || !(sq2 > 0) ? NAN : sxq / (sqrt(t->sx2) * sqrt(sq2));
            m->underflow_frac = (double)t->nunder / nf;
            m->clip_frac = (double)t->nclip / nf;
            m->nonfinite_frac = (double)t->nnonf / nf;
        } else {
            m->mse = m->rmse = m->sqnr_db = m->eff_bits_energy = m->eff_bits_sqnr = NAN;
            m->max_abs_err = m->max_rel_err = m->mean_rel_err = m->mean_err = m->cosine = NAN;
        }
        /* error energy by source (metrics.h): shares of the finite sum_e2, NaN when it is 0 */
        m->sum_e2_under = t->seu;
        m->sum_e2_clip = t->sec;
        m->sum_e2_round = t->ser;
        double fin = (t->seu + t->sec) + t->ser;
        m->err_under = fin > 0 ? t->seu / fin : NAN;
        m->err_clip = fin > 0 ? t->sec / fin : NAN;
        m->err_round = fin > 0 ? t->ser / fin : NAN;
        const qs_format *f = pf.f;
        m->bits_per_elem = f->elem_bits;
        if (n && p.nblocks) m->bits_per_elem += f->meta_bits * (double)p.nblocks / (double)n;
        if (n && f->has_tensor_scale) m->bits_per_elem += 32.0 / (double)n;
        if (n && ncs) m->bits_per_elem += 32.0 * (double)ncs / (double)n;   /* a scaled cast's FP32 scales */

        for (int k = 0; k < T; k++) {
            hwin_flush(w[k].wv, &w[k].hv);
            hwin_flush(w[k].wa, &w[k].ha);
            hwin_flush(w[k].wr, &w[k].hr);
            hwin_flush(w[k].wu, &w[k].hu);
            if (!j.novalue) hist_add(&an->value, &w[k].hv);
            hist_add(&an->abs_err, &w[k].ha);
            hist_add(&an->rel_err, &w[k].hr);
            hist_add(&an->ulp_err, &w[k].hu);
            hist_add(&an->block_err, &w[k].hb);
            hist_add(&an->scale_code, &w[k].hs);
        }
        /* special slots from the counters: every finite input is binned, zero or (errors) non-finite */
        if (!j.novalue) {
            an->value.nonfinite += n - t->nfin;
            an->value.zero += t->nfin - hist_binned(&an->value);
        }
        qs_hist *eh[3] = {&an->abs_err, &an->rel_err, &an->ulp_err};
        uint64_t binned = hist_binned(&an->abs_err);
        for (int k = 0; k < 3; k++) {
            eh[k]->zero += t->nfin - t->nnonf - binned;
            eh[k]->nonfinite += t->nnonf;
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
    free(j.cs); free(j.ci); free(j.cSf); free(j.cSE); free(j.cSM); free(j.cQb);
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

static json_t *metrics_obj(const qs_metrics *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "n", json_integer((json_int_t)m->n));
    json_object_set_new(o, "n_finite", json_integer((json_int_t)m->n_finite));
/* non-finite values: null plus the reason in "nonfinite_values" (store/json_out.h) */
#define R(k) qs_json_set_num(o, #k, m->k)
    R(mse); R(rmse); R(sqnr_db); R(eff_bits_energy); R(eff_bits_sqnr); R(max_abs_err); R(max_rel_err);
    R(mean_rel_err); R(rel_floor); R(mean_err); R(cosine); R(underflow_frac); R(clip_frac); R(nonfinite_frac);
    R(bits_per_elem); R(sum_x2); R(sum_e2);
#undef R
    /* shares of the finite error energy (metrics.h); null as a whole when there is no finite error */
    json_t *ee = json_null();
    if (isfinite(m->err_under) && isfinite(m->err_clip) && isfinite(m->err_round)) {
        ee = json_object();
        qs_json_set_num(ee, "underflow", m->err_under);
        qs_json_set_num(ee, "clip", m->err_clip);
        qs_json_set_num(ee, "rounding", m->err_round);
    }
    json_object_set_new(o, "err_energy", ee);
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
