/*
** Tests for the symmetric absmax integer formats int8 and int4 (kernels/format_int.c): hand-worked
** vectors for every rounding mode, per-tensor and per-block layouts (codes and FP32 scales),
** all-zero, NaN/Inf and tiny blocks, an exact-arithmetic reference for round(x / scale), SR draws,
** and bit-for-bit agreement of encode -> decode with fakeq.
*/
#include "test_util.h"

#include <float.h>
#include <math.h>

#include "../../kernels/format_families.h"
#include "../../kernels/simd.h"

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static const qs_format *find_int(const char *name)
{
    for (size_t i = 0; i < qs_formats_int_n; i++)
        if (strcmp(qs_formats_int[i].name, name) == 0) return &qs_formats_int[i];
    fail_msg("no int format %s", name);
    return NULL;
}

static float meta_scale(const uint8_t *m, size_t k)
{
    const uint8_t *p = m + 4 * k;
    return u2f((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

static int32_t sext(uint32_t c, int bits) { return (int32_t)c - (c >> (bits - 1) ? (1 << bits) : 0); }

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd32(void)
{
    g_rng = g_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(g_rng >> 32);
}
static double rndu(void) { return (rnd32() >> 8) * 0x1p-24; }

static const qs_round kModes[] = {QS_RND_RNE, QS_RND_TA, QS_RND_RTZ, QS_RND_SR};

static void test_descriptors(void **state)
{
    (void)state;
    assert_int_equal(qs_formats_int_n, 2);
    const qs_format *f8 = find_int("int8"), *f4 = find_int("int4");
    assert_int_equal(f8->elem_bits, 8);
    assert_int_equal(f4->elem_bits, 4);
    for (int k = 0; k < 2; k++) {
        const qs_format *f = k ? f4 : f8;
        assert_int_equal(f->family, QS_FAM_INT);
        assert_int_equal(f->block, 0);
        assert_int_equal(f->meta_bytes, 4);
        assert_true(f->meta_bits == 32);
        assert_int_equal(f->default_round, QS_RND_RNE);
        for (size_t m = 0; m < 4; m++) assert_true(f->round_modes & (1u << kModes[m]));
        assert_false(f->round_modes & (1u << QS_RND_HR));
        assert_false(f->has_scale_rule);
        assert_true(f->encode && f->decode && f->fakeq);
        assert_null(f->code_value);
        assert_true(f->max_finite == FLT_MAX && f->min_subnormal == FLT_TRUE_MIN && f->min_normal == 0);
        assert_true(f->has_nan && !f->has_inf);
    }
}

/* amax 127 -> scale exactly 1: the codes are the rounded inputs. */
static void test_int8_modes(void **state)
{
    (void)state;
    const qs_format *f = find_int("int8");
    static const float x[] = {127, -63.5f, 0.5f, 1.5f, 2.5f, -2.5f, 0, -0.0f, 100.25f, -0.4f, 3.75f};
    enum { N = sizeof x / sizeof x[0] };
    static const int32_t want[3][N] = {
        {127, -64, 0, 2, 2, -2, 0, 0, 100, 0, 4},     /* RNE */
        {127, -64, 1, 2, 3, -3, 0, 0, 100, 0, 4},     /* TA */
        {127, -63, 0, 1, 2, -2, 0, 0, 100, 0, 3},     /* RTZ */
    };
    qs_err e;
    uint32_t c[N];
    uint8_t meta[4];
    float y[N], ts = 0;
    for (int m = 0; m < 3; m++) {
        qs_qopts o = {0};
        o.round = kModes[m];
        assert_int_equal(f->encode(f, &o, x, N, c, meta, &ts, &e), 0);
        assert_true(meta_scale(meta, 0) == 1.0f);
        assert_true(meta[0] == 0 && meta[1] == 0 && meta[2] == 0x80 && meta[3] == 0x3F);   /* LE float 1.0 */
        for (int i = 0; i < N; i++) {
            assert_true(c[i] <= 0xFF);
            if (sext(c[i], 8) != want[m][i]) fail_msg("mode %d x=%g: code %d want %d", kModes[m], x[i], sext(c[i], 8), want[m][i]);
        }
        assert_int_equal(f->fakeq(f, &o, x, N, y, &e), 0);
        for (int i = 0; i < N; i++) assert_true(y[i] == (float)want[m][i]);
        assert_int_equal(f2u(y[7]), 0);          /* one zero: -0.0 comes back as +0 */
    }
    /* scale = fl32(amax / 127): amax 1 */
    float z[3] = {1.0f, -0.5f, 0.25f}, yz[3];
    uint32_t cz[3];
    assert_int_equal(f->encode(f, NULL, z, 3, cz, meta, NULL, &e), 0);
    assert_true(meta_scale(meta, 0) == 1.0f / 127.0f);
    assert_int_equal(sext(cz[0], 8), 127);
    assert_int_equal(sext(cz[1], 8), -64);       /* fl32(1/127) < 1/127, so 0.5/s = 63.50000047 */
    assert_int_equal(sext(cz[2], 8), 32);        /* 31.75... */
    assert_int_equal(f->fakeq(f, NULL, z, 3, yz, &e), 0);
    assert_true(yz[0] == 127.0f * (1.0f / 127.0f));
}

/* int4 in blocks of 4 along a run of 10: three scales, the last block partial. */
static void test_int4_blocks(void **state)
{
    (void)state;
    const qs_format *f = find_int("int4");
    float x[10] = {7, 1, -2, 3.5f, 0.7f, -1.4f, 0.35f, 0.1f, -14, 2};
    uint32_t c[10];
    uint8_t meta[12];
    float y[10], y2[10];
    qs_err e;
    qs_qopts o = {0};
    o.block = 4;
    assert_int_equal(f->encode(f, &o, x, 10, c, meta, NULL, &e), 0);
    assert_true(meta_scale(meta, 0) == 1.0f);
    assert_true(meta_scale(meta, 1) == 1.4f / 7.0f);
    assert_true(meta_scale(meta, 2) == 2.0f);
    static const int32_t want[10] = {7, 1, -2, 4, 3, -7, 2, 0, -7, 1};   /* 0.7/s = 3.4999999, 0.1/s = 1/2 exactly */
    for (int i = 0; i < 10; i++) {
        assert_true(c[i] <= 0xF);
        assert_int_equal(sext(c[i], 4), want[i]);
    }
    assert_int_equal(f->decode(f, &o, c, meta, 1.0f, 10, y, &e), 0);
    assert_int_equal(f->fakeq(f, &o, x, 10, y2, &e), 0);
    assert_memory_equal(y, y2, sizeof y);
    assert_true(y[8] == -14.0f && y[9] == 2.0f);
    /* per tensor (block 0): one scale 14/7 = 2 */
    o.block = 0;
    assert_int_equal(f->encode(f, &o, x, 10, c, meta, NULL, &e), 0);
    assert_true(meta_scale(meta, 0) == 2.0f);
    assert_int_equal(sext(c[0], 4), 4);          /* 3.5 -> 4 (even) */
    assert_int_equal(sext(c[3], 4), 2);          /* 1.75 -> 2 */
}

static void test_zero_nan_inf_tiny(void **state)
{
    (void)state;
    const qs_format *f8 = find_int("int8"), *f4 = find_int("int4");
    qs_err e;
    uint32_t c[6];
    uint8_t meta[8];
    float y[6];
    /* all-zero block: scale 0, codes 0, +0 */
    float z[4] = {0, -0.0f, 0, 0};
    assert_int_equal(f8->encode(f8, NULL, z, 4, c, meta, NULL, &e), 0);
    assert_int_equal(f2u(meta_scale(meta, 0)), 0);
    for (int i = 0; i < 4; i++) assert_int_equal(c[i], 0);
    assert_int_equal(f8->fakeq(f8, NULL, z, 4, y, &e), 0);
    for (int i = 0; i < 4; i++) assert_int_equal(f2u(y[i]), 0);
    /* NaN and Inf: not in amax; the unused code -qmax-1 = NaN; sat: Inf -> ±qmax */
    float x[5] = {1, NAN, -INFINITY, 7, -3.5f};
    assert_int_equal(f4->encode(f4, NULL, x, 5, c, meta, NULL, &e), 0);
    assert_true(meta_scale(meta, 0) == 1.0f);
    static const uint32_t want[5] = {1, 0x8, 0x8, 7, 0xC};
    for (int i = 0; i < 5; i++) assert_int_equal(c[i], want[i]);
    assert_int_equal(f4->fakeq(f4, NULL, x, 5, y, &e), 0);
    assert_true(y[0] == 1 && isnan(y[1]) && isnan(y[2]) && y[3] == 7 && y[4] == -4);
    assert_int_equal(f4->decode(f4, NULL, c, meta, 1.0f, 5, y, &e), 0);
    assert_true(y[0] == 1 && isnan(y[1]) && isnan(y[2]) && y[3] == 7 && y[4] == -4);
    qs_qopts o = {0};
    o.sat = 1;
    assert_int_equal(f4->encode(f4, &o, x, 5, c, meta, NULL, &e), 0);
    assert_int_equal(c[1], 0x8);                 /* NaN stays NaN */
    assert_int_equal(sext(c[2], 4), -7);
    float inf1[2] = {INFINITY, NAN};
    assert_int_equal(f8->encode(f8, &o, inf1, 2, c, meta, NULL, &e), 0);
    assert_int_equal(f2u(meta_scale(meta, 0)), 0);
    assert_int_equal(c[0], 127);
    assert_int_equal(c[1], 0x80);
    assert_int_equal(f8->fakeq(f8, &o, inf1, 2, y, &e), 0);
    assert_true(y[0] == 0 && isnan(y[1]));       /* 127 * scale 0 */
    /* finite values never take the NaN code */
    float r[6] = {-127, -126.9f, -1e30f, 1e30f, -FLT_MAX, FLT_MAX};
    assert_int_equal(f8->encode(f8, NULL, r, 6, c, meta, NULL, &e), 0);
    for (int i = 0; i < 6; i++) assert_int_not_equal(c[i], 0x80);
    /* amax = FLT_MAX: 127 * fl32(FLT_MAX/127) rounds to Inf in FP32; clamped to FLT_MAX */
    float big[2] = {-FLT_MAX, 1e38f};
    assert_int_equal(f8->fakeq(f8, NULL, big, 2, y, &e), 0);
    assert_true(y[0] == -FLT_MAX && isfinite(y[1]));
    assert_int_equal(f8->encode(f8, NULL, big, 2, c, meta, NULL, &e), 0);
    assert_int_equal(f8->decode(f8, NULL, c, meta, 1.0f, 2, y + 2, &e), 0);
    assert_true(y[2] == -FLT_MAX && y[3] == y[1]);
    /* amax / qmax underflows: the scale is the smallest subnormal */
    float t[3] = {0x1p-149f, 0x1.8p-148f, -0x1p-147f};
    assert_int_equal(f8->encode(f8, NULL, t, 3, c, meta, NULL, &e), 0);
    assert_int_equal(f2u(meta_scale(meta, 0)), 1);
    assert_int_equal(sext(c[0], 8), 1);
    assert_int_equal(sext(c[1], 8), 3);
    assert_int_equal(sext(c[2], 8), -4);
    assert_int_equal(f8->fakeq(f8, NULL, t, 3, y, &e), 0);
    assert_memory_equal(y, t, sizeof t);
}

/* Exact reference for q = round(x / s): k*s and (2k+1)*s are exact in double (<= 33 bits). */
static int32_t ref_q(float x, float s, qs_round mode, int qmax)
{
    if (s == 0) return 0;
    double a = fabs((double)x), sd = s;
    int32_t k = (int32_t)floor(a / sd);
    while ((double)k * sd > a) k--;
    while ((double)(k + 1) * sd <= a) k++;
    double twice = 2 * a, mid = (double)(2 * k + 1) * sd;
    int up = 0;
    if ((double)k * sd != a) {
        if (mode == QS_RND_TA) up = twice >= mid;
        else if (mode == QS_RND_RNE) up = twice > mid || (twice == mid && (k & 1));
    }
    k += up;
    if (k > qmax) k = qmax;
    return x < 0 ? -k : k;
}

static void test_exact_reference(void **state)
{
    (void)state;
    qs_err e;
    const size_t B = 64, NB = 4000, n = B * NB;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *y2 = malloc(n * sizeof *y2);
    uint32_t *c = malloc(n * sizeof *c);
    uint8_t *meta = malloc(NB * 4);
    for (int k = 0; k < 2; k++) {
        const qs_format *f = find_int(k ? "int4" : "int8");
        int qmax = k ? 7 : 127;
        for (size_t b = 0; b < NB; b++) {
            float amax = ldexpf((float)(1.0 + rndu()), (int)(rnd32() % 200) - 100);
            float s = amax / (float)qmax;
            x[b * B] = (rnd32() & 1) ? amax : -amax;
            for (size_t i = 1; i < B; i++) {
                /* near ties: fl32((j + 1/2) * s) and its float32 neighbours, and random values */
                int j = (int)(rnd32() % (unsigned)qmax);
                float t = (float)(((double)j + 0.5) * s);
                if (i % 4 == 3) t = (float)(rndu() * amax);
                else t = u2f(f2u(t) + (uint32_t)(int32_t)(rnd32() % 5) - 2u);
                if (t > amax) t = amax;
                x[b * B + i] = (rnd32() & 1) ? -t : t;
            }
        }
        for (size_t m = 0; m < 3; m++) {
            qs_qopts o = {0};
            o.round = kModes[m];
            o.block = (int)B;
            assert_int_equal(f->encode(f, &o, x, n, c, meta, NULL, &e), 0);
            for (size_t b = 0; b < NB; b++) {
                float s = meta_scale(meta, b);
                assert_true(s == fabsf(x[b * B]) / (float)qmax);
                for (size_t i = b * B; i < (b + 1) * B; i++) {
                    int32_t want = ref_q(x[i], s, kModes[m], qmax), got = sext(c[i], f->elem_bits);
                    if (want != got) fail_msg("%s mode %d x=%a s=%a: q %d want %d", f->name, kModes[m], x[i], s, got, want);
                }
            }
            assert_int_equal(f->decode(f, &o, c, meta, 1.0f, n, y, &e), 0);
            assert_int_equal(f->fakeq(f, &o, x, n, y2, &e), 0);
            assert_memory_equal(y, y2, n * sizeof *y);
            /* sign symmetry */
            for (size_t i = 0; i < n; i++) x[i] = -x[i];
            assert_int_equal(f->fakeq(f, &o, x, n, y2, &e), 0);
            for (size_t i = 0; i < n; i++) assert_true(y2[i] == -y[i]);
            for (size_t i = 0; i < n; i++) x[i] = -x[i];
        }
    }
    free(x); free(y); free(y2); free(c); free(meta);
}

static void test_sr(void **state)
{
    (void)state;
    const qs_format *f = find_int("int8");
    qs_err e;
    float x[2] = {127, 10.3f}, y[2];
    double sum = 0;
    const int N = 20000;
    for (int s = 0; s < N; s++) {
        qs_qopts o = {0};
        o.round = QS_RND_SR;
        o.seed = (uint64_t)s;
        assert_int_equal(f->fakeq(f, &o, x, 2, y, &e), 0);
        assert_true(y[0] == 127);
        assert_true(y[1] == 10 || y[1] == 11);
        sum += y[1];
    }
    assert_true(fabs(sum / N - 10.3) < 0.02);
    /* counters: element i uses index0 + i, so a run split on a block boundary gives the same */
    const size_t n = 4096;
    float *a = malloc(n * sizeof *a), *y1 = malloc(n * sizeof *y1), *y2 = malloc(n * sizeof *y2);
    for (size_t i = 0; i < n; i++) a[i] = (float)(rndu() * 2 - 1);
    qs_qopts o = {0};
    o.round = QS_RND_SR;
    o.seed = 7;
    o.index0 = 5;
    o.block = 32;
    assert_int_equal(f->fakeq(f, &o, a, n, y1, &e), 0);
    o.index0 = 5 + 64;
    assert_int_equal(f->fakeq(f, &o, a + 64, n - 64, y2, &e), 0);
    assert_memory_equal(y1 + 64, y2, (n - 64) * sizeof *y2);
    /* SR and sat on every mode: encode -> decode == fakeq */
    uint32_t *c = malloc(n * sizeof *c);
    uint8_t *meta = malloc(n / 32 * 4 + 4);
    a[3] = NAN; a[70] = INFINITY; a[500] = -INFINITY;
    for (size_t m = 0; m < 4; m++)
        for (int sat = 0; sat < 2; sat++)
            for (int k = 0; k < 2; k++) {
                const qs_format *g = find_int(k ? "int4" : "int8");
                o.round = kModes[m];
                o.sat = sat;
                o.index0 = 0;
                o.block = 32;
                assert_int_equal(g->encode(g, &o, a, n - 5, c, meta, NULL, &e), 0);
                assert_int_equal(g->decode(g, &o, c, meta, 1.0f, n - 5, y1, &e), 0);
                assert_int_equal(g->fakeq(g, &o, a, n - 5, y2, &e), 0);
                assert_memory_equal(y1, y2, (n - 5) * sizeof *y1);
            }
    free(a); free(y1); free(y2); free(c); free(meta);
}

static void test_errors(void **state)
{
    (void)state;
    const qs_format *f = find_int("int4");
    qs_err e;
    float x[2] = {1, 2}, y[2];
    uint32_t c[2] = {0x10, 0};
    uint8_t meta[4] = {0, 0, 0x80, 0x3F};
    assert_int_equal(f->decode(f, NULL, c, meta, 1.0f, 2, y, &e), -1);
    qs_qopts o = {0};
    o.round = QS_RND_HR;
    assert_int_equal(f->fakeq(f, &o, x, 2, y, &e), -1);
    assert_non_null(strstr(e.msg, "int4"));
    o.round = QS_RND_DEFAULT;
    o.block = -3;
    assert_int_equal(f->fakeq(f, &o, x, 2, y, &e), -1);
    /* n = 0 is fine */
    assert_int_equal(f->fakeq(f, NULL, x, 0, y, &e), 0);
}


/* Adversarial blocks: exact ties (amax = qmax * 2^e makes the scale 2^e), near-ties, ±0, NaN/Inf
** sprinkled in, amax near FLT_MAX (the Inf clamp of int8), FP32-subnormal blocks (subnormal and
** FLT_TRUE_MIN scales), all-zero blocks and plain random values. */
static void fill_int_adversarial(float *x, size_t n, size_t B, int qmax)
{
    for (size_t i0 = 0; i0 < n; i0 += B) {
        size_t len = n - i0 < B ? n - i0 : B;
        int kind = (int)(rnd32() % 8), ex = (int)(rnd32() % 250) - 125;
        for (size_t i = i0; i < i0 + len; i++) {
            float sg = (rnd32() & 1) ? -1.0f : 1.0f;
            uint32_t r = rnd32();
            switch (kind) {
            case 0: x[i] = sg * ldexpf((float)(r % (2 * qmax + 1)) * 0.5f, ex); break;       /* ties */
            case 1: x[i] = sg * u2f(f2u(ldexpf((float)(r % qmax) + 0.5f, ex)) + (r >> 28) - 8u); break;
            case 2: x[i] = (r % 3) ? sg * 0.0f : sg * ldexpf((float)rndu(), ex); break;
            case 3: x[i] = sg * u2f(0x7f000000u + (r % 0x7fffffu)); break;                    /* huge */
            case 4: x[i] = sg * u2f(r % 0x00800000u >> (r >> 27)); break;                      /* subnormal */
            case 5: x[i] = sg * 0.0f; break;
            default: x[i] = u2f(r); break;                                                       /* any bits */
            }
        }
        if (kind == 0 || kind == 1) x[i0 + rnd32() % len] = ldexpf((float)qmax, ex);
        if (kind == 3 && rnd32() % 2) x[i0 + rnd32() % len] = FLT_MAX;
        if (rnd32() % 4 == 0) x[i0 + rnd32() % len] = (rnd32() & 1) ? NAN : -INFINITY;
    }
}

/* The vectorised RNE paths give the scalar level's codes, scales and values bit for bit. */
static void test_simd_identity(void **state)
{
    (void)state;
    if (qs_simd_cpu() == QS_SIMD_SCALAR) tu_skip("cpu: no AVX2, so no SIMD path to compare");
    const size_t n = 200003;
    float *x = malloc(n * sizeof *x), *ys = malloc(n * sizeof *ys), *yv = malloc(n * sizeof *yv);
    uint32_t *cs = malloc(n * sizeof *cs), *cv = malloc(n * sizeof *cv);
    uint8_t *ms = malloc(4 * n), *mv = malloc(4 * n);
    const char *names[] = {"int8", "int4"};
    const int blocks[] = {32, 16, 64, 8, 7, 45, 1000, 0};
    size_t total = 0;
    qs_err e;
    for (size_t k = 0; k < 2; k++) {
        const qs_format *f = find_int(names[k]);
        int qmax = k == 0 ? 127 : 7;
        for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++)
            for (int sat = 0; sat < 2; sat++) {
                qs_qopts o = {0};
                o.block = blocks[bi];
                o.sat = sat;
                size_t B = blocks[bi] ? (size_t)blocks[bi] : 4096;
                fill_int_adversarial(x, n, B, qmax);
                size_t nb = qs_format_nblocks(f, &o, n);
                qs_simd_force(QS_SIMD_SCALAR);
                assert_int_equal(f->encode(f, &o, x, n, cs, ms, NULL, &e), 0);
                assert_int_equal(f->fakeq(f, &o, x, n, ys, &e), 0);
                for (int lvl = QS_SIMD_AVX2; lvl <= qs_simd_cpu(); lvl++) {
                    qs_simd_force(lvl);
                    memset(cv, 0xAB, n * sizeof *cv);
                    assert_int_equal(f->encode(f, &o, x, n, cv, mv, NULL, &e), 0);
                    for (size_t i = 0; i < n; i++)
                        if (cs[i] != cv[i])
                            fail_msg("%s %s block %d sat %d: code at %zu: x=%a scalar 0x%x simd 0x%x", names[k],
                                     qs_simd_name(lvl), blocks[bi], sat, i, (double)x[i], cs[i], cv[i]);
                    assert_memory_equal(ms, mv, 4 * nb);
                    assert_int_equal(f->fakeq(f, &o, x, n, yv, &e), 0);
                    for (size_t i = 0; i < n; i++)
                        if (f2u(ys[i]) != f2u(yv[i]))
                            fail_msg("%s %s block %d sat %d: value at %zu: x=%a scalar %a simd %a", names[k],
                                     qs_simd_name(lvl), blocks[bi], sat, i, (double)x[i], (double)ys[i],
                                     (double)yv[i]);
                    memcpy(yv, x, n * sizeof *yv);                              /* in place */
                    assert_int_equal(f->fakeq(f, &o, yv, n, yv, &e), 0);
                    assert_memory_equal(yv, ys, n * sizeof *yv);
                    total += n;
                }
            }
    }
    qs_simd_force(-1);
    print_message("# int scalar vs SIMD: %zu values compared\n", total);
    free(x); free(ys); free(yv); free(cs); free(cv); free(ms); free(mv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptors),
        cmocka_unit_test(test_int8_modes),
        cmocka_unit_test(test_int4_blocks),
        cmocka_unit_test(test_zero_nan_inf_tiny),
        cmocka_unit_test(test_exact_reference),
        cmocka_unit_test(test_sr),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_simd_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
