/*
** Normalizers (store/llm_tok_norm*.c) and added-token flags (store/llm_tok.c) against Hugging Face
** `tokenizers`: fixtures/llm/norm_expected.json gives, for every normalizer type, BertNormalizer
** variants, chains and a SentencePiece precompiled charsmap, the normalized text and the source span
** of each normalized character; fixtures/llm/norm_tok_expected.json the ids and byte offsets of
** tok_bpe.json with a normalizer (Qwen2's NFC among them) and added tokens with lstrip, rstrip,
** single_word and normalized (tests/llm/make_norm_vectors.py writes both).  Invalid UTF-8, which a
** Python string cannot hold, is qscope's own rule: each invalid byte passes through unchanged.
*/
#include "test_util.h"

#include <jansson.h>

#include "../../store/llm_tok.h"
#include "../../store/llm_tok_norm.h"

static int32_t ids[4096];
static uint32_t offs[8192];

static json_t *load(const char *path)
{
    json_error_t je;
    json_t *j = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!j) print_message("# %s: %s\n", path, je.text);
    assert_non_null(j);
    return j;
}

static qs_tok_norm *compile(json_t *nj)
{
    char *s = json_dumps(nj, JSON_COMPACT | JSON_ENCODE_ANY);
    qs_err e = {{0}};
    qs_tok_norm *nm = qs_tok_norm_from_json(s, &e);
    if (!nm) print_message("# %s: %s\n", s, e.msg);
    free(s);
    return nm;
}

static size_t clen(const char *s, size_t n, size_t i)
{
    size_t k = 1;
    while (i + k < n && ((unsigned char)s[i + k] & 0xC0) == 0x80) k++;
    return k;
}

/* b holds want, and each of its characters spans what spans[] says; 1 when so. */
static int same_norm(const qs_tok_norm_buf *b, json_t *jw, json_t *spans, const char *name, size_t ci)
{
    const char *want = json_string_value(jw);
    size_t wn = json_string_length(jw);
    if (b->n != wn || memcmp(b->s, want, wn)) {
        print_message("# %s: case %zu: '%.*s', want '%s'\n", name, ci, (int)b->n, b->s, want);
        return 0;
    }
    size_t k = 0;
    for (size_t i = 0; i < b->n; k++) {
        size_t len = clen(b->s, b->n, i);
        json_t *sp = json_array_get(spans, k);
        uint32_t a = b->map[2 * i], z = b->map[2 * (i + len - 1) + 1];
        if (a != json_integer_value(json_array_get(sp, 0)) || z != json_integer_value(json_array_get(sp, 1))) {
            print_message("# %s: case %zu: character %zu spans [%u, %u), want [%lld, %lld)\n", name, ci, k, a, z,
                          json_integer_value(json_array_get(sp, 0)), json_integer_value(json_array_get(sp, 1)));
            return 0;
        }
        i += len;
    }
    return k == json_array_size(spans);
}

static void test_normalizers(void **st)
{
    (void)st;
    json_t *j = load("fixtures/llm/norm_expected.json"), *cases = json_object_get(j, "cases"), *nv;
    size_t i, bad = 0, total = 0;
    qs_tok_norm_buf b;
    memset(&b, 0, sizeof b);
    json_array_foreach(json_object_get(j, "normalizers"), i, nv) {
        const char *name = json_string_value(json_object_get(nv, "name"));
        qs_tok_norm *nm = compile(json_object_get(nv, "normalizer"));
        assert_non_null(nm);
        for (size_t c = 0; c < json_array_size(cases); c++, total++) {
            json_t *jc = json_array_get(cases, c);
            qs_err e = {{0}};
            assert_int_equal(qs_tok_norm_run(nm, json_string_value(jc), json_string_length(jc), &b, &e), 0);
            if (!same_norm(&b, json_array_get(json_object_get(nv, "out"), c),
                           json_array_get(json_object_get(nv, "spans"), c), name, c))
                bad++;
        }
        qs_tok_norm_free(nm);
    }
    print_message("# %zu normalizer x case pairs against HF tokenizers, %zu mismatches\n", total, bad);
    qs_tok_norm_buf_free(&b);
    json_decref(j);
    assert_int_equal(bad, 0);
}

static size_t put8(char *o, uint32_t c)
{
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | c >> 6); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) { o[0] = (char)(0xE0 | c >> 12); o[1] = (char)(0x80 | (c >> 6 & 0x3F)); o[2] = (char)(0x80 | (c & 0x3F)); return 3; }
    o[0] = (char)(0xF0 | c >> 18); o[1] = (char)(0x80 | (c >> 12 & 0x3F)); o[2] = (char)(0x80 | (c >> 6 & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Every code point through each Unicode normalizer, hashed as make_norm_vectors.py's every_char()
** does: alone ("single"), and beside a starter and marks of known class ("ccc"). */
static void test_every_code_point(void **st)
{
    (void)st;
    json_t *j = load("fixtures/llm/norm_expected.json"), *x;
    size_t i, bad = 0;
    static char text[4096 * 16];
    qs_tok_norm_buf b;
    memset(&b, 0, sizeof b);
    json_array_foreach(json_object_get(j, "exhaustive"), i, x) {
        qs_tok_norm *nm = compile(json_object_get(x, "normalizer"));
        assert_non_null(nm);
        int ccc = !strcmp(json_string_value(json_object_get(x, "form")), "ccc");
        uint64_t h = 0xCBF29CE484222325ull;
        uint32_t c = 0;
        while (c < 0x110000) {
            size_t n = 0;
            for (int k = 0; k < 4096 && c < 0x110000; c++) {
                if (c >= 0xD800 && c <= 0xDFFF) continue;
                text[n++] = '\n';
                if (ccc) {
                    text[n++] = 'a';
                    n += put8(text + n, c);
                    n += put8(text + n, 0x334);
                    text[n++] = '\n';
                    text[n++] = 'a';
                    n += put8(text + n, 0x301);
                }
                n += put8(text + n, c);
                k++;
            }
            qs_err e = {{0}};
            assert_int_equal(qs_tok_norm_run(nm, text, n, &b, &e), 0);
            for (size_t k = 0; k <= b.n; k++) {
                h ^= k < b.n ? (uint8_t)b.s[k] : 0xFF;
                h *= 0x100000001B3ull;
            }
        }
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
        const char *want = json_string_value(json_object_get(x, "fnv1a64"));
        if (strcmp(hex, want)) {
            print_message("# %s (%s): hash %s, want %s\n", json_string_value(json_object_get(x, "name")), ccc ? "ccc" : "single",
                          hex, want);
            bad++;
        }
        qs_tok_norm_free(nm);
    }
    qs_tok_norm_buf_free(&b);
    json_decref(j);
    assert_int_equal(bad, 0);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) { h ^= ((const uint8_t *)p)[i]; h *= 0x100000001B3ull; }
    return h;
}

/* Real text through real normalizers: all-MiniLM-L6-v2's BertNormalizer and Qwen2's NFC on the six
** Austen novels of `make data`, normalized text and spans hashed as make_norm_vectors.py does. */
static void test_austen(void **st)
{
    (void)st;
    json_t *j = load("fixtures/llm/norm_austen.json"), *nv, *nov;
    size_t i, k, bad = 0, total = 0;
    qs_tok_norm_buf b;
    memset(&b, 0, sizeof b);
    json_array_foreach(json_object_get(j, "normalizers"), i, nv) {
        qs_tok_norm *nm = compile(json_object_get(nv, "normalizer"));
        assert_non_null(nm);
        json_array_foreach(json_object_get(nv, "novels"), k, nov) {
            char path[256];
            snprintf(path, sizeof path, "../data/text/%s", json_string_value(json_object_get(nov, "file")));
            size_t n = 0;
            uint8_t *text = tu_slurp(path, &n);
            if (!text) {
                qs_tok_norm_free(nm);
                qs_tok_norm_buf_free(&b);
                json_decref(j);
                tu_skip("data: the Austen novels (make data) are not there");
            }
            qs_err e = {{0}};
            assert_int_equal(qs_tok_norm_run(nm, (const char *)text, n, &b, &e), 0);
            uint64_t h = fnv(0xCBF29CE484222325ull, b.s, b.n);
            for (size_t p = 0; p < b.n;) {
                size_t len = clen(b.s, b.n, p);
                uint32_t ab[2] = {b.map[2 * p], b.map[2 * (p + len - 1) + 1]};   /* little-endian hosts */
                h = fnv(h, ab, sizeof ab);
                p += len;
            }
            char hex[17];
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
            total++;
            if (strcmp(hex, json_string_value(json_object_get(nov, "fnv1a64")))) {
                print_message("# %s on %s: %zu bytes, hash %s\n", json_string_value(json_object_get(nv, "name")), path, b.n, hex);
                bad++;
            }
            free(text);
        }
        qs_tok_norm_free(nm);
    }
    print_message("# %zu novel x normalizer pairs equal to HF tokenizers: %zu differ\n", total, bad);
    qs_tok_norm_buf_free(&b);
    json_decref(j);
    assert_int_equal(bad, 0);
}

/* tok_bpe.json with the variant's normalizer, pre-tokenizer and added tokens. */
static int variant_vocab(json_t *base, json_t *var, qs_llm_vocab *v)
{
    json_t *j = json_deep_copy(base);
    json_object_set(j, "normalizer", json_object_get(var, "normalizer"));
    json_object_set(j, "pre_tokenizer", json_object_get(var, "pre_tokenizer"));
    json_object_set(j, "added_tokens", json_object_get(var, "added_tokens"));
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    qs_err e = {{0}};
    int pp, rc = qs_llm_tok_json_parse(s, strlen(s), 0, "tok.json", v, &pp, &e);
    if (rc) print_message("# %s\n", e.msg);
    free(s);
    return rc;
}

/* tokenizers rounds a token holding part of a character out to the whole character; qscope gives the
** token's own bytes (llm_tok.h).  Widened to characters, the spans must agree. */
static void widen(const char *t, size_t n, uint32_t *a, uint32_t *b)
{
    while (*a > 0 && *a < n && ((unsigned char)t[*a] & 0xC0) == 0x80) (*a)--;
    while (*b < n && ((unsigned char)t[*b] & 0xC0) == 0x80) (*b)++;
}

static void test_tokenize(void **st)
{
    (void)st;
    json_t *j = load("fixtures/llm/norm_tok_expected.json"), *base = load("fixtures/llm/tok_bpe.json");
    json_t *cases = json_object_get(j, "cases"), *var;
    size_t i, bad = 0, total = 0;
    json_array_foreach(json_object_get(j, "variants"), i, var) {
        const char *name = json_string_value(json_object_get(var, "name"));
        qs_llm_vocab v;
        memset(&v, 0, sizeof v);
        assert_int_equal(variant_vocab(base, var, &v), 0);
        for (size_t c = 0; c < json_array_size(cases); c++, total++) {
            const char *text = json_string_value(json_array_get(cases, c));
            json_t *wi = json_array_get(json_object_get(var, "ids"), c), *wo = json_array_get(json_object_get(var, "offsets"), c);
            qs_err e = {{0}};
            size_t len = strlen(text);
            int n = qs_llm_tokenize_offs(&v, NULL, text, len, ids, offs, 4096, &e);
            int ok = n == (int)json_array_size(wi);
            for (int k = 0; ok && k < n; k++) {
                uint32_t a = offs[2 * k], b = offs[2 * k + 1];
                widen(text, len, &a, &b);
                json_t *o = json_array_get(wo, (size_t)k);
                ok = ids[k] == json_integer_value(json_array_get(wi, (size_t)k)) &&
                     a == json_integer_value(json_array_get(o, 0)) && b == json_integer_value(json_array_get(o, 1));
                if (!ok)
                    print_message("# %s: case %zu token %d: id %d [%u, %u), want %lld [%lld, %lld)\n", name, c, k, ids[k], a,
                                  b, json_integer_value(json_array_get(wi, (size_t)k)), json_integer_value(json_array_get(o, 0)),
                                  json_integer_value(json_array_get(o, 1)));
            }
            if (n != (int)json_array_size(wi))
                print_message("# %s: case %zu '%s': %d ids, want %zu %s\n", name, c, text, n, json_array_size(wi), n < 0 ? e.msg : "");
            bad += !ok;
        }
        qs_llm_vocab_free(&v);
    }
    print_message("# %zu texts x tokenizers with normalizers and added-token flags, %zu mismatches\n", total, bad);
    json_decref(j);
    json_decref(base);
    assert_int_equal(bad, 0);
}

/* Invalid UTF-8 (qscope's rule, tokenizers cannot be asked): every invalid byte is a character of its
** own that no normalizer changes, joins or drops; it maps to itself. */
static void test_invalid_utf8(void **st)
{
    (void)st;
    static const struct { const char *json, *in, *out; } c[] = {
        {"{\"type\":\"NFC\"}", "e\xff\xcc\x81", "e\xff\xcc\x81"},                  /* no composition across it */
        {"{\"type\":\"NFD\"}", "\xc3\xa9\x80", "e\xcc\x81\x80"},
        {"{\"type\":\"NFKC\"}", "\xef\xac\x81\xc3", "fi\xc3"},                     /* truncated sequence */
        {"{\"type\":\"Lowercase\"}", "A\xed\xa0\x80" "B", "a\xed\xa0\x80" "b"},      /* a surrogate: 3 bytes */
        {"{\"type\":\"StripAccents\"}", "\xcc\x81\xfe\xcc\x81", "\xfe"},
        {"{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,\"strip_accents\":null,"
         "\"lowercase\":true}", "\xc0\x80 X", "\xc0\x80 x"},                        /* overlong NUL is not NUL */
        {"{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":true}", " \xff ", "\xff"},
        {"{\"type\":\"Replace\",\"pattern\":{\"Regex\":\".\"},\"content\":\"_\"}", "a\xffz", "_\xff_"},
        {"{\"type\":\"Nmt\"}", "\xf4\x90\x80\x80\t", "\xf4\x90\x80\x80 "},          /* beyond U+10FFFF */
    };
    qs_tok_norm_buf b;
    memset(&b, 0, sizeof b);
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        qs_err e = {{0}};
        qs_tok_norm *nm = qs_tok_norm_from_json(c[i].json, &e);
        assert_non_null(nm);
        assert_int_equal(qs_tok_norm_run(nm, c[i].in, strlen(c[i].in), &b, &e), 0);
        if (b.n != strlen(c[i].out) || memcmp(b.s, c[i].out, b.n)) print_message("# case %zu: %zu bytes\n", i, b.n);
        assert_int_equal(b.n, strlen(c[i].out));
        assert_memory_equal(b.s, c[i].out, b.n);
        for (size_t k = 0; k < b.n; k++)   /* an invalid byte spans exactly itself */
            if ((unsigned char)b.s[k] >= 0x80 && b.map[2 * k + 1] - b.map[2 * k] == 1)
                assert_int_equal((unsigned char)c[i].in[b.map[2 * k]], (unsigned char)b.s[k]);
        qs_tok_norm_free(nm);
    }
    qs_tok_norm_buf_free(&b);
}

static void test_errors(void **st)
{
    (void)st;
    static const struct { const char *json, *msg; } bad[] = {
        {"{\"type\":\"ByteLevel\"}", "normalizer type 'ByteLevel' is not supported"},
        {"{\"type\":\"Fancy\"}", "normalizer type 'Fancy' is not supported"},
        {"{\"normalizers\":[]}", "without a \"type\""},
        {"{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Oops\"}]}", "'Oops' is not supported"},
        {"{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"(\"},\"content\":\"x\"}", "Replace pattern /(/"},
        {"{\"type\":\"Replace\",\"pattern\":\"x\",\"content\":\"y\"}", "without a String or Regex"},
        {"{\"type\":\"Strip\",\"strip_left\":true}", "\"strip_right\""},
        {"{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,\"strip_accents\":1,\"lowercase\":true}",
         "strip_accents"},
        {"{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"!!!\"}", "not base64"},
        {"{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"AQ==\"}", "no trie size"},
        {"{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"/wAAAAAAAAA=\"}", "holds"},
        {"{\"type\":\"Prepend\"}", "without a \"prepend\""},
        {"[1,", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        qs_err e = {{0}};
        assert_null(qs_tok_norm_from_json(bad[i].json, &e));
        if (!strstr(e.msg, bad[i].msg)) print_message("# %s -> %s\n", bad[i].json, e.msg);
        assert_non_null(strstr(e.msg, bad[i].msg));
    }
    qs_err e = {{0}};
    assert_null(qs_tok_norm_from_json("null", &e));   /* no normalizer: NULL, no error */
    assert_int_equal(e.msg[0], 0);
    /* an unsupported normalizer in a tokenizer.json: tokenizing reports it against the file */
    json_t *base = load("fixtures/llm/tok_bpe.json"), *var = json_object();
    json_object_set_new(var, "normalizer", json_loads("{\"type\":\"ByteLevel\"}", 0, NULL));
    json_object_set(var, "pre_tokenizer", json_object_get(base, "pre_tokenizer"));
    json_object_set(var, "added_tokens", json_object_get(base, "added_tokens"));
    qs_llm_vocab v;
    memset(&v, 0, sizeof v);
    assert_int_equal(variant_vocab(base, var, &v), 0);
    assert_int_equal(qs_llm_tokenize(&v, "abc", 3, ids, 4096, &e), -1);
    assert_string_equal(e.msg, "tok.json: normalizer type 'ByteLevel' is not supported (NFC, NFD, NFKC, NFKD, Lowercase, "
                               "StripAccents, Strip, BertNormalizer, Replace, Prepend, Precompiled, Nmt, Sequence)");
    qs_llm_vocab_free(&v);
    json_decref(var);
    json_decref(base);
}

/* Every truncation and many corruptions of the real charsmap: refused or run, never a crash. */
static void test_charsmap_damage(void **st)
{
    (void)st;
    json_t *j = load("fixtures/llm/norm_expected.json"), *nv;
    const char *b64 = NULL;
    size_t i;
    json_array_foreach(json_object_get(j, "normalizers"), i, nv)
        if (!strcmp(json_string_value(json_object_get(nv, "name")), "precompiled"))
            b64 = json_string_value(json_object_get(json_object_get(nv, "normalizer"), "precompiled_charsmap"));
    assert_non_null(b64);
    /* decode through the JSON path once to get the blob */
    static uint8_t blob[8192];
    size_t n = 0;
    {
        static const char *al = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        uint32_t acc = 0;
        int bits = 0;
        for (const char *p = b64; *p && *p != '=' && n < sizeof blob; p++) {
            acc = acc << 6 | (uint32_t)(strchr(al, *p) - al);
            bits += 6;
            if (bits >= 8) { bits -= 8; blob[n++] = (uint8_t)(acc >> bits); }
        }
    }
    assert_true(n > 64);
    static const char text[] = "A\xef\xac\x81" "AB \xe2\x91\xa0 e\xcc\x81 \xe3\x8e\x92\xc3\x85\xe1\x84\x80\xe1\x85\xa1 x";
    qs_tok_norm_buf b;
    memset(&b, 0, sizeof b);
    int ran = 0;
    for (size_t cut = 0; cut <= n; cut++) {
        qs_err e = {{0}};
        qs_tok_norm *nm = qs_tok_norm_from_charsmap(blob, cut, &e);
        if (!nm) { assert_true(e.msg[0] != 0); continue; }
        assert_int_equal(qs_tok_norm_run(nm, text, sizeof text - 1, &b, &e), 0);
        ran++;
        qs_tok_norm_free(nm);
    }
    srand(7);
    for (int r = 0; r < 2000; r++) {   /* flipped bytes in the trie and the replacements */
        static uint8_t bad[8192];
        memcpy(bad, blob, n);
        for (int k = 0; k < 4; k++) bad[4 + (size_t)rand() % (n - 4)] ^= (uint8_t)(1 + rand() % 255);
        qs_err e = {{0}};
        qs_tok_norm *nm = qs_tok_norm_from_charsmap(bad, n, &e);
        if (!nm) continue;
        assert_int_equal(qs_tok_norm_run(nm, text, sizeof text - 1, &b, &e), 0);
        qs_tok_norm_free(nm);
    }
    assert_true(ran > 0);
    qs_tok_norm_buf_free(&b);
    json_decref(j);
}

/* Offsets after an identity normalization equal those without a normalizer (Qwen2's NFC on NFC text),
** invalid bytes included. */
static void test_identity_spans(void **st)
{
    (void)st;
    json_t *base = load("fixtures/llm/tok_bpe.json"), *var = json_object();
    json_object_set(var, "pre_tokenizer", json_object_get(base, "pre_tokenizer"));
    json_object_set(var, "added_tokens", json_object_get(base, "added_tokens"));
    qs_llm_vocab plain, nfc;
    memset(&plain, 0, sizeof plain);
    memset(&nfc, 0, sizeof nfc);
    json_object_set_new(var, "normalizer", json_null());
    assert_int_equal(variant_vocab(base, var, &plain), 0);
    json_object_set_new(var, "normalizer", json_loads("{\"type\":\"NFC\"}", 0, NULL));
    assert_int_equal(variant_vocab(base, var, &nfc), 0);
    static const char text[] = "Caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 <|im_end|> \xea\xb0\x80! \xff\xe4\xb8 x\xc3";
    static int32_t id2[256];
    static uint32_t of2[512];
    qs_err e = {{0}};
    int n1 = qs_llm_tokenize_offs(&plain, NULL, text, sizeof text - 1, ids, offs, 256, &e);
    int n2 = qs_llm_tokenize_offs(&nfc, NULL, text, sizeof text - 1, id2, of2, 256, &e);
    assert_true(n1 > 0);
    assert_int_equal(n1, n2);
    assert_memory_equal(ids, id2, (size_t)n1 * sizeof *ids);
    assert_memory_equal(offs, of2, 2 * (size_t)n1 * sizeof *offs);
    qs_llm_vocab_free(&plain);
    qs_llm_vocab_free(&nfc);
    json_decref(var);
    json_decref(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalizers),
        cmocka_unit_test(test_every_code_point),
        cmocka_unit_test(test_austen),
        cmocka_unit_test(test_tokenize),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_charsmap_damage),
        cmocka_unit_test(test_identity_spans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
