/*
** Multi-Scale Dequant (MSD): decompose a high-precision activation into k low-precision components
** with power-law-spaced scales and multiply each directly with the quantized weight
** (docs/kernels.md; spec msd-attention.md §A).
**
** INT8 (certain: CANN A16W8 MSD + the paper's M/64516 bound): per token (row) m of x[M][K],
**   M_m = max_k |x|, t = 127·x/M_m, a1 = R(t), a2 = R(254·(t − a1)), a3 = R(254·(254(t − a1) − a2)),
**   R = round half away from zero; x ≈ (M_m/127)·(a1 + a2/254 + a3/254²).
**   The components are stacked into one [k·M × K] INT8 matrix and multiplied with the INT8 weight
**   W[N][K] (per-output-channel scale σ_n) in ONE integer GEMM with exact INT32 sums, then combined
**   in double: y = σ_n·(M_m/127)·(c1 + c2/254 + c3/254²).
**
** The integer GEMM has two exact implementations: QS_I8GEMM_SGEMM runs OpenBLAS SGEMM on
** integer-valued floats over K-chunks of 1024 (every partial sum is an integer of magnitude
** ≤ 1024·127² < 2^24, so FP32 holds it exactly whatever the summation order or FMA use) and adds the
** chunk results as integers; QS_I8GEMM_INT is a plain C int32 loop (the reference).
**
** MXFP4 (reconstructed — the paper's recipe and α are not known): pass 1 quantizes x with the
** format's block scale rule, pass p > 1 quantizes the residual r = x − Σ previous parts either with its
** own block scale (rule as an option) or with the fixed scale X1/2^shift of pass 1.
*/
#ifndef QS_MSD_H
#define QS_MSD_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "qs_err.h"

#define QS_MSD_MAX_PASSES 3
#define QS_MSD_KCHUNK 1024     /* K-chunk of the exact SGEMM path: 1024·127² < 2^24 */
#define QS_MSD_MAX_K 133000    /* INT32 sums: 127²·K < 2^31 */

/* Round half away from zero (Ascend CAST_ROUND). */
static inline float qs_round_away(float v) { return __builtin_roundf(v); }

/* Per-row absmax and k-pass INT8 components, stacked: a[p·M·K + m·K + k] (p = 0..passes-1).
** amax[m] = M_m (0 for an all-zero row, whose components are all 0).  Non-finite input -> -1. */
int qs_msd_decompose_i8(const float *x, size_t M, size_t K, int passes, int8_t *a, float *amax, qs_err *e);
/* Reconstruction x̂ (double) from the components. */
void qs_msd_reconstruct_i8(const int8_t *a, const float *amax, size_t M, size_t K, int passes, double *xr);

/* Symmetric per-output-channel INT8 weights: sigma[n] = max_k |W[n][k]| / 127, Wq = R(W/sigma). */
void qs_quant_w_i8(const float *W, size_t N, size_t K, int8_t *Wq, float *sigma);

typedef enum { QS_I8GEMM_SGEMM = 0, QS_I8GEMM_INT } qs_i8gemm_method;

/* Exact C[R][N] = A[R][K]·B[N][K]^T over int8 with int32 results.  For the SGEMM method, Bf may
** hold B already expanded to float (N×K, the "prepacked" weight panel; NULL = expand here) and
** threads is the OpenBLAS thread count (0 = leave as is).  K > QS_MSD_MAX_K -> -1. */
int qs_i8_gemm_exact(const int8_t *A, size_t R, const int8_t *B, const float *Bf, size_t N, size_t K, int32_t *C,
                     qs_i8gemm_method method, int threads, qs_err *e);

/* Full MSD W8A16 GEMM: y[M][N] (float) from x[M][K] and INT8 weights (Wq, sigma, optional Wf =
** Wq as floats).  ws: NULL (allocated here) or a workspace of qs_msd_gemm_ws_bytes(). */
size_t qs_msd_gemm_ws_bytes(size_t M, size_t N, size_t K, int passes);
int qs_msd_gemm_i8(const float *x, size_t M, size_t K, const int8_t *Wq, const float *Wf, const float *sigma, size_t N,
                   int passes, qs_i8gemm_method method, int threads, float *y, void *ws, qs_err *e);

/* MX (or any block float format) k-pass decomposition.  parts[p·n + i] holds component p of x[i]
** (dequantized values, so x̂ = Σ_p parts[p]).  The runs are rows of length K (blocks along K).
** pass2_shift < 0: every residual pass uses its own block scale under o_res; >= 0: residual pass p
** uses the fixed scale X_{p-1}/2^pass2_shift of the previous pass's block (the element cast is the
** format's element type with saturation). */
typedef struct qs_msd_mx {
    const qs_format *f;
    qs_qopts o1;       /* pass 1 options (scale rule etc.) */
    qs_qopts o_res;    /* residual passes */
    int pass2_shift;   /* -1 = own scale */
} qs_msd_mx;
int qs_msd_decompose_mx(const qs_msd_mx *c, const float *x, size_t M, size_t K, int passes, float *parts, qs_err *e);

/* Effective bits.  rms: −½·log2(Σ(x−x̂)²/Σx²); bound: −log2(max_m max_k |x−x̂| / M_m) (rows with
** M_m = 0 skipped); both +inf when the error is exactly zero. */
double qs_eff_bits_rms(const float *x, const double *xr, size_t n);
double qs_eff_bits_bound(const float *x, const double *xr, size_t M, size_t K);

/* BF16 rounding (RNE, NaN kept) of a float, as a float. */
float qs_bf16_round(float v);
float qs_fp16_round(float v);

#endif
