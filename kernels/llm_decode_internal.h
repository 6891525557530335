/* The decoder's state, shared by its pass-by-pass step (llm_decode.c) and its fused passes
** (llm_decode_fused.c). */
#ifndef QS_LLM_DECODE_INTERNAL_H
#define QS_LLM_DECODE_INTERNAL_H

#include "llm_decode.h"

struct qs_llm_dec {
    qs_llm_cfg c;
    int slots, max_pos, max_rows, threads, fused;
    float *kc, *vc;                       /* [layer][slot][max_pos][kv_dim] */
    float *x, *xn, *q, *k, *v, *att, *h, *y, *save, *tmp, *sc;
    float *rcos, *rsin;                   /* [max_pos][head_dim/2] */
    int mp, wide;                         /* the packed input's stride (this call's padded rows), the widest row */
    float *xt;                            /* a GEMM's input, packed: [wide][mp] */
    float *scr;                           /* per pool slot: 4 * wide floats (rounding scratch, a row saved) */
    int *seen;                            /* per cache slot: the rows seen (which slots a call repeats) */
    struct qs_dec_phase *ph;              /* the fused step's phases (llm_decode_fused.c), ph_cap of them */
    size_t ph_cap;
};
typedef struct qs_dec_phase qs_dec_phase;

void qs_dec_count_uf(const float *before, const float *after, size_t n, uint64_t *c);
int qs_dec_step_fused(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const int32_t *tok,
                      const int *slot, const int *pos, int R, float *hidden, uint64_t *uf, qs_err *e);
int qs_dec_logits_fused(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const float *hidden, int R,
                        float *out, uint64_t *uf, qs_pool_fn each, void *ctx, qs_err *e);

#endif
