/*
** Synthetic tensor generators (see gen.h).
**
** Randomness is counter-based.  A 64-bit key is derived from (seed, stream), and the j-th uniform
** of element i is a keyed SplitMix64 hash of the counter i*QS_GEN_DRAWS + j.  Nothing is carried
** from one element to the next (no cached second Box-Muller normal, no generator state), so
** element i is a pure function of (spec, i) and any chunking or threading gives the same bits.
**
** Streams: every kind draws its per-element uniforms from stream 0, so with equal seeds a
** lognormal tensor is exp(sigma * the gaussian tensor) and llm-act reuses the same normals.
** llm-act's per-column quantities come from streams of their own, indexed by the column.
**
** Uniforms lie on the odd grid (2k+1)/2^53, k < 2^52: strictly inside (0,1), so log(u) is finite,
** and symmetric around 1/2 (1-u is exact and on the grid), so inverse-CDF samplers are symmetric.
**
** Only exp, log, sqrt, cos and sin are used from libm; glibc's are deterministic on a given
** platform.  Floating-point contraction into FMA is kept off (gcc: -std=c11 implies
** -ffp-contract=off; clang: the pragma below), so gcc and clang builds give the same bits.
**
** Odd parameters are not rejected here (the CLI validates them): fill never has undefined
** behaviour, but a scale or nu that makes no sense gives NaN or infinite values.
*/
#include "gen.h"

#include <math.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* Uniforms reserved per element: counters i*QS_GEN_DRAWS .. i*QS_GEN_DRAWS+31.  Element indices
** up to 2^59 are distinct; the Student-t sampler is the only kind that needs more than 3. */
#define QS_GEN_DRAWS 32

#define GAMMA64 0x9e3779b97f4a7c15ull
#define TWO_PI 6.283185307179586476925286766559

/* Streams (what a key is for). */
enum { ST_ELEM = 0, ST_COL_STD = 1, ST_COL_PERM = 2, ST_COL_FACTOR = 3, ST_MASSIVE = 4 };

/* SplitMix64 finaliser: a bijection on 64 bits with full avalanche. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t gen_key(uint64_t seed, unsigned stream)
{
    return mix64(mix64(seed ^ 0x5153636f70654745ull) + (uint64_t)(stream + 1) * 0xd1b54a32d192ed03ull);
}

/* The counter-th output of a SplitMix64 stream started at key, hashed once more with the key so
** that streams of different keys are not merely shifted copies of one sequence. */
static inline uint64_t draw_bits(uint64_t key, uint64_t ctr)
{
    return mix64(mix64(key + ctr * GAMMA64) ^ key);
}

/* Uniform on the odd grid (2k+1)/2^53: never 0 or 1. */
static inline double draw_u(uint64_t key, uint64_t ctr)
{
    return (double)((draw_bits(key, ctr) >> 11) | 1u) * 0x1p-53;
}

/* Standard normal by Box-Muller from draws ctr and ctr+1 (cosine branch only: the sine branch
** would have to be cached for the next element, which would break counter-basedness). */
static inline double draw_normal(uint64_t key, uint64_t ctr)
{
    double u1 = draw_u(key, ctr), u2 = draw_u(key, ctr + 1);
    return sqrt(-2.0 * log(u1)) * cos(TWO_PI * u2);
}

/* ---- Gamma and chi-square, still counter-based ------------------------------------------- */

/* Marsaglia-Tsang attempts before the fallback.  Acceptance is >= 0.95 per attempt for a >= 1
** (the boost below keeps a >= 1), so all nine fail with probability < 2e-12 per element. */
#define MT_TRIES 9

/* Gamma(a, 1) for a > 0 by Marsaglia & Tsang (2000) from draws base .. base+3*MT_TRIES.  Draw
** base is the a<1 boost uniform (Gamma(a) = Gamma(a+1) * U^(1/a)); attempt t uses base+1+3t and
** base+2+3t for its normal and base+3+3t for the acceptance test.  The number of attempts is
** bounded so that the draws an element needs are bounded; if all of them are rejected the
** deterministic fallback is d = a' - 1/3 (a' the boosted shape; d is close to the mode), which
** biases the distribution by less than 2e-12 in probability. */
static double draw_gamma(uint64_t key, uint64_t base, double a)
{
    int boost = a < 1.0;
    double aa = boost ? a + 1.0 : a;
    double d = aa - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    double g = d;
    for (int t = 0; t < MT_TRIES; t++) {
        uint64_t ct = base + 1 + 3 * (uint64_t)t;
        double x = draw_normal(key, ct);
        double v = 1.0 + c * x;
        if (v <= 0.0) continue;
        v = v * v * v;
        double u = draw_u(key, ct + 2);
        double x2 = x * x;
        /* Squeeze first: it avoids the two logs ~98% of the time. */
        if (u < 1.0 - 0.0331 * x2 * x2 || log(u) < 0.5 * x2 + d * (1.0 - v + log(v))) {
            g = d * v;
            break;
        }
    }
    if (boost) g *= exp(log(draw_u(key, base)) / a);
    return g;
}

/* Largest integer nu that takes the exact path (floor(nu/2) + 2 draws after the 2 of Z). */
#define CHI2_INT_MAX 40

/* Chi-square with nu degrees of freedom from draws base ... .  Integer nu <= CHI2_INT_MAX: a sum
** of nu squared normals, computed as -2 log(product of floor(nu/2) uniforms) (two squared
** normals sum to an Exp(1/2)) plus one squared normal for odd nu; no rejection.  Otherwise
** 2 * Gamma(nu/2). */
static double draw_chi2(uint64_t key, uint64_t base, double nu)
{
    if (nu >= 1.0 && nu <= CHI2_INT_MAX && nu == floor(nu)) {
        int n = (int)nu;
        double prod = 1.0, s = 0.0;
        for (int k = 0; k < n / 2; k++) {
            prod *= draw_u(key, base + (uint64_t)k);
            if (prod < 0x1p-900) { s += log(prod); prod = 1.0; }  /* stay clear of underflow */
        }
        s = -2.0 * (s + log(prod));
        if (n & 1) {
            double z = draw_normal(key, base + (uint64_t)(n / 2));
            s += z * z;
        }
        return s;
    }
    return 2.0 * draw_gamma(key, base, 0.5 * nu);
}

/* ---- llm-act per-column quantities ------------------------------------------------------- */

/* A seed-keyed permutation of [0, n) (n >= 1): a 6-round Feistel network on the smallest
** even-width power of two >= n, cycle-walked back into range (fewer than 4 steps on average).
** Column c is an outlier channel iff perm(c) < outlier count, which gives exactly that many. */
static uint64_t col_perm(uint64_t key, uint64_t n, uint64_t x)
{
    unsigned bits = 2;
    while (bits < 64 && (1ull << bits) < n) bits += 2;
    unsigned half = bits / 2;
    uint64_t mask = (half >= 64) ? ~0ull : (1ull << half) - 1;
    do {
        uint64_t l = (x >> half) & mask, r = x & mask;
        for (unsigned round = 0; round < 6; round++) {
            uint64_t f = mix64(key + round * GAMMA64 + r * 0xd6e8feb86659fd93ull) & mask;
            uint64_t t = l ^ f;
            l = r;
            r = t;
        }
        x = (l << half) | r;
    } while (x >= n);
    return x;
}

typedef struct llm_cfg {
    uint64_t C;              /* channels (columns) */
    int      bos;            /* row 0 is a BOS token with massive activations */
    uint64_t n_out;          /* outlier channels */
    uint64_t n_massive;      /* massive-activation channels in the BOS row (1 or 2) */
    uint64_t k_std, k_perm, k_fac, k_mas, k_elem;
} llm_cfg;

typedef struct llm_col {
    double mul;              /* base std times outlier factor */
    double massive;          /* BOS value for a massive channel, else 0 */
} llm_col;

static void llm_setup(const qs_gen_spec *s, llm_cfg *g)
{
    /* cols = 0: one token of `rows` channels (an ordinary token, so no BOS row). */
    g->C = s->cols ? s->cols : s->rows;
    g->bos = s->cols != 0;
    if (g->C == 0) g->C = 1;             /* empty shape: keep element i defined anyway */
    if (s->outlier_channels < 0) g->n_out = 0;
    else if (s->outlier_channels == 0) g->n_out = g->C / 256 > 1 ? g->C / 256 : 1;
    else g->n_out = (uint64_t)s->outlier_channels;
    if (g->n_out > g->C) g->n_out = g->C;
    g->k_std = gen_key(s->seed, ST_COL_STD);
    g->k_perm = gen_key(s->seed, ST_COL_PERM);
    g->k_fac = gen_key(s->seed, ST_COL_FACTOR);
    g->k_mas = gen_key(s->seed, ST_MASSIVE);
    g->k_elem = gen_key(s->seed, ST_ELEM);
    g->n_massive = 1 + (draw_bits(g->k_mas, 0) >> 63);
    if (g->n_massive > g->C) g->n_massive = g->C;
}

static llm_col llm_column(const qs_gen_spec *s, const llm_cfg *g, uint64_t c)
{
    llm_col col;
    uint64_t rank = col_perm(g->k_perm, g->C, c);
    /* Channel scales of real activations spread over about a factor e^{+-0.6} (1 sigma 0.3). */
    col.mul = s->scale * exp(0.3 * draw_normal(g->k_std, 2 * c));
    if (rank < g->n_out) {
        double u = draw_u(g->k_fac, c);
        col.mul *= s->outlier_min + (s->outlier_max - s->outlier_min) * u;
    }
    col.massive = 0.0;
    if (g->bos && rank < g->n_massive) {
        /* Massive activation (Sun et al. 2024): in the BOS token only, a near-constant value of
        ** 200..500 times its channel's std, of a random sign.  The massive channels are the
        ** first outlier channels (perm ranks 0 and 1), so the value lands at ~1e4 x the median
        ** magnitude, as in real models, and dominates the tensor's absmax. */
        double u = draw_u(g->k_mas, 1 + 2 * c);
        double m = col.mul * (200.0 + 300.0 * u);
        col.massive = (draw_bits(g->k_mas, 2 + 2 * c) >> 63) ? -m : m;
    }
    return col;
}

#define LLM_BLOCK 256

/* Elements [start, end) that lie in rows ra..rb and columns [c_lo, c_hi).  Column blocks are
** outermost and rows inside, so each column's parameters (a permutation lookup, a normal and an
** exp) are computed once per call rather than once per element. */
static void fill_llm_rows(const qs_gen_spec *s, const llm_cfg *g, uint64_t start, uint64_t end,
                          uint64_t ra, uint64_t rb, uint64_t c_lo, uint64_t c_hi, float *out)
{
    uint64_t C = g->C;
    llm_col cols[LLM_BLOCK];
    for (uint64_t cb = c_lo; cb < c_hi;) {
        uint64_t ce = c_hi - cb < LLM_BLOCK ? c_hi : cb + LLM_BLOCK;
        int have = 0;
        for (uint64_t r = ra; r <= rb; r++) {
            uint64_t lo = r * C + cb, hi = r * C + ce;
            if (lo < start) lo = start;
            if (hi > end) hi = end;
            if (lo >= hi) continue;
            if (!have) {
                for (uint64_t c = cb; c < ce; c++) cols[c - cb] = llm_column(s, g, c);
                have = 1;
            }
            for (uint64_t i = lo; i < hi; i++) {
                const llm_col *col = &cols[i - r * C - cb];
                double v = col->mul * draw_normal(g->k_elem, i * QS_GEN_DRAWS);
                if (r == 0 && col->massive != 0.0) v = col->massive;
                out[i - start] = (float)v;
            }
        }
        cb = ce;
    }
}

static void fill_llm(const qs_gen_spec *s, uint64_t start, size_t n, float *out)
{
    llm_cfg g;
    llm_setup(s, &g);
    uint64_t end = start + n, C = g.C;
    uint64_t r0 = start / C, r1 = (end - 1) / C;
    if (r1 - r0 >= 2) {   /* n > C: sweeping every column is in proportion to n */
        fill_llm_rows(s, &g, start, end, r0, r1, 0, C, out);
        return;
    }
    /* One or two partial rows: only the columns they touch, so that a small window of a huge
    ** 1-D tensor costs in proportion to the window, not to the number of channels. */
    for (uint64_t r = r0; r <= r1; r++) {
        uint64_t lo = start > r * C ? start : r * C;
        uint64_t hi = end < (r + 1) * C ? end : (r + 1) * C;
        fill_llm_rows(s, &g, start, end, r, r, lo - r * C, hi - r * C, out);
    }
}

/* ---- public interface -------------------------------------------------------------------- */

void qs_gen_defaults(qs_gen_spec *s)
{
    s->scale = 1.0;
    s->nu = 3.0;
    s->sigma = 1.0;
    s->lognormal_signed = 1;
    s->outlier_channels = 0;
    s->outlier_min = 20.0;
    s->outlier_max = 100.0;
}

static const char *const gen_names[QS_GEN_COUNT] = {
    "gaussian", "laplace", "student-t", "uniform", "lognormal", "llm-act",
};

static const char *const gen_desc[QS_GEN_COUNT] = {
    "normal N(0, scale^2)",
    "Laplace, std = scale: exponential tails, kurtosis 6",
    "Student-t with nu degrees of freedom (default 3), times scale: heavy tails",
    "uniform on (-scale, scale): no tails, kurtosis 1.8",
    "exp(N(0, sigma^2)) * scale with a random sign: magnitudes spread over decades",
    "LLM activations (tokens x channels): outlier channels x20-100, massive BOS token",
};

const char *qs_gen_name(qs_gen_kind k)
{
    return (unsigned)k < QS_GEN_COUNT ? gen_names[k] : "?";
}

const char *qs_gen_describe(qs_gen_kind k)
{
    return (unsigned)k < QS_GEN_COUNT ? gen_desc[k] : "";
}

int qs_gen_from_name(const char *name, qs_gen_kind *k)
{
    static const struct { const char *name; qs_gen_kind kind; } alias[] = {
        {"normal", QS_GEN_GAUSSIAN}, {"student_t", QS_GEN_STUDENT_T}, {"t", QS_GEN_STUDENT_T},
        {"llm_act", QS_GEN_LLM_ACT},
    };
    if (!name) return -1;
    for (int i = 0; i < QS_GEN_COUNT; i++)
        if (strcmp(name, gen_names[i]) == 0) { *k = (qs_gen_kind)i; return 0; }
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (strcmp(name, alias[i].name) == 0) { *k = alias[i].kind; return 0; }
    return -1;
}

void qs_gen_fill(const qs_gen_spec *s, uint64_t start, size_t n, float *out)
{
    if (n == 0) return;
    uint64_t key = gen_key(s->seed, ST_ELEM);
    double scale = s->scale;
    switch (s->kind) {
    case QS_GEN_GAUSSIAN:
        for (size_t j = 0; j < n; j++)
            out[j] = (float)(scale * draw_normal(key, (start + j) * QS_GEN_DRAWS));
        break;
    case QS_GEN_LAPLACE: {
        double b = scale / sqrt(2.0);
        for (size_t j = 0; j < n; j++) {
            double u = draw_u(key, (start + j) * QS_GEN_DRAWS);
            /* Inverse CDF; 2u and 2(1-u) are exact on the odd grid, so the two halves mirror. */
            out[j] = (float)(u < 0.5 ? b * log(2.0 * u) : -b * log(2.0 * (1.0 - u)));
        }
        break;
    }
    case QS_GEN_STUDENT_T: {
        double nu = s->nu;
        for (size_t j = 0; j < n; j++) {
            uint64_t ctr = (start + j) * QS_GEN_DRAWS;
            double z = draw_normal(key, ctr);
            double chi2 = draw_chi2(key, ctr + 2, nu);
            out[j] = (float)(scale * z / sqrt(chi2 / nu));
        }
        break;
    }
    case QS_GEN_UNIFORM:
        for (size_t j = 0; j < n; j++)
            out[j] = (float)(scale * (2.0 * draw_u(key, (start + j) * QS_GEN_DRAWS) - 1.0));
        break;
    case QS_GEN_LOGNORMAL: {
        double sigma = s->sigma;
        for (size_t j = 0; j < n; j++) {
            uint64_t ctr = (start + j) * QS_GEN_DRAWS;
            double v = scale * exp(sigma * draw_normal(key, ctr));
            if (s->lognormal_signed && (draw_bits(key, ctr + 2) >> 63)) v = -v;
            out[j] = (float)v;
        }
        break;
    }
    case QS_GEN_LLM_ACT:
        fill_llm(s, start, n, out);
        break;
    default:
        memset(out, 0, n * sizeof *out);   /* unknown kind: defined output rather than garbage */
        break;
    }
}

void qs_gen_matrix(qs_gen_kind kind, uint64_t seed, size_t rows, size_t cols, double scale, float *out)
{
    qs_gen_spec g;
    memset(&g, 0, sizeof g);
    qs_gen_defaults(&g);
    g.kind = kind;
    g.seed = seed;
    g.rows = rows;
    g.cols = cols;
    g.scale = scale;
    qs_gen_fill(&g, 0, cols ? rows * cols : rows, out);
}
