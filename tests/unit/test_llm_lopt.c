/*
** LoPT (store/llm_lopt.h) against the sequential tokenizer: ids and byte spans must be identical for
** random texts over an adversarial alphabet (spaces, CRLF, digits, punctuation, contractions, CJK,
** emoji with ZWJ, combining marks, invalid UTF-8, added tokens), for many chunk / overlap / thread
** settings, with the BPE of tests/fixtures/llm/tok_bpe.json under each pre-tokenizer variant of
** tok_expected.json and each GGUF family, and with SmolLM2 on Austen when `make data` has run.
** The merge must also be exercised: for the tokenizers the proof covers, anchors are taken and no
** anchor ever differs (a difference would mean the cut-position analysis is wrong).
*/
#include "test_util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../store/llm_load.h"
#include "../../store/llm_lopt.h"

#define SMOLLM2 "../data/models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define AUSTEN "../data/text/emma.txt"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* Pieces of adversarial text; words separated by single spaces make cut positions, the rest breaks them. */
static const char *const kAlpha[] = {
    "the", "word", "Hello", "a", "it's", "we'll", "I'M", " ", " ", " ", " ", "  ", "   ", "\n", "\n\n", "\r\n",
    "\r", "\t", " \n", "12345678901234567890", "7", "3.14", ".", ",", ";", "!", "?", "...", "\"", "'", "(", ")",
    "-", "--", "中文字符", "日本語", "👩\u200d👩\u200d👧", "👍🏽", "e\u0301", "\u0301", "\xff", "\xc3", "\x80",
    "\xe4\xb8", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_", "<|im_", "\u00a0", "\u3000",
    "Straße", "ǅ", "x", "zz", "Zz", "0", "$", "é", "ñ",
    "\n中文", "。\n日本", "字\n\n字", "x\n字", "。", "\u3000\n字", "字\n", "\n\n", "、\nカナ", "한국어\n",
    /* for normalizers: controls (clean_text), accents and marks after a space (NFD, strip_accents),
    ** compatibility forms (NFKC), case, the ▁ of Metaspace, BERT's special tokens */
    "\x01", "\x7f", " \u0301x", "\t", "\v", "É", "ÉCOLE", "\ufb01", "\u2126", "ｶﾞ", "\u00b4", "\u1100\u1161",
    "\u0301\u0327", "Σ", "ΣΑΣ", "\u2581", "\u2581x", "[MASK]", "[CLS]", "``", "''", "\u200b", "\ufeff",
};
/* Lines of CJK text (cut positions after newlines only) */
static const char *const kCjk[] = {"中文字符", "日本語", "\n", "。\n", "、", "カタカナ", "한국어", "\n\n", " \n", "\u3000"};
#define NCJK (sizeof kCjk / sizeof *kCjk)
#define NALPHA (sizeof kAlpha / sizeof *kAlpha)

/* A random text of about len bytes: mostly words and single spaces (so anchors exist), with bursts of
** the adversarial pieces. */
static size_t make_text(char *buf, size_t len)
{
    size_t n = 0;
    int mode = (int)rnd(5);   /* 0: prose, 1: mixed, 2: adversarial only, 3: one repeated piece, 4: CJK lines */
    const char *rep = kAlpha[rnd(NALPHA)];
    while (n < len) {
        const char *p;
        if (mode == 3) p = rnd(50) ? rep : kAlpha[rnd(NALPHA)];
        else if (mode == 4) p = rnd(20) ? kCjk[rnd(NCJK)] : kAlpha[rnd(NALPHA)];
        else if (mode == 2 || (mode == 1 && rnd(3) == 0) || (mode == 0 && rnd(12) == 0)) p = kAlpha[rnd(NALPHA)];
        else p = rnd(2) ? kAlpha[rnd(7)] : " ";
        size_t k = strlen(p);
        if (n + k > len) break;
        memcpy(buf + n, p, k);
        n += k;
    }
    return n;
}

/* LoPT with o equals the sequential tokenizer on text (ids and spans); returns 1 when it differs.
** *anchors and *diff count merged boundaries and anchors that differed. */
static int check(const qs_llm_vocab *v, const char *text, size_t len, const qs_lopt_opts *o, size_t *anchors,
                 size_t *diff, const char *label)
{
    qs_lopt_opts seq = {1, 0, 0};
    int32_t *a = NULL, *b = NULL;
    uint32_t *ao = NULL, *bo = NULL;
    size_t na = 0, nb = 0;
    qs_lopt_stats st;
    qs_err e = {{0}}, e2 = {{0}};
    int ra = qs_lopt_tokenize(v, "t", text, len, &seq, &a, &ao, &na, NULL, &e);
    int rb = qs_lopt_tokenize(v, "t", text, len, o, &b, &bo, &nb, &st, &e2);
    int bad = ra != rb || na != nb || (ra == 0 && (memcmp(a, b, na * sizeof *a) || memcmp(ao, bo, 2 * na * sizeof *ao)));
    if (ra && !bad && strcmp(e.msg, e2.msg)) bad = 1;
    int32_t *c = NULL;   /* without spans (the chunks skip them): the same ids */
    size_t nc = 0;
    int rc = qs_lopt_tokenize(v, "t", text, len, o, &c, NULL, &nc, NULL, &e2);
    if (rc != ra || (ra == 0 && (nc != na || memcmp(a, c, na * sizeof *a)))) bad = 1;
    free(c);
    *anchors += st.anchors;
    if (st.why && strstr(st.why, "anchor check")) ++*diff;
    if (bad)
        print_message("# %s: LoPT (chunk %zu, overlap %zu, threads %d) differs on %zu bytes (%zu vs %zu tokens)\n", label,
                      o->chunk, o->overlap, o->threads, len, na, nb);
    free(a); free(b); free(ao); free(bo);
    return bad;
}

/* Random texts for one tokenizer; returns the number of differences.  proved: the tokenizer is one
** the cut rule covers (anchors must be taken, none may differ). */
static int property(const qs_llm_vocab *v, int texts, const char *label, int proved)
{
    static const size_t chunks[] = {8, 13, 64, 100, 257, 1024};
    static const size_t overlaps[] = {1, 3, 16, 64, 500};
    static const int threads[] = {2, 3, 8, 16, 0};
    char *buf = malloc(8192);
    assert_non_null(buf);
    int bad = 0;
    size_t anchors = 0, diff = 0;
    for (int t = 0; t < texts; t++) {
        size_t len = make_text(buf, 1 + rnd(t % 10 == 0 ? 8000 : 1500));
        for (int k = 0; k < 4; k++) {
            qs_lopt_opts o = {threads[rnd(5)], chunks[rnd(6)], overlaps[rnd(5)]};
            bad += check(v, buf, len, &o, &anchors, &diff, label);
        }
    }
    print_message("# %s: %d texts, %zu anchors, %zu differing anchors, %d differences\n", label, texts, anchors, diff, bad);
    if (proved) {
        assert_true(anchors > 0);
        assert_int_equal(diff, 0);
    } else {
        assert_int_equal(anchors, 0);
    }
    free(buf);
    return bad;
}

/* The fixture BPE under every pre-tokenizer of tok_expected.json, and every GGUF family. */
static void test_fixture_variants(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/tok_bpe.json", &f, &e), 0);
    json_error_t je;
    json_t *j = json_load_file("fixtures/llm/tok_expected.json", 0, &je);
    assert_non_null(j);
    char *orig = f.v.pre_json;
    json_t *var;
    size_t i;
    int bad = 0, nproved = 0;
    json_array_foreach(json_object_get(j, "variants"), i, var) {
        const char *name = json_string_value(json_object_get(var, "name"));
        f.v.pre_json = json_dumps(json_object_get(var, "pre_tokenizer"), JSON_COMPACT);
        f.v.ignore_merges = json_is_true(json_object_get(var, "ignore_merges"));
        assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
        /* the variants the cut rule is proved for: GPT-2's, Qwen2's and Llama 3's patterns */
        int proved = strstr(name, "smollm") || strstr(name, "gpt2") || strstr(name, "qwen2") || strstr(name, "llama3") ||
                     strstr(name, "digits");
        nproved += proved;
        bad += property(&f.v, 60, name, proved);
        free(f.v.pre_json);
    }
    static const char *fams[] = {"smollm", "gpt2", "qwen2", "llama-bpe"};
    for (size_t k = 0; k < 4; k++) {
        f.v.pre_json = NULL;
        snprintf(f.v.pre, sizeof f.v.pre, "%s", fams[k]);
        assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
        bad += property(&f.v, 60, fams[k], 1);
    }
    f.v.pre_json = orig;
    assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
    assert_true(nproved >= 5);
    assert_int_equal(bad, 0);
    json_decref(j);
    qs_llm_file_free(&f);
}

/* An added token made of letters (a match can end right at a cut position), and one with a space
** (which the proof does not cover: the text goes sequentially, with the same result). */
static void test_added_tokens(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/tok_bpe.json", &f, &e), 0);
    assert_non_null(f.v.type);
    int id = qs_llm_vocab_find(&f.v, "or");
    assert_true(id > 0);
    f.v.type[id] = 4;
    assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
    assert_int_equal(property(&f.v, 80, "added 'or'", 1), 0);
    /* a token whose text has a space: the same length, so the string table stays valid */
    char *s = f.v.text + f.v.off[id];
    s[0] = ' ';
    assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
    assert_int_equal(property(&f.v, 40, "added ' r'", 0), 0);
    s[0] = 'o';
    qs_llm_file_free(&f);
}

/* Each defaulted and clamped option, and the stats of a plain case. */
static void test_options(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/tok_bpe.json", &f, &e), 0);
    char text[4096];
    size_t n = 0;
    while (n + 40 < sizeof text) n += (size_t)sprintf(text + n, "the word %zu was here, and then. ", n);
    size_t anchors = 0, diff = 0;
    qs_lopt_opts opts[] = {{2, 0, 0}, {0, 64, 0}, {3, 64, 64}, {2, 64, 1000}, {2, 1, 1}, {2, 100000, 0}};
    for (size_t k = 0; k < sizeof opts / sizeof *opts; k++)
        assert_int_equal(check(&f.v, text, n, &opts[k], &anchors, &diff, "options"), 0);
    assert_true(anchors > 0);
    assert_int_equal(diff, 0);
    int32_t *ids = NULL;
    size_t cnt = 0;
    qs_lopt_stats s;
    qs_lopt_opts o = {2, 256, 32};
    assert_int_equal(qs_lopt_tokenize(&f.v, NULL, text, n, &o, &ids, NULL, &cnt, &s, &e), 0);
    assert_true(s.chunks > 10 && s.anchors == s.chunks - 1 && !s.fallback && !s.why);
    free(ids);
    o.threads = 1;   /* the sequential reference: no chunks */
    assert_int_equal(qs_lopt_tokenize(&f.v, NULL, text, n, &o, &ids, NULL, &cnt, &s, &e), 0);
    assert_true(s.chunks == 1 && !s.anchors && !s.fallback);
    free(ids);
    qs_llm_file_free(&f);
}

/* CJK lines without a space: the newline rule gives the anchors (and not with a prefix space). */
static void test_cjk_lines(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/tok_bpe.json", &f, &e), 0);
    char text[8192];
    size_t n = 0;
    for (int i = 0; n + 64 < sizeof text; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%s\n", i % 3 ? "日本語の文章" : "中文字符", i % 2 ? "。" : "");
    size_t anchors = 0, diff = 0;
    qs_lopt_opts o = {2, 256, 16};
    assert_int_equal(check(&f.v, text, n, &o, &anchors, &diff, "CJK lines"), 0);
    assert_true(anchors > 10);
    assert_int_equal(diff, 0);
    char *orig = f.v.pre_json;   /* ByteLevel(add_prefix_space) would put a space before a line's letter */
    f.v.pre_json = "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true}";
    assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
    anchors = 0;
    assert_int_equal(check(&f.v, text, n, &o, &anchors, &diff, "CJK lines, prefix space"), 0);
    assert_int_equal(anchors, 0);
    f.v.pre_json = orig;
    assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
    qs_llm_file_free(&f);
}

/* SmolLM2's tokenizer (GGUF) on Austen and on random texts. */
static void test_smollm2(void **st)
{
    (void)st;
    if (access(SMOLLM2, R_OK) || access(AUSTEN, R_OK)) { tu_skip("data: SmolLM2 or the Austen novels are absent (make data)"); return; }
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load(SMOLLM2, &f, &e), 0);
    FILE *fp = fopen(AUSTEN, "rb");
    assert_non_null(fp);
    size_t cap = 300000;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t n = fread(text, 1, cap, fp);
    fclose(fp);
    size_t anchors = 0, diff = 0;
    static const qs_lopt_opts opts[] = {{2, 64, 0}, {3, 1000, 16}, {8, 4096, 0}, {16, 65536, 64}, {2, 0, 0}};
    int bad = 0;
    for (size_t k = 0; k < sizeof opts / sizeof *opts; k++) bad += check(&f.v, text, n, &opts[k], &anchors, &diff, "emma");
    assert_int_equal(bad, 0);
    assert_int_equal(diff, 0);
    assert_true(anchors > 100);
    assert_int_equal(property(&f.v, 60, "SmolLM2", 1), 0);
    free(text);
    qs_llm_file_free(&f);
}

/* LightTokenizer's merge rule (docs/tokenize.md): chunks [i*lc, (i+1)*lc + lo) tokenized with spans;
** in each overlap the longest run of tokens with identical spans in both neighbours is the anchor; the
** left chunk is kept up to its end, the right one after it.  Returns the merged ids (malloc'ed, *n),
** or NULL when some overlap has no anchor. */
static int32_t *plain_rule(const qs_llm_vocab *v, const char *t, size_t len, size_t lc, size_t lo, size_t *n)
{
    size_t nc = (len + lc - 1) / lc, no = 0;
    int32_t *out = malloc((2 * len + 16) * sizeof *out), *id[2] = {NULL, NULL};
    uint32_t *of[2] = {NULL, NULL};
    int cnt[2] = {0, 0}, start = 0, ok = out != NULL;
    for (size_t i = 0; ok && i < nc; i++) {
        for (int s = i ? 1 : 0; s < 2 && i + (size_t)s < nc; s++) {   /* chunk i (side 0), chunk i+1 (side 1) */
            size_t a = (i + (size_t)s) * lc, b = a + lc + lo > len ? len : a + lc + lo;
            qs_err e = {{0}};
            free(id[s]); free(of[s]);
            id[s] = malloc((2 * (b - a) + 16) * sizeof *id[s]);
            of[s] = malloc((4 * (b - a) + 32) * sizeof *of[s]);
            assert_true(id[s] && of[s]);
            cnt[s] = qs_llm_tokenize_offs(v, NULL, t + a, b - a, id[s], of[s], (int)(2 * (b - a) + 16), &e);
            assert_true(cnt[s] >= 0);
            for (int k = 0; k < 2 * cnt[s]; k++) of[s][k] += (uint32_t)a;
        }
        if (i == nc - 1) {
            for (int k = start; k < cnt[0]; k++) out[no++] = id[0][k];
            break;
        }
        size_t os = (i + 1) * lc, oe = os + lo;
        int best = 0, bl = 0, br = 0;
        for (int x = start; x < cnt[0] && of[0][2 * x + 1] <= oe; x++) {
            if (of[0][2 * x] < os) continue;
            for (int y = 0; y < cnt[1]; y++) {
                int L = 0;
                while (x + L < cnt[0] && y + L < cnt[1] && of[0][2 * (x + L) + 1] <= oe &&
                       !memcmp(of[0] + 2 * (x + L), of[1] + 2 * (y + L), 2 * sizeof *of[0]))
                    L++;
                if (L > best) { best = L; bl = x; br = y; }
            }
        }
        if (!best) { ok = 0; break; }
        for (int k = start; k < bl + best; k++) out[no++] = id[0][k];
        start = br + best;
        int32_t *ti = id[0]; uint32_t *to = of[0];   /* the right chunk becomes the left one */
        id[0] = id[1]; of[0] = of[1]; cnt[0] = cnt[1]; id[1] = ti; of[1] = to;
    }
    free(id[0]); free(id[1]); free(of[0]); free(of[1]);
    if (!ok) { free(out); return NULL; }
    *n = no;
    return out;
}

/* A text on which that rule gives other ids than the sequential tokenizer (SmolLM2, 140-byte chunks,
** 4-byte overlap: a chunk starts inside " <emoji ZWJ emoji>", and a token inside the emoji's bytes has
** the same span in both chunks), and LoPT with the same chunks and overlap does not. */
static void test_plain_anchor_rule(void **st)
{
    (void)st;
    if (access(SMOLLM2, R_OK)) { tu_skip("data: SmolLM2 is absent (make data)"); return; }
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load(SMOLLM2, &f, &e), 0);
    FILE *fp = fopen("fixtures/llm/lopt_plain_anchor.txt", "rb");
    assert_non_null(fp);
    char text[1024];
    size_t len = fread(text, 1, sizeof text, fp);
    fclose(fp);
    assert_int_equal(len, 591);
    int32_t *seq = malloc(2 * len * sizeof *seq);
    assert_non_null(seq);
    int ns = qs_llm_tokenize(&f.v, text, len, seq, (int)(2 * len), &e);
    assert_true(ns > 0);
    size_t np = 0;
    int32_t *pl = plain_rule(&f.v, text, len, 140, 4, &np);
    assert_non_null(pl);
    assert_true(np != (size_t)ns || memcmp(pl, seq, np * sizeof *pl));   /* the plain rule is not lossless */
    size_t anchors = 0, diff = 0;
    qs_lopt_opts o = {2, 140, 4};
    assert_int_equal(check(&f.v, text, len, &o, &anchors, &diff, "plain-rule text"), 0);
    assert_true(anchors > 0);
    assert_int_equal(diff, 0);
    free(pl); free(seq);
    qs_llm_file_free(&f);
}

/* The tokenizer f with its normalizer replaced by norm (NULL: none) and its pre-tokenizer by pre (NULL:
** kept), prepared; the originals are restored by restore(). */
typedef struct { char *norm, *pre; } saved;

static saved swap(qs_llm_vocab *v, const char *norm, const char *pre)
{
    saved o = {v->norm_json, v->pre_json};
    qs_err e = {{0}};
    v->norm_json = norm ? strdup(norm) : NULL;
    if (pre) v->pre_json = strdup(pre);
    assert_int_equal(qs_llm_tok_prepare(v, NULL, &e), 0);
    return o;
}

static void restore(qs_llm_vocab *v, saved o)
{
    qs_err e = {{0}};
    free(v->norm_json);
    if (v->pre_json != o.pre) free(v->pre_json);
    v->norm_json = o.norm; v->pre_json = o.pre;
    assert_int_equal(qs_llm_tok_prepare(v, NULL, &e), 0);
}

/* Why a long text of f goes sequentially under LoPT, or NULL. */
static const char *why_of(const qs_llm_vocab *v)
{
    static char text[2048];
    size_t n = 0;
    while (n + 16 < sizeof text) n += (size_t)sprintf(text + n, "word is here. ");
    int32_t *ids = NULL;
    size_t cnt = 0;
    qs_lopt_stats st;
    qs_err e = {{0}};
    qs_lopt_opts o = {2, 256, 32};
    assert_int_equal(qs_lopt_tokenize(v, NULL, text, n, &o, &ids, NULL, &cnt, &st, &e), 0);
    free(ids);
    return st.why;
}

/* Normalizers on the byte-level BPE fixture: the character-local ones keep LoPT parallel (Qwen2's NFC
** among them) and lossless; Prepend, Strip, a Replace of spaces, a regex Replace and a charsmap send
** the text through the sequential tokenizer. */
static void test_normalizers_bytelevel(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/tok_bpe.json", &f, &e), 0);
    static const char *const local[] = {
        "{\"type\":\"NFC\"}", "{\"type\":\"NFKC\"}", "{\"type\":\"NFD\"}", "{\"type\":\"NFKD\"}", "{\"type\":\"Lowercase\"}",
        "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFD\"},{\"type\":\"StripAccents\"},{\"type\":\"Lowercase\"}]}",
        "{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,\"strip_accents\":true,\"lowercase\":true}",
        "{\"type\":\"Replace\",\"pattern\":{\"String\":\"``\"},\"content\":\"\\\"\"}", "{\"type\":\"Nmt\"}",
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof local / sizeof *local; i++) {
        saved o = swap(&f.v, local[i], NULL);
        assert_null(why_of(&f.v));
        bad += property(&f.v, 30, local[i], 1);
        restore(&f.v, o);
    }
    static const char *const seq[] = {
        "{\"type\":\"Prepend\",\"prepend\":\"x\"}", "{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":true}",
        "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"_\"}",
        "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"a\"},\"content\":\"b\"}",
        "{\"type\":\"Replace\",\"pattern\":{\"String\":\"e\"},\"content\":\" \"}",
    };
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
        saved o = swap(&f.v, seq[i], NULL);
        assert_non_null(why_of(&f.v));
        bad += property(&f.v, 10, seq[i], 0);
        restore(&f.v, o);
    }
    assert_int_equal(bad, 0);
    qs_llm_file_free(&f);
}

/* WordPiece (the committed BERT fixture): BertNormalizer in its settings and other character-local
** normalizers, the whitespace-removing pre-tokenizers, BERT's special tokens with each flag. */
static void test_wordpiece(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/wp_tok.json", &f, &e), 0);
    assert_int_equal(f.v.model, QS_TOK_WORDPIECE);
    assert_null(why_of(&f.v));
    int bad = property(&f.v, 60, "wp", 1);
    static const char *const norms[] = {
        "{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,\"strip_accents\":true,\"lowercase\":false}",
        "{\"type\":\"BertNormalizer\",\"clean_text\":false,\"handle_chinese_chars\":false,\"strip_accents\":null,\"lowercase\":false}",
        "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"},{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":true}]}",
    };
    static const char *const pres[] = {
        "{\"type\":\"Whitespace\"}", "{\"type\":\"WhitespaceSplit\"}",
        ("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"WhitespaceSplit\"},{\"type\":\"Punctuation\",\"behavior\":\"Isolated\"},"
         "{\"type\":\"Digits\",\"individual_digits\":true}]}"),
    };
    for (size_t i = 0; i < 3; i++) {
        saved o = swap(&f.v, norms[i], pres[i]);
        assert_null(why_of(&f.v));
        bad += property(&f.v, 30, pres[i], 1);
        restore(&f.v, o);
    }
    /* [MASK] (and [CLS]) with each flag: lstrip and single_word keep the cuts, rstrip removes those
    ** right after it (its whitespace would cross the cut) */
    int mask = qs_llm_vocab_find(&f.v, "[MASK]"), cls = qs_llm_vocab_find(&f.v, "[CLS]");
    assert_true(mask >= 0 && cls >= 0 && f.v.aflags);
    uint8_t m0 = f.v.aflags[mask], c0 = f.v.aflags[cls];
    /* normalized + lstrip: BertNormalizer pads a CJK letter before the cut with a space the token
    ** would take in the whole text but not in the right chunk (cuts need an ASCII character before) */
    static const uint8_t flags[] = {QS_TOK_LSTRIP, QS_TOK_RSTRIP, QS_TOK_SINGLE_WORD, QS_TOK_LSTRIP | QS_TOK_RSTRIP,
                                    QS_TOK_LSTRIP | QS_TOK_NORMALIZED};
    for (size_t i = 0; i < 5; i++) {
        f.v.aflags[mask] = m0 | flags[i];
        f.v.aflags[cls] = c0 | flags[(i + 1) % 5];
        assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
        bad += property(&f.v, 30, "wp flags", 1);
    }
    f.v.aflags[mask] = m0 | QS_TOK_LSTRIP | QS_TOK_NORMALIZED;   /* that case, at every cut */
    assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
    char text[4096];
    size_t n = 0, anchors = 0, diff = 0;
    while (n + 32 < sizeof text) n += (size_t)sprintf(text + n, "%s [MASK] ", n % 3 ? "字" : "x字");
    static const qs_lopt_opts cjk[] = {{2, 16, 8}, {3, 33, 4}, {2, 64, 16}};
    for (size_t k = 0; k < 3; k++) bad += check(&f.v, text, n, &cjk[k], &anchors, &diff, "CJK before a normalized lstrip token");
    print_message("# CJK before a normalized lstrip token: %zu anchors, %zu differing\n", anchors, diff);
    assert_true(anchors > 0);
    assert_int_equal(diff, 0);   /* an anchor check that failed: a cut between the CJK letter and [MASK] */
    f.v.aflags[mask] = m0; f.v.aflags[cls] = c0;
    assert_int_equal(bad, 0);
    qs_llm_file_free(&f);
}

/* Added tokens with lstrip, rstrip, single_word on the byte-level fixture ("or" and "end" made added). */
static void test_added_flags(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/tok_bpe.json", &f, &e), 0);
    int a = qs_llm_vocab_find(&f.v, "or"), b = qs_llm_vocab_find(&f.v, "end");
    assert_true(a > 0 && b > 0);
    if (!f.v.aflags) assert_non_null(f.v.aflags = calloc((size_t)f.v.n, 1));
    f.v.type[a] = f.v.type[b] = 4;
    static const uint8_t flags[] = {QS_TOK_LSTRIP, QS_TOK_RSTRIP, QS_TOK_SINGLE_WORD, QS_TOK_LSTRIP | QS_TOK_RSTRIP};
    int bad = 0;
    for (size_t i = 0; i < 4; i++) {
        f.v.aflags[a] = QS_TOK_ADDED | flags[i];
        f.v.aflags[b] = QS_TOK_ADDED | flags[(i + 2) % 4];
        assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);
        bad += property(&f.v, 40, "added flags", 1);
    }
    assert_int_equal(bad, 0);
    qs_llm_file_free(&f);
}

/* SentencePiece models: with Metaspace(split) LoPT cuts before a space; without a pre-tokenizer (the
** model sees whole stretches) or with split false it stays sequential, and says why. */
static void test_sentencepiece(void **st)
{
    (void)st;
    static const char *const files[] = {"fixtures/llm/spm_bpe.json", "fixtures/llm/spm_uni.json", "fixtures/llm/spm_bpe.model",
                                        "fixtures/llm/spm_uni.model"};
    static const char *const meta[] = {
        "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"always\",\"split\":true}",
        "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"first\",\"split\":true}",
        "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"never\"}",
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        qs_llm_file f;
        qs_err e = {{0}};
        assert_int_equal(qs_llm_load_tokenizer(files[i], &f, &e), 0);
        if (!f.v.pre_json && i == 2) {   /* SentencePiece BPE in a tokenizer.model: test_llama2 */
            assert_null(why_of(&f.v));
        } else if (!f.v.pre_json) {   /* without Llama 2's normalizer, or Unigram */
            const char *w = why_of(&f.v);
            assert_non_null(w);
            assert_non_null(strstr(w, "without a pre-tokenizer"));
            bad += property(&f.v, 10, files[i], 0);
        }
        if (f.v.norm_json && strcmp(f.v.norm_json, "null")) {   /* a charsmap: sequential whatever the pre */
            saved o = swap(&f.v, f.v.norm_json, meta[0]);
            assert_non_null(why_of(&f.v));
            restore(&f.v, o);
            qs_llm_file_free(&f);
            continue;
        }
        for (size_t k = 0; k < 3; k++) {
            saved o = swap(&f.v, NULL, meta[k]);
            assert_null(why_of(&f.v));
            bad += property(&f.v, 30, meta[k], 1);
            restore(&f.v, o);
        }
        saved o = swap(&f.v, NULL, "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"split\":false}");
        assert_non_null(why_of(&f.v));
        bad += property(&f.v, 10, "Metaspace no split", 0);
        restore(&f.v, o);
        qs_llm_file_free(&f);
    }
    assert_int_equal(bad, 0);
}

/* SentencePiece BPE without a pre-tokenizer under Llama 2's normalizer (Prepend "▁", Replace " " by
** "▁"): chunks cut before a space after an ASCII graphic character, the Prepend left out where a chunk
** continues a stretch (qs_llm_tok_state_continues); lossless on random texts.  The same for
** tokenizer.model and GGUF "llama" vocabularies, whose models add the dummy prefix and remove spaces.
** Prepend alone, a vocabulary with "▁" after another character (spm_bpe_cross.json: "e▁", "▁the▁"),
** ignore_merges, Unigram and a charsmap stay sequential. */
static void test_llama2(void **st)
{
    (void)st;
    static const char kLlama2[] = "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"},"
                                  "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}]}";
    static const char kReplace[] = "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}";
    int bad = 0;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/spm_bpe.json", &f, &e), 0);
    saved o = swap(&f.v, kLlama2, NULL);
    assert_null(why_of(&f.v));
    bad += property(&f.v, 60, "Llama 2's normalizer", 1);
    /* a space right after an added token starts a stretch in the whole text (Prepend adds "▁" there):
    ** never a cut position (fuzz_lopt found the chunk that started there without it) */
    char sep[2048];
    size_t ns = 0, anchors = 0, diff = 0;
    while (ns + 40 < sizeof sep) ns += (size_t)sprintf(sep + ns, "end.<sep> there, my dear<sep> friend. ");
    for (size_t c = 16; c <= 256; c *= 2)
        for (size_t ov = 4; ov < c; ov *= 4) {
            qs_lopt_opts lo = {2, c, ov};
            bad += check(&f.v, sep, ns, &lo, &anchors, &diff, "a space after <sep>");
        }
    assert_true(anchors > 0);
    assert_int_equal(diff, 0);
    /* a state that continues a stretch: no "▁" prepended, so other ids than a text of its own */
    qs_llm_tok_state *ts = qs_llm_tok_state_new(NULL);
    int32_t a[16], b[16];
    assert_non_null(ts);
    int na = qs_llm_tokenize_state(ts, &f.v, NULL, "hello world", 11, a, NULL, 16, &e);
    qs_llm_tok_state_continues(ts, 1);
    int nb = qs_llm_tokenize_state(ts, &f.v, NULL, "hello world", 11, b, NULL, 16, &e);
    assert_true(na > 0 && nb > 0 && (na != nb || memcmp(a, b, (size_t)na * sizeof *a)));
    qs_llm_tok_state_continues(ts, 0);
    assert_int_equal(qs_llm_tokenize_state(ts, &f.v, NULL, "hello world", 11, b, NULL, 16, &e), na);
    assert_memory_equal(a, b, (size_t)na * sizeof *a);
    qs_llm_tok_state_free(ts);
    restore(&f.v, o);
    o = swap(&f.v, kReplace, NULL);
    assert_null(why_of(&f.v));
    bad += property(&f.v, 30, "Replace only", 1);
    restore(&f.v, o);
    o = swap(&f.v, "{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"}", NULL);
    assert_non_null(strstr(why_of(&f.v), "other than Llama 2's"));
    restore(&f.v, o);
    f.v.ignore_merges = 1;
    o = swap(&f.v, kLlama2, NULL);
    assert_non_null(why_of(&f.v));
    restore(&f.v, o);
    qs_llm_file_free(&f);
    static const char *const seq[] = {"fixtures/llm/spm_bpe_cross.json", "fixtures/llm/spm_uni.json"};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(qs_llm_load_tokenizer(seq[i], &f, &e), 0);
        o = swap(&f.v, kLlama2, NULL);
        const char *w = why_of(&f.v);
        assert_non_null(w);
        assert_non_null(strstr(w, i ? "without a pre-tokenizer" : "after another character"));
        bad += property(&f.v, 10, seq[i], 0);
        restore(&f.v, o);
        qs_llm_file_free(&f);
    }
    /* the model's own flags (tokenizer.model: dummy prefix, leading, trailing and repeated spaces
    ** removed; a GGUF "llama" vocabulary: a space prefix per stretch), left out where a chunk continues */
    static const char *const own[] = {"fixtures/llm/spm_bpe.model", "fixtures/llm/spm_bpe_nofb.model",
                                      "fixtures/llm/spm_bpe_unused.model", "fixtures/llm/spm_llama.gguf"};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(i == 3 ? qs_llm_load_gguf_vocab(own[i], &f, &e) : qs_llm_load_tokenizer(own[i], &f, &e), 0);
        assert_null(why_of(&f.v));
        bad += property(&f.v, 40, own[i], 1);
        qs_llm_file_free(&f);
    }
    /* a charsmap's rules could match across a space: sequential */
    qs_llm_file g;
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/spm_uni_rules.model", &g, &e), 0);
    assert_int_equal(qs_llm_load_tokenizer("fixtures/llm/spm_bpe.model", &f, &e), 0);
    o = swap(&f.v, g.v.norm_json, NULL);
    assert_non_null(strstr(why_of(&f.v), "normalization rules"));
    restore(&f.v, o);
    qs_llm_file_free(&f);
    qs_llm_file_free(&g);
    assert_int_equal(bad, 0);
}

/* MiniLM (tokenizer.json, and vocab.txt) on Emma and on random texts. */
static void test_minilm(void **st)
{
    (void)st;
    static const char *const files[] = {"../data/models/minilm/tokenizer.json", "../data/models/minilm/vocab.txt"};
    if (access(files[0], R_OK) || access(files[1], R_OK) || access(AUSTEN, R_OK)) {
        tu_skip("data: MiniLM's tokenizer files or the Austen novels are absent (make data)");
        return;
    }
    FILE *fp = fopen(AUSTEN, "rb");
    assert_non_null(fp);
    size_t cap = 300000;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t n = fread(text, 1, cap, fp);
    fclose(fp);
    for (size_t i = 0; i < 2; i++) {
        qs_llm_file f;
        qs_err e = {{0}};
        assert_int_equal(qs_llm_load_tokenizer(files[i], &f, &e), 0);
        size_t anchors = 0, diff = 0;
        static const qs_lopt_opts opts[] = {{2, 64, 0}, {3, 1000, 16}, {8, 4096, 0}, {2, 0, 0}};
        int bad = 0;
        for (size_t k = 0; k < sizeof opts / sizeof *opts; k++) bad += check(&f.v, text, n, &opts[k], &anchors, &diff, files[i]);
        assert_int_equal(bad, 0);
        assert_int_equal(diff, 0);
        assert_true(anchors > 100);
        assert_int_equal(property(&f.v, 30, files[i], 1), 0);
        qs_llm_file_free(&f);
    }
    free(text);
}

/* A tokenizer state reused across calls, vocabularies and preparations gives what a fresh call gives;
** states sharing a piece cache too. */
static void test_state(void **st)
{
    (void)st;
    static const char *const files[] = {"fixtures/llm/tok_bpe.json", "fixtures/llm/wp_tok.json", "fixtures/llm/spm_uni.json"};
    qs_llm_tok_shared *sh = qs_llm_tok_shared_new(0);   /* the smallest table: past half full too */
    qs_llm_tok_state *s1 = qs_llm_tok_state_new(NULL), *s2 = qs_llm_tok_state_new(sh), *s3 = qs_llm_tok_state_new(sh);
    assert_true(sh && s1 && s2 && s3);
    char *buf = malloc(4096);
    int32_t *a = malloc(8192 * sizeof *a), *b = malloc(8192 * sizeof *b);
    uint32_t *ao = malloc(16384 * sizeof *ao), *bo = malloc(16384 * sizeof *bo);
    assert_true(buf && a && b && ao && bo);
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < 3; i++) {
            qs_llm_file f;   /* the same address each time: the states must notice the new vocabulary */
            qs_err e = {{0}};
            assert_int_equal(qs_llm_load_tokenizer(files[i], &f, &e), 0);
            for (int t = 0; t < 20; t++) {
                size_t len = make_text(buf, 1 + rnd(3000));
                int na = qs_llm_tokenize_offs(&f.v, NULL, buf, len, a, ao, 8192, &e);
                assert_true(na >= 0);
                qs_llm_tok_state *ss[] = {s1, s2, s3};
                for (int k = 0; k < 3; k++) {
                    int nb = qs_llm_tokenize_state(ss[k], &f.v, NULL, buf, len, b, bo, 8192, &e);
                    assert_int_equal(nb, na);
                    assert_memory_equal(a, b, (size_t)na * sizeof *a);
                    assert_memory_equal(ao, bo, 2 * (size_t)na * sizeof *ao);
                }
                if (t == 10) assert_int_equal(qs_llm_tok_prepare(&f.v, NULL, &e), 0);   /* prepared again */
            }
            qs_llm_file_free(&f);
        }
    qs_llm_tok_state_free(s1); qs_llm_tok_state_free(s2); qs_llm_tok_state_free(s3);
    qs_llm_tok_shared_free(sh);
    free(buf); free(a); free(b); free(ao); free(bo);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_fixture_variants),
        cmocka_unit_test(test_added_tokens),
        cmocka_unit_test(test_cjk_lines),
        cmocka_unit_test(test_smollm2),
        cmocka_unit_test(test_plain_anchor_rule),
        cmocka_unit_test(test_normalizers_bytelevel),
        cmocka_unit_test(test_wordpiece),
        cmocka_unit_test(test_added_flags),
        cmocka_unit_test(test_sentencepiece),
        cmocka_unit_test(test_llama2),
        cmocka_unit_test(test_minilm),
        cmocka_unit_test(test_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
