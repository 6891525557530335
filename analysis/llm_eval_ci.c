/*
** Intervals over chunks and paired comparisons of `llm eval` results (llm_eval_ci.h).
*/
#include "llm_eval_ci.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/llm_stats.h"

int qs_evci_parse(const char *s, qs_evci_opts *o)
{
    memset(o, 0, sizeof *o);
    o->resamples = QS_EVCI_DEFAULT_B;
    o->seed = QS_EVCI_DEFAULT_SEED;
    if (!strcmp(s, "delta")) { o->method = QS_EVCI_DELTA; return 0; }
    if (strncmp(s, "bootstrap", 9) || (s[9] && s[9] != ':')) return -1;
    o->method = QS_EVCI_BOOTSTRAP;
    if (!s[9]) return 0;
    char *end;
    long n = strtol(s + 10, &end, 10);
    if (end == s + 10 || n < 10 || n > 1000000 || (*end && *end != ':')) return -1;
    o->resamples = (int)n;
    if (!*end) return 0;
    const char *p = end + 1;
    unsigned long long seed = strtoull(p, &end, 10);
    if (end == p || *end || *p == '-') return -1;
    o->seed = seed;
    return 0;
}

const char *qs_evci_method_name(qs_evci_method m) { return m == QS_EVCI_BOOTSTRAP ? "bootstrap" : "delta"; }

double qs_evci_t975(int df)
{
    static const double t[] = {0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
                               2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060,
                               2.056, 2.052, 2.048, 2.045, 2.042};
    if (df < 1) return NAN;
    if (df <= 30) return t[df];
    /* Cornish-Fisher expansion about z (error < 1e-4 past 30 degrees of freedom) */
    const double z = 1.959964, z3 = z * z * z, z5 = z3 * z * z, v = df;
    return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v);
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

int qs_evci_draw(uint64_t seed, int b, int j, int nchunks)
{
    uint64_t x = splitmix64(splitmix64(seed) ^ ((uint64_t)(uint32_t)b << 32 | (uint32_t)j));
    return (int)(((x >> 32) * (uint64_t)nchunks) >> 32);
}

static void est_nan(qs_evci_est *x) { x->v = x->lo = x->hi = NAN; }

int qs_evci_boot_ratio(const double *s, const double *n, int nchunks, const qs_evci_opts *o, qs_evci_est *out, qs_err *e)
{
    est_nan(out);
    double S = 0, N = 0;
    for (int c = 0; c < nchunks; c++) { S += s[c]; N += n[c]; }
    if (!(N > 0)) return 0;
    out->v = S / N;
    const int B = o->resamples;
    double *rep = malloc((size_t)(B > 0 ? B : 1) * sizeof *rep);
    if (!rep) return qs_fail(e, "out of memory");
    size_t m = 0;
    for (int b = 0; b < B; b++) {
        double bs = 0, bn = 0;
        for (int j = 0; j < nchunks; j++) {
            int c = qs_evci_draw(o->seed, b, j, nchunks);
            bs += s[c];
            bn += n[c];
        }
        if (bn > 0) rep[m++] = bs / bn;   /* a resample of empty chunks only has no mean */
    }
    double *sorted = qs_sorted_copy(rep, m);
    free(rep);
    if (!sorted) return qs_fail(e, "out of memory");
    out->lo = qs_quantile_sorted(sorted, m, 0.025);
    out->hi = qs_quantile_sorted(sorted, m, 0.975);
    free(sorted);
    return 0;
}

void qs_evci_chunk_t(const double *s, const double *n, int nchunks, qs_evci_est *out, double *se)
{
    est_nan(out);
    *se = NAN;
    double S = 0, N = 0;
    int C = 0;
    for (int c = 0; c < nchunks; c++) { S += s[c]; N += n[c]; C += n[c] > 0; }
    if (!(N > 0)) return;
    out->v = S / N;
    if (C < 2) return;
    double r2 = 0;
    for (int c = 0; c < nchunks; c++) r2 += (s[c] - out->v * n[c]) * (s[c] - out->v * n[c]);
    *se = sqrt((double)C / (C - 1) * r2) / N;
    const double h = qs_evci_t975(C - 1) * *se;
    out->lo = out->v - h;
    out->hi = out->v + h;
}

/* Per-chunk sums of up to three per-token quantities over the tokens used (finite NLL of every
** variant of use[0..nuse)); x[q][k] NULL: not summed. */
typedef struct chunk_sums {
    int nchunks;
    double *n, *s[3];
} chunk_sums;

static void sums_free(chunk_sums *cs)
{
    free(cs->n);
    for (int q = 0; q < 3; q++) free(cs->s[q]);
}

typedef double (*tok_fn)(const qs_eval_out *tok, size_t k, const int *v);

static int sums_make(const qs_eval_out *tok, size_t per_chunk, const int *use, int nuse, const int *v, tok_fn f[3],
                     chunk_sums *cs, qs_err *e)
{
    memset(cs, 0, sizeof *cs);
    cs->nchunks = per_chunk ? (int)(tok->n / per_chunk) : 0;
    const size_t C = (size_t)(cs->nchunks > 0 ? cs->nchunks : 1);
    cs->n = calloc(C, sizeof(double));
    for (int q = 0; q < 3; q++) cs->s[q] = calloc(C, sizeof(double));
    if (!cs->n || !cs->s[0] || !cs->s[1] || !cs->s[2]) { sums_free(cs); return qs_fail(e, "out of memory"); }
    for (int c = 0; c < cs->nchunks; c++)
        for (size_t k = (size_t)c * per_chunk; k < (size_t)(c + 1) * per_chunk; k++) {
            int ok = 1;
            for (int u = 0; u < nuse; u++) ok &= isfinite(tok->var[use[u]].nll[k]) != 0;
            if (!ok) continue;
            cs->n[c] += 1;
            for (int q = 0; q < 3; q++)
                if (f[q]) cs->s[q][c] += f[q](tok, k, v);
        }
    return 0;
}

static double f_nll(const qs_eval_out *t, size_t k, const int *v) { return t->var[v[0]].nll[k]; }
static double f_lnratio(const qs_eval_out *t, size_t k, const int *v) { return t->var[v[0]].nll[k] - t->var[0].nll[k]; }
static double f_kl(const qs_eval_out *t, size_t k, const int *v) { return t->var[v[0]].kl[k]; }
static double f_dln(const qs_eval_out *t, size_t k, const int *v) { return t->var[v[1]].nll[k] - t->var[v[0]].nll[k]; }
static double f_dkl(const qs_eval_out *t, size_t k, const int *v) { return t->var[v[1]].kl[k] - t->var[v[0]].kl[k]; }

static size_t total(const chunk_sums *cs)
{
    double n = 0;
    for (int c = 0; c < cs->nchunks; c++) n += cs->n[c];
    return (size_t)n;
}

int qs_evci_variant(const qs_eval_out *tok, size_t per_chunk, int v, const qs_evci_opts *o, qs_evci_var *out, qs_err *e)
{
    est_nan(&out->ppl);
    est_nan(&out->lnratio);
    est_nan(&out->dppl);
    est_nan(&out->kl);
    if (v < 0 || v >= tok->nvar) return qs_fail(e, "no variant %d in the per-token arrays", v);
    const int use[2] = {0, v}, vv[1] = {v};
    tok_fn f[3] = {f_nll, v ? f_lnratio : NULL, v ? f_kl : NULL};
    chunk_sums cs;
    if (sums_make(tok, per_chunk, use, v ? 2 : 1, vv, f, &cs, e)) return -1;
    out->n = total(&cs);
    int rc = qs_evci_boot_ratio(cs.s[0], cs.n, cs.nchunks, o, &out->ppl, e);
    if (!rc && v) rc = qs_evci_boot_ratio(cs.s[1], cs.n, cs.nchunks, o, &out->lnratio, e) ||
                       qs_evci_boot_ratio(cs.s[2], cs.n, cs.nchunks, o, &out->kl, e);
    sums_free(&cs);
    /* exp and exp - 1 are increasing: the percentile interval of the transform is the transform's */
    out->ppl = (qs_evci_est){exp(out->ppl.v), exp(out->ppl.lo), exp(out->ppl.hi)};
    if (v) out->dppl = (qs_evci_est){expm1(out->lnratio.v), expm1(out->lnratio.lo), expm1(out->lnratio.hi)};
    return rc;
}

int qs_evci_paired(const qs_eval_out *tok, size_t per_chunk, int a, int b, const qs_evci_opts *o, qs_evci_pair *out,
                   qs_err *e)
{
    memset(out, 0, sizeof *out);
    est_nan(&out->dln);
    est_nan(&out->dkl);
    out->dln_se = out->dkl_se = NAN;
    if (a < 1 || b < 1 || a >= tok->nvar || b >= tok->nvar) return qs_fail(e, "paired comparison of variants %d and %d: not configurations", a, b);
    const int use[3] = {0, a, b}, vv[2] = {a, b};
    tok_fn f[3] = {f_dln, f_dkl, NULL};
    chunk_sums cs;
    if (sums_make(tok, per_chunk, use, 3, vv, f, &cs, e)) return -1;
    out->n = total(&cs);
    for (int c = 0; c < cs.nchunks; c++) out->chunks += cs.n[c] > 0;
    int rc = 0;
    if (o->method == QS_EVCI_BOOTSTRAP)
        rc = qs_evci_boot_ratio(cs.s[0], cs.n, cs.nchunks, o, &out->dln, e) ||
             qs_evci_boot_ratio(cs.s[1], cs.n, cs.nchunks, o, &out->dkl, e);
    else {
        qs_evci_chunk_t(cs.s[0], cs.n, cs.nchunks, &out->dln, &out->dln_se);
        qs_evci_chunk_t(cs.s[1], cs.n, cs.nchunks, &out->dkl, &out->dkl_se);
    }
    sums_free(&cs);
    return rc;
}
