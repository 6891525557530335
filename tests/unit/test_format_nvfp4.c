/*
** Tests of NVFP4 (kernels/format_nvfp4.c) against spec/formats-mx.md: the §7 vectors T32-T35 (TE and
** torchao arithmetic), the tensor scale, NaN/Inf blocks, fakeq == decode(encode) bit for bit on
** adversarial runs in both orders, and the AVX2/AVX-512 paths against the scalar code.
*/
#include "test_format_util.h"

#include "../../kernels/minifloat.h"

/* ================================================================================================
** §7.3 NVFP4
** ============================================================================================== */

static const float kB1[16] = {10, 3.3f, -1.25f, 0.6f, 0.1f, -7, 2};
static const float kB2[16] = {1, 0.5f, -0.26f, 0.74f, 0.01f};

static void nv_run(qs_nvfp4_order ord, const float *x, size_t n, uint32_t *c, uint8_t *m, float *dec, float *ts)
{
    qs_qopts o = O();
    o.nvfp4 = ord;
    quant3(fmt("nvfp4"), &o, x, n, c, m, dec, ts);
}

static void test_T32_T34_nvfp4(void **st)
{
    (void)st;
    float x[32], dec[32], ts;
    uint32_t c[32];
    uint8_t m[2];
    memcpy(x, kB1, sizeof kB1);
    memcpy(x + 16, kB2, sizeof kB2);
    const uint32_t c1[] = {7, 4, 9, 1, 0, 0xE, 2, 0}, c2[] = {7, 5, 0xB, 6, 0};
    const uint32_t te1[] = {0x41200000, 0x40555556, 0xBF555556, 0x3F555556, 0, 0xC0D55556, 0x3FD55556};
    const uint32_t ta1[] = {0x41200000, 0x40555555, 0xBF555555, 0x3F555555, 0, 0xC0D55555, 0x3FD55555};
    const uint32_t b2[] = {0x3F7B6DB7, 0x3EFB6DB7, 0xBE7B6DB7, 0x3F279E7A, 0};
    for (int ord = 0; ord < 2; ord++) {
        nv_run((qs_nvfp4_order)ord, x, 32, c, m, dec, &ts);
        assert_true(ts == 10.0f);                      /* the stored tensor scale is the global amax */
        assert_int_equal(m[0], 0x7E);                  /* 448 */
        assert_int_equal(m[1], 0x63);                  /* 44 */
        for (int i = 0; i < 8; i++) assert_int_equal(c[i], c1[i]);
        for (int i = 0; i < 5; i++) assert_int_equal(c[16 + i], c2[i]);
        for (int i = 0; i < 7; i++) assert_int_equal(f2u(dec[i]), ord ? ta1[i] : te1[i]);
        for (int i = 0; i < 5; i++) assert_int_equal(f2u(dec[16 + i]), b2[i]);
        for (int i = 21; i < 32; i++) assert_int_equal(c[i], 0);
    }
    /* T32's intermediates, recomputed with the same float32 operations */
    float senc = 2688.0f / 10.0f, sdec = 1.0f / senc;
    assert_true(senc == 268.79998779296875f);
    assert_true(sdec == 0.0037202383391559124f);
    assert_true(448.0f * sdec == 1.6666667461395264f);
    assert_true(1.0f / (448.0f * sdec) == 0.5999999642372131f);
    assert_true(10.0f / 2688.0f == 0.0037202381063252687f);
}

static void test_T35_nvfp4_tiny(void **st)
{
    (void)st;
    float x[32] = {2688}, dec[32], ts;
    uint32_t c[32];
    uint8_t m[2];
    x[16] = 0.03f;
    x[17] = -0.011f;
    x[18] = 0.02f;
    nv_run(QS_NVFP4_TE, x, 32, c, m, dec, &ts);
    assert_int_equal(m[0], 0x7E);
    assert_int_equal(c[0], 7);
    assert_true(dec[0] == 2688);
    assert_int_equal(m[1], 0x03);
    assert_int_equal(c[16], 7);
    assert_int_equal(c[17], 0xC);
    assert_int_equal(c[18], 5);
    assert_true(dec[16] == 0.03515625f && dec[17] == -0.01171875f && dec[18] == 0.017578125f);
    nv_run(QS_NVFP4_TORCHAO, x, 32, c, m, dec, &ts);
    assert_int_equal(m[0], 0x7E);
    assert_true(dec[0] == 2688);
    assert_int_equal(m[1], 0x08);                      /* lower clamp 2^-6 */
    assert_int_equal(c[16], 4);
    assert_int_equal(c[17], 9);
    assert_int_equal(c[18], 3);
    assert_true(dec[16] == 0.03125f && dec[17] == -0.0078125f && dec[18] == 0.0234375f);
}

static void test_nvfp4_tensor_scale(void **st)
{
    (void)st;
    const qs_format *f = fmt("nvfp4");
    float x[32], dec[32], dec2[32], ts;
    uint32_t c[32];
    uint8_t m[2];
    qs_err e;
    memcpy(x, kB1, sizeof kB1);
    memcpy(x + 16, kB2, sizeof kB2);
    /* a calibrated amax: blocks scale against it; the encode output echoes it */
    qs_qopts o = O();
    o.tensor_scale = 20;
    quant3(f, &o, x, 32, c, m, dec, &ts);
    assert_true(ts == 20);
    assert_int_equal(m[0], qs_mf_encode(&qs_mf_e4m3, 10.0f * ((2688.0f / 20) * (1.0f / 6)), QS_RND_RNE, 0, 1));
    /* the per-tensor number matters for decode: a different amax gives different values */
    assert_int_equal(f->decode(f, &o, c, m, 10.0f, 32, dec2, &e), 0);
    assert_true(dec2[0] != dec[0]);
    /* calls over parts of a tensor with its global amax = one call over the whole tensor */
    float whole[32], part[32];
    o = O();
    assert_int_equal(f->fakeq(f, &o, x, 32, whole, &e), 0);
    o.tensor_scale = 10;
    assert_int_equal(f->fakeq(f, &o, x, 16, part, &e), 0);
    assert_int_equal(f->fakeq(f, &o, x + 16, 16, part + 16, &e), 0);
    assert_memory_equal(whole, part, sizeof whole);
    /* invalid tensor scales */
    const float bad[] = {INFINITY, -1, NAN};
    for (size_t i = 0; i < N(bad); i++) {
        o.tensor_scale = bad[i];
        assert_int_equal(f->fakeq(f, &o, x, 32, whole, &e), -1);
        assert_int_equal(f->encode(f, &o, x, 32, c, m, &ts, &e), -1);
        qs_qopts o2 = O();
        assert_int_equal(f->decode(f, &o2, c, m, bad[i], 32, dec, &e), -1);
    }
}

static void test_nvfp4_specials(void **st)
{
    (void)st;
    const qs_format *f = fmt("nvfp4");
    float x[48], dec[48], ref[48], ts;
    uint32_t c[48];
    uint8_t m[3];
    for (int ord = 0; ord < 2; ord++) {
        qs_qopts o = O();
        o.nvfp4 = (qs_nvfp4_order)ord;
        /* NaN / Inf blocks: scale 0x7F, block NaN; the global amax ignores them */
        memcpy(x, kB1, sizeof kB1);
        memcpy(x + 16, kB2, sizeof kB2);
        memcpy(x + 32, kB2, sizeof kB2);
        quant3(f, &o, x, 48, c, m, ref, &ts);
        x[20] = INFINITY;
        x[40] = NAN;
        quant3(f, &o, x, 48, c, m, dec, &ts);
        assert_true(ts == 10.0f);
        assert_int_equal(m[1], 0x7F);
        assert_int_equal(m[2], 0x7F);
        for (int i = 16; i < 48; i++) assert_true(isnan(dec[i]));
        assert_memory_equal(dec, ref, 16 * sizeof *dec);
        /* all zero: TE S_enc = 1 -> scale 0; torchao -> the 2^-6 clamp; values ±0 */
        memset(x, 0, sizeof x);
        x[5] = -0.0f;
        quant3(f, &o, x, 48, c, m, dec, &ts);
        assert_true(ts == 0);
        assert_int_equal(m[0], ord ? 0x08 : 0x00);
        for (int i = 0; i < 48; i++) assert_int_equal(f2u(dec[i]), i == 5 ? 0x80000000u : 0u);
        /* partial last block (n = 37), FP32 subnormals, huge values */
        for (int i = 0; i < 37; i++) x[i] = (float)(rnd_gauss() * 1e-39);
        quant3(f, &o, x, 37, c, m, dec, &ts);
        for (int i = 0; i < 37; i++) x[i] = (float)(rnd_gauss() * 1e37);
        quant3(f, &o, x, 37, c, m, dec, &ts);
    }
    /* UE4M3: decode ignores the scale's sign bit */
    uint32_t cc = 7;
    uint8_t s1 = 0x38, s2 = 0xB8;
    float y1, y2;
    qs_err e;
    qs_qopts o = O();
    assert_int_equal(f->decode(f, &o, &cc, &s1, 2688, 1, &y1, &e), 0);
    assert_int_equal(f->decode(f, &o, &cc, &s2, 2688, 1, &y2, &e), 0);
    assert_true(y1 == 6.0f && y2 == 6.0f);
}

/* ================================================================================================
** Agreement, options, registry
** ============================================================================================== */

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
        for (int ord = 0; ord < 2; ord++)
            for (size_t li = 0; li < N(lens); li++)
                for (size_t bi = 0; bi < N(blocks); bi++)
                    for (size_t md = 0; md < N(modes); md++)
                        for (int rep = 0; rep < 4; rep++) {
                            qs_qopts o = Oround(modes[md]);
                            o.nvfp4 = (qs_nvfp4_order)ord;
                            o.block = blocks[bi];
                            o.seed = rnd64();
                            o.tensor_scale = rep == 3 ? (float)ldexp(rnd01(), (int)(rnd64() % 200) - 100) : 0;
                            adversarial(x, lens[li], blocks[bi] ? (size_t)blocks[bi] : 16, 0);
                            quant3(fmt("nvfp4"), &o, x, lens[li], c, m, dec, NULL);
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
    const qs_format *f = fmt("nvfp4");
    float x[64], a[64];
    qs_err e;
    for (int i = 0; i < 64; i++) x[i] = (float)rnd_gauss();
    qs_qopts o = Oround(QS_RND_HR);
    assert_int_equal(f->fakeq(f, &o, x, 64, a, &e), -1);
    inplace_same(f);
    o = O();
    assert_true(qs_format_bits_per_elem(f, &o) == 4.5);
    assert_int_equal(f->family, QS_FAM_NVFP4);
    assert_int_equal(f->scale_kind, QS_SK_UE4M3);
    assert_true(f->has_tensor_scale);
    assert_true(f->fopts & QS_FOPT_NVFP4_ORDER);
    assert_true(f->mf == &qs_mf_e2m1);
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
    size_t total = 0;
    for (int v = 0; v < 4; v++) {
        qs_qopts o = O();
        o.nvfp4 = (qs_nvfp4_order)(v & 1);
        o.tensor_scale = v >= 2 ? 1000.0f : 0;
        fill_mixed(x, n, 2);
        total += simd_fakeq_same(fmt("nvfp4"), &o, x, n - 3, ys, yv, v);
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
    const int blocks[] = {0, 16, 8, 24, 7, 64};
    const qs_format *f = fmt("nvfp4");
    size_t total = 0;
    for (int v = 0; v < 6; v++)
        for (size_t bi = 0; bi < N(blocks); bi++) {
            qs_qopts o = O();
            o.block = blocks[bi];
            o.nvfp4 = (qs_nvfp4_order)(v & 1);
            o.tensor_scale = v >= 4 ? 1e-38f : v >= 2 ? 1000.0f : 0;
            fill_adversarial(x, n, 2, qs_format_block(f, &o));
            total += simd_encode_same(f, &o, x, n, cs, cv, ms, mv, v);
        }
    print_message("# encode scalar vs SIMD: %zu values compared\n", total);
    free(x); free(cs); free(cv); free(ms); free(mv);
}

/* SR fakeq (runs of 64 blocks through qs_mf_round_n's SR kernels) equals decode(encode), whose encode
** rounds element by element with qs_mf_encode and qs_sr_uniform: long mixed and adversarial runs
** that cross the 64-block runs, partial final blocks, counters not at 0, both orders, tensor scales,
** every level, and in place. */
static void test_sr_fakeq_runs(void **st)
{
    (void)st;
    const size_t n = 64 * 16 * 5 + 13;
    const int blocks[] = {0, 16, 7, 24, 100};
    float *x = malloc((n + 32) * sizeof *x), *dec = malloc(n * sizeof *dec), *y = malloc(n * sizeof *y);
    uint32_t *c = malloc(n * sizeof *c);
    uint8_t *m = malloc(n);
    const qs_format *f = fmt("nvfp4");
    qs_err e;
    for (int lvl = QS_SIMD_SCALAR; lvl <= qs_simd_cpu(); lvl++) {
        qs_simd_force(lvl);
        for (size_t bi = 0; bi < N(blocks); bi++)
            for (int v = 0; v < 6; v++) {
                qs_qopts o = Oround(QS_RND_SR);
                o.block = blocks[bi];
                o.nvfp4 = (qs_nvfp4_order)(v & 1);
                o.seed = rnd64();
                o.index0 = v >= 2 ? rnd64() : 0;
                o.tensor_scale = v >= 4 ? 1000.0f : 0;
                if (v % 3 == 0) fill_mixed(x, n, 2);
                else fill_adversarial(x, n, 2, qs_format_block(f, &o));
                quant3(f, &o, x, n, c, m, dec, NULL);
                memcpy(y, x, n * sizeof *y);
                assert_int_equal(f->fakeq(f, &o, y, n, y, &e), 0);
                assert_memory_equal(y, dec, n * sizeof *y);
            }
    }
    qs_simd_force(-1);
    free(x); free(dec); free(y); free(c); free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_T32_T34_nvfp4),
        cmocka_unit_test(test_T35_nvfp4_tiny),
        cmocka_unit_test(test_nvfp4_tensor_scale),
        cmocka_unit_test(test_nvfp4_specials),
        cmocka_unit_test(test_fakeq_agreement),
        cmocka_unit_test(test_options_registry),
        cmocka_unit_test(test_simd_bit_identity),
        cmocka_unit_test(test_simd_encode_identity),
        cmocka_unit_test(test_sr_fakeq_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
