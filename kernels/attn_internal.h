/* Shared pieces of the attention kernels (attn.c, amla.c): task pool and tile context. */
#ifndef QS_ATTN_INTERNAL_H
#define QS_ATTN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "attn.h"

typedef struct qs_fa_ctx {
    const qs_attn_shape *s;
    const qs_attn_cfg *c;
    const float *Q, *K, *V;
    float alpha2;          /* scale·log2(e) */
    size_t br, bc, nqb;    /* tiles, Q tiles per head */
    int splits;
    size_t kspan;          /* keys per split */
    float *O, *lse;        /* outputs: [splits][H][Lq][dv], [splits][H][Lq] */
} qs_fa_ctx;

/* Run fn(ctx, task, scratch) for task = 0..ntasks-1 on `threads` threads; each thread gets its own
** scratch of scratch_bytes.  OpenBLAS is set to one thread meanwhile and restored. */
int qs_attn_pool(int threads, size_t ntasks, size_t scratch_bytes, void (*fn)(void *ctx, size_t task, void *scratch),
                 void *ctx, qs_err *e);

/* Combine split results into the final O / LSE (flash-decoding): O = Σ_s e^{LSE_s − LSE}·O_s. */
void qs_attn_combine(const qs_attn_shape *s, int splits, const float *Os, const float *lses, float *O, float *lse);

#include "msd.h"
static inline float qs_p_round(qs_pdtype p, float v)
{
    return p == QS_P_BF16 ? qs_bf16_round(v) : p == QS_P_FP16 ? qs_fp16_round(v) : v;
}


/* Vectorised row kernels (attn_rows.c). */
float qs_row_max(const float *x, size_t n);
float qs_row_exp2_sum(float *x, size_t n, float m, qs_pdtype pd);
float qs_row_exp2_sum_scaled(float *x, size_t n, float m, float c16, qs_pdtype pd);
void qs_row_scale(float *o, size_t n, float a);
void qs_row_bits_add(float *o, size_t n, int32_t N);

#endif
