/* The Gemma block (kernels/llm_gemma.c): the KV cache and the sliding window across calls (a pass
** position by position, and in two pieces, equal the pass of all positions at once), forward_from a
** middle layer, the layer pattern, the arena holding the extra norms (clone), the final soft-cap in
** the logits, the configuration checks, and the decoder / training refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/llm.h"
#include "../../kernels/llm_decode.h"
#include "../../kernels/llm_gemma.h"
#include "../../kernels/llm_train.h"

static qs_llm_cfg gemma_cfg(void)
{
    return (qs_llm_cfg){.n_layer = 4, .dim = 16, .n_head = 4, .n_kv_head = 2, .head_dim = 6, .ffn = 24, .vocab = 40,
                        .ctx = 32, .rope_base = 1e6f, .eps = 1e-6f, .rope_neox = 1, .ffn_gelu = 1, .sandwich = 1,
                        .qk_norm = 1, .emb_scale = 4.0f, .attn_scale = 0.3f, .attn_softcap = 3.0f,
                        .final_softcap = 6.0f, .sliding_window = 3, .swa_pattern = 2, .rope_base_swa = 10000.0f,
                        .rope_linear = 2.0f};
}

static void fill(qs_llm_model *m)
{
    for (size_t i = 0; i < m->arena_len; i++) m->arena[i] = 0.4f * sinf(0.7f * (float)i + 0.3f) + (i % 7 == 0 ? 0.9f : 0);
}

static float maxdiff(const float *a, const float *b, size_t n)
{
    float d = 0;
    for (size_t i = 0; i < n; i++) d = fmaxf(d, fabsf(a[i] - b[i]));
    return d;
}

/* 12 positions at once == one at a time == 5 + 7 (the window of 3 crosses the call boundary) */
static void test_cache_across_calls(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_cfg c = gemma_cfg();
    qs_llm_model m;
    assert_int_equal(qs_llm_alloc(&m, &c, 1, &e), 0);
    fill(&m);
    enum { T = 12 };
    int32_t tok[T];
    for (int t = 0; t < T; t++) tok[t] = (t * 7 + 3) % c.vocab;
    float all[T * 16], one[T * 16], two[T * 16];
    qs_llm_state *s = qs_llm_state_new(&c, 1, T, T, &e);
    assert_non_null(s);
    assert_int_equal(qs_llm_forward(&m, NULL, s, tok, 1, T, 0, all, NULL, NULL, &e), 0);
    for (int t = 0; t < T; t++) assert_int_equal(qs_llm_forward(&m, NULL, s, tok + t, 1, 1, t, one + t * 16, NULL, NULL, &e), 0);
    assert_int_equal(qs_llm_forward(&m, NULL, s, tok, 1, 5, 0, two, NULL, NULL, &e), 0);
    assert_int_equal(qs_llm_forward(&m, NULL, s, tok + 5, 1, 7, 5, two + 5 * 16, NULL, NULL, &e), 0);
    assert_true(maxdiff(all, one, T * 16) < 1e-5f);
    assert_true(maxdiff(all, two, T * 16) < 1e-5f);
    /* the window matters: without it (the same local layers and their RoPE) the later positions differ */
    qs_llm_model w = m;
    w.c.sliding_window = 0;
    qs_llm_state *s2 = qs_llm_state_new(&w.c, 1, T, T, &e);
    float nowin[T * 16];
    assert_int_equal(qs_llm_forward(&w, NULL, s2, tok, 1, T, 0, nowin, NULL, NULL, &e), 0);
    assert_true(maxdiff(all, nowin, 3 * 16) < 1e-6f);   /* positions 0..2 see the same keys */
    assert_true(maxdiff(all + 3 * 16, nowin + 3 * 16, (T - 3) * 16) > 1e-3f);
    qs_llm_state_free(s2);
    qs_llm_state_free(s);
    qs_llm_free(&m);
}

/* past one tile of query rows (128): 300 positions at once == one at a time */
static void test_tiles(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_cfg c = gemma_cfg();
    c.ctx = 300;
    c.sliding_window = 150;
    qs_llm_model m;
    assert_int_equal(qs_llm_alloc(&m, &c, 1, &e), 0);
    fill(&m);
    enum { T = 300 };
    int32_t *tok = malloc(T * sizeof *tok);
    float *all = malloc(T * 16 * sizeof(float)), *one = malloc(T * 16 * sizeof(float));
    for (int t = 0; t < T; t++) tok[t] = (t * 11 + 5) % c.vocab;
    qs_llm_state *s = qs_llm_state_new(&c, 1, T, T, &e);
    assert_non_null(s);
    assert_int_equal(qs_llm_forward(&m, NULL, s, tok, 1, T, 0, all, NULL, NULL, &e), 0);
    for (int t = 0; t < T; t++) assert_int_equal(qs_llm_forward(&m, NULL, s, tok + t, 1, 1, t, one + t * 16, NULL, NULL, &e), 0);
    assert_true(maxdiff(all, one, T * 16) < 1e-5f);
    free(tok); free(all); free(one);
    qs_llm_state_free(s);
    qs_llm_free(&m);
}

static void capture_resid(void *ctx, int layer, qs_llm_site site, const float *x, int rows, int cols)
{
    if (site == QS_SITE_RESID && layer == 1) memcpy(ctx, x, (size_t)rows * cols * sizeof(float));
}

/* forward_from layer 2 with the residual stream after layer 1 equals the whole pass; the clone
** carries the extra norms (it is the same pass) */
static void test_from_layer_and_clone(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_cfg c = gemma_cfg();
    qs_llm_model m, k;
    assert_int_equal(qs_llm_alloc(&m, &c, 0, &e), 0);
    fill(&m);
    assert_non_null(m.L[3].post_ffn_norm);
    assert_non_null(m.L[3].k_norm);
    assert_int_equal(m.L[0].sliding, 1);
    assert_int_equal(m.L[1].sliding, 0);
    assert_int_equal(qs_llm_clone(&k, &m, &e), 0);
    enum { T = 6 };
    int32_t tok[T] = {1, 5, 9, 2, 33, 7};
    float h1[T * 16], h2[T * 16], h3[T * 16], resid[T * 16];
    qs_llm_state *s = qs_llm_state_new(&c, 1, T, T, &e);
    assert_int_equal(qs_llm_forward(&m, NULL, s, tok, 1, T, 0, h1, capture_resid, resid, &e), 0);
    assert_int_equal(qs_llm_forward_from(&m, NULL, s, tok, 1, T, 0, 2, resid, h2, NULL, NULL, &e), 0);
    assert_memory_equal(h1, h2, sizeof h1);
    assert_int_equal(qs_llm_forward(&k, NULL, s, tok, 1, T, 0, h3, NULL, NULL, &e), 0);
    assert_memory_equal(h1, h3, sizeof h1);
    /* final soft-cap: every logit inside (-6, 6), and the same as capping the raw products */
    float lg[T * 40], raw[T * 40], scr[T * 16];
    assert_int_equal(qs_llm_logits(&m, NULL, h1, T, scr, lg, &e), 0);
    m.c.final_softcap = 0;
    assert_int_equal(qs_llm_logits(&m, NULL, h1, T, scr, raw, &e), 0);
    for (int i = 0; i < T * 40; i++) {
        assert_true(fabsf(lg[i]) < 6.0f);
        assert_true(fabsf(lg[i] - 6.0f * tanhf(raw[i] / 6.0f)) < 1e-6f);
    }
    qs_llm_state_free(s);
    qs_llm_free(&k);
    qs_llm_free(&m);
}

static void test_pattern_and_checks(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_cfg c = gemma_cfg();
    c.swa_pattern = 6;
    c.n_layer = 13;
    for (int l = 0; l < 13; l++) assert_int_equal(qs_llm_gemma_sliding(&c, l), l % 6 != 5);   /* Gemma 3: 5 local, 1 global */
    c.swa_pattern = 0;
    assert_int_equal(qs_llm_gemma_sliding(&c, 5), 1);   /* a window without a pattern: every layer */
    c.sliding_window = 0;
    assert_int_equal(qs_llm_gemma_sliding(&c, 0), 0);
    c = gemma_cfg();
    c.attn_softcap = -1;
    assert_int_equal(qs_llm_cfg_check(&c, &e), -1);
    c = gemma_cfg();
    c.rope_linear = NAN;
    assert_int_equal(qs_llm_cfg_check(&c, &e), -1);
    c = gemma_cfg();
    c.sliding_window = -2;
    assert_int_equal(qs_llm_cfg_check(&c, &e), -1);
    c = gemma_cfg();
    assert_int_equal(qs_llm_cfg_check(&c, &e), 0);
    /* a Llama configuration needs none of it */
    qs_llm_cfg p = {.n_layer = 1, .dim = 8, .n_head = 2, .n_kv_head = 1, .head_dim = 4, .ffn = 12, .vocab = 16, .ctx = 8,
                    .rope_base = 10000, .eps = 1e-5f};
    assert_int_equal(qs_llm_gemma_block(&p), 0);
    assert_int_equal(qs_llm_gemma_layer_floats(&p), 0);
}

static void test_refusals(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_cfg c = gemma_cfg();
    assert_null(qs_llm_dec_new(&c, 2, 16, 2, &e));
    assert_non_null(strstr(e.msg, "the batched decoder runs the Llama block only"));
    memset(&e, 0, sizeof e);
    assert_null(qs_llm_train_state_new(&c, 1, 8, &e));
    assert_non_null(strstr(e.msg, "training runs the Llama block only"));
    c = (qs_llm_cfg){.n_layer = 1, .dim = 8, .n_head = 2, .n_kv_head = 1, .head_dim = 4, .ffn = 12, .vocab = 16, .ctx = 8,
                     .rope_base = 10000, .eps = 1e-5f, .final_softcap = 30};   /* the cap alone: still Gemma's */
    assert_null(qs_llm_dec_new(&c, 2, 16, 2, &e));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_across_calls),
        cmocka_unit_test(test_tiles),
        cmocka_unit_test(test_from_layer_and_clone),
        cmocka_unit_test(test_pattern_and_checks),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
