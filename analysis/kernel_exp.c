/* Kernel experiments: MSD, attention, Rollout-ResQ (see kernel_exp.h). */
#include "../kernels/cast_scale.h"
#include "kernel_exp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <xxhash.h>

#include "results.h"
#include "../kernels/msd.h"
#include "../store/json_out.h"
#include "../store/tensor.h"

char *qs_kx_canon(json_t *j) { return json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17)); }

void qs_kx_hash_text(const char *s, char out[33])
{
    XXH128_hash_t h = XXH3_128bits(s, strlen(s));
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
}

int qs_kx_store(qs_db *db, const char *hash, const char *kind, const char *format, json_t *opts, json_t *data,
                int64_t *id, qs_err *e)
{
    char *o = qs_kx_canon(opts), *d = qs_kx_canon(data);
    int rc = !o || !d ? qs_fail(e, "out of memory") : 0;
    if (!rc) rc = qs_db_begin(db, e);
    if (!rc) {
        rc = qs_result_put(db, hash, kind, format, o, d, id, e) || qs_db_commit(db, e);
        if (rc) qs_db_rollback(db);
    }
    free(o); free(d);
    return rc ? -1 : 0;
}

static json_t *jnum(double v) { return qs_json_num(v); }

static json_t *cmp_json(const qs_cmp *c)
{
    json_t *o = json_object();
    qs_json_set_num(o, "rel_l2", c->rel_l2);
    qs_json_set_num(o, "max_abs", c->max_abs);
    qs_json_set_num(o, "cosine", c->cosine);
    qs_json_set_num(o, "cos_diff", c->cos_diff);
    return o;
}

static void add_series(json_t *ser, const char *name, const double *x, const double *y, size_t n)
{
    json_t *xs = json_array(), *ys = json_array();
    for (size_t i = 0; i < n; i++) { json_array_append_new(xs, qs_json_num(x[i])); json_array_append_new(ys, jnum(y[i])); }
    json_array_append_new(ser, json_pack("{s:s,s:o,s:o}", "name", name, "x", xs, "y", ys));
}

static void sgemm_nt(const float *x, const float *w, size_t M, size_t N, size_t K, float beta, float *y)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x, (int)K, w, (int)K, beta, y, (int)N);
}

/* ---------------- MSD ---------------- */

/* Effective bits of the INT8 and MX decompositions on one distribution. */
static int msd_bits(const qs_kx_msd *o, qs_gen_kind dist, uint64_t seed, json_t *tab, json_t *ser, qs_err *e)
{
    size_t K = o->K, R = o->bits_samples / K ? o->bits_samples / K : 1, n = R * K;
    float *x = malloc(n * sizeof(float)), *parts = malloc(3 * n * sizeof(float));
    int8_t *a = malloc(3 * n);
    float *amax = malloc(R * sizeof(float));
    double *xr = malloc(n * sizeof(double));
    int rc = -1;
    if (!x || !parts || !a || !amax || !xr) { qs_fail(e, "out of memory (effective bits, %zu values)", n); goto out; }
    qs_gen_matrix(dist, seed, R, K, 1.0, x);
    const char *dn = qs_gen_name(dist);
    double px[3] = {1, 2, 3}, yb[3], yr[3], ym[3], ymb[3];
    for (int p = 1; p <= 3; p++) {
        if (qs_msd_decompose_i8(x, R, K, p, a, amax, e)) goto out;
        qs_msd_reconstruct_i8(a, amax, R, K, p, xr);
        yb[p - 1] = qs_eff_bits_bound(x, xr, R, K);
        yr[p - 1] = qs_eff_bits_rms(x, xr, n);
        json_array_append_new(tab, qs_json_add_nums(json_pack("{s:s,s:s,s:i}", "scheme", "int8", "data", dn, "passes", p),
                                                    "bits_rms", yr[p - 1], "bits_bound", yb[p - 1], (char *)NULL));
    }
    /* INT4 ablation (CANN's INT4-KV decomposition: L = 7.49, E = 14.98, up to 4 passes) */
    double px4[4] = {1, 2, 3, 4}, y4[4], y4b[4];
    int8_t *a4 = malloc(4 * n);
    if (!a4) { qs_fail(e, "out of memory"); goto out; }
    for (int p = 1; p <= 4; p++) {
        if (qs_msd_decompose_gen(x, R, K, p, 7.49, 14.98, a4, amax, e)) { free(a4); goto out; }
        qs_msd_reconstruct_gen(a4, amax, R, K, p, 7.49, 14.98, xr);
        y4[p - 1] = qs_eff_bits_rms(x, xr, n);
        y4b[p - 1] = qs_eff_bits_bound(x, xr, R, K);
        json_array_append_new(tab, qs_json_add_nums(json_pack("{s:s,s:s,s:i}", "scheme", "int4 (7.49/14.98)", "data", dn,
                                                              "passes", p),
                                                    "bits_rms", y4[p - 1], "bits_bound", y4b[p - 1], (char *)NULL));
    }
    free(a4);
    qs_msd_mx c = {o->mx, o->mx_o1, o->mx_ores, o->mx_shift};
    if (qs_msd_decompose_mx(&c, x, R, K, 3, parts, e)) goto out;
    for (size_t i = 0; i < n; i++) xr[i] = 0;
    size_t blk = qs_format_block(o->mx, &o->mx_o1);
    /* the pass-1 block scales X1 (E8M0 codes of an MX encode), for max|e|/X1 as in the spec's table */
    size_t nbr = blk && K % blk == 0 ? K / blk : 0;
    double *X1 = nbr && o->mx->meta_bytes == 1 ? malloc(R * nbr * sizeof(double)) : NULL;
    if (X1) {
        uint32_t *codes = malloc(K * sizeof(uint32_t));
        uint8_t *meta = malloc(nbr);
        float ts;
        for (size_t r = 0; codes && meta && r < R; r++) {
            if (o->mx->encode(o->mx, &o->mx_o1, x + r * K, K, codes, meta, &ts, e)) { free(codes); free(meta); free(X1); goto out; }
            for (size_t b = 0; b < nbr; b++) X1[r * nbr + b] = ldexp(1.0, (int)meta[b] - 127);
        }
        if (!codes || !meta) { free(X1); X1 = NULL; }
        free(codes); free(meta);
    }
    double yx1[3] = {NAN, NAN, NAN};
    for (int p = 1; p <= 3; p++) {
        for (size_t i = 0; i < n; i++) xr[i] += parts[(size_t)(p - 1) * n + i];
        ym[p - 1] = qs_eff_bits_rms(x, xr, n);
        if (X1) {
            double w1 = 0;
            for (size_t b = 0; b < R * nbr; b++)
                for (size_t i = b * blk; i < (b + 1) * blk; i++) w1 = fmax(w1, fabs(x[i] - xr[i]) / X1[b]);
            yx1[p - 1] = w1;
        }
        /* worst block: max |err| / block amax */
        double worst = 0;
        for (size_t b0 = 0; blk && b0 < n; b0 += blk) {
            double am = 0, me = 0;
            for (size_t i = b0; i < b0 + blk && i < n; i++) {
                am = fmax(am, fabs(x[i]));
                me = fmax(me, fabs(x[i] - xr[i]));
            }
            if (am > 0) worst = fmax(worst, me / am);
        }
        ymb[p - 1] = worst > 0 ? -log2(worst) : INFINITY;
        json_array_append_new(tab, qs_json_add_nums(json_pack("{s:s,s:s,s:i}", "scheme", o->mx->name, "data", dn, "passes", p),
                                                    "bits_rms", ym[p - 1], "bits_block_bound", ymb[p - 1],
                                                    "max_err_over_x1", yx1[p - 1], (char *)NULL));
    }
    free(X1);
    /* single-pass MXFP8 E4M3 with the no-clip (rceil) and the OCP floor scale */
    const qs_format *f8 = qs_format_find("mxfp8_e4m3");
    for (int rule = 0; f8 && rule < 2; rule++) {
        qs_qopts o8;
        memset(&o8, 0, sizeof o8);
        o8.scale_rule = rule ? QS_SCALE_FLOOR : QS_SCALE_RCEIL;
        for (size_t r = 0; r < R; r++)
            if (f8->fakeq(f8, &o8, x + r * K, K, parts + r * K, e)) goto out;
        for (size_t i = 0; i < n; i++) xr[i] = parts[i];
        double b = qs_eff_bits_rms(x, xr, n);
        json_array_append_new(tab, qs_json_add_nums(json_pack("{s:s,s:s,s:i,s:s}", "scheme", "mxfp8_e4m3", "data", dn, "passes", 1,
                                                              "scale_rule", rule ? "floor" : "rceil (no-clip)"),
                                                    "bits_rms", b, (char *)NULL));
        if (!rule) {
            char nm[96];
            snprintf(nm, sizeof nm, "MXFP8 E4M3 single pass, no-clip (%s)", dn);
            add_series(ser, nm, px, &b, 1);
        }
    }
    char nm[96];
    if (dist == QS_GEN_GAUSSIAN) {
        snprintf(nm, sizeof nm, "INT8 max-error bits log2(M/max|e|) (%s)", dn);
        add_series(ser, nm, px, yb, 3);
    }
    snprintf(nm, sizeof nm, "INT8 RMS bits (%s)", dn);
    add_series(ser, nm, px, yr, 3);
    snprintf(nm, sizeof nm, "INT4 RMS bits, L 7.49 / E 14.98 (%s)", dn);
    add_series(ser, nm, px4, y4, 4);
    snprintf(nm, sizeof nm, "%s RMS bits (%s, reconstructed recipe)", o->mx->name, dn);
    add_series(ser, nm, px, ym, 3);
    rc = 0;
out:
    free(x); free(parts); free(a); free(amax); free(xr);
    return rc;
}

/* Element-wise check of |x − x̂| ≤ M/64516 on the given rows, evaluated exactly:
** |x − (M/127)(a1 + a2/254)| ≤ M/64516  <=>  |32258·x − M·(254·a1 + a2)| ≤ M/2, where both products are
** exact in FP64 (24 × 15 bits) and the one rounded subtraction cannot cross M/2.  Returns the number
** of violations, *ratio = max err / bound. */
static size_t bound_check(const float *x, size_t R, size_t K, double *ratio, qs_err *e)
{
    int8_t *a = malloc(2 * R * K);
    float *am = malloc(R * sizeof(float));
    size_t bad = 0;
    *ratio = 0;
    if (!a || !am || qs_msd_decompose_i8(x, R, K, 2, a, am, e)) { free(a); free(am); return (size_t)-1; }
    for (size_t r = 0; r < R; r++) {
        double M = am[r];
        for (size_t k = 0; k < K && M > 0; k++) {
            double num = fabs(32258.0 * x[r * K + k] - M * (254.0 * a[r * K + k] + a[R * K + r * K + k]));
            if (num / (M / 2) > *ratio) *ratio = num / (M / 2);
            bad += num > M / 2;
        }
    }
    free(a); free(am);
    return bad;
}

/* Adversarial rows: values on the rounding ties of both passes, just beside them, ±amax, tiny values. */
static void adversarial_rows(float *x, size_t R, size_t K, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t r = 0; r < R; r++) {
        float amax = ldexpf(1.0f, (int)(r % 40) - 20) * (1.0f + (float)(r % 7) / 8);
        for (size_t k = 0; k < K; k++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            int a1 = (int)(s % 254) - 127, a2 = (int)((s >> 20) % 254) - 127, kind = (int)((s >> 40) % 5);
            double t = a1 + 0.5 + (a2 + 0.5) / 254.0;   /* tie in pass 2 after a pass-1 value near a tie */
            if (kind == 1) t = a1 + 0.5;                  /* exact pass-1 tie */
            if (kind == 2) t = nextafter(a1 + 0.5, 200);
            if (kind == 3) t = (s >> 8) % 2 ? 1e-6 : -127;
            if (t > 127) t = 127;
            if (t < -127) t = -127;
            x[r * K + k] = (float)(t / 127.0 * amax);
        }
        x[r * K + (r % K)] = (r % 2 ? -amax : amax);
    }
}

/* The bound check on the 2-pass GEMM: |y − y_ref| ≤ σ_n Σ|W| M_m/64516 + output rounding, per output. */
static void gemm_bound(const float *xb, const int8_t *Wq, const float *sig, const double *yq, const float *y, size_t M,
                       size_t N, size_t K, json_t *chk)
{
    size_t bad = 0;
    double worst = 0;
    for (size_t m = 0; m < M; m++) {
        float am = 0;
        for (size_t k = 0; k < K; k++) am = fmaxf(am, fabsf(xb[m * K + k]));
        for (size_t n = 0; n < N; n++) {
            double sw = 0;
            for (size_t k = 0; k < K; k++) sw += abs(Wq[n * K + k]);
            double bnd = sig[n] * sw * am / 64516.0 + fabs(yq[m * N + n]) * 1.2e-7 + 1e-30;
            double err = fabs(y[m * N + n] - yq[m * N + n]);
            worst = fmax(worst, err / bnd);
            bad += err > bnd;
        }
    }
    json_object_set_new(chk, "gemm_bound_violations", json_integer((json_int_t)bad));
    qs_json_set_num(chk, "gemm_bound_max_ratio", worst);
}

/* The element-wise bound on the activations: on this run's rows and on adversarial rows. */
static int act_bounds(const float *xb, size_t M, size_t K, uint64_t seed, json_t *chk, qs_err *e)
{
    double r1, r2;
    size_t b1 = bound_check(xb, M, K, &r1, e);
    size_t RA = 64, KA = K < 4096 ? K : 4096;
    float *adv = malloc(RA * KA * sizeof(float));
    if (!adv) return qs_fail(e, "out of memory");
    adversarial_rows(adv, RA, KA, seed);
    size_t b2 = bound_check(adv, RA, KA, &r2, e);
    free(adv);
    if (b1 == (size_t)-1 || b2 == (size_t)-1) return -1;
    json_object_set_new(chk, "bound", json_string("|x - x^| <= M/64516 per element"));
    json_object_set_new(chk, "bound_violations_random", json_integer((json_int_t)b1));
    qs_json_set_num(chk, "bound_max_ratio_random", r1);
    json_object_set_new(chk, "bound_violations_adversarial", json_integer((json_int_t)b2));
    qs_json_set_num(chk, "bound_max_ratio_adversarial", r2);
    return 0;
}

json_t *qs_kx_msd_run(const qs_kx_msd *o, json_t *opts, qs_err *e)
{
    size_t M = o->M, K = o->K, N = o->N;
    if (!M || !K || !N || K > QS_MSD_MAX_K || (double)M * K > 4e8 || (double)N * K > 4e8 || (double)M * N > 4e8)
        return qs_fail(e, "msd: shape M=%zu K=%zu N=%zu out of range (K ≤ %d, each matrix ≤ 4e8 values)", M, K, N,
                       QS_MSD_MAX_K), NULL;
    json_t *out = json_object(), *ser = json_array(), *bits = json_array(), *gemm = json_array(), *chk = json_object();
    float *x = malloc(M * K * sizeof(float)), *W = malloc(N * K * sizeof(float)), *Wd = malloc(N * K * sizeof(float));
    float *y = malloc(M * N * sizeof(float)), *sig = malloc(N * sizeof(float)), *xb = malloc(M * K * sizeof(float));
    float *parts = malloc(3 * M * K * sizeof(float));
    qs_i8_pack wp = {0};
    int8_t *Wq = malloc(N * K);
    double *yq = malloc(M * N * sizeof(double)), *yu = malloc(M * N * sizeof(double));
    int ok = 0;
    if (!x || !W || !Wd || !y || !sig || !xb || !parts || !Wq || !yq || !yu) { qs_fail(e, "out of memory (msd %zux%zux%zu)", M, K, N); goto out; }
    /* effective bits on Gaussian and uniform data */
    if (msd_bits(o, QS_GEN_GAUSSIAN, o->seed + 101, bits, ser, e) || msd_bits(o, QS_GEN_UNIFORM, o->seed + 202, bits, ser, e))
        goto out;
    /* inputs */
    if (o->x_in) memcpy(x, o->x_in, M * K * sizeof(float));
    else qs_gen_matrix(o->dist, o->seed, M, K, 1.0, x);
    for (int c = 0; c < o->outliers; c++) {
        size_t col = (size_t)((o->seed * 7919u + (uint64_t)c * 2654435761u) % K);
        for (size_t m = 0; m < M; m++) x[m * K + col] *= (float)o->outlier_mag;
    }
    for (size_t i = 0; i < M * K; i++) xb[i] = qs_bf16_round(x[i]);   /* BF16 activations */
    qs_gen_matrix(QS_GEN_GAUSSIAN, o->seed + 1, N, K, 0.02, W);
    qs_quant_w_i8(W, N, K, Wq, sig);
    for (size_t n = 0; n < N; n++)
        for (size_t k = 0; k < K; k++) Wd[n * K + k] = (float)Wq[n * K + k] * sig[n];
    if (qs_i8_pack_make(Wq, N, K, &wp, e)) goto out;
    qs_gemm_ref(xb, Wd, M, N, K, yq);   /* quantized model, FP64 (σ·Wq is exact in FP32) */
    qs_gemm_ref(xb, W, M, N, K, yu);    /* unquantized weights */
    qs_cmp cq, cu;
#define ROW(name, note) do { qs_cmp_f(y, yq, M * N, &cq); qs_cmp_f(y, yu, M * N, &cu); \
        json_array_append_new(gemm, json_pack("{s:s,s:s,s:o,s:o,s:s}", "weights", wname, "method", name, "vs_quantized", \
                                              cmp_json(&cq), "vs_unquantized", cmp_json(&cu), "note", note)); } while (0)
    const char *wname = "int8 per-channel";
    /* dequantize to FP32 / BF16, then SGEMM */
    sgemm_nt(xb, Wd, M, N, K, 0, y);
    ROW("dequant fp32 + sgemm", "W·σ in FP32, FP32 accumulate");
    {
        float *Wb = malloc(N * K * sizeof(float));
        if (!Wb) { qs_fail(e, "out of memory"); goto out; }
        for (size_t i = 0; i < N * K; i++) Wb[i] = qs_bf16_round(Wd[i]);
        sgemm_nt(xb, Wb, M, N, K, 0, y);
        free(Wb);
    }
    ROW("dequant bf16 + sgemm", "the usual W8A16 kernel: W·σ rounded to BF16");
    for (int p = 1; p <= 3; p++) {
        if (qs_msd_gemm_i8(xb, M, K, Wq, &wp, sig, N, p, QS_I8GEMM_SGEMM, 0, y, NULL, e)) goto out;
        char nm[64];
        snprintf(nm, sizeof nm, p == 1 ? "w8a8 (msd 1 pass)" : "msd %d-pass int8", p);
        ROW(nm, "one stacked INT8 GEMM, exact INT32 sums");
        if (p == 2) gemm_bound(xb, Wq, sig, yq, y, M, N, K, chk);
    }
    /* exactness of the SGEMM integer path against the int32 loop on this run's components */
    {
        size_t Mc = M < 64 ? M : 64;
        int8_t *a = malloc(2 * Mc * K);
        float *am = malloc(Mc * sizeof(float));
        int32_t *c1 = malloc(2 * Mc * N * sizeof(int32_t)), *c2 = malloc(2 * Mc * N * sizeof(int32_t));
        int nch = 0;
        int okx = a && am && c1 && c2 && !qs_msd_decompose_i8(xb, Mc, K, 2, a, am, e) &&
                  !qs_i8_gemm_exact(a, 2 * Mc, Wq, &wp, N, K, c1, QS_I8GEMM_SGEMM, 0, &nch, e) &&
                  !qs_i8_gemm_exact(a, 2 * Mc, Wq, NULL, N, K, c2, QS_I8GEMM_INT, 0, NULL, e);
        json_object_set_new(chk, "int_gemm_exact", json_boolean(okx && !memcmp(c1, c2, 2 * Mc * N * sizeof(int32_t))));
        json_object_set_new(chk, "int_gemm_k_chunks", json_integer(nch));
        free(a); free(am); free(c1); free(c2);
        if (!okx) goto out;
    }
    /* element-wise bound on the activations, random rows and adversarial rows */
    if (act_bounds(xb, M, K, o->seed, chk, e)) goto out;
    /* MXFP4 weights: dequant baseline, single-pass MXFP4 / MXFP8 activations, two-pass MSD */
    {
        wname = o->mx->name;
        float *Wm = malloc(N * K * sizeof(float));
        if (!Wm) { qs_fail(e, "out of memory"); goto out; }
        for (size_t n = 0; n < N; n++)
            if (o->mx->fakeq(o->mx, &o->mx_w, W + n * K, K, Wm + n * K, e)) { free(Wm); goto out; }
        qs_gemm_ref(xb, Wm, M, N, K, yq);
        sgemm_nt(xb, Wm, M, N, K, 0, y);
        ROW("dequant + sgemm (bf16 activations)", "MXFP4 values are exact in BF16");
        qs_msd_mx c = {o->mx, o->mx_o1, o->mx_ores, o->mx_shift};
        if (qs_msd_decompose_mx(&c, xb, M, K, 2, parts, e)) { free(Wm); goto out; }
        sgemm_nt(parts, Wm, M, N, K, 0, y);
        ROW("single pass (activations quantized once)", "W4A4");
        sgemm_nt(parts + M * K, Wm, M, N, K, 1, y);
        ROW("msd 2-pass (reconstructed recipe)", "two MX GEMMs, FP32 accumulate");
        const qs_format *f8 = qs_format_find("mxfp8_e4m3");
        if (f8) {
            qs_qopts o8;
            memset(&o8, 0, sizeof o8);
            o8.scale_rule = QS_SCALE_RCEIL;
            for (size_t m = 0; m < M; m++)
                if (f8->fakeq(f8, &o8, xb + m * K, K, parts + m * K, e)) { free(Wm); goto out; }
            sgemm_nt(parts, Wm, M, N, K, 0, y);
            ROW("mxfp8_e4m3 activations, single pass", "no-clip (rceil) scale");
        }
        free(Wm);
    }
#undef ROW
    json_object_set_new(out, "ylabel", json_string("effective bits"));
    json_object_set_new(out, "xlabel", json_string("passes"));
    json_object_set_new(out, "series", ser); ser = NULL;
    json_object_set_new(out, "effective_bits", bits); bits = NULL;
    json_object_set_new(out, "gemm", gemm); gemm = NULL;
    json_object_set_new(out, "checks", chk); chk = NULL;
    json_object_set_new(out, "reference",
                        json_string("FP64 product of the quantized model (BF16 x, dequantized W) and of the unquantized W"));
    json_object_set_new(out, "reconstructed",
                        json_string("the MXFP4 two-pass recipe (scale rules, residual scale) is the project's reconstruction; "
                                    "INT8 follows CANN's A16W8 MSD exactly"));
    json_object_set_new(out, "options", json_incref(opts));
    ok = 1;
out:
    free(x); free(W); free(Wd); free(y); free(sig); free(xb); free(parts); free(Wq); free(yq); free(yu);
    qs_i8_pack_free(&wp);
    json_decref(ser); json_decref(bits); json_decref(gemm); json_decref(chk);
    if (!ok) { json_decref(out); return NULL; }
    return out;
}

/* ---------------- attention ---------------- */

typedef struct { const char *name; double y[64]; } aser;

static int attn_one(const qs_kx_attn *o, size_t L, size_t li, aser *ss, size_t *nss, json_t *rows, qs_err *e)
{
    qs_attn_shape s = o->s;
    s.Lk = L;
    s.Lq = o->lq_fixed ? o->lq_fixed : L;
    if (qs_attn_shape_check(&s, e)) return -1;
    size_t nq = s.H * s.Lq * s.d, nk = s.Hkv * s.Lk * s.d, nv = s.Hkv * s.Lk * s.dv, no = s.H * s.Lq * s.dv;
    float *Q = malloc(nq * 4), *K = malloc(nk * 4), *V = malloc(nv * 4), *O = malloc(no * 4);
    float *Kq = malloc(nk * 4), *Vq = malloc(nv * 4), *Qd = malloc(nq * 4);
    double *R = malloc(no * 8), *Rq = malloc(no * 8), *Od = malloc(no * 8);
    int rc = -1;
    if (!Q || !K || !V || !O || !Kq || !Vq || !Qd || !R || !Rq || !Od) { qs_fail(e, "out of memory (attention L=%zu)", L); goto out; }
    if (o->Qin) {
        for (size_t i = 0; i < nq; i++) Q[i] = (float)(o->Qin[i] * o->qscale);
        memcpy(K, o->Kin, nk * 4);
    } else {
        qs_gen_matrix(o->dist, o->seed + L, s.H * s.Lq, s.d, o->qscale, Q);
        qs_gen_matrix(o->dist, o->seed + 7 * L + 1, s.Hkv * s.Lk, s.d, 1.0, K);
    }
    if (o->mla)
        for (size_t t = 0; t < s.Hkv * s.Lk; t++) memcpy(V + t * s.dv, K + t * s.d, s.dv * 4);
    else if (o->Vin) memcpy(V, o->Vin, nv * 4);
    else qs_gen_matrix(o->dist, o->seed + 13 * L + 2, s.Hkv * s.Lk, s.dv, 1.0, V);
    qs_attn_cfg c = o->cfg;
    int causal = c.causal;
    if (qs_attn_ref(&s, causal, c.scale, Q, K, V, R, NULL, e)) goto out;
    size_t ns = 0;
    qs_cmp cq, cu;
#define REC(NM, vsq, note) do { \
        if (vsq) qs_cmp_f(O, Rq, no, &cq); else qs_cmp_f(O, R, no, &cq); \
        qs_cmp_f(O, R, no, &cu); \
        ss[ns].name = NM; ss[ns].y[li] = vsq == 2 ? cu.rel_l2 : cq.rel_l2; ns++; \
        json_array_append_new(rows, json_pack("{s:I,s:s,s:o,s:o,s:s}", "L", (json_int_t)L, "kernel", NM, \
                              "vs_same_inputs", cmp_json(&cq), "vs_unquantized", cmp_json(&cu), "note", note)); } while (0)
#define RECD(NM, note) do { qs_cmp_d(Od, Rq, no, &cq); qs_cmp_d(Od, R, no, &cu); \
        ss[ns].name = NM; ss[ns].y[li] = cq.rel_l2; ns++; \
        json_array_append_new(rows, json_pack("{s:I,s:s,s:o,s:o,s:s}", "L", (json_int_t)L, "kernel", NM, \
                              "vs_same_inputs", cmp_json(&cq), "vs_unquantized", cmp_json(&cu), "note", note)); } while (0)
    c.p = QS_P_FP32; c.splits = 1;
    if (qs_attn_fa2(&s, &c, Q, K, V, O, NULL, e)) goto out;
    REC("FA2 fp32", 0, "SGEMM tiles, online softmax");
    c.splits = o->cfg.splits > 1 ? o->cfg.splits : 4;
    if (qs_attn_fa2(&s, &c, Q, K, V, O, NULL, e)) goto out;
    REC("FA2 fp32 split-KV", 0, "flash-decoding combine through LSE");
    c.splits = 1; c.p = QS_P_BF16;
    if (qs_attn_fa2(&s, &c, Q, K, V, O, NULL, e)) goto out;
    REC("FA2 P bf16", 0, "P rounded to BF16 before PV");
    if (qs_attn_amla(&s, &c, Q, K, V, O, e)) goto out;
    REC("AMLA P bf16", 0, "integer add on the FP32 bits + 1.5 eps compensation");
    c.amla_nocomp = 1;
    if (qs_attn_amla(&s, &c, Q, K, V, O, e)) goto out;
    REC("AMLA P bf16 no comp.", 0, "ablation: without the compensation term");
    c.amla_nocomp = 0;
    /* MX attention: FLOOR vs UOS scales, normalize-then-quantize vs PNQ */
    for (int rule = 0; o->mx && rule < 2; rule++)
        for (int pq = QS_PQ_NTQ; pq <= QS_PQ_PNQ; pq++) {
            qs_attn_mx m;
            memset(&m, 0, sizeof m);
            m.f = o->mx;
            m.oqk.scale_rule = m.ov.scale_rule = m.op.scale_rule = rule ? QS_SCALE_UOS : QS_SCALE_FLOOR;
            m.oqk.uos_qmax = m.ov.uos_qmax = m.op.uos_qmax = o->uos_qmax;
            m.quant_qkv = 1;
            m.pq = (qs_pquant)pq;
            if (qs_attn_mx_run(&s, causal, c.scale, &m, Q, K, V, Od, Qd, Kq, Vq, e)) goto out;
            if (qs_attn_ref(&s, causal, c.scale, Qd, Kq, Vq, Rq, NULL, e)) goto out;
            static const char *nm[2][3] = {{"", "MXFP4 floor, normalize-then-quantize", "MXFP4 floor, PNQ"},
                                           {"", "MXFP4 UOS, normalize-then-quantize", "MXFP4 UOS, PNQ"}};
            RECD(nm[rule][pq], "materialized simulation in FP64; UOS/PNQ as reconstructed in formats-mx.md 5");
            if (rule == 1 && pq == QS_PQ_PNQ) {   /* the online (tiled) PNQ of a flash kernel */
                m.tile = c.bc ? c.bc : 256;
                if (qs_attn_mx_run(&s, causal, c.scale, &m, Q, K, V, Od, NULL, NULL, NULL, e)) goto out;
                RECD("MXFP4 UOS, PNQ online (key tiles)", "per-tile running max; not bit-identical to the materialized form");
            }
        }
    /* KV cache in a registry format */
    if (o->kv) {
        for (size_t t = 0; t < s.Hkv * s.Lk; t++) {
            /* element casts get the shared per-run scale (kernels/cast_scale.h), as `llm --kv-format` */
            if (qs_cast_scaled(o->kv, &o->kv_o, K + t * s.d, s.d, Kq + t * s.d, e)) goto out;
            if (qs_cast_scaled(o->kv, &o->kv_o, V + t * s.dv, s.dv, Vq + t * s.dv, e)) goto out;
        }
        if (qs_attn_ref(&s, causal, c.scale, Q, Kq, Vq, Rq, NULL, e)) goto out;
        c.p = QS_P_FP32;
        if (qs_attn_fa2(&s, &c, Q, Kq, Vq, O, NULL, e)) goto out;
        static char kvn[80];
        snprintf(kvn, sizeof kvn, "FA2, KV cache %s (vs unquantized)", o->kv->name);
        REC(kvn, 2, "K/V fake-quantized per token along d (element casts: one FP32 scale per token, absmax -> the scale target)");
    }
    /* MSD decode path with INT8 K/V versus the dequant-to-BF16 baseline */
    if (o->msd_passes > 0) {
        qs_kv_i8 kv;
        if (qs_kv_i8_quant(&s, K, V, &kv, e)) goto out;
        qs_kv_i8_dequant(&s, &kv, 0, Kq, Vq);
        if (qs_attn_ref(&s, causal, c.scale, Q, Kq, Vq, Rq, NULL, e)) { qs_kv_i8_free(&kv); goto out; }
        qs_attn_cfg cm = c;
        cm.bc = 512;
        if (qs_attn_msd_decode(&s, &cm, Q, &kv, o->msd_passes, O, e)) { qs_kv_i8_free(&kv); goto out; }
        REC(o->msd_passes == 3 ? "MSD decode INT8 KV, 3-pass" : "MSD decode INT8 KV, 2-pass", 1, "Q and P decomposed (A.6)");
        qs_kv_i8_dequant(&s, &kv, 1, Kq, Vq);
        for (size_t i = 0; i < nq; i++) Qd[i] = qs_bf16_round(Q[i]);
        cm.p = QS_P_BF16;
        cm.threads = c.threads;
        int r2 = qs_attn_fa2(&s, &cm, Qd, Kq, Vq, O, NULL, e);
        qs_kv_i8_free(&kv);
        if (r2) goto out;
        REC("dequant INT8 KV to BF16 + FA2 (P bf16)", 1, "baseline of the MSD decode path");
        /* INT4 KV: CANN's four passes with normaliser 7.49 and expansion 14.98 */
        if (qs_kv_int_quant(&s, K, V, 7, &kv, e)) goto out;
        qs_kv_i8_dequant(&s, &kv, 0, Kq, Vq);
        if (qs_attn_ref(&s, causal, c.scale, Q, Kq, Vq, Rq, NULL, e)) { qs_kv_i8_free(&kv); goto out; }
        cm.p = QS_P_FP32;
        if (qs_attn_msd_decode(&s, &cm, Q, &kv, 4, O, e)) { qs_kv_i8_free(&kv); goto out; }
        REC("MSD decode INT4 KV, 4-pass (7.49/14.98)", 1, "CANN KVINT4_ITER_NUM = 4");
        qs_kv_i8_dequant(&s, &kv, 1, Kq, Vq);
        cm.p = QS_P_BF16;
        r2 = qs_attn_fa2(&s, &cm, Qd, Kq, Vq, O, NULL, e);
        qs_kv_i8_free(&kv);
        if (r2) goto out;
        REC("dequant INT4 KV to BF16 + FA2 (P bf16)", 1, "baseline of the INT4 MSD decode path");
    }
#undef REC
#undef RECD
    *nss = ns;
    rc = 0;
out:
    free(Q); free(K); free(V); free(O); free(Kq); free(Vq); free(Qd); free(R); free(Rq); free(Od);
    return rc;
}

json_t *qs_kx_attn_run(const qs_kx_attn *o, json_t *opts, qs_err *e)
{
    if (!o->nL || o->nL > 64) return qs_fail(e, "attn: give 1..64 sequence lengths"), NULL;
    aser ss[32];
    memset(ss, 0, sizeof ss);
    json_t *rows = json_array();
    size_t ns = 0;
    for (size_t i = 0; i < o->nL; i++)
        if (attn_one(o, o->Ls[i], i, ss, &ns, rows, e)) { json_decref(rows); return NULL; }
    json_t *ser = json_array();
    double xs[64];
    for (size_t i = 0; i < o->nL; i++) xs[i] = (double)o->Ls[i];
    for (size_t k = 0; k < ns; k++) add_series(ser, ss[k].name, xs, ss[k].y, o->nL);
    return json_pack("{s:s,s:s,s:o,s:o,s:o,s:s}", "ylabel", "rel. L2 error vs FP64 on the same quantized inputs", "xlabel",
                     "sequence length (keys)", "series", ser, "rows", rows, "options", json_incref(opts), "reconstructed",
                     "UOS/PNQ follow the third-party MXAttention reimplementation (formats-mx.md 5); AMLA and FA2 are certain");
}

/* ---------------- Rollout-ResQ ---------------- */

json_t *qs_kx_resq_run(const qs_kx_resq *o, json_t *opts, qs_err *e)
{
    size_t m = o->m, d = o->d, n = o->n;
    if (!m || !d || !n || (double)m * d > 2e8 || (double)n * d > 2e8 || (double)m * n > 2e8)
        return qs_fail(e, "resq: shape m=%zu d=%zu n=%zu out of range", m, d, n), NULL;
    float *X = malloc(m * d * 4), *W = malloc(n * d * 4), *Wq = malloc(n * d * 4), *Y = malloc(m * n * 4);
    double *Yr = malloc(m * n * 8), *Yw = malloc(m * n * 8);
    json_t *rows = json_array(), *ser = json_array(), *out = NULL;
    char *list = strdup(o->formats ? o->formats : "hif4,mxfp4,nvfp4");
    if (!X || !W || !Wq || !Y || !Yr || !Yw || !list) { qs_fail(e, "out of memory (resq)"); goto out; }
    qs_gen_spec g;
    memset(&g, 0, sizeof g);
    qs_gen_defaults(&g);
    g.kind = QS_GEN_LLM_ACT; g.seed = o->seed; g.rows = m; g.cols = d;
    if (o->outliers >= 0) g.outlier_channels = o->outliers;
    if (o->outlier_min > 0) g.outlier_min = o->outlier_min;
    if (o->outlier_max > 0) g.outlier_max = o->outlier_max;
    if (o->x_in) memcpy(X, o->x_in, m * d * sizeof(float));
    else qs_gen_fill(&g, 0, m * d, X);
    qs_gen_matrix(QS_GEN_GAUSSIAN, o->seed + 1, n, d, 0.02, W);
    qs_gemm_ref(X, W, m, n, d, Yr);
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const qs_format *f = qs_format_find(tok);
        if (!f) { qs_fail(e, "resq: unknown format '%s' (see `qscope formats`)", tok); goto out; }
        qs_apply a;
        memset(&a, 0, sizeof a);
        a.f = f; a.axis = 1; a.gran = QS_GRAN_BLOCK;
        if (!f->block) a.gran = QS_GRAN_ROW;
        if (qs_fakeq_matrix(&a, W, n, d, Wq, e)) goto out;
        qs_gemm_ref(X, Wq, m, n, d, Yw);   /* isolates the activation error that ResQ targets */
        double xs[QS_RESQ_COUNT], ys[QS_RESQ_COUNT];
        for (int sp = 0; sp < QS_RESQ_COUNT; sp++) {
            qs_resq_stats st;
            if (qs_resq_layer(&a, X, m, d, Wq, n, (qs_resq_sparse)sp, o->bh, o->bw, Y, &st, e)) goto out;
            qs_cmp c, cw;
            qs_cmp_f(Y, Yr, m * n, &c);
            qs_cmp_f(Y, Yw, m * n, &cw);
            xs[sp] = sp; ys[sp] = c.rel_l2;
            json_array_append_new(rows, qs_json_add_nums(json_pack("{s:s,s:s,s:o,s:o}", "format", f->name, "sparsity",
                                                                   qs_resq_name((qs_resq_sparse)sp), "vs_fp32", cmp_json(&c),
                                                                   "vs_fp32_act_quant_w", cmp_json(&cw)),
                                                         "underflow", st.underflow, "recovered", st.recovered,
                                                         "residual_energy_kept", st.kept, "density", st.density,
                                                         (char *)NULL));
        }
        add_series(ser, f->name, xs, ys, QS_RESQ_COUNT);
    }
    out = json_pack("{s:s,s:s,s:o,s:o,s:o,s:s}", "ylabel", "relative L2 error vs the FP32 layer", "xlabel",
                    "variant (0 none, 1 dense, 2 2:4, 3 ch50, 4 blk50)", "series", ser, "rows", rows, "options",
                    json_incref(opts), "reconstructed",
                    "Rollout-ResQ from secondary summaries (formats-hifloat.md 4): block shape and tie rules are choices");
    ser = rows = NULL;
out:
    free(X); free(W); free(Wq); free(Y); free(Yr); free(Yw); free(list);
    json_decref(rows); json_decref(ser);
    return out;
}

/* Read a stored tensor as a rows x cols float matrix (rows = product of the leading dims) for a
** kernel experiment (cmd names it in messages); hash = its content hash.  Every element must be
** finite. */
int qs_kx_load_tensor(qs_db *db, const char *cmd, const char *name, uint64_t max_cols, uint64_t *rows, uint64_t *cols,
                      char hash[33], float **x, qs_err *e)
{
    qs_tensor_rec t;
    *x = NULL;
    if (qs_tensor_get(db, name, &t, e)) return -1;
    qs_tensor_matrix_view(t.shape, t.ndim, rows, cols);
    if (*cols > max_cols || *rows * *cols > (1u << 26)) {
        qs_tensor_rec_free(&t);
        return qs_fail(e, "%s: %llux%llu is too large for %s (at most %llu columns and 2^26 values)", name,
                       (unsigned long long)*rows, (unsigned long long)*cols, cmd, (unsigned long long)max_cols);
    }
    float *buf = malloc(*rows * *cols * sizeof(float) + 4);
    qs_treader *r = buf ? qs_treader_open(db, &t, e) : NULL;
    int rc = !r || qs_treader_read_f32(r, 0, *rows * *cols, buf, e) || qs_treader_verify(r, e);
    qs_treader_close(r);
    if (!buf) qs_fail(e, "out of memory");
    for (uint64_t i = 0; !rc && i < *rows * *cols; i++)
        if (!isfinite(buf[i])) { rc = 1; qs_fail(e, "%s: element %llu is not finite", name, (unsigned long long)i); }
    snprintf(hash, 33, "%s", t.hash);
    qs_tensor_rec_free(&t);
    if (rc) { free(buf); return -1; }
    *x = buf;
    return 0;
}
