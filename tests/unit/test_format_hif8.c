/*
** Tests of HiFloat8 (kernels/format_hifloat.c) against spec/formats-hifloat.md: the §1.2 decode
** rule (implemented again here) on all 256 codes, the §1.3 value-set facts, every §1.9 test vector
** (TA, SAT, SR14, HR), a brute-force nearest-value oracle for TA / RNE / RTZ on random and
** adversarial inputs (every tie and its float32 neighbours), decode->encode round trips, seeded SR,
** en_dtypes conformance vectors (fixtures/hifloat, made by fixtures/make_hifloat_vectors.py),
** scalar == AVX2.  HiF4: test_format_hif4.c.
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
** HiF8 reference: the §1.2 rule, and a brute-force nearest-value oracle over the value set
** ============================================================================================== */

static double ref_decode(unsigned c)
{
    unsigned s = c >> 7, p = c & 0x7f;
    if (p == 0) return s ? NAN : 0.0;
    if (p == 0x6f) return s ? -INFINITY : INFINITY;
    double v;
    if ((p & 0x78) == 0) {
        v = ldexp(1.0, (int)(p & 7) - 23);
    } else {
        int d, dl;
        if ((p & 0x60) == 0x60) { d = 4; dl = 2; }
        else if ((p & 0x60) == 0x40) { d = 3; dl = 2; }
        else if ((p & 0x60) == 0x20) { d = 2; dl = 2; }
        else if ((p & 0x70) == 0x10) { d = 1; dl = 3; }
        else { d = 0; dl = 4; }
        int w = d >= 2 ? 5 - d : 3;
        unsigned rest = p & ((1u << (7 - dl)) - 1);
        unsigned mant = rest & ((1u << w) - 1), ef = rest >> w;
        int e = 0;
        if (d > 0) {
            int mag = (1 << (d - 1)) + (int)(ef & ((1u << (d - 1)) - 1));
            e = (ef >> (d - 1)) & 1 ? -mag : mag;
        }
        v = ldexp(1.0 + mant / (double)(1u << w), e);
    }
    return s ? -v : v;
}

/* Positive finite values sorted, their codes; kPos[126] = 49152 is the virtual overflow point. */
static double kPos[127];
static unsigned kPosCode[127];
static void ref_init(void)
{
    int n = 0;
    for (unsigned c = 1; c < 0x80; c++)
        if (c != 0x6f) { kPos[n] = ref_decode(c); kPosCode[n] = c; n++; }
    for (int i = 1; i < n; i++)          /* insertion sort */
        for (int j = i; j > 0 && kPos[j] < kPos[j - 1]; j--) {
            double t = kPos[j]; kPos[j] = kPos[j - 1]; kPos[j - 1] = t;
            unsigned tc = kPosCode[j]; kPosCode[j] = kPosCode[j - 1]; kPosCode[j - 1] = tc;
        }
    assert_int_equal(n, 126);
    kPos[126] = 49152.0;
    kPosCode[126] = 0x6f;
}

/* Oracle: mode TA / RNE / RTZ; sat = saturate overflow. */
static unsigned ref_encode(float xf, qs_round mode, int sat)
{
    if (isnan(xf)) return 0x80;
    double x = fabs((double)xf);
    unsigned sg = signbit(xf) ? 0x80 : 0;
    unsigned ovf = sat ? 0x6e : 0x6f;
    if (isinf(x)) return sg | ovf;
    if (x > 49152.0) return sg | (mode == QS_RND_RTZ ? 0x6e : ovf);
    int hi = 0;
    while (kPos[hi] <= x && hi < 126) hi++;
    if (kPos[hi] <= x) hi = 127;                   /* x == 49152 */
    double lo_v = hi == 0 ? 0.0 : kPos[hi - 1];
    unsigned lo_c = hi == 0 ? 0 : kPosCode[hi - 1];
    unsigned c;
    if (mode == QS_RND_RTZ && x >= 32768.0) {
        c = 0x6e;                                  /* RTZ never reaches the overflow point */
    } else if (hi == 127 || x == lo_v || mode == QS_RND_RTZ) {
        c = hi == 127 ? 0x6f : lo_c;
    } else {
        double dl = x - lo_v, dh = kPos[hi] - x;
        if (dl < dh) c = lo_c;
        else if (dh < dl) c = kPosCode[hi];
        else if (mode == QS_RND_RNE) c = (lo_c & 1) ? kPosCode[hi] : lo_c;
        else c = kPosCode[hi];
    }
    if (c == 0x6f) c = ovf;
    if (c == 0) return 0;
    return sg | c;
}

/* ================================================================================================
** HiF8 tests
** ============================================================================================== */

static void test_hif8_decode_all_codes(void **st)
{
    const qs_format *f = fmt("hif8");
    assert_non_null(f);
    assert_int_equal(f->ncodes, 256);
    int finite_nz = 0;
    for (unsigned c = 0; c < 256; c++) {
        double r = ref_decode(c);
        float v = qs_hif8_decode1((uint8_t)c);
        if (isnan(r)) assert_true(isnan(v));
        else assert_true((double)v == r);
        assert_true(same(f->code_value(c), v));
        if (isfinite(r) && r != 0) finite_nz++;
        /* every value has <= 4 significant bits and lies in [2^-22, 2^15]: exact in FP16 */
        if (isfinite(r) && r != 0) {
            int ex;
            double m = frexp(fabs(r), &ex);
            assert_true(ldexp(m, 4) == floor(ldexp(m, 4)));
            assert_true(fabs(r) >= 0x1p-22 && fabs(r) <= 0x1p15);
        }
    }
    assert_int_equal(finite_nz, 252);
    /* §1.3 specials and spot values of the §1.2 table */
    assert_true(f2u(qs_hif8_decode1(0x00)) == 0);
    assert_true(isnan(qs_hif8_decode1(0x80)));
    assert_true(f2u(qs_hif8_decode1(0x80)) == 0x7fc00000u);
    assert_true(qs_hif8_decode1(0x6f) == INFINITY && qs_hif8_decode1(0xef) == -INFINITY);
    assert_true(qs_hif8_decode1(0x6e) == 32768.0f && qs_hif8_decode1(0xee) == -32768.0f);
    assert_true(qs_hif8_decode1(0x7e) == 0x1p-15f && qs_hif8_decode1(0x07) == 0x1p-16f);
    assert_true(qs_hif8_decode1(0x01) == 0x1p-22f && qs_hif8_decode1(0x7f) == 0x1.8p-15f);
    assert_true(qs_hif8_decode1(0x10) == 2.0f && qs_hif8_decode1(0x18) == 0.5f);
    assert_true(qs_hif8_decode1(0x20) == 4.0f && qs_hif8_decode1(0x30) == 0.25f);
    assert_true(qs_hif8_decode1(0x41) == 20.0f && qs_hif8_decode1(0x4a) == 96.0f);
    assert_true(qs_hif8_decode1(0x5f) == 0x1.cp-7f && qs_hif8_decode1(0x61) == 384.0f);
    /* negation flips bit 7 (except 0x00 / 0x80) */
    for (unsigned c = 1; c < 128; c++)
        if (c != 0x6f)
            assert_true(qs_hif8_decode1((uint8_t)(c | 0x80)) == -qs_hif8_decode1((uint8_t)c));
    /* registry descriptor */
    assert_true(f->max_finite == 32768.0 && f->min_normal == 0x1p-15);
    assert_true(f->min_subnormal == 0x1p-22);
    assert_int_equal(f->elem_bits, 8);
    assert_int_equal(f->has_inf, 1);
    assert_int_equal(f->has_nan, 1);
    assert_int_equal(f->default_round, QS_RND_TA);
}

static void test_hif8_binades(void **st)
{
    /* §1.3: 38 binades; E in [-3,3] 3 mantissa bits (7 binades), |E| 4..7 2 bits (8), |E| 8..15
    ** 1 bit (16), DML -22..-16 (7, one value each); exponent range [-22, 15]. */
    int count[64] = {0};
    for (unsigned c = 1; c < 128; c++) {
        if (c == 0x6f) continue;
        int ex;
        frexp(ref_decode(c), &ex);
        count[ex - 1 + 30]++;
    }
    int binades = 0, b3 = 0, b2 = 0, b1 = 0, b0 = 0, lo = 99, hi = -99;
    for (int e = -30; e < 34; e++) {
        int n = count[e + 30];
        if (!n) continue;
        binades++;
        if (e < lo) lo = e;
        if (e > hi) hi = e;
        if (n == 8) b3++;
        else if (n == 4) b2++;
        else if (n == 2) b1++;
        else if (n == 1) b0++;
        else fail_msg("binade %d has %d values", e, n);
        int ae = e < 0 ? -e : e;
        int want = ae <= 3 ? 8 : ae <= 7 ? 4 : ae <= 15 ? 2 : 1;
        if (e == 15) want = 2;   /* 2^15 and 1.5*2^15 share the slot of Inf: 1 finite, see below */
        if (e != 15) assert_int_equal(n, want);
    }
    assert_int_equal(count[15 + 30], 1);   /* 1.5*2^15 is the Inf code */
    assert_int_equal(binades, 38);
    assert_int_equal(lo, -22);
    assert_int_equal(hi, 15);
    assert_int_equal(b3, 7);
    assert_int_equal(b2, 8);
    assert_int_equal(b1, 15);             /* 16 one-bit binades, 2^15's is cut by Inf */
    assert_int_equal(b0, 8);              /* 7 DML + the cut 2^15 binade */
}

struct hif8_vec { uint32_t bits; uint8_t ta, ta_sat; };

static void test_hif8_spec_vectors(void **st)
{
    /* §1.9 table: input bits, TA code, SAT (saturate + NaN->0) code. */
    static const struct hif8_vec v[] = {
        {0x00000000, 0x00, 0x00}, {0x80000000, 0x00, 0x00}, {0x3F800000, 0x08, 0x08},
        {0x3F880000, 0x09, 0x09}, {0x3F87FFFF, 0x08, 0x08}, {0xBF980000, 0x8A, 0x8A},
        {0x3FF80000, 0x10, 0x10}, {0xC0400000, 0x94, 0x94}, {0x3F000000, 0x18, 0x18},
        {0x3E99999A, 0x32, 0x32}, {0x40490FDB, 0x15, 0x15}, {0x40F00000, 0x27, 0x27},
        {0x41780000, 0x40, 0x40}, {0x41900000, 0x41, 0x41}, {0x418FFFFF, 0x40, 0x40},
        {0x42C80000, 0x4A, 0x4A}, {0x437F0000, 0x60, 0x60}, {0x43960000, 0x60, 0x60},
        {0xC47A0000, 0xE4, 0xE4}, {0x47000000, 0x6E, 0x6E}, {0x471FFFFF, 0x6E, 0x6E},
        {0x47200000, 0x6F, 0x6E}, {0xC77FE000, 0xEF, 0xEE}, {0x501502F9, 0x6F, 0x6E},
        {0x38000000, 0x7E, 0x7E}, {0x38200000, 0x7F, 0x7F}, {0x37800000, 0x07, 0x07},
        {0x37C00000, 0x7E, 0x7E}, {0x35B33333, 0x03, 0x03}, {0x34800000, 0x01, 0x01},
        {0x34000000, 0x01, 0x01}, {0x33FFFFFF, 0x00, 0x00}, {0xB4A10FB0, 0x81, 0x81},
        {0x7F800000, 0x6F, 0x6E}, {0xFF800000, 0xEF, 0xEE}, {0x7FC00000, 0x80, 0x00},
        {0x3DCCCCCD, 0x52, 0x52}, {0xBBE56042, 0xDC, 0xDC},
    };
    /* decoded values of rows 4, 10, 11, 16, 37, 38 as the spec lists them */
    assert_true(qs_hif8_decode1(0x09) == 1.125f && qs_hif8_decode1(0x32) == 0.3125f);
    assert_true(qs_hif8_decode1(0x15) == 3.25f && qs_hif8_decode1(0x4A) == 96.0f);
    assert_true(qs_hif8_decode1(0x52) == 0.09375f && qs_hif8_decode1(0xDC) == -0.0078125f);
    const qs_format *f = fmt("hif8");
    size_t n = sizeof v / sizeof v[0];
    float x[64], y[64], ys[64];
    uint32_t c[64], cs[64];
    for (size_t i = 0; i < n; i++) {
        x[i] = u2f(v[i].bits);
        assert_int_equal(qs_hif8_encode1(x[i], QS_RND_TA, 0, 0), v[i].ta);
        assert_int_equal(qs_hif8_encode1(x[i], QS_RND_DEFAULT, 0, 0), v[i].ta);
        assert_int_equal(qs_hif8_encode1(x[i], QS_RND_TA, 0, QS_HIF8_HUAWEI), v[i].ta_sat);
    }
    qs_err e;
    qs_qopts o = opts(QS_RND_DEFAULT, 0), os = opts(QS_RND_TA, 1);
    assert_int_equal(f->encode(f, &o, x, n, c, NULL, NULL, &e), 0);
    assert_int_equal(f->fakeq(f, &o, x, n, y, &e), 0);
    assert_int_equal(f->encode(f, &os, x, n, cs, NULL, NULL, &e), 0);
    assert_int_equal(f->fakeq(f, &os, x, n, ys, &e), 0);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(c[i], v[i].ta);
        assert_true(same(y[i], qs_hif8_decode1(v[i].ta)));
        /* the registry's --sat saturates but keeps NaN (no NaN->0 field in qs_qopts) */
        uint8_t want = isnan(x[i]) ? 0x80 : v[i].ta_sat;
        assert_int_equal(cs[i], want);
        assert_true(same(ys[i], qs_hif8_decode1(want)));
    }
}

struct sr_vec { uint32_t bits; uint8_t ta, sr14, hr; };

static void test_hif8_sr_hr_vectors(void **st)
{
    /* §1.9 simplified-SR (SR14) and HR table, FP32 source. */
    static const struct sr_vec v[] = {
        {0x41120001, 0x29, 0x2A, 0x29}, {0x41123FFF, 0x29, 0x29, 0x29},
        {0x41124000, 0x29, 0x2A, 0x29}, {0x41A40000, 0x41, 0x42, 0x42},
        {0xC1A01234, 0xC1, 0xC1, 0xC1}, {0xC4160000, 0xE2, 0xE3, 0xE3},
        {0x3C7FFFFF, 0x58, 0x58, 0x58}, {0x3AC56789, 0x75, 0x75, 0x75},
        {0x36B1D6A7, 0x05, 0x06, 0x06}, {0x34000001, 0x01, 0x01, 0x01},
        {0x3400FFFF, 0x01, 0x00, 0x00}, {0x47100000, 0x6E, 0x6F, 0x6F},
        {0x4711FFFF, 0x6E, 0x6E, 0x6E},
    };
    const qs_format *f = fmt("hif8");
    size_t n = sizeof v / sizeof v[0];
    float x[16], y[16];
    uint32_t c[16];
    for (size_t i = 0; i < n; i++) {
        x[i] = u2f(v[i].bits);
        assert_int_equal(qs_hif8_encode1(x[i], QS_RND_TA, 0, 0), v[i].ta);
        assert_int_equal(qs_hif8_encode1(x[i], QS_RND_SR, 0, QS_HIF8_SSR), v[i].sr14);
        assert_int_equal(qs_hif8_encode1(x[i], QS_RND_HR, 0, 0), v[i].hr);
        /* §1.10 item 2, our choice: saturating SR/HR clamps the overflow point to 0x6E */
        uint8_t sat = (v[i].hr & 0x7f) == 0x6f ? (uint8_t)((v[i].hr & 0x80) | 0x6e) : v[i].hr;
        assert_int_equal(qs_hif8_encode1(x[i], QS_RND_HR, 0, QS_HIF8_SAT), sat);
    }
    qs_err e;
    qs_qopts o = opts(QS_RND_HR, 0);
    assert_int_equal(f->encode(f, &o, x, n, c, NULL, NULL, &e), 0);
    assert_int_equal(f->fakeq(f, &o, x, n, y, &e), 0);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(c[i], v[i].hr);
        assert_true(same(y[i], qs_hif8_decode1(v[i].hr)));
    }
    /* HR = TA for source |E| < 4 and SR14 otherwise, on random inputs (§1.6, §1.10 item 4) */
    for (int i = 0; i < 200000; i++) {
        float xr = u2f((uint32_t)rnd64());
        if (isnan(xr)) continue;
        int ex;
        frexp(xr, &ex);
        int E = ex - 1;
        uint8_t want = (abs(E) < 4 && xr != 0) ? qs_hif8_encode1(xr, QS_RND_TA, 0, 0)
                                               : qs_hif8_encode1(xr, QS_RND_SR, 0, QS_HIF8_SSR);
        if (fabsf(xr) < 0x1p-23f) want = 0;
        assert_int_equal(qs_hif8_encode1(xr, QS_RND_HR, 0, 0), want);
    }
    /* 15.99 has E = 3: TA even though it rounds into E = 4 */
    assert_int_equal(qs_hif8_encode1(15.99f, QS_RND_HR, 0, 0),
                     qs_hif8_encode1(15.99f, QS_RND_TA, 0, 0));
}

/* Inputs that probe every boundary: all values, all midpoints and their float32 neighbours,
** random bit patterns, random magnitudes over the range; both signs. */
static size_t hif8_adversarial(float *x, size_t cap)
{
    size_t n = 0;
#define PUT(v) do { if (n < cap) x[n++] = (v); } while (0)
    for (int i = 0; i < 127; i++) {
        float p = (float)kPos[i];
        PUT(p); PUT(nextafterf(p, 0)); PUT(nextafterf(p, INFINITY));
        double mid = i == 0 ? kPos[0] / 2 : (kPos[i - 1] + kPos[i]) / 2;
        float m = (float)mid;
        assert_true((double)m == mid);     /* every midpoint is a float32 */
        PUT(m); PUT(nextafterf(m, 0)); PUT(nextafterf(m, INFINITY));
    }
    float sp[] = {0.0f, INFINITY, NAN, 0x1p-23f, 0x1p-24f, 40960.0f, 49152.0f, 65504.0f, 3.4e38f,
                  1e-45f, 1e-40f, 0x1p-126f, 32768.0f, 36864.0f};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        PUT(sp[i]); PUT(nextafterf(sp[i], 0)); PUT(nextafterf(sp[i], INFINITY));
    }
    while (n < cap / 2) {
        if (n & 1) PUT(u2f((uint32_t)rnd64()));
        else PUT((float)ldexp(1.0 + rnd01(), (int)(rnd64() % 44) - 26));
    }
    size_t h = n;
    for (size_t i = 0; i < h; i++) PUT(-x[i]);
#undef PUT
    return n;
}

static void test_hif8_oracle(void **st)
{
    enum { CAP = 400000 };
    float *x = malloc(CAP * sizeof *x), *y = malloc(CAP * sizeof *y);
    uint32_t *c = malloc(CAP * sizeof *c);
    assert_non_null(x); assert_non_null(y); assert_non_null(c);
    size_t n = hif8_adversarial(x, CAP);
    const qs_format *f = fmt("hif8");
    static const qs_round modes[] = {QS_RND_TA, QS_RND_RNE, QS_RND_RTZ};
    int bad = 0;
    for (int mi = 0; mi < 3; mi++)
        for (int sat = 0; sat < 2; sat++) {
            qs_qopts o = opts(modes[mi], sat);
            qs_err e;
            assert_int_equal(f->encode(f, &o, x, n, c, NULL, NULL, &e), 0);
            assert_int_equal(f->fakeq(f, &o, x, n, y, &e), 0);
            for (size_t i = 0; i < n; i++) {
                unsigned want = ref_encode(x[i], modes[mi], sat);
                if (c[i] != want || !same(y[i], qs_hif8_decode1((uint8_t)want))) {
                    if (bad++ < 10)
                        print_error("mode %d sat %d x=%a (0x%08x): code 0x%02x y=%a, "
                                    "oracle 0x%02x\n", (int)modes[mi], sat, (double)x[i], f2u(x[i]),
                                    (unsigned)c[i], (double)y[i], want);
                }
            }
        }
    assert_int_equal(bad, 0);
    free(x); free(y); free(c);
}

static void test_hif8_properties(void **st)
{
    enum { N = 200000 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *yn = malloc(N * sizeof *yn);
    assert_non_null(x); assert_non_null(y); assert_non_null(yn);
    const qs_format *f = fmt("hif8");
    qs_err e;
    qs_qopts o = opts(QS_RND_TA, 0);
    /* sorted magnitudes spread over [2^-26, 2^17] for monotonicity */
    for (int i = 0; i < N; i++) x[i] = (float)ldexp(1.0, -26) * (float)pow(2.0, 43.0 * i / N);
    for (int i = 0; i < N; i++) x[i] = nextafterf(x[i], (rnd64() & 1) ? INFINITY : 0);
    for (int i = 1; i < N; i++) if (x[i] < x[i - 1]) x[i] = x[i - 1];
    assert_int_equal(f->fakeq(f, &o, x, N, y, &e), 0);
    for (int i = 0; i < N; i++) yn[i] = -x[i];
    float *ym = malloc(N * sizeof *ym);
    assert_non_null(ym);
    assert_int_equal(f->fakeq(f, &o, yn, N, ym, &e), 0);
    for (int i = 0; i < N; i++) {
        if (i) assert_true(y[i] >= y[i - 1]);                       /* monotone */
        assert_true(y[i] == 0 ? f2u(ym[i]) == 0 : ym[i] == -y[i]);  /* symmetric, no -0 */
        /* error within half the gap between the neighbours of x on the grid (TA) */
        double ax = x[i];
        if (ax >= 0x1p-22 && ax < 32768) {
            int hi = 0;
            while (kPos[hi] <= ax) hi++;
            double lo = kPos[hi - 1], gap = kPos[hi] - lo;
            assert_true(fabs((double)y[i] - ax) <= gap / 2);
        }
    }
    free(x); free(y); free(yn); free(ym);
}

static void test_hif8_tie_rules(void **st)
{
    /* TA vs RNE at exact ties (§1.6 last paragraph: "00.1, 01.1, 10.1" pattern). */
    struct { float x; float ta, rne; } t[] = {
        {1.0625f, 1.125f, 1.0f},             /* 1.000|1: TA up, RNE to even 1.000 */
        {1.1875f, 1.25f, 1.25f},             /* 1.001|1 */
        {1.3125f, 1.375f, 1.25f},            /* 1.010|1 */
        {18.0f, 20.0f, 16.0f},               /* 2-bit binade */
        {22.0f, 24.0f, 24.0f},
        {384.0f + 64.0f, 512.0f, 512.0f},    /* 1-bit binade: 1.1|1 carries */
        {320.0f, 384.0f, 256.0f},            /* 1.0|1 */
        {0x1p-23f, 0x1p-22f, 0.0f},          /* tie with zero */
        {0x1.8p-22f, 0x1p-21f, 0x1p-21f},    /* DML k=1 (odd) vs k=2 */
        {0x1.8p-21f, 0x1p-20f, 0x1p-21f},    /* DML k=2 (even) vs k=3 */
        {0x1.8p-16f, 0x1p-15f, 0x1p-15f},    /* DML 0x07 vs normal 0x7E */
        {40960.0f, INFINITY, 32768.0f},      /* the overflow tie */
        {15.5f, 16.0f, 16.0f},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        assert_true(qs_hif8_decode1(qs_hif8_encode1(t[i].x, QS_RND_TA, 0, 0)) == t[i].ta);
        assert_true(qs_hif8_decode1(qs_hif8_encode1(t[i].x, QS_RND_RNE, 0, 0)) == t[i].rne);
        assert_true(qs_hif8_decode1(qs_hif8_encode1(-t[i].x, QS_RND_RNE, 0, 0)) ==
                    (t[i].rne == 0 ? 0.0f : -t[i].rne));
    }
    /* RNE overflows only above 40960; RTZ never overflows a finite value */
    assert_int_equal(qs_hif8_encode1(nextafterf(40960.0f, INFINITY), QS_RND_RNE, 0, 0), 0x6f);
    assert_int_equal(qs_hif8_encode1(3e38f, QS_RND_RTZ, 0, 0), 0x6e);
    assert_int_equal(qs_hif8_encode1(-INFINITY, QS_RND_RTZ, 0, 0), 0xef);
    assert_int_equal(qs_hif8_encode1(-INFINITY, QS_RND_RTZ, 0, QS_HIF8_SAT), 0xee);
    assert_int_equal(qs_hif8_encode1(nextafterf(0x1p-22f, 0), QS_RND_RTZ, 0, 0), 0x00);
    assert_int_equal(qs_hif8_encode1(-1.99f, QS_RND_RTZ, 0, 0), 0x8f);
    /* NaN -> 0 is separate from saturation */
    assert_int_equal(qs_hif8_encode1(NAN, QS_RND_TA, 0, QS_HIF8_SAT), 0x80);
    assert_int_equal(qs_hif8_encode1(NAN, QS_RND_TA, 0, QS_HIF8_NAN0), 0x00);
    assert_int_equal(qs_hif8_encode1(INFINITY, QS_RND_TA, 0, QS_HIF8_NAN0), 0x6f);
    /* a negative value rounding to zero gives +0 (0x00, never the NaN code) */
    assert_int_equal(qs_hif8_encode1(-1e-8f, QS_RND_TA, 0, 0), 0x00);
    assert_int_equal(qs_hif8_encode1(-0.0f, QS_RND_RNE, 0, 0), 0x00);
}

static void test_hif8_round_trip(void **st)
{
    /* decode then encode gives the code back (HiF8 has no aliases: one zero, one NaN) in TA,
    ** RNE, RTZ and seeded SR, with and without SAT / NaN0 (bar the codes those options remap). */
    static const qs_round modes[] = {QS_RND_TA, QS_RND_RNE, QS_RND_RTZ, QS_RND_SR};
    for (unsigned c = 0; c < 256; c++) {
        float v = qs_hif8_decode1((uint8_t)c);
        for (int m = 0; m < 4; m++)
            for (unsigned fl = 0; fl < 4; fl++) {
                if ((fl & QS_HIF8_SAT) && (c & 0x7f) == 0x6f) continue;
                if ((fl & QS_HIF8_NAN0) && c == 0x80) continue;
                assert_int_equal(qs_hif8_encode1(v, modes[m], rnd01(), fl), c);
            }
        /* SR14 (and HR for |E| >= 4) rounds up when F14 >= T14, and an exact value has
        ** F14 = T14 = 0: like Huawei's golden it moves one step up (§1.6; see the file header
        ** of format_hifloat.c).  HR keeps exact values with |E| < 4. */
        double a = fabs((double)v);
        if (!isfinite(a) || a == 0) continue;
        int ex;
        frexp(a, &ex);
        uint8_t hr = qs_hif8_encode1(v, QS_RND_HR, 0, 0);
        uint8_t ssr = qs_hif8_encode1(v, QS_RND_SR, 0, QS_HIF8_SSR);
        if (abs(ex - 1) < 4) assert_int_equal(hr, c);
        else assert_int_equal(hr, ssr);
        float up = qs_hif8_decode1(ssr);
        assert_true(fabsf(up) > fabsf(v));
        assert_int_equal(signbit(up), signbit(v));
    }
    assert_true(qs_hif8_decode1(qs_hif8_encode1(16.0f, QS_RND_HR, 0, 0)) == 20.0f);
    assert_true(qs_hif8_decode1(qs_hif8_encode1(-512.0f, QS_RND_HR, 0, 0)) == -768.0f);
    assert_true(qs_hif8_decode1(qs_hif8_encode1(8.0f, QS_RND_HR, 0, 0)) == 8.0f);
    const qs_format *f = fmt("hif8");
    float x[256], y[256];
    uint32_t c[256];
    for (unsigned i = 0; i < 256; i++) x[i] = qs_hif8_decode1((uint8_t)i);
    qs_qopts o = opts(QS_RND_DEFAULT, 0);
    qs_err e;
    assert_int_equal(f->encode(f, &o, x, 256, c, NULL, NULL, &e), 0);
    assert_int_equal(f->decode(f, &o, c, NULL, 1.0f, 256, y, &e), 0);
    for (unsigned i = 0; i < 256; i++) {
        assert_int_equal(c[i], i);
        assert_true(same(y[i], x[i]));
    }
    c[7] = 0x100;
    assert_int_equal(f->decode(f, &o, c, NULL, 1.0f, 256, y, &e), -1);
    assert_non_null(strstr(e.msg, "element 7"));
}

static void test_hif8_sr_seeded(void **st)
{
    const qs_format *f = fmt("hif8");
    enum { N = 100000 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *y2 = malloc(N * sizeof *y2);
    assert_non_null(x); assert_non_null(y); assert_non_null(y2);
    qs_qopts o = opts(QS_RND_SR, 0);
    o.seed = 42;
    qs_err e;
    /* unbiased on average: 1.03 lies between 1 and 1.125; 100.0 between 96 and 112 */
    float probes[] = {1.03f, -100.0f, 0x1.3p-19f, 0x1.4p-23f, 33000.0f};
    for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++) {
        for (int i = 0; i < N; i++) x[i] = probes[p];
        assert_int_equal(f->fakeq(f, &o, x, N, y, &e), 0);
        double sum = 0;
        float lo = qs_hif8_decode1(qs_hif8_encode1(probes[p], QS_RND_RTZ, 0, 0));
        int ups = 0;
        for (int i = 0; i < N; i++) {
            if (y[i] != lo) ups++;
            sum += y[i];
        }
        if (probes[p] == 33000.0f) {        /* can reach the overflow point: Inf (§1.10 item 2) */
            assert_true(ups > 0);
            for (int i = 0; i < N; i++) assert_true(y[i] == 32768.0f || y[i] == INFINITY);
            continue;
        }
        float hi = qs_hif8_decode1(qs_hif8_encode1(probes[p], QS_RND_RTZ, 0, 0) + 1);
        if (probes[p] == 0x1.4p-23f) hi = 0x1p-22f, lo = 0.0f;
        double pu = ((double)probes[p] - lo) / ((double)hi - lo);
        double se = sqrt(pu * (1 - pu) / N);
        assert_true(fabs((double)ups / N - pu) < 6 * se);
        assert_true(fabs(sum / N - probes[p]) < 6 * se * fabs((double)hi - lo));   /* unbiased */
        for (int i = 0; i < N; i++) assert_true(y[i] == lo || y[i] == hi);
    }
    /* reproducible, and a run split with index0 equals the whole run */
    for (int i = 0; i < N; i++) x[i] = (float)(rnd_gauss() * 10.0);
    assert_int_equal(f->fakeq(f, &o, x, N, y, &e), 0);
    qs_qopts o2 = o;
    o2.index0 = 1000;
    assert_int_equal(f->fakeq(f, &o, x, 1000, y2, &e), 0);
    assert_int_equal(f->fakeq(f, &o2, x + 1000, N - 1000, y2 + 1000, &e), 0);
    assert_memory_equal(y, y2, N * sizeof *y);
    uint32_t *c = malloc(N * sizeof *c);
    assert_non_null(c);
    assert_int_equal(f->encode(f, &o, x, N, c, NULL, NULL, &e), 0);
    for (int i = 0; i < N; i++) assert_true(same(y[i], qs_hif8_decode1((uint8_t)c[i])));
    /* saturating SR clamps the overflow point */
    o.sat = 1;
    for (int i = 0; i < N; i++) x[i] = 40000.0f;
    assert_int_equal(f->fakeq(f, &o, x, N, y, &e), 0);
    for (int i = 0; i < N; i++) assert_true(y[i] == 32768.0f);
    free(x); free(y); free(y2); free(c);
}

static void test_hif8_simd_identical(void **st)
{
    enum { CAP = 300000 };
    float *x = malloc(CAP * sizeof *x), *y0 = malloc(CAP * sizeof *y0);
    float *y1 = malloc(CAP * sizeof *y1);
    uint32_t *c0 = malloc(CAP * sizeof *c0), *c1 = malloc(CAP * sizeof *c1);
    assert_non_null(x); assert_non_null(y0); assert_non_null(y1);
    assert_non_null(c0); assert_non_null(c1);
    size_t n = hif8_adversarial(x, CAP);
    for (int sat = 0; sat < 2; sat++)
        for (size_t off = 0; off < 9; off += 4) {   /* unaligned starts and odd tails */
            size_t m = n - off - (off ? 3 : 0);
            qs_hif8_fakeq_ta(0, x + off, m, y0, sat);
            qs_hif8_fakeq_ta(1, x + off, m, y1, sat);
            assert_memory_equal(y0, y1, m * sizeof *y0);
            qs_hif8_encode_ta(0, x + off, m, c0, sat);
            qs_hif8_encode_ta(1, x + off, m, c1, sat);
            assert_memory_equal(c0, c1, m * sizeof *c0);
            for (size_t i = 0; i < m; i++) {
                unsigned fl = sat ? QS_HIF8_SAT : 0;
                assert_int_equal(c0[i], qs_hif8_encode1(x[off + i], QS_RND_TA, 0, fl));
                assert_true(same(y0[i], qs_hif8_decode1((uint8_t)c0[i])));
            }
        }
    /* the registry's dispatch: forced scalar (what QS_SIMD=scalar does) and the CPU's best level
    ** give the same bits, for hif8 and hif4 */
    const qs_format *f8 = fmt("hif8"), *f4 = fmt("hif4");
    qs_qopts o = opts(QS_RND_DEFAULT, 0);
    qs_err e;
    for (int k = 0; k < 2; k++) {
        const qs_format *f = k ? f4 : f8;
        size_t m = n - 5;
        qs_simd_force(QS_SIMD_SCALAR);
        assert_int_equal(qs_simd_level(), QS_SIMD_SCALAR);
        assert_int_equal(f->fakeq(f, &o, x, m, y0, &e), 0);
        qs_simd_force(-1);
        assert_int_equal(f->fakeq(f, &o, x, m, y1, &e), 0);
        assert_memory_equal(y0, y1, m * sizeof *y0);
    }
    /* every float32 with the 16 low bits fixed: all exponents, all high fraction patterns */
    for (uint32_t hi = 0; hi < 65536; hi += 1) {
        float xb[8];
        for (int k = 0; k < 8; k++) xb[k] = u2f(hi << 16 | (uint32_t)(k * 0x2493));
        qs_hif8_fakeq_ta(1, xb, 8, y1, 0);
        qs_hif8_encode_ta(1, xb, 8, c1, 0);
        for (int k = 0; k < 8; k++) {
            uint8_t want = qs_hif8_encode1(xb[k], QS_RND_TA, 0, 0);
            if (c1[k] != want || !same(y1[k], qs_hif8_decode1(want)))
                fail_msg("x=0x%08x: simd code 0x%02x, scalar 0x%02x", f2u(xb[k]),
                         (unsigned)c1[k], want);
        }
    }
    free(x); free(y0); free(y1); free(c0); free(c1);
}

static void test_hif8_en_dtypes(void **st)
{
    size_t len = 0, lc = 0;
    uint8_t *all = tu_slurp("fixtures/hifloat/hif8_all.f32bits", &len);
    assert_non_null(all);
    assert_int_equal(len, 1024);
    for (unsigned c = 0; c < 256; c++) {
        uint32_t b;
        memcpy(&b, all + 4 * c, 4);
        assert_true(same(u2f(b), qs_hif8_decode1((uint8_t)c)));
    }
    free(all);
    uint8_t *in = tu_slurp("fixtures/hifloat/hif8_ta.in", &len);
    uint8_t *codes = tu_slurp("fixtures/hifloat/hif8_ta.codes", &lc);
    assert_non_null(in); assert_non_null(codes);
    assert_int_equal(len, 4 * lc);
    assert_true(lc > 9000);
    float *x = malloc(lc * sizeof *x);
    uint32_t *c = malloc(lc * sizeof *c);
    assert_non_null(x); assert_non_null(c);
    memcpy(x, in, len);
    const qs_format *f = fmt("hif8");
    qs_qopts o = opts(QS_RND_DEFAULT, 0);
    qs_err e;
    assert_int_equal(f->encode(f, &o, x, lc, c, NULL, NULL, &e), 0);
    int bad = 0;
    for (size_t i = 0; i < lc; i++)
        if (c[i] != codes[i] && bad++ < 10)
            print_error("x=0x%08x: qscope 0x%02x, en_dtypes 0x%02x\n", f2u(x[i]),
                        (unsigned)c[i], codes[i]);
    assert_int_equal(bad, 0);
    free(in); free(codes); free(x); free(c);
}

static void test_hif8_fields(void **st)
{
    char b[160];
    assert_true(qs_hif8_fields(0x15, b, sizeof b) > 0);   /* 3.25 = 1.625 * 2^1: 0 001 0 101 */
    assert_non_null(strstr(b, "0 001 0 101"));
    assert_non_null(strstr(b, "sign=+"));
    assert_non_null(strstr(b, "dot=001 (D=1)"));
    assert_non_null(strstr(b, "E=+1"));
    assert_non_null(strstr(b, "mant=101 (W=3)"));
    qs_hif8_fields(0x2D, b, sizeof b);                    /* 13 = 1.625 * 2^3: 0 01 01 101 */
    assert_non_null(strstr(b, "0 01 01 101"));
    assert_non_null(strstr(b, "dot=01 (D=2)"));
    assert_non_null(strstr(b, "E=+3"));
    qs_hif8_fields(0xDC, b, sizeof b);                    /* -2^-7: 1 10 1 11 00 */
    assert_non_null(strstr(b, "1 10 111 00"));
    assert_non_null(strstr(b, "E=-7"));
    assert_non_null(strstr(b, "sign=-"));
    qs_hif8_fields(0x08, b, sizeof b);                    /* 1.0: 0 0001 000 */
    assert_non_null(strstr(b, "0 0001 000"));
    assert_non_null(strstr(b, "(D=0)"));
    qs_hif8_fields(0x1A, b, sizeof b);                    /* 0.625: 0 001 1 010 */
    assert_non_null(strstr(b, "0 001 1 010"));
    assert_non_null(strstr(b, "E=-1"));
    qs_hif8_fields(0x6E, b, sizeof b);                    /* 2^15: 0 11 0111 0 */
    assert_non_null(strstr(b, "0 11 0111 0"));
    assert_non_null(strstr(b, "E=+15"));
    qs_hif8_fields(0x6F, b, sizeof b);
    assert_non_null(strstr(b, "Inf"));
    qs_hif8_fields(0x80, b, sizeof b);
    assert_non_null(strstr(b, "NaN"));
    qs_hif8_fields(0x00, b, sizeof b);
    assert_non_null(strstr(b, "zero"));
    qs_hif8_fields(0x83, b, sizeof b);                    /* -2^-20, DML */
    assert_non_null(strstr(b, "DML"));
    assert_non_null(strstr(b, "E=-20"));
    /* every code labels; truncation keeps a terminated prefix and returns the full length */
    for (unsigned c = 0; c < 256; c++)
        assert_true(qs_hif8_fields((uint8_t)c, b, sizeof b) < (int)sizeof b);
    char s[8];
    int full = qs_hif8_fields(0x15, s, sizeof s);
    assert_true(full > 7);
    assert_int_equal(strlen(s), 7);
}

static void test_hif8_options(void **st)
{
    const qs_format *f = fmt("hif8");
    unsigned want = 1u << QS_RND_TA | 1u << QS_RND_RNE | 1u << QS_RND_HR | 1u << QS_RND_SR |
                    1u << QS_RND_RTZ;
    assert_int_equal(f->round_modes, want);
    qs_qopts o = opts(QS_RND_COUNT, 0);
    float x = 1.0f, y;
    qs_err e;
    assert_int_equal(f->fakeq(f, &o, &x, 1, &y, &e), -1);
    /* saturation through the registry */
    float xs[] = {INFINITY, -INFINITY, 1e10f, -40960.0f, NAN};
    float ys[5];
    o = opts(QS_RND_TA, 1);
    assert_int_equal(f->fakeq(f, &o, xs, 5, ys, &e), 0);
    assert_true(ys[0] == 32768.0f && ys[1] == -32768.0f && ys[2] == 32768.0f && ys[3] == -32768.0f);
    assert_true(isnan(ys[4]));
}

int main(void)
{
    rng_state = 0x243F6A8885A308D3ull;
    ref_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hif8_decode_all_codes),
        cmocka_unit_test(test_hif8_binades),
        cmocka_unit_test(test_hif8_spec_vectors),
        cmocka_unit_test(test_hif8_sr_hr_vectors),
        cmocka_unit_test(test_hif8_oracle),
        cmocka_unit_test(test_hif8_properties),
        cmocka_unit_test(test_hif8_tie_rules),
        cmocka_unit_test(test_hif8_round_trip),
        cmocka_unit_test(test_hif8_sr_seeded),
        cmocka_unit_test(test_hif8_simd_identical),
        cmocka_unit_test(test_hif8_en_dtypes),
        cmocka_unit_test(test_hif8_fields),
        cmocka_unit_test(test_hif8_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
