/*
** The training forward and backward pass (kernels/llm_train.c) on random tiny models: its loss equals
** the inference pass's mean -log p(next token), and its gradient of every tensor kind equals central
** finite differences of an independent float64 reference loss (plain loops below, itself checked
** against qs_llm_forward's log-probabilities first).
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/llm.h"
#include "../../kernels/llm_train.h"
#include "../../store/llm_load.h"

static uint64_t rng_state;
static double urand(void)   /* uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / (double)(1ULL << 52) - 1.0;
}
static void fill(float *p, size_t n, double base, double amp)
{
    for (size_t i = 0; i < n; i++) p[i] = (float)(base + amp * urand());
}

typedef struct tcase { int head_dim, tied, bias, neox; } tcase;

static void build(qs_llm_model *m, const tcase *tc)
{
    qs_llm_cfg c = {.n_layer = 2, .dim = 32, .n_head = 4, .n_kv_head = 2, .head_dim = tc->head_dim, .ffn = 48,
                    .vocab = 64, .ctx = 64, .rope_base = 10000.0f, .eps = 1e-5f, .rope_neox = tc->neox};
    qs_err e = {{0}};
    assert_int_equal(qs_llm_alloc(m, &c, tc->tied, &e), 0);
    if (tc->bias) assert_int_equal(qs_llm_alloc_bias(m, &e), 0);
    const size_t d = 32, qd = qs_llm_q_dim(&c), kvd = 2 * (size_t)c.head_dim, F = 48;
    const double a_d = sqrt(3.0 / d), a_q = sqrt(3.0 / qd), a_f = sqrt(3.0 / F);
    fill(m->tok_embd, 64 * d, 0, 1);
    if (!tc->tied) fill(m->output, 64 * d, 0, a_d);
    fill(m->out_norm, d, 1, 0.2);
    for (int l = 0; l < 2; l++) {
        qs_llm_layer *L = &m->L[l];
        fill(L->attn_norm, d, 1, 0.2); fill(L->ffn_norm, d, 1, 0.2);
        fill(L->wq, qd * d, 0, 2 * a_d); fill(L->wk, kvd * d, 0, 2 * a_d); fill(L->wv, kvd * d, 0, a_d);
        fill(L->wo, d * qd, 0, a_q);
        fill(L->w_gate, F * d, 0, a_d); fill(L->w_up, F * d, 0, a_d); fill(L->w_down, d * F, 0, a_f);
        if (tc->bias) { fill(L->bq, qd, 0, 0.3); fill(L->bk, kvd, 0, 0.3); fill(L->bv, kvd, 0, 0.3); }
    }
}

/* ---------------------------------------------------------------- float64 reference */

typedef struct ref {
    const qs_llm_model *m;
    double *w, *b;        /* double copies of m->arena and m->bias_arena (same offsets) */
} ref;
#define RW(r, p) ((r)->w + ((p) - (r)->m->arena))
#define RB(r, p) ((r)->b + ((p) - (r)->m->bias_arena))

static void ref_init(ref *r, const qs_llm_model *m)
{
    r->m = m;
    r->w = malloc(m->arena_len * sizeof(double));
    for (size_t i = 0; i < m->arena_len; i++) r->w[i] = m->arena[i];
    r->b = NULL;
    if (m->bias_arena) {
        r->b = malloc(m->bias_len * sizeof(double));
        for (size_t i = 0; i < m->bias_len; i++) r->b[i] = m->bias_arena[i];
    }
}

static void dmatvec(double *y, const double *W, const double *x, int out, int in)
{
    for (int o = 0; o < out; o++) {
        double s = 0;
        for (int i = 0; i < in; i++) s += W[(size_t)o * in + i] * x[i];
        y[o] = s;
    }
}

static void drms(double *y, const double *x, const double *w, int n, double eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

static void drope(double *v, int nh, int hd, int t, double base, int neox)
{
    for (int h = 0; h < nh; h++)
        for (int i = 0; i < hd / 2; i++) {
            double a = t * pow(base, -2.0 * i / hd), cs = cos(a), sn = sin(a);
            int i0 = neox ? i : 2 * i, i1 = neox ? i + hd / 2 : 2 * i + 1;
            double x0 = v[h * hd + i0], x1 = v[h * hd + i1];
            v[h * hd + i0] = x0 * cs - x1 * sn;
            v[h * hd + i1] = x0 * sn + x1 * cs;
        }
}

/* One layer over the T rows x[T][d] of one sequence, in place. */
static void ref_layer(const ref *r, const qs_llm_layer *L, double *x, int T)
{
    const qs_llm_cfg *c = &r->m->c;
    const int d = c->dim, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd, F = c->ffn;
    const int grp = c->n_head / c->n_kv_head;
    double *xn = malloc((size_t)T * d * sizeof *xn), *q = malloc((size_t)T * qd * sizeof *q);
    double *k = malloc((size_t)T * kvd * sizeof *k), *v = malloc((size_t)T * kvd * sizeof *v);
    double *o = malloc((size_t)qd * sizeof *o), *y = malloc((size_t)(F > d ? F : d) * sizeof *y);
    double *g = malloc((size_t)F * sizeof *g), *u = malloc((size_t)F * sizeof *u), p[64];
    for (int t = 0; t < T; t++) {
        drms(xn + t * d, x + t * d, RW(r, L->attn_norm), d, c->eps);
        dmatvec(q + t * qd, RW(r, L->wq), xn + t * d, qd, d);
        dmatvec(k + t * kvd, RW(r, L->wk), xn + t * d, kvd, d);
        dmatvec(v + t * kvd, RW(r, L->wv), xn + t * d, kvd, d);
        if (L->bq)
            for (int i = 0; i < qd; i++) q[t * qd + i] += RB(r, L->bq)[i];
        if (L->bk)
            for (int i = 0; i < kvd; i++) { k[t * kvd + i] += RB(r, L->bk)[i]; v[t * kvd + i] += RB(r, L->bv)[i]; }
        drope(q + t * qd, c->n_head, hd, t, c->rope_base, c->rope_neox);
        drope(k + t * kvd, c->n_kv_head, hd, t, c->rope_base, c->rope_neox);
    }
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < c->n_head; h++) {
            const double *qh = q + t * qd + h * hd;
            double mx = -INFINITY, z = 0;
            for (int j = 0; j <= t; j++) {
                double s = 0;
                for (int i = 0; i < hd; i++) s += qh[i] * k[j * kvd + (h / grp) * hd + i];
                p[j] = s / sqrt((double)hd);
                if (p[j] > mx) mx = p[j];
            }
            for (int j = 0; j <= t; j++) { p[j] = exp(p[j] - mx); z += p[j]; }
            for (int i = 0; i < hd; i++) {
                double s = 0;
                for (int j = 0; j <= t; j++) s += p[j] / z * v[j * kvd + (h / grp) * hd + i];
                o[h * hd + i] = s;
            }
        }
        dmatvec(y, RW(r, L->wo), o, d, qd);
        for (int i = 0; i < d; i++) x[t * d + i] += y[i];   /* row t is not read by later rows' attention */
    }
    for (int t = 0; t < T; t++) {
        drms(xn, x + t * d, RW(r, L->ffn_norm), d, c->eps);
        dmatvec(g, RW(r, L->w_gate), xn, F, d);
        dmatvec(u, RW(r, L->w_up), xn, F, d);
        for (int i = 0; i < F; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
        dmatvec(y, RW(r, L->w_down), g, d, F);
        for (int i = 0; i < d; i++) x[t * d + i] += y[i];
    }
    free(xn); free(q); free(k); free(v); free(o); free(y); free(g); free(u);
}

/* Mean -log p(next token) over B sequences tokens[b*(T+1) + t]; lp[b*T + t] = log p (may be NULL). */
static double ref_loss(const ref *r, const int32_t *tokens, int B, int T, double *lp)
{
    const qs_llm_cfg *c = &r->m->c;
    const int d = c->dim, V = c->vocab;
    double *x = malloc((size_t)T * d * sizeof *x), *hn = malloc((size_t)d * sizeof *hn);
    double *lg = malloc((size_t)V * sizeof *lg), total = 0;
    assert_true(T <= 64);   /* ref_layer's attention row */
    for (int b = 0; b < B; b++) {
        const int32_t *tk = tokens + (size_t)b * (T + 1);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < d; i++) x[t * d + i] = RW(r, r->m->tok_embd)[(size_t)tk[t] * d + i];
        for (int l = 0; l < c->n_layer; l++) ref_layer(r, &r->m->L[l], x, T);
        for (int t = 0; t < T; t++) {
            drms(hn, x + t * d, RW(r, r->m->out_norm), d, c->eps);
            dmatvec(lg, RW(r, r->m->output), hn, V, d);
            double mx = -INFINITY, z = 0;
            for (int v = 0; v < V; v++) if (lg[v] > mx) mx = lg[v];
            for (int v = 0; v < V; v++) z += exp(lg[v] - mx);
            double l = lg[tk[t + 1]] - mx - log(z);
            if (lp) lp[b * T + t] = l;
            total -= l;
        }
    }
    free(x); free(hn); free(lg);
    return total / (B * T);
}

/* ---------------------------------------------------------------- checks */

enum { B = 2, T = 8 };

static void make_tokens(int32_t *tok, int vocab)
{
    for (int i = 0; i < B * (T + 1); i++) tok[i] = (int32_t)((urand() + 1.0) * 0.5 * vocab) % vocab;
}

/* The inference pass (qs_llm_forward + qs_llm_logprob): per-position log p and their mean loss. */
static double infer_loss(const qs_llm_model *m, const int32_t *tokens, double *lp)
{
    qs_err e = {{0}};
    const int d = m->c.dim, V = m->c.vocab;
    int32_t in[B * T];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) in[b * T + t] = tokens[b * (T + 1) + t];
    qs_llm_state *s = qs_llm_state_new(&m->c, B, T, B * T, &e);
    assert_non_null(s);
    float *h = malloc((size_t)B * T * d * sizeof(float)), *scr = malloc((size_t)B * T * d * sizeof(float));
    float *lg = malloc((size_t)B * T * V * sizeof(float));
    assert_int_equal(qs_llm_forward(m, NULL, s, in, B, T, 0, h, NULL, NULL, &e), 0);
    assert_int_equal(qs_llm_logits(m, NULL, h, B * T, scr, lg, &e), 0);
    double total = 0;
    for (int r = 0; r < B * T; r++) {
        lp[r] = qs_llm_logprob(lg + (size_t)r * V, V, tokens[(r / T) * (T + 1) + r % T + 1], NULL);
        total -= lp[r];
    }
    qs_llm_state_free(s);
    free(h); free(scr); free(lg);
    return total / (B * T);
}

typedef struct tens { const char *name; float *p, *g; size_t n; int bias; } tens;

static int tensors(const qs_llm_model *m, const qs_llm_grads *g, tens *out)
{
    const qs_llm_cfg *c = &m->c;
    size_t d = (size_t)c->dim, qd = qs_llm_q_dim(c), kvd = (size_t)c->n_kv_head * c->head_dim, F = (size_t)c->ffn;
    int n = 0;
    out[n++] = (tens){"tok_embd", m->tok_embd, g->tok_embd, (size_t)c->vocab * d, 0};
    if (m->output != m->tok_embd) out[n++] = (tens){"output", m->output, g->output, (size_t)c->vocab * d, 0};
    out[n++] = (tens){"out_norm", m->out_norm, g->out_norm, d, 0};
    for (int l = 0; l < c->n_layer; l++) {
        const qs_llm_layer *L = &m->L[l], *G = &g->L[l];
        out[n++] = (tens){"attn_norm", L->attn_norm, G->attn_norm, d, 0};
        out[n++] = (tens){"wq", L->wq, G->wq, qd * d, 0};
        out[n++] = (tens){"wk", L->wk, G->wk, kvd * d, 0};
        out[n++] = (tens){"wv", L->wv, G->wv, kvd * d, 0};
        out[n++] = (tens){"wo", L->wo, G->wo, d * qd, 0};
        out[n++] = (tens){"ffn_norm", L->ffn_norm, G->ffn_norm, d, 0};
        out[n++] = (tens){"w_gate", L->w_gate, G->w_gate, F * d, 0};
        out[n++] = (tens){"w_up", L->w_up, G->w_up, F * d, 0};
        out[n++] = (tens){"w_down", L->w_down, G->w_down, d * F, 0};
        if (L->bq) {
            out[n++] = (tens){"bq", L->bq, G->bq, qd, 1};
            out[n++] = (tens){"bk", L->bk, G->bk, kvd, 1};
            out[n++] = (tens){"bv", L->bv, G->bv, kvd, 1};
        }
    }
    return n;
}

/* Central difference of the reference loss in one coordinate of tensor t. */
static double fd(const ref *r, const tens *t, size_t i, const int32_t *tok)
{
    double *w = t->bias ? RB(r, t->p) : RW(r, t->p), v = w[i], h = 1e-3;
    w[i] = v + h;
    double lp = ref_loss(r, tok, B, T, NULL);
    w[i] = v - h;
    double lm = ref_loss(r, tok, B, T, NULL);
    w[i] = v;
    return (lp - lm) / (2 * h);
}

/* Build the case, check reference and training loss against the inference pass, then the gradient
** of every tensor against central differences on 4 random coordinates each (plus, for the lookup,
** 4 in rows of tokens the batch reads). */
static void check_model(const qs_llm_model *mp, const int32_t *tok, const char *label)
{
    const qs_llm_model m = *mp;
    ref r;
    ref_init(&r, &m);
    double lp_inf[B * T], lp_ref[B * T];
    double l_inf = infer_loss(&m, tok, lp_inf), l_ref = ref_loss(&r, tok, B, T, lp_ref);
    for (int i = 0; i < B * T; i++) assert_true(fabs(lp_inf[i] - lp_ref[i]) <= 1e-5 * (1 + fabs(lp_ref[i])));
    assert_true(fabs(l_inf - l_ref) <= 1e-5 * l_ref);

    qs_err e = {{0}};
    qs_llm_train_state *s = qs_llm_train_state_new(&m.c, B, T, &e);
    assert_non_null(s);
    qs_llm_grads g;
    assert_int_equal(qs_llm_grads_new(&g, &m, &e), 0);
    double loss = 0, loss0 = 0;
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &loss0, NULL, &e), 0);
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &loss, &g, &e), 0);
    assert_true(loss == loss0);
    assert_true(fabs(loss - l_inf) <= 1e-5 * l_inf);

    tens t[64];
    int nt = tensors(&m, &g, t);
    double worst = 0;
    const char *wname = "";
    for (int k = 0; k < nt; k++) {
        double gmax = 0;
        for (size_t i = 0; i < t[k].n; i++) gmax = fmax(gmax, fabs(t[k].g[i]));
        assert_true(gmax > 0);   /* every tensor kind gets a gradient */
        for (int c = 0; c < 8; c++) {
            size_t i = (size_t)((urand() + 1.0) * 0.5 * (double)t[k].n) % t[k].n;
            if (t[k].p == m.tok_embd && c >= 4)   /* a row the batch reads */
                i = (size_t)tok[(size_t)((urand() + 1.0) * 0.5 * B * T) % (B * T)] * m.c.dim + i % (size_t)m.c.dim;
            double num = fd(&r, &t[k], i, tok), ana = t[k].g[i];
            double rel = fabs(ana - num) / fmax(fabs(num), 1e-3 * gmax + 1e-12);
            if (rel > worst) { worst = rel; wname = t[k].name; }
            if (rel > 1e-2)
                fail_msg("%s[%zu]: analytic %.8g, finite difference %.8g (relative error %.3g)", t[k].name, i, ana,
                         num, rel);
        }
    }
    print_message("# %s: loss %.6f, worst relative gradient error %.2e (%s)\n", label, loss, worst, wname);
    qs_llm_grads_free(&g);
    qs_llm_train_state_free(s);
    free(r.w); free(r.b);
}

static void check_case(const tcase *tc, uint64_t seed)
{
    rng_state = seed;
    qs_llm_model m;
    build(&m, tc);
    int32_t tok[B * (T + 1)];
    make_tokens(tok, m.c.vocab);
    char label[128];
    snprintf(label, sizeof label, "head_dim %d, %s, %s, %s", tc->head_dim, tc->tied ? "tied" : "untied",
             tc->bias ? "qkv bias" : "no bias", tc->neox ? "rotate_half" : "adjacent");
    check_model(&m, tok, label);
    qs_llm_free(&m);
}

/* The committed GGUF fixtures (their logits are checked against PyTorch in test_llm), on the
** fixture's token ids. */
static void check_fixture(const char *path)
{
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf(path, &f, &e), 0);
    FILE *fp = fopen("fixtures/llm/tiny_ids.txt", "r");
    assert_non_null(fp);
    int32_t tok[B * (T + 1)];
    int n = 0, v;
    while (n < B * (T + 1) && fscanf(fp, "%d,", &v) == 1) tok[n++] = v;
    fclose(fp);
    assert_int_equal(n, B * (T + 1));
    rng_state = 0x6789abcULL;
    check_model(&f.m, tok, path);
    qs_llm_file_free(&f);
}
static void test_grad_fixture_tied(void **st) { (void)st; check_fixture("fixtures/llm/tiny.gguf"); }
static void test_grad_fixture_untied(void **st) { (void)st; check_fixture("fixtures/llm/tiny_untied.gguf"); }

static void test_grad_tied_adjacent(void **st) { (void)st; check_case(&(tcase){8, 1, 0, 0}, 0x1234567ULL); }
static void test_grad_untied_bias_neox(void **st) { (void)st; check_case(&(tcase){12, 0, 1, 1}, 0x2345678ULL); }
static void test_grad_tied_bias_adjacent(void **st) { (void)st; check_case(&(tcase){12, 1, 1, 0}, 0x3456789ULL); }
static void test_grad_untied_neox(void **st) { (void)st; check_case(&(tcase){8, 0, 0, 1}, 0x456789aULL); }

/* Gradients accumulate; the state's size is the header's formula; bad input is refused. */
static void test_accumulate_and_refusals(void **st)
{
    (void)st;
    rng_state = 0x5678abcULL;
    qs_llm_model m;
    build(&m, &(tcase){12, 0, 1, 0});
    int32_t tok[B * (T + 1)];
    make_tokens(tok, m.c.vocab);
    qs_err e = {{0}};
    qs_llm_train_state *s = qs_llm_train_state_new(&m.c, B, T, &e);
    assert_non_null(s);
    qs_llm_grads g1, g2;
    assert_int_equal(qs_llm_grads_new(&g1, &m, &e), 0);
    assert_int_equal(qs_llm_grads_new(&g2, &m, &e), 0);
    double l1, l2;
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &l1, &g1, &e), 0);
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &l2, &g2, &e), 0);
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &l2, &g2, &e), 0);
    for (size_t i = 0; i < g1.arena_len; i++) assert_true(fabsf(g2.arena[i] - 2 * g1.arena[i]) <= 1e-6f * (1 + fabsf(g2.arena[i])));
    for (size_t i = 0; i < g1.bias_len; i++) assert_true(fabsf(g2.bias_arena[i] - 2 * g1.bias_arena[i]) <= 1e-6f * (1 + fabsf(g2.bias_arena[i])));
    /* one sequence of fewer positions fits the same state */
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, 1, 5, &l1, &g1, &e), 0);
    assert_true(isfinite(l1) && l1 > 0);

    const qs_llm_cfg *c = &m.c;
    size_t R = B * T, d = 32, q = qs_llm_q_dim(c), kv = 2 * 12, F = 48, V = 64, H = 4;
    size_t want = 2 * (R * (4 * d + 2 * q + 2 * kv + 3 * F + 2) + B * H * T * T) + R * (2 * d + V + 1) +
                  R * (2 * d + 2 * q + 2 * kv + 3 * F) + T * 12;
    assert_int_equal(qs_llm_train_state_floats(c, B, T), want);
    assert_int_equal(qs_llm_train_state_floats(c, 0, T), 0);

    tok[3] = 64;
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &l1, &g1, &e), -1);
    assert_non_null(strstr(e.msg, "token id 64"));
    tok[3] = 1;
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B + 1, T, &l1, &g1, &e), -1);
    assert_non_null(strstr(e.msg, "does not fit"));
    qs_llm_model m2;
    build(&m2, &(tcase){12, 0, 0, 0});   /* no biases: gradients of m (with biases) do not fit */
    assert_int_equal(qs_llm_loss_grad(&m2, s, tok, B, T, &l1, &g1, &e), -1);
    assert_non_null(strstr(e.msg, "another model"));
    qs_llm_free(&m2);
    assert_null(qs_llm_train_state_new(&m.c, 0, T, &e));
    qs_llm_grads_free(&g1);
    qs_llm_grads_free(&g2);
    qs_llm_train_state_free(s);
    qs_llm_free(&m);
}

/* The per-position weighted loss (GRPO's policy gradient): -sum_r w_r log p_r with some weights 0 (masked)
** and some negative (negative advantages); its log-probs equal the inference pass's, its loss the weighted
** sum of them, its gradient central differences of the weighted float64 reference; NULL weights are
** qs_llm_loss_grad's loss bit for bit. */
static double ref_wloss(const ref *r, const int32_t *tok, const double *w)
{
    double lp[B * T], s = 0;
    ref_loss(r, tok, B, T, lp);
    for (int i = 0; i < B * T; i++) s -= w[i] * lp[i];
    return s;
}

static void test_weighted_loss(void **st)
{
    (void)st;
    rng_state = 0x789abcdULL;
    qs_llm_model m;
    build(&m, &(tcase){8, 0, 1, 1});
    int32_t tok[B * (T + 1)];
    make_tokens(tok, m.c.vocab);
    double w[B * T];
    for (int i = 0; i < B * T; i++) w[i] = i % 5 == 0 ? 0 : urand() * 0.3;
    qs_err e = {{0}};
    qs_llm_train_state *s = qs_llm_train_state_new(&m.c, B, T, &e);
    assert_non_null(s);
    qs_llm_grads g;
    assert_int_equal(qs_llm_grads_new(&g, &m, &e), 0);
    double lp[B * T], lp_inf[B * T], loss = 0, l0 = 0, l1 = 0;
    infer_loss(&m, tok, lp_inf);
    assert_int_equal(qs_llm_loss_grad_w(&m, s, tok, B, T, w, lp, &loss, &g, &e), 0);
    double want = 0;
    for (int i = 0; i < B * T; i++) {
        assert_true(fabs(lp[i] - lp_inf[i]) <= 1e-5 * (1 + fabs(lp_inf[i])));
        want -= w[i] * lp[i];
    }
    assert_true(fabs(loss - want) <= 1e-12 * (1 + fabs(want)));
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &l0, NULL, &e), 0);
    assert_int_equal(qs_llm_loss_grad_w(&m, s, tok, B, T, NULL, NULL, &l1, NULL, &e), 0);
    assert_true(l0 == l1);

    ref r;
    ref_init(&r, &m);
    tens t[64];
    int nt = tensors(&m, &g, t);
    double worst = 0;
    for (int k = 0; k < nt; k++) {
        double gmax = 0;
        for (size_t i = 0; i < t[k].n; i++) gmax = fmax(gmax, fabs(t[k].g[i]));
        assert_true(gmax > 0);
        for (int c = 0; c < 6; c++) {
            size_t i = (size_t)((urand() + 1.0) * 0.5 * (double)t[k].n) % t[k].n;
            double *pw = t[k].bias ? RB(&r, t[k].p) : RW(&r, t[k].p), v = pw[i], h = 1e-3;
            pw[i] = v + h;
            double lpl = ref_wloss(&r, tok, w);
            pw[i] = v - h;
            double lmi = ref_wloss(&r, tok, w);
            pw[i] = v;
            double num = (lpl - lmi) / (2 * h), ana = t[k].g[i];
            double rel = fabs(ana - num) / fmax(fabs(num), 1e-3 * gmax + 1e-12);
            worst = fmax(worst, rel);
            if (rel > 1e-2) fail_msg("weighted %s[%zu]: analytic %.8g, finite difference %.8g", t[k].name, i, ana, num);
        }
    }
    print_message("# weighted loss %.6f, worst relative gradient error %.2e\n", loss, worst);
    /* all weights 0: no gradient at all */
    for (int i = 0; i < B * T; i++) w[i] = 0;
    qs_llm_grads_zero(&g);
    assert_int_equal(qs_llm_loss_grad_w(&m, s, tok, B, T, w, lp, &loss, &g, &e), 0);
    assert_true(loss == 0);
    for (size_t i = 0; i < g.arena_len; i++) assert_true(g.arena[i] == 0);
    free(r.w); free(r.b);
    qs_llm_grads_free(&g);
    qs_llm_train_state_free(s);
    qs_llm_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_tied_adjacent),
        cmocka_unit_test(test_grad_untied_bias_neox),
        cmocka_unit_test(test_grad_tied_bias_adjacent),
        cmocka_unit_test(test_grad_untied_neox),
        cmocka_unit_test(test_grad_fixture_tied),
        cmocka_unit_test(test_grad_fixture_untied),
        cmocka_unit_test(test_accumulate_and_refusals),
        cmocka_unit_test(test_weighted_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
