/*
** GPTQ (kernels/llm_gptq.c) against an independent numpy implementation
** (tests/fixtures/gptq/make_gptq_vectors.py: int4 blocks of 32, int4 one scale per row spanning lazy
** batches, mxfp4 with act-order, fp4_e2m1 with row scales), and GPTQ's layer error on calibration
** inputs no larger than plain rounding's for every 4-bit family (mxfp4, nvfp4, hif4, int4, q4_k,
** iq4_nl), with its refusals.
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/format.h"
#include "../../kernels/llm_gptq.h"

static uint64_t rs = 0x5eed0030ULL;
static double gauss(void)
{
    double u[2];
    for (int k = 0; k < 2; k++) {
        rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
        u[k] = ((double)(rs >> 11) + 0.5) / (double)(1ULL << 53);
    }
    return sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

static qs_apply fmt(const char *name, int block, qs_gran gran)
{
    qs_apply a;
    memset(&a, 0, sizeof a);
    a.f = qs_format_find(name);
    assert_non_null(a.f);
    a.axis = 1;
    a.o.block = block;
    a.gran = gran;
    return a;
}

static void read_vals(FILE *f, double *v, size_t n)
{
    for (size_t i = 0; i < n; i++) assert_int_equal(fscanf(f, "%lf", &v[i]), 1);
}

static void test_numpy_vectors(void **st)
{
    (void)st;
    FILE *f = fopen("fixtures/gptq/gptq_vectors.txt", "r");
    assert_non_null(f);
    char spec[64];
    int act, blk, ncase = 0;
    size_t rows, cols;
    while (fscanf(f, " case %63s %d %d %zu %zu", spec, &act, &blk, &rows, &cols) == 5) {
        double *w = malloc(rows * cols * sizeof *w), *H = malloc(cols * cols * sizeof *H), *q = malloc(rows * cols * sizeof *q);
        float *W = malloc(rows * cols * sizeof *W);
        read_vals(f, w, rows * cols);
        read_vals(f, H, cols * cols);
        read_vals(f, q, rows * cols);
        for (size_t i = 0; i < rows * cols; i++) W[i] = (float)w[i];
        qs_apply a = !strcmp(spec, "int4:block=32") ? fmt("int4", 32, QS_GRAN_BLOCK)
                   : !strcmp(spec, "int4:gran=row") ? fmt("int4", 0, QS_GRAN_ROW)
                   : !strcmp(spec, "mxfp4") ? fmt("mxfp4", 0, QS_GRAN_BLOCK) : fmt("fp4_e2m1", 0, QS_GRAN_BLOCK);
        qs_gptq_opts o = {0.01, act, blk};
        qs_err e = {{0}};
        assert_int_equal(qs_gptq_quantize(&a, 1, W, rows, cols, H, &o, &e), 0);
        size_t bad = 0;
        double scale = 0;
        for (size_t i = 0; i < rows * cols; i++) scale = fmax(scale, fabs(q[i]));
        for (size_t i = 0; i < rows * cols; i++)
            if (fabs((double)W[i] - q[i]) > 1e-5 * scale) {
                if (!bad) print_message("# %s: first difference at %zu: %.9g vs numpy %.9g\n", spec, i, W[i], q[i]);
                bad++;
            }
        assert_int_equal(bad, 0);
        ncase++;
        free(w); free(H); free(q); free(W);
    }
    fclose(f);
    assert_int_equal(ncase, 4);
}

/* Calibration-like inputs: channels of unequal scale, a few outliers, correlated pairs. */
static double *hessian(size_t cols, size_t N)
{
    double *X = malloc(N * cols * sizeof *X), *H = calloc(cols * cols, sizeof *H), *sc = malloc(cols * sizeof *sc);
    for (size_t j = 0; j < cols; j++) sc[j] = exp(0.8 * gauss()) * (j % 37 == 5 ? 8 : 1);
    for (size_t n = 0; n < N; n++)
        for (size_t j = 0; j < cols; j++) X[n * cols + j] = sc[j] * gauss() + (j ? 0.5 * X[n * cols + j - 1] : 0);
    for (size_t i = 0; i < cols; i++)
        for (size_t j = 0; j < cols; j++) {
            double s = 0;
            for (size_t n = 0; n < N; n++) s += X[n * cols + i] * X[n * cols + j];
            H[i * cols + j] = 2 * s / (double)N;
        }
    free(X);
    free(sc);
    return H;
}

static void test_beats_plain_rounding(void **st)
{
    (void)st;
    const size_t rows = 48, cols = 256, N = 512;
    double *H = hessian(cols, N);
    float *W = malloc(rows * cols * sizeof *W), *P = malloc(rows * cols * sizeof *P), *G = malloc(rows * cols * sizeof *G);
    for (size_t i = 0; i < rows * cols; i++) W[i] = (float)(0.02 * gauss());
    const char *names[] = {"mxfp4", "nvfp4", "hif4", "int4", "q4_k", "iq4_nl", "fp8_e4m3", "int8"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        qs_apply a = fmt(names[k], !strcmp(names[k], "int4") ? 32 : 0, !strcmp(names[k], "int8") ? QS_GRAN_TENSOR : QS_GRAN_BLOCK);
        qs_err e = {{0}};
        memcpy(P, W, rows * cols * sizeof *W);
        memcpy(G, W, rows * cols * sizeof *W);
        assert_int_equal(qs_llm_quant_matrix(&a, 1, P, rows, cols, &e), 0);
        for (int act = 0; act < 2; act++) {
            qs_gptq_opts o = {0.01, act, 128};
            memcpy(G, W, rows * cols * sizeof *W);
            if (qs_gptq_quantize(&a, 1, G, rows, cols, H, &o, &e)) fail_msg("%s: %s", names[k], e.msg);
            double ep = qs_gptq_layer_err(P, W, rows, cols, H), eg = qs_gptq_layer_err(G, W, rows, cols, H);
            print_message("# %-8s act_order %d: layer error plain %.4g, GPTQ %.4g (%.2f)\n", names[k], act, ep, eg, eg / ep);
            assert_true(eg <= ep);
            /* every GPTQ value is on the format's grid: requantizing a block-scaled value may move it
            ** (its block's scale was fixed from other values), but its finite and in range */
            for (size_t i = 0; i < rows * cols; i++) assert_true(isfinite(G[i]));
        }
    }
    free(H); free(W); free(P); free(G);
}

static void test_refusals(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_apply a = fmt("mxfp4", 0, QS_GRAN_BLOCK);
    a.o.round = QS_RND_SR;
    assert_int_equal(qs_gptq_check(&a, &e), -1);
    assert_non_null(strstr(e.msg, "stochastic"));
    a = fmt("mxfp4", 0, QS_GRAN_TENSOR);
    assert_int_equal(qs_gptq_check(&a, &e), -1);
    assert_non_null(strstr(e.msg, "gran=tensor"));
    a = fmt("m2xfp4", 0, QS_GRAN_BLOCK);
    assert_int_equal(qs_gptq_check(&a, &e), -1);
    assert_non_null(strstr(e.msg, "refines"));
    a = fmt("int4", 0, QS_GRAN_TENSOR);   /* one scale per tensor, fixed from the original matrix */
    assert_int_equal(qs_gptq_check(&a, &e), 0);
    a = fmt("bf16", 0, QS_GRAN_BLOCK);
    assert_int_equal(qs_gptq_check(&a, &e), 0);   /* an element cast of any width */
    /* a Hessian that is not positive definite even dampened (eigenvalues 3 and -1) */
    double H[4] = {1, 2, 2, 1};
    float W[4] = {1, 2, 3, 4};
    qs_gptq_opts o = {0.01, 0, 128};
    a = fmt("mxfp4", 0, QS_GRAN_BLOCK);
    assert_int_equal(qs_gptq_quantize(&a, 1, W, 2, 2, H, &o, &e), -1);
    assert_non_null(strstr(e.msg, "positive definite"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numpy_vectors),
        cmocka_unit_test(test_beats_plain_rounding),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
