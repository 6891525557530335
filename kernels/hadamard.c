/*
** Hadamard matrices as Kronecker products of a Paley core and a Sylvester power of two (hadamard.h).
*/
#include "hadamard.h"
#include "sr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int is_prime(int q)
{
    if (q < 2) return 0;
    for (int d = 2; (long)d * d <= q; d++)
        if (q % d == 0) return 0;
    return 1;
}

static int paley1(int m) { return m >= 4 && is_prime(m - 1) && (m - 1) % 4 == 3; }
static int paley2(int m) { return m % 2 == 0 && is_prime(m / 2 - 1) && (m / 2 - 1) % 4 == 1; }

int qs_hadamard_plan(int n, int *m, int *s, qs_err *e)
{
    if (n >= 1 && n <= (1 << 24)) {
        int k = 0;
        while (!(n >> k & 1)) k++;   /* the largest power of two dividing n first: the smallest core */
        for (; k >= 0; k--) {
            int c = n >> k;
            if (c == 1 || (c <= QS_HADAMARD_MAX_CORE && (paley1(c) || paley2(c)))) {
                *m = c;
                *s = 1 << k;
                return 0;
            }
        }
    }
    *m = *s = 0;
    return qs_fail(e, "no Hadamard matrix of order %d is constructed here (orders 2^k x {1, q+1 for a prime q = 3 mod 4, "
                      "2(q+1) for a prime q = 1 mod 4})", n);
}

/* The quadratic character of a mod q (0, 1 for a nonzero square, -1 otherwise); sq[] marks squares. */
static int chi(const uint8_t *sq, int q, int a)
{
    a %= q;
    if (a < 0) a += q;
    return a == 0 ? 0 : sq[a] ? 1 : -1;
}

/* Paley I, order q + 1: H = I + S, S = [[0, 1^T], [-1, Q]] with the Jacobsthal matrix Q_ij = chi(j - i),
** skew for q = 3 mod 4, so H H^T = I - S^2 = (q + 1) I. */
static void build_paley1(int8_t *H, int m, const uint8_t *sq)
{
    const int q = m - 1;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) {
            int v = i == 0 ? (j == 0 ? 0 : 1) : j == 0 ? -1 : chi(sq, q, j - i);
            H[(size_t)i * m + j] = (int8_t)(v + (i == j));
        }
}

/* Paley II, order 2(q + 1): the symmetric conference matrix C = [[0, 1^T], [1, Q]] (q = 1 mod 4) with
** each zero replaced by [[1, -1], [-1, -1]] and each +-1 by +-[[1, 1], [1, -1]]. */
static void build_paley2(int8_t *H, int m, const uint8_t *sq)
{
    const int c = m / 2, q = c - 1;
    static const int A[2][2] = {{1, 1}, {1, -1}}, B[2][2] = {{1, -1}, {-1, -1}};
    for (int a = 0; a < c; a++)
        for (int b = 0; b < c; b++) {
            int v = a == 0 ? (b == 0 ? 0 : 1) : b == 0 ? 1 : chi(sq, q, b - a);
            for (int u = 0; u < 2; u++)
                for (int w = 0; w < 2; w++)
                    H[(size_t)(2 * a + u) * m + 2 * b + w] = (int8_t)(v ? v * A[u][w] : B[u][w]);
        }
}

int qs_hadamard_init(qs_hadamard *h, int n, uint64_t seed, qs_err *e)
{
    memset(h, 0, sizeof *h);
    int m, s;
    if (qs_hadamard_plan(n, &m, &s, e)) return -1;
    h->n = n; h->m = m; h->s = s;
    h->scale = 1.0 / sqrt((double)n);
    h->core = malloc((size_t)m * m);
    if (!h->core) return qs_fail(e, "out of memory for a Hadamard core of order %d", m);
    if (m == 1) h->core[0] = 1;
    else {
        const int q = paley1(m) ? m - 1 : m / 2 - 1;
        uint8_t *sq = calloc((size_t)q, 1);
        if (!sq) { qs_hadamard_free(h); return qs_fail(e, "out of memory"); }
        for (long x = 1; x < q; x++) sq[x * x % q] = 1;
        if (paley1(m)) build_paley1(h->core, m, sq);
        else build_paley2(h->core, m, sq);
        free(sq);
    }
    if (seed) {
        if (!(h->sign = malloc((size_t)n * sizeof(double)))) { qs_hadamard_free(h); return qs_fail(e, "out of memory"); }
        for (int i = 0; i < n; i++) h->sign[i] = qs_sr_uniform(seed, (uint64_t)i) < 0.5 ? -1.0 : 1.0;
    }
    return 0;
}

void qs_hadamard_free(qs_hadamard *h)
{
    free(h->core);
    free(h->sign);
    memset(h, 0, sizeof *h);
}

int qs_hadamard_entry(const qs_hadamard *h, int i, int j)
{
    int sy = __builtin_popcount((unsigned)(i % h->s) & (unsigned)(j % h->s)) & 1 ? -1 : 1;
    return h->core[(size_t)(i / h->s) * h->m + j / h->s] * sy;
}

/* In-place unnormalised Walsh-Hadamard transform of s values (H_s symmetric). */
static void fwht(double *v, int s)
{
    for (int len = 1; len < s; len *= 2)
        for (int i = 0; i < s; i += 2 * len)
            for (int j = i; j < i + len; j++) {
                double a = v[j], b = v[j + len];
                v[j] = a + b;
                v[j + len] = a - b;
            }
}

void qs_hadamard_row(const qs_hadamard *h, double *x, double *tmp)
{
    const int n = h->n, m = h->m, s = h->s;
    if (h->sign) for (int i = 0; i < n; i++) x[i] *= h->sign[i];
    for (int a = 0; a < m; a++) fwht(x + (size_t)a * s, s);
    if (m > 1) {   /* block b of x H: sum over a of core[a][b] times block a */
        memset(tmp, 0, (size_t)n * sizeof(double));
        for (int a = 0; a < m; a++)
            for (int b = 0; b < m; b++) {
                const double c = h->core[(size_t)a * m + b];
                const double *xa = x + (size_t)a * s;
                double *tb = tmp + (size_t)b * s;
                for (int v = 0; v < s; v++) tb[v] += c * xa[v];
            }
        memcpy(x, tmp, (size_t)n * sizeof(double));
    }
    for (int i = 0; i < n; i++) x[i] *= h->scale;
}
