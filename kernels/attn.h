/*
** Attention kernels on CPU (docs/kernels.md; spec msd-attention.md §B, §C, formats-mx.md §5).
**
** Layout (C order, float32): Q[H][Lq][d], K[Hkv][Lk][d], V[Hkv][Lk][dv], O[H][Lq][dv]; query head h
** reads KV head h / (H/Hkv) (MHA, GQA and the MQA form of MLA).  Causal masking hides key j from
** query i when j > i + (Lk − Lq).  scale 0 means 1/sqrt(d).
**
**   qs_attn_ref       FP64 reference (S = scale·QKᵀ, max-subtracted softmax, O = PV, LSE)
**   qs_attn_fa2       FlashAttention-2 forward, FP32: Q tiles of br rows × K/V tiles of bc keys, both
**                     matmuls of a tile are OpenBLAS SGEMM calls, online softmax with exp2 and a
**                     pre-multiplied log2(e), one normalisation at the end; split-KV (flash-decoding)
**                     combine of `splits` key ranges through their LSE; P optionally rounded to
**                     BF16/FP16 before PV (as on GPUs); tasks (KV head, Q tile, split) on the thread
**                     pool (pool.h); one runner with AMLA (attn_flash.c)
**   qs_attn_amla      the same tiling with AMLA's rescale: a power-of-two factor applied by adding
**                     an integer to the FP32 bits of O plus the 1.5·ε compensation (spec §B.2)
**   qs_attn_plain     plain C online-softmax attention, one key at a time (no BLAS), P rounded like
**                     the candidate's (c->p): the same-dtype baseline of `bench --score`
**   qs_attn_msd_decode  MSD decode path: INT8 K/V with per-channel scales, Q and P decomposed in two
**                     (or three) INT8 passes, exact integer products per tile (spec §A.6); INT4 K/V with
**                     four passes of CANN's 7.49 / 14.98 decomposition
**   qs_attn_mx        MXFP4 (any block format) attention simulation in FP64: Q, K along d, V along
**                     keys, P̃ quantized in blocks along keys, normalize-then-quantize or PNQ (rowsum of
**                     the quantized P̂), materialized form (formats-mx.md §5.2)
*/
#ifndef QS_ATTN_H
#define QS_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "exp2_poly.h"
#include "format.h"
#include "qs_err.h"

typedef struct qs_attn_shape {
    size_t H, Hkv, Lq, Lk, d, dv;
} qs_attn_shape;

typedef enum { QS_P_FP32 = 0, QS_P_BF16, QS_P_FP16 } qs_pdtype;

typedef struct qs_attn_cfg {
    size_t br, bc;      /* tile sizes (0 = 128 / 256) */
    int causal;
    double scale;       /* 0 = 1/sqrt(d) */
    qs_pdtype p;        /* rounding of P before PV */
    int threads;        /* 0/1 = one */
    int splits;         /* split-KV ranges (0/1 = none) */
    int amla_nocomp;    /* AMLA without the 1.5·ε compensation (ablation) */
} qs_attn_cfg;

int qs_attn_shape_check(const qs_attn_shape *s, qs_err *e);
double qs_attn_scale(const qs_attn_shape *s, const qs_attn_cfg *c);
/* FLOPs of the two matmuls, 4·H·Σ_i(keys seen by i)·(d+dv)/2 (causal counts only unmasked keys). */
double qs_attn_flops(const qs_attn_shape *s, int causal);

int qs_attn_ref(const qs_attn_shape *s, int causal, double scale /* <= 0: 1/sqrt(d) */, const float *Q, const float *K, const float *V,
                double *O, double *lse, qs_err *e);
int qs_attn_fa2(const qs_attn_shape *s, const qs_attn_cfg *c, const float *Q, const float *K, const float *V, float *O,
                float *lse, qs_err *e);
int qs_attn_amla(const qs_attn_shape *s, const qs_attn_cfg *c, const float *Q, const float *K, const float *V, float *O,
                 qs_err *e);
int qs_attn_plain(const qs_attn_shape *s, const qs_attn_cfg *c, const float *Q, const float *K, const float *V,
                  float *O, qs_err *e);

/* INT8 (or INT4) KV cache with per-channel scales (over d; one scale per channel per KV head, over all
** tokens): code = R(x/σ) with σ = amax/qmax, qmax 127 (INT8) or 7 (INT4). */
typedef struct qs_kv_i8 {
    int8_t *K, *V;      /* [Hkv][Lk][d], [Hkv][Lk][dv] */
    float *sK, *sV;     /* [Hkv][d], [Hkv][dv] */
    int qmax;
} qs_kv_i8;
int qs_kv_i8_quant(const qs_attn_shape *s, const float *K, const float *V, qs_kv_i8 *kv, qs_err *e);
int qs_kv_int_quant(const qs_attn_shape *s, const float *K, const float *V, int qmax, qs_kv_i8 *kv, qs_err *e);
void qs_kv_i8_free(qs_kv_i8 *kv);
/* Dequantized K/V (float), optionally rounded to BF16 (the dequant-to-BF16 baseline). */
void qs_kv_i8_dequant(const qs_attn_shape *s, const qs_kv_i8 *kv, int bf16, float *K, float *V);
/* passes 1..3 for INT8 KV (L 127, E 254); 1..4 for INT4 KV (CANN's L 7.49, E 14.98). */
int qs_attn_msd_decode(const qs_attn_shape *s, const qs_attn_cfg *c, const float *Q, const qs_kv_i8 *kv, int passes,
                       float *O, qs_err *e);

typedef enum { QS_PQ_NONE = 0, QS_PQ_NTQ, QS_PQ_PNQ } qs_pquant;
typedef struct qs_attn_mx {
    const qs_format *f;     /* block format of Q, K, V and P (mxfp4) */
    qs_qopts oqk, ov, op;   /* options (scale rule uos / floor, ...) of Q·K, V, P */
    int quant_qkv;          /* quantize Q, K, V (else only P) */
    qs_pquant pq;
    size_t tile;            /* PNQ only: 0 = materialised; else the online (tiled) form with key tiles of
                            ** this many keys: P̂_j = Q(exp(S_j − m_j)), l and O rescaled per tile */
} qs_attn_mx;
/* O (double) of the simulated MX attention; Qd/Kd/Vd receive the dequantized inputs when non-NULL
** (so the "same quantized inputs" reference can be computed). */
int qs_attn_mx_run(const qs_attn_shape *s, int causal, double scale, const qs_attn_mx *m, const float *Q,
                   const float *K, const float *V, double *O, float *Qd, float *Kd, float *Vd, qs_err *e);

/* Error of y against a reference: relative L2, max |diff|, cosine similarity, and FlashMLA's
** cos_diff = 1 − 2Σxy/Σ(x²+y²). */
typedef struct qs_cmp { double rel_l2, max_abs, cosine, cos_diff, ref_norm; size_t n, nonfinite; } qs_cmp;
void qs_cmp_f(const float *y, const double *ref, size_t n, qs_cmp *out);
void qs_cmp_d(const double *y, const double *ref, size_t n, qs_cmp *out);

/* Vectorisable 2^x for x ≤ 127 (0 below −126, x > 127 clamps to 127); relative error < 2e-7.  The
** kernels expect finite inputs (the commands check stored tensors); NaN gives a number, never UB. */
static inline float qs_exp2f_fast(float x)
{
    float xc = x >= -126.0f ? (x <= 127.0f ? x : 127.0f) : -126.0f;   /* NaN -> -126: no undefined cast */
    float t = xc + 0.5f;
    float fl = (float)(int)t;
    fl = fl > t ? fl - 1.0f : fl;                     /* nearest integer: f in [-0.5, 0.5] */
    float f = xc - fl;
    float p = QS_EXP2_C7;                          /* Taylor of 2^f, degree 7 */
    p = p * f + QS_EXP2_C6;
    p = p * f + QS_EXP2_C5;
    p = p * f + QS_EXP2_C4;
    p = p * f + QS_EXP2_C3;
    p = p * f + QS_EXP2_C2;
    p = p * f + QS_EXP2_C1;
    p = p * f + 1.0f;
    union { float f; int32_t i; } u;
    u.i = ((int32_t)fl + 127) << 23;
    float r = p * u.f;
    return x < -126.0f ? 0.0f : r;
}

#endif
