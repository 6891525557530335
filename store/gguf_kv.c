/*
** The GGUF key/value reader (gguf_kv.h), shared by the GGUF parser (parse_gguf.c) and the model
** loader's vocabulary walk (llm_load_gguf.c).  Every length and count is checked against the bytes
** left before anything is read or allocated.
*/
#include "gguf_kv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_MAX_NEST      8    /* arrays of arrays: bound on the reader's recursion */
#define GGUF_INLINE_MAX    64   /* arrays up to this long go into the JSON whole */
#define GGUF_HEAD          8    /* longer ones: this many leading elements */

static const char *const kTypeName[QS_GGUF_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array",
    "uint64", "int64", "float64",
};
/* Fixed size of scalars; for strings and arrays the smallest possible encoding (the header). */
static const unsigned kMinSize[QS_GGUF_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8};

uint32_t qs_gguf_le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const uint8_t *p) { return (uint64_t)qs_gguf_le32(p) | (uint64_t)qs_gguf_le32(p + 4) << 32; }

int qs_gguf_need(qs_gguf_rd *r, uint64_t n, const char *what)
{
    if (n > r->len - r->pos)
        return qs_fail(r->e, "truncated file: %s needs %llu bytes but only %zu remain (at byte %zu)", what,
                       (unsigned long long)n, r->len - r->pos, r->pos);
    return 0;
}

int qs_gguf_u32(qs_gguf_rd *r, uint32_t *v, const char *what)
{
    if (qs_gguf_need(r, 4, what)) return -1;
    *v = qs_gguf_le32(r->b + r->pos);
    r->pos += 4;
    return 0;
}

int qs_gguf_u64(qs_gguf_rd *r, uint64_t *v, const char *what)
{
    if (qs_gguf_need(r, 8, what)) return -1;
    *v = le64(r->b + r->pos);
    r->pos += 8;
    return 0;
}

/* A gguf string; *s points into the buffer (no copy). */
int qs_gguf_str(qs_gguf_rd *r, const uint8_t **s, size_t *n, const char *what)
{
    size_t at = r->pos;
    uint64_t l;
    if (qs_gguf_u64(r, &l, what)) return -1;
    if (l > r->len - r->pos)
        return qs_fail(r->e, "%s: string length %llu runs past the end of the file (%zu bytes left) (at byte %zu)",
                       what, (unsigned long long)l, r->len - r->pos, at);
    *s = r->b + r->pos;
    *n = (size_t)l;
    r->pos += (size_t)l;
    return 0;
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 (overlong, surrogate, > U+10FFFF, cut). */
static size_t utf8_seq(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    size_t k;
    uint32_t cp, min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) { k = 2; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { k = 3; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { k = 4; cp = c & 0x07; min = 0x10000; }
    else return 0;
    if (k > n) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return k;
}

/* Valid UTF-8 and free of NUL (so it can be a C string and a JSON key). */
static int utf8_ok(const uint8_t *s, size_t n)
{
    for (size_t i = 0, k; i < n; i += k)
        if (s[i] == 0 || !(k = utf8_seq(s + i, n - i))) return 0;
    return 1;
}

/* JSON string of a metadata value; each invalid byte or NUL becomes U+FFFD. */
static json_t *json_utf8(const uint8_t *s, size_t n)
{
    if (utf8_ok(s, n)) return json_stringn((const char *)s, n);
    if (n > (SIZE_MAX - 1) / 3) return NULL;
    char *t = malloc(3 * n + 1);
    if (!t) return NULL;
    size_t m = 0;
    for (size_t i = 0, k; i < n; i += k) {
        if (s[i] != 0 && (k = utf8_seq(s + i, n - i))) {
            memcpy(t + m, s + i, k);
            m += k;
        } else {
            memcpy(t + m, "\xEF\xBF\xBD", 3);
            m += 3;
            k = 1;
        }
    }
    json_t *j = json_stringn(t, m);
    free(t);
    return j;
}

static json_t *json_float(double d)
{
    if (isnan(d)) return json_string("nan");
    if (isinf(d)) return json_string(d > 0 ? "inf" : "-inf");
    return json_real(d);
}

static json_t *json_scalar(uint32_t type, const uint8_t *p)
{
    uint32_t u = type == QS_GGUF_U8 || type == QS_GGUF_I8 || type == QS_GGUF_BOOL ? p[0]
               : type == QS_GGUF_U16 || type == QS_GGUF_I16 ? (uint32_t)(p[0] | p[1] << 8)
               : type == QS_GGUF_U64 || type == QS_GGUF_I64 || type == QS_GGUF_F64 ? 0 : qs_gguf_le32(p);
    switch (type) {
    case QS_GGUF_U8: case QS_GGUF_U16: case QS_GGUF_U32: return json_integer((json_int_t)u);
    case QS_GGUF_I8: return json_integer((json_int_t)u - (u & 0x80 ? 0x100 : 0));
    case QS_GGUF_I16: return json_integer((json_int_t)u - (u & 0x8000 ? 0x10000 : 0));
    case QS_GGUF_I32: { int32_t v; memcpy(&v, &u, 4); return json_integer(v); }
    case QS_GGUF_BOOL: return json_boolean(u != 0);
    case QS_GGUF_F32: { float f; memcpy(&f, &u, 4); return json_float(f); }
    case QS_GGUF_U64: {
        uint64_t v = le64(p);
        return v <= (uint64_t)INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v);
    }
    case QS_GGUF_I64: { uint64_t w = le64(p); int64_t v; memcpy(&v, &w, 8); return json_integer((json_int_t)v); }
    case QS_GGUF_F64: { uint64_t w = le64(p); double d; memcpy(&d, &w, 8); return json_float(d); }
    default: return NULL;
    }
}


/* An array value (after its type tag).  Builds JSON only for the elements that will be shown. */
static int read_array(qs_gguf_rd *r, int depth, const char *ctx, json_t **out)
{
    size_t at = r->pos;
    uint32_t et;
    uint64_t cnt;
    json_t *arr = NULL;
    if (depth >= GGUF_MAX_NEST)
        return qs_fail(r->e, "%s: arrays nested more than %d deep (at byte %zu)", ctx, GGUF_MAX_NEST, at);
    if (qs_gguf_u32(r, &et, ctx) || qs_gguf_u64(r, &cnt, ctx)) return -1;
    if (et >= QS_GGUF_COUNT)
        return qs_fail(r->e, "%s: invalid array element type %u (at byte %zu)", ctx, et, at);
    if (cnt > (r->len - r->pos) / kMinSize[et])
        return qs_fail(r->e, "%s: array count %llu is impossible: %s elements need at least %u bytes "
                       "each and only %zu bytes remain (at byte %zu)", ctx, (unsigned long long)cnt, kTypeName[et],
                       kMinSize[et], r->len - r->pos, at + 4);

    uint64_t keep = 0;
    if (out) {
        keep = cnt <= GGUF_INLINE_MAX ? cnt : GGUF_HEAD;
        if (!(arr = json_array())) goto oom;
    }
    for (uint64_t i = 0; i < cnt; i++) {
        if (i >= keep && et != QS_GGUF_STRING && et != QS_GGUF_ARRAY) {
            r->pos += (size_t)((cnt - i) * kMinSize[et]);   /* fits: checked against the bytes left */
            break;
        }
        json_t *v = NULL;
        if (qs_gguf_value(r, et, depth + 1, ctx, i < keep ? &v : NULL)) goto fail;
        if (v && json_array_append_new(arr, v)) goto oom;
    }
    if (!out) return 0;
    if (cnt <= GGUF_INLINE_MAX) {
        *out = arr;
        return 0;
    }
    json_t *sum = json_object();
    if (!sum) goto oom;
    if (json_object_set_new(sum, "array", json_string(kTypeName[et])) ||
        json_object_set_new(sum, "count", json_integer((json_int_t)cnt))) {
        json_decref(sum);
        goto oom;
    }
    if (json_object_set_new(sum, "head", arr)) {   /* consumes arr even on failure */
        arr = NULL;
        json_decref(sum);
        goto oom;
    }
    *out = sum;
    return 0;
oom:
    qs_fail(r->e, "out of memory reading %s (at byte %zu)", ctx, at);
fail:
    json_decref(arr);
    return -1;
}

/* One value of `type` (already checked < QS_GGUF_COUNT); if out, also its JSON. */
int qs_gguf_value(qs_gguf_rd *r, uint32_t type, int depth, const char *ctx, json_t **out)
{
    size_t at = r->pos;
    if (type == QS_GGUF_ARRAY) return read_array(r, depth, ctx, out);
    if (type == QS_GGUF_STRING) {
        const uint8_t *s;
        size_t n;
        if (qs_gguf_str(r, &s, &n, ctx)) return -1;
        if (out && !(*out = json_utf8(s, n)))
            return qs_fail(r->e, "out of memory reading %s (at byte %zu)", ctx, at);
        return 0;
    }
    if (qs_gguf_need(r, kMinSize[type], ctx)) return -1;
    r->pos += kMinSize[type];
    if (out && !(*out = json_scalar(type, r->b + at)))
        return qs_fail(r->e, "out of memory reading %s (at byte %zu)", ctx, at);
    return 0;
}

/* Read a key or tensor name: valid UTF-8 without NUL, returned as a new C string. */
int qs_gguf_name(qs_gguf_rd *r, const char *what, char **out)
{
    size_t at = r->pos;
    const uint8_t *s;
    size_t n;
    if (qs_gguf_str(r, &s, &n, what)) return -1;
    if (!utf8_ok(s, n)) return qs_fail(r->e, "%s is not valid UTF-8 or contains NUL (at byte %zu)", what, at);
    if (!(*out = strndup((const char *)s, n))) return qs_fail(r->e, "out of memory");
    return 0;
}


const char *qs_gguf_type_name(uint32_t t) { return t < QS_GGUF_COUNT ? kTypeName[t] : "?"; }

int qs_gguf_kv_walk(qs_gguf_rd *r, uint64_t nkv, qs_gguf_kv_fn fn, void *ctx)
{
    json_t *seen = json_object();
    char *key = NULL;
    char what[112];   /* "metadata 'KEY'" for messages */
    int rc = -1;
    if (!seen) { qs_fail(r->e, "out of memory"); goto done; }
    for (uint64_t i = 0; i < nkv; i++) {
        size_t kat = r->pos;
        free(key);
        key = NULL;
        if (qs_gguf_name(r, "metadata key", &key)) goto done;
        if (json_object_get(seen, key)) {
            qs_fail(r->e, "duplicate metadata key '%.*s' (at byte %zu)", QS_CLIP(key, 80), kat);
            goto done;
        }
        if (json_object_set_new(seen, key, json_true())) { qs_fail(r->e, "out of memory"); goto done; }
        snprintf(what, sizeof what, "metadata '%.*s'", QS_CLIP(key, 80));
        size_t tat = r->pos;
        uint32_t type;
        if (qs_gguf_u32(r, &type, what)) goto done;
        if (type >= QS_GGUF_COUNT) {
            qs_fail(r->e, "%s: invalid value type %u (at byte %zu)", what, type, tat);
            goto done;
        }
        size_t vat = r->pos;
        int got = fn(ctx, key, type, r, what);
        if (got < 0) goto done;
        if (!got) {
            r->pos = vat;   /* not taken: validated and skipped */
            if (qs_gguf_value(r, type, 0, what, NULL)) goto done;
        }
    }
    rc = 0;
done:
    free(key);
    json_decref(seen);
    return rc;
}
