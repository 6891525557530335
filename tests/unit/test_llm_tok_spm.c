/*
** SentencePiece-style tokenizers (store/llm_tok_spm*.c, llm_tok_unigram.c, llm_pretok_meta.c) against
** their references, on the adversarial cases of fixtures/llm/spm_expected.json (written with the tiny
** models by tests/llm/make_spm_vectors.py):
**   - tokenizer.json forms (Unigram and BPE with byte_fallback; Metaspace always/first/never, split
**     or not; Llama-2's and Gemma's normalizers once llm_tok_norm.c runs them) against `tokenizers`:
**     ids and byte spans;
**   - the tokenizer.model files against `sentencepiece`: ids, and spans of the tokens that are not
**     byte-fallback tokens;
**   - a GGUF with tokenizer.ggml.model "llama" against llama.cpp's rules (the user-defined <sep>
**     first, each stretch between through sentencepiece without whitespace removal).
** For tokenizer.model files, cases with added tokens (<sep>, <s>) are not compared: qscope matches
** them before the model, as tokenizers and llama.cpp do, which sentencepiece itself does not.
*/
#include "test_util.h"

#include <jansson.h>
#include <unistd.h>

#include "../../store/llm_load.h"
#include "../../store/llm_tok.h"
#include "../../store/llm_tok_norm.h"

static int32_t ids[4096];
static uint32_t offs[8192];

static json_t *expected(void)
{
    json_error_t je;
    json_t *j = json_load_file("fixtures/llm/spm_expected.json", 0, &je);
    if (!j) print_message("# spm_expected.json: %s\n", je.text);
    assert_non_null(j);
    return j;
}

static int has_added(const char *s) { return strstr(s, "<sep>") || strstr(s, "<s>") || strstr(s, "</s>") || strstr(s, "<unk>"); }

static int is_byte_token(const qs_llm_vocab *v, int id)
{
    const char *s = v->text + v->off[id];
    return strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>';
}

/* Tokenize every case with v; compare ids (and spans unless spans is NULL) with the reference.
** Spans: a token made of nothing but a prepended "▁" has no bytes here (llm_tok.h), where
** tokenizers gives it the first character's.  A <0xXX> token spans its own byte, inside what the
** reference gives (the character; Unigram: the fused unknown run; sentencepiece: the character to
** the last byte, nothing to the others).  bytes_loose & 2: where a normalizer expanded or
** deleted characters, the span may end earlier than sentencepiece's (which gives an expanded
** character to its last token and deleted ones to the token before).  Returns the mismatches. */
static int compare(const qs_llm_vocab *v, json_t *cases, json_t *want, json_t *spans, int skip_added, int bytes_loose,
                   const char *label)
{
    size_t i;
    json_t *c;
    int bad = 0, done = 0;
    json_array_foreach(cases, i, c) {
        const char *text = json_string_value(c);
        if (skip_added && has_added(text)) continue;
        json_t *w = json_array_get(want, i), *ws = spans ? json_array_get(spans, i) : NULL;
        qs_err e = {{0}};
        int n = qs_llm_tokenize_offs(v, NULL, text, strlen(text), ids, offs, 4096, &e);
        int same = n == (int)json_array_size(w), k = 0;
        for (; same && k < n; k++) same = ids[k] == json_integer_value(json_array_get(w, (size_t)k));
        for (int t = 0; same && ws && t < n; t++) {
            json_t *sp = json_array_get(ws, (size_t)t);
            uint32_t a = (uint32_t)json_integer_value(json_array_get(sp, 0)), b = (uint32_t)json_integer_value(json_array_get(sp, 1));
            if (offs[2 * t] == a && offs[2 * t + 1] == b) continue;
            if (offs[2 * t] == offs[2 * t + 1] && offs[2 * t] == a && !strcmp(v->text + v->off[ids[t]], "\xE2\x96\x81")) continue;
            if (is_byte_token(v, ids[t]) && offs[2 * t] >= a && (a == b || offs[2 * t + 1] <= b) && offs[2 * t + 1] - offs[2 * t] <= 1)
                continue;   /* a <0xXX> token spans its byte; the references give the character (or fused run) */
            if ((bytes_loose & 2) && offs[2 * t] == a && (a == b || offs[2 * t + 1] < b)) continue;
            print_message("# %s: case %zu token %d (id %d): span [%u, %u), want [%u, %u)\n", label, i, t, ids[t],
                          offs[2 * t], offs[2 * t + 1], a, b);
            same = 0;
        }
        done++;
        if (!same) {
            print_message("# %s: case %zu '%s': %d ids%s%s, want %zu:", label, i, text, n, n < 0 ? ": " : "",
                          n < 0 ? e.msg : "", json_array_size(w));
            for (int t = 0; t < n && t < 40; t++) print_message(" %d", ids[t]);
            print_message("\n");
            bad++;
        }
    }
    assert_true(done > 0);
    return bad;
}

/* A tokenizer.json file with its pre_tokenizer and normalizer replaced -> v. */
static void load_variant(const char *base, json_t *pre, json_t *norm, qs_llm_vocab *v)
{
    char path[256];
    snprintf(path, sizeof path, "fixtures/llm/%s", base);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    assert_non_null(j);
    json_object_set(j, "pre_tokenizer", pre);
    json_object_set(j, "normalizer", norm);
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    qs_err e = {{0}};
    int pp;
    memset(v, 0, sizeof *v);
    v->bos = v->eos = -1;
    int rc = qs_llm_tok_json_parse(s, strlen(s), 0, base, v, &pp, &e);
    if (rc) print_message("# %s: %s\n", base, e.msg);
    assert_int_equal(rc, 0);
    free(s);
}

static void test_json_forms(void **st)
{
    (void)st;
    json_t *x = expected(), *var;
    size_t i;
    int bad = 0, run = 0;
    json_array_foreach(json_object_get(x, "json"), i, var) {
        const char *name = json_string_value(json_object_get(var, "name"));
        json_t *norm = json_object_get(var, "normalizer");
        if (!json_is_null(norm)) {   /* llm_tok_norm.c may not run this normalizer yet */
            char *ns = json_dumps(norm, JSON_COMPACT);
            qs_err e = {{0}};
            qs_tok_norm *nm = qs_tok_norm_from_json(ns, &e);
            free(ns);
            if (!nm) { print_message("# %s: skipped, the normalizer is not supported (%s)\n", name, e.msg); continue; }
            qs_tok_norm_free(nm);
        }
        qs_llm_vocab v;
        load_variant(json_string_value(json_object_get(var, "base")), json_object_get(var, "pre_tokenizer"), norm, &v);
        bad += compare(&v, json_object_get(x, "cases"), json_object_get(var, "ids"), json_object_get(var, "spans"), 0, 0, name);
        qs_llm_vocab_free(&v);
        run++;
    }
    print_message("# %d tokenizer.json forms against tokenizers, %d mismatches\n", run, bad);
    json_decref(x);
    assert_true(run >= 8);
    assert_int_equal(bad, 0);
}

static void test_model_files(void **st)
{
    (void)st;
    json_t *x = expected(), *res;
    const char *name;
    int bad = 0, run = 0;
    json_object_foreach(json_object_get(x, "model"), name, res) {
        char path[256];
        snprintf(path, sizeof path, "fixtures/llm/%s.model", name);
        qs_llm_file f;
        qs_err e = {{0}};
        int rc = qs_llm_load_tokenizer(path, &f, &e);
        if (rc) print_message("# %s: %s\n", path, e.msg);
        assert_int_equal(rc, 0);
        if (qs_llm_tokenize(&f.v, "a", 1, ids, 4096, &e) < 0 && strstr(e.msg, "precompiled normalization rules")) {
            print_message("# %s: skipped, llm_tok_norm.c does not decode precompiled_charsmap yet (%s)\n", name, e.msg);
            qs_llm_file_free(&f);
            continue;
        }
        int loose = f.v.norm_json ? 2 : 0;
        bad += compare(&f.v, json_object_get(x, "cases"), json_object_get(res, "ids"), json_object_get(res, "spans"), 1, loose, name);
        run++;
        qs_llm_file_free(&f);
    }
    print_message("# %d tokenizer.model files against sentencepiece, %d mismatches\n", run, bad);
    json_decref(x);
    assert_true(run >= 4);
    assert_int_equal(bad, 0);
}

static void test_gguf_llama(void **st)
{
    (void)st;
    json_t *x = expected();
    qs_llm_file f;
    qs_err e = {{0}};
    int rc = qs_llm_load_gguf("fixtures/llm/spm_llama.gguf", &f, &e);
    if (rc) print_message("# spm_llama.gguf: %s\n", e.msg);
    assert_int_equal(rc, 0);
    assert_int_equal(compare(&f.v, json_object_get(x, "cases"), json_object_get(json_object_get(x, "gguf"), "ids"), NULL, 0, 0,
                             "gguf"), 0);
    /* detokenization: "▁" is a space, <0xXX> its byte */
    char out[256];
    size_t o = 0;
    const char *text = "rare chars: \xE2\x88\xAE \xEA\x99\xAE";
    int n = qs_llm_tokenize(&f.v, text, strlen(text), ids, 4096, &e);
    assert_true(n > 0);
    for (int k = 0; k < n; k++) o += qs_llm_detok(&f.v, ids[k], out + o, sizeof out - o);
    assert_string_equal(out, " rare chars: \xE2\x88\xAE \xEA\x99\xAE");
    qs_llm_file_free(&f);
    json_decref(x);
}

/* What is refused, with one line naming the part. */
static void test_refusals(void **st)
{
    (void)st;
    qs_llm_vocab v;
    qs_err e = {{0}};
    json_t *pre = json_pack("{s:s, s:s, s:s}", "type", "Metaspace", "replacement", "_", "prepend_scheme", "always");
    load_variant("spm_uni.json", pre, json_null(), &v);
    assert_int_equal(qs_llm_tokenize(&v, "a b", 3, ids, 4096, &e), -1);
    assert_non_null(strstr(e.msg, "Metaspace with replacement"));
    qs_llm_vocab_free(&v);
    json_decref(pre);
    pre = json_pack("{s:s, s:s}", "type", "Metaspace", "prepend_scheme", "sometimes");
    load_variant("spm_uni.json", pre, json_null(), &v);
    assert_int_equal(qs_llm_tokenize(&v, "a b", 3, ids, 4096, &e), -1);
    assert_non_null(strstr(e.msg, "prepend_scheme"));
    qs_llm_vocab_free(&v);
    json_decref(pre);
    /* a Unigram vocabulary that is not [piece, score] pairs */
    const char *bad = "{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\",0],[\"a\"]]}}";
    int pp;
    memset(&v, 0, sizeof v);
    assert_int_equal(qs_llm_tok_json_parse(bad, strlen(bad), 0, "t.json", &v, &pp, &e), -1);
    assert_non_null(strstr(e.msg, "model.vocab[1] is not [piece, score]"));
    qs_llm_vocab_free(&v);
    /* no unknown token and an unknown character */
    const char *nounk = "{\"model\":{\"type\":\"Unigram\",\"unk_id\":null,\"vocab\":[[\"a\",-1],[\"b\",-2]]}}";
    memset(&v, 0, sizeof v);
    assert_int_equal(qs_llm_tok_json_parse(nounk, strlen(nounk), 0, "t.json", &v, &pp, &e), 0);
    assert_int_equal(qs_llm_tokenize(&v, "ab", 2, ids, 4096, &e), 2);
    assert_int_equal(qs_llm_tokenize(&v, "abc", 3, ids, 4096, &e), -1);
    assert_non_null(strstr(e.msg, "no unknown token"));
    qs_llm_vocab_free(&v);
    /* BPE dropout samples: refused */
    const char *drop = "{\"model\":{\"type\":\"BPE\",\"dropout\":0.1,\"vocab\":{\"a\":0},\"merges\":[]},"
                       "\"pre_tokenizer\":{\"type\":\"Metaspace\"}}";
    memset(&v, 0, sizeof v);
    assert_int_equal(qs_llm_tok_json_parse(drop, strlen(drop), 0, "t.json", &v, &pp, &e), 0);
    assert_int_equal(qs_llm_tokenize(&v, "a", 1, ids, 4096, &e), -1);
    assert_non_null(strstr(e.msg, "dropout"));
    qs_llm_vocab_free(&v);
}

/* FNV-1a 64 over the ids as decimal text, each followed by a comma (make_spm_vectors.py's fnv). */
static uint64_t fnv(const int32_t *v, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        char b[16];
        int k = snprintf(b, sizeof b, "%d,", v[i]);
        for (int j = 0; j < k; j++) h = (h ^ (uint8_t)b[j]) * 0x100000001b3ull;
    }
    return h;
}

/* Whole novels (data/text, from `make data`) in one call each, against the references' ids (count
** and hash): long texts are where a float score sum or a segment boundary would show. */
static void test_novels(void **st)
{
    (void)st;
    json_t *x = expected(), *forms, *var;
    const char *novel;
    int done = 0, bad = 0;
    json_object_foreach(json_object_get(x, "novels"), novel, forms) {
        char path[256];
        snprintf(path, sizeof path, "../data/text/%s", novel);
        FILE *f = fopen(path, "rb");
        if (!f) { print_message("# data: %s absent (make data): not checked\n", path); continue; }
        static char text[8 << 20];
        size_t len = fread(text, 1, sizeof text, f);
        fclose(f);
        int32_t *out = malloc((len + 16) * sizeof *out);
        assert_non_null(out);
        const char *form;
        json_t *want;
        json_object_foreach(forms, form, want) {
            qs_llm_file lf;
            qs_err e = {{0}};
            memset(&lf, 0, sizeof lf);
            if (!strcmp(form, "gguf")) {
                assert_int_equal(qs_llm_load_gguf("fixtures/llm/spm_llama.gguf", &lf, &e), 0);
            } else if (!strncmp(form, "spm_", 4)) {
                snprintf(path, sizeof path, "fixtures/llm/%s.model", form);
                assert_int_equal(qs_llm_load_tokenizer(path, &lf, &e), 0);
            } else {
                size_t i;
                json_array_foreach(json_object_get(x, "json"), i, var)
                    if (!strcmp(json_string_value(json_object_get(var, "name")), form))
                        load_variant(json_string_value(json_object_get(var, "base")), json_object_get(var, "pre_tokenizer"),
                                     json_object_get(var, "normalizer"), &lf.v);
            }
            int n = qs_llm_tokenize(&lf.v, text, len, out, (int)len + 16, &e);
            char h[17];
            snprintf(h, sizeof h, "%016llx", (unsigned long long)fnv(out, n > 0 ? n : 0));
            if (n != json_integer_value(json_array_get(want, 0)) || strcmp(h, json_string_value(json_array_get(want, 1)))) {
                print_message("# %s under %s: %d ids hash %s, want %lld %s %s\n", novel, form, n, h,
                              (long long)json_integer_value(json_array_get(want, 0)), json_string_value(json_array_get(want, 1)),
                              n < 0 ? e.msg : "");
                bad++;
            }
            qs_llm_file_free(&lf);
            done++;
        }
        free(out);
    }
    print_message("# %d novel x tokenizer pairs against sentencepiece / tokenizers, %d mismatches\n", done, bad);
    json_decref(x);
    assert_int_equal(bad, 0);
}

/* tokenizer.model images: a truncated file, an unsupported model type, a piece with a bad type;
** each refused in one line naming the file. */
static void test_model_refusals(void **st)
{
    (void)st;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%.200s/qs-spm-XXXXXX.model", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemps(tmp, 6);
    assert_true(fd >= 0);
    FILE *f = fopen("fixtures/llm/spm_uni.model", "rb");
    assert_non_null(f);
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    struct { const uint8_t *b; size_t n; const char *msg; } bad[] = {
        {buf, n / 2, "malformed protobuf"},   /* cut inside a piece */
        {(const uint8_t *)"\x0a\x05\x0a\x01\x61\x18\x01\x12\x02\x18\x03", 11, "model_type 3 is not supported"},
        {(const uint8_t *)"\x0a\x05\x0a\x01\x61\x18\x09", 7, "piece 0 has an unknown type"},
        {(const uint8_t *)"\x0a\x02\x18\x01", 4, "piece 0 is empty"},
        {(const uint8_t *)"\x0a\x05\x0a\x01\x61\x18\x01\x12\x03\xc0\x02\x05", 12, "unk_id 5 is not a piece"},
        {(const uint8_t *)"\x0b", 1, "malformed protobuf"},   /* a group */
        {(const uint8_t *)"\x12\x02\x18\x01", 4, "no pieces"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(ftruncate(fd, 0), 0);
        assert_int_equal(pwrite(fd, bad[i].b, bad[i].n, 0), (ssize_t)bad[i].n);
        qs_llm_file lf;
        qs_err e = {{0}};
        assert_int_equal(qs_llm_load_tokenizer(tmp, &lf, &e), -1);
        if (!strstr(e.msg, bad[i].msg) || strncmp(e.msg, tmp, strlen(tmp))) print_message("# case %zu: %s\n", i, e.msg);
        assert_non_null(strstr(e.msg, bad[i].msg));
        assert_int_equal(strncmp(e.msg, tmp, strlen(tmp)), 0);
    }
    close(fd);
    unlink(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_forms),
        cmocka_unit_test(test_model_files),
        cmocka_unit_test(test_gguf_llama),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_model_refusals),
        cmocka_unit_test(test_novels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
