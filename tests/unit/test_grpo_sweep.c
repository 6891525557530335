/*
** The runs of `sim grpo` as units (analysis/grpo_sweep.c): ais_r_fixed takes the mean lambda of its
** ais_r run; results through bytes come back bit for bit (curves, stored data, logged tokens, the
** fixed lambda) whatever the thread count; damaged bytes are refused.
*/
#include "test_util.h"

#include <math.h>

#include "../../analysis/grpo_sweep.h"
#include "../../kernels/format.h"

enum { NJ = 3 };

static void make_jobs(qs_grpo_job *J)
{
    qs_grpo_cfg base;
    qs_grpo_cfg_default(&base);
    base.steps = 5;
    base.B = 4;
    base.T = 3;
    qs_apply mx;
    memset(&mx, 0, sizeof mx);
    mx.f = qs_format_find("mxfp4");
    assert_non_null(mx.f);
    mx.axis = 1;
    const int mi[NJ] = {QS_SM_AIS_FIXED, QS_SM_EXACT, QS_SM_AIS};   /* the fixed one first: it must still wait */
    memset(J, 0, NJ * sizeof *J);
    for (int i = 0; i < NJ; i++) {
        J[i].mi = mi[i];
        J[i].fi = mi[i] == QS_SM_EXACT ? -1 : 0;
        J[i].seed = 3;
        J[i].cfg = base;
        J[i].cfg.seed = 3;
        J[i].cfg.method = qs_sim_method_corr(mi[i]);
        J[i].cfg.exact = J[i].fi < 0;
        if (J[i].fi >= 0) J[i].cfg.fmt = mx;
        snprintf(J[i].run, sizeof J[i].run, "t/%s", qs_sim_methods[mi[i]]);
    }
}

static void test_jobs_through_bytes(void **st)
{
    (void)st;
    qs_grpo_job A[NJ], B[NJ], C[NJ];
    qs_grpo_job *pa[NJ], *pb[NJ], *pc[NJ];
    make_jobs(A);
    make_jobs(B);
    make_jobs(C);
    for (int i = 0; i < NJ; i++) { pa[i] = &A[i]; pb[i] = &B[i]; pc[i] = &C[i]; }
    qs_err e = {{0}};
    assert_int_equal(qs_grpo_jobs_run(pa, NJ, 2, 1, 2, &e), 0);
    const double lam = qs_grpo_mean_range(A[2].cs, 0, 5, offsetof(qs_grpo_cstep, lambda));
    assert_true(isfinite(lam) && A[0].cfg.ais.lambda_fixed == lam);
    for (int i = 0; i < NJ; i++) assert_true(A[i].data && A[i].nrows == 3 * 4 * 8 * 3);   /* steps 0, 2, 4 logged */
    uint8_t *b;
    size_t len;
    assert_int_equal(qs_grpo_jobs_pack(pa, NJ, &b, &len, &e), 0);
    assert_int_equal(qs_grpo_jobs_unpack(pb, NJ, b, len, &e), 0);
    assert_int_equal(qs_grpo_jobs_run(pc, NJ, 1, 1, 2, &e), 0);   /* one thread: the same runs */
    for (int i = 0; i < NJ; i++)
        for (const qs_grpo_job *y = &B[i]; y; y = y == &B[i] ? &C[i] : NULL) {
            assert_memory_equal(y->cs, A[i].cs, 5 * sizeof *A[i].cs);
            assert_string_equal(y->data, A[i].data);
            assert_int_equal((int)y->nrows, (int)A[i].nrows);
            for (size_t k = 0; k < A[i].nrows; k++) {
                const qs_rl_row *r = &y->rows[k], *s = &A[i].rows[k];
                assert_true(r->step == s->step && r->seq == s->seq && r->pos == s->pos && r->token_id == s->token_id &&
                            r->grp == s->grp && r->mask == s->mask);
                assert_memory_equal(&r->lp_rollout, &s->lp_rollout, 5 * sizeof(double));
            }
            assert_memory_equal(&y->cfg.ais.lambda_fixed, &A[i].cfg.ais.lambda_fixed, sizeof(double));
        }
    /* damaged bytes: cut short, or one byte too many */
    assert_int_equal(qs_grpo_jobs_unpack(pb, NJ, b, len - 1, &e), -1);
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, b, len);
    longer[len] = 0;
    assert_int_equal(qs_grpo_jobs_unpack(pb, NJ, longer, len + 1, &e), -1);
    free(longer);
    free(b);
    for (int i = 0; i < NJ; i++) { qs_grpo_job_free(&A[i]); qs_grpo_job_free(&B[i]); qs_grpo_job_free(&C[i]); }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jobs_through_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
