/*
** An evaluation cut into units (analysis/llm_eval_shard.c) on the committed tiny GGUF model: units
** computed in any order and merged in unit order give qs_llm_eval_run's per-token arrays bit for bit
** and its non-finite counts, for one to several configuration groups; bytes from another plan and
** units out of order are refused.  A resumed plan (some chunks, some configurations per chunk)
** computes just those, each chunk reported as it is merged; a stop request fails a unit, "enough"
** skips the rest.
*/
#include "test_util.h"

#include <math.h>

#include "../../analysis/llm_eval_shard.h"
#include "../../store/llm_load.h"
#include "../../kernels/format.h"
#include "../../kernels/llm.h"
#include "../../kernels/qs_stop.h"

enum { CTX = 24, NCH = 3, NTXT = CTX * NCH + 7, NCFG = 4 };

static int same_bits(const void *a, const void *b, size_t n) { return (!a && !b) || (a && b && memcmp(a, b, n) == 0); }

static void test_units_merge_to_the_whole_run(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    int32_t text[NTXT];
    uint64_t s = 7;
    for (int i = 0; i < NTXT; i++) { s = s * 6364136223846793005ull + 1442695040888963407ull; text[i] = (int32_t)((s >> 33) % f.m.c.vocab); }
    qs_apply mx;
    memset(&mx, 0, sizeof mx);
    mx.f = qs_format_find("mxfp4");
    assert_non_null(mx.f);
    mx.axis = 1;
    qs_llm_model bad;
    assert_int_equal(qs_llm_clone(&bad, &f.m, &e), 0);
    bad.L[1].w_gate[0] = INFINITY;   /* non-finite from layer 1 on: counts and the first site must merge */
    /* activations at mxfp4; non-finite weights; the reference restarted at layer 1 (residual reuse);
    ** a skipped (cached) one */
    qs_eval_variant cfg[NCFG] = {{&f.m, {&mx, QS_RESQ_NONE, NULL, 1, NULL, NULL}, 0}, {&bad, {NULL, QS_RESQ_NONE, NULL, 1, NULL, NULL}, 0},
                                 {&f.m, {&mx, QS_RESQ_NONE, NULL, 1, NULL, NULL}, 1}, {&f.m, {NULL, QS_RESQ_NONE, NULL, 1, NULL, NULL}, 0}};
    int want[NCFG] = {1, 1, 1, 0};
    qs_eval_setup su = {CTX, NCH, 0, -1};
    qs_eval_out whole;
    assert_int_equal(qs_llm_eval_run(&f.m, cfg, want, NCFG, text, NTXT, &su, NULL, NULL, &whole, &e), 0);
    assert_true(whole.var[2].nf.act_values > 0 && whole.var[2].nf.first_layer == 1);
    for (int ng = 1; ng <= 4; ng++) {
        qs_eval_shard sh;
        assert_int_equal(qs_eval_shard_init(&sh, &f.m, cfg, want, NCFG, text, NTXT, &su, &e), 0);
        qs_eval_shard_groups(&sh, ng);
        assert_int_equal(sh.ngroup, ng < 3 ? ng : 3);   /* at most one group per wanted configuration */
        size_t n = qs_eval_shard_units(&sh);
        assert_int_equal((int)n, NCH * sh.ngroup);
        double cost[NCH * 3];
        qs_eval_shard_costs(&sh, cost);
        for (size_t u = 0; u < n; u++) assert_true(cost[u] > 0);
        uint8_t *b[NCH * 3];
        size_t len[NCH * 3];
        for (size_t u = n; u-- > 0;) assert_int_equal(qs_eval_shard_unit(&sh, u, &b[u], &len[u], &e), 0);   /* any order */
        if (n > 1) assert_int_equal(qs_eval_shard_merge(&sh, 1, b[1], len[1], &e), -1);                  /* not in order */
        for (size_t u = 0; u < n; u++) assert_int_equal(qs_eval_shard_merge(&sh, u, b[u], len[u], &e), 0);
        assert_int_equal((int)sh.out.n, (int)whole.n);
        for (int v = 0; v <= NCFG; v++) {
            const qs_eval_var_out *x = &sh.out.var[v], *y = &whole.var[v];
            assert_true(same_bits(x->nll, y->nll, whole.n * sizeof(double)));
            assert_true(same_bits(x->kl, y->kl, whole.n * sizeof(double)));
            assert_true(same_bits(x->dp, y->dp, whole.n * sizeof(double)));
            assert_true(same_bits(x->same_top, y->same_top, whole.n));
            assert_int_equal((int)x->nf.logit_rows, (int)y->nf.logit_rows);
            assert_int_equal((int)x->nf.act_values, (int)y->nf.act_values);
            assert_int_equal(x->nf.first_layer, y->nf.first_layer);
            if (y->nf.first_layer >= 0) assert_int_equal(x->nf.first_site, y->nf.first_site);
        }
        /* the bytes of another plan (other groups) are refused, not mixed in */
        qs_eval_shard other;
        assert_int_equal(qs_eval_shard_init(&other, &f.m, cfg, want, NCFG, text, NTXT, &su, &e), 0);
        qs_eval_shard_groups(&other, ng == 1 ? 2 : 1);
        assert_int_equal(qs_eval_shard_merge(&other, 0, b[0], len[0], &e), -1);
        assert_non_null(strstr(e.msg, "not what this rank planned"));
        qs_eval_shard_free(&other);
        for (size_t u = 0; u < n; u++) free(b[u]);
        qs_eval_shard_free(&sh);
    }
    qs_eval_out_free(&whole);
    qs_llm_free(&bad);
    qs_llm_file_free(&f);
}

typedef struct { int n, chunk[NCH], have[NCH][NCFG + 1], stop_after; } done_log;

static int log_chunk(void *ctx, qs_eval_shard *sh, int c, qs_err *e)
{
    (void)e;
    done_log *L = ctx;
    L->chunk[L->n] = c;
    for (int v = 0; v <= NCFG; v++) L->have[L->n][v] = sh->cur[v].have;
    if (++L->n == L->stop_after) sh->enough = 1;
    return 0;
}

static void test_resumed_plan(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    int32_t text[NTXT];
    for (int i = 0; i < NTXT; i++) text[i] = (int32_t)((i * 37 + 11) % f.m.c.vocab);
    qs_apply mx;
    memset(&mx, 0, sizeof mx);
    mx.f = qs_format_find("mxfp4");
    mx.axis = 1;
    qs_eval_variant cfg[NCFG] = {{&f.m, {&mx, QS_RESQ_NONE, NULL, 1, NULL, NULL}, 0}, {&f.m, {NULL, QS_RESQ_NONE, &mx, 1, NULL, NULL}, 0},
                                 {&f.m, {NULL, QS_RESQ_NONE, NULL, 1, NULL, NULL}, 0}, {&f.m, {&mx, QS_RESQ_NONE, &mx, 1, NULL, NULL}, 0}};
    int want[NCFG] = {1, 1, 0, 1};
    qs_eval_setup su = {CTX, NCH, 0, -1};
    qs_eval_out whole;
    assert_int_equal(qs_llm_eval_run(&f.m, cfg, want, NCFG, text, NTXT, &su, NULL, NULL, &whole, &e), 0);
    /* chunk 0 lacks config 0 only, chunk 1 is stored whole, chunk 2 lacks configs 1 and 3 */
    const int run[2] = {0, 2};
    const uint8_t need[NCH * NCFG] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1};
    for (int ng = 1; ng <= 2; ng++) {
        qs_eval_shard sh;
        assert_int_equal(qs_eval_shard_init(&sh, &f.m, cfg, want, NCFG, text, NTXT, &su, &e), 0);
        sh.run = run;
        sh.nrun = 2;
        sh.need = need;
        done_log L = {0, {0}, {{0}}, 0};
        sh.chunk_done = log_chunk;
        sh.done_ctx = &L;
        qs_eval_shard_groups(&sh, ng);
        size_t n = qs_eval_shard_units(&sh);
        assert_int_equal((int)n, 2 * sh.ngroup);
        for (size_t u = 0; u < n; u++) {
            uint8_t *b = NULL;
            size_t len = 0;
            assert_int_equal(qs_eval_shard_unit(&sh, u, &b, &len, &e), 0);
            assert_int_equal(qs_eval_shard_merge(&sh, u, b, len, &e), 0);
            free(b);
        }
        assert_int_equal(L.n, 2);
        assert_int_equal(L.chunk[0], 0);
        assert_int_equal(L.chunk[1], 2);
        const int want0[NCFG + 1] = {1, 1, 0, 0, 0}, want2[NCFG + 1] = {1, 0, 1, 0, 1};
        for (int v = 0; v <= NCFG; v++) {
            assert_int_equal(L.have[0][v], want0[v]);
            assert_int_equal(L.have[1][v], want2[v]);
        }
        const size_t per = whole.n / NCH;
        for (int k = 0; k < 2; k++)
            for (int v = 0; v <= NCFG; v++) {
                if (!L.have[k][v]) continue;
                const size_t k0 = (size_t)L.chunk[k] * per;
                assert_true(same_bits(sh.out.var[v].nll + k0, whole.var[v].nll + k0, per * sizeof(double)));
                if (v) assert_true(same_bits(sh.out.var[v].kl + k0, whole.var[v].kl + k0, per * sizeof(double)));
            }
        qs_eval_shard_free(&sh);
    }
    /* enough after the first chunk: the next units give no bytes and merge as skipped */
    qs_eval_shard sh;
    assert_int_equal(qs_eval_shard_init(&sh, &f.m, cfg, want, NCFG, text, NTXT, &su, &e), 0);
    done_log L = {0, {0}, {{0}}, 1};
    sh.chunk_done = log_chunk;
    sh.done_ctx = &L;
    for (size_t u = 0; u < qs_eval_shard_units(&sh); u++) {
        uint8_t *b = NULL;
        size_t len = 0;
        assert_int_equal(qs_eval_shard_unit(&sh, u, &b, &len, &e), 0);
        if (u) assert_true(!b && !len);
        assert_int_equal(qs_eval_shard_merge(&sh, u, b, len, &e), 0);
        free(b);
    }
    assert_int_equal(L.n, 1);
    qs_eval_shard_free(&sh);
    /* a stop request fails the next unit */
    assert_int_equal(qs_eval_shard_init(&sh, &f.m, cfg, want, NCFG, text, NTXT, &su, &e), 0);
    qs_stop_request(2);
    uint8_t *b = NULL;
    size_t len = 0;
    assert_int_equal(qs_eval_shard_unit(&sh, 0, &b, &len, &e), -1);
    assert_non_null(strstr(e.msg, "interrupted"));
    qs_stop_reset();
    assert_int_equal(qs_eval_shard_unit(&sh, 0, &b, &len, &e), 0);
    free(b);
    qs_eval_shard_free(&sh);
    qs_eval_out_free(&whole);
    qs_llm_file_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_merge_to_the_whole_run),
        cmocka_unit_test(test_resumed_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
