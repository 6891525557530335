/* Multi-Scale Dequant kernels (see msd.h). */
#include "msd.h"
#include "blas_threads.h"
#include "pool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

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

/* ---------------- a tiny parallel-for (rows cut into `threads` ranges, on the pool) ---------------- */

typedef struct { void (*fn)(void *, size_t, size_t); void *ctx; size_t n, parts; } pf_job;
static void pf_task(void *p, size_t i, int slot)
{
    (void)slot;
    pf_job *j = p;
    j->fn(j->ctx, j->n * i / j->parts, j->n * (i + 1) / j->parts);
}

static void par_for(int threads, size_t n, void (*fn)(void *, size_t, size_t), void *ctx)
{
    if (threads > 8) threads = 8;
    if (threads < 2 || n < 64) { fn(ctx, 0, n); return; }
    pf_job j = {fn, ctx, n, (size_t)threads};
    qs_pool_for(threads, (size_t)threads, pf_task, &j);
}

/* round half away from zero for |t| < 2^31 (here ≤ 127), exactly (no t + 0.5 rounding trap) */
static inline double round_away(double t)
{
    double q = (double)(int)t, f = t - q;         /* f exact */
    double up = f >= 0.5 ? 1.0 : 0.0, dn = f <= -0.5 ? 1.0 : 0.0;   /* selects, not branches */
    return q + up - dn;
}

typedef struct { const float *x; size_t M, K; int passes; int8_t *a; float *amax; int bad; } dec_ctx;

static void dec_rows(void *vc, size_t lo, size_t hi)
{
    dec_ctx *c = vc;
    size_t M = c->M, K = c->K;
    for (size_t m = lo; m < hi; m++) {
        const float *xr = c->x + m * K;
        float mx = 0;
        int fin = 1;
        for (size_t k = 0; k < K; k++) {
            float v = fabsf(xr[k]);
            fin &= v <= 3.4028234663852886e38f;
            mx = v > mx ? v : mx;
        }
        c->amax[m] = fin ? mx : 0;
        if (!fin) {   /* refused by the caller; leave defined zeros */
            c->bad = 1;
            for (int p = 0; p < c->passes; p++) memset(c->a + (size_t)p * M * K + m * K, 0, K);
            continue;
        }
        double inv127 = mx > 0 ? 127.0 : 0, dm = mx > 0 ? (double)mx : 1;
        int8_t *a0 = c->a + m * K, *b0 = a0 + M * K, *c0 = b0 + M * K;
        /* t = 127·x/M: 127·x is exact, the division rounds once; |t| ≤ 127 */
        if (c->passes == 1)
            for (size_t k = 0; k < K; k++) a0[k] = (int8_t)round_away((double)xr[k] * inv127 / dm);
        else if (c->passes == 2)
            for (size_t k = 0; k < K; k++) {
                double t = (double)xr[k] * inv127 / dm, q1 = round_away(t), q2 = round_away(254.0 * (t - q1));
                a0[k] = (int8_t)q1;   /* t − q1 is exact; |254·(t − q1)| ≤ 127 */
                b0[k] = (int8_t)q2;
            }
        else
            for (size_t k = 0; k < K; k++) {
                double t = (double)xr[k] * inv127 / dm, q1 = round_away(t), t2 = 254.0 * (t - q1), q2 = round_away(t2);
                a0[k] = (int8_t)q1;
                b0[k] = (int8_t)q2;
                c0[k] = (int8_t)round_away(254.0 * (t2 - q2));
            }
    }
}

int qs_msd_decompose_i8(const float *x, size_t M, size_t K, int passes, int8_t *a, float *amax, qs_err *e)
{
    if (passes < 1 || passes > QS_MSD_MAX_PASSES) return qs_fail(e, "msd: passes must be 1..%d", QS_MSD_MAX_PASSES);
    dec_ctx c = {x, M, K, passes, a, amax, 0};
    dec_rows(&c, 0, M);
    return c.bad ? qs_fail(e, "msd: the activations hold a non-finite value") : 0;
}

static int decompose_par(const float *x, size_t M, size_t K, int passes, int8_t *a, float *amax, int threads, qs_err *e)
{
    dec_ctx c = {x, M, K, passes, a, amax, 0};
    par_for(threads, M, dec_rows, &c);
    return c.bad ? qs_fail(e, "msd: the activations hold a non-finite value") : 0;
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

int qs_msd_decompose_gen(const float *x, size_t M, size_t K, int passes, double L, double E, int8_t *a, float *amax,
                         qs_err *e)
{
    if (passes < 1 || passes > 4) return qs_fail(e, "msd: passes must be 1..4");
    if (!(L >= 1 && L <= 127.49) || !(E >= 2 * L - 1e-9 && E <= 2 * L + 1e-9))
        return qs_fail(e, "msd: normaliser %g / expansion %g must satisfy 1 <= L <= 127.49, E = 2L", L, E);
    for (size_t m = 0; m < M; m++) {
        const float *xr = x + m * K;
        float mx = 0;
        for (size_t k = 0; k < K; k++) {
            if (!isfinite(xr[k])) return qs_fail(e, "msd: the activations hold a non-finite value");
            mx = fabsf(xr[k]) > mx ? fabsf(xr[k]) : mx;
        }
        amax[m] = mx;
        for (size_t k = 0; k < K; k++) {
            double t = mx > 0 ? (double)xr[k] * L / (double)mx : 0;   /* |t| ≤ L, so |R(t)| ≤ floor(L + 1/2) */
            for (int p = 0; p < passes; p++) {
                double q = round_away(t);
                a[(size_t)p * M * K + m * K + k] = (int8_t)q;
                t = E * (t - q);                                       /* |E·(t − q)| ≤ E/2 = L */
            }
        }
    }
    return 0;
}

void qs_msd_reconstruct_gen(const int8_t *a, const float *amax, size_t M, size_t K, int passes, double L, double E,
                            double *xr)
{
    for (size_t m = 0; m < M; m++) {
        double s = (double)amax[m] / L;
        for (size_t k = 0; k < K; k++) {
            double v = 0, w = 1;
            for (int p = 0; p < passes; p++, w /= E) v += w * a[(size_t)p * M * K + m * K + k];
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

/* ---------------- exact integer GEMM ---------------- */

static size_t nunits(size_t K) { return (K + QS_MSD_UNIT - 1) / QS_MSD_UNIT; }

/* per unit: max over rows of the squared norm of the row's slice, and the float copy */
typedef struct { const int8_t *A; size_t K; float *f; double *um; } cv_ctx;
static void cv_rows(void *vc, size_t lo, size_t hi)
{
    cv_ctx *c = vc;
    size_t nu = nunits(c->K);
    for (size_t r = lo; r < hi; r++) {
        const int8_t *a = c->A + r * c->K;
        float *f = c->f + r * c->K;
        for (size_t u = 0; u < nu; u++) {
            size_t k0 = u * QS_MSD_UNIT, k1 = k0 + QS_MSD_UNIT < c->K ? k0 + QS_MSD_UNIT : c->K;
            int32_t s2 = 0;
            for (size_t k = k0; k < k1; k++) { f[k] = a[k]; s2 += (int32_t)a[k] * a[k]; }
            double *mine = c->um + u;   /* this call's own maxima row */
            if ((double)s2 > *mine) *mine = s2;
        }
    }
}

typedef struct { const int8_t *A; size_t K; float *f; double *um_all; size_t nu; } cvp_ctx;
static void cvp_rows(void *vc, size_t lo, size_t hi)
{
    cvp_ctx *c = vc;
    /* par_for with two threads makes exactly two calls; the one starting at row 0 uses maxima row 0 */
    cv_ctx cc = {c->A, c->K, c->f, c->um_all + (lo == 0 ? 0 : c->nu)};
    cv_rows(&cc, lo, hi);
}

static void convert_rows(const int8_t *A, size_t R, size_t K, float *f, double *um, int threads)
{
    size_t nu = nunits(K);
    int t = threads >= 2 && R >= 64 ? 2 : 1;
    double *tmp = calloc(2 * nu, sizeof(double));
    if (!tmp) {   /* fall back to one thread, writing um directly */
        for (size_t u = 0; u < nu; u++) um[u] = 0;
        cv_ctx cc = {A, K, f, um};
        cv_rows(&cc, 0, R);
        return;
    }
    cvp_ctx c = {A, K, f, tmp, nu};
    par_for(t, R, cvp_rows, &c);
    for (size_t u = 0; u < nu; u++) um[u] = tmp[u] > tmp[nu + u] ? tmp[u] : tmp[nu + u];
    free(tmp);
}

int qs_i8_pack_make(const int8_t *B, size_t N, size_t K, qs_i8_pack *p, qs_err *e)
{
    memset(p, 0, sizeof *p);
    p->f = malloc(N * K * sizeof(float) + 4);
    p->umax2 = calloc(nunits(K) + 1, sizeof(double));
    if (!p->f || !p->umax2) { qs_i8_pack_free(p); return qs_fail(e, "out of memory (packing %zux%zu INT8)", N, K); }
    p->N = N;
    p->K = K;
    convert_rows(B, N, K, p->f, p->umax2, 2);
    return 0;
}

void qs_i8_pack_free(qs_i8_pack *p)
{
    free(p->f);
    free(p->umax2);
    memset(p, 0, sizeof *p);
}

typedef struct { int32_t *C; const float *Cf; int first; } acc_ctx;
static void acc_rows(void *vc, size_t lo, size_t hi)
{
    acc_ctx *c = vc;
    if (c->first) for (size_t i = lo; i < hi; i++) c->C[i] = (int32_t)c->Cf[i];
    else for (size_t i = lo; i < hi; i++) c->C[i] += (int32_t)c->Cf[i];
}

/* SGEMM path with caller-provided scratch: Af (R×K), Cf (R×N), ua (units). */
static void i8_gemm_sgemm(const int8_t *A, size_t R, const qs_i8_pack *Bp, size_t N, size_t K, int32_t *C, int threads,
                          float *Af, float *Cf, double *ua, int *nchunks)
{
    size_t nu = nunits(K);
    /* threads splits our loops; BLAS keeps its start-up count (one thread when threads is 1) */
    int th = threads > 0 ? threads : qs_blas_threads();
    convert_rows(A, R, K, Af, ua, th);
    if (th == 1) qs_blas_serial_begin();
    const double LIM = 16777216.0 * (1 - 1e-9);
    int chunks = 0;
    for (size_t u0 = 0; u0 < nu;) {
        /* longest run of units whose Cauchy–Schwarz bound stays ≤ 2^24 (one unit always does) */
        double sa = ua[u0], sb = Bp->umax2[u0];
        size_t u1 = u0 + 1;
        while (u1 < nu && sqrt((sa + ua[u1]) * (sb + Bp->umax2[u1])) <= LIM) { sa += ua[u1]; sb += Bp->umax2[u1]; u1++; }
        size_t k0 = u0 * QS_MSD_UNIT, k1 = u1 * QS_MSD_UNIT < K ? u1 * QS_MSD_UNIT : K;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)R, (int)N, (int)(k1 - k0), 1.0f, Af + k0, (int)K,
                    Bp->f + k0, (int)K, 0.0f, Cf, (int)N);
        acc_ctx ac = {C, Cf, chunks == 0};
        par_for(th >= 2 ? 2 : 1, R * N, acc_rows, &ac);
        chunks++;
        u0 = u1;
    }
    if (K == 0) memset(C, 0, R * N * sizeof *C);
    if (th == 1) qs_blas_serial_end();
    if (nchunks) *nchunks = chunks;
}

int qs_i8_gemm_exact(const int8_t *A, size_t R, const int8_t *B, const qs_i8_pack *Bp, size_t N, size_t K, int32_t *C,
                     qs_i8gemm_method method, int threads, int *nchunks, qs_err *e)
{
    if (K > QS_MSD_MAX_K) return qs_fail(e, "msd: K = %zu exceeds %d (INT32 sums could overflow)", K, QS_MSD_MAX_K);
    if (nchunks) *nchunks = 1;
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
    if (Bp && (Bp->N != N || Bp->K != K)) return qs_fail(e, "msd: packed operand is %zux%zu, not %zux%zu", Bp->N, Bp->K, N, K);
    qs_i8_pack own;
    memset(&own, 0, sizeof own);
    if (!Bp) {
        if (qs_i8_pack_make(B, N, K, &own, e)) return -1;
        Bp = &own;
    }
    float *Af = malloc(R * K * sizeof(float) + 4), *Cf = malloc(R * N * sizeof(float) + 4);
    double *ua = calloc(nunits(K) + 1, sizeof(double));
    if (!Af || !Cf || !ua) { free(Af); free(Cf); free(ua); qs_i8_pack_free(&own); return qs_fail(e, "out of memory (int8 GEMM %zux%zux%zu)", R, N, K); }
    i8_gemm_sgemm(A, R, Bp, N, K, C, threads, Af, Cf, ua, nchunks);
    free(Af); free(Cf); free(ua);
    qs_i8_pack_free(&own);
    return 0;
}

size_t qs_msd_gemm_ws_bytes(size_t M, size_t N, size_t K, int passes)
{
    size_t R = (size_t)passes * M;   /* C, Cf, Af, unit maxima, amax, components */
    return R * N * (sizeof(int32_t) + sizeof(float)) + R * K * sizeof(float) + (nunits(K) + 1) * sizeof(double) +
           M * sizeof(float) + R * K + 64;
}

typedef struct { const int32_t *C; const float *amax, *sigma; size_t M, N; int passes; float *y; } comb_ctx;
static void comb_rows(void *vc, size_t lo, size_t hi)
{
    comb_ctx *c = vc;
    size_t MN = c->M * c->N;
    for (size_t m = lo; m < hi; m++) {
        double s = (double)c->amax[m] / 127.0;
        const int32_t *c1 = c->C + m * c->N;
        for (size_t n = 0; n < c->N; n++) {
            double v = (double)c1[n];
            if (c->passes > 1) v += (double)c1[MN + n] / 254.0;
            if (c->passes > 2) v += (double)c1[2 * MN + n] / 64516.0;
            c->y[m * c->N + n] = (float)(v * s * (double)c->sigma[n]);
        }
    }
}

int qs_msd_gemm_i8(const float *x, size_t M, size_t K, const int8_t *Wq, const qs_i8_pack *Wp, const float *sigma,
                   size_t N, int passes, qs_i8gemm_method method, int threads, float *y, void *ws, qs_err *e)
{
    if (passes < 1 || passes > QS_MSD_MAX_PASSES) return qs_fail(e, "msd: passes must be 1..%d", QS_MSD_MAX_PASSES);
    void *ownws = NULL;
    if (!ws) {
        ownws = ws = malloc(qs_msd_gemm_ws_bytes(M, N, K, passes));
        if (!ws) return qs_fail(e, "out of memory (MSD workspace)");
    }
    size_t R = (size_t)passes * M;
    double *ua = ws;   /* doubles first: the malloc'd workspace is aligned for them */
    int32_t *C = (int32_t *)(ua + nunits(K) + 1);
    float *Cf = (float *)(C + R * N), *Af = Cf + R * N;
    float *amax = Af + R * K;
    int8_t *a = (int8_t *)(amax + M);
    int th = threads > 0 ? threads : qs_blas_threads(), rc = -1;
    qs_i8_pack own;
    memset(&own, 0, sizeof own);
    if (decompose_par(x, M, K, passes, a, amax, th, e)) goto out;
    if (method == QS_I8GEMM_INT || K > QS_MSD_MAX_K) {
        if (qs_i8_gemm_exact(a, R, Wq, Wp, N, K, C, method, threads, NULL, e)) goto out;
    } else {
        if (Wp && (Wp->N != N || Wp->K != K)) { qs_fail(e, "msd: packed weight is %zux%zu, not %zux%zu", Wp->N, Wp->K, N, K); goto out; }
        if (!Wp) {
            if (qs_i8_pack_make(Wq, N, K, &own, e)) goto out;
            Wp = &own;
        }
        memset(ua, 0, (nunits(K) + 1) * sizeof(double));
        i8_gemm_sgemm(a, R, Wp, N, K, C, threads, Af, Cf, ua, NULL);
    }
    comb_ctx cc = {C, amax, sigma, M, N, passes, y};
    par_for(th >= 2 ? 2 : 1, M, comb_rows, &cc);
    rc = 0;
out:
    qs_i8_pack_free(&own);
    free(ownws);
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

int qs_gemm_ref(const float *x, const float *w, size_t M, size_t N, size_t K, double *y)
{
    double *xd = malloc(M * K * sizeof(double)), *wd = malloc(N * K * sizeof(double));
    if (!xd || !wd) { free(xd); free(wd); for (size_t i = 0; i < M * N; i++) y[i] = NAN; return -1; }
    for (size_t i = 0; i < M * K; i++) xd[i] = x[i];
    for (size_t i = 0; i < N * K; i++) wd[i] = w[i];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0, xd, (int)K, wd, (int)K, 0.0, y, (int)N);
    free(xd); free(wd);
    return 0;
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
