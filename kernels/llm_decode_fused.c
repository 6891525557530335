/*
** The decoder's step as fused passes (llm_decode.h): one pool call per weight product, whose first
** tasks do the row work that feeds it (residual add, RMSNorm, RoPE, the KV cache, attention, SwiGLU,
** the activation rounding with its underflow counts) on blocks of rows and pack the product's input
** transposed, and whose later tasks, once every row task is done, run the GEMM's tiles
** (llm_gemm.h).  Each value is computed by the same operations in the same order as the pass-by-pass
** step in llm_decode.c, so the bits are the same; only the hand-offs and the serial loops go.
*/
#include "llm_dec_attn.h"
#include "llm_decode_internal.h"
#include "llm_gemm.h"
#include "llm_internal.h"
#include "llm_rows.h"
#include "pool.h"

#include <immintrin.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#define RB 16   /* rows per row task: one 64-byte line of the packed input per k */

enum { P_ATTN_IN, P_QKV, P_ATT, P_FFN_IN, P_DOWN_IN, P_FINAL, P_LOGITS };

typedef struct fjob {
    const qs_llm_model *m;
    qs_llm_dec *d;
    const qs_llm_layer *L;
    const int32_t *tok;
    const int *slot, *pos;
    const float *in;          /* P_LOGITS: the hidden rows */
    float *out;               /* P_FINAL: the hidden rows */
    const qs_apply *a0, *a1;  /* the pass's roundings: a0 its input's, a1 the KV cache's (P_QKV) */
    int l, R, kind, fuse_att, scaled, count;
    qs_llm_resq resq;
    size_t nrow, ngemm;       /* tasks [0, nrow): row blocks; then ngemm of the GEMM; then one per row */
    qs_llm_gemm_job g;
    qs_pool_fn each;          /* the per-row tasks after the GEMM (NULL: none) */
    void *each_ctx;
    atomic_int rows_left, gemm_left, fail;
    qs_err err;
} fjob;

/* Round one row with the pass's format, counting into counter pair `which` of the pool slot. */
static int round_row(fjob *j, const qs_apply *a, float *row, int cols, int slot, int which, qs_err *e)
{
    if (!a) return 0;
    qs_llm_dec *d = j->d;
    float *tmp = d->scr + (size_t)slot * 4 * d->wide, *save = tmp + 3 * (size_t)d->wide;
    if (j->count) memcpy(save, row, (size_t)cols * sizeof(float));
    if (qs_llm_round_rows(a, j->scaled, j->resq, row, 1, cols, tmp, e)) return -1;
    if (j->count) qs_dec_count_uf(save, row, (size_t)cols, d->ucnt + (size_t)slot * 8 + 2 * which);
    return 0;
}

static void pack(qs_llm_dec *d, const float *x, int ld, int r0, int r1, int cols)
{
    for (int k = 0; k < cols; k++) {
        float *t = d->xt + (size_t)k * d->mp;
        for (int r = r0; r < r1; r++) t[r] = x[(size_t)r * ld + k];
    }
}

/* Q, K, V of row r from the product, biases, RoPE, K/V rounded into the cache; then, when every row
** has a slot of its own, its attention. */
static int qkv_row(fjob *j, int r, int slot, qs_err *e)
{
    qs_llm_dec *d = j->d;
    const qs_llm_cfg *c = &d->c;
    const qs_llm_layer *L = j->L;
    const int hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd, half = hd / 2, dm = c->dim;
    float *q = d->q + (size_t)r * qd, *kr = d->k + (size_t)r * kvd, *vr = d->v + (size_t)r * kvd;
    if (L->wk == L->wq + (size_t)qd * dm && L->wv == L->wk + (size_t)kvd * dm) {
        const float *yr = d->y + (size_t)r * (qd + 2 * kvd);
        memcpy(q, yr, (size_t)qd * sizeof(float));
        memcpy(kr, yr + qd, (size_t)kvd * sizeof(float));
        memcpy(vr, yr + qd + kvd, (size_t)kvd * sizeof(float));
    }
    if (L->bq) for (int i = 0; i < qd; i++) q[i] += L->bq[i];
    if (L->bk) for (int i = 0; i < kvd; i++) kr[i] += L->bk[i];
    if (L->bv) for (int i = 0; i < kvd; i++) vr[i] += L->bv[i];
    const float *cs = d->rcos + (size_t)j->pos[r] * half, *sn = d->rsin + (size_t)j->pos[r] * half;
    qs_llm_rope_row(q, c->n_head, hd, cs, sn, c->rope_neox);
    qs_llm_rope_row(kr, c->n_kv_head, hd, cs, sn, c->rope_neox);
    const size_t at = (size_t)j->l * d->slots * d->max_pos * kvd + ((size_t)j->slot[r] * d->max_pos + (size_t)j->pos[r]) * kvd;
    if (!j->a1) {
        memcpy(d->kc + at, kr, (size_t)kvd * sizeof(float));
        memcpy(d->vc + at, vr, (size_t)kvd * sizeof(float));
    } else {
        if (qs_llm_fakeq_row(j->a1, j->scaled, kr, kvd, d->kc + at, e) || qs_llm_fakeq_row(j->a1, j->scaled, vr, kvd, d->vc + at, e))
            return -1;
        if (j->count) {
            uint64_t *u = d->ucnt + (size_t)slot * 8 + 2;
            qs_dec_count_uf(kr, d->kc + at, (size_t)kvd, u);
            qs_dec_count_uf(vr, d->vc + at, (size_t)kvd, u);
        }
    }
    return 0;
}

static int att_row(fjob *j, int r, int slot, qs_err *e)
{
    qs_llm_dec *d = j->d;
    const qs_llm_cfg *c = &d->c;
    const int hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd;
    const size_t base = ((size_t)j->l * d->slots + (size_t)j->slot[r]) * d->max_pos * kvd;
    float *o = d->att + (size_t)r * qd;
    qs_dec_attn_row(o, d->q + (size_t)r * qd, d->kc + base, d->vc + base, kvd, j->pos[r] + 1, c->n_head, hd,
                    c->n_head / c->n_kv_head, 1.0f / sqrtf((float)hd), d->sc + (size_t)slot * c->n_head * d->max_pos, 1);
    return round_row(j, j->a0, o, qd, slot, 0, e);
}

/* The residual add, then RMSNorm with weights w into xn, rounded. */
static int norm_row(fjob *j, int r, int add, const float *w, float *dst, int slot, qs_err *e)
{
    qs_llm_dec *d = j->d;
    const int dm = d->c.dim;
    float *x = d->x + (size_t)r * dm, *xn = d->xn + (size_t)r * dm;
    if (add) for (int i = 0; i < dm; i++) x[i] += xn[i];
    qs_llm_rmsnorm_row(dst + (size_t)r * dm, x, w, dm, d->c.eps);
    return dst == d->xn ? round_row(j, j->a0, xn, dm, slot, 0, e) : 0;
}

static int row_block(fjob *j, int r0, int r1, int slot, qs_err *e)
{
    qs_llm_dec *d = j->d;
    const qs_llm_cfg *c = &d->c;
    const int dm = c->dim, qd = c->n_head * c->head_dim, F = c->ffn;
    for (int r = r0; r < r1; r++) {
        int rc = 0;
        switch (j->kind) {
        case P_ATTN_IN:
            if (!j->l) memcpy(d->x + (size_t)r * dm, j->m->tok_embd + (size_t)j->tok[r] * dm, (size_t)dm * sizeof(float));
            rc = norm_row(j, r, j->l > 0, j->L->attn_norm, d->xn, slot, e);
            break;
        case P_QKV: rc = qkv_row(j, r, slot, e) || (j->fuse_att && att_row(j, r, slot, e)); break;
        case P_ATT: rc = att_row(j, r, slot, e); break;
        case P_FFN_IN: rc = norm_row(j, r, 1, j->L->ffn_norm, d->xn, slot, e); break;
        case P_DOWN_IN: {
            float *h = d->h + (size_t)r * F;
            if (j->L->w_up == j->L->w_gate + (size_t)F * dm) {
                float *yr = d->y + (size_t)r * 2 * F;
                qs_swiglu_row(yr, yr + F, (size_t)F);
                memcpy(h, yr, (size_t)F * sizeof(float));
            } else
                qs_swiglu_row(h, d->y + (size_t)r * F, (size_t)F);
            rc = round_row(j, j->a0, h, F, slot, 0, e);
            break;
        }
        case P_FINAL: rc = norm_row(j, r, 1, j->m->out_norm, j->out, slot, e); break;
        case P_LOGITS:
            if (j->a0) {
                memcpy(d->xn + (size_t)r * dm, j->in + (size_t)r * dm, (size_t)dm * sizeof(float));
                rc = round_row(j, j->a0, d->xn + (size_t)r * dm, dm, slot, 0, e);
            }
            break;
        }
        if (rc) return -1;
    }
    switch (j->kind) {   /* the next product's input, packed */
    case P_ATTN_IN: case P_FFN_IN: pack(d, d->xn, dm, r0, r1, dm); break;
    case P_QKV: if (j->fuse_att) pack(d, d->att, qd, r0, r1, qd); break;
    case P_ATT: pack(d, d->att, qd, r0, r1, qd); break;
    case P_DOWN_IN: pack(d, d->h, F, r0, r1, F); break;
    case P_LOGITS: pack(d, j->a0 ? d->xn : j->in, dm, r0, r1, dm); break;
    }
    return 0;
}

static void ftask(void *ctx, size_t task, int slot)
{
    fjob *j = ctx;
    if (task < j->nrow) {
        qs_err e = {{0}};
        int r0 = (int)task * RB, r1 = r0 + RB < j->R ? r0 + RB : j->R;
        if (row_block(j, r0, r1, slot, &e) && atomic_exchange(&j->fail, 1) == 0) j->err = e;
        atomic_fetch_sub_explicit(&j->rows_left, 1, memory_order_release);
        return;
    }
    /* a GEMM tile needs every row packed, a row's own task every tile: the lower tasks are all
    ** handed out, wait for them */
    atomic_int *left = task < j->nrow + j->ngemm ? &j->rows_left : &j->gemm_left;
    for (int spin = 0; atomic_load_explicit(left, memory_order_acquire) > 0; spin++)
        if (spin > 64) sched_yield();
        else _mm_pause();
    const int failed = atomic_load_explicit(&j->fail, memory_order_relaxed);
    if (task < j->nrow + j->ngemm) {
        if (!failed) qs_llm_gemm_task(&j->g, task - j->nrow);
        atomic_fetch_sub_explicit(&j->gemm_left, 1, memory_order_release);
    } else if (!failed)
        j->each(j->each_ctx, task - j->nrow - j->ngemm, slot);
}

/* One pool call: the row pass `kind`, then y = packed input . W^T (W NULL: the row pass alone).  uf:
** where counter pairs 0 and 1 of the pass go (NULL: not counted). */
static int run(fjob *j, int kind, const float *W, int in, int out, float *y, uint64_t *uf0, uint64_t *uf1, qs_err *e)
{
    qs_llm_dec *d = j->d;
    j->kind = kind;
    j->count = uf0 || uf1;
    j->nrow = (size_t)(j->R + RB - 1) / RB;
    j->ngemm = W ? qs_llm_gemm_prep(&j->g, y, d->xt, W, j->R, in, out) : 0;
    const size_t n = j->nrow + j->ngemm + (j->each ? (size_t)j->R : 0);
    atomic_init(&j->rows_left, (int)j->nrow);
    atomic_init(&j->gemm_left, (int)j->ngemm);
    atomic_init(&j->fail, 0);
    if (j->count) memset(d->ucnt, 0, (size_t)d->threads * 8 * sizeof(uint64_t));
    if (d->threads > 1) qs_pool_for(d->threads, n, ftask, j);
    else
        for (size_t t = 0; t < n; t++) ftask(j, t, 0);
    if (atomic_load(&j->fail)) { *e = j->err; return -1; }
    for (int s = 0; s < d->threads && j->count; s++)
        for (int i = 0; i < 2; i++) {
            uint64_t *u = i ? uf1 : uf0;
            if (u) { u[0] += d->ucnt[(size_t)s * 8 + 2 * i]; u[1] += d->ucnt[(size_t)s * 8 + 2 * i + 1]; }
        }
    return 0;
}

static void gemm_one(void *ctx, size_t task, int slot)
{
    (void)slot;
    qs_llm_gemm_task(ctx, task);
}

/* Another product over the input already packed (weights not adjacent to the previous ones). */
static void gemm_packed(qs_llm_dec *d, const float *W, float *y, int R, int in, int out)
{
    qs_llm_gemm_job g;
    size_t n = qs_llm_gemm_prep(&g, y, d->xt, W, R, in, out);
    if (d->threads > 1 && n > 1) qs_pool_for(d->threads, n, gemm_one, &g);
    else
        for (size_t t = 0; t < n; t++) qs_llm_gemm_task(&g, t);
}

/* Rows R .. mp-1 of the packed input stay zero (the GEMM's padding). */
static void zero_pad(qs_llm_dec *d, int R)
{
    d->mp = qs_llm_gemm_mp(R);   /* this call's stride */
    if (d->mp > R)
        for (int k = 0; k < d->wide; k++) memset(d->xt + (size_t)k * d->mp + R, 0, (size_t)(d->mp - R) * sizeof(float));
}

int qs_dec_step_fused(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const int32_t *tok,
                      const int *slot, const int *pos, int R, float *hidden, uint64_t *uf, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    const int dm = c->dim, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd, F = c->ffn;
    const qs_apply *act = nx ? nx->act : NULL, *kv_all = nx ? nx->kv : NULL;
    fjob j = {m, d, NULL, tok, slot, pos, NULL, hidden, NULL, NULL, 0, R, 0, 1, nx ? nx->scaled : 0, 0,
              nx ? nx->resq : QS_RESQ_NONE, 0, 0, {0}, NULL, NULL, 0, 0, 0, {{0}}};
    for (int r = 0; r < R; r++) d->seen[slot[r]] = 0;   /* attention in the QKV pass: every row a slot of its own */
    for (int r = 0; r < R && j.fuse_att; r++) j.fuse_att = d->seen[slot[r]]++ == 0;
    zero_pad(d, R);
    for (int l = 0; l < c->n_layer; l++) {
        const qs_llm_layer *L = &m->L[l];
        const qs_apply *const *lf = nx && nx->layer_fmt ? nx->layer_fmt + (size_t)l * QS_LLM_NLSITE : NULL;
        uint64_t *u = uf ? uf + QS_LLM_UF(l, 0) : NULL;
#define UF(site) (u ? u + 2 * (site) : NULL)
        j.L = L; j.l = l;
        const int fused_qkv = L->wk == L->wq + (size_t)qd * dm && L->wv == L->wk + (size_t)kvd * dm;
        j.a0 = lf ? lf[QS_SITE_ATTN_IN] : act;
        if (run(&j, P_ATTN_IN, L->wq, dm, fused_qkv ? qd + 2 * kvd : qd, fused_qkv ? d->y : d->q,
                UF(QS_SITE_ATTN_IN), NULL, e))
            return -1;
        if (!fused_qkv) {   /* K and V: two more products over the same packed input */
            gemm_packed(d, L->wk, d->k, R, dm, kvd);
            gemm_packed(d, L->wv, d->v, R, dm, kvd);
        }
        j.a0 = lf ? lf[QS_SITE_ATTN_OUT] : act;
        j.a1 = lf ? lf[QS_LLM_LSITE_KV] : kv_all;
        if (j.fuse_att) {
            if (run(&j, P_QKV, L->wo, qd, dm, d->xn, UF(QS_SITE_ATTN_OUT), UF(QS_LLM_LSITE_KV), e)) return -1;
        } else if (run(&j, P_QKV, NULL, 0, 0, NULL, NULL, UF(QS_LLM_LSITE_KV), e) ||
                   run(&j, P_ATT, L->wo, qd, dm, d->xn, UF(QS_SITE_ATTN_OUT), NULL, e))
            return -1;
        j.a1 = NULL;
        j.a0 = lf ? lf[QS_SITE_FFN_IN] : act;
        const int fused_gu = L->w_up == L->w_gate + (size_t)F * dm;
        if (run(&j, P_FFN_IN, L->w_gate, dm, fused_gu ? 2 * F : F, fused_gu ? d->y : d->h, UF(QS_SITE_FFN_IN), NULL, e))
            return -1;
        if (!fused_gu) gemm_packed(d, L->w_up, d->y, R, dm, F);
        j.a0 = lf ? lf[QS_SITE_FFN_DOWN_IN] : act;
        if (run(&j, P_DOWN_IN, L->w_down, F, dm, d->xn, UF(QS_SITE_FFN_DOWN_IN), NULL, e)) return -1;
#undef UF
    }
    j.a0 = NULL;
    return run(&j, P_FINAL, NULL, 0, 0, NULL, NULL, NULL, e);
}

int qs_dec_logits_fused(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const float *hidden, int R,
                        float *out, uint64_t *uf, qs_pool_fn each, void *ctx, qs_err *e)
{
    fjob j = {m, d, NULL, NULL, NULL, NULL, hidden, NULL, nx ? nx->act : NULL, NULL, m->c.n_layer, R, 0, 0,
              nx ? nx->scaled : 0, 0, nx ? nx->resq : QS_RESQ_NONE, 0, 0, {0}, each, ctx, 0, 0, 0, {{0}}};
    zero_pad(d, R);
    return run(&j, P_LOGITS, m->output, m->c.dim, m->c.vocab, out, uf && j.a0 ? uf + QS_LLM_UF(m->c.n_layer, 0) : NULL,
               NULL, e);
}
