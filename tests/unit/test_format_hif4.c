/*
** Tests of HiFloat4 (kernels/format_hifloat.c) against spec/formats-hifloat.md: the §2.2 E6M2
** examples, every §2.10 block vector, an independent exact model of Algorithm 1 (§2.5, written with
** frexp/nearbyint here) on random, Gaussian, outlier-heavy and edge units, fakeq == decode(encode),
** scalar == AVX2, partial units, the S1P2 element against en_dtypes' float4_e1m2 (value set, RNE
** rounding).  HiF8: test_format_hif8.c.
*/
#include "test_format_util.h"

#include "../../kernels/hifloat.h"

static qs_qopts opts(qs_round r, int sat)
{
    qs_qopts o;
    memset(&o, 0, sizeof o);
    o.round = r;
    o.sat = sat;
    return o;
}

/* Same bits, or both NaN. */
static int same(float a, float b) { return (isnan(a) && isnan(b)) || f2u(a) == f2u(b); }

/* ================================================================================================
** HiF4 reference: Algorithm 1 (§2.5) written again, with frexp / nearbyint
** ============================================================================================== */

static double round_sig(double v, int bits)   /* RNE to `bits` significant bits, v > 0 finite */
{
    int ex;
    double m = frexp(v, &ex);
    return ldexp(nearbyint(ldexp(m, bits)), ex - bits);
}

typedef struct { unsigned e6m2, e8, e16; uint8_t nib[64]; float y[64]; } ref4;

static void ref_hif4(const float *v, int rne, ref4 *r)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < 64; i++)
        if (isnan(v[i])) {
            r->e6m2 = 0xff;
            for (int k = 0; k < 64; k++) r->y[k] = NAN;
            return;
        }
    double v16[16], v8[8], vmax = 0;
    for (int k = 0; k < 16; k++) {
        v16[k] = 0;
        for (int i = 0; i < 4; i++) v16[k] = fmax(v16[k], fabs((double)v[4 * k + i]));
    }
    for (int j = 0; j < 8; j++) {
        v8[j] = fmax(v16[2 * j], v16[2 * j + 1]);
        vmax = fmax(vmax, v8[j]);
    }
    double c7 = round_sig(1.0 / 7.0, 8);
    double sf = isinf(vmax) ? INFINITY : vmax > 0 ? round_sig(vmax * c7, 8) : 0;
    sf = fmin(fmax(sf, 0x1p-48), 49152.0);
    double sc = round_sig(sf, 3);
    int ex;
    double m = frexp(sc, &ex);                   /* m in [0.5, 1): sc = 2^(ex-1) * (2m) */
    r->e6m2 = (unsigned)((ex - 1 + 48) << 2) | (unsigned)(m * 8 - 4);
    double rec = round_sig(1.0 / sc, 8);
    for (int j = 0; j < 8; j++) if (v8[j] * rec >= 4) r->e8 |= 1u << j;
    for (int k = 0; k < 16; k++)
        if (v16[k] * rec * ldexp(1.0, -(int)((r->e8 >> (k / 2)) & 1)) >= 2) r->e16 |= 1u << k;
    for (int i = 0; i < 64; i++) {
        int d = (int)((r->e8 >> (i / 8)) & 1) + (int)((r->e16 >> (i / 4)) & 1);
        double t = fabs((double)v[i]) * rec * ldexp(1.0, 2 - d);
        double q = fmin(rne ? nearbyint(t) : floor(t + 0.5), 7.0);
        r->nib[i] = (uint8_t)((v[i] < 0 ? 8 : 0) | (unsigned)q);
        double y = sc * ldexp(1.0, d) * q / 4;
        r->y[i] = (float)(v[i] < 0 ? -y : y);
    }
}

/* Compare the registry's encode / decode / fakeq (both paths) on n values with the reference. */
static void check_hif4_run(const float *x, size_t n, int rne, const char *what)
{
    const qs_format *f = fmt("hif4");
    size_t nb = (n + 63) / 64;
    uint32_t *c = malloc((n + 1) * sizeof *c);
    uint8_t *meta = malloc(nb * 4 + 1);
    float *y = malloc((n + 1) * sizeof *y), *yq = malloc((n + 1) * sizeof *yq),
          *y0 = malloc((n + 1) * sizeof *y0), *y1 = malloc((n + 1) * sizeof *y1);
    assert_non_null(c); assert_non_null(meta); assert_non_null(y); assert_non_null(yq);
    assert_non_null(y0); assert_non_null(y1);
    qs_qopts o = opts(rne ? QS_RND_RNE : QS_RND_DEFAULT, 0);
    qs_err e;
    float ts = 0;
    assert_int_equal(f->encode(f, &o, x, n, c, meta, &ts, &e), 0);
    assert_true(ts == 1.0f);
    assert_int_equal(f->decode(f, &o, c, meta, ts, n, y, &e), 0);
    assert_int_equal(f->fakeq(f, &o, x, n, yq, &e), 0);
    qs_hif4_fakeq_run(0, x, n, y0, rne);
    qs_hif4_fakeq_run(1, x, n, y1, rne);
    assert_memory_equal(y, yq, n * sizeof *y);       /* fakeq == decode(encode), bit for bit */
    assert_memory_equal(y0, y1, n * sizeof *y);      /* scalar == AVX2 */
    assert_memory_equal(y, y0, n * sizeof *y);
    for (size_t u = 0; u < nb; u++) {
        float v[64] = {0};
        size_t cnt = n - 64 * u < 64 ? n - 64 * u : 64;
        memcpy(v, x + 64 * u, cnt * sizeof *v);
        ref4 r;
        ref_hif4(v, rne, &r);
        qs_hif4_meta mm;
        qs_hif4_meta_load(meta + 4 * u, &mm);
        if (mm.e6m2 != r.e6m2 || mm.e1_8 != r.e8 || mm.e1_16 != r.e16)
            fail_msg("%s unit %zu: meta %02x/%02x/%04x, reference %02x/%02x/%04x", what, u,
                     mm.e6m2, mm.e1_8, mm.e1_16, r.e6m2, r.e8, r.e16);
        for (size_t i = 0; i < cnt; i++) {
            if (c[64 * u + i] != r.nib[i] || !same(y[64 * u + i], r.y[i]))
                fail_msg("%s unit %zu elem %zu: x=%a nibble %x y=%a, reference %x %a", what, u, i,
                         (double)x[64 * u + i], (unsigned)c[64 * u + i], (double)y[64 * u + i],
                         r.nib[i], (double)r.y[i]);
        }
    }
    free(c); free(meta); free(y); free(yq); free(y0); free(y1);
}

static unsigned flags_of(const char *s)
{
    unsigned v = 0;
    for (int i = 0; s[i]; i++) if (s[i] == '1') v |= 1u << i;
    return v;
}

static void expect_unit(const float *v, unsigned e6m2, const char *e8, const char *e16,
                        const char *nibs, const float *dec)
{
    qs_hif4_meta m;
    uint8_t nib[64];
    qs_hif4_quant_unit(v, 0, &m, nib);
    assert_int_equal(m.e6m2, e6m2);
    assert_int_equal(m.e1_8, flags_of(e8));
    assert_int_equal(m.e1_16, flags_of(e16));
    assert_int_equal(strlen(nibs), 64);
    for (int i = 0; i < 64; i++) {
        unsigned want = (unsigned)strtoul((char[]){nibs[i], 0}, NULL, 16);
        if (nib[i] != want) fail_msg("element %d: nibble %x, spec %x", i, nib[i], want);
    }
    const qs_format *f = fmt("hif4");
    qs_qopts o = opts(QS_RND_DEFAULT, 0);
    qs_err e;
    float y[64];
    uint32_t c[64];
    uint8_t meta[4];
    assert_int_equal(f->encode(f, &o, v, 64, c, meta, NULL, &e), 0);
    assert_int_equal(meta[0], e6m2);
    assert_int_equal(meta[1], flags_of(e8));
    assert_int_equal(meta[2] | meta[3] << 8, flags_of(e16));
    assert_int_equal(f->fakeq(f, &o, v, 64, y, &e), 0);
    for (int i = 0; i < 64; i++) {
        assert_int_equal(c[i], nib[i]);
        if (dec && !(y[i] == dec[i]))
            fail_msg("element %d: %a, spec %a", i, (double)y[i], (double)dec[i]);
    }
    check_hif4_run(v, 64, 0, "spec vector");
    check_hif4_run(v, 64, 1, "spec vector rne");
}

static void test_hif4_e6m2(void **st)
{
    struct { unsigned c; double v; } t[] = {
        {0x00, 0x1p-48}, {0xBC, 0.5}, {0xBD, 0.625}, {0xC0, 1.0}, {0xC1, 1.25}, {0xC2, 1.5},
        {0xC3, 1.75}, {0xC4, 2.0}, {0xCF, 14.0}, {0xFC, 32768.0}, {0xFD, 40960.0}, {0xFE, 49152.0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        assert_true(qs_hif4_e6m2_value((uint8_t)t[i].c) == t[i].v);
    assert_true(isnan(qs_hif4_e6m2_value(0xFF)));
    assert_true(qs_hif4_e6m2_rec(0xC1) == 0.80078125);
    assert_true(qs_hif4_e6m2_rec(0xC2) == 0.66796875);
    assert_true(qs_hif4_e6m2_rec(0xC3) == 0.5703125);
    assert_true(qs_hif4_e6m2_rec(0x00) == 0x1p48);
    for (unsigned c = 0; c < 255; c++) {
        double v = qs_hif4_e6m2_value((uint8_t)c);
        assert_true(v == ldexp(1.0 + (c & 3) / 4.0, (int)(c >> 2) - 48));
        assert_true(qs_hif4_e6m2_rec((uint8_t)c) == round_sig(1.0 / v, 8));
    }
    /* metadata word layout (§2.7 proposal) */
    qs_hif4_meta m = {0xC1, 0x81, 0x8001}, m2;
    uint8_t b[4];
    qs_hif4_meta_store(&m, b);
    assert_int_equal(b[0], 0xC1);
    assert_int_equal(b[1], 0x81);
    assert_int_equal(b[2], 0x01);
    assert_int_equal(b[3], 0x80);
    qs_hif4_meta_load(b, &m2);
    assert_memory_equal(&m, &m2, sizeof m);
}

static void test_hif4_spec_blocks(void **st)
{
    float v[64], de[64];
    char nibs[65];

    /* Block E ("exact grid") */
    for (int i = 0; i < 64; i++) v[i] = 1.0f;
    v[0] = 7; v[1] = -3.5f; v[2] = 0.125f; v[3] = 0.0625f;
    for (int i = 0; i < 64; i++) de[i] = i < 4 ? (float[]){7, -4, 0, 0}[i] : 1.0f;
    nibs[64] = 0;
    memset(nibs, '4', 64);
    memcpy(nibs, "7C002222", 8);
    expect_unit(v, 0xC0, "10000000", "1000000000000000", nibs, de);

    /* Block D ("mixed groups") */
    static const double base[8] = {1.0, 0.3, 3.0, 0.05, 6.5, -2.0, 0.9, -7.0};
    for (int g = 0; g < 8; g++)
        for (int k = 0; k < 8; k++)
            v[8 * g + k] = (float)(base[g] * (k < 4 ? 1 : 0.4) * (k % 3 == 0 ? -1 : 1));
    static const float dd[64] = {
        -1, 1, 1, -1, 0.5, 0.5, -0.5, 0.5, -0.25, 0.25, 0.25, -0.25, 0, 0, 0, 0,
        -3, 3, 3, -3, 1.25, 1.25, -1.25, 1.25, 0, 0, 0, 0, 0, 0, 0, 0,
        -7, 7, 7, -7, 2.5, 2.5, -2.5, 2.5, 2, -2, -2, 2, -0.75, -0.75, 0.75, -0.75,
        -1, 1, 1, -1, 0.25, 0.25, -0.25, 0.25, 7, -7, -7, 7, -3, -3, 3, -3};
    expect_unit(v, 0xC0, "00001001", "0000100010100010",
                "C44C22A291190080E66E55D580080080F77F55D54CC4BB3BC44C11917FF7EE6E", dd);

    /* Block A ("ramp") */
    for (int i = 0; i < 64; i++) v[i] = (float)((i - 32) / 8.0);
    static const struct { float v; int n; } da[] = {
        {-3.75f, 5}, {-3.125f, 5}, {-2.5f, 5}, {-1.875f, 4}, {-1.5625f, 2}, {-1.25f, 3},
        {-0.9375f, 2}, {-0.78125f, 1}, {-0.625f, 1}, {-0.46875f, 1}, {-0.3125f, 2}, {-0.15625f, 1},
        {0, 1}, {0.15625f, 1}, {0.3125f, 2}, {0.46875f, 1}, {0.625f, 1}, {0.78125f, 1},
        {0.9375f, 2}, {1.25f, 3}, {1.5625f, 2}, {1.875f, 3}, {2.1875f, 3}, {2.5f, 3},
        {3.125f, 5}, {3.75f, 4}};
    int n = 0;
    for (size_t r = 0; r < sizeof da / sizeof da[0]; r++)
        for (int k = 0; k < da[r].n; k++) de[n++] = da[r].v;
    assert_int_equal(n, 64);
    expect_unit(v, 0xBD, "11000011", "1111110000110111",
                "EEEEEDDDDDCCCCCBEEEDDCCCEEDCBAA901223456344455666777444555556666", de);
    assert_true(qs_hif4_e6m2_rec(0xBD) == 1.6015625);

    /* Block C ("outlier underflow") */
    for (int i = 0; i < 64; i++) v[i] = (float)(0.01 * ((i % 7) - 3));
    v[5] = 100;
    for (int i = 0; i < 64; i++) de[i] = i == 5 ? 98.0f : 0.0f;
    expect_unit(v, 0xCF, "10000000", "0100000000000000",
                "8880070888000088800008880000888000088800008880000888000088800008", NULL);
    {
        const qs_format *f = fmt("hif4");
        qs_qopts o = opts(QS_RND_DEFAULT, 0);
        qs_err e;
        float y[64];
        assert_int_equal(f->fakeq(f, &o, v, 64, y, &e), 0);
        for (int i = 0; i < 64; i++) {
            assert_true(y[i] == de[i]);
            assert_int_equal(signbit(y[i]) != 0, v[i] < 0);   /* 0x8 nibbles decode to -0 */
        }
    }

    /* Block B (all zeros), with -0.0 too: +0 nibbles */
    for (int i = 0; i < 64; i++) { v[i] = (i & 1) ? -0.0f : 0.0f; de[i] = 0; }
    memset(nibs, '0', 64);
    nibs[64] = 0;
    expect_unit(v, 0x00, "00000000", "0000000000000000", nibs, de);
    {
        float y[64];
        qs_hif4_fakeq_run(1, v, 64, y, 0);
        for (int i = 0; i < 64; i++) assert_int_equal(f2u(y[i]), 0);
    }

    /* Non-finite: ±Inf saturate (kernel style), NaN makes the unit NaN */
    for (int i = 0; i < 64; i++) v[i] = 1.0f;
    v[3] = INFINITY; v[9] = -INFINITY;
    for (int i = 0; i < 64; i++) de[i] = i == 3 ? 344064.0f : i == 9 ? -344064.0f : 0.0f;
    memset(nibs, '0', 64);
    nibs[3] = '7';
    nibs[9] = 'F';
    expect_unit(v, 0xFE, "11000000", "1010000000000000", nibs, de);
    v[40] = NAN;
    {
        qs_hif4_meta m;
        uint8_t nib[64];
        qs_hif4_quant_unit(v, 0, &m, nib);
        assert_int_equal(m.e6m2, 0xFF);
        float y[64];
        const qs_format *f = fmt("hif4");
        qs_qopts o = opts(QS_RND_DEFAULT, 0);
        qs_err e;
        assert_int_equal(f->fakeq(f, &o, v, 64, y, &e), 0);
        for (int i = 0; i < 64; i++) assert_true(isnan(y[i]));
        check_hif4_run(v, 64, 0, "nan unit");
    }
}

static void fill_unit(float *v, int kind)
{
    double sc = ldexp(1.0, (int)(rnd64() % 60) - 30);
    for (int i = 0; i < 64; i++) {
        double g = rnd_gauss();
        switch (kind) {
        case 0: v[i] = (float)(rnd01() * 2 - 1); break;                         /* uniform */
        case 1: v[i] = (float)(g * sc); break;                                  /* Gaussian */
        case 2: v[i] = (float)(g * sc * (rnd64() % 16 == 0 ? 1000.0 : 1.0)); break;   /* outliers */
        case 3: v[i] = u2f((uint32_t)rnd64() & 0x807fffffu); break;      /* FP32 subnormals */
        case 4: v[i] = (float)(rnd64() % 15) / 4 * (float)sc; break;     /* on a grid */
        case 5: v[i] = (float)((double)(int16_t)rnd64() / 128.0); break; /* BF16-like ties */
        case 6: v[i] = u2f((uint32_t)rnd64() & 0xff7fffffu); break;      /* any finite bits */
        default: v[i] = (float)(g * 1e37 * ((rnd64() & 7) == 0 ? 30 : 1)); break;   /* huge */
        }
    }
    if (kind == 1 && rnd64() % 4 == 0) v[rnd64() % 64] = (float)(sc * 1e4);
}

static void test_hif4_reference_random(void **st)
{
    enum { UNITS = 400 };
    float *x = malloc(UNITS * 64 * sizeof *x);
    assert_non_null(x);
    for (int kind = 0; kind < 8; kind++) {
        for (int u = 0; u < UNITS; u++) fill_unit(x + 64 * u, kind);
        char what[32];
        snprintf(what, sizeof what, "kind %d", kind);
        check_hif4_run(x, UNITS * 64, 0, what);
        check_hif4_run(x, UNITS * 64, 1, what);
        /* partial final unit (zero-padded), odd lengths */
        check_hif4_run(x, 64 * 3 + 17, 0, what);
        check_hif4_run(x, 5, 1, what);
        check_hif4_run(x, 63, 0, what);
    }
    /* units with NaN / Inf among random values */
    for (int u = 0; u < UNITS; u++) {
        fill_unit(x + 64 * u, 1);
        int k = (int)(rnd64() % 4);
        float sp = k == 0 ? NAN : k == 1 ? INFINITY : k == 2 ? -INFINITY : -NAN;
        x[64 * u + rnd64() % 64] = sp;
    }
    check_hif4_run(x, UNITS * 64, 0, "non-finite");
    check_hif4_run(x, UNITS * 64 - 1, 1, "non-finite");
    free(x);
}

static void test_hif4_properties(void **st)
{
    const qs_format *f = fmt("hif4");
    qs_qopts o = opts(QS_RND_DEFAULT, 0);
    qs_err e;
    float v[64], w[64], y[64], yw[64];
    uint32_t c[64];
    uint8_t meta[4];
    for (int it = 0; it < 3000; it++) {
        fill_unit(v, it % 3);
        /* sign symmetry: fq(-x) = -fq(x) (bit for bit, zero inputs aside) */
        for (int i = 0; i < 64; i++) w[i] = -v[i];
        assert_int_equal(f->fakeq(f, &o, v, 64, y, &e), 0);
        assert_int_equal(f->fakeq(f, &o, w, 64, yw, &e), 0);
        for (int i = 0; i < 64; i++)
            if (v[i] != 0) assert_int_equal(f2u(yw[i]), f2u(y[i]) ^ 0x80000000u);
        /* power-of-two scaling commutes (E6M2 exponent moves) away from the scale clamps */
        float amax = 0;
        for (int i = 0; i < 64; i++) amax = fmaxf(amax, fabsf(v[i]));
        if (amax > 1e-10f && amax < 1e4f) {
            for (int i = 0; i < 64; i++) w[i] = v[i] * 8.0f;
            assert_int_equal(f->fakeq(f, &o, w, 64, yw, &e), 0);
            for (int i = 0; i < 64; i++) assert_true(yw[i] == y[i] * 8.0f);
        }
        /* error: the element is quantized against REC = BF16(1/E6M2) (§2.5), so within half a
        ** step in those units, t = |x| * REC * 2^(2-d); unless clamped at q = 7.  In values that is
        ** half a grid step plus REC's relative error (< 2^-8) on up to 7 steps. */
        assert_int_equal(f->encode(f, &o, v, 64, c, meta, NULL, &e), 0);
        double val = qs_hif4_e6m2_value(meta[0]), rec = qs_hif4_e6m2_rec(meta[0]);
        for (int i = 0; i < 64; i++) {
            int d = ((meta[1] >> (i / 8)) & 1) + (((meta[2] | meta[3] << 8) >> (i / 4)) & 1);
            double t = fabs((double)v[i]) * rec * ldexp(1.0, 2 - d), q = (double)(c[i] & 7);
            double step = val * ldexp(1.0, d) / 4;
            if (q == 7) assert_true(t >= 6.5);
            else assert_true(fabs(t - q) <= 0.5);
            if (q < 7) assert_true(fabs((double)y[i] - v[i]) <= step * (0.5 + 7 * 0x1p-8));
        }
    }
}

/* The analysis engine takes a HiF4 run's q and metadata from qs_hif4_fakeq_meta_run: the same
** values as fakeq and the same bytes as encode, on both paths (NaN and Inf units, a partial unit). */
static void test_hif4_fakeq_meta(void **st)
{
    (void)st;
    const size_t n = 64 * 37 + 21;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *yf = malloc(n * sizeof(float));
    uint32_t *codes = malloc(n * sizeof(uint32_t));
    uint8_t me[38 * QS_HIF4_META], mf[38 * QS_HIF4_META];
    uint64_t r = 12345;
    for (size_t i = 0; i < n; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(r >> 11) * 0x1p-53;
        x[i] = (float)((u - 0.5) * ldexp(1.0, (int)(r % 40) - 20));
    }
    x[64 * 3 + 5] = NAN;
    x[64 * 7 + 9] = -INFINITY;
    for (int rne = 0; rne < 2; rne++) {
        const qs_format *f = qs_format_find("hif4");
        qs_qopts o;
        memset(&o, 0, sizeof o);
        o.round = rne ? QS_RND_RNE : QS_RND_TA;
        qs_err e = {{0}};
        assert_int_equal(f->encode(f, &o, x, n, codes, me, NULL, &e), 0);
        assert_int_equal(f->fakeq(f, &o, x, n, yf, &e), 0);
        for (int simd = 0; simd < 2; simd++) {
            memset(mf, 0xAB, sizeof mf);
            qs_hif4_fakeq_meta_run(simd ? qs_simd_level() : 0, x, n, y, mf, rne);
            assert_memory_equal(mf, me, sizeof me);
            assert_memory_equal(y, yf, n * sizeof(float));
        }
    }
    free(x); free(y); free(yf); free(codes);
}

static void test_hif4_options(void **st)
{
    const qs_format *f = fmt("hif4");
    assert_non_null(f);
    assert_int_equal(f->block, 64);
    assert_int_equal(f->meta_bytes, 4);
    assert_true(f->elem_bits + f->meta_bits / f->block == 4.5);
    assert_true(f->max_finite == 344064.0);
    assert_true(f->min_subnormal == 0x1p-50);
    assert_int_equal(f->round_modes, 1u << QS_RND_TA | 1u << QS_RND_RNE);
    float x[64] = {1}, y[64];
    qs_err e;
    qs_qopts o = opts(QS_RND_DEFAULT, 0);
    o.block = 32;
    assert_int_equal(f->fakeq(f, &o, x, 64, y, &e), -1);
    assert_non_null(strstr(e.msg, "64"));
    o.block = 64;
    assert_int_equal(f->fakeq(f, &o, x, 64, y, &e), 0);
    o = opts(QS_RND_SR, 0);
    assert_int_equal(f->fakeq(f, &o, x, 64, y, &e), -1);
    uint32_t c[64];
    uint8_t meta[4];
    assert_int_equal(f->encode(f, &o, x, 64, c, meta, NULL, &e), -1);
    /* decode rejects codes wider than 4 bits */
    o = opts(QS_RND_DEFAULT, 0);
    assert_int_equal(f->encode(f, &o, x, 64, c, meta, NULL, &e), 0);
    c[10] = 0x10;
    assert_int_equal(f->decode(f, &o, c, meta, 1.0f, 64, y, &e), -1);
    /* TA vs RNE on an exact quarter tie: 0.375 with scale 1 (Vmax 7 -> E6M2 1.0, d = 0 group) */
    float v[64] = {7.0f};
    for (int i = 8; i < 64; i++) v[i] = 0.375f;      /* t = 1.5 in a d = 0 group */
    v[9] = 0.625f;                                   /* t = 2.5 */
    o = opts(QS_RND_TA, 0);
    assert_int_equal(f->fakeq(f, &o, v, 64, y, &e), 0);
    assert_true(y[8] == 0.5f && y[9] == 0.75f);
    o = opts(QS_RND_RNE, 0);
    assert_int_equal(f->fakeq(f, &o, v, 64, y, &e), 0);
    assert_true(y[8] == 0.5f && y[9] == 0.5f);
}

static void test_hif4_en_dtypes_e1m2(void **st)
{
    /* S1P2 = en_dtypes float4_e1m2: the value set (scale 1.0, no flags) and, at that scale, the
    ** --round rne element rounding (en_dtypes casts with ties to even and saturates). */
    const qs_format *f = fmt("hif4");
    qs_qopts o = opts(QS_RND_RNE, 0);
    qs_err e;
    size_t len = 0, lc = 0;
    uint8_t *all = tu_slurp("fixtures/hifloat/e1m2_all.f32bits", &len);
    assert_non_null(all);
    assert_int_equal(len, 64);
    uint32_t c16[16];
    uint8_t meta[4] = {0xC0, 0, 0, 0};
    float y16[16];
    for (unsigned i = 0; i < 16; i++) c16[i] = i;
    assert_int_equal(f->decode(f, &o, c16, meta, 1.0f, 16, y16, &e), 0);
    for (unsigned i = 0; i < 16; i++) {
        uint32_t b;
        memcpy(&b, all + 4 * i, 4);
        assert_int_equal(f2u(y16[i]), b);                 /* 0x8 is -0.0 in both */
    }
    free(all);
    uint8_t *in = tu_slurp("fixtures/hifloat/e1m2_rne.in", &len);
    uint8_t *codes = tu_slurp("fixtures/hifloat/e1m2_rne.codes", &lc);
    assert_non_null(in); assert_non_null(codes);
    assert_int_equal(len, 4 * lc);
    assert_true(lc > 1000);
    int bad = 0;
    for (size_t i0 = 0; i0 < lc; i0 += 56) {
        /* element 0 = 7 pins E6M2 = 1.0 and keeps groups 1..7 flag-free (all |x| < 2) */
        float v[64] = {7.0f};
        size_t cnt = lc - i0 < 56 ? lc - i0 : 56;
        memcpy(v + 8, in + 4 * i0, cnt * 4);
        uint32_t c[64];
        uint8_t m[4];
        assert_int_equal(f->encode(f, &o, v, 64, c, m, NULL, &e), 0);
        assert_int_equal(m[0], 0xC0);
        assert_int_equal(m[1], 0x01);
        assert_int_equal(m[2] | m[3] << 8, 0x0001);
        for (size_t i = 0; i < cnt; i++)
            if (c[8 + i] != codes[i0 + i] && bad++ < 10)
                print_error("x=%a: nibble %x, en_dtypes %x\n", (double)v[8 + i], (unsigned)c[8 + i],
                            codes[i0 + i]);
    }
    assert_int_equal(bad, 0);
    free(in); free(codes);
}

/* Randomized: every vector level of qs_hif4_fakeq_meta_run (AVX2, AVX-512 where the CPU has them)
** against the registry's encode + decode (the scalar code), values and metadata bytes: units of one
** magnitude, of spread magnitudes, float32 subnormals, zeros of both signs, exact element ties at the
** unit's scale, NaN and ±Inf units, huge values, and a partial final unit; TA and RNE. */
static void test_hif4_levels_random(void **st)
{
    (void)st;
    const size_t n = 64 * 2000 + 37, nb = (n + 63) / 64;
    const qs_format *f = qs_format_find("hif4");
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *yd = malloc(n * sizeof *yd);
    uint32_t *codes = malloc(n * sizeof *codes);
    uint8_t *me = malloc(nb * QS_HIF4_META), *mv = malloc(nb * QS_HIF4_META);
    uint64_t r = 987654321;
#define RND() (r = r * 6364136223846793005ull + 1442695040888963407ull, r >> 11)
    for (size_t u = 0; u < nb; u++) {
        int kind = (int)(RND() % 8), bin = (int)(RND() % 120) - 60;
        for (size_t i = 64 * u; i < 64 * u + 64 && i < n; i++) {
            double g = (double)RND() * 0x1p-53 - 0.5;
            switch (kind) {
            case 0: x[i] = (float)ldexp(g, bin); break;
            case 1: x[i] = (float)ldexp(g, (int)(RND() % 60) - 30); break;
            case 2: { uint32_t b = (uint32_t)RND() & 0x807fffffu; memcpy(&x[i], &b, 4); break; }
            case 3: x[i] = (RND() & 1) ? -0.0f : 0.0f; break;
            case 4: x[i] = (float)ldexp((double)(RND() % 32) * 0.25, bin); break;   /* quarters: ties */
            case 5: x[i] = (float)ldexp(g, 100 + (int)(RND() % 27)); break;          /* up to FLT_MAX */
            default: { uint32_t b = (uint32_t)RND() % 0x7f800000u; b |= (uint32_t)(RND() & 1) << 31; memcpy(&x[i], &b, 4); }
            }
        }
        size_t j = 64 * u + RND() % 64;
        if (j < n && RND() % 16 == 0) x[j] = (RND() & 1) ? NAN : ((RND() & 1) ? INFINITY : -INFINITY);
    }
#undef RND
    for (int rne = 0; rne < 2; rne++) {
        qs_qopts o;
        memset(&o, 0, sizeof o);
        o.round = rne ? QS_RND_RNE : QS_RND_TA;
        qs_err e = {{0}};
        float ts;
        assert_int_equal(f->encode(f, &o, x, n, codes, me, &ts, &e), 0);
        assert_int_equal(f->decode(f, &o, codes, me, ts, n, yd, &e), 0);
        for (int lvl = QS_SIMD_SCALAR; lvl <= QS_SIMD_AVX512; lvl++) {
            memset(mv, 0xAB, nb * QS_HIF4_META);
            qs_hif4_fakeq_meta_run(lvl, x, n, y, mv, rne);
            assert_memory_equal(mv, me, nb * QS_HIF4_META);
            for (size_t i = 0; i < n; i++)
                if (memcmp(&y[i], &yd[i], 4) && !(isnan(y[i]) && isnan(yd[i])))
                    fail_msg("hif4 level %d rne %d at %zu: x=%a fakeq %a, decode(encode) %a", lvl, rne, i, x[i], y[i], yd[i]);
            assert_memory_equal(y, yd, n * sizeof *y);   /* NaN bits too */
        }
    }
    free(x); free(y); free(yd); free(codes); free(me); free(mv);
}

int main(void)
{
    rng_state = 0x243F6A8885A308D3ull;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hif4_e6m2),
        cmocka_unit_test(test_hif4_spec_blocks),
        cmocka_unit_test(test_hif4_reference_random),
        cmocka_unit_test(test_hif4_properties),
        cmocka_unit_test(test_hif4_options),
        cmocka_unit_test(test_hif4_fakeq_meta),
        cmocka_unit_test(test_hif4_levels_random),
        cmocka_unit_test(test_hif4_en_dtypes_e1m2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
