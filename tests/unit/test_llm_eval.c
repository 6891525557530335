/*
** `llm eval` statistics (kernels/llm_stats.c), the chunked evaluation and its scoring convention
** (analysis/llm_eval.c) on the committed tiny GGUF model, and the element-cast scaling default
** (kernels/cast_scale.c).
*/
#include "test_util.h"

#include <math.h>

#include "../../analysis/llm_eval.h"
#include "../../store/llm_load.h"
#include "../../kernels/cast_scale.h"
#include "../../kernels/format.h"
#include "../../kernels/llm.h"
#include "../../kernels/llm_rows.h"
#include "../../kernels/llm_stats.h"
#include "../../kernels/simd.h"

/* ---------------------------------------------------------------- per-token statistics */

static void test_kl_identical_is_zero(void **st)
{
    (void)st;
    enum { V = 4099 };
    static float l[V], p[V];
    uint64_t s = 12345;
    for (int v = 0; v < V; v++) { s = s * 6364136223846793005ull + 1442695040888963407ull; l[v] = (float)((s >> 40) % 20000) / 1000.0f - 10; }
    qs_ref_row r;
    qs_ref_row_make(l, V, 17, p, &r);
    qs_tok_stat t;
    qs_tok_stat_make(l, V, 17, p, &r, &t);
    assert_true(t.finite);
    assert_true(t.kl == 0.0);            /* exactly */
    assert_true(t.dp == 0.0);
    assert_true(t.lp_q == r.lp_tok);
    assert_int_equal(t.same_top, 1);
    assert_true(fabs(r.psum - 1) < 1e-5);
}

static void test_kl_hand_case(void **st)
{
    (void)st;
    const float lr[3] = {0, 1, 2}, lq[3] = {0.5f, 0.5f, -1};
    float p[3];
    qs_ref_row r;
    qs_ref_row_make(lr, 3, 1, p, &r);
    qs_tok_stat t;
    qs_tok_stat_make(lq, 3, 1, p, &r, &t);
    /* independent: probabilities from the definition */
    double zr = exp(0) + exp(1) + exp(2), zq = 2 * exp(0.5) + exp(-1);
    double pr[3] = {1 / zr, exp(1) / zr, exp(2) / zr}, pq[3] = {exp(0.5) / zq, exp(0.5) / zq, exp(-1) / zq};
    double kl = 0;
    for (int v = 0; v < 3; v++) kl += pr[v] * log(pr[v] / pq[v]);
    assert_true(fabs(t.kl - kl) < 1e-7);
    assert_true(fabs(t.lp_q - log(pq[1])) < 1e-7);
    assert_true(fabs(r.lp_tok - log(pr[1])) < 1e-7);
    assert_true(fabs(t.dp - (pq[1] - pr[1])) < 1e-7);
    assert_int_equal(r.top, 2);
    assert_int_equal(t.same_top, 0);   /* argmax of lq is 0 (first of the tie) */
    /* a NaN logit: the row is flagged, not silently used */
    const float bad[3] = {0, NAN, 1};
    qs_tok_stat_make(bad, 3, 1, p, &r, &t);
    assert_int_equal(t.finite, 0);
    assert_true(isnan(t.kl));
}

static void test_mean_se_quantiles(void **st)
{
    (void)st;
    const double x[4] = {4, 1, 3, 2};
    double m, se;
    qs_mean_se(x, 4, &m, &se);
    assert_true(fabs(m - 2.5) < 1e-15);
    assert_true(fabs(se - sqrt(1.25 / 3)) < 1e-15);   /* population variance / (n - 1) */
    double *s = qs_sorted_copy(x, 4);
    assert_true(s[0] == 1 && s[3] == 4);
    assert_true(fabs(qs_quantile_sorted(s, 4, 0.5) - 2.5) < 1e-15);
    assert_true(fabs(qs_quantile_sorted(s, 4, 0.9) - 3.7) < 1e-12);   /* numpy.quantile(..., 0.9) */
    assert_true(qs_quantile_sorted(s, 4, 0) == 1 && qs_quantile_sorted(s, 4, 1) == 4);
    assert_true(qs_quantile_sorted(s, 1, 0.99) == 1);
    assert_true(isnan(qs_quantile_sorted(s, 0, 0.5)));
    free(s);
    const double y[4] = {8, 2, 6, 4};
    assert_true(fabs(qs_pearson(x, y, 4) - 1) < 1e-15);
}

static void test_klhist(void **st)
{
    (void)st;
    qs_klhist h;
    memset(&h, 0, sizeof h);
    qs_klhist_add(&h, 0);
    qs_klhist_add(&h, -1e-12);
    qs_klhist_add(&h, 1e-12);
    qs_klhist_add(&h, 1e3);
    qs_klhist_add(&h, NAN);
    qs_klhist_add(&h, 1.0);              /* 2^0: edge k = 28 * 4 */
    qs_klhist_add(&h, 0.99);             /* just below: bin k - 1 */
    assert_int_equal(h.zero, 2);
    assert_int_equal(h.under, 1);
    assert_int_equal(h.over, 1);
    assert_int_equal(h.nonfinite, 1);
    assert_int_equal(h.counts[-QS_KLHIST_LO * QS_KLHIST_PER], 1);
    assert_int_equal(h.counts[-QS_KLHIST_LO * QS_KLHIST_PER - 1], 1);
    assert_true(qs_klhist_edge(0) == ldexp(1, QS_KLHIST_LO));
    assert_true(fabs(qs_klhist_edge(QS_KLHIST_BINS) - 128) < 1e-12);
}

/* Delta ppl and its interval from hand-made per-token values. */
static void test_summary(void **st)
{
    (void)st;
    double nr[4] = {1, 1, 1, 1}, nq[4] = {1.1, 1.3, 1.0, 1.2}, kl[4] = {0.1, 0.3, 0.0, 0.2}, dp[4] = {-0.1, 0.1, 0.2, 0.0};
    uint8_t same[4] = {1, 0, 1, 1};
    qs_eval_var_out ref = {.nll = nr}, cfg = {.nll = nq, .kl = kl, .dp = dp, .same_top = same};
    qs_eval_summary s;
    qs_err e = {{0}};
    assert_int_equal(qs_eval_summarize(&ref, NULL, 4, &s, &e), 0);
    assert_true(fabs(s.ppl - exp(1)) < 1e-12 && s.ppl_se == 0);
    assert_int_equal(qs_eval_summarize(&ref, &cfg, 4, &s, &e), 0);
    double d = 0.15, se = sqrt((0.0025 + 0.0225 + 0.0225 + 0.0025) / 4 / 3), r = exp(d);   /* deviations of d_k = 0.1, 0.3, 0, 0.2 */
    assert_true(fabs(s.lnratio_mean - d) < 1e-12);
    assert_true(fabs(s.lnratio_se - se) < 1e-12);
    assert_true(fabs(s.dppl_rel - (r - 1)) < 1e-12);
    assert_true(fabs(s.dppl_lo - (r - 1 - 1.959964 * r * se)) < 1e-12);
    assert_true(fabs(s.dppl_hi - (r - 1 + 1.959964 * r * se)) < 1e-12);
    assert_true(fabs(s.ppl - exp(1.15)) < 1e-12);
    assert_true(fabs(s.kl_mean - 0.15) < 1e-12);
    assert_true(fabs(s.kl_q[5] - 0.15) < 1e-12);   /* median */
    assert_true(s.kl_q[10] == 0.3 && s.kl_q[0] == 0);
    assert_true(fabs(s.top1 - 0.75) < 1e-12 && fabs(s.top1_se - sqrt(0.75 * 0.25 / 3)) < 1e-12);
    assert_true(fabs(s.dp_rms - sqrt(0.06 / 4)) < 1e-12);
    assert_int_equal(s.hist.zero, 1);
    /* a non-finite token is left out of every statistic */
    nq[2] = NAN;
    assert_int_equal(qs_eval_summarize(&ref, &cfg, 4, &s, &e), 0);
    assert_int_equal(s.n, 3);
    assert_true(fabs(s.kl_mean - 0.2) < 1e-12);
}

/* Every row non-finite: no statistics at all (NaN), never PPL 1, dPPL 0 and KL 0 (issue 28). */
static void test_summary_all_nonfinite(void **st)
{
    (void)st;
    double nr[3] = {1, 2, 1}, nq[3] = {NAN, NAN, INFINITY}, kl[3] = {0}, dp[3] = {0};
    uint8_t same[3] = {0};
    qs_eval_var_out ref = {.nll = nr}, cfg = {.nll = nq, .kl = kl, .dp = dp, .same_top = same};
    qs_eval_summary s;
    qs_err e = {{0}};
    assert_int_equal(qs_eval_summarize(&ref, &cfg, 3, &s, &e), 0);
    assert_int_equal(s.n, 0);
    assert_true(isnan(s.ppl) && isnan(s.ppl_se) && isnan(s.nll_mean));
    assert_true(isnan(s.dppl_rel) && isnan(s.dppl_lo) && isnan(s.dppl_hi) && isnan(s.ppl_ratio) && isnan(s.ppl_diff));
    assert_true(isnan(s.kl_mean) && isnan(s.kl_se) && isnan(s.top1) && isnan(s.dp_rms) && isnan(s.cor_lnppl));
    for (int q = 0; q < 11; q++) assert_true(isnan(s.kl_q[q]) && isnan(s.dp_q[q]));
    /* the reference alone, all rows non-finite: no perplexity either */
    assert_int_equal(qs_eval_summarize(&cfg, NULL, 3, &s, &e), 0);
    assert_true(s.n == 0 && isnan(s.ppl));
}

/* ---------------------------------------------------------------- scoring convention */

static void test_scoring_convention(void **st)
{
    (void)st;
    int32_t text[20], in[8];
    for (int i = 0; i < 20; i++) text[i] = 100 + i;
    qs_eval_setup half = {8, 2, 0, -1}, all = {8, 2, 1, 5};
    assert_int_equal(qs_eval_first(&half), 4);                  /* positions 4..6 predict tokens 5..7 */
    assert_int_equal((int)qs_eval_ntok(&half), 2 * 3);
    assert_int_equal(qs_eval_first(&all), 0);                   /* positions 0..6 predict tokens 1..7 */
    assert_int_equal((int)qs_eval_ntok(&all), 2 * 7);
    qs_eval_chunk_input(&half, text, 1, in);
    assert_int_equal(in[0], 108);                               /* no BOS: the text as is */
    assert_int_equal(in[7], 115);
    qs_eval_chunk_input(&all, text, 1, in);
    assert_int_equal(in[0], 5);                                 /* BOS replaces the first token */
    assert_int_equal(in[1], 109);
}

/* The chunked evaluation of the tiny model equals a position-by-position computation: each
** chunk fed one token at a time through the KV cache (the decode path, row-by-row attention),
** logits and log-probabilities from qs_llm_logprob. */
static void test_eval_matches_stepwise(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    enum { CTX = 24, NCH = 3, N = CTX * NCH + 5 };
    int32_t text[N];
    uint64_t s = 99;
    for (int i = 0; i < N; i++) { s = s * 6364136223846793005ull + 1442695040888963407ull; text[i] = (int32_t)((s >> 33) % f.m.c.vocab); }
    const int V = f.m.c.vocab, d = f.m.c.dim;
    for (int mode = 0; mode < 2; mode++) {
        qs_eval_setup su = {CTX, NCH, mode, mode ? 1 : -1};
        qs_eval_out out;
        assert_int_equal(qs_llm_eval_run(&f.m, NULL, NULL, 0, text, N, &su, NULL, NULL, &out, &e), 0);
        assert_int_equal((int)out.n, NCH * (mode ? CTX - 1 : CTX / 2 - 1));
        qs_llm_state *stt = qs_llm_state_new(&f.m.c, 1, CTX, CTX, &e);
        float *h = malloc((size_t)d * sizeof(float)), *lg = malloc((size_t)V * sizeof(float)), *scr = malloc((size_t)d * sizeof(float));
        int32_t in[CTX];
        double maxdiff = 0;
        size_t k = 0;
        for (int c = 0; c < NCH; c++) {
            qs_eval_chunk_input(&su, text, c, in);
            for (int t = 0; t < CTX - 1; t++) {
                assert_int_equal(qs_llm_forward(&f.m, NULL, stt, &in[t], 1, 1, t, h, NULL, NULL, &e), 0);
                if (t < qs_eval_first(&su)) continue;
                assert_int_equal(qs_llm_logits(&f.m, NULL, h, 1, scr, lg, &e), 0);
                double nll = -qs_llm_logprob(lg, V, text[c * CTX + t + 1], NULL);
                double dd = fabs(nll - out.var[0].nll[k++]);
                if (dd > maxdiff) maxdiff = dd;
            }
        }
        assert_int_equal((int)k, (int)out.n);
        assert_true(maxdiff < 2e-4);
        /* an identical configuration: KL 0 and the same perplexity */
        qs_eval_variant same = {&f.m, {NULL, QS_RESQ_NONE, NULL, 1, NULL, NULL}, 0};
        int want = 1;
        qs_eval_out o2;
        assert_int_equal(qs_llm_eval_run(&f.m, &same, &want, 1, text, N, &su, NULL, NULL, &o2, &e), 0);
        qs_eval_summary sm;
        assert_int_equal(qs_eval_summarize(&o2.var[0], &o2.var[1], o2.n, &sm, &e), 0);
        assert_true(sm.kl_mean == 0 && sm.kl_q[10] == 0 && sm.top1 == 1 && sm.dppl_rel == 0);
        qs_eval_out_free(&o2);
        free(h); free(lg); free(scr);
        qs_llm_state_free(stt);
        qs_eval_out_free(&out);
    }
    /* a text too short for the chunks is an error, not a crash */
    qs_eval_setup big = {CTX, NCH + 2, 0, -1};
    qs_eval_out out;
    assert_int_equal(qs_llm_eval_run(&f.m, NULL, NULL, 0, text, N, &big, NULL, NULL, &out, &e), -1);
    qs_llm_file_free(&f);
}

/* A configuration whose weights hold an Inf: the non-finite values are counted with their first
** site, the rows are left out of the statistics, and the reference is untouched. */
static void test_nonfinite_reported(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    qs_llm_model bad;
    assert_int_equal(qs_llm_clone(&bad, &f.m, &e), 0);
    bad.L[1].w_gate[0] = INFINITY;   /* gate channel 0 of layer 1 -> Inf -> the down-projection input */
    int32_t text[64];
    for (int i = 0; i < 64; i++) text[i] = (int32_t)(i * 7 % f.m.c.vocab);
    qs_eval_setup su = {32, 2, 0, -1};
    qs_eval_variant v = {&bad, {NULL, QS_RESQ_NONE, NULL, 1, NULL, NULL}, 0};
    int want = 1;
    qs_eval_out out;
    assert_int_equal(qs_llm_eval_run(&f.m, &v, &want, 1, text, 64, &su, NULL, NULL, &out, &e), 0);
    assert_int_equal((int)out.var[0].nf.act_values, 0);
    assert_int_equal(out.var[0].nf.first_layer, -1);
    assert_true(out.var[1].nf.act_values > 0);
    assert_int_equal(out.var[1].nf.first_layer, 1);
    assert_int_equal(out.var[1].nf.first_site, QS_SITE_FFN_DOWN_IN);
    assert_int_equal((int)out.var[1].nf.logit_rows, (int)out.n);   /* every scored row is NaN */
    qs_eval_summary sm;
    assert_int_equal(qs_eval_summarize(&out.var[0], &out.var[1], out.n, &sm, &e), 0);
    assert_int_equal((int)sm.n, 0);
    qs_eval_out_free(&out);
    qs_llm_free(&bad);
    qs_llm_file_free(&f);
}

/* Prefill (T = ctx, attention on SGEMM tiles) and decode (T = 1, row loop) give the same logits. */
static void test_batched_vs_stepwise_logits(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    enum { T = 200 };   /* > one 128-row attention tile */
    const int V = f.m.c.vocab, d = f.m.c.dim;
    int32_t ids[T];
    for (int i = 0; i < T; i++) ids[i] = (int32_t)((i * 37 + 11) % V);
    float *hb = malloc((size_t)T * d * sizeof(float)), *hs = malloc((size_t)T * d * sizeof(float));
    float *lb = malloc((size_t)T * V * sizeof(float)), *ls = malloc((size_t)T * V * sizeof(float)), *scr = malloc((size_t)T * d * sizeof(float));
    qs_llm_state *a = qs_llm_state_new(&f.m.c, 1, T, T, &e), *b = qs_llm_state_new(&f.m.c, 1, T, T, &e);
    assert_int_equal(qs_llm_forward(&f.m, NULL, a, ids, 1, T, 0, hb, NULL, NULL, &e), 0);
    /* two prefill calls (the second attends to a cache filled by the first), then steps */
    assert_int_equal(qs_llm_forward(&f.m, NULL, b, ids, 1, 150, 0, hs, NULL, NULL, &e), 0);
    for (int t = 150; t < T; t++) assert_int_equal(qs_llm_forward(&f.m, NULL, b, ids + t, 1, 1, t, hs + (size_t)t * d, NULL, NULL, &e), 0);
    assert_int_equal(qs_llm_logits(&f.m, NULL, hb, T, scr, lb, &e), 0);
    assert_int_equal(qs_llm_logits(&f.m, NULL, hs, T, scr, ls, &e), 0);
    double mx = 0, md = 0;
    for (size_t i = 0; i < (size_t)T * V; i++) {
        if (fabs(lb[i]) > mx) mx = fabs(lb[i]);
        if (fabs(lb[i] - ls[i]) > md) md = fabs(lb[i] - ls[i]);
    }
    assert_true(md / mx < 1e-5);
    qs_llm_state_free(a); qs_llm_state_free(b);
    free(hb); free(hs); free(lb); free(ls); free(scr);
    qs_llm_file_free(&f);
}

/* The vectorised row kernels against plain loops (lengths that leave a scalar tail). */
static void test_row_kernels(void **st)
{
    (void)st;
    enum { N = 37 };
    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = (float)((i * 37) % 23) / 3.0f - 4.0f;
    double ss = 0, z = 0;
    for (int i = 0; i < N; i++) { ss += (double)x[i] * x[i]; z += exp((double)x[i] - 1.5); }
    assert_true(fabs(qs_sumsq_row(x, N) - ss) <= 1e-12 * ss);
    double s = qs_exp_row(x, N, 1.5f, y);
    assert_true(fabs(s - z) <= 1e-6 * z);
    for (int i = 0; i < N; i++) assert_true(fabs(y[i] - exp((double)x[i] - 1.5)) <= 1e-6 * exp((double)x[i] - 1.5));
    memcpy(y, x, sizeof x);
    qs_softmax_row(y, N);
    double t = 0;
    for (int i = 0; i < N; i++) t += y[i];
    assert_true(fabs(t - 1) < 1e-6);
    x[3] = NAN; x[20] = INFINITY; x[36] = -INFINITY; x[8] = -NAN;
    assert_int_equal((int)qs_count_nonfinite(x, N), 4);
    assert_int_equal((int)qs_count_nonfinite(x, 3), 0);
    float g[N], u[N];
    for (int i = 0; i < N; i++) { g[i] = (float)(i - 18) * 0.7f; u[i] = 1.0f + 0.01f * i; }
    memcpy(y, g, sizeof g);
    qs_swiglu_row(y, u, N);
    for (int i = 0; i < N; i++) {
        double want = g[i] / (1 + exp(-(double)g[i])) * u[i];
        assert_true(fabs(y[i] - want) <= 1e-5 * (fabs(want) + 1e-3));
    }
}

/* SwiGLU and the head's row scan at every SIMD level the CPU has: AVX-512 the AVX2 path's bits (their
** scalar tails included); the scan's max, first top and finiteness those of the plain loop. */
/* The KL's p.l dot product sums in one fixed order at every SIMD level: AVX2 and AVX-512 give the same
** bits (the AVX-512 version once summed 16 lanes while the others summed in order: KLs ~1e-16 apart,
** so the workbench's goldens depended on the CPU). */
static void test_kl_dot_levels(void **st)
{
    (void)st;
    enum { V = 1003 };   /* not a multiple of 16: the tail too */
    float *p = malloc(V * sizeof *p), *lq = malloc(V * sizeof *lq);
    assert_non_null(p);
    assert_non_null(lq);
    uint64_t x = 99;
    for (int v = 0; v < V; v++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        p[v] = (float)((x >> 40) & 0xffff) / 65536.0f / V;
        lq[v] = (float)((int)((x >> 20) & 0xfff) - 2048) / 97.0f;
    }
    qs_ref_row r = {.lse = 3.25, .psum = 1.0, .s_ref = 0.5, .lp_tok = -2.0, .top = 0, .finite = 1};
    double kl[QS_SIMD_AVX512 + 1];
    int n = 0;
    for (int lv = QS_SIMD_SCALAR; lv <= qs_simd_cpu(); lv++) {
        qs_simd_force(lv);
        qs_tok_stat t;
        qs_tok_stat_make(lq, V, 7, p, &r, &t);
        qs_simd_force(-1);
        kl[n++] = t.kl;
        assert_true(isfinite(t.kl));
    }
    for (int k = 1; k < n; k++) assert_memory_equal(&kl[k], &kl[0], sizeof kl[0]);
    free(p);
    free(lq);
}

static void test_row_kernels_levels(void **st)
{
    (void)st;
    enum { N = 1003 };
    static float g[N], u[N], y[2][N], l[N];
    uint64_t r = 12345;
    for (int i = 0; i < N; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        g[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 400.0 - 200.0) / (i % 7 ? 10.0f : 1.0f);
        u[i] = (float)(i % 13) - 6.0f;
        l[i] = (float)((r >> 20) % 1000) / 50.0f;
    }
    static float ey[3][N], sm[3][N];
    double es[3];
    for (int n = 1; n <= N; n += 37)   /* lengths with every tail: every level gives the portable path's bits */
        for (int lv = QS_SIMD_SCALAR; lv <= qs_simd_cpu(); lv++) {
            qs_simd_force(lv);
            memcpy(y[lv ? 1 : 0], g, sizeof g);
            qs_swiglu_row(y[lv ? 1 : 0], u, (size_t)n);
            es[lv] = qs_exp_row(g, (size_t)n, 3.5f, ey[lv]);
            memcpy(sm[lv], l, (size_t)n * sizeof(float));
            qs_softmax_row(sm[lv], (size_t)n);
            qs_simd_force(-1);
            if (lv == QS_SIMD_SCALAR) continue;
            assert_memory_equal(y[0], y[1], (size_t)n * sizeof(float));
            assert_memory_equal(ey[0], ey[lv], (size_t)n * sizeof(float));
            assert_memory_equal(&es[0], &es[lv], sizeof(double));
            assert_memory_equal(sm[0], sm[lv], (size_t)n * sizeof(float));
        }
    for (int lv = QS_SIMD_SCALAR; lv <= qs_simd_cpu(); lv++) {
        qs_simd_force(lv);
        l[500] = l[700] = 99.0f;   /* a tie: the first is the top */
        int top = -1, fin = -1;
        double lse = qs_row_lse(l, N, &top, &fin);
        assert_int_equal(top, 500);
        assert_int_equal(fin, 1);
        assert_true(lse >= 99.0 && lse < 99.0 + log((double)N));
        l[900] = INFINITY;
        qs_row_lse(l, N, &top, &fin);
        assert_int_equal(fin, 0);
        l[900] = 1.0f;
        l[N - 1] = NAN;
        qs_row_lse(l, N, &top, &fin);
        assert_int_equal(fin, 0);
        l[N - 1] = 1.0f;
        qs_simd_force(-1);
    }
}

/* ---------------------------------------------------------------- element-cast scaling */

static void test_hif8_scale_target(void **st)
{
    (void)st;
    const qs_format *h = qs_format_find("hif8"), *e4 = qs_format_find("fp8_e4m3"), *bf = qs_format_find("bf16");
    assert_true(qs_cast_scale_target(h) == 15.0);
    assert_true(qs_cast_scale_target(e4) == e4->max_finite);
    assert_true(qs_cast_scale_target(bf) == 0);
    assert_true(qs_cast_scale_target(qs_format_find("mxfp4")) == 0);
    /* a row's second-largest value keeps HiF8's 3 mantissa bits: 0.9 of absmax -> 13.5 of 15 ->
    ** 14 (TA) -> 0.9333; with absmax on 2^15 it became 29491 in a 1-bit binade -> 32768 -> 1.0 */
    qs_apply a;
    memset(&a, 0, sizeof a);
    a.f = h;
    a.axis = 1;
    const float x[4] = {1.0f, 0.9f, -0.3f, 0.01f};
    float y[4];
    qs_err e = {{0}};
    assert_int_equal(qs_llm_fakeq_row(&a, 1, x, 4, y, &e), 0);
    assert_true(y[0] == 1.0f);
    assert_true(fabsf(y[1] - 0.9f) / 0.9f < 0.04f);
    for (int i = 0; i < 4; i++) assert_true(fabsf(y[i] - x[i]) <= fabsf(x[i]) / 8 + 1e-7f);   /* >= 3 bits everywhere here */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kl_identical_is_zero),
        cmocka_unit_test(test_kl_hand_case),
        cmocka_unit_test(test_mean_se_quantiles),
        cmocka_unit_test(test_klhist),
        cmocka_unit_test(test_summary),
        cmocka_unit_test(test_summary_all_nonfinite),
        cmocka_unit_test(test_scoring_convention),
        cmocka_unit_test(test_eval_matches_stepwise),
        cmocka_unit_test(test_batched_vs_stepwise_logits),
        cmocka_unit_test(test_nonfinite_reported),
        cmocka_unit_test(test_row_kernels),
        cmocka_unit_test(test_row_kernels_levels),
        cmocka_unit_test(test_kl_dot_levels),
        cmocka_unit_test(test_hif8_scale_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
