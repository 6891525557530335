/*
** Training recipes (kernels/llm_recipe.c) and their wiring into the training pass (llm_train.c): an
** all-FP32 recipe is the FP32 pass bit for bit; an operand is the registry's fake quantization along
** its GEMM's reduction axis; a forward-weight recipe equals the FP32 pass on pre-quantized weights;
** 8-bit presets stay close to FP32, 4-bit ones differ but stay finite; stochastic rounding is
** reproducible and unbiased on average; the Hadamard transform is orthogonal.
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/llm.h"
#include "../../kernels/llm_recipe.h"
#include "../../kernels/llm_train.h"

static uint64_t rng_state = 0x9abcdef12345ULL;
static double urand(void)   /* uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / (double)(1ULL << 52) - 1.0;
}
static void fill(float *p, size_t n, double base, double amp)
{
    for (size_t i = 0; i < n; i++) p[i] = (float)(base + amp * urand());
}

/* The registry's fake quantization of a matrix in memory, straight through qs_format_apply. */
typedef struct { const float *x; float *y; } mio;
static int m_rd(void *c, uint64_t st, size_t n, float *out, qs_err *e)
{
    (void)e; memcpy(out, ((mio *)c)->x + st, n * sizeof(float)); return 0;
}
static int m_wr(void *c, uint64_t st, size_t n, const float *y, qs_err *e)
{
    (void)e; memcpy(((mio *)c)->y + st, y, n * sizeof(float)); return 0;
}
static int qs_fakeq_matrix(const qs_apply *a, const float *x, size_t rows, size_t cols, float *y, qs_err *e)
{
    mio io = {x, y};
    return qs_format_apply(a, rows, cols, m_rd, &io, m_wr, &io, e);
}

enum { B = 2, T = 16, V = 64, D = 32, F = 48 };

static void build(qs_llm_model *m)
{
    qs_llm_cfg c = {.n_layer = 2, .dim = D, .n_head = 4, .n_kv_head = 2, .head_dim = 8, .ffn = F,
                    .vocab = V, .ctx = 64, .rope_base = 10000.0f, .eps = 1e-5f, .rope_neox = 0};
    qs_err e = {{0}};
    rng_state = 0x9abcdef12345ULL;   /* every test sees the same model and tokens */
    assert_int_equal(qs_llm_alloc(m, &c, 0, &e), 0);
    fill(m->arena, m->arena_len, 0, 0.3);
    fill(m->tok_embd, (size_t)V * D, 0, 1);
    fill(m->out_norm, D, 1, 0.2);
    for (int l = 0; l < 2; l++) { fill(m->L[l].attn_norm, D, 1, 0.2); fill(m->L[l].ffn_norm, D, 1, 0.2); }
}

static void make_tokens(int32_t *tok)
{
    for (int i = 0; i < B * (T + 1); i++) tok[i] = (int32_t)((urand() + 1.0) * 0.5 * V) % V;
}

/* Loss and gradients of m under recipe r (NULL: FP32). */
static double run(const qs_llm_model *m, const qs_llm_recipe *r, const int32_t *tok, qs_llm_grads *g)
{
    qs_err e = {{0}};
    qs_llm_train_state *s = qs_llm_train_state_new(&m->c, B, T, &e);
    assert_non_null(s);
    if (r) assert_int_equal(qs_llm_train_state_set_recipe(s, r, &e), 0);
    assert_int_equal(qs_llm_grads_new(g, m, &e), 0);
    double loss = 0;
    int rc = qs_llm_loss_grad(m, s, tok, B, T, &loss, g, &e);
    if (rc) print_error("%s\n", e.msg);
    assert_int_equal(rc, 0);
    qs_llm_train_state_free(s);
    return loss;
}

/* ||a - b|| / ||b||, | ||a|| - ||b|| | / ||b|| and the cosine of a and b. */
static void compare(const float *a, const float *b, size_t n, double *rel, double *norm_rel, double *cosine)
{
    double num = 0, aa = 0, bb = 0, ab = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        aa += (double)a[i] * a[i]; bb += (double)b[i] * b[i]; ab += (double)a[i] * b[i];
    }
    *rel = sqrt(num / bb);
    *norm_rel = fabs(sqrt(aa) - sqrt(bb)) / sqrt(bb);
    *cosine = ab / sqrt(aa * bb);
}

static void test_fp32_recipe_bitwise(void **st)
{
    (void)st;
    qs_llm_model m = {0};
    build(&m);
    int32_t tok[B * (T + 1)];
    make_tokens(tok);
    qs_llm_grads g0 = {0}, g1 = {0}, g2 = {0};
    double l0 = run(&m, NULL, tok, &g0);
    qs_llm_recipe r;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset("fp32", &r, &e), 0);
    double l1 = run(&m, &r, tok, &g1);
    /* formats filled in but every slot off: still the FP32 pass */
    assert_int_equal(qs_llm_recipe_preset("mxfp4", &r, &e), 0);
    for (int i = 0; i < QS_OP_COUNT; i++) r.op[i].on = 0;
    double l2 = run(&m, &r, tok, &g2);
    assert_memory_equal(&l0, &l1, sizeof l0);
    assert_memory_equal(&l0, &l2, sizeof l0);
    assert_memory_equal(g0.arena, g1.arena, g0.arena_len * sizeof(float));
    assert_memory_equal(g0.arena, g2.arena, g0.arena_len * sizeof(float));
    qs_llm_grads_free(&g0); qs_llm_grads_free(&g1); qs_llm_grads_free(&g2);
    qs_llm_free(&m);
}

/* An operand is qs_fakeq_matrix of the same matrix with blocks along its slot's axis. */
static void check_operand(const char *preset, int op, int axis)
{
    enum { R = 48, C = 64 };
    float x[R * C], y[R * C], ref[R * C], other[R * C];
    fill(x, R * C, 0, 2);
    for (int i = 0; i < R * C; i += 37) x[i] *= 40;   /* outliers: blocks differ by axis */
    qs_llm_recipe r;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset(preset, &r, &e), 0);
    r.op[op].sr = 0; r.op[op].rht = 0;
    assert_int_equal(qs_llm_operand_axis(op), axis);
    assert_int_equal(qs_llm_recipe_operand(&r, op, x, R, C, 7, y, &e), 0);
    qs_apply a = r.op[op].a;
    a.axis = axis;
    assert_int_equal(qs_fakeq_matrix(&a, x, R, C, ref, &e), 0);
    assert_memory_equal(y, ref, sizeof y);
    a.axis = !axis;
    assert_int_equal(qs_fakeq_matrix(&a, x, R, C, other, &e), 0);
    assert_true(memcmp(y, other, sizeof y) != 0);   /* the axis matters for this matrix */
}

static void test_operand_is_registry_fakeq(void **st)
{
    (void)st;
    check_operand("mxfp4", QS_OP_FWD_X, 1);
    check_operand("mxfp4", QS_OP_FWD_W, 1);
    check_operand("mxfp4", QS_OP_DGRAD_DY, 1);
    check_operand("mxfp4", QS_OP_DGRAD_W, 0);
    check_operand("mxfp4", QS_OP_WGRAD_DY, 0);
    check_operand("mxfp4", QS_OP_WGRAD_X, 0);
    check_operand("nvfp4", QS_OP_WGRAD_X, 0);
    check_operand("hif4", QS_OP_DGRAD_W, 0);
}

/* nvfp4's weights: one scale per 16x16 tile (tile = a registry run of block 256 under the matrix's
** absmax), the same matrix for fwd.w and dgrad.w, unlike 1x16 blocks along either axis. */
static void test_nvfp4_tiles(void **st)
{
    (void)st;
    enum { R = 40, C = 48 };   /* edge tiles of 8 rows */
    float x[R * C], yf[R * C], yd[R * C], one[R * C], tile[256], tq[256];
    fill(x, R * C, 0, 1);
    for (int i = 0; i < R * C; i += 53) x[i] *= 30;
    qs_llm_recipe r;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset("nvfp4", &r, &e), 0);
    assert_true(r.op[QS_OP_FWD_W].tile2d && r.op[QS_OP_DGRAD_W].tile2d && !r.op[QS_OP_FWD_X].tile2d);
    assert_int_equal(qs_llm_recipe_operand(&r, QS_OP_FWD_W, x, R, C, 3, yf, &e), 0);
    assert_int_equal(qs_llm_recipe_operand(&r, QS_OP_DGRAD_W, x, R, C, 4, yd, &e), 0);
    assert_memory_equal(yf, yd, sizeof yf);
    float amax = 0;
    for (int i = 0; i < R * C; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    const int t0[3][2] = {{0, 0}, {16, 32}, {32, 16}};   /* the last: an 8 x 16 edge tile */
    for (int k = 0; k < 3; k++) {
        int r0 = t0[k][0], c0 = t0[k][1], h = R - r0 < 16 ? R - r0 : 16, n = 0;
        for (int i = 0; i < h; i++)
            for (int j = 0; j < 16; j++) tile[n++] = x[(r0 + i) * C + c0 + j];
        qs_apply a = r.op[QS_OP_FWD_W].a;
        a.o.block = n;
        a.o.tensor_scale = amax;
        assert_int_equal(qs_fakeq_matrix(&a, tile, 1, n, tq, &e), 0);
        for (int i = 0, m = 0; i < h; i++)
            for (int j = 0; j < 16; j++, m++) assert_memory_equal(&yf[(r0 + i) * C + c0 + j], &tq[m], sizeof(float));
    }
    assert_int_equal(qs_llm_recipe_preset("nvfp4-1d", &r, &e), 0);
    assert_int_equal(qs_llm_recipe_operand(&r, QS_OP_FWD_W, x, R, C, 3, one, &e), 0);
    assert_true(memcmp(one, yf, sizeof yf) != 0);
    r.op[QS_OP_FWD_X].tile2d = 1;
    assert_int_equal(qs_llm_recipe_check(&r, &e), 0);
    assert_int_equal(qs_llm_recipe_preset("fp8-hybrid", &r, &e), 0);
    r.op[QS_OP_FWD_W].tile2d = 1;   /* an element cast has no blocks */
    assert_int_equal(qs_llm_recipe_check(&r, &e), -1);
}

/* fwd.w alone: the pass's loss equals the FP32 pass on a model whose layer weights were quantized
** (blocks along the input dimension); the output projection stays FP32 (r.head = 0). */
static void test_forward_weights_wired(void **st)
{
    (void)st;
    qs_llm_model m = {0}, mq = {0};
    build(&m);
    qs_err e = {{0}};
    assert_int_equal(qs_llm_alloc(&mq, &m.c, 0, &e), 0);
    memcpy(mq.arena, m.arena, m.arena_len * sizeof(float));
    qs_llm_recipe r, full;
    assert_int_equal(qs_llm_recipe_preset("fp32", &r, &e), 0);
    assert_int_equal(qs_llm_recipe_preset("mxfp4", &full, &e), 0);
    r.op[QS_OP_FWD_W] = full.op[QS_OP_FWD_W];
    const int qd = 32, kvd = 16;
    for (int l = 0; l < 2; l++) {
        qs_llm_layer *L = &mq.L[l];
        float *w[7] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
        const int rows[7] = {qd, kvd, kvd, D, F, F, D}, cols[7] = {D, D, D, qd, D, D, F};
        for (int i = 0; i < 7; i++) assert_int_equal(qs_fakeq_matrix(&full.op[QS_OP_FWD_W].a, w[i], rows[i], cols[i], w[i], &e), 0);
    }
    int32_t tok[B * (T + 1)];
    make_tokens(tok);
    qs_llm_grads g0 = {0}, g1 = {0}, gf = {0};
    double lq = run(&mq, NULL, tok, &g0), lr = run(&m, &r, tok, &g1), lf = run(&m, NULL, tok, &gf);
    assert_memory_equal(&lq, &lr, sizeof lq);
    assert_true(lq != lf);
    qs_llm_grads_free(&g0); qs_llm_grads_free(&g1); qs_llm_grads_free(&gf);
    qs_llm_free(&m); qs_llm_free(&mq);
}

/* Backward slots leave the forward (the loss) bit for bit and change the gradient; recipe.head brings
** the output projection in. */
static void test_backward_slots_and_head(void **st)
{
    (void)st;
    qs_llm_model m = {0};
    build(&m);
    int32_t tok[B * (T + 1)];
    make_tokens(tok);
    qs_llm_grads g0 = {0};
    double l0 = run(&m, NULL, tok, &g0);
    qs_llm_recipe full, r;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset("mxfp4", &full, &e), 0);
    for (int op = QS_OP_DGRAD_DY; op < QS_OP_COUNT; op++) {
        assert_int_equal(qs_llm_recipe_preset("fp32", &r, &e), 0);
        r.op[op] = full.op[op];
        qs_llm_grads g = {0};
        double l = run(&m, &r, tok, &g);
        assert_memory_equal(&l, &l0, sizeof l);
        assert_true(memcmp(g.arena, g0.arena, g0.arena_len * sizeof(float)) != 0);
        qs_llm_grads_free(&g);
    }
    assert_int_equal(qs_llm_recipe_preset("fp32", &r, &e), 0);
    r.op[QS_OP_FWD_W] = full.op[QS_OP_FWD_W];
    qs_llm_grads g1 = {0}, g2 = {0};
    double l1 = run(&m, &r, tok, &g1);
    r.head = 1;
    double l2 = run(&m, &r, tok, &g2);
    assert_true(l1 != l2);
    qs_llm_grads_free(&g0); qs_llm_grads_free(&g1); qs_llm_grads_free(&g2);
    qs_llm_free(&m);
}

static void test_presets_close_or_finite(void **st)
{
    (void)st;
    qs_llm_model m = {0};
    build(&m);
    int32_t tok[B * (T + 1)];
    make_tokens(tok);
    qs_llm_grads g0 = {0};
    double l0 = run(&m, NULL, tok, &g0);
    /* 8-bit presets: loss within 1.5 %, gradient norm within 5 %, direction cosine > 0.97 (elementwise
    ** the gradient moves by about the operands' relative precision: ~1 % for bf16, ~17 % for FP8); 4-bit
    ** presets: finite, and visibly different */
    const char *names[] = {"bf16", "fp8-hybrid", "mxfp8", "hif8", "mxfp4", "nvfp4", "nvfp4-1d", "hif4"};
    for (int k = 0; k < 8; k++) {
        qs_llm_recipe r;
        qs_err e = {{0}};
        assert_int_equal(qs_llm_recipe_preset(names[k], &r, &e), 0);
        qs_llm_grads g = {0};
        double l = run(&m, &r, tok, &g), rel, nrel, cosv;
        compare(g.arena, g0.arena, g0.arena_len, &rel, &nrel, &cosv);
        print_message("# %-10s loss %.6f (fp32 %.6f)  grad: rel diff %.4f, norm rel %.4f, cosine %.4f\n", names[k], l,
                      l0, rel, nrel, cosv);
        assert_true(isfinite(l) && isfinite(rel));
        if (k < 4) {
            assert_true(fabs(l - l0) / l0 < 0.015);
            assert_true(nrel < 0.05);
            assert_true(cosv > 0.97);
            if (k == 0) assert_true(rel < 0.03);
        } else {
            assert_true(l != l0 && rel > 0.05);
        }
        qs_llm_grads_free(&g);
    }
    qs_llm_grads_free(&g0);
    qs_llm_free(&m);
}

static void test_stochastic_rounding(void **st)
{
    (void)st;
    enum { N = 64, DRAWS = 3000 };
    float x[N], y[N], y2[N], rne[N];
    double mean[N] = {0};
    fill(x, N, 0, 1);
    qs_llm_recipe r;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset("nvfp4", &r, &e), 0);
    assert_true(r.op[QS_OP_DGRAD_DY].sr && !r.op[QS_OP_FWD_X].sr);
    assert_int_equal(qs_llm_recipe_operand(&r, QS_OP_DGRAD_DY, x, 1, N, 5, y, &e), 0);
    assert_int_equal(qs_llm_recipe_operand(&r, QS_OP_DGRAD_DY, x, 1, N, 5, y2, &e), 0);
    assert_memory_equal(y, y2, sizeof y);   /* reproducible for a seed and call */
    assert_int_equal(qs_llm_recipe_operand(&r, QS_OP_DGRAD_DY, x, 1, N, 6, y2, &e), 0);
    assert_true(memcmp(y, y2, sizeof y) != 0);   /* a new call draws anew */
    assert_int_equal(qs_llm_recipe_operand(&r, QS_OP_FWD_X, x, 1, N, 0, rne, &e), 0);
    for (int k = 0; k < DRAWS; k++) {
        assert_int_equal(qs_llm_recipe_operand(&r, QS_OP_DGRAD_DY, x, 1, N, 100 + k, y, &e), 0);
        for (int i = 0; i < N; i++) mean[i] += y[i] / (double)DRAWS;
    }
    double err_sr = 0, err_rne = 0;
    for (int i = 0; i < N; i++) { err_sr += fabs(mean[i] - x[i]); err_rne += fabs((double)rne[i] - x[i]); }
    print_message("# SR: mean |E[Q(x)] - x| %.5f, RNE |Q(x) - x| %.5f\n", err_sr / N, err_rne / N);
    assert_true(err_sr < 0.15 * err_rne);
}

static void test_rht_orthogonal(void **st)
{
    (void)st;
    enum { R = 40, C = 48 };
    float x[R * C], y[R * C], z[R * C];
    fill(x, R * C, 0, 3);
    for (int axis = 0; axis < 2; axis++) {
        memcpy(y, x, sizeof x);
        qs_llm_rht16(y, R, C, axis, 42, 0);
        assert_true(memcmp(x, y, sizeof x) != 0);
        memcpy(z, y, sizeof y);
        qs_llm_rht16(z, R, C, axis, 42, 1);
        for (int i = 0; i < R * C; i++) assert_true(fabsf(z[i] - x[i]) <= 1e-6f * (1 + fabsf(x[i])));
        /* the same transform on two operands keeps their product along the axis */
        double dot0 = 0, dot1 = 0;
        float w[R * C];
        fill(w, R * C, 0, 1);
        for (int i = 0; i < R * C; i++) dot0 += (double)x[i] * w[i];
        qs_llm_rht16(w, R, C, axis, 42, 0);
        for (int i = 0; i < R * C; i++) dot1 += (double)y[i] * w[i];
        assert_true(fabs(dot0 - dot1) <= 1e-4 * (1 + fabs(dot0)));
    }
    /* axis 0 with 40 rows: rows 32..39 (a partial block) stay as they were */
    memcpy(y, x, sizeof x);
    qs_llm_rht16(y, R, C, 0, 42, 0);
    assert_memory_equal(y + 32 * C, x + 32 * C, 8 * C * sizeof(float));
}

static void test_refusals(void **st)
{
    (void)st;
    qs_llm_recipe r;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset("fp7", &r, &e), -1);
    assert_non_null(strstr(e.msg, "unknown training recipe"));
    assert_int_equal(qs_llm_recipe_preset("nvfp4", &r, &e), 0);
    r.op[QS_OP_WGRAD_X].rht = 0;
    assert_int_equal(qs_llm_recipe_check(&r, &e), -1);
    assert_non_null(strstr(e.msg, "both wgrad.dy and wgrad.x"));
    assert_int_equal(qs_llm_recipe_preset("hif4", &r, &e), 0);
    r.op[QS_OP_DGRAD_DY].sr = 1;   /* hif4 has no stochastic rounding */
    assert_int_equal(qs_llm_recipe_check(&r, &e), -1);
    int op = -1;
    assert_int_equal(qs_llm_operand_parse("dgrad.w", &op), 0);
    assert_int_equal(op, QS_OP_DGRAD_W);
    assert_string_equal(qs_llm_operand_name(QS_OP_WGRAD_DY), "wgrad.dy");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32_recipe_bitwise),
        cmocka_unit_test(test_operand_is_registry_fakeq),
        cmocka_unit_test(test_nvfp4_tiles),
        cmocka_unit_test(test_forward_weights_wired),
        cmocka_unit_test(test_backward_slots_and_head),
        cmocka_unit_test(test_presets_close_or_finite),
        cmocka_unit_test(test_stochastic_rounding),
        cmocka_unit_test(test_rht_orthogonal),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
