/*
** Row kernels of the attention softmax (max, exp2 + sum, P rounding, O rescale), written so gcc
** vectorises them: the reductions keep 16 independent lanes (a fixed summation order, so results
** do not depend on the vector width), and on x86-64 gcc builds each function is cloned for AVX-512
** and AVX2 with the best one picked at load time (target_clones).
*/
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif
#include <math.h>
#include <string.h>

#include "attn_internal.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define QS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define QS_CLONES
#endif

#define LANES 16

QS_CLONES float qs_row_max(const float *x, size_t n)
{
    float acc[LANES];
    for (int l = 0; l < LANES; l++) acc[l] = -INFINITY;
    size_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
    float m = -INFINITY;
    for (; j < n; j++) m = x[j] > m ? x[j] : m;
    for (int l = 0; l < LANES; l++) m = acc[l] > m ? acc[l] : m;
    return m;
}

/* x[j] = 2^(x[j] − m), returns Σ x[j] (before any rounding), then rounds x to the P dtype */
QS_CLONES float qs_row_exp2_sum(float *x, size_t n, float m, qs_pdtype pd)
{
    for (size_t j = 0; j < n; j++) x[j] = qs_exp2f_fast(x[j] - m);
    float acc[LANES] = {0};
    size_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += x[j + l];
    float s = 0;
    for (; j < n; j++) s += x[j];
    for (int l = 0; l < LANES; l++) s += acc[l];
    if (pd == QS_P_BF16)
        for (size_t k = 0; k < n; k++) x[k] = qs_bf16_round(x[k]);
    else if (pd == QS_P_FP16)
        for (size_t k = 0; k < n; k++) x[k] = qs_fp16_round(x[k]);
    return s;
}

/* AMLA: x[j] = lowp(2^(x[j] − m)·c16), returns Σ 2^(x[j] − m) */
QS_CLONES float qs_row_exp2_sum_scaled(float *x, size_t n, float m, float c16, qs_pdtype pd)
{
    for (size_t j = 0; j < n; j++) x[j] = qs_exp2f_fast(x[j] - m);
    float acc[LANES] = {0};
    size_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += x[j + l];
    float s = 0;
    for (; j < n; j++) s += x[j];
    for (int l = 0; l < LANES; l++) s += acc[l];
    if (pd == QS_P_BF16)
        for (size_t k = 0; k < n; k++) x[k] = qs_bf16_round(x[k] * c16);
    else if (pd == QS_P_FP16)
        for (size_t k = 0; k < n; k++) x[k] = qs_fp16_round(x[k] * c16);
    else
        for (size_t k = 0; k < n; k++) x[k] = x[k] * c16;
    return s;
}

QS_CLONES void qs_row_scale(float *o, size_t n, float a)
{
    for (size_t j = 0; j < n; j++) o[j] *= a;
}

/* AMLA: add N to the INT32 bits of every non-zero element (the power-of-two rescale) */
QS_CLONES void qs_row_bits_add(float *o, size_t n, int32_t N)
{
    for (size_t j = 0; j < n; j++) {
        uint32_t u;
        memcpy(&u, &o[j], 4);
        u = (u & 0x7FFFFFFFu) ? u + (uint32_t)N : u;   /* exponent-field shift, sign untouched */
        memcpy(&o[j], &u, 4);
    }
}
