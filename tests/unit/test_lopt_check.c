/*
** Unit tests for what `bench tokenize` and the LoPT claims share (analysis/lopt_check.h): the ids hash
** equals tests/bench/tokenizers_peer.py's (the peer comparison relies on it), the first difference of
** two id sequences, the adversarial texts (sizes, the kinds they promise, the same bytes every time),
** the built-in tokenizer (byte symbols, merges, the added token) and LoPT on it against the sequential
** tokenizer, and a missing text named in the error.
*/
#include "test_util.h"

#include "../../analysis/lopt_check.h"
#include "../../store/llm_lopt.h"

static void test_hash_matches_peer(void **state)
{
    (void)state;
    const int32_t ids[] = {1, 2, 300, -1, 49151};
    char h[32];
    snprintf(h, sizeof h, "%016llx", (unsigned long long)qs_lopt_ids_hash(ids, 5));
    /* python3 -c "import tokenizers_peer as t; print(t.fnv([1, 2, 300, -1, 49151]))" (tests/bench) */
    assert_string_equal(h, "aff8ca6587be8f97");
    assert_true(qs_lopt_ids_hash(ids, 4) != qs_lopt_ids_hash(ids, 5));
}

static void test_first_diff(void **state)
{
    (void)state;
    const int32_t a[] = {5, 6, 7}, b[] = {5, 6, 8}, c[] = {5, 6};
    assert_int_equal(qs_lopt_first_diff(a, 3, a, 3), -1);
    assert_int_equal(qs_lopt_first_diff(a, 3, b, 3), 2);
    assert_int_equal(qs_lopt_first_diff(a, 3, c, 2), 2);   /* a missing tail is a difference */
    assert_int_equal(qs_lopt_first_diff(c, 2, a, 3), 2);
    assert_int_equal(qs_lopt_first_diff(a, 0, b, 0), -1);
}

static int has(const qs_lopt_text *t, const char *needle, size_t n)
{
    return memmem(t->text, t->len, needle, n) != NULL;
}

static void test_adversarial(void **state)
{
    (void)state;
    qs_lopt_text a[QS_LOPT_NADV], b[QS_LOPT_NADV];
    qs_err e = {{0}};
    assert_int_equal(qs_lopt_adversarial(4096, a, &e), 0);
    assert_int_equal(qs_lopt_adversarial(4096, b, &e), 0);
    for (int i = 0; i < QS_LOPT_NADV; i++) {
        assert_true(a[i].len >= 4096 && a[i].len < 4096 + 8192);
        assert_int_equal(a[i].text[a[i].len], 0);
        assert_true(a[i].len == b[i].len && !memcmp(a[i].text, b[i].text, a[i].len));   /* fixed seeds */
        for (int j = 0; j < i; j++) assert_string_not_equal(a[i].name, a[j].name);
    }
    assert_null(memchr(a[0].text, ' ', a[0].len));                                 /* no spaces */
    for (size_t i = 0; i < a[1].len; i++) assert_int_equal(a[1].text[i], 'a');     /* one character */
    assert_true(has(&a[3], "\xE4", 1) || has(&a[3], "\xE5", 1));                   /* CJK lead bytes */
    assert_true(has(&a[4], "\xE2\x80\x8D", 3));                                    /* ZWJ */
    assert_true(has(&a[5], "\r\n", 2) && has(&a[5], "<|endoftext|>", 13));         /* CRLF, added token */
    for (size_t i = 0, run = 0; i < a[6].len; i++) {                               /* a digit run > 1000 */
        run = a[6].text[i] >= '0' && a[6].text[i] <= '9' ? run + 1 : 0;
        if (run > 1000) break;
        assert_true(i + 1 < a[6].len);
    }
    assert_true(has(&a[7], "\xC0\xAF", 2) && has(&a[7], "\xED\xA0\x80", 3));       /* overlong, surrogate */
    assert_true(has(&a[9], " ", 1) && (has(&a[9], "\xE2\x80\x8D", 3) || has(&a[9], "\r\n", 2)));   /* mixed */
    qs_lopt_texts_free(a, QS_LOPT_NADV);
    qs_lopt_texts_free(b, QS_LOPT_NADV);
}

static void test_builtin_vocab(void **state)
{
    (void)state;
    qs_llm_vocab v;
    qs_err e = {{0}};
    assert_int_equal(qs_lopt_builtin_vocab(&v, &e), 0);
    int32_t ids[16];
    int the = qs_llm_vocab_find(&v, "\xC4\xA0the"), eot = qs_llm_vocab_find(&v, "<|endoftext|>");
    assert_true(the >= 256 && eot > the);
    assert_int_equal(qs_llm_tokenize(&v, " the", 4, ids, 16, &e), 1);   /* Ġ t, h e, Ġt he */
    assert_int_equal(ids[0], the);
    assert_int_equal(qs_llm_tokenize(&v, "a<|endoftext|>", 14, ids, 16, &e), 2);
    assert_int_equal(ids[1], eot);
    assert_int_equal(qs_llm_tokenize(&v, "\xFF", 1, ids, 16, &e), 1);   /* every byte has a symbol */
    qs_llm_vocab_free(&v);
}

/* LoPT cuts the generated prose and merges it to the sequential ids with the built-in tokenizer. */
static void test_builtin_lopt(void **state)
{
    (void)state;
    qs_llm_vocab v;
    qs_lopt_text p;
    qs_err e = {{0}};
    assert_int_equal(qs_lopt_builtin_vocab(&v, &e), 0);
    assert_int_equal(qs_lopt_prose(65536, &p, &e), 0);
    int32_t *ref, *ids;
    size_t nref, n;
    assert_int_equal(qs_lopt_sequential(&v, "prose", p.text, p.len, &ref, &nref, &e), 0);
    qs_lopt_opts o = {2, 1000, 0};
    qs_lopt_stats st;
    assert_int_equal(qs_lopt_tokenize(&v, "prose", p.text, p.len, &o, &ids, NULL, &n, &st, &e), 0);
    assert_true(st.chunks > 10 && !st.fallback);
    assert_int_equal(qs_lopt_first_diff(ref, nref, ids, n), -1);
    free(ref); free(ids); free(p.text);
    qs_llm_vocab_free(&v);
}

static void test_read_missing(void **state)
{
    (void)state;
    const char *paths[] = {"fixtures/llm/tok_cases.txt", "fixtures/llm/no-such.txt"};
    char *buf;
    size_t len;
    qs_err e = {{0}};
    assert_int_equal(qs_lopt_read_texts(paths, 2, &buf, &len, &e), -1);
    assert_non_null(strstr(e.msg, "fixtures/llm/no-such.txt: cannot read"));
    assert_null(buf);
    assert_int_equal(qs_lopt_read_texts(paths, 1, &buf, &len, &e), 0);
    assert_true(len > 100 && buf[len] == 0);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_matches_peer), cmocka_unit_test(test_first_diff),
        cmocka_unit_test(test_adversarial),       cmocka_unit_test(test_builtin_vocab),
        cmocka_unit_test(test_builtin_lopt),      cmocka_unit_test(test_read_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
