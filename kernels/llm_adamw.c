/*
** AdamW, learning-rate schedule and gradient norm (see llm_adamw.h).
*/
#include "llm_adamw.h"
#include "llm_rows.h"
#include "pool.h"
#include "simd.h"

#include <immintrin.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int add_span(qs_adamw *o, int cap, const float *base, const float *p, size_t n, int bias, int decay)
{
    if (!p || !n || o->nspan == cap) return 0;
    o->span[o->nspan++] = (qs_adamw_span){(size_t)(p - base), n, bias, decay};
    return 0;
}

/* The tensors of m as spans of its arenas, in the order of the arena. */
static int build_spans(qs_adamw *o, const qs_llm_model *m)
{
    const qs_llm_cfg *c = &m->c;
    size_t d = (size_t)c->dim, q = qs_llm_q_dim(c), kv = (size_t)c->n_kv_head * (size_t)c->head_dim,
           f = (size_t)c->ffn, V = (size_t)c->vocab;
    int cap = 3 + 12 * c->n_layer;
    if (!(o->span = calloc((size_t)cap, sizeof *o->span))) return -1;
    add_span(o, cap, m->arena, m->tok_embd, V * d, 0, 1);
    if (m->output != m->tok_embd) add_span(o, cap, m->arena, m->output, V * d, 0, 1);
    add_span(o, cap, m->arena, m->out_norm, d, 0, 0);
    for (int l = 0; l < c->n_layer; l++) {
        const qs_llm_layer *L = &m->L[l];
        add_span(o, cap, m->arena, L->attn_norm, d, 0, 0);
        add_span(o, cap, m->arena, L->wq, q * d, 0, 1);
        add_span(o, cap, m->arena, L->wk, kv * d, 0, 1);
        add_span(o, cap, m->arena, L->wv, kv * d, 0, 1);
        add_span(o, cap, m->arena, L->wo, d * q, 0, 1);
        add_span(o, cap, m->arena, L->ffn_norm, d, 0, 0);
        add_span(o, cap, m->arena, L->w_gate, f * d, 0, 1);
        add_span(o, cap, m->arena, L->w_up, f * d, 0, 1);
        add_span(o, cap, m->arena, L->w_down, d * f, 0, 1);
        if (m->bias_arena) {
            add_span(o, cap, m->bias_arena, L->bq, q, 1, 0);
            add_span(o, cap, m->bias_arena, L->bk, kv, 1, 0);
            add_span(o, cap, m->bias_arena, L->bv, kv, 1, 0);
        }
    }
    return 0;
}

int qs_adamw_new(qs_adamw *o, const qs_llm_model *m, qs_err *e)
{
    memset(o, 0, sizeof *o);
    if (qs_llm_cfg_core_only(&m->c, 0, "training", e)) return -1;   /* no moments for experts or QK-norm gains */
    o->arena_len = m->arena_len;
    o->bias_len = m->bias_arena ? m->bias_len : 0;
    size_t n = o->arena_len + o->bias_len;
    o->m = calloc(n, sizeof(float));
    o->v = calloc(n, sizeof(float));
    if (!o->m || !o->v || build_spans(o, m)) {
        qs_adamw_free(o);
        return qs_fail(e, "out of memory for the optimizer state (%zu floats)", 2 * n);
    }
    return 0;
}

void qs_adamw_free(qs_adamw *o)
{
    free(o->m); free(o->v); free(o->span);
    memset(o, 0, sizeof *o);
}

/* 8 lanes of the loop below, the same operations in the same order (no FMA; sqrt and division are
** correctly rounded in both): the same bits. */
__attribute__((target("avx2"))) static size_t update_avx2(float *restrict w, const float *restrict g,
                                                          float *restrict m, float *restrict v, size_t n, float gscale,
                                                          float lr, float b1, float b2, float bc1, float bc2, float eps,
                                                          float wd)
{
    const __m256 vgs = _mm256_set1_ps(gscale), vb1 = _mm256_set1_ps(b1), vb2 = _mm256_set1_ps(b2);
    const __m256 c1 = _mm256_set1_ps(1.0f - b1), c2 = _mm256_set1_ps(1.0f - b2), vbc1 = _mm256_set1_ps(bc1);
    const __m256 vbc2 = _mm256_set1_ps(bc2), veps = _mm256_set1_ps(eps), vlr = _mm256_set1_ps(lr), vwd = _mm256_set1_ps(wd);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), vgs);
        __m256 mi = _mm256_add_ps(_mm256_mul_ps(vb1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(c1, gi));
        __m256 vi = _mm256_add_ps(_mm256_mul_ps(vb2, _mm256_loadu_ps(v + i)), _mm256_mul_ps(_mm256_mul_ps(c2, gi), gi));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        __m256 mh = _mm256_div_ps(mi, vbc1), vh = _mm256_div_ps(vi, vbc2), wi = _mm256_loadu_ps(w + i);
        __m256 upd = _mm256_add_ps(_mm256_div_ps(mh, _mm256_add_ps(_mm256_sqrt_ps(vh), veps)), _mm256_mul_ps(vwd, wi));
        _mm256_storeu_ps(w + i, _mm256_sub_ps(wi, _mm256_mul_ps(vlr, upd)));
    }
    return i;
}

void qs_adamw_update(float *restrict w, const float *restrict g, float *restrict m, float *restrict v, size_t n,
                     float gscale, float lr, float b1, float b2, float bc1, float bc2, float eps, float wd)
{
    size_t i0 = qs_simd_level() >= QS_SIMD_AVX2 ? update_avx2(w, g, m, v, n, gscale, lr, b1, b2, bc1, bc2, eps, wd) : 0;
    for (size_t i = i0; i < n; i++) {
        float gi = g[i] * gscale;
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mh = mi / bc1, vh = vi / bc2;
        w[i] -= lr * (mh / (sqrtf(vh) + eps) + wd * w[i]);
    }
}

#define CHUNK ((size_t)1 << 15)   /* elements per pool task (the update is elementwise: any cut gives the same bits) */

typedef struct {
    qs_adamw *o;
    qs_llm_model *m;
    const qs_llm_grads *g;
    const qs_adamw_opts *opt;
    float gscale, lr, bc1, bc2;
} step_job;

static void step_task(void *ctx, size_t t, int slot)
{
    (void)slot;
    const step_job *j = ctx;
    const qs_adamw *o = j->o;
    size_t off = t * CHUNK;   /* the task's chunk: CHUNK elements of the spans laid end to end */
    for (int k = 0; k < o->nspan; k++) {
        const qs_adamw_span *s = &o->span[k];
        size_t nch = (s->n + CHUNK - 1) / CHUNK * CHUNK;
        if (off >= nch) { off -= nch; continue; }
        size_t n = s->n - off < CHUNK ? s->n - off : CHUNK, at = s->off + off;
        float *w = (s->bias ? j->m->bias_arena : j->m->arena) + at;
        const float *gg = (s->bias ? j->g->bias_arena : j->g->arena) + at;
        size_t mo = (s->bias ? o->arena_len : 0) + at;
        qs_adamw_update(w, gg, o->m + mo, o->v + mo, n, j->gscale, j->lr, (float)j->opt->beta1, (float)j->opt->beta2,
                        j->bc1, j->bc2, (float)j->opt->eps, s->decay ? (float)j->opt->wd : 0.0f);
        return;
    }
}

int qs_adamw_step(qs_adamw *o, qs_llm_model *m, const qs_llm_grads *g, double gscale, double lr,
                  const qs_adamw_opts *opt, qs_err *e)
{
    if (m->arena_len != o->arena_len || g->arena_len != o->arena_len ||
        (m->bias_arena ? m->bias_len : 0) != o->bias_len || (g->bias_arena ? g->bias_len : 0) != o->bias_len)
        return qs_fail(e, "AdamW: the model or its gradients do not have the optimizer's shape");
    o->t++;
    float bc1 = (float)(1.0 - pow(opt->beta1, (double)o->t)), bc2 = (float)(1.0 - pow(opt->beta2, (double)o->t));
    step_job j = {o, m, g, opt, (float)gscale, (float)lr, bc1, bc2};
    size_t ntask = 0;
    for (int k = 0; k < o->nspan; k++) ntask += (o->span[k].n + CHUNK - 1) / CHUNK;
    qs_pool_for(qs_pool_width(qs_llm_threads(), ntask), ntask, step_task, &j);
    return 0;
}

#define NPART 256

typedef struct { const float *p; size_t n, per; double part[NPART]; } sq_job;

static void sumsq_task(void *ctx, size_t t, int slot)
{
    (void)slot;
    sq_job *j = ctx;
    size_t i0 = t * j->per, i1 = i0 + j->per < j->n ? i0 + j->per : j->n;
    double s = 0;
    for (size_t i = i0; i < i1; i++) s += (double)j->p[i] * (double)j->p[i];
    j->part[t] = s;
}

/* Sum of squares in at most NPART chunks (cut by n alone) on the pool, the chunks' sums added in order. */
static double sumsq(const float *p, size_t n)
{
    sq_job j = {p, n, CHUNK, {0}};
    if (n > CHUNK * NPART) j.per = (n + NPART - 1) / NPART;
    size_t nt = (n + j.per - 1) / j.per;
    qs_pool_for(qs_pool_width(qs_llm_threads(), nt), nt, sumsq_task, &j);
    double s = 0;
    for (size_t t = 0; t < nt; t++) s += j.part[t];
    return s;
}

double qs_llm_grads_norm(const qs_llm_grads *g)
{
    double s = sumsq(g->arena, g->arena_len);   /* tied: the shared embedding is there once */
    if (g->bias_arena) s += sumsq(g->bias_arena, g->bias_len);
    return sqrt(s);
}

double qs_lr_schedule(int s, int steps, int warmup, double lr, double min_frac)
{
    if (s < warmup) return lr * (double)(s + 1) / (double)warmup;
    double lo = lr * min_frac;
    if (steps - 1 <= warmup) return lr;
    double r = (double)(s - warmup) / (double)(steps - 1 - warmup);
    if (r > 1) r = 1;
    return lo + 0.5 * (1.0 + cos(M_PI * r)) * (lr - lo);
}
