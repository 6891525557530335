/* Multi-Scale Dequant kernels (see msd.h). */
#include "msd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

float qs_bf16_round(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7F800000u) == 0x7F800000u) return v;   /* Inf / NaN kept */
    u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
    memcpy(&v, &u, 4);
    return v;
}

float qs_fp16_round(float v)
{
    if (!isfinite(v)) return v;
    float a = fabsf(v);
    if (a >= 65520.0f) return copysignf(INFINITY, v);
    int ex;
    frexpf(a, &ex);                       /* a = f·2^ex, f in [0.5,1) */
    int e = ex - 1 < -14 ? -14 : ex - 1;  /* subnormals share the 2^-24 ulp */
    float ulp = ldexpf(1.0f, e - 10);
    return copysignf(rintf(a / ulp) * ulp, v);
}

int qs_msd_decompose_i8(const float *x, size_t M, size_t K, int passes, int8_t *a, float *amax, qs_err *e)
{
    if (passes < 1 || passes > QS_MSD_MAX_PASSES) return qs_fail(e, "msd: passes must be 1..%d", QS_MSD_MAX_PASSES);
    for (size_t m = 0; m < M; m++) {
        const float *xr = x + m * K;
        float mx = 0;
        for (size_t k = 0; k < K; k++) {
            if (!isfinite(xr[k])) return qs_fail(e, "msd: activation row %zu holds a non-finite value", m);
            float v = fabsf(xr[k]);
            mx = v > mx ? v : mx;
        }
        amax[m] = mx;
        double inv = mx > 0 ? 127.0 / (double)mx : 0;
        for (size_t k = 0; k < K; k++) {
            double t = (double)xr[k] * inv;   /* in [-127, 127] */
            for (int p = 0; p < passes; p++) {
                double q = round(t);          /* half away from zero */
                if (q > 127) q = 127;
                if (q < -127) q = -127;
                a[(size_t)p * M * K + m * K + k] = (int8_t)q;
                t = 254.0 * (t - q);          /* t − q is exact; |254·(t−q)| ≤ 127 */
            }
        }
    }
    return 0;
}

void qs_msd_reconstruct_i8(const int8_t *a, const float *amax, size_t M, size_t K, int passes, double *xr)
{
    for (size_t m = 0; m < M; m++) {
        double s = (double)amax[m] / 127.0;
        for (size_t k = 0; k < K; k++) {
            double v = 0, w = 1;
            for (int p = 0; p < passes; p++, w /= 254.0) v += w * a[(size_t)p * M * K + m * K + k];
            xr[m * K + k] = s * v;
        }
    }
}

void qs_quant_w_i8(const float *W, size_t N, size_t K, int8_t *Wq, float *sigma)
{
    for (size_t n = 0; n < N; n++) {
        float mx = 0;
        for (size_t k = 0; k < K; k++) mx = fabsf(W[n * K + k]) > mx ? fabsf(W[n * K + k]) : mx;
        float s = mx > 0 ? mx / 127.0f : 1.0f;
        sigma[n] = s;
        for (size_t k = 0; k < K; k++) {
            float q = roundf(W[n * K + k] / s);
            Wq[n * K + k] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
        }
    }
}

int qs_i8_gemm_exact(const int8_t *A, size_t R, const int8_t *B, const float *Bf, size_t N, size_t K, int32_t *C,
                     qs_i8gemm_method method, int threads, qs_err *e)
{
    if (K > QS_MSD_MAX_K) return qs_fail(e, "msd: K = %zu exceeds %d (INT32 sums could overflow)", K, QS_MSD_MAX_K);
    if (method == QS_I8GEMM_INT) {
        for (size_t r = 0; r < R; r++)
            for (size_t n = 0; n < N; n++) {
                const int8_t *ar = A + r * K, *br = B + n * K;
                int32_t s = 0;
                for (size_t k = 0; k < K; k++) s += (int32_t)ar[k] * (int32_t)br[k];
                C[r * N + n] = s;
            }
        return 0;
    }
    float *Af = malloc((R * K + 1) * sizeof(float)), *Cf = malloc((R * N + 1) * sizeof(float));
    float *Bown = NULL;
    if (!Bf) {
        Bown = malloc((N * K + 1) * sizeof(float));
        if (Bown) for (size_t i = 0; i < N * K; i++) Bown[i] = (float)B[i];
        Bf = Bown;
    }
    if (!Af || !Cf || !Bf) { free(Af); free(Cf); free(Bown); return qs_fail(e, "out of memory (int8 GEMM %zux%zux%zu)", R, N, K); }
    for (size_t i = 0; i < R * K; i++) Af[i] = (float)A[i];
    int old = openblas_get_num_threads();
    if (threads > 0) openblas_set_num_threads(threads);
    memset(C, 0, R * N * sizeof *C);
    for (size_t k0 = 0; k0 < K; k0 += QS_MSD_KCHUNK) {
        size_t kc = K - k0 < QS_MSD_KCHUNK ? K - k0 : QS_MSD_KCHUNK;
        if (k0 == 0 && kc == K) {   /* one chunk: convert directly */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)R, (int)N, (int)kc, 1.0f, Af, (int)K, Bf, (int)K,
                        0.0f, Cf, (int)N);
            for (size_t i = 0; i < R * N; i++) C[i] = (int32_t)Cf[i];
            break;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)R, (int)N, (int)kc, 1.0f, Af + k0, (int)K, Bf + k0,
                    (int)K, 0.0f, Cf, (int)N);
        for (size_t i = 0; i < R * N; i++) C[i] += (int32_t)Cf[i];
    }
    if (threads > 0) openblas_set_num_threads(old);
    free(Af); free(Cf); free(Bown);
    return 0;
}

size_t qs_msd_gemm_ws_bytes(size_t M, size_t N, size_t K, int passes)
{
    return (size_t)passes * M * K + M * sizeof(float) + (size_t)passes * M * N * sizeof(int32_t) + 64;
}

int qs_msd_gemm_i8(const float *x, size_t M, size_t K, const int8_t *Wq, const float *Wf, const float *sigma, size_t N,
                   int passes, qs_i8gemm_method method, int threads, float *y, void *ws, qs_err *e)
{
    void *own = NULL;
    if (!ws) {
        own = ws = malloc(qs_msd_gemm_ws_bytes(M, N, K, passes));
        if (!ws) return qs_fail(e, "out of memory (MSD workspace)");
    }
    int32_t *C = ws;
    float *amax = (float *)(C + (size_t)passes * M * N);
    int8_t *a = (int8_t *)(amax + M);
    int rc = -1;
    if (qs_msd_decompose_i8(x, M, K, passes, a, amax, e)) goto out;
    if (qs_i8_gemm_exact(a, (size_t)passes * M, Wq, Wf, N, K, C, method, threads, e)) goto out;
    for (size_t m = 0; m < M; m++) {
        double s = (double)amax[m] / 127.0;
        for (size_t n = 0; n < N; n++) {
            double c = 0, w = 1;
            for (int p = 0; p < passes; p++, w /= 254.0) c += w * (double)C[(size_t)p * M * N + m * N + n];
            y[m * N + n] = (float)(c * s * (double)sigma[n]);
        }
    }
    rc = 0;
out:
    free(own);
    return rc;
}

/* scale 2^(code-127) of an E8M0 code */
static double e8m0_value(unsigned c) { return ldexp(1.0, (int)c - 127); }

int qs_msd_decompose_mx(const qs_msd_mx *c, const float *x, size_t M, size_t K, int passes, float *parts, qs_err *e)
{
    if (passes < 1 || passes > QS_MSD_MAX_PASSES) return qs_fail(e, "msd: passes must be 1..%d", QS_MSD_MAX_PASSES);
    const qs_format *f = c->f;
    size_t n = M * K;
    size_t blk = qs_format_block(f, &c->o1);
    if (c->pass2_shift >= 0 && (!f->has_scale_rule || f->meta_bytes != 1))
        return qs_fail(e, "msd: a fixed residual scale needs an MX format (E8M0 block scale), not %s", f->name);
    if (qs_qopts_check(f, &c->o1, e) || qs_qopts_check(f, &c->o_res, e)) return -1;
    float *r = malloc((K ? K : 1) * sizeof(float)), *q = malloc((K ? K : 1) * sizeof(float));
    uint32_t *codes = malloc((K ? K : 1) * sizeof(uint32_t));
    size_t nb = blk ? (K + blk - 1) / blk : 1;
    uint8_t *meta = malloc(nb * (f->meta_bytes ? (size_t)f->meta_bytes : 1) + 8);
    double *X = malloc(nb * sizeof(double));
    const qs_format *elem = NULL;
    int rc = -1;
    if (!r || !q || !codes || !meta || !X) { qs_fail(e, "out of memory"); goto out; }
    if (c->pass2_shift >= 0) {
        static const struct { int eb, mb; const char *name; } el[] = {
            {2, 1, "fp4_e2m1"}, {4, 3, "fp8_e4m3"}, {5, 2, "fp8_e5m2"}, {3, 2, "fp6_e3m2"}, {2, 3, "fp6_e2m3"}};
        for (size_t i = 0; i < sizeof el / sizeof *el; i++)
            if (el[i].eb == f->ebits && el[i].mb == f->mbits) elem = qs_format_find(el[i].name);
        if (!elem) { qs_fail(e, "msd: no element cast for %s", f->name); goto out; }
    }
    for (size_t m = 0; m < M; m++) {
        memcpy(r, x + m * K, K * sizeof(float));
        for (int p = 0; p < passes; p++) {
            float *dst = parts + (size_t)p * n + m * K;
            if (p == 0 || c->pass2_shift < 0) {
                const qs_qopts *o = p == 0 ? &c->o1 : &c->o_res;
                if (c->pass2_shift >= 0) {   /* remember the block scales for the fixed rule */
                    float ts;
                    if (f->encode(f, o, r, K, codes, meta, &ts, e)) goto out;
                    for (size_t b = 0; b < nb; b++) X[b] = e8m0_value(meta[b]);
                }
                if (f->fakeq(f, o, r, K, dst, e)) goto out;
            } else {
                qs_qopts eo;
                memset(&eo, 0, sizeof eo);
                eo.sat = 1;
                for (size_t b = 0; b < nb; b++) {
                    size_t i0 = b * blk, len = K - i0 < blk ? K - i0 : blk;
                    X[b] = ldexp(X[b], -c->pass2_shift);
                    for (size_t i = 0; i < len; i++) q[i0 + i] = (float)(r[i0 + i] / X[b]);
                    if (elem->fakeq(elem, &eo, q + i0, len, dst + i0, e)) goto out;
                    for (size_t i = 0; i < len; i++) dst[i0 + i] = (float)(dst[i0 + i] * X[b]);
                }
            }
            for (size_t k = 0; k < K; k++) r[k] -= dst[k];   /* exact for these grids in practice; kept in FP32 */
        }
    }
    rc = 0;
out:
    free(r); free(q); free(codes); free(meta); free(X);
    return rc;
}

double qs_eff_bits_rms(const float *x, const double *xr, size_t n)
{
    double se = 0, sx = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - xr[i];
        se += d * d;
        sx += (double)x[i] * x[i];
    }
    if (se == 0) return INFINITY;
    return -0.5 * log2(se / sx);
}

double qs_eff_bits_bound(const float *x, const double *xr, size_t M, size_t K)
{
    double worst = 0;
    for (size_t m = 0; m < M; m++) {
        double mx = 0, me = 0;
        for (size_t k = 0; k < K; k++) {
            double v = fabs((double)x[m * K + k]), d = fabs((double)x[m * K + k] - xr[m * K + k]);
            mx = v > mx ? v : mx;
            me = d > me ? d : me;
        }
        if (mx > 0 && me / mx > worst) worst = me / mx;
    }
    return worst == 0 ? INFINITY : -log2(worst);
}
