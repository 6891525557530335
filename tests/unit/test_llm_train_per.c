/*
** Per-linear recipes of the training pass (qs_llm_train_state_set_recipes, kernels/llm_train.h), what
** `train --recipe-file PLAN` runs:
** - recipes all equal to one recipe give set_recipe's loss, gradients, operand counts and call counter
**   bit for bit (nvfp4: tiles, SR, RHT and the kept weights; mxfp4; fp8-hybrid);
** - one linear's recipe changed (layer 1's wo with fwd.x off) changes only that linear's counts: layer 1's
**   fwd.x count drops by exactly wo's input, every other (layer, operand) count n is the same, layer 0's
**   forward counts are equal in full, and the loss moves;
** - an input shared by Q, K and V under different fwd.x slots is quantized per slot (every forward
**   operand equals a fresh quantization under its linear's recipe);
** - the head's entry quantizes the head when its .head is set; a wrong count is refused.
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/llm.h"
#include "../../kernels/llm_recipe.h"
#include "../../kernels/llm_train.h"

static uint64_t rng;
static double urand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) / (double)(1ULL << 52) - 1.0;
}

enum { B = 2, T = 16, V = 64, D = 32, F = 48, NL = 2, QD = 32, NR = NL * 7 + 1 };

static void build(qs_llm_model *m, int32_t *tok)
{
    qs_llm_cfg c = {.n_layer = NL, .dim = D, .n_head = 4, .n_kv_head = 2, .head_dim = 8, .ffn = F,
                    .vocab = V, .ctx = 64, .rope_base = 10000.0f, .eps = 1e-5f, .rope_neox = 0};
    qs_err e = {{0}};
    rng = 0x7e11a9ULL;
    assert_int_equal(qs_llm_alloc(m, &c, 1, &e), 0);
    for (size_t i = 0; i < m->arena_len; i++) m->arena[i] = (float)(0.3 * urand());
    for (int i = 0; i < D; i++) m->out_norm[i] = (float)(1 + 0.2 * urand());
    for (int l = 0; l < NL; l++)
        for (int i = 0; i < D; i++) {
            m->L[l].attn_norm[i] = (float)(1 + 0.2 * urand());
            m->L[l].ffn_norm[i] = (float)(1 + 0.2 * urand());
        }
    for (int i = 0; i < B * (T + 1); i++) tok[i] = (int32_t)((urand() + 1.0) * 0.5 * V) % V;
}

typedef struct {
    double loss[2];
    qs_llm_grads g;
    qs_llm_opstat st[(NL + 1) * QS_OP_COUNT];
    uint64_t calls;
} pass;

/* Two passes (the second sees the first's kept state) under r alone (per NULL) or per. */
static void run(const qs_llm_model *m, const int32_t *tok, const qs_llm_recipe *r, const qs_llm_recipe *per, pass *p)
{
    qs_err e = {{0}};
    qs_llm_train_state *s = qs_llm_train_state_new(&m->c, B, T, &e);
    assert_non_null(s);
    if (per) assert_int_equal(qs_llm_train_state_set_recipes(s, per, NR, &e), 0);
    else assert_int_equal(qs_llm_train_state_set_recipe(s, r, &e), 0);
    assert_int_equal(qs_llm_grads_new(&p->g, m, &e), 0);
    for (int i = 0; i < 2; i++) assert_int_equal(qs_llm_loss_grad(m, s, tok, B, T, &p->loss[i], &p->g, &e), 0);
    memcpy(p->st, qs_llm_train_state_opstats(s), sizeof p->st);
    p->calls = qs_llm_train_state_calls(s);
    qs_llm_train_state_free(s);
}

static void fill(qs_llm_recipe *per, const qs_llm_recipe *r)
{
    for (int i = 0; i < NR; i++) per[i] = *r;
}

static void test_equal_recipes_same_bits(void **st)
{
    (void)st;
    qs_llm_model m;
    int32_t tok[B * (T + 1)];
    build(&m, tok);
    const char *presets[] = {"nvfp4", "mxfp4", "fp8-hybrid"};
    for (int k = 0; k < 3; k++) {
        qs_llm_recipe r, per[NR];
        qs_err e = {{0}};
        assert_int_equal(qs_llm_recipe_preset(presets[k], &r, &e), 0);
        fill(per, &r);
        pass a, b;
        run(&m, tok, &r, NULL, &a);
        run(&m, tok, NULL, per, &b);
        assert_true(a.loss[0] == b.loss[0] && a.loss[1] == b.loss[1]);
        assert_memory_equal(a.g.arena, b.g.arena, a.g.arena_len * sizeof(float));
        assert_memory_equal(a.st, b.st, sizeof a.st);
        assert_true(a.calls == b.calls && a.calls > 0);
        qs_llm_grads_free(&a.g);
        qs_llm_grads_free(&b.g);
    }
    qs_llm_free(&m);
}

static void test_one_linear_differs(void **st)
{
    (void)st;
    qs_llm_model m;
    int32_t tok[B * (T + 1)];
    build(&m, tok);
    qs_llm_recipe r, per[NR];
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset("mxfp8", &r, &e), 0);
    fill(per, &r);
    per[1 * 7 + 3].op[QS_OP_FWD_X].on = 0;   /* layer 1's o_proj input stays FP32 */
    pass a, b;
    run(&m, tok, &r, NULL, &a);
    run(&m, tok, NULL, per, &b);
    assert_true(a.loss[0] != b.loss[0]);
    for (int l = 0; l <= NL; l++)
        for (int op = 0; op < QS_OP_COUNT; op++) {
            const qs_llm_opstat *x = &a.st[l * QS_OP_COUNT + op], *y = &b.st[l * QS_OP_COUNT + op];
            uint64_t drop = l == 1 && op == QS_OP_FWD_X ? 2 * (uint64_t)B * T * QD : 0;   /* two passes */
            assert_true(x->n == y->n + drop);
            if (l == 0 && (op == QS_OP_FWD_X || op == QS_OP_FWD_W)) assert_memory_equal(x, y, sizeof *x);
        }
    /* layer 0's forward equal: its wq gradient differs only through the changed layer above */
    assert_memory_not_equal(a.g.L[1].wo, b.g.L[1].wo, (size_t)D * QD * sizeof(float));
    qs_llm_grads_free(&a.g);
    qs_llm_grads_free(&b.g);
    qs_llm_free(&m);
}

/* Every fwd.x operand the tap sees equals a fresh quantization of its input under its linear's recipe. */
typedef struct { const qs_llm_model *m; const qs_llm_recipe *per; int checked, bad; } chk;

static void tap(void *ctx, const void *key, int op, const float *src, const float *q, size_t rows, size_t cols)
{
    chk *k = ctx;
    if (op != QS_OP_FWD_X) return;
    for (int l = 0; l < NL; l++) {
        const qs_llm_layer *L = &k->m->L[l];
        const float *w[7] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
        for (int i = 0; i < 7; i++) {
            if (key != w[i]) continue;
            float *y = malloc(rows * cols * sizeof *y);
            qs_err e = {{0}};
            assert_non_null(y);
            assert_int_equal(qs_llm_recipe_operand(&k->per[l * 7 + i], op, src, rows, cols, 0, y, &e), 0);
            k->bad += memcmp(y, q, rows * cols * sizeof *y) != 0;
            k->checked++;
            free(y);
        }
    }
}

static void test_shared_input_per_slot(void **st)
{
    (void)st;
    qs_llm_model m;
    int32_t tok[B * (T + 1)];
    build(&m, tok);
    qs_llm_recipe r, per[NR];
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset("mxfp4", &r, &e), 0);
    fill(per, &r);
    for (int l = 0; l < NL; l++) {
        per[l * 7 + 0].op[QS_OP_FWD_X].on = 0;                       /* Q: FP32 input */
        assert_int_equal(qs_llm_recipe_preset("mxfp8", &per[l * 7 + 2], &e), 0);   /* V: mxfp8 */
        assert_int_equal(qs_llm_recipe_preset("bf16", &per[l * 7 + 5], &e), 0);    /* up: bf16 */
    }
    chk k = {&m, per, 0, 0};
    qs_llm_train_state *s = qs_llm_train_state_new(&m.c, B, T, &e);
    assert_non_null(s);
    assert_int_equal(qs_llm_train_state_set_recipes(s, per, NR, &e), 0);
    qs_llm_train_state_set_tap(s, tap, &k);
    double loss;
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &loss, NULL, &e), 0);
    assert_int_equal(k.checked, NL * 7);
    assert_int_equal(k.bad, 0);
    /* the head: FP32 unless its entry says head */
    const qs_llm_opstat *os = qs_llm_train_state_opstats(s);
    assert_true(os[NL * QS_OP_COUNT + QS_OP_FWD_X].n == 0);
    per[NR - 1].head = 1;
    assert_int_equal(qs_llm_train_state_set_recipes(s, per, NR, &e), 0);
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &loss, NULL, &e), 0);
    os = qs_llm_train_state_opstats(s);
    assert_true(os[NL * QS_OP_COUNT + QS_OP_FWD_X].n == (uint64_t)B * T * D);
    /* a wrong count is refused, leaving the FP32 path */
    assert_int_equal(qs_llm_train_state_set_recipes(s, per, NR - 1, &e), -1);
    assert_non_null(strstr(e.msg, "per-linear recipes"));
    assert_null(qs_llm_train_state_opstats(s));
    qs_llm_train_state_free(s);
    qs_llm_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_recipes_same_bits),
        cmocka_unit_test(test_one_linear_differs),
        cmocka_unit_test(test_shared_input_per_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
