/*
** Model families beyond the Llama core (kernels/llm_ext.c, llm_moe.c): a mixture of identical experts
** equals the dense FFN, every expert matrix is rounded by qs_llm_quantize_weights (the router is not),
** the sliding window and QK-norm give the same logits on the many-row path and one token at a time,
** and the paths that run only the core (decoder, training) refuse the rest naming the architecture.
** The logits themselves are checked against tests/llm/torch_ref.py by tests/e2e/llm_models.sh.
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/format.h"
#include "../../kernels/llm.h"
#include "../../kernels/llm_adamw.h"
#include "../../kernels/llm_decode.h"
#include "../../kernels/llm_train.h"

static const qs_llm_cfg kBase = {.n_layer = 2, .dim = 32, .n_head = 4, .n_kv_head = 2, .head_dim = 8, .ffn = 24,
                                 .vocab = 40, .ctx = 64, .rope_base = 10000, .eps = 1e-5f, .rope_neox = 1};

static void fill(float *p, size_t n, unsigned seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 0.5f;
    }
}

/* Logits of T tokens: one call of T rows (step 0), one token per call (step 1: the few-row paths), or
** the first `step` tokens then the rest in a second call (attention tiles over a cache, unpacked). */
static void logits(const qs_llm_model *m, int T, int step, float *out)
{
    qs_err e = {{0}};
    qs_llm_state *s = qs_llm_state_new(&m->c, 1, T, T, &e);
    assert_non_null(s);
    int32_t tok[64];
    for (int t = 0; t < T; t++) tok[t] = (t * 7 + 3) % m->c.vocab;
    float *h = malloc((size_t)T * m->c.dim * sizeof(float)), *sc = malloc((size_t)T * m->c.dim * sizeof(float));
    assert_non_null(h);
    assert_non_null(sc);
    if (!step) assert_int_equal(qs_llm_forward(m, NULL, s, tok, 1, T, 0, h, NULL, NULL, &e), 0);
    else if (step > 1) {
        assert_int_equal(qs_llm_forward(m, NULL, s, tok, 1, step, 0, h, NULL, NULL, &e), 0);
        assert_int_equal(qs_llm_forward(m, NULL, s, tok + step, 1, T - step, step, h + (size_t)step * m->c.dim, NULL, NULL, &e), 0);
    } else
        for (int t = 0; t < T; t++)
            assert_int_equal(qs_llm_forward(m, NULL, s, tok + t, 1, 1, t, h + (size_t)t * m->c.dim, NULL, NULL, &e), 0);
    assert_int_equal(qs_llm_logits(m, NULL, h, T, sc, out, &e), 0);
    free(h); free(sc);
    qs_llm_state_free(s);
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        mx = fmax(mx, fabs((double)b[i]));
    }
    return d / mx;
}

static void dense(qs_llm_model *m, const qs_llm_cfg *c)
{
    qs_err e = {{0}};
    assert_int_equal(qs_llm_alloc(m, c, 1, &e), 0);
    fill(m->arena, m->arena_len, 1);
    for (int l = 0; l < c->n_layer; l++)
        for (int i = 0; i < c->dim; i++) m->L[l].attn_norm[i] = m->L[l].ffn_norm[i] = 1 + 0.1f * m->L[l].attn_norm[i];
    if (m->ext_arena) fill(m->ext_arena, m->ext_len, 2);
    for (int l = 0; l < c->n_layer && c->qk_norm; l++)
        for (int i = 0; i < c->head_dim; i++) { m->L[l].q_norm[i] += 1; m->L[l].k_norm[i] += 1; }
}

/* Two identical experts, both used, renormalised: the dense FFN (many rows and one at a time). */
static void test_moe_equals_dense(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_model md, mm;
    dense(&md, &kBase);
    qs_llm_cfg c = kBase;
    c.n_expert = c.n_expert_used = 2;
    c.moe_norm_topk = 1;
    assert_int_equal(qs_llm_alloc(&mm, &c, 1, &e), 0);
    assert_null(mm.L[0].w_gate);
    fill(mm.ext_arena, mm.ext_len, 3);   /* the routers */
    const size_t d = (size_t)c.dim, f = (size_t)c.ffn, V = (size_t)c.vocab;
    memcpy(mm.tok_embd, md.tok_embd, V * d * sizeof(float));
    memcpy(mm.out_norm, md.out_norm, d * sizeof(float));
    for (int l = 0; l < c.n_layer; l++) {
        qs_llm_layer *a = &md.L[l], *b = &mm.L[l];
        float *src[6] = {a->attn_norm, a->wq, a->wk, a->wv, a->wo, a->ffn_norm}, *dst[6] = {b->attn_norm, b->wq, b->wk, b->wv, b->wo, b->ffn_norm};
        size_t len[6] = {d, qs_llm_q_dim(&c) * d, 16 * d, 16 * d, d * qs_llm_q_dim(&c), d};
        for (int i = 0; i < 6; i++) memcpy(dst[i], src[i], len[i] * sizeof(float));
        for (int x = 0; x < 2; x++) {
            memcpy(b->moe.gate + x * f * d, a->w_gate, f * d * sizeof(float));
            memcpy(b->moe.up + x * f * d, a->w_up, f * d * sizeof(float));
            memcpy(b->moe.down + x * f * d, a->w_down, f * d * sizeof(float));
        }
    }
    float *ld = malloc(20 * V * sizeof(float)), *lm = malloc(20 * V * sizeof(float));
    assert_non_null(ld);
    assert_non_null(lm);
    for (int step = 0; step < 2; step++) {
        logits(&md, 20, step, ld);
        logits(&mm, 20, step, lm);
        assert_true(rel_diff(lm, ld, 20 * V) < 1e-5);
    }
    /* a clone carries the experts */
    qs_llm_model cl;
    assert_int_equal(qs_llm_clone(&cl, &mm, &e), 0);
    assert_int_equal(cl.ext_len, mm.ext_len);
    assert_memory_equal(cl.ext_arena, mm.ext_arena, mm.ext_len * sizeof(float));
    assert_ptr_equal(cl.L[1].moe.router - cl.ext_arena, mm.L[1].moe.router - mm.ext_arena);
    qs_llm_free(&cl);
    free(ld); free(lm);
    qs_llm_free(&md); qs_llm_free(&mm);
}

/* Weight rounding reaches every expert matrix and the shared expert, never the routers. */
static void test_moe_quantize(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_cfg c = kBase;
    c.n_expert = 4; c.n_expert_used = 2; c.ffn_shexp = 32;
    qs_llm_model m, q;
    dense(&m, &c);
    assert_int_equal(qs_llm_clone(&q, &m, &e), 0);
    qs_apply a;
    memset(&a, 0, sizeof a);
    a.f = qs_format_find("mxfp4");
    assert_non_null(a.f);
    a.axis = 1;
    assert_int_equal(qs_llm_quantize_weights(&q, &a, 1, &e), 0);
    const size_t d = (size_t)c.dim, f = (size_t)c.ffn;
    for (int l = 0; l < c.n_layer; l++) {
        const qs_llm_moe_w *w0 = &m.L[l].moe, *w1 = &q.L[l].moe;
        assert_memory_equal(w0->router, w1->router, 4 * d * sizeof(float));
        assert_memory_equal(w0->sh_inp, w1->sh_inp, d * sizeof(float));
        for (int x = 0; x < 4; x++) {
            float want[32 * 24];
            assert_int_equal(qs_llm_fakeq_row(&a, 1, w0->up + x * f * d, (int)d, want, &e), 0);   /* first row, one block */
            assert_memory_equal(w1->up + x * f * d, want, d * sizeof(float));
            assert_true(memcmp(w0->gate + x * f * d, w1->gate + x * f * d, f * d * sizeof(float)) != 0);
            assert_true(memcmp(w0->down + x * f * d, w1->down + x * f * d, f * d * sizeof(float)) != 0);
        }
        assert_true(memcmp(w0->sh_down, w1->sh_down, 32 * d * sizeof(float)) != 0);
    }
    qs_llm_free(&m); qs_llm_free(&q);
}

/* Sliding window and QK-norm: the many-row path (tiles) and one token at a time agree; a window
** covering every position changes nothing, a shorter one does. */
static void test_window_and_qk_norm(void **st)
{
    (void)st;
    qs_llm_cfg c = kBase;
    c.qk_norm = 1;
    qs_llm_model m;
    dense(&m, &c);
    const size_t V = (size_t)c.vocab;
    float *a = malloc(24 * V * sizeof(float)), *b = malloc(24 * V * sizeof(float)), *full = malloc(24 * V * sizeof(float));
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(full);
    logits(&m, 24, 0, full);
    logits(&m, 24, 1, b);
    assert_true(rel_diff(b, full, 24 * V) < 1e-5);
    for (int l = 0; l < c.n_layer; l++) m.L[l].sliding = 1;
    m.c.sliding_window = 24;
    logits(&m, 24, 0, a);
    assert_memory_equal(a, full, 24 * V * sizeof(float));
    m.c.sliding_window = 5;
    logits(&m, 24, 0, a);
    logits(&m, 24, 1, b);
    assert_true(rel_diff(b, a, 24 * V) < 1e-5);
    logits(&m, 24, 10, b);   /* 10 positions, then 14 attending over the cache */
    assert_true(rel_diff(b, a, 24 * V) < 1e-5);
    assert_memory_equal(a, full, 5 * V * sizeof(float));   /* the first 5 positions see everything anyway */
    assert_true(rel_diff(a, full, 24 * V) > 1e-3);
    free(a); free(b); free(full);
    qs_llm_free(&m);
}

/* The decoder and training refuse what they do not run, naming the architecture. */
static void test_core_only(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_cfg c = kBase;
    snprintf(c.arch, sizeof c.arch, "qwen3");
    c.qk_norm = 1;
    assert_null(qs_llm_dec_new(&c, 2, 16, 4, &e));
    assert_string_equal(e.msg, "qwen3: the batched decoder (rl grpo, sampling) does not run QK-norm (per-head Q/K RMSNorm)");
    assert_null(qs_llm_train_state_new(&c, 2, 16, &e));
    assert_string_equal(e.msg, "qwen3: training does not run QK-norm (per-head Q/K RMSNorm)");
    c = kBase;
    snprintf(c.arch, sizeof c.arch, "mixtral");
    c.n_expert = 4; c.n_expert_used = 2;
    assert_null(qs_llm_train_state_new(&c, 2, 16, &e));
    assert_string_equal(e.msg, "mixtral: training does not run mixture-of-experts FFNs");
    qs_llm_model mm;   /* nor its optimizer (the dense FFN pointers of a MoE model are NULL) */
    assert_int_equal(qs_llm_alloc(&mm, &c, 1, &e), 0);
    qs_adamw opt;
    assert_int_equal(qs_adamw_new(&opt, &mm, &e), -1);
    assert_string_equal(e.msg, "mixtral: training does not run mixture-of-experts FFNs");
    qs_llm_free(&mm);
    c = kBase;
    snprintf(c.arch, sizeof c.arch, "llama");
    c.rope_nff = c.head_dim / 2;
    for (int i = 0; i < c.rope_nff; i++) c.rope_ff[i] = 1;
    assert_null(qs_llm_dec_new(&c, 2, 16, 4, &e));
    assert_non_null(strstr(e.msg, "llama: the batched decoder (rl grpo, sampling) does not run RoPE frequency factors"));
    c = kBase;
    snprintf(c.arch, sizeof c.arch, "mistral");
    c.sliding_window = 16;   /* a window no shorter than the positions changes nothing: runs */
    qs_llm_dec *d = qs_llm_dec_new(&c, 2, 16, 4, &e);
    assert_non_null(d);
    qs_llm_dec_free(d);
    assert_null(qs_llm_dec_new(&c, 2, 17, 4, &e));
    assert_string_equal(e.msg, "mistral: the batched decoder (rl grpo, sampling) does not run sliding-window attention (window 16 < 17 positions)");
    /* inconsistent extras are refused by the configuration check */
    c = kBase;
    c.n_expert = 4; c.n_expert_used = 5;
    assert_int_equal(qs_llm_cfg_check(&c, &e), -1);
    c = kBase;
    c.rope_nff = 3;
    assert_int_equal(qs_llm_cfg_check(&c, &e), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moe_equals_dense),
        cmocka_unit_test(test_moe_quantize),
        cmocka_unit_test(test_window_and_qk_norm),
        cmocka_unit_test(test_core_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
