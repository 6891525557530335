/*
** Training forward with saved activations and the backward pass of the Llama model (see llm_train.h).
** The forward mirrors qs_llm_forward without numerics (same float operations except that every
** product is one SGEMM), so its loss matches the inference pass to FP32 rounding.
*/
#include "llm_train.h"
#include "llm_gemma.h"
#include "llm_fakeq_par.h"
#include "llm_rows.h"
#include "llm_train_attn.h"
#include "llm_train_rows.h"
#include "qs_clock.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
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
    qs_llm_recipe *rcs;        /* per linear (set_recipes): entry l*7+k, n_layer*7 the head; NULL: rc for all */
    const qs_llm_recipe *cur;  /* the running GEMM's recipe (rc, or its linear's entry of rcs) */
    const char *fail_name;     /* the recipe whose quantization failed */
    float *qa, *qb;            /* the two quantized operands of one GEMM */
    uint64_t calls;            /* GEMM calls so far: SR seeds and RHT signs */
    int in_head;               /* the GEMM is the output projection (quantized iff rc->head) */
    int failed;
    qs_err qerr;
    qs_llm_operand_tap tap;    /* sees every quantized operand (cross-checks), or NULL */
    void *tap_ctx;
    qs_llm_opstat *opst;       /* (n_layer + 1) x QS_OP_COUNT counts under a recipe; row n_layer: the head */
    float *qt;                 /* an RHT operand's transformed input, for its counts (recipes with RHT) */
    int layer;                 /* the layer whose GEMMs run (n_layer: the head) */
    /* a shared operand (the Q, K, V projections' input, the gate and up projections'): qa / qb still hold
    ** the quantization of sh_src (sh_op, rows x cols) and sh_st what counting it added; share: the next
    ** GEMM's caller says its FP32 input is unchanged since the previous GEMM's */
    const float *sh_src[2];
    const qs_llm_recipe *sh_rc[2];   /* the recipe that quantized it */
    size_t sh_rows[2], sh_cols[2];
    int sh_op[2], share;
    qs_llm_opstat sh_st[2];
    /* the forward's quantized weights kept for the input gradient (qs_llm_recipe_weight_reuse): entry
    ** l*7+k for layer l's weight k (w_index's order), n_layer*7 the output head's */
    float *wkeep;
    size_t *wk_off;            /* n_layer*7 + 2 offsets into wkeep (the last: its size) */
    qs_llm_opstat *wk_st;      /* what quantizing each added to its counts */
    uint64_t *wk_pass;         /* the pass that quantized each (0: none) */
    uint64_t pass;             /* qs_llm_loss_grad calls since set_recipe, from 1 */
    /* per-tensor-scale maxima found for two uses of one matrix at once (qs_llm_absmax2, known_amax):
    ** X entries (saved activations, unchanged for the pass) and dY entries (backward scratch, trusted
    ** only when the caller says same_dy) */
    struct am_entry { const float *src; size_t rows, cols; float plain, rht; int dy; uint64_t seed; } *am;
    int am_n, am_cap;
    int same_dy;   /* the next GEMM's dY is unchanged since this layer's other GEMM on it */
    /* per-site checks (qs_llm_nonfinite_site): the running call's model and gradients, the first site */
    const qs_llm_model *cm;
    const qs_llm_grads *cg;
    int check;
    char site[200];
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
    if (qs_llm_gemma_refuse(c, "training", e) || qs_llm_cfg_core_only(c, T, "training", e)) return NULL;
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

static void keep_free(qs_llm_train_state *s)
{
    free(s->am);
    s->am = NULL;
    s->am_n = s->am_cap = 0;
    free(s->wkeep);
    free(s->wk_off);
    free(s->wk_st);
    free(s->wk_pass);
    s->wkeep = NULL;
    s->wk_off = NULL;
    s->wk_st = NULL;
    s->wk_pass = NULL;
}

/* The kept quantized weights: n_layer*(2*q*dim + 2*kv*dim + 3*ffn*dim) floats, plus vocab*dim with a
** quantized head (at most P). */
static int keep_new(qs_llm_train_state *s, int head, const qs_llm_recipe *per)
{
    const qs_llm_cfg *c = &s->c;
    size_t d = (size_t)c->dim, q = qs_llm_q_dim(c), kv = (size_t)c->n_kv_head * c->head_dim, F = (size_t)c->ffn;
    const size_t sz[7] = {q * d, kv * d, kv * d, d * q, F * d, F * d, d * F};
    size_t n = (size_t)c->n_layer * 7 + 1;
    s->wk_off = malloc((n + 1) * sizeof *s->wk_off);
    s->wk_st = calloc(n, sizeof *s->wk_st);
    s->wk_pass = calloc(n, sizeof *s->wk_pass);
    if (!s->wk_off || !s->wk_st || !s->wk_pass) return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        s->wk_off[i] = o;
        size_t k = i + 1 < n ? sz[i % 7] : head ? (size_t)c->vocab * d : 0;
        o += per && !qs_llm_recipe_weight_reuse(&per[i]) ? 0 : k;   /* per linear: only those that reuse */
    }
    s->wk_off[n] = o;
    return (s->wkeep = malloc(o * sizeof *s->wkeep)) ? 0 : -1;
}

size_t qs_llm_train_state_keep_floats(const qs_llm_train_state *s)
{
    return s->wkeep ? s->wk_off[(size_t)s->c.n_layer * 7 + 1] : 0;
}

void qs_llm_train_state_free(qs_llm_train_state *s)
{
    if (!s) return;
    free(s->qa);
    free(s->qb);
    free(s->qt);
    free(s->opst);
    free(s->rcs);
    keep_free(s);
    free(s->buf);
    free(s);
}

int qs_llm_grads_new(qs_llm_grads *g, const qs_llm_model *m, qs_err *e)
{
    if (qs_llm_cfg_core_only(&m->c, 0, "training", e) || qs_llm_alloc(g, &m->c, m->output == m->tok_embd, e)) return -1;
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

/* set_recipe (per NULL: r for every linear) and set_recipes (per: n_layer*7 + 1 recipes, r = per[0]). */
static int set_recipes(qs_llm_train_state *s, const qs_llm_recipe *r, const qs_llm_recipe *per, size_t np, qs_err *e)
{
    free(s->qa);
    free(s->qb);
    free(s->qt);
    free(s->opst);
    free(s->rcs);
    keep_free(s);
    s->qa = s->qb = s->qt = NULL;
    s->opst = NULL;
    s->rc = s->cur = NULL;
    s->rcs = NULL;
    s->calls = 0;
    s->pass = 0;
    s->sh_src[0] = s->sh_src[1] = NULL;
    if (!r) return 0;
    const qs_llm_cfg *c = &s->c;
    int rht = 0, reuse = 0;
    for (size_t k = 0; k < (per ? np : 1); k++) {
        const qs_llm_recipe *x = per ? &per[k] : r;
        if (qs_llm_recipe_check(x, e)) return -1;
        for (int i = 0; i < QS_OP_COUNT; i++) rht |= x->op[i].on && x->op[i].rht;
        reuse |= qs_llm_recipe_weight_reuse(x);
    }
    int head = per ? per[np - 1].head : r->head;
    size_t R = (size_t)s->batch * s->T, w = (size_t)c->dim, q = qs_llm_q_dim(c);
    size_t big = (size_t)c->vocab > w ? (size_t)c->vocab : w;
    if (q > big) big = q;
    if ((size_t)c->ffn > big) big = (size_t)c->ffn;
    size_t n = (R > w ? R : w) * big;   /* an activation (R x big) or a weight (big x dim, or dim x big) */
    s->qa = malloc(n * sizeof(float));
    s->qb = malloc(n * sizeof(float));
    s->qt = rht ? malloc(n * sizeof(float)) : NULL;
    s->opst = calloc(((size_t)c->n_layer + 1) * QS_OP_COUNT, sizeof *s->opst);
    s->rcs = per ? malloc(np * sizeof *s->rcs) : NULL;
    if (!s->qa || !s->qb || (rht && !s->qt) || !s->opst || (per && !s->rcs)) {
        free(s->qa); free(s->qb); free(s->qt); free(s->opst); free(s->rcs);
        s->qa = s->qb = s->qt = NULL;
        s->opst = NULL;
        s->rcs = NULL;
        return qs_fail(e, "out of memory for the quantized operands (%zu floats)", (2 + rht) * n);
    }
    s->am_cap = 4 * c->n_layer + 16;   /* 4 inputs per layer, the head's, 7 backward scratch matrices */
    if (!(s->am = malloc((size_t)s->am_cap * sizeof *s->am))) s->am_cap = 0;   /* then found each time */
    if (reuse && keep_new(s, head, per)) {
        size_t kn = s->wk_off ? s->wk_off[(size_t)c->n_layer * 7 + 1] : 0;
        free(s->qa); free(s->qb); free(s->qt); free(s->opst); free(s->rcs);
        s->qa = s->qb = s->qt = NULL;
        s->opst = NULL;
        s->rcs = NULL;
        keep_free(s);
        return qs_fail(e, "out of memory for the kept quantized weights (%zu floats)", kn);
    }
    if (per) memcpy(s->rcs, per, np * sizeof *s->rcs);
    s->rc_copy = *r;
    s->rc = &s->rc_copy;
    return 0;
}

int qs_llm_train_state_set_recipe(qs_llm_train_state *s, const qs_llm_recipe *r, qs_err *e)
{
    return set_recipes(s, r, NULL, 0, e);
}

size_t qs_llm_train_recipe_count(const qs_llm_cfg *c) { return (size_t)c->n_layer * QS_LLM_TRAIN_NLIN + 1; }

int qs_llm_train_state_set_recipes(qs_llm_train_state *s, const qs_llm_recipe *per, size_t n, qs_err *e)
{
    if (!per) return set_recipes(s, NULL, NULL, 0, e);
    if (n != qs_llm_train_recipe_count(&s->c)) {
        set_recipes(s, NULL, NULL, 0, e);
        return qs_fail(e, "%zu per-linear recipes for a model of %d layers (it needs %zu: 7 per layer and the head)", n,
                       s->c.n_layer, qs_llm_train_recipe_count(&s->c));
    }
    return set_recipes(s, &per[0], per, n, e);
}

void qs_llm_train_state_set_tap(qs_llm_train_state *s, qs_llm_operand_tap tap, void *ctx)
{
    s->tap = tap;
    s->tap_ctx = ctx;
}

static int w_index(const qs_llm_layer *L, const float *p);

static void stat_add(qs_llm_opstat *st, const qs_llm_opstat *d)
{
    st->n += d->n;
    st->underflow += d->underflow;
    st->clipped += d->clipped;
    st->nonfinite += d->nonfinite;
}

/* The kept-weight entry of the GEMM's weight w (rows x cols), or -1 (no reuse, or not a layer weight). */
static long keep_entry(const qs_llm_train_state *s, const void *w, size_t rows, size_t cols)
{
    if (!s->wkeep || !s->cm) return -1;
    long i = -1;
    if (s->layer >= s->c.n_layer) i = w == s->cm->output ? (long)s->c.n_layer * 7 : -1;
    else {
        int k = w_index(&s->cm->L[s->layer], w);
        if (k >= 0) i = (long)s->layer * 7 + k;
    }
    return i >= 0 && s->wk_off[i + 1] - s->wk_off[i] == rows * cols ? i : -1;
}

/* A slot whose format finds a per-tensor amax itself, of the operand as it is or transformed down its
** columns (what qs_llm_absmax2 gives). */
static int ts_slot(const qs_llm_slot *p, int op)
{
    return p->on && p->a.f->has_tensor_scale && !(p->a.o.tensor_scale > 0) && (!p->rht || qs_llm_operand_axis(op) == 0);
}

/* The tensor scale's amax of the operand op of x when known or worth finding for two uses at once, else 0
** (the quantizer finds it).  The two uses: fwd.x and wgrad.x of one input X (a saved activation: found
** in the forward, kept for the pass), dgrad.dy and wgrad.dy of one dY (either order within a layer's
** backward; kept only while the layer code says same_dy).  Each maximum is of the matrix as it is and
** after the run's RHT down its columns (the wgrad slots' axis), in one read. */
static float known_amax(qs_llm_train_state *s, int op, const float *x, size_t rows, size_t cols, int same_dy)
{
    static const int pair[QS_OP_COUNT] = {QS_OP_WGRAD_X, -1, QS_OP_WGRAD_DY, -1, QS_OP_DGRAD_DY, QS_OP_FWD_X};
    const qs_llm_recipe *r = s->cur;
    uint64_t seed = qs_llm_recipe_rht_seed(r);
    int other = pair[op], dy = op == QS_OP_DGRAD_DY || op == QS_OP_WGRAD_DY;
    const qs_llm_slot *sl = &r->op[op], *so = other >= 0 ? &r->op[other] : NULL;
    if (!s->am || !so || !ts_slot(sl, op)) return 0;
    for (int i = 0; i < s->am_n; i++) {
        struct am_entry *h = &s->am[i];
        if (h->src == x && h->dy == dy && h->rows == rows && h->cols == cols && (!dy || same_dy) &&
            (!sl->rht || h->seed == seed))
            return sl->rht ? h->rht : h->plain;
    }
    if (!ts_slot(so, other) || op == QS_OP_WGRAD_X || (op == QS_OP_FWD_X && !s->cg))
        return 0;   /* no second use (X's comes after fwd.x, in a pass with gradients) */
    float p, h;
    if (qs_llm_absmax2(x, rows, cols, seed, qs_llm_threads(), &p, &h)) return 0;
    int k = 0;
    while (k < s->am_n && !(s->am[k].src == x && s->am[k].dy == dy)) k++;
    if (k == s->am_n && s->am_n < s->am_cap) s->am_n++;
    if (k < s->am_n) s->am[k] = (struct am_entry){x, rows, cols, p, h, dy, seed};
    return sl->rht ? h : p;
}

/* Per-linear recipes: the entry of the GEMM's linear layer (key: its weight, or its weight gradient
** when opb is wgrad.x), or NULL (not a linear weight: no quantization). */
static const qs_llm_recipe *linear_recipe(const qs_llm_train_state *s, const void *key, int opb)
{
    if (s->layer >= s->c.n_layer) return &s->rcs[(size_t)s->c.n_layer * QS_LLM_TRAIN_NLIN];
    const qs_llm_model *m = opb == QS_OP_WGRAD_X ? s->cg : s->cm;
    int k = m ? w_index(&m->L[s->layer], key) : -1;
    return k < 0 ? NULL : &s->rcs[(size_t)s->layer * QS_LLM_TRAIN_NLIN + k];
}

/* Two recipes' slot op gives the same quantization of a matrix (for sharing one across GEMMs of
** different linears): the same format, options and flags, and the same RHT signs. */
static int same_slot(const qs_llm_recipe *a, const qs_llm_recipe *b, int op)
{
    const qs_llm_slot *p = &a->op[op], *q = &b->op[op];
    return p->on == q->on && p->sr == q->sr && p->rht == q->rht && p->tile2d == q->tile2d &&
           qs_llm_slot_same_apply(&p->a, &q->a) && p->a.axis == q->a.axis &&
           (!p->rht || qs_llm_recipe_rht_seed(a) == qs_llm_recipe_rht_seed(b));
}

/* One operand into q (qa: i 0, qb: 1); *out: where it is.  Kept instead of quantized again:
** - shared: when the caller says the input is unchanged since the previous GEMM and q still holds the
**   same slot's quantization of the same matrix; a slot without stochastic rounding draws nothing from
**   the call's seed (the RHT signs are the run's: llm_recipe.h), so quantizing again would give the
**   same bits;
** - a weight (kw >= 0, qs_llm_recipe_weight_reuse): fwd.w quantizes into the kept copy, dgrad.w of the
**   same pass reads it (the same values: transpose-invariant, no SR, no RHT).
** Either way the operand's counts add to *st once per GEMM, as if it had been quantized again. */
static int operand(qs_llm_train_state *s, int i, int share, int same_dy, int op, const float *x, size_t rows,
                   size_t cols, uint64_t call, float *q, long kw, const float **out, qs_llm_opstat *st)
{
    const qs_llm_slot *sl = &s->cur->op[op];
    *out = q;
    if (kw >= 0 && op == QS_OP_DGRAD_W && s->wk_pass[kw] == s->pass) {
        stat_add(st, &s->wk_st[kw]);
        *out = s->wkeep + s->wk_off[kw];
        return 0;
    }
    if (share && sl->on && !sl->sr && s->sh_src[i] == x && s->sh_op[i] == op && s->sh_rows[i] == rows &&
        s->sh_cols[i] == cols && (s->sh_rc[i] == s->cur || same_slot(s->sh_rc[i], s->cur, op))) {
        stat_add(st, &s->sh_st[i]);
        return 0;
    }
    s->sh_src[i] = NULL;
    int keep = kw >= 0 && op == QS_OP_FWD_W;
    if (keep) {
        q = s->wkeep + s->wk_off[kw];
        s->wk_pass[kw] = 0;
        *out = q;
    }
    qs_llm_opstat before = *st;
    float am = known_amax(s, op, x, rows, cols, same_dy);
    if (qs_llm_recipe_operand_am(s->cur, op, x, rows, cols, call, am, q, s->qt, st, &s->qerr)) return -1;
    qs_llm_opstat d = {st->n - before.n, st->underflow - before.underflow, st->clipped - before.clipped,
                       st->nonfinite - before.nonfinite};
    if (keep) {
        s->wk_st[kw] = d;
        s->wk_pass[kw] = s->pass;
        return 0;
    }
    s->sh_st[i] = d;
    s->sh_src[i] = x;
    s->sh_rc[i] = s->cur;
    s->sh_op[i] = op;
    s->sh_rows[i] = rows;
    s->sh_cols[i] = cols;
    return 0;
}

/* Operands a (ra x ca) and b (rb x cb) of one GEMM as the recipe wants them: the originals when both
** slots are off (the FP32 path, bit for bit), else quantized copies in the state's scratch (or the
** kept weights).  key: the GEMM's weight (forward, input gradient) or weight gradient (weight
** gradient), for the tap. */
static void operands(qs_llm_train_state *s, const void *key, int opa, const float **a, size_t ra, size_t ca, int opb,
                     const float **b, size_t rb, size_t cb)
{
    const qs_llm_recipe *r = s->rcs ? linear_recipe(s, key, opb) : s->rc;
    int share = s->share, same_dy = s->same_dy;
    s->share = s->same_dy = 0;
    if (!r || (s->in_head && !r->head) || s->failed || (!r->op[opa].on && !r->op[opb].on)) return;
    s->cur = r;
    uint64_t call = s->calls++;
    qs_llm_opstat *st = s->opst + (size_t)s->layer * QS_OP_COUNT;
    long kw = opb == QS_OP_WGRAD_X ? -1 : keep_entry(s, key, rb, cb);
    const float *qa, *qb;
    if (operand(s, 0, share, same_dy, opa, *a, ra, ca, call, s->qa, -1, &qa, st + opa) ||
        operand(s, 1, share, same_dy, opb, *b, rb, cb, call, s->qb, kw, &qb, st + opb)) {
        s->sh_src[0] = s->sh_src[1] = NULL;
        s->failed = 1;
        s->fail_name = r->name;
        return;
    }
    if (s->tap) {
        s->tap(s->tap_ctx, key, opa, *a, qa, ra, ca);
        s->tap(s->tap_ctx, key, opb, *b, qb, rb, cb);
    }
    *a = qa;
    *b = qb;
}

static void check_gemm(qs_llm_train_state *s, int kind, const float *a0, const float *a, size_t na, const float *b0,
                       const float *b, size_t nb, const float *w, const float *y, size_t ny);
static void check_at(qs_llm_train_state *s, const float *p, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
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
    const float *x0 = x, *W0 = W;
    double t0 = qs_now_s();
    operands(s, W, QS_OP_FWD_X, &x, R, in, QS_OP_FWD_W, &W, out, in);
    t0 = tick(s, QS_LT_QUANT, t0);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, out, in, 1.0f, x, in, W, in, 0.0f, y, out);
    tick(s, QS_LT_FWD_GEMM, t0);
    if (s->check) check_gemm(s, 0, x0, x, (size_t)R * in, W0, W, (size_t)out * in, W0, y, (size_t)R * out);
}
/* dx[R][in] (+)= dy[R][out] . W[out][in] */
static void linear_dx(qs_llm_train_state *s, float *dx, const float *dy, const float *W, int R, int in, int out,
                      float beta)
{
    const float *dy0 = dy, *W0 = W;
    double t0 = qs_now_s();
    operands(s, W, QS_OP_DGRAD_DY, &dy, R, out, QS_OP_DGRAD_W, &W, out, in);
    t0 = tick(s, QS_LT_QUANT, t0);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, in, out, 1.0f, dy, out, W, in, beta, dx, in);
    tick(s, QS_LT_BWD_GEMM, t0);
    if (s->check) check_gemm(s, 1, dy0, dy, (size_t)R * out, W0, W, (size_t)out * in, W0, dx, (size_t)R * in);
}
/* dW[out][in] += dy[R][out]^T . x[R][in] */
static void linear_dw(qs_llm_train_state *s, float *dW, const float *dy, const float *x, int R, int in, int out)
{
    const float *dy0 = dy, *x0 = x;
    double t0 = qs_now_s();
    operands(s, dW, QS_OP_WGRAD_DY, &dy, R, out, QS_OP_WGRAD_X, &x, R, in);
    t0 = tick(s, QS_LT_QUANT, t0);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, R, 1.0f, dy, out, x, in, 1.0f, dW, in);
    tick(s, QS_LT_BWD_GEMM, t0);
    if (s->check) check_gemm(s, 2, dy0, dy, (size_t)R * out, x0, x, (size_t)R * in, dW, dW, (size_t)out * in);
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
    s->share = 1;   /* xn1 as the Q projection's (the next GEMMs' inputs are unchanged since) */
    linear(s, a.k, a.xn1, L->wk, R, d, kvd);
    s->share = 1;
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
    s->share = 1;
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
    /* same_dy: the dY of the GEMM is unchanged since this layer's other GEMM on it (known_amax) */
    linear_dx(s, s->dh, s->dx, L->w_down, R, F, d, 0.0f);
    s->same_dy = 1;
    linear_dw(s, G->w_down, s->dx, a.h, R, F, d);
    qs_lt_swiglu_back(s->dg, s->du, s->dh, a.g, a.u, (size_t)R * F);
    linear_dw(s, G->w_gate, s->dg, a.xn2, R, d, F);
    s->share = 1;
    linear_dw(s, G->w_up, s->du, a.xn2, R, d, F);
    s->same_dy = 1;
    linear_dx(s, s->dxn, s->dg, L->w_gate, R, d, F, 0.0f);
    s->same_dy = 1;
    linear_dx(s, s->dxn, s->du, L->w_up, R, d, F, 1.0f);
    qs_lt_rmsnorm_back(s->dx, G->ffn_norm, s->dxn, a.x_mid, a.rms2, L->ffn_norm, R, d);
    /* attention: x_mid = x_in + W_o attn(rope(W_q xn1 + bq), rope(W_k xn1 + bk), W_v xn1 + bv) */
    linear_dx(s, s->datt, s->dx, L->wo, R, qd, d, 0.0f);
    s->same_dy = 1;
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
    s->share = 1;
    linear_dw(s, G->wk, s->dk, a.xn1, R, d, kvd);
    s->share = 1;
    linear_dw(s, G->wv, s->dv, a.xn1, R, d, kvd);
    s->same_dy = 1;
    linear_dx(s, s->dxn, s->dq, L->wq, R, d, qd, 0.0f);
    s->same_dy = 1;
    linear_dx(s, s->dxn, s->dk, L->wk, R, d, kvd, 1.0f);
    s->same_dy = 1;
    linear_dx(s, s->dxn, s->dv, L->wv, R, d, kvd, 1.0f);
    qs_lt_rmsnorm_back(s->dx, G->attn_norm, s->dxn, a.x_in, a.rms1, L->attn_norm, R, d);
    return 0;
}

/* ---------------------------------------------------------------- loss */

/* Final norm, logits and the loss: the mean cross-entropy, or with weights -sum_r wt[r] log p_r; lp (when not
** NULL) gets every position's log p(target).  With want_grad the logits become dLoss/dlogits. */
static double head_loss(const qs_llm_model *m, qs_llm_train_state *s, const int32_t *tokens, int B, int T,
                        const double *wt, double *lp, int want_grad)
{
    const int d = m->c.dim, V = m->c.vocab, R = B * T;
    qs_lt_rmsnorm(s->hn, s->rmsf, s->x_fin, m->out_norm, R, d, m->c.eps);
    s->in_head = 1;
    linear(s, s->logits, s->hn, m->output, R, d, V);
    s->in_head = 0;
    double t0 = qs_now_s(), total = qs_lt_xent(s->logits, tokens, B, T, V, want_grad, wt, lp);
    tick(s, QS_LT_HEAD, t0);
    return wt ? total : total / R;
}

/* A quantization failure met in a GEMM (the pass ran on, unquantized, after it) fails the call. */
static int quant_status(qs_llm_train_state *s, qs_err *e)
{
    if (!s->failed) return 0;
    s->failed = 0;
    return qs_fail(e, "training recipe %s: %.500s", s->fail_name, s->qerr.msg);
}

int qs_llm_loss_grad(const qs_llm_model *m, qs_llm_train_state *s, const int32_t *tokens, int batch, int T,
                     double *loss, qs_llm_grads *g, qs_err *e)
{
    return qs_llm_loss_grad_w(m, s, tokens, batch, T, NULL, NULL, loss, g, e);
}

int qs_llm_loss_grad_w(const qs_llm_model *m, qs_llm_train_state *s, const int32_t *tokens, int batch, int T,
                       const double *wt, double *lp, double *loss, qs_llm_grads *g, qs_err *e)
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
    s->share = 0;
    s->pass++;   /* weights kept by an earlier pass are stale, and the maxima found */
    s->am_n = 0;
    s->same_dy = 0;
    s->sh_src[0] = s->sh_src[1] = NULL;   /* the scratch holds nothing of this pass yet */
    s->cm = m;
    s->cg = g;
    float *x0 = s->x_in;
    for (int r = 0; r < R; r++)
        memcpy(x0 + (size_t)r * d, m->tok_embd + (size_t)tokens[(r / T) * (T + 1) + r % T] * d, (size_t)d * sizeof(float));
    check_at(s, x0, (size_t)R * d, "the embedding rows of the batch");
    for (int l = 0; l < c->n_layer; l++) {
        s->layer = l;
        layer_fwd(m, s, l, batch, T);
        if (s->check)
            check_at(s, layer_of(s, l).x_out, (size_t)R * d, "layer %d fwd: the residual stream after the layer", l);
    }
    s->layer = c->n_layer;
    *loss = head_loss(m, s, tokens, batch, T, wt, lp, g != NULL);
    if (s->check && !isfinite(*loss) && !s->site[0]) snprintf(s->site, sizeof s->site, "the loss (of finite logits)");
    if (!g) {
        s->total += qs_now_s() - t0;
        return quant_status(s, e);
    }
    s->in_head = 1;
    linear_dw(s, g->output, s->logits, s->hn, R, d, c->vocab);
    s->same_dy = 1;
    linear_dx(s, s->dxn, s->logits, m->output, R, d, c->vocab, 0.0f);
    s->in_head = 0;
    memset(s->dx, 0, (size_t)R * d * sizeof(float));
    qs_lt_rmsnorm_back(s->dx, g->out_norm, s->dxn, s->x_fin, s->rmsf, m->out_norm, R, d);
    check_at(s, s->dx, (size_t)R * d, "head bwd: the gradient after the final norm");
    for (int l = c->n_layer - 1; l >= 0; l--) {
        s->layer = l;
        if (layer_back(m, s, l, batch, T, &g->L[l], e)) return -1;
        check_at(s, s->dx, (size_t)R * d, "layer %d bwd: the gradient of the layer input", l);
    }
    for (int r = 0; r < R; r++) {
        float *ge = g->tok_embd + (size_t)tokens[(r / T) * (T + 1) + r % T] * d;
        for (int i = 0; i < d; i++) ge[i] += s->dx[(size_t)r * d + i];
    }
    check_at(s, g->arena, g->arena_len, "the gradients (norm weights or embedding)");
    s->total += qs_now_s() - t0;
    return quant_status(s, e);
}

/* ---------------------------------------------------------------- operand statistics */

const qs_llm_opstat *qs_llm_train_state_opstats(const qs_llm_train_state *s) { return s->opst; }

void qs_llm_train_state_opstats_reset(qs_llm_train_state *s)
{
    if (s->opst) memset(s->opst, 0, ((size_t)s->c.n_layer + 1) * QS_OP_COUNT * sizeof *s->opst);
}

uint64_t qs_llm_train_state_calls(const qs_llm_train_state *s) { return s->calls; }
void qs_llm_train_state_set_calls(qs_llm_train_state *s, uint64_t calls) { s->calls = calls; }

/* ---------------------------------------------------------------- non-finite sites */

static int all_finite(const float *p, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad |= !(fabsf(p[i]) < INFINITY);
    return !bad;
}

/* In check mode, the first site whose values are not all finite. */
static void check_at(qs_llm_train_state *s, const float *p, size_t n, const char *fmt, ...)
{
    if (!s->check || s->site[0] || all_finite(p, n)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->site, sizeof s->site, fmt, ap);
    va_end(ap);
}

/* What a layer's linear weights are called, and what feeds their GEMMs (X forward, dY backward). */
static const char *const w_name[7] = {"wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"};
static const char *const x_what[7] = {"attn_norm output", "attn_norm output", "attn_norm output", "attention output",
                                      "ffn_norm output", "ffn_norm output", "SwiGLU output"};
static const char *const dy_what[7] = {
    "query gradient of the attention backward", "key gradient of the attention backward",
    "value gradient of the attention backward", "gradient after the ffn_norm backward",
    "gate gradient of the SwiGLU backward", "up gradient of the SwiGLU backward", "gradient of the layer output"};

static int w_index(const qs_llm_layer *L, const float *p)
{
    const float *w[7] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
    for (int i = 0; i < 7; i++) if (p == w[i]) return i;
    return -1;
}

/* The GEMM of kind 0 (forward Y = X·Wᵀ), 1 (dX = dY·W) or 2 (dW += dYᵀ·X): a0/b0 its FP32 operands,
** a/b as it multiplied them (quantized, or the same), w the weight (kind 2: its gradient), y the output. */
static void check_gemm(qs_llm_train_state *s, int kind, const float *a0, const float *a, size_t na, const float *b0,
                       const float *b, size_t nb, const float *w, const float *y, size_t ny)
{
    if (s->site[0]) return;
    int head = s->layer >= s->c.n_layer, k = -1;
    if (!head) k = w_index(kind == 2 ? &s->cg->L[s->layer] : &s->cm->L[s->layer], w);
    const char *wn = head ? "output" : k >= 0 ? w_name[k] : "?";
    const char *xw = head ? "final norm output" : k >= 0 ? x_what[k] : "input";
    const char *dw = head ? "logits gradient" : k >= 0 ? dy_what[k] : "gradient";
    char where[48];
    if (head) snprintf(where, sizeof where, "head");
    else snprintf(where, sizeof where, "layer %d", s->layer);
    static const char *const kn[3] = {"fwd", "bwd dgrad", "bwd wgrad"};
    static const int opa[3] = {QS_OP_FWD_X, QS_OP_DGRAD_DY, QS_OP_WGRAD_DY}, opb[3] = {QS_OP_FWD_W, QS_OP_DGRAD_W,
                                                                                        QS_OP_WGRAD_X};
    char ad[80], bd[80], msg[120];
    snprintf(ad, sizeof ad, "input %s (the %s)", kind == 0 ? "X" : "dY", kind == 0 ? xw : dw);
    if (kind == 2) snprintf(bd, sizeof bd, "input X (the %s)", xw);
    else snprintf(bd, sizeof bd, "weights");
    if (!all_finite(a0, na)) snprintf(msg, sizeof msg, "its %s", ad);
    else if (!all_finite(b0, nb)) snprintf(msg, sizeof msg, "its %s", bd);
    else if (a != a0 && !all_finite(a, na))
        snprintf(msg, sizeof msg, "its %s operand after quantization", qs_llm_operand_name(opa[kind]));
    else if (b != b0 && !all_finite(b, nb))
        snprintf(msg, sizeof msg, "its %s operand after quantization", qs_llm_operand_name(opb[kind]));
    else if (!all_finite(y, ny)) snprintf(msg, sizeof msg, "its output");
    else return;
    snprintf(s->site, sizeof s->site, "%s %s %s GEMM: %s", where, kn[kind], wn, msg);
}

int qs_llm_nonfinite_site(const qs_llm_model *m, qs_llm_train_state *s, const int32_t *tokens, int batch, int T,
                          uint64_t calls, char *site, size_t cap, qs_err *e)
{
    qs_llm_grads g;
    if (qs_llm_grads_new(&g, m, e)) return -1;
    size_t nst = ((size_t)s->c.n_layer + 1) * QS_OP_COUNT;
    qs_llm_opstat *keep = s->opst ? malloc(nst * sizeof *keep) : NULL;
    if (s->opst && !keep) { qs_llm_grads_free(&g); return qs_fail(e, "out of memory"); }
    if (keep) memcpy(keep, s->opst, nst * sizeof *keep);
    uint64_t calls_after = s->calls;
    s->calls = calls;
    s->check = 1;
    s->site[0] = 0;
    double loss;
    int rc = qs_llm_loss_grad(m, s, tokens, batch, T, &loss, &g, e);
    s->check = 0;
    s->calls = calls_after;
    if (keep) { memcpy(s->opst, keep, nst * sizeof *keep); free(keep); }
    qs_llm_grads_free(&g);
    if (rc) return -1;
    snprintf(site, cap, "%s", s->site);
    return s->site[0] != 0;
}
