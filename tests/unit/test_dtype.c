/*
** Conformance tests for the storage dtypes (kernels/dtype.c): every decoder is compared bit for
** bit with reference vectors from independent libraries (numpy, ml_dtypes, gguf-py), written by
** tests/fixtures/make_dtype_vectors.py into tests/fixtures/dtype/ and committed; plus the name
** table, qs_dtype_nbytes, the scalar helpers and the descriptor-table invariants.
**
** Match rule: identical float32 bits (so the sign of zero counts).  A NaN matches any NaN,
** except for f16/bf16/f32, where the reference keeps the payload and so must we.
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/dtype.h"

#define DIR "fixtures/dtype/"

/* ---------------------------------------------------------------- helpers */

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static int is_nan_bits(uint32_t u) { return (u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu); }

/* Reference file of little-endian u32 float bits; *n = word count. */
static uint32_t *load_ref(const char *path, size_t *n)
{
    size_t len = 0;
    uint8_t *b = tu_slurp(path, &len);
    if (!b) fail_msg("cannot read %s (run from tests/)", path);
    assert_int_equal(len % 4, 0);
    uint32_t *w = malloc(len ? len : 4);
    assert_non_null(w);
    for (size_t i = 0; i < len / 4; i++)
        w[i] = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
               (uint32_t)b[4 * i + 3] << 24;
    free(b);
    *n = len / 4;
    return w;
}

/* Compare n decoded floats with reference bits; prints the first few mismatches. */
static void check_bits(const char *what, const float *got, const uint32_t *ref, size_t n, int nan_exact)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t g = f2u(got[i]);
        if (g == ref[i] || (!nan_exact && is_nan_bits(g) && is_nan_bits(ref[i]))) continue;
        if (bad++ < 8)
            print_message("# %s[%zu]: got 0x%08x (%g), want 0x%08x\n", what, i, g, (double)got[i], ref[i]);
    }
    if (bad) fail_msg("%s: %zu of %zu values differ from the reference", what, bad, n);
}

/* Decode nblocks of `src` with the table decoder: once from an odd (unaligned) address, with a
** canary after the output to catch overruns.  Returns nblocks * block_elems floats. */
static float *decode(qs_dtype t, const uint8_t *src, size_t nblocks)
{
    const qs_dtype_traits *tr = qs_dtype_get(t);
    assert_non_null(tr);
    size_t nin = nblocks * tr->block_bytes, nout = nblocks * tr->block_elems;
    uint8_t *mis = malloc(nin + 1);
    float *dst = malloc((nout + 4) * sizeof(float));
    assert_non_null(mis);
    assert_non_null(dst);
    memcpy(mis + 1, src, nin);
    for (size_t i = 0; i < nout + 4; i++) dst[i] = 12345.0f;
    tr->decode(mis + 1, dst, nblocks);
    for (size_t i = nout; i < nout + 4; i++) assert_true(dst[i] == 12345.0f);
    free(mis);
    return dst;
}

/* ---------------------------------------------------------------- every code of a float type */

static void all_codes(qs_dtype t, const char *file, unsigned ncodes, int nan_exact)
{
    size_t n = 0;
    uint32_t *ref = load_ref(file, &n);
    assert_int_equal(n, ncodes);
    const qs_dtype_traits *tr = qs_dtype_get(t);
    uint8_t *src = calloc(ncodes * 2, 1);
    assert_non_null(src);
    size_t nblocks;
    if (t == QS_DT_F4_E2M1) {       /* element 2i in the low nibble */
        for (unsigned i = 0; i < ncodes / 2; i++) src[i] = (uint8_t)((2 * i) | ((2 * i + 1) << 4));
        nblocks = ncodes / 2;
    } else if (tr->block_bytes == 2) {
        for (unsigned i = 0; i < ncodes; i++) { src[2 * i] = (uint8_t)i; src[2 * i + 1] = (uint8_t)(i >> 8); }
        nblocks = ncodes;
    } else {
        for (unsigned i = 0; i < ncodes; i++) src[i] = (uint8_t)i;
        nblocks = ncodes;
    }
    float *got = decode(t, src, nblocks);
    check_bits(tr->name, got, ref, n, nan_exact);

    /* the scalar helper (all but f4 have one) must agree with the reference too */
    if (t != QS_DT_F4_E2M1) {
        for (unsigned i = 0; i < ncodes; i++) {
            switch (t) {
            case QS_DT_F16:     got[i] = qs_f16_to_f32((uint16_t)i); break;
            case QS_DT_BF16:    got[i] = qs_bf16_to_f32((uint16_t)i); break;
            case QS_DT_F8_E4M3: got[i] = qs_e4m3_to_f32((uint8_t)i); break;
            case QS_DT_F8_E5M2: got[i] = qs_e5m2_to_f32((uint8_t)i); break;
            case QS_DT_F8_E8M0: got[i] = qs_e8m0_to_f32((uint8_t)i); break;
            default:            fail_msg("no scalar helper for %s", tr->name);
            }
        }
        char what[64];
        snprintf(what, sizeof what, "scalar %s", tr->name);
        check_bits(what, got, ref, n, nan_exact);
    }
    free(got);
    free(src);
    free(ref);
}

static void test_f16_all(void **state) { all_codes(QS_DT_F16, DIR "f16_all.f32bits", 65536, 1); }
static void test_bf16_all(void **state) { all_codes(QS_DT_BF16, DIR "bf16_all.f32bits", 65536, 1); }
static void test_e4m3_all(void **state) { all_codes(QS_DT_F8_E4M3, DIR "f8_e4m3_all.f32bits", 256, 0); }
static void test_e5m2_all(void **state) { all_codes(QS_DT_F8_E5M2, DIR "f8_e5m2_all.f32bits", 256, 0); }
static void test_e8m0_all(void **state) { all_codes(QS_DT_F8_E8M0, DIR "f8_e8m0_all.f32bits", 256, 0); }
static void test_f4_all(void **state) { all_codes(QS_DT_F4_E2M1, DIR "f4_e2m1_all.f32bits", 16, 0); }

/* NVFP4 block scale: gguf-py's ue4m3_to_fp32 returns the value already halved (ggml's form). */
static void test_ue4m3_all(void **state)
{
    size_t n = 0;
    uint32_t *ref = load_ref(DIR "ue4m3_half_all.f32bits", &n);
    assert_int_equal(n, 256);
    float got[256];
    for (unsigned i = 0; i < 256; i++) got[i] = 0.5f * qs_ue4m3_to_f32((uint8_t)i);
    check_bits("qs_ue4m3_to_f32 / 2", got, ref, 256, 0);
    free(ref);
}

/* ---------------------------------------------------------------- <name>.in -> <name>.f32bits */

typedef struct vec_case { qs_dtype t; int nan_exact; } vec_case;

static void test_vector(void **state)
{
    const vec_case *c = *state;
    const qs_dtype_traits *tr = qs_dtype_get(c->t);
    assert_non_null(tr);
    char path[128];
    size_t len = 0, n = 0;
    snprintf(path, sizeof path, DIR "%s.in", tr->name);
    uint8_t *src = tu_slurp(path, &len);
    if (!src) fail_msg("cannot read %s (run from tests/)", path);
    assert_int_equal(len % tr->block_bytes, 0);
    size_t nblocks = len / tr->block_bytes;
    assert_true(nblocks > 0);
    snprintf(path, sizeof path, DIR "%s.f32bits", tr->name);
    uint32_t *ref = load_ref(path, &n);
    assert_int_equal(n, nblocks * tr->block_elems);

    float *got = decode(c->t, src, nblocks);
    check_bits(tr->name, got, ref, n, c->nan_exact);
    free(got);

    /* block by block gives the same result (no state carried between blocks) */
    for (size_t b = 0; b < nblocks; b++) {
        got = decode(c->t, src + b * tr->block_bytes, 1);
        check_bits(tr->name, got, ref + b * tr->block_elems, tr->block_elems, c->nan_exact);
        free(got);
    }
    free(ref);
    free(src);
}

static const vec_case kF32 = {QS_DT_F32, 1}, kF64 = {QS_DT_F64, 0}, kI8 = {QS_DT_I8, 1},
    kU8 = {QS_DT_U8, 1}, kI16 = {QS_DT_I16, 1}, kU16 = {QS_DT_U16, 1}, kI32 = {QS_DT_I32, 1},
    kU32 = {QS_DT_U32, 1}, kI64 = {QS_DT_I64, 1}, kU64 = {QS_DT_U64, 1}, kBool = {QS_DT_BOOL, 1},
    kQ8_0 = {QS_DT_Q8_0, 0}, kQ4_0 = {QS_DT_Q4_0, 0}, kQ4_1 = {QS_DT_Q4_1, 0},
    kQ5_0 = {QS_DT_Q5_0, 0}, kQ5_1 = {QS_DT_Q5_1, 0}, kQ4_K = {QS_DT_Q4_K, 0},
    kQ6_K = {QS_DT_Q6_K, 0}, kMXFP4 = {QS_DT_GGML_MXFP4, 0}, kNVFP4 = {QS_DT_GGML_NVFP4, 0},
    /* the registry codecs' types (tests/fixtures/make_kquant_vectors.py) */
    kQ2_K = {QS_DT_Q2_K, 0}, kQ3_K = {QS_DT_Q3_K, 0}, kQ5_K = {QS_DT_Q5_K, 0}, kQ8_K = {QS_DT_Q8_K, 0},
    kIQ4_NL = {QS_DT_IQ4_NL, 0}, kIQ4_XS = {QS_DT_IQ4_XS, 0};

/* ---------------------------------------------------------------- table, names, sizes */

static void test_table_invariants(void **state)
{
    assert_null(qs_dtype_get(QS_DT_INVALID));
    assert_null(qs_dtype_get(QS_DT_COUNT));
    assert_null(qs_dtype_get((qs_dtype)-1));
    for (int t = 1; t < QS_DT_COUNT; t++) {
        const qs_dtype_traits *tr = qs_dtype_get((qs_dtype)t);
        assert_non_null(tr);
        assert_non_null(tr->name);
        assert_true(tr->name[0] != '\0');
        for (const char *p = tr->name; *p; p++)     /* canonical names are lower case */
            assert_false(*p >= 'A' && *p <= 'Z');
        assert_non_null(tr->decode);
        assert_true(tr->block_elems >= 1);
        assert_true(tr->block_bytes >= 1);
        for (int u = 1; u < t; u++)
            if (strcmp(qs_dtype_get((qs_dtype)u)->name, tr->name) == 0)
                fail_msg("dtype name '%s' used twice (%d, %d)", tr->name, u, t);
    }
    /* block geometry from spec/data.md §1.4 */
    static const struct { qs_dtype t; unsigned el, by; } geo[] = {
        {QS_DT_F32, 1, 4}, {QS_DT_F16, 1, 2}, {QS_DT_BF16, 1, 2}, {QS_DT_Q8_0, 32, 34},
        {QS_DT_Q4_0, 32, 18}, {QS_DT_Q4_1, 32, 20}, {QS_DT_Q5_0, 32, 22}, {QS_DT_Q5_1, 32, 24},
        {QS_DT_Q4_K, 256, 144}, {QS_DT_Q6_K, 256, 210}, {QS_DT_GGML_MXFP4, 32, 17},
        {QS_DT_GGML_NVFP4, 64, 36}, {QS_DT_F4_E2M1, 2, 1}, {QS_DT_Q2_K, 256, 84}, {QS_DT_Q3_K, 256, 110},
        {QS_DT_Q5_K, 256, 176}, {QS_DT_Q8_K, 256, 292}, {QS_DT_IQ4_NL, 32, 18}, {QS_DT_IQ4_XS, 256, 136},
    };
    for (size_t i = 0; i < sizeof geo / sizeof geo[0]; i++) {
        assert_int_equal(qs_dtype_get(geo[i].t)->block_elems, geo[i].el);
        assert_int_equal(qs_dtype_get(geo[i].t)->block_bytes, geo[i].by);
    }
}

static void test_names(void **state)
{
    for (int t = 1; t < QS_DT_COUNT; t++)
        assert_int_equal(qs_dtype_from_name(qs_dtype_get((qs_dtype)t)->name), t);
    assert_int_equal(qs_dtype_from_name(NULL), QS_DT_INVALID);
    assert_int_equal(qs_dtype_from_name(""), QS_DT_INVALID);
    assert_int_equal(qs_dtype_from_name("invalid"), QS_DT_INVALID);
    assert_int_equal(qs_dtype_from_name("F16"), QS_DT_INVALID);    /* case-sensitive */
    assert_int_equal(qs_dtype_from_name("f1"), QS_DT_INVALID);     /* no prefix match */
    assert_int_equal(qs_dtype_from_name("f16 "), QS_DT_INVALID);
    assert_int_equal(qs_dtype_from_name("q4_k"), QS_DT_Q4_K);
}

static void test_nbytes(void **state)
{
    uint64_t out = 777;
    assert_int_equal(qs_dtype_nbytes(QS_DT_F32, 0, &out), 0);
    assert_int_equal(out, 0);
    assert_int_equal(qs_dtype_nbytes(QS_DT_F64, 3, &out), 0);
    assert_int_equal(out, 24);
    assert_int_equal(qs_dtype_nbytes(QS_DT_Q4_0, 64, &out), 0);
    assert_int_equal(out, 36);
    assert_int_equal(qs_dtype_nbytes(QS_DT_Q6_K, 512, &out), 0);
    assert_int_equal(out, 420);
    assert_int_equal(qs_dtype_nbytes(QS_DT_GGML_NVFP4, 128, &out), 0);
    assert_int_equal(out, 72);
    assert_int_equal(qs_dtype_nbytes(QS_DT_F4_E2M1, 6, &out), 0);
    assert_int_equal(out, 3);
    /* every type: one block, and any non-multiple fails with *out untouched */
    for (int t = 1; t < QS_DT_COUNT; t++) {
        const qs_dtype_traits *tr = qs_dtype_get((qs_dtype)t);
        assert_int_equal(qs_dtype_nbytes((qs_dtype)t, tr->block_elems, &out), 0);
        assert_int_equal(out, tr->block_bytes);
        for (unsigned k = 1; k < tr->block_elems; k++) {
            out = 777;
            assert_int_equal(qs_dtype_nbytes((qs_dtype)t, 5 * tr->block_elems + k, &out), -1);
            assert_int_equal(out, 777);
        }
    }
    /* overflow: the largest count that fits, and one block more */
    assert_int_equal(qs_dtype_nbytes(QS_DT_F64, UINT64_MAX / 8, &out), 0);
    assert_int_equal(out, UINT64_MAX / 8 * 8);
    out = 777;
    assert_int_equal(qs_dtype_nbytes(QS_DT_F64, UINT64_MAX / 8 + 1, &out), -1);
    assert_int_equal(out, 777);
    assert_int_equal(qs_dtype_nbytes(QS_DT_Q8_0, (UINT64_MAX / 34) * 32, &out), 0);
    assert_int_equal(out, (UINT64_MAX / 34) * 34);
    assert_int_equal(qs_dtype_nbytes(QS_DT_Q8_0, (UINT64_MAX / 34 + 1) * 32, &out), -1);
    assert_int_equal(out, (UINT64_MAX / 34) * 34);
    assert_int_equal(qs_dtype_nbytes(QS_DT_U8, UINT64_MAX, &out), 0);
    assert_int_equal(out, UINT64_MAX);
    /* invalid type */
    out = 777;
    assert_int_equal(qs_dtype_nbytes(QS_DT_INVALID, 4, &out), -1);
    assert_int_equal(qs_dtype_nbytes(QS_DT_COUNT, 4, &out), -1);
    assert_int_equal(out, 777);
}

/* A few scalar values written out, so a regenerated fixture cannot hide a gross change. */
static void test_scalar_spot(void **state)
{
    assert_true(qs_f16_to_f32(0x3c00) == 1.0f);
    assert_true(qs_f16_to_f32(0xc000) == -2.0f);
    assert_true(qs_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(qs_f16_to_f32(0x0001) == 0x1p-24f);
    assert_true(isinf(qs_f16_to_f32(0xfc00)) && qs_f16_to_f32(0xfc00) < 0);
    assert_int_equal(f2u(qs_f16_to_f32(0x8000)), 0x80000000u);
    assert_true(qs_bf16_to_f32(0x3f80) == 1.0f);
    assert_true(qs_e4m3_to_f32(0x7e) == 448.0f);
    assert_true(qs_e4m3_to_f32(0x01) == 0x1p-9f);
    assert_true(isnan(qs_e4m3_to_f32(0x7f)) && isnan(qs_e4m3_to_f32(0xff)));
    assert_true(qs_e5m2_to_f32(0x7b) == 57344.0f);
    assert_true(isinf(qs_e5m2_to_f32(0x7c)) && isnan(qs_e5m2_to_f32(0x7d)));
    assert_true(qs_e8m0_to_f32(127) == 1.0f);
    assert_true(qs_e8m0_to_f32(0) == 0x1p-127f);
    assert_true(isnan(qs_e8m0_to_f32(0xff)));
    assert_true(qs_ue4m3_to_f32(0x7e) == 448.0f);
    assert_true(qs_ue4m3_to_f32(0x7f) == 0.0f);            /* ggml: the NaN code reads as 0 */
    assert_true(qs_ue4m3_to_f32(0xfe) == 448.0f);          /* sign bit ignored */
    assert_true(qs_ue4m3_to_f32(0xff) == 480.0f);          /* ggml: only 0x7F is special */
}

/* ---------------------------------------------------------------- runner */

#define VEC(name, c) {"vector_" name, test_vector, NULL, NULL, (void *)&(c)}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_invariants),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_nbytes),
        cmocka_unit_test(test_scalar_spot),
        cmocka_unit_test(test_f16_all),
        cmocka_unit_test(test_bf16_all),
        cmocka_unit_test(test_e4m3_all),
        cmocka_unit_test(test_e5m2_all),
        cmocka_unit_test(test_e8m0_all),
        cmocka_unit_test(test_f4_all),
        cmocka_unit_test(test_ue4m3_all),
        VEC("f32", kF32), VEC("f64", kF64), VEC("i8", kI8), VEC("u8", kU8), VEC("i16", kI16),
        VEC("u16", kU16), VEC("i32", kI32), VEC("u32", kU32), VEC("i64", kI64), VEC("u64", kU64),
        VEC("bool", kBool), VEC("q8_0", kQ8_0), VEC("q4_0", kQ4_0), VEC("q4_1", kQ4_1),
        VEC("q5_0", kQ5_0), VEC("q5_1", kQ5_1), VEC("q4_k", kQ4_K), VEC("q6_k", kQ6_K),
        VEC("ggml_mxfp4", kMXFP4), VEC("ggml_nvfp4", kNVFP4), VEC("q2_k", kQ2_K), VEC("q3_k", kQ3_K),
        VEC("q5_k", kQ5_K), VEC("q8_k", kQ8_K), VEC("iq4_nl", kIQ4_NL), VEC("iq4_xs", kIQ4_XS),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
