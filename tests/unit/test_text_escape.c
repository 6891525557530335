/*
** Visible escapes for control characters and invalid UTF-8 (store/text_escape.h) and the JSON
** writers for outside text and non-finite numbers (store/json_out.h).
*/
#include "test_util.h"

#include <math.h>

#include "../../store/json_out.h"
#include "../../store/text_escape.h"

static void check(const char *in, int flags, const char *want)
{
    char *got = qs_escape_dup(in, flags);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void test_plain_text_unchanged(void **st)
{
    (void)st;
    check("model:layers.0.attn_q", 0, "model:layers.0.attn_q");
    check("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 0, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    check("a\\b", 0, "a\\b");
    assert_true(qs_text_plain("plain name", 0));
    assert_false(qs_text_plain("a|b", QS_ESC_PIPE));
}

static void test_controls_escaped(void **st)
{
    (void)st;
    check("x\x1b[2Jy", 0, "x\\x1b[2Jy");
    check("\x1b]0;pwned\x07", 0, "\\x1b]0;pwned\\x07");
    check("row\nforged\r\tz", 0, "row\\nforged\\r\\tz");
    check("del\x7f", 0, "del\\x7f");
    check("c1 \xc2\x9b" "2J", 0, "c1 \\u009b2J");          /* CSI as UTF-8 */
    check("a|b", 0, "a|b");
    check("a|b", QS_ESC_PIPE, "a\\|b");
}

/* Running text (a model's generated output): lines and tabs stay, everything else as for names. */
static void test_running_text(void **st)
{
    (void)st;
    check("one\ntwo\tthree", QS_ESC_TEXT, "one\ntwo\tthree");
    check("a\r\x1b[2J\x1b]0;t\x07\xc2\x9b" "b\xff", QS_ESC_TEXT, "a\\r\\x1b[2J\\x1b]0;t\\x07\\u009bb\\xff");
    assert_true(qs_text_plain("line\nline\t", QS_ESC_TEXT));
    assert_false(qs_text_plain("line\nline", 0));
    size_t n = qs_escape_buf("x\0\x7f\n", 4, QS_ESC_TEXT, NULL, 0);   /* NUL and DEL inside the bytes */
    assert_int_equal(n, 10);
}

/* Cuts for titles: never inside a character. */
static void test_utf8_prefix(void **st)
{
    (void)st;
    const char *cjk = "\xe9\x87\x8f\xe9\x87\x8f";   /* two 3-byte characters */
    assert_int_equal(qs_utf8_prefix(cjk, 6), 6);
    assert_int_equal(qs_utf8_prefix(cjk, 100), 6);
    assert_int_equal(qs_utf8_prefix(cjk, 5), 3);
    assert_int_equal(qs_utf8_prefix(cjk, 4), 3);
    assert_int_equal(qs_utf8_prefix(cjk, 3), 3);
    assert_int_equal(qs_utf8_prefix(cjk, 2), 0);
    assert_int_equal(qs_utf8_prefix("ab\xc3\xa9", 3), 2);
    assert_int_equal(qs_utf8_prefix("abc", 2), 2);
    assert_int_equal(qs_utf8_prefix("a\x80\x80\x80\x80\x80", 4), 4);   /* stray continuation bytes: a plain cut */
    assert_int_equal(qs_utf8_prefix("", 0), 0);
}

static void test_invalid_utf8_bytes(void **st)
{
    (void)st;
    check("raw\x9b" "c1", 0, "raw\\x9bc1");                 /* a lone C1 byte */
    check("bad\xff", 0, "bad\\xff");
    check("\xc0\xaf", 0, "\\xc0\\xaf");                      /* overlong '/' */
    check("\xed\xa0\x80", 0, "\\xed\\xa0\\x80");             /* surrogate */
    check("\xe2\x82", 0, "\\xe2\\x82");                      /* truncated */
    check("\xf4\x90\x80\x80", 0, "\\xf4\\x90\\x80\\x80");    /* above U+10FFFF */
    assert_false(qs_utf8_valid("\xe2\x82", 2));
    assert_true(qs_utf8_valid("\xe2\x82\xac", 3));
}

static void test_truncation(void **st)
{
    (void)st;
    char buf[6];
    size_t need = qs_escape_buf("ab\x1b" "cd", 5, 0, buf, sizeof buf);
    assert_int_equal(need, 8);
    assert_string_equal(buf, "ab");  /* never half an escape */
}

static void test_json_text(void **st)
{
    (void)st;
    json_t *o = json_object();
    qs_json_set_text(o, "name", "t\xff\x1b");
    qs_json_set_text(o, "ok", "t\x1b");
    assert_string_equal(json_string_value(json_object_get(o, "name")), "t\\xff\\x1b");
    assert_string_equal(json_string_value(json_object_get(o, "name_bytes_hex")), "74ff1b");
    assert_string_equal(json_string_value(json_object_get(o, "ok")), "t\x1b");
    assert_null(json_object_get(o, "ok_bytes_hex"));
    json_decref(o);
}

static void test_json_nonfinite(void **st)
{
    (void)st;
    json_t *o = json_object();
    qs_json_set_num(o, "a", 1.5);
    qs_json_set_num(o, "b", -INFINITY);
    qs_json_set_num(o, "c", NAN);
    assert_true(json_is_real(json_object_get(o, "a")));
    assert_true(json_is_null(json_object_get(o, "b")));
    assert_true(json_is_null(json_object_get(o, "c")));
    json_t *nf = json_object_get(o, "nonfinite_values");
    assert_string_equal(json_string_value(json_object_get(nf, "b")), "-inf");
    assert_string_equal(json_string_value(json_object_get(nf, "c")), "nan");
    assert_null(json_object_get(nf, "a"));
    assert_true(qs_json_get_num(o, "a") == 1.5);
    assert_true(isinf(qs_json_get_num(o, "b")) && qs_json_get_num(o, "b") < 0);
    assert_true(isnan(qs_json_get_num(o, "c")));
    json_object_set_new(o, "old", json_string("inf"));   /* results stored by earlier versions */
    assert_true(isinf(qs_json_get_num(o, "old")) && qs_json_get_num(o, "old") > 0);
    qs_json_fix_legacy_nums(o);
    assert_true(json_is_null(json_object_get(o, "old")));
    assert_string_equal(json_string_value(json_object_get(nf, "old")), "inf");
    qs_json_set_num(o, "b", 2.0);
    assert_null(json_object_get(nf, "b"));
    assert_ptr_equal(qs_json_add_nums(o, "d", 3.0, "e", -INFINITY, (char *)NULL), o);
    assert_true(json_real_value(json_object_get(o, "d")) == 3.0);
    assert_string_equal(json_string_value(json_object_get(nf, "e")), "-inf");
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_text_unchanged), cmocka_unit_test(test_controls_escaped),
        cmocka_unit_test(test_invalid_utf8_bytes),   cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_running_text),         cmocka_unit_test(test_utf8_prefix),
        cmocka_unit_test(test_json_text),            cmocka_unit_test(test_json_nonfinite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
