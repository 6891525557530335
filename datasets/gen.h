/*
** Synthetic tensor generators (`qscope gen`).
**
** Counter-based: element i of a tensor is a pure function of (seed, i), so a tensor can be
** generated in any chunking, by any number of threads, and always gives the same bits.
*/
#ifndef QS_GEN_H
#define QS_GEN_H

#include <stddef.h>
#include <stdint.h>

typedef enum qs_gen_kind {
    QS_GEN_GAUSSIAN,    /* N(0, scale^2) */
    QS_GEN_LAPLACE,     /* Laplace(0, b) with std = scale */
    QS_GEN_STUDENT_T,   /* Student-t with nu degrees of freedom, times scale */
    QS_GEN_UNIFORM,     /* U(-scale, scale) */
    QS_GEN_LOGNORMAL,   /* exp(N(0, sigma^2)) * scale, random sign when signed=1 */
    QS_GEN_LLM_ACT,     /* LLM-activation-like: Gaussian channels plus a few outlier channels */
    QS_GEN_COUNT
} qs_gen_kind;

typedef struct qs_gen_spec {
    qs_gen_kind kind;
    uint64_t seed;
    uint64_t rows, cols;     /* matrix shape; cols = 0 means a 1-D tensor of `rows` elements */
    double scale;            /* default 1 */
    double nu;               /* student-t degrees of freedom, default 3 */
    double sigma;            /* lognormal sigma, default 1 */
    int    lognormal_signed; /* lognormal: random sign (default 1) */
    /* llm-act: outlier channels (columns) are a seed-determined subset; default count
    ** max(1, cols/256), magnitude factor uniform in [outlier_min, outlier_max] (20, 100) */
    int    outlier_channels;
    double outlier_min, outlier_max;
} qs_gen_spec;

/* Defaults for every field but kind/seed/shape. */
void qs_gen_defaults(qs_gen_spec *s);
const char *qs_gen_name(qs_gen_kind k);
int qs_gen_from_name(const char *name, qs_gen_kind *k);   /* 0 ok, -1 unknown */
/* One-line description of each kind for `qscope help gen`. */
const char *qs_gen_describe(qs_gen_kind k);

/* Fill out[0..n) with elements start..start+n-1 (C order over rows x cols). */
void qs_gen_fill(const qs_gen_spec *s, uint64_t start, size_t n, float *out);

/* The whole rows x cols tensor (cols = 0: a 1-D tensor of rows elements) of one kind with the
** default parameters and the given seed and scale. */
void qs_gen_matrix(qs_gen_kind kind, uint64_t seed, size_t rows, size_t cols, double scale, float *out);

#endif
