/* Attention kernels: FP64 reference, plain C baseline, the MSD decode path, MX attention simulation,
** error statistics (see attn.h; FlashAttention-2 and AMLA share the tiled runner of attn_flash.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif
#include "attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "attn_internal.h"
#include "msd.h"
#include "blas_threads.h"

#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453

int qs_attn_shape_check(const qs_attn_shape *s, qs_err *e)
{
    if (!s->H || !s->Hkv || !s->Lq || !s->Lk || !s->d || !s->dv) return qs_fail(e, "attention: every dimension must be > 0");
    if (s->H % s->Hkv) return qs_fail(e, "attention: %zu query heads are not a multiple of %zu KV heads", s->H, s->Hkv);
    if (s->d > 65536 || s->dv > 65536 || s->Lq > (1u << 24) || s->Lk > (1u << 24) || s->H > 65536)
        return qs_fail(e, "attention: shape too large");
    double el = (double)s->H * s->Lq * (s->d > s->dv ? s->d : s->dv) + (double)s->Hkv * s->Lk * (s->d + s->dv);
    if (el > 4e9) return qs_fail(e, "attention: shape too large (%.3g elements)", el);
    return 0;
}

double qs_attn_scale(const qs_attn_shape *s, const qs_attn_cfg *c)
{
    return c && c->scale > 0 ? c->scale : 1.0 / sqrt((double)s->d);
}

double qs_attn_flops(const qs_attn_shape *s, int causal)
{
    double pairs = 0;
    long off = (long)s->Lk - (long)s->Lq;
    if (!causal) pairs = (double)s->Lq * s->Lk;
    else
        for (size_t i = 0; i < s->Lq; i++) {
            long v = (long)i + off + 1;
            pairs += v < 0 ? 0 : v > (long)s->Lk ? (double)s->Lk : (double)v;
        }
    return 2.0 * s->H * pairs * (double)(s->d + s->dv);
}


/* ---------------- FP64 reference ---------------- */

/* Turns row gi's masked scores (max m; -inf where masked) into the weights PV consumes, in place;
** Vh is the head's V in double, o its output row (for a form that writes O itself). */
typedef int (*attn_row_fn)(void *ctx, size_t gi, double *row, size_t Lk, double m, const double *Vh, double *o,
                           qs_err *e);

/* The FP64 attention the reference and the MX simulation share: per head, blocks of rb query rows,
** S = scale·QKᵀ in double with the causal mask, fn on each row, then O = PV unless pv is 0. */
static int attn_f64(const qs_attn_shape *s, int causal, double scale, size_t rb, const float *Q, const float *K,
                    const float *V, double *O, int pv, attn_row_fn fn, void *ctx, const char *what, qs_err *e)
{
    size_t d = s->d, dv = s->dv, Lk = s->Lk, Lq = s->Lq;
    double *Kd = malloc(Lk * d * sizeof(double)), *Vd = malloc(Lk * dv * sizeof(double));
    double *Qb = malloc(rb * d * sizeof(double)), *S = malloc(rb * Lk * sizeof(double));
    int rc = -1;
    if (!Kd || !Vd || !Qb || !S) { qs_fail(e, "out of memory (%s)", what); goto out; }
    long off = (long)Lk - (long)Lq;
    size_t grp = s->H / s->Hkv;
    for (size_t h = 0; h < s->H; h++) {
        size_t hk = h / grp;
        if (h % grp == 0) {
            for (size_t i = 0; i < Lk * d; i++) Kd[i] = K[hk * Lk * d + i];
            for (size_t i = 0; i < Lk * dv; i++) Vd[i] = V[hk * Lk * dv + i];
        }
        for (size_t i0 = 0; i0 < Lq; i0 += rb) {
            size_t rows = Lq - i0 < rb ? Lq - i0 : rb;
            for (size_t i = 0; i < rows * d; i++) Qb[i] = Q[(h * Lq + i0) * d + i];
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)Lk, (int)d, scale, Qb, (int)d, Kd, (int)d,
                        0.0, S, (int)Lk);
            for (size_t r = 0; r < rows; r++) {
                double *row = S + r * Lk, m = -INFINITY;
                long lim = causal ? (long)(i0 + r) + off : (long)Lk - 1;
                for (size_t j = 0; j < Lk; j++) {
                    if ((long)j > lim) row[j] = -INFINITY;
                    m = row[j] > m ? row[j] : m;
                }
                size_t gi = h * Lq + i0 + r;
                if (fn(ctx, gi, row, Lk, m, Vd, O + gi * dv, e)) goto out;
            }
            if (pv)
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)dv, (int)Lk, 1.0, S, (int)Lk, Vd,
                            (int)dv, 0.0, O + (h * Lq + i0) * dv, (int)dv);
        }
    }
    rc = 0;
out:
    free(Kd); free(Vd); free(Qb); free(S);
    return rc;
}

/* The exact softmax, with the row's log-sum-exp to lse[gi] when lse is not NULL. */
static int ref_row(void *ctx, size_t gi, double *row, size_t Lk, double m, const double *Vh, double *o, qs_err *e)
{
    double *lse = ctx, sum = 0;
    for (size_t j = 0; j < Lk; j++) { row[j] = m == -INFINITY ? 0 : exp(row[j] - m); sum += row[j]; }
    for (size_t j = 0; j < Lk; j++) row[j] = sum > 0 ? row[j] / sum : 0;
    if (lse) lse[gi] = sum > 0 ? m + log(sum) : -INFINITY;
    return 0;
}

int qs_attn_ref(const qs_attn_shape *s, int causal, double scale, const float *Q, const float *K, const float *V,
                double *O, double *lse, qs_err *e)
{
    if (qs_attn_shape_check(s, e)) return -1;
    if (!(scale > 0)) scale = 1.0 / sqrt((double)s->d);
    return attn_f64(s, causal, scale, 64, Q, K, V, O, 1, ref_row, lse, "reference attention", e);
}

/* ---------------- plain C baseline ---------------- */

int qs_attn_plain(const qs_attn_shape *s, const qs_attn_cfg *c, const float *Q, const float *K, const float *V,
                  float *O, qs_err *e)
{
    if (qs_attn_shape_check(s, e)) return -1;
    float sc = (float)qs_attn_scale(s, c);
    long off = (long)s->Lk - (long)s->Lq;
    size_t grp = s->H / s->Hkv;
    for (size_t h = 0; h < s->H; h++)
        for (size_t i = 0; i < s->Lq; i++) {
            const float *q = Q + (h * s->Lq + i) * s->d;
            float *o = O + (h * s->Lq + i) * s->dv, m = -INFINITY, l = 0;
            for (size_t j = 0; j < s->dv; j++) o[j] = 0;
            long lim = c->causal ? (long)i + off : (long)s->Lk - 1;
            for (long k = 0; k <= lim && k < (long)s->Lk; k++) {
                const float *kr = K + ((h / grp) * s->Lk + (size_t)k) * s->d, *vr = V + ((h / grp) * s->Lk + (size_t)k) * s->dv;
                float dot = 0;
                for (size_t j = 0; j < s->d; j++) dot += q[j] * kr[j];
                dot *= sc;
                float mn = dot > m ? dot : m, a = expf(m - mn), p = expf(dot - mn), pr = qs_p_round(c->p, p);
                l = l * a + p;
                for (size_t j = 0; j < s->dv; j++) o[j] = o[j] * a + pr * vr[j];
                m = mn;
            }
            for (size_t j = 0; j < s->dv; j++) o[j] = l > 0 ? o[j] / l : 0;
        }
    return 0;
}

/* ---------------- INT8 KV and the MSD decode path ---------------- */

int qs_kv_i8_quant(const qs_attn_shape *s, const float *K, const float *V, qs_kv_i8 *kv, qs_err *e)
{
    return qs_kv_int_quant(s, K, V, 127, kv, e);
}

int qs_kv_int_quant(const qs_attn_shape *s, const float *K, const float *V, int qmax, qs_kv_i8 *kv, qs_err *e)
{
    memset(kv, 0, sizeof *kv);
    if (qmax != 127 && qmax != 7) return qs_fail(e, "attention: KV codes must be INT8 (127) or INT4 (7)");
    kv->qmax = qmax;
    size_t nk = s->Hkv * s->Lk * s->d, nv = s->Hkv * s->Lk * s->dv;
    kv->K = malloc(nk ? nk : 1);
    kv->V = malloc(nv ? nv : 1);
    kv->sK = malloc(s->Hkv * s->d * sizeof(float));
    kv->sV = malloc(s->Hkv * s->dv * sizeof(float));
    if (!kv->K || !kv->V || !kv->sK || !kv->sV) { qs_kv_i8_free(kv); return qs_fail(e, "out of memory (INT8 KV)"); }
    for (int which = 0; which < 2; which++) {
        size_t D = which ? s->dv : s->d;
        const float *X = which ? V : K;
        int8_t *q = which ? kv->V : kv->K;
        float *sc = which ? kv->sV : kv->sK;
        for (size_t hk = 0; hk < s->Hkv; hk++)
            for (size_t c = 0; c < D; c++) {
                float mx = 0;
                for (size_t t = 0; t < s->Lk; t++) {
                    float v = fabsf(X[(hk * s->Lk + t) * D + c]);
                    if (!isfinite(v)) { qs_kv_i8_free(kv); return qs_fail(e, "attention: K/V hold a non-finite value"); }
                    mx = v > mx ? v : mx;
                }
                float sg = mx > 0 ? mx / (float)qmax : 1.0f;
                sc[hk * D + c] = sg;
                for (size_t t = 0; t < s->Lk; t++) {
                    float r = roundf(X[(hk * s->Lk + t) * D + c] / sg);
                    q[(hk * s->Lk + t) * D + c] = (int8_t)(r > qmax ? qmax : r < -qmax ? -qmax : r);
                }
            }
    }
    return 0;
}

void qs_kv_i8_free(qs_kv_i8 *kv)
{
    free(kv->K); free(kv->V); free(kv->sK); free(kv->sV);
    memset(kv, 0, sizeof *kv);
}

void qs_kv_i8_dequant(const qs_attn_shape *s, const qs_kv_i8 *kv, int bf16, float *K, float *V)
{
    for (size_t hk = 0; hk < s->Hkv; hk++)
        for (size_t t = 0; t < s->Lk; t++) {
            for (size_t c = 0; c < s->d; c++) {
                float v = (float)kv->K[(hk * s->Lk + t) * s->d + c] * kv->sK[hk * s->d + c];
                K[(hk * s->Lk + t) * s->d + c] = bf16 ? qs_bf16_round(v) : v;
            }
            for (size_t c = 0; c < s->dv; c++) {
                float v = (float)kv->V[(hk * s->Lk + t) * s->dv + c] * kv->sV[hk * s->dv + c];
                V[(hk * s->Lk + t) * s->dv + c] = bf16 ? qs_bf16_round(v) : v;
            }
        }
}

int qs_attn_msd_decode(const qs_attn_shape *s, const qs_attn_cfg *c, const float *Q, const qs_kv_i8 *kv, int passes,
                       float *O, qs_err *e)
{
    if (qs_attn_shape_check(s, e)) return -1;
    int i4 = kv->qmax == 7;
    double LN = i4 ? 7.49 : 127.0, EX = i4 ? 14.98 : 254.0;   /* normaliser and expansion of the passes */
    if (passes < 1 || passes > (i4 ? 4 : QS_MSD_MAX_PASSES))
        return qs_fail(e, "msd: passes must be 1..%d", i4 ? 4 : QS_MSD_MAX_PASSES);
    size_t d = s->d, dv = s->dv, Lk = s->Lk, Lq = s->Lq, bc = c->bc ? c->bc : 512;
    if (bc > QS_MSD_KCHUNK) bc = QS_MSD_KCHUNK;   /* P·V partial sums stay exact in one chunk */
    double sc = qs_attn_scale(s, c);
    long off = (long)Lk - (long)Lq;
    size_t P = (size_t)passes, grp = s->H / s->Hkv;
    float *qs = malloc(Lq * d * sizeof(float)), *amax = malloc(Lq * sizeof(float));
    int8_t *qa = malloc(P * Lq * d), *pa = malloc(P * Lq * bc);
    int32_t *Cs = malloc(P * Lq * bc * sizeof(int32_t)), *Co = malloc(P * Lq * dv * sizeof(int32_t));
    double *Oacc = malloc(Lq * dv * sizeof(double)), *m = malloc(Lq * sizeof(double)), *l = malloc(Lq * sizeof(double));
    float *Pt = malloc(Lq * bc * sizeof(float));
    int8_t *Vti = malloc(dv * bc);
    int rc = -1;
    if (!qs || !amax || !qa || !pa || !Cs || !Co || !Oacc || !m || !l || !Pt || !Vti) {
        qs_fail(e, "out of memory (MSD decode)");
        goto out;
    }
    for (size_t h = 0; h < s->H; h++) {
        size_t hk = h / grp;
        const int8_t *Kh = kv->K + hk * Lk * d, *Vh = kv->V + hk * Lk * dv;
        const float *sK = kv->sK + hk * d, *sV = kv->sV + hk * dv;
        for (size_t i = 0; i < Lq; i++)   /* fold the K per-channel scale into Q */
            for (size_t j = 0; j < d; j++) qs[i * d + j] = Q[(h * Lq + i) * d + j] * sK[j];
        if (qs_msd_decompose_gen(qs, Lq, d, passes, LN, EX, qa, amax, e)) goto out;
        for (size_t i = 0; i < Lq; i++) { m[i] = -INFINITY; l[i] = 0; }
        memset(Oacc, 0, Lq * dv * sizeof(double));
        for (size_t j0 = 0; j0 < Lk; j0 += bc) {
            size_t n = Lk - j0 < bc ? Lk - j0 : bc;
            if (qs_i8_gemm_exact(qa, P * Lq, Kh + j0 * d, NULL, n, d, Cs, QS_I8GEMM_SGEMM, 1, NULL, e)) goto out;
            for (size_t i = 0; i < Lq; i++) {
                long lim = c->causal ? (long)i + off : (long)Lk - 1;
                double mx = -INFINITY;
                for (size_t jj = 0; jj < n; jj++) {
                    double cs = 0, w = 1;
                    for (size_t p = 0; p < P; p++, w /= EX) cs += w * Cs[(p * Lq + i) * n + jj];
                    double sv = (long)(j0 + jj) > lim ? -INFINITY : cs * amax[i] / LN * sc;
                    Pt[i * n + jj] = (float)sv;
                    mx = sv > mx ? sv : mx;
                }
                double mn = mx > m[i] ? mx : m[i], a = m[i] == -INFINITY ? 0 : exp(m[i] - mn), sum = 0;
                for (size_t jj = 0; jj < n; jj++) {
                    float pv = mn == -INFINITY ? 0.0f : (float)exp((double)Pt[i * n + jj] - mn);   /* (0, 1] */
                    sum += pv;
                    double t = LN * pv;
                    for (size_t p = 0; p < P; p++) {   /* constant normaliser (P ≤ 1): no absmax needed */
                        double r = round(t);
                        pa[(p * Lq + i) * n + jj] = (int8_t)r;
                        t = EX * (t - r);
                    }
                }
                l[i] = a * l[i] + sum;
                m[i] = mn;
                for (size_t j = 0; j < dv; j++) Oacc[i * dv + j] *= a;
            }
            for (size_t j = 0; j < dv; j++)
                for (size_t jj = 0; jj < n; jj++) Vti[j * n + jj] = Vh[(j0 + jj) * dv + j];
            if (qs_i8_gemm_exact(pa, P * Lq, Vti, NULL, dv, n, Co, QS_I8GEMM_SGEMM, 1, NULL, e)) goto out;
            for (size_t i = 0; i < Lq; i++)
                for (size_t j = 0; j < dv; j++) {
                    double cs = 0, w = 1;
                    for (size_t p = 0; p < P; p++, w /= EX) cs += w * Co[(p * Lq + i) * dv + j];
                    Oacc[i * dv + j] += (float)(cs / LN * sV[j]);   /* FP32 tile result */
                }
        }
        for (size_t i = 0; i < Lq; i++)
            for (size_t j = 0; j < dv; j++) O[(h * Lq + i) * dv + j] = l[i] > 0 ? (float)(Oacc[i * dv + j] / l[i]) : 0.0f;
    }
    rc = 0;
out:
    free(qs); free(amax); free(qa); free(pa); free(Cs); free(Co); free(Oacc); free(m); free(l);
    free(Pt); free(Vti);
    return rc;
}

/* ---------------- MX attention simulation ---------------- */

static int fq_rows(const qs_format *f, const qs_qopts *o, const float *x, size_t rows, size_t len, float *y, qs_err *e)
{
    for (size_t r = 0; r < rows; r++)
        if (f->fakeq(f, o, x + r * len, len, y + r * len, e)) return -1;
    return 0;
}

typedef struct { const qs_attn_mx *mx; size_t dv; float *pf, *pq; } mx_ctx;

/* P under the simulation's quantization of P (mx->pq), or the online PNQ form writing o itself. */
static int mx_row(void *ctx, size_t gi, double *row, size_t Lk, double mxv, const double *Vh, double *o, qs_err *e)
{
    const mx_ctx *c = ctx;
    const qs_attn_mx *mx = c->mx;
    const qs_format *f = mx->f;
    float *pf = c->pf, *pq = c->pq;
    size_t dv = c->dv;
    double sum = 0;
    for (size_t j = 0; j < Lk; j++) { pf[j] = mxv == -INFINITY ? 0.0f : (float)exp(row[j] - mxv); sum += pf[j]; }
    if (mx->pq == QS_PQ_NONE) {
        for (size_t j = 0; j < Lk; j++) row[j] = sum > 0 ? pf[j] / sum : 0;
    } else if (mx->pq == QS_PQ_NTQ) {   /* normalize, then quantize: weights need not sum to 1 */
        for (size_t j = 0; j < Lk; j++) pf[j] = sum > 0 ? (float)(pf[j] / sum) : 0.0f;
        if (f->fakeq(f, &mx->op, pf, Lk, pq, e)) return -1;
        for (size_t j = 0; j < Lk; j++) row[j] = pq[j];
    } else if (mx->tile) {              /* PNQ, online form: per key tile, running max */
        double m = -INFINITY, l = 0;
        for (size_t j = 0; j < dv; j++) o[j] = 0;
        for (size_t j0 = 0; j0 < Lk; j0 += mx->tile) {
            size_t n = Lk - j0 < mx->tile ? Lk - j0 : mx->tile;
            double tm = -INFINITY;
            for (size_t j = j0; j < j0 + n; j++) tm = row[j] > tm ? row[j] : tm;
            double mn = tm > m ? tm : m;
            if (mn == -INFINITY) continue;
            double a = m == -INFINITY ? 0 : exp(m - mn);
            for (size_t j = 0; j < n; j++) pf[j] = (float)exp(row[j0 + j] - mn);
            if (f->fakeq(f, &mx->op, pf, n, pq, e)) return -1;
            double ts = 0;
            for (size_t j = 0; j < n; j++) ts += pq[j];
            l = a * l + ts;
            for (size_t k = 0; k < dv; k++) o[k] *= a;
            for (size_t j = 0; j < n; j++)
                if (pq[j] != 0)
                    for (size_t k = 0; k < dv; k++) o[k] += pq[j] * Vh[(j0 + j) * dv + k];
            m = mn;
        }
        if (l < 1.1754943508222875e-38) l = 1.1754943508222875e-38;
        for (size_t k = 0; k < dv; k++) o[k] /= l;
    } else {                            /* PNQ: quantize P̃, rowsum of what PV consumes */
        if (f->fakeq(f, &mx->op, pf, Lk, pq, e)) return -1;
        double qs = 0;
        for (size_t j = 0; j < Lk; j++) qs += pq[j];
        if (qs < 1.1754943508222875e-38) qs = 1.1754943508222875e-38;
        for (size_t j = 0; j < Lk; j++) row[j] = pq[j] / qs;
    }
    return 0;
}

int qs_attn_mx_run(const qs_attn_shape *s, int causal, double scale, const qs_attn_mx *mx, const float *Q,
                   const float *K, const float *V, double *O, float *Qd, float *Kd, float *Vd, qs_err *e)
{
    if (qs_attn_shape_check(s, e)) return -1;
    if (!(scale > 0)) scale = 1.0 / sqrt((double)s->d);
    const qs_format *f = mx->f;
    if (qs_qopts_check(f, &mx->oqk, e) || qs_qopts_check(f, &mx->ov, e) || qs_qopts_check(f, &mx->op, e)) return -1;
    if (mx->tile && mx->pq != QS_PQ_PNQ) return qs_fail(e, "attention: the tiled (online) form is defined for PNQ only");
    size_t d = s->d, dv = s->dv, Lk = s->Lk, Lq = s->Lq;
    size_t nq = s->H * Lq * d, nk = s->Hkv * Lk * d, nv = s->Hkv * Lk * dv;
    float *q = malloc(nq * sizeof(float)), *k = malloc(nk * sizeof(float)), *v = malloc(nv * sizeof(float));
    float *t1 = malloc((Lk * dv > Lk ? Lk * dv : Lk) * sizeof(float)), *t2 = malloc((Lk * dv > Lk ? Lk * dv : Lk) * sizeof(float));
    float *pf = malloc(Lk * sizeof(float)), *pq = malloc(Lk * sizeof(float));
    int rc = -1;
    if (!q || !k || !v || !t1 || !t2 || !pf || !pq) { qs_fail(e, "out of memory (MX attention)"); goto out; }
    if (mx->quant_qkv) {
        if (fq_rows(f, &mx->oqk, Q, s->H * Lq, d, q, e) || fq_rows(f, &mx->oqk, K, s->Hkv * Lk, d, k, e)) goto out;
        for (size_t hk = 0; hk < s->Hkv; hk++) {   /* V: blocks along the key (sequence) dimension */
            const float *vh = V + hk * Lk * dv;
            for (size_t t = 0; t < Lk; t++)
                for (size_t j = 0; j < dv; j++) t1[j * Lk + t] = vh[t * dv + j];
            if (fq_rows(f, &mx->ov, t1, dv, Lk, t2, e)) goto out;
            for (size_t t = 0; t < Lk; t++)
                for (size_t j = 0; j < dv; j++) v[hk * Lk * dv + t * dv + j] = t2[j * Lk + t];
        }
    } else {
        memcpy(q, Q, nq * sizeof(float)); memcpy(k, K, nk * sizeof(float)); memcpy(v, V, nv * sizeof(float));
    }
    if (Qd) memcpy(Qd, q, nq * sizeof(float));
    if (Kd) memcpy(Kd, k, nk * sizeof(float));
    if (Vd) memcpy(Vd, v, nv * sizeof(float));
    mx_ctx c = {mx, dv, pf, pq};
    /* the online form writes its rows itself */
    rc = attn_f64(s, causal, scale, 32, q, k, v, O, !(mx->pq == QS_PQ_PNQ && mx->tile), mx_row, &c, "MX attention", e);
out:
    free(q); free(k); free(v); free(t1); free(t2); free(pf); free(pq);
    return rc;
}

/* ---------------- error statistics ---------------- */

static void cmp_acc(double y, double r, double *se, double *sr, double *sy, double *sxy, double *mx)
{
    double dd = y - r;
    *se += dd * dd; *sr += r * r; *sy += y * y; *sxy += y * r;
    if (fabs(dd) > *mx) *mx = fabs(dd);
}

static void cmp_fin(double se, double sr, double sy, double sxy, double mx, size_t n, size_t nf, qs_cmp *o)
{
    o->n = n;
    o->nonfinite = nf;
    o->ref_norm = sqrt(sr);
    o->rel_l2 = sr > 0 ? sqrt(se / sr) : sqrt(se);
    o->max_abs = mx;
    o->cosine = sy > 0 && sr > 0 ? sxy / sqrt(sy * sr) : (sy == 0 && sr == 0 ? 1 : 0);
    o->cos_diff = sy + sr > 0 ? 1 - 2 * sxy / (sy + sr) : 0;
    if (nf) { o->rel_l2 = o->max_abs = INFINITY; o->cosine = 0; o->cos_diff = 1; }
}

void qs_cmp_f(const float *y, const double *ref, size_t n, qs_cmp *out)
{
    double se = 0, sr = 0, sy = 0, sxy = 0, mx = 0;
    size_t nf = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(y[i])) { nf++; continue; }
        cmp_acc(y[i], ref[i], &se, &sr, &sy, &sxy, &mx);
    }
    cmp_fin(se, sr, sy, sxy, mx, n, nf, out);
}

void qs_cmp_d(const double *y, const double *ref, size_t n, qs_cmp *out)
{
    double se = 0, sr = 0, sy = 0, sxy = 0, mx = 0;
    size_t nf = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(y[i])) { nf++; continue; }
        cmp_acc(y[i], ref[i], &se, &sr, &sy, &sxy, &mx);
    }
    cmp_fin(se, sr, sy, sxy, mx, n, nf, out);
}
