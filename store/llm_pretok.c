/*
** Pre-tokenizers of Hugging Face `tokenizers` (see llm_pretok.h), rebuilt from its Rust sources'
** semantics: a pattern gives a list of (offsets, is_match) covering the text (Pattern::find_matches,
** with the regex crate-of-record's rule that an empty match right after a match is skipped), `invert`
** flips is_match, the split behaviour (Removed, Isolated, MergedWithPrevious, MergedWithNext,
** Contiguous) turns that list into pieces, and empty pieces are dropped.  Each step splits every piece
** of the previous step; pieces are processed depth first, so only one list per step is live.
**
** Invalid UTF-8: `tokenizers` only takes valid strings.  Here the regexes are compiled with
** PCRE2_MATCH_INVALID_UTF, so no pattern ever matches an invalid byte: such bytes stay in the
** unmatched stretches, which the split behaviours keep as pieces like any other text, and the BPE
** spells them with their byte-level tokens.
*/
#include "llm_pretok.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B_REMOVED, B_ISOLATED, B_PREV, B_NEXT, B_CONTIG };
enum { MAX_STEPS = 32, MAX_DEPTH = 16 };

/* GPT-2's pattern (ByteLevel with use_regex = true) */
static const char kGpt2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* Qwen2's and Llama 3's tokenizer.json Split patterns (llama.cpp spells the same) */
static const char kQwen2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                             "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char kLlama3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                              "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

typedef struct { size_t a, b; int match; } span;

typedef struct {
    pcre2_code *re;            /* NULL: no split (ByteLevel with use_regex false) */
    pcre2_match_data *md;
    int behavior, invert;
    int byte_level, prefix_space;
    span *m, *out;             /* scratch: find_matches list and the pieces kept */
    size_t mcap, ocap;
    char *buf;                 /* ByteLevel add_prefix_space copy */
    size_t bcap;
} step;

struct qs_pretok {
    step s[MAX_STEPS];
    int n;
};

void qs_pretok_free(qs_pretok *p)
{
    if (!p) return;
    for (int i = 0; i < p->n; i++) {
        pcre2_match_data_free(p->s[i].md);
        pcre2_code_free(p->s[i].re);
        free(p->s[i].m); free(p->s[i].out); free(p->s[i].buf);
    }
    free(p);
}

/* tokenizers runs its regexes in Oniguruma, whose \s is the Unicode White_Space property; PCRE2's
** \s under UCP also takes U+180E (via \h).  Spell \s and \S as the property (other escapes,
** including an escaped backslash, are copied as they are).  Returns a malloc'd pattern. */
static char *oniguruma_space(const char *p)
{
    size_t n = strlen(p), o = 0;
    char *r = malloc(n * 8 + 1);   /* "\s" (2 bytes) -> "\p{White_Space}" (15 bytes) */
    if (!r) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\\' && (p[i + 1] == 's' || p[i + 1] == 'S')) {
            o += (size_t)sprintf(r + o, "\\%c{White_Space}", p[i + 1] == 's' ? 'p' : 'P');
            i++;
        } else if (p[i] == '\\' && p[i + 1]) {
            r[o++] = p[i++];
            r[o++] = p[i];
        } else {
            r[o++] = p[i];
        }
    }
    r[o] = 0;
    return r;
}

static int add_step(qs_pretok *p, const char *pattern, int literal, int behavior, int invert, int byte_level,
                    int prefix_space, qs_err *e)
{
    if (p->n == MAX_STEPS) return qs_fail(e, "pre-tokenizer has more than %d steps", MAX_STEPS);
    if (p->n && p->s[p->n - 1].byte_level)
        return qs_fail(e, "pre-tokenizer steps after ByteLevel are not supported");
    step *st = &p->s[p->n];
    memset(st, 0, sizeof *st);
    st->behavior = behavior; st->invert = invert; st->byte_level = byte_level; st->prefix_space = prefix_space;
    if (pattern) {
        char *rx = literal ? NULL : oniguruma_space(pattern);
        if (!literal && !rx) return qs_fail(e, "out of memory");
        int ec;
        PCRE2_SIZE eo;
        uint32_t opt = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);   /* UCP: no meaning for a literal */
        st->re = pcre2_compile((PCRE2_SPTR)(rx ? rx : pattern), PCRE2_ZERO_TERMINATED, opt, &ec, &eo, NULL);
        free(rx);
        if (!st->re) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return qs_fail(e, "pre-tokenizer pattern /%.60s/: %s", pattern, (char *)msg);
        }
        pcre2_jit_compile(st->re, PCRE2_JIT_COMPLETE);   /* optional: the interpreter gives the same matches */
        st->md = pcre2_match_data_create_from_pattern(st->re, NULL);
        if (!st->md) { pcre2_code_free(st->re); return qs_fail(e, "out of memory"); }
    }
    p->n++;
    return 0;
}

static int parse_behavior(const char *b, int *out)
{
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    for (int i = 0; i < 5; i++)
        if (b && !strcmp(b, names[i])) { *out = i; return 0; }
    return -1;
}

/* Boolean field with the tokenizers default when absent. */
static int jbool(json_t *o, const char *k, int dflt)
{
    json_t *j = json_object_get(o, k);
    return json_is_boolean(j) ? json_is_true(j) : dflt;
}

static int add_json(qs_pretok *p, json_t *j, int depth, qs_err *e)
{
    if (depth > MAX_DEPTH) return qs_fail(e, "pre-tokenizer nested too deeply");
    const char *t = json_string_value(json_object_get(j, "type"));
    if (!t) return qs_fail(e, "pre-tokenizer without a \"type\"");
    if (!strcmp(t, "Sequence")) {
        json_t *a = json_object_get(j, "pretokenizers"), *v;
        if (!json_is_array(a)) return qs_fail(e, "pre-tokenizer Sequence without \"pretokenizers\"");
        size_t i;
        json_array_foreach(a, i, v) if (add_json(p, v, depth + 1, e)) return -1;
        return 0;
    }
    if (!strcmp(t, "Split")) {
        json_t *pat = json_object_get(j, "pattern");
        const char *rx = json_string_value(json_object_get(pat, "Regex"));
        const char *lit = json_string_value(json_object_get(pat, "String"));
        int b;
        if (!rx && !lit) return qs_fail(e, "pre-tokenizer Split without a String or Regex pattern");
        if (parse_behavior(json_string_value(json_object_get(j, "behavior")), &b))
            return qs_fail(e, "pre-tokenizer Split has an unknown behavior");
        return add_step(p, rx ? rx : lit, !rx, b, jbool(j, "invert", 0), 0, 0, e);
    }
    if (!strcmp(t, "Digits"))   /* char::is_numeric, one match per char: \p{N} */
        return add_step(p, "\\p{N}", 0, jbool(j, "individual_digits", 0) ? B_ISOLATED : B_CONTIG, 0, 0, 0, e);
    if (!strcmp(t, "WhitespaceSplit"))   /* split on char::is_whitespace, removing it */
        return add_step(p, "\\s", 0, B_REMOVED, 0, 0, 0, e);
    if (!strcmp(t, "Punctuation")) {   /* char::is_ascii_punctuation || Unicode P* */
        int b = B_ISOLATED;
        json_t *bj = json_object_get(j, "behavior");
        if (bj && parse_behavior(json_string_value(bj), &b)) return qs_fail(e, "pre-tokenizer Punctuation has an unknown behavior");
        return add_step(p, "[\\p{P}\\x21-\\x2f\\x3a-\\x40\\x5b-\\x60\\x7b-\\x7e]", 0, b, 0, 0, 0, e);
    }
    if (!strcmp(t, "ByteLevel"))
        return add_step(p, jbool(j, "use_regex", 1) ? kGpt2 : NULL, 0, B_ISOLATED, 0, 1, jbool(j, "add_prefix_space", 1), e);
    return qs_fail(e, "pre-tokenizer type '%.40s' is not supported (Sequence, Split, Digits, ByteLevel, "
                      "WhitespaceSplit, Punctuation)", t);
}

qs_pretok *qs_pretok_from_json(const char *json, qs_err *e)
{
    json_error_t je;
    json_t *j = json_loads(json, 0, &je);
    if (!j) { qs_fail(e, "pre-tokenizer is not valid JSON: %s", je.text); return NULL; }
    qs_pretok *p = calloc(1, sizeof *p);
    if (!p) { json_decref(j); qs_fail(e, "out of memory"); return NULL; }
    int rc = add_json(p, j, 0, e);
    json_decref(j);
    if (rc) { qs_pretok_free(p); return NULL; }
    return p;
}

qs_pretok *qs_pretok_from_family(const char *f, int *ignore_merges, qs_err *e)
{
    /* llama.cpp's llm_tokenizer_bpe: which regexes each tokenizer.ggml.pre value runs */
    static const char *gpt2[] = {"", "default", "gpt2", "gpt-2", "mpt", "olmo", "jais", NULL};
    static const char *digits[] = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", NULL};
    static const char *qwen2[] = {"qwen2", "deepseek-r1-qwen", NULL};
    static const char *llama3[] = {"llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe", NULL};
    const char **fams[] = {gpt2, digits, qwen2, llama3};
    int k = -1;
    for (int i = 0; i < 4 && k < 0; i++)
        for (const char **s = fams[i]; *s; s++)
            if (!strcmp(f, *s)) { k = i; break; }
    *ignore_merges = k == 3;
    if (k < 0) {
        qs_fail(e, "pre-tokenizer '%.30s' is not known (gpt2, smollm, starcoder, qwen2, llama-bpe, ...)", f);
        return NULL;
    }
    qs_pretok *p = calloc(1, sizeof *p);
    if (!p) { qs_fail(e, "out of memory"); return NULL; }
    int rc = 0;
    if (k == 1) rc = add_step(p, "\\p{N}", 0, B_ISOLATED, 0, 0, 0, e);
    if (!rc && k >= 2) rc = add_step(p, k == 2 ? kQwen2 : kLlama3, 0, B_ISOLATED, 0, 0, 0, e);
    if (!rc) rc = add_step(p, k < 2 ? kGpt2 : NULL, 0, B_ISOLATED, 0, 1, 0, e);
    if (rc) { qs_pretok_free(p); return NULL; }
    return p;
}

static int grow(span **a, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need) c *= 2;
    span *n = realloc(*a, c * sizeof *n);
    if (!n) return -1;
    *a = n; *cap = c;
    return 0;
}

/* bytes of the UTF-8 character at s[i] (1 for an invalid byte) */
static size_t char_len(const unsigned char *s, size_t n, size_t i)
{
    if (i >= n || s[i] < 0xC2) return 1;
    size_t k = s[i] < 0xE0 ? 2 : s[i] < 0xF0 ? 3 : s[i] < 0xF5 ? 4 : 1;
    if (i + k > n) return 1;
    for (size_t j = 1; j < k; j++)
        if ((s[i + j] & 0xC0) != 0x80) return 1;
    return k;
}

/* Pattern::find_matches over the whole piece: matches and the stretches between them, in order. */
static int find_matches(step *st, const char *s, size_t n, size_t *cnt, qs_err *e)
{
    size_t k = 0, prev = 0, last_end = 0, last_match_end = 0;
    int have_last = 0;
    while (last_end <= n) {
        int rc = pcre2_match(st->re, (PCRE2_SPTR)s, n, last_end, 0, st->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return qs_fail(e, "pre-tokenizer regex failed (PCRE2 error %d)", rc);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st->md);
        size_t ms = ov[0], me = ov[1];
        if (me < ms) return qs_fail(e, "pre-tokenizer regex gave a match ending before its start");
        if (ms == me && have_last && last_match_end == me) {   /* no empty match right after a match */
            last_end += char_len((const unsigned char *)s, n, last_end);
            continue;
        }
        last_end = me; last_match_end = me; have_last = 1;
        if (grow(&st->m, &st->mcap, k + 2)) return qs_fail(e, "out of memory");
        if (prev != ms) st->m[k++] = (span){prev, ms, 0};
        st->m[k++] = (span){ms, me, 1};
        prev = me;
    }
    if (grow(&st->m, &st->mcap, k + 1)) return qs_fail(e, "out of memory");
    if (prev != n || n == 0) st->m[k++] = (span){prev, n, 0};
    *cnt = k;
    return 0;
}

/* SplitDelimiterBehavior applied to st->m[0..k) -> st->out (offsets to keep). */
static size_t apply_behavior(step *st, size_t k)
{
    span *m = st->m, *o = st->out;
    size_t no = 0;
    int prevm = 0;
    switch (st->behavior) {
    case B_ISOLATED:
        for (size_t i = 0; i < k; i++) o[no++] = m[i];
        break;
    case B_REMOVED:
        for (size_t i = 0; i < k; i++) if (!m[i].match) o[no++] = m[i];
        break;
    case B_CONTIG:
        for (size_t i = 0; i < k; i++) {
            if (m[i].match == prevm && no) o[no - 1].b = m[i].b;
            else o[no++] = m[i];
            prevm = m[i].match;
        }
        break;
    case B_PREV:
        for (size_t i = 0; i < k; i++) {
            if (m[i].match && !prevm && no) o[no - 1].b = m[i].b;
            else o[no++] = m[i];
            prevm = m[i].match;
        }
        break;
    case B_NEXT:   /* the same fold from the end, then reversed */
        for (size_t i = k; i-- > 0;) {
            if (m[i].match && !prevm && no) o[no - 1].a = m[i].a;
            else o[no++] = m[i];
            prevm = m[i].match;
        }
        for (size_t i = 0; i < no / 2; i++) { span t = o[i]; o[i] = o[no - 1 - i]; o[no - 1 - i] = t; }
        break;
    }
    return no;
}

static int run(qs_pretok *p, int k, const char *s, size_t n, qs_pretok_cb cb, void *ctx, qs_err *e)
{
    if (!n) return 0;   /* empty pieces are dropped */
    if (k == p->n) return cb(ctx, s, n);
    step *st = &p->s[k];
    if (st->prefix_space && s[0] != ' ') {   /* ByteLevel add_prefix_space */
        if (n + 1 > st->bcap) {
            char *b = realloc(st->buf, n + 1);
            if (!b) return qs_fail(e, "out of memory");
            st->buf = b; st->bcap = n + 1;
        }
        st->buf[0] = ' ';
        memmove(st->buf + 1, s, n);   /* s may be this step's buffer's parent piece, never the buffer */
        s = st->buf; n++;
    }
    if (!st->re) return run(p, k + 1, s, n, cb, ctx, e);
    size_t cnt = 0;
    if (find_matches(st, s, n, &cnt, e)) return -1;
    for (size_t i = 0; i < cnt; i++) st->m[i].match ^= st->invert;
    if (grow(&st->out, &st->ocap, cnt)) return qs_fail(e, "out of memory");
    size_t no = apply_behavior(st, cnt);
    for (size_t i = 0; i < no; i++)
        if (run(p, k + 1, s + st->out[i].a, st->out[i].b - st->out[i].a, cb, ctx, e)) return -1;
    return 0;
}

int qs_pretok_run(qs_pretok *p, const char *s, size_t n, qs_pretok_cb cb, void *ctx, qs_err *e)
{
    return run(p, 0, s, n, cb, ctx, e);
}
