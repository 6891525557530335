/*
** The training loop (analysis/train_loop.c): llm.c-style init statistics and determinism, gradient
** accumulation equal to the larger batch it splits (same windows), clipping scale, and a loss that
** falls on a periodic token stream; the records' operand counts under a recipe, and a non-finite
** loss or gradient stopping the run at the first site.
*/
#include "test_util.h"

#include <math.h>

#include "../../analysis/train_loop.h"
#include "../../kernels/llm.h"

static const qs_llm_cfg kCfg = {.n_layer = 2, .dim = 32, .n_head = 4, .n_kv_head = 2, .head_dim = 8, .ffn = 64,
                                .vocab = 16, .ctx = 16, .rope_base = 10000, .eps = 1e-5f, .rope_neox = 1};

static double sd(const float *p, size_t n)
{
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) { s += p[i]; s2 += (double)p[i] * p[i]; }
    return sqrt(s2 / n - (s / n) * (s / n));
}

static void test_init(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_cfg c = kCfg;
    c.dim = 128; c.ffn = 256; c.vocab = 64; c.n_layer = 8;
    qs_llm_model a, b;
    assert_int_equal(qs_llm_alloc(&a, &c, 1, &e), 0);
    assert_int_equal(qs_llm_alloc(&b, &c, 1, &e), 0);
    qs_train_init(&a, 3);
    qs_train_init(&b, 3);
    assert_memory_equal(a.arena, b.arena, a.arena_len * sizeof(float));
    assert_float_equal(sd(a.L[0].wq, 32 * 128), 0.02, 0.001);
    assert_float_equal(sd(a.L[3].w_up, 256 * 128), 0.02, 0.0005);
    assert_float_equal(sd(a.L[5].w_down, 256 * 128), 0.02 / 4, 0.0002);   /* 1/sqrt(2*8) */
    assert_float_equal(sd(a.L[1].wo, 128 * 32), 0.02 / 4, 0.0003);
    assert_true(a.out_norm[5] == 1.0f && a.L[7].attn_norm[0] == 1.0f && a.L[2].ffn_norm[127] == 1.0f);
    assert_true(a.L[0].wq[0] != a.L[1].wq[0]);                             /* tensors draw their own streams */
    qs_train_init(&b, 4);
    assert_true(memcmp(a.arena, b.arena, a.arena_len * sizeof(float)) != 0);
    qs_llm_free(&a);
    qs_llm_free(&b);
}

static int32_t *stream(size_t n)
{
    int32_t *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = (int32_t)((i * 7 + i / 5) % 16);
    return t;
}

static qs_train_opts opts(int batch, int accum, int steps)
{
    return (qs_train_opts){.batch = batch, .T = 12, .steps = steps, .accum = accum, .warmup = 2, .eval_every = 0,
                           .val_seqs = 4, .lr = 3e-3, .min_frac = 0.1, .clip = 0, .adam = {0.9, 0.95, 1e-8, 0.1},
                           .seed = 11};
}

/* batch 4 x accum 1 and batch 2 x accum 2 read the same windows: same loss, gradient norm, weights */
static void test_accum_equals_batch(void **st)
{
    (void)st;
    qs_err e = {{0}};
    int32_t *tok = stream(2000);
    qs_llm_model a, b;
    assert_int_equal(qs_llm_alloc(&a, &kCfg, 1, &e), 0);
    qs_train_init(&a, 1);
    assert_int_equal(qs_llm_clone(&b, &a, &e), 0);
    qs_train_rec ra[3], rb[3];
    double va, vb;
    qs_train_opts oa = opts(4, 1, 3), ob = opts(2, 2, 3);
    assert_int_equal(qs_train_run(&a, tok, 2000, tok, 500, &oa, &va, ra, NULL, NULL, &e), 0);
    assert_int_equal(qs_train_run(&b, tok, 2000, tok, 500, &ob, &vb, rb, NULL, NULL, &e), 0);
    assert_float_equal(va, vb, 1e-6);
    for (int s = 0; s < 3; s++) {
        assert_float_equal(ra[s].train_loss, rb[s].train_loss, 1e-5);
        assert_float_equal(ra[s].grad_norm, rb[s].grad_norm, 1e-4 * ra[s].grad_norm);
        assert_float_equal(ra[s].lr, rb[s].lr, 0);
    }
    double dmax = 0;
    for (size_t i = 0; i < a.arena_len; i++) dmax = fmax(dmax, fabs((double)a.arena[i] - b.arena[i]));
    assert_true(dmax < 1e-4);
    /* clipping scales the gradient: with eps = 1 AdamW's first step is nearly linear in it, so a clip
    ** at 1e-3 of the norm moves the weights ~1000 times less (b keeps the initial weights) */
    qs_llm_model c, d;
    qs_train_init(&b, 1);
    assert_int_equal(qs_llm_clone(&c, &b, &e), 0);
    assert_int_equal(qs_llm_clone(&d, &b, &e), 0);
    qs_train_opts oc = opts(4, 1, 1), od = opts(4, 1, 1);
    oc.adam.eps = od.adam.eps = 1;
    oc.adam.wd = od.adam.wd = 0;
    oc.clip = 1e-3 * ra[0].grad_norm;
    assert_int_equal(qs_train_run(&c, tok, 2000, tok, 500, &oc, &vb, rb, NULL, NULL, &e), 0);
    assert_true(rb[0].grad_norm > oc.clip);   /* reported before clipping */
    assert_int_equal(qs_train_run(&d, tok, 2000, tok, 500, &od, &vb, rb, NULL, NULL, &e), 0);
    double dc = 0, dd = 0;
    for (size_t i = 0; i < b.arena_len; i++) {
        dc = fmax(dc, fabs((double)c.arena[i] - b.arena[i]));
        dd = fmax(dd, fabs((double)d.arena[i] - b.arena[i]));
    }
    assert_true(dd > 0 && dc < 0.01 * dd);
    qs_llm_free(&d);
    qs_llm_free(&a); qs_llm_free(&b); qs_llm_free(&c);
    free(tok);
}

static void test_learns_and_refuses(void **st)
{
    (void)st;
    qs_err e = {{0}};
    int32_t *tok = stream(4000);
    qs_llm_model m;
    assert_int_equal(qs_llm_alloc(&m, &kCfg, 1, &e), 0);
    qs_train_init(&m, 2);
    qs_train_rec r[60];
    double v0;
    qs_train_opts o = opts(4, 1, 60);
    o.eval_every = 20;
    assert_int_equal(qs_train_run(&m, tok, 4000, tok + 3000, 1000, &o, &v0, r, NULL, NULL, &e), 0);
    assert_true(isnan(r[0].val_loss) && !isnan(r[19].val_loss) && !isnan(r[59].val_loss));
    assert_true(r[59].val_loss < 0.5 * v0);
    o.T = 32;   /* beyond the model's context */
    assert_int_equal(qs_train_run(&m, tok, 4000, tok, 1000, &o, &v0, r, NULL, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "context"));
    o = opts(4, 1, 1);
    assert_int_equal(qs_train_run(&m, tok, 12, tok, 1000, &o, &v0, r, NULL, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "fewer than ctx+1"));
    o.accum = 0;
    assert_int_equal(qs_train_run(&m, tok, 4000, tok, 1000, &o, &v0, r, NULL, NULL, &e), -1);
    qs_llm_free(&m);
    free(tok);
}

/* Under a recipe every record points at the step's operand counts, (layers + 1) x 6: the values of every
** GEMM operand of the step's accum micro-batches; without a recipe none. */
typedef struct { int calls; uint64_t n[3 * QS_OP_COUNT]; int null; } seen;
static int on_step(void *ctx, const qs_train_rec *r)
{
    seen *v = ctx;
    v->calls++;
    v->null = r->opstat == NULL;
    for (int i = 0; !v->null && i < 3 * QS_OP_COUNT; i++) v->n[i] = r->opstat[i].n;
    return 0;
}

static void test_opstat_records(void **st)
{
    (void)st;
    qs_err e = {{0}};
    int32_t *tok = stream(2000);
    qs_llm_model m;
    assert_int_equal(qs_llm_alloc(&m, &kCfg, 1, &e), 0);
    qs_train_init(&m, 1);
    qs_llm_recipe rc;
    assert_int_equal(qs_llm_recipe_preset("mxfp8", &rc, &e), 0);
    qs_train_opts o = opts(2, 2, 2);
    o.recipe = &rc;
    qs_train_rec r[2];
    double v0;
    seen v = {0};
    assert_int_equal(qs_train_run(&m, tok, 2000, tok, 500, &o, &v0, r, on_step, &v, &e), 0);
    assert_int_equal(v.calls, 2);
    assert_false(v.null);
    /* per layer: X (R x in) and W (out x in) of Q, K, V, O, gate, up, down; dY is R x out */
    const uint64_t R = 2 * 2 * 12, d = 32, q = 32, kv = 16, F = 64;   /* accum x batch x T rows */
    const uint64_t in[7] = {d, d, d, q, d, d, F}, out[7] = {q, kv, kv, d, F, F, d};
    uint64_t sin = 0, sout = 0, sio = 0;
    for (int i = 0; i < 7; i++) { sin += in[i]; sout += out[i]; sio += in[i] * out[i]; }
    const uint64_t want[QS_OP_COUNT] = {R * sin, 2 * sio, R * sout, 2 * sio, R * sout, R * sin};
    for (int l = 0; l < 3; l++)
        for (int op = 0; op < QS_OP_COUNT; op++) assert_int_equal(v.n[l * QS_OP_COUNT + op], l < 2 ? want[op] : 0);
    o.recipe = NULL;
    v = (seen){0};
    assert_int_equal(qs_train_run(&m, tok, 2000, tok, 500, &o, &v0, r, on_step, &v, &e), 0);
    assert_true(v.calls == 2 && v.null);
    qs_llm_free(&m);
    free(tok);
}

/* A run whose loss or gradient turns non-finite stops at that step naming the first site. */
static void expect_site(qs_llm_model *m, const qs_llm_recipe *rc, const char *want)
{
    qs_err e = {{0}};
    int32_t *tok = stream(2000);
    qs_train_opts o = opts(2, 2, 3);
    o.recipe = rc;
    qs_train_rec r[3];
    double v0;
    assert_int_equal(qs_train_run(m, tok, 2000, tok, 500, &o, &v0, r, NULL, NULL, &e), -1);
    print_message("# %s\n", e.msg);
    assert_non_null(strstr(e.msg, want));
    free(tok);
}

static void test_nonfinite_site(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_model m;
    assert_int_equal(qs_llm_alloc(&m, &kCfg, 1, &e), 0);
    /* a NaN weight of layer 1's up projection: layer 0 stays finite, layer 1's gate GEMM too */
    qs_train_init(&m, 1);
    m.L[1].w_up[37] = NAN;
    expect_site(&m, NULL, "step 1: the loss is not finite: non-finite values first in layer 1 fwd w_up GEMM: its weights");
    /* FP8 E4M3 forward inputs without saturation: a huge ffn_norm weight of layer 1 overflows the
    ** w_gate GEMM's input to NaN (the attention's inputs before it stay in range) */
    qs_llm_recipe rc;
    assert_int_equal(qs_llm_recipe_preset("fp32", &rc, &e), 0);
    rc.op[QS_OP_FWD_X] = (qs_llm_slot){.on = 1, .a = {.f = qs_format_find("fp8_e4m3"), .gran = QS_GRAN_BLOCK}};
    qs_train_init(&m, 1);
    m.L[1].ffn_norm[3] = 1e6f;
    expect_site(&m, &rc, "step 1: the loss is not finite: non-finite values first in layer 1 fwd w_gate GEMM: its fwd.x operand after quantization");
    /* the same on the weight-gradient input only: the forward and the loss stay finite, the backward of
    ** layer 1 meets the SwiGLU output (~1e4) as the w_down wgrad's X first */
    assert_int_equal(qs_llm_recipe_preset("fp32", &rc, &e), 0);
    rc.op[QS_OP_WGRAD_X] = (qs_llm_slot){.on = 1, .a = {.f = qs_format_find("fp8_e4m3"), .gran = QS_GRAN_BLOCK}};
    qs_train_init(&m, 1);
    for (int i = 0; i < 32; i++) m.L[1].ffn_norm[i] = 1e3f;
    expect_site(&m, &rc, "step 1: the gradient is not finite: non-finite values first in layer 1 bwd wgrad w_down GEMM: its wgrad.x operand after quantization");
    qs_llm_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_accum_equals_batch),
        cmocka_unit_test(test_learns_and_refuses),
        cmocka_unit_test(test_opstat_records),
        cmocka_unit_test(test_nonfinite_site),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
