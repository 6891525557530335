/*
** AMLA (arXiv 2509.25224, spec msd-attention.md §B.2): FlashAttention rescaling by a power of two
** applied as an integer add on the FP32 bits of the output accumulator, with the 1.5·ε compensation
** for using the low-precision c16 instead of c32.  Same tiling and SGEMM tiles as qs_attn_fa2.
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
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "attn.h"
#include "attn_internal.h"

#define LOG2E 1.4426950408889634

typedef struct { float m, l, cof, c16; int32_t n; } amla_row;

static void amla_task(void *ctx, size_t t, void *scr)
{
    const qs_fa_ctx *x = ctx;
    const qs_attn_shape *s = x->s;
    /* task = (KV head g, Q tile qb, key split sp); the query rows of g's heads are one matrix */
    size_t sp = t % (size_t)x->splits, qb = (t / (size_t)x->splits) % x->nqb, g = t / ((size_t)x->splits * x->nqb);
    size_t d = s->d, dv = s->dv, Lk = s->Lk, Lq = s->Lq, bc = x->bc, grows = (s->H / s->Hkv) * Lq;
    size_t r0 = qb * x->br, rows = grows - r0 < x->br ? grows - r0 : x->br;
    size_t kb = sp * x->kspan, rowsall = s->H * Lq;
    const float *q = x->Q + (g * grows + r0) * d, *Kh = x->K + g * Lk * d, *Vh = x->V + g * Lk * dv;
    float *S = scr;
    amla_row *st = (amla_row *)(S + x->br * bc);
    float *O = x->O + ((size_t)sp * rowsall + g * grows + r0) * dv;
    float *lse = x->lse ? x->lse + (size_t)sp * rowsall + g * grows + r0 : NULL;
    long off = (long)Lk - (long)Lq;
    qs_pdtype pd = x->c->p;
    int comp = !x->c->amla_nocomp;
    for (size_t r = 0; r < rows; r++) st[r] = (amla_row){-INFINITY, 0, 1, 1, 0};
    memset(O, 0, rows * dv * sizeof(float));
    size_t ke = kb + x->kspan < Lk ? kb + x->kspan : Lk;
    if (x->c->causal) {
        size_t imax = 0;
        for (size_t r = 0; r < rows; r++) imax = (r0 + r) % Lq > imax ? (r0 + r) % Lq : imax;
        long last = (long)imax + off + 1;
        if (last < (long)ke) ke = last < (long)kb ? kb : (size_t)last;
    }
    for (size_t j0 = kb; j0 < ke; j0 += bc) {
        size_t n = ke - j0 < bc ? ke - j0 : bc;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n, (int)d, x->alpha2, q, (int)d, Kh + j0 * d,
                    (int)d, 0.0f, S, (int)n);
        for (size_t r = 0; r < rows; r++) {
            float *row = S + r * n;
            amla_row *a = st + r;
            if (x->c->causal) {
                long lim = (long)((r0 + r) % Lq) + off;
                for (size_t jj = 0; jj < n; jj++)
                    if ((long)(j0 + jj) > lim) row[jj] = -INFINITY;
            }
            float mx = qs_row_max(row, n);
            float mnew = mx > a->m ? mx : a->m;
            if (mnew == -INFINITY) { memset(row, 0, n * sizeof(float)); continue; }
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
                if (N) qs_row_bits_add(O + r * dv, dv, N);
            }
            a->l = alpha * a->l + sum;
            a->m = mnew;
            a->n = nn;
            a->cof = cof;
            a->c16 = c16;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)dv, (int)n, 1.0f, S, (int)n, Vh + j0 * dv,
                    (int)dv, 1.0f, O, (int)dv);
    }
    for (size_t r = 0; r < rows; r++) {
        float den = st[r].l * st[r].c16;
        if (lse) lse[r] = st[r].l > 0 ? (float)(((double)st[r].m + log2((double)st[r].l)) * 0.6931471805599453) : -INFINITY;
        float *o = O + r * dv;
        for (size_t j = 0; j < dv; j++) {
            float v = den > 0 ? o[j] / den : 0.0f;
            o[j] = (fabsf(v) > 1e10f || v != v) ? 0.0f : v;
        }
    }
}

int qs_attn_amla(const qs_attn_shape *s, const qs_attn_cfg *c, const float *Q, const float *K, const float *V, float *O,
                 qs_err *e)
{
    if (qs_attn_shape_check(s, e)) return -1;
    qs_fa_ctx x = {s, c, Q, K, V, (float)(qs_attn_scale(s, c) * LOG2E), c->br ? c->br : 128, c->bc ? c->bc : 256, 0,
                   c->splits > 1 ? c->splits : 1, 0, O, NULL};
    if (x.br > 4096 || x.bc > 8192) return qs_fail(e, "attention: tile %zux%zu too large", x.br, x.bc);
    if ((size_t)x.splits > s->Lk) x.splits = (int)s->Lk;
    x.nqb = ((s->H / s->Hkv) * s->Lq + x.br - 1) / x.br;
    x.kspan = (s->Lk + (size_t)x.splits - 1) / (size_t)x.splits;
    float *Os = NULL, *ls = NULL;
    size_t rows = s->H * s->Lq;
    if (x.splits > 1) {   /* each split normalises its part and returns its LSE; combined like FA2 */
        Os = malloc((size_t)x.splits * rows * s->dv * sizeof(float));
        ls = malloc((size_t)x.splits * rows * sizeof(float));
        if (!Os || !ls) { free(Os); free(ls); return qs_fail(e, "out of memory (split-KV buffers)"); }
        x.O = Os;
        x.lse = ls;
    }
    size_t scratch = x.br * x.bc * sizeof(float) + x.br * sizeof(amla_row) + 64;
    int rc = qs_attn_pool(c->threads, s->Hkv * x.nqb * (size_t)x.splits, scratch, amla_task, &x, e);
    if (!rc && x.splits > 1) qs_attn_combine(s, x.splits, Os, ls, O, NULL);
    free(Os); free(ls);
    return rc;
}
