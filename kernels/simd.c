/*
** Run-time SIMD dispatch (simd.h).  The CPU is probed once; QS_SIMD is read once; both are cached
** in atomics so concurrent first calls are harmless (they compute the same value).
*/
#include "simd.h"

#include <stdlib.h>
#include <string.h>

static int g_cpu = -1;      /* probed level, -1 = not yet */
static int g_env = -2;      /* QS_SIMD cap, -2 = not yet read, -1 = none */
static int g_force = -1;    /* qs_simd_force cap, -1 = none */

int qs_simd_cpu(void)
{
    int c = __atomic_load_n(&g_cpu, __ATOMIC_RELAXED);
    if (c < 0) {
        c = QS_SIMD_SCALAR;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx2")) c = QS_SIMD_AVX2;
        if (c == QS_SIMD_AVX2 && __builtin_cpu_supports("avx512f")) c = QS_SIMD_AVX512;
#endif
        __atomic_store_n(&g_cpu, c, __ATOMIC_RELAXED);
    }
    return c;
}

static int env_cap(void)
{
    int v = __atomic_load_n(&g_env, __ATOMIC_RELAXED);
    if (v == -2) {
        const char *s = getenv("QS_SIMD");
        v = -1;
        if (s && strcmp(s, "scalar") == 0) v = QS_SIMD_SCALAR;
        else if (s && strcmp(s, "avx2") == 0) v = QS_SIMD_AVX2;
        else if (s && strcmp(s, "avx512") == 0) v = QS_SIMD_AVX512;
        __atomic_store_n(&g_env, v, __ATOMIC_RELAXED);
    }
    return v;
}

int qs_simd_level(void)
{
    int c = qs_simd_cpu();
    int f = __atomic_load_n(&g_force, __ATOMIC_RELAXED);
    int cap = f >= 0 ? f : env_cap();
    return cap >= 0 && cap < c ? cap : c;
}

void qs_simd_force(int level) { __atomic_store_n(&g_force, level < 0 ? -1 : level, __ATOMIC_RELAXED); }

const char *qs_simd_name(int level)
{
    switch (level) {
    case QS_SIMD_AVX2: return "avx2";
    case QS_SIMD_AVX512: return "avx512";
    default: return "scalar";
    }
}

/* qs_finite_absmax_n: an integer max of the magnitude bits below Inf's, so every level gives the
** same bits; AVX2 takes 16 lanes a step, the tail in C. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
__attribute__((target("avx2")))
static uint32_t finite_absmax_bits_avx2(const float *x, size_t n)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a0 = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), absm);
        __m256i a1 = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i + 8)), absm);
        m0 = _mm256_max_epi32(m0, _mm256_andnot_si256(_mm256_cmpgt_epi32(a0, _mm256_sub_epi32(inf, _mm256_set1_epi32(1))), a0));
        m1 = _mm256_max_epi32(m1, _mm256_andnot_si256(_mm256_cmpgt_epi32(a1, _mm256_sub_epi32(inf, _mm256_set1_epi32(1))), a1));
    }
    m0 = _mm256_max_epi32(m0, m1);
    __m128i h = _mm_max_epi32(_mm256_castsi256_si128(m0), _mm256_extracti128_si256(m0, 1));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    uint32_t m = (uint32_t)_mm_cvtsi128_si32(h);
    for (; i < n; i++) {
        uint32_t a;
        memcpy(&a, x + i, 4);
        a &= 0x7fffffffu;
        if (a < 0x7f800000u && a > m) m = a;
    }
    return m;
}
#endif

float qs_finite_absmax_n(const float *x, size_t n)
{
    uint32_t m;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (qs_simd_level() >= QS_SIMD_AVX2) m = finite_absmax_bits_avx2(x, n);
    else
#endif
    {
        m = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t a;
            memcpy(&a, x + i, 4);
            a &= 0x7fffffffu;
            if (a < 0x7f800000u && a > m) m = a;
        }
    }
    float v;
    memcpy(&v, &m, 4);
    return v;
}
