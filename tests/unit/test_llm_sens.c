/*
** Per-layer sensitivity (analysis/llm_sens.c) on the committed tiny GGUF model: per-layer numerics
** (kernels/llm.c layer_fmt, per-layer weight views), the residual-stream reuse, one (layer, site)
** against a direct evaluation of the same per-layer configuration, the greedy plan and its
** verification.
*/
#include "test_util.h"
#include "test_llm_util.h"

#include <math.h>

#include "../../analysis/llm_sens.h"
#include "../../store/llm_load.h"
#include "../../kernels/format.h"
#include "../../kernels/llm.h"

enum { CTX = 32, NCH = 3, NTXT = CTX * NCH };

static void make_text(int32_t *t, int vocab)
{
    uint64_t s = 4242;
    for (int i = 0; i < NTXT; i++) { s = s * 6364136223846793005ull + 1442695040888963407ull; t[i] = (int32_t)((s >> 33) % vocab); }
}

/* The same format at every layer's sites through layer_fmt = the global act/kv numerics (the
** hidden state before the output projection, which layer_fmt leaves alone, is compared). */
static void test_layer_fmt_equals_global(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    const int L = f.m.c.n_layer, d = f.m.c.dim;
    int32_t t[NTXT];
    make_text(t, f.m.c.vocab);
    qs_apply mx = tu_apply("mxfp4"), f8 = tu_apply("fp8_e4m3");
    const qs_apply **lf = calloc((size_t)L * QS_LLM_NLSITE, sizeof *lf);
    for (int l = 0; l < L; l++) {
        for (int s = 0; s < QS_SITE_LINEAR_COUNT; s++) lf[l * QS_LLM_NLSITE + s] = &mx;
        lf[l * QS_LLM_NLSITE + QS_LLM_LSITE_KV] = &f8;
    }
    qs_llm_numerics g = {&mx, QS_RESQ_NONE, &f8, 1, NULL, NULL}, p = {NULL, QS_RESQ_NONE, NULL, 1, lf, NULL};
    qs_llm_state *s = qs_llm_state_new(&f.m.c, 1, CTX, CTX, &e);
    float *h1 = malloc((size_t)CTX * d * sizeof(float)), *h2 = malloc((size_t)CTX * d * sizeof(float));
    assert_int_equal(qs_llm_forward(&f.m, &g, s, t, 1, CTX, 0, h1, NULL, NULL, &e), 0);
    assert_int_equal(qs_llm_forward(&f.m, &p, s, t, 1, CTX, 0, h2, NULL, NULL, &e), 0);
    assert_memory_equal(h1, h2, (size_t)CTX * d * sizeof(float));
    /* and a single site of one layer changes the result */
    memset(lf, 0, (size_t)L * QS_LLM_NLSITE * sizeof *lf);
    lf[1 * QS_LLM_NLSITE + QS_SITE_FFN_DOWN_IN] = &mx;
    assert_int_equal(qs_llm_forward(&f.m, NULL, s, t, 1, CTX, 0, h1, NULL, NULL, &e), 0);
    assert_int_equal(qs_llm_forward(&f.m, &p, s, t, 1, CTX, 0, h2, NULL, NULL, &e), 0);
    assert_true(memcmp(h1, h2, (size_t)CTX * d * sizeof(float)) != 0);

    /* per-layer weight views: every layer selected = qs_llm_quantize_weights's matrices */
    qs_llm_model all, v;
    uint8_t sel[64];
    memset(sel, 1, sizeof sel);
    assert_int_equal(qs_llm_clone(&all, &f.m, &e), 0);
    assert_int_equal(qs_llm_quantize_weights(&all, &mx, 1, &e), 0);
    assert_int_equal(qs_llm_view_quantize_layers(&v, &f.m, sel, &mx, 1, &e), 0);
    size_t kv = (size_t)f.m.c.n_kv_head * f.m.c.head_dim, ff = (size_t)f.m.c.ffn, dd = (size_t)d;
    for (int l = 0; l < L; l++) {
        assert_memory_equal(v.L[l].wq, all.L[l].wq, dd * dd * sizeof(float));
        assert_memory_equal(v.L[l].wk, all.L[l].wk, kv * dd * sizeof(float));
        assert_memory_equal(v.L[l].w_down, all.L[l].w_down, ff * dd * sizeof(float));
        assert_true(v.L[l].attn_norm == f.m.L[l].attn_norm);   /* norms alias the source */
    }
    assert_true(v.output == f.m.output);   /* the output projection is not a layer's */
    qs_llm_view_free(&v);
    /* one layer only: the others alias the source */
    memset(sel, 0, sizeof sel);
    sel[1] = 1;
    assert_int_equal(qs_llm_view_quantize_layers(&v, &f.m, sel, &mx, 1, &e), 0);
    assert_true(v.L[0].wq == f.m.L[0].wq);
    assert_true(v.L[1].wq != f.m.L[1].wq);
    assert_memory_equal(v.L[1].w_up, all.L[1].w_up, ff * dd * sizeof(float));
    qs_llm_view_free(&v);
    qs_llm_free(&all);
    free(h1); free(h2); free(lf);
    qs_llm_state_free(s);
    qs_llm_file_free(&f);
}

/* Starting a variant from the reference's residual stream at layer l gives the same per-token
** KL as its full forward pass, bit for bit. */
static void test_residual_reuse_exact(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    const int L = f.m.c.n_layer;
    assert_true(L >= 2);
    int32_t t[NTXT];
    make_text(t, f.m.c.vocab);
    qs_apply mx = tu_apply("mxfp4");
    const qs_apply **lf = calloc((size_t)L * QS_LLM_NLSITE, sizeof *lf);
    lf[(L - 1) * QS_LLM_NLSITE + QS_SITE_ATTN_IN] = &mx;
    qs_eval_variant v[2] = {{&f.m, {NULL, QS_RESQ_NONE, NULL, 1, lf, NULL}, 0}, {&f.m, {NULL, QS_RESQ_NONE, NULL, 1, lf, NULL}, L - 1}};
    qs_eval_setup su = {CTX, NCH, 1, -1};
    qs_eval_out out;
    assert_int_equal(qs_llm_eval_run(&f.m, v, NULL, 2, t, NTXT, &su, NULL, NULL, &out, &e), 0);
    assert_memory_equal(out.var[1].kl, out.var[2].kl, out.n * sizeof(double));
    assert_memory_equal(out.var[1].nll, out.var[2].nll, out.n * sizeof(double));
    double sum = 0;
    for (size_t k = 0; k < out.n; k++) sum += out.var[1].kl[k];
    assert_true(sum > 0);   /* the site did something */
    qs_eval_out_free(&out);
    /* a start layer out of range is an error */
    v[1].from_layer = L;
    assert_int_equal(qs_llm_eval_run(&f.m, v, NULL, 2, t, NTXT, &su, NULL, NULL, &out, &e), -1);
    free(lf);
    qs_llm_file_free(&f);
}

/* Sensitivity: FP32 variants give KL exactly 0; each (layer, site) equals a direct `llm eval` of
** that per-layer configuration (full forward, no reuse). */
static void test_sens_matches_direct_eval(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    const int L = f.m.c.n_layer;
    int32_t t[NTXT];
    make_text(t, f.m.c.vocab);
    qs_eval_setup su = {CTX, NCH, 0, -1};
    const int all[QS_SENS_NSITE] = {0, 1, 2, 3, 4, 5};
    qs_sens_table tab;
    assert_int_equal(qs_sens_run(&f.m, NULL, 1, all, QS_SENS_NSITE, t, NTXT, &su, NULL, NULL, &tab, &e), 0);
    for (int v = 0; v < L * QS_SENS_NSITE; v++) assert_true(tab.kl[v] == 0 && tab.dppl[v] == 0);
    qs_sens_table_free(&tab);
    qs_apply f32 = tu_apply("fp32");
    assert_int_equal(qs_sens_run(&f.m, &f32, 1, all, QS_SENS_NSITE, t, NTXT, &su, NULL, NULL, &tab, &e), 0);
    for (int v = 0; v < L * QS_SENS_NSITE; v++) assert_true(tab.kl[v] == 0);
    qs_sens_table_free(&tab);

    qs_apply mx = tu_apply("mxfp4");
    const int sites[3] = {QS_SITE_FFN_DOWN_IN, QS_SENS_KV, QS_SENS_W};
    assert_int_equal(qs_sens_run(&f.m, &mx, 1, sites, 3, t, NTXT, &su, NULL, NULL, &tab, &e), 0);
    const qs_apply **lf = calloc((size_t)L * QS_LLM_NLSITE, sizeof *lf);
    uint8_t one[64] = {0};
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 3; j++) {
            memset(lf, 0, (size_t)L * QS_LLM_NLSITE * sizeof *lf);
            qs_llm_model w;
            memset(&w, 0, sizeof w);
            qs_eval_variant v = {&f.m, {NULL, QS_RESQ_NONE, NULL, 1, lf, NULL}, 0};
            if (sites[j] == QS_SENS_W) {
                memset(one, 0, sizeof one);
                one[l] = 1;
                assert_int_equal(qs_llm_view_quantize_layers(&w, &f.m, one, &mx, 1, &e), 0);
                v.m = &w;
            } else
                lf[l * QS_LLM_NLSITE + sites[j]] = &mx;
            qs_eval_out out;
            qs_eval_summary sm;
            assert_int_equal(qs_llm_eval_run(&f.m, &v, NULL, 1, t, NTXT, &su, NULL, NULL, &out, &e), 0);
            assert_int_equal(qs_eval_summarize(&out.var[0], &out.var[1], out.n, &sm, &e), 0);
            assert_true(sm.kl_mean > 0);
            assert_true(sm.kl_mean == tab.kl[l * 3 + j]);   /* bit-identical */
            assert_true(sm.dppl_rel == tab.dppl[l * 3 + j]);
            qs_eval_out_free(&out);
            if (w.L) qs_llm_view_free(&w);
        }
    /* the plan's verification: nothing promoted = every chosen site at the format (one direct eval) */
    uint8_t *prom = calloc((size_t)L * 3, 1);
    qs_apply bf = tu_apply("bf16");
    qs_eval_summary none, full;
    assert_int_equal(qs_sens_verify(&f.m, &mx, &bf, 1, &tab, prom, t, NTXT, &su, &none, &e), 0);
    memset(lf, 0, (size_t)L * QS_LLM_NLSITE * sizeof *lf);
    for (int l = 0; l < L; l++) {
        lf[l * QS_LLM_NLSITE + QS_SITE_FFN_DOWN_IN] = &mx;
        lf[l * QS_LLM_NLSITE + QS_LLM_LSITE_KV] = &mx;
    }
    uint8_t every[64];
    memset(every, 1, sizeof every);
    qs_llm_model w;
    assert_int_equal(qs_llm_view_quantize_layers(&w, &f.m, every, &mx, 1, &e), 0);
    qs_eval_variant v = {&w, {NULL, QS_RESQ_NONE, NULL, 1, lf, NULL}, 0};
    qs_eval_out out;
    qs_eval_summary sm;
    assert_int_equal(qs_llm_eval_run(&f.m, &v, NULL, 1, t, NTXT, &su, NULL, NULL, &out, &e), 0);
    assert_int_equal(qs_eval_summarize(&out.var[0], &out.var[1], out.n, &sm, &e), 0);
    assert_true(none.kl_mean == sm.kl_mean);
    qs_eval_out_free(&out);
    qs_llm_view_free(&w);
    /* everything promoted to fp32 ("hi" = fp32 identity): the plan is the reference */
    qs_apply f32b = tu_apply("fp32");
    memset(prom, 1, (size_t)L * 3);
    assert_int_equal(qs_sens_verify(&f.m, &mx, &f32b, 1, &tab, prom, t, NTXT, &su, &full, &e), 0);
    assert_true(full.kl_mean == 0);
    free(prom);
    free(lf);
    qs_sens_table_free(&tab);
    qs_llm_file_free(&f);
}

/* The greedy order on a constructed table: KL per extra bit decides, not KL alone. */
static void test_plan_greedy(void **st)
{
    (void)st;
    qs_llm_cfg c = {.n_layer = 2, .dim = 8, .n_head = 2, .n_kv_head = 1, .head_dim = 4, .ffn = 32, .vocab = 100, .ctx = 64,
                    .rope_base = 10000, .eps = 1e-5f};   /* dim 8, kv_dim 4, ffn 32 */
    double kl[4] = {0.10, 0.30,    /* layer 0: attn_in (8 elems), ffn_down_in (32 elems) */
                    0.05, -1e-9};  /* layer 1 */
    qs_sens_table t = {2, 2, {QS_SITE_ATTN_IN, QS_SITE_FFN_DOWN_IN, 0, 0, 0, 0}, 100, 1, 0, kl, NULL, NULL, NULL};
    qs_sens_step o[4];
    double pred0, bits0;
    qs_sens_plan_order(&t, &c, 4, 16, o, &pred0, &bits0);
    assert_true(fabs(pred0 - 0.45) < 1e-8);
    /* per extra bit (elements x 12): 0.10/96 = 1.0e-3 > 0.30/384 = 7.8e-4 > 0.05/96 = 5.2e-4: the largest KL is second */
    assert_int_equal(o[0].layer, 0); assert_int_equal(o[0].j, 0);
    assert_int_equal(o[1].layer, 0); assert_int_equal(o[1].j, 1);
    assert_int_equal(o[2].layer, 1); assert_int_equal(o[2].j, 0);
    assert_int_equal(o[3].layer, 1); assert_int_equal(o[3].j, 1);   /* KL <= 0 last */
    assert_true(fabs(o[0].predicted_kl - 0.35) < 1e-8);
    assert_true(fabs(o[1].predicted_kl - 0.05) < 1e-8);
    /* bits: 80 elements at 4 bits, then +96, +384 extra */
    assert_true(fabs(o[0].bits_avg - (320 + 96) / 80.0) < 1e-12);
    assert_true(fabs(o[1].bits_avg - (320 + 96 + 384) / 80.0) < 1e-12);
    assert_int_equal(qs_sens_plan_choose(o, 4, pred0, bits0, 0.5, -1), 0);
    assert_int_equal(qs_sens_plan_choose(o, 4, pred0, bits0, 0.35, -1), 1);
    assert_int_equal(qs_sens_plan_choose(o, 4, pred0, bits0, 0.2, -1), 2);
    assert_int_equal(qs_sens_plan_choose(o, 4, pred0, bits0, 0.0, -1), 3);
    assert_int_equal(qs_sens_plan_choose(o, 4, pred0, bits0, -1, 4), 0);
    assert_int_equal(qs_sens_plan_choose(o, 4, pred0, bits0, -1, 6), 1);
    assert_int_equal(qs_sens_plan_choose(o, 4, pred0, bits0, -1, 16), 4);
    uint8_t prom[4] = {1, 0, 0, 0};
    qs_sens_bits b = qs_sens_plan_bits(&t, &c, prom, 4, 16);
    assert_true(fabs(b.activations - (320 + 96) / 80.0) < 1e-12);
    assert_true(isnan(b.weights));
}

/* Refinement of a plan that missed its KL target: by the measured/predicted ratio, at least doubling
** the previous addition, within the budget's steps. */
static void test_plan_refine(void **st)
{
    (void)st;
    const double pk[8] = {0.8, 0.6, 0.45, 0.3, 0.2, 0.1, 0.05, 0};
    qs_sens_step o[8];
    memset(o, 0, sizeof o);
    for (int i = 0; i < 8; i++) o[i].predicted_kl = pk[i];
    /* measured twice the predicted 0.8: the plan must reach predicted 0.4, step 4 (0.3) */
    assert_int_equal(qs_sens_plan_refine(o, 8, 1, 0.8, 1.6, 0.8, 0, 8), 4);
    /* a small miss: one more step (0.6 x 1.0625 <= 0.8) */
    assert_int_equal(qs_sens_plan_refine(o, 8, 1, 0.8, 0.85, 0.8, 0, 8), 2);
    /* the ratio asks for 2 steps more, but the previous round added 3: at least 6 more, capped at 8 */
    assert_int_equal(qs_sens_plan_refine(o, 8, 4, 0.3, 0.45, 0.2, 3, 8), 8);
    assert_int_equal(qs_sens_plan_refine(o, 8, 2, 0.6, 1.2, 0.4, 1, 8), 5);   /* to predicted 0.2 */
    /* the bits budget allows 3 steps: no further */
    assert_int_equal(qs_sens_plan_refine(o, 8, 1, 0.8, 1.6, 0.8, 0, 3), 3);
    assert_int_equal(qs_sens_plan_refine(o, 8, 3, 0.45, 1.6, 0.1, 2, 3), 3);
    assert_int_equal(qs_sens_plan_refine(o, 8, 8, 0, 0.1, 0.01, 4, 8), 8);
    /* nothing predicted is left (or the measurement is not finite): to predicted 0 */
    assert_int_equal(qs_sens_plan_refine(o, 8, 2, 0, 0.3, 0.1, 0, 8), 8);
    assert_int_equal(qs_sens_plan_refine(o, 8, 1, 0.8, NAN, 0.1, 0, 8), 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_fmt_equals_global),
        cmocka_unit_test(test_residual_reuse_exact),
        cmocka_unit_test(test_sens_matches_direct_eval),
        cmocka_unit_test(test_plan_greedy),
        cmocka_unit_test(test_plan_refine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
