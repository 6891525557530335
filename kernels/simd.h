/*
** Run-time choice of the vectorised paths (AVX2, AVX-512) and the array entry points that use them.
**
** Every vectorised kernel is bit-identical to the portable scalar path (tested in
** tests/unit/test_minifloat.c).  The level is chosen once from the CPU (__builtin_cpu_supports)
** and can be lowered with the environment variable QS_SIMD=scalar|avx2|avx512 (read once, on first
** use) or, by tests, with qs_simd_force().
*/
#ifndef QS_SIMD_H
#define QS_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "minifloat.h"

enum { QS_SIMD_SCALAR = 0, QS_SIMD_AVX2 = 1, QS_SIMD_AVX512 = 2 };

int qs_simd_cpu(void);              /* best level this CPU (and OS) supports */
int qs_simd_level(void);            /* level in use: min(cpu, QS_SIMD or the forced level) */
void qs_simd_force(int level);      /* tests: use at most `level`; -1 = back to QS_SIMD / the CPU */
const char *qs_simd_name(int level);
/* Largest finite |x| of x[0..n) (NaN and ±Inf ignored; 0 without any): the same bits on every level. */
float qs_finite_absmax_n(const float *x, size_t n);

#endif
