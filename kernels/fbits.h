/* float32 <-> its bit pattern, without aliasing trouble (memcpy compiles to a register move). */
#ifndef QS_FBITS_H
#define QS_FBITS_H

#include <stdint.h>
#include <string.h>

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Largest finite |x| of x[0..n) (NaN and Inf ignored, 0 without any): an integer max of the bits, exact
** in any order. */
static inline float qs_finite_absmax(const float *x, size_t n)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = f2u(x[i]) & 0x7fffffffu;
        if (a < 0x7f800000u && a > m) m = a;
    }
    return u2f(m);
}

#endif
