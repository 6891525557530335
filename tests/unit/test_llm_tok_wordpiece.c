/*
** WordPiece (store/llm_tok_wordpiece.c, the BERT pre-tokenizers of llm_pretok_bert.c, vocab.txt in
** llm_tok_vocabtxt.c) against Hugging Face `tokenizers`: ids and byte spans of every case of
** fixtures/llm/wp_expected.json under each variant (normalizer, pre-tokenizer, model parameters) with
** the small trained model of fixtures/llm/wp_tok.json, its decoder, the same model read from a
** vocab.txt, and the real all-MiniLM-L6-v2 tokenizer when `make data` has unpacked it (cases of
** fixtures/llm/wp_minilm.json and a digest of 200 KB of Austen).  tests/llm/make_wordpiece_vectors.py
** writes the fixtures.
*/
#include "test_util.h"

#include <jansson.h>
#include <time.h>
#include <unistd.h>

#include "../../store/llm_load.h"
#include "../../store/llm_tok.h"
#include "../../store/llm_tok_wordpiece.h"

enum { CAP = 1 << 17 };
static int32_t ids[CAP];
static uint32_t offs[2 * CAP];

/* data/ (the `make data` cache) as seen from tests/, or $QS_DATA_DIR */
static const char *data_dir(void)
{
    const char *d = getenv("QS_DATA_DIR");
    return d && *d ? d : "../data";
}

static int load_json_tok(const char *json, qs_llm_vocab *v, qs_err *e)
{
    memset(v, 0, sizeof *v);
    v->bos = v->eos = -1;
    int pp;
    return qs_llm_tok_json_parse(json, strlen(json), 0, "wp_tok.json", v, &pp, e);
}

/* The cases against one expected list: ids, spans and (when given) decode(); returns the mismatches. */
static int compare(const qs_llm_vocab *v, json_t *cases, json_t *want, const char *label)
{
    int bad = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const char *text = json_string_value(json_array_get(cases, i));
        json_t *w = json_array_get(want, i), *wi = json_object_get(w, "ids"), *wo = json_object_get(w, "offsets");
        qs_err e = {{0}};
        int n = qs_llm_tokenize_offs(v, NULL, text, strlen(text), ids, offs, CAP, &e);
        int same;
        if (json_is_null(wi)) {   /* tokenizers refuses it: so must we, saying why */
            same = n == -1 && strstr(e.msg, "unk_token") != NULL;
        } else {
            same = n == (int)json_array_size(wi) && (size_t)(2 * n) == json_array_size(wo);
            for (int k = 0; same && k < n; k++)
                same = ids[k] == json_integer_value(json_array_get(wi, (size_t)k)) &&
                       offs[2 * k] == json_integer_value(json_array_get(wo, (size_t)(2 * k))) &&
                       offs[2 * k + 1] == json_integer_value(json_array_get(wo, (size_t)(2 * k + 1)));
        }
        const char *dec = json_string_value(json_object_get(w, "decoded"));
        if (same && dec && n >= 0) {   /* the decoder: each id after the first, joined; the first has no space */
            static char back[1 << 16];
            size_t o = 0;
            back[0] = 0;
            for (int k = 0; k < n && o + 1024 < sizeof back; k++) o += qs_llm_detok(v, ids[k], back + o, sizeof back - o);
            const char *b = back[0] == ' ' ? back + 1 : back;
            same = !strcmp(b, dec);
            if (!same) print_message("# %s: case %zu decodes to '%s', want '%s'\n", label, i, b, dec);
        }
        if (!same) {
            print_message("# %s: case %zu '%.60s': %d ids%s%s, want %zu\n", label, i, text, n, n < 0 ? ": " : "",
                          n < 0 ? e.msg : "", json_array_size(wi));
            for (int k = 0; k < n && k < (int)json_array_size(wi) && k < 40; k++)
                print_message("#   %d: %d [%u,%u) want %lld [%lld,%lld)\n", k, ids[k], offs[2 * k], offs[2 * k + 1],
                              json_integer_value(json_array_get(wi, (size_t)k)),
                              json_integer_value(json_array_get(wo, (size_t)(2 * k))),
                              json_integer_value(json_array_get(wo, (size_t)(2 * k + 1))));
            bad++;
        }
    }
    return bad;
}

static json_t *load(const char *path)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) print_message("# %s: %s\n", path, je.text);
    assert_non_null(j);
    return j;
}

/* wp_tok.json with a variant's normalizer, pre_tokenizer and model keys, as compact JSON (malloc'd). */
static char *variant_json(json_t *base, json_t *var)
{
    json_t *t = json_deep_copy(base);
    json_object_set(t, "normalizer", json_object_get(var, "normalizer"));
    json_object_set(t, "pre_tokenizer", json_object_get(var, "pre_tokenizer"));
    json_object_update(json_object_get(t, "model"), json_object_get(var, "model"));
    char *s = json_dumps(t, JSON_COMPACT);
    json_decref(t);
    return s;
}

static void test_variants(void **st)
{
    (void)st;
    json_t *base = load("fixtures/llm/wp_tok.json"), *x = load("fixtures/llm/wp_expected.json"), *var;
    json_t *cases = json_object_get(x, "cases");
    assert_true(json_array_size(cases) >= 80);
    size_t i;
    int bad = 0, nvar = 0;
    json_array_foreach(json_object_get(x, "variants"), i, var) {
        char *s = variant_json(base, var);
        qs_llm_vocab v;
        qs_err e = {{0}};
        assert_int_equal(load_json_tok(s, &v, &e), 0);
        assert_int_equal(v.model, QS_TOK_WORDPIECE);
        bad += compare(&v, cases, json_object_get(var, "expected"), json_string_value(json_object_get(var, "name")));
        qs_llm_vocab_free(&v);
        free(s);
        nvar++;
    }
    print_message("# %zu cases x %d WordPiece variants against HF tokenizers, %d mismatches\n", json_array_size(cases),
                  nvar, bad);
    assert_int_equal(bad, 0);
    assert_true(nvar >= 15);
    json_decref(base); json_decref(x);
}

/* The trained model's vocabulary written as a vocab.txt (ids = lines) gives bert-full's tokenization:
** BertTokenizer's defaults are that variant's settings. */
static void test_vocab_txt(void **st)
{
    (void)st;
    json_t *base = load("fixtures/llm/wp_tok.json"), *x = load("fixtures/llm/wp_expected.json"), *var, *want = NULL;
    size_t i;
    json_array_foreach(json_object_get(x, "variants"), i, var)
        if (!strcmp(json_string_value(json_object_get(var, "name")), "bert-full")) want = json_object_get(var, "expected");
    assert_non_null(want);
    json_t *voc = json_object_get(json_object_get(base, "model"), "vocab"), *id;
    size_t nv = json_object_size(voc);
    const char **line = calloc(nv, sizeof *line);
    const char *key;
    json_object_foreach(voc, key, id) line[json_integer_value(id)] = key;
    char dir[256], path[512];
    assert_non_null(mkdtemp(tu_tmp_template(dir, sizeof dir, "qs_wp")));
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t k = 0; k < nv; k++) fprintf(f, "%s%s", line[k], k % 7 == 3 ? "\r\n" : "\n");   /* some CRLF */
    fclose(f);
    qs_llm_file lf;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer(path, &lf, &e), 0);
    assert_int_equal(lf.v.model, QS_TOK_WORDPIECE);
    assert_int_equal(lf.v.n, (int)nv);
    assert_int_equal(compare(&lf.v, json_object_get(x, "cases"), want, "vocab.txt"), 0);
    qs_llm_file_free(&lf);

    /* tokenizer_config.json beside it: do_lower_case false keeps the case */
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    f = fopen(cfg, "w");
    fputs("{\"do_lower_case\": false, \"unk_token\": {\"content\": \"[UNK]\", \"__type\": \"AddedToken\"}}", f);
    fclose(f);
    assert_int_equal(qs_llm_load_tokenizer(path, &lf, &e), 0);
    int n = qs_llm_tokenize(&lf.v, "The", 3, ids, CAP, &e);
    assert_true(n >= 1);
    assert_int_not_equal(ids[0], qs_llm_vocab_find(&lf.v, "the"));
    qs_llm_file_free(&lf);
    f = fopen(cfg, "w");
    fputs("{\"do_lower_case\": \"yes\"}", f);
    fclose(f);
    assert_int_equal(qs_llm_load_tokenizer(path, &lf, &e), -1);
    assert_non_null(strstr(e.msg, "tokenizer_config.json: do_lower_case"));
    assert_null(strstr(e.msg, "vocab.txt"));
    unlink(cfg);

    /* bad files: one line naming the file and the line */
    struct { const char *body, *msg; } bad[] = {
        {"[UNK]\na\n\nb\n", "vocab.txt: line 3 is empty"},
        {"[UNK]\na\nb\na\n", "vocab.txt: line 4 repeats the token 'a' of line 2"},
        {"[UNK]\nab\xff\n", "vocab.txt: line 2 is not valid UTF-8"},
        {"\n", "vocab.txt: line 1 is empty"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        f = fopen(path, "w");
        fputs(bad[b].body, f);
        fclose(f);
        assert_int_equal(qs_llm_load_tokenizer(path, &lf, &e), -1);
        if (!strstr(e.msg, bad[b].msg)) print_message("# got '%s', want '%s'\n", e.msg, bad[b].msg);
        assert_non_null(strstr(e.msg, bad[b].msg));
        assert_null(strchr(e.msg, '\n'));
    }
    unlink(path);
    rmdir(dir);
    free(line);
    json_decref(base); json_decref(x);
}

/* What `tokenizers` cannot be asked: invalid UTF-8 (each bad byte one character), a word far over
** max_input_chars_per_word with the limit lifted (bounded by the longest token, not quadratic), and
** a model JSON of the wrong types. */
static void test_edges(void **st)
{
    (void)st;
    json_t *base = load("fixtures/llm/wp_tok.json");
    json_object_set_new(base, "normalizer", json_null());
    json_object_set_new(base, "pre_tokenizer", json_pack("{s:s}", "type", "BertPreTokenizer"));
    char *s = json_dumps(base, JSON_COMPACT);
    qs_llm_vocab v;
    qs_err e = {{0}};
    assert_int_equal(load_json_tok(s, &v, &e), 0);
    int unk = qs_llm_vocab_find(&v, "[UNK]");
    int n = qs_llm_tokenize_offs(&v, NULL, "ab\xff" "cd \xc3", 7, ids, offs, CAP, &e);
    assert_int_equal(n, 2);   /* "ab\xffcd" has no token for \xff: [UNK]; so is "\xc3" */
    assert_int_equal(ids[0], unk);
    assert_int_equal(offs[0], 0); assert_int_equal(offs[1], 5);
    assert_int_equal(ids[1], unk);
    assert_int_equal(offs[2], 6); assert_int_equal(offs[3], 7);
    qs_llm_vocab_free(&v);
    free(s);

    json_object_set_new(json_object_get(base, "model"), "max_input_chars_per_word", json_integer(1 << 30));
    s = json_dumps(base, JSON_COMPACT);
    assert_int_equal(load_json_tok(s, &v, &e), 0);
    size_t big = 1 << 18;
    char *w = malloc(big);
    for (size_t k = 0; k < big; k++) w[k] = "the"[k % 3];
    clock_t t0 = clock();
    n = qs_llm_tokenize_offs(&v, NULL, w, big, ids, offs, CAP, &e);
    double sec = (double)(clock() - t0) / CLOCKS_PER_SEC;
    print_message("# a 256 KiB word: %d tokens in %.3f s%s\n", n, sec, n < 0 ? e.msg : "");
    assert_true(n > 0);
    assert_int_equal(offs[2 * n - 1], big);
    assert_true(sec < 5.0);
    free(w);
    qs_llm_vocab_free(&v);
    free(s);

    json_object_set_new(json_object_get(base, "model"), "unk_token", json_integer(3));
    s = json_dumps(base, JSON_COMPACT);
    assert_int_equal(load_json_tok(s, &v, &e), 0);   /* loads; tokenizing names the fault and the file */
    assert_int_equal(qs_llm_tokenize(&v, "abc", 3, ids, CAP, &e), -1);
    assert_non_null(strstr(e.msg, "wp_tok.json: WordPiece model: unk_token"));
    qs_llm_vocab_free(&v);
    free(s);
    json_decref(base);
}

/* 64-bit FNV-1a of (id, a, b) as little-endian uint32, as make_wordpiece_vectors.py computes it. */
static uint64_t fnv(int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int k = 0; k < n; k++) {
        uint32_t w[3] = {(uint32_t)ids[k], offs[2 * k], offs[2 * k + 1]};
        for (int q = 0; q < 3; q++)
            for (int b = 0; b < 4; b++) { h ^= (w[q] >> (8 * b)) & 0xFF; h *= 0x100000001b3ull; }
    }
    return h;
}

/* The real all-MiniLM-L6-v2 tokenizer (tokenizer.json, and vocab.txt + tokenizer_config.json). */
static void test_minilm(void **st)
{
    (void)st;
    char tj[512], vt[512], txt[512];
    snprintf(tj, sizeof tj, "%s/models/minilm/tokenizer.json", data_dir());
    snprintf(vt, sizeof vt, "%s/models/minilm/vocab.txt", data_dir());
    if (access(tj, R_OK) || access(vt, R_OK)) tu_skip("data: MiniLM's tokenizer.json and vocab.txt are absent (make data)");
    json_t *x = load("fixtures/llm/wp_minilm.json"), *au = json_object_get(x, "austen");
    snprintf(txt, sizeof txt, "%s/text/%s", data_dir(), json_string_value(json_object_get(au, "file")));
    size_t len;
    char *text = (char *)tu_slurp(txt, &len);
    if (!text) { json_decref(x); tu_skip("data: the Austen novels are absent (make data)"); }
    size_t want_bytes = (size_t)json_integer_value(json_object_get(au, "bytes"));
    assert_true(len >= want_bytes);
    const char *paths[2] = {tj, vt};
    for (int p = 0; p < 2; p++) {
        qs_llm_file f;
        qs_err e = {{0}};
        int rc = qs_llm_load_tokenizer(paths[p], &f, &e);
        if (rc) print_message("# %s\n", e.msg);
        assert_int_equal(rc, 0);
        assert_int_equal(compare(&f.v, json_object_get(x, "cases"), json_object_get(x, "expected"), paths[p]), 0);
        clock_t t0 = clock();
        int n = qs_llm_tokenize_offs(&f.v, txt, text, want_bytes, ids, offs, CAP, &e);
        double sec = (double)(clock() - t0) / CLOCKS_PER_SEC;
        if (n < 0) print_message("# %s\n", e.msg);
        char got[32];
        snprintf(got, sizeof got, "%016llx", (unsigned long long)fnv(n > 0 ? n : 0));
        print_message("# %s: %s %zu bytes -> %d tokens in %.3f s, digest %s\n", paths[p], txt, want_bytes, n, sec, got);
        if (strcmp(got, json_string_value(json_object_get(au, "fnv1a64"))))
            print_message("# digest differs: run tests/llm/make_wordpiece_vectors.py with MiniLM's directory for "
                          "build/wp_minilm_austen.json, the ids and offsets to compare\n");
        assert_int_equal(n, json_integer_value(json_object_get(au, "tokens")));
        assert_string_equal(got, json_string_value(json_object_get(au, "fnv1a64")));
        qs_llm_file_free(&f);
    }
    free(text);
    json_decref(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variants),
        cmocka_unit_test(test_vocab_txt),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_minilm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
