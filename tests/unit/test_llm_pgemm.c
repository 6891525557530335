/*
** The prefill's panel products (kernels/llm_pgemm.c): every element one FMA chain over k, so the same
** bits at every SIMD level, for any number of rows (a row's values never depend on the rows beside it),
** with weights packed once or as they go, given [N][K] or [K][N], through strides, cut into blocks of
** rows; and close to a float64 product.  A product bound to a fresh cache entry packs it as it goes: the
** same packed copy as a separate packing, the same bits.  The prefill's rope pass: the same bits at every
** SIMD level, and K and V packed as written; the attention's row kernels AVX2's bits on AVX-512.
*/
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/llm_pgemm.h"
#include "../../kernels/llm_prefill.h"
#include "../../kernels/llm_rows.h"
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
    qs_pgemm g = {y, x, W, rows, K, N, LDX, LDY, P, 0, 0, 0, 0, NULL};
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
            qs_pgemm g = {y1, x, Wt, R, K, N, LDX, LDY, NULL, N + 7, 1, 0, 0, NULL};
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
                qs_pgemm g = {y1, x, W, R, K, N, LDX, LDY, NULL, 0, 0, 0, 0, NULL};
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
    qs_pgemm g = {y1, x, W, R, K, N, LDX, LDY, NULL, 0, 0, 0, 0, NULL};
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

/* Products with packed weights cut into blocks of rows (x past 1 MB): the same bits as one block, for
** any cut (blocks of whole tiles, a short last one, empty ones past R). */
static void test_row_blocks(void **state)
{
    (void)state;
    enum { BR = 520, BK = 520, BN = 40 };
    float *x = malloc((size_t)BR * BK * sizeof(float)), *W = malloc((size_t)BN * BK * sizeof(float));
    float *y0 = malloc((size_t)BR * BN * sizeof(float)), *y1 = malloc((size_t)BR * BN * sizeof(float));
    assert_non_null(x); assert_non_null(W); assert_non_null(y0); assert_non_null(y1);
    for (int i = 0; i < BR * BK; i++) x[i] = urand();
    for (int i = 0; i < BN * BK; i++) W[i] = urand();
    qs_simd_force(QS_SIMD_SCALAR);
    qs_pgemm g = {y0, x, W, BR, BK, BN, BK, BN, NULL, 0, 0, 0, 0, NULL};
    qs_pgemm_run(&g, 1);
    qs_simd_force(-1);
    qs_pgemm_cache *c = qs_pgemm_cache_new((size_t)64 * BK);
    assert_non_null(c);
    g.y = y1;
    qs_pgemm_cache_bind(c, &g);
    assert_int_equal(qs_pgemm_row_blocks(&g), 1);   /* packing as it goes: one block */
    qs_pgemm_run(&g, 2);
    g.fill = 0;
    assert_int_equal(qs_pgemm_row_blocks(&g), 2);   /* 1.08 MB of x */
    for (int level = QS_SIMD_SCALAR; level <= qs_simd_cpu(); level++)
        for (int threads = 1; threads <= 2; threads++) {
            memset(y1, 0, (size_t)BR * BN * sizeof(float));
            qs_simd_force(level);
            qs_pgemm_run(&g, threads);
            qs_simd_force(-1);
            assert_memory_equal(y1, y0, (size_t)BR * BN * sizeof(float));
        }
    _Alignas(64) static float pack[QS_PGEMM_PACK];
    for (int nb = 1; nb <= 7; nb += 3) {
        memset(y1, 0, (size_t)BR * BN * sizeof(float));
        for (size_t t = 0; t < qs_pgemm_units(&g) * (size_t)nb; t++) qs_pgemm_block(&g, nb, t, pack);
        assert_memory_equal(y1, y0, (size_t)BR * BN * sizeof(float));
    }
    qs_pgemm_cache_free(c);
    free(x); free(W); free(y0); free(y1);
}

/* The prefill's rope pass (llm_prefill.c): the vectorised RoPE gives the portable path's bits (pairs and
** neox halves), and the packed K and V (tasks of 32 rows, two sequences whose rows straddle a task) hold
** exactly the cache rows. */
enum { RB = 2, RT = 40, RMAX = 48, RLDP = 64, RNH = 3, RNKV = 1 };

static void rope_run(int hd, int neox, int level, float *buf, size_t n, const float *init)
{
    const int qd = RNH * hd, kvd = RNKV * hd, RR = RB * RT, hdp = (hd + 31) / 32 * 32;
    memcpy(buf, init, n * sizeof(float));
    float *q = buf, *k = q + (size_t)RR * qd, *v = k + (size_t)RR * kvd, *kc = v + (size_t)RR * kvd;
    float *vc = kc + (size_t)RB * RMAX * kvd, *kp = vc + (size_t)RB * RMAX * kvd, *vp = kp + (size_t)RB * RNKV * RLDP * hdp;
    const float *bias = vp + (size_t)RB * RNKV * RLDP * hdp, *cs = bias + qd, *sn = cs + (size_t)RMAX * hd / 2;
    qs_prefill_rope a = {q, k, v, kc, vc, kp, vp, RLDP, bias, bias + 1, bias + 2, cs, sn, NULL, 0, RR, RT, 0, RMAX,
                         RNH, RNKV, hd, neox, NULL, NULL, 0};
    qs_err e = {{0}};
    qs_simd_force(level);
    assert_int_equal(qs_prefill_rope_kv(&a, &e), 0);
    qs_simd_force(-1);
    for (int b = 0; b < RB; b++)
        for (int p = 0; p < RT; p++)
            for (int h = 0; h < RNKV; h++)
                for (int i = 0; i < hd; i++) {
                    const size_t c = ((size_t)b * RMAX + p) * kvd + (size_t)h * hd + i, base = ((size_t)b * RNKV + h) * RLDP * hdp;
                    assert_true(kp[base + (size_t)(p / 32) * hd * 32 + (size_t)i * 32 + p % 32] == kc[c]);
                    assert_true(vp[base + (size_t)(i / 32) * RLDP * 32 + (size_t)p * 32 + i % 32] == vc[c]);
                }
}

static void test_rope(void **state)
{
    (void)state;
    for (int hd = 32; hd <= 64; hd += 32)
        for (int neox = 0; neox < 2; neox++) {
            const int RR = RB * RT, hdp = (hd + 31) / 32 * 32;
            const size_t n = (size_t)RR * (RNH + 2 * RNKV) * hd + 2 * (size_t)RB * RMAX * RNKV * hd +
                             2 * (size_t)RB * RNKV * RLDP * hdp + (size_t)RNH * hd + 2 * (size_t)RMAX * hd / 2;
            float *init = malloc(n * sizeof(float)), *b0 = malloc(n * sizeof(float)), *b1 = malloc(n * sizeof(float));
            assert_non_null(init); assert_non_null(b0); assert_non_null(b1);
            for (size_t i = 0; i < n; i++) init[i] = 4 * urand();
            rope_run(hd, neox, QS_SIMD_SCALAR, b0, n, init);
            for (int level = QS_SIMD_SCALAR + 1; level <= qs_simd_cpu(); level++) {
                rope_run(hd, neox, level, b1, n, init);
                assert_memory_equal(b1, b0, n * sizeof(float));
            }
            free(init); free(b0); free(b1);
        }
}

/* The attention's row kernels at every SIMD level from AVX2: exp with its double sum, the scaling and the
** softmax give AVX2's bits on AVX-512, for every length's tail (16, 8 and single lanes); the count of
** non-finite values the same at every level. */
static void test_row_levels(void **state)
{
    (void)state;
    enum { M = 203 };
    float x[M], y[2][M], z[2][M];
    for (int i = 0; i < M; i++) x[i] = 30 * urand();
    x[7] = -200;   /* below 2^-126: 0 */
    for (int n = 1; n <= M; n += 5)
        for (int lv = QS_SIMD_AVX2; lv <= qs_simd_cpu(); lv++) {
            const int i = lv - QS_SIMD_AVX2;
            qs_simd_force(lv);
            double s = qs_exp_row(x, (size_t)n, 2.5f, y[i]), s0 = qs_sum_exp_row(x, (size_t)n, 2.5f);
            memcpy(z[i], x, sizeof x);
            qs_scale_row(z[i], (size_t)n, 0.125f);
            qs_softmax_row(z[i], (size_t)n);
            qs_simd_force(-1);
            static double s1;
            assert_memory_equal(&s, &s0, sizeof s);
            if (!i) { s1 = s; continue; }
            assert_memory_equal(&s, &s1, sizeof s);
            assert_memory_equal(y[1], y[0], (size_t)n * sizeof(float));
            assert_memory_equal(z[1], z[0], (size_t)n * sizeof(float));
        }
    for (int lv = QS_SIMD_SCALAR; lv <= qs_simd_cpu(); lv++) {   /* RMSNorm's scaling, the residual add */
        float w[M];
        for (int i = 0; i < M; i++) w[i] = urand();
        qs_simd_force(lv);
        qs_norm_scale_row(y[0], x, 0.37f, w, M);
        memcpy(z[0], x, sizeof x);
        qs_add_row(z[0], w, M);
        qs_simd_force(-1);
        for (int i = 0; i < M; i++) {
            const float want = x[i] * 0.37f * w[i], sum = x[i] + w[i];
            assert_memory_equal(&y[0][i], &want, sizeof want);
            assert_memory_equal(&z[0][i], &sum, sizeof sum);
        }
    }
    x[3] = NAN; x[20] = INFINITY; x[36] = -INFINITY; x[200] = -NAN;
    for (int lv = QS_SIMD_SCALAR; lv <= qs_simd_cpu(); lv++) {
        qs_simd_force(lv);
        assert_int_equal((int)qs_count_nonfinite(x, M), 4);
        assert_int_equal((int)qs_count_nonfinite(x + 4, 32), 1);
        qs_simd_force(-1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bits),
        cmocka_unit_test(test_bind),
        cmocka_unit_test(test_row_blocks),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_row_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
