/*
** Quantization metrics of one tensor under one format: one streaming pass that fake-quantizes the
** tensor (kernels/format_apply) and accumulates error metrics, histograms and per-block statistics,
** with bounded memory (except per-block/row/column arrays, which are O(blocks + rows + cols)) and
** both cores, bit-identical for any thread count.
*/
#ifndef QS_METRICS_H
#define QS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/format_apply.h"

/*
** Definitions (implementation: analysis/metrics*.c, where each metric is computed: the head of
** metrics_kernel_ref.c; tests: tests/unit/test_metrics.c, test_metrics_part.c).
**
** Values.  x is the input (float32), q its fake-quantization exactly as qs_format_apply computes it
** (same runs, blocks, SR counters, NVFP4 tensor scale), e = fl32(q - x), the float32 difference: exact
** whenever |q| lies within a factor 2 of |x| (Sterbenz), which round-to-nearest guarantees for every
** value that is not clipped; else rounded once (relative 2^-24 of that error).  The metrics are
** over the n_finite finite inputs; NaN/Inf inputs are only counted (value histogram, n - n_finite).
**   - A finite input whose q is NaN or Inf (overflow of a non-saturating cast, a NaN/Inf block, E8M0
**     of a negative) has an infinite error: sum_e2, mse, rmse, max_abs_err, max_rel_err, mean_rel_err
**     are +inf, sqnr_db and both effective bits -inf, mean_err and cosine NaN.  sum_x2 and the cosine
**     sums leave such values out.  They are counted in nonfinite_frac.
**   - n_finite == 0: every error metric NaN, every fraction 0.
**   - sqnr_db = 10 log10(sum_x2 / sum_e2): +inf when sum_e2 == 0 (exact, the all-zero tensor
**     included), -inf when sum_x2 == 0 < sum_e2.  eff_bits_energy = -1/2 log2(sum_e2 / sum_x2) and
**     eff_bits_sqnr = (sqnr_db - 1.76) / 6.02 are +inf when exact.  mse = sum_e2 / n_finite.
**   - Relative error, in float32: fl32(|e| / max(|x|, F)), F = fl32(rel_floor * absmax)
**     (at least the smallest float32 subnormal), absmax = the tensor's largest finite |x| (opts.absmax,
**     or a reading pre-pass), 0/0 = 0.  rel_floor defaults to 1e-6.  max_rel_err is the largest of
**     them; mean_rel_err their sum over n_finite, each lane summing in float32 within every chunk of
**     1024 run positions and in double across chunks (relative error below 4e-6).  max_abs_err is the
**     largest |e|.
**   - cosine = sum(x q) / (sqrt(sum x^2) sqrt(sum q^2)); NaN when either sum is 0.  sum x q and sum q^2
**     are not summed apart: sum x q = sum x^2 + sum x e, sum q^2 = (sum x^2 + 2 sum x e) + sum e^2.
**   - underflow_frac: non-zero finite x with q = +-0, over n_finite.
**   - clip_frac: finite x with finite q, |q| < |x| and |q| equal to the block's saturation level (the
**     value its largest element code decodes to): casts +-max_finite; int8/int4 fl32(qmax * scale);
**     MX max_elem * X; NVFP4 6 * its element multiplier; HiF4 7 * the step of its micro-group; M2XFP
**     6 * its sub-group scale (em: the top element's extra mantissa is not modelled).  A value that
**     overflowed to NaN/Inf (a non-saturating cast beyond max_finite) is not clipped: it counts in
**     nonfinite_frac only, so underflow, clip and non-finite never count one value twice.  A block
**     whose saturation level is 0 (an NVFP4 block scale that underflowed) clips nothing (its values
**     are underflows).  NaN/Inf inputs never count.
**   - Error energy by source: every finite input with a finite q is exactly one of underflowed,
**     clipped (as counted above) or "rounded" (the rest, exact values included); sum_e2_under,
**     sum_e2_clip and sum_e2_round are the sums of their e^2 (lane by lane per band, as sum_x2), and
**     err_under / err_clip / err_round their shares of (sum_e2_under + sum_e2_clip) + sum_e2_round,
**     the finite error energy (NaN when it is 0).  Values that became NaN/Inf have an infinite
**     error; they are left out of the shares and reported by count (nonfinite_frac).
**   - bits_per_elem = elem_bits + meta_bits * nblocks / n (partial blocks are blocks; int8/int4 with one
**     scale per row/column/tensor: 32 bits per scale), + 32 / n for NVFP4's FP32 tensor scale.
**   - Sums are double (x^2, e^2 and x e of float32 x and e are exact in double).  Within a run, lane L
**     (0..15) sums the values at run positions = L mod 16, each lane sequentially; for e^2, lane by
**     lane per block (formats with blocks), the blocks' lanes into the run's (2-D tensors) and the
**     runs' lanes into the band's, each level in order.  Lanes are combined as t_L = l_L + l_(L+8),
**     then ((t0+t1)+(t2+t3))+((t4+t5)+(t6+t7)), per band, and bands in band order.  Band
**     boundaries depend only on shape and format, so results are bit-identical for any thread count
**     and SIMD level (and sum_x2 is the same for every format whose runs match).
**
** ulps.  The ulp at x is S times the spacing of the element grid at |x| / S, in the binade of |x| / S
** (the lowest binade's spacing below it, e.g. the subnormal step; the top binade's above the largest
** value), S the element scale:
**   casts S = 1 (fp32/bf16/fp16/FP8/FP6/FP4: 2^(E - mbits) with E = max(floor log2 t, emin); E8M0 2^E;
**   HiF8: its code table per binade); int8/int4 S = the FP32 block scale, grid step 1; MX S = X =
**   2^(e8m0 - 127), the element's minifloat grid (MXINT8 step 1/64); NVFP4 S = the value element 1.0
**   decodes to (fl32(fl32(s amax) / 2688) for TE, pts * s for torchao), E2M1 grid; HiF4 S = E6M2 *
**   2^(group + micro-group flags), step 1/4; M2XFP S = X (em) or X (1 + m/4) (es), E2M1 grid.  The ulp
**   error is v = fl32(fl32(e / S) / spacing), signed, in float32 arithmetic (every spacing is a power
**   of two, so the second step only scales).  S = 0 (underflowed NVFP4 block): +-inf ulps.
**
** Histograms (qs_hist; "zero", "under", "over", "nonfinite" are outside the bins; the total of a
** histogram is sum(counts) + zero + under + over + nonfinite):
**   value      kind 0: bins of floor(4 log2 |x|) (exact: the edges 2^(k/4) are compared exactly),
**              lo -160, hi 130, 1160 bins; zero: x = +-0; nonfinite: NaN/Inf.  Total n.
**   abs_err    kind 0, log2 |e|, same bins (exact bit arithmetic); over the finite inputs: zero e == 0,
**              nonfinite q NaN/Inf.  Total n_finite.
**   rel_err    kind 0, log2 of the (float32) relative error, lo -80, hi 16, 384 bins; as abs_err (a
**              relative error that underflowed to 0 is under).
**   ulp_err    kind 1, v in [-1, 1), 64 bins of 1/32 ulp: bin floor(32 v) + 32 (32 v is exact); under
**              v < -1, over v >= 1; zero and nonfinite as abs_err.  Total n_finite.
**   The counts are exact however they are computed: the AVX-512 path counts each histogram's values
**   inside a window of 64 bins with bit-sliced carry-save adder trees and the rest one by one.
**   scale_code kind 2, 256 bins, one count per block: the first metadata byte (MX and M2XFP E8M0,
**              NVFP4 UE4M3, HiF4 E6M2).  Not computed for element casts and int8/int4.
**   block_err  kind 0, log2 of each block's RMSE, as value; zero RMSE 0; nonfinite: a block with a
**              NaN/Inf output or without finite input.  Total nblocks.  Not computed for casts.
** A histogram that is not computed has nbins 0 and counts NULL (JSON null).
**
** Blocks (nblocks = 0 for element casts).  Order: axis 1 row by row, axis 0 column by column;
** granularity row / col: one block per row / column; tensor: one.  block_absmax: largest finite |x|
** (0 if none); block_ratio = block_absmax / the decoded block scale (MX X, NVFP4 its element
** multiplier S, int the FP32 scale, HiF4 the E6M2 value, M2XFP X), NaN for a NaN block or a zero
** scale; block_rmse = sqrt(block sum_e2 / its finite inputs) with the conventions above (the block
** sum in 16 lanes by run position, combined as the sums); block_scale_code: the first metadata
** byte.  The histograms scale_code and block_err are computed without opts.blocks; the arrays only
** with it.
** row_rmse / col_rmse: when rows > 1 (a 1-D tensor is passed as one row: NULL), over the finite
** inputs of the row / column.
**
** Block scales without a full encode, from the format's row (kernels/format.h): for int8/int4, MX and
** NVFP4 the block scale depends only on the block's largest magnitude (the row's amax_finite: largest
** finite |x|, else largest magnitude bits, NaN/Inf making a NaN block); code, S and the saturation
** level come from the row's fakeq_scales along with q (MX) or its block_scales (NVFP4, int8/int4),
** what encode and decode give.  HiF4 and M2XFP give q and the metadata (fakeq_meta, else encode +
** decode, bit-identical to fakeq) and the scales of each segment from the metadata (seg_scales).
**
** Memory: per thread about 5 bands of ~1M values (input, transposed input, q, per-block arrays) and
** a window of 2 x threads band partials (with row/column sums when 2-D), plus O(nblocks + rows +
** cols).  As in format_apply, int8/int4 with one scale per tensor or per column (granularity
** tensor/col, or axis 0 without a block size) hold the whole tensor, twice (x and q).
**
** Speed: the per-value kernel has an AVX-512 path (bit-identical to the portable C path, which is
** used without AVX-512 or with QS_SIMD=scalar and is several times slower).
*/

#define QS_REL_FLOOR_DEFAULT 1e-6   /* relative errors use max(|x|, floor * absmax) as denominator */

typedef struct qs_metrics {
    uint64_t n;              /* elements */
    uint64_t n_finite;       /* finite inputs (the metrics below are over these) */
    double mse, rmse;
    double sqnr_db;          /* 10 log10(sum x^2 / sum e^2); +inf when the error is zero */
    double eff_bits_energy;  /* -1/2 log2(sum e^2 / sum x^2); +inf when exact */
    double eff_bits_sqnr;    /* (SQNR - 1.76) / 6.02; +inf when exact */
    double max_abs_err;
    double max_rel_err, mean_rel_err;   /* |e| / max(|x|, rel_floor * absmax) */
    double rel_floor;        /* the floor used (relative to the tensor absmax) */
    double mean_err;         /* bias: mean of q - x */
    double cosine;           /* cos(x, q) */
    double underflow_frac;   /* non-zero finite inputs that became 0, over n_finite */
    double clip_frac;        /* finite inputs whose magnitude was reduced to a saturation level
                             ** (|q| < |x| and |q| is the largest magnitude its block could represent;
                             ** finite q only: an overflow to NaN/Inf is in nonfinite_frac) */
    double nonfinite_frac;   /* finite inputs that became NaN or Inf, over n_finite */
    double bits_per_elem;    /* including metadata */
    double sum_x2, sum_e2;
    /* the finite error energy by source: sums of e^2 and shares of their total (NaN when it is 0);
    ** values that became NaN/Inf are left out (nonfinite_frac counts them) */
    double sum_e2_under, sum_e2_clip, sum_e2_round;
    double err_under, err_clip, err_round;
} qs_metrics;

typedef struct qs_hist {
    int kind;                /* 0 log2 bins of |v|, 1 linear bins, 2 code bins (0..255) */
    int nbins;
    double lo, hi;           /* edges: lo + (hi-lo)*i/nbins (log2 exponents for kind 0) */
    uint64_t *counts;        /* nbins */
    uint64_t zero, under, over, nonfinite;
} qs_hist;

typedef struct qs_analysis {
    qs_metrics m;
    qs_hist value, abs_err, rel_err, ulp_err, scale_code, block_err;
    /* per block (in the run order of format_apply: rows first for axis 1, columns for axis 0) */
    uint64_t nblocks;
    uint8_t *block_scale_code; /* NULL when the format has no one-byte block scale */
    float *block_absmax, *block_ratio, *block_rmse;
    /* 2-D: per row and per column RMSE (NULL for 1-D) */
    uint64_t rows, cols;
    float *row_rmse, *col_rmse;
} qs_analysis;

typedef struct qs_analyze_opts {
    int threads;             /* >= 1 */
    int blocks;              /* compute per-block arrays (needs encode) */
    double rel_floor;        /* 0 = QS_REL_FLOOR_DEFAULT */
    /* progress: called from the calling thread with done/total elements, at band granularity and
    ** once at the end (total = n per reading pass: the absmax pre-pass and the in-memory modes' read
    ** count as passes); may be NULL.  Returning non-zero cancels (the call then fails with
    ** "cancelled", *out zeroed, nothing allocated). */
    int (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
    /* Extension (zero-initialised = the old behaviour).  The relative-error floor and NVFP4's
    ** per-tensor scale need the tensor's largest finite |x| before the pass; when absmax_known is 0
    ** qs_analyze reads the tensor once more to find it (counted in progress).  Callers that have it
    ** (tensor_stats.absmax of the same tensor) pass it to keep the analysis to one read. */
    int absmax_known;
    double absmax;           /* largest finite |x| (NaN and Inf ignored; 0 for no finite non-zero) */
    /* The value histogram depends only on the tensor: a sweep over formats computes it with the
    ** first format and passes that result's `value` here for the others, which then skip it (it is
    ** copied into their result).  It must be this tensor's (same bins, total n), else an error. */
    const qs_hist *value_hist;
} qs_analyze_opts;

typedef int (*qs_an_read)(void *ctx, uint64_t start, size_t n, float *out, qs_err *e);

/* Analyze a rows x cols tensor (C order) under the format and options of `a`.  rd is called with
** whole bands of about 128K values (axis 0: at least one block-row of the tensor), from several
** threads at once only when read_threadsafe
** (else serialised).  On failure (a read error: the reader's message for the lowest failing band;
** "cancelled"; invalid options as qs_format_apply reports them) returns -1 with *out zeroed. */
int qs_analyze(const qs_apply *a, uint64_t rows, uint64_t cols, qs_an_read rd, void *rctx, int read_threadsafe,
               const qs_analyze_opts *o, qs_analysis *out, qs_err *e);
void qs_analysis_free(qs_analysis *an);

/* Partial analyses, for sharding one tensor by bands (e.g. over MPI ranks).  The pass is cut into
** bands that depend only on the shape and the format (qs_analyze_nbands); qs_analyze_part runs the
** bands [b0, b1) into a partial, which goes to bytes and back (the same qscope build on both sides),
** partials of consecutive ranges merge in band order, and a partial of every band finishes into the
** result.  Any cut into ranges, any thread count and any SIMD level give the bytes of qs_analyze's
** result: a partial from band 0 holds the sums folded band after band as qs_analyze folds them; a
** later one keeps each band's sums (with its row and column sums: about 12 bytes per row and column
** per band for 2-D tensors) until it is merged behind one from band 0.  Each partial reads what the
** whole analysis reads before its bands (the absmax pre-pass unless opts.absmax is given, scaled
** casts' scales; int8/int4 with one scale per tensor or column read the whole tensor), and its
** progress counts those reads plus its own bands.  Per-block arrays (opts.blocks) hold its bands'
** blocks.  A failed merge leaves acc good only for qs_an_part_free. */
typedef struct qs_an_part qs_an_part;
int qs_analyze_nbands(const qs_apply *a, uint64_t rows, uint64_t cols, uint64_t *nbands, qs_err *e);
int qs_analyze_part(const qs_apply *a, uint64_t rows, uint64_t cols, qs_an_read rd, void *rctx, int read_threadsafe,
                    const qs_analyze_opts *o, uint64_t b0, uint64_t b1, qs_an_part **out, qs_err *e);
int qs_an_part_save(const qs_an_part *p, uint8_t **bytes, size_t *len, qs_err *e);   /* *bytes: malloc'd */
int qs_an_part_load(const uint8_t *bytes, size_t len, qs_an_part **out, qs_err *e);
int qs_an_part_merge(qs_an_part *acc, const qs_an_part *next, qs_err *e);   /* next: the bands after acc's */
int qs_an_part_finish(const qs_an_part *p, qs_analysis *out, qs_err *e);
void qs_an_part_free(qs_an_part *p);

/* JSON texts for the result store (caller frees): the "metrics" and "hist" kinds of results.h, compact,
** keys sorted; the energy shares are "err_energy": {"underflow", "clip", "rounding"}.  Finite numbers are JSON reals (n and n_finite integers), +-Inf the strings "inf" /
** "-inf", NaN null; a histogram that is not computed is null.  Histogram edges are the lo + (hi -
** lo) i / nbins (log2 exponents for "log2", integer codes for "code"). */
char *qs_metrics_json(const qs_metrics *m);
char *qs_hists_json(const qs_analysis *an);

#endif
