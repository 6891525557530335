/*
** The decoder's step as fused passes (llm_decode.h), the whole step one pool call: a list of phases,
** row phases (residual add, RMSNorm, RoPE, the KV cache, attention, SwiGLU, the activation rounding
** with its underflow counts, on blocks of rows, each writing the next product's input transposed)
** alternating with GEMM phases (the product's tiles, llm_gemm.h).  The pool hands tasks out in
** increasing order and a task may wait for lower ones (kernels/pool.h): a task of a phase waits until
** every task of the earlier phases is done (one counter), so the workers stay in one call instead of
** sleeping and waking twice per product.  Each value is computed by the same operations in the same
** order as the pass-by-pass step in llm_decode.c, so the bits are the same.
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
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RB 16   /* rows per row task: one 64-byte line of the packed input per k */

enum { P_GEMM, P_ATTN_IN, P_QKV, P_ATT, P_FFN_IN, P_DOWN_IN, P_FINAL, P_LOGITS, P_EACH };

struct qs_dec_phase {
    int kind, l, fuse_att;
    const qs_llm_layer *L;
    const qs_apply *a0, *a1;  /* the phase's roundings: a0 its input's, a1 the KV cache's (P_QKV) */
    uint64_t *uf0, *uf1;      /* where their counts go (NULL: not counted) */
    qs_llm_gemm_job g;        /* P_GEMM */
    size_t start, n;          /* its tasks */
};

typedef struct fjob {
    const qs_llm_model *m;
    qs_llm_dec *d;
    const int32_t *tok;
    const int *slot, *pos;
    const float *in;          /* P_LOGITS: the hidden rows */
    float *out;               /* P_FINAL: the hidden rows */
    int R, scaled, nph;
    qs_llm_resq resq;
    qs_dec_phase *ph;
    qs_pool_fn each;          /* P_EACH: one task per row */
    void *each_ctx;
    atomic_size_t done;       /* tasks done (every task of the phases below a task's is done first) */
    atomic_int fail;
    qs_err err;
} fjob;

/* Round one row with format a, counting into cnt[0..1] (NULL: not counted). */
static int round_row(fjob *j, const qs_apply *a, float *row, int cols, int slot, uint64_t *cnt, qs_err *e)
{
    if (!a) return 0;
    qs_llm_dec *d = j->d;
    float *tmp = d->scr + (size_t)slot * 4 * d->wide, *save = tmp + 3 * (size_t)d->wide;
    if (cnt) memcpy(save, row, (size_t)cols * sizeof(float));
    if (qs_llm_round_rows(a, j->scaled, j->resq, row, 1, cols, tmp, e)) return -1;
    if (cnt) qs_dec_count_uf(save, row, (size_t)cols, cnt);
    return 0;
}

static void pack(qs_llm_dec *d, const float *x, int ld, int r0, int r1, int cols)
{
    for (int k = 0; k < cols; k++) {
        float *t = d->xt + (size_t)k * d->mp;
        for (int r = r0; r < r1; r++) t[r] = x[(size_t)r * ld + k];
    }
}

/* Q, K, V of row r from the product, biases, RoPE, K/V rounded into the cache. */
static int qkv_row(fjob *j, const qs_dec_phase *p, int r, uint64_t *cnt, qs_err *e)
{
    qs_llm_dec *d = j->d;
    const qs_llm_cfg *c = &d->c;
    const qs_llm_layer *L = p->L;
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
    const size_t at = (size_t)p->l * d->slots * d->max_pos * kvd + ((size_t)j->slot[r] * d->max_pos + (size_t)j->pos[r]) * kvd;
    if (!p->a1) {
        memcpy(d->kc + at, kr, (size_t)kvd * sizeof(float));
        memcpy(d->vc + at, vr, (size_t)kvd * sizeof(float));
        return 0;
    }
    if (qs_llm_fakeq_row(p->a1, j->scaled, kr, kvd, d->kc + at, e) || qs_llm_fakeq_row(p->a1, j->scaled, vr, kvd, d->vc + at, e))
        return -1;
    if (cnt) { qs_dec_count_uf(kr, d->kc + at, (size_t)kvd, cnt); qs_dec_count_uf(vr, d->vc + at, (size_t)kvd, cnt); }
    return 0;
}

static int att_row(fjob *j, const qs_dec_phase *p, int r, int slot, uint64_t *cnt, qs_err *e)
{
    qs_llm_dec *d = j->d;
    const qs_llm_cfg *c = &d->c;
    const int hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd;
    const size_t base = ((size_t)p->l * d->slots + (size_t)j->slot[r]) * d->max_pos * kvd;
    float *o = d->att + (size_t)r * qd;
    qs_dec_attn_row(o, d->q + (size_t)r * qd, d->kc + base, d->vc + base, kvd, j->pos[r] + 1, c->n_head, hd,
                    c->n_head / c->n_kv_head, 1.0f / sqrtf((float)hd), d->sc + (size_t)slot * c->n_head * d->max_pos, 1);
    return round_row(j, p->a0, o, qd, slot, cnt, e);
}

/* The residual add, then RMSNorm with weights w into dst, rounded when dst is the next input. */
static int norm_row(fjob *j, const qs_dec_phase *p, int r, int add, const float *w, float *dst, int slot, uint64_t *cnt,
                    qs_err *e)
{
    qs_llm_dec *d = j->d;
    const int dm = d->c.dim;
    float *x = d->x + (size_t)r * dm, *xn = d->xn + (size_t)r * dm;
    if (add) for (int i = 0; i < dm; i++) x[i] += xn[i];
    qs_llm_rmsnorm_row(dst + (size_t)r * dm, x, w, dm, d->c.eps);
    return dst == d->xn ? round_row(j, p->a0, xn, dm, slot, cnt, e) : 0;
}

static int row_block(fjob *j, const qs_dec_phase *p, int r0, int r1, int slot, uint64_t *c0, uint64_t *c1, qs_err *e)
{
    qs_llm_dec *d = j->d;
    const qs_llm_cfg *c = &d->c;
    const int dm = c->dim, qd = c->n_head * c->head_dim, F = c->ffn;
    for (int r = r0; r < r1; r++) {
        int rc = 0;
        switch (p->kind) {
        case P_ATTN_IN:
            if (!p->l) memcpy(d->x + (size_t)r * dm, j->m->tok_embd + (size_t)j->tok[r] * dm, (size_t)dm * sizeof(float));
            rc = norm_row(j, p, r, p->l > 0, p->L->attn_norm, d->xn, slot, c0, e);
            break;
        case P_QKV: rc = qkv_row(j, p, r, c1, e) || (p->fuse_att && att_row(j, p, r, slot, c0, e)); break;
        case P_ATT: rc = att_row(j, p, r, slot, c0, e); break;
        case P_FFN_IN: rc = norm_row(j, p, r, 1, p->L->ffn_norm, d->xn, slot, c0, e); break;
        case P_DOWN_IN: {
            float *h = d->h + (size_t)r * F;
            if (p->L->w_up == p->L->w_gate + (size_t)F * dm) {
                float *yr = d->y + (size_t)r * 2 * F;
                qs_swiglu_row(yr, yr + F, (size_t)F);
                memcpy(h, yr, (size_t)F * sizeof(float));
            } else
                qs_swiglu_row(h, d->y + (size_t)r * F, (size_t)F);
            rc = round_row(j, p->a0, h, F, slot, c0, e);
            break;
        }
        case P_FINAL: rc = norm_row(j, p, r, 1, j->m->out_norm, j->out, slot, c0, e); break;
        case P_LOGITS:
            if (p->a0) {
                memcpy(d->xn + (size_t)r * dm, j->in + (size_t)r * dm, (size_t)dm * sizeof(float));
                rc = round_row(j, p->a0, d->xn + (size_t)r * dm, dm, slot, c0, e);
            }
            break;
        }
        if (rc) return -1;
    }
    switch (p->kind) {   /* the next product's input, packed */
    case P_ATTN_IN: case P_FFN_IN: pack(d, d->xn, dm, r0, r1, dm); break;
    case P_QKV: if (p->fuse_att) pack(d, d->att, qd, r0, r1, qd); break;
    case P_ATT: pack(d, d->att, qd, r0, r1, qd); break;
    case P_DOWN_IN: pack(d, d->h, F, r0, r1, F); break;
    case P_LOGITS: pack(d, p->a0 ? d->xn : j->in, dm, r0, r1, dm); break;
    }
    return 0;
}

static void add_counts(uint64_t *to, const uint64_t *c)
{
    if (to && (c[0] || c[1])) {   /* integer sums: any order gives the same totals */
        __atomic_fetch_add(&to[0], c[0], __ATOMIC_RELAXED);
        __atomic_fetch_add(&to[1], c[1], __ATOMIC_RELAXED);
    }
}

static void ftask(void *ctx, size_t task, int slot)
{
    fjob *j = ctx;
    int k = 0;
    while (task >= j->ph[k].start + j->ph[k].n) k++;
    const qs_dec_phase *p = &j->ph[k];
    /* every task of the earlier phases done first: they are all handed out, so this only waits;
    ** spinning briefly, then yielding, then sleeping (a thread it waits for may be preempted on a
    ** loaded machine: spinning would take its CPU) */
    for (int spin = 0; atomic_load_explicit(&j->done, memory_order_acquire) < p->start; spin++)
        if (spin < 128) _mm_pause();
        else if (spin < 4096) sched_yield();   /* a few ms: gives the CPU away only if others wait */
        else nanosleep(&(struct timespec){0, 50000}, NULL);
    if (!atomic_load_explicit(&j->fail, memory_order_relaxed)) {
        const size_t t = task - p->start;
        if (p->kind == P_GEMM) qs_llm_gemm_task(&p->g, t);
        else if (p->kind == P_EACH) j->each(j->each_ctx, t, slot);
        else {
            qs_err e = {{0}};
            uint64_t c0[2] = {0, 0}, c1[2] = {0, 0};
            int r0 = (int)t * RB, r1 = r0 + RB < j->R ? r0 + RB : j->R;
            if (row_block(j, p, r0, r1, slot, p->uf0 ? c0 : NULL, p->uf1 ? c1 : NULL, &e)) {
                if (atomic_exchange(&j->fail, 1) == 0) j->err = e;
            } else {
                add_counts(p->uf0, c0);
                add_counts(p->uf1, c1);
            }
        }
    }
    atomic_fetch_add_explicit(&j->done, 1, memory_order_release);
}

/* Append a row phase, or a GEMM phase y = packed input . W^T. */
static qs_dec_phase *rows(fjob *j, int kind, const qs_apply *a0, uint64_t *uf0)
{
    qs_dec_phase *p = &j->ph[j->nph++];
    memset(p, 0, sizeof *p);
    p->kind = kind; p->a0 = a0; p->uf0 = a0 ? uf0 : NULL;
    p->n = kind == P_EACH ? (size_t)j->R : (size_t)(j->R + RB - 1) / RB;
    return p;
}

static void gemm(fjob *j, const float *W, int in, int out, float *y)
{
    qs_dec_phase *p = &j->ph[j->nph++];
    memset(p, 0, sizeof *p);
    p->kind = P_GEMM;
    p->n = qs_llm_gemm_prep(&p->g, y, j->d->xt, W, j->R, in, out);
}

/* Run the phases: one pool call. */
static int run(fjob *j, qs_err *e)
{
    qs_llm_dec *d = j->d;
    size_t n = 0;
    for (int k = 0; k < j->nph; k++) { j->ph[k].start = n; n += j->ph[k].n; }
    atomic_init(&j->done, 0);
    atomic_init(&j->fail, 0);
    if (d->threads > 1) qs_pool_for(d->threads, n, ftask, j);
    else
        for (size_t t = 0; t < n; t++) ftask(j, t, 0);
    if (atomic_load(&j->fail)) { *e = j->err; return -1; }
    return 0;
}

/* Room for the phases of a step, and rows R .. mp-1 of the packed input zero (the GEMM's padding). */
static int prepare(qs_llm_dec *d, fjob *j, int R, qs_err *e)
{
    const size_t need = (size_t)d->c.n_layer * 12 + 4;
    if (d->ph_cap < need) {
        free(d->ph);
        d->ph_cap = 0;
        if (!(d->ph = malloc(need * sizeof *d->ph))) return qs_fail(e, "decode: out of memory");
        d->ph_cap = need;
    }
    j->ph = d->ph;
    d->mp = qs_llm_gemm_mp(R);   /* this call's stride */
    if (d->mp > R)
        for (int k = 0; k < d->wide; k++) memset(d->xt + (size_t)k * d->mp + R, 0, (size_t)(d->mp - R) * sizeof(float));
    return 0;
}

int qs_dec_step_fused(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const int32_t *tok,
                      const int *slot, const int *pos, int R, float *hidden, uint64_t *uf, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    const int dm = c->dim, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd, F = c->ffn;
    const qs_apply *act = nx ? nx->act : NULL, *kv_all = nx ? nx->kv : NULL;
    fjob j = {m, d, tok, slot, pos, NULL, hidden, R, nx ? nx->scaled : 0, 0, nx ? nx->resq : QS_RESQ_NONE, NULL,
              NULL, NULL, 0, 0, {{0}}};
    if (prepare(d, &j, R, e)) return -1;
    int fuse_att = 1;   /* attention in the QKV phase: every row a slot of its own */
    for (int r = 0; r < R; r++) d->seen[slot[r]] = 0;
    for (int r = 0; r < R && fuse_att; r++) fuse_att = d->seen[slot[r]]++ == 0;
    for (int l = 0; l < c->n_layer; l++) {
        const qs_llm_layer *L = &m->L[l];
        const qs_apply *const *lf = nx && nx->layer_fmt ? nx->layer_fmt + (size_t)l * QS_LLM_NLSITE : NULL;
        uint64_t *u = uf ? uf + QS_LLM_UF(l, 0) : NULL;
#define UF(site) (u ? u + 2 * (site) : NULL)
        const int fused_qkv = L->wk == L->wq + (size_t)qd * dm && L->wv == L->wk + (size_t)kvd * dm;
        qs_dec_phase *p = rows(&j, P_ATTN_IN, lf ? lf[QS_SITE_ATTN_IN] : act, UF(QS_SITE_ATTN_IN));
        p->l = l; p->L = L;
        gemm(&j, L->wq, dm, fused_qkv ? qd + 2 * kvd : qd, fused_qkv ? d->y : d->q);
        if (!fused_qkv) { gemm(&j, L->wk, dm, kvd, d->k); gemm(&j, L->wv, dm, kvd, d->v); }
        const qs_apply *ao = lf ? lf[QS_SITE_ATTN_OUT] : act;
        p = rows(&j, P_QKV, fuse_att ? ao : NULL, UF(QS_SITE_ATTN_OUT));
        p->l = l; p->L = L; p->fuse_att = fuse_att;
        p->a1 = lf ? lf[QS_LLM_LSITE_KV] : kv_all;
        p->uf1 = p->a1 ? UF(QS_LLM_LSITE_KV) : NULL;
        if (!fuse_att) { p = rows(&j, P_ATT, ao, UF(QS_SITE_ATTN_OUT)); p->l = l; p->L = L; }
        gemm(&j, L->wo, qd, dm, d->xn);
        p = rows(&j, P_FFN_IN, lf ? lf[QS_SITE_FFN_IN] : act, UF(QS_SITE_FFN_IN));
        p->l = l; p->L = L;
        const int fused_gu = L->w_up == L->w_gate + (size_t)F * dm;
        gemm(&j, L->w_gate, dm, fused_gu ? 2 * F : F, fused_gu ? d->y : d->h);
        if (!fused_gu) gemm(&j, L->w_up, dm, F, d->y);
        p = rows(&j, P_DOWN_IN, lf ? lf[QS_SITE_FFN_DOWN_IN] : act, UF(QS_SITE_FFN_DOWN_IN));
        p->l = l; p->L = L;
        gemm(&j, L->w_down, F, dm, d->xn);
#undef UF
    }
    rows(&j, P_FINAL, NULL, NULL);
    return run(&j, e);
}

int qs_dec_logits_fused(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const float *hidden, int R,
                        float *out, uint64_t *uf, qs_pool_fn each, void *ctx, qs_err *e)
{
    fjob j = {m, d, NULL, NULL, NULL, hidden, NULL, R, nx ? nx->scaled : 0, 0, nx ? nx->resq : QS_RESQ_NONE, NULL,
              each, ctx, 0, 0, {{0}}};
    if (prepare(d, &j, R, e)) return -1;
    rows(&j, P_LOGITS, nx ? nx->act : NULL, uf ? uf + QS_LLM_UF(m->c.n_layer, 0) : NULL);
    gemm(&j, m->output, m->c.dim, m->c.vocab, out);
    if (each) rows(&j, P_EACH, NULL, NULL);
    return run(&j, e);
}
