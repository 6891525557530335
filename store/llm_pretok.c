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
#include "llm_pretok_bert.h"
#include "llm_pretok_meta.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B_REMOVED, B_ISOLATED, B_PREV, B_NEXT, B_CONTIG };
enum { MAX_STEPS = 32, MAX_DEPTH = 16 };
/* Regex work bounds, per piece of m bytes: PCRE2 may look at BYTES_PER_BYTE * m + BYTES_BASE bytes
** in all (a pattern that rescans the rest of the text at every position, a(?=a*$), is quadratic:
** refused rather than spinning) and spend STEPS_PER_BYTE * m + STEPS_BASE of PCRE2's match limit
** (backtracking, counted by the interpreter and the JIT alike).  Each call starts with a window of
** FIRST_WINDOW bytes and a limit of FIRST_LIMIT, doubled while short, so a call is charged at most
** twice what it needed.  Sane patterns (GPT-2's, Qwen2's, Llama 3's) look a few bytes ahead.  Memory:
** the interpreter's backtracking heap and depth, the JIT's stack. */
enum { FIRST_LIMIT = 64, STEPS_PER_BYTE = 512, STEPS_BASE = 4096 };
enum { FIRST_WINDOW = 64, BYTES_PER_BYTE = 1024, BYTES_BASE = 1 << 16 };
enum { HEAP_LIMIT_KIB = 64 << 10, DEPTH_LIMIT = 1 << 20, JIT_STACK_MAX = 4 << 20 };

/* GPT-2's pattern (ByteLevel with use_regex = true) */
static const char kGpt2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* Qwen2's and Llama 3's tokenizer.json Split patterns (llama.cpp spells the same) */
static const char kQwen2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                             "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char kLlama3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                              "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

typedef struct { size_t a, b; int match; } span;
typedef struct { uint64_t steps, bytes; } work;   /* what a piece may still spend */

/* One compiled step: read-only once built, so one qs_pretok serves concurrent scans. */
typedef struct {
    pcre2_code *re;            /* NULL: no split (ByteLevel with use_regex false) */
    char *pat;                 /* the pattern as written, for messages */
    int behavior, invert;
    int byte_level, prefix_space;
} step;

struct qs_pretok {
    step s[MAX_STEPS];
    int n;
};

/* The scratch of one step during a scan. */
typedef struct {
    pcre2_match_data *md;
    span *m, *out;             /* find_matches list and the pieces kept */
    size_t mcap, ocap;
    char *buf;                 /* ByteLevel add_prefix_space copy */
    size_t bcap;
} step_run;

struct qs_pretok_scan {
    const qs_pretok *p;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
    step_run r[MAX_STEPS];
    const char *name;          /* the text, for messages */
    size_t origin;             /* text offset of position 0 (Metaspace "first": qs_pretok_scan_origin) */
};

void qs_pretok_free(qs_pretok *p)
{
    if (!p) return;
    for (int i = 0; i < p->n; i++) {
        pcre2_code_free(p->s[i].re);
        free(p->s[i].pat);
    }
    free(p);
}

void qs_pretok_scan_free(qs_pretok_scan *sc)
{
    if (!sc) return;
    for (int i = 0; i < MAX_STEPS; i++) {
        pcre2_match_data_free(sc->r[i].md);
        free(sc->r[i].m); free(sc->r[i].out); free(sc->r[i].buf);
    }
    pcre2_jit_stack_free(sc->js);
    pcre2_match_context_free(sc->mc);
    free(sc);
}

qs_pretok_scan *qs_pretok_scan_new(const qs_pretok *p, const char *name, qs_err *e)
{
    qs_pretok_scan *sc = calloc(1, sizeof *sc);
    if (!sc) { qs_fail(e, "out of memory"); return NULL; }
    sc->p = p;
    sc->name = name ? name : "the text";
    sc->mc = pcre2_match_context_create(NULL);
    sc->js = pcre2_jit_stack_create(32 << 10, JIT_STACK_MAX, NULL);
    int ok = sc->mc && sc->js;
    if (ok) {
        pcre2_jit_stack_assign(sc->mc, NULL, sc->js);
        pcre2_set_heap_limit(sc->mc, HEAP_LIMIT_KIB);
        pcre2_set_depth_limit(sc->mc, DEPTH_LIMIT);
    }
    for (int i = 0; ok && i < p->n; i++)
        if (p->s[i].re && !(sc->r[i].md = pcre2_match_data_create_from_pattern(p->s[i].re, NULL))) ok = 0;
    if (!ok) { qs_pretok_scan_free(sc); qs_fail(e, "out of memory"); return NULL; }
    return sc;
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
        pcre2_jit_compile(st->re, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);   /* optional: the interpreter gives the same matches */
        st->pat = strdup(pattern);
        if (!st->pat) { pcre2_code_free(st->re); st->re = NULL; return qs_fail(e, "out of memory"); }
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
    json_t *bert;   /* BertPreTokenizer, Whitespace, WhitespaceSplit, Punctuation: Split steps (llm_pretok_bert.c) */
    if (qs_pretok_bert_expand(j, t, &bert, e)) return -1;
    if (bert) { int rc = add_json(p, bert, depth + 1, e); json_decref(bert); return rc; }
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
    if (!strcmp(t, "Metaspace")) {   /* llm_pretok_meta.c */
        const char *pat;
        int pre;
        return qs_pretok_meta_parse(j, &pat, &pre, e) ? -1 : add_step(p, pat, 0, B_NEXT, 0, 0, pre, e);
    }
    if (!strcmp(t, "ByteLevel"))
        return add_step(p, jbool(j, "use_regex", 1) ? kGpt2 : NULL, 0, B_ISOLATED, 0, 1, jbool(j, "add_prefix_space", 1), e);
    return qs_fail(e, "pre-tokenizer type '%.40s' is not supported (Sequence, Split, Digits, ByteLevel, "
                      "WhitespaceSplit, Punctuation, BertPreTokenizer, Whitespace, Metaspace)", t);
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

/* One pcre2_match(s, n, from) under the work bounds; the piece's allowances are in *w.  The subject
** given to PCRE2 is cut after a window of the text (on a character boundary) with PCRE2_PARTIAL_HARD:
** a match, or no match, that never looked at the cut is the one of the whole text (PCRE2 reports
** PARTIAL when an attempt reached it, and the window doubles).  Returns pcre2_match's code; a limit
** error means an allowance or PCRE2's memory ran out. */
static int match_bounded(qs_pretok_scan *sc, const step *st, step_run *r, const char *s, size_t n, size_t from,
                         work *w)
{
    size_t win = FIRST_WINDOW;
    uint64_t lim = FIRST_LIMIT;
    for (;;) {
        size_t end = n;
        if (n - from > win) {
            end = from + win;
            while (end > from && ((unsigned char)s[end] & 0xC0) == 0x80) end--;   /* not inside a character */
            if (end == from)
                for (end = from + win; end < n && ((unsigned char)s[end] & 0xC0) == 0x80;) end++;
        }
        if (end - from > w->bytes) return PCRE2_ERROR_MATCHLIMIT;
        w->bytes -= end - from;
        if (lim > w->steps) lim = w->steps;
        pcre2_set_match_limit(sc->mc, (uint32_t)lim);
        int rc = pcre2_match(st->re, (PCRE2_SPTR)s, end, from, end < n ? PCRE2_PARTIAL_HARD : 0, r->md, sc->mc);
        if (rc == PCRE2_ERROR_MATCHLIMIT) {
            if (lim == w->steps) return rc;
            lim = lim > UINT32_MAX / 2 ? UINT32_MAX : 2 * lim;
            continue;
        }
        w->steps -= lim;
        lim = FIRST_LIMIT;
        if (rc == PCRE2_ERROR_PARTIAL) { win = win > SIZE_MAX / 2 ? SIZE_MAX : 2 * win; continue; }
        if (rc == PCRE2_ERROR_NOMATCH && end < n) { from = end; continue; }   /* no match starts before the cut */
        return rc;
    }
}

/* A regex error: the message names the pattern, the text and where.  Returns QS_PRETOK_REGEX. */
static int regex_fail(const qs_pretok_scan *sc, const step *st, int rc, size_t at, qs_err *e)
{
    const char *why = rc == PCRE2_ERROR_MATCHLIMIT ? "needs too much backtracking"
                      : rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT
                          ? "needs too much memory"
                          : NULL;
    if (why) qs_fail(e, "pre-tokenizer regex /%.60s/ %s on %s (byte offset %zu); refusing", st->pat, why, sc->name, at);
    else qs_fail(e, "pre-tokenizer regex /%.60s/ failed on %s (byte offset %zu, PCRE2 error %d)", st->pat, sc->name, at, rc);
    return QS_PRETOK_REGEX;
}

/* Pattern::find_matches over the whole piece (at = its offset in the text, for messages): matches and
** the stretches between them, in order. */
static int find_matches(qs_pretok_scan *sc, const step *st, step_run *r, const char *s, size_t n, size_t at,
                        size_t *cnt, qs_err *e)
{
    size_t k = 0, prev = 0, last_end = 0, last_match_end = 0;
    work w = {(uint64_t)STEPS_PER_BYTE * n + STEPS_BASE, (uint64_t)BYTES_PER_BYTE * n + BYTES_BASE};
    int have_last = 0;
    while (last_end <= n) {
        int rc = match_bounded(sc, st, r, s, n, last_end, &w);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return regex_fail(sc, st, rc, at + last_end, e);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(r->md);
        size_t ms = ov[0], me = ov[1];
        if (me < ms) {
            qs_fail(e, "pre-tokenizer regex /%.60s/ gave a match ending before its start", st->pat);
            return QS_PRETOK_REGEX;
        }
        if (ms == me && have_last && last_match_end == me) {   /* no empty match right after a match */
            last_end += char_len((const unsigned char *)s, n, last_end);
            continue;
        }
        last_end = me; last_match_end = me; have_last = 1;
        if (grow(&r->m, &r->mcap, k + 2)) return qs_fail(e, "out of memory");
        if (prev != ms) r->m[k++] = (span){prev, ms, 0};
        r->m[k++] = (span){ms, me, 1};
        prev = me;
    }
    if (grow(&r->m, &r->mcap, k + 1)) return qs_fail(e, "out of memory");
    if (prev != n || n == 0) r->m[k++] = (span){prev, n, 0};
    *cnt = k;
    return 0;
}

/* SplitDelimiterBehavior applied to r->m[0..k) -> r->out (offsets to keep). */
static size_t apply_behavior(const step *st, step_run *r, size_t k)
{
    span *m = r->m, *o = r->out;
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

static int run(qs_pretok_scan *sc, int k, const char *s, size_t n, size_t at, size_t virt, qs_pretok_cb cb, void *ctx,
               qs_err *e)
{
    const qs_pretok *p = sc->p;
    if (!n) return 0;   /* empty pieces are dropped */
    if (k == p->n) return cb(ctx, s, n, at, virt);
    const step *st = &p->s[k];
    step_run *r = &sc->r[k];
    if (st->prefix_space && qs_pretok_meta_prepend(st->prefix_space, s, n, sc->origin + at, virt)) {   /* ByteLevel, Metaspace */
        if (n + 1 > r->bcap) {
            char *b = realloc(r->buf, n + 1);
            if (!b) return qs_fail(e, "out of memory");
            r->buf = b; r->bcap = n + 1;
        }
        r->buf[0] = ' ';
        memmove(r->buf + 1, s, n);   /* s may be this step's buffer's parent piece, never the buffer */
        s = r->buf; n++;
        virt = 1;                    /* the added space stands before the piece */
    }
    if (!st->re) return run(sc, k + 1, s, n, at, virt, cb, ctx, e);
    size_t cnt = 0;
    int rc = find_matches(sc, st, r, s, n, at >= virt ? at - virt : 0, &cnt, e);
    if (rc) return rc;
    for (size_t i = 0; i < cnt; i++) r->m[i].match ^= st->invert;
    if (grow(&r->out, &r->ocap, cnt)) return qs_fail(e, "out of memory");
    size_t no = apply_behavior(st, r, cnt);
    for (size_t i = 0; i < no; i++) {
        size_t a = r->out[i].a, v = a < virt ? virt - a : 0;   /* a piece that starts with the added space */
        if ((rc = run(sc, k + 1, s + a, r->out[i].b - a, at + a + v - virt, v, cb, ctx, e))) return rc;
    }
    return 0;
}

void qs_pretok_scan_origin(qs_pretok_scan *sc, size_t origin)
{
    sc->origin = origin;
}

void qs_pretok_scan_name(qs_pretok_scan *sc, const char *name)
{
    sc->name = name ? name : "the text";
}

int qs_pretok_run(qs_pretok_scan *sc, const char *s, size_t n, size_t at, qs_pretok_cb cb, void *ctx, qs_err *e)
{
    return run(sc, 0, s, n, at, 0, cb, ctx, e);
}
