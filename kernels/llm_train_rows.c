/* Row-wise passes of the training pass on the pool (see llm_train_rows.h). */
#include "exp2_poly.h"
#include "llm_train_rows.h"
#include "llm_rows.h"
#include "pool.h"
#include "simd.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define LOG2E 1.4426950408889634f

typedef void (*range_fn)(void *ctx, size_t i0, size_t i1);
typedef struct { range_fn fn; void *ctx; size_t n, per; } range_job;

static void range_task(void *c, size_t t, int slot)
{
    (void)slot;
    const range_job *j = c;
    size_t i0 = t * j->per, i1 = i0 + j->per < j->n ? i0 + j->per : j->n;
    j->fn(j->ctx, i0, i1);
}

/* fn over [0, n) in ranges of per (the cut is fixed: results do not depend on the thread count). */
static void par(size_t n, size_t per, range_fn fn, void *ctx)
{
    range_job j = {fn, ctx, n, per ? per : 1};
    size_t nt = (n + j.per - 1) / j.per;
    qs_pool_for(qs_pool_width(qs_llm_threads(), nt), nt, range_task, &j);
}

/* ---------------------------------------------------------------- RMSNorm */

typedef struct { float *out, *rinv, *dx, *dw; const float *x, *w, *dy, *ri; int R, n; float eps; } norm_ctx;

static void norm_rows(void *c, size_t r0, size_t r1)
{
    const norm_ctx *k = c;
    const int n = k->n;
    for (size_t r = r0; r < r1; r++) {
        const float *xr = k->x + r * n;
        float *o = k->out + r * n;
        double ss = qs_sumsq_row(xr, (size_t)n);
        float ri = (float)(1.0 / sqrt(ss / n + k->eps));
        k->rinv[r] = ri;
        for (int i = 0; i < n; i++) o[i] = xr[i] * ri * k->w[i];
    }
}

void qs_lt_rmsnorm(float *out, float *rinv, const float *x, const float *w, int R, int n, float eps)
{
    norm_ctx k = {.out = out, .rinv = rinv, .x = x, .w = w, .R = R, .n = n, .eps = eps};
    par((size_t)R, 32, norm_rows, &k);
}

static void norm_back_rows(void *c, size_t r0, size_t r1)
{
    const norm_ctx *k = c;
    const int n = k->n;
    for (size_t r = r0; r < r1; r++) {
        const float *xr = k->x + r * n, *dyr = k->dy + r * n;
        float *dxr = k->dx + r * n, ri = k->ri[r];
        double sw = 0;
        for (int i = 0; i < n; i++) sw += (double)k->w[i] * dyr[i] * xr[i];
        float f = (float)((double)ri * ri * ri * sw / n);
        for (int i = 0; i < n; i++) dxr[i] += ri * k->w[i] * dyr[i] - f * xr[i];
    }
}

static void norm_back_cols(void *c, size_t c0, size_t c1)
{
    const norm_ctx *k = c;
    const size_t n = (size_t)k->n;
    for (size_t r = 0; r < (size_t)k->R; r++) {   /* rows in order for every column */
        const float *xr = k->x + r * n, *dyr = k->dy + r * n;
        float ri = k->ri[r];
        for (size_t i = c0; i < c1; i++) k->dw[i] += dyr[i] * xr[i] * ri;
    }
}

void qs_lt_rmsnorm_back(float *dx, float *dw, const float *dy, const float *x, const float *rinv, const float *w,
                        int R, int n)
{
    norm_ctx k = {.dx = dx, .dw = dw, .dy = dy, .x = x, .ri = rinv, .w = w, .R = R, .n = n};
    par((size_t)R, 32, norm_back_rows, &k);
    par((size_t)n, 64, norm_back_cols, &k);
}

/* ---------------------------------------------------------------- RoPE */

typedef struct { float *v; int T, nheads, hd, neox; const float *rcos, *rsin; float dir; } rope_ctx;

static void rope_rows(void *c, size_t r0, size_t r1)
{
    const rope_ctx *k = c;
    const int half = k->hd / 2, off = k->neox ? half : 1;
    for (size_t r = r0; r < r1; r++) {
        const float *cs = k->rcos + (r % (size_t)k->T) * half, *sn = k->rsin + (r % (size_t)k->T) * half;
        for (int h = 0; h < k->nheads; h++) {
            float *p = k->v + (r * k->nheads + h) * (size_t)k->hd;
            for (int i = 0; i < half; i++) {
                int ia = k->neox ? i : 2 * i;
                float a = p[ia], b = p[ia + off], s = k->dir * sn[i];
                p[ia] = a * cs[i] - b * s;
                p[ia + off] = a * s + b * cs[i];
            }
        }
    }
}

void qs_lt_rope(float *v, int R, int T, int nheads, int hd, const float *rcos, const float *rsin, int neox, float dir)
{
    rope_ctx k = {v, T, nheads, hd, neox, rcos, rsin, dir};
    par((size_t)R, 32, rope_rows, &k);
}

/* ---------------------------------------------------------------- SwiGLU, sums */

typedef struct { float *h, *dg, *du; const float *g, *u, *dh, *a, *b; } elt_ctx;

static void swiglu_range(void *c, size_t i0, size_t i1)
{
    const elt_ctx *k = c;
    memcpy(k->h + i0, k->g + i0, (i1 - i0) * sizeof(float));
    qs_swiglu_row(k->h + i0, k->u + i0, i1 - i0);
}

void qs_lt_swiglu(float *h, const float *g, const float *u, size_t n)
{
    elt_ctx k = {.h = h, .g = g, .u = u};
    par(n, 8192, swiglu_range, &k);
}

__attribute__((target("avx2,fma"))) static size_t swiglu_back_avx2(const elt_ctx *k, size_t i0, size_t i1)
{
    const __m256 one = _mm256_set1_ps(1.0f), nl2 = _mm256_set1_ps(-LOG2E), lo = _mm256_set1_ps(-126.0f);
    size_t i = i0;
    for (; i + 8 <= i1; i += 8) {
        __m256 g = _mm256_loadu_ps(k->g + i), dh = _mm256_loadu_ps(k->dh + i), u = _mm256_loadu_ps(k->u + i);
        /* e^-g = 2^(-g log2 e): degree-7 polynomial as llm_rows.c's exp2_8 */
        __m256 x = _mm256_mul_ps(g, nl2);
        __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(127.0f));
        __m256 fl = _mm256_round_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), f = _mm256_sub_ps(xc, fl);
        __m256 p = _mm256_set1_ps(QS_EXP2_C7);
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(QS_EXP2_C6));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(QS_EXP2_C5));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(QS_EXP2_C4));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(QS_EXP2_C3));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(QS_EXP2_C2));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(QS_EXP2_C1));
        p = _mm256_fmadd_ps(p, f, one);
        __m256i ei = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fl), _mm256_set1_epi32(127)), 23);
        __m256 ex = _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), _mm256_mul_ps(p, _mm256_castsi256_ps(ei)));
        __m256 sg = _mm256_div_ps(one, _mm256_add_ps(one, ex));
        _mm256_storeu_ps(k->du + i, _mm256_mul_ps(_mm256_mul_ps(dh, g), sg));
        __m256 t = _mm256_add_ps(one, _mm256_mul_ps(g, _mm256_sub_ps(one, sg)));
        _mm256_storeu_ps(k->dg + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(dh, u), sg), t));
    }
    return i;
}

static void swiglu_back_range(void *c, size_t i0, size_t i1)
{
    const elt_ctx *k = c;
    size_t i = qs_simd_level() >= QS_SIMD_AVX2 ? swiglu_back_avx2(k, i0, i1) : i0;
    for (; i < i1; i++) {
        float gi = k->g[i], sg = 1.0f / (1.0f + expf(-gi));
        k->du[i] = k->dh[i] * gi * sg;
        k->dg[i] = k->dh[i] * k->u[i] * sg * (1.0f + gi * (1.0f - sg));
    }
}

void qs_lt_swiglu_back(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n)
{
    elt_ctx k = {.dg = dg, .du = du, .dh = dh, .g = g, .u = u};
    par(n, 8192, swiglu_back_range, &k);
}

static void add_range(void *c, size_t i0, size_t i1)
{
    const elt_ctx *k = c;
    for (size_t i = i0; i < i1; i++) k->h[i] = k->a[i] + k->b[i];
}

void qs_lt_add(float *y, const float *a, const float *b, size_t n)
{
    elt_ctx k = {.h = y, .a = a, .b = b};
    par(n, 16384, add_range, &k);
}

/* ---------------------------------------------------------------- cross-entropy */

#define XCHUNKS 64   /* fixed partial sums, added in order */

typedef struct {
    float *lg;
    const int32_t *tok;
    int T, V, R, grad;
    const double *wt;   /* per-row weights, or NULL: the mean */
    double *lp;         /* per-row log p(target), or NULL */
    double part[XCHUNKS];
} xent_ctx;

static void xent_chunk(void *c, size_t ch, size_t ch1)
{
    xent_ctx *k = c;
    for (; ch < ch1; ch++) {
        size_t r0 = ch * (size_t)k->R / XCHUNKS, r1 = (ch + 1) * (size_t)k->R / XCHUNKS;
        double sum = 0;
        for (size_t r = r0; r < r1; r++) {
            float *lg = k->lg + r * (size_t)k->V;
            int tgt = k->tok[(r / (size_t)k->T) * (size_t)(k->T + 1) + r % (size_t)k->T + 1];
            float mx = -INFINITY;
            for (int v = 0; v < k->V; v++) mx = lg[v] > mx ? lg[v] : mx;
            float lt = lg[tgt];
            double z = qs_exp_row(lg, (size_t)k->V, mx, k->grad ? lg : NULL);   /* lg = e^(lg - mx) with grad */
            double l = ((double)lt - mx) - log(z);
            if (k->lp) k->lp[r] = l;
            sum += k->wt ? k->wt[r] * l : l;
            if (!k->grad) continue;
            if (k->wt && k->wt[r] == 0) { memset(lg, 0, (size_t)k->V * sizeof *lg); continue; }   /* masked */
            double iz = 1.0 / z;
            if (k->wt)
                for (int v = 0; v < k->V; v++) lg[v] = (float)(((double)lg[v] * iz - (v == tgt)) * k->wt[r]);
            else
                for (int v = 0; v < k->V; v++) lg[v] = (float)(((double)lg[v] * iz - (v == tgt)) / k->R);
        }
        k->part[ch] = sum;
    }
}

double qs_lt_xent(float *logits, const int32_t *tokens, int B, int T, int V, int grad, const double *wt, double *lp)
{
    xent_ctx k = {logits, tokens, T, V, B * T, grad, wt, lp, {0}};
    par(XCHUNKS, 1, xent_chunk, &k);
    double total = 0;
    for (int c = 0; c < XCHUNKS; c++) total -= k.part[c];
    return total;
}
