/*
** tokenizer.json -> qs_llm_vocab (see llm_tok.h) without a JSON tree of the whole file: a jansson
** tree costs ~20 times the file (a 20 MB tokenizer.json took 420 MB), so the file is read by a small
** validating scanner instead.  One pass finds and checks the parts (strict JSON: escapes, UTF-8, no
** NUL, nesting depth, nothing after the value); the vocabulary, the added tokens and the merges are
** then counted and sized before anything is allocated for them, and copied unescaped into flat
** arrays.  Only the small objects (pre_tokenizer, decoder, post_processor, each at most 1 MB) go
** through jansson.
*/
#include "llm_tok.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_load_internal.h"

enum { MAX_NEST = 64, MAX_IDS = 1 << 24, MAX_MERGES = 1 << 24, MAX_SUBTREE = 1 << 20 };

typedef struct { const char *p; size_t n; } range;   /* a value's JSON text; p NULL: absent */

typedef struct {
    const char *b, *p, *end;   /* the file and the cursor */
    int depth, failed;
    qs_err *e;
} js;

static int jfail(js *j, const char *what)
{
    if (j->failed) return -1;
    j->failed = 1;
    int line = 1;
    for (const char *q = j->b; q < j->p && q < j->end; q++) line += *q == '\n';
    return qs_fail(j->e, "invalid JSON at line %d: %s", line, what);
}

static void ws(js *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t')) j->p++;
}

static int lit(js *j, char c)
{
    ws(j);
    if (j->p < j->end && *j->p == c) { j->p++; return 1; }
    return 0;
}

static int hex4(const unsigned char *p, const unsigned char *end, unsigned *cp)
{
    if (end - p < 4) return -1;
    *cp = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 16;
        if (d > 15) return -1;
        *cp = *cp << 4 | d;
    }
    return 0;
}

/* bytes of the valid UTF-8 sequence at p (no overlong forms, surrogates or code points past U+10FFFF), or 0 */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    size_t k = c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
    if (!k || (size_t)(end - p) < k) return 0;
    for (size_t i = 1; i < k; i++) if ((p[i] & 0xC0) != 0x80) return 0;
    if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F) || (c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F)) return 0;
    return k;
}

/* The \u escape at p (after the backslash-u) -> code point, surrogate pairs joined; bytes used or 0. */
static size_t u_escape(const unsigned char *p, const unsigned char *end, unsigned *cp)
{
    if (hex4(p, end, cp)) return 0;
    if (*cp >= 0xDC00 && *cp < 0xE000) return 0;
    if (*cp < 0xD800 || *cp >= 0xDC00) return *cp ? 4 : 0;   /* \u0000: tokens are NUL-terminated */
    unsigned lo;
    if (end - p < 10 || p[4] != '\\' || p[5] != 'u' || hex4(p + 6, end, &lo) || lo < 0xDC00 || lo >= 0xE000) return 0;
    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
    return 10;
}

/* A string at the cursor, checked; its raw body s[0..raw) and its length once unescaped. */
static int str_scan(js *j, const char **s, size_t *raw, size_t *len)
{
    ws(j);
    if (j->p >= j->end || *j->p != '"') return jfail(j, "string expected");
    const unsigned char *p = (const unsigned char *)++j->p, *end = (const unsigned char *)j->end;
    size_t n = 0;
    while (p < end && *p != '"') {
        size_t k;
        unsigned cp;
        if (*p == '\\' && p + 1 < end && p[1] == 'u') {
            if (!(k = u_escape(p + 2, end, &cp))) { j->p = (const char *)p; return jfail(j, "invalid \\u escape"); }
            p += 2 + k;
            n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        } else if (*p == '\\') {
            if (p + 1 >= end || !strchr("\"\\/bfnrt", p[1]) || !p[1]) { j->p = (const char *)p; return jfail(j, "invalid escape"); }
            p += 2; n++;
        } else if (*p < 0x20) {
            j->p = (const char *)p;
            return jfail(j, "control character in a string");
        } else if (*p < 0x80) {
            p++; n++;
        } else {
            if (!(k = utf8_len(p, end))) { j->p = (const char *)p; return jfail(j, "invalid UTF-8 in a string"); }
            p += k; n += k;
        }
    }
    if (p >= end) return jfail(j, "unterminated string");
    *s = j->p; *raw = (size_t)((const char *)p - j->p); *len = n;
    j->p = (const char *)p + 1;
    return 0;
}

/* Unescape a string body checked by str_scan into out; returns the bytes written. */
static size_t unescape(const char *s, size_t raw, char *out)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + raw;
    size_t o = 0;
    while (p < end) {
        if (*p != '\\') { out[o++] = (char)*p++; continue; }
        unsigned cp;
        if (p[1] == 'u') {
            p += 2 + u_escape(p + 2, end, &cp);
            if (cp < 0x80) out[o++] = (char)cp;
            else if (cp < 0x800) { out[o++] = (char)(0xC0 | cp >> 6); out[o++] = (char)(0x80 | (cp & 0x3F)); }
            else if (cp < 0x10000) {
                out[o++] = (char)(0xE0 | cp >> 12); out[o++] = (char)(0x80 | (cp >> 6 & 0x3F)); out[o++] = (char)(0x80 | (cp & 0x3F));
            } else {
                out[o++] = (char)(0xF0 | cp >> 18); out[o++] = (char)(0x80 | (cp >> 12 & 0x3F));
                out[o++] = (char)(0x80 | (cp >> 6 & 0x3F)); out[o++] = (char)(0x80 | (cp & 0x3F));
            }
            continue;
        }
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
        out[o++] = to[strchr(from, p[1]) - from];
        p += 2;
    }
    return o;
}

/* A number at the cursor; *iv its value when it is an integer (saturated), *is_int. */
static int num_scan(js *j, long long *iv, int *is_int)
{
    ws(j);
    const char *p = j->p, *end = j->end;
    int neg = p < end && *p == '-';
    if (neg) p++;
    if (p >= end || *p < '0' || *p > '9') return jfail(j, "value expected");
    long long v = 0;
    if (*p == '0') p++;
    else for (; p < end && *p >= '0' && *p <= '9'; p++) v = v > (LLONG_MAX - 9) / 10 ? LLONG_MAX : v * 10 + (*p - '0');
    *is_int = 1;
    if (p < end && *p == '.') {
        *is_int = 0;
        if (++p >= end || *p < '0' || *p > '9') { j->p = p; return jfail(j, "digit expected"); }
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        if (++p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') { j->p = p; return jfail(j, "digit expected"); }
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    *iv = neg ? -v : v;
    j->p = p;
    return 0;
}

/* Object and array iteration: call with the cursor after '{' / '['; 1: a member follows (for an
** object the key is read and the cursor is after ':'), 0: the end was read, -1: error. */
static int obj_next(js *j, int *first, const char **k, size_t *kraw, size_t *klen)
{
    if (lit(j, '}')) return 0;
    if (!*first && !lit(j, ',')) return jfail(j, "',' or '}' expected");
    *first = 0;
    if (str_scan(j, k, kraw, klen)) return -1;
    return lit(j, ':') ? 1 : jfail(j, "':' expected");
}

static int arr_next(js *j, int *first)
{
    if (lit(j, ']')) return 0;
    if (!*first && !lit(j, ',')) return jfail(j, "',' or ']' expected");
    *first = 0;
    return 1;
}

static int skip_value(js *j)
{
    ws(j);
    if (j->p >= j->end) return jfail(j, "value expected");
    const char *s;
    size_t raw, len;
    int first = 1, r;
    switch (*j->p) {
    case '{':
    case '[': {
        int obj = *j->p++ == '{';
        if (++j->depth > MAX_NEST) return jfail(j, "nested too deeply");
        while ((r = obj ? obj_next(j, &first, &s, &raw, &len) : arr_next(j, &first)) == 1)
            if (skip_value(j)) return -1;
        j->depth--;
        return r;
    }
    case '"': return str_scan(j, &s, &raw, &len);
    case 't': case 'f': case 'n': {
        const char *w = *j->p == 't' ? "true" : *j->p == 'f' ? "false" : "null";
        size_t n = strlen(w);
        if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n)) return jfail(j, "invalid literal");
        j->p += n;
        return 0;
    }
    default: {
        long long v;
        int is_int;
        return num_scan(j, &v, &is_int);
    }
    }
}

/* The value at the cursor, skipped; its text in *r. */
static int take(js *j, range *r)
{
    ws(j);
    const char *a = j->p;
    if (skip_value(j)) return -1;
    *r = (range){a, (size_t)(j->p - a)};
    return 0;
}

/* Does the key (raw body) spell w once unescaped? */
static int key_is(const char *k, size_t kraw, size_t klen, const char *w)
{
    char buf[32];
    if (klen != strlen(w) || klen >= sizeof buf) return 0;
    unescape(k, kraw, buf);
    return !memcmp(buf, w, klen);
}

/* The parts of tokenizer.json qscope reads. */
enum { MAX_MODEL_KEYS = 16 };

typedef struct {
    range model, type, vocab, merges, ignore, added, pre, decoder, post, norm;
    range mkey[MAX_MODEL_KEYS], mval[MAX_MODEL_KEYS];   /* the model's other (small) keys: raw key, value */
    int nmodel;
} parts;

/* Key k of an object at most once: a second one is refused, as jansson's JSON_REJECT_DUPLICATES did. */
static int take_once(js *j, range *r, const char *name)
{
    if (r->p) return qs_fail(j->e, "key \"%s\" appears twice", name);
    return take(j, r);
}

static int scan_parts(js *j, parts *pt)
{
    const char *k;
    size_t kraw, klen;
    int first = 1, r;
    if (!lit(j, '{')) return j->p < j->end ? qs_fail(j->e, "not a JSON object") : jfail(j, "value expected");
    j->depth = 1;
    while ((r = obj_next(j, &first, &k, &kraw, &klen)) == 1) {
        static const char *names[] = {"added_tokens", "pre_tokenizer", "decoder", "post_processor", "normalizer"};
        range *dst[] = {&pt->added, &pt->pre, &pt->decoder, &pt->post, &pt->norm};
        int done = 0;
        for (int i = 0; i < 5 && !done; i++)
            if (key_is(k, kraw, klen, names[i])) {
                if (take_once(j, dst[i], names[i])) return -1;
                done = 1;
            }
        if (done) continue;
        if (!key_is(k, kraw, klen, "model")) { if (skip_value(j)) return -1; continue; }
        if (pt->model.p) return qs_fail(j->e, "key \"model\" appears twice");
        ws(j);
        pt->model.p = j->p;
        if (!lit(j, '{')) { if (skip_value(j)) return -1; continue; }   /* refused below: not an object */
        int mfirst = 1, mr;
        j->depth++;
        while ((mr = obj_next(j, &mfirst, &k, &kraw, &klen)) == 1) {
            static const char *mnames[] = {"type", "vocab", "merges", "ignore_merges"};
            range *mdst[] = {&pt->type, &pt->vocab, &pt->merges, &pt->ignore};
            int mdone = 0;
            for (int i = 0; i < 4 && !mdone; i++)
                if (key_is(k, kraw, klen, mnames[i])) {
                    if (take_once(j, mdst[i], mnames[i])) return -1;
                    mdone = 1;
                }
            if (mdone) continue;
            if (pt->nmodel == MAX_MODEL_KEYS) return qs_fail(j->e, "model has more than %d keys", MAX_MODEL_KEYS);
            pt->mkey[pt->nmodel] = (range){k, kraw};
            if (take(j, &pt->mval[pt->nmodel++])) return -1;
        }
        if (mr) return -1;
        j->depth--;
        pt->model.n = 1;   /* an object */
    }
    if (r) return -1;
    ws(j);
    return j->p == j->end ? 0 : jfail(j, "end of file expected");
}

/* A scanner over one part (already checked by scan_parts); an absent part (NULL) scans nothing
** (NULL + 0 is undefined behaviour). */
static js sub(const js *j, range r)
{
    return (js){j->b, r.p, r.p ? r.p + r.n : r.p, 0, 0, j->e};
}

/* A small part through jansson (NULL when absent or null). */
static int small_json(const js *j, range r, const char *name, json_t **out)
{
    *out = NULL;
    if (!r.p) return 0;
    if (r.n > MAX_SUBTREE) return qs_fail(j->e, "\"%s\" is larger than %d bytes", name, MAX_SUBTREE);
    json_error_t je;
    *out = json_loadb(r.p, r.n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!*out) return qs_fail(j->e, "\"%s\": %s", name, je.text);
    if (json_is_null(*out)) { json_decref(*out); *out = NULL; }
    return 0;
}

/* What a pass over the vocabulary and the added tokens finds; with fill set, it also copies them. */
typedef struct {
    size_t entries, bytes;     /* tokens, and their bytes + NULs */
    long long maxid;           /* the largest id in 0..MAX_IDS-1, or -1 */
    int fill, vocab;           /* fill: ids must be in 0..vocab-1 */
    qs_llm_vocab *v;
    size_t o;                  /* next free byte of v->text */
} tally;

static int put_token(tally *t, int id, const char *s, size_t raw, size_t len, int type)
{
    t->v->off[id] = (uint32_t)t->o;
    t->o += unescape(s, raw, t->v->text + t->o);
    t->v->text[t->o++] = 0;
    t->v->type[id] = type;
    (void)len;
    return 0;
}

/* A JSON number's value (jansson's conversion, which does not depend on the locale). */
static int num_value(js *j, double *out)
{
    long long iv;
    int is_int;
    ws(j);
    const char *a = j->p;
    if (num_scan(j, &iv, &is_int)) return -1;
    json_t *n = json_loadb(a, (size_t)(j->p - a), JSON_DECODE_ANY, NULL);
    *out = json_number_value(n);
    json_decref(n);
    return n ? 0 : qs_fail(j->e, "unreadable number");
}

/* Unigram's vocabulary: an array of [piece, score], ids in order; scores -> v->score when filling. */
static int vocab_array(js *j, tally *t)
{
    int first = 1, r;
    long long id = 0;
    while ((r = arr_next(j, &first)) == 1) {
        const char *k;
        size_t kraw, klen;
        int pf = 1;
        double sc;
        if (!lit(j, '[') || arr_next(j, &pf) != 1 || str_scan(j, &k, &kraw, &klen) || arr_next(j, &pf) != 1 ||
            num_value(j, &sc) || arr_next(j, &pf) != 0) {
            if (j->failed) return -1;
            return qs_fail(j->e, "model.vocab[%lld] is not [piece, score]", id);
        }
        t->entries++;
        t->bytes += klen + 1;
        if (id < MAX_IDS && id > t->maxid) t->maxid = id;
        if (t->fill) {
            if (id >= t->vocab) return qs_fail(j->e, "model.vocab[%lld] is outside 0..%d", id, t->vocab - 1);
            put_token(t, (int)id, k, kraw, klen, 1);
            t->v->score[id] = sc;
        }
        id++;
    }
    return r;
}

static int vocab_pass(js *j, tally *t)
{
    const char *k;
    size_t kraw, klen;
    int first = 1, r;
    if (lit(j, '[')) return vocab_array(j, t);
    if (!lit(j, '{')) return qs_fail(j->e, "no model.vocab object");
    while ((r = obj_next(j, &first, &k, &kraw, &klen)) == 1) {
        long long id;
        int is_int = 0;
        ws(j);
        if (j->p < j->end && (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))) { if (num_scan(j, &id, &is_int)) return -1; }
        else if (skip_value(j)) return -1;
        t->entries++;
        t->bytes += klen + 1;
        if (is_int && id >= 0 && id < MAX_IDS && id > t->maxid) t->maxid = id;
        if (!t->fill) continue;
        if (!is_int || id < 0 || id >= t->vocab) {
            char name[41];
            size_t n = kraw < 40 ? kraw : 40;
            memcpy(name, k, n);
            name[n] = 0;
            return qs_fail(j->e, "vocabulary entry \"%s\" has id outside 0..%d", name, t->vocab - 1);
        }
        if (t->v->type[id]) return qs_fail(j->e, "vocabulary id %lld is used twice", id);
        put_token(t, (int)id, k, kraw, klen, 1);
    }
    return r;
}

/* One added_tokens entry: its id (or -1), content (raw body, or NULL), special flag and QS_TOK_* flags
** (tokenizers' defaults: normalized = !special). */
static int added_entry(js *j, long long *id, const char **s, size_t *raw, size_t *len, int *special, int *flags)
{
    const char *k;
    size_t kraw, klen;
    int first = 1, r, is_int, normalized = -1;
    *id = -1; *s = NULL; *special = 0; *flags = QS_TOK_ADDED;
    if (!lit(j, '{')) return skip_value(j);
    while ((r = obj_next(j, &first, &k, &kraw, &klen)) == 1) {
        ws(j);
        if (key_is(k, kraw, klen, "id") && j->p < j->end && (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))) {
            if (num_scan(j, id, &is_int)) return -1;
            if (!is_int || *id < 0) *id = -1;
        } else if (key_is(k, kraw, klen, "content") && j->p < j->end && *j->p == '"') {
            if (str_scan(j, s, raw, len)) return -1;
        } else if (key_is(k, kraw, klen, "special") && j->p < j->end && *j->p == 't') {
            if (skip_value(j)) return -1;
            *special = 1;
        } else if ((key_is(k, kraw, klen, "lstrip") || key_is(k, kraw, klen, "rstrip") ||
                    key_is(k, kraw, klen, "single_word") || key_is(k, kraw, klen, "normalized")) &&
                   j->p < j->end && (*j->p == 't' || *j->p == 'f')) {
            int on = *j->p == 't';
            int f = key_is(k, kraw, klen, "lstrip") ? QS_TOK_LSTRIP : key_is(k, kraw, klen, "rstrip") ? QS_TOK_RSTRIP
                  : key_is(k, kraw, klen, "single_word") ? QS_TOK_SINGLE_WORD : QS_TOK_NORMALIZED;
            if (skip_value(j)) return -1;
            if (f == QS_TOK_NORMALIZED) normalized = on;
            else if (on) *flags |= f;
        } else if (skip_value(j)) {
            return -1;
        }
    }
    if (*special) *flags |= QS_TOK_SPECIAL;
    if (normalized < 0 ? !*special : normalized) *flags |= QS_TOK_NORMALIZED;
    return r;
}

static int added_pass(js *j, tally *t)
{
    int first = 1, r;
    if (!lit(j, '[')) return 0;   /* not a list: no added tokens (as before) */
    for (size_t i = 0; (r = arr_next(j, &first)) == 1; i++) {
        long long id;
        const char *s;
        size_t raw = 0, len = 0;
        int special, flags;
        if (added_entry(j, &id, &s, &raw, &len, &special, &flags)) return -1;
        t->entries++;
        t->bytes += len + 1;
        if (id >= 0 && id < MAX_IDS && id > t->maxid) t->maxid = id;
        if (!t->fill) continue;
        if (!s || id < 0 || id >= t->vocab)
            return qs_fail(j->e, "added_tokens[%zu] has no content or an id outside 0..%d", i, t->vocab - 1);
        put_token(t, (int)id, s, raw, len, special ? 3 : 4);   /* control / user-defined */
        t->v->aflags[id] = (uint8_t)flags;
    }
    return r;
}

/* Merges: "a b" strings (older files) or ["a", "b"] pairs (tokenizers >= 0.20).  With v NULL, counts
** them (*n) and their bytes (*bytes); else copies them. */
static int merges_pass(js *j, size_t *n, size_t *bytes, qs_llm_vocab *v)
{
    int first = 1, r;
    size_t o = 0;
    *n = 0;
    if (!lit(j, '[')) return 0;   /* not a list: no merges (as before) */
    while ((r = arr_next(j, &first)) == 1) {
        const char *a, *b = NULL;
        size_t ar, al, br = 0, bl = 0;
        int pf = 1;
        ws(j);
        if (j->p < j->end && *j->p == '"') {
            if (str_scan(j, &a, &ar, &al)) return -1;
        } else if (!(lit(j, '[') && arr_next(j, &pf) == 1 && !str_scan(j, &a, &ar, &al) && arr_next(j, &pf) == 1 &&
                     !str_scan(j, &b, &br, &bl) && arr_next(j, &pf) == 0)) {
            return qs_fail(j->e, "merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", *n);
        }
        if (!v) {
            if (*n == MAX_MERGES) return qs_fail(j->e, "too many merges (more than %d)", MAX_MERGES);
            *bytes += al + (b ? bl + 1 : 0) + 1;
        } else {
            v->moff[*n] = (uint32_t)o;
            o += unescape(a, ar, v->mtext + o);
            if (b) { v->mtext[o++] = ' '; o += unescape(b, br, v->mtext + o); }
            v->mtext[o++] = 0;
        }
        (*n)++;
    }
    return r;
}

/* ---------------------------------------------------------------- the pre-tokenizer */

/* GPT-2's pre-tokenizer pattern (ByteLevel with use_regex = true). */
static const char kGpt2Regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int has_type(json_t *j, const char *type, int depth)
{
    if (depth > 16) return 0;
    if (json_is_object(j)) {
        const char *t = json_string_value(json_object_get(j, "type"));
        if (t && !strcmp(t, type)) return 1;
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) if (has_type(v, type, depth + 1)) return 1;
    } else if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) if (has_type(v, type, depth + 1)) return 1;
    }
    return 0;
}

/* The first Split step's regex pattern, if any. */
static const char *split_regex(json_t *j, int depth)
{
    if (depth > 16 || !json_is_object(j)) return NULL;
    const char *t = json_string_value(json_object_get(j, "type"));
    if (t && !strcmp(t, "Split")) {
        const char *r = json_string_value(json_object_get(json_object_get(j, "pattern"), "Regex"));
        if (r) return r;
    }
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(j, "pretokenizers"), i, v) {
        const char *r = split_regex(v, depth + 1);
        if (r) return r;
    }
    return NULL;
}

/* Is there a step of this type (with the flag `key` true; key NULL: any) in the pre-tokenizer? */
static int step_flag(json_t *j, const char *type, const char *key, int dflt, int depth)
{
    if (depth > 16 || !json_is_object(j)) return 0;
    const char *t = json_string_value(json_object_get(j, "type"));
    if (t && !strcmp(t, type)) {
        json_t *f = json_object_get(j, key);
        return f ? json_is_true(f) : dflt;
    }
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(j, "pretokenizers"), i, v) if (step_flag(v, type, key, dflt, depth + 1)) return 1;
    return 0;
}

/* The model's keys other than type, vocab, merges and ignore_merges (unk_token, byte_fallback,
** continuing_subword_prefix, ...) -> v->model_json, compact. */
static int model_keys(const js *j, const parts *pt, qs_llm_vocab *v)
{
    size_t n = 3;
    for (int i = 0; i < pt->nmodel; i++) n += pt->mkey[i].n + pt->mval[i].n + 4;
    if (n > MAX_SUBTREE) return qs_fail(j->e, "\"model\" has more than %d bytes besides vocab and merges", MAX_SUBTREE);
    char *b = malloc(n);
    if (!b) return qs_fail(j->e, "out of memory");
    size_t o = 0;
    b[o++] = '{';
    for (int i = 0; i < pt->nmodel; i++) {
        if (i) b[o++] = ',';
        b[o++] = '"';
        memcpy(b + o, pt->mkey[i].p, pt->mkey[i].n); o += pt->mkey[i].n;
        b[o++] = '"'; b[o++] = ':';
        memcpy(b + o, pt->mval[i].p, pt->mval[i].n); o += pt->mval[i].n;
    }
    b[o++] = '}';
    json_error_t je;
    json_t *m = json_loadb(b, o, JSON_REJECT_DUPLICATES, &je);
    free(b);
    if (!m) return qs_fail(j->e, "\"model\": %s", je.text);
    v->model_json = json_dumps(m, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(m);
    return v->model_json ? 0 : qs_fail(j->e, "out of memory");
}

/* pre_tokenizer and decoder -> v (kept whole as compact JSON: llm_pretok.c runs it; v->pre names its
** family for messages); normalizer -> v->norm_json; post_processor -> *pp_bos. */
static int read_small(const js *j, const parts *pt, qs_llm_vocab *v, int *pp_bos)
{
    json_t *norm;
    if (small_json(j, pt->norm, "normalizer", &norm)) return -1;
    if (norm) {
        v->norm_json = json_dumps(norm, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(norm);
        if (!v->norm_json) return qs_fail(j->e, "out of memory");
    }
    if (model_keys(j, pt, v)) return -1;
    json_t *pre, *dec, *post;
    if (small_json(j, pt->pre, "pre_tokenizer", &pre)) return -1;
    if (small_json(j, pt->decoder, "decoder", &dec)) { json_decref(pre); return -1; }
    if (small_json(j, pt->post, "post_processor", &post)) { json_decref(pre); json_decref(dec); return -1; }
    int rc = 0;
    v->byte_level = has_type(pre, "ByteLevel", 0) || has_type(dec, "ByteLevel", 0);
    if (pre) {
        v->pre_json = json_dumps(pre, JSON_COMPACT | JSON_ENSURE_ASCII);
        const char *rx = split_regex(pre, 0);
        if (rx) {
            v->pre_regex = strdup(rx);
            snprintf(v->pre, sizeof v->pre, "hf-regex");   /* Qwen2, Llama 3 */
        } else if (step_flag(pre, "ByteLevel", "use_regex", 1, 0)) {   /* the tokenizers default is true */
            v->pre_regex = strdup(kGpt2Regex);
            snprintf(v->pre, sizeof v->pre, "%s", step_flag(pre, "Digits", "individual_digits", 0, 0) ? "smollm" : "gpt2");
        } else {
            snprintf(v->pre, sizeof v->pre, "hf-other");
        }
        if (!v->pre_json || (rx && !v->pre_regex)) rc = qs_fail(j->e, "out of memory");
    } else {
        snprintf(v->pre, sizeof v->pre, "hf-none");   /* not a GGUF family: the tokenizer refuses it by name */
    }
    const char *ppt = json_string_value(json_object_get(post, "type"));
    json_t *first = json_array_get(json_object_get(post, "single"), 0);
    *pp_bos = ppt && !strcmp(ppt, "TemplateProcessing") && json_object_get(first, "SpecialToken") != NULL;
    json_decref(pre); json_decref(dec); json_decref(post);
    return rc;
}

/* ---------------------------------------------------------------- the whole file */

int qs_llm_tok_json_parse(const char *buf, size_t n, int vocab, const char *source, qs_llm_vocab *v, int *pp_bos,
                          qs_err *e)
{
    js j = {buf, buf, buf + n, 0, 0, e};
    parts pt;
    memset(&pt, 0, sizeof pt);
    *pp_bos = 0;
    if (scan_parts(&j, &pt)) return -1;
    char mt[16] = "?";
    if (pt.type.p) {
        js t = sub(&j, pt.type);
        const char *s;
        size_t raw, len;
        if (!str_scan(&t, &s, &raw, &len) && len < sizeof mt) mt[unescape(s, raw, mt)] = 0;
        else snprintf(mt, sizeof mt, "(not a name)");
    }
    if (!pt.model.n || (pt.type.p && strcmp(mt, "BPE") && strcmp(mt, "WordPiece") && strcmp(mt, "Unigram")))
        return qs_fail(e, "tokenizer model '%s' is not supported (BPE, WordPiece, Unigram)", mt);
    v->model = !strcmp(mt, "WordPiece") ? QS_TOK_WORDPIECE : !strcmp(mt, "Unigram") ? QS_TOK_UNIGRAM : QS_TOK_BPE;
    if (!pt.vocab.p) return qs_fail(e, "no model.vocab object");
    /* count, then size: nothing is allocated for what the file merely claims */
    tally t = {0, 1, -1, 0, 0, v, 1};
    js jv = sub(&j, pt.vocab), ja = sub(&j, pt.added);
    if (vocab_pass(&jv, &t) || (pt.added.p && added_pass(&ja, &t))) return -1;
    if (!vocab) {   /* a tokenizer.json alone: ids 0 .. the largest one, at most half of them unused */
        if (t.maxid < 0) return qs_fail(e, "no vocabulary");
        if ((size_t)t.maxid >= 2 * t.entries + 1024)
            return qs_fail(e, "token ids go up to %lld but only %zu tokens are defined", t.maxid, t.entries);
        vocab = (int)t.maxid + 1;
    }
    size_t nm = 0, mbytes = 0;
    js jm = sub(&j, pt.merges);
    if (pt.merges.p && merges_pass(&jm, &nm, &mbytes, NULL)) return -1;
    if (t.bytes > UINT32_MAX) return qs_fail(e, "vocabulary too large");
    if (mbytes > UINT32_MAX) return qs_fail(e, "merges too large");
    v->type = calloc((size_t)vocab, sizeof *v->type);
    v->aflags = calloc((size_t)vocab, 1);
    v->off = calloc((size_t)vocab, sizeof *v->off);   /* offset 0: "" for ids the tokenizer does not use */
    v->text = malloc(t.bytes);
    v->mtext = malloc(mbytes ? mbytes : 1);
    v->moff = malloc((nm ? nm : 1) * sizeof *v->moff);
    if (v->model == QS_TOK_UNIGRAM && !(v->score = calloc((size_t)vocab, sizeof *v->score)))
        return qs_fail(e, "out of memory for the vocabulary");
    if (!v->type || !v->aflags || !v->off || !v->text || !v->mtext || !v->moff) return qs_fail(e, "out of memory for the vocabulary");
    v->text[0] = 0;
    t.fill = 1; t.vocab = vocab;
    jv = sub(&j, pt.vocab); ja = sub(&j, pt.added);
    if (vocab_pass(&jv, &t) || (pt.added.p && added_pass(&ja, &t))) return -1;
    v->n = vocab;
    jm = sub(&j, pt.merges);
    if (pt.merges.p && merges_pass(&jm, &nm, &mbytes, v)) return -1;
    v->nmerges = (int)nm;
    v->ignore_merges = pt.ignore.p && pt.ignore.n == 4 && !memcmp(pt.ignore.p, "true", 4);
    if (read_small(&j, &pt, v, pp_bos) || qs_llm__vocab_tables(v, e)) return -1;
    for (int i = 0; i < vocab; i++)   /* two vocabulary keys spelling the same token */
        if (v->type[i] == 1) {
            const char *s = v->text + v->off[i];
            int k = qs_llm_hash_find(v->text, v->off, v->vhash, v->vhcap, s, strlen(s));
            if (k != i && v->type[k] == 1) return qs_fail(e, "model.vocab has the token \"%.40s\" twice", s);
        }
    return qs_llm_tok_prepare(v, source, e);
}
