/*
** Batched rollouts (analysis/llm_rollout_batch.c, kernels/llm_decode.c, kernels/llm_gemm.c) on the
** committed tiny model: every sequence's log-probs and entropies equal the teacher-forced scoring of
** the same tokens (llm_score_tokens) and the single-prompt sampler (llm_rollout) to 2e-5 relative to
** max(1, |value|) (1e-5 seen here, TOL), under
** fp32, w=mxfp4 a=mxfp4, kv=fp8 and a Rollout-ResQ mode; a sequence sampled alone equals itself in
** the batch bit for bit; EOS ends a sequence; the underflow counters match a recount.
*/
#include "test_util.h"
#include "test_llm_util.h"

#include <math.h>

#include "../../analysis/llm_rollout.h"
#include "../../kernels/format.h"
#include "../../kernels/llm_decode.h"
#include "../../kernels/llm_gemm.h"
#include "../../store/llm_load.h"

enum { P = 3, G = 4, NEW = 10 };
static const uint64_t SEED = 1234;

static void prompts(prompt_t *p, int vocab)
{
    static const int lens[P] = {3, 9, 14};   /* different lengths: each sequence at its own position */
    memset(p, 0, P * sizeof *p);
    for (int i = 0; i < P; i++) {
        p[i].n = lens[i];
        for (int t = 0; t < lens[i]; t++) p[i].ids[t] = (int32_t)((i * 97 + t * 31 + 5) % vocab);
    }
}

/* |a - ref| / max(1, |ref|): FP32 paths that sum in different orders (OpenBLAS's kernels differ by CPU,
** llm_gemm.c's chains) put a token's log-prob of -8 about 1e-5 apart in absolute terms. */
static double rdiff(double a, double ref) { return fabs(a - ref) / fmax(1, fabs(ref)); }
/* The bound: 1e-5 where this machine's OpenBLAS (SkylakeX kernels) scores the reference; its Haswell
** kernels under QS_SIMD=avx2 (valgrind) put one fp32 log-prob 1.0e-5 away, so the check is 2e-5, with
** the measured values printed.  Entropies sum every token's p log p: the same bound. */
#define TOL 2e-5
#define ENT_SLACK 1.0

/* Teacher-forced log-probs of sequence i of rb, alone (B = 1): the largest rdiff. */
static double score_diff(const qs_llm_model *m, const qs_llm_numerics *nx, const prompt_t *pr, const rollout_batch *rb, int i)
{
    const prompt_t *p = &pr[i / rb->group];
    int n = rb->len[i];
    rollout ro = {1, p->n, n, malloc((size_t)(p->n + n) * sizeof(int32_t)), NULL, NULL, NULL};
    memcpy(ro.tok, p->ids, (size_t)p->n * sizeof(int32_t));
    memcpy(ro.tok + p->n, rb->tok + (size_t)i * rb->max_new, (size_t)n * sizeof(int32_t));
    double *lp = malloc((size_t)n * sizeof(double)), *en = malloc((size_t)n * sizeof(double)), secs, md = 0;
    qs_err e = {{0}};
    assert_int_equal(llm_score_tokens(m, nx, &ro, lp, en, &secs, &e), 0);
    for (int t = 0; t < n; t++) {
        md = fmax(md, rdiff(rb->lp[(size_t)i * rb->max_new + t], lp[t]));
        md = fmax(md, rdiff(rb->ent[(size_t)i * rb->max_new + t], en[t]) * ENT_SLACK);
    }
    free(ro.tok); free(lp); free(en);
    return md;
}

static void check_config(const char *name, const qs_llm_model *m, const qs_llm_numerics *nx)
{
    prompt_t pr[P];
    prompts(pr, m->c.vocab);
    qs_err e = {{0}};
    rollout_batch rb;
    /* EOS = a token the run draws (sequence 1's third), so that some sequences stop early */
    assert_int_equal(llm_rollout_batch(m, nx, pr, P, G, NEW, -1, SEED, NULL, &rb, &e), 0);
    int eos = rb.tok[1 * NEW + 2];
    llm_rollout_batch_free(&rb);
    assert_int_equal(llm_rollout_batch(m, nx, pr, P, G, NEW, eos, SEED, NULL, &rb, &e), 0);
    assert_int_equal(rb.nseq, P * G);
    assert_true(rb.len[1] <= 3);
    int early = 0;
    long total = 0;
    for (int i = 0; i < rb.nseq; i++) {
        assert_true(rb.len[i] >= 1 && rb.len[i] <= NEW);
        assert_int_equal(rb.plen[i], pr[i / G].n);
        for (int t = 0; t < rb.len[i] - 1; t++) assert_int_not_equal(rb.tok[(size_t)i * NEW + t], eos);
        if (rb.len[i] < NEW) { early++; assert_int_equal(rb.tok[(size_t)i * NEW + rb.len[i] - 1], eos); }
        total += rb.len[i];
    }
    assert_true(early >= 1);
    assert_int_equal(rb.tokens, total);
    /* the teacher-forced reference, sequence by sequence */
    double md = 0;
    for (int i = 0; i < rb.nseq; i++) md = fmax(md, score_diff(m, nx, pr, &rb, i));
    /* the single-prompt sampler: same counters, so the same tokens */
    double mr = 0;
    for (int p = 0; p < P; p++) {
        rollout ro;
        double secs;
        assert_int_equal(llm_rollout(m, nx, &pr[p], G, NEW, eos, SEED, (uint64_t)p, NULL, &ro, &secs, &e), 0);
        for (int g = 0; g < G; g++) {
            int i = p * G + g;
            assert_int_equal(ro.len[g], rb.len[i]);
            for (int t = 0; t < rb.len[i]; t++) {
                assert_int_equal(ro.tok[(size_t)g * (pr[p].n + NEW) + pr[p].n + t], rb.tok[(size_t)i * NEW + t]);
                mr = fmax(mr, rdiff(rb.lp[(size_t)i * NEW + t], ro.lp[(size_t)g * NEW + t]));
                mr = fmax(mr, rdiff(rb.ent[(size_t)i * NEW + t], ro.ent[(size_t)g * NEW + t]) * ENT_SLACK);
            }
        }
        llm_rollout_free(&ro);
    }
    print_message("# %s: %ld tokens, %d stopped at EOS; max rel. diff to teacher-forced %.3g, to llm_rollout %.3g\n",
                  name, total, early, md, mr);
    assert_true(md <= TOL);
    assert_true(mr <= TOL);
    /* alone equals in the batch, bit for bit: prompt 0 with one sample, and with its G samples */
    for (int g = 1; g <= G; g += G - 1) {
        rollout_batch one;
        assert_int_equal(llm_rollout_batch(m, nx, pr, 1, g, NEW, eos, SEED, NULL, &one, &e), 0);
        for (int i = 0; i < g; i++) {
            assert_int_equal(one.len[i], rb.len[i]);
            assert_memory_equal(one.tok + (size_t)i * NEW, rb.tok + (size_t)i * NEW, (size_t)rb.len[i] * sizeof(int32_t));
            assert_memory_equal(one.lp + (size_t)i * NEW, rb.lp + (size_t)i * NEW, (size_t)rb.len[i] * sizeof(double));
            assert_memory_equal(one.ent + (size_t)i * NEW, rb.ent + (size_t)i * NEW, (size_t)rb.len[i] * sizeof(double));
        }
        llm_rollout_batch_free(&one);
    }
    /* underflow counters exist exactly where something is rounded */
    for (int l = 0; l < m->c.n_layer; l++) {
        double u = llm_rollout_underflow(&rb, l, QS_SITE_FFN_DOWN_IN), k = llm_rollout_underflow(&rb, l, QS_LLM_LSITE_KV);
        if (nx && nx->act) assert_true(u >= 0 && u <= 1);
        else assert_true(u == -1);
        if (nx && nx->kv) assert_true(k >= 0 && k <= 1);
        else assert_true(k == -1);
    }
    llm_rollout_batch_free(&rb);
}

static void test_equal_to_single_paths(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    qs_apply mx = tu_apply("mxfp4"), f8 = tu_apply("fp8_e4m3");
    check_config("fp32", &f.m, NULL);
    qs_llm_model wq;
    assert_int_equal(qs_llm_clone(&wq, &f.m, &e), 0);
    assert_int_equal(qs_llm_quantize_weights(&wq, &mx, 1, &e), 0);
    qs_llm_numerics a4 = {&mx, QS_RESQ_NONE, NULL, 1, NULL, NULL};
    check_config("w=mxfp4,a=mxfp4", &wq, &a4);
    qs_llm_numerics kv = {NULL, QS_RESQ_NONE, &f8, 1, NULL, NULL};
    check_config("kv=fp8_e4m3", &f.m, &kv);
    qs_llm_numerics rq = {&mx, QS_RESQ_24, &f8, 1, NULL, NULL};
    check_config("w=mxfp4,a=mxfp4,resq=2:4,kv=fp8_e4m3", &wq, &rq);
    qs_llm_free(&wq);
    qs_llm_file_free(&f);
}

/* The underflow counters against a recount on the teacher-forced pass's taps (one sequence). */
typedef struct { const qs_apply *a; uint64_t c[8][QS_LLM_NLSITE][2]; } recount;
static void tap_count(void *ctx, int layer, qs_llm_site site, const float *x, int rows, int cols)
{
    recount *r = ctx;
    if (site >= QS_SITE_LINEAR_COUNT) return;
    float *y = malloc((size_t)cols * sizeof(float));
    qs_err e = {{0}};
    for (int i = 0; i < rows; i++) {
        assert_int_equal(qs_llm_fakeq_row(r->a, 1, x + (size_t)i * cols, cols, y, &e), 0);
        for (int j = 0; j < cols; j++)
            if (x[(size_t)i * cols + j] != 0) { r->c[layer][site][0]++; r->c[layer][site][1] += y[j] == 0; }
    }
    free(y);
}

static void test_underflow_recount(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    qs_apply mx = tu_apply("mxfp4");
    qs_llm_numerics a4 = {&mx, QS_RESQ_NONE, NULL, 1, NULL, NULL};
    prompt_t pr[P];
    prompts(pr, f.m.c.vocab);
    rollout_batch rb;
    assert_int_equal(llm_rollout_batch(&f.m, &a4, &pr[2], 1, 1, NEW, -1, SEED, NULL, &rb, &e), 0);
    int n = pr[2].n + NEW - 1;   /* positions forwarded: the prompt and every generated token but the last */
    int32_t ids[64];
    memcpy(ids, pr[2].ids, (size_t)pr[2].n * sizeof(int32_t));
    memcpy(ids + pr[2].n, rb.tok, (NEW - 1) * sizeof(int32_t));
    qs_llm_state *s = qs_llm_state_new(&f.m.c, 1, n, n, &e);
    float *h = malloc((size_t)n * f.m.c.dim * sizeof(float));
    recount rc = {&mx, {{{0}}}};
    assert_int_equal(qs_llm_forward(&f.m, &a4, s, ids, 1, n, 0, h, tap_count, &rc, &e), 0);
    uint64_t any = 0;
    for (int l = 0; l < f.m.c.n_layer; l++)
        for (int site = 0; site < QS_SITE_LINEAR_COUNT; site++) {
            const uint64_t *c = rb.uf + QS_LLM_UF(l, site);
            assert_int_equal(c[0], rc.c[l][site][0]);
            assert_true(llabs((long long)c[1] - (long long)rc.c[l][site][1]) <= 2);   /* float-level differences */
            any += c[1];
        }
    assert_true(any > 0);
    print_message("# underflow, layer 0 ffn_down_in: %.4f\n", llm_rollout_underflow(&rb, 0, QS_SITE_FFN_DOWN_IN));
    free(h);
    qs_llm_state_free(s);
    llm_rollout_batch_free(&rb);
    qs_llm_file_free(&f);
}

/* The GEMM: every element independent of the other rows, close to the plain sum. */
static void test_gemm_rows_independent(void **st)
{
    (void)st;
    enum { R = 13, IN = 77, OUT = 45 };
    float *x = malloc(R * IN * sizeof(float)), *W = malloc(OUT * IN * sizeof(float));
    float *y = malloc(R * OUT * sizeof(float)), *y1 = malloc(OUT * sizeof(float));
    for (int i = 0; i < R * IN; i++) x[i] = (float)sin(i * 0.7);
    for (int i = 0; i < OUT * IN; i++) W[i] = (float)cos(i * 0.3);
    qs_llm_gemm_nt(y, x, W, R, IN, OUT, 2);
    for (int r = 0; r < R; r++) {
        qs_llm_gemm_nt(y1, x + r * IN, W, 1, IN, OUT, 1);
        assert_memory_equal(y1, y + r * OUT, OUT * sizeof(float));
        for (int o = 0; o < OUT; o++) {
            double s = 0;
            for (int k = 0; k < IN; k++) s += (double)x[r * IN + k] * W[o * IN + k];
            assert_true(fabs(s - y[r * OUT + o]) <= 1e-4);
        }
    }
    free(x); free(W); free(y); free(y1);
}

/* With generate's filters (temperature, top-k, top-p): the same tokens as llm_rollout, sampled on the pool. */
static void test_filtered_sampler(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    prompt_t pr[P];
    prompts(pr, f.m.c.vocab);
    sampler sp = {1.5, 0.95, 40, 0};
    rollout_batch rb;
    assert_int_equal(llm_rollout_batch(&f.m, NULL, pr, P, G, NEW, -1, SEED, &sp, &rb, &e), 0);
    int differ = 0;
    double md = 0;
    for (int p = 0; p < P; p++) {
        rollout ro;
        double secs;
        assert_int_equal(llm_rollout(&f.m, NULL, &pr[p], G, NEW, -1, SEED, (uint64_t)p, &sp, &ro, &secs, &e), 0);
        for (int g = 0; g < G; g++)
            for (int t = 0; t < NEW; t++) {
                int i = p * G + g;
                assert_int_equal(ro.tok[(size_t)g * (pr[p].n + NEW) + pr[p].n + t], rb.tok[(size_t)i * NEW + t]);
                md = fmax(md, rdiff(rb.lp[(size_t)i * NEW + t], ro.lp[(size_t)g * NEW + t]));
                differ += rb.tok[(size_t)i * NEW + t] != rb.tok[(size_t)(p * G) * NEW + t];
            }
        llm_rollout_free(&ro);
    }
    double mt = 0;
    for (int i = 0; i < rb.nseq; i++) mt = fmax(mt, score_diff(&f.m, NULL, pr, &rb, i));
    print_message("# filtered sampler: %d tokens differ from sample 0 of their prompt; max rel. diff to llm_rollout %.3g, "
                  "to teacher-forced %.3g\n", differ, md, mt);
    assert_true(mt <= TOL);
    assert_true(md <= TOL);
    assert_true(differ > 0);   /* the G samples of a prompt are not all the same */
    llm_rollout_batch_free(&rb);
    qs_llm_file_free(&f);
}

/* llm_rollout_batch_at(stream0) draws prompt p from llm_rollout's stream stream0 + p (GRPO step st:
** stream0 = st * P): the same tokens as one prompt at a time, other tokens than stream0 = 0. */
static void test_stream_base(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    prompt_t pr[P];
    prompts(pr, f.m.c.vocab);
    const uint64_t s0 = 7 * P;
    rollout_batch rb, rb0;
    assert_int_equal(llm_rollout_batch_at(&f.m, NULL, pr, P, G, NEW, -1, SEED, s0, NULL, &rb, &e), 0);
    assert_int_equal(llm_rollout_batch(&f.m, NULL, pr, P, G, NEW, -1, SEED, NULL, &rb0, &e), 0);
    int other = 0;
    for (int p = 0; p < P; p++) {
        rollout ro;
        double secs;
        assert_int_equal(llm_rollout(&f.m, NULL, &pr[p], G, NEW, -1, SEED, s0 + (uint64_t)p, NULL, &ro, &secs, &e), 0);
        for (int g = 0; g < G; g++)
            for (int t = 0; t < NEW; t++) {
                size_t at = (size_t)(p * G + g) * NEW + t;
                assert_int_equal(ro.tok[(size_t)g * (pr[p].n + NEW) + pr[p].n + t], rb.tok[at]);
                other += rb.tok[at] != rb0.tok[at];
            }
        llm_rollout_free(&ro);
    }
    assert_true(other > 0);
    llm_rollout_batch_free(&rb);
    llm_rollout_batch_free(&rb0);
    qs_llm_file_free(&f);
}

/* The fused sampler's log-prob and entropy are qs_llm_logprob's, bit for bit; with scratch (the exps
** kept for the draw) the same token and bits. */
static void test_sampler_bits(void **st)
{
    (void)st;
    enum { V = 1000 };
    float lg[V];
    void *scr = malloc(llm_sample_scratch(V));
    assert_non_null(scr);
    for (int i = 0; i < V; i++) lg[i] = (float)(3 * sin(i * 0.37) + (i % 7 == 0 ? 4 : 0));
    for (int k = 0; k < 20; k++) {
        double lp, ent, ent2, lp3, ent3;
        int tok = llm_sample_token(lg, V, (k + 0.5) / 20, NULL, NULL, &lp, &ent);
        double lp2 = qs_llm_logprob(lg, V, tok, &ent2);
        assert_memory_equal(&lp, &lp2, sizeof lp);
        assert_memory_equal(&ent, &ent2, sizeof ent);
        assert_int_equal(llm_sample_token(lg, V, (k + 0.5) / 20, NULL, scr, &lp3, &ent3), tok);
        assert_memory_equal(&lp, &lp3, sizeof lp);
        assert_memory_equal(&ent, &ent3, sizeof ent);
    }
    free(scr);
}

static void test_refusals(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    prompt_t pr[P];
    prompts(pr, f.m.c.vocab);
    rollout_batch rb;
    assert_int_equal(llm_rollout_batch(&f.m, NULL, pr, P, 257, NEW, -1, SEED, NULL, &rb, &e), -1);
    assert_non_null(strstr(e.msg, "samples"));
    pr[1].n = 0;
    assert_int_equal(llm_rollout_batch(&f.m, NULL, pr, P, G, NEW, -1, SEED, NULL, &rb, &e), -1);
    assert_non_null(strstr(e.msg, "prompt 1"));
    prompts(pr, f.m.c.vocab);
    pr[2].ids[3] = f.m.c.vocab;
    assert_int_equal(llm_rollout_batch(&f.m, NULL, pr, P, G, NEW, -1, SEED, NULL, &rb, &e), -1);
    assert_non_null(strstr(e.msg, "out of range"));
    assert_null(rb.tok);
    qs_llm_file_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_rows_independent),
        cmocka_unit_test(test_equal_to_single_paths),
        cmocka_unit_test(test_underflow_recount),
        cmocka_unit_test(test_filtered_sampler),
        cmocka_unit_test(test_stream_base),
        cmocka_unit_test(test_sampler_bits),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
