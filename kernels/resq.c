/* Rollout-ResQ (see resq.h). */
#include "resq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

static const char *const names[QS_RESQ_COUNT] = {"none", "dense", "2:4", "ch50", "blk50"};

const char *qs_resq_name(qs_resq_sparse s) { return (unsigned)s < QS_RESQ_COUNT ? names[s] : "?"; }

int qs_resq_parse(const char *name, qs_resq_sparse *s)
{
    for (int i = 0; i < QS_RESQ_COUNT; i++)
        if (!strcmp(name, names[i])) { *s = (qs_resq_sparse)i; return 0; }
    if (!strcmp(name, "24") || !strcmp(name, "s2:4")) { *s = QS_RESQ_24; return 0; }
    return -1;
}

typedef struct { const float *x; float *y; } mio;
static int m_rd(void *c, uint64_t st, size_t n, float *out, qs_err *e) { memcpy(out, ((mio *)c)->x + st, n * 4); return 0; }
static int m_wr(void *c, uint64_t st, size_t n, const float *y, qs_err *e) { memcpy(((mio *)c)->y + st, y, n * 4); return 0; }

int qs_fakeq_matrix(const qs_apply *a, const float *x, size_t rows, size_t cols, float *y, qs_err *e)
{
    mio io = {x, y};
    return qs_format_apply(a, rows, cols, m_rd, &io, m_wr, &io, e);
}

typedef struct { double v; size_t i; } vi;
static int vi_desc(const void *a, const void *b)
{
    const vi *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? 1 : -1;
    return x->i < y->i ? -1 : x->i > y->i;
}

int qs_resq_sparsify(float *R, size_t m, size_t d, qs_resq_sparse sp, size_t bh, size_t bw, qs_err *e)
{
    if (sp == QS_RESQ_DENSE) return 0;
    if (sp == QS_RESQ_NONE) { memset(R, 0, m * d * sizeof(float)); return 0; }
    if (sp == QS_RESQ_24) {
        for (size_t r = 0; r < m; r++)
            for (size_t g = 0; g + 4 <= d; g += 4) {
                float *p = R + r * d + g;
                int keep[4] = {0, 0, 0, 0};
                for (int t = 0; t < 2; t++) {
                    int best = -1;
                    for (int k = 0; k < 4; k++)
                        if (!keep[k] && (best < 0 || fabsf(p[k]) > fabsf(p[best]))) best = k;
                    keep[best] = 1;
                }
                for (int k = 0; k < 4; k++) if (!keep[k]) p[k] = 0;
            }
        return 0;   /* a trailing group of < 4 channels is kept whole */
    }
    size_t nb, nbr = 1, nbc = d;
    if (sp == QS_RESQ_CH50) nb = d;
    else {
        if (!bh || !bw) return qs_fail(e, "resq: block sparsity needs a block shape > 0");
        nbr = (m + bh - 1) / bh; nbc = (d + bw - 1) / bw; nb = nbr * nbc;
    }
    vi *v = calloc(nb, sizeof *v);
    if (!v) return qs_fail(e, "out of memory");
    for (size_t i = 0; i < nb; i++) v[i].i = i;
    for (size_t r = 0; r < m; r++)
        for (size_t c = 0; c < d; c++) {
            size_t b = sp == QS_RESQ_CH50 ? c : (r / bh) * nbc + c / bw;
            v[b].v += (double)R[r * d + c] * R[r * d + c];
        }
    qsort(v, nb, sizeof *v, vi_desc);
    unsigned char *drop = calloc(nb, 1);
    if (!drop) { free(v); return qs_fail(e, "out of memory"); }
    for (size_t i = (nb + 1) / 2; i < nb; i++) drop[v[i].i] = 1;   /* keep the top half, rounded up */
    for (size_t r = 0; r < m; r++)
        for (size_t c = 0; c < d; c++) {
            size_t b = sp == QS_RESQ_CH50 ? c : (r / bh) * nbc + c / bw;
            if (drop[b]) R[r * d + c] = 0;
        }
    free(v); free(drop);
    return 0;
}

int qs_resq_layer(const qs_apply *a, const float *X, size_t m, size_t d, const float *Wq, size_t n,
                  qs_resq_sparse sp, size_t bh, size_t bw, float *Y, qs_resq_stats *st, qs_err *e)
{
    float *Xq = malloc(m * d * sizeof(float) + 4), *R = malloc(m * d * sizeof(float) + 4), *D = malloc(m * d * sizeof(float) + 4);
    int rc = -1;
    if (!Xq || !R || !D) { qs_fail(e, "out of memory (ResQ %zux%zu)", m, d); goto out; }
    if (qs_fakeq_matrix(a, X, m, d, Xq, e)) goto out;
    for (size_t i = 0; i < m * d; i++) D[i] = X[i] - Xq[i];
    if (qs_fakeq_matrix(a, D, m, d, R, e)) goto out;
    double etot = 0, ekept = 0;
    for (size_t i = 0; i < m * d; i++) etot += (double)R[i] * R[i];
    if (qs_resq_sparsify(R, m, d, sp, bh, bw, e)) goto out;
    size_t nz = 0, under = 0, rec = 0, dens = 0;
    for (size_t i = 0; i < m * d; i++) {
        ekept += (double)R[i] * R[i];
        dens += R[i] != 0;
        if (X[i] != 0) {
            nz++;
            if (Xq[i] == 0) { under++; rec += R[i] != 0; }
        }
    }
    if (st) {
        st->underflow = nz ? (double)under / nz : 0;
        st->recovered = under ? (double)rec / under : 0;
        st->kept = etot > 0 ? ekept / etot : 1;
        st->density = m && d ? (double)dens / (double)(m * d) : 0;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)d, 1.0f, Xq, (int)d, Wq, (int)d, 0.0f, Y, (int)n);
    if (sp != QS_RESQ_NONE)   /* the correction: a second FP4 GEMM with the same quantized weights */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)d, 1.0f, R, (int)d, Wq, (int)d, 1.0f, Y, (int)n);
    rc = 0;
out:
    free(Xq); free(R); free(D);
    return rc;
}
