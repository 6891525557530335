/*
** The analysis engine's private declarations (the public interface and the definitions of every
** metric are in metrics.h).  The engine is split by concept:
**   metrics_plan.c           the format's profile (element grid, block-scale kind) and the plan: runs,
**                            blocks, segments and the bands the work is cut into;
**   metrics_hist.c           histogram accumulators: the AVX-512 window counters (bit-sliced adder
**                            trees) and the qs_hist helpers;
**   metrics_kernel_ref.c     the per-value kernel, portable reference (elem) and the chunk loop of a run;
**   metrics_kernel_avx512.c  the same kernel with AVX-512, bit-identical, one specialisation per flag set;
**   metrics_band.c           one band: read, fake-quantize, block scales, kernels, the band partial;
**   metrics.c                the driver: threads, merging band partials in band order, the results;
**   metrics_part.c           partial results of a range of bands: folding, merging, their bytes;
**   metrics_json.c           the stored JSON texts.
*/
#ifndef QS_METRICS_INTERNAL_H
#define QS_METRICS_INTERNAL_H

/* The bits must not depend on the compiler's contraction choices (the Makefile also passes
** -ffp-contract=off). */
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

#include "../kernels/fbits.h"
#include "../kernels/simd.h"

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

/* How a format's element scales are found, from what its row gives (kernels/format.h): element casts;
** block scales from each block's largest magnitude (block_scales, or fakeq_scales on the way); scales of
** segments from the metadata (seg_scales). */
enum { FAM_CAST, FAM_PROXY, FAM_CODED };
enum { PM_ROWS, PM_PIECES, PM_COLS, PM_MEM_T, PM_MEM_C };


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

/* ---- the format's profile and the plan (metrics_plan.c) ------------------------------------ */

typedef struct prof {
    const qs_format *f;
    qs_qopts o;              /* resolved: block, NVFP4 tensor scale */
    int fam;
    int byte_scale;          /* metadata starts with a one-byte scale code (the row has scale_value) */
    int finite_rep;          /* block representative = largest finite |x| (the row's amax_finite) */
    float cast_top;          /* casts: largest finite value */
    int elo, ehi;            /* element grid spacing sp[E - elo] for binades E, clamped */
    double sp[300], isp[300];   /* spacing and its inverse (powers of two) */
    float isp32[300];        /* 32 / spacing (tapered grids: the kernel's table) */
    float Ff;                /* relative-error floor, fl32 (at least the smallest subnormal) */
    int tapered, mb;         /* tapered: spacing from the table; else sp[E] = 2^(E - mb) */
    size_t seg;              /* values per scale segment (0: the whole run / block) */
} prof;

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

/* ---- histograms (metrics_hist.c) ----------------------------------------------------------- */

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
static inline void scale_parts(double S, float *Sf, int32_t *SE, uint32_t *SM)
{
    uint64_t sb = d2u(S);
    *Sf = (float)S;
    *SE = S > 0 ? (int32_t)(sb >> 52 & 0x7ff) - 1023 : -1023;
    *SM = (uint32_t)((sb & 0xfffffffffffffull) >> 29);
}

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

typedef struct worker {     /* one per pool slot (kernels/pool.h) */
    job *j;
    float *x, *xt, *q;       /* band input, transposed input, fake-quantized (run layout) */
    uint32_t *codes;
    uint8_t *meta;
    float *reps;             /* proxy: one representative per block */
    float *sS, *sQ;          /* coded: a run's segment scales from seg_scales */
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
} worker;

struct job {
    const prof *pf;
    const plan *p;
    qs_an_read rd;
    void *rctx;
    int serial;
    pthread_mutex_t read_mu, mu;
    pthread_cond_t cv;
    double F;                /* relative-error floor (absolute) */
    int novalue;             /* opts.value_hist given: the kernels skip the value histogram */
    /* the bands of this pass, [b0, b1), and where their partials go: folded into tot and the row and
    ** column sums (b0 = 0), else kept band by band in part->band (qs_an_part) */
    uint64_t b0, b1;
    int keep;
    struct qs_an_part *part;
    /* window */
    bpart *slots;
    uint64_t wsize, frontier;
    uint64_t done_elems;
    /* per-block outputs (NULL when not requested), band by band from band b0 (met_band_block0) */
    uint8_t *bk_code;
    float *bk_absmax, *bk_ratio, *bk_rmse;
    /* one-scale modes (PM_MEM_T/C): the run's largest finite |x|, quantized under in every band */
    float memam, *colam;
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

/* ---- partial results (metrics_part.c; the interface in metrics.h) ---------------------------- */

/* The results of bands [b0, b1) of one analysis.  From band 0 the band partials are folded, in band
** order, into tot and the row / column sums exactly as a whole run folds them; from a later band they
** are kept one by one (a sum of doubles cannot be regrouped without changing its bits) and folded
** when merged behind a partial that starts at band 0.  Histograms and counts are exact integers,
** maxima order-free: those are merged as they are. */
enum { H_VALUE, H_ABS, H_REL, H_ULP, H_CODE, H_BLOCK, NHIST };
struct qs_an_part {
    /* the same in every partial of one analysis (merge checks) */
    plan p;
    uint64_t rows, cols, n;
    int twod, novalue, blocks, codes;   /* 2-D; value histogram given; per-block arrays; their scale codes */
    double rel_floor, bpe;   /* relative-error floor, bits per element */
    float amax;
    double memS;             /* in-memory modes: the tensor's scale, or per column colS and the */
    double *colS;            /* columns' largest finite |x| (colam) */
    float *colam;
    /* bands */
    uint64_t b0, b1;
    bpart tot;               /* b0 = 0: bands [0, b1) folded */
    double *row_se2, *col_se2;
    uint32_t *row_nf, *col_nf;
    bpart *band;             /* b0 > 0: the band partials, b1 - b0 of them */
    qs_hist h[NHIST];        /* value, abs_err, rel_err, ulp_err, scale_code, block_err (without the
                             ** special slots derived from the totals at the end) */
    uint64_t nbk;            /* per-block arrays of the bands, band by band */
    uint8_t *bk_code;
    float *bk_absmax, *bk_ratio, *bk_rmse;
};

/* Fold one band partial into totals and row / column sums (bands in band order). */
void met_fold_band(bpart *tot, double *row_se2, uint32_t *row_nf, double *col_se2, uint32_t *col_nf, int colacc,
                   const bpart *s);
/* A deep copy of a band partial (row / column sums included when colacc). */
int met_band_copy(bpart *d, const bpart *s, int colacc);
/* Allocate the histograms of an analysis (nbins 0: not computed). */
int met_hists_alloc(qs_hist *h, int byte_scale, int blocky);

/* ---- shared by both kernels ----------------------------------------------------------------- */

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

/* Kernel variants (compile-time flags of groups_body). */
enum {
    GV_BST = 1,      /* per-block statistics */
    GV_ROWS = 2,     /* the run's total and the other axis' element-wise sums */
    GV_POW2 = 4,     /* every element scale a power of two: the binade of |x| / S by exponents alone */
    GV_NOVAL = 8,    /* no value histogram */
    GV_TAP = 16,     /* tapered grid: 32 / spacing from the table (needs POW2 with S = 1) */
    GV_G4 = 32,      /* a segment per 4 values */
    GV_G8 = 64,      /* a segment per 8 values */
    GV_ALL = 127
};

/* ---- across the files ------------------------------------------------------------------------ */

/* metrics_plan.c */
int met_prof_init(prof *p, const qs_apply *a, const qs_qopts *o, qs_err *e);
int met_plan_init(plan *p, const prof *pf, const qs_apply *a, uint64_t rows, uint64_t cols, qs_err *e);
void met_band_geom(const plan *p, uint64_t b, uint64_t *r0, size_t *nr, uint64_t *c0, size_t *nc);
uint64_t met_band_block0(const plan *p, uint64_t b0, uint64_t b);
uint64_t met_band_nblocks(const plan *p, uint64_t b0, uint64_t b1);

/* metrics_hist.c */
void met_hwin_flush(hwin *W, hacc *h);
void met_hwin_arm(hwin *W, size_t g0, size_t ngr);
void met_hs_count(hwin *W, hacc *h, int32_t *d, size_t k, int ulp);
void met_hist_set(qs_hist *h, int kind, int nbins, double lo, double hi);
int met_hist_alloc(qs_hist *h);
void met_hist_add(qs_hist *h, const hacc *a);
uint64_t met_hist_binned(const qs_hist *h);

/* metrics_kernel_ref.c */
void met_kern_run(worker *w, const float *x, const float *q, size_t m, const kscale *ks, bstat *rs, double *va,
                  uint32_t *vn);

/* metrics_kernel_avx512.c */
#if MET_X86
void met_groups_avx512(int V, const kpar *P, const worker *w, const kscale *ks, size_t m, const float *x,
                       const float *q, size_t p0, size_t ng, kl *a, bstat *bsm, int32_t *bv, int32_t *ba,
                       int32_t *br, int32_t *bu, bstat *rs, double *va, uint32_t *vn);
#endif

/* metrics_band.c */
float met_block_rep(const worker *w, const float *x, size_t n, int finite);
int met_block_scales(worker *w, size_t nb, qs_err *e);
int met_do_band(worker *w, uint64_t b, bpart *sl, qs_err *e);

#endif
