/*
** The registry row's answers (kernels/format.h, format_inspect.c): families and their names, the
** element descriptor against the row's layout, the inspector's code fields, legends, element steps
** and ulps, block-scale values and metadata texts of every family, the one block geometry
** (format_apply.h) that apply, the analysis and the inspector share, and the analysis engine's door.
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/format.h"
#include "../../kernels/format_apply.h"
#include "../../kernels/hifloat.h"
#include "../../kernels/minifloat.h"

static const qs_format *fmt(const char *name)
{
    const qs_format *f = qs_format_find(name);
    if (!f) fail_msg("no format %s", name);
    return f;
}

static void num(double v, char *buf, size_t cap) { snprintf(buf, cap, "%g", v); }

static void test_rows(void **st)
{
    (void)st;
    static const char *const names[QS_FAM_COUNT] = {"float", "hifloat", "mx", "nvfp4", "m2xfp", "int", "ggml"};
    for (int k = 0; k < QS_FAM_COUNT; k++) assert_string_equal(qs_family_name((qs_family)k), names[k]);
    assert_string_equal(qs_family_name(QS_FAM_COUNT), "?");
    int seen[QS_FAM_COUNT] = {0};
    for (size_t i = 0; i < qs_format_count(); i++) {
        const qs_format *f = qs_format_at(i);
        assert_true((unsigned)f->family < QS_FAM_COUNT);
        seen[f->family]++;
        if (f->mf) {   /* the element descriptor is the row's layout */
            assert_int_equal(f->elem, QS_ELEM_FLOAT);
            assert_int_equal(f->mf->ebits, f->ebits);
            assert_int_equal(f->mf->mbits, f->mbits);
            assert_int_equal(f->mf->bias, f->bias);
            assert_int_equal(1 + f->ebits + f->mbits, f->elem_bits);
        }
        assert_true(!f->has_tensor_scale || f->scale_kind == QS_SK_UE4M3);
        assert_int_equal(f->has_scale_rule, f->scale_kind == QS_SK_E8M0);   /* --scale-rule: E8M0 blocks */
        assert_true(!f->scale_value == (f->scale_kind == QS_SK_NONE || f->scale_kind == QS_SK_FP32 || f->scale_kind == QS_SK_GGML));
        assert_true(!f->meta_text == (f->scale_kind == QS_SK_NONE));
        assert_true((f->scale_kind == QS_SK_NONE) == (f->meta_bytes == 0));
        assert_true(f->elem != QS_ELEM_TAPERED || (f->code_label && f->field_legend && f->label_width > 0));
        assert_true(qs_format_is_minifloat_cast(f) == (f->family == QS_FAM_FLOAT));
    }
    for (int k = 0; k < QS_FAM_COUNT; k++) assert_true(seen[k] > 0);
    assert_true(fmt("fp16")->mf == &qs_mf_fp16 && fmt("bf16")->mf == &qs_mf_bf16 && fmt("mxfp4")->mf == &qs_mf_e2m1);
    assert_null(fmt("mxint8")->mf);
    assert_null(fmt("e8m0")->mf);
}

static void fields(const char *name, uint32_t code, const char *want)
{
    qs_code_field s[QS_MAX_FIELDS];
    int n = qs_format_code_fields(fmt(name), code, s);
    char got[256] = "";
    for (int i = 0; i < n; i++) {
        size_t k = strlen(got);
        snprintf(got + k, sizeof got - k, "%s%s/%d", i ? " " : "", s[i].bits, (int)s[i].kind);
    }
    assert_string_equal(got, want);
}

static void test_code_fields(void **st)
{
    (void)st;
    fields("fp8_e4m3", 0x38, "0/0 0111/1 000/2");
    fields("fp4_e2m1", 0xB, "1/0 01/1 1/2");
    fields("mxfp6_e3m2", 0x21, "1/0 000/1 01/2");
    fields("e8m0", 0x7F, "01111111/1");
    fields("int8", 0x81, "1/0 0000001/3");
    fields("mxint8", 0x40, "0/0 1000000/3");
    fields("int4", 0x9, "1/0 001/3");
    fields("hif4", 0xB, "1/0 011/2");
    fields("nvfp4", 0x7, "0/0 11/1 1/2");
    qs_code_field s[QS_MAX_FIELDS];
    int n = qs_format_code_fields(fmt("hif8"), 0x2D, s);   /* tapered: sign, dot, exponent, mantissa */
    assert_true(n >= 3 && n <= 4);
    assert_int_equal(s[0].kind, QS_FIELD_SIGN);
    assert_int_equal(s[n - 1].kind, QS_FIELD_MANT);
    char lab[200];
    qs_hif8_fields(0x2D, lab, sizeof lab);
    assert_int_equal(strncmp(lab, s[0].bits, strlen(s[0].bits)), 0);
    assert_string_equal(qs_format_field_legend(fmt("hif8")), "s d e m");
    assert_string_equal(qs_format_field_legend(fmt("fp8_e4m3")), "s e m");
    assert_string_equal(qs_format_field_legend(fmt("e8m0")), "e");
    assert_string_equal(qs_format_field_legend(fmt("int8")), "s int");
    assert_string_equal(qs_format_field_legend(fmt("mxint8")), "s int");
    assert_string_equal(qs_format_field_legend(fmt("hif4")), "s q");
    assert_int_equal(qs_format_code_fields_width(fmt("fp8_e4m3")), 10);
    assert_int_equal(qs_format_code_fields_width(fmt("hif8")), 11);
    char t[200];
    qs_format_code_text(fmt("fp8_e4m3"), 0x38, t, sizeof t);
    assert_string_equal(t, "0 0111 000  (sign | exponent 4 bits, bias 7 | mantissa 3 bits)");
    qs_format_code_text(fmt("hif8"), 0x2D, t, sizeof t);
    assert_string_equal(t, lab);
}

static void test_steps_ulps_scales(void **st)
{
    (void)st;
    assert_int_equal(qs_format_one_code(fmt("fp8_e4m3")), 0x38);
    assert_int_equal(qs_format_one_code(fmt("mxfp4")), 0x2);
    assert_int_equal(qs_format_one_code(fmt("int8")), 1);
    assert_int_equal(qs_format_one_code(fmt("hif4")), 1);
    assert_int_equal(qs_format_one_code(fmt("hif8")), 1);
    assert_true(qs_format_elem_ulp(fmt("fp8_e4m3"), 1.0f, 1.0) == 0.125);
    assert_true(qs_format_elem_ulp(fmt("fp8_e4m3"), 1e6f, 1.0) == 32.0);     /* above max: the top binade's */
    assert_true(qs_format_elem_ulp(fmt("mxfp4"), 5.0f, 2.0) == 2.0);
    assert_true(qs_format_elem_ulp(fmt("int8"), 3.0f, 0.5) == 0.5);
    assert_true(qs_format_elem_ulp(fmt("hif4"), 3.0f, 0.25) == 0.25);
    assert_true(isnan(qs_format_elem_ulp(fmt("hif8"), 3.0f, 1.0)));
    assert_true(isnan(qs_format_elem_ulp(fmt("fp8_e4m3"), 1.0f, 0.0)));
    assert_true(qs_format_scale_value(fmt("mxfp4"), 127) == 1.0);
    assert_true(isnan(qs_format_scale_value(fmt("mxfp4"), 0xFF)));
    assert_true(qs_format_scale_value(fmt("m2xfp4"), 128) == 2.0);
    assert_true(qs_format_scale_value(fmt("nvfp4"), 0x38) == 1.0);
    assert_true(qs_format_scale_value(fmt("hif4"), 48 << 2) == qs_hif4_e6m2_value(48 << 2));
    assert_true(isnan(qs_format_scale_value(fmt("int8"), 1)));
    assert_true(isnan(qs_format_scale_value(fmt("fp8_e4m3"), 1)));
    /* element steps: decode of the one code with the block's metadata; M2XFP's from its fields */
    float x[32], y[32], stp[32], ts = 1;
    uint32_t c[32];
    uint8_t m[4];
    qs_err e;
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 11) * 0.37f;
    const qs_format *f = fmt("mxfp4");
    qs_qopts o;
    memset(&o, 0, sizeof o);
    assert_int_equal(f->encode(f, &o, x, 32, c, m, &ts, &e), 0);
    qs_format_elem_steps(f, &o, m, ts, 32, stp);
    for (int i = 0; i < 32; i++) assert_true(stp[i] == (float)qs_format_scale_value(f, m[0]));
    f = fmt("m2xfp4");
    o.m2x = QS_M2X_ES;
    assert_int_equal(f->encode(f, &o, x, 32, c, m, &ts, &e), 0);
    qs_format_elem_steps(f, &o, m, ts, 32, stp);
    for (int i = 0; i < 32; i++)
        assert_true(stp[i] == qs_e8m0_decode(m[0]) * (1 + ((m[1] >> (2 * (i / 8))) & 3) / 4.0f));
    assert_int_equal(f->decode(f, &o, c, m, ts, 32, y, &e), 0);
    for (int i = 0; i < 32; i++) {   /* every value is a multiple of its step (E2M1 halves) */
        double q = y[i] / stp[i] * 2;
        assert_true(q == floor(q));
    }
}

static void meta(const char *name, const qs_qopts *o, const uint8_t *m, float ts, double step, const char *want)
{
    char out[200];
    qs_format_meta_text(fmt(name), o, m, ts, step, num, out, sizeof out);
    assert_string_equal(out, want);
}

static void test_meta_text(void **st)
{
    (void)st;
    qs_qopts o;
    memset(&o, 0, sizeof o);
    uint8_t m[4] = {0x7F, 0xE4, 0, 0};
    meta("fp8_e4m3", &o, m, 1, 1, "element cast: no block metadata");
    meta("mxfp4", &o, m, 1, 1, "E8M0 scale 0x7f [01111111] = 2^0 = 1  (rule floor)");
    o.scale_rule = QS_SCALE_RCEIL;
    meta("mxfp4", &o, m, 1, 1, "E8M0 scale 0x7f [01111111] = 2^0 = 1  (rule rceil)");
    uint8_t nan[1] = {0xFF};
    meta("mxfp4", &o, nan, 1, 1, "E8M0 scale 0xff 11111111 = NaN (block holds NaN/Inf)");
    uint8_t nv[1] = {0x38};
    meta("nvfp4", &o, nv, 2688, 0.5, "UE4M3 block scale 0x38 [0 0111 000] = 1; tensor amax 2688; element step 0.5");
    meta("m2xfp4", &o, m, 1, 1, "E8M0 0x7f = 1; sub-group fields 0 1 2 3 (top element d+1)");
    o.m2x = QS_M2X_ES;
    meta("m2xfp4", &o, m, 1, 1, "E8M0 0x7f = 1; sub-group fields 0 1 2 3 (ratio m: x(1+m/4))");
    float s = 1.5f;
    uint8_t fs[4];
    memcpy(fs, &s, 4);
    meta("int8", &o, fs, 1, 1, "FP32 scale 0x3fc00000 = 1.5 (absmax / 127)");
    meta("int4", &o, fs, 1, 1, "FP32 scale 0x3fc00000 = 1.5 (absmax / 7)");
    qs_hif4_meta hm = {48 << 2, 0x81, 0x8001};
    uint8_t hb[QS_HIF4_META];
    qs_hif4_meta_store(&hm, hb);
    meta("hif4", &o, hb, 1, 1, "E6M2 0xc0 = 1; x2 per 8: 21111112; per 4: 2111111111111112");
}

static void test_block_geom(void **st)
{
    (void)st;
    qs_apply a;
    memset(&a, 0, sizeof a);
    a.f = fmt("mxfp4");
    a.axis = 1;
    qs_block_geom g;
    uint64_t idx[64], i0;
    qs_block_geom_of(&a, 5, 70, &g);   /* rows are runs: 3 blocks per row, the last one of 6 */
    assert_true(!g.whole && !g.col && g.blk == 32 && g.per == 3 && g.nblocks == 15 && g.runlen == 70 && g.nruns == 5);
    assert_int_equal(qs_block_geom_elems(&g, 5, idx, 64, &i0), 6);
    assert_true(idx[0] == 70 + 64 && idx[5] == 70 + 69 && i0 == 70 + 64);
    assert_true(qs_block_geom_block_of(&g, 70 + 69) == 5 && qs_block_geom_block_of(&g, 31) == 0);
    a.axis = 0;                          /* columns are runs: 5 values each, one block */
    qs_block_geom_of(&a, 5, 70, &g);
    assert_true(g.col && g.per == 1 && g.nblocks == 70 && g.runlen == 5);
    assert_int_equal(qs_block_geom_elems(&g, 3, idx, 64, &i0), 5);
    assert_true(idx[0] == 3 && idx[1] == 73 && idx[4] == 4 * 70 + 3 && i0 == 3 * 5);
    assert_true(qs_block_geom_block_of(&g, 4 * 70 + 3) == 3);
    a.f = fmt("int8");                   /* one scale per row */
    a.axis = 1;
    a.gran = QS_GRAN_ROW;
    qs_block_geom_of(&a, 5, 70, &g);
    assert_true(g.blk == 0 && g.per == 1 && g.nblocks == 5);
    assert_int_equal(qs_block_geom_elems(&g, 2, idx, 64, &i0), 64);   /* capped */
    assert_true(idx[0] == 140 && i0 == 140);
    a.gran = QS_GRAN_TENSOR;
    qs_block_geom_of(&a, 5, 70, &g);
    assert_true(g.whole && g.nblocks == 1 && g.runlen == 350 && qs_block_geom_block_of(&g, 349) == 0);
    a.gran = QS_GRAN_COL;
    qs_block_geom_of(&a, 5, 70, &g);
    assert_true(g.col && g.nblocks == 70 && g.blk == 0);
}

/* What the analysis engine and the scaled casts ask of a row (format.h): every block format answers
** with a grid and one way to its scales, casts with none; the grid agrees with the code table; the
** scale target is max_finite for uniform-precision casts. */
static void test_engine_door(void **st)
{
    (void)st;
    for (size_t i = 0; i < qs_format_count(); i++) {
        const qs_format *f = qs_format_at(i);
        const int cast = f->scale_kind == QS_SK_NONE;
        const int ways = !!f->seg_scales + !!(f->block_scales || f->fakeq_scales);
        if (cast) {
            assert_int_equal(ways, 0);
            assert_true(!f->fakeq_meta && !f->scale_seg && !f->amax_finite);
            assert_true(f->scale_target == 0 || (f->scale_target > 0 && f->scale_target <= f->max_finite));
            if (f->mf && f->max_finite < 1e30) assert_true(f->scale_target == f->max_finite);
            continue;
        }
        assert_true(f->scale_target == 0);
        if (ways != 1) fail_msg("%s: %d ways to its block scales", f->name, ways);
        assert_true(f->grid.elo <= f->grid.ehi);
        if (f->seg_scales) assert_true(f->scale_seg > 0 && f->block % f->scale_seg == 0);
        else assert_int_equal(f->scale_seg, 0);
        if (f->amax_finite) assert_non_null(f->block_scales);
        if (!f->code_value) continue;
        float top = 0;
        for (unsigned c = 0; c < f->ncodes; c++) {
            float v = f->code_value(c);
            if (v > top && v <= 3.4e38f) top = v;
        }
        if (f->ebits > 0) {
            assert_int_equal(f->grid.elo, 1 - f->bias);
            assert_int_equal(f->grid.ehi, ilogb(top));
            assert_int_equal(f->grid.mb, f->mbits);
        } else {
            assert_int_equal(f->grid.elo, 0);
            assert_int_equal(f->grid.ehi, 0);
            assert_true(ldexp(1.0, -f->grid.mb) == f->code_value(1));
        }
    }
    assert_true(fmt("hif8")->scale_target == 15.0 && fmt("bf16")->scale_target == 0 && fmt("fp16")->scale_target == 65504.0);
    assert_true(fmt("hif4")->grid.mb == 2 && fmt("m2xfp4")->grid.ehi == 2 && fmt("int8")->grid.mb == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_code_fields),
        cmocka_unit_test(test_steps_ulps_scales),
        cmocka_unit_test(test_meta_text),
        cmocka_unit_test(test_block_geom),
        cmocka_unit_test(test_engine_door),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
