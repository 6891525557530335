/* Shared pieces of the attention kernels (attn.c, attn_flash.c, amla.c, attn_rows.c; llm.c runs its
** tasks through qs_attn_tasks): the tiled runner's context and per-row kernel, the task runner. */
#ifndef QS_ATTN_INTERNAL_H
#define QS_ATTN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "attn.h"

struct qs_fa_kernel;

typedef struct qs_fa_ctx {
    const qs_attn_shape *s;
    const qs_attn_cfg *c;
    const float *Q, *K, *V;
    float alpha2;          /* scale·log2(e) */
    size_t br, bc, nqb;    /* tiles, Q tiles per head */
    int splits;
    size_t kspan;          /* keys per split */
    float *O, *lse;        /* outputs: [splits][H][Lq][dv], [splits][H][Lq] */
    const struct qs_fa_kernel *k;
} qs_fa_ctx;

/* What FlashAttention-2 and AMLA do differently, per query row; the runner (attn_flash.c) does the
** rest: tasks (KV head, Q tile, key split), SGEMM tiles S = scale·log2(e)·QKᵀ and O += P·V, the
** causal mask, split-KV buffers and their combination. */
typedef struct qs_fa_kernel {
    size_t state;                                       /* bytes of one row's running state */
    void (*init)(void *st);
    /* one key tile of one row: row (n scores, −inf where masked) becomes the weights P that O += P·V
    ** consumes; o (dv) is the row's unnormalised output so far */
    void (*row)(const qs_fa_ctx *x, float *row, size_t n, void *st, float *o);
    void (*finish)(const qs_fa_ctx *x, void *st, float *o, float *lse);   /* lse may be NULL */
} qs_fa_kernel;

/* The tiled runner: O (and lse when non-NULL) of FlashAttention-2 (attn_flash.c) or AMLA (amla.c). */
int qs_fa_run(const qs_fa_kernel *k, const qs_attn_shape *s, const qs_attn_cfg *c, const float *Q, const float *K,
              const float *V, float *O, float *lse, qs_err *e);

/* Run fn(ctx, task, scratch) for task = 0..ntasks-1 on up to `threads` threads of the pool
** (kernels/pool.h); each thread gets its own scratch of scratch_bytes.  OpenBLAS is set to one thread
** meanwhile and restored (the tasks call SGEMM on small tiles). */
int qs_attn_tasks(int threads, size_t ntasks, size_t scratch_bytes, void (*fn)(void *ctx, size_t task, void *scratch),
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
