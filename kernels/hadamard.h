/*
** Hadamard matrices of orders that are not powers of two, and their fast product with a vector.
**
** An order n is built as the Kronecker product H_m (x) H_s of a small "core" matrix H_m and a
** Sylvester matrix H_s, s = 2^k the largest power of two that leaves a core this file can build:
**   m = 1                     (n a power of two; Sylvester alone),
**   m = q + 1, q prime = 3 mod 4    (Paley I: 4, 8, 12, 20, 24, 32, 44, 48, 60, ...),
**   m = 2(q + 1), q prime = 1 mod 4 (Paley II: 12, 20, 28, 36, 60, 76, ...).
** Examples: 576 = 36 x 16 (Paley II, q = 17), 1536 = 12 x 128 (Paley I, q = 11), 14336 = 28 x 512.
** (QuaRot ships tables of such cores, e.g. its had12, had36; these are constructed instead.)
** Orders no construction covers (odd orders, 100, 172, ...) are refused.
*/
#ifndef QS_HADAMARD_H
#define QS_HADAMARD_H

#include <stdint.h>

#include "qs_err.h"

typedef struct qs_hadamard {
    int n, m, s;              /* n = m * s, s = 2^k */
    int8_t *core;             /* [m][m] entries +-1 of H_m */
    double *sign;             /* [n] random signs (D), or NULL: none */
    double scale;             /* 1 / sqrt(n) */
} qs_hadamard;

#define QS_HADAMARD_MAX_CORE 4096

/* The core order m and power of two s this file uses for n (0 and e set: no construction). */
int qs_hadamard_plan(int n, int *m, int *s, qs_err *e);
/* Build the matrix of order n; seed != 0 adds random signs D (diagonal, from qs_sr_uniform(seed, i)):
** the orthogonal matrix is then D H / sqrt(n).  -1 (e set) for an order no construction covers. */
int qs_hadamard_init(qs_hadamard *h, int n, uint64_t seed, qs_err *e);
void qs_hadamard_free(qs_hadamard *h);
/* Entry (i, j) of the +-1 matrix H = H_m (x) H_s (no signs, no scaling). */
int qs_hadamard_entry(const qs_hadamard *h, int i, int j);
/* x <- x D H / sqrt(n) for one row vector x of n values (D = I without signs); tmp holds n doubles
** (unused when m = 1). */
void qs_hadamard_row(const qs_hadamard *h, double *x, double *tmp);

#endif
