/*
** Tests of the MX formats (kernels/format_mx.c) against spec/formats-mx.md:
**   - every §7 vector that is about these codecs: T1-T9, T11-T28, T29 (E8M0 scales as decoded by
**     MX blocks), T41-T42 (UOS and the quantizer half of PNQ).  Not here: T10, T36 (ggml's rounding:
**     test_format_variants.c), T30, T31 (plain E8M0 / element casts, test_minifloat.c), T32-T35
**     (test_format_nvfp4.c), T37-T40 (test_format_m2xfp.c);
**   - conformance with Graphcore's gfloat (fixtures/mx, made by fixtures/make_mx_vectors.py):
**     FLOOR scales, RNE / TA / RTZ elements, decoded values, for all six MX formats;
**   - each scale rule against an independent oracle in double arithmetic, incl. the log2f pitfall;
**   - fakeq == decode(encode) bit for bit on random and adversarial runs (NaN / Inf / all-zero
**     blocks, FP32 subnormals, amax at 2^k and 0x1.fffffep+k, ties, partial last blocks, odd block
**     sizes, every rounding mode), and an exact nearest-value oracle for the MX elements;
**   - scalar == AVX2 == AVX-512 fakeq bit for bit on millions of values.
*/
#include "test_format_util.h"

#include "../../kernels/format_families.h"
#include "../../kernels/minifloat.h"

static const char *kMX[] = {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8"};
#define NMX 6

/* One block vector: x (prefix, the rest of the block 0), expected scale byte, codes and values
** (prefix; the rest code 0 / +0).  Values compare bit for bit (the sign of zero counts). */
static void check_block(const char *name, qs_qopts o, const float *x, size_t nx, unsigned scale,
                        const uint32_t *codes, const float *vals)
{
    const qs_format *f = fmt(name);
    size_t B = qs_format_block(f, &o);
    float in[64] = {0}, dec[64];
    uint32_t c[64];
    uint8_t meta[8];
    assert_true(B <= 64 && nx <= B);
    memcpy(in, x, nx * sizeof *x);
    quant3(f, &o, in, B, c, meta, dec, NULL);
    if (meta[0] != scale) fail_msg("%s: scale 0x%02X, expected 0x%02X", name, meta[0], scale);
    for (size_t i = 0; i < B; i++) {
        uint32_t ec = i < nx ? codes[i] : 0;
        float ev = i < nx ? vals[i] : 0.0f;
        if (c[i] != ec) fail_msg("%s: element %zu (x=%g) code 0x%X, expected 0x%X", name, i, (double)in[i], c[i], ec);
        if (f2u(dec[i]) != f2u(ev))
            fail_msg("%s: element %zu (x=%g) value %a, expected %a", name, i, (double)in[i], (double)dec[i], (double)ev);
    }
}

#define BLOCK(name, o, X, S, C, V) check_block(name, o, X, N(X), S, C, V)

/* ================================================================================================
** §7.1 MX vectors
** ============================================================================================== */

static void test_T1_T2_T4_T8(void **st)
{
    (void)st;
    {   /* T1 ties: 0.25 -> 0, 0.75 -> 1, 5 -> 4 */
        const float x[] = {1, 2, 3, 6, -0.5f, 0.25f, 0.75f, 5};
        const uint32_t c[] = {2, 4, 5, 7, 9, 0, 2, 6};
        const float v[] = {1, 2, 3, 6, -0.5f, 0, 1, 4};
        BLOCK("mxfp4", O(), x, 0x7F, c, v);
    }
    {   /* T2 FLOOR: 7 clipped to 6 */
        const float x[] = {7, 1, -2.9f, 0.3f};
        const uint32_t c[] = {7, 2, 0xD, 1};
        const float v[] = {6, 1, -3, 0.5f};
        BLOCK("mxfp4", O(), x, 0x7F, c, v);
    }
    {   /* T4 */
        const float x[] = {0.1f, 0.01f, -0.05f};
        const uint32_t c[] = {7, 1, 0xD};
        const float v[] = {0.09375f, 0.0078125f, -0.046875f};
        BLOCK("mxfp4", O(), x, 0x79, c, v);
    }
    {   /* T8 RNE ties */
        const float x[] = {6, 0.75f, 1.75f, 3.5f, -0.75f, -0.25f, 2.5f, 5};
        const uint32_t c[] = {7, 2, 4, 6, 0xA, 8, 4, 6};
        const float v[] = {6, 1, 2, 4, -1, -0.0f, 2, 4};
        BLOCK("mxfp4", O(), x, 0x7F, c, v);
    }
}

static void test_T3_rceil(void **st)
{
    (void)st;
    const float x[] = {7, 1, -2.9f, 0.3f};
    const uint32_t c[] = {6, 1, 0xB, 0};
    const float v[] = {8, 1, -3, 0};
    BLOCK("mxfp4", Orule(QS_SCALE_RCEIL), x, 0x80, c, v);
}

static void test_T5_T6_T7_specials(void **st)
{
    (void)st;
    const qs_format *f = fmt("mxfp4");
    float x[32] = {0}, dec[32];
    uint32_t c[32];
    uint8_t m[1];
    for (int r = 0; r < QS_SCALE_COUNT; r++) {       /* T5: all zero -> 0x00 (uos: 0x7F, T41) */
        qs_qopts o = Orule((qs_scale_rule)r);
        x[3] = -0.0f;
        quant3(f, &o, x, 32, c, m, dec, NULL);
        assert_int_equal(m[0], r == QS_SCALE_UOS ? 0x7F : 0x00);
        for (int i = 0; i < 32; i++) {
            assert_int_equal(c[i], i == 3 ? 8u : 0u);
            assert_int_equal(f2u(dec[i]), i == 3 ? 0x80000000u : 0u);
        }
    }
    const float specials[] = {NAN, INFINITY, -INFINITY, -NAN};
    for (size_t k = 0; k < N(specials); k++) {       /* T6 (NaN), T7 (Inf): scale 0xFF, all NaN */
        for (int r = 0; r < QS_SCALE_COUNT; r++) {
            qs_qopts o = Orule((qs_scale_rule)r);
            memset(x, 0, sizeof x);
            x[0] = 1;
            x[1] = specials[k];
            x[2] = 2;
            quant3(f, &o, x, 32, c, m, dec, NULL);
            assert_int_equal(m[0], 0xFF);
            for (int i = 0; i < 32; i++) {
                assert_true(isnan(dec[i]));
                assert_int_equal(c[i], 0);
            }
        }
    }
}

static void test_T9_half_away(void **st)
{
    (void)st;
    const float x[] = {6, 0.75f, 1.75f, 3.5f, -0.75f, -0.25f, 2.5f, 5};
    const uint32_t c[] = {7, 2, 4, 6, 0xA, 9, 5, 7};
    const float v[] = {6, 1, 2, 4, -1, -0.5f, 3, 6};
    BLOCK("mxfp4", Oround(QS_RND_TA), x, 0x7F, c, v);
}

static void test_T11_T14_scale_modes(void **st)
{
    (void)st;
    /* amax 5, 6.5, 7, 7.5 with 0.3, -1.2, 2.6; 0x7F: codes k,1,A,5; 0x80: k',0,9,3 */
    const float amax[] = {5, 6.5f, 7, 7.5f};
    const uint32_t top7f[] = {6, 7, 7, 7}, top80[] = {4, 5, 6, 6};
    const float v7f[] = {4, 6, 6, 6}, v80[] = {4, 6, 8, 8};
    /* bumped (scale 0x80) per rule: floor, ceil, even, rceil, uos */
    const int bump[4][5] = {
        {0, 1, 0, 0, 0},   /* T11 amax 5 */
        {0, 1, 0, 1, 0},   /* T12 amax 6.5 */
        {0, 1, 1, 1, 0},   /* T13 amax 7: EVEN bumps at r >= 7 */
        {0, 1, 1, 1, 1},   /* T14 amax 7.5: UOS bumps at r > 7.25 */
    };
    for (int t = 0; t < 4; t++)
        for (int r = 0; r < 5; r++) {
            const float x[] = {amax[t], 0.3f, -1.2f, 2.6f};
            if (bump[t][r]) {
                const uint32_t c[] = {top80[t], 0, 9, 3};
                const float v[] = {v80[t], 0, -1, 3};
                BLOCK("mxfp4", Orule((qs_scale_rule)r), x, 0x80, c, v);
            } else {
                const uint32_t c[] = {top7f[t], 1, 0xA, 5};
                const float v[] = {v7f[t], 0.5f, -1, 3};
                BLOCK("mxfp4", Orule((qs_scale_rule)r), x, 0x7F, c, v);
            }
        }
}

static void test_T15_packing(void **st)
{
    (void)st;
    const qs_format *f = fmt("mxfp4");
    float x[32] = {1, 2, 3, 6, -0.5f, 0.25f, 0.75f, 5}, dec[32];
    uint32_t c[32];
    uint8_t m[1], packed[16];
    qs_qopts o = O();
    quant3(f, &o, x, 32, c, m, dec, NULL);
    qs_pack_codes(c, 32, 4, packed);
    const uint8_t want[16] = {0x42, 0x75, 0x09, 0x62};
    assert_memory_equal(packed, want, 16);
    uint32_t back[32];
    qs_unpack_codes(packed, 32, 4, back);
    assert_memory_equal(back, c, sizeof back);
}

static void test_T16_T21_mxfp6(void **st)
{
    (void)st;
    {   /* T16 E2M3 ties 1.0625 -> 1.0, 0.0625 -> 0, 0.1875 -> 0.25 */
        const float x[] = {4, 1.0625f, 0.1f, -3.3f, 0.0625f, 0.1875f};
        const uint32_t c[] = {0x18, 0x08, 0x01, 0x35, 0x00, 0x02};
        const float v[] = {4, 1, 0.125f, -3.25f, 0, 0.25f};
        BLOCK("mxfp6_e2m3", O(), x, 0x7F, c, v);
    }
    {   /* T17 saturation */
        const float x[] = {7.9f, -7.6f, 0.3f};
        const uint32_t c[] = {0x1F, 0x3F, 0x02};
        const float v[] = {7.5f, -7.5f, 0.25f};
        BLOCK("mxfp6_e2m3", O(), x, 0x7F, c, v);
    }
    {   /* T18 */
        const float x[] = {0.3f, 0.02f, -0.11f};
        const uint32_t c[] = {0x1A, 0x03, 0x2E};
        const float v[] = {0.3125f, 0.0234375f, -0.109375f};
        BLOCK("mxfp6_e2m3", O(), x, 0x7B, c, v);
    }
    {   /* T19 E3M2: 30 rounds to 32 -> saturates */
        const float x[] = {28, 30, 0.1f, -0.3f, 9, 0.03125f};
        const uint32_t c[] = {0x1F, 0x1F, 0x02, 0x25, 0x18, 0x00};
        const float v[] = {28, 28, 0.125f, -0.3125f, 8, 0};
        BLOCK("mxfp6_e3m2", O(), x, 0x7F, c, v);
    }
    {   /* T20 FLOOR */
        const float x[] = {1000, 5, -0.2f};
        const uint32_t c[] = {0x1F, 0x02, 0x20};
        const float v[] = {896, 4, -0.0f};
        BLOCK("mxfp6_e3m2", O(), x, 0x84, c, v);
    }
    {   /* T21 RCEIL */
        const float x[] = {1000, 5, -0.2f};
        const uint32_t c[] = {0x1C, 0x01, 0x20};
        const float v[] = {1024, 4, -0.0f};
        BLOCK("mxfp6_e3m2", Orule(QS_SCALE_RCEIL), x, 0x85, c, v);
    }
}

static void test_T22_T26_mxfp8(void **st)
{
    (void)st;
    {   /* T22 */
        const float x[] = {448, 500, 1, -0.0017f, 0x1p-9f, 300};
        const uint32_t c[] = {0x7E, 0x7E, 0x38, 0x81, 0x01, 0x79};
        const float v[] = {448, 448, 1, -0.001953125f, 0.001953125f, 288};
        BLOCK("mxfp8_e4m3", O(), x, 0x7F, c, v);
    }
    {   /* T23 FP32-subnormal block: FLOOR wants 2^-138, clamped to 2^-127 */
        const float x[] = {1e-39f, 3e-40f};
        const uint32_t c[] = {0x23, 0x15};
        const float v[] = {0.171875f * 0x1p-127f, 0x1.ap-5f * 0x1p-127f};
        BLOCK("mxfp8_e4m3", O(), x, 0x00, c, v);
        assert_true(fabs(v[0] - 1.01019046e-39) < 1e-46 && fabs(v[1] - 2.98465363e-40) < 1e-46);
    }
    {   /* T24 FLOOR vs RCEIL */
        const float x[] = {480, 0.5f, -3};
        const uint32_t cf[] = {0x7E, 0x30, 0xC4}, cr[] = {0x77, 0x28, 0xBC};
        const float vf[] = {448, 0.5f, -3}, vr[] = {480, 0.5f, -3};
        BLOCK("mxfp8_e4m3", O(), x, 0x7F, cf, vf);
        BLOCK("mxfp8_e4m3", Orule(QS_SCALE_RCEIL), x, 0x80, cr, vr);
    }
    {   /* T25 E5M2 */
        const float x[] = {57344, 60000, 1.5f, 3e-5f};
        const uint32_t c[] = {0x7B, 0x7B, 0x3E, 0x02};
        const float v[] = {57344, 57344, 1.5f, 0x1p-15f};
        BLOCK("mxfp8_e5m2", O(), x, 0x7F, c, v);
    }
    {   /* T26 */
        const float x[] = {1, -100, 0.2f};
        const uint32_t c[] = {0x60, 0xFA, 0x56};
        const float v[] = {1, -96, 0.1875f};
        BLOCK("mxfp8_e5m2", O(), x, 0x76, c, v);
    }
}

static void test_T27_mxint8(void **st)
{
    (void)st;
    const float x[] = {1, 0.5f, -0.3f, 1.999f, 0.0078125f, -0.0234375f};
    const int qa[] = {64, 32, -19, 127, 1, -2}, qe[] = {64, 32, -19, 127, 0, -2};
    uint32_t ca[6], ce[6];
    float va[6], ve[6];
    for (int i = 0; i < 6; i++) {
        ca[i] = (uint8_t)(int8_t)qa[i];
        ce[i] = (uint8_t)(int8_t)qe[i];
        va[i] = (float)qa[i] / 64;
        ve[i] = (float)qe[i] / 64;
    }
    BLOCK("mxint8", Oround(QS_RND_TA), x, 0x7F, ca, va);
    BLOCK("mxint8", O(), x, 0x7F, ce, ve);
    /* no -0, -128 never produced (sign-magnitude clamp), decode accepts 0x80 = -2.0 */
    const float y[] = {1.5f, -0.001f, -1.9999f};
    const uint32_t cy[] = {96, 0, 0x81};
    const float vy[] = {1.5f, 0.0f, -127.0f / 64};
    BLOCK("mxint8", O(), y, 0x7F, cy, vy);
    const qs_format *f = fmt("mxint8");
    uint32_t c80 = 0x80;
    uint8_t m = 0x7F;
    float out;
    qs_err e;
    qs_qopts o = O();
    assert_int_equal(f->decode(f, &o, &c80, &m, 1, 1, &out, &e), 0);
    assert_true(out == -2.0f);
}

static void test_T28_log2_pitfall(void **st)
{
    (void)st;
    const float x[] = {0x1.fffffep+2f, 1};
    const uint32_t c[] = {7, 2};
    const float v[] = {6, 1};
    BLOCK("mxfp4", O(), x, 0x7F, c, v);
    volatile float pit = 0x1.fffffep+2f;             /* what floor(log2f) would give here (libm-dependent) */
    print_message("# T28: this libm's floor(log2f(0x1.fffffep+2)) = %g (the exponent bits give 2)\n",
                  (double)floorf(log2f(pit)));
    /* the same at other binades, and the exponent-bit rule for every rule that starts from it */
    const qs_format *f = fmt("mxfp4");
    for (int k = -120; k <= 120; k++) {
        float b[32] = {0}, dec[32];
        uint32_t cc[32];
        uint8_t m;
        b[0] = ldexpf(0x1.fffffep+0f, k);
        qs_qopts o = O();
        quant3(f, &o, b, 32, cc, &m, dec, NULL);
        int want = k - 2 + 127;
        assert_int_equal(m, want < 0 ? 0 : want);
    }
}

static void test_T29_e8m0_scales(void **st)
{
    (void)st;
    /* an element 1.0 (E2M1 code 2) under scale codes 0x00, 0x7F, 0x80, 0xFE, 0xFF */
    const qs_format *f = fmt("mxfp4");
    const uint8_t sc[] = {0x00, 0x7F, 0x80, 0xFE, 0xFF, 0x01};
    const uint32_t want[] = {0x00400000u, 0x3f800000u, 0x40000000u, 0x7f000000u, 0, 0x00800000u};
    for (size_t i = 0; i < N(sc); i++) {
        uint32_t c = 2;
        float y;
        qs_err e;
        qs_qopts o = O();
        assert_int_equal(f->decode(f, &o, &c, &sc[i], 1, 1, &y, &e), 0);
        if (sc[i] == 0xFF) assert_true(isnan(y));
        else assert_int_equal(f2u(y), want[i]);
    }
}

/* ================================================================================================
** §7.5 UOS and the PNQ quantizer
** ============================================================================================== */

static unsigned scale_for(const char *name, qs_qopts o, float amax)
{
    const qs_format *f = fmt(name);
    float x[32] = {0}, dec[32];
    uint32_t c[32];
    uint8_t m;
    x[7] = amax;
    quant3(f, &o, x, 32, c, &m, dec, NULL);
    return m;
}

static void test_T41_uos(void **st)
{
    (void)st;
    const float a[] = {1.0f, 0.5f, 3.0f, 3.625f, 3.63f, 7.0f, 7.25f, 7.26f, 14.5f, 14.6f, 0};
    const unsigned s[] = {0x7D, 0x7C, 0x7E, 0x7E, 0x7F, 0x7F, 0x7F, 0x80, 0x80, 0x81, 0x7F};
    qs_qopts o = Orule(QS_SCALE_UOS);
    for (size_t i = 0; i < N(a); i++) assert_int_equal(scale_for("mxfp4", o, a[i]), s[i]);
    /* 3.625 -> 7.25 X is clipped to 6 X */
    {
        const float x[] = {3.625f};
        const uint32_t c[] = {7};
        const float v[] = {3.0f};
        BLOCK("mxfp4", o, x, 0x7E, c, v);
    }
    /* explicit thresholds; the defaults of the other element types (C file header) */
    o.uos_qmax = 6.0;
    assert_int_equal(scale_for("mxfp4", o, 6.0f), 0x7F);
    assert_int_equal(scale_for("mxfp4", o, 6.0000005f), 0x80);
    o.uos_qmax = 0;
    assert_int_equal(scale_for("mxfp8_e4m3", o, 464.0f), 0x7F);
    assert_int_equal(scale_for("mxfp8_e4m3", o, 464.00003f), 0x80);
    assert_int_equal(scale_for("mxfp8_e5m2", o, 61440.0f), 0x7F);
    assert_int_equal(scale_for("mxfp8_e5m2", o, 61440.004f), 0x80);
    assert_int_equal(scale_for("mxfp6_e2m3", o, 7.875f), 0x7F);
    assert_int_equal(scale_for("mxfp6_e2m3", o, 7.8750005f), 0x80);
    assert_int_equal(scale_for("mxfp6_e3m2", o, 30.011f), 0x7F);
    assert_int_equal(scale_for("mxfp6_e3m2", o, 30.0111f), 0x80);
    assert_int_equal(scale_for("mxint8", o, 0x1.fffffep+0f), 0x7F);   /* = floor */
    /* a threshold far from the element range bumps by several binades; clamps at 2^127 */
    o.uos_qmax = 0.75;
    assert_int_equal(scale_for("mxfp4", o, 6.0f), 0x7F + 3);
    o.uos_qmax = 1e-30;
    assert_int_equal(scale_for("mxfp4", o, 1e30f), 0xFE);
}

static void test_T42_pnq_quantizer(void **st)
{
    (void)st;
    const qs_format *f = fmt("mxfp4");
    const float S[6] = {2, 1, 0.5f, 0, -1, -3};
    float p[32], dec[32], v[32] = {1, 2, 3, 4, 5, 6};
    uint32_t c[32];
    uint8_t m;
    for (int i = 0; i < 32; i++) p[i] = expf((i < 6 ? S[i] : -30.0f) - 2.0f);
    assert_true(fabsf(p[1] - 0.36787945f) < 1e-7f && fabsf(p[5] - 0.006737947f) < 1e-9f);
    qs_qopts o = Orule(QS_SCALE_UOS);
    quant3(f, &o, p, 32, c, &m, dec, NULL);
    assert_int_equal(m, 0x7D);
    const uint32_t want[6] = {6, 3, 2, 1, 0, 0};
    const float ph[6] = {1, 0.375f, 0.25f, 0.125f, 0, 0};
    double num = 0, den = 0;
    for (int i = 0; i < 32; i++) {
        assert_int_equal(c[i], i < 6 ? want[i] : 0);
        assert_true(dec[i] == (i < 6 ? ph[i] : 0));
        num += (double)dec[i] * v[i];
        den += dec[i];
    }
    assert_true(den == 1.75 && fabs(num / den - 1.7142857) < 1e-6);
    /* normalize-then-quantize: P = P~ / sum, UOS or FLOOR both give 0x7C */
    double sum = 0;
    for (int i = 0; i < 32; i++) sum += p[i];
    for (int i = 0; i < 32; i++) p[i] = (float)(p[i] / sum);
    const float pn[4] = {0.5f, 0.1875f, 0.125f, 0.0625f};
    for (int r = 0; r < 2; r++) {
        o = Orule(r ? QS_SCALE_UOS : QS_SCALE_FLOOR);
        quant3(f, &o, p, 32, c, &m, dec, NULL);
        assert_int_equal(m, 0x7C);
        double o_nq = 0, s2 = 0;
        for (int i = 0; i < 32; i++) {
            assert_true(dec[i] == (i < 4 ? pn[i] : 0));
            o_nq += (double)dec[i] * v[i];
            s2 += dec[i];
        }
        assert_true(s2 == 0.875 && o_nq == 1.5);
    }
}

/* ================================================================================================
** gfloat conformance (fixtures/mx)
** ============================================================================================== */

static void *load(const char *name, const char *ext, size_t want)
{
    char path[256];
    size_t len = 0;
    snprintf(path, sizeof path, "fixtures/mx/%s.%s", name, ext);
    uint8_t *b = tu_slurp(path, &len);
    if (!b) fail_msg("cannot read %s (run from tests/)", path);
    if (len != want) fail_msg("%s: %zu bytes, expected %zu", path, len, want);
    return b;
}

static void test_gfloat_conformance(void **st)
{
    (void)st;
    const size_t NB = 64, n = NB * 32;
    const char *modes[] = {"rne", "ta", "rtz"};
    const qs_round rm[] = {QS_RND_RNE, QS_RND_TA, QS_RND_RTZ};
    uint32_t *c = malloc(n * sizeof *c);
    float *dec = malloc(n * sizeof *dec);
    uint8_t meta[64];
    for (int k = 0; k < NMX; k++) {
        const qs_format *f = fmt(kMX[k]);
        float *x = load(kMX[k], "in", n * 4);
        for (int md = 0; md < 3; md++) {
            char ext[32];
            snprintf(ext, sizeof ext, "%s.scale", modes[md]);
            uint8_t *rs = load(kMX[k], ext, NB);
            snprintf(ext, sizeof ext, "%s.codes", modes[md]);
            uint8_t *rc = load(kMX[k], ext, n);
            snprintf(ext, sizeof ext, "%s.out", modes[md]);
            float *ro = load(kMX[k], ext, n * 4);
            qs_qopts o = Oround(rm[md]);
            quant3(f, &o, x, n, c, meta, dec, NULL);
            for (size_t b = 0; b < NB; b++)
                if (meta[b] != rs[b]) fail_msg("%s %s block %zu: scale 0x%02X, gfloat 0x%02X", f->name, modes[md], b, meta[b], rs[b]);
            for (size_t i = 0; i < n; i++) {
                uint32_t want = rc[i];
                float wv = ro[i];
                if (f->ebits == 0 && want == 0x80) {    /* gfloat's two's-complement -128: we clamp to -127 */
                    want = 0x81;
                    wv = -127.0f / 64 * u2f(meta[i / 32] ? (uint32_t)meta[i / 32] << 23 : 0x00400000u);
                }
                if (c[i] != want || f2u(dec[i]) != f2u(wv))
                    fail_msg("%s %s element %zu (x=%a): code 0x%X value %a, gfloat 0x%X %a", f->name, modes[md], i,
                             (double)x[i], c[i], (double)dec[i], want, (double)wv);
            }
            free(rs);
            free(rc);
            free(ro);
        }
        free(x);
    }
    free(c);
    free(dec);
}

/* ================================================================================================
** Scale rules against an oracle in double arithmetic
** ============================================================================================== */

typedef struct elem_info { const char *name; int emax, mbits; double maxv, qmax; } elem_info;
static const elem_info kEl[NMX] = {
    {"mxfp8_e4m3", 8, 3, 448, 464}, {"mxfp8_e5m2", 15, 2, 57344, 61440},
    {"mxfp6_e3m2", 4, 2, 28, 30.01104854345604}, {"mxfp6_e2m3", 2, 3, 7.5, 7.875},
    {"mxfp4", 2, 1, 6, 7.25}, {"mxint8", 0, 6, 127.0 / 64, 2.0},
};

static int clamp_code(int u) { return (u < -127 ? -127 : u > 127 ? 127 : u) + 127; }

static int oracle_scale(const elem_info *el, qs_scale_rule r, double qmax, float amaxf)
{
    double a = amaxf;
    int fl = (int)floor(log2(a));                    /* exact in double for float32 inputs */
    if (ldexp(1, fl) > a) fl--;
    if (ldexp(1, fl + 1) <= a) fl++;
    int ce = ldexp(1, fl) == a ? fl : fl + 1;
    switch (r) {
    case QS_SCALE_FLOOR: return clamp_code(fl - el->emax);
    case QS_SCALE_CEIL: return clamp_code(ce - el->emax);
    case QS_SCALE_EVEN: {                            /* significand rounded to mbits, ties up */
        if (amaxf < 0x1p-126f)                       /* torchao's bit formula (field 0 = -127) */
            return clamp_code(-127 - el->emax + (f2u(amaxf) + (1u << (22 - el->mbits)) >= 0x00800000u));
        double sig = ldexp(a, -fl), q = ldexp(floor(ldexp(sig, el->mbits) + 0.5), -el->mbits);
        return clamp_code(fl + (q >= 2) - el->emax);
    }
    case QS_SCALE_RCEIL: {
        float d = amaxf * (float)(1.0 / el->maxv);
        if ((float)(1.0 / el->maxv) != 1.0f / (float)el->maxv) fail_msg("1/max");
        if (d <= 0x1p-127f) return 0;
        int e = (int)ceil(log2((double)d));
        if (ldexp(1, e) < d) e++;
        if (ldexp(1, e - 1) >= d) e--;
        return e + 127 > 254 ? 254 : e + 127;
    }
    default: {
        int u = (int)ceil(log2(a / qmax));
        while (a > ldexp(qmax, u)) u++;
        while (a <= ldexp(qmax, u - 1)) u--;
        return clamp_code(u);
    }
    }
}

static void test_scale_rules_oracle(void **st)
{
    (void)st;
    for (int k = 0; k < NMX; k++) {
        const elem_info *el = &kEl[k];
        for (int r = 0; r < QS_SCALE_COUNT; r++) {
            qs_qopts o = Orule((qs_scale_rule)r);
            for (int t = 0; t < 3000; t++) {
                float a;
                int kind = t % 6;
                if (kind == 0) a = u2f((uint32_t)(rnd64() % 0x7f7fffffu) + 1);          /* any finite */
                else if (kind == 1) a = ldexpf(1.0f, (int)(rnd64() % 250) - 140);         /* 2^k */
                else if (kind == 2) a = ldexpf(0x1.fffffep+0f, (int)(rnd64() % 250) - 140);
                else if (kind == 3) a = u2f((uint32_t)(rnd64() % 0x00800000u) + 1);      /* subnormal */
                else if (kind == 4) {                    /* the bump thresholds of each rule */
                    const double th[] = {el->qmax, el->maxv, 2 * el->maxv, ldexp(1, el->emax) * (2 - ldexp(1, -el->mbits - 1))};
                    float b = (float)th[rnd64() % 4];
                    int d = (int)(rnd64() % 5) - 2;
                    uint32_t u = f2u(b) + (uint32_t)d;
                    a = ldexpf(u2f(u), (int)(rnd64() % 40) - 20 - el->emax);
                } else a = (float)(fabs(rnd_gauss()) * ldexp(1, (int)(rnd64() % 60) - 30));
                if (!(a > 0) || isinf(a)) continue;
                unsigned got = scale_for(el->name, o, a), want = (unsigned)oracle_scale(el, (qs_scale_rule)r, el->qmax, a);
                if (got != want)
                    fail_msg("%s rule %s amax %a: scale 0x%02X, oracle 0x%02X", el->name, qs_scale_rule_name((qs_scale_rule)r),
                             (double)a, got, want);
            }
        }
    }
}

/* ================================================================================================
** Elements against an exact nearest-value oracle; fakeq == decode(encode) everywhere
** ============================================================================================== */

/* Element value of a code from the §1.3 formula (independent of minifloat.c). */
static double elem_value(int k, unsigned code)
{
    static const int eb[] = {4, 5, 3, 2, 2}, mb[] = {3, 2, 2, 3, 1}, bias[] = {7, 15, 3, 1, 1};
    if (k == 5) return (int8_t)(uint8_t)code / 64.0;
    int M = mb[k], nb = eb[k] + M;
    unsigned s = code >> nb & 1, e = (code >> M) & ((1u << eb[k]) - 1), m = code & ((1u << M) - 1);
    if (k == 0 && e == 15 && m == 7) return NAN;                      /* E4M3FN NaN */
    if (k == 1 && e == 31) return m ? NAN : s ? -INFINITY : INFINITY;   /* E5M2 Inf / NaN */
    double v = e ? ldexp(1 + m / (double)(1 << M), (int)e - bias[k]) : ldexp(m, 1 - bias[k] - M);
    return s ? -v : v;
}

/* Exact nearest: magnitude grid of finite codes, ties by mode (RNE: even code), saturation. */
static double oracle_elem(int k, double y, qs_round mode)
{
    static const double maxv[] = {448, 57344, 28, 7.5, 6, 127.0 / 64};
    static const int nb[] = {7, 7, 5, 5, 3, 7};
    double a = fabs(y), lo = 0, hi = INFINITY;
    unsigned lc = 0;
    if (a >= maxv[k]) return copysign(maxv[k], y);
    for (unsigned c = 0; c < (1u << nb[k]); c++) {
        double v = elem_value(k, c);
        if (k == 5 && c > 127) continue;
        if (!isfinite(v) || v > maxv[k]) continue;
        if (v <= a && v >= lo) { lo = v; lc = c; }
        if (v >= a && v < hi) hi = v;
    }
    double r;
    if (lo == a) r = lo;
    else if (mode == QS_RND_RTZ) r = lo;
    else if (a - lo < hi - a) r = lo;
    else if (a - lo > hi - a) r = hi;
    else if (mode == QS_RND_TA) r = hi;
    else r = (lc & 1) ? hi : lo;
    if (k == 5 && r == 0) return 0.0;
    return copysign(r, y);
}

static void test_elements_oracle(void **st)
{
    (void)st;
    const qs_round modes[] = {QS_RND_RNE, QS_RND_TA, QS_RND_RTZ};
    float x[32], dec[32];
    uint32_t c[32];
    uint8_t m;
    for (int k = 0; k < NMX; k++) {
        const qs_format *f = fmt(kMX[k]);
        for (int md = 0; md < 3; md++) {
            qs_qopts o = Oround(modes[md]);
            for (int t = 0; t < 400; t++) {
                static const unsigned topc[] = {0x7E, 0x7B, 31, 31, 7, 127};
                static const int em[] = {8, 15, 4, 2, 2, 0};
                int bin = (int)(rnd64() % 80) - 40;
                /* x[0] pins amax to [2^emax, 2^(emax+1)) * 2^bin, so X = 2^bin (floor) and the
                ** midpoints below are exact ties of the element grid */
                x[0] = (float)ldexp((1 + 0.99 * rnd01()) * ((rnd64() & 1) ? 1 : -1), em[k] + bin);
                for (int i = 1; i < 32; i++) {
                    double g;
                    if (rnd64() % 2 == 0) {
                        unsigned cc = (unsigned)(rnd64() % topc[k]);
                        g = (elem_value(k, cc) + elem_value(k, cc + 1)) / 2 * ((rnd64() & 1) ? 1 : -1);
                        g = ldexp(g, bin);
                    } else {
                        g = ldexp(rnd_gauss(), em[k] + bin - 2);
                    }
                    x[i] = (float)g;
                }
                quant3(f, &o, x, 32, c, &m, dec, NULL);
                float X = m ? u2f((uint32_t)m << 23) : u2f(0x00400000u);
                for (int i = 0; i < 32; i++) {
                    double want = oracle_elem(k, (double)x[i] / X, modes[md]) * X;
                    if ((double)dec[i] != want || (want == 0 && !signbit(want) != !signbit(dec[i])))
                        fail_msg("%s %s x=%a X=%a: %a, oracle %a", f->name, qs_round_name(modes[md]), (double)x[i],
                                 (double)X, (double)dec[i], want);
                }
            }
        }
    }
}

static void test_fakeq_agreement(void **st)
{
    (void)st;
    const size_t lens[] = {1, 5, 31, 32, 33, 100, 257, 1000};
    const int blocks[] = {0, 1, 7, 16, 24, 64};
    const qs_round modes[] = {QS_RND_RNE, QS_RND_TA, QS_RND_RTZ, QS_RND_SR};
    float *x = malloc(1000 * sizeof *x), *dec = malloc(1000 * sizeof *dec);
    uint32_t *c = malloc(1000 * sizeof *c);
    uint8_t *m = malloc(2000);
    for (int lvl = QS_SIMD_SCALAR; lvl <= qs_simd_cpu(); lvl++) {
        qs_simd_force(lvl);
        for (int k = 0; k < NMX; k++)
            for (int r = 0; r < QS_SCALE_COUNT; r++)
                for (size_t li = 0; li < N(lens); li++)
                    for (size_t bi = 0; bi < N(blocks); bi++)
                        for (size_t md = 0; md < N(modes); md++) {
                            qs_qopts o = Orule((qs_scale_rule)r);
                            o.round = modes[md];
                            o.block = blocks[bi];
                            o.seed = rnd64();
                            o.index0 = rnd64() % 1000;
                            adversarial(x, lens[li], blocks[bi] ? (size_t)blocks[bi] : 32, kEl[k].emax);
                            quant3(fmt(kMX[k]), &o, x, lens[li], c, m, dec, NULL);
                        }
    }
    qs_simd_force(-1);
    free(x);
    free(dec);
    free(c);
    free(m);
}

static void test_sr_and_options(void **st)
{
    (void)st;
    const qs_format *f = fmt("mxfp4");
    float x[64], a[64], b[64], lo[64];
    qs_err e;
    for (int i = 0; i < 64; i++) x[i] = (float)rnd_gauss();
    /* SR: reproducible from (seed, index0 + i), and always one of the two neighbours */
    qs_qopts o = Oround(QS_RND_SR);
    o.seed = 42;
    assert_int_equal(f->fakeq(f, &o, x, 64, a, &e), 0);
    assert_int_equal(f->fakeq(f, &o, x, 64, b, &e), 0);
    assert_memory_equal(a, b, sizeof a);
    qs_qopts rz = Oround(QS_RND_RTZ);
    assert_int_equal(f->fakeq(f, &rz, x, 64, lo, &e), 0);
    int ups = 0;
    for (int i = 0; i < 64; i++) {
        assert_true(fabsf(a[i]) >= fabsf(lo[i]) && signbit(a[i]) == signbit(lo[i]));
        ups += a[i] != lo[i];
    }
    assert_true(ups > 5 && ups < 60);
    o.seed = 43;
    assert_int_equal(f->fakeq(f, &o, x, 64, b, &e), 0);
    assert_true(memcmp(a, b, sizeof a) != 0);
    /* rejected options */
    o = Oround(QS_RND_HR);
    assert_int_equal(f->fakeq(f, &o, x, 64, a, &e), -1);
    assert_non_null(strstr(e.msg, "hr"));
    o = O();
    o.block = -1;
    assert_int_equal(f->fakeq(f, &o, x, 64, a, &e), -1);
    o = Orule(QS_SCALE_UOS);
    o.uos_qmax = -1;
    assert_int_equal(f->fakeq(f, &o, x, 64, a, &e), -1);
    o = O();
    o.scale_rule = QS_SCALE_COUNT;
    assert_int_equal(f->fakeq(f, &o, x, 64, a, &e), -1);
    /* NULL options mean the defaults */
    o = O();
    assert_int_equal(f->fakeq(f, NULL, x, 64, a, &e), 0);
    assert_int_equal(f->fakeq(f, &o, x, 64, b, &e), 0);
    assert_memory_equal(a, b, sizeof a);
    /* fakeq may run in place */
    const char *all[] = {"mxfp4", "mxfp8_e4m3", "mxint8"};
    for (size_t k = 0; k < N(all); k++) inplace_same(fmt(all[k]));
    /* decode rejects codes wider than the element */
    uint32_t c = 0x10;
    uint8_t sc = 0x7F;
    assert_int_equal(f->decode(f, &o, &c, &sc, 1, 1, a, &e), -1);
}

static void test_registry(void **st)
{
    (void)st;
    const double bpe[NMX] = {8.25, 8.25, 6.25, 6.25, 4.25, 8.25};
    for (int k = 0; k < NMX; k++) {
        const qs_format *f = fmt(kMX[k]);
        qs_qopts o = O();
        assert_int_equal(f->family, QS_FAM_MX);
        assert_int_equal(f->scale_kind, QS_SK_E8M0);
        assert_false(f->has_tensor_scale);
        assert_int_equal(f->block, 32);
        assert_true(qs_format_bits_per_elem(f, &o) == bpe[k]);
        assert_true(f->has_scale_rule);
        assert_int_equal(f->ncodes, 1u << f->elem_bits);
        for (unsigned c = 0; c < f->ncodes; c++) {
            double v = f->code_value(c), w = elem_value(k, c);
            assert_true(v == w || (isnan(v) && isnan(w)));
        }
        assert_true(f->max_finite == kEl[k].maxv * 0x1p127);
    }
    qs_qopts o = O();
    o.block = 16;
    assert_true(qs_format_bits_per_elem(fmt("mxfp4"), &o) == 4.5);
}

/* ================================================================================================
** Scalar == AVX2 == AVX-512
** ============================================================================================== */

static void test_simd_bit_identity(void **st)
{
    (void)st;
    if (qs_simd_cpu() == QS_SIMD_SCALAR) tu_skip("cpu: no AVX2, so no SIMD path to compare");
    const size_t n = 1u << 20;
    float *x = malloc(n * sizeof *x), *ys = malloc(n * sizeof *ys), *yv = malloc(n * sizeof *yv);
    const char *names[] = {"mxfp4", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxint8"};
    const int emax[] = {2, 8, 15, 4, 2, 0};
    size_t total = 0;
    for (size_t k = 0; k < N(names); k++)
        for (int v = 0; v < (k < 2 ? 5 : 2); v++) {
            qs_qopts o = Orule((qs_scale_rule)(k < 2 ? v : v * 3));
            fill_mixed(x, n, emax[k]);
            total += simd_fakeq_same(fmt(names[k]), &o, x, n - 3, ys, yv, v);
        }
    print_message("# scalar vs SIMD: %zu values compared\n", total);
    free(x);
    free(ys);
    free(yv);
}

/* The vector encoders produce exactly the scalar encoder's codes and metadata bytes. */
static void test_simd_encode_identity(void **st)
{
    (void)st;
    if (qs_simd_cpu() == QS_SIMD_SCALAR) tu_skip("cpu: no AVX2, so no SIMD path to compare");
    const size_t n = (1u << 17) + 21;
    float *x = malloc((n + 32) * sizeof *x);                      /* fill_mixed writes up to 31 past n */
    uint32_t *cs = malloc(n * sizeof *cs), *cv = malloc(n * sizeof *cv);
    uint8_t *ms = malloc(n), *mv = malloc(n);
    const char *names[] = {"mxfp4", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxint8"};
    const int emax[] = {2, 8, 15, 4, 2, 0};
    const int blocks[] = {0, 16, 8, 24, 7, 64};
    size_t total = 0;
    for (size_t k = 0; k < N(names); k++) {
        const qs_format *f = fmt(names[k]);
        for (int v = 0; v < QS_SCALE_COUNT + 1; v++)
            for (size_t bi = 0; bi < N(blocks); bi++) {
                qs_qopts o = O();
                o.block = blocks[bi];
                if (v < QS_SCALE_COUNT) {
                    o.scale_rule = (qs_scale_rule)v;
                } else {
                    o.scale_rule = QS_SCALE_UOS;
                    o.uos_qmax = 1.5 * kEl[k].maxv;
                }
                fill_adversarial(x, n, emax[k], qs_format_block(f, &o));
                total += simd_encode_same(f, &o, x, n, cs, cv, ms, mv, v);
            }
    }
    print_message("# encode scalar vs SIMD: %zu values compared\n", total);
    free(x); free(cs); free(cv); free(ms); free(mv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_T1_T2_T4_T8),
        cmocka_unit_test(test_T3_rceil),
        cmocka_unit_test(test_T5_T6_T7_specials),
        cmocka_unit_test(test_T9_half_away),
        cmocka_unit_test(test_T11_T14_scale_modes),
        cmocka_unit_test(test_T15_packing),
        cmocka_unit_test(test_T16_T21_mxfp6),
        cmocka_unit_test(test_T22_T26_mxfp8),
        cmocka_unit_test(test_T27_mxint8),
        cmocka_unit_test(test_T28_log2_pitfall),
        cmocka_unit_test(test_T29_e8m0_scales),
        cmocka_unit_test(test_T41_uos),
        cmocka_unit_test(test_T42_pnq_quantizer),
        cmocka_unit_test(test_gfloat_conformance),
        cmocka_unit_test(test_scale_rules_oracle),
        cmocka_unit_test(test_elements_oracle),
        cmocka_unit_test(test_fakeq_agreement),
        cmocka_unit_test(test_sr_and_options),
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_simd_bit_identity),
        cmocka_unit_test(test_simd_encode_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
