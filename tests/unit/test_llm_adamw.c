/*
** AdamW (kernels/llm_adamw.c): two steps against hand-computed values, weight decay on matrices only,
** the gradient norm, and the learning-rate schedule at its corners.
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/llm.h"
#include "../../kernels/llm_adamw.h"
#include "../../kernels/llm_train.h"
#include "../../kernels/simd.h"

/* w = 1, g = 0.5, lr 0.1, b1 0.9, b2 0.95, wd 0.1:
** t=1: m = 0.05, v = 0.0125, mh = 0.5, vh = 0.25 -> w = 1 - 0.1 * (1 + 0.1) = 0.89
** t=2: m = 0.095, v = 0.024375, mh = 0.5, vh = 0.25 -> w = 0.89 - 0.1 * (1 + 0.089) = 0.7811 */
static void test_update_by_hand(void **st)
{
    (void)st;
    float w = 1, g = 0.5f, m = 0, v = 0;
    qs_adamw_update(&w, &g, &m, &v, 1, 1.0f, 0.1f, 0.9f, 0.95f, 1 - 0.9f, 1 - 0.95f, 1e-8f, 0.1f);
    assert_float_equal(m, 0.05, 1e-7);
    assert_float_equal(v, 0.0125, 1e-7);
    assert_float_equal(w, 0.89, 1e-6);
    qs_adamw_update(&w, &g, &m, &v, 1, 1.0f, 0.1f, 0.9f, 0.95f, 1 - 0.81f, 1 - 0.9025f, 1e-8f, 0.1f);
    assert_float_equal(w, 0.7811, 1e-6);
    /* gscale scales the gradient: g = 1 with gscale 0.5 is the first step again */
    float w2 = 1, g2 = 1, m2 = 0, v2 = 0;
    qs_adamw_update(&w2, &g2, &m2, &v2, 1, 0.5f, 0.1f, 0.9f, 0.95f, 1 - 0.9f, 1 - 0.95f, 1e-8f, 0.1f);
    assert_float_equal(w2, 0.89, 1e-6);
}

static void test_step_model(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_cfg c = {.n_layer = 2, .dim = 8, .n_head = 2, .n_kv_head = 1, .head_dim = 4, .ffn = 12, .vocab = 16,
                    .ctx = 8, .rope_base = 10000, .eps = 1e-5f, .rope_neox = 1};
    qs_llm_model m;
    assert_int_equal(qs_llm_alloc(&m, &c, 1, &e), 0);
    for (size_t i = 0; i < m.arena_len; i++) m.arena[i] = 1;
    qs_llm_grads g;
    assert_int_equal(qs_llm_grads_new(&g, &m, &e), 0);
    for (size_t i = 0; i < g.arena_len; i++) g.arena[i] = 0.5f;
    assert_float_equal(qs_llm_grads_norm(&g), 0.5 * sqrt((double)g.arena_len), 1e-9);
    qs_adamw o;
    assert_int_equal(qs_adamw_new(&o, &m, &e), 0);
    qs_adamw_opts opt = {0.9, 0.95, 1e-8, 0.1};
    assert_int_equal(qs_adamw_step(&o, &m, &g, 1.0, 0.1, &opt, &e), 0);
    assert_float_equal(m.tok_embd[3], 0.89, 1e-6);
    assert_float_equal(m.L[1].w_down[5], 0.89, 1e-6);
    assert_float_equal(m.L[0].wk[0], 0.89, 1e-6);
    assert_float_equal(m.out_norm[0], 0.9, 1e-6);        /* norms: no decay */
    assert_float_equal(m.L[1].attn_norm[7], 0.9, 1e-6);
    assert_float_equal(m.L[0].ffn_norm[2], 0.9, 1e-6);
    for (size_t i = 0; i < m.arena_len; i++) assert_true(m.arena[i] == 0.89f || m.arena[i] == 0.9f);
    /* a model of another shape is refused */
    qs_llm_model m2;
    c.ffn = 16;
    assert_int_equal(qs_llm_alloc(&m2, &c, 1, &e), 0);
    assert_int_equal(qs_adamw_step(&o, &m2, &g, 1.0, 0.1, &opt, &e), -1);
    assert_non_null(strstr(e.msg, "shape"));
    qs_llm_free(&m2);
    qs_adamw_free(&o);
    qs_llm_grads_free(&g);
    qs_llm_free(&m);
}

/* The vectorised update gives the scalar loop's bits (odd length: a scalar tail too). */
static void test_update_vector_scalar(void **st)
{
    (void)st;
    enum { N = 1003 };
    static float w[2][N], g[N], m[2][N], v[2][N];
    uint64_t z = 7;
    for (int i = 0; i < N; i++) {
        z = z * 6364136223846793005ULL + 1442695040888963407ULL;
        g[i] = (float)((double)(z >> 40) / (double)(1 << 24) - 0.5) * (i % 13 ? 1.0f : 1e-6f);
        w[0][i] = w[1][i] = g[i] * 3 + 0.01f;
        m[0][i] = m[1][i] = g[i] * 0.1f;
        v[0][i] = v[1][i] = g[i] * g[i] * 0.3f;
    }
    for (int k = 0; k < 2; k++) {
        qs_simd_force(k ? QS_SIMD_SCALAR : -1);
        qs_adamw_update(w[k], g, m[k], v[k], N, 0.7f, 1e-3f, 0.9f, 0.95f, 0.19f, 0.0975f, 1e-8f, 0.1f);
    }
    qs_simd_force(-1);
    assert_memory_equal(w[0], w[1], sizeof w[0]);
    assert_memory_equal(m[0], m[1], sizeof m[0]);
    assert_memory_equal(v[0], v[1], sizeof v[0]);
}

static void test_schedule(void **st)
{
    (void)st;
    assert_float_equal(qs_lr_schedule(0, 100, 10, 1e-3, 0.1), 1e-4, 1e-15);
    assert_float_equal(qs_lr_schedule(9, 100, 10, 1e-3, 0.1), 1e-3, 1e-15);    /* end of warm-up */
    assert_float_equal(qs_lr_schedule(99, 100, 10, 1e-3, 0.1), 1e-4, 1e-15);   /* last step: min */
    double mid = qs_lr_schedule(54, 99, 10, 1e-3, 0.1);                        /* r = 44/88 = 0.5 */
    assert_float_equal(mid, 0.55e-3, 1e-12);
    assert_float_equal(qs_lr_schedule(5, 10, 0, 2e-3, 0.0), 1e-3 * (1 + cos(M_PI * 5 / 9.0)), 1e-15);
    for (int s = 11; s < 100; s++) assert_true(qs_lr_schedule(s, 100, 10, 1e-3, 0.1) <= qs_lr_schedule(s - 1, 100, 10, 1e-3, 0.1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_update_by_hand),
        cmocka_unit_test(test_step_model),
        cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_update_vector_scalar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
