/*
** AMLA (arXiv 2509.25224, spec msd-attention.md §B.2): FlashAttention rescaling by a power of two
** applied as an integer add on the FP32 bits of the output accumulator, with the 1.5·ε compensation
** for using the low-precision c16 instead of c32.  Here it is a row kernel of the tiled runner that
** FlashAttention-2 uses too (attn_flash.c).
**
** Per row and KV tile j (S in log2 units, S2 = S·log2 e): m_j running max, n_j = round(−m_j) (half
** away from zero), r_j = m_j + n_j ∈ [−½, ½], c32 = 2^r_j, c16 = lowp(c32), P' = lowp(2^{S2−m_j}·c16),
** cof_j = c32/c16, ε_j = cof_{j−1}/cof_j − 1, N_j = round((max(n_j − n_{j−1}, −30) + 1.5·ε_j + 1e−6)·2²³)
** added to the INT32 bits of every non-zero O element (j ≥ 1), then O += P'·V_j.  l_j is the ordinary
** FP32 running sum.  End: O/(l·c16), |O| > 1e10 or NaN -> 0.  Exact zeros of O are skipped (adding a
** negative N to +0 would make a NaN pattern; CANN relies on the final guard instead).
*/
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attn.h"
#include "attn_internal.h"

typedef struct { float m, l, cof, c16; int32_t n; } amla_row;

static void amla_init(void *vs)
{
    *(amla_row *)vs = (amla_row){-INFINITY, 0, 1, 1, 0};
}

static void amla_rowk(const qs_fa_ctx *x, float *row, size_t n, void *vs, float *o)
{
    amla_row *a = vs;
    qs_pdtype pd = x->c->p;
    int comp = !x->c->amla_nocomp;
    float mx = qs_row_max(row, n);
    float mnew = mx > a->m ? mx : a->m;
    if (mnew == -INFINITY) { memset(row, 0, n * sizeof(float)); return; }
    int first = a->m == -INFINITY;
    float alpha = first ? 0.0f : qs_exp2f_fast(a->m - mnew);
    float nm = -mnew > 1e9f ? 1e9f : (-mnew < -1e9f ? -1e9f : -mnew);   /* keep the cast defined */
    float tn = (float)(int32_t)nm, fn = nm - tn;     /* n_j = round(nm), half away from zero */
    int32_t nn = (int32_t)tn + (fn >= 0.5f) - (fn <= -0.5f);
    float rr = mnew + (float)nn;                     /* in [-1/2, 1/2] */
    float c32 = qs_exp2f_fast(rr), c16 = qs_p_round(pd, c32), cof = c32 / c16, sum = 0;   /* 2^r, r in [-1/2, 1/2] */
    sum = qs_row_exp2_sum_scaled(row, n, mnew, c16, pd);
    if (!first) {
        int32_t dn = nn - a->n;
        double eps = comp ? (double)a->cof / (double)cof - 1.0 : 0.0;
        double add = ((dn < -30 ? -30 : dn) + 1.5 * eps + 1e-6) * 8388608.0;
        double ta = (double)(int64_t)add, fr = add - ta;   /* round half away from zero, no libm call */
        int32_t N = (int32_t)(ta + (fr >= 0.5 ? 1 : 0) - (fr <= -0.5 ? 1 : 0));
        if (N) qs_row_bits_add(o, x->s->dv, N);
    }
    a->l = alpha * a->l + sum;
    a->m = mnew;
    a->n = nn;
    a->cof = cof;
    a->c16 = c16;
}

static void amla_finish(const qs_fa_ctx *x, void *vs, float *o, float *lse)
{
    const amla_row *a = vs;
    float den = a->l * a->c16;
    if (lse) *lse = a->l > 0 ? (float)(((double)a->m + log2((double)a->l)) * 0.6931471805599453) : -INFINITY;
    for (size_t j = 0; j < x->s->dv; j++) {
        float v = den > 0 ? o[j] / den : 0.0f;
        o[j] = (fabsf(v) > 1e10f || v != v) ? 0.0f : v;
    }
}

static const qs_fa_kernel amla_kernel = {sizeof(amla_row), amla_init, amla_rowk, amla_finish};

/* Split-KV: each split normalises its part and returns its LSE; combined like FA2 (no LSE output). */
int qs_attn_amla(const qs_attn_shape *s, const qs_attn_cfg *c, const float *Q, const float *K, const float *V, float *O,
                 qs_err *e)
{
    return qs_fa_run(&amla_kernel, s, c, Q, K, V, O, NULL, e);
}
