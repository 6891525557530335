/*
** Operands the training pass reuses instead of quantizing again (kernels/llm_train.c, llm_recipe.h):
** - the forward's quantized weight for the input-gradient GEMM (qs_llm_recipe_weight_reuse): taken only
**   when fwd.w and dgrad.w give the same matrix (nvfp4's 16x16 tiles, scaled or plain element casts),
**   and then the pass equals, bit for bit, the pass that quantizes dgrad.w again; never under 1x16
**   blocks (nvfp4-1d), SR or an RHT on dgrad.w, whose dgrad.w differs from the forward's;
** - the RHT signs are the run's (qs_llm_recipe_rht_seed), so the wgrad.x operand of the Q, K and V
**   projections (one input) is one quantized matrix, while SR draws still change with the call;
** - and the whole nvfp4 pass gives the generic path's bits (QS_FAKEQ_FAST=0).
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/llm.h"
#include "../../kernels/llm_recipe.h"
#include "../../kernels/llm_train.h"

static uint64_t rng = 0x51ed2701ULL;
static double urand(void)   /* uniform in [-1, 1) */
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) / (double)(1ULL << 52) - 1.0;
}

enum { B = 2, T = 16, V = 64, D = 32, F = 48, NL = 2 };

static void build(qs_llm_model *m, int32_t *tok)
{
    qs_llm_cfg c = {.n_layer = NL, .dim = D, .n_head = 4, .n_kv_head = 2, .head_dim = 8, .ffn = F,
                    .vocab = V, .ctx = 64, .rope_base = 10000.0f, .eps = 1e-5f, .rope_neox = 0};
    qs_err e = {{0}};
    rng = 0x51ed2701ULL;
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

/* What the tap saw: per layer weight (wq .. w_down) the forward's fwd.w and the dgrad.w operands,
** whether each dgrad.w equalled a fresh quantization for its call, and per layer the wgrad.x operands. */
typedef struct {
    qs_llm_train_state *s;
    const qs_llm_recipe *r;
    const qs_llm_model *m;
    float *fw[NL][7], *dw[NL][7], *wx[NL][7];
    int stale;   /* dgrad.w operands that differ from a fresh quantization */
} seen;

static int weight_of(const qs_llm_model *m, const void *key, int *l)
{
    for (*l = 0; *l < NL; (*l)++) {
        const qs_llm_layer *L = &m->L[*l];
        const float *w[7] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
        for (int k = 0; k < 7; k++) if (key == w[k]) return k;
    }
    return -1;
}

static float *dup(const float *q, size_t n)
{
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    memcpy(p, q, n * sizeof *p);
    return p;
}

static void tap(void *ctx, const void *key, int op, const float *src, const float *q, size_t rows, size_t cols)
{
    seen *k = ctx;
    int l, w = weight_of(k->m, key, &l);
    size_t n = rows * cols;
    if (op == QS_OP_DGRAD_W) {
        float *y = malloc(n * sizeof *y);
        qs_err e = {{0}};
        assert_non_null(y);
        assert_int_equal(qs_llm_recipe_operand(k->r, op, src, rows, cols, qs_llm_train_state_calls(k->s) - 1, y, &e), 0);
        if (memcmp(y, q, n * sizeof *y)) k->stale++;
        free(y);
    }
    if (w < 0 && op == QS_OP_WGRAD_X) {   /* keyed by the gradient array: find the layer by the X pointer order */
        for (l = 0; l < NL; l++)
            for (int j = 0; j < 7; j++)
                if (!k->wx[l][j]) { k->wx[l][j] = dup(q, n); return; }
        return;
    }
    if (w < 0) return;
    if (op == QS_OP_FWD_W && !k->fw[l][w]) k->fw[l][w] = dup(q, n);
    if (op == QS_OP_DGRAD_W && !k->dw[l][w]) k->dw[l][w] = dup(q, n);
}

static void seen_free(seen *k)
{
    for (int l = 0; l < NL; l++)
        for (int w = 0; w < 7; w++) { free(k->fw[l][w]); free(k->dw[l][w]); free(k->wx[l][w]); }
}

/* One pass (loss and gradient) under r; *same: every layer weight's dgrad.w equals its fwd.w. */
static void pass(const qs_llm_recipe *r, double *loss, qs_llm_grads *g, int *same, size_t *keep, seen *k)
{
    qs_llm_model m = {0};
    int32_t tok[B * (T + 1)];
    build(&m, tok);
    qs_err e = {{0}};
    qs_llm_train_state *s = qs_llm_train_state_new(&m.c, B, T, &e);
    assert_non_null(s);
    assert_int_equal(qs_llm_train_state_set_recipe(s, r, &e), 0);
    *keep = qs_llm_train_state_keep_floats(s);
    memset(k, 0, sizeof *k);
    k->s = s;
    k->r = r;
    k->m = &m;
    qs_llm_train_state_set_tap(s, tap, k);
    assert_int_equal(qs_llm_grads_new(g, &m, &e), 0);
    for (int i = 0; i < 2; i++)   /* a second pass: the kept weights are the second pass's */
        assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, loss, g, &e), 0);
    size_t n[7] = {(size_t)32 * D, (size_t)16 * D, (size_t)16 * D, (size_t)D * 32, (size_t)F * D, (size_t)F * D,
                   (size_t)D * F};
    *same = 1;
    for (int l = 0; l < NL; l++)
        for (int w = 0; w < 7; w++) {
            assert_non_null(k->fw[l][w]);
            assert_non_null(k->dw[l][w]);
            if (memcmp(k->fw[l][w], k->dw[l][w], n[w] * sizeof(float))) *same = 0;
        }
    qs_llm_train_state_free(s);
    qs_llm_free(&m);
}

static void test_weight_reuse(void **st)
{
    (void)st;
    qs_llm_recipe r, r2;
    qs_err e = {{0}};
    static const struct { const char *name; int reuse; } want[] = {
        {"nvfp4", 1}, {"nvfp4-1d", 0}, {"mxfp4", 0}, {"hif4", 0}, {"mxfp8", 0}, {"bf16", 1}, {"fp8-hybrid", 1},
        {"hif8", 1}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        assert_int_equal(qs_llm_recipe_preset(want[i].name, &r, &e), 0);
        if (qs_llm_recipe_weight_reuse(&r) != want[i].reuse) fail_msg("%s: weight reuse should be %d", want[i].name, want[i].reuse);
    }
    /* nvfp4 keeps its tiles; the pass equals the one that quantizes dgrad.w again (its slot's unused SR seed
    ** set apart turns the reuse off without changing a value) */
    assert_int_equal(qs_llm_recipe_preset("nvfp4", &r, &e), 0);
    r2 = r;
    r2.op[QS_OP_DGRAD_W].a.o.seed ^= 1;
    assert_int_equal(qs_llm_recipe_weight_reuse(&r2), 0);
    double l1, l2;
    qs_llm_grads g1 = {0}, g2 = {0};
    int same1, same2;
    size_t keep1, keep2;
    seen k1, k2;
    pass(&r, &l1, &g1, &same1, &keep1, &k1);
    pass(&r2, &l2, &g2, &same2, &keep2, &k2);
    assert_int_equal(keep1, (size_t)NL * (2 * 32 * D + 2 * 16 * D + 3 * F * D));
    assert_int_equal(keep2, 0);
    assert_true(same1 && same2);   /* 16x16 tiles: the forward's matrix either way */
    assert_int_equal(k1.stale + k2.stale, 0);
    assert_memory_equal(&l1, &l2, sizeof l1);
    assert_memory_equal(g1.arena, g2.arena, g1.arena_len * sizeof(float));
    qs_llm_grads_free(&g1); qs_llm_grads_free(&g2);
    seen_free(&k1); seen_free(&k2);
    /* where dgrad.w differs from fwd.w the reuse must stay off: 1x16 blocks along the other axis, SR on
    ** the tiles, an RHT on the dgrad operands */
    for (int v = 0; v < 3; v++) {
        assert_int_equal(qs_llm_recipe_preset(v == 0 ? "nvfp4-1d" : "nvfp4", &r, &e), 0);
        if (v == 1) r.op[QS_OP_DGRAD_W].sr = 1;
        if (v == 2) r.op[QS_OP_DGRAD_W].rht = r.op[QS_OP_DGRAD_DY].rht = 1;
        assert_int_equal(qs_llm_recipe_check(&r, &e), 0);
        assert_int_equal(qs_llm_recipe_weight_reuse(&r), 0);
        pass(&r, &l1, &g1, &same1, &keep1, &k1);
        assert_int_equal(keep1, 0);
        assert_false(same1);   /* so reusing the forward's would have been wrong ... */
        assert_int_equal(k1.stale, 0);   /* ... and every dgrad.w is its own quantization */
        qs_llm_grads_free(&g1);
        seen_free(&k1);
    }
    /* a tensor-scaled element cast (fp8-hybrid): kept, the same bits as quantizing again */
    assert_int_equal(qs_llm_recipe_preset("fp8-hybrid", &r, &e), 0);
    r2 = r;
    r2.op[QS_OP_DGRAD_W].a.o.seed ^= 1;
    pass(&r, &l1, &g1, &same1, &keep1, &k1);
    pass(&r2, &l2, &g2, &same2, &keep2, &k2);
    assert_true(keep1 > 0 && keep2 == 0 && same1 && same2 && !k1.stale && !k2.stale);
    assert_memory_equal(&l1, &l2, sizeof l1);
    assert_memory_equal(g1.arena, g2.arena, g1.arena_len * sizeof(float));
    qs_llm_grads_free(&g1); qs_llm_grads_free(&g2);
    seen_free(&k1); seen_free(&k2);
}

/* The RHT signs are the run's: an operand with an RHT and no SR is the same matrix at any call, one with
** SR is not; in the pass, the wgrad.x operands of the Q, K and V projections (the same input) and of gate
** and up are bitwise one matrix. */
static void test_rht_signs_shared(void **st)
{
    (void)st;
    qs_llm_recipe r;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset("nvfp4", &r, &e), 0);
    enum { R = 64, C = 48 };
    float *x = malloc(R * C * sizeof *x), *y1 = malloc(R * C * sizeof *x), *y2 = malloc(R * C * sizeof *x);
    assert_true(x && y1 && y2);
    for (int i = 0; i < R * C; i++) x[i] = (float)(urand() * (i % 37 ? 1 : 20));
    assert_int_equal(qs_llm_recipe_operand(&r, QS_OP_WGRAD_X, x, R, C, 3, y1, &e), 0);
    assert_int_equal(qs_llm_recipe_operand(&r, QS_OP_WGRAD_X, x, R, C, 4, y2, &e), 0);
    assert_memory_equal(y1, y2, R * C * sizeof *x);
    assert_int_equal(qs_llm_recipe_operand(&r, QS_OP_WGRAD_DY, x, R, C, 3, y1, &e), 0);
    assert_int_equal(qs_llm_recipe_operand(&r, QS_OP_WGRAD_DY, x, R, C, 4, y2, &e), 0);
    assert_true(memcmp(y1, y2, R * C * sizeof *x) != 0);   /* SR draws per call */
    /* another recipe seed, other signs */
    qs_llm_recipe r2 = r;
    r2.seed ^= 1;
    assert_true(qs_llm_recipe_rht_seed(&r2) != qs_llm_recipe_rht_seed(&r));
    assert_int_equal(qs_llm_recipe_operand(&r2, QS_OP_WGRAD_X, x, R, C, 3, y2, &e), 0);
    assert_int_equal(qs_llm_recipe_operand(&r, QS_OP_WGRAD_X, x, R, C, 3, y1, &e), 0);
    assert_true(memcmp(y1, y2, R * C * sizeof *x) != 0);
    free(x); free(y1); free(y2);
    /* in the pass (the backward's wgrad GEMMs in order: w_down, w_gate, w_up, wo, wq, wk, wv per layer,
    ** the last layer first) */
    double loss;
    qs_llm_grads g = {0};
    int same;
    size_t keep;
    seen k;
    pass(&r, &loss, &g, &same, &keep, &k);
    /* the tap kept the first pass's 14 wgrad.x operands in call order: layer 1 then layer 0 */
    for (int i = 0; i < NL; i++) {
        float **w = i == 0 ? k.wx[0] : k.wx[1];   /* 7 per layer: entries fill wx[0][0..6] then wx[1][0..6] */
        size_t nd = (size_t)T * B * D;
        assert_memory_equal(w[1], w[2], nd * sizeof(float));   /* gate, up */
        assert_memory_equal(w[4], w[5], nd * sizeof(float));   /* q, k */
        assert_memory_equal(w[4], w[6], nd * sizeof(float));   /* q, v */
        assert_true(memcmp(w[1], w[4], nd * sizeof(float)) != 0);
    }
    assert_int_equal(k.stale, 0);
    qs_llm_grads_free(&g);
    seen_free(&k);
}

/* The whole nvfp4 pass (kept tiles, shared operands, maxima found for two uses) gives the same loss and
** gradient bits with the fused kernels as on the generic path (QS_FAKEQ_FAST=0). */
static void test_fused_pass_is_generic(void **st)
{
    (void)st;
    qs_llm_recipe r;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset("nvfp4", &r, &e), 0);
    double l[2];
    qs_llm_grads g[2];
    memset(g, 0, sizeof g);
    int same;
    size_t keep;
    seen k;
    for (int f = 0; f < 2; f++) {
        setenv("QS_FAKEQ_FAST", f ? "0" : "1", 1);
        pass(&r, &l[f], &g[f], &same, &keep, &k);
        assert_int_equal(k.stale, 0);
        seen_free(&k);
    }
    unsetenv("QS_FAKEQ_FAST");
    assert_memory_equal(&l[0], &l[1], sizeof l[0]);
    assert_memory_equal(g[0].arena, g[1].arena, g[0].arena_len * sizeof(float));
    qs_llm_grads_free(&g[0]);
    qs_llm_grads_free(&g[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weight_reuse),
        cmocka_unit_test(test_rht_signs_shared),
        cmocka_unit_test(test_fused_pass_is_generic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
