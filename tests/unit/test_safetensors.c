/*
** Unit tests for the safetensors reader (store/parse_safetensors.c).
**
** Good files come with NAME.expected.json written by tests/fixtures/make_st_gguf_fixtures.py: the
** tensors in container order with dtype, shape, byte size and the float32 values the decoder must
** produce (the script computes them independently in numpy), the warning count and the metadata.
** Bad files live in fixtures/bad/bad_st_*; each must fail with a known phrase and "(at byte N)".
** Every parse runs on an exact-size heap copy, so ASan catches any read past the end.
*/
#include "test_container_util.h"

#include <jansson.h>
#include <math.h>

#include "../../store/container.h"

static void check_good(const char *file, const char *expected, qs_container *c, uint8_t **bufp, size_t *lenp)
{
    size_t len;
    uint8_t *buf = slurp(file, &len);
    json_error_t je;
    json_t *x = json_load_file(expected, 0, &je);
    if (!x) fail_msg("%s: %s", expected, je.text);
    qs_err e = {{0}};
    if (qs_parse_safetensors(buf, len, NULL, c, &e)) fail_msg("%s: %s", file, e.msg);
    assert_string_equal(c->kind, "safetensors");
    check_container(c, buf, len, x);
    json_decref(x);
    if (bufp) { *bufp = buf; *lenp = len; }
    else free(buf);
}

static void test_all_dtypes(void **state)
{
    (void)state;
    qs_container c;
    uint8_t *buf;
    size_t len;
    check_good("fixtures/st/all_dtypes.safetensors", "fixtures/st/all_dtypes.expected.json", &c, &buf, &len);
    /* Offsets are absolute: the first tensor in buffer order starts right after the header. */
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | buf[i];
    assert_int_equal(c.t[0].offset, 8 + n);
    assert_int_equal(n % 8, 0);   /* the writer padded with spaces, which the parser accepts */
    /* scalar and empty shapes */
    int seen = 0;
    for (size_t i = 0; i < c.n; i++) {
        if (strcmp(c.t[i].name, "scalar") == 0) { assert_int_equal(c.t[i].ndim, 0); assert_int_equal(c.t[i].numel, 1); seen++; }
        if (strcmp(c.t[i].name, "empty") == 0) { assert_int_equal(c.t[i].numel, 0); assert_int_equal(c.t[i].nbytes, 0); seen++; }
        if (strcmp(c.t[i].name, "f4") == 0) { assert_int_equal(c.t[i].numel, 32); assert_int_equal(c.t[i].nbytes, 16); seen++; }
    }
    assert_int_equal(seen, 3);
    qs_container_free(&c);
    free(buf);
}

static void test_unsupported_skipped(void **state)
{
    (void)state;
    qs_container c;
    check_good("fixtures/st/unsupported.safetensors", "fixtures/st/unsupported.expected.json", &c, NULL, NULL);
    const char *want[] = {"F8_E4M3FNUZ", "F8_E5M2FNUZ", "F6_E2M3", "F6_E3M2", "C64"};
    for (size_t i = 0; i < 5; i++) {
        int found = 0;
        for (size_t j = 0; j < c.nwarn; j++)
            found |= strstr(c.warnings[j], want[i]) != NULL && strstr(c.warnings[j], "skipped") != NULL;
        if (!found) fail_msg("no warning for %s", want[i]);
    }
    qs_container_free(&c);
}

static void test_minimal_and_empty(void **state)
{
    (void)state;
    qs_container c;
    check_good("fixtures/st/minimal.safetensors", "fixtures/st/minimal.expected.json", &c, NULL, NULL);
    qs_container_free(&c);
    check_good("fixtures/st/no_tensors.safetensors", "fixtures/st/no_tensors.expected.json", &c, NULL, NULL);
    assert_int_equal(c.n, 0);
    qs_container_free(&c);
}

static const struct { const char *file, *phrase; } kBad[] = {
    {"truncated_header", "file too short"},
    {"header_len_huge", "header length 1099511627776 is absurd"},
    {"header_past_end", "header length 500 runs past the end of the file"},
    {"not_object", "does not start with '{'"},
    {"empty_header", "does not start with '{'"},
    {"invalid_json", "invalid JSON/UTF-8 in header"},
    {"invalid_utf8", "invalid JSON/UTF-8 in header"},
    {"nul_padding", "invalid JSON/UTF-8 in header: NUL byte"},
    {"trailing_garbage", "invalid JSON/UTF-8 in header"},
    {"duplicate_name", "duplicate key in header: duplicate object key near '\"a\"'"},
    {"hole", "tensor 'b': hole in the byte buffer"},
    {"hole_at_start", "tensor 'a': hole in the byte buffer"},
    {"overlap", "tensor 'b': data_offsets [4, 12] overlap tensor 'a'"},
    {"offset_beyond_file", "beyond the end of the file"},
    {"trailing_bytes", "4 trailing bytes after the last tensor"},
    {"size_mismatch", "size mismatch: data_offsets span 20 bytes but F32 with 6 elements needs 24"},
    {"unknown_dtype", "unknown dtype \"F7\""},
    {"shape_overflow", "shape overflows"},
    {"negative_dim", "shape must be a list of non-negative integers"},
    {"float_dim", "shape must be a list of non-negative integers"},
    {"too_many_dims", "more than 8"},   /* legal safetensors, beyond QS_MAX_DIMS */
    {"odd_f4", "not a whole number of bytes"},
    {"metadata_not_string", "__metadata__ value for 'a' is not a string"},
    {"metadata_not_object", "__metadata__ must be an object of string to string"},
    {"begin_after_end", "begin 4 is after end 0"},
    {"missing_offsets", "\"data_offsets\" must be [begin, end]"},
    {"entry_not_object", "entry is not a JSON object"},
};

static void test_bad_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "fixtures/bad/bad_st_%s.safetensors", kBad[i].file);
        check_refused(qs_parse_safetensors, path, kBad[i].phrase);
    }
}

/* Exact positions for a few messages: the key of the offending entry, or the JSON error. */
static void test_error_positions(void **state)
{
    (void)state;
    static const struct { const char *file; const char *at; } kPos[] = {
        {"hole", "(at byte 70)"},            /* 8 + offset of "b" in the header */
        {"invalid_utf8", "(at byte 11)"},    /* the first invalid byte */
        {"truncated_header", "(at byte 0)"},
        {"not_object", "(at byte 8)"},
        {"nul_padding", "(at byte 10)"},     /* first NUL after "{}" */
    };
    for (size_t i = 0; i < sizeof kPos / sizeof kPos[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "fixtures/bad/bad_st_%s.safetensors", kPos[i].file);
        check_refused(qs_parse_safetensors, path, kPos[i].at);
    }
}

/* Header-length limits, built in memory. */
static void test_header_length_limits(void **state)
{
    (void)state;
    uint8_t b[64];
    memset(b, ' ', sizeof b);
    qs_container c;
    qs_err e = {{0}};
    uint64_t n = 100000001;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(n >> (8 * i));
    b[8] = '{';
    assert_int_equal(qs_parse_safetensors(b, sizeof b, NULL, &c, &e), -1);
    assert_non_null(strstr(e.msg, "is absurd"));
    n = 100000000;   /* at the limit: allowed, but larger than this file */
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(n >> (8 * i));
    assert_int_equal(qs_parse_safetensors(b, sizeof b, NULL, &c, &e), -1);
    assert_non_null(strstr(e.msg, "runs past the end"));
    n = sizeof b - 8;   /* "{}" + spaces filling the whole file, no data: valid and empty */
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(n >> (8 * i));
    b[9] = '}';
    assert_int_equal(qs_parse_safetensors(b, sizeof b, NULL, &c, &e), 0);
    assert_int_equal(c.n, 0);
    assert_null(c.meta_json);
    qs_container_free(&c);
    assert_int_equal(qs_parse_safetensors(b, 7, NULL, &c, &e), -1);
    assert_int_equal(qs_parse_safetensors(NULL, 0, NULL, &c, &e), -1);
}

/* Every strict prefix of a good file is rejected (the last tensor must end at the file end). */
static void test_truncations(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = slurp("fixtures/st/all_dtypes.safetensors", &len);
    for (size_t k = 0; k < len; k++) {
        uint8_t *p = malloc(k ? k : 1);
        memcpy(p, buf, k);
        qs_container c;
        qs_err e = {{0}};
        if (qs_parse_safetensors(p, k, NULL, &c, &e) != -1) fail_msg("prefix of %zu bytes parsed", k);
        if (!strstr(e.msg, "(at byte ")) fail_msg("prefix %zu: \"%s\"", k, e.msg);
        free(p);
    }
    free(buf);
}

/* Every byte overwritten with a few values: ranges inside the file, or a positioned message. */
static void test_mutations(void **state)
{
    (void)state;
    static const char *const files[] = {"fixtures/st/all_dtypes.safetensors", "fixtures/st/unsupported.safetensors"};
    static const uint8_t vals[] = {0x00, 0xff, '"', '{', '9', 0x80};
    check_mutations(qs_parse_safetensors, files, 2, vals, sizeof vals);
}

/* Past 16 skipped tensors the warnings collapse into one summary. */
static void test_many_skipped(void **state)
{
    (void)state;
    char h[2048] = "{";
    for (int i = 0; i < 20; i++)
        snprintf(h + strlen(h), sizeof h - strlen(h), "%s\"t%02d\":{\"dtype\":\"C64\",\"shape\":[0],\"data_offsets\":[0,0]}",
                 i ? "," : "", i);
    strcat(h, "}");
    size_t n = strlen(h);
    uint8_t *b = malloc(8 + n);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(b + 8, h, n);
    qs_container c;
    qs_err e = {{0}};
    if (qs_parse_safetensors(b, 8 + n, NULL, &c, &e)) fail_msg("%s", e.msg);
    assert_int_equal(c.n, 0);
    assert_int_equal(c.nwarn, 17);
    assert_non_null(strstr(c.warnings[15], "'t15'"));
    assert_non_null(strstr(c.warnings[16], "4 more tensors"));
    qs_container_free(&c);
    free(b);
}

/* qs_parse_any finds safetensors by file name or by the '{' at byte 8. */
static void test_parse_any(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = slurp("fixtures/st/minimal.safetensors", &len);
    qs_container c;
    qs_err e = {{0}};
    assert_int_equal(qs_parse_any(buf, len, "w.safetensors", NULL, &c, &e), 0);
    assert_string_equal(c.kind, "safetensors");
    qs_container_free(&c);
    assert_int_equal(qs_parse_any(buf, len, NULL, NULL, &c, &e), 0);
    assert_int_equal(c.n, 1);
    qs_container_free(&c);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_dtypes),
        cmocka_unit_test(test_unsupported_skipped),
        cmocka_unit_test(test_minimal_and_empty),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_error_positions),
        cmocka_unit_test(test_header_length_limits),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_many_skipped),
        cmocka_unit_test(test_parse_any),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
