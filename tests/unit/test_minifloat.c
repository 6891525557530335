/*
** Tests for the element minifloats (kernels/minifloat.c), the plain-cast descriptors
** (kernels/format_float.c) and the vectorised paths (kernels/simd.c).
**
**   - conformance: the numpy / ml_dtypes vectors in tests/fixtures/formats/ (made by
**     tests/fixtures/make_float_vectors.py), bit-exact, RNE non-saturating; NaN results match by
**     NaN-ness and sign (numpy's float16 keeps payload bits, we return the canonical quiet NaN);
**   - an independent reference: each format's value table built here from the field formula,
**     rounding by search (nearest with ties to the even code, ties away, toward zero, and SR's
**     exact threshold), compared with qs_mf_encode for every mode and sat on adversarial inputs;
**   - properties: half-ulp error, RTZ never grows, SR neighbours and mean, sign symmetry,
**     monotonicity, sat vs non-sat, TA vs RNE on ties, decode/encode round trips of every code;
**   - spec vectors (formats-mx.md §7.2: T29-T31), E8M0 modes;
**   - descriptors: fields, encode/decode/fakeq agreement, SR counters, errors;
**   - the array paths (portable bit form, AVX2, AVX-512) bit-identical to qs_mf_round on millions
**     of adversarial inputs; QS_SIMD=scalar.
*/
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../kernels/dtype.h"
#include "../../kernels/format_families.h"
#include "../../kernels/minifloat.h"
#include "../../kernels/simd.h"
#include "../../kernels/sr.h"

#define DIR "fixtures/formats/"

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Same float32 bits, or both NaN with the same sign. */
static int same_value(float a, float b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) && signbit(a) == signbit(b);
    return f2u(a) == f2u(b);
}

static const qs_minifloat *const kMf[] = {&qs_mf_bf16, &qs_mf_fp16, &qs_mf_e4m3, &qs_mf_e5m2,
                                          &qs_mf_e3m2, &qs_mf_e2m3, &qs_mf_e2m1};
#define NMF (sizeof kMf / sizeof kMf[0])
#define N_(a) (sizeof (a) / sizeof (a)[0])
static const qs_round kModes[] = {QS_RND_RNE, QS_RND_TA, QS_RND_RTZ, QS_RND_SR};

static const qs_format *find_float(const char *name)
{
    for (size_t i = 0; i < qs_formats_float_n; i++)
        if (strcmp(qs_formats_float[i].name, name) == 0) return &qs_formats_float[i];
    fail_msg("no float format %s", name);
    return NULL;
}

/* Simple deterministic generator for test inputs. */
static uint64_t g_rng = 0x243f6a8885a308d3ULL;
static uint32_t rnd32(void)
{
    g_rng = g_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(g_rng >> 32);
}

/* ------------------------------------------------ independent reference (value table + search) */

typedef struct ref_tab {
    const qs_minifloat *f;
    double *v;          /* v[c] = value of positive code c, c = 0..maxc (increasing) */
    uint32_t maxc, infc, nanc, sign;
} ref_tab;

static void ref_init(ref_tab *t, const qs_minifloat *f)
{
    const int E = f->ebits, M = f->mbits, nb = E + M;
    uint32_t all = (1u << nb) - 1;
    t->f = f;
    t->sign = 1u << nb;
    t->infc = ((1u << E) - 1) << M;
    if (f->kind == QS_MF_IEEE) { t->maxc = t->infc - 1; t->nanc = t->infc | (1u << (M - 1)); }
    else if (f->kind == QS_MF_FN) { t->maxc = all - 1; t->nanc = all; }
    else { t->maxc = all; t->nanc = 0; }
    t->v = malloc((t->maxc + 2) * sizeof *t->v);
    for (uint32_t c = 0; c <= t->maxc; c++) {
        uint32_t e = c >> M, m = c & ((1u << M) - 1);
        t->v[c] = e == 0 ? ldexp((double)m, 1 - f->bias - M) : ldexp(1.0 + ldexp((double)m, -M), (int)e - f->bias);
    }
    /* one virtual grid point past max, at the top binade's step: "overflow" */
    t->v[t->maxc + 1] = t->v[t->maxc] + (t->v[t->maxc] - t->v[t->maxc - 1]);
}

static void ref_free(ref_tab *t) { free(t->v); }

/* Largest k with v[k] <= a (a >= 0, finite), k <= maxc + 1. */
static uint32_t ref_floor(const ref_tab *t, double a)
{
    uint32_t lo = 0, hi = t->maxc + 1;
    if (a >= t->v[hi]) return hi;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->v[mid] <= a) lo = mid; else hi = mid;
    }
    return lo;
}

/* Expected code of finite x by the documented rules. */
static uint32_t ref_encode(const ref_tab *t, float x, qs_round mode, double u, int sat)
{
    uint32_t s = signbit(x) ? t->sign : 0;
    double a = fabs((double)x);
    uint32_t k = ref_floor(t, a), idx;
    if (k > t->maxc) idx = k;                             /* at or past the virtual point */
    else if (t->v[k] == a) idx = k;
    else {
        double lo = t->v[k], hi = t->v[k + 1], mid = (lo + hi) / 2;
        switch (mode) {
        case QS_RND_RTZ: idx = k; break;
        case QS_RND_TA: idx = a >= mid ? k + 1 : k; break;
        case QS_RND_SR: idx = u < (a - lo) / (hi - lo) ? k + 1 : k; break;
        default: idx = a > mid ? k + 1 : a < mid ? k : (k & 1 ? k + 1 : k); break;
        }
    }
    if (idx > t->maxc) {
        if (sat || t->f->kind == QS_MF_FINITE || mode == QS_RND_RTZ) return s | t->maxc;
        return s | (t->f->kind == QS_MF_IEEE ? t->infc : t->nanc);
    }
    return s | idx;
}

/* Adversarial inputs for a format: every value, midpoint and their float32 neighbours (both
** signs), float32 subnormals, powers of two across the float32 range, extremes and random bits. */
static float *adversarial(const ref_tab *t, size_t *n)
{
    size_t cap = (size_t)(t->maxc + 2) * 20 + 277 * 3 + 11 + 4000, k = 0;
    float *x = malloc(cap * sizeof *x);
    for (uint32_t c = 0; c <= t->maxc + 1; c++) {
        float pts[2] = {(float)t->v[c], c ? (float)((t->v[c - 1] + t->v[c]) / 2) : 0.0f};
        for (int p = 0; p < 2; p++)
            for (int d = -2; d <= 2; d++) {
                int64_t u = (int64_t)f2u(pts[p]) + d;
                if (u < 0 || u > 0x7f800000) continue;
                x[k++] = u2f((uint32_t)u);
                x[k++] = -u2f((uint32_t)u);
            }
    }
    for (int e = -149; e <= 127; e++) {
        float p = ldexpf(1.0f, e);
        x[k++] = p; x[k++] = -nextafterf(p, 0); x[k++] = nextafterf(p, INFINITY);
    }
    static const uint32_t sp[] = {0, 0x80000000u, 1, 0x80000001u, 0x007fffffu, 0x00400000u, 0x00400001u,
                                  0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) x[k++] = u2f(sp[i]);
    assert_true(k <= cap);
    while (k < cap) {
        uint32_t r = rnd32();
        if ((r & 0x7f800000u) == 0x7f800000u) continue;   /* NaN/Inf tested on their own */
        x[k++] = u2f(r);
    }
    *n = k;
    return x;
}

/* ------------------------------------------------------------------- conformance vectors */

typedef struct vec_case { const char *file; const qs_minifloat *mf; const char *reg; int width; } vec_case;
static const vec_case kVec[] = {
    {"bfloat16", &qs_mf_bf16, "bf16", 2},          {"float16", &qs_mf_fp16, "fp16", 2},
    {"float8_e4m3fn", &qs_mf_e4m3, "fp8_e4m3", 1}, {"float8_e5m2", &qs_mf_e5m2, "fp8_e5m2", 1},
    {"float6_e3m2fn", &qs_mf_e3m2, "fp6_e3m2", 1}, {"float6_e2m3fn", &qs_mf_e2m3, "fp6_e2m3", 1},
    {"float4_e2m1fn", &qs_mf_e2m1, "fp4_e2m1", 1}, {"float8_e8m0fnu", NULL, "e8m0", 1},
};

static size_t load_vectors(const vec_case *c, const char *in_name, const char *code_name, float **x,
                           uint32_t **codes)
{
    char p[256];
    size_t ln = 0, lc = 0;
    snprintf(p, sizeof p, DIR "%s", in_name);
    uint8_t *bi = tu_slurp(p, &ln);
    if (!bi) fail_msg("cannot read %s (run from tests/)", p);
    snprintf(p, sizeof p, DIR "%s", code_name);
    uint8_t *bc = tu_slurp(p, &lc);
    if (!bc) fail_msg("cannot read %s", p);
    size_t n = ln / 4;
    assert_int_equal(ln % 4, 0);
    assert_int_equal(lc, n * (size_t)c->width);
    *x = malloc(n * sizeof **x);
    *codes = malloc(n * sizeof **codes);
    for (size_t i = 0; i < n; i++) {
        (*x)[i] = u2f((uint32_t)bi[4 * i] | (uint32_t)bi[4 * i + 1] << 8 | (uint32_t)bi[4 * i + 2] << 16 |
                      (uint32_t)bi[4 * i + 3] << 24);
        (*codes)[i] = c->width == 2 ? (uint32_t)bc[2 * i] | (uint32_t)bc[2 * i + 1] << 8 : bc[i];
    }
    free(bi);
    free(bc);
    return n;
}

static float dec(const vec_case *c, uint32_t code) { return c->mf ? qs_mf_decode(c->mf, code) : qs_e8m0_decode((uint8_t)code); }

static void check_vector_file(const vec_case *c, const char *in_name, const char *code_name)
{
    float *x;
    uint32_t *ref;
    size_t n = load_vectors(c, in_name, code_name, &x, &ref);
    assert_true(n > 1000);
    const qs_format *f = find_float(c->reg);
    uint32_t *got = malloc(n * sizeof *got);
    float *y = malloc(n * sizeof *y);
    qs_err e;
    qs_qopts o = {0};
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t g = c->mf ? qs_mf_encode(c->mf, x[i], QS_RND_RNE, 0, 0) : qs_e8m0_encode(x[i], QS_RND_RNE);
        int ok = g == ref[i];
        if (!ok && c->mf && c->mf->kind != QS_MF_FINITE && isnan(dec(c, ref[i])))
            ok = isnan(dec(c, g)) && signbit(dec(c, g)) == signbit(dec(c, ref[i]));   /* payload */
        if (ok && c->mf) ok = same_value(qs_mf_round(c->mf, x[i], QS_RND_RNE, 0, 0), dec(c, ref[i]));
        if (!ok && bad++ < 8)
            print_message("# %s %s: x=%a (0x%08x) ml_dtypes 0x%x, qscope 0x%x\n", c->file, in_name, x[i],
                          f2u(x[i]), ref[i], g);
    }
    assert_int_equal(bad, 0);
    /* the registry, at every SIMD level this CPU has */
    assert_int_equal(f->encode(f, &o, x, n, got, NULL, NULL, &e), 0);
    for (size_t i = 0; i < n; i++) assert_true(same_value(dec(c, got[i]), dec(c, ref[i])));
    for (int lvl = 0; lvl <= qs_simd_cpu(); lvl++) {
        qs_simd_force(lvl);
        assert_int_equal(f->fakeq(f, &o, x, n, y, &e), 0);
        for (size_t i = 0; i < n; i++)
            if (!same_value(y[i], dec(c, ref[i]))) fail_msg("%s level %d x=%a: %a", c->reg, lvl, x[i], y[i]);
    }
    qs_simd_force(-1);
    free(x); free(ref); free(got); free(y);
}

static void test_conformance(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof kVec / sizeof kVec[0]; k++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "%s.in", kVec[k].file);
        snprintf(b, sizeof b, "%s.code", kVec[k].file);
        check_vector_file(&kVec[k], a, b);
        snprintf(b, sizeof b, "%s.common", kVec[k].file);
        check_vector_file(&kVec[k], "common.in", b);
    }
}

/* ----------------------------------------------------------------- decode / code round trips */

static void test_decode_matches_dtype(void **state)
{
    (void)state;
    /* dtype.c's NaN loses the sign for the FP8/E8M0 types: compare NaN-ness there */
    for (uint32_t c = 0; c < 65536; c++) {
        assert_true(same_value(qs_mf_decode(&qs_mf_fp16, c), qs_f16_to_f32((uint16_t)c)));
        assert_true(same_value(qs_mf_decode(&qs_mf_bf16, c), qs_bf16_to_f32((uint16_t)c)));
    }
    for (uint32_t c = 0; c < 256; c++) {
        float a = qs_mf_decode(&qs_mf_e4m3, c), b = qs_mf_decode(&qs_mf_e5m2, c), d = qs_e8m0_decode((uint8_t)c);
        assert_true(isnan(a) ? isnan(qs_e4m3_to_f32((uint8_t)c)) : same_value(a, qs_e4m3_to_f32((uint8_t)c)));
        assert_true(isnan(b) ? isnan(qs_e5m2_to_f32((uint8_t)c)) : same_value(b, qs_e5m2_to_f32((uint8_t)c)));
        assert_true(isnan(d) ? isnan(qs_e8m0_to_f32((uint8_t)c)) : same_value(d, qs_e8m0_to_f32((uint8_t)c)));
    }
    /* the value tables of spec §1.4 */
    static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (uint32_t c = 0; c < 16; c++) {
        float v = qs_mf_decode(&qs_mf_e2m1, c);
        assert_true(same_value(v, c & 8 ? -e2m1[c & 7] : e2m1[c]));
    }
    assert_true(qs_mf_decode(&qs_mf_e2m3, 0x1F) == 7.5f && qs_mf_decode(&qs_mf_e2m3, 0x07) == 0.875f);
    assert_true(qs_mf_decode(&qs_mf_e3m2, 0x1F) == 28.0f && qs_mf_decode(&qs_mf_e3m2, 0x01) == 0.0625f);
    assert_true(qs_mf_decode(&qs_mf_e3m2, 0x3F) == -28.0f);
    assert_int_equal(f2u(qs_mf_decode(&qs_mf_e2m1, 0x8)), 0x80000000u);   /* -0 */
}

static void test_roundtrip_every_code(void **state)
{
    (void)state;
    for (size_t k = 0; k < NMF; k++) {
        const qs_minifloat *f = kMf[k];
        uint32_t ncodes = 1u << (f->ebits + f->mbits + 1);
        for (uint32_t c = 0; c < ncodes; c++) {
            float v = qs_mf_decode(f, c);
            for (size_t m = 0; m < 4; m++)
                for (int sat = 0; sat < 2; sat++) {
                    uint32_t back = qs_mf_encode(f, v, kModes[m], 0.37, sat);
                    if (isnan(v)) {      /* NaN aliases: the canonical NaN of the same sign */
                        assert_true(isnan(qs_mf_decode(f, back)));
                        assert_int_equal(back >> (f->ebits + f->mbits), c >> (f->ebits + f->mbits));
                    } else if (isinf(v) && sat) {
                        assert_true(fabsf(qs_mf_decode(f, back)) == (float)qs_mf_max(f));
                    } else if (back != c) {
                        fail_msg("%s code 0x%x -> %a -> 0x%x (mode %d sat %d)", f->name, c, v, back, kModes[m], sat);
                    }
                }
        }
    }
    for (uint32_t c = 0; c < 256; c++)
        for (size_t m = 0; m < 3; m++)
            assert_int_equal(qs_e8m0_encode(qs_e8m0_decode((uint8_t)c), kModes[m]), c);
}

/* ------------------------------------------------------------- reference and properties */

static void test_reference_all_modes(void **state)
{
    (void)state;
    for (size_t k = 0; k < NMF; k++) {
        ref_tab t;
        ref_init(&t, kMf[k]);
        size_t n;
        float *x = adversarial(&t, &n);
        for (size_t i = 0; i < n; i++) {
            if (isinf(x[i])) continue;
            for (size_t m = 0; m < 4; m++)
                for (int sat = 0; sat < 2; sat++) {
                    double u = (double)(rnd32() >> 5) * 0x1p-27;
                    uint32_t want = ref_encode(&t, x[i], kModes[m], u, sat);
                    uint32_t got = qs_mf_encode(t.f, x[i], kModes[m], u, sat);
                    if (want != got)
                        fail_msg("%s x=%a mode %d sat %d u=%a: want 0x%x got 0x%x", t.f->name, x[i], kModes[m],
                                 sat, u, want, got);
                }
            /* SR's threshold, exactly: up iff u < fraction */
            double a = fabs((double)x[i]);
            uint32_t fl = ref_floor(&t, a);
            if (fl < t.maxc && t.v[fl] != a) {
                double fr = (a - t.v[fl]) / (t.v[fl + 1] - t.v[fl]);
                uint32_t s = signbit(x[i]) ? t.sign : 0;
                assert_int_equal(qs_mf_encode(t.f, x[i], QS_RND_SR, fr, 1), s | fl);
                assert_int_equal(qs_mf_encode(t.f, x[i], QS_RND_SR, nextafter(fr, 0), 1), s | (fl + 1));
            }
        }
        free(x);
        ref_free(&t);
    }
}

static int cmp_float(const void *p, const void *q)     /* -0 and +0 compare equal */
{
    float a = *(const float *)p, b = *(const float *)q;
    return a < b ? -1 : a > b;
}

static void test_properties(void **state)
{
    (void)state;
    for (size_t k = 0; k < NMF; k++) {
        ref_tab t;
        ref_init(&t, kMf[k]);
        const qs_minifloat *f = t.f;
        const double vmax = t.v[t.maxc];
        size_t n;
        float *x = adversarial(&t, &n);
        for (size_t i = 0; i < n; i++) {
            if (isinf(x[i])) continue;
            double a = fabs((double)x[i]);
            uint32_t fl = ref_floor(&t, a);
            for (size_t m = 0; m < 4; m++) {
                double u = (double)(rnd32() >> 5) * 0x1p-27;
                float q = qs_mf_round(f, x[i], kModes[m], u, 1);
                /* sign symmetry (sign of zero included) */
                assert_int_equal(f2u(qs_mf_round(f, -x[i], kModes[m], u, 1)), f2u(q) ^ 0x80000000u);
                assert_true(signbit(q) == signbit(x[i]));
                double aq = fabs((double)q);
                if (a <= vmax) {
                    double step = fl < t.maxc ? t.v[fl + 1] - t.v[fl] : 0;
                    if (kModes[m] == QS_RND_RNE || kModes[m] == QS_RND_TA) assert_true(fabs(aq - a) <= step / 2);
                    if (kModes[m] == QS_RND_SR) assert_true(aq == t.v[fl] || (fl < t.maxc && aq == t.v[fl + 1]));
                }
                if (kModes[m] == QS_RND_RTZ) assert_true(aq <= a);
            }
        }
        /* monotonicity: sorted inputs give non-decreasing outputs (sat; and non-sat where overflow
        ** is ±Inf or saturation, i.e. not E4M3's NaN) */
        qsort(x, n, sizeof *x, cmp_float);
        for (size_t m = 0; m < 3; m++)
            for (int sat = 0; sat < 2; sat++) {
                if (!sat && f->kind == QS_MF_FN) continue;
                float prev = -INFINITY;
                for (size_t i = 0; i < n; i++) {
                    float q = qs_mf_round(f, x[i], kModes[m], 0, sat);
                    if (!(q >= prev)) fail_msg("%s not monotone at %a (mode %d sat %d)", f->name, x[i], kModes[m], sat);
                    prev = q;
                }
            }
        free(x);
        ref_free(&t);
    }
}

static void test_sr_mean(void **state)
{
    (void)state;
    static const float xs[] = {0.3f, 1.1f, 2.6f, 5.9f, 0.01f, 100.3f, 1.0e-3f};
    for (size_t k = 0; k < NMF; k++)
        for (size_t j = 0; j < sizeof xs / sizeof xs[0]; j++) {
            const qs_minifloat *f = kMf[k];
            float x = xs[j];
            if (x > qs_mf_max(f) || x < qs_mf_min_subnormal(f)) continue;
            const int N = 40000;
            double sum = 0, lo = INFINITY, hi = -INFINITY;
            for (int s = 0; s < N; s++) {
                float q = qs_mf_round(f, x, QS_RND_SR, qs_sr_uniform((uint64_t)s * 7919u, 12345), 0);
                sum += q;
                if (q < lo) lo = q;
                if (q > hi) hi = q;
            }
            double mean = sum / N, p = (hi > lo) ? ((double)x - lo) / (hi - lo) : 0;
            double se = (hi - lo) * sqrt(p * (1 - p) / N);
            if (fabs(mean - x) > 5 * se + 1e-12 * fabs(x))
                fail_msg("%s SR mean of %a: %.9g (se %.3g)", f->name, x, mean, se);
            assert_true(lo <= x && x <= hi);
        }
    /* the draws themselves: in [0,1), mean 1/2, distinct seeds give distinct streams */
    double s = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        double u = qs_sr_uniform(42, i);
        assert_true(u >= 0 && u < 1);
        s += u;
    }
    assert_true(fabs(s / 100000 - 0.5) < 0.005);
    assert_true(qs_sr_uniform(1, 0) != qs_sr_uniform(2, 0));
    assert_true(qs_sr_uniform(1, 0) == qs_sr_uniform(1, 0));
}

/* ------------------------------------------------------------------ specific rules and vectors */

static void test_overflow_sat_nan_inf(void **state)
{
    (void)state;
    /* T31 */
    assert_int_equal(qs_mf_encode(&qs_mf_e4m3, 464.0f, QS_RND_RNE, 0, 0), 0x7E);
    assert_int_equal(qs_mf_encode(&qs_mf_e4m3, nextafterf(464.0f, 1000), QS_RND_RNE, 0, 0), 0x7F);
    assert_int_equal(qs_mf_encode(&qs_mf_e4m3, 470.0f, QS_RND_RNE, 0, 0), 0x7F);
    assert_int_equal(qs_mf_encode(&qs_mf_e4m3, 470.0f, QS_RND_RNE, 0, 1), 0x7E);
    assert_int_equal(qs_mf_encode(&qs_mf_e4m3, -470.0f, QS_RND_RNE, 0, 1), 0xFE);
    assert_int_equal(qs_mf_encode(&qs_mf_e4m3, 464.0f, QS_RND_TA, 0, 0), 0x7F);     /* TA: tie up */
    assert_int_equal(qs_mf_encode(&qs_mf_e5m2, 61439.0f, QS_RND_RNE, 0, 0), 0x7B);
    assert_int_equal(qs_mf_encode(&qs_mf_e5m2, 61440.0f, QS_RND_RNE, 0, 0), 0x7C);
    assert_int_equal(qs_mf_encode(&qs_mf_e5m2, 61440.0f, QS_RND_RNE, 0, 1), 0x7B);
    assert_int_equal(qs_mf_encode(&qs_mf_e5m2, -1e9f, QS_RND_RNE, 0, 0), 0xFC);
    static const float in[] = {7.0f, INFINITY, NAN, -NAN, -0.25f, 0.25f, 0.75f, 5.0f};
    static const uint32_t e2m1[] = {0x7, 0x7, 0x8, 0x0, 0x8, 0x0, 0x2, 0x6};
    for (int i = 0; i < 8; i++) assert_int_equal(qs_mf_encode(&qs_mf_e2m1, in[i], QS_RND_RNE, 0, 0), e2m1[i]);
    /* NaN into FINITE formats: ml_dtypes' -(±0), whatever the payload or sat */
    assert_int_equal(qs_mf_encode(&qs_mf_e3m2, u2f(0x7f800001u), QS_RND_RNE, 0, 1), 0x20);
    assert_int_equal(qs_mf_encode(&qs_mf_e2m3, u2f(0xffc00000u), QS_RND_TA, 0, 0), 0x00);
    assert_int_equal(f2u(qs_mf_round(&qs_mf_e2m1, NAN, QS_RND_RNE, 0, 0)), 0x80000000u);
    /* Inf: IEEE -> Inf, FN -> NaN, FINITE -> max; sat -> max */
    assert_int_equal(qs_mf_encode(&qs_mf_fp16, -INFINITY, QS_RND_RNE, 0, 0), 0xFC00);
    assert_int_equal(qs_mf_encode(&qs_mf_fp16, -INFINITY, QS_RND_RNE, 0, 1), 0xFBFF);
    assert_int_equal(qs_mf_encode(&qs_mf_e4m3, INFINITY, QS_RND_RNE, 0, 0), 0x7F);
    assert_int_equal(qs_mf_encode(&qs_mf_e4m3, -INFINITY, QS_RND_RTZ, 0, 1), 0xFE);
    assert_int_equal(qs_mf_encode(&qs_mf_e3m2, -INFINITY, QS_RND_RNE, 0, 0), 0x3F);
    /* canonical NaNs keep the sign */
    assert_int_equal(qs_mf_encode(&qs_mf_bf16, -NAN, QS_RND_RNE, 0, 0), 0xFFC0);
    assert_int_equal(qs_mf_encode(&qs_mf_e5m2, NAN, QS_RND_RNE, 0, 1), 0x7E);
    assert_int_equal(qs_mf_encode(&qs_mf_e4m3, -NAN, QS_RND_RNE, 0, 1), 0xFF);
    assert_int_equal(f2u(qs_mf_round(&qs_mf_fp16, -NAN, QS_RND_RNE, 0, 0)), 0xffc00000u);
    /* RTZ never overflows: ±max; SR past max overflows like RNE */
    assert_int_equal(qs_mf_encode(&qs_mf_e5m2, 1e9f, QS_RND_RTZ, 0, 0), 0x7B);
    assert_int_equal(qs_mf_encode(&qs_mf_e4m3, 1e9f, QS_RND_RTZ, 0, 0), 0x7E);
    assert_int_equal(qs_mf_encode(&qs_mf_e4m3, 470.0f, QS_RND_SR, 0.0, 0), 0x7F);
    assert_int_equal(qs_mf_encode(&qs_mf_e4m3, 470.0f, QS_RND_SR, 0.99, 0), 0x7E);
    /* -0 kept: a negative value that rounds to zero */
    assert_int_equal(qs_mf_encode(&qs_mf_e4m3, -1e-30f, QS_RND_RNE, 0, 0), 0x80);
    assert_int_equal(f2u(qs_mf_round(&qs_mf_bf16, -1e-45f, QS_RND_RNE, 0, 0)), 0x80000000u);
    /* fp32: identity (NaN payloads too); sat only changes Inf */
    assert_int_equal(f2u(qs_mf_round(&qs_mf_fp32, u2f(0x7f800001u), QS_RND_RNE, 0, 1)), 0x7f800001u);
    assert_int_equal(qs_mf_encode(&qs_mf_fp32, u2f(0xffc01234u), QS_RND_RNE, 0, 0), 0xffc01234u);
    assert_true(qs_mf_round(&qs_mf_fp32, -INFINITY, QS_RND_RNE, 0, 1) == -FLT_MAX);
    assert_true(isinf(qs_mf_round(&qs_mf_fp32, INFINITY, QS_RND_RNE, 0, 0)));
    assert_int_equal(f2u(qs_mf_round(&qs_mf_fp32, u2f(1), QS_RND_RTZ, 0, 0)), 1);
    /* ranges */
    assert_true(qs_mf_max(&qs_mf_e4m3) == 448 && qs_mf_max(&qs_mf_e5m2) == 57344 && qs_mf_max(&qs_mf_fp16) == 65504);
    assert_true(qs_mf_max(&qs_mf_e2m1) == 6 && qs_mf_max(&qs_mf_e2m3) == 7.5 && qs_mf_max(&qs_mf_e3m2) == 28);
    assert_true(qs_mf_max(&qs_mf_bf16) == 0x1.fep127 && qs_mf_max(&qs_mf_fp32) == FLT_MAX);
    assert_true(qs_mf_min_normal(&qs_mf_e4m3) == 0x1p-6 && qs_mf_min_subnormal(&qs_mf_e4m3) == 0x1p-9);
    assert_true(qs_mf_min_subnormal(&qs_mf_bf16) == 0x1p-133 && qs_mf_min_subnormal(&qs_mf_fp16) == 0x1p-24);
    assert_true(qs_mf_min_normal(&qs_mf_e2m1) == 1 && qs_mf_min_subnormal(&qs_mf_e2m1) == 0.5);
}

static void test_ta_vs_rne_ties(void **state)
{
    (void)state;
    for (size_t k = 0; k < NMF; k++) {
        ref_tab t;
        ref_init(&t, kMf[k]);
        for (uint32_t c = 0; c < t.maxc; c++) {
            float mid = (float)((t.v[c] + t.v[c + 1]) / 2);
            assert_true((double)mid == (t.v[c] + t.v[c + 1]) / 2);
            uint32_t even = (c & 1) ? c + 1 : c;
            assert_int_equal(qs_mf_encode(t.f, mid, QS_RND_RNE, 0, 1), even);
            assert_int_equal(qs_mf_encode(t.f, mid, QS_RND_TA, 0, 1), c + 1);
            assert_int_equal(qs_mf_encode(t.f, -mid, QS_RND_TA, 0, 1), t.sign | (c + 1));
            assert_int_equal(qs_mf_encode(t.f, mid, QS_RND_RTZ, 0, 1), c);
        }
        ref_free(&t);
    }
    /* MX spec ties (T8 RNE, T9 half-away) on the E2M1 element */
    static const float x[] = {6, 0.75f, 1.75f, 3.5f, -0.75f, -0.25f, 2.5f, 5};
    static const uint32_t rne[] = {7, 2, 4, 6, 0xA, 8, 4, 6}, ta[] = {7, 2, 4, 6, 0xA, 9, 5, 7};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(qs_mf_encode(&qs_mf_e2m1, x[i], QS_RND_RNE, 0, 1), rne[i]);
        assert_int_equal(qs_mf_encode(&qs_mf_e2m1, x[i], QS_RND_TA, 0, 1), ta[i]);
    }
}

static void test_e8m0(void **state)
{
    (void)state;
    /* T29 */
    assert_int_equal(f2u(qs_e8m0_decode(0x00)), 0x00400000u);
    assert_true(qs_e8m0_decode(0x7F) == 1.0f && qs_e8m0_decode(0x80) == 2.0f && qs_e8m0_decode(0xFE) == 0x1p127f);
    assert_true(isnan(qs_e8m0_decode(0xFF)));
    /* T30, ml_dtypes column */
    static const struct { float x; uint8_t c; } t30[] = {
        {3.0f, 0x81}, {1.4f, 0x7F}, {0.75f, 0x7F}, {0.0f, 0xFF}, {-2.0f, 0xFF}, {0x1.8p-127f, 0x01},
        {0x1p-128f, 0x00}, {0x1.8p127f, 0xFF}, {INFINITY, 0xFF}, {NAN, 0xFF},
        {1.5f, 0x80}, {6.0f, 0x82}, {-0.0f, 0xFF}, {-INFINITY, 0xFF}, {0x1.7ffffep127f, 0xFE},
        {0x1p-149f, 0x00}, {0x1.000008p-127f, 0x01}, {0x1.fffffcp-127f, 0x01}, {0x1.7ffffep-126f, 0x01},
    };
    for (size_t i = 0; i < sizeof t30 / sizeof t30[0]; i++)
        if (qs_e8m0_encode(t30[i].x, QS_RND_RNE) != t30[i].c)
            fail_msg("e8m0(%a) = 0x%x, want 0x%x", t30[i].x, qs_e8m0_encode(t30[i].x, QS_RND_RNE), t30[i].c);
    assert_int_equal(qs_e8m0_encode(3.0f, QS_RND_TA), 0x81);
    /* RTZ: the power of two at or below */
    assert_int_equal(qs_e8m0_encode(3.9f, QS_RND_RTZ), 0x80);
    assert_int_equal(qs_e8m0_encode(0x1.fffffep127f, QS_RND_RTZ), 0xFE);
    assert_int_equal(qs_e8m0_encode(0x1p-140f, QS_RND_RTZ), 0x00);
    assert_int_equal(qs_e8m0_encode(INFINITY, QS_RND_RTZ), 0xFF);
    assert_int_equal(qs_e8m0_encode(-1.0f, QS_RND_RTZ), 0xFF);

    /* as a registry format: sat and SR */
    const qs_format *f = find_float("e8m0");
    qs_err e;
    float x[4] = {0x1.8p127f, INFINITY, -1.0f, 0.0f}, y[4];
    uint32_t c[4];
    qs_qopts o = {0};
    o.sat = 1;
    assert_int_equal(f->encode(f, &o, x, 4, c, NULL, NULL, &e), 0);
    assert_int_equal(c[0], 0xFE); assert_int_equal(c[1], 0xFE);
    assert_int_equal(c[2], 0xFF); assert_int_equal(c[3], 0xFF);
    o.sat = 0;
    o.round = QS_RND_SR;
    double sum = 0;
    int n4 = 0;                       /* how often 3 went up to 4: about half */
    for (uint64_t s = 0; s < 20000; s++) {
        float v = 3.0f;
        o.seed = s;
        assert_int_equal(f->fakeq(f, &o, &v, 1, y, &e), 0);
        assert_true(y[0] == 2.0f || y[0] == 4.0f);
        sum += y[0];
        n4 += y[0] == 4.0f;
    }
    assert_true(fabs(sum / 20000 - 3.0) < 0.05);
    assert_true(n4 > 9500 && n4 < 10500);
    float tiny = 0x1p-140f;
    assert_int_equal(f->fakeq(f, &o, &tiny, 1, y, &e), 0);
    assert_int_equal(f2u(y[0]), 0x00400000u);
    o.round = QS_RND_RTZ;
    float big = 0x1.fp127f;
    assert_int_equal(f->fakeq(f, &o, &big, 1, y, &e), 0);
    assert_true(y[0] == 0x1p127f);
}

/* ------------------------------------------------------------------------------ descriptors */

static void test_descriptors(void **state)
{
    (void)state;
    static const struct { const char *name; const qs_minifloat *mf; } m[] = {
        {"fp32", &qs_mf_fp32}, {"bf16", &qs_mf_bf16}, {"fp16", &qs_mf_fp16}, {"fp8_e4m3", &qs_mf_e4m3},
        {"fp8_e5m2", &qs_mf_e5m2}, {"fp6_e3m2", &qs_mf_e3m2}, {"fp6_e2m3", &qs_mf_e2m3}, {"fp4_e2m1", &qs_mf_e2m1}};
    assert_int_equal(qs_formats_float_n, 9);
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        const qs_format *f = find_float(m[i].name);
        assert_int_equal(f->family, QS_FAM_FLOAT);
        assert_int_equal(f->elem_bits, 1 + m[i].mf->ebits + m[i].mf->mbits);
        assert_int_equal(f->ebits, m[i].mf->ebits);
        assert_int_equal(f->mbits, m[i].mf->mbits);
        assert_int_equal(f->bias, m[i].mf->bias);
        assert_int_equal(f->block, 1);
        assert_int_equal(f->meta_bytes, 0);
        assert_true(f->max_finite == qs_mf_max(m[i].mf));
        assert_true(f->min_normal == qs_mf_min_normal(m[i].mf));
        assert_true(f->min_subnormal == qs_mf_min_subnormal(m[i].mf));
        assert_int_equal(f->has_inf, m[i].mf->kind == QS_MF_IEEE);
        assert_int_equal(f->has_nan, m[i].mf->kind != QS_MF_FINITE);
        assert_int_equal(f->default_round, QS_RND_RNE);
        assert_true(f->encode && f->decode && f->fakeq);
        if (f->elem_bits <= 8) {
            assert_non_null(f->code_value);
            assert_int_equal(f->ncodes, 1u << f->elem_bits);
            for (unsigned c = 0; c < f->ncodes; c++)
                assert_true(same_value(f->code_value(c), qs_mf_decode(m[i].mf, c)));
        } else {
            assert_null(f->code_value);
        }
    }
    const qs_format *f = find_float("e8m0");
    assert_int_equal(f->ncodes, 256);
    for (unsigned c = 0; c < 256; c++) assert_true(same_value(f->code_value(c), qs_e8m0_decode((uint8_t)c)));
}

/* encode -> decode == fakeq, bit for bit, every mode and sat, SIMD levels, SR counters. */
static void test_registry_agreement(void **state)
{
    (void)state;
    const size_t n = 50001;
    float *x = malloc(n * sizeof *x), *y1 = malloc(n * sizeof *y1), *y2 = malloc(n * sizeof *y2);
    uint32_t *c = malloc(n * sizeof *c);
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rnd32();
        if (i % 3 == 0) r = (r & 0x83ffffffu) | (uint32_t)(100 + i % 60) << 23;   /* near the ranges */
        x[i] = u2f(r);
    }
    x[0] = NAN; x[1] = -INFINITY; x[2] = -0.0f; x[3] = 464.0f;
    qs_err e;
    for (size_t k = 0; k < qs_formats_float_n; k++) {
        const qs_format *f = &qs_formats_float[k];
        for (size_t m = 0; m < 4; m++)
            for (int sat = 0; sat < 2; sat++) {
                qs_qopts o = {0};
                o.round = kModes[m];
                o.sat = sat;
                o.seed = 99;
                o.index0 = 1000;
                float ts = 0;
                assert_int_equal(f->encode(f, &o, x, n, c, NULL, &ts, &e), 0);
                assert_true(ts == 1.0f);
                assert_int_equal(f->decode(f, &o, c, NULL, 1.0f, n, y1, &e), 0);
                for (int lvl = 0; lvl <= qs_simd_cpu(); lvl++) {
                    qs_simd_force(lvl);
                    assert_int_equal(f->fakeq(f, &o, x, n, y2, &e), 0);
                    for (size_t i = 0; i < n; i++)
                        if (f2u(y1[i]) != f2u(y2[i]))
                            fail_msg("%s mode %d sat %d lvl %d x=%a: decode(encode) %a, fakeq %a", f->name,
                                     kModes[m], sat, lvl, x[i], y1[i], y2[i]);
                }
                qs_simd_force(-1);
                if (kModes[m] == QS_RND_SR) {   /* element i uses counter index0 + i: slices agree */
                    o.index0 = 1000 + 777;
                    assert_int_equal(f->fakeq(f, &o, x + 777, n - 777, y2, &e), 0);
                    assert_memory_equal(y1 + 777, y2, (n - 777) * sizeof *y2);
                }
            }
    }
    /* the default mode is RNE; a NULL options pointer means the defaults */
    const qs_format *f = find_float("fp8_e4m3");
    qs_qopts o = {0};
    assert_int_equal(f->fakeq(f, &o, x, n, y1, &e), 0);
    assert_int_equal(f->fakeq(f, NULL, x, n, y2, &e), 0);
    assert_memory_equal(y1, y2, n * sizeof *y1);
    /* unsupported mode, out-of-range code */
    o.round = QS_RND_HR;
    assert_int_equal(f->fakeq(f, &o, x, 4, y1, &e), -1);
    assert_non_null(strstr(e.msg, "hr"));
    uint32_t bad = 0x100;
    assert_int_equal(f->decode(f, NULL, &bad, NULL, 1.0f, 1, y1, &e), -1);
    f = find_float("fp4_e2m1");
    bad = 0x10;
    assert_int_equal(f->decode(f, NULL, &bad, NULL, 1.0f, 1, y1, &e), -1);
    /* fp32 is the identity */
    f = find_float("fp32");
    assert_int_equal(f->fakeq(f, NULL, x, n, y1, &e), 0);
    assert_memory_equal(x, y1, n * sizeof *x);
    free(x); free(y1); free(y2); free(c);
}

/* ---------------------------------------------------------------------- scalar vs SIMD */

static void test_simd_identity(void **state)
{
    (void)state;
    const size_t n = (1u << 21) + 13;
    float *x = malloc(n * sizeof *x), *y0 = malloc(n * sizeof *y0), *y1 = malloc(n * sizeof *y1);
    uint32_t *c0 = malloc(n * sizeof *c0), *c1 = malloc(n * sizeof *c1);
    for (size_t k = 0; k < NMF; k++) {
        ref_tab t;
        ref_init(&t, kMf[k]);
        size_t na;
        float *adv = adversarial(&t, &na);
        for (size_t i = 0; i < n; i++) {
            uint32_t r = rnd32();
            switch (i % 4) {
            case 0: x[i] = adv[(size_t)r % na]; break;
            case 1: x[i] = u2f(r); break;                              /* any bits: NaN payloads too */
            case 2: x[i] = u2f((r & 0x807fffffu) | (uint32_t)(127 - 30 + (r >> 8) % 50) << 23); break;
            default: x[i] = u2f(r & 0x807fffffu); break;               /* float32 subnormals, ±0 */
            }
        }
        x[5] = INFINITY; x[6] = -INFINITY; x[7] = NAN; x[8] = -NAN; x[9] = u2f(0x7f800001u);
        for (size_t m = 0; m < 4; m++)                                      /* encode: every mode */
            for (int sat = 0; sat < 2; sat++) {
                size_t nm = kModes[m] == QS_RND_RNE ? n : n / 16;
                for (size_t i = 0; i < nm; i++)
                    c0[i] = qs_mf_encode(t.f, x[i], kModes[m], kModes[m] == QS_RND_SR ? qs_sr_uniform(5, 9 + i) : 0, sat);
                for (int lvl = QS_SIMD_SCALAR; lvl <= qs_simd_cpu(); lvl++) {
                    qs_simd_force(lvl);
                    qs_mf_encode_n(t.f, x, nm, c1, kModes[m], sat, 5, 9);
                    for (size_t i = 0; i < nm; i++)
                        if (c0[i] != c1[i])
                            fail_msg("%s encode mode %d sat %d %s: x=%a code 0x%x, array 0x%x", t.f->name, kModes[m],
                                     sat, qs_simd_name(lvl), x[i], c0[i], c1[i]);
                }
            }
        for (int sat = 0; sat < 2; sat++) {
            for (size_t i = 0; i < n; i++) y0[i] = qs_mf_round(t.f, x[i], QS_RND_RNE, 0, sat);   /* reference */
            for (int lvl = QS_SIMD_SCALAR; lvl <= qs_simd_cpu(); lvl++) {
                qs_simd_force(lvl);
                assert_int_equal(qs_simd_level(), lvl);
                for (size_t len = 0; len < 40; len++) {                   /* tails, in place */
                    memcpy(y1, x + 1000, len * sizeof *y1);
                    qs_mf_round_n(t.f, y1, len, y1, QS_RND_RNE, sat, 0, 0);
                    assert_memory_equal(y1, y0 + 1000, len * sizeof *y1);
                }
                qs_mf_round_n(t.f, x, n, y1, QS_RND_RNE, sat, 0, 0);
                for (size_t i = 0; i < n; i++)
                    if (f2u(y0[i]) != f2u(y1[i]))
                        fail_msg("%s sat %d %s: x=%a (0x%08x) scalar 0x%08x simd 0x%08x", t.f->name, sat,
                                 qs_simd_name(lvl), x[i], f2u(x[i]), f2u(y0[i]), f2u(y1[i]));
            }
        }
        qs_simd_force(-1);
        free(adv);
        ref_free(&t);
    }
    free(x); free(y0); free(y1); free(c0); free(c1);
}

static void test_simd_env(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {                     /* a fresh process would read QS_SIMD on first use */
        setenv("QS_SIMD", "scalar", 1);
        _exit(qs_simd_level() == QS_SIMD_SCALAR ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);   /* (this test runs before any other call) */
    qs_simd_force(QS_SIMD_SCALAR);
    assert_int_equal(qs_simd_level(), QS_SIMD_SCALAR);
    qs_simd_force(99);
    assert_int_equal(qs_simd_level(), qs_simd_cpu());
    qs_simd_force(-1);
    assert_string_equal(qs_simd_name(QS_SIMD_AVX2), "avx2");
}


/* fp32 arrays (a copy plus the sat fix-up): equal to the per-element qs_mf_encode / qs_mf_round bit
** for bit -- NaN payloads kept, Inf -> ±FLT_MAX only with sat -- out of place and in place. */
static void test_fp32_arrays(void **state)
{
    (void)state;
    const size_t n = 100003;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint32_t *c = malloc(n * sizeof *c);
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rnd32();
        x[i] = u2f(i % 5 == 0 ? (r & 0x80000000u) | 0x7f800000u : i % 5 == 1 ? r | 0x7f800000u : r);
    }
    x[0] = -0.0f; x[1] = INFINITY; x[2] = -INFINITY; x[3] = u2f(0x7f800001u); x[4] = u2f(0xffbfffffu);
    for (int sat = 0; sat < 2; sat++)
        for (qs_round m = QS_RND_RNE; m <= QS_RND_SR; m++) {
            qs_mf_encode_n(&qs_mf_fp32, x, n, c, m, sat, 1, 2);
            qs_mf_round_n(&qs_mf_fp32, x, n, y, m, sat, 1, 2);
            for (size_t i = 0; i < n; i++) {
                assert_int_equal(c[i], qs_mf_encode(&qs_mf_fp32, x[i], m, 0.5, sat));
                assert_int_equal(f2u(y[i]), f2u(qs_mf_round(&qs_mf_fp32, x[i], m, 0.5, sat)));
                assert_int_equal(c[i], f2u(y[i]));
            }
            memcpy(y, x, n * sizeof *y);
            qs_mf_round_n(&qs_mf_fp32, y, n, y, m, sat, 1, 2);              /* in place */
            for (size_t i = 0; i < n; i++) assert_int_equal(f2u(y[i]), c[i]);
        }
    free(x); free(y); free(c);
}


/* e8m0 as a cast: the vectorised non-SR path equals the scalar level code for code and value for
** value (every mode, sat, in place) on random bits and every boundary of the cast rules. */
static void test_e8m0_simd(void **state)
{
    (void)state;
    const qs_format *f = find_float("e8m0");
    const size_t n = 65536 + 7;
    float *x = malloc(n * sizeof *x), *ys = malloc(n * sizeof *ys), *yv = malloc(n * sizeof *yv);
    uint32_t *cs = malloc(n * sizeof *cs), *cv = malloc(n * sizeof *cv);
    static const uint32_t edge[] = {0, 0x80000000u, 1, 0x003fffffu, 0x00400000u, 0x00400001u, 0x007fffffu,
                                    0x00800000u, 0x00bfffffu, 0x00c00000u, 0x3f800000u, 0x3fbfffffu,
                                    0x3fc00000u, 0x7f000000u, 0x7f3fffffu, 0x7f400000u, 0x7f7fffffu,
                                    0x7f800000u, 0x7f800001u, 0x7fc00000u, 0xff800000u, 0xffffffffu,
                                    0xbf800000u, 0x80400000u};
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rnd32();
        x[i] = u2f(i % 3 == 0 ? edge[r % (sizeof edge / sizeof edge[0])] : i % 3 == 1 ? r : (r & 0x80ffffffu) + ((r >> 24 & 1) ? 0x7f000000u : 0));
    }
    qs_err e;
    const qs_round modes[] = {QS_RND_RNE, QS_RND_TA, QS_RND_RTZ, QS_RND_SR, QS_RND_DEFAULT};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
        for (int sat = 0; sat < 2; sat++) {
            qs_qopts o = {0};
            o.round = modes[m];
            o.sat = sat;
            o.seed = 3;
            qs_simd_force(QS_SIMD_SCALAR);
            assert_int_equal(f->encode(f, &o, x, n, cs, NULL, NULL, &e), 0);
            assert_int_equal(f->fakeq(f, &o, x, n, ys, &e), 0);
            for (int lvl = QS_SIMD_AVX2; lvl <= qs_simd_cpu(); lvl++) {
                qs_simd_force(lvl);
                assert_int_equal(f->encode(f, &o, x, n, cv, NULL, NULL, &e), 0);
                for (size_t i = 0; i < n; i++)
                    if (cs[i] != cv[i])
                        fail_msg("e8m0 %s mode %zu sat %d at %zu: x bits 0x%08x scalar 0x%x simd 0x%x",
                                 qs_simd_name(lvl), m, sat, i, f2u(x[i]), cs[i], cv[i]);
                assert_int_equal(f->fakeq(f, &o, x, n, yv, &e), 0);
                assert_memory_equal(ys, yv, n * sizeof *ys);
                memcpy(yv, x, n * sizeof *yv);
                assert_int_equal(f->fakeq(f, &o, yv, n, yv, &e), 0);
                assert_memory_equal(ys, yv, n * sizeof *ys);
            }
        }
    qs_simd_force(-1);
    free(x); free(ys); free(yv); free(cs); free(cv);
}

/* SR on arrays (qs_mf_round_n's integer and AVX2 kernels) against qs_mf_round with the draw of
** qs_sr_uniform, element by element: every element format, sat 0 and 1, every level, random bits,
** float32 subnormals, values straddling the grid and the overflow edge, ±0, ±Inf, NaN payloads,
** tails and in place, counters near 2^64 (the Weyl sequence wraps). */
static void test_sr_arrays(void **state)
{
    (void)state;
    const size_t n = (1u << 16) + 11;
    float *x = malloc(n * sizeof *x), *y0 = malloc(n * sizeof *y0), *y1 = malloc(n * sizeof *y1);
    const uint64_t seeds[] = {0, 7, 0xfedcba9876543210ULL};
    const uint64_t starts[] = {0, 3, UINT64_MAX - 5000};
    size_t total = 0;
    for (size_t k = 0; k < NMF; k++) {
        ref_tab t;
        ref_init(&t, kMf[k]);
        size_t na;
        float *adv = adversarial(&t, &na);
        double mx = qs_mf_max(t.f);
        for (size_t i = 0; i < n; i++) {
            uint32_t r = rnd32();
            switch (i % 5) {
            case 0: x[i] = adv[(size_t)r % na]; break;
            case 1: x[i] = u2f(r); break;
            case 2: x[i] = u2f((r & 0x807fffffu) | (uint32_t)(127 - 40 + (r >> 8) % 60) << 23); break;
            case 3: x[i] = (float)(mx * (0.5 + (r >> 8) * 0x1p-23)) * ((r & 1) ? -1.0f : 1.0f); break;
            default: x[i] = u2f(r & 0x807fffffu); break;
            }
        }
        x[1] = INFINITY; x[2] = -INFINITY; x[3] = NAN; x[4] = -NAN; x[6] = u2f(0xff800001u);
        x[7] = 0.0f; x[8] = -0.0f; x[9] = (float)mx; x[10] = -(float)mx; x[11] = FLT_MAX; x[12] = -FLT_MIN;
        for (int sat = 0; sat < 2; sat++)
            for (size_t si = 0; si < N_(seeds); si++) {
                uint64_t seed = seeds[si], i0 = starts[si];
                for (size_t i = 0; i < n; i++) y0[i] = qs_mf_round(t.f, x[i], QS_RND_SR, qs_sr_uniform(seed, i0 + i), sat);
                for (int lvl = QS_SIMD_SCALAR; lvl <= qs_simd_cpu(); lvl++) {
                    qs_simd_force(lvl);
                    qs_mf_round_n(t.f, x, n, y1, QS_RND_SR, sat, seed, i0);
                    for (size_t i = 0; i < n; i++)
                        if (!same_value(y0[i], y1[i]) || (!isnan(y0[i]) && f2u(y0[i]) != f2u(y1[i])))
                            fail_msg("%s SR sat %d %s seed %llu: x=%a (0x%08x) scalar 0x%08x array 0x%08x", t.f->name,
                                     sat, qs_simd_name(lvl), (unsigned long long)seed, x[i], f2u(x[i]), f2u(y0[i]),
                                     f2u(y1[i]));
                    for (size_t len = 0; len < 40; len++) {                   /* tails, in place, offsets */
                        memcpy(y1, x + 100 + len, len * sizeof *y1);
                        qs_mf_round_n(t.f, y1, len, y1, QS_RND_SR, sat, seed, i0 + 100 + len);
                        assert_memory_equal(y1, y0 + 100 + len, len * sizeof *y1);
                    }
                    total += n;
                }
            }
        qs_simd_force(-1);
        free(adv);
        ref_free(&t);
    }
    print_message("# SR arrays: %zu values compared\n", total);
    free(x); free(y0); free(y1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simd_env),
        cmocka_unit_test(test_conformance),
        cmocka_unit_test(test_decode_matches_dtype),
        cmocka_unit_test(test_roundtrip_every_code),
        cmocka_unit_test(test_reference_all_modes),
        cmocka_unit_test(test_properties),
        cmocka_unit_test(test_sr_mean),
        cmocka_unit_test(test_overflow_sat_nan_inf),
        cmocka_unit_test(test_ta_vs_rne_ties),
        cmocka_unit_test(test_e8m0),
        cmocka_unit_test(test_descriptors),
        cmocka_unit_test(test_registry_agreement),
        cmocka_unit_test(test_simd_identity),
        cmocka_unit_test(test_fp32_arrays),
        cmocka_unit_test(test_e8m0_simd),
        cmocka_unit_test(test_sr_arrays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
