/*
** Hadamard matrices of non-power-of-two orders (kernels/hadamard.c): the Paley I and II cores and
** their Kronecker products with Sylvester matrices are orthogonal exactly (integer H H^T = n I), the
** fast product equals the dense one, the normalised transform is orthogonal up to rounding, and
** orders no construction covers are refused in one line.
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/hadamard.h"

/* H H^T = n I over every pair of rows, in integers. */
static void exact_orthogonal(const qs_hadamard *h)
{
    const int n = h->n;
    int *H = malloc((size_t)n * n * sizeof(int));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) H[(size_t)i * n + j] = qs_hadamard_entry(h, i, j);
    for (int i = 0; i < n; i++)
        for (int j = i; j < n; j++) {
            long dot = 0;
            for (int k = 0; k < n; k++) dot += H[(size_t)i * n + k] * H[(size_t)j * n + k];
            if (dot != (i == j ? n : 0)) fail_msg("order %d: rows %d and %d have dot %ld", n, i, j, dot);
        }
    free(H);
}

/* The fast product (with signs) against the dense sum, and the normalised transform's Gram matrix. */
static void fast_matches_dense(const qs_hadamard *h, int gram)
{
    const int n = h->n;
    double *x = malloc((size_t)n * sizeof(double)), *y = malloc((size_t)n * sizeof(double)), *t = malloc((size_t)n * sizeof(double));
    uint64_t r = 0x243F6A8885A308D3ull;
    for (int i = 0; i < n; i++) { r = r * 6364136223846793005ull + 1442695040888963407ull; x[i] = (double)(r >> 11) / 9007199254740992.0 - 0.5; }
    memcpy(y, x, (size_t)n * sizeof(double));
    qs_hadamard_row(h, y, t);
    double worst = 0;
    for (int j = 0; j < n; j++) {
        double s = 0;
        for (int i = 0; i < n; i++) s += x[i] * (h->sign ? h->sign[i] : 1) * qs_hadamard_entry(h, i, j);
        worst = fmax(worst, fabs(s / sqrt((double)n) - y[j]));
    }
    if (!(worst < 1e-12)) fail_msg("order %d: fast product off by %g", n, worst);
    if (gram) {   /* rows of the transform (images of unit vectors): M M^T = I up to rounding */
        double *M = calloc((size_t)n * n, sizeof(double)), err = 0;
        for (int i = 0; i < n; i++) { M[(size_t)i * n + i] = 1; qs_hadamard_row(h, M + (size_t)i * n, t); }
        for (int i = 0; i < n; i++)
            for (int j = i; j < n; j++) {
                double s = 0;
                for (int k = 0; k < n; k++) s += M[(size_t)i * n + k] * M[(size_t)j * n + k];
                err = fmax(err, fabs(s - (i == j)));
            }
        if (!(err < 1e-13)) fail_msg("order %d: M M^T - I up to %g", n, err);
        free(M);
    }
    free(x); free(y); free(t);
}

static void test_orders(void **st)
{
    (void)st;
    static const struct { int n, m, s; } k[] = {{1, 1, 1}, {2, 1, 2}, {12, 12, 1}, {20, 20, 1}, {24, 12, 2}, {28, 28, 1},
                                                {36, 36, 1}, {64, 1, 64}, {72, 36, 2}, {96, 12, 8}, {576, 36, 16}};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        qs_hadamard h;
        qs_err e = {{0}};
        if (qs_hadamard_init(&h, k[i].n, 0, &e)) fail_msg("order %d: %s", k[i].n, e.msg);
        if (h.m != k[i].m || h.s != k[i].s) fail_msg("order %d: core %d x 2^k %d, expected %d x %d", k[i].n, h.m, h.s, k[i].m, k[i].s);
        exact_orthogonal(&h);
        fast_matches_dense(&h, 1);
        qs_hadamard_free(&h);
        if (qs_hadamard_init(&h, k[i].n, 99, &e)) fail_msg("order %d signed: %s", k[i].n, e.msg);
        fast_matches_dense(&h, k[i].n <= 96);
        qs_hadamard_free(&h);
    }
}

/* 1536 = 12 x 128 (SmolLM2's FFN) and 14336 = 28 x 512 (Llama 3 8B's): exact dots of sampled row
** pairs (all pairs would take seconds), the fast product against the dense one. */
static void test_large_orders(void **st)
{
    (void)st;
    static const int ns[] = {1536, 14336};
    for (int a = 0; a < 2; a++) {
        qs_hadamard h;
        qs_err e = {{0}};
        assert_int_equal(qs_hadamard_init(&h, ns[a], a ? 7 : 0, &e), 0);
        assert_int_equal(h.n, ns[a]);
        assert_int_equal(h.m, a ? 28 : 12);
        uint64_t r = 88172645463325252ull;
        for (int p = 0; p < 300; p++) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            int i = (int)(r % (uint64_t)h.n), j = (int)((r >> 32) % (uint64_t)h.n);
            long dot = 0;
            for (int c = 0; c < h.n; c++) dot += qs_hadamard_entry(&h, i, c) * qs_hadamard_entry(&h, j, c);
            if (dot != (i == j ? h.n : 0)) fail_msg("order %d: rows %d, %d dot %ld", h.n, i, j, dot);
        }
        if (!a) fast_matches_dense(&h, 0);
        qs_hadamard_free(&h);
    }
}

static void test_refusals(void **st)
{
    (void)st;
    static const int bad[] = {0, -4, 3, 7, 100, 172, 11008};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        qs_hadamard h;
        qs_err e = {{0}};
        assert_int_equal(qs_hadamard_init(&h, bad[i], 0, &e), -1);
        char want[64];
        snprintf(want, sizeof want, "no Hadamard matrix of order %d ", bad[i]);
        if (!strstr(e.msg, want) || strchr(e.msg, '\n')) fail_msg("order %d: message '%s'", bad[i], e.msg);
        assert_null(h.core);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orders),
        cmocka_unit_test(test_large_orders),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
