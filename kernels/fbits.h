/* float32 <-> its bit pattern, without aliasing trouble (memcpy compiles to a register move). */
#ifndef QS_FBITS_H
#define QS_FBITS_H

#include <stdint.h>
#include <string.h>

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

#endif
