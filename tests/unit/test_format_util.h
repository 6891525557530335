/*
** Helpers shared by the format tests (test_format_mx.c, test_format_nvfp4.c, test_format_hif8.c,
** test_format_hif4.c, test_format_m2xfp.c): a seeded generator, option shorthands, the encode/decode/fakeq agreement
** check, adversarial inputs and the scalar-against-SIMD comparisons.
*/
#ifndef QS_TEST_FORMAT_UTIL_H
#define QS_TEST_FORMAT_UTIL_H

#include "test_util.h"

#include <float.h>
#include <math.h>

#include "../../kernels/format.h"
#include "../../kernels/simd.h"

#define N(a) (sizeof(a) / sizeof(a)[0])

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static inline uint64_t rnd64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double rnd01(void) { return (double)(rnd64() >> 11) * 0x1p-53; }
static inline double rnd_gauss(void)
{
    double u = rnd01(), v = rnd01();
    return sqrt(-2.0 * log(u + 0x1p-60)) * cos(6.283185307179586 * v);
}

static inline const qs_format *fmt(const char *name)
{
    const qs_format *f = qs_format_find(name);
    if (!f) fail_msg("no format %s", name);
    return f;
}

static inline qs_qopts O(void)
{
    qs_qopts o;
    memset(&o, 0, sizeof o);
    return o;
}
static inline qs_qopts Orule(qs_scale_rule r) { qs_qopts o = O(); o.scale_rule = r; return o; }
static inline qs_qopts Oround(qs_round r) { qs_qopts o = O(); o.round = r; return o; }

/* Encode, decode and fakeq x[0..n); fakeq must equal decode(encode) bit for bit.  Buffers are sized
** by the caller (meta: nblocks * meta_bytes). */
static inline void quant3(const qs_format *f, const qs_qopts *o, const float *x, size_t n, uint32_t *codes,
                          uint8_t *meta, float *dec, float *ts)
{
    qs_err e;
    float t = -1, *fq = malloc((n ? n : 1) * sizeof *fq);
    if (f->encode(f, o, x, n, codes, meta, &t, &e)) fail_msg("%s encode: %s", f->name, e.msg);
    if (f->decode(f, o, codes, meta, t, n, dec, &e)) fail_msg("%s decode: %s", f->name, e.msg);
    if (f->fakeq(f, o, x, n, fq, &e)) fail_msg("%s fakeq: %s", f->name, e.msg);
    for (size_t i = 0; i < n; i++)
        if (f2u(fq[i]) != f2u(dec[i]))
            fail_msg("%s: fakeq != decode(encode) at %zu: x=%a fakeq=%a decode=%a", f->name, i, (double)x[i],
                     (double)fq[i], (double)dec[i]);
    if (ts) *ts = t;
    free(fq);
}

/* An adversarial run: per block one of several kinds, length n (partial last blocks included). */
static inline void adversarial(float *x, size_t n, size_t B, int emax)
{
    for (size_t i0 = 0; i0 < n; i0 += B) {
        size_t len = n - i0 < B ? n - i0 : B;
        int kind = (int)(rnd64() % 12), bin = (int)(rnd64() % 240) - 120;
        for (size_t i = i0; i < i0 + len; i++) {
            double g = rnd_gauss();
            switch (kind) {
            case 0: x[i] = (float)ldexp(g, bin); break;
            case 1: x[i] = u2f((uint32_t)rnd64() & 0x807fffffu); break;                 /* subnormal */
            case 2: x[i] = (rnd64() & 1) ? 0.0f : -0.0f; break;                          /* zeros */
            case 3: x[i] = u2f((uint32_t)rnd64() % 0x7f800000u | (uint32_t)(rnd64() & 1) << 31); break;
            case 4: x[i] = (float)ldexp(floor(g * 16) / 16, bin); break;                 /* ties */
            case 5: x[i] = (float)ldexp((floor(g * 8) + 0.5) / 8, bin); break;
            default: x[i] = (float)ldexp(g, bin); break;
            }
        }
        size_t j = i0 + (size_t)(rnd64() % len);
        switch (kind) {
        case 6: x[j] = NAN; break;
        case 7: x[j] = (rnd64() & 1) ? INFINITY : -INFINITY; break;
        case 8: x[j] = ldexpf(1.0f, bin + emax); break;                                   /* amax 2^k */
        case 9: x[j] = -ldexpf(0x1.fffffep+0f, bin); break;                              /* 0x1.fffffep+k */
        case 10: x[j] = (rnd64() & 1) ? FLT_MAX : -FLT_MAX; break;
        case 11: x[j] = ldexpf(1.0f, bin) * 1.0000001f; break;
        default: break;
        }
    }
}

/* Blocks of 32 of one kind each: random bits, ties, subnormals, Gaussians, exact powers of two at the
** element's top binade (emax), a lone NaN or -Inf.  Writes up to 31 values past n. */
static inline void fill_mixed(float *x, size_t n, int emax)
{
    for (size_t i0 = 0; i0 < n; i0 += 32) {
        int kind = (int)(rnd64() % 6), bin = (int)(rnd64() % 250) - 130;
        for (size_t i = i0; i < i0 + 32 && i < n; i++) {
            switch (kind) {
            case 0: x[i] = u2f((uint32_t)(rnd64() % 0x7f800000u) | (uint32_t)(rnd64() & 1) << 31); break;
            case 1: x[i] = (float)ldexp(floor(rnd_gauss() * 64) / 32, bin); break;
            case 2: x[i] = u2f((uint32_t)rnd64() & 0x807fffffu); break;
            default: x[i] = (float)ldexp(rnd_gauss(), bin); break;
            }
        }
        if (kind == 5) x[i0 + rnd64() % 32] = ldexpf(1.0f, bin + emax);
        if (kind == 4 && rnd64() % 8 == 0) x[i0 + rnd64() % 32] = (rnd64() & 1) ? NAN : -INFINITY;
    }
}

/* Adversarial blocks for encode: the fill_mixed kinds plus exact element ties at the block's scale,
** values around the saturation point, FP32 subnormals, signed zeros and lone NaN/Inf. */
static inline void fill_adversarial(float *x, size_t n, int emax, size_t B)
{
    fill_mixed(x, n, emax);
    for (size_t i0 = 0; i0 < n; i0 += B) {
        size_t len = n - i0 < B ? n - i0 : B;
        int kind = (int)(rnd64() % 8), bin = (int)(rnd64() % 260) - 135;
        if (kind < 3) continue;                                  /* keep fill_mixed's block */
        for (size_t i = i0; i < i0 + len; i++) {
            float sgn = (rnd64() & 1) ? -1.0f : 1.0f;
            switch (kind) {
            case 3: x[i] = sgn * (float)ldexp((double)(rnd64() % 64) + 0.5, bin); break;   /* ties */
            case 4: x[i] = sgn * u2f(f2u(ldexpf(1.0f, bin + emax)) + (uint32_t)(rnd64() % 5) - 2u); break;
            case 5: x[i] = sgn * u2f((uint32_t)(rnd64() % 0x00800000u)); break;           /* subnormals */
            case 6: x[i] = (rnd64() % 3 == 0) ? sgn * 0.0f : sgn * (float)ldexp(rnd01(), bin); break;
            default: x[i] = sgn * (float)ldexp((double)(rnd64() % 16) / 8.0, bin); break;
            }
        }
        if (kind == 7 && rnd64() % 4 == 0) x[i0 + rnd64() % len] = (rnd64() & 1) ? NAN : INFINITY;
        if (kind == 4) x[i0 + rnd64() % len] = ldexpf(0x1.fffffep+0f, bin + emax);
    }
}

/* fakeq of x[0..n) at every SIMD level above scalar equals the scalar path bit for bit (ys, yv: n
** floats of scratch).  Returns the number of values compared. */
static inline size_t simd_fakeq_same(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *ys,
                                     float *yv, int variant)
{
    qs_err e;
    size_t total = 0;
    qs_simd_force(QS_SIMD_SCALAR);
    assert_int_equal(f->fakeq(f, o, x, n, ys, &e), 0);
    for (int lvl = QS_SIMD_AVX2; lvl <= qs_simd_cpu(); lvl++) {
        qs_simd_force(lvl);
        memset(yv, 0, n * sizeof *yv);
        assert_int_equal(f->fakeq(f, o, x, n, yv, &e), 0);
        for (size_t i = 0; i < n; i++)
            if (f2u(ys[i]) != f2u(yv[i]))
                fail_msg("%s %s variant %d at %zu: x=%a scalar %a simd %a", f->name, qs_simd_name(lvl), variant, i,
                         (double)x[i], (double)ys[i], (double)yv[i]);
        total += n;
    }
    qs_simd_force(-1);
    return total;
}

/* encode of x[0..n) at every SIMD level above scalar gives the scalar encoder's codes, metadata bytes
** and tensor scale (cs, cv: n codes; ms, mv: n bytes of scratch).  Returns the values compared. */
static inline size_t simd_encode_same(const qs_format *f, const qs_qopts *o, const float *x, size_t n, uint32_t *cs,
                                      uint32_t *cv, uint8_t *ms, uint8_t *mv, int variant)
{
    qs_err e;
    size_t total = 0, B = qs_format_block(f, o), nb = qs_format_nblocks(f, o, n) * (size_t)f->meta_bytes;
    float ts_s = -1, ts_v = -2;
    qs_simd_force(QS_SIMD_SCALAR);
    assert_int_equal(f->encode(f, o, x, n, cs, ms, &ts_s, &e), 0);
    for (int lvl = QS_SIMD_AVX2; lvl <= qs_simd_cpu(); lvl++) {
        qs_simd_force(lvl);
        memset(cv, 0xAB, n * sizeof *cv);
        memset(mv, 0xAB, nb);
        assert_int_equal(f->encode(f, o, x, n, cv, mv, &ts_v, &e), 0);
        assert_true(f2u(ts_s) == f2u(ts_v));
        for (size_t i = 0; i < n; i++)
            if (cs[i] != cv[i])
                fail_msg("%s %s opt %d block %zu: code at %zu: x=%a scalar 0x%x simd 0x%x", f->name, qs_simd_name(lvl),
                         variant, B, i, (double)x[i], cs[i], cv[i]);
        for (size_t b = 0; b < nb; b++)
            if (ms[b] != mv[b])
                fail_msg("%s %s opt %d block %zu: meta byte %zu: scalar 0x%x simd 0x%x", f->name, qs_simd_name(lvl),
                         variant, B, b, ms[b], mv[b]);
        total += n;
    }
    qs_simd_force(-1);
    return total;
}

/* fakeq may run in place, at every SIMD level. */
static inline void inplace_same(const qs_format *g)
{
    qs_err e;
    float in[100], out[100], io[100];
    for (int i = 0; i < 100; i++) in[i] = (float)rnd_gauss();
    for (int lvl = QS_SIMD_SCALAR; lvl <= qs_simd_cpu(); lvl++) {
        qs_simd_force(lvl);
        assert_int_equal(g->fakeq(g, NULL, in, 100, out, &e), 0);
        memcpy(io, in, sizeof io);
        assert_int_equal(g->fakeq(g, NULL, io, 100, io, &e), 0);
        assert_memory_equal(io, out, sizeof io);
    }
    qs_simd_force(-1);
}

#endif
