/*
** Tests of Rollout-ResQ (kernels/resq.c): each sparsifier keeps exactly what it should, the layer
** output equals Q(X)Q(W)^T + S(Q(ΔX))Q(W)^T computed independently, underflow/recovery statistics,
** and the dense correction reduces the activation error on outlier-heavy activations.
*/
#include "test_util.h"

#include <math.h>

#include "../../analysis/kernel_exp.h"
#include "../../kernels/format.h"
#include "../../kernels/resq.h"

static void test_names(void **st)
{
    (void)st;
    qs_resq_sparse s;
    assert_int_equal(qs_resq_parse("2:4", &s), 0); assert_int_equal(s, QS_RESQ_24);
    assert_int_equal(qs_resq_parse("blk50", &s), 0); assert_int_equal(s, QS_RESQ_BLK50);
    assert_int_equal(qs_resq_parse("bogus", &s), -1);
    assert_string_equal(qs_resq_name(QS_RESQ_CH50), "ch50");
}

static void test_sparsifiers(void **st)
{
    (void)st;
    size_t m = 64, d = 128;
    float *R = malloc(m * d * 4), *S = malloc(m * d * 4);
    qs_gen_matrix(QS_GEN_LAPLACE, 3, m, d, 1, R);
    qs_err e;
    /* 2:4: in each run of 4, the two largest magnitudes survive */
    memcpy(S, R, m * d * 4);
    assert_int_equal(qs_resq_sparsify(S, m, d, QS_RESQ_24, 32, 64, &e), 0);
    for (size_t g = 0; g < m * d; g += 4) {
        int nz = 0;
        for (int k = 0; k < 4; k++) {
            nz += S[g + k] != 0;
            if (S[g + k] == 0)   /* a dropped one is not larger than two kept ones */
                for (int j = 0, larger = 0; j < 4; j++) {
                    larger += fabsf(R[g + j]) > fabsf(R[g + k]);
                    if (j == 3) assert_true(larger >= 2);
                }
            else assert_true(S[g + k] == R[g + k]);
        }
        assert_int_equal(nz, 2);
    }
    /* ch50: d/2 whole channels, the ones with the largest L2 norm */
    memcpy(S, R, m * d * 4);
    assert_int_equal(qs_resq_sparsify(S, m, d, QS_RESQ_CH50, 32, 64, &e), 0);
    double minkept = 1e300, maxdrop = 0;
    int kept = 0;
    for (size_t c = 0; c < d; c++) {
        double n2 = 0;
        int nz = 0;
        for (size_t r = 0; r < m; r++) { n2 += (double)R[r * d + c] * R[r * d + c]; nz += S[r * d + c] != 0; }
        assert_true(nz == 0 || nz == (int)m);
        if (nz) { kept++; minkept = fmin(minkept, n2); } else maxdrop = fmax(maxdrop, n2);
    }
    assert_int_equal(kept, (int)d / 2);
    assert_true(minkept >= maxdrop);
    /* blk50 with 32x64 blocks: 2x2 blocks, 2 kept */
    memcpy(S, R, m * d * 4);
    assert_int_equal(qs_resq_sparsify(S, m, d, QS_RESQ_BLK50, 32, 64, &e), 0);
    int kb = 0;
    for (size_t br = 0; br < 2; br++)
        for (size_t bc = 0; bc < 2; bc++) {
            int nz = 0;
            for (size_t r = br * 32; r < br * 32 + 32; r++)
                for (size_t c = bc * 64; c < bc * 64 + 64; c++) nz += S[r * d + c] != 0;
            assert_true(nz == 0 || nz == 32 * 64);
            kb += nz > 0;
        }
    assert_int_equal(kb, 2);
    /* none zeroes, dense keeps */
    memcpy(S, R, m * d * 4);
    assert_int_equal(qs_resq_sparsify(S, m, d, QS_RESQ_DENSE, 32, 64, &e), 0);
    assert_memory_equal(S, R, m * d * 4);
    assert_int_equal(qs_resq_sparsify(S, m, d, QS_RESQ_NONE, 32, 64, &e), 0);
    for (size_t i = 0; i < m * d; i++) assert_true(S[i] == 0);
    assert_int_equal(qs_resq_sparsify(S, m, d, QS_RESQ_BLK50, 0, 64, &e), -1);
    free(R); free(S);
}

static void test_layer(void **st)
{
    (void)st;
    size_t m = 64, d = 256, n = 48;
    float *X = malloc(m * d * 4), *W = malloc(n * d * 4), *Wq = malloc(n * d * 4), *Y = malloc(m * n * 4);
    float *Xq = malloc(m * d * 4), *D = malloc(m * d * 4), *Rq = malloc(m * d * 4);
    qs_gen_spec g;
    memset(&g, 0, sizeof g);
    qs_gen_defaults(&g);
    g.kind = QS_GEN_LLM_ACT; g.seed = 5; g.rows = m; g.cols = d; g.outlier_channels = 4;
    qs_gen_fill(&g, 0, m * d, X);
    qs_gen_matrix(QS_GEN_GAUSSIAN, 6, n, d, 0.02, W);
    static const char *fmts[] = {"mxfp4", "hif4", "nvfp4"};
    qs_err e;
    for (int fi = 0; fi < 3; fi++) {
        qs_apply a;
        memset(&a, 0, sizeof a);
        a.f = qs_format_find(fmts[fi]);
        a.axis = 1;
        assert_int_equal(qs_fakeq_matrix(&a, W, n, d, Wq, &e), 0);
        assert_int_equal(qs_fakeq_matrix(&a, X, m, d, Xq, &e), 0);
        for (size_t i = 0; i < m * d; i++) D[i] = X[i] - Xq[i];
        assert_int_equal(qs_fakeq_matrix(&a, D, m, d, Rq, &e), 0);
        double err[QS_RESQ_COUNT];
        for (int sp = 0; sp < QS_RESQ_COUNT; sp++) {
            qs_resq_stats s;
            assert_int_equal(qs_resq_layer(&a, X, m, d, Wq, n, (qs_resq_sparse)sp, 32, 64, Y, &s, &e), 0);
            /* independent recomputation (dense and none only: no sparsifier involved) */
            double se = 0, sr = 0;
            for (size_t r = 0; r < m; r++)
                for (size_t c = 0; c < n; c++) {
                    double ref = 0, yw = 0;
                    for (size_t k = 0; k < d; k++) {
                        ref += (double)(Xq[r * d + k] + (sp == QS_RESQ_DENSE ? Rq[r * d + k] : 0)) * Wq[c * d + k];
                        yw += (double)X[r * d + k] * Wq[c * d + k];
                    }
                    if (sp <= QS_RESQ_DENSE) assert_true(fabs(Y[r * n + c] - ref) < 1e-4 * (1 + fabs(ref)));
                    se += (Y[r * n + c] - yw) * (Y[r * n + c] - yw);
                    sr += yw * yw;
                }
            err[sp] = sqrt(se / sr);
            assert_true(s.underflow > 0.01 && s.underflow < 0.9);   /* outliers push small values to 0 */
            if (sp == QS_RESQ_NONE) assert_true(s.recovered == 0 && s.density == 0);
            if (sp == QS_RESQ_DENSE) assert_true(s.recovered > 0.5 && s.kept == 1);
            if (sp == QS_RESQ_24) assert_true(s.density <= 0.5 + 1e-12);
        }
        assert_true(err[QS_RESQ_DENSE] < 0.5 * err[QS_RESQ_NONE]);
        for (int sp = QS_RESQ_24; sp < QS_RESQ_COUNT; sp++)
            assert_true(err[sp] < err[QS_RESQ_NONE] && err[sp] >= err[QS_RESQ_DENSE] * 0.999);
    }
    free(X); free(W); free(Wq); free(Y); free(Xq); free(D); free(Rq);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_sparsifiers),
        cmocka_unit_test(test_layer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
