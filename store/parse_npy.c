/*
** NumPy .npy reader: the preamble, the header dict and the array bytes (spec/data.md §1.1).
**
** The header is a Python dict literal.  Rather than pattern-matching numpy's exact spelling, a
** small tokenizer reads it the way Python would (any key order, any spacing, either quote, trailing
** commas, comments, Python-2 `2L` longs), then the three required keys are checked.  Nothing here
** trusts a length from the file: the header length, the shape product and the data size are all
** checked against the bytes actually present before anything is used.
*/
#include "container.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NPY_MAX_HEADER (64u << 20)   /* numpy itself refuses headers over 10 KB unless told */
#define NPY_STR_MAX    128           /* keys and descrs are short; longer ones are kept truncated */

/* ---------------------------------------------------------------- text checks */

/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF); returns the offset of the first bad
** byte, or n when all is well. */
static size_t utf8_bad_at(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t k;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) { k = 1; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { k = 2; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { k = 3; cp = c & 0x07; min = 0x10000; }
        else return i;
        if (n - i <= k) return i;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += k + 1;
    }
    return n;
}

/* Printable rendering of a string from the file for an error message (never a control byte). */
static void show(char *out, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') out[o++] = (char)c;
        else o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
    }
    out[o < cap ? o : cap - 1] = 0;
}

/* ---------------------------------------------------------------- tokenizer */

typedef enum {
    T_EOF, T_LBRACE, T_RBRACE, T_LPAREN, T_RPAREN, T_LBRACK, T_RBRACK,
    T_COLON, T_COMMA, T_MINUS, T_STR, T_INT, T_NAME
} tok_kind;

typedef struct tok {
    tok_kind kind;
    size_t   at;                /* offset of the token in the header text */
    char     s[NPY_STR_MAX];    /* T_STR / T_NAME text, NUL-terminated, maybe truncated */
    size_t   slen;              /* full length (may exceed sizeof s - 1) */
    uint64_t v;                 /* T_INT value */
    int      big;               /* T_INT overflowed uint64 */
} tok;

typedef struct lexer {
    const uint8_t *p;
    size_t n, i;
    size_t base;                /* offset of p[0] in the caller's buffer, for messages */
    qs_err *e;
} lexer;

static int lex_fail_at(lexer *L, size_t at, const char *what)
{
    return qs_fail(L->e, "invalid npy header: %s (at byte %zu)", what, L->base + at);
}

static void str_put(tok *t, int c)
{
    if (t->slen < sizeof t->s - 1) t->s[t->slen] = (char)c;
    t->slen++;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int lex_string(lexer *L, tok *t)
{
    uint8_t q = L->p[L->i++];
    t->kind = T_STR;
    t->slen = 0;
    for (;;) {
        if (L->i >= L->n || L->p[L->i] == '\n') return lex_fail_at(L, t->at, "unterminated string");
        uint8_t c = L->p[L->i++];
        if (c == q) break;
        if (c != '\\') { str_put(t, c); continue; }
        if (L->i >= L->n) return lex_fail_at(L, t->at, "unterminated string");
        uint8_t d = L->p[L->i++];
        switch (d) {
        case '\\': case '\'': case '"': str_put(t, d); break;
        case 'n': str_put(t, '\n'); break;
        case 't': str_put(t, '\t'); break;
        case 'r': str_put(t, '\r'); break;
        case '\n': break;                              /* line continuation inside a string */
        case 'x': {
            int h1 = L->i < L->n ? hexval(L->p[L->i]) : -1;
            int h2 = L->i + 1 < L->n ? hexval(L->p[L->i + 1]) : -1;
            if (h1 < 0 || h2 < 0) return lex_fail_at(L, L->i - 2, "bad \\x escape in string");
            str_put(t, h1 * 16 + h2);
            L->i += 2;
            break;
        }
        default: str_put(t, '\\'); str_put(t, d); break;  /* Python keeps unknown escapes */
        }
    }
    t->s[t->slen < sizeof t->s ? t->slen : sizeof t->s - 1] = 0;
    return 0;
}

/* Next token; whitespace, comments and backslash-newline continuations are skipped. */
static int lex_next(lexer *L, tok *t)
{
    for (;;) {
        while (L->i < L->n && (L->p[L->i] == ' ' || L->p[L->i] == '\t' || L->p[L->i] == '\n' ||
                               L->p[L->i] == '\r' || L->p[L->i] == '\f'))
            L->i++;
        if (L->i < L->n && L->p[L->i] == '#') {
            while (L->i < L->n && L->p[L->i] != '\n') L->i++;
            continue;
        }
        if (L->i + 1 < L->n && L->p[L->i] == '\\' && L->p[L->i + 1] == '\n') { L->i += 2; continue; }
        break;
    }
    memset(t, 0, sizeof *t);
    t->at = L->i;
    if (L->i >= L->n) { t->kind = T_EOF; return 0; }
    uint8_t c = L->p[L->i];
    switch (c) {
    case '{': t->kind = T_LBRACE; L->i++; return 0;
    case '}': t->kind = T_RBRACE; L->i++; return 0;
    case '(': t->kind = T_LPAREN; L->i++; return 0;
    case ')': t->kind = T_RPAREN; L->i++; return 0;
    case '[': t->kind = T_LBRACK; L->i++; return 0;
    case ']': t->kind = T_RBRACK; L->i++; return 0;
    case ':': t->kind = T_COLON; L->i++; return 0;
    case ',': t->kind = T_COMMA; L->i++; return 0;
    case '-': t->kind = T_MINUS; L->i++; return 0;
    case '\'': case '"': return lex_string(L, t);
    default: break;
    }
    if (c >= '0' && c <= '9') {
        t->kind = T_INT;
        while (L->i < L->n && L->p[L->i] >= '0' && L->p[L->i] <= '9') {
            unsigned d = L->p[L->i++] - '0';
            if (t->v > (UINT64_MAX - d) / 10) t->big = 1;
            else t->v = t->v * 10 + d;
        }
        if (L->i < L->n && (L->p[L->i] == 'L' || L->p[L->i] == 'l')) L->i++;  /* Python 2 long */
        if (L->i < L->n && (L->p[L->i] == '_' || L->p[L->i] == '.' || L->p[L->i] == 'x' ||
                            L->p[L->i] == 'e' || L->p[L->i] == 'j'))
            return lex_fail_at(L, t->at, "only plain decimal integers are allowed");
        return 0;
    }
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_') {
        size_t s = L->i;
        while (L->i < L->n && ((L->p[L->i] >= 'A' && L->p[L->i] <= 'Z') || (L->p[L->i] >= 'a' && L->p[L->i] <= 'z') ||
                               (L->p[L->i] >= '0' && L->p[L->i] <= '9') || L->p[L->i] == '_'))
            L->i++;
        size_t len = L->i - s;
        /* String prefixes: u'' is a plain str; b'' (bytes) is never a valid key or descr. */
        if (len == 1 && L->i < L->n && (L->p[L->i] == '\'' || L->p[L->i] == '"')) {
            if (c == 'u' || c == 'U') { size_t at = t->at; int rc = lex_string(L, t); t->at = at; return rc; }
            return lex_fail_at(L, t->at, "only plain or u'' strings are allowed");
        }
        t->kind = T_NAME;
        t->slen = len;
        memcpy(t->s, L->p + s, len < sizeof t->s ? len : sizeof t->s - 1);
        return 0;
    }
    char m[64];
    snprintf(m, sizeof m, "unexpected character 0x%02x", c);
    return lex_fail_at(L, t->at, m);
}

/* ---------------------------------------------------------------- descr */

/* Width in bytes of a reinterpret target, 0 if it is not one. */
static unsigned reinterpret_width(qs_dtype d)
{
    switch (d) {
    case QS_DT_BF16: case QS_DT_F16: return 2;
    case QS_DT_F8_E4M3: case QS_DT_F8_E5M2: case QS_DT_F8_E8M0: return 1;
    default: return 0;
    }
}

static const struct { const char *name; qs_dtype dt; } kTypeNames[] = {
    {"bfloat16", QS_DT_BF16},       {"float8_e4m3fn", QS_DT_F8_E4M3},
    {"float8_e5m2", QS_DT_F8_E5M2}, {"float8_e8m0fnu", QS_DT_F8_E8M0},
    {"float16", QS_DT_F16},         {"float32", QS_DT_F32},   {"float64", QS_DT_F64},
    {"int8", QS_DT_I8},   {"uint8", QS_DT_U8},   {"int16", QS_DT_I16}, {"uint16", QS_DT_U16},
    {"int32", QS_DT_I32}, {"uint32", QS_DT_U32}, {"int64", QS_DT_I64}, {"uint64", QS_DT_U64},
    {"bool", QS_DT_BOOL},
};

/* typestr codes (without the byte-order char) numpy writes for the dtypes qscope reads.  `raw`:
** an untyped word that --as may (V, f1: must) turn into a float of the same width. */
static const struct { const char *code; qs_dtype dt; unsigned width; int raw; } kCodes[] = {
    {"f2", QS_DT_F16, 2, 0}, {"f4", QS_DT_F32, 4, 0}, {"f8", QS_DT_F64, 8, 0},
    {"i1", QS_DT_I8, 1, 1},  {"u1", QS_DT_U8, 1, 1},  {"b1", QS_DT_BOOL, 1, 0},
    {"i2", QS_DT_I16, 2, 1}, {"u2", QS_DT_U16, 2, 1},
    {"i4", QS_DT_I32, 4, 0}, {"u4", QS_DT_U32, 4, 0}, {"i8", QS_DT_I64, 8, 0}, {"u8", QS_DT_U64, 8, 0},
    {"V1", QS_DT_INVALID, 1, 2}, {"V2", QS_DT_INVALID, 2, 2}, {"f1", QS_DT_INVALID, 1, 2},
};

/* "<pre>'descr'<post> (at byte N)" with the descr shown safely. */
static int descr_fail(lexer *L, const tok *t, const char *pre, const char *post)
{
    char d[80];
    show(d, sizeof d, t->s, t->slen < sizeof t->s ? t->slen : sizeof t->s - 1);
    return qs_fail(L->e, "%s'%s%s'%s (at byte %zu)", pre, d, t->slen >= sizeof t->s ? "..." : "", post,
                   L->base + t->at);
}

static int parse_descr(lexer *L, const tok *t, const qs_parse_opts *o, qs_dtype *out)
{
    if (t->slen >= sizeof t->s) return descr_fail(L, t, "unsupported dtype ", "");
    for (size_t i = 0; i < sizeof kTypeNames / sizeof kTypeNames[0]; i++)
        if (strcmp(t->s, kTypeNames[i].name) == 0) { *out = kTypeNames[i].dt; return 0; }

    const char *s = t->s;
    char order = '=';
    if (*s == '<' || *s == '>' || *s == '|' || *s == '=') order = *s++;
    if (*s == 'O') return descr_fail(L, t, "object arrays (pickled Python objects) are not supported: dtype ", "");
    int k = -1;
    for (size_t i = 0; i < sizeof kCodes / sizeof kCodes[0]; i++)
        if (strcmp(s, kCodes[i].code) == 0) { k = (int)i; break; }
    if (k < 0) {
        if (*s == 'V') return descr_fail(L, t, "unsupported void dtype ", " (only V1/V2 raw words are read)");
        return descr_fail(L, t, "unsupported dtype ", "");
    }
    /* Byte order matters only for multi-byte elements; qscope runs on little-endian hosts. */
    if (order == '>' && kCodes[k].width > 1 && kCodes[k].raw != 2) {
        char d[80];
        show(d, sizeof d, t->s, t->slen);
        return qs_fail(L->e, "big-endian dtype %s not supported (at byte %zu)", d, L->base + t->at);
    }
    qs_dtype re = o ? o->reinterpret : QS_DT_INVALID;
    if (!kCodes[k].raw || (kCodes[k].raw == 1 && re == QS_DT_INVALID)) { *out = kCodes[k].dt; return 0; }
    if (re == QS_DT_INVALID) {
        return kCodes[k].width == 2
            ? descr_fail(L, t, "dtype ", " holds raw 16-bit words of unknown type; pass --as bf16 or --as f16")
            : descr_fail(L, t, "dtype ", " holds raw 8-bit words of unknown type; pass --as f8_e4m3, f8_e5m2 or f8_e8m0");
    }
    unsigned w = reinterpret_width(re);
    if (w != kCodes[k].width) {
        const qs_dtype_traits *tr = qs_dtype_get(re);
        char pre[64], post[96];
        snprintf(pre, sizeof pre, "cannot read the %u-bit words of dtype ", kCodes[k].width * 8);
        snprintf(post, sizeof post, " as %s (%s)", tr ? tr->name : "an unknown type",
                 w ? (w == 1 ? "8-bit" : "16-bit") : "not an 8- or 16-bit float");
        return descr_fail(L, t, pre, post);
    }
    *out = re;
    return 0;
}

/* ---------------------------------------------------------------- header dict */

typedef struct npy_fields {
    qs_dtype dtype;
    int      fortran;
    int      ndim;
    uint64_t shape[QS_MAX_DIMS];
    size_t   shape_at;
} npy_fields;

static int parse_shape(lexer *L, npy_fields *f)
{
    tok t;
    if (lex_next(L, &t)) return -1;
    f->shape_at = t.at;
    if (t.kind != T_LPAREN) return lex_fail_at(L, t.at, "shape must be a tuple such as (3, 4) or (5,)");
    int commas = 0;
    for (;;) {
        if (lex_next(L, &t)) return -1;
        if (t.kind == T_RPAREN) break;
        if (t.kind == T_MINUS) return lex_fail_at(L, t.at, "negative dimension in shape");
        if (t.kind != T_INT) return lex_fail_at(L, t.at, "shape entries must be integers");
        if (t.big) return lex_fail_at(L, t.at, "dimension does not fit in 64 bits");
        if (f->ndim == QS_MAX_DIMS) {
            return qs_fail(L->e, "too many dimensions: more than %d (at byte %zu)", QS_MAX_DIMS, L->base + t.at);
        }
        f->shape[f->ndim++] = t.v;
        if (lex_next(L, &t)) return -1;
        if (t.kind == T_RPAREN) break;
        if (t.kind != T_COMMA) return lex_fail_at(L, t.at, "expected ',' or ')' in shape");
        commas++;
    }
    /* (5) is the integer 5 in Python, not a tuple. */
    if (f->ndim == 1 && commas == 0) return lex_fail_at(L, f->shape_at, "shape (N) is not a tuple; write (N,)");
    return 0;
}

static int parse_dict(lexer *L, const qs_parse_opts *o, npy_fields *f)
{
    enum { K_DESCR = 1, K_FORTRAN = 2, K_SHAPE = 4 };
    unsigned seen = 0;
    tok t, key;
    if (lex_next(L, &t)) return -1;
    if (t.kind != T_LBRACE) return lex_fail_at(L, t.at, "header is not a dict (expected '{')");
    for (;;) {
        if (lex_next(L, &key)) return -1;
        if (key.kind == T_RBRACE) break;
        if (key.kind != T_STR) return lex_fail_at(L, key.at, "expected a quoted key or '}'");
        unsigned which = 0;
        if (strcmp(key.s, "descr") == 0 && key.slen == 5) which = K_DESCR;
        else if (strcmp(key.s, "fortran_order") == 0 && key.slen == 13) which = K_FORTRAN;
        else if (strcmp(key.s, "shape") == 0 && key.slen == 5) which = K_SHAPE;
        else {
            char k[80];
            show(k, sizeof k, key.s, key.slen < sizeof key.s ? key.slen : sizeof key.s - 1);
            return qs_fail(L->e, "invalid npy header: unexpected key '%s' (only descr, fortran_order, shape) (at byte %zu)",
                           k, L->base + key.at);
        }
        if (seen & which) {
            return qs_fail(L->e, "invalid npy header: duplicate key '%s' (at byte %zu)", key.s, L->base + key.at);
        }
        seen |= which;
        if (lex_next(L, &t)) return -1;
        if (t.kind != T_COLON) return lex_fail_at(L, t.at, "expected ':' after key");

        if (which == K_SHAPE) {
            if (parse_shape(L, f)) return -1;
        } else {
            if (lex_next(L, &t)) return -1;
            if (which == K_DESCR) {
                if (t.kind == T_LBRACK)
                    return qs_fail(L->e, "structured dtypes (descr is a list of fields) are not supported (at byte %zu)", L->base + t.at);
                if (t.kind == T_LPAREN)
                    return qs_fail(L->e, "sub-array dtypes (descr is a tuple) are not supported (at byte %zu)", L->base + t.at);
                if (t.kind != T_STR) return lex_fail_at(L, t.at, "descr must be a string");
                if (parse_descr(L, &t, o, &f->dtype)) return -1;
            } else {
                if (t.kind == T_NAME && strcmp(t.s, "True") == 0) f->fortran = 1;
                else if (t.kind == T_NAME && strcmp(t.s, "False") == 0) f->fortran = 0;
                else return lex_fail_at(L, t.at, "fortran_order must be True or False");
            }
        }
        if (lex_next(L, &t)) return -1;
        if (t.kind == T_RBRACE) break;
        if (t.kind != T_COMMA) return lex_fail_at(L, t.at, "expected ',' or '}' after a value");
    }
    if (lex_next(L, &t)) return -1;
    if (t.kind != T_EOF) return lex_fail_at(L, t.at, "text after the closing '}'");
    if (seen != (K_DESCR | K_FORTRAN | K_SHAPE)) {
        const char *miss = !(seen & K_DESCR) ? "descr" : !(seen & K_FORTRAN) ? "fortran_order" : "shape";
        return qs_fail(L->e, "invalid npy header: missing key '%s' (at byte %zu)", miss, L->base + t.at);
    }
    return 0;
}

/* ---------------------------------------------------------------- public entry points */

int qs_npy_header(const uint8_t *buf, size_t avail, const qs_parse_opts *o, qs_tdesc *t,
                  uint64_t *data_off, qs_err *e)
{
    if (avail == 0) return qs_fail(e, "empty npy data: no magic (at byte 0)");
    if (memcmp(buf, "\x93NUMPY", avail < 6 ? avail : 6) != 0)
        return qs_fail(e, "not an npy file: bad magic (at byte 0)");
    if (avail < 10)
        return qs_fail(e, "truncated npy preamble: %zu of at least 10 bytes (at byte %zu)", avail, avail);
    unsigned major = buf[6], minor = buf[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return qs_fail(e, "unsupported npy format version %u.%u (at byte 6)", major, minor);
    size_t hstart = major == 1 ? 10 : 12;
    if (avail < hstart)
        return qs_fail(e, "truncated npy preamble: %zu of %zu bytes (at byte %zu)", avail, hstart, avail);
    uint64_t hlen = major == 1 ? (uint64_t)(buf[8] | buf[9] << 8)
                               : (uint64_t)buf[8] | (uint64_t)buf[9] << 8 | (uint64_t)buf[10] << 16 | (uint64_t)buf[11] << 24;
    if (hlen > NPY_MAX_HEADER)
        return qs_fail(e, "absurd npy header length %llu (over %u MiB) (at byte 8)", (unsigned long long)hlen, NPY_MAX_HEADER >> 20);
    if (hlen > avail - hstart)
        return qs_fail(e, "npy header length %llu runs past the end of the data (%zu bytes) (at byte 8)",
                       (unsigned long long)hlen, avail);

    const uint8_t *h = buf + hstart;
    /* v1/v2 text is latin-1 (every byte is a character, but Python refuses NUL in source);
    ** v3 is UTF-8. */
    const uint8_t *nul = memchr(h, 0, (size_t)hlen);
    if (nul) return qs_fail(e, "invalid npy header: NUL byte in header text (at byte %zu)", hstart + (size_t)(nul - h));
    if (major == 3) {
        size_t bad = utf8_bad_at(h, (size_t)hlen);
        if (bad < hlen) return qs_fail(e, "invalid npy header: header text is not valid UTF-8 (at byte %zu)", hstart + bad);
    }

    lexer L = {h, (size_t)hlen, 0, hstart, e};
    npy_fields f;
    memset(&f, 0, sizeof f);
    if (parse_dict(&L, o, &f)) return -1;

    uint64_t numel, nbytes;
    if (qs_shape_numel(f.shape, f.ndim, &numel) || qs_dtype_nbytes(f.dtype, numel, &nbytes))
        return qs_fail(e, "shape has too many elements (product overflows) (at byte %zu)", hstart + f.shape_at);

    t->dtype = f.dtype;
    t->ndim = f.ndim;
    memset(t->shape, 0, sizeof t->shape);
    memcpy(t->shape, f.shape, sizeof f.shape[0] * (size_t)f.ndim);
    t->numel = numel;
    t->fortran = f.fortran;
    t->nbytes = nbytes;
    *data_off = hstart + hlen;
    return 0;
}

/* buf[0..avail) holds the start of a file of len bytes, at least its whole header if it has one. */
static int parse_npy_head(const uint8_t *buf, size_t avail, uint64_t len, const qs_parse_opts *o, qs_container *c,
                          qs_err *e)
{
    memset(c, 0, sizeof *c);
    qs_tdesc hd;
    uint64_t off;
    memset(&hd, 0, sizeof hd);
    if (qs_npy_header(buf, avail, o, &hd, &off, e)) return -1;
    if (hd.nbytes > len - off) {
        return qs_fail(e, "array data truncated: %llu bytes expected from byte %llu, only %llu present (at byte %llu)",
                       (unsigned long long)hd.nbytes, (unsigned long long)off,
                       (unsigned long long)(len - off), (unsigned long long)len);
    }
    qs_tdesc *t = qs_container_add(c, e);
    if (!t) goto fail;
    *t = hd;
    t->codec = QS_CODEC_NONE;
    t->offset = off;
    if (!(t->name = strdup(""))) { qs_fail(e, "out of memory (at byte 0)"); goto fail; }
    snprintf(c->kind, sizeof c->kind, "npy");
    if (off + hd.nbytes < len &&
        qs_container_warn(c, "%llu trailing bytes after the array data ignored (at byte %llu)",
                          (unsigned long long)(len - off - hd.nbytes), (unsigned long long)(off + hd.nbytes))) {
        qs_fail(e, "out of memory (at byte 0)");
        goto fail;
    }
    return 0;
fail:
    qs_container_free(c);
    return -1;
}

int qs_parse_npy(const uint8_t *buf, size_t len, const qs_parse_opts *o, qs_container *c, qs_err *e)
{
    return parse_npy_head(buf, len, len, o, c, e);
}

int qs_parse_npy_fd(int fd, uint64_t len, const qs_parse_opts *o, qs_container *c, qs_err *e)
{
    memset(c, 0, sizeof *c);
    uint8_t pre[12];
    size_t want = len < sizeof pre ? (size_t)len : sizeof pre;
    if (qs_pread_head(fd, pre, want) != want) return qs_fail(e, "read: %s (at byte 0)", strerror(errno ? errno : EIO));
    /* the header's claimed length only bounds what is read, never beyond the file or numpy's limit + 1 */
    if (want >= 12) {
        uint64_t hlen = pre[6] == 1 ? (uint64_t)(pre[8] | pre[9] << 8)
                                    : (uint64_t)pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 | (uint64_t)pre[11] << 24;
        if (hlen > NPY_MAX_HEADER) hlen = NPY_MAX_HEADER + 1;
        want = 12 + hlen < len ? (size_t)(12 + hlen) : (size_t)len;
    }
    uint8_t *buf = malloc(want ? want : 1);
    if (!buf) return qs_fail(e, "out of memory (at byte 0)");
    int rc = qs_pread_head(fd, buf, want) != want ? qs_fail(e, "read: %s (at byte 0)", strerror(errno ? errno : EIO))
                                             : parse_npy_head(buf, want, len, o, c, e);
    free(buf);
    return rc;
}
