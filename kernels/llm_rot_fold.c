/*
** The weights' half of rot= and rht= (llm_rot.h): norms folded, the residual stream rotated, V/O per
** head, W_down's input side for the online Hadamard, and the RHT of every linear weight.  Every
** rotation is computed in double and rounded to float once.
*/
#include "llm_rot.h"
#include "llm_gemma.h"
#include "llm_recipe.h"
#include "llm_rows.h"
#include "pool.h"
#include "sr.h"

#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* x <- x Q for one of the orthogonal matrices of a transform: a Hadamard matrix, or a dense Q kept as
** its columns (qt[j] = column j, so (x Q)_j = qt[j] . x). */
typedef struct rotor {
    int n;
    qs_hadamard h;
    double *qt;
} rotor;

/* The Q of a Gaussian matrix's QR with R's diagonal positive (Haar-distributed): Gram-Schmidt with
** re-orthogonalisation (CGS2) on the columns. */
static int random_orth(rotor *r, int n, uint64_t seed, qs_err *e)
{
    r->qt = malloc((size_t)n * n * sizeof(double));
    double *c = malloc((size_t)n * sizeof(double));
    if (!r->qt || !c) { free(c); return qs_fail(e, "out of memory for a random rotation of order %d", n); }
    for (int j = 0; j < n; j++) {
        double *v = r->qt + (size_t)j * n;
        for (int i = 0; i < n; i++) {   /* Box-Muller from two uniforms of the counter-based generator */
            const uint64_t k = 2 * ((uint64_t)j * n + i);
            double u1 = 1.0 - qs_sr_uniform(seed, k), u2 = qs_sr_uniform(seed, k + 1);
            v[i] = sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2);
        }
        for (int pass = 0; pass < 2 && j; pass++) {
            cblas_dgemv(CblasRowMajor, CblasNoTrans, j, n, 1.0, r->qt, n, v, 1, 0.0, c, 1);
            cblas_dgemv(CblasRowMajor, CblasTrans, j, n, -1.0, r->qt, n, c, 1, 1.0, v, 1);
        }
        const double nrm = cblas_dnrm2(n, v, 1);
        if (!(nrm > 0)) { free(c); return qs_fail(e, "random rotation of order %d: degenerate draw", n); }
        cblas_dscal(n, 1.0 / nrm, v, 1);
    }
    free(c);
    return 0;
}

static int rotor_init(rotor *r, qs_rot_kind k, int n, uint64_t seed, qs_err *e)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    if (k == QS_ROT_RANDOM) return random_orth(r, n, seed, e);
    return qs_hadamard_init(&r->h, n, seed, e);
}

static void rotor_free(rotor *r)
{
    qs_hadamard_free(&r->h);
    free(r->qt);
    memset(r, 0, sizeof *r);
}

static void rotor_vec(const rotor *r, double *x, double *tmp)
{
    if (!r->qt) { qs_hadamard_row(&r->h, x, tmp); return; }
    cblas_dgemv(CblasRowMajor, CblasNoTrans, r->n, r->n, 1.0, r->qt, r->n, x, 1, 0.0, tmp, 1);
    memcpy(x, tmp, (size_t)r->n * sizeof(double));
}

/* Vectors of n floats at W + a sa + b sb (a < na, b < nb), elements st apart, each x <- x Q; the a's
** in blocks on the pool. */
typedef struct rot_job {
    const rotor *r;
    float *W;
    size_t na, nb, sa, sb, st;
    atomic_int fail;
} rot_job;
#define ROT_BLOCK 64

static void rot_task(void *ctx, size_t task, int slot)
{
    (void)slot;
    rot_job *j = ctx;
    const size_t n = (size_t)j->r->n, a0 = task * ROT_BLOCK, a1 = a0 + ROT_BLOCK < j->na ? a0 + ROT_BLOCK : j->na;
    double *v = malloc(2 * n * sizeof(double));
    if (!v) { atomic_store(&j->fail, 1); return; }
    for (size_t a = a0; a < a1; a++)
        for (size_t b = 0; b < j->nb; b++) {
            float *p = j->W + a * j->sa + b * j->sb;
            for (size_t i = 0; i < n; i++) v[i] = p[i * j->st];
            rotor_vec(j->r, v, v + n);
            for (size_t i = 0; i < n; i++) p[i * j->st] = (float)v[i];
        }
    free(v);
}

static int rot_apply(const rotor *r, float *W, size_t na, size_t nb, size_t sa, size_t sb, size_t st, qs_err *e)
{
    rot_job j = {r, W, na, nb, sa, sb, st, 0};
    atomic_init(&j.fail, 0);
    qs_pool_for(qs_llm_threads(), (na + ROT_BLOCK - 1) / ROT_BLOCK, rot_task, &j);
    return atomic_load(&j.fail) ? qs_fail(e, "out of memory for a rotation of order %d", r->n) : 0;
}

/* W [rows][cols]: every row x <- x Q (Q of order cols): the input side, W Q. */
static int rot_in(const rotor *r, float *W, size_t rows, size_t cols, qs_err *e) { return rot_apply(r, W, rows, 1, cols, 0, 1, e); }
/* W [rows][cols]: every column c <- Q^T c (Q of order rows): the output side, Q^T W. */
static int rot_out(const rotor *r, float *W, size_t rows, size_t cols, qs_err *e) { return rot_apply(r, W, cols, 1, 1, 0, cols, e); }

/* rows x cols scaled column-wise by w (a norm folded into the matrix reading its output). */
static void fold_norm(float *W, size_t rows, size_t cols, float *w)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < cols; i++) W[r * cols + i] = (float)((double)W[r * cols + i] * w[i]);
}

static void copy_model(qs_llm_model *dst, const qs_llm_model *src)
{
    const qs_llm_cfg *c = &src->c;
    const size_t d = (size_t)c->dim, kv = (size_t)c->n_kv_head * c->head_dim, f = (size_t)c->ffn, qd = qs_llm_q_dim(c);
    memcpy(dst->tok_embd, src->tok_embd, (size_t)c->vocab * d * sizeof(float));
    memcpy(dst->output, src->output, (size_t)c->vocab * d * sizeof(float));
    memcpy(dst->out_norm, src->out_norm, d * sizeof(float));
    for (int l = 0; l < c->n_layer; l++) {
        const qs_llm_layer *S = &src->L[l];
        qs_llm_layer *D = &dst->L[l];
        float *const to[9] = {D->attn_norm, D->wq, D->wk, D->wv, D->wo, D->ffn_norm, D->w_gate, D->w_up, D->w_down};
        const float *const from[9] = {S->attn_norm, S->wq, S->wk, S->wv, S->wo, S->ffn_norm, S->w_gate, S->w_up, S->w_down};
        const size_t len[9] = {d, qd * d, kv * d, kv * d, d * qd, d, f * d, f * d, d * f};
        for (int i = 0; i < 9; i++) memcpy(to[i], from[i], len[i] * sizeof(float));
        if (S->q_norm) {   /* QK-norm (Qwen3): in the heads' space, which the rotation leaves alone */
            memcpy(D->q_norm, S->q_norm, (size_t)c->head_dim * sizeof(float));
            memcpy(D->k_norm, S->k_norm, (size_t)c->head_dim * sizeof(float));
        }
    }
    if (src->bias_arena) memcpy(dst->bias_arena, src->bias_arena, src->bias_len * sizeof(float));
}

/* Every RMSNorm weight into the matrices reading its output; the norms become 1. */
static void fold_norms(qs_llm_model *m)
{
    const qs_llm_cfg *c = &m->c;
    const size_t d = (size_t)c->dim, kv = (size_t)c->n_kv_head * c->head_dim, f = (size_t)c->ffn, qd = qs_llm_q_dim(c);
    for (int l = 0; l < c->n_layer; l++) {
        qs_llm_layer *L = &m->L[l];
        fold_norm(L->wq, qd, d, L->attn_norm);
        fold_norm(L->wk, kv, d, L->attn_norm);
        fold_norm(L->wv, kv, d, L->attn_norm);
        fold_norm(L->w_gate, f, d, L->ffn_norm);
        fold_norm(L->w_up, f, d, L->ffn_norm);
        for (size_t i = 0; i < d; i++) L->attn_norm[i] = L->ffn_norm[i] = 1.0f;
    }
    fold_norm(m->output, (size_t)c->vocab, d, m->out_norm);
    for (size_t i = 0; i < d; i++) m->out_norm[i] = 1.0f;
}

/* The residual rotation Q (R), the per-head rotation (Rh, n = 0: none) and W_down's input side for
** the online Hadamard (down, n = 0: none). */
static int rotate(qs_llm_model *m, const rotor *R, const rotor *Rh, const qs_hadamard *down, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    const size_t d = (size_t)c->dim, hd = (size_t)c->head_dim, kv = (size_t)c->n_kv_head * hd, f = (size_t)c->ffn;
    const size_t qd = qs_llm_q_dim(c);
    if (rot_in(R, m->tok_embd, (size_t)c->vocab, d, e) || rot_in(R, m->output, (size_t)c->vocab, d, e)) return -1;
    rotor H = {0};
    if (down->n) { H.n = down->n; H.h = *down; }
    for (int l = 0; l < c->n_layer; l++) {
        qs_llm_layer *L = &m->L[l];
        if (rot_in(R, L->wq, qd, d, e) || rot_in(R, L->wk, kv, d, e) || rot_in(R, L->wv, kv, d, e) ||
            rot_in(R, L->w_gate, f, d, e) || rot_in(R, L->w_up, f, d, e) || rot_out(R, L->wo, d, qd, e) ||
            rot_out(R, L->w_down, d, f, e))
            return -1;
        if (Rh->n) {   /* V's rows of each KV head (output side), o_proj's columns of each query head (input side) */
            if (rot_apply(Rh, L->wv, d, (size_t)c->n_kv_head, 1, hd * d, d, e) ||
                rot_apply(Rh, L->wo, d, (size_t)c->n_head, qd, hd, 1, e) ||
                (L->bv && rot_apply(Rh, L->bv, 1, (size_t)c->n_kv_head, 0, hd, 1, e)))
                return -1;
        }
        if (H.n && rot_in(&H, L->w_down, d, f, e)) return -1;
    }
    return 0;
}

static int rht_weights(qs_llm_model *m, uint64_t seed)
{
    const qs_llm_cfg *c = &m->c;
    const size_t d = (size_t)c->dim, kv = (size_t)c->n_kv_head * c->head_dim, f = (size_t)c->ffn, qd = qs_llm_q_dim(c);
    for (int l = 0; l < c->n_layer; l++) {
        qs_llm_layer *L = &m->L[l];
        qs_llm_rht16(L->wq, qd, d, 1, seed, 0);
        qs_llm_rht16(L->wk, kv, d, 1, seed, 0);
        qs_llm_rht16(L->wv, kv, d, 1, seed, 0);
        qs_llm_rht16(L->wo, d, qd, 1, seed, 0);
        qs_llm_rht16(L->w_gate, f, d, 1, seed, 0);
        qs_llm_rht16(L->w_up, f, d, 1, seed, 0);
        qs_llm_rht16(L->w_down, d, f, 1, seed, 0);
    }
    qs_llm_rht16(m->output, (size_t)c->vocab, d, 1, seed, 0);
    return 0;
}

/* The rotors of x for m's shape (refused before any work when an order has no construction). */
static int make_rotors(const qs_llm_cfg *c, const qs_llm_xspec *x, rotor *R, rotor *Rh, qs_hadamard *down, qs_err *e)
{
    const uint64_t s = x->rot_seed;
    if (rotor_init(R, x->rot, c->dim, s, e)) { qs_err_prefix(e, "rot: residual width"); return -1; }
    if (x->vo && rotor_init(Rh, x->rot, c->head_dim, x->rot == QS_ROT_RANDOM || s ? s ^ 0x68656164ULL : 0, e)) {
        qs_err_prefix(e, "rot: head dimension (vo=0 leaves V/O unrotated)");
        return -1;
    }
    if (x->down && qs_hadamard_init(down, c->ffn, 0, e)) {
        qs_err_prefix(e, "rot: FFN width (down=0 drops the online Hadamard)");
        return -1;
    }
    return 0;
}

int qs_llm_transform(qs_llm_model *dst, const qs_llm_model *src, const qs_llm_xspec *x, qs_llm_online **on, qs_err *e)
{
    const qs_llm_cfg *c = &src->c;
    *on = NULL;
    memset(dst, 0, sizeof *dst);
    if (c->n_expert || qs_llm_gemma_block(c))   /* the routers and experts, or Gemma's sandwich norms, not folded */
        return qs_fail(e, "%s: rot=/rht= are not supported on %s", c->arch[0] ? c->arch : "model",
                       c->n_expert ? "mixture-of-experts layers" : "Gemma's block (sandwich norms)");
    if (x->rht && (c->dim % 16 || qs_llm_q_dim(c) % 16 || c->ffn % 16))
        return qs_fail(e, "rht=16: a linear layer's input width (dim %d, heads x head_dim %zu, ffn %d) is not a multiple "
                          "of 16", c->dim, qs_llm_q_dim(c), c->ffn);
    rotor R = {0}, Rh = {0};
    qs_llm_online *o = calloc(1, sizeof *o);
    if (!o) return qs_fail(e, "out of memory");
    if ((x->rot && make_rotors(c, x, &R, &Rh, &o->down, e)) || qs_llm_alloc(dst, c, 0, e) ||
        (src->bias_arena && qs_llm_alloc_bias(dst, e)))
        goto fail;
    copy_model(dst, src);
    if (x->rot) {
        fold_norms(dst);
        if (rotate(dst, &R, &Rh, &o->down, e)) goto fail;
    }
    if (x->rht) {
        rht_weights(dst, x->rht_seed);
        o->rht = x->rht;
        o->rht_seed = x->rht_seed;
    }
    rotor_free(&R);
    rotor_free(&Rh);
    *on = o;
    return 0;
fail:
    rotor_free(&R);
    rotor_free(&Rh);
    qs_llm_online_free(o);
    qs_llm_free(dst);
    return -1;
}

int qs_llm_transform_quantize(qs_llm_model *dst, const qs_llm_model *src, const qs_apply *w, int scaled, qs_err *e)
{
    if (qs_llm_quantize_weights(dst, w, scaled, e)) return -1;
    if (src->output != src->tok_embd) return 0;
    qs_llm_model emb = *dst;   /* no layers, the embedding as its head: quantize_weights rounds it alone */
    emb.c.n_layer = 0;
    emb.output = dst->tok_embd;
    return qs_llm_quantize_weights(&emb, w, scaled, e);
}
