/*
** Tests of M2XFP (kernels/format_m2xfp.c) against spec/formats-mx.md: the §7 vectors T37-T40 (em and
** es modes), malformed records, and fakeq == decode(encode) bit for bit on adversarial runs.
*/
#include "test_format_util.h"

#include "../../kernels/minifloat.h"

/* ================================================================================================
** §7.4 M2XFP
** ============================================================================================== */

static void m2x_block(float *x)
{
    const float g1[] = {5.3f, 1, 0.4f, -0.2f, 0.9f, -1.7f, 2.2f, 0.05f}, g2[] = {7.9f, 3.1f, -0.6f};
    const float g3[] = {0.3f, -0.3f, 0.1f}, g4[] = {1.24f};
    memset(x, 0, 32 * sizeof *x);
    memcpy(x, g1, sizeof g1);
    memcpy(x + 8, g2, sizeof g2);
    memcpy(x + 16, g3, sizeof g3);
    memcpy(x + 24, g4, sizeof g4);
}

/* Values compare with ==, so ±0 both match a 0 of the spec (see the em sign note in the C file);
** sgn[i] = 1 / -1 demands that sign of zero. */
static void m2x_expect(const float *dec, const float *want, const signed char *sgn)
{
    for (int i = 0; i < 32; i++) {
        if (dec[i] != want[i]) fail_msg("element %d: %a, expected %a", i, (double)dec[i], (double)want[i]);
        if (sgn && sgn[i] && (signbit(dec[i]) != 0) != (sgn[i] < 0)) fail_msg("element %d: sign of zero", i);
    }
}

static void test_T37_T40_m2xfp(void **st)
{
    (void)st;
    float x[32], dec[32];
    uint32_t c[32];
    uint8_t m[2];
    m2x_block(x);
    {   /* T37: the plain MXFP4 baseline, exponent 0 */
        float w[32] = {6, 1, 0.5f, -0.0f, 1, -1.5f, 2, 0, 6, 3, -0.5f, 0, 0, 0, 0, 0, 0.5f, -0.5f};
        w[24] = 1;
        signed char sg[32] = {0};
        sg[3] = -1;
        qs_qopts o = O();
        quant3(fmt("mxfp4"), &o, x, 32, c, m, dec, NULL);
        assert_int_equal(m[0], 0x7F);
        m2x_expect(dec, w, sg);
    }
    const qs_format *f = fmt("m2xfp4");
    {   /* T38 em: d = -1, +2, -1, +2 -> fields 0, 3, 0, 3 */
        float w[32] = {5.5f, 1, 0.5f, 0, 1, -1.5f, 2, 0, 7.0f, 3, -0.5f, 0, 0, 0, 0, 0, 0.375f, -0.5f};
        w[24] = 1.25f;
        qs_qopts o = O();
        o.m2x = QS_M2X_EM;
        quant3(f, &o, x, 32, c, m, dec, NULL);
        assert_int_equal(m[0], 0x7F);
        assert_int_equal(m[1], 0 | 3 << 2 | 0 << 4 | 3 << 6);
        m2x_expect(dec, w, NULL);
        assert_int_equal(c[0], 7);                      /* top elements keep their E2M1 codes */
        assert_int_equal(c[16], 1);
    }
    {   /* T39 es: bias 0, ratios 1.75, 1.25, 1.0, 1.25 (m = 3, 1, 0, 1) */
        float w[32] = {5.25f, 0.875f, 0, -0.0f, 0.875f, -1.75f, 2.625f, 0, 7.5f, 2.5f, -0.625f, 0, 0, 0, 0, 0,
                       0.5f, -0.5f};
        w[24] = 1.25f;
        signed char sg[32] = {0};
        sg[3] = -1;
        qs_qopts o = O();
        o.m2x = QS_M2X_ES;
        quant3(f, &o, x, 32, c, m, dec, NULL);
        assert_int_equal(m[0], 0x7F);
        assert_int_equal(m[1], 3 | 1 << 2 | 0 << 4 | 1 << 6);
        m2x_expect(dec, w, sg);
        /* the group MSE the spec quotes: mean over sub-groups of the mean squared error */
        double mse = 0;
        for (int j = 0; j < 4; j++) {
            double s = 0;
            for (int i = 8 * j; i < 8 * j + 8; i++) s += ((double)dec[i] - x[i]) * ((double)dec[i] - x[i]);
            mse += s / 8 / 4;
        }
        assert_true(fabs(mse - 0.031721875) < 1e-8);
    }
    {   /* T40 es, all 5.0: bias 0 and bias +1 with ratio 1.25 are both exact; the first wins */
        for (int i = 0; i < 32; i++) x[i] = 5.0f;
        qs_qopts o = O();
        o.m2x = QS_M2X_ES;
        quant3(f, &o, x, 32, c, m, dec, NULL);
        assert_int_equal(m[0], 0x7F);
        assert_int_equal(m[1], 0x55);
        for (int i = 0; i < 32; i++) assert_true(dec[i] == 5.0f);
    }
}

static void test_m2xfp_edges(void **st)
{
    (void)st;
    const qs_format *f = fmt("m2xfp4");
    float x[75], dec[75];
    uint32_t c[75];
    uint8_t m[6];
    qs_err e;
    for (int mode = 0; mode < 2; mode++) {
        qs_qopts o = O();
        o.m2x = (qs_m2x_mode)mode;
        memset(x, 0, sizeof x);                        /* all zero: e0 = floor(log2 1e-8) - 2 = -29 */
        quant3(f, &o, x, 32, c, m, dec, NULL);
        assert_int_equal(m[0], mode ? 0x62 - 1 + 0 : 0x62);  /* es: bias -1 first, all exact */
        for (int i = 0; i < 32; i++) assert_true(dec[i] == 0);
        x[3] = NAN;                                    /* NaN group */
        x[40] = 1;
        quant3(f, &o, x, 75, c, m, dec, NULL);         /* and a partial last group of 11 */
        assert_int_equal(m[0], 0xFF);
        for (int i = 0; i < 32; i++) assert_true(isnan(dec[i]));
        assert_true(dec[40] == 1);
        for (int i = 0; i < 75; i++) x[i] = (float)(rnd_gauss() * ldexp(1, (int)(rnd64() % 60) - 30));
        quant3(f, &o, x, 75, c, m, dec, NULL);
        for (int i = 0; i < 75; i++) x[i] = u2f((uint32_t)(rnd64() % 0x00800000u));   /* FP32 subnormals */
        quant3(f, &o, x, 75, c, m, dec, NULL);
        /* options: fixed group, RNE only */
        o.block = 16;
        assert_int_equal(f->fakeq(f, &o, x, 32, dec, &e), -1);
        o.block = 32;
        o.round = QS_RND_TA;
        assert_int_equal(f->fakeq(f, &o, x, 32, dec, &e), -1);
    }
    /* em: the decoder finds the top element again (first of equal codes); a malformed record */
    qs_qopts o = O();
    uint32_t cc[8] = {3, 5, 5, 1, 0, 0, 0, 0};
    uint8_t mm[2] = {0x7F, 3};                         /* d = +2 on element 1 (k = 5 -> E2M3 22 = 3.5) */
    assert_int_equal(f->decode(f, &o, cc, mm, 1, 8, dec, &e), 0);
    assert_true(dec[0] == 1.5f && dec[1] == 3.5f && dec[2] == 3.0f && dec[3] == 0.5f);
    uint32_t z[8] = {0};
    mm[1] = 0;                                         /* d = -1 on a zero top element */
    assert_int_equal(f->decode(f, &o, z, mm, 1, 8, dec, &e), -1);
}

/* ================================================================================================
** Agreement, options, registry
** ============================================================================================== */

static void test_fakeq_agreement(void **st)
{
    (void)st;
    const size_t lens[] = {1, 5, 31, 32, 33, 100, 257, 1000};
    float *x = malloc(1000 * sizeof *x), *dec = malloc(1000 * sizeof *dec);
    uint32_t *c = malloc(1000 * sizeof *c);
    uint8_t *m = malloc(2000);
    for (int lvl = QS_SIMD_SCALAR; lvl <= qs_simd_cpu(); lvl++) {
        qs_simd_force(lvl);
        for (int mode = 0; mode < 2; mode++)
            for (size_t li = 0; li < N(lens); li++)
                for (int rep = 0; rep < 4; rep++) {
                    qs_qopts o = O();
                    o.m2x = (qs_m2x_mode)mode;
                    adversarial(x, lens[li], 8, 2);
                    quant3(fmt("m2xfp4"), &o, x, lens[li], c, m, dec, NULL);
                }
    }
    qs_simd_force(-1);
    free(x);
    free(dec);
    free(c);
    free(m);
}

static void test_options_registry(void **st)
{
    (void)st;
    const qs_format *f = fmt("m2xfp4");
    inplace_same(f);
    qs_qopts o = O();
    assert_true(qs_format_bits_per_elem(f, &o) == 4.5);
    assert_int_equal(f->family, QS_FAM_M2XFP);
    assert_int_equal(f->scale_kind, QS_SK_M2XFP);
    assert_false(f->has_tensor_scale);
    assert_true(f->fopts & QS_FOPT_M2X_MODE);
    assert_true(f->mf == &qs_mf_e2m1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_T37_T40_m2xfp),
        cmocka_unit_test(test_m2xfp_edges),
        cmocka_unit_test(test_fakeq_agreement),
        cmocka_unit_test(test_options_registry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
