/*
** The Gemma 2 / Gemma 3 block of the forward pass (see llm_gemma.h): plain row passes and SGEMMs
** (the forward pass's own products, qs_llm__linear), attention per (sequence, head) on the pool.
*/
#include "llm_gemma.h"
#include "attn_internal.h"
#include "llm_internal.h"
#include "llm_rows.h"
#include "qs_stop.h"

#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

int qs_llm_gemma_block(const qs_llm_cfg *c)
{
    /* QK-norm and sliding windows alone run in the Llama block (Qwen3, Mistral: kernels/llm.c) */
    return c->ffn_gelu || c->sandwich || c->emb_scale != 0 || c->attn_scale != 0 || c->attn_softcap != 0 ||
           c->rope_base_swa != 0 || c->rope_linear != 0;
}

int qs_llm_gemma_check(const qs_llm_cfg *c, qs_err *e)
{
    if (!(c->emb_scale >= 0) || !(c->attn_scale >= 0) || !(c->attn_softcap >= 0) || !(c->final_softcap >= 0) ||
        !(c->rope_base_swa >= 0) || !(c->rope_linear >= 0) || !isfinite(c->emb_scale) || !isfinite(c->attn_scale) ||
        !isfinite(c->attn_softcap) || !isfinite(c->final_softcap) || !isfinite(c->rope_base_swa) || !isfinite(c->rope_linear))
        return qs_fail(e, "embedding scale, score scale, soft-caps and RoPE base/scaling must be finite and >= 0");
    if (c->sliding_window < 0 || c->swa_pattern < 0 || c->swa_pattern > 4096)
        return qs_fail(e, "sliding window %d or its layer pattern %d out of range", c->sliding_window, c->swa_pattern);
    return 0;
}

size_t qs_llm_gemma_layer_floats(const qs_llm_cfg *c)
{
    return (c->sandwich ? 2 * (size_t)c->dim : 0) + (c->qk_norm ? 2 * (size_t)c->head_dim : 0);
}

int qs_llm_gemma_sliding(const qs_llm_cfg *c, int l)
{
    if (c->sliding_window <= 0) return 0;
    return c->swa_pattern <= 0 || l % c->swa_pattern < c->swa_pattern - 1;   /* llama.cpp's set_swa_pattern */
}

float *qs_llm_gemma_place(const qs_llm_cfg *c, int l, qs_llm_layer *L, float *p)
{
    if (c->sandwich) {
        L->post_attn_norm = p; p += c->dim;
        L->post_ffn_norm = p; p += c->dim;
    }
    if (c->qk_norm) {
        L->q_norm = p; p += c->head_dim;
        L->k_norm = p; p += c->head_dim;
    }
    L->sliding = qs_llm_gemma_sliding(c, l);
    return p;
}

int qs_llm_gemma_refuse(const qs_llm_cfg *c, const char *what, qs_err *e)
{
    if (!qs_llm_gemma_block(c) && c->final_softcap == 0) return 0;
    return qs_fail(e, "%s runs the Llama block only: Gemma's (GeGLU, sandwich norms, soft-capping, sliding-window "
                      "layers, QK-norm) is not supported there", what);
}

void qs_llm_softcap(float *x, size_t n, float cap)
{
    for (size_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

/* gelu with the tanh approximation (PyTorch's gelu(approximate="tanh"), ggml_gelu) of g, times u */
static void geglu_row(float *g, const float *u, size_t n)
{
    const float k = 0.7978845608028654f;   /* sqrt(2/pi) */
    for (size_t i = 0; i < n; i++) {
        float x = g[i];
        g[i] = 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x))) * u[i];
    }
}

/* RoPE tables of positions pos0 .. pos0+T-1 for one base and scale: cs/sn [T][half] */
static void rope_table(float *cs, float *sn, int T, int pos0, int hd, double base, double scale)
{
    const int half = hd / 2;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            double a = (pos0 + t) * scale * pow(base, -2.0 * i / hd);
            cs[(size_t)t * half + i] = (float)cos(a);
            sn[(size_t)t * half + i] = (float)sin(a);
        }
}

/* ---------------------------------------------------------------- attention */

#define GATT_TILE 128   /* query rows per task: the scores of a tile are GATT_TILE x keys */
typedef struct gatt_job {
    const qs_llm_cfg *c;
    const qs_llm_sbuf *b;
    size_t lbase;
    int T, pos0, window;      /* window 0: global */
    float scale;
    int ntile;
} gatt_job;

/* Sequence b, query head h, query rows t0 .. t0+nt-1: S = scale Q K^T over the keys 0 .. pos0+t0+nt-1,
** capped, masked, softmax, P V. */
static void gatt_task(void *ctx, size_t task, void *scratch)
{
    const gatt_job *j = ctx;
    const qs_llm_cfg *c = j->c;
    const int hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd, T = j->T;
    const int tile = (int)(task % (size_t)j->ntile), bh = (int)(task / (size_t)j->ntile);
    const int b = bh / c->n_head, h = bh % c->n_head, kh = h / (c->n_head / c->n_kv_head);
    const int t0 = tile * GATT_TILE, nt = T - t0 < GATT_TILE ? T - t0 : GATT_TILE, N = j->pos0 + t0 + nt;
    const float *kb = j->b->kc + j->lbase + (size_t)b * j->b->max_pos * kvd + (size_t)kh * hd;
    const float *vb = j->b->vc + j->lbase + (size_t)b * j->b->max_pos * kvd + (size_t)kh * hd;
    const float *q = j->b->q + ((size_t)b * T + t0) * qd + (size_t)h * hd;
    float *S = scratch;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nt, N, hd, j->scale, q, qd, kb, kvd, 0.0f, S, N);
    for (int i = 0; i < nt; i++) {
        float *row = S + (size_t)i * N;
        const int p = j->pos0 + t0 + i, lo = j->window > 0 && p - j->window + 1 > 0 ? p - j->window + 1 : 0;
        if (c->attn_softcap > 0) qs_llm_softcap(row + lo, (size_t)(p + 1 - lo), c->attn_softcap);
        for (int k = 0; k < lo; k++) row[k] = 0;
        qs_softmax_row(row + lo, (size_t)(p + 1 - lo));
        for (int k = p + 1; k < N; k++) row[k] = 0;   /* masked: exact zeros in P */
    }
    float *o = j->b->att + ((size_t)b * T + t0) * qd + (size_t)h * hd;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nt, hd, N, 1.0f, S, N, vb, kvd, 0.0f, o, qd);
}

/* ---------------------------------------------------------------- the block */

typedef struct gctx {
    const qs_llm_model *m;
    qs_llm_sbuf b;
    int B, T, pos0, R, scaled;
    qs_llm_resq resq;
    float *rope;              /* [2 tables: global, local][cos, sin][T][half] */
    qs_llm_tap_fn tap;
    void *tap_ctx;
} gctx;

static void norm_rows(float *out, const float *x, const float *w, int rows, int n, float eps)
{
    for (int r = 0; r < rows; r++) qs_llm_rmsnorm_row(out + (size_t)r * n, x + (size_t)r * n, w, n, eps);
}

static int round_site(const gctx *g, const qs_apply *a, float *x, int cols, qs_err *e)
{
    return a ? qs_llm_round_rows(a, g->scaled, g->resq, x, g->R, cols, g->b.tmp, e) : 0;
}

/* Q, K, V of layer l: products, biases, QK-norm, RoPE, the cache rows. */
static int qkv(const gctx *g, int l, const qs_apply *kvf, qs_err *e)
{
    const qs_llm_cfg *c = &g->m->c;
    const qs_llm_layer *L = &g->m->L[l];
    const int d = c->dim, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd, R = g->R, half = hd / 2;
    const qs_llm_sbuf *b = &g->b;
    qs_llm__linear(b->pc, b->q, b->xn, L->wq, R, d, qd);
    qs_llm__linear(b->pc, b->k, b->xn, L->wk, R, d, kvd);
    qs_llm__linear(b->pc, b->v, b->xn, L->wv, R, d, kvd);
    for (int r = 0; r < R; r++) {
        float *qr = b->q + (size_t)r * qd, *kr = b->k + (size_t)r * kvd, *vr = b->v + (size_t)r * kvd;
        if (L->bq) for (int i = 0; i < qd; i++) qr[i] += L->bq[i];
        if (L->bk) for (int i = 0; i < kvd; i++) kr[i] += L->bk[i];
        if (L->bv) for (int i = 0; i < kvd; i++) vr[i] += L->bv[i];
        if (L->q_norm) for (int h = 0; h < c->n_head; h++) qs_llm_rmsnorm_row(qr + (size_t)h * hd, qr + (size_t)h * hd, L->q_norm, hd, c->eps);
        if (L->k_norm) for (int h = 0; h < c->n_kv_head; h++) qs_llm_rmsnorm_row(kr + (size_t)h * hd, kr + (size_t)h * hd, L->k_norm, hd, c->eps);
        const int t = r % g->T, bb = r / g->T;
        const float *cs = g->rope + ((size_t)(L->sliding ? 2 : 0) * g->T + t) * half;
        const float *sn = cs + (size_t)g->T * half;
        qs_llm_rope_row(qr, c->n_head, hd, cs, sn, c->rope_neox);
        qs_llm_rope_row(kr, c->n_kv_head, hd, cs, sn, c->rope_neox);
        const size_t at = (size_t)l * b->batch * b->max_pos * kvd + ((size_t)bb * b->max_pos + g->pos0 + t) * kvd;
        if (kvf) {
            if (qs_llm_fakeq_row(kvf, g->scaled, kr, kvd, b->kc + at, e) || qs_llm_fakeq_row(kvf, g->scaled, vr, kvd, b->vc + at, e))
                return -1;
        } else {
            memcpy(b->kc + at, kr, (size_t)kvd * sizeof(float));
            memcpy(b->vc + at, vr, (size_t)kvd * sizeof(float));
        }
    }
    return 0;
}

/* y (in b.xn) through the optional post-norm, added to the residual stream */
static void post_add(const gctx *g, const float *post)
{
    const qs_llm_cfg *c = &g->m->c;
    const size_t n = (size_t)g->R * c->dim;
    if (post) norm_rows(g->b.xn, g->b.xn, post, g->R, c->dim, c->eps);
    for (size_t i = 0; i < n; i++) g->b.x[i] += g->b.xn[i];
}

static int layer(const gctx *g, int l, const qs_llm_numerics *nx, qs_err *e)
{
    const qs_llm_cfg *c = &g->m->c;
    const qs_llm_layer *L = &g->m->L[l];
    const qs_llm_sbuf *b = &g->b;
    const int d = c->dim, qd = c->n_head * c->head_dim, kvd = c->n_kv_head * c->head_dim, F = c->ffn, R = g->R;
    const qs_apply *act = nx ? nx->act : NULL, *kv_all = nx ? nx->kv : NULL;
    const qs_apply *const *lf = nx && nx->layer_fmt ? nx->layer_fmt + (size_t)l * QS_LLM_NLSITE : NULL;
    const qs_apply *a_ai = lf ? lf[QS_SITE_ATTN_IN] : act, *a_ao = lf ? lf[QS_SITE_ATTN_OUT] : act;
    const qs_apply *a_fi = lf ? lf[QS_SITE_FFN_IN] : act, *a_fd = lf ? lf[QS_SITE_FFN_DOWN_IN] : act;
    const qs_apply *kvf = lf ? lf[QS_LLM_LSITE_KV] : kv_all;

    norm_rows(b->xn, b->x, L->attn_norm, R, d, c->eps);
    if (g->tap) g->tap(g->tap_ctx, l, QS_SITE_ATTN_IN, b->xn, R, d);
    if (round_site(g, a_ai, b->xn, d, e) || qkv(g, l, kvf, e)) return -1;
    if (g->tap) { g->tap(g->tap_ctx, l, QS_SITE_K, b->k, R, kvd); g->tap(g->tap_ctx, l, QS_SITE_V, b->v, R, kvd); }
    gatt_job j = {c, b, (size_t)l * b->batch * b->max_pos * kvd, g->T, g->pos0, L->sliding ? c->sliding_window : 0,
                  c->attn_scale > 0 ? c->attn_scale : 1.0f / sqrtf((float)c->head_dim), (g->T + GATT_TILE - 1) / GATT_TILE};
    const size_t rows = (size_t)(g->T < GATT_TILE ? g->T : GATT_TILE);
    if (qs_attn_tasks(qs_llm_threads(), (size_t)g->B * c->n_head * j.ntile, rows * (size_t)(g->pos0 + g->T) * sizeof(float),
                      gatt_task, &j, e))
        return -1;
    if (g->tap) g->tap(g->tap_ctx, l, QS_SITE_ATTN_OUT, b->att, R, qd);
    if (round_site(g, a_ao, b->att, qd, e)) return -1;
    qs_llm__linear(b->pc, b->xn, b->att, L->wo, R, qd, d);
    post_add(g, L->post_attn_norm);
    norm_rows(b->xn, b->x, L->ffn_norm, R, d, c->eps);
    if (g->tap) g->tap(g->tap_ctx, l, QS_SITE_FFN_IN, b->xn, R, d);
    if (round_site(g, a_fi, b->xn, d, e)) return -1;
    qs_llm__linear(b->pc, b->h1, b->xn, L->w_gate, R, d, F);
    qs_llm__linear(b->pc, b->h2, b->xn, L->w_up, R, d, F);
    if (c->ffn_gelu) geglu_row(b->h1, b->h2, (size_t)R * F);
    else qs_swiglu_row(b->h1, b->h2, (size_t)R * F);
    if (g->tap) g->tap(g->tap_ctx, l, QS_SITE_FFN_DOWN_IN, b->h1, R, F);
    if (round_site(g, a_fd, b->h1, F, e)) return -1;
    qs_llm__linear(b->pc, b->xn, b->h1, L->w_down, R, F, d);
    post_add(g, L->post_ffn_norm);
    if (g->tap) g->tap(g->tap_ctx, l, QS_SITE_RESID, b->x, R, d);
    return 0;
}

int qs_llm_gemma_forward(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_state *s, const int32_t *tok, int B,
                         int T, int pos0, int l0, const float *x0, float *hidden, qs_llm_tap_fn tap, void *tap_ctx,
                         qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    gctx g = {.m = m, .B = B, .T = T, .pos0 = pos0, .R = B * T, .scaled = nx ? nx->scaled : 0,
              .resq = nx ? nx->resq : QS_RESQ_NONE, .tap = tap, .tap_ctx = tap_ctx};
    qs_llm__state_bufs(s, &g.b);
    qs_llm_sbuf *b = &g.b;   /* the checks of qs_llm_forward_from (llm.c) */
    if (memcmp(c, b->c, sizeof *c)) return qs_fail(e, "forward: state made for another model shape");
    if (B <= 0 || T <= 0 || B > b->batch || (int64_t)B * T > b->max_rows || pos0 < 0 || pos0 + T > b->max_pos)
        return qs_fail(e, "forward: %d sequences x %d positions from %d exceed the state (%d x %d, %d rows)", B, T, pos0,
                       b->batch, b->max_pos, b->max_rows);
    if (l0 < 0 || l0 >= c->n_layer || (l0 > 0 && !x0))
        return qs_fail(e, "forward: start layer %d of %d needs its residual stream", l0, c->n_layer);
    const int d = c->dim, half = c->head_dim / 2, R = g.R;
    if (l0 > 0) memcpy(b->x, x0, (size_t)R * d * sizeof(float));
    else
        for (int r = 0; r < R; r++) {
            int32_t t = tok[r];
            if (t < 0 || t >= c->vocab) return qs_fail(e, "token id %d out of range (vocabulary %d)", t, c->vocab);
            const float *row = m->tok_embd + (size_t)t * d;
            float *x = b->x + (size_t)r * d;
            if (c->emb_scale > 0) for (int i = 0; i < d; i++) x[i] = row[i] * c->emb_scale;
            else memcpy(x, row, (size_t)d * sizeof(float));
        }
    g.rope = malloc((size_t)4 * T * half * sizeof(float));
    if (!g.rope) return qs_fail(e, "out of memory for RoPE tables of %d positions", T);
    float *cs = g.rope;
    rope_table(cs, cs + (size_t)T * half, T, pos0, c->head_dim, c->rope_base, c->rope_linear > 0 ? 1.0 / c->rope_linear : 1.0);
    cs += (size_t)2 * T * half;
    rope_table(cs, cs + (size_t)T * half, T, pos0, c->head_dim, c->rope_base_swa > 0 ? c->rope_base_swa : c->rope_base, 1.0);
    int rc = 0;
    for (int l = l0; l < c->n_layer && !rc; l++) {
        if (qs_stop_requested()) { rc = qs_fail(e, "interrupted"); break; }
        rc = layer(&g, l, nx, e);
    }
    free(g.rope);
    if (rc) return -1;
    norm_rows(hidden, b->x, m->out_norm, R, d, c->eps);
    return 0;
}
