/*
** The prefill's panel products (kernels/llm_pgemm.c): every element one FMA chain over k, so the same
** bits at every SIMD level, for any number of rows (a row's values never depend on the rows beside it),
** with weights packed once or as they go, given [N][K] or [K][N], through strides; and close to a
** float64 product.  A product bound to a fresh cache entry packs it as it goes: the same packed copy
** as a separate packing, the same bits.
*/
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/llm_pgemm.h"
#include "../../kernels/simd.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float urand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 - 0.5);
}

/* K past one packed block (256) and a tail panel; rows not a multiple of the tiles (12, 6) */
enum { K = 300, N = 70, R = 41, LDX = K + 3, LDY = N + 5 };

static void run(const float *x, const float *W, int rows, float *y, int level, const float *P, int threads)
{
    qs_simd_force(level);
    qs_pgemm g = {y, x, W, rows, K, N, LDX, LDY, P, 0, 0, 0, 0};
    qs_pgemm_run(&g, threads);
    qs_simd_force(-1);
}

static void test_bits(void **state)
{
    (void)state;
    float *x = malloc((size_t)R * LDX * sizeof(float)), *W = malloc((size_t)N * K * sizeof(float));
    float *y0 = calloc((size_t)R * LDY, sizeof(float)), *y1 = calloc((size_t)R * LDY, sizeof(float));
    assert_non_null(x); assert_non_null(W); assert_non_null(y0); assert_non_null(y1);
    for (int i = 0; i < R * LDX; i++) x[i] = urand();
    for (int i = 0; i < N * K; i++) W[i] = urand();
    run(x, W, R, y0, QS_SIMD_SCALAR, NULL, 1);
    double worst = 0;
    for (int r = 0; r < R; r++)
        for (int o = 0; o < N; o++) {
            double s = 0, a = 0;
            for (int k = 0; k < K; k++) { s += (double)x[r * LDX + k] * W[o * K + k]; a += fabs((double)x[r * LDX + k] * W[o * K + k]); }
            double err = fabs(y0[r * LDY + o] - s) / a;
            if (err > worst) worst = err;
        }
    print_message("# max |y - float64| / sum |x w| = %.3g\n", worst);
    assert_true(worst < 1e-5);
    qs_pgemm_cache *c = qs_pgemm_cache_new(3 * 32 * K + 100);
    assert_non_null(c);
    const float *P = qs_pgemm_cache_get(c, W, N, K, 2);
    assert_non_null(P);
    assert_ptr_equal(qs_pgemm_cache_get(c, W, N, K, 1), P);   /* packed once */
    for (int level = QS_SIMD_SCALAR; level <= qs_simd_cpu(); level++)
        for (int packed = 0; packed < 2; packed++)
            for (int threads = 1; threads <= 2; threads++) {
                memset(y1, 0, (size_t)R * LDY * sizeof(float));
                run(x, W, R, y1, level, packed ? P : NULL, threads);
                for (int r = 0; r < R; r++) assert_memory_equal(y1 + r * LDY, y0 + r * LDY, N * sizeof(float));
            }
    for (int rows = 1; rows <= 13; rows += 3)   /* fewer rows, at other offsets: the same rows' bits */
        for (int level = QS_SIMD_SCALAR; level <= qs_simd_cpu(); level++) {
            const int r0 = R - rows;
            run(x + (size_t)r0 * LDX, W, rows, y1, level, P, 1);
            for (int r = 0; r < rows; r++) assert_memory_equal(y1 + r * LDY, y0 + (size_t)(r0 + r) * LDY, N * sizeof(float));
        }
    {   /* W given as [K][N] rows of stride N + 7 (attention's P V): the same bits */
        float *Wt = malloc((size_t)K * (N + 7) * sizeof(float));
        assert_non_null(Wt);
        for (int k = 0; k < K; k++)
            for (int o = 0; o < N; o++) Wt[(size_t)k * (N + 7) + o] = W[(size_t)o * K + k];
        for (int level = QS_SIMD_SCALAR; level <= qs_simd_cpu(); level++) {
            qs_simd_force(level);
            qs_pgemm g = {y1, x, Wt, R, K, N, LDX, LDY, NULL, N + 7, 1, 0, 0};
            qs_pgemm_run(&g, 2);
            qs_simd_force(-1);
            for (int r = 0; r < R; r++) assert_memory_equal(y1 + r * LDY, y0 + r * LDY, N * sizeof(float));
        }
        free(Wt);
    }
    assert_null(qs_pgemm_cache_get(c, x, R, K, 1));   /* past the budget: packed as they go */
    qs_pgemm_cache_free(c);
    free(x); free(W); free(y0); free(y1);
}

static void test_bind(void **state)
{
    (void)state;
    const size_t plen = (size_t)((N + 31) / 32) * 32 * K;
    float *x = malloc((size_t)R * LDX * sizeof(float)), *W = malloc((size_t)N * K * sizeof(float));
    float *y0 = calloc((size_t)R * LDY, sizeof(float)), *y1 = calloc((size_t)R * LDY, sizeof(float));
    assert_non_null(x); assert_non_null(W); assert_non_null(y0); assert_non_null(y1);
    for (int i = 0; i < R * LDX; i++) x[i] = urand();
    for (int i = 0; i < N * K; i++) W[i] = urand();
    run(x, W, R, y0, QS_SIMD_SCALAR, NULL, 1);
    qs_pgemm_cache *c0 = qs_pgemm_cache_new(plen), *c1 = qs_pgemm_cache_new(plen);
    assert_non_null(c0); assert_non_null(c1);
    const float *P0 = qs_pgemm_cache_get(c0, W, N, K, 1);
    assert_non_null(P0);
    for (int threads = 1; threads <= 2; threads++)
        for (int level = QS_SIMD_SCALAR; level <= qs_simd_cpu(); level++) {
            qs_pgemm_cache *c = qs_pgemm_cache_new(plen);
            assert_non_null(c);
            qs_simd_force(level);
            for (int pass = 0; pass < 2; pass++) {   /* packs on the first product, reads on the second */
                qs_pgemm g = {y1, x, W, R, K, N, LDX, LDY, NULL, 0, 0, 0, 0};
                qs_pgemm_cache_bind(c, &g);
                assert_non_null(g.P);
                assert_int_equal(g.fill, !pass);
                memset(y1, 0, (size_t)R * LDY * sizeof(float));
                qs_pgemm_run(&g, threads);
                for (int r = 0; r < R; r++) assert_memory_equal(y1 + r * LDY, y0 + r * LDY, N * sizeof(float));
                assert_memory_equal(g.P, P0, plen * sizeof(float));
            }
            qs_simd_force(-1);
            qs_pgemm_cache_free(c);
        }
    qs_pgemm g = {y1, x, W, R, K, N, LDX, LDY, NULL, 0, 0, 0, 0};
    qs_pgemm_cache_bind(c1, &g);
    qs_pgemm h = g;
    h.W = x;   /* a second matrix past the budget: no entry, packed as it goes */
    qs_pgemm_cache_bind(c1, &h);
    assert_null(h.P);
    assert_int_equal(h.fill, 0);
    h = g;
    h.ldw = K + 1;   /* strided weights are not cached */
    qs_pgemm_cache_bind(c1, &h);
    assert_null(h.P);
    qs_pgemm_cache_free(c0);
    qs_pgemm_cache_free(c1);
    free(x); free(W); free(y0); free(y1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bits),
        cmocka_unit_test(test_bind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
