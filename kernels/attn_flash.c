/* The tiled attention runner FlashAttention-2 and AMLA share (attn_internal.h), the FlashAttention-2
** row kernel, split-KV combination, and the task runner on the thread pool (see attn.h). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "attn.h"
#include "attn_internal.h"
#include "blas_threads.h"
#include "pool.h"

#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453

/* ---------------- tasks on the pool ---------------- */

typedef struct {
    void (*fn)(void *, size_t, void *);
    void *ctx;
    size_t scratch;
    void *scr[QS_POOL_MAX];   /* one per slot, allocated by the slot's thread on its first task */
    atomic_int fail;
} tasks_t;

static void tasks_one(void *vc, size_t t, int slot)
{
    tasks_t *p = vc;
    if (!p->scr[slot] && !(p->scr[slot] = malloc(p->scratch ? p->scratch : 1))) {
        atomic_store(&p->fail, 1);
        return;
    }
    p->fn(p->ctx, t, p->scr[slot]);
}

int qs_attn_tasks(int threads, size_t ntasks, size_t scratch_bytes, void (*fn)(void *, size_t, void *), void *ctx,
                  qs_err *e)
{
    tasks_t p = {fn, ctx, scratch_bytes, {0}, 0};
    atomic_init(&p.fail, 0);
    int w = qs_pool_width(threads < 1 ? 1 : threads, ntasks);
    qs_blas_serial_begin();   /* our threads each call BLAS: one BLAS thread each */
    qs_pool_for(w, ntasks, tasks_one, &p);
    qs_blas_serial_end();
    for (int i = 0; i < w; i++) free(p.scr[i]);
    return atomic_load(&p.fail) ? qs_fail(e, "attention: out of memory (per-thread scratch %zu bytes)", scratch_bytes) : 0;
}

/* ---------------- split-KV combination ---------------- */

void qs_attn_combine(const qs_attn_shape *s, int splits, const float *Os, const float *lses, float *O, float *lse)
{
    size_t rows = s->H * s->Lq, dv = s->dv;
    for (size_t r = 0; r < rows; r++) {
        double mx = -INFINITY;
        for (int k = 0; k < splits; k++) mx = fmax(mx, (double)lses[(size_t)k * rows + r]);
        float *o = O + r * dv;
        for (size_t j = 0; j < dv; j++) o[j] = 0;
        if (mx == -INFINITY) { if (lse) lse[r] = -INFINITY; continue; }
        double sum = 0;
        for (int k = 0; k < splits; k++) sum += exp((double)lses[(size_t)k * rows + r] - mx);
        double L = mx + log(sum);
        if (lse) lse[r] = (float)L;
        for (int k = 0; k < splits; k++) {
            double lk = lses[(size_t)k * rows + r];
            if (lk == -INFINITY) continue;
            float w = (float)exp(lk - L);
            const float *os = Os + ((size_t)k * rows + r) * dv;
            for (size_t j = 0; j < dv; j++) o[j] += w * os[j];
        }
    }
}

/* ---------------- the tiled runner ---------------- */

/* One task: a Q tile against the keys of one split.  The query rows of all heads sharing KV head g are
** one contiguous matrix of grp·Lq rows (Q is [H][Lq][d]), so decode with many query heads per KV head
** (GQA, the MQA form of MLA) still gets tall SGEMM tiles; row gr of the group is query position
** gr % Lq.  The kernel keeps each row's running state and finishes O (and the LSE) at the end. */
static void fa_task(void *ctx, size_t t, void *scr)
{
    const qs_fa_ctx *x = ctx;
    const qs_attn_shape *s = x->s;
    const qs_fa_kernel *k = x->k;
    size_t sp = t % (size_t)x->splits, qb = (t / (size_t)x->splits) % x->nqb, g = t / ((size_t)x->splits * x->nqb);
    size_t d = s->d, dv = s->dv, Lk = s->Lk, Lq = s->Lq, bc = x->bc, grows = (s->H / s->Hkv) * Lq;
    size_t r0 = qb * x->br, rows = grows - r0 < x->br ? grows - r0 : x->br;
    size_t kb = sp * x->kspan, rowsall = s->H * Lq;
    const float *q = x->Q + (g * grows + r0) * d, *Kh = x->K + g * Lk * d, *Vh = x->V + g * Lk * dv;
    float *S = scr;
    char *st = (char *)(S + x->br * bc);
    float *O = x->O + ((size_t)sp * rowsall + g * grows + r0) * dv;
    float *lse = x->lse ? x->lse + (size_t)sp * rowsall + g * grows + r0 : NULL;
    long off = (long)Lk - (long)Lq;
    for (size_t r = 0; r < rows; r++) k->init(st + r * k->state);
    memset(O, 0, rows * dv * sizeof(float));
    size_t ke = kb + x->kspan < Lk ? kb + x->kspan : Lk;
    if (x->c->causal) {
        size_t imax = 0;
        for (size_t r = 0; r < rows; r++) imax = (r0 + r) % Lq > imax ? (r0 + r) % Lq : imax;
        long last = (long)imax + off + 1;
        if (last < (long)ke) ke = last < (long)kb ? kb : (size_t)last;
    }
    for (size_t j0 = kb; j0 < ke; j0 += bc) {
        size_t n = ke - j0 < bc ? ke - j0 : bc;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n, (int)d, x->alpha2, q, (int)d, Kh + j0 * d,
                    (int)d, 0.0f, S, (int)n);
        for (size_t r = 0; r < rows; r++) {
            float *row = S + r * n;
            if (x->c->causal) {
                long lim = (long)((r0 + r) % Lq) + off;
                for (size_t jj = 0; jj < n; jj++)
                    if ((long)(j0 + jj) > lim) row[jj] = -INFINITY;
            }
            k->row(x, row, n, st + r * k->state, O + r * dv);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)dv, (int)n, 1.0f, S, (int)n, Vh + j0 * dv,
                    (int)dv, 1.0f, O, (int)dv);
    }
    for (size_t r = 0; r < rows; r++) k->finish(x, st + r * k->state, O + r * dv, lse ? lse + r : NULL);
}

int qs_fa_run(const qs_fa_kernel *k, const qs_attn_shape *s, const qs_attn_cfg *c, const float *Q, const float *K,
              const float *V, float *O, float *lse, qs_err *e)
{
    if (qs_attn_shape_check(s, e)) return -1;
    qs_fa_ctx x = {s, c, Q, K, V, (float)(qs_attn_scale(s, c) * LOG2E), c->br ? c->br : 128, c->bc ? c->bc : 256, 0,
                   c->splits > 1 ? c->splits : 1, 0, O, lse, k};
    if (x.br > 4096 || x.bc > 8192) return qs_fail(e, "attention: tile %zux%zu too large", x.br, x.bc);
    if ((size_t)x.splits > s->Lk) x.splits = (int)s->Lk;
    x.nqb = ((s->H / s->Hkv) * s->Lq + x.br - 1) / x.br;
    x.kspan = (s->Lk + (size_t)x.splits - 1) / (size_t)x.splits;
    float *Os = NULL, *ls = NULL;
    size_t rows = s->H * s->Lq;
    if (x.splits > 1) {   /* each split normalises its part and returns its LSE (flash-decoding) */
        Os = malloc((size_t)x.splits * rows * s->dv * sizeof(float));
        ls = malloc((size_t)x.splits * rows * sizeof(float));
        if (!Os || !ls) { free(Os); free(ls); return qs_fail(e, "out of memory (split-KV buffers)"); }
        x.O = Os;
        x.lse = ls;
    }
    size_t scratch = x.br * x.bc * sizeof(float) + x.br * k->state + 64;
    int rc = qs_attn_tasks(c->threads, s->Hkv * x.nqb * (size_t)x.splits, scratch, fa_task, &x, e);
    if (!rc && x.splits > 1) qs_attn_combine(s, x.splits, Os, ls, O, lse);
    free(Os); free(ls);
    return rc;
}

/* ---------------- FlashAttention-2 ---------------- */

/* Online softmax in log2 units: m the running max, l the running sum; O is rescaled by 2^(m_old − m). */
typedef struct { float m, l; } fa2_row_st;

static void fa2_init(void *vs)
{
    *(fa2_row_st *)vs = (fa2_row_st){-INFINITY, 0};
}

static void fa2_row(const qs_fa_ctx *x, float *row, size_t n, void *vs, float *o)
{
    fa2_row_st *a = vs;
    float mx = qs_row_max(row, n);
    float mnew = mx > a->m ? mx : a->m;
    if (mnew == -INFINITY) { memset(row, 0, n * sizeof(float)); return; }
    float alpha = a->m == -INFINITY ? 0.0f : qs_exp2f_fast(a->m - mnew);
    float sum = qs_row_exp2_sum(row, n, mnew, x->c->p);
    a->l = alpha * a->l + sum;
    a->m = mnew;
    if (alpha != 1.0f) qs_row_scale(o, x->s->dv, alpha);
}

static void fa2_finish(const qs_fa_ctx *x, void *vs, float *o, float *lse)
{
    const fa2_row_st *a = vs;
    float inv = a->l > 0 ? 1.0f / a->l : 0.0f;
    for (size_t j = 0; j < x->s->dv; j++) o[j] *= inv;
    if (lse) *lse = a->l > 0 ? (float)(((double)a->m + log2((double)a->l)) * LN2) : -INFINITY;
}

static const qs_fa_kernel fa2_kernel = {sizeof(fa2_row_st), fa2_init, fa2_row, fa2_finish};

int qs_attn_fa2(const qs_attn_shape *s, const qs_attn_cfg *c, const float *Q, const float *K, const float *V, float *O,
                float *lse, qs_err *e)
{
    return qs_fa_run(&fa2_kernel, s, c, Q, K, V, O, lse, e);
}
