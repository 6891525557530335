/*
** Training recipes (kernels/llm_recipe.c) and their wiring into the training pass (llm_train.c): an
** all-FP32 recipe is the FP32 pass bit for bit; an operand is the registry's fake quantization along
** its GEMM's reduction axis; a forward-weight recipe equals the FP32 pass on pre-quantized weights;
** 8-bit presets stay close to FP32, 4-bit ones differ but stay finite; stochastic rounding is
** reproducible and unbiased on average; the Hadamard transform is orthogonal; the operand counts
** (underflow, clipped, non-finite) on crafted operands and in the training state.
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

/* ---------------------------------------------------------------- operand statistics */

/* The counts of quantizing x (rows x cols) under slot op of preset (after set), checked against the
** registry's output where that is the definition (underflow, non-finite). */
static qs_llm_opstat opstat_of(qs_llm_recipe *r, int op, const float *x, size_t rows, size_t cols)
{
    qs_err e = {{0}};
    qs_llm_opstat st = {0};
    float *y = malloc(rows * cols * sizeof *y);
    int rc = qs_llm_recipe_operand_stat(r, op, x, rows, cols, 3, y, NULL, &st, &e);
    if (rc) print_error("%s\n", e.msg);
    assert_int_equal(rc, 0);
    float *y0 = malloc(rows * cols * sizeof *y0);   /* counting leaves the operand as it was */
    assert_int_equal(qs_llm_recipe_operand(r, op, x, rows, cols, 3, y0, &e), 0);
    assert_memory_equal(y, y0, rows * cols * sizeof *y);
    free(y0);
    uint64_t under = 0, nonf = 0;
    for (size_t i = 0; i < rows * cols; i++) {
        under += x[i] != 0 && isfinite(x[i]) && y[i] == 0;
        nonf += !isfinite(y[i]);
    }
    if (r->op[op].on && !r->op[op].rht) {
        assert_int_equal(st.underflow, under);
        assert_int_equal(st.nonfinite, nonf);
    }
    free(y);
    return st;
}

static void set_slot(qs_llm_recipe *r, int op, const char *fmt, int cscale, int sat)
{
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset("fp32", r, &e), 0);
    r->op[op].on = 1;
    r->op[op].a.f = qs_format_find(fmt);
    assert_non_null(r->op[op].a.f);
    r->op[op].a.gran = QS_GRAN_BLOCK;
    r->op[op].a.cscale = cscale;
    r->op[op].a.o.sat = sat;
}

/* mxfp4 (floor rule, blocks of 32 along rows): in a block of amax 7.5 the scale is 1, Q = 6, and
** |x| > 7 clips (7.5, 7.2; not 6.9), values below 0.25 become 0; a NaN makes its block NaN (no clip
** there even for 100); a block of amax 4.9 (Q = 6) clips nothing. */
static void test_opstat_mxfp4(void **st)
{
    (void)st;
    enum { R = 2, C = 64 };
    float x[R * C];
    for (int i = 0; i < R * C; i++) x[i] = 1.0f;
    x[0] = 7.5f; x[1] = -7.2f; x[2] = 6.9f; x[3] = 0.01f; x[4] = -0.02f; x[5] = 0.1f;
    x[40] = NAN; x[41] = 100.0f; x[42] = 1e-6f;
    x[C + 3] = 0; x[C + 40] = 4.9f; x[C + 41] = 4.4f;
    qs_llm_recipe r;
    set_slot(&r, QS_OP_FWD_X, "mxfp4", 0, 0);
    qs_llm_opstat s = opstat_of(&r, QS_OP_FWD_X, x, R, C);
    assert_int_equal(s.n, R * C);
    assert_int_equal(s.underflow, 3);
    assert_int_equal(s.clipped, 2);
    assert_int_equal(s.nonfinite, 32);
    /* the same matrix transposed, under a row-blocked slot: the same blocks, the same counts */
    float xt[R * C];
    for (int i = 0; i < R; i++) for (int j = 0; j < C; j++) xt[j * R + i] = x[i * C + j];
    set_slot(&r, QS_OP_WGRAD_X, "mxfp4", 0, 0);
    qs_llm_opstat t = opstat_of(&r, QS_OP_WGRAD_X, xt, C, R);
    assert_memory_equal(&s, &t, sizeof s);
    /* an off slot counts nothing */
    r.op[QS_OP_WGRAD_X].on = 0;
    t = opstat_of(&r, QS_OP_WGRAD_X, xt, C, R);
    assert_int_equal(t.n + t.underflow + t.clipped + t.nonfinite, 0);
}

/* nvfp4: a block of amax 600 has the element step 100 (tensor absmax 600), so |x| < 25 becomes 0;
** its block scale never lets a value clip. */
static void test_opstat_nvfp4(void **st)
{
    (void)st;
    enum { R = 4, C = 32 };
    float x[R * C];
    fill(x, R * C, 1, 0.5);
    for (int i = 4; i < 16; i++) x[i] = 40;   /* -> 50: the block's other values stay */
    x[0] = 600; x[1] = 10; x[2] = -3; x[3] = 20;
    qs_llm_recipe r;
    set_slot(&r, QS_OP_FWD_X, "nvfp4", 0, 0);
    qs_llm_opstat s = opstat_of(&r, QS_OP_FWD_X, x, R, C);
    assert_int_equal(s.n, R * C);
    assert_int_equal(s.underflow, 3);
    assert_int_equal(s.clipped, 0);
    assert_int_equal(s.nonfinite, 0);
    /* 16x16 tiles (the preset's weights): a tile of amax 600 takes its neighbours' small values to 0 */
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset("nvfp4", &r, &e), 0);
    enum { R2 = 16, C2 = 32 };
    float w[R2 * C2];
    fill(w, R2 * C2, 1, 0.5);
    w[5 * C2 + 3] = 600;   /* tile 0 */
    s = opstat_of(&r, QS_OP_FWD_W, w, R2, C2);
    assert_int_equal(s.n, R2 * C2);
    assert_int_equal(s.underflow, 255);   /* every other value of tile 0 is below 25 */
    assert_int_equal(s.clipped + s.nonfinite, 0);
}

/* fp8_e4m3 without a scale: 500 and -1000 lie beyond 448 + 16 (the half-way point to the next
** value), 460 and 449 round to 448 and are not clipped; without saturation the clipped values become
** NaN (non-finite too), with it 448; 1e-4 is below half of 2^-9 and becomes 0; NaN stays NaN. */
static void test_opstat_fp8(void **st)
{
    (void)st;
    float x[8] = {500, 460, 449, -1000, 1e-4f, NAN, 1, 0};
    qs_llm_recipe r;
    set_slot(&r, QS_OP_DGRAD_DY, "fp8_e4m3", 0, 0);
    qs_llm_opstat s = opstat_of(&r, QS_OP_DGRAD_DY, x, 2, 4);
    assert_int_equal(s.n, 8);
    assert_int_equal(s.underflow, 1);
    assert_int_equal(s.clipped, 2);
    assert_int_equal(s.nonfinite, 3);
    set_slot(&r, QS_OP_DGRAD_DY, "fp8_e4m3", 0, 1);
    s = opstat_of(&r, QS_OP_DGRAD_DY, x, 2, 4);
    assert_int_equal(s.clipped, 2);
    assert_int_equal(s.nonfinite, 1);
    /* scale=tensor (fp8-hybrid's fwd.x): absmax -> 448, so nothing clips (not even the absmax,
    ** whatever fl32 does to x * s), and 1e-5 * 448/1000 is below the smallest subnormal's half */
    enum { C = 64 };
    float y[2 * C];
    fill(y, 2 * C, 0.5, 0.4);
    y[0] = 1000; y[1] = -999.9f; y[2] = 1e-5f; y[C + 7] = NAN;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset("fp8-hybrid", &r, &e), 0);
    s = opstat_of(&r, QS_OP_FWD_X, y, 2, C);
    assert_int_equal(s.n, 2 * C);
    assert_int_equal(s.underflow, 1);
    assert_int_equal(s.clipped, 0);
    assert_int_equal(s.nonfinite, 1);
    /* one scale per row or per column: still nothing clips; underflows and NaN as the registry has them */
    for (int g = QS_CSCALE_ROW; g <= QS_CSCALE_COL; g++) {
        set_slot(&r, QS_OP_FWD_X, "fp8_e4m3", g, 1);
        s = opstat_of(&r, QS_OP_FWD_X, y, 2, C);
        assert_int_equal(s.clipped, 0);
        assert_int_equal(s.nonfinite, 1);
    }
    set_slot(&r, QS_OP_FWD_X, "fp8_e4m3", QS_CSCALE_COL, 0);
    y[C + 7] = 2000;   /* the NaN becomes column 7's absmax: scaled to 448, not clipped */
    s = opstat_of(&r, QS_OP_FWD_X, y, 2, C);
    assert_int_equal(s.clipped + s.nonfinite, 0);
}

/* hif4 (units of 64): 1000 gives SF = BF16(1000 * 73/512) = 142, E6M2 128, so the top groups' step
** is 128 and Q = 896: 1000 lies beyond 896 + 64 and clips (HiF4's scale can round down by up to an
** eighth); 1e-6 next to it becomes 0; groups of 100s take the lowest level (step 32, Q 224) and
** neither clip nor underflow; a NaN makes its unit NaN. */
static void test_opstat_hif4(void **st)
{
    (void)st;
    enum { R = 2, C = 64 };
    float x[R * C];
    fill(x, R * C, 100, 10);
    x[0] = 1000; x[1] = 1e-6f; x[2] = -2e-6f;
    x[C + 5] = NAN;
    qs_llm_recipe r;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_recipe_preset("hif4", &r, &e), 0);
    qs_llm_opstat s = opstat_of(&r, QS_OP_FWD_X, x, R, C);
    assert_int_equal(s.n, R * C);
    assert_int_equal(s.underflow, 2);
    assert_int_equal(s.clipped, 1);
    assert_int_equal(s.nonfinite, 64);
    /* the same down the columns (a row-blocked slot) */
    float xt[R * C];
    for (int i = 0; i < R; i++) for (int j = 0; j < C; j++) xt[j * R + i] = x[i * C + j];
    qs_llm_opstat t = opstat_of(&r, QS_OP_WGRAD_X, xt, C, R);
    assert_memory_equal(&s, &t, sizeof s);
    /* wider: 37 rows of 64 against the 37 columns of the transpose (gathered 16 at a time: two whole
    ** panels and a partial one); opstat_of holds both operands to the plain quantization's bits */
    enum { R2 = 37 };
    float *w = malloc(R2 * C * sizeof *w), *wt = malloc(R2 * C * sizeof *wt);
    fill(w, R2 * C, 100, 11);
    w[5] = 1000; w[20 * C + 3] = 1e-6f; w[36 * C + 63] = NAN; w[17 * C + 9] = -3000;
    s = opstat_of(&r, QS_OP_FWD_X, w, R2, C);
    for (int i = 0; i < R2; i++) for (int j = 0; j < C; j++) wt[j * R2 + i] = w[i * C + j];
    t = opstat_of(&r, QS_OP_WGRAD_X, wt, C, R2);
    assert_memory_equal(&s, &t, sizeof s);
    assert_int_equal(s.clipped, 1);   /* -3000 (1000 shares its group with values near 100: no clip) */
    assert_int_equal(s.underflow, 8);
    assert_int_equal(s.nonfinite, 64);
    free(w); free(wt);
}

/* The training state's counts: per (layer, operand) the values of every GEMM operand of a pass, the
** head as row n_layer when recipe.head (else zero); they add over calls and reset to zero. */
static void expect_counts(const qs_llm_opstat *o, int head, uint64_t times)
{
    const uint64_t R = B * T, q = 32, kv = 16;
    const uint64_t in[7] = {D, D, D, q, D, D, F}, out[7] = {q, kv, kv, D, F, F, D};
    uint64_t sin = 0, sout = 0, sio = 0;
    for (int i = 0; i < 7; i++) { sin += in[i]; sout += out[i]; sio += in[i] * out[i]; }
    const uint64_t per[QS_OP_COUNT] = {R * sin, sio, R * sout, sio, R * sout, R * sin};
    const uint64_t hd[QS_OP_COUNT] = {R * D, (uint64_t)V * D, R * V, (uint64_t)V * D, R * V, R * D};
    for (int l = 0; l <= 2; l++)
        for (int op = 0; op < QS_OP_COUNT; op++) {
            uint64_t want = l < 2 ? per[op] : head ? hd[op] : 0;
            assert_int_equal(o[l * QS_OP_COUNT + op].n, times * want);
        }
}

static void test_opstat_state(void **st)
{
    (void)st;
    qs_llm_model m = {0};
    build(&m);
    int32_t tok[B * (T + 1)];
    make_tokens(tok);
    qs_err e = {{0}};
    qs_llm_train_state *s = qs_llm_train_state_new(&m.c, B, T, &e);
    assert_non_null(s);
    assert_null(qs_llm_train_state_opstats(s));   /* no recipe, no counts */
    qs_llm_recipe r;
    assert_int_equal(qs_llm_recipe_preset("mxfp4", &r, &e), 0);
    r.head = 1;
    assert_int_equal(qs_llm_train_state_set_recipe(s, &r, &e), 0);
    qs_llm_grads g = {0};
    assert_int_equal(qs_llm_grads_new(&g, &m, &e), 0);
    double loss;
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &loss, &g, &e), 0);
    const qs_llm_opstat *o = qs_llm_train_state_opstats(s);
    assert_non_null(o);
    expect_counts(o, 1, 1);
    uint64_t under = 0;
    for (int i = 0; i < 3 * QS_OP_COUNT; i++) under += o[i].underflow;
    assert_true(under > 0);   /* mxfp4 takes some gradients to 0 */
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &loss, &g, &e), 0);
    expect_counts(o, 1, 2);
    qs_llm_train_state_opstats_reset(s);
    expect_counts(o, 1, 0);
    for (int i = 0; i < 3 * QS_OP_COUNT; i++) assert_int_equal(o[i].underflow + o[i].clipped + o[i].nonfinite, 0);
    /* nvfp4 (RHT on the wgrad operands, the head FP32): the same values, the head row zero */
    assert_int_equal(qs_llm_recipe_preset("nvfp4", &r, &e), 0);
    assert_int_equal(qs_llm_train_state_set_recipe(s, &r, &e), 0);
    o = qs_llm_train_state_opstats(s);
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &loss, NULL, &e), 0);   /* forward only */
    for (int l = 0; l < 2; l++) {
        assert_true(o[l * QS_OP_COUNT + QS_OP_FWD_X].n > 0);
        assert_int_equal(o[l * QS_OP_COUNT + QS_OP_WGRAD_X].n, 0);
    }
    qs_llm_train_state_opstats_reset(s);
    assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &loss, &g, &e), 0);
    expect_counts(o, 0, 1);
    assert_int_equal(qs_llm_train_state_set_recipe(s, NULL, &e), 0);
    assert_null(qs_llm_train_state_opstats(s));
    qs_llm_grads_free(&g);
    qs_llm_train_state_free(s);
    qs_llm_free(&m);
}

/* A GEMM's operand shared with the previous GEMM (the Q, K, V projections' input, gate and up's, in the
** forward and in the weight gradients) is kept quantized rather than quantized again: every GEMM's
** quantized operand must still be the fresh quantization of its FP32 source for that call (the tap
** sees both), and the counts must add once per GEMM as before.  Two passes with the weights changed in
** between (the same buffers, new values), every preset with 4- or 8-bit operands, SR and RHT. */
typedef struct { qs_llm_train_state *s; const qs_llm_recipe *r; qs_llm_opstat sum[QS_OP_COUNT]; int bad, seen; } tapck;
static void fresh_tap(void *ctx, const void *key, int op, const float *src, const float *q, size_t rows, size_t cols)
{
    (void)key;
    tapck *k = ctx;
    float *y = malloc(rows * cols * sizeof *y);
    qs_err e = {{0}};
    uint64_t call = qs_llm_train_state_calls(k->s) - 1;
    if (!y || qs_llm_recipe_operand_stat(k->r, op, src, rows, cols, call, y, NULL, &k->sum[op], &e) ||
        memcmp(y, q, rows * cols * sizeof *y))
        k->bad++;
    k->seen++;
    free(y);
}

static void test_shared_operands_fresh(void **st)
{
    (void)st;
    static const char *const names[] = {"mxfp4", "nvfp4", "nvfp4-1d", "hif4", "mxfp8", "fp8-hybrid", "hif8"};
    for (size_t p = 0; p < sizeof names / sizeof *names; p++) {
        qs_llm_model m = {0};
        build(&m);
        int32_t tok[B * (T + 1)];
        make_tokens(tok);
        qs_err e = {{0}};
        qs_llm_recipe r;
        assert_int_equal(qs_llm_recipe_preset(names[p], &r, &e), 0);
        qs_llm_train_state *s = qs_llm_train_state_new(&m.c, B, T, &e);
        assert_non_null(s);
        assert_int_equal(qs_llm_train_state_set_recipe(s, &r, &e), 0);
        tapck k = {s, &r, {{0}}, 0, 0};
        qs_llm_train_state_set_tap(s, fresh_tap, &k);
        qs_llm_grads g = {0};
        assert_int_equal(qs_llm_grads_new(&g, &m, &e), 0);
        double loss;
        for (int pass = 0; pass < 2; pass++) {
            assert_int_equal(qs_llm_loss_grad(&m, s, tok, B, T, &loss, &g, &e), 0);
            for (size_t i = 0; i < m.arena_len; i++) m.arena[i] *= 1.0f + 0.01f * (float)urand();
        }
        assert_int_equal(k.bad, 0);
        assert_int_equal(k.seen, 2 * 2 * 2 * 7 * 3);   /* passes x layers x 7 GEMMs x 3, two operands each */
        const qs_llm_opstat *o = qs_llm_train_state_opstats(s);
        for (int op = 0; op < QS_OP_COUNT; op++) {
            qs_llm_opstat t = {0, 0, 0, 0};
            for (int l = 0; l <= 2; l++) {
                t.n += o[l * QS_OP_COUNT + op].n; t.underflow += o[l * QS_OP_COUNT + op].underflow;
                t.clipped += o[l * QS_OP_COUNT + op].clipped; t.nonfinite += o[l * QS_OP_COUNT + op].nonfinite;
            }
            assert_memory_equal(&t, &k.sum[op], sizeof t);
        }
        qs_llm_grads_free(&g);
        qs_llm_train_state_free(s);
        qs_llm_free(&m);
    }
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
        cmocka_unit_test(test_opstat_mxfp4),
        cmocka_unit_test(test_opstat_nvfp4),
        cmocka_unit_test(test_opstat_fp8),
        cmocka_unit_test(test_opstat_hif4),
        cmocka_unit_test(test_opstat_state),
        cmocka_unit_test(test_shared_operands_fresh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
