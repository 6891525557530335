/*
** Training forward with saved activations and the backward pass of the Llama model (see llm_train.h).
** The forward mirrors qs_llm_forward without numerics (same float operations except that every
** product is one SGEMM), so its loss matches the inference pass to FP32 rounding.
*/
#include "llm_train.h"
#include "llm_rows.h"
#include "llm_train_attn.h"
#include "llm_train_rows.h"
#include "qs_clock.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct qs_llm_train_state {
    qs_llm_cfg c;
    int batch, T;
    float *buf;
    /* saved per layer, each [n_layer][capacity]: */
    float *x_in, *rms1, *xn1, *q, *k, *v, *P, *att, *x_mid, *rms2, *xn2, *g, *u, *h;
    float *x_fin, *rmsf, *hn, *logits;                    /* final norm and head */
    float *dx, *dxn, *dq, *dk, *dv, *datt, *dh, *dg, *du;  /* backward scratch */
    float *rcos, *rsin;                                     /* [T][head_dim/2] x 2 */
    /* low-precision recipe (NULL rc: the FP32 path) */
    qs_llm_recipe rc_copy;
    const qs_llm_recipe *rc;
    float *qa, *qb;            /* the two quantized operands of one GEMM */
    uint64_t calls;            /* GEMM calls so far: SR seeds and RHT signs */
    int in_head;               /* the GEMM is the output projection (quantized iff rc->head) */
    int failed;
    qs_err qerr;
    double tm[QS_LT_COUNT], total;   /* seconds per part, and in qs_llm_loss_grad (bench train) */
};

/* Per-layer capacity of each saved array (floats), in the order of the struct. */
static void layer_sizes(const qs_llm_cfg *c, size_t R, size_t BHTT, size_t n[14])
{
    size_t d = (size_t)c->dim, qd = qs_llm_q_dim(c), kvd = (size_t)c->n_kv_head * c->head_dim, F = (size_t)c->ffn;
    const size_t v[14] = {R * d, R, R * d, R * qd, R * kvd, R * kvd, BHTT, R * qd, R * d, R, R * d, R * F, R * F, R * F};
    memcpy(n, v, sizeof v);
}

size_t qs_llm_train_state_floats(const qs_llm_cfg *c, int batch, int T)
{
    qs_err e = {{0}};
    if (qs_llm_cfg_check(c, &e) || batch <= 0 || T <= 0 || batch > 1 << 16 || T > 1 << 16) return 0;
    size_t R = (size_t)batch * T, d = (size_t)c->dim, qd = qs_llm_q_dim(c);
    size_t kvd = (size_t)c->n_kv_head * c->head_dim, F = (size_t)c->ffn;
    double est = (double)batch * T * ((double)T * c->n_head + 4.0 * d + 2.0 * qd + 2.0 * kvd + 3.0 * F + c->vocab + 8);
    if (est * c->n_layer > 1e12) return 0;   /* keeps every size_t product below exact */
    size_t n[14], per = 0;
    layer_sizes(c, R, (size_t)batch * c->n_head * T * T, n);
    for (int i = 0; i < 14; i++) per += n[i];
    return (size_t)c->n_layer * per + R * (2 * d + (size_t)c->vocab + 1) + R * (2 * d + 2 * qd + 2 * kvd + 3 * F) +
           (size_t)T * (size_t)c->head_dim;
}

qs_llm_train_state *qs_llm_train_state_new(const qs_llm_cfg *c, int batch, int T, qs_err *e)
{
    size_t total = qs_llm_train_state_floats(c, batch, T);
    if (!total) {
        if (!qs_llm_cfg_check(c, e)) qs_fail(e, "bad training batch (%d sequences x %d positions)", batch, T);
        return NULL;
    }
    qs_llm_train_state *s = calloc(1, sizeof *s);
    if (s) s->buf = malloc(total * sizeof(float));
    if (!s || !s->buf) {
        free(s);
        qs_fail(e, "out of memory for the activations of %d x %d positions (%zu floats)", batch, T, total);
        return NULL;
    }
    s->c = *c; s->batch = batch; s->T = T;
    size_t R = (size_t)batch * T, d = (size_t)c->dim, qd = qs_llm_q_dim(c);
    size_t kvd = (size_t)c->n_kv_head * c->head_dim, F = (size_t)c->ffn, n[14];
    layer_sizes(c, R, (size_t)batch * c->n_head * T * T, n);
    float **saved[14] = {&s->x_in, &s->rms1, &s->xn1, &s->q, &s->k, &s->v, &s->P, &s->att, &s->x_mid, &s->rms2,
                         &s->xn2, &s->g, &s->u, &s->h};
    float *p = s->buf;
    for (int i = 0; i < 14; i++) { *saved[i] = p; p += (size_t)c->n_layer * n[i]; }
    s->x_fin = p; p += R * d;
    s->rmsf = p; p += R;
    s->hn = p; p += R * d;
    s->logits = p; p += R * (size_t)c->vocab;
    float **scr[9] = {&s->dx, &s->dxn, &s->dq, &s->dk, &s->dv, &s->datt, &s->dh, &s->dg, &s->du};
    const size_t sn[9] = {R * d, R * d, R * qd, R * kvd, R * kvd, R * qd, R * F, R * F, R * F};
    for (int i = 0; i < 9; i++) { *scr[i] = p; p += sn[i]; }
    int half = c->head_dim / 2;
    s->rcos = p; p += (size_t)T * half;
    s->rsin = p;
    for (int t = 0; t < T; t++)   /* the same angles as qs_llm_state_new */
        for (int i = 0; i < half; i++) {
            double a = t * pow((double)c->rope_base, -2.0 * i / c->head_dim);
            s->rcos[(size_t)t * half + i] = (float)cos(a);
            s->rsin[(size_t)t * half + i] = (float)sin(a);
        }
    return s;
}

void qs_llm_train_state_free(qs_llm_train_state *s)
{
    if (!s) return;
    free(s->qa);
    free(s->qb);
    free(s->buf);
    free(s);
}

int qs_llm_grads_new(qs_llm_grads *g, const qs_llm_model *m, qs_err *e)
{
    if (qs_llm_alloc(g, &m->c, m->output == m->tok_embd, e)) return -1;
    if (m->L[0].bq && qs_llm_alloc_bias(g, e)) { qs_llm_free(g); return -1; }
    qs_llm_grads_zero(g);
    return 0;
}

void qs_llm_grads_zero(qs_llm_grads *g)
{
    memset(g->arena, 0, g->arena_len * sizeof(float));
    if (g->bias_arena) memset(g->bias_arena, 0, g->bias_len * sizeof(float));
}

void qs_llm_grads_free(qs_llm_grads *g) { qs_llm_free(g); }

/* ---------------------------------------------------------------- pieces */

int qs_llm_train_state_set_recipe(qs_llm_train_state *s, const qs_llm_recipe *r, qs_err *e)
{
    free(s->qa);
    free(s->qb);
    s->qa = s->qb = NULL;
    s->rc = NULL;
    s->calls = 0;
    if (!r) return 0;
    if (qs_llm_recipe_check(r, e)) return -1;
    const qs_llm_cfg *c = &s->c;
    size_t R = (size_t)s->batch * s->T, w = (size_t)c->dim, q = qs_llm_q_dim(c);
    size_t big = (size_t)c->vocab > w ? (size_t)c->vocab : w;
    if (q > big) big = q;
    if ((size_t)c->ffn > big) big = (size_t)c->ffn;
    size_t n = (R > w ? R : w) * big;   /* an activation (R x big) or a weight (big x dim, or dim x big) */
    s->qa = malloc(n * sizeof(float));
    s->qb = malloc(n * sizeof(float));
    if (!s->qa || !s->qb) {
        free(s->qa); free(s->qb); s->qa = s->qb = NULL;
        return qs_fail(e, "out of memory for the quantized operands (%zu floats)", 2 * n);
    }
    s->rc_copy = *r;
    s->rc = &s->rc_copy;
    return 0;
}

/* Operands a (ra x ca) and b (rb x cb) of one GEMM as the recipe wants them: the originals when both
** slots are off (the FP32 path, bit for bit), else quantized copies in the state's scratch. */
static void operands(qs_llm_train_state *s, int opa, const float **a, size_t ra, size_t ca, int opb, const float **b,
                     size_t rb, size_t cb)
{
    const qs_llm_recipe *r = s->rc;
    if (!r || (s->in_head && !r->head) || s->failed || (!r->op[opa].on && !r->op[opb].on)) return;
    uint64_t call = s->calls++;
    if (qs_llm_recipe_operand(r, opa, *a, ra, ca, call, s->qa, &s->qerr) ||
        qs_llm_recipe_operand(r, opb, *b, rb, cb, call, s->qb, &s->qerr)) {
        s->failed = 1;
        return;
    }
    *a = s->qa;
    *b = s->qb;
}

/* Adds the seconds since t0 to part; returns now. */
static double tick(qs_llm_train_state *s, int part, double t0)
{
    double t = qs_now_s();
    s->tm[part] += t - t0;
    return t;
}

void qs_llm_train_state_times(const qs_llm_train_state *s, double t[QS_LT_COUNT])
{
    double other = 0;
    for (int i = 0; i < QS_LT_COUNT; i++) {
        t[i] = s->tm[i];
        if (i != QS_LT_ROWS) other += t[i];
    }
    t[QS_LT_ROWS] = s->total > other ? s->total - other : 0;   /* the rest of the pass */
}

void qs_llm_train_state_times_reset(qs_llm_train_state *s)
{
    memset(s->tm, 0, sizeof s->tm);
    s->total = 0;
}

/* y[R][out] = x[R][in] . W[out][in]^T */
static void linear(qs_llm_train_state *s, float *y, const float *x, const float *W, int R, int in, int out)
{
    double t0 = qs_now_s();
    operands(s, QS_OP_FWD_X, &x, R, in, QS_OP_FWD_W, &W, out, in);
    t0 = tick(s, QS_LT_QUANT, t0);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, out, in, 1.0f, x, in, W, in, 0.0f, y, out);
    tick(s, QS_LT_FWD_GEMM, t0);
}
/* dx[R][in] (+)= dy[R][out] . W[out][in] */
static void linear_dx(qs_llm_train_state *s, float *dx, const float *dy, const float *W, int R, int in, int out,
                      float beta)
{
    double t0 = qs_now_s();
    operands(s, QS_OP_DGRAD_DY, &dy, R, out, QS_OP_DGRAD_W, &W, out, in);
    t0 = tick(s, QS_LT_QUANT, t0);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, in, out, 1.0f, dy, out, W, in, beta, dx, in);
    tick(s, QS_LT_BWD_GEMM, t0);
}
/* dW[out][in] += dy[R][out]^T . x[R][in] */
static void linear_dw(qs_llm_train_state *s, float *dW, const float *dy, const float *x, int R, int in, int out)
{
    double t0 = qs_now_s();
    operands(s, QS_OP_WGRAD_DY, &dy, R, out, QS_OP_WGRAD_X, &x, R, in);
    t0 = tick(s, QS_LT_QUANT, t0);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, R, 1.0f, dy, out, x, in, 1.0f, dW, in);
    tick(s, QS_LT_BWD_GEMM, t0);
}

static void add_bias(float *y, const float *b, int rows, int n)
{
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) y[(size_t)r * n + i] += b[i];
}

static void bias_grad(float *db, const float *dy, int rows, int n)
{
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) db[i] += dy[(size_t)r * n + i];
}

typedef struct lay {   /* one layer's slices of the saved arrays */
    float *x_in, *rms1, *xn1, *q, *k, *v, *P, *att, *x_mid, *rms2, *xn2, *g, *u, *h, *x_out;
} lay;

static lay layer_of(const qs_llm_train_state *s, int l)
{
    const qs_llm_cfg *c = &s->c;
    size_t n[14];
    layer_sizes(c, (size_t)s->batch * s->T, (size_t)s->batch * c->n_head * s->T * s->T, n);
    size_t L = (size_t)l;
    lay y = {s->x_in + L * n[0], s->rms1 + L * n[1], s->xn1 + L * n[2], s->q + L * n[3], s->k + L * n[4],
             s->v + L * n[5], s->P + L * n[6], s->att + L * n[7], s->x_mid + L * n[8], s->rms2 + L * n[9],
             s->xn2 + L * n[10], s->g + L * n[11], s->u + L * n[12], s->h + L * n[13], NULL};
    y.x_out = l + 1 < c->n_layer ? s->x_in + (L + 1) * n[0] : s->x_fin;
    return y;
}

/* ---------------------------------------------------------------- attention */

static qs_lt_attn attn_of(const qs_llm_cfg *c, const lay *a, const qs_llm_train_state *s, int B, int T)
{
    qs_lt_attn x = {B, T, c->n_head, c->n_kv_head, c->head_dim, a->q, a->k, a->v, a->P, a->att,
                    s->datt, s->dq, s->dk, s->dv};
    return x;
}

/* ---------------------------------------------------------------- layers */

static void layer_fwd(const qs_llm_model *m, qs_llm_train_state *s, int l, int B, int T)
{
    const qs_llm_cfg *c = &m->c;
    const qs_llm_layer *L = &m->L[l];
    const int d = c->dim, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd, F = c->ffn, R = B * T;
    lay a = layer_of(s, l);
    qs_lt_rmsnorm(a.xn1, a.rms1, a.x_in, L->attn_norm, R, d, c->eps);
    linear(s, a.q, a.xn1, L->wq, R, d, qd);
    linear(s, a.k, a.xn1, L->wk, R, d, kvd);
    linear(s, a.v, a.xn1, L->wv, R, d, kvd);
    if (L->bq) add_bias(a.q, L->bq, R, qd);
    if (L->bk) add_bias(a.k, L->bk, R, kvd);
    if (L->bv) add_bias(a.v, L->bv, R, kvd);
    qs_lt_rope(a.q, R, T, c->n_head, hd, s->rcos, s->rsin, c->rope_neox, 1.0f);
    qs_lt_rope(a.k, R, T, c->n_kv_head, hd, s->rcos, s->rsin, c->rope_neox, 1.0f);
    double t0 = qs_now_s();
    qs_lt_attn at = attn_of(c, &a, s, B, T);
    qs_llm_train_attn_fwd(&at, qs_llm_threads());
    tick(s, QS_LT_ATTN, t0);
    linear(s, s->dxn, a.att, L->wo, R, qd, d);
    qs_lt_add(a.x_mid, a.x_in, s->dxn, (size_t)R * d);
    qs_lt_rmsnorm(a.xn2, a.rms2, a.x_mid, L->ffn_norm, R, d, c->eps);
    linear(s, a.g, a.xn2, L->w_gate, R, d, F);
    linear(s, a.u, a.xn2, L->w_up, R, d, F);
    qs_lt_swiglu(a.h, a.g, a.u, (size_t)R * F);
    linear(s, s->dxn, a.h, L->w_down, R, F, d);
    qs_lt_add(a.x_out, a.x_mid, s->dxn, (size_t)R * d);
}

/* s->dx holds dLoss/d(layer output); on return dLoss/d(layer input).  Weight gradients add into G. */
static int layer_back(const qs_llm_model *m, qs_llm_train_state *s, int l, int B, int T, qs_llm_layer *G, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    const qs_llm_layer *L = &m->L[l];
    const int d = c->dim, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd, F = c->ffn, R = B * T;
    lay a = layer_of(s, l);
    /* FFN: x_out = x_mid + W_down (silu(W_gate xn2) * W_up xn2) */
    linear_dx(s, s->dh, s->dx, L->w_down, R, F, d, 0.0f);
    linear_dw(s, G->w_down, s->dx, a.h, R, F, d);
    qs_lt_swiglu_back(s->dg, s->du, s->dh, a.g, a.u, (size_t)R * F);
    linear_dw(s, G->w_gate, s->dg, a.xn2, R, d, F);
    linear_dw(s, G->w_up, s->du, a.xn2, R, d, F);
    linear_dx(s, s->dxn, s->dg, L->w_gate, R, d, F, 0.0f);
    linear_dx(s, s->dxn, s->du, L->w_up, R, d, F, 1.0f);
    qs_lt_rmsnorm_back(s->dx, G->ffn_norm, s->dxn, a.x_mid, a.rms2, L->ffn_norm, R, d);
    /* attention: x_mid = x_in + W_o attn(rope(W_q xn1 + bq), rope(W_k xn1 + bk), W_v xn1 + bv) */
    linear_dx(s, s->datt, s->dx, L->wo, R, qd, d, 0.0f);
    linear_dw(s, G->wo, s->dx, a.att, R, qd, d);
    double t0 = qs_now_s();
    qs_lt_attn at = attn_of(c, &a, s, B, T);
    if (qs_llm_train_attn_back(&at, qs_llm_threads(), e)) return -1;
    tick(s, QS_LT_ATTN, t0);
    qs_lt_rope(s->dq, R, T, c->n_head, hd, s->rcos, s->rsin, c->rope_neox, -1.0f);
    qs_lt_rope(s->dk, R, T, c->n_kv_head, hd, s->rcos, s->rsin, c->rope_neox, -1.0f);
    if (G->bq) {
        bias_grad(G->bq, s->dq, R, qd);
        bias_grad(G->bk, s->dk, R, kvd);
        bias_grad(G->bv, s->dv, R, kvd);
    }
    linear_dw(s, G->wq, s->dq, a.xn1, R, d, qd);
    linear_dw(s, G->wk, s->dk, a.xn1, R, d, kvd);
    linear_dw(s, G->wv, s->dv, a.xn1, R, d, kvd);
    linear_dx(s, s->dxn, s->dq, L->wq, R, d, qd, 0.0f);
    linear_dx(s, s->dxn, s->dk, L->wk, R, d, kvd, 1.0f);
    linear_dx(s, s->dxn, s->dv, L->wv, R, d, kvd, 1.0f);
    qs_lt_rmsnorm_back(s->dx, G->attn_norm, s->dxn, a.x_in, a.rms1, L->attn_norm, R, d);
    return 0;
}

/* ---------------------------------------------------------------- loss */

/* Final norm, logits, mean cross-entropy; with want_grad the logits become dLoss/dlogits. */
static double head_loss(const qs_llm_model *m, qs_llm_train_state *s, const int32_t *tokens, int B, int T, int want_grad)
{
    const int d = m->c.dim, V = m->c.vocab, R = B * T;
    qs_lt_rmsnorm(s->hn, s->rmsf, s->x_fin, m->out_norm, R, d, m->c.eps);
    s->in_head = 1;
    linear(s, s->logits, s->hn, m->output, R, d, V);
    s->in_head = 0;
    double t0 = qs_now_s(), total = qs_lt_xent(s->logits, tokens, B, T, V, want_grad);
    tick(s, QS_LT_HEAD, t0);
    return total / R;
}

/* A quantization failure met in a GEMM (the pass ran on, unquantized, after it) fails the call. */
static int quant_status(qs_llm_train_state *s, qs_err *e)
{
    if (!s->failed) return 0;
    s->failed = 0;
    return qs_fail(e, "training recipe %s: %.500s", s->rc->name, s->qerr.msg);
}

int qs_llm_loss_grad(const qs_llm_model *m, qs_llm_train_state *s, const int32_t *tokens, int batch, int T,
                     double *loss, qs_llm_grads *g, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    if (memcmp(c, &s->c, sizeof *c))
        return qs_fail(e, "training state was made for another model shape");
    if (batch <= 0 || T <= 0 || batch > s->batch || T > s->T)
        return qs_fail(e, "training batch %d x %d does not fit the state (%d x %d)", batch, T, s->batch, s->T);
    if (g && (memcmp(&g->c, c, sizeof *c) || (g->output == g->tok_embd) != (m->output == m->tok_embd) ||
              !g->L[0].bq != !m->L[0].bq))
        return qs_fail(e, "gradients are shaped for another model (shape, tied output or biases differ)");
    for (size_t i = 0; i < (size_t)batch * (T + 1); i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab)
            return qs_fail(e, "token id %d out of range (vocabulary %d)", tokens[i], c->vocab);
    const int d = c->dim, R = batch * T;
    const double t0 = qs_now_s();
    s->failed = 0;
    float *x0 = s->x_in;
    for (int r = 0; r < R; r++)
        memcpy(x0 + (size_t)r * d, m->tok_embd + (size_t)tokens[(r / T) * (T + 1) + r % T] * d, (size_t)d * sizeof(float));
    for (int l = 0; l < c->n_layer; l++) layer_fwd(m, s, l, batch, T);
    *loss = head_loss(m, s, tokens, batch, T, g != NULL);
    if (!g) {
        s->total += qs_now_s() - t0;
        return quant_status(s, e);
    }
    s->in_head = 1;
    linear_dw(s, g->output, s->logits, s->hn, R, d, c->vocab);
    linear_dx(s, s->dxn, s->logits, m->output, R, d, c->vocab, 0.0f);
    s->in_head = 0;
    memset(s->dx, 0, (size_t)R * d * sizeof(float));
    qs_lt_rmsnorm_back(s->dx, g->out_norm, s->dxn, s->x_fin, s->rmsf, m->out_norm, R, d);
    for (int l = c->n_layer - 1; l >= 0; l--)
        if (layer_back(m, s, l, batch, T, &g->L[l], e)) return -1;
    for (int r = 0; r < R; r++) {
        float *ge = g->tok_embd + (size_t)tokens[(r / T) * (T + 1) + r % T] * d;
        for (int i = 0; i < d; i++) ge[i] += s->dx[(size_t)r * d + i];
    }
    s->total += qs_now_s() - t0;
    return quant_status(s, e);
}
