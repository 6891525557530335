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
