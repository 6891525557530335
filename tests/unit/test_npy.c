/*
** Unit tests for the .npy reader (store/parse_npy.c): every accepted descr with decoded values,
** header versions and spellings, raw-word reinterpretation, and a corpus of malformed files.
** Fixtures come from tests/fixtures/make_npy_fixtures.py; the known values are repeated here.
*/
#include "test_loaded_util.h"

#include <math.h>

#include "../../store/container.h"

/* ---------------------------------------------------------------- helpers */

static void load(loaded *l, const char *path, qs_dtype re) { load_with(l, path, re, qs_parse_npy); }

/* Load a good file with a single tensor and decode it into a fresh float array. */
static float *load_ok(loaded *l, const char *path, qs_dtype re, qs_dtype want)
{
    load(l, path, re);
    if (l->rc != 0) fail_msg("%s: %s", path, l->e.msg);
    assert_string_equal(l->c.kind, "npy");
    assert_int_equal(l->c.n, 1);
    const qs_tdesc *t = &l->c.t[0];
    assert_non_null(t->name);
    assert_string_equal(t->name, "");
    assert_int_equal(t->codec, QS_CODEC_NONE);
    assert_int_equal(t->dtype, want);
    assert_true(t->offset <= l->len && t->nbytes <= l->len - t->offset);
    const qs_dtype_traits *tr = qs_dtype_get(t->dtype);
    assert_non_null(tr);
    uint64_t nb;
    assert_int_equal(qs_dtype_nbytes(t->dtype, t->numel, &nb), 0);
    assert_int_equal(nb, t->nbytes);
    float *v = calloc(t->numel ? t->numel : 1, sizeof *v);
    assert_non_null(v);
    tr->decode(l->buf + t->offset, v, t->numel / tr->block_elems);
    return v;
}

static void assert_floats(const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (isnan(want[i])) { assert_true(isnan(got[i])); continue; }
        if (got[i] != want[i]) fail_msg("element %zu: got %.9g want %.9g", i, (double)got[i], (double)want[i]);
    }
}

static void check_ok(const char *path, qs_dtype re, qs_dtype want, int ndim, const uint64_t *shape,
                     const float *vals, size_t n)
{
    loaded l;
    float *v = load_ok(&l, path, re, want);
    const qs_tdesc *t = &l.c.t[0];
    assert_int_equal(t->ndim, ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(t->shape[i], shape[i]);
    assert_int_equal(t->numel, n);
    assert_floats(v, vals, n);
    free(v);
    unload(&l);
}

static float bf16_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u &= 0xFFFF0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* ---------------------------------------------------------------- good files */

static const float kF4[6] = {1.5f, -2.0f, 3.25f, 0.0f, 0.001f, -7.0f};

static void test_f4(void **state)
{
    (void)state;
    loaded l;
    float *v = load_ok(&l, "fixtures/npy/f4_2x3.npy", QS_DT_INVALID, QS_DT_F32);
    const qs_tdesc *t = &l.c.t[0];
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    assert_int_equal(t->numel, 6);
    assert_int_equal(t->nbytes, 24);
    assert_int_equal(t->offset, 128);       /* numpy pads to 64 */
    assert_int_equal(t->fortran, 0);
    assert_int_equal(l.c.nwarn, 0);
    assert_null(t->meta_json);
    assert_floats(v, kF4, 6);
    free(v);
    unload(&l);
}

static void test_every_descr(void **state)
{
    (void)state;
    static const uint64_t s3[] = {3}, s4[] = {4}, s5[] = {5};
    check_ok("fixtures/npy/f2.npy", 0, QS_DT_F16, 1, s5, (float[]){1.0f, -0.5f, 65504.0f, ldexpf(1, -24), INFINITY}, 5);
    check_ok("fixtures/npy/f8.npy", 0, QS_DT_F64, 1, s3, (float[]){(float)0.1, -2.5f, 1e10f}, 3);
    check_ok("fixtures/npy/i1.npy", 0, QS_DT_I8, 1, s4, (float[]){-128, -1, 0, 127}, 4);
    check_ok("fixtures/npy/u1.npy", 0, QS_DT_U8, 1, s4, (float[]){0, 1, 200, 255}, 4);
    check_ok("fixtures/npy/i2.npy", 0, QS_DT_I16, 1, s4, (float[]){-32768, -2, 0, 32767}, 4);
    check_ok("fixtures/npy/u2.npy", 0, QS_DT_U16, 1, s4, (float[]){0, 1, 40000, 65535}, 4);
    check_ok("fixtures/npy/i4.npy", 0, QS_DT_I32, 1, s4, (float[]){(float)INT32_MIN, -3, 0, (float)INT32_MAX}, 4);
    check_ok("fixtures/npy/u4.npy", 0, QS_DT_U32, 1, s3, (float[]){0, 7, 4000000000.0f}, 3);
    check_ok("fixtures/npy/i8.npy", 0, QS_DT_I64, 1, s4, (float[]){-ldexpf(1, 40), -5, 0, ldexpf(1, 40)}, 4);
    check_ok("fixtures/npy/u8.npy", 0, QS_DT_U64, 1, s3, (float[]){0, 9, ldexpf(1, 40)}, 3);
    check_ok("fixtures/npy/b1.npy", 0, QS_DT_BOOL, 1, s3, (float[]){1, 0, 1}, 3);
}

static void test_versions_and_spellings(void **state)
{
    (void)state;
    static const uint64_t s2[] = {2}, s3[] = {3}, s23[] = {2, 3};
    check_ok("fixtures/npy/v2.npy", 0, QS_DT_F32, 1, s3, (float[]){1, 2, 3}, 3);
    check_ok("fixtures/npy/v3.npy", 0, QS_DT_F32, 1, s2, (float[]){4, 5}, 2);
    check_ok("fixtures/npy/v3_utf8.npy", 0, QS_DT_F32, 1, s2, (float[]){4, 5}, 2);
    check_ok("fixtures/npy/py2_long.npy", 0, QS_DT_F32, 2, s23, kF4, 6);
    check_ok("fixtures/npy/odd_header.npy", 0, QS_DT_F32, 2, s23, kF4, 6);
    /* numpy's own Python-2 test file (shipped by Debian's python3-numpy): (2L,) of 1.0. */
    check_ok("fixtures/npy/win64python2.npy", 0, QS_DT_F64, 1, s2, (float[]){1, 1}, 2);

    loaded l;
    float *v = load_ok(&l, "fixtures/npy/v2.npy", 0, QS_DT_F32);
    assert_int_equal(l.c.t[0].offset % 64, 0);
    assert_int_equal(l.buf[6], 2);
    free(v);
    unload(&l);
}

static void test_fortran_scalar_empty(void **state)
{
    (void)state;
    loaded l;
    float *v = load_ok(&l, "fixtures/npy/fortran_3x4.npy", 0, QS_DT_F32);
    const qs_tdesc *t = &l.c.t[0];
    assert_int_equal(t->fortran, 1);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 3);
    assert_int_equal(t->shape[1], 4);
    /* arange(12).reshape(3,4) stored column-major: linear k holds element (k%3, k/3). */
    for (int k = 0; k < 12; k++) assert_true(v[k] == (float)(4 * (k % 3) + k / 3));
    free(v);
    unload(&l);

    v = load_ok(&l, "fixtures/npy/scalar.npy", 0, QS_DT_F32);
    assert_int_equal(l.c.t[0].ndim, 0);
    assert_int_equal(l.c.t[0].numel, 1);
    assert_int_equal(l.c.t[0].nbytes, 4);
    assert_true(v[0] == 3.5f);
    free(v);
    unload(&l);

    v = load_ok(&l, "fixtures/npy/empty_0x4.npy", 0, QS_DT_F32);
    assert_int_equal(l.c.t[0].ndim, 2);
    assert_int_equal(l.c.t[0].shape[0], 0);
    assert_int_equal(l.c.t[0].shape[1], 4);
    assert_int_equal(l.c.t[0].numel, 0);
    assert_int_equal(l.c.t[0].nbytes, 0);
    free(v);
    unload(&l);
}

static void test_trailing_bytes_warn(void **state)
{
    (void)state;
    loaded l;
    float *v = load_ok(&l, "fixtures/npy/trailing.npy", 0, QS_DT_F32);
    assert_floats(v, (float[]){1, 2}, 2);
    assert_int_equal(l.c.nwarn, 1);
    assert_non_null(strstr(l.c.warnings[0], "5 trailing bytes"));
    assert_non_null(strstr(l.c.warnings[0], "(at byte 136)"));
    free(v);
    unload(&l);
}

static void test_raw_words(void **state)
{
    (void)state;
    static const uint64_t s4[] = {4}, s22[] = {2, 2};
    const float bf[4] = {1.0f, -2.0f, 0.15625f, bf16_of(3.0e38f)};
    const float e4[4] = {1.0f, -2.0f, 448.0f, ldexpf(1, -9)};
    const float e5[4] = {1.0f, -2.0f, 57344.0f, INFINITY};
    const float e8[4] = {1.0f, 2.0f, ldexpf(1, -127), NAN};

    /* V2 / V1 / f1 words need --as; the type-name spellings do not. */
    check_ok("fixtures/npy/bf16_void.npy", QS_DT_BF16, QS_DT_BF16, 1, s4, bf, 4);
    check_ok("fixtures/npy/bf16_lt_v2.npy", QS_DT_BF16, QS_DT_BF16, 1, s4, bf, 4);
    check_ok("fixtures/npy/e4m3_v1.npy", QS_DT_F8_E4M3, QS_DT_F8_E4M3, 1, s4, e4, 4);
    check_ok("fixtures/npy/e5m2_f1.npy", QS_DT_F8_E5M2, QS_DT_F8_E5M2, 1, s4, e5, 4);
    check_ok("fixtures/npy/name_bfloat16.npy", 0, QS_DT_BF16, 1, s4, bf, 4);
    check_ok("fixtures/npy/name_e4m3fn.npy", 0, QS_DT_F8_E4M3, 2, s22, e4, 4);
    check_ok("fixtures/npy/name_e5m2.npy", 0, QS_DT_F8_E5M2, 1, s4, e5, 4);
    check_ok("fixtures/npy/name_e8m0fnu.npy", 0, QS_DT_F8_E8M0, 1, s4, e8, 4);
    /* A type name wins over --as. */
    check_ok("fixtures/npy/name_bfloat16.npy", QS_DT_F16, QS_DT_BF16, 1, s4, bf, 4);

    /* Integer words become the requested float with --as, stay integers without. */
    loaded l;
    float *v = load_ok(&l, "fixtures/npy/u2.npy", QS_DT_BF16, QS_DT_BF16);
    assert_true(v[1] == qs_bf16_to_f32(1));
    free(v);
    unload(&l);
    free(load_ok(&l, "fixtures/npy/i2.npy", QS_DT_F16, QS_DT_F16)); unload(&l);
    free(load_ok(&l, "fixtures/npy/u1.npy", QS_DT_F8_E4M3, QS_DT_F8_E4M3)); unload(&l);
    free(load_ok(&l, "fixtures/npy/i1.npy", QS_DT_F8_E8M0, QS_DT_F8_E8M0)); unload(&l);
    free(load_ok(&l, "fixtures/npy/e4m3_v1.npy", QS_DT_F8_E8M0, QS_DT_F8_E8M0)); unload(&l);
    free(load_ok(&l, "fixtures/npy/bf16_void.npy", QS_DT_F16, QS_DT_F16)); unload(&l);
    /* Typed floats and wide integers are not raw words: --as leaves them alone. */
    free(load_ok(&l, "fixtures/npy/f4_2x3.npy", QS_DT_BF16, QS_DT_F32)); unload(&l);
    free(load_ok(&l, "fixtures/npy/f2.npy", QS_DT_BF16, QS_DT_F16)); unload(&l);
    free(load_ok(&l, "fixtures/npy/i4.npy", QS_DT_F8_E4M3, QS_DT_I32)); unload(&l);
}

static void test_raw_word_errors(void **state)
{
    (void)state;
    static const struct { const char *path; qs_dtype re; const char *phrase; } k[] = {
        {"fixtures/npy/bf16_void.npy", QS_DT_INVALID, "pass --as bf16 or --as f16"},
        {"fixtures/npy/bf16_lt_v2.npy", QS_DT_INVALID, "'<V2'"},
        {"fixtures/npy/e4m3_v1.npy", QS_DT_INVALID, "pass --as f8_e4m3, f8_e5m2 or f8_e8m0"},
        {"fixtures/npy/e5m2_f1.npy", QS_DT_INVALID, "'<f1'"},
        {"fixtures/npy/bf16_void.npy", QS_DT_F8_E4M3, "cannot read the 16-bit words of dtype '|V2' as f8_e4m3 (8-bit)"},
        {"fixtures/npy/u1.npy", QS_DT_BF16, "cannot read the 8-bit words of dtype '|u1' as bf16 (16-bit)"},
        {"fixtures/npy/i2.npy", QS_DT_F8_E5M2, "cannot read the 16-bit words"},
        {"fixtures/npy/u2.npy", QS_DT_F32, "not an 8- or 16-bit float"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        loaded l;
        load(&l, k[i].path, k[i].re);
        if (l.rc == 0) fail_msg("%s parsed", k[i].path);
        assert_err(&l.e, &l.c, k[i].phrase);
        unload(&l);
    }
}

/* ---------------------------------------------------------------- malformed files */

static void test_bad_corpus(void **state)
{
    (void)state;
    static const struct { const char *file, *phrase; long at; } k[] = {
        {"bad_npy_magic.npy", "not an npy file: bad magic", 0},
        {"bad_npy_empty.npy", "empty npy data", 0},
        {"bad_npy_trunc_preamble.npy", "truncated npy preamble", 8},
        {"bad_npy_trunc_header.npy", "npy header length 118 runs past the end", 8},
        {"bad_npy_trunc_data.npy", "array data truncated: 24 bytes expected from byte 128", 148},
        {"bad_npy_version.npy", "unsupported npy format version 4.0", 6},
        {"bad_npy_absurd_hlen.npy", "absurd npy header length 4294967280", 8},
        {"bad_npy_hlen_past_eof.npy", "runs past the end", 8},
        {"bad_npy_overflow.npy", "too many elements", 60},
        {"bad_npy_hugedim.npy", "does not fit in 64 bits", 61},
        {"bad_npy_unknown_dtype.npy", "unsupported dtype '<q9'", 20},
        {"bad_npy_complex.npy", "unsupported dtype '<c8'", 20},
        {"bad_npy_object.npy", "object arrays", 20},
        {"bad_npy_structured.npy", "structured dtypes", 20},
        {"bad_npy_subarray.npy", "sub-array dtypes", 20},
        {"bad_npy_bigendian.npy", "big-endian dtype >f4 not supported", 20},
        {"bad_npy_void4.npy", "unsupported void dtype", 20},
        {"bad_npy_syntax.npy", "expected ',' or '}'", 26},
        {"bad_npy_unterminated.npy", "unterminated string", 66},
        {"bad_npy_not_dict.npy", "header is not a dict", 10},
        {"bad_npy_missing_key.npy", "missing key 'fortran_order'", -1},
        {"bad_npy_extra_key.npy", "unexpected key 'x'", -1},
        {"bad_npy_dup_key.npy", "duplicate key 'descr'", -1},
        {"bad_npy_fortran_int.npy", "fortran_order must be True or False", -1},
        {"bad_npy_negdim.npy", "negative dimension", -1},
        {"bad_npy_notuple.npy", "is not a tuple", -1},
        {"bad_npy_ndim9.npy", "too many dimensions", -1},
        {"bad_npy_nul.npy", "NUL byte in header", 50},
        {"bad_npy_trailing_text.npy", "text after the closing", -1},
        {"bad_npy_v3_utf8.npy", "not valid UTF-8", 72},
        {"bad_npy_void_no_as.npy", "pass --as bf16", 20},
        {"bad_npy_py3_objarr.npy", "object arrays", -1},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) check_bad_file(k[i].file, k[i].phrase, k[i].at, qs_parse_npy);
}

/* Every prefix of a good file must fail cleanly, and no single-byte change may crash. */
static void test_truncations_and_flips(void **state)
{
    (void)state;
    size_t len = 0;
    uint8_t *good = tu_slurp("fixtures/npy/f4_2x3.npy", &len);
    assert_non_null(good);
    for (size_t n = 0; n < len; n++) {
        uint8_t *b = malloc(n ? n : 1);
        memcpy(b, good, n);
        qs_container c;
        qs_err e;
        if (qs_parse_npy(b, n, NULL, &c, &e) == 0) fail_msg("prefix of %zu bytes parsed", n);
        assert_err(&e, &c, "");
        free(b);
    }
    for (size_t i = 0; i < len; i++) {
        for (int x = 0; x < 256; x += 17) {
            uint8_t *b = malloc(len);
            memcpy(b, good, len);
            b[i] = (uint8_t)x;
            qs_container c;
            qs_err e;
            if (qs_parse_npy(b, len, NULL, &c, &e) == 0) {
                assert_int_equal(c.n, 1);
                assert_true(c.t[0].offset + c.t[0].nbytes <= len);
                qs_container_free(&c);
            } else {
                assert_err(&e, &c, "");
            }
            free(b);
        }
    }
    free(good);
}

/* qs_npy_header on a prefix: it needs only the header bytes, not the data. */
static void test_header_only(void **state)
{
    (void)state;
    size_t len = 0;
    uint8_t *good = tu_slurp("fixtures/npy/f4_2x3.npy", &len);
    assert_non_null(good);
    qs_tdesc t;
    memset(&t, 0, sizeof t);
    uint64_t off = 0;
    qs_err e;
    assert_int_equal(qs_npy_header(good, 128, NULL, &t, &off, &e), 0);
    assert_int_equal(off, 128);
    assert_int_equal(t.nbytes, 24);
    assert_null(t.name);
    assert_int_equal(qs_npy_header(good, 127, NULL, &t, &off, &e), -1);
    assert_non_null(strstr(e.msg, "runs past the end"));
    free(good);
}

/* Hand-written headers exercising the tokenizer. */
static void test_tokenizer(void **state)
{
    (void)state;
    static const struct { const char *hdr; int ok; const char *phrase; } k[] = {
        {"{'descr':'<f4','fortran_order':False,'shape':(1,)}", 1, NULL},
        {"{\"descr\":\"<f4\",\"fortran_order\":True,\"shape\":(1,1,),}", 1, NULL},
        {"  {'shape': (1,), 'descr': '=f4', 'fortran_order': False}  \n", 1, NULL},
        {"{'descr': '|f4', 'fortran_order': False, 'shape': (1L,)} # comment", 1, NULL},
        {"{'descr': 'f4', 'fortran_order': False, 'shape': (1,)}", 1, NULL},
        {"{'descr': '\\x3cf4', 'fortran_order': False, 'shape': (1,)}", 1, NULL},
        {"{u'descr': u'<f4', 'fortran_order': False, 'shape': (1,)}", 1, NULL},
        {"{'descr': 'float32', 'fortran_order': False, 'shape': (1,)}", 1, NULL},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,),,}", 0, "expected a quoted key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", 0, "shape must be a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,)}", 0, "plain decimal integers"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0x1,)}", 0, "plain decimal integers"},
        {"{'descr': '<f4', 'fortran_order': None, 'shape': (1,)}", 0, "True or False"},
        {"{'descr': b'<f4', 'fortran_order': False, 'shape': (1,)}", 0, "only plain or u'' strings"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': ('1',)}", 0, "must be integers"},
        {"{'descr': '<f4', 'fortran_order': False 'shape': (1,)}", 0, "expected ',' or '}'"},
        {"{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", 0, "expected ':'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", 0, "expected ',' or '}' after a value"},
        {"{'descr': 3, 'fortran_order': False, 'shape': (1,)}", 0, "descr must be a string"},
        {"{'descr': '<O8', 'fortran_order': False, 'shape': (1,)}", 0, "object arrays"},
        {"{'descr': '>i2', 'fortran_order': False, 'shape': (1,)}", 0, "big-endian dtype >i2"},
        {"{'descr': '<U4', 'fortran_order': False, 'shape': (1,)}", 0, "unsupported dtype '<U4'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} }", 0, "text after the closing"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2 3)}", 0, "expected ',' or ')'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} $", 0, "unexpected character 0x24"},
        {"{'descr': '\\xZZ', 'fortran_order': False, 'shape': (1,)}", 0, "bad \\x escape"},
        {"", 0, "header is not a dict"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        uint8_t b[512];
        size_t hl = strlen(k[i].hdr);
        memcpy(b, "\x93NUMPY\x01\x00", 8);
        b[8] = (uint8_t)hl;
        b[9] = 0;
        memcpy(b + 10, k[i].hdr, hl);
        memset(b + 10 + hl, 0, 8);                /* data: one f4 zero, then 4 trailing bytes */
        qs_container c;
        qs_err e;
        int rc = qs_parse_npy(b, 10 + hl + 8, NULL, &c, &e);
        if (k[i].ok) {
            if (rc) fail_msg("header %zu failed: %s", i, e.msg);
            assert_int_equal(c.t[0].dtype, QS_DT_F32);
            qs_container_free(&c);
        } else {
            if (rc == 0) fail_msg("header %zu parsed", i);
            assert_err(&e, &c, k[i].phrase);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f4),
        cmocka_unit_test(test_every_descr),
        cmocka_unit_test(test_versions_and_spellings),
        cmocka_unit_test(test_fortran_scalar_empty),
        cmocka_unit_test(test_trailing_bytes_warn),
        cmocka_unit_test(test_raw_words),
        cmocka_unit_test(test_raw_word_errors),
        cmocka_unit_test(test_bad_corpus),
        cmocka_unit_test(test_truncations_and_flips),
        cmocka_unit_test(test_header_only),
        cmocka_unit_test(test_tokenizer),
    };
    return cmocka_run_group_tests_name("npy", tests, NULL, NULL);
}
