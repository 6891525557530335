/*
** The batched decoder's fused passes (kernels/llm_decode_fused.c) and its attention vectorised across
** keys and heads (kernels/llm_dec_attn.c) against the pass-by-pass step and the one-key-at-a-time
** attention: the same bits for every hidden row, logit and underflow counter, over prefill calls
** (several rows of one sequence: attention in a pass of its own) and decode calls (attention fused into
** the QKV pass), with and without rounding, Q/K/V biases, and weights not laid out adjacently.
*/
#include "test_util.h"
#include "test_llm_util.h"

#include <math.h>

#include "../../kernels/format.h"
#include "../../kernels/llm_dec_attn.h"
#include "../../kernels/llm_decode.h"
#include "../../store/llm_load.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float urand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 - 0.5);
}

/* head sizes (a multiple of 8 or not), 1 .. 40 keys (eight at a time and the tails), two head groupings */
static void test_attn_row_bits(void **state)
{
    (void)state;
    static const int hds[] = {8, 16, 24, 32, 64, 12};
    for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
        for (int grp = 1; grp <= 3; grp += 2)
            for (int n = 1; n <= 40; n += 3) {
                const int hd = hds[a], nkv = 2, nh = nkv * grp, kvd = nkv * hd;
                float *q = malloc(sizeof(float) * nh * hd), *k = malloc(sizeof(float) * n * kvd), *v = malloc(sizeof(float) * n * kvd);
                float *o1 = malloc(sizeof(float) * nh * hd), *o2 = malloc(sizeof(float) * nh * hd), *S = malloc(sizeof(float) * nh * n);
                for (int i = 0; i < nh * hd; i++) q[i] = 3 * urand();
                for (int i = 0; i < n * kvd; i++) { k[i] = 3 * urand(); v[i] = urand(); }
                qs_dec_attn_row(o1, q, k, v, kvd, n, nh, hd, grp, 1.0f / sqrtf((float)hd), S, 0);
                qs_dec_attn_row(o2, q, k, v, kvd, n, nh, hd, grp, 1.0f / sqrtf((float)hd), S, 1);
                if (memcmp(o1, o2, sizeof(float) * nh * hd)) fail_msg("head_dim %d, %d keys, groups of %d: other bits", hd, n, grp);
                free(q); free(k); free(v); free(o1); free(o2); free(S);
            }
}

/* Prefill 3 prompts of different lengths into slots 0, 1, 2 (one call), then 5 decode steps of the
** 3 sequences (one row each, every one at its own position): hidden rows, logits, counters. */
static void run(qs_llm_dec *d, const qs_llm_model *m, const qs_llm_numerics *nx, float *hid, float *lg, uint64_t *uf)
{
    static const int lens[3] = {5, 11, 17};
    const int V = m->c.vocab, dm = m->c.dim;
    int32_t tok[64];
    int slot[64], pos[64], R = 0;
    qs_err e = {{0}};
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < lens[s]; t++, R++) { tok[R] = (s * 37 + t * 11 + 1) % V; slot[R] = s; pos[R] = t; }
    assert_int_equal(qs_llm_dec_step(m, nx, d, tok, slot, pos, R, hid, uf, &e), 0);
    assert_int_equal(qs_llm_dec_logits(m, nx, d, hid, R, lg, uf, &e), 0);
    hid += (size_t)R * dm; lg += (size_t)R * V;
    for (int step = 0; step < 5; step++) {
        for (int s = 0; s < 3; s++) { tok[s] = (step * 13 + s * 7 + 3) % V; slot[s] = s; pos[s] = lens[s] + step; }
        assert_int_equal(qs_llm_dec_step(m, nx, d, tok, slot, pos, 3, hid, uf, &e), 0);
        assert_int_equal(qs_llm_dec_logits(m, nx, d, hid, 3, lg, uf, &e), 0);
        hid += 3 * (size_t)dm; lg += 3 * (size_t)V;
    }
}

static void same_bits(const qs_llm_model *m, const qs_llm_numerics *nx, const char *what)
{
    const size_t rows = 5 + 11 + 17 + 5 * 3, nuf = QS_LLM_UF_LEN(m->c.n_layer);
    float *h[2], *l[2];
    uint64_t *u[2];
    for (int f = 0; f < 2; f++) {
        qs_err e = {{0}};
        h[f] = calloc(rows * m->c.dim, sizeof(float));
        l[f] = calloc(rows * m->c.vocab, sizeof(float));
        u[f] = calloc(nuf, sizeof(uint64_t));
        qs_llm_dec *d = qs_llm_dec_new(&m->c, 3, 64, 64, &e);
        assert_non_null(d);
        qs_llm_dec_set_fused(d, f);
        run(d, m, nx, h[f], l[f], u[f]);
        qs_llm_dec_free(d);
    }
    if (memcmp(h[0], h[1], rows * m->c.dim * sizeof(float))) fail_msg("%s: hidden rows differ", what);
    if (memcmp(l[0], l[1], rows * m->c.vocab * sizeof(float))) fail_msg("%s: logits differ", what);
    if (memcmp(u[0], u[1], nuf * sizeof(uint64_t))) fail_msg("%s: underflow counters differ", what);
    uint64_t any = 0;
    for (size_t i = 0; i < nuf; i++) any += u[0][i];
    if (nx && nx->act && !any) fail_msg("%s: nothing counted", what);
    for (int f = 0; f < 2; f++) { free(h[f]); free(l[f]); free(u[f]); }
}

static void numerics(const qs_llm_model *m, const char *name)
{
    qs_apply a = tu_apply("mxfp4"), kv = tu_apply("fp8_e4m3"), h4 = tu_apply("hif4");
    qs_llm_numerics n1 = {&a, QS_RESQ_NONE, NULL, 1, NULL, NULL}, n2 = {&a, QS_RESQ_DENSE, &kv, 1, NULL, NULL};
    qs_llm_numerics n3 = {&h4, QS_RESQ_NONE, NULL, 1, NULL, NULL}, n4 = {NULL, QS_RESQ_NONE, &kv, 1, NULL, NULL};
    char what[160];
    snprintf(what, sizeof what, "%s fp32", name); same_bits(m, NULL, what);
    snprintf(what, sizeof what, "%s a=mxfp4", name); same_bits(m, &n1, what);
    snprintf(what, sizeof what, "%s a=mxfp4 resq=dense kv=fp8", name); same_bits(m, &n2, what);
    snprintf(what, sizeof what, "%s a=hif4", name); same_bits(m, &n3, what);
    snprintf(what, sizeof what, "%s kv=fp8", name); same_bits(m, &n4, what);
}

static void test_tiny_model(void **state)
{
    (void)state;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    numerics(&f.m, "tiny.gguf");
    qs_llm_file_free(&f);
}

/* A random model with head_dim 32 (the vectorised attention), Q/K/V biases, and then its K, V and up
** weights moved out of line (the products that cannot be one GEMM). */
static void test_synthetic_model(void **state)
{
    (void)state;
    qs_llm_cfg c = {.n_layer = 2, .dim = 128, .n_head = 4, .n_kv_head = 2, .head_dim = 32, .ffn = 192, .vocab = 160,
                    .ctx = 128, .rope_base = 10000.0f, .eps = 1e-5f, .rope_neox = 1};
    qs_llm_model m;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_alloc(&m, &c, 0, &e), 0);
    assert_int_equal(qs_llm_alloc_bias(&m, &e), 0);
    for (size_t i = 0; i < m.arena_len; i++) m.arena[i] = 0.2f * urand();
    for (size_t i = 0; i < m.bias_len; i++) m.bias_arena[i] = 0.2f * urand();
    for (int i = 0; i < c.dim; i++) m.out_norm[i] = 1 + urand();
    numerics(&m, "synthetic");
    const size_t kvw = (size_t)c.n_kv_head * c.head_dim * c.dim, upw = (size_t)c.ffn * c.dim;
    float *keep[2][3], *moved[2][3];
    for (int l = 0; l < c.n_layer; l++) {
        qs_llm_layer *L = &m.L[l];
        keep[l][0] = L->wk; keep[l][1] = L->wv; keep[l][2] = L->w_up;
        moved[l][0] = malloc(kvw * sizeof(float)); moved[l][1] = malloc(kvw * sizeof(float)); moved[l][2] = malloc(upw * sizeof(float));
        memcpy(moved[l][0], L->wk, kvw * sizeof(float)); memcpy(moved[l][1], L->wv, kvw * sizeof(float));
        memcpy(moved[l][2], L->w_up, upw * sizeof(float));
        L->wk = moved[l][0]; L->wv = moved[l][1]; L->w_up = moved[l][2];
    }
    numerics(&m, "synthetic, weights apart");
    for (int l = 0; l < c.n_layer; l++) {
        m.L[l].wk = keep[l][0]; m.L[l].wv = keep[l][1]; m.L[l].w_up = keep[l][2];
        for (int i = 0; i < 3; i++) free(moved[l][i]);
    }
    qs_llm_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attn_row_bits),
        cmocka_unit_test(test_tiny_model),
        cmocka_unit_test(test_synthetic_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
