/* Weight formats over typed weights, rounded layer by layer (llm_wfly.h). */
#include "llm_wfly.h"
#include "llm_wtype.h"

#include <stdlib.h>
#include <string.h>

/* Kept in the view's arena after its floats (freed with it by qs_llm_free). */
struct qs_llm_wfly {
    const qs_llm_model *src;
    qs_apply w;
    int scaled;
    float *buf;               /* the seven matrices of one layer, in the FP32 arena's order */
};

static size_t layer_matrix_floats(const qs_llm_cfg *c)
{
    const size_t d = (size_t)c->dim, kv = (size_t)c->n_kv_head * c->head_dim, f = (size_t)c->ffn, qd = qs_llm_q_dim(c);
    return 2 * qd * d + 2 * kv * d + 3 * f * d;
}

int qs_llm_wfly_layer(const qs_llm_model *m, int l, qs_err *e)
{
    const struct qs_llm_wfly *v = m->wfly;
    const qs_llm_layer *S = &v->src->L[l], *L = &m->L[l];
    float *mat[QS_WT_NROLE] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
    for (int r = 0; r < QS_WT_NROLE; r++) {
        const qs_wt *t = &S->tw[r];
        qs_wt_rows(t, 0, t->rows, mat[r]);
        qs_wt_release(t);
        if (qs_llm_quantize_matrix(&v->w, v->scaled, mat[r], (size_t)t->rows, (size_t)t->cols, e)) return -1;
    }
    return 0;
}

int qs_llm_round_copy(qs_llm_model *dst, const qs_llm_model *src, const qs_apply *w, int scaled, qs_err *e)
{
    if (!src->tw_embd) return qs_llm_clone(dst, src, e) || qs_llm_quantize_weights(dst, w, scaled, e) ? -1 : 0;
    const qs_llm_cfg *c = &src->c;
    const size_t per = layer_matrix_floats(c), head = (size_t)c->vocab * c->dim;
    const size_t wf = (sizeof(struct qs_llm_wfly) + sizeof(float) - 1) / sizeof(float) + 16;
    memset(dst, 0, sizeof *dst);
    *dst = *src;
    dst->bias_arena = NULL;   /* the biases stay src's */
    dst->bias_len = 0;
    dst->arena = malloc((per + head + wf) * sizeof(float));
    dst->L = malloc((size_t)c->n_layer * sizeof *dst->L);
    if (!dst->arena || !dst->L) {
        free(dst->arena); free(dst->L); memset(dst, 0, sizeof *dst);
        return qs_fail(e, "out of memory for a layer of rounded weights and the output head (%zu floats)", per + head);
    }
    dst->arena_len = per + head;
    struct qs_llm_wfly *v = (struct qs_llm_wfly *)(((uintptr_t)(dst->arena + per + head) + 63) / 64 * 64);
    *v = (struct qs_llm_wfly){src, *w, scaled, dst->arena};
    dst->wfly = v;
    const size_t d = (size_t)c->dim, kv = (size_t)c->n_kv_head * c->head_dim, f = (size_t)c->ffn, qd = qs_llm_q_dim(c);
    for (int l = 0; l < c->n_layer; l++) {   /* every layer's matrices are the one buffer, filled before it runs */
        qs_llm_layer *L = &dst->L[l];
        *L = src->L[l];
        float *p = v->buf;
        L->wq = p; p += qd * d;
        L->wk = p; p += kv * d;
        L->wv = p; p += kv * d;
        L->wo = p; p += d * qd;
        L->w_gate = p; p += f * d;
        L->w_up = p; p += f * d;
        L->w_down = p;
        L->tw = NULL;
    }
    /* the head rounded once; a tied embedding reads it (as the FP32 path's rounded tied matrix) */
    float *h = dst->arena + per;
    qs_wt_rows(src->tw_out, 0, c->vocab, h);
    qs_wt_release(src->tw_out);
    if (qs_llm_quantize_matrix(w, scaled, h, (size_t)c->vocab, d, e)) { qs_llm_free(dst); return -1; }
    dst->output = h;
    dst->tw_out = NULL;
    if (src->tw_out == src->tw_embd) { dst->tok_embd = h; dst->tw_embd = NULL; }
    return 0;
}
