/*
** Normalizers of tokenizer.json (llm_tok_norm.h), as Hugging Face `tokenizers` runs them: each one
** rewrites the whole string through NormalizedString::transform (llm_tok_norm_int.h), which keeps,
** per output byte, the span of input bytes it came from; a Sequence runs its steps in order.  This
** file: the JSON, the tree, the run and transform itself.  Unicode steps: llm_tok_norm_uni.c;
** Replace: llm_tok_norm_replace.c; SentencePiece's precompiled rules: llm_tok_norm_spm.c.
*/
#include "llm_tok_norm_int.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 16, MAX_STEPS = 64 };

/* ---------------------------------------------------------------- characters and operations */

size_t qs_nchar(const char *s, size_t n, size_t i, uint32_t *cp)
{
    const unsigned char *p = (const unsigned char *)s + i;
    size_t left = n - i;
    unsigned c = p[0];
    if (c < 0x80) { *cp = c; return 1; }
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!len || len > left) { *cp = QS_NRAW | c; return 1; }
    uint32_t v = c & (0x7F >> len);
    for (size_t k = 1; k < len; k++) {
        if ((p[k] & 0xC0) != 0x80) { *cp = QS_NRAW | c; return 1; }
        v = v << 6 | (p[k] & 0x3F);
    }
    /* overlong 3/4-byte forms, surrogates, beyond U+10FFFF */
    if ((len == 3 && (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF))) || (len == 4 && (v < 0x10000 || v > 0x10FFFF))) {
        *cp = QS_NRAW | c;
        return 1;
    }
    *cp = v;
    return len;
}

size_t qs_nenc(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp & QS_NRAW) { o[0] = (unsigned char)(cp & 0xFF); return 1; }
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | cp >> 6); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12); o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18); o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)); o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int qs_nops_push(qs_nops *o, uint32_t cp, int32_t ch)
{
    if (o->n == o->cap) {
        size_t c = o->cap ? 2 * o->cap : 256;
        uint32_t *a = realloc(o->cp, c * sizeof *a);
        if (!a) return -1;
        o->cp = a;
        int32_t *b = realloc(o->ch, c * sizeof *b);
        if (!b) return -1;
        o->ch = b;
        o->cap = c;
    }
    o->cp[o->n] = cp;
    o->ch[o->n++] = ch;
    return 0;
}

void qs_nops_free(qs_nops *o)
{
    free(o->cp); free(o->ch);
    memset(o, 0, sizeof *o);
}

int qs_norm_reserve(qs_tok_norm_buf *b, size_t n)
{
    if (n <= b->cap) return 0;
    size_t c = b->cap ? b->cap : 256;
    while (c < n) c *= 2;
    char *s = realloc(b->s, c);
    if (!s) return -1;
    b->s = s;
    uint32_t *m = realloc(b->map, 2 * c * sizeof *m);
    if (!m) return -1;
    b->map = m;
    b->cap = c;
    return 0;
}

static void swap_buf(qs_tok_norm_buf *a, qs_tok_norm_buf *b)
{
    qs_tok_norm_buf t = *a;
    *a = *b;
    *b = t;
}

/* NormalizedString::transform_range over the whole string: `pos` walks the source characters the
** operations replace or drop; an inserted character takes the span of the byte before pos ((0, 0) at
** the start).  Where tokenizers would index past the end (only malformed rules get there), the last
** span is used. */
int qs_norm_transform(qs_tok_norm_buf *cur, qs_tok_norm_buf *tmp, const qs_nops *o, size_t skip)
{
    size_t pos = 0, n = cur->n, out = 0;
    uint32_t cp;
    if (qs_norm_reserve(tmp, 1)) return -1;   /* an empty result still has a buffer */
    for (size_t k = 0; k < skip && pos < n; k++) pos += qs_nchar(cur->s, n, pos, &cp);
    tmp->n = 0;
    for (size_t k = 0; k < o->n; k++) {
        int32_t ch = o->ch[k];
        uint32_t a = 0, b = 0;
        if (ch == QS_NCOPY) {
            size_t m = o->cp[k] < n - pos ? o->cp[k] : n - pos;
            if (qs_norm_reserve(tmp, out + m + 1)) return -1;
            memcpy(tmp->s + out, cur->s + pos, m);
            memcpy(tmp->map + 2 * out, cur->map + 2 * pos, 2 * m * sizeof *tmp->map);
            out += m;
            pos += m;
            continue;
        }
        if (ch > 0) {
            if (pos >= 1) { a = cur->map[2 * (pos - 1)]; b = cur->map[2 * (pos - 1) + 1]; }
        } else if (pos < n) {
            a = cur->map[2 * pos]; b = cur->map[2 * pos + 1];
        } else if (n) {
            a = cur->map[2 * (n - 1)]; b = cur->map[2 * (n - 1) + 1];
        }
        if (ch <= 0 && pos < n) pos += qs_nchar(cur->s, n, pos, &cp);
        for (int32_t r = 0; ch < 0 && r < -ch && pos < n; r++) pos += qs_nchar(cur->s, n, pos, &cp);
        if (qs_norm_reserve(tmp, out + 4)) return -1;
        size_t len = qs_nenc(o->cp[k], tmp->s + out);
        for (size_t i = 0; i < len; i++) { tmp->map[2 * (out + i)] = a; tmp->map[2 * (out + i) + 1] = b; }
        out += len;
    }
    tmp->n = out;
    swap_buf(cur, tmp);
    return 0;
}

/* ---------------------------------------------------------------- compiling the JSON */

static qs_tok_norm *node_new(int type)
{
    qs_tok_norm *nm = calloc(1, sizeof *nm);
    if (nm) nm->type = type;
    return nm;
}

void qs_tok_norm_free(qs_tok_norm *nm)
{
    if (!nm) return;
    for (int i = 0; i < nm->nkid; i++) qs_tok_norm_free(nm->kid[i]);
    free(nm->kid);
    qs_norm_replace_free(nm);
    free(nm->str); free(nm->trie); free(nm->pool);
    free(nm);
}

static int jflag(json_t *o, const char *k, int *out, const char *type, qs_err *e)
{
    json_t *j = json_object_get(o, k);
    if (!json_is_boolean(j)) return qs_fail(e, "normalizer %s without a true/false \"%s\"", type, k);
    *out = json_is_true(j);
    return 0;
}

static int add_kid(qs_tok_norm *seq, qs_tok_norm *k)
{
    qs_tok_norm **a = realloc(seq->kid, (size_t)(seq->nkid + 1) * sizeof *a);
    if (!a) return -1;
    seq->kid = a;
    seq->kid[seq->nkid++] = k;
    return 0;
}

/* base64 (standard alphabet, '=' padding optional) -> malloc'd bytes. */
static uint8_t *unbase64(const char *s, size_t *n)
{
    size_t len = strlen(s), o = 0;
    uint8_t *out = malloc(len / 4 * 3 + 3);
    if (!out) return NULL;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)s[i], v;
        if (c >= 'A' && c <= 'Z') v = c - 'A';
        else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
        else if (c >= '0' && c <= '9') v = c - '0' + 52;
        else if (c == '+') v = 62;
        else if (c == '/') v = 63;
        else if (c == '=' && len - i <= 2) break;
        else { free(out); return NULL; }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) { bits -= 8; out[o++] = (uint8_t)(acc >> bits); }
    }
    *n = o;
    return out;
}

static qs_tok_norm *compile(json_t *j, int depth, qs_err *e);

static qs_tok_norm *compile_seq(json_t *j, int depth, qs_err *e)
{
    json_t *a = json_object_get(j, "normalizers"), *v;
    if (!json_is_array(a)) { qs_fail(e, "normalizer Sequence without \"normalizers\""); return NULL; }
    if (json_array_size(a) > MAX_STEPS) { qs_fail(e, "normalizer Sequence has more than %d steps", MAX_STEPS); return NULL; }
    qs_tok_norm *seq = node_new(NT_SEQ);
    if (!seq) { qs_fail(e, "out of memory"); return NULL; }
    size_t i;
    json_array_foreach(a, i, v) {
        qs_tok_norm *k = compile(v, depth + 1, e);
        if (!k || add_kid(seq, k)) {
            if (k) { qs_tok_norm_free(k); qs_fail(e, "out of memory"); }
            qs_tok_norm_free(seq);
            return NULL;
        }
    }
    return seq;
}

static int compile_bert(qs_tok_norm *nm, json_t *j, qs_err *e)
{
    const char *t = "BertNormalizer";
    if (jflag(j, "clean_text", &nm->clean, t, e) || jflag(j, "handle_chinese_chars", &nm->chinese, t, e) ||
        jflag(j, "lowercase", &nm->lower, t, e))
        return -1;
    json_t *sa = json_object_get(j, "strip_accents");
    if (json_is_boolean(sa)) nm->accents = json_is_true(sa);
    else if (!sa || json_is_null(sa)) nm->accents = nm->lower;   /* null: as lowercase */
    else return qs_fail(e, "normalizer BertNormalizer's \"strip_accents\" is not true, false or null");
    return 0;
}

static int compile_charsmap(qs_tok_norm *nm, json_t *j, qs_err *e)
{
    const char *b64 = json_string_value(json_object_get(j, "precompiled_charsmap"));
    if (!b64) return qs_fail(e, "normalizer Precompiled without a \"precompiled_charsmap\" string");
    size_t n;
    uint8_t *blob = unbase64(b64, &n);
    if (!blob) return qs_fail(e, "normalizer Precompiled's \"precompiled_charsmap\" is not base64");
    qs_tok_norm *p = qs_tok_norm_from_charsmap(blob, n, e);
    free(blob);
    if (!p) return -1;
    nm->trie = p->trie; nm->ntrie = p->ntrie; nm->pool = p->pool; nm->npool = p->npool;
    p->trie = NULL; p->pool = NULL;
    qs_tok_norm_free(p);
    return 0;
}

static qs_tok_norm *compile(json_t *j, int depth, qs_err *e)
{
    if (depth > MAX_DEPTH) { qs_fail(e, "normalizer nested too deeply"); return NULL; }
    const char *t = json_string_value(json_object_get(j, "type"));
    if (!t) { qs_fail(e, "normalizer without a \"type\""); return NULL; }
    if (!strcmp(t, "Sequence")) return compile_seq(j, depth, e);
    static const struct { const char *name; int type; } simple[] = {
        {"NFC", NT_NFC}, {"NFD", NT_NFD}, {"NFKC", NT_NFKC}, {"NFKD", NT_NFKD}, {"Lowercase", NT_LOWER},
        {"StripAccents", NT_STRIP_ACC}, {"Nmt", NT_NMT}, {"Strip", NT_STRIP}, {"BertNormalizer", NT_BERT},
        {"Replace", NT_REPLACE}, {"Prepend", NT_PREPEND}, {"Precompiled", NT_PRECOMPILED},
    };
    int type = -1;
    for (size_t i = 0; i < sizeof simple / sizeof *simple; i++)
        if (!strcmp(t, simple[i].name)) type = simple[i].type;
    if (type < 0) {
        qs_fail(e, "normalizer type '%.40s' is not supported (NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, "
                   "BertNormalizer, Replace, Prepend, Precompiled, Nmt, Sequence)", t);
        return NULL;
    }
    qs_tok_norm *nm = node_new(type);
    if (!nm) { qs_fail(e, "out of memory"); return NULL; }
    int rc = 0;
    if (type == NT_STRIP) {
        rc = jflag(j, "strip_left", &nm->left, t, e) || jflag(j, "strip_right", &nm->right, t, e) ? -1 : 0;
    } else if (type == NT_BERT) {
        rc = compile_bert(nm, j, e);
    } else if (type == NT_PREPEND) {
        const char *p = json_string_value(json_object_get(j, "prepend"));
        if (!p) rc = qs_fail(e, "normalizer Prepend without a \"prepend\" string");
        else if (!(nm->str = strdup(p))) rc = qs_fail(e, "out of memory");
    } else if (type == NT_REPLACE) {
        json_t *pat = json_object_get(j, "pattern");
        const char *rx = json_string_value(json_object_get(pat, "Regex"));
        const char *lit = json_string_value(json_object_get(pat, "String"));
        const char *c = json_string_value(json_object_get(j, "content"));
        if ((!rx && !lit) || !c) rc = qs_fail(e, "normalizer Replace without a String or Regex pattern and a content");
        else if (!(nm->str = strdup(c))) rc = qs_fail(e, "out of memory");
        else rc = qs_norm_replace_compile(nm, rx ? rx : lit, !rx, e);
    } else if (type == NT_PRECOMPILED) {
        rc = compile_charsmap(nm, j, e);
    }
    if (rc) { qs_tok_norm_free(nm); return NULL; }
    return nm;
}

qs_tok_norm *qs_tok_norm_from_json(const char *json, qs_err *e)
{
    json_error_t je;
    json_t *j = json_loads(json, JSON_DECODE_ANY, &je);
    if (!j) { qs_fail(e, "normalizer is not valid JSON: %s", je.text); return NULL; }
    qs_tok_norm *nm = json_is_null(j) ? NULL : compile(j, 0, e);
    json_decref(j);
    return nm;
}

qs_tok_norm *qs_tok_norm_chain(qs_tok_norm *first, qs_tok_norm *second, qs_err *e)
{
    if (!first || !second) return first ? first : second;
    qs_tok_norm *seq = node_new(NT_SEQ);
    if (!seq || add_kid(seq, first)) {
        free(seq);
        qs_tok_norm_free(first); qs_tok_norm_free(second);
        qs_fail(e, "out of memory");
        return NULL;
    }
    if (add_kid(seq, second)) {
        qs_tok_norm_free(seq); qs_tok_norm_free(second);
        qs_fail(e, "out of memory");
        return NULL;
    }
    return seq;
}

/* ---------------------------------------------------------------- running */

typedef struct { qs_tok_norm_buf tmp; qs_nops o; int cont; } scratch;   /* cont: the text continues a stretch */

/* 1 when s[0..n) is ASCII: the Unicode forms and StripAccents leave it as it is. */
static int ascii(const char *s, size_t n)
{
    unsigned char acc = 0;
    for (size_t i = 0; i < n; i++) acc |= (unsigned char)s[i];
    return acc < 0x80;
}

/* 1 when the operations rewrite cur as it is (every character replaced by itself): no transform needed. */
static int identity(const qs_tok_norm_buf *cur, const qs_nops *o, size_t skip)
{
    if (skip) return 0;
    size_t i = 0, k = 0;
    for (; i < cur->n && k < o->n; k++) {
        uint32_t cp;
        if (o->ch[k] == QS_NCOPY) { i += o->cp[k]; continue; }
        size_t len = qs_nchar(cur->s, cur->n, i, &cp);
        if (o->ch[k] || o->cp[k] != cp) return 0;
        i += len;
    }
    return i == cur->n && k == o->n;
}

/* One transform from freshly built operations (rc: building them failed). */
static int apply(qs_tok_norm_buf *cur, scratch *x, int rc, size_t skip, qs_err *e)
{
    if (!rc && identity(cur, &x->o, skip)) return 0;
    if (rc || qs_norm_transform(cur, &x->tmp, &x->o, skip)) return qs_fail(e, "out of memory");
    return 0;
}

/* 1 when pred holds for some character of cur. */
static int any(const qs_tok_norm_buf *cur, int (*pred)(uint32_t))
{
    for (size_t i = 0; i < cur->n;) {
        uint32_t cp;
        i += qs_nchar(cur->s, cur->n, i, &cp);
        if (pred(cp)) return 1;
    }
    return 0;
}

/* A filter (its leading dropped characters are skipped), then a transform; nothing to drop: as is. */
static int filter(qs_tok_norm_buf *cur, scratch *x, int (*drop)(uint32_t), qs_err *e)
{
    if (!any(cur, drop)) return 0;
    size_t skip = 0;
    x->o.n = 0;
    int rc = qs_norm_ops_filter(cur, drop, &skip, &x->o);
    return apply(cur, x, rc, skip, e);
}

static int step(const qs_tok_norm *nm, qs_tok_norm_buf *cur, scratch *x, qs_err *e)
{
    size_t skip = 0;
    x->o.n = 0;
    switch (nm->type) {
    case NT_SEQ:
        for (int i = 0; i < nm->nkid; i++)
            if (step(nm->kid[i], cur, x, e)) return -1;
        return 0;
    case NT_NFC: case NT_NFD: case NT_NFKC: case NT_NFKD:
        if (ascii(cur->s, cur->n)) return 0;
        return apply(cur, x, qs_norm_ops_form(nm->type, cur, &x->o), 0, e);
    case NT_LOWER:
        return qs_norm_map_run(cur, &x->tmp, NULL) ? qs_fail(e, "out of memory") : 0;
    case NT_STRIP_ACC:
        if (ascii(cur->s, cur->n)) return 0;
        return filter(cur, x, qs_norm_is_combining_mark, e);
    case NT_NMT:
        if (filter(cur, x, qs_norm_nmt_drop, e)) return -1;
        return qs_norm_map_run(cur, &x->tmp, qs_norm_nmt_map) ? qs_fail(e, "out of memory") : 0;
    case NT_STRIP: {
        int rc = qs_norm_ops_strip(cur, nm->left, nm->right, &skip, &x->o);
        return apply(cur, x, rc, skip, e);
    }
    case NT_PREPEND:   /* once per stretch: not where a stretch merely continues (LoPT's chunks) */
        if (x->cont) return 0;
        return qs_norm_prepend_run(cur, &x->tmp, nm->str) ? qs_fail(e, "out of memory") : 0;
    case NT_PRECOMPILED:
        return apply(cur, x, qs_norm_ops_precompiled(nm, cur, &x->o), 0, e);
    case NT_REPLACE:
        return qs_norm_replace_run(nm, cur, &x->tmp, e);
    case NT_BERT:
        if (nm->clean) {
            if (filter(cur, x, qs_norm_bert_drop, e)) return -1;
            if (qs_norm_map_run(cur, &x->tmp, qs_norm_bert_space)) return qs_fail(e, "out of memory");
            x->o.n = 0;
        }
        if (nm->chinese && any(cur, qs_norm_is_chinese)) {
            if (apply(cur, x, qs_norm_ops_chinese(cur, &x->o), 0, e)) return -1;
            x->o.n = 0;
        }
        if (nm->accents && !ascii(cur->s, cur->n)) {
            if (apply(cur, x, qs_norm_ops_form(NT_NFD, cur, &x->o), 0, e)) return -1;
            if (filter(cur, x, qs_norm_is_nonspacing_mark, e)) return -1;
            x->o.n = 0;
        }
        if (nm->lower && qs_norm_map_run(cur, &x->tmp, NULL)) return qs_fail(e, "out of memory");
        return 0;
    }
    return qs_fail(e, "normalizer of unknown kind %d", nm->type);
}

/* A character written as it was read (same bytes as its whole source span) maps byte to byte, so a
** token holding part of it (byte-level BPE) spans just its bytes, as without a normalizer; a changed
** character keeps the span of its whole source for each of its bytes. */
static void exact_spans(qs_tok_norm_buf *b, const char *src)
{
    for (size_t i = 0; i < b->n;) {
        uint32_t cp;
        size_t len = qs_nchar(b->s, b->n, i, &cp), a = b->map[2 * i], z = b->map[2 * i + 1];
        if (len > 1 && z - a == len && !memcmp(src + a, b->s + i, len))
            for (size_t k = 0; k < len; k++) { b->map[2 * (i + k)] = (uint32_t)(a + k); b->map[2 * (i + k) + 1] = (uint32_t)(a + k + 1); }
        i += len;
    }
}

int qs_tok_norm_run(const qs_tok_norm *nm, const char *s, size_t n, qs_tok_norm_buf *b, qs_err *e)
{
    return qs_tok_norm_run_cont(nm, s, n, 0, b, e);
}

int qs_tok_norm_run_cont(const qs_tok_norm *nm, const char *s, size_t n, int cont, qs_tok_norm_buf *b, qs_err *e)
{
    if (n >= UINT32_MAX) return qs_fail(e, "text of %zu bytes is too long to normalize", n);
    if (qs_norm_reserve(b, n + 1)) return qs_fail(e, "out of memory");
    memcpy(b->s, s, n);
    b->n = n;
    for (size_t i = 0; i < n;) {   /* NormalizedString::from: each byte spans its character */
        uint32_t cp;
        size_t len = qs_nchar(s, n, i, &cp);
        for (size_t k = 0; k < len; k++) { b->map[2 * (i + k)] = (uint32_t)i; b->map[2 * (i + k) + 1] = (uint32_t)(i + len); }
        i += len;
    }
    scratch x;
    memset(&x, 0, sizeof x);
    x.cont = cont;
    int rc = nm ? step(nm, b, &x, e) : 0;
    qs_tok_norm_buf_free(&x.tmp);
    qs_nops_free(&x.o);
    if (!rc) exact_spans(b, s);
    return rc;
}

void qs_tok_norm_buf_free(qs_tok_norm_buf *b)
{
    free(b->s); free(b->map);
    b->s = NULL; b->map = NULL; b->n = b->cap = 0;
}
