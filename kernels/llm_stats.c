/*
** Per-token evaluation statistics and their summaries (see llm_stats.h).
*/
#include "llm_stats.h"
#include "llm_rows.h"
#include "simd.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The plain scan: the largest value, its first index, all finite? */
static float scan_scalar(const float *l, int V, int *t, int *ok)
{
    float m = -INFINITY;
    *t = 0;
    *ok = 1;
    for (int v = 0; v < V; v++) {
        float x = l[v];
        if (!isfinite(x)) *ok = 0;
        if (x > m) { m = x; *t = v; }
    }
    return m;
}

/* The same with AVX-512: max and a non-finite test 16 at a time, then the first index of the max;
** a row with NaN/Inf goes to the plain scan (its top then as before). */
__attribute__((target("avx512f"))) static float scan_avx512(const float *l, int V, int *t, int *ok)
{
    const __m512i em = _mm512_set1_epi32(0x7f800000);
    __m512 mv = _mm512_set1_ps(-INFINITY);
    __mmask16 bad = 0;
    int v = 0;
    for (; v + 16 <= V; v += 16) {
        __m512 x = _mm512_loadu_ps(l + v);
        bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(x), em), em);
        mv = _mm512_max_ps(mv, x);
    }
    float m = _mm512_reduce_max_ps(mv);
    for (; v < V; v++) {
        if (!isfinite(l[v])) bad = 1;
        if (l[v] > m) m = l[v];
    }
    if (bad) return scan_scalar(l, V, t, ok);
    *ok = 1;
    *t = 0;
    if (m == -INFINITY) return m;   /* V = 0 */
    for (v = 0; v < V; v++)
        if (l[v] == m) { *t = v; break; }
    return m;
}

double qs_row_lse(const float *l, int V, int *top, int *finite)
{
    int t, ok;
    const float m = qs_simd_level() >= QS_SIMD_AVX512 ? scan_avx512(l, V, &t, &ok) : scan_scalar(l, V, &t, &ok);
    if (top) *top = t;
    if (finite) *finite = ok;
    if (!ok) return NAN;
    /* float exponentials summed in double: |error| of ln Z ~ 3e-7, and both sides of a KL use this */
    return m + log(qs_sum_exp_row(l, (size_t)V, m));
}

/* sum_v p(v) l(v) in double, the one dot product both sides use.  Every path sums in the same order
** (the same bits with and without AVX-512): sixteen lane sums over blocks of 16 (each product is exact
** in double, so an FMA and a multiply-then-add agree), folded by the fixed tree of fold16, then the
** tail in order. */
static double fold16(const double *a)
{
    double b[8], c[4], d[2];
    for (int j = 0; j < 8; j++) b[j] = a[j] + a[j + 8];
    for (int j = 0; j < 4; j++) c[j] = b[j] + b[j + 4];
    for (int j = 0; j < 2; j++) d[j] = c[j] + c[j + 2];
    return d[0] + d[1];
}

__attribute__((target("avx512f"))) static double pdot512(const float *p, const float *l, int V)
{
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    int v = 0;
    for (; v + 16 <= V; v += 16) {
        __m512 x = _mm512_loadu_ps(p + v), y = _mm512_loadu_ps(l + v);
        a0 = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(x)), _mm512_cvtps_pd(_mm512_castps512_ps256(y)), a0);
        a1 = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1))),
                             _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(y), 1))), a1);
    }
    double lanes[16];
    _mm512_storeu_pd(lanes, a0);
    _mm512_storeu_pd(lanes + 8, a1);
    double s = fold16(lanes);
    for (; v < V; v++) s += (double)p[v] * l[v];
    return s;
}

static double pdot(const float *p, const float *l, int V)
{
    if (qs_simd_level() >= QS_SIMD_AVX512) return pdot512(p, l, V);
    double lanes[16] = {0};
    int v = 0;
    for (; v + 16 <= V; v += 16)
        for (int j = 0; j < 16; j++) lanes[j] += (double)p[v + j] * l[v + j];
    double s = fold16(lanes);
    for (; v < V; v++) s += (double)p[v] * l[v];
    return s;
}

void qs_ref_row_make(const float *l, int V, int tok, float *p, qs_ref_row *r)
{
    memset(r, 0, sizeof *r);
    r->lse = qs_row_lse(l, V, &r->top, &r->finite);
    if (!r->finite) { memset(p, 0, (size_t)V * sizeof(float)); return; }
    r->psum = qs_exp_row(l, (size_t)V, (float)r->lse, p);
    r->s_ref = pdot(p, l, V);
    r->lp_tok = (double)l[tok] - r->lse;
}

void qs_tok_stat_make(const float *lq, int V, int tok, const float *p_ref, const qs_ref_row *r, qs_tok_stat *t)
{
    memset(t, 0, sizeof *t);
    int top;
    double lse = qs_row_lse(lq, V, &top, &t->finite);
    if (!t->finite || !r->finite) { t->finite = 0; t->kl = t->lp_q = t->dp = NAN; return; }
    /* sum p_ref ln p_ref - sum p_ref ln p_Q, each as s - lse * psum */
    double s_q = pdot(p_ref, lq, V);
    t->kl = (r->s_ref - r->lse * r->psum) - (s_q - lse * r->psum);
    t->lp_q = (double)lq[tok] - lse;
    t->dp = exp(t->lp_q) - exp(r->lp_tok);
    t->same_top = top == r->top;
}

void qs_mean_se(const double *x, size_t n, double *mean, double *se)
{
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) { s += x[i]; s2 += x[i] * x[i]; }
    double m = n ? s / n : 0, var = n ? s2 / n - m * m : 0;
    *mean = m;
    *se = n > 1 && var > 0 ? sqrt(var / (double)(n - 1)) : 0;
}

double qs_pearson(const double *x, const double *y, size_t n)
{
    if (n < 2) return 0;
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++) { mx += x[i]; my += y[i]; }
    mx /= n; my /= n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        double a = x[i] - mx, b = y[i] - my;
        sxy += a * b; sxx += a * a; syy += b * b;
    }
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : 0;
}

double qs_quantile_sorted(const double *s, size_t n, double q)
{
    if (!n) return NAN;
    if (q <= 0) return s[0];
    if (q >= 1) return s[n - 1];
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    if (i + 1 >= n) return s[n - 1];
    double f = pos - (double)i;
    return s[i] + f * (s[i + 1] - s[i]);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double *qs_sorted_copy(const double *x, size_t n)
{
    double *s = malloc((n ? n : 1) * sizeof(double));
    if (!s) return NULL;
    if (n) memcpy(s, x, n * sizeof(double));
    qsort(s, n, sizeof(double), cmp_d);
    return s;
}

double qs_klhist_edge(int k) { return ldexp(1.0, QS_KLHIST_LO + k / QS_KLHIST_PER) * pow(2.0, (k % QS_KLHIST_PER) / (double)QS_KLHIST_PER); }

void qs_klhist_add(qs_klhist *h, double x)
{
    if (!isfinite(x)) { h->nonfinite++; return; }
    if (x <= 0) { h->zero++; return; }
    int k = (int)floor((log2(x) - QS_KLHIST_LO) * QS_KLHIST_PER);
    /* log2 rounding at an exact edge: settle by comparing with the edges themselves */
    if (k >= 0 && k < QS_KLHIST_BINS && x < qs_klhist_edge(k)) k--;
    else if (k + 1 >= 0 && k + 1 <= QS_KLHIST_BINS && x >= qs_klhist_edge(k + 1)) k++;
    if (k < 0) h->under++;
    else if (k >= QS_KLHIST_BINS) h->over++;
    else h->counts[k]++;
}
