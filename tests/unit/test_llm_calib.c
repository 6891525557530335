/*
** Calibration transforms (analysis/llm_calib.c, analysis/llm_wtrans.c, kernels/llm_smooth.c,
** kernels/llm_awq.c) on a generated tiny model with grouped-query attention and Q/K/V biases:
** SmoothQuant's folds leave the FP32 logits unchanged (1e-5 relative) while they change the weights;
** the capture's Hessians equal 2/N X^T X of the tapped inputs, in one pass or layer by layer; AWQ's
** chosen point is the least output error of its grid, the errors measured here from the inputs
** themselves; GPTQ through the transform lowers every layer's output error below plain rounding's.
*/
#include "test_util.h"

#include <math.h>

#include "../../analysis/llm_calib.h"
#include "../../analysis/llm_wtrans.h"
#include "../../kernels/llm.h"
#include "../../kernels/llm_awq.h"
#include "../../kernels/llm_smooth.h"

static uint64_t rs = 0x30cab1bULL;
static double urand(void)   /* uniform in [-1, 1) */
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (double)(rs >> 11) / (double)(1ULL << 52) - 1.0;
}
static void fill(float *p, size_t n, double base, double amp)
{
    for (size_t i = 0; i < n; i++) p[i] = (float)(base + amp * urand());
}

enum { V = 64, D = 32, FF = 48, T = 24, NTOK = 4 * T };

static void build(qs_llm_model *m)
{
    qs_llm_cfg c = {.n_layer = 2, .dim = D, .n_head = 4, .n_kv_head = 2, .head_dim = 8, .ffn = FF,
                    .vocab = V, .ctx = 64, .rope_base = 10000.0f, .eps = 1e-5f, .rope_neox = 0};
    qs_err e = {{0}};
    rs = 0x30cab1bULL;
    assert_int_equal(qs_llm_alloc(m, &c, 0, &e), 0);
    assert_int_equal(qs_llm_alloc_bias(m, &e), 0);
    fill(m->arena, m->arena_len, 0, 0.3);
    fill(m->bias_arena, m->bias_len, 0, 0.2);
    fill(m->tok_embd, (size_t)V * D, 0, 1);
    fill(m->out_norm, D, 1, 0.2);
    for (int l = 0; l < 2; l++) {
        fill(m->L[l].attn_norm, D, 1, 0.2);
        fill(m->L[l].ffn_norm, D, 1, 0.2);
        m->L[l].attn_norm[3] = 6;   /* outlier channels, as SmoothQuant is about */
        m->L[l].ffn_norm[7] = -5;
    }
}

static void tokens(int32_t *ids, size_t n, uint64_t seed)
{
    rs = seed;
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)((urand() + 1.0) * 0.5 * V) % V;
}

static void logits(const qs_llm_model *m, const int32_t *ids, float *out)
{
    qs_err e = {{0}};
    qs_llm_state *s = qs_llm_state_new(&m->c, 1, T, T, &e);
    float *h = malloc((size_t)T * D * sizeof *h), *scr = malloc((size_t)T * D * sizeof *scr);
    assert_non_null(s);
    assert_int_equal(qs_llm_forward(m, NULL, s, ids, 1, T, 0, h, NULL, NULL, &e), 0);
    assert_int_equal(qs_llm_logits(m, NULL, h, T, scr, out, &e), 0);
    free(h); free(scr);
    qs_llm_state_free(s);
}

static qs_calib_src src_of(const int32_t *ids, size_t budget)
{
    qs_calib_src s = {ids, NTOK, T, 0, -1, "0123456789abcdef0123456789abcdef", budget};
    return s;
}

static void test_smooth_invariance(void **st)
{
    (void)st;
    qs_llm_model m, sm;
    build(&m);
    int32_t cal[NTOK], ids[T];
    tokens(cal, NTOK, 11);
    tokens(ids, T, 12);
    float *ref = malloc((size_t)T * V * sizeof *ref), *got = malloc((size_t)T * V * sizeof *got);
    logits(&m, ids, ref);
    const double alphas[] = {0.5, 0.85};
    for (int k = 0; k < 4; k++) {
        qs_wtrans t = {1, alphas[k % 2], k / 2, QS_WT_PLAIN, QS_GPTQ_DEFAULTS, 20};
        qs_calib_src src = src_of(cal, 0);
        qs_calib cache = {0};
        qs_err e = {{0}};
        assert_int_equal(qs_wtrans_build(&sm, &m, &t, NULL, 1, &src, &cache, &e), 0);
        double dw = 0, dn = 0, mx = 0, d = 0;
        for (int l = 0; l < 2; l++)
            for (int j = 0; j < D; j++) {
                dn = fmax(dn, fabs(sm.L[l].attn_norm[j] - m.L[l].attn_norm[j]));
                dw = fmax(dw, fabs(sm.L[l].wo[j] - m.L[l].wo[j]) + fabs(sm.L[l].w_down[j] - m.L[l].w_down[j]));
            }
        assert_true(dn > 1e-3);                  /* the norms moved */
        if (!t.smooth_norm) assert_true(dw > 1e-4);   /* and o's and down's columns (V's and up's rows) */
        else assert_true(dw == 0);
        logits(&sm, ids, got);
        for (size_t i = 0; i < (size_t)T * V; i++) { mx = fmax(mx, fabs(ref[i])); d = fmax(d, fabs(got[i] - ref[i])); }
        print_message("# smooth alpha %.2f%s: max |dlogit| / max |logit| = %.3g\n", t.alpha, t.smooth_norm ? " (norm sites)" : "", d / mx);
        assert_true(d <= 1e-5 * mx);
        qs_llm_free(&sm);
        qs_calib_free(&cache);
    }
    free(ref); free(got);
    qs_llm_free(&m);
}

/* The tapped inputs themselves, per (layer, site). */
typedef struct { float *x[2][4]; size_t n[2][4]; } taps;
static void tap_keep(void *ctx, int l, qs_llm_site s, const float *x, int rows, int cols)
{
    taps *t = ctx;
    if ((int)s >= 4) return;
    size_t k = t->n[l][s];
    t->x[l][s] = realloc(t->x[l][s], (k + (size_t)rows) * (size_t)cols * sizeof(float));
    memcpy(t->x[l][s] + k * (size_t)cols, x, (size_t)rows * cols * sizeof(float));
    t->n[l][s] = k + (size_t)rows;
}

static void capture_x(const qs_llm_model *m, const int32_t *cal, taps *tp)
{
    qs_err e = {{0}};
    memset(tp, 0, sizeof *tp);
    qs_llm_state *s = qs_llm_state_new(&m->c, 1, T, T, &e);
    float *h = malloc((size_t)T * D * sizeof *h);
    for (int k = 0; k < NTOK / T; k++) assert_int_equal(qs_llm_forward(m, NULL, s, cal + k * T, 1, T, 0, h, tap_keep, tp, &e), 0);
    free(h);
    qs_llm_state_free(s);
}

static void test_capture_hessian(void **st)
{
    (void)st;
    qs_llm_model m;
    build(&m);
    int32_t cal[NTOK];
    tokens(cal, NTOK, 11);
    taps tp;
    capture_x(&m, cal, &tp);
    qs_calib_src src = src_of(cal, 0);
    qs_calib c = {0};
    qs_err e = {{0}};
    assert_int_equal(qs_calib_capture(&c, &m, &src, 0, 2, &e), 0);
    assert_int_equal((int)c.rows, NTOK);
    for (int l = 0; l < 2; l++)
        for (int s = 0; s < 4; s++) {
            const qs_calib_site *cs = qs_calib_at(&c, l, s);
            const size_t n = cs->n, N = tp.n[l][s];
            const float *x = tp.x[l][s];
            assert_int_equal(N, NTOK);
            double herr = 0, hmax = 0;
            for (size_t i = 0; i < n; i++) {
                double amax = 0, amean = 0;
                for (size_t r = 0; r < N; r++) { amax = fmax(amax, fabs(x[r * n + i])); amean += fabs(x[r * n + i]) / N; }
                assert_true(cs->xmax[i] == (float)amax);
                assert_true(fabs(cs->xmean[i] - amean) <= 1e-5 * amean + 1e-12);
                for (size_t j = 0; j < n; j++) {
                    double h = 0;
                    for (size_t r = 0; r < N; r++) h += (double)x[r * n + i] * x[r * n + j];
                    h *= 2.0 / N;
                    hmax = fmax(hmax, fabs(h));
                    herr = fmax(herr, fabs(h - cs->H[i * n + j]));
                }
            }
            assert_true(herr <= 1e-5 * hmax);
        }
    /* one layer per pass (a budget below two layers' Hessians): the same GPTQ model, bit for bit */
    qs_apply w;
    memset(&w, 0, sizeof w);
    w.f = qs_format_find("mxfp4");
    w.axis = 1;
    qs_wtrans t = {0, 0, 0, QS_WT_GPTQ, QS_GPTQ_DEFAULTS, 20};
    qs_llm_model a, b;
    qs_calib ca = {0}, cb = {0};
    qs_calib_src small = src_of(cal, 1);
    assert_int_equal(qs_calib_layers_per_pass(&m.c, &small), 1);
    assert_int_equal(qs_wtrans_build(&a, &m, &t, &w, 1, &src, &ca, &e), 0);
    assert_int_equal(qs_wtrans_build(&b, &m, &t, &w, 1, &small, &cb, &e), 0);
    assert_int_equal(ca.l1 - ca.l0, 2);
    assert_int_equal(cb.l1 - cb.l0, 1);
    assert_memory_equal(a.arena, b.arena, a.arena_len * sizeof(float));
    /* and GPTQ's layers err less than plain rounding's on these inputs */
    qs_llm_model p;
    qs_wtrans plain = {0, 0, 0, QS_WT_PLAIN, QS_GPTQ_DEFAULTS, 20};
    (void)plain;
    assert_int_equal(qs_llm_clone(&p, &m, &e), 0);
    assert_int_equal(qs_llm_quantize_weights(&p, &w, 1, &e), 0);
    for (int l = 0; l < 2; l++)
        for (int s = 0; s < 4; s++) {
            float *W0[3], *Wg[3], *Wp[3];
            size_t rows[3];
            int nm = qs_llm_site_mats(&m.c, &m.L[l], s, W0, rows);
            qs_llm_site_mats(&m.c, &a.L[l], s, Wg, rows);
            qs_llm_site_mats(&m.c, &p.L[l], s, Wp, rows);
            const qs_calib_site *cs = qs_calib_at(&c, l, s);
            for (int k = 0; k < nm; k++) {
                double eg = qs_gptq_layer_err(Wg[k], W0[k], rows[k], cs->n, cs->H), ep = qs_gptq_layer_err(Wp[k], W0[k], rows[k], cs->n, cs->H);
                assert_true(eg <= ep);
            }
        }
    qs_llm_free(&a); qs_llm_free(&b); qs_llm_free(&p);
    qs_calib_free(&ca); qs_calib_free(&cb); qs_calib_free(&c);
    for (int l = 0; l < 2; l++)
        for (int s = 0; s < 4; s++) free(tp.x[l][s]);
    qs_llm_free(&m);
}

/* AWQ's point is its grid's least output error, the error measured from the inputs X themselves:
** mean over tokens of ||(Q(W diag s) diag(1/s) - W) x||^2. */
static void test_awq_grid(void **st)
{
    (void)st;
    qs_llm_model m;
    build(&m);
    int32_t cal[NTOK];
    tokens(cal, NTOK, 11);
    taps tp;
    capture_x(&m, cal, &tp);
    qs_calib_src src = src_of(cal, 0);
    qs_calib c = {0};
    qs_err e = {{0}};
    assert_int_equal(qs_calib_capture(&c, &m, &src, 0, 1, &e), 0);
    qs_apply w;
    memset(&w, 0, sizeof w);
    w.f = qs_format_find("int4");
    w.o.block = 8;
    w.axis = 1;
    const int site = QS_SITE_FFN_IN, G = 20;
    const qs_calib_site *cs = qs_calib_at(&c, 0, site);
    float *W[3], s[D], sg[D];
    size_t rows[3];
    int nm = qs_llm_site_mats(&m.c, &m.L[0], site, W, rows);
    double a, err[G];
    assert_int_equal(qs_awq_search(&w, 1, W, rows, nm, D, cs->H, cs->xmean, G, s, &a, err, &e), 0);
    int best = 0;
    for (int i = 0; i < G; i++) {
        double mx = 0, mn = INFINITY, tot = 0;
        for (int j = 0; j < D; j++) { sg[j] = (float)pow(fmax(cs->xmean[j], 1e-4), (double)i / G); mx = fmax(mx, sg[j]); mn = fmin(mn, sg[j]); }
        for (int j = 0; j < D; j++) sg[j] = (float)(sg[j] / sqrt(mx * mn));
        for (int k = 0; k < nm; k++) {
            float *q = malloc(rows[k] * D * sizeof *q);
            for (size_t r = 0; r < rows[k]; r++)
                for (int j = 0; j < D; j++) q[r * D + j] = W[k][r * D + j] * sg[j];
            assert_int_equal(qs_llm_quant_matrix(&w, 1, q, rows[k], D, &e), 0);
            for (size_t r = 0; r < rows[k]; r++)
                for (int j = 0; j < D; j++) q[r * D + j] /= sg[j];
            const float *x = tp.x[0][site];
            for (size_t n = 0; n < tp.n[0][site]; n++)
                for (size_t r = 0; r < rows[k]; r++) {
                    double y = 0;
                    for (int j = 0; j < D; j++) y += ((double)q[r * D + j] - W[k][r * D + j]) * x[n * D + j];
                    tot += y * y / (double)tp.n[0][site];
                }
            free(q);
        }
        assert_true(fabs(tot - err[i]) <= 1e-6 * tot);
        if (tot < err[best] - 1e-12 * tot) best = i;
    }
    print_message("# AWQ int4 ffn_in: chosen a = %.2f, error %.4g (a = 0: %.4g)\n", a, err[(int)lround(a * G)], err[0]);
    assert_true(fabs(a - (double)best / G) < 1e-12);
    assert_true(err[best] <= err[0]);
    qs_calib_free(&c);
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < 4; k++) free(tp.x[l][k]);
    qs_llm_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smooth_invariance),
        cmocka_unit_test(test_capture_hessian),
        cmocka_unit_test(test_awq_grid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
