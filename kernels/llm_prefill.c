/*
** The prefill's row passes and fused products on the thread pool (llm_prefill.h).  Every row is
** computed exactly as the serial loops of llm.c compute it, so splitting rows over threads changes
** nothing but the time.
*/
#include "llm_prefill.h"
#include "llm_internal.h"
#include "llm_pgemm.h"
#include "llm_rows.h"
#include "pool.h"

#include <stdatomic.h>
#include <string.h>

#define ROWS_PER_TASK 8

static int width(int R) { return R >= 2 * ROWS_PER_TASK ? qs_llm_threads() : 1; }

/* ---------------------------------------------------------------- residual + RMSNorm */

typedef struct norm_job {
    float *x, *out;
    const float *add, *w;
    int R, d;
    float eps;
} norm_job;

static void norm_task(void *ctx, size_t t, int slot)
{
    (void)slot;
    const norm_job *j = ctx;
    const int r1 = ((int)t + 1) * ROWS_PER_TASK < j->R ? ((int)t + 1) * ROWS_PER_TASK : j->R;
    for (int r = (int)t * ROWS_PER_TASK; r < r1; r++) {
        float *x = j->x + (size_t)r * j->d;
        if (j->add) {
            const float *a = j->add + (size_t)r * j->d;
            for (int i = 0; i < j->d; i++) x[i] += a[i];
        }
        if (j->out) qs_llm_rmsnorm_row(j->out + (size_t)r * j->d, x, j->w, j->d, j->eps);
    }
}

void qs_prefill_add_norm(float *x, const float *add, float *out, const float *w, int R, int d, float eps)
{
    norm_job j = {x, out, add, w, R, d, eps};
    const size_t n = (size_t)(R + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
    qs_pool_for(width(R), n, norm_task, &j);
}

/* ---------------------------------------------------------------- gate|up with SwiGLU */

typedef struct swiglu_job {
    qs_pgemm gate, up;
} swiglu_job;

static void swiglu_task(void *ctx, size_t p, int slot)
{
    (void)slot;
    const swiglu_job *j = ctx;
    _Alignas(64) float pack[QS_PGEMM_PACK];
    qs_pgemm_panel(&j->gate, p, pack);
    qs_pgemm_panel(&j->up, p, pack);
    const int o0 = (int)p * QS_PGEMM_NR, nc = j->gate.N - o0 < QS_PGEMM_NR ? j->gate.N - o0 : QS_PGEMM_NR;
    for (int r = 0; r < j->gate.R; r++)
        qs_swiglu_row(j->gate.y + (size_t)r * j->gate.ldy + o0, j->up.y + (size_t)r * j->up.ldy + o0, (size_t)nc);
}

void qs_prefill_swiglu(qs_pgemm_cache *pc, float *h, float *u, const float *x, const float *w_gate, const float *w_up, int R,
                       int d, int F)
{
    swiglu_job j = {{h, x, w_gate, R, d, F, d, F, NULL, 0, 0, 0, 0}, {u, x, w_up, R, d, F, d, F, NULL, 0, 0, 0, 0}};
    qs_pgemm_cache_bind(pc, &j.gate);
    qs_pgemm_cache_bind(pc, &j.up);
    const size_t n = qs_pgemm_panels(&j.gate);
    qs_pool_for(width(R) > 1 ? qs_llm_threads() : 1, n, swiglu_task, &j);
}

/* ---------------------------------------------------------------- biases, RoPE, KV cache */

typedef struct rope_job {
    const qs_prefill_rope *a;
    atomic_int fail;
    qs_err err;
} rope_job;

/* Key p of sequence b into the packed K and V (layout in llm_prefill.h). */
static void pack_kv(const qs_prefill_rope *a, int b, int p, const float *k, const float *v)
{
    const int hd = a->hd, NR = QS_PGEMM_NR;
    for (int h = 0; h < a->n_kv_head; h++) {
        const size_t base = ((size_t)b * a->n_kv_head + h) * a->ldp * (size_t)((hd + NR - 1) / NR * NR);
        float *kp = a->kp + base + (size_t)(p / NR) * hd * NR + p % NR, *vp = a->vp + base + (size_t)p * NR;
        const float *kh = k + (size_t)h * hd, *vh = v + (size_t)h * hd;
        for (int i = 0; i < hd; i++) kp[(size_t)i * NR] = kh[i];
        for (int i = 0; i < hd; i += NR)
            memcpy(vp + (size_t)(i / NR) * a->ldp * NR, vh + i, (size_t)(hd - i < NR ? hd - i : NR) * sizeof(float));
    }
}

static int rope_rows(const qs_prefill_rope *a, int r0, int r1, qs_err *e)
{
    const int qd = a->n_head * a->hd, kvd = a->n_kv_head * a->hd, half = a->hd / 2;
    for (int r = r0; r < r1; r++) {
        const int b = r / a->T, p = a->pos0 + r % a->T;
        float *q = a->q + (size_t)r * qd, *k = a->k + (size_t)r * kvd, *v = a->v + (size_t)r * kvd;
        if (a->bq) for (int i = 0; i < qd; i++) q[i] += a->bq[i];
        if (a->bk) for (int i = 0; i < kvd; i++) k[i] += a->bk[i];
        if (a->bv) for (int i = 0; i < kvd; i++) v[i] += a->bv[i];
        const float *cs = a->rcos + (size_t)p * half, *sn = a->rsin + (size_t)p * half;
        qs_llm_rope_row(q, a->n_head, a->hd, cs, sn, a->neox);
        qs_llm_rope_row(k, a->n_kv_head, a->hd, cs, sn, a->neox);
        float *kdst = a->kc + ((size_t)b * a->max_pos + p) * kvd, *vdst = a->vc + ((size_t)b * a->max_pos + p) * kvd;
        if (a->kvf) {
            if (qs_llm_fakeq_row(a->kvf, a->scaled, k, kvd, kdst, e) || qs_llm_fakeq_row(a->kvf, a->scaled, v, kvd, vdst, e))
                return -1;
        } else {
            memcpy(kdst, k, (size_t)kvd * sizeof(float));
            memcpy(vdst, v, (size_t)kvd * sizeof(float));
        }
        if (a->kp) pack_kv(a, b, p, kdst, vdst);
    }
    return 0;
}

static void rope_task(void *ctx, size_t t, int slot)
{
    (void)slot;
    rope_job *j = ctx;
    const int r0 = (int)t * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK < j->a->R ? r0 + ROWS_PER_TASK : j->a->R;
    qs_err e = {{0}};
    if (rope_rows(j->a, r0, r1, &e) && atomic_exchange(&j->fail, 1) == 0) j->err = e;
}

int qs_prefill_rope_kv(const qs_prefill_rope *a, qs_err *e)
{
    rope_job j = {a, 0, {{0}}};
    atomic_init(&j.fail, 0);
    qs_pool_for(width(a->R), (size_t)(a->R + ROWS_PER_TASK - 1) / ROWS_PER_TASK, rope_task, &j);
    if (atomic_load(&j.fail)) { *e = j.err; return -1; }
    return 0;
}
