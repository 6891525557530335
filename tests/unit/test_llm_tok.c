/*
** The byte-level BPE tokenizer (store/llm_tok.c, llm_pretok.c) against Hugging Face `tokenizers`:
** the cases of fixtures/llm/tok_cases.txt (non-ASCII scripts, emoji and ZWJ sequences, combining
** marks, digit runs, contractions, whitespace runs, added tokens) under every pre-tokenizer variant
** of fixtures/llm/tok_expected.json, with the small BPE model of fixtures/llm/tok_bpe.json whose
** merges cross every piece boundary (tests/llm/make_tok_vectors.py writes both), and with SmolLM2's
** real vocabulary when `make data` has fetched it.
*/
#include "test_util.h"

#include <jansson.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../store/llm_load.h"
#include "../../store/llm_tok.h"

#define SMOLLM2 "../data/models/SmolLM2-135M-Instruct.Q4_1.gguf"

static int32_t ids[4096], ids2[4096];
static uint32_t offs[8192];

/* qs_llm_tokenize_offs gives the same ids, and spans in order that do not overlap: each token's bytes
** are the text's bytes [a, b) (after a space ByteLevel's add_prefix_space added); when the ids decode
** to the text (no Split step removed any), the spans tile it.  1 when all hold. */
static int spans_ok(const qs_llm_vocab *v, const char *text, int n, const char *label, size_t ci)
{
    qs_err e = {{0}};
    size_t len = strlen(text);
    int n2 = qs_llm_tokenize_offs(v, NULL, text, len, ids2, offs, 4096, &e);
    if (n2 != n || memcmp(ids, ids2, (size_t)(n > 0 ? n : 0) * sizeof *ids)) {
        print_message("# %s: case %zu: ids with offsets differ (%d vs %d)\n", label, ci, n2, n);
        return 0;
    }
    uint32_t at = 0;
    static char all[65536];   /* the ids decoded: when they give back the text, the spans must tile it */
    size_t al = 0;
    for (int k = 0; k < n && al + 600 < sizeof all; k++) al += qs_llm_detok(v, ids[k], all + al, sizeof all - al);
    int tiles = (al == len && !memcmp(all, text, len)) || (al == len + 1 && all[0] == ' ' && !memcmp(all + 1, text, len));
    for (int k = 0; k < n; k++) {
        char tok[512];
        size_t tl = qs_llm_detok(v, ids[k], tok, sizeof tok);
        uint32_t a = offs[2 * k], b = offs[2 * k + 1];
        int ok = (tiles ? a == at : a >= at) && b >= a && b <= len && tl >= b - a && tl - (b - a) <= 1 &&
                 !memcmp(tok + tl - (b - a), text + a, b - a);
        if (!ok) {
            print_message("# %s: case %zu token %d (id %d '%s'): span [%u, %u), expected start %u\n", label, ci, k,
                          ids[k], tok, a, b, at);
            return 0;
        }
        at = b;
    }
    if (tiles && n > 0 && at != len) { print_message("# %s: case %zu: spans end at %u of %zu\n", label, ci, at, len); return 0; }
    return 1;
}

/* Tokenize every case and compare with want (array of id arrays); returns the number of mismatches. */
static int compare(const qs_llm_vocab *v, json_t *cases, json_t *want, const char *label)
{
    size_t i;
    json_t *c;
    int bad = 0;
    json_array_foreach(cases, i, c) {
        const char *text = json_string_value(c);
        json_t *w = json_array_get(want, i);
        qs_err e = {{0}};
        int n = qs_llm_tokenize(v, text, strlen(text), ids, 4096, &e);
        int same = n == (int)json_array_size(w);
        for (int k = 0; same && k < n; k++) same = ids[k] == json_integer_value(json_array_get(w, (size_t)k));
        if (same && !spans_ok(v, text, n, label, i)) same = 0;
        if (!same) {
            print_message("# %s: case %zu '%s': %d ids%s%s, want %zu\n", label, i, text, n, n < 0 ? ": " : "",
                          n < 0 ? e.msg : "", json_array_size(w));
            bad++;
        }
    }
    return bad;
}

static void test_hf_variants(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/tok_bpe.json", &f, &e), 0);
    assert_true(f.v.byte_level);
    json_error_t je;
    json_t *j = json_load_file("fixtures/llm/tok_expected.json", 0, &je);
    assert_non_null(j);
    json_t *cases = json_object_get(j, "cases"), *var;
    assert_true(json_array_size(cases) >= 50);
    char *orig = f.v.pre_json;
    size_t i;
    int bad = 0, nvar = 0;
    json_array_foreach(json_object_get(j, "variants"), i, var) {
        const char *name = json_string_value(json_object_get(var, "name"));
        json_t *want = json_object_get(var, "ids");
        f.v.pre_json = json_dumps(json_object_get(var, "pre_tokenizer"), JSON_COMPACT);
        f.v.ignore_merges = json_is_true(json_object_get(var, "ignore_merges"));
        assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
        bad += compare(&f.v, cases, want, name);
        free(f.v.pre_json);
        /* the same pre-tokenizer from the GGUF tokenizer.ggml.pre family name */
        const char *fam = json_string_value(json_object_get(var, "gguf_pre"));
        if (fam) {
            char label[64];
            snprintf(label, sizeof label, "GGUF pre '%s'", fam);
            f.v.pre_json = NULL;
            f.v.ignore_merges = 0;
            snprintf(f.v.pre, sizeof f.v.pre, "%s", fam);
            assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
            bad += compare(&f.v, cases, want, label);
        }
        nvar++;
    }
    f.v.pre_json = orig;
    print_message("# %zu cases x %d pre-tokenizer variants against HF tokenizers, %d mismatches\n",
                  json_array_size(cases), nvar, bad);
    assert_int_equal(bad, 0);
    assert_true(nvar >= 10);
    json_decref(j);
    qs_llm_file_free(&f);
}

/* SmolLM2's real vocabulary and merges (in the GGUF that `make data` fetches). */
static void test_smollm2(void **st)
{
    (void)st;
    if (access(SMOLLM2, R_OK)) {
        print_message("# %s absent (make data): SmolLM2's own vocabulary is not checked\n", SMOLLM2);
        return;
    }
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf(SMOLLM2, &f, &e), 0);
    json_error_t je;
    json_t *j = json_load_file("fixtures/llm/tok_smollm2.json", 0, &je), *c;
    assert_non_null(j);
    json_t *cases = json_array(), *want = json_array();
    size_t i;
    json_array_foreach(json_object_get(j, "cases"), i, c) {
        json_array_append(cases, json_object_get(c, "text"));
        json_array_append(want, json_object_get(c, "ids"));
    }
    assert_int_equal(compare(&f.v, cases, want, "SmolLM2"), 0);
    print_message("# SmolLM2: %zu cases equal to HF tokenizers\n", json_array_size(cases));
    json_decref(cases); json_decref(want); json_decref(j);
    qs_llm_file_free(&f);
}

static size_t detok_all(const qs_llm_vocab *v, int n, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (int k = 0; k < n; k++) o += qs_llm_detok(v, ids[k], out + o, cap - o);
    return o;
}

/* Invalid UTF-8 (which `tokenizers` cannot take) becomes byte-level tokens that spell the bytes. */
static void test_invalid_utf8(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/tok_bpe.json", &f, &e), 0);
    static const char *raw[] = {"\xff", "caf\xc3", "a\x80\x80 b\xed\xa0\x80 12\xf4\x90\x80\x80 \xc0\xaf", "\xe2\x82\xac\xe2\x82",
                                "<|im_end|>\xfe<|im_start|>", "  \xff  x"};
    for (size_t r = 0; r < sizeof raw / sizeof *raw; r++) {
        int n = qs_llm_tokenize(&f.v, raw[r], strlen(raw[r]), ids, 4096, &e);
        assert_true(n > 0);
        char back[256];
        size_t len = detok_all(&f.v, n, back, sizeof back);
        assert_int_equal(len, strlen(raw[r]));
        assert_memory_equal(back, raw[r], len);
    }
    /* an invalid byte is never inside a regex match: "a\xff" gives the pieces "a" and "\xff" */
    int n = qs_llm_tokenize(&f.v, "a\xff", 2, ids, 4096, &e);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], qs_llm_vocab_find(&f.v, "a"));
    assert_int_equal(ids[1], qs_llm_vocab_find(&f.v, "\xc3\xbf"));   /* byte 0xff is spelled U+00FF */
    assert_int_equal(qs_llm_tokenize(&f.v, "", 0, ids, 4096, &e), 0);
    qs_llm_file_free(&f);
}

/* Pre-tokenizers qscope cannot run are errors naming them, never a silent ASCII fallback. */
static void test_errors(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/tok_bpe.json", &f, &e), 0);
    char *orig = f.v.pre_json;
    struct { const char *json, *msg; } bad[] = {
        {"{\"type\":\"UnicodeScripts\"}", "'UnicodeScripts' is not supported"},
        {"{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\",\"invert\":false}", "pattern /(/"},
        {"{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Sideways\",\"invert\":false}", "unknown behavior"},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},{\"type\":\"Digits\"}]}", "after ByteLevel"},
        {"{\"type\":", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        f.v.pre_json = (char *)bad[i].json;
        assert_int_equal(qs_llm_tok_prepare(&f.v, "tok.json", &e), 0);
        assert_int_equal(qs_llm_tokenize(&f.v, "abc", 3, ids, 4096, &e), -1);
        if (!strstr(e.msg, bad[i].msg)) print_message("# %s -> %s\n", bad[i].json, e.msg);
        assert_non_null(strstr(e.msg, bad[i].msg));
        assert_true(!strncmp(e.msg, "tok.json: ", 10));   /* the tokenizer's file, not the text, is at fault */
    }
    f.v.pre_json = NULL;
    snprintf(f.v.pre, sizeof f.v.pre, "chatglm-bpe");
    assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
    assert_int_equal(qs_llm_tokenize(&f.v, "abc", 3, ids, 4096, &e), -1);
    assert_non_null(strstr(e.msg, "'chatglm-bpe' is not known"));
    f.v.pre_json = orig;
    assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
    assert_int_equal(qs_llm_tokenize(&f.v, "abc def ghi jkl", 15, ids, 2, &e), -1);
    assert_non_null(strstr(e.msg, "more than 2 tokens"));
    qs_llm_file_free(&f);
    /* a tokenizer.json without pre_tokenizer is refused, not run as GPT-2 */
    json_error_t je;
    json_t *j = json_load_file("fixtures/llm/tok_bpe.json", 0, &je);
    assert_non_null(j);
    json_object_set_new(j, "pre_tokenizer", json_null());
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%.200s/qs-tok-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : P_tmpdir);
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(json_dump_file(j, tmp, JSON_COMPACT), 0);
    json_decref(j);
    assert_int_equal(qs_llm_load_tokenizer(tmp, &f, &e), 0);
    unlink(tmp);
    assert_int_equal(qs_llm_tokenize(&f.v, "abc", 3, ids, 4096, &e), -1);
    assert_non_null(strstr(e.msg, "'hf-none' is not known"));
    qs_llm_file_free(&f);
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/no-such.json", &f, &e), -1);
    assert_non_null(strstr(e.msg, "no-such.json"));
}

/* Megabytes of text, one 1 MB piece and a 1 MB whitespace run: linear-ish, not quadratic (a loose
** bound: the machine may be loaded), and the ids spell the text back. */
static void test_large(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/tok_bpe.json", &f, &e), 0);
    json_error_t je;
    json_t *j = json_load_file("fixtures/llm/tok_expected.json", 0, &je), *c;
    assert_non_null(j);
    size_t cap = 4u << 20, len = 0, i;
    char *text = malloc(cap);
    assert_non_null(text);
    for (int rep = 0; len < (3u << 20); rep++)
        json_array_foreach(json_object_get(j, "cases"), i, c) {
            const char *s = json_string_value(c);
            if (strstr(s, "<|") || len + strlen(s) + 16 > cap) continue;
            len += (size_t)snprintf(text + len, cap - len, "%s %d\n", s, rep % 97);
        }
    int32_t *out = malloc((size_t)len * sizeof *out);
    assert_non_null(out);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int n = qs_llm_tokenize(&f.v, text, len, out, (int)len, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    print_message("# %zu bytes -> %d tokens in %.3f s\n", len, n, sec);
    assert_true(n > 0);
    assert_true(sec < 20.0);
    /* the ids spell the text back, byte for byte */
    char *back = malloc(len + 64);
    assert_non_null(back);
    size_t o = 0;
    for (int k = 0; k < n; k++) o += qs_llm_detok(&f.v, out[k], back + o, len + 64 - o);
    assert_int_equal(o, len);
    assert_memory_equal(back, text, len);
    free(back);
    /* one piece of 1 MB (no pre-tokenizer boundary) and a 1 MB run of spaces */
    memset(text, 'a', 1u << 20);
    for (size_t k = 0; k < (1u << 20); k += 7) text[k] = 'b';
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_true(qs_llm_tokenize(&f.v, text, 1u << 20, out, (int)len, &e) > 0);
    memset(text, ' ', 1u << 20);
    assert_true(qs_llm_tokenize(&f.v, text, 1u << 20, out, (int)len, &e) > 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    print_message("# 1 MB piece + 1 MB of spaces in %.3f s\n", sec);
    assert_true(sec < 20.0);
    free(out); free(text);
    json_decref(j);
    qs_llm_file_free(&f);
}

/* A Split regex that rescans the rest of the text at every position is quadratic (the old code spun
** ~6 minutes on this 1 MB; alarm() turns such a spin into a failure): it is refused by the work
** bound, with a message naming the tokenizer's file, the pattern, the text and the byte offset. */
static void test_regex_budget(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/tok_bpe.json", &f, &e), 0);
    char *orig = f.v.pre_json;
    f.v.pre_json = (char *)"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a(?=a*$)\"},"
                           "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"use_regex\":false}]}";
    assert_int_equal(qs_llm_tok_prepare(&f.v, "tok.json", &e), 0);
    size_t len = 1u << 20;
    char *text = malloc(len);
    int32_t *out = malloc(len * sizeof *out);
    assert_true(text && out);
    memset(text, 'a', len);
    alarm(60);
    assert_int_equal(qs_llm_tokenize_named(&f.v, "big.txt", text, len, out, (int)len, &e), -1);
    alarm(0);
    print_message("# %s\n", e.msg);
    assert_non_null(strstr(e.msg, "tok.json: pre-tokenizer regex /a(?=a*$)/ needs too much backtracking on big.txt (byte offset "));
    assert_non_null(strstr(e.msg, "); refusing"));
    /* the same pattern on a short text is fine, and so is an ordinary pattern on a long one */
    assert_int_equal(qs_llm_tokenize(&f.v, "aaaa", 4, out, 16, &e), 4);
    f.v.pre_json = orig;
    assert_int_equal(qs_llm_tok_prepare(&f.v, "tok.json", &e), 0);
    for (size_t k = 0; k < len; k++) text[k] = "ab 1,\n"[k % 6];
    assert_true(qs_llm_tokenize(&f.v, text, len, out, (int)len, &e) > 0);
    /* exponential backtracking on a few bytes: refused too, not PCRE2 error -47 */
    f.v.pre_json = (char *)"{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(a|aa)+$\"},\"behavior\":\"Isolated\",\"invert\":false}";
    assert_int_equal(qs_llm_tok_prepare(&f.v, "tok.json", &e), 0);
    memset(text, 'a', 200);
    text[200] = 'b';
    alarm(60);
    assert_int_equal(qs_llm_tokenize(&f.v, text, 201, out, (int)len, &e), -1);
    alarm(0);
    assert_non_null(strstr(e.msg, "needs too much backtracking on the text (byte offset 0)"));
    /* a tokenizer state keeps its pre-tokenizer scan from call to call (LoPT's chunks): each call's
    ** message still names that call's text */
    qs_llm_tok_state *ts = qs_llm_tok_state_new(NULL);
    assert_non_null(ts);
    assert_true(qs_llm_tokenize_state(ts, &f.v, "first.txt", "aaaa", 4, out, NULL, 16, &e) > 0);
    assert_int_equal(qs_llm_tokenize_state(ts, &f.v, "second.txt", text, 201, out, NULL, (int)len, &e), -1);
    assert_non_null(strstr(e.msg, "needs too much backtracking on second.txt (byte offset 0)"));
    assert_int_equal(qs_llm_tokenize_state(ts, &f.v, NULL, text, 201, out, NULL, (int)len, &e), -1);
    assert_non_null(strstr(e.msg, "needs too much backtracking on the text (byte offset 0)"));
    qs_llm_tok_state_free(ts);
    f.v.pre_json = orig;
    free(text); free(out);
    qs_llm_file_free(&f);
}

/* 50,000 added tokens sharing their first bytes and 1 MB of text made of those bytes: the old
** linear scan (50,000 comparisons per byte, minutes) is killed by alarm(); the trie takes the
** length of the match.  The matches are leftmost-longest and equal strings give the smallest id. */
static void test_added_many(void **st)
{
    (void)st;
    json_error_t je;
    json_t *j = json_load_file("fixtures/llm/tok_bpe.json", 0, &je);
    assert_non_null(j);
    json_t *added = json_object_get(j, "added_tokens");
    int base = 2000;
    char w[32];
    for (int i = 0; i < 50000; i++) {
        snprintf(w, sizeof w, "<<%d>", i);
        json_array_append_new(added, json_pack("{s:i,s:s,s:b}", "id", base + i, "content", w, "special", 0));
    }
    json_array_append_new(added, json_pack("{s:i,s:s,s:b}", "id", base + 50000, "content", "<<1>", "special", 0));
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%.200s/qs-tok-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : P_tmpdir);
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(json_dump_file(j, tmp, JSON_COMPACT), 0);
    json_decref(j);
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer(tmp, &f, &e), 0);
    unlink(tmp);
    size_t len = 1u << 20;
    char *text = malloc(len + 1);
    int32_t *out = malloc(len * sizeof *out);
    assert_true(text && out);
    memset(text, '<', len);
    memcpy(text + len - 16, "<<12>x<<1><<123>", 16);
    alarm(60);
    int n = qs_llm_tokenize(&f.v, text, len, out, (int)len, &e);
    alarm(0);
    assert_true(n > 3);
    assert_int_equal(out[n - 1], base + 123);   /* longest: "<<123>", not "<<12" + ... */
    assert_int_equal(out[n - 2], base + 1);     /* "<<1>" twice in the file: the smaller id */
    assert_int_equal(out[n - 4], base + 12);
    free(text); free(out);
    qs_llm_file_free(&f);
}

/* kB of the process's resident set: VmRSS, or its peak VmHWM */
static long vm_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) v = atol(line + strlen(key) + 1);
    if (f) fclose(f);
    return v;
}

/* Load path in a child process and measure its peak RSS over the file size (the child checks the
** result: want_n tokens, or a refusal containing want_msg).  Returns the child's verdict. */
static int load_peak(const char *path, long size, double max_ratio, int want_n, int want_nm, const char *want_msg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {   /* the child measures its own peak */
        qs_llm_file lf;
        qs_err e = {{0}};
        FILE *c = fopen("/proc/self/clear_refs", "w");   /* "5": reset the peak to the current RSS */
        if (c) { fputs("5", c); fclose(c); }
        long before = vm_kb("VmRSS:");
        int rc = qs_llm_load_tokenizer(path, &lf, &e);
        long peak = vm_kb("VmHWM:");
        int ok = want_msg ? rc == -1 && strstr(e.msg, want_msg) != NULL : rc == 0 && lf.v.n == want_n && lf.v.nmerges == want_nm;
        if (ok && !want_msg) {
            char want[32];
            snprintf(want, sizeof want, "\xc4\xa0t%x", 12345);
            ok = qs_llm_vocab_find(&lf.v, want) == 12345;
        }
        double ratio = (double)(peak - before) * 1024.0 / (double)size;
        fprintf(stderr, "# load: rc %d, %d tokens, %d merges, peak +%ld kB = %.2f x the file%s%s\n", rc, lf.v.n,
                lf.v.nmerges, peak - before, ratio, rc ? ": " : "", rc ? e.msg : "");
        _exit(ok && ratio < max_ratio ? 0 : 1);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) return 0;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static FILE *tmp_file(char *path, size_t cap)
{
    snprintf(path, cap, "%.200s/qs-tok-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : P_tmpdir);
    int fd = mkstemp(path);
    return fd >= 0 ? fdopen(fd, "w") : NULL;
}

/* A 20 MB tokenizer.json (300,000 tokens, 600,000 merges) loads in a small multiple of its size (the
** jansson tree took 10 to 20 times it), measured as the peak RSS of a child process (the mapped file
** counts once); 2^24 + 1 merges are refused before anything is allocated for them. */
static void test_json_memory(void **st)
{
    (void)st;
    char tmp[256];
    FILE *f = tmp_file(tmp, sizeof tmp);
    assert_non_null(f);
    enum { NV = 300000, NM = 600000 };
    fprintf(f, "{\"added_tokens\":[{\"id\":0,\"content\":\"<|endoftext|>\",\"special\":true}],\"pre_tokenizer\":"
               "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int i = 1; i < NV; i++) fprintf(f, "%s\"\\u0120t%x\":%d", i > 1 ? "," : "", i, i);
    fprintf(f, "},\"merges\":[");
    for (int i = 0; i < NM; i++) fprintf(f, "%s[\"\\u0120t%x\",\"t%x\"]", i ? "," : "", i % NV + 1, (i * 7) % NV + 1);
    fprintf(f, "]}}");
    long size = ftell(f);
    assert_int_equal(fclose(f), 0);
    print_message("# tokenizer.json of %.1f MB\n", (double)size / 1e6);
    int ok = load_peak(tmp, size, 4.0, NV, NM, NULL);
    unlink(tmp);
    assert_true(ok);
    /* too many merges: counted, refused, nothing allocated for them (peak: the mapped file) */
    f = tmp_file(tmp, sizeof tmp);
    assert_non_null(f);
    fprintf(f, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[");
    static char chunk[3 << 16];
    for (size_t k = 0; k < sizeof chunk; k += 3) memcpy(chunk + k, "\"\",", 3);
    for (int i = 0; i < (1 << 24) / (1 << 16) + 1; i++) fwrite(chunk, 1, sizeof chunk, f);
    fprintf(f, "\"\"]}}");
    size = ftell(f);
    assert_int_equal(fclose(f), 0);
    ok = load_peak(tmp, size, 1.5, 0, 0, "too many merges (more than 16777216)");
    unlink(tmp);
    assert_true(ok);
}

/* The tokenizer.json scanner is strict JSON, as jansson was, and unescapes like it. */
static void test_json_strict(void **st)
{
    (void)st;
    const char *head = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,";
    struct { const char *tail, *msg; } cases[] = {
        {"\"b\\u00e9\\ud83d\\ude00\\n\":1},\"merges\":[\"a b\\u00e9\\ud83d\\ude00\\n\"]}}", NULL},
        {"\"b\":1}}} x", "invalid JSON at line 1: end of file expected"},
        {"\"b\\q\":1}}}", "invalid escape"},
        {"\"b\\u0000\":1}}}", "invalid \\u escape"},
        {"\"b\\ud83d\":1}}}", "invalid \\u escape"},
        {"\"b\xff\":1}}}", "invalid UTF-8"},
        {"\"b\xc0\xaf\":1}}}", "invalid UTF-8"},
        {"\"b\":1}", "',' or '}' expected"},
        {"\"b\":01}}}", "',' or '}' expected"},
        {"\"b\":1.5}}}", "vocabulary entry \"b\" has id outside"},
        {"\"b\":1,\"b\":2}}}", "model.vocab has the token \"b\" twice"},
        {"\"b\":1},\"vocab\":{}}}", "key \"vocab\" appears twice"},
        {"\"b\":1},\"merges\":[[\"a\"]]}}", "merges[0] is neither"},
        {"\"b\":1},\"merges\":[1]}}", "merges[0] is neither"},
        {"\"b\":9000}}}", "token ids go up to 9000 but only 2 tokens are defined"},
        {"\"b\":1},\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}",
         "nested too deeply"},
        {"\"b\":1}},\"decoder\":{\"type\":\"ByteLevel\"},\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"}}", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char tmp[256];
        FILE *f = tmp_file(tmp, sizeof tmp);
        assert_non_null(f);
        fprintf(f, "%s%s", head, cases[i].tail);
        assert_int_equal(fclose(f), 0);
        qs_llm_file lf;
        qs_err e = {{0}};
        int rc = qs_llm_load_tokenizer(tmp, &lf, &e);
        unlink(tmp);
        if (cases[i].msg ? rc != -1 || !strstr(e.msg, cases[i].msg) || strncmp(e.msg, tmp, strlen(tmp)) : rc != 0)
            print_message("# case %zu: rc %d: %s\n", i, rc, e.msg);
        if (!cases[i].msg) {
            assert_int_equal(rc, 0);
            if (i == 0) {
                assert_string_equal(lf.v.text + lf.v.off[1], "b\xc3\xa9\xf0\x9f\x98\x80\n");
                assert_string_equal(lf.v.mtext + lf.v.moff[0], "a b\xc3\xa9\xf0\x9f\x98\x80\n");
            } else {   /* a regex PCRE2 cannot compile: the file loads, tokenizing names it */
                assert_int_equal(qs_llm_tokenize(&lf.v, "ab", 2, ids, 8, &e), -1);
                assert_true(!strncmp(e.msg, tmp, strlen(tmp)) && strstr(e.msg, "pre-tokenizer pattern /(/"));
            }
            qs_llm_file_free(&lf);
        } else {
            assert_int_equal(rc, -1);
            assert_non_null(strstr(e.msg, cases[i].msg));
            assert_true(!strncmp(e.msg, tmp, strlen(tmp)));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_variants),
        cmocka_unit_test(test_smollm2),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_regex_budget),
        cmocka_unit_test(test_added_many),
        cmocka_unit_test(test_json_memory),
        cmocka_unit_test(test_json_strict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
