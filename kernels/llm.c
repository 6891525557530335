/*
** Llama forward pass in FP32 with simulated low-precision numerics (see llm.h).
*/
#include "llm.h"
#include "attn_internal.h"
#include "cast_scale.h"
#include "llm_ext.h"
#include "llm_gemma.h"
#include "llm_internal.h"
#include "llm_moe.h"
#include "llm_pgemm.h"
#include "llm_prefill.h"
#include "llm_rot.h"
#include "llm_wfly.h"
#include "llm_wtype.h"
#include "llm_rows.h"
#include "pool.h"
#include "qs_stop.h"
#include "simd.h"

#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static const char *const kSite[] = {"attn_in", "attn_out", "ffn_in", "ffn_down_in", "k", "v", "resid"};
const char *qs_llm_site_name(qs_llm_site s) { return (unsigned)s < QS_SITE_COUNT ? kSite[s] : "?"; }

int qs_llm_cfg_check(const qs_llm_cfg *c, qs_err *e)
{
    if (c->n_layer <= 0 || c->dim <= 0 || c->n_head <= 0 || c->n_kv_head <= 0 || c->head_dim <= 0 ||
        c->ffn <= 0 || c->vocab <= 0 || c->ctx <= 0)
        return qs_fail(e, "model shape has a size <= 0 (layers %d, dim %d, heads %d/%d, head_dim %d, ffn %d, "
                          "vocab %d, context %d)", c->n_layer, c->dim, c->n_head, c->n_kv_head, c->head_dim,
                       c->ffn, c->vocab, c->ctx);
    if (c->head_dim % 2) return qs_fail(e, "head dimension %d is odd (RoPE rotates pairs)", c->head_dim);
    if (c->n_head % c->n_kv_head)
        return qs_fail(e, "%d query heads are not a multiple of %d KV heads", c->n_head, c->n_kv_head);
    if (c->head_dim > 4096 || c->n_head > 4096)
        return qs_fail(e, "model shape too large (%d heads of %d)", c->n_head, c->head_dim);
    if (c->dim > 65536 || (int64_t)c->n_head * c->head_dim > 65536 || c->ffn > 1 << 18 || c->vocab > 1 << 22 || c->n_layer > 4096)
        return qs_fail(e, "model shape too large (dim %d, ffn %d, vocab %d, layers %d)", c->dim, c->ffn,
                       c->vocab, c->n_layer);
    if (!(c->eps > 0) || !(c->rope_base > 0))
        return qs_fail(e, "RMSNorm epsilon %g and RoPE base %g must be > 0", c->eps, c->rope_base);
    return qs_llm_gemma_check(c, e) || qs_llm_ext_check(c, e) ? -1 : 0;
}

static size_t layer_floats(const qs_llm_cfg *c)
{
    size_t d = (size_t)c->dim, kv = (size_t)c->n_kv_head * c->head_dim, f = (size_t)c->ffn, qd = qs_llm_q_dim(c);
    return d + qd * d + kv * d * 2 + d * qd + d + (c->n_expert ? 0 : f * d * 3) + qs_llm_gemma_layer_floats(c);   /* experts: ext_arena */
}

int qs_llm_alloc(qs_llm_model *m, const qs_llm_cfg *c, int tied, qs_err *e)
{
    memset(m, 0, sizeof *m);
    if (qs_llm_cfg_check(c, e)) return -1;
    size_t d = (size_t)c->dim, kv = (size_t)c->n_kv_head * c->head_dim, f = (size_t)c->ffn, qd = qs_llm_q_dim(c);
    size_t n = (size_t)c->vocab * d * (tied ? 1 : 2) + d + (size_t)c->n_layer * layer_floats(c);
    m->c = *c;
    m->arena = malloc(n * sizeof(float));
    m->L = calloc((size_t)c->n_layer, sizeof *m->L);
    if (!m->arena || !m->L) {
        free(m->arena); free(m->L); memset(m, 0, sizeof *m);
        return qs_fail(e, "out of memory for a model of %zu parameters", n);
    }
    m->arena_len = n;
    float *p = m->arena;
    m->tok_embd = p; p += (size_t)c->vocab * d;
    m->output = tied ? m->tok_embd : p;
    if (!tied) p += (size_t)c->vocab * d;
    m->out_norm = p; p += d;
    for (int l = 0; l < c->n_layer; l++) {
        qs_llm_layer *L = &m->L[l];
        L->attn_norm = p; p += d;
        L->wq = p; p += qd * d;
        L->wk = p; p += kv * d;
        L->wv = p; p += kv * d;
        L->wo = p; p += d * qd;
        L->ffn_norm = p; p += d;
        if (!c->n_expert) {   /* a mixture of experts has its FFNs in ext_arena */
            L->w_gate = p; p += f * d;
            L->w_up = p; p += f * d;
            L->w_down = p; p += d * f;
        }
        p = qs_llm_gemma_place(c, l, L, p);   /* QK-norm gains, Gemma's extra norms, the sliding flag */
    }
    if (qs_llm_ext_alloc(m, e)) { qs_llm_free(m); return -1; }
    return 0;
}

int qs_llm_alloc_bias(qs_llm_model *m, qs_err *e)
{
    size_t qd = qs_llm_q_dim(&m->c), kv = (size_t)m->c.n_kv_head * m->c.head_dim;
    size_t n = (size_t)m->c.n_layer * (qd + 2 * kv);
    free(m->bias_arena);
    m->bias_arena = malloc(n * sizeof(float));
    if (!m->bias_arena) return qs_fail(e, "out of memory for %zu biases", n);
    m->bias_len = n;
    float *p = m->bias_arena;
    for (int l = 0; l < m->c.n_layer; l++) {
        m->L[l].bq = p; p += qd;
        m->L[l].bk = p; p += kv;
        m->L[l].bv = p; p += kv;
    }
    return 0;
}

void qs_llm_free(qs_llm_model *m)
{
    free(m->bias_arena);
    free(m->ext_arena);
    free(m->arena);
    free(m->L);
    memset(m, 0, sizeof *m);
}

int qs_llm_clone(qs_llm_model *dst, const qs_llm_model *src, qs_err *e)
{
    if (src->tw_embd || src->wfly) {
        memset(dst, 0, sizeof *dst);
        return qs_fail(e, "the model's weights are mapped, not FP32 arrays (--weights f32)");
    }
    int tied = src->output == src->tok_embd;
    if (qs_llm_alloc(dst, &src->c, tied, e)) return -1;
    memcpy(dst->arena, src->arena, src->arena_len * sizeof(float));   /* same layout, same offsets */
    if (src->ext_len) memcpy(dst->ext_arena, src->ext_arena, src->ext_len * sizeof(float));   /* likewise */
    if (src->bias_arena) {
        if (qs_llm_alloc_bias(dst, e)) { qs_llm_free(dst); return -1; }
        memcpy(dst->bias_arena, src->bias_arena, src->bias_len * sizeof(float));
    }
    return 0;
}

typedef struct { float *p; } memrw;
static int mem_read(void *ctx, uint64_t start, size_t n, float *out, qs_err *e)
{
    (void)e;
    memcpy(out, ((memrw *)ctx)->p + start, n * sizeof(float));
    return 0;
}
static int mem_write(void *ctx, uint64_t start, size_t n, const float *y, qs_err *e)
{
    (void)e;
    memcpy(((memrw *)ctx)->p + start, y, n * sizeof(float));
    return 0;
}

static int quant_matrix(const qs_apply *w, int scaled, float *p, size_t rows, size_t cols, qs_err *e)
{
    memrw ctx = {p};
    /* an explicit scale=tensor|row|col overrides the default (format_apply.c scales the matrix so) */
    if (w->cscale) return qs_format_apply(w, rows, cols, mem_read, &ctx, mem_write, &ctx, e);
    if (scaled && qs_cast_scale_target(w->f) > 0) {   /* per-output-channel scaled cast */
        for (size_t r = 0; r < rows; r++)
            if (qs_llm_fakeq_row(w, 1, p + r * cols, (int)cols, p + r * cols, e)) return -1;
        return 0;
    }
    return qs_format_apply(w, rows, cols, mem_read, &ctx, mem_write, &ctx, e);
}

int qs_llm_quantize_matrix(const qs_apply *w, int scaled, float *p, size_t rows, size_t cols, qs_err *e)
{
    return quant_matrix(w, scaled, p, rows, cols, e);
}

static int quant_layer(const qs_llm_cfg *c, qs_llm_layer *L, const qs_apply *w, int scaled, qs_err *e)
{
    size_t d = (size_t)c->dim, kv = (size_t)c->n_kv_head * c->head_dim, f = (size_t)c->ffn, qd = qs_llm_q_dim(c);
    return quant_matrix(w, scaled, L->wq, qd, d, e) || quant_matrix(w, scaled, L->wk, kv, d, e) ||
                   quant_matrix(w, scaled, L->wv, kv, d, e) || quant_matrix(w, scaled, L->wo, d, qd, e) ||
                   (L->w_gate && (quant_matrix(w, scaled, L->w_gate, f, d, e) || quant_matrix(w, scaled, L->w_up, f, d, e) ||
                                  quant_matrix(w, scaled, L->w_down, d, f, e))) ||
                   (L->moe.router && qs_llm_moe_quantize(c, &L->moe, w, scaled, e))
               ? -1 : 0;
}

int qs_llm_quantize_weights(qs_llm_model *m, const qs_apply *w, int scaled, qs_err *e)
{
    if (m->tw_embd || m->wfly) return qs_fail(e, "the model's weights are mapped, not FP32 arrays (qs_llm_round_copy)");
    const qs_llm_cfg *c = &m->c;
    for (int l = 0; l < c->n_layer; l++)
        if (quant_layer(c, &m->L[l], w, scaled, e)) return -1;
    return quant_matrix(w, scaled, m->output, (size_t)c->vocab, (size_t)c->dim, e);
}

int qs_llm_view_quantize_layers(qs_llm_model *dst, const qs_llm_model *src, const uint8_t *layers, const qs_apply *w,
                                int scaled, qs_err *e)
{
    if (src->tw_embd || src->wfly) {
        memset(dst, 0, sizeof *dst);
        return qs_fail(e, "the model's weights are mapped, not FP32 arrays (--weights f32)");
    }
    const qs_llm_cfg *c = &src->c;
    size_t d = (size_t)c->dim, kv = (size_t)c->n_kv_head * c->head_dim, f = (size_t)c->ffn, qd = qs_llm_q_dim(c);
    const size_t E = (size_t)c->n_expert, S = (size_t)c->ffn_shexp;   /* experts: copied too, router aliased */
    size_t per = 2 * qd * d + 2 * kv * d + (E ? 3 * E * f * d + 3 * S * d : 3 * f * d), nsel = 0;
    for (int l = 0; l < c->n_layer; l++) nsel += layers[l] != 0;
    *dst = *src;
    dst->arena = NULL; dst->arena_len = 0;
    dst->L = malloc((size_t)c->n_layer * sizeof *dst->L);
    if (!dst->L) { memset(dst, 0, sizeof *dst); return qs_fail(e, "out of memory"); }
    memcpy(dst->L, src->L, (size_t)c->n_layer * sizeof *dst->L);
    if (nsel && !(dst->arena = malloc(nsel * per * sizeof(float)))) {
        qs_llm_view_free(dst);
        return qs_fail(e, "out of memory for %zu rounded weights", nsel * per);
    }
    dst->arena_len = nsel * per;
    float *p = dst->arena;
    for (int l = 0; l < c->n_layer; l++) {
        if (!layers[l]) continue;
        qs_llm_layer *L = &dst->L[l];
        float **mat[10] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down, &L->moe.sh_gate,
                           &L->moe.sh_up, &L->moe.sh_down};
        size_t len[10] = {qd * d, kv * d, kv * d, d * qd, f * d, f * d, d * f, S * d, S * d, d * S};
        if (E) {   /* the experts' stacks in place of the dense FFN */
            mat[4] = &L->moe.gate; mat[5] = &L->moe.up; mat[6] = &L->moe.down;
            len[4] = len[5] = len[6] = E * f * d;
        }
        for (int i = 0; i < 10; i++) {
            if (!*mat[i]) continue;
            memcpy(p, *mat[i], len[i] * sizeof(float));
            *mat[i] = p;
            p += len[i];
        }
        if (w && quant_layer(c, L, w, scaled, e)) { qs_llm_view_free(dst); return -1; }
    }
    return 0;
}

void qs_llm_view_free(qs_llm_model *v)
{
    free(v->arena);
    free(v->L);
    memset(v, 0, sizeof *v);
}

int qs_llm_view_quantize_per_layer(qs_llm_model *dst, const qs_llm_model *src, const qs_apply *const *w, int scaled,
                                   qs_err *e)
{
    const int n = src->c.n_layer;
    uint8_t *sel = calloc((size_t)(n > 0 ? n : 1), 1);
    if (!sel) { memset(dst, 0, sizeof *dst); return qs_fail(e, "out of memory"); }
    for (int l = 0; l < n; l++) sel[l] = w[l] != NULL;
    /* copies of the selected layers' matrices, unrounded (a format that rounds nothing: none here) */
    int rc = qs_llm_view_quantize_layers(dst, src, sel, NULL, scaled, e);
    for (int l = 0; !rc && l < n; l++)
        if (w[l] && quant_layer(&src->c, &dst->L[l], w[l], scaled, e)) { qs_llm_view_free(dst); rc = -1; }
    free(sel);
    return rc;
}

/* ---------------------------------------------------------------- state */

struct qs_llm_state {
    qs_llm_cfg c;
    int batch, max_pos, max_rows;
    float *kc, *vc;                 /* [layer][batch][max_pos][kv_dim] */
    float *x, *xn, *q, *k, *v, *att, *h1, *h2, *sc, *tmp;
    float *rcos, *rsin;             /* [max_pos][head_dim/2] */
    float *fused;                   /* outputs of the fused Q|K|V and gate|up products, on first use */
    size_t fused_len;
    qs_pgemm_cache *pc;             /* packed weights (qs_llm_state_pack_weights), or NULL */
    float *kp, *vp;                 /* one layer's K and V packed for attention (llm_prefill.h), on first use */
    int ldp;                        /* max_pos rounded up to a panel */
};

int qs_llm_state_pack_weights(qs_llm_state *s, size_t max_bytes, qs_err *e)
{
    qs_pgemm_cache_free(s->pc);
    if (!(s->pc = qs_pgemm_cache_new(max_bytes / sizeof(float)))) return qs_fail(e, "out of memory");
    return 0;
}

qs_llm_state *qs_llm_state_new(const qs_llm_cfg *c, int batch, int max_pos, int max_rows, qs_err *e)
{
    if (qs_llm_cfg_check(c, e)) return NULL;
    if (batch <= 0 || max_pos <= 0 || max_rows <= 0 || max_pos > 1 << 20 || batch > 1 << 16 ||
        max_rows > 1 << 20 || max_rows > batch * (int64_t)max_pos) {
        qs_fail(e, "bad state size (batch %d, positions %d, rows %d)", batch, max_pos, max_rows);
        return NULL;
    }
    qs_llm_state *s = calloc(1, sizeof *s);
    if (!s) { qs_fail(e, "out of memory"); return NULL; }
    s->c = *c;
    s->batch = batch; s->max_pos = max_pos; s->max_rows = max_rows;
    size_t kvd = (size_t)c->n_kv_head * c->head_dim, R = (size_t)max_rows, d = (size_t)c->dim, qd = qs_llm_q_dim(c);
    size_t cache = (size_t)c->n_layer * batch * max_pos * kvd;
    size_t wide = (size_t)(c->ffn > c->dim ? c->ffn : c->dim);
    if (qd > wide) wide = qd;
    s->kc = malloc(cache * sizeof(float));
    s->vc = malloc(cache * sizeof(float));
    s->x = malloc(R * d * sizeof(float));
    s->xn = malloc(R * wide * sizeof(float));
    s->q = malloc(R * qd * sizeof(float));
    s->k = malloc(R * kvd * sizeof(float));
    s->v = malloc(R * kvd * sizeof(float));
    s->att = malloc(R * qd * sizeof(float));
    s->h1 = malloc(R * (size_t)c->ffn * sizeof(float));
    s->h2 = malloc(R * (size_t)c->ffn * sizeof(float));
    s->sc = malloc((size_t)max_pos * sizeof(float));
    s->tmp = malloc(3 * wide * sizeof(float));
    s->rcos = malloc((size_t)max_pos * (c->head_dim / 2) * sizeof(float));
    s->rsin = malloc((size_t)max_pos * (c->head_dim / 2) * sizeof(float));
    if (!s->kc || !s->vc || !s->x || !s->xn || !s->q || !s->k || !s->v || !s->att || !s->h1 || !s->h2 ||
        !s->sc || !s->tmp || !s->rcos || !s->rsin) {
        qs_llm_state_free(s);
        qs_fail(e, "out of memory for the KV cache of %d x %d positions", batch, max_pos);
        return NULL;
    }
    int half = c->head_dim / 2;
    for (int p = 0; p < max_pos; p++)
        for (int i = 0; i < half; i++) {
            double a = p * qs_llm_rope_freq(c, i);
            s->rcos[(size_t)p * half + i] = (float)cos(a);
            s->rsin[(size_t)p * half + i] = (float)sin(a);
        }
    return s;
}

void qs_llm_state_free(qs_llm_state *s)
{
    if (!s) return;
    free(s->kc); free(s->vc); free(s->x); free(s->xn); free(s->q); free(s->k); free(s->v);
    free(s->att); free(s->h1); free(s->h2); free(s->sc); free(s->tmp); free(s->rcos); free(s->rsin); free(s->fused);
    free(s->kp); free(s->vp);
    qs_pgemm_cache_free(s->pc);
    free(s);
}

/* ---------------------------------------------------------------- pieces */

static void rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    double ss = qs_sumsq_row(x, (size_t)n);
    float r = (float)(1.0 / sqrt(ss / n + eps));
    qs_norm_scale_row(out, x, r, w, (size_t)n);
}

/* One run of values through a format: the effective run length for row/tensor granularity is the
** whole row (one token), blocks otherwise.  A run is one row, so scale=row scales it (even unscaled)
** and scale=tensor|col, which need the whole matrix, cannot be honoured here. */
int qs_llm_fakeq_row(const qs_apply *a, int scaled, const float *x, int n, float *y, qs_err *e)
{
    qs_qopts o = a->o;
    if (a->gran != QS_GRAN_BLOCK) o.block = n;
    if (a->cscale == QS_CSCALE_ROW) scaled = 1;
    else if (a->cscale)
        return qs_fail(e, "%s:scale=%s: activations and KV-cache rows are scaled per row (token) only", a->f->name,
                       qs_cscale_name(a->cscale));
    if (!scaled) return a->f->fakeq(a->f, &o, x, (size_t)n, y, e);
    return qs_cast_scaled(a->f, &o, x, (size_t)n, y, e);   /* the scaling default of kernels/cast_scale.h */
}
#define fakeq_row(a, x, n, y, e) qs_llm_fakeq_row((a), scaled, (x), (n), (y), (e))

/* Round each row of x[rows][cols] in place (activation numerics, optionally with Rollout-ResQ). */
static int round_rows(const qs_apply *a, int scaled, qs_llm_resq resq, float *x, int rows, int cols, float *tmp, qs_err *e)
{
    float *q = tmp, *r = tmp + cols, *rq = tmp + 2 * (size_t)cols;
    for (int i = 0; i < rows; i++) {
        float *row = x + (size_t)i * cols;
        if (fakeq_row(a, row, cols, q, e)) return -1;
        if (resq == QS_RESQ_NONE) { memcpy(row, q, (size_t)cols * sizeof(float)); continue; }
        for (int j = 0; j < cols; j++) r[j] = row[j] - q[j];
        if (fakeq_row(a, r, cols, rq, e)) return -1;
        if (resq == QS_RESQ_24) {
            for (int j = 0; j + 4 <= cols; j += 4) {   /* keep the two largest magnitudes of each 4 */
                int a1 = j, a2 = -1;
                for (int t = j + 1; t < j + 4; t++) if (fabsf(rq[t]) > fabsf(rq[a1])) a1 = t;
                for (int t = j; t < j + 4; t++) if (t != a1 && (a2 < 0 || fabsf(rq[t]) > fabsf(rq[a2]))) a2 = t;
                for (int t = j; t < j + 4; t++) if (t != a1 && t != a2) rq[t] = 0;
            }
        }
        for (int j = 0; j < cols; j++) row[j] = q[j] + rq[j];
    }
    return 0;
}

/* The online transforms of a linear layer's input rows (rot=, rht=: llm_rot.h), before their rounding. */
static int online_in(const qs_llm_numerics *nx, qs_llm_site site, float *x, int rows, int cols, qs_err *e)
{
    return nx && nx->online ? qs_llm_online_rows(nx->online, site, x, rows, cols, e) : 0;
}

/* The same over many rows: blocks of rows on the thread pool (rows are independent). */
typedef struct rr_job {
    const qs_apply *a;
    int scaled, rows, cols;
    qs_llm_resq resq;
    float *x;
    atomic_int fail;
    qs_err err;
} rr_job;
#define RR_BLOCK 16

static void rr_task(void *ctx, size_t task, void *scratch)
{
    rr_job *j = ctx;
    int r0 = (int)task * RR_BLOCK, n = j->rows - r0 < RR_BLOCK ? j->rows - r0 : RR_BLOCK;
    qs_err e = {{0}};
    if (round_rows(j->a, j->scaled, j->resq, j->x + (size_t)r0 * j->cols, n, j->cols, scratch, &e) &&
        atomic_exchange(&j->fail, 1) == 0)
        j->err = e;
}

static int round_rows_par(const qs_apply *a, int scaled, qs_llm_resq resq, float *x, int rows, int cols, float *tmp, qs_err *e)
{
    if (rows < 4 * RR_BLOCK || qs_llm_threads() < 2) return round_rows(a, scaled, resq, x, rows, cols, tmp, e);
    rr_job j = {a, scaled, rows, cols, resq, x, 0, {{0}}};
    atomic_init(&j.fail, 0);
    if (qs_attn_tasks(qs_llm_threads(), (size_t)(rows + RR_BLOCK - 1) / RR_BLOCK, 3 * (size_t)cols * sizeof(float), rr_task, &j, e))
        return -1;
    if (atomic_load(&j.fail)) { *e = j.err; return -1; }
    return 0;
}

/* y[R][out] = x[R][in] . W[out][in]^T */
#define QS_LLM_PGEMM_ROWS 16   /* from here on the pool's panel products; the prefill's row passes too */
#ifndef QS_LLM_GEMV_ROWS
#define QS_LLM_GEMV_ROWS 4
#endif

/* Few rows (decoding, 2..4 rows): every weight row is read once and dotted with all R input rows,
** 8 lanes of FMA per row.  OpenBLAS's sgemm packs W for M <= 4 and was 1.5-3x slower; one sgemv per
** row reads W R times.  Memory-bound: W is streamed once per call.  One row: OpenBLAS sgemv. */
__attribute__((target("avx2,fma"))) static void few_rows_avx2(float *y, const float *x, const float *W, int R,
                                                               int in, int out)
{
    const int in8 = in & ~7;
    for (int o = 0; o < out; o++) {
        const float *w = W + (size_t)o * in;
        __m256 acc[QS_LLM_GEMV_ROWS];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
        for (int i = 0; i < in8; i += 8) {
            __m256 wv = _mm256_loadu_ps(w + i);
            for (int r = 0; r < R; r++) acc[r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + (size_t)r * in + i), acc[r]);
        }
        for (int r = 0; r < R; r++) {
            __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
            h = _mm_add_ps(h, _mm_movehl_ps(h, h));
            h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
            float sum = _mm_cvtss_f32(h);
            for (int i = in8; i < in; i++) sum += w[i] * x[(size_t)r * in + i];
            y[(size_t)r * out + o] = sum;
        }
    }
}

typedef struct { float *y; const float *x, *W; int R, in, out, nhalf; } few_job;
static void few_rows_job(void *p, size_t half, int slot)
{
    (void)slot;
    few_job *j = p;
    /* rows o0..o1 of W and columns o0..o1 of y (y keeps its full row stride `out`) */
    const int o0 = half ? j->out / 2 : 0, o1 = j->nhalf == 1 ? j->out : half ? j->out : j->out / 2, n = o1 - o0;
    float tmp[QS_LLM_GEMV_ROWS * 64];
    for (int c = 0; c < n; c += 64) {
        int m = n - c < 64 ? n - c : 64;
        few_rows_avx2(tmp, j->x, j->W + (size_t)(o0 + c) * j->in, j->R, j->in, m);
        for (int r = 0; r < j->R; r++) memcpy(j->y + (size_t)r * j->out + o0 + c, tmp + (size_t)r * m, (size_t)m * sizeof(float));
    }
}

/* QS_LLM_THREADS=2 splits the few-row kernel over two threads (each streams half of W).  Off by
** default: on the shared 2-core development machine it was as often slower as faster (BENCHMARKS.md). */
static int few_threads(void)
{
    static int n = 0;
    if (!n) { const char *v = getenv("QS_LLM_THREADS"); n = v && v[0] == '2' ? 2 : 1; }
    return n;
}

static void linear_f32(qs_pgemm_cache *pc, float *y, const float *x, const float *W, int R, int in, int out);

/* The same with typed weights tw (llm_wtype.h) when not NULL: many rows through the panels, each widening
** its block as it packs it; few rows (the FP32 path's other kernels) through a widened copy, NaN without
** memory for it.  A mapped matrix's pages are released after the product. */
static void linear(qs_pgemm_cache *pc, float *y, const float *x, const float *W, const qs_wt *tw, int R, int in, int out)
{
    if (!tw) { linear_f32(pc, y, x, W, R, in, out); return; }
    if (R >= QS_LLM_PGEMM_ROWS) {
        qs_pgemm g = {y, x, NULL, R, in, out, in, out, NULL, 0, 0, 0, 0, tw};
        qs_pgemm_run(&g, qs_llm_threads());
    } else {
        float *w = qs_wt_widen(tw);
        if (w) linear_f32(NULL, y, x, w, R, in, out);
        else for (size_t i = 0; i < (size_t)R * out; i++) y[i] = NAN;
        free(w);
    }
    qs_wt_release(tw);
}
#define TW(L, r) ((L)->tw ? &(L)->tw[r] : NULL)

static void linear_f32(qs_pgemm_cache *pc, float *y, const float *x, const float *W, int R, int in, int out)
{
    if (R >= 2 && R <= QS_LLM_GEMV_ROWS && qs_simd_level() >= QS_SIMD_AVX2) {
        /* two halves on two cores, each streaming half of W; else one call over all of W */
        int two = few_threads() > 1 && (size_t)in * out >= ((size_t)1 << 18);
        few_job j = {y, x, W, R, in, out, two ? 2 : 1};
        if (two) qs_pool_for(2, 2, few_rows_job, &j);
        else few_rows_job(&j, 0, 0);
        return;
    }
    if (R >= QS_LLM_PGEMM_ROWS) {   /* many rows: panels on qscope's pool (llm_pgemm.h) */
        qs_pgemm g = {y, x, W, R, in, out, in, out, NULL, 0, 0, 0, 0, NULL};
        qs_pgemm_cache_bind(pc, &g);
        qs_pgemm_run(&g, qs_llm_threads());
        return;
    }
    if (R <= QS_LLM_GEMV_ROWS) {
        for (int r = 0; r < R; r++)   /* portable: one sgemv per row */
            cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, W, in, x + (size_t)r * in, 1, 0.0f, y + (size_t)r * out, 1);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, out, in, 1.0f, x, in, W, in, 0.0f, y, out);
}

static void rope(float *v, int nheads, int hd, const float *cs, const float *sn, int neox)
{
    int half = hd / 2;
    for (int h = 0; h < nheads; h++) {
        float *p = v + (size_t)h * hd;
        if (neox) {   /* rotate_half: pairs (i, i + hd/2) */
            for (int i = 0; i < half; i++) {
                float a = p[i], b = p[i + half];
                p[i] = a * cs[i] - b * sn[i];
                p[i + half] = a * sn[i] + b * cs[i];
            }
            continue;
        }
        for (int i = 0; i < half; i++) {
            float a = p[2 * i], b = p[2 * i + 1];
            p[2 * i] = a * cs[i] - b * sn[i];
            p[2 * i + 1] = a * sn[i] + b * cs[i];
        }
    }
}

static void add_bias(float *y, const float *b, int rows, int n)
{
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) y[(size_t)r * n + i] += b[i];
}

/* Prefill attention on SGEMM tiles: for each sequence, query head and tile of ATT_TILE query rows,
** S = Q_tile K^T / sqrt(hd) over the keys the tile can see (one sgemm), causal mask and max-subtracted
** softmax per row (llm_rows.h, vectorised), O_tile = P V (one sgemm).  Masked entries are exact zeros in P.
** Tasks (sequence, head, tile) write disjoint parts of the output and run on the thread pool
** (one thread per core, OpenBLAS single-threaded meanwhile). */
#define ATT_GEMM_MIN 8
#define ATT_TILE 128
#define ATT_GROUP 24   /* query rows per Q K^T product with packed K: up to 24 masked keys computed per row */
typedef struct att_job {
    qs_llm_state *s;
    int l, T, pos0, grp, ntile;
    float alpha;
    int packed;   /* K and V of this layer packed (s->kp, s->vp): no packing per task, Q K^T by row groups */
    int B;        /* sequences of the call */
    int win;      /* sliding window (0: none): keys below pos - win + 1 get probability 0 */
} att_job;

static void att_task(void *ctx, size_t task, void *scratch)
{
    const att_job *j = ctx;
    qs_llm_state *s = j->s;
    const qs_llm_cfg *c = &s->c;
    const int qd = c->n_head * c->head_dim, hd = c->head_dim, kvd = c->n_kv_head * hd, T = j->T;
    /* the last tiles (the most keys) first: the call ends on the shortest tasks, not on a thread
    ** alone with a 4-times-longer one */
    const size_t nbh = (size_t)j->B * c->n_head;
    const int t0 = (j->ntile - 1 - (int)(task / nbh)) * ATT_TILE, h = (int)(task % nbh % c->n_head), b = (int)(task % nbh / c->n_head);
    const int kh = h / j->grp, nt = T - t0 < ATT_TILE ? T - t0 : ATT_TILE, n = j->pos0 + t0 + nt;   /* keys seen by the tile */
    const size_t lbase = (size_t)j->l * s->batch * s->max_pos * kvd;
    const float *kb = s->kc + lbase + (size_t)b * s->max_pos * kvd, *vb = s->vc + lbase + (size_t)b * s->max_pos * kvd;
    float *S = scratch;
    /* the panel products of llm_pgemm.h (no packing of Q, no zeroing of S): K's rows are the weights */
    qs_pgemm gs = {S, s->q + ((size_t)b * T + t0) * qd + (size_t)h * hd, kb + (size_t)kh * hd, nt, hd, n, qd, n, NULL, kvd, 0, 0, 0, NULL};
    const size_t pk = ((size_t)b * c->n_kv_head + kh) * s->ldp * (size_t)((hd + QS_PGEMM_NR - 1) / QS_PGEMM_NR * QS_PGEMM_NR);
    if (j->packed) {   /* by row groups: only the keys a group sees (the rest of S is zeroed below) */
        gs.P = s->kp + pk;
        for (int i0 = 0; i0 < nt; i0 += ATT_GROUP) {
            qs_pgemm g = gs;
            g.R = nt - i0 < ATT_GROUP ? nt - i0 : ATT_GROUP;
            g.N = j->pos0 + t0 + i0 + g.R;
            g.x = gs.x + (size_t)i0 * qd;
            g.y = S + (size_t)i0 * n;
            qs_pgemm_run(&g, 1);
        }
    } else
        qs_pgemm_run(&gs, 1);
    for (int i = 0; i < nt; i++) {
        float *row = S + (size_t)i * n;
        const int nv = j->pos0 + t0 + i + 1, lo = j->win && nv > j->win ? nv - j->win : 0;
        qs_scale_row(row + lo, (size_t)(nv - lo), j->alpha);
        qs_softmax_row(row + lo, (size_t)(nv - lo));
        memset(row, 0, (size_t)lo * sizeof(float));
        memset(row + nv, 0, (size_t)(n - nv) * sizeof(float));
    }
    qs_pgemm gv = {s->att + ((size_t)b * T + t0) * qd + (size_t)h * hd, S, vb + (size_t)kh * hd, nt, n, hd, n, qd, NULL, kvd, 1, 0, 0, NULL};
    if (j->packed) { gv.P = s->vp + pk; gv.ldp = s->ldp; }
    qs_pgemm_run(&gv, 1);
}

static int attend_gemm(qs_llm_state *s, int l, int B, int T, int pos0, int grp, float scale, int packed, int win, qs_err *e)
{
    att_job j = {s, l, T, pos0, grp, (T + ATT_TILE - 1) / ATT_TILE, scale, packed, B, win};
    size_t ntasks = (size_t)B * s->c.n_head * j.ntile;
    return qs_attn_tasks(qs_llm_threads(), ntasks, (size_t)ATT_TILE * (pos0 + T) * sizeof(float), att_task, &j, e);
}

static int kv_packs(qs_llm_state *s, qs_err *e)
{
    if (s->kp) return 0;
    s->ldp = (s->max_pos + QS_PGEMM_NR - 1) / QS_PGEMM_NR * QS_PGEMM_NR;
    const size_t n = (size_t)s->batch * s->c.n_kv_head * s->ldp * ((s->c.head_dim + QS_PGEMM_NR - 1) / QS_PGEMM_NR * QS_PGEMM_NR);
    const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;   /* the panel kernels' aligned loads */
    s->kp = aligned_alloc(64, bytes);
    s->vp = aligned_alloc(64, bytes);
    if (s->kp && s->vp) {   /* zeros in the pad lanes (never stored, but no stale NaNs to compute on) */
        memset(s->kp, 0, bytes);
        memset(s->vp, 0, bytes);
        return 0;
    }
    free(s->kp); free(s->vp);
    s->kp = s->vp = NULL;
    return qs_fail(e, "out of memory for %zu packed keys and values", n);
}

static float *fused_buf(qs_llm_state *s, size_t n, qs_err *e)
{
    if (n > s->fused_len) {
        float *p = realloc(s->fused, n * sizeof(float));
        if (!p) { qs_fail(e, "out of memory for %zu fused outputs", n); return NULL; }
        s->fused = p;
        s->fused_len = n;
    }
    return s->fused;
}

/* Q, K and V of a few rows (the decoder's prefill of short prompts): products, biases, RoPE and the
** layer's cache rows (lbase), row by row. */
static int qkv_rows(qs_llm_state *s, const qs_llm_layer *L, int B, int T, int pos0, size_t lbase, const qs_apply *kvf,
                    int scaled, qs_err *e)
{
    const qs_llm_cfg *c = &s->c;
    const int d = c->dim, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd, R = B * T, half = hd / 2;
    if (R > QS_LLM_GEMV_ROWS && (L->tw || (L->wk == L->wq + (size_t)qd * d && L->wv == L->wk + (size_t)kvd * d))) {
        /* Q, K, V weights are adjacent in the arena: one SGEMM of q_dim + 2 kv_dim outputs, then split
        ** (typed weights: widened side by side, so that SGEMM sees the same product) */
        const int W3 = qd + 2 * kvd;
        float *y = fused_buf(s, (size_t)R * W3, e), *wc = L->tw ? qs_wt_widen_cat(L->tw + QS_WT_Q, 3) : NULL;
        if (!y || (L->tw && !wc)) return y ? qs_fail(e, "out of memory for widened weights") : -1;
        linear(s->pc, y, s->xn, wc ? wc : L->wq, NULL, R, d, W3);
        free(wc);
        for (int i = 0; L->tw && i < 3; i++) qs_wt_release(&L->tw[QS_WT_Q + i]);
        for (int r = 0; r < R; r++) {
            const float *yr = y + (size_t)r * W3;
            memcpy(s->q + (size_t)r * qd, yr, (size_t)qd * sizeof(float));
            memcpy(s->k + (size_t)r * kvd, yr + qd, (size_t)kvd * sizeof(float));
            memcpy(s->v + (size_t)r * kvd, yr + qd + kvd, (size_t)kvd * sizeof(float));
        }
    } else {
        linear(s->pc, s->q, s->xn, L->wq, TW(L, QS_WT_Q), R, d, qd);
        linear(s->pc, s->k, s->xn, L->wk, TW(L, QS_WT_K), R, d, kvd);
        linear(s->pc, s->v, s->xn, L->wv, TW(L, QS_WT_V), R, d, kvd);
    }
    if (L->bq) add_bias(s->q, L->bq, R, qd);   /* Qwen2: after the product, before RoPE */
    if (L->bk) add_bias(s->k, L->bk, R, kvd);
    if (L->bv) add_bias(s->v, L->bv, R, kvd);
    if (L->q_norm) qs_llm_qk_norm(s->q, s->k, L->q_norm, L->k_norm, R, c->n_head, c->n_kv_head, hd, c->eps);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int r = b * T + t, p = pos0 + t;
            const float *cs = s->rcos + (size_t)p * half, *sn = s->rsin + (size_t)p * half;
            rope(s->q + (size_t)r * qd, c->n_head, hd, cs, sn, c->rope_neox);
            rope(s->k + (size_t)r * kvd, c->n_kv_head, hd, cs, sn, c->rope_neox);
            float *kdst = s->kc + lbase + ((size_t)b * s->max_pos + p) * kvd;
            float *vdst = s->vc + lbase + ((size_t)b * s->max_pos + p) * kvd;
            if (kvf) {
                if (fakeq_row(kvf, s->k + (size_t)r * kvd, kvd, kdst, e) ||
                    fakeq_row(kvf, s->v + (size_t)r * kvd, kvd, vdst, e))
                    return -1;
            } else {
                memcpy(kdst, s->k + (size_t)r * kvd, (size_t)kvd * sizeof(float));
                memcpy(vdst, s->v + (size_t)r * kvd, (size_t)kvd * sizeof(float));
            }
        }
    return 0;
}

int qs_llm_forward(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_state *s, const int32_t *tok,
                   int B, int T, int pos0, float *hidden, qs_llm_tap_fn tap, void *tap_ctx, qs_err *e)
{
    return qs_llm_forward_from(m, nx, s, tok, B, T, pos0, 0, NULL, hidden, tap, tap_ctx, e);
}

int qs_llm_forward_from(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_state *s, const int32_t *tok,
                        int B, int T, int pos0, int l0, const float *x0, float *hidden, qs_llm_tap_fn tap,
                        void *tap_ctx, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    if (qs_llm_gemma_block(c)) return qs_llm_gemma_forward(m, nx, s, tok, B, T, pos0, l0, x0, hidden, tap, tap_ctx, e);
    if (memcmp(c, &s->c, sizeof *c)) return qs_fail(e, "forward: state made for another model shape");
    if (B <= 0 || T <= 0 || B > s->batch || (int64_t)B * T > s->max_rows || pos0 < 0 || pos0 + T > s->max_pos)
        return qs_fail(e, "forward: %d sequences x %d positions from %d exceed the state (%d x %d, %d rows)", B,
                       T, pos0, s->batch, s->max_pos, s->max_rows);
    const int d = c->dim, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd, F = c->ffn, R = B * T;
    const int grp = c->n_head / c->n_kv_head;
    const qs_apply *act = nx ? nx->act : NULL, *kv_all = nx ? nx->kv : NULL;
    const qs_llm_resq resq = nx ? nx->resq : QS_RESQ_NONE;
    const int scaled = nx ? nx->scaled : 0;
    const float scale = 1.0f / sqrtf((float)hd);
    const int big = R >= QS_LLM_PGEMM_ROWS;   /* the pool's panel products and row passes */

    if (l0 < 0 || l0 >= c->n_layer || (l0 > 0 && !x0))
        return qs_fail(e, "forward: start layer %d of %d needs its residual stream", l0, c->n_layer);
    if (l0 > 0)
        memcpy(s->x, x0, (size_t)R * d * sizeof(float));
    else
    for (int r = 0; r < R; r++) {
        int32_t t = tok[r];
        if (t < 0 || t >= c->vocab) return qs_fail(e, "token id %d out of range (vocabulary %d)", t, c->vocab);
        if (m->tw_embd) qs_wt_row(m->tw_embd, t, 0, d, s->x + (size_t)r * d);
        else memcpy(s->x + (size_t)r * d, m->tok_embd + (size_t)t * d, (size_t)d * sizeof(float));
    }
    if (l0 == 0) qs_wt_release(m->tw_embd);
    for (int l = l0; l < c->n_layer; l++) {
        if (qs_stop_requested()) return qs_fail(e, "interrupted");   /* Ctrl-C in a long pass (kernels/qs_stop.h) */
        if (m->wfly && qs_llm_wfly_layer(m, l, e)) return -1;   /* this layer's weights rounded now (llm_wfly.h) */
        const qs_llm_layer *L = &m->L[l];
        size_t lbase = (size_t)l * s->batch * s->max_pos * kvd;
        const qs_apply *const *lf = nx && nx->layer_fmt ? nx->layer_fmt + (size_t)l * QS_LLM_NLSITE : NULL;
        const qs_apply *a_ai = lf ? lf[QS_SITE_ATTN_IN] : act, *a_ao = lf ? lf[QS_SITE_ATTN_OUT] : act;
        const qs_apply *a_fi = lf ? lf[QS_SITE_FFN_IN] : act, *a_fd = lf ? lf[QS_SITE_FFN_DOWN_IN] : act;
        const qs_apply *kvf = lf ? lf[QS_LLM_LSITE_KV] : kv_all;
        const int win = L->sliding ? c->sliding_window : 0;   /* keys a query sees: its last `win` positions (0: all) */
        if (!big) for (int r = 0; r < R; r++) rmsnorm(s->xn + (size_t)r * d, s->x + (size_t)r * d, L->attn_norm, d, c->eps);
        else if (l == l0) qs_prefill_add_norm(s->x, NULL, s->xn, L->attn_norm, R, d, c->eps);   /* later: fused below */
        if (tap) tap(tap_ctx, l, QS_SITE_ATTN_IN, s->xn, R, d);
        if (online_in(nx, QS_SITE_ATTN_IN, s->xn, R, d, e)) return -1;
        if (a_ai && round_rows_par(a_ai, scaled, resq, s->xn, R, d, s->tmp, e)) return -1;
        if (big) {   /* Q, K and V panels in one pool call, then biases, RoPE and the cache rows per row */
            qs_pgemm g[3] = {{s->q, s->xn, L->wq, R, d, qd, d, qd, NULL, 0, 0, 0, 0, TW(L, QS_WT_Q)},
                             {s->k, s->xn, L->wk, R, d, kvd, d, kvd, NULL, 0, 0, 0, 0, TW(L, QS_WT_K)},
                             {s->v, s->xn, L->wv, R, d, kvd, d, kvd, NULL, 0, 0, 0, 0, TW(L, QS_WT_V)}};
            for (int i = 0; i < 3; i++) qs_pgemm_cache_bind(s->pc, &g[i]);
            qs_pgemm_run_n(g, 3, qs_llm_threads());
            for (int i = 0; i < 3; i++) qs_wt_release(g[i].tw);
            if (pos0 == 0 && kv_packs(s, e)) return -1;   /* every key is a row of this call: packed as written */
            qs_prefill_rope ra = {s->q, s->k, s->v, s->kc + lbase, s->vc + lbase, pos0 ? NULL : s->kp, pos0 ? NULL : s->vp,
                                  s->ldp, L->bq, L->bk, L->bv, s->rcos, s->rsin, kvf, scaled, R, T, pos0, s->max_pos,
                                  c->n_head, c->n_kv_head, hd, c->rope_neox, L->q_norm, L->k_norm, c->eps};
            if (qs_prefill_rope_kv(&ra, e)) return -1;
        } else if (qkv_rows(s, L, B, T, pos0, lbase, kvf, scaled, e))
            return -1;
        if (tap) { tap(tap_ctx, l, QS_SITE_K, s->k, R, kvd); tap(tap_ctx, l, QS_SITE_V, s->v, R, kvd); }
        /* causal attention over the cache (all K/V of this call are in the cache now) */
        if (T >= ATT_GEMM_MIN) {
            if (attend_gemm(s, l, B, T, pos0, grp, scale, big && pos0 == 0 && s->kp, win, e)) return -1;
        } else
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                int r = b * T + t, n = pos0 + t + 1, j0 = win && n > win ? n - win : 0;   /* sliding window */
                const float *kb = s->kc + lbase + (size_t)b * s->max_pos * kvd;
                const float *vb = s->vc + lbase + (size_t)b * s->max_pos * kvd;
                for (int h = 0; h < c->n_head; h++) {
                    const float *q = s->q + (size_t)r * qd + (size_t)h * hd;
                    int kh = h / grp;
                    float mx = -INFINITY;
                    for (int j = j0; j < n; j++) {
                        const float *kj = kb + (size_t)j * kvd + (size_t)kh * hd;
                        float dot = 0;
                        for (int i = 0; i < hd; i++) dot += q[i] * kj[i];
                        s->sc[j] = dot * scale;
                        if (s->sc[j] > mx) mx = s->sc[j];
                    }
                    double sum = 0;
                    for (int j = j0; j < n; j++) { s->sc[j] = expf(s->sc[j] - mx); sum += s->sc[j]; }
                    float inv = (float)(1.0 / sum);
                    float *o = s->att + (size_t)r * qd + (size_t)h * hd;
                    for (int i = 0; i < hd; i++) o[i] = 0;
                    for (int j = j0; j < n; j++) {
                        const float *vj = vb + (size_t)j * kvd + (size_t)kh * hd;
                        float pj = s->sc[j] * inv;
                        for (int i = 0; i < hd; i++) o[i] += pj * vj[i];
                    }
                }
            }
        if (tap) tap(tap_ctx, l, QS_SITE_ATTN_OUT, s->att, R, qd);
        if (online_in(nx, QS_SITE_ATTN_OUT, s->att, R, qd, e)) return -1;
        if (a_ao && round_rows_par(a_ao, scaled, resq, s->att, R, qd, s->tmp, e)) return -1;
        linear(s->pc, s->xn, s->att, L->wo, TW(L, QS_WT_O), R, qd, d);
        if (big) qs_prefill_add_norm(s->x, s->xn, s->xn, L->ffn_norm, R, d, c->eps);
        else {
            for (size_t i = 0; i < (size_t)R * d; i++) s->x[i] += s->xn[i];
            for (int r = 0; r < R; r++) rmsnorm(s->xn + (size_t)r * d, s->x + (size_t)r * d, L->ffn_norm, d, c->eps);
        }
        if (tap) tap(tap_ctx, l, QS_SITE_FFN_IN, s->xn, R, d);
        if (online_in(nx, QS_SITE_FFN_IN, s->xn, R, d, e)) return -1;
        if (a_fi && round_rows_par(a_fi, scaled, resq, s->xn, R, d, s->tmp, e)) return -1;
        if (L->moe.router) {   /* mixture of experts (llm_moe.c): the output lands in s->xn as the down projection's */
            if (qs_llm_moe_ffn(c, &L->moe, s->xn, R, a_fd, scaled, resq, e)) return -1;
            goto ffn_done;
        }
        if (big) qs_prefill_swiglu(s->pc, s->h1, s->h2, s->xn, L->w_gate, L->w_up, TW(L, QS_WT_GATE), TW(L, QS_WT_UP), R, d, F);
        else if (R > QS_LLM_GEMV_ROWS && (L->tw || L->w_up == L->w_gate + (size_t)F * d)) {
            /* gate and up adjacent: one SGEMM of 2 ffn outputs, SwiGLU per row into h1 (typed: widened so) */
            float *y = fused_buf(s, (size_t)R * 2 * F, e), *wc = L->tw ? qs_wt_widen_cat(L->tw + QS_WT_GATE, 2) : NULL;
            if (!y || (L->tw && !wc)) return y ? qs_fail(e, "out of memory for widened weights") : -1;
            linear(s->pc, y, s->xn, wc ? wc : L->w_gate, NULL, R, d, 2 * F);
            free(wc);
            for (int i = 0; L->tw && i < 2; i++) qs_wt_release(&L->tw[QS_WT_GATE + i]);
            for (int r = 0; r < R; r++) {
                float *yr = y + (size_t)r * 2 * F;
                qs_swiglu_row(yr, yr + F, (size_t)F);
                memcpy(s->h1 + (size_t)r * F, yr, (size_t)F * sizeof(float));
            }
        } else {
            linear(s->pc, s->h1, s->xn, L->w_gate, TW(L, QS_WT_GATE), R, d, F);
            linear(s->pc, s->h2, s->xn, L->w_up, TW(L, QS_WT_UP), R, d, F);
            qs_swiglu_row(s->h1, s->h2, (size_t)R * F);
        }
        if (tap) tap(tap_ctx, l, QS_SITE_FFN_DOWN_IN, s->h1, R, F);
        if (online_in(nx, QS_SITE_FFN_DOWN_IN, s->h1, R, F, e)) return -1;
        if (a_fd && round_rows_par(a_fd, scaled, resq, s->h1, R, F, s->tmp, e)) return -1;
        linear(s->pc, s->xn, s->h1, L->w_down, TW(L, QS_WT_DOWN), R, F, d);
    ffn_done:
        if (big)   /* the residual add and the next RMSNorm (the output norm after the last layer) in one pass */
            qs_prefill_add_norm(s->x, s->xn, l + 1 < c->n_layer ? s->xn : hidden,
                                l + 1 < c->n_layer ? m->L[l + 1].attn_norm : m->out_norm, R, d, c->eps);
        else for (size_t i = 0; i < (size_t)R * d; i++) s->x[i] += s->xn[i];
        if (tap) tap(tap_ctx, l, QS_SITE_RESID, s->x, R, d);
    }
    if (!big) for (int r = 0; r < R; r++) rmsnorm(hidden + (size_t)r * d, s->x + (size_t)r * d, m->out_norm, d, c->eps);
    return 0;
}

int qs_llm_logits(const qs_llm_model *m, const qs_llm_numerics *nx, const float *hidden, int rows,
                  float *scratch, float *out, qs_err *e)
{
    return qs_llm_logits_st(m, nx, NULL, hidden, rows, scratch, out, e);
}

int qs_llm_logits_st(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_state *s, const float *hidden, int rows,
                     float *scratch, float *out, qs_err *e)
{
    qs_pgemm_cache *pc = s ? s->pc : NULL;
    const int d = m->c.dim;
    const float *x = hidden;
    if (nx && nx->online) {   /* the head's input transformed in the scratch rows, then rounded there */
        memcpy(scratch, hidden, (size_t)rows * d * sizeof(float));
        if (online_in(nx, QS_SITE_ATTN_IN, scratch, rows, d, e)) return -1;
        hidden = x = scratch;
    }
    if (nx && nx->act) {
        float *tmp = malloc(3 * (size_t)d * sizeof(float));
        if (!tmp) return qs_fail(e, "out of memory");
        if (hidden != scratch) memcpy(scratch, hidden, (size_t)rows * d * sizeof(float));
        int rc = round_rows(nx->act, nx->scaled, nx->resq, scratch, rows, d, tmp, e);
        free(tmp);
        if (rc) return -1;
        x = scratch;
    }
    linear(pc, out, x, m->output, m->tw_out, rows, d, m->c.vocab);
    if (m->c.final_softcap > 0) qs_llm_softcap(out, (size_t)rows * m->c.vocab, m->c.final_softcap);   /* Gemma 2 */
    return 0;
}

double qs_llm_logprob(const float *logits, int vocab, int tok, double *entropy)
{
    double mx = -INFINITY;
    for (int i = 0; i < vocab; i++) if (logits[i] > mx) mx = logits[i];
    double z = 0, ez = 0;
    for (int i = 0; i < vocab; i++) {
        double u = logits[i] - mx, p = exp(u);
        z += p;
        ez += p * u;
    }
    double lz = log(z);
    if (entropy) *entropy = lz - ez / z;   /* -sum p log p with p = e^u / z */
    return (logits[tok] - mx) - lz;
}

double qs_llm_flops_per_token(const qs_llm_cfg *c, int ctx)
{
    double d = c->dim, kv = (double)c->n_kv_head * c->head_dim, f = c->ffn;
    double qd = (double)c->n_head * c->head_dim;
    if (c->n_expert)   /* the experts a token uses, its router and the shared expert */
        f = (double)f * c->n_expert_used + (double)c->ffn_shexp + (double)c->n_expert / 3;
    double per_layer = 2 * (qd * d * 2 + kv * d * 2 + 3 * f * d) + 4.0 * qd * ctx;
    return c->n_layer * per_layer + 2 * d * c->vocab;
}

/* ---------------------------------------------------------------- shared with llm_decode.c */

void qs_llm_rmsnorm_row(float *out, const float *x, const float *w, int n, float eps) { rmsnorm(out, x, w, n, eps); }

int qs_llm_round_rows(const qs_apply *a, int scaled, qs_llm_resq resq, float *x, int rows, int cols, float *tmp, qs_err *e)
{
    return round_rows_par(a, scaled, resq, x, rows, cols, tmp, e);
}

void qs_llm_rope_row(float *v, int nheads, int hd, const float *cs, const float *sn, int neox) { rope(v, nheads, hd, cs, sn, neox); }

int qs_llm_quant_matrix(const qs_apply *w, int scaled, float *p, size_t rows, size_t cols, qs_err *e)
{
    return quant_matrix(w, scaled, p, rows, cols, e);
}

void qs_llm_qk_norm(float *q, float *k, const float *qn, const float *kn, int R, int n_head, int n_kv_head, int hd, float eps)
{
    for (size_t i = 0; i < (size_t)R * n_head; i++) rmsnorm(q + i * hd, q + i * hd, qn, hd, eps);
    for (size_t i = 0; i < (size_t)R * n_kv_head; i++) rmsnorm(k + i * hd, k + i * hd, kn, hd, eps);
}

/* ---------------------------------------------------------------- shared with llm_gemma.c */

void qs_llm__state_bufs(qs_llm_state *s, qs_llm_sbuf *b)
{
    *b = (qs_llm_sbuf){s->kc, s->vc, s->x, s->xn, s->q, s->k, s->v, s->att, s->h1, s->h2, s->tmp, s->batch, s->max_pos, s->max_rows,
                      s->pc, &s->c};
}

void qs_llm__linear(qs_pgemm_cache *pc, float *y, const float *x, const float *W, int R, int in, int out)
{
    linear_f32(pc, y, x, W, R, in, out);
}
