/*
** Unit tests for the GGUF reader (store/parse_gguf.c).
**
** Good files come with NAME.expected.json written by tests/fixtures/make_st_gguf_fixtures.py: the
** tensors in file order with qscope dtype, logical shape (ne reversed), byte size and the float32
** values the decoder must produce.  For Q8_0/Q4_0/Q4_1/Q5_x/MXFP4 the script quantized known data
** with numpy ports of ggml's *_ref quantizers and dequantized it with ports of dequantize_row_*
** (checked once against the gguf PyPI package); NVFP4/Q4_K/Q6_K blocks are random bytes with the
** numpy dequantization as reference.  Bad files live in fixtures/bad/bad_gguf_*; each must fail with
** a known phrase and "(at byte N)".  Every parse runs on an exact-size heap copy (ASan-visible).
*/
#include "test_container_util.h"

#include <jansson.h>
#include <math.h>

#include "../../store/container.h"

static void check_good(const char *file, const char *expected, qs_container *c)
{
    size_t len;
    uint8_t *buf = slurp(file, &len);
    json_error_t je;
    json_t *x = json_load_file(expected, 0, &je);
    if (!x) fail_msg("%s: %s", expected, je.text);
    qs_err e = {{0}};
    if (qs_parse_gguf(buf, len, NULL, c, &e)) fail_msg("%s: %s", file, e.msg);
    assert_string_equal(c->kind, "gguf");
    check_container(c, buf, len, x);
    json_decref(x);
    free(buf);
}

static const qs_tdesc *find(const qs_container *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->t[i].name, name) == 0) return &c->t[i];
    fail_msg("no tensor %s", name);
    return NULL;
}

static void test_basic(void **state)
{
    (void)state;
    qs_container c;
    check_good("fixtures/gguf/basic.gguf", "fixtures/gguf/basic.expected.json", &c);
    /* ne = [64, 4] is the logical shape [4, 64]: ne[0] innermost */
    const qs_tdesc *t = find(&c, "token_embd.weight");
    assert_int_equal(t->dtype, QS_DT_Q8_0);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 4);
    assert_int_equal(t->shape[1], 64);
    assert_int_equal(t->nbytes, 4 * 2 * 34);
    assert_int_equal(find(&c, "scalar")->ndim, 0);        /* n_dims 0: one element */
    assert_int_equal(find(&c, "scalar")->numel, 1);
    assert_int_equal(find(&c, "empty")->nbytes, 0);
    for (size_t i = 0; i < c.n; i++) assert_int_equal(c.t[i].offset % 32, 0);   /* default alignment */
    /* Q2_K is decoded (through the registry's codec); the IQ2_XXS and type-99 tensors are skipped
    ** with warnings naming tensor and type */
    assert_int_equal(find(&c, "blk.0.q2k.weight")->dtype, QS_DT_Q2_K);
    assert_int_equal(c.nwarn, 2);
    assert_non_null(strstr(c.warnings[0], "blk.0.iq2xxs.weight"));
    assert_non_null(strstr(c.warnings[0], "IQ2_XXS"));
    assert_non_null(strstr(c.warnings[1], "'mystery'"));
    assert_non_null(strstr(c.warnings[1], "type 99"));
    /* long arrays are summarised, short ones inlined */
    json_t *m = json_loads(c.meta_json, 0, NULL);
    assert_non_null(m);
    json_t *tok = json_object_get(m, "tokenizer.ggml.tokens");
    assert_string_equal(json_string_value(json_object_get(tok, "array")), "string");
    assert_int_equal(json_integer_value(json_object_get(tok, "count")), 100);
    assert_int_equal(json_array_size(json_object_get(tok, "head")), 8);
    assert_string_equal(json_string_value(json_array_get(json_object_get(tok, "head"), 1)), "<s>");
    assert_int_equal(json_array_size(json_object_get(m, "tokenizer.ggml.token_type")), 5);
    assert_string_equal(json_string_value(json_object_get(m, "test.bad_utf8")), "ab\xEF\xBF\xBD" "cd\xEF\xBF\xBD" "e\xEF\xBF\xBD");
    json_decref(m);
    qs_container_free(&c);
}

static void test_align64_v2(void **state)
{
    (void)state;
    qs_container c;
    check_good("fixtures/gguf/align64_v2.gguf", "fixtures/gguf/align64_v2.expected.json", &c);
    for (size_t i = 0; i < c.n; i++) assert_int_equal(c.t[i].offset % 64, 0);
    assert_int_equal(c.t[1].offset - c.t[0].offset, 64);   /* 20 bytes of "a", padded to 64 */
    qs_container_free(&c);
}

static void test_vocab_only(void **state)
{
    (void)state;
    qs_container c;
    check_good("fixtures/gguf/vocab_only.gguf", "fixtures/gguf/vocab_only.expected.json", &c);
    assert_int_equal(c.n, 0);
    assert_true(strlen(c.meta_json) < 600);   /* 500 strings summarised, not copied */
    qs_container_free(&c);
}

static const struct { const char *file, *phrase; } kBad[] = {
    {"magic", "bad magic"},
    {"empty", "bad magic"},
    {"version1", "GGUF version 1"},
    {"bigendian", "big-endian GGUF file"},
    {"version4", "unsupported GGUF version 4"},
    {"truncated_header", "truncated file"},
    {"truncated_kv", "truncated file: metadata 'general.name' needs 4 bytes but only 2 remain"},
    {"counts_together", "tensor_count 3 and metadata_kv_count 3 are impossible together"},
    {"truncated_tinfo", "truncated file: tensor 'w' needs 8 bytes"},
    {"key_len_beyond_file", "string length 1099511627776 runs past the end of the file"},
    {"value_len_beyond_file", "metadata 'k': string length 1000 runs past the end of the file"},
    {"huge_tensor_count", "tensor_count 9223372036854775808 is impossible"},
    {"huge_kv_count", "metadata_kv_count 1152921504606846976 is impossible"},
    {"huge_array_count", "array count 4611686018427387904 is impossible"},
    {"ndims5", "n_dims 5 exceeds 4"},
    {"misaligned_offset", "offset 16 is not a multiple of the alignment 32"},
    {"data_past_end", "tensor 'b': data"},
    {"data_past_end", "runs past the end of the file"},
    {"offset_past_end", "runs past the end of the file"},
    {"bad_alignment", "general.alignment 12 is not a nonzero multiple of 8"},
    {"alignment_zero", "general.alignment 0 is not a nonzero multiple of 8"},
    {"alignment_type", "general.alignment must be a uint32, not uint64"},
    {"duplicate_tensor", "duplicate tensor name 'w'"},
    {"duplicate_key", "duplicate metadata key 'a'"},
    {"value_type", "invalid value type 13"},
    {"array_elem_type", "invalid array element type 20"},
    {"deep_nesting", "nested more than 8 deep"},
    {"key_utf8", "metadata key is not valid UTF-8"},
    {"name_nul", "tensor name is not valid UTF-8 or contains NUL"},
    {"block_multiple", "ne[0] = 48 is not a multiple of the Q8_0 block size 32"},
    {"negative_dim", "ne[0] is negative"},
    {"shape_overflow", "shape overflows"},
};

static void test_bad_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "fixtures/bad/bad_gguf_%s.gguf", kBad[i].file);
        check_refused(qs_parse_gguf, path, kBad[i].phrase);
    }
}

/* Exact positions: the field that is wrong. */
static void test_error_positions(void **state)
{
    (void)state;
    static const struct { const char *file, *at; } kPos[] = {
        {"bigendian", "(at byte 4)"},
        {"huge_kv_count", "(at byte 16)"},
        {"value_type", "(at byte 33)"},          /* 24 + key (8 + 1) */
        {"key_len_beyond_file", "(at byte 24)"},
        {"ndims5", "(at byte 33)"},              /* 24 + name (8 + 1) */
    };
    for (size_t i = 0; i < sizeof kPos / sizeof kPos[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "fixtures/bad/bad_gguf_%s.gguf", kPos[i].file);
        check_refused(qs_parse_gguf, path, kPos[i].at);
    }
}

/* Header counts at the edge of what the bytes allow, built in memory. */
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }

static void test_count_bounds(void **state)
{
    (void)state;
    uint8_t b[24 + 3 * 13];   /* three KVs: key "k0".."k2" (8+2) + type u8 (4) + value (1) = 15 > 13: fits two+ */
    memset(b, 0, sizeof b);
    memcpy(b, "GGUF\x03\x00\x00\x00", 8);
    qs_container c;
    qs_err e = {{0}};
    put64(b + 8, 0);
    put64(b + 16, (sizeof b - 24) / 12 + 1);   /* one more KV than 12-byte minimum allows */
    assert_int_equal(qs_parse_gguf(b, sizeof b, NULL, &c, &e), -1);
    assert_non_null(strstr(e.msg, "metadata_kv_count"));
    put64(b + 16, 0);
    put64(b + 8, (sizeof b - 24) / 24 + 1);
    assert_int_equal(qs_parse_gguf(b, sizeof b, NULL, &c, &e), -1);
    assert_non_null(strstr(e.msg, "tensor_count"));
    put64(b + 8, 0);   /* no tensors, no KVs: valid, trailing bytes ignored */
    assert_int_equal(qs_parse_gguf(b, sizeof b, NULL, &c, &e), 0);
    assert_int_equal(c.n, 0);
    assert_null(c.meta_json);
    qs_container_free(&c);
    assert_int_equal(qs_parse_gguf(b, 23, NULL, &c, &e), -1);
    assert_non_null(strstr(e.msg, "truncated file"));
}

/* Every strict prefix of a good file is rejected. */
static void test_truncations(void **state)
{
    (void)state;
    static const char *files[] = {"fixtures/gguf/basic.gguf", "fixtures/gguf/vocab_only.gguf"};
    for (size_t f = 0; f < 2; f++) {
        size_t len;
        uint8_t *buf = slurp(files[f], &len);
        for (size_t k = 0; k < len; k++) {
            uint8_t *p = malloc(k ? k : 1);
            memcpy(p, buf, k);
            qs_container c;
            qs_err e = {{0}};
            if (qs_parse_gguf(p, k, NULL, &c, &e) != -1) fail_msg("%s: prefix of %zu bytes parsed", files[f], k);
            if (!strstr(e.msg, "(at byte ")) fail_msg("%s: prefix %zu: \"%s\"", files[f], k, e.msg);
            free(p);
        }
        free(buf);
    }
}

/* Every byte overwritten with a few values: ranges inside the file, or a positioned message. */
static void test_mutations(void **state)
{
    (void)state;
    static const char *const files[] = {"fixtures/gguf/basic.gguf", "fixtures/gguf/align64_v2.gguf"};
    static const uint8_t vals[] = {0x00, 0xff, 0x01, 0x09, 0x80, 0x40};
    check_mutations(qs_parse_gguf, files, 2, vals, sizeof vals);
}

/* Past 16 skipped tensors the warnings collapse into one summary. */
static void test_many_skipped(void **state)
{
    (void)state;
    uint8_t b[24 + 20 * 35];
    uint8_t *p = b;
    memcpy(p, "GGUF\x03\x00\x00\x00", 8);
    put64(p + 8, 20);
    put64(p + 16, 0);
    p += 24;
    for (int i = 0; i < 20; i++, p += 35) {   /* "tNN", n_dims 1, ne 256, IQ2_XXS, offset 0 */
        put64(p, 3);
        p[8] = 't', p[9] = (uint8_t)('0' + i / 10), p[10] = (uint8_t)('0' + i % 10);
        memcpy(p + 11, "\x01\x00\x00\x00", 4);
        put64(p + 15, 256);
        memcpy(p + 23, "\x10\x00\x00\x00", 4);
        put64(p + 27, 0);
    }
    qs_container c;
    qs_err e = {{0}};
    if (qs_parse_gguf(b, sizeof b, NULL, &c, &e)) fail_msg("%s", e.msg);
    assert_int_equal(c.n, 0);
    assert_int_equal(c.nwarn, 17);
    assert_non_null(strstr(c.warnings[15], "'t15'"));
    assert_non_null(strstr(c.warnings[16], "4 more tensors"));
    qs_container_free(&c);
}

static void test_parse_any(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = slurp("fixtures/gguf/align64_v2.gguf", &len);
    qs_container c;
    qs_err e = {{0}};
    assert_int_equal(qs_parse_any(buf, len, "model.bin", NULL, &c, &e), 0);
    assert_string_equal(c.kind, "gguf");
    assert_int_equal(c.n, 3);
    qs_container_free(&c);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_align64_v2),
        cmocka_unit_test(test_vocab_only),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_error_positions),
        cmocka_unit_test(test_count_bounds),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_many_skipped),
        cmocka_unit_test(test_parse_any),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
