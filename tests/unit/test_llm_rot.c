/*
** rot= and rht= (kernels/llm_rot.h): on random models of widths that are not powers of two (Paley I and
** II cores), with non-unit norms, Q/K/V biases, tied and untied embeddings, the transformed model with
** its online transforms computes the FP32 logits of the original to ~1e-5 relative, in the prefill's
** panel path, the few-row path and split calls alike; formats then see other values; unsupported
** widths and the decoder are refused in one line; the specs parse and print canonically.
*/
#include "test_util.h"
#include "test_llm_util.h"

#include <math.h>

#include "../../kernels/format.h"
#include "../../kernels/llm_decode.h"
#include "../../kernels/llm_rot.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float urand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 - 0.5);
}

static void make_model(qs_llm_model *m, const qs_llm_cfg *c, int tied, int bias)
{
    qs_err e = {{0}};
    assert_int_equal(qs_llm_alloc(m, c, tied, &e), 0);
    if (bias) assert_int_equal(qs_llm_alloc_bias(m, &e), 0);
    for (size_t i = 0; i < m->arena_len; i++) m->arena[i] = 0.3f * urand();
    for (size_t i = 0; i < m->bias_len; i++) m->bias_arena[i] = 0.3f * urand();
    for (int i = 0; i < c->dim; i++) {   /* norms far from 1, and an outlier channel */
        m->out_norm[i] = 1 + urand();
        for (int l = 0; l < c->n_layer; l++) { m->L[l].attn_norm[i] = 1 + urand(); m->L[l].ffn_norm[i] = 0.5f + urand(); }
    }
    for (int v = 0; v < c->vocab; v++) m->tok_embd[(size_t)v * c->dim + 3] *= 20;
}

/* Logits of T tokens, in calls of `step` positions. */
static float *logits(const qs_llm_model *m, const qs_llm_numerics *nx, int T, int step)
{
    const int d = m->c.dim, V = m->c.vocab;
    qs_err e = {{0}};
    qs_llm_state *s = qs_llm_state_new(&m->c, 1, T, T, &e);
    assert_non_null(s);
    int32_t *tok = malloc((size_t)T * sizeof *tok);
    float *hid = malloc((size_t)T * d * sizeof(float)), *scr = malloc((size_t)T * d * sizeof(float));
    float *out = malloc((size_t)T * V * sizeof(float));
    for (int t = 0; t < T; t++) tok[t] = (t * 37 + 5) % V;
    for (int p = 0; p < T; p += step) {
        const int n = T - p < step ? T - p : step;
        if (qs_llm_forward(m, nx, s, tok + p, 1, n, p, hid + (size_t)p * d, NULL, NULL, &e)) fail_msg("forward: %s", e.msg);
    }
    if (qs_llm_logits(m, nx, hid, T, scr, out, &e)) fail_msg("logits: %s", e.msg);
    qs_llm_state_free(s);
    free(tok); free(hid); free(scr);
    return out;
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) { num = fmax(num, fabs((double)a[i] - b[i])); den = fmax(den, fabs((double)a[i])); }
    return num / den;
}

static void invariant(const qs_llm_model *m, const char *spec_rot, const char *spec_rht, const char *what)
{
    qs_llm_xspec x;
    memset(&x, 0, sizeof x);
    qs_err e = {{0}};
    if (spec_rot) assert_int_equal(qs_llm_xspec_parse(&x, "rot", spec_rot, &e), 0);
    if (spec_rht) assert_int_equal(qs_llm_xspec_parse(&x, "rht", spec_rht, &e), 0);
    qs_llm_model t;
    qs_llm_online *on = NULL;
    if (qs_llm_transform(&t, m, &x, &on, &e)) fail_msg("%s: %s", what, e.msg);
    qs_llm_numerics nx = {NULL, QS_RESQ_NONE, NULL, 1, NULL, on};
    const int T = 40, steps[3] = {40, 3, 17};   /* panel path; few rows; mixed with pos0 > 0 */
    const size_t n = (size_t)T * m->c.vocab;
    float *ref = logits(m, NULL, T, T);
    for (int k = 0; k < 3; k++) {
        float *got = logits(&t, &nx, T, steps[k]);
        double r = rel_diff(ref, got, n);
        if (!(r < 2e-5)) fail_msg("%s, calls of %d: logits differ by %g relative", what, steps[k], r);
        free(got);
    }
    /* without the online part the function changes (the transform is really there) */
    qs_llm_numerics off = {NULL, QS_RESQ_NONE, NULL, 1, NULL, NULL};
    float *bad = logits(&t, &off, T, T);
    if ((x.rot && x.down) || x.rht) assert_true(rel_diff(ref, bad, n) > 1e-3);
    free(bad);
    free(ref);
    qs_llm_online_free(on);
    qs_llm_free(&t);
}

/* dim 48 = 12 x 4 (Paley I), head_dim 12, ffn 80 = 20 x 4; dim 72 = 36 x 2 (Paley II), ffn 96 = 12 x 8. */
static void test_fold_invariance(void **st)
{
    (void)st;
    qs_llm_cfg a = {.n_layer = 2, .dim = 48, .n_head = 4, .n_kv_head = 2, .head_dim = 12, .ffn = 80, .vocab = 150, .ctx = 64, .rope_base = 10000.0f, .eps = 1e-5f};
    qs_llm_cfg b = {.n_layer = 2, .dim = 72, .n_head = 6, .n_kv_head = 3, .head_dim = 12, .ffn = 96, .vocab = 130, .ctx = 64, .rope_base = 10000.0f, .eps = 1e-6f, .rope_neox = 1};
    qs_llm_cfg c = {.n_layer = 2, .dim = 64, .n_head = 4, .n_kv_head = 2, .head_dim = 16, .ffn = 96, .vocab = 140, .ctx = 64, .rope_base = 10000.0f, .eps = 1e-5f};
    qs_llm_model m;
    make_model(&m, &a, 0, 1);
    invariant(&m, "hadamard", NULL, "dim 48 untied, biases, hadamard");
    invariant(&m, "hadamard:seed=5", NULL, "dim 48, hadamard signed");
    invariant(&m, "random:seed=2", NULL, "dim 48, random");
    invariant(&m, "hadamard:down=0:vo=0", NULL, "dim 48, residual only");
    qs_llm_free(&m);
    make_model(&m, &b, 1, 0);
    invariant(&m, "hadamard:seed=1", NULL, "dim 72 tied, hadamard");
    invariant(&m, "random", NULL, "dim 72 tied, random");
    qs_llm_free(&m);
    make_model(&m, &c, 1, 1);
    invariant(&m, NULL, "16", "dim 64 tied, rht");
    invariant(&m, NULL, "16:seed=9", "dim 64, rht seeded");
    invariant(&m, "hadamard:seed=3", "16:seed=4", "dim 64, rot and rht");
    qs_llm_free(&m);
}

/* Under a format the transformed model rounds other values (a finite, different result); with tied
** embeddings the rounded head serves the lookup in the original, so the transformed model's own
** embedding is rounded too. */
static void test_formats(void **st)
{
    (void)st;
    qs_llm_cfg c = {.n_layer = 2, .dim = 64, .n_head = 4, .n_kv_head = 2, .head_dim = 16, .ffn = 96, .vocab = 140, .ctx = 64, .rope_base = 10000.0f, .eps = 1e-5f};
    qs_llm_model m, t, w;
    make_model(&m, &c, 1, 0);
    qs_llm_xspec x = {QS_ROT_HADAMARD, 0, 1, 1, 0, 0};
    qs_llm_online *on = NULL;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_transform(&t, &m, &x, &on, &e), 0);
    qs_apply mx = tu_apply("mxfp4");
    assert_int_equal(qs_llm_clone(&w, &t, &e), 0);
    assert_int_equal(qs_llm_transform_quantize(&w, &m, &mx, 1, &e), 0);
    float row[64];   /* a rounded row is its own rounding */
    assert_int_equal(qs_llm_fakeq_row(&mx, 1, w.tok_embd + 64 * 7, 64, row, &e), 0);
    assert_memory_equal(row, w.tok_embd + 64 * 7, sizeof row);
    assert_true(memcmp(w.tok_embd, t.tok_embd, 64 * sizeof(float)) != 0);
    qs_llm_numerics nx = {&mx, QS_RESQ_NONE, NULL, 1, NULL, on};
    float *a = logits(&w, &nx, 24, 24), *ref = logits(&m, NULL, 24, 24);
    double r = rel_diff(ref, a, (size_t)24 * c.vocab);
    assert_true(isfinite(r) && r > 1e-4);
    free(a); free(ref);
    /* the decoder refuses the online transforms (one line) */
    qs_llm_dec *d = qs_llm_dec_new(&c, 1, 8, 8, &e);
    assert_non_null(d);
    int32_t tok = 1;
    int slot = 0, pos = 0;
    float hid[64];
    assert_int_equal(qs_llm_dec_step(&w, &nx, d, &tok, &slot, &pos, 1, hid, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "rot= and rht="));
    qs_llm_dec_free(d);
    qs_llm_online_free(on);
    qs_llm_free(&w); qs_llm_free(&t); qs_llm_free(&m);
}

static void test_refusals(void **st)
{
    (void)st;
    static const struct { qs_llm_cfg c; const char *rot, *rht, *msg; } k[] = {
        {{.n_layer = 1, .dim = 100, .n_head = 4, .n_kv_head = 2, .head_dim = 16, .ffn = 64, .vocab = 50, .ctx = 16, .rope_base = 1e4f, .eps = 1e-5f}, "hadamard", NULL, "rot: residual width: no Hadamard matrix of order 100 "},
        {{.n_layer = 1, .dim = 48, .n_head = 4, .n_kv_head = 2, .head_dim = 10, .ffn = 64, .vocab = 50, .ctx = 16, .rope_base = 1e4f, .eps = 1e-5f}, "hadamard", NULL, "rot: head dimension (vo=0 leaves V/O unrotated): no Hadamard matrix of order 10 "},
        {{.n_layer = 1, .dim = 48, .n_head = 4, .n_kv_head = 2, .head_dim = 12, .ffn = 100, .vocab = 50, .ctx = 16, .rope_base = 1e4f, .eps = 1e-5f}, "random", NULL, "rot: FFN width (down=0 drops the online Hadamard): no Hadamard matrix of order 100 "},
        {{.n_layer = 1, .dim = 40, .n_head = 4, .n_kv_head = 2, .head_dim = 10, .ffn = 64, .vocab = 50, .ctx = 16, .rope_base = 1e4f, .eps = 1e-5f}, NULL, "16", "rht=16: a linear layer's input width (dim 40, heads x head_dim 40, ffn 64) is not a multiple of 16"},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        qs_llm_model m, t;
        make_model(&m, &k[i].c, 0, 0);
        qs_llm_xspec x;
        memset(&x, 0, sizeof x);
        qs_err e = {{0}};
        if (k[i].rot) assert_int_equal(qs_llm_xspec_parse(&x, "rot", k[i].rot, &e), 0);
        if (k[i].rht) assert_int_equal(qs_llm_xspec_parse(&x, "rht", k[i].rht, &e), 0);
        qs_llm_online *on = (qs_llm_online *)&x;
        assert_int_equal(qs_llm_transform(&t, &m, &x, &on, &e), -1);
        assert_null(on);
        assert_null(t.arena);
        if (!strstr(e.msg, k[i].msg)) fail_msg("case %zu: '%s'", i, e.msg);
        qs_llm_free(&m);
    }
}

static void test_specs(void **st)
{
    (void)st;
    static const struct { const char *key, *val, *text; } ok[] = {
        {"rot", "hadamard", "hadamard"}, {"rot", "hadamard:seed=0", "hadamard"}, {"rot", "hadamard:seed=7", "hadamard:seed=7"},
        {"rot", "random", "random:seed=0"}, {"rot", "random:vo=0:seed=3", "random:seed=3:vo=0"},
        {"rot", "hadamard:down=0", "hadamard:down=0"}, {"rot", "none", ""}, {"rht", "16", "16"},
        {"rht", "16:seed=12", "16:seed=12"}, {"rht", "none", ""}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        qs_llm_xspec x;
        memset(&x, 0, sizeof x);
        qs_err e = {{0}};
        if (qs_llm_xspec_parse(&x, ok[i].key, ok[i].val, &e)) fail_msg("%s=%s: %s", ok[i].key, ok[i].val, e.msg);
        char buf[64];
        qs_llm_xspec_text(&x, ok[i].key, buf, sizeof buf);
        if (strcmp(buf, ok[i].text)) fail_msg("%s=%s printed '%s'", ok[i].key, ok[i].val, buf);
    }
    static const struct { const char *key, *val, *msg; } bad[] = {
        {"rot", "walsh", "not a rotation"}, {"rot", "hadamard:seed=-1", "not a valid value of seed"},
        {"rot", "hadamard:down=2", "not a valid value of down"}, {"rot", "hadamard:x=1", "unknown option 'x'"},
        {"rot", "hadamard:seed", "not NAME=VALUE"}, {"rot", "none:seed=1", "not a rotation"},
        {"rht", "32", "only the 16-point"}, {"rht", "16:vo=0", "unknown option 'vo'"}, {"rht", "16:seed=x", "not a valid value"},
        {"smooth", "0.5", "unknown transform key"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        qs_llm_xspec x;
        memset(&x, 0, sizeof x);
        qs_err e = {{0}};
        assert_int_equal(qs_llm_xspec_parse(&x, bad[i].key, bad[i].val, &e), -1);
        if (!strstr(e.msg, bad[i].msg)) fail_msg("%s=%s: '%s'", bad[i].key, bad[i].val, e.msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_invariance),
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
