/*
** GGUF reader: header, metadata key/values and tensor infos (spec/data.md §1.4).
**
** Layout (all little-endian): "GGUF", u32 version (2 or 3), u64 tensor_count, u64 kv_count,
** kv_count x {string key, u32 type, value}, tensor_count x {string name, u32 n_dims,
** u64 ne[n_dims], u32 ggml_type, u64 offset}, zero padding to the alignment, tensor data.
** A string is a u64 length and that many bytes (no NUL).
**
** Trust nothing: the counts in the header are bounded by the bytes left (each KV needs >= 12
** bytes, each tensor info >= 24, each array element >= its minimum size), and memory grows only as
** entries are actually read.  Big arrays (50k-token vocabularies) are walked without per-element
** allocation.  Arrays of arrays are legal (gguf.md) and read recursively up to GGUF_MAX_NEST deep.
**
** Results:
**   - tensors in file order; shape is the logical one, outermost first (ne reversed), so a weight
**     with ne = [in, out] has shape [out, in]; offset is absolute (data start + tensor offset);
**   - tensors of ggml types qscope does not decode are skipped with a container warning naming
**     tensor and type (one per tensor for the first 16, then a single summary);
**   - container meta_json is a compact JSON object key -> value in file order (NULL when the file
**     has no KVs).  Integers stay integers (a u64 above INT64_MAX becomes a JSON real), floats
**     become reals (NaN/Inf, which JSON cannot hold, become the strings "nan", "inf", "-inf"),
**     bools become true/false, arrays of <= 64 elements are inlined, longer ones summarised as
**     {"array": "<elem type>", "count": N, "head": [first 8 elements]};
**   - string *values* that are not valid UTF-8 are kept with each bad byte (and each NUL) replaced
**     by U+FFFD, so the metadata stays loadable JSON; keys and tensor names must be valid UTF-8
**     without NUL, else the file is rejected.
*/
#include "container.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_MAX_DIMS      4
#define GGUF_MAX_NEST      8    /* arrays of arrays: bound on the reader's recursion */
#define GGUF_INLINE_MAX    64   /* arrays up to this long go into meta_json whole */
#define GGUF_HEAD          8    /* longer ones: this many leading elements */
#define GGUF_DEFAULT_ALIGN 32
#define GGUF_MIN_KV        12   /* u64 key length + u32 type (+ value) */
#define GGUF_MIN_TINFO     24   /* u64 name length + u32 n_dims + u32 type + u64 offset */
#define GGUF_MAX_SKIP_WARN 16   /* one warning per skipped tensor up to here, then one summary */

enum { T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STRING, T_ARRAY, T_U64, T_I64, T_F64, T_COUNT };

static const char *const kTypeName[T_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array",
    "uint64", "int64", "float64",
};
/* Fixed size of scalars; for strings and arrays the smallest possible encoding (the header). */
static const unsigned kMinSize[T_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8};

/* ggml_type -> storage dtype (QS_DT_INVALID: known to ggml, not decoded here).  Names for warnings. */
static const struct { const char *name; qs_dtype dt; } kGgml[] = {
    [0] = {"F32", QS_DT_F32},       [1] = {"F16", QS_DT_F16},       [2] = {"Q4_0", QS_DT_Q4_0},
    [3] = {"Q4_1", QS_DT_Q4_1},     [6] = {"Q5_0", QS_DT_Q5_0},     [7] = {"Q5_1", QS_DT_Q5_1},
    [8] = {"Q8_0", QS_DT_Q8_0},     [9] = {"Q8_1", QS_DT_INVALID},  [10] = {"Q2_K", QS_DT_INVALID},
    [11] = {"Q3_K", QS_DT_INVALID}, [12] = {"Q4_K", QS_DT_Q4_K},    [13] = {"Q5_K", QS_DT_INVALID},
    [14] = {"Q6_K", QS_DT_Q6_K},    [15] = {"Q8_K", QS_DT_INVALID}, [16] = {"IQ2_XXS", QS_DT_INVALID},
    [17] = {"IQ2_XS", QS_DT_INVALID}, [18] = {"IQ3_XXS", QS_DT_INVALID}, [19] = {"IQ1_S", QS_DT_INVALID},
    [20] = {"IQ4_NL", QS_DT_INVALID}, [21] = {"IQ3_S", QS_DT_INVALID}, [22] = {"IQ2_S", QS_DT_INVALID},
    [23] = {"IQ4_XS", QS_DT_INVALID}, [24] = {"I8", QS_DT_I8},      [25] = {"I16", QS_DT_I16},
    [26] = {"I32", QS_DT_I32},      [27] = {"I64", QS_DT_I64},      [28] = {"F64", QS_DT_F64},
    [29] = {"IQ1_M", QS_DT_INVALID}, [30] = {"BF16", QS_DT_BF16},   [34] = {"TQ1_0", QS_DT_INVALID},
    [35] = {"TQ2_0", QS_DT_INVALID}, [39] = {"MXFP4", QS_DT_GGML_MXFP4}, [40] = {"NVFP4", QS_DT_GGML_NVFP4},
    [41] = {"Q1_0", QS_DT_INVALID}, [42] = {"Q2_0", QS_DT_INVALID},
};
#define N_GGML (sizeof kGgml / sizeof kGgml[0])

typedef struct rd {
    const uint8_t *b;
    size_t len, pos;
    qs_err *e;
} rd;

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

static int need(rd *r, uint64_t n, const char *what)
{
    if (n > r->len - r->pos)
        return qs_fail(r->e, "truncated file: %s needs %llu bytes but only %zu remain (at byte %zu)", what,
                       (unsigned long long)n, r->len - r->pos, r->pos);
    return 0;
}

static int rd_u32(rd *r, uint32_t *v, const char *what)
{
    if (need(r, 4, what)) return -1;
    *v = le32(r->b + r->pos);
    r->pos += 4;
    return 0;
}

static int rd_u64(rd *r, uint64_t *v, const char *what)
{
    if (need(r, 8, what)) return -1;
    *v = le64(r->b + r->pos);
    r->pos += 8;
    return 0;
}

/* A gguf string; *s points into the buffer (no copy). */
static int rd_str(rd *r, const uint8_t **s, size_t *n, const char *what)
{
    size_t at = r->pos;
    uint64_t l;
    if (rd_u64(r, &l, what)) return -1;
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
    uint32_t u = type == T_U8 || type == T_I8 || type == T_BOOL ? p[0]
               : type == T_U16 || type == T_I16 ? (uint32_t)(p[0] | p[1] << 8)
               : type == T_U64 || type == T_I64 || type == T_F64 ? 0 : le32(p);
    switch (type) {
    case T_U8: case T_U16: case T_U32: return json_integer((json_int_t)u);
    case T_I8: return json_integer((json_int_t)u - (u & 0x80 ? 0x100 : 0));
    case T_I16: return json_integer((json_int_t)u - (u & 0x8000 ? 0x10000 : 0));
    case T_I32: { int32_t v; memcpy(&v, &u, 4); return json_integer(v); }
    case T_BOOL: return json_boolean(u != 0);
    case T_F32: { float f; memcpy(&f, &u, 4); return json_float(f); }
    case T_U64: {
        uint64_t v = le64(p);
        return v <= (uint64_t)INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v);
    }
    case T_I64: { uint64_t w = le64(p); int64_t v; memcpy(&v, &w, 8); return json_integer((json_int_t)v); }
    case T_F64: { uint64_t w = le64(p); double d; memcpy(&d, &w, 8); return json_float(d); }
    default: return NULL;
    }
}

static int read_value(rd *r, uint32_t type, int depth, const char *ctx, json_t **out);

/* An array value (after its type tag).  Builds JSON only for the elements that will be shown. */
static int read_array(rd *r, int depth, const char *ctx, json_t **out)
{
    size_t at = r->pos;
    uint32_t et;
    uint64_t cnt;
    json_t *arr = NULL;
    if (depth >= GGUF_MAX_NEST)
        return qs_fail(r->e, "%s: arrays nested more than %d deep (at byte %zu)", ctx, GGUF_MAX_NEST, at);
    if (rd_u32(r, &et, ctx) || rd_u64(r, &cnt, ctx)) return -1;
    if (et >= T_COUNT)
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
        if (i >= keep && et != T_STRING && et != T_ARRAY) {
            r->pos += (size_t)((cnt - i) * kMinSize[et]);   /* fits: checked against the bytes left */
            break;
        }
        json_t *v = NULL;
        if (read_value(r, et, depth + 1, ctx, i < keep ? &v : NULL)) goto fail;
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

/* One value of `type` (already checked < T_COUNT); if out, also its JSON. */
static int read_value(rd *r, uint32_t type, int depth, const char *ctx, json_t **out)
{
    size_t at = r->pos;
    if (type == T_ARRAY) return read_array(r, depth, ctx, out);
    if (type == T_STRING) {
        const uint8_t *s;
        size_t n;
        if (rd_str(r, &s, &n, ctx)) return -1;
        if (out && !(*out = json_utf8(s, n)))
            return qs_fail(r->e, "out of memory reading %s (at byte %zu)", ctx, at);
        return 0;
    }
    if (need(r, kMinSize[type], ctx)) return -1;
    r->pos += kMinSize[type];
    if (out && !(*out = json_scalar(type, r->b + at)))
        return qs_fail(r->e, "out of memory reading %s (at byte %zu)", ctx, at);
    return 0;
}

/* Read a key or tensor name: valid UTF-8 without NUL, returned as a new C string. */
static int rd_name(rd *r, const char *what, char **out)
{
    size_t at = r->pos;
    const uint8_t *s;
    size_t n;
    if (rd_str(r, &s, &n, what)) return -1;
    if (!utf8_ok(s, n)) return qs_fail(r->e, "%s is not valid UTF-8 or contains NUL (at byte %zu)", what, at);
    if (!(*out = strndup((const char *)s, n))) return qs_fail(r->e, "out of memory");
    return 0;
}

int qs_parse_gguf(const uint8_t *buf, size_t len, const qs_parse_opts *o, qs_container *c, qs_err *e)
{
    (void)o;   /* reinterpretation applies to npy words only */
    json_t *meta = NULL, *names = NULL;
    char *key = NULL, *name = NULL;
    char ctx[112];   /* "metadata 'KEY'" / "tensor 'NAME'" for messages */
    size_t *info_at = NULL, ninfo = 0, ncap = 0;   /* where each kept tensor's offset field is */
    uint64_t nskip = 0;                            /* tensors of types we do not decode */
    rd r = {buf, len, 0, e};
    memset(c, 0, sizeof *c);
    strcpy(c->kind, "gguf");

    if (len < 4 || memcmp(buf, "GGUF", 4) != 0) {
        qs_fail(e, "bad magic: not a GGUF file (at byte 0)");
        goto fail;
    }
    r.pos = 4;
    uint32_t ver;
    uint64_t ntens, nkv;
    if (rd_u32(&r, &ver, "header")) goto fail;
    if ((ver & 0xFFFF) == 0) {   /* ggml's own test: a big-endian writer's 3 reads as 0x03000000 */
        qs_fail(e, "big-endian GGUF file (version field 0x%08x) is not supported (at byte 4)", ver);
        goto fail;
    }
    if (ver == 1) {
        qs_fail(e, "GGUF version 1 (32-bit counts) is not supported (at byte 4)");
        goto fail;
    }
    if (ver != 2 && ver != 3) {
        qs_fail(e, "unsupported GGUF version %u (at byte 4)", ver);
        goto fail;
    }
    if (rd_u64(&r, &ntens, "header") || rd_u64(&r, &nkv, "header")) goto fail;
    size_t left = len - r.pos;
    if (ntens > left / GGUF_MIN_TINFO) {
        qs_fail(e, "tensor_count %llu is impossible: each tensor info needs at least %d bytes and only %zu remain "
                "(at byte 8)", (unsigned long long)ntens, GGUF_MIN_TINFO, left);
        goto fail;
    }
    if (nkv > left / GGUF_MIN_KV) {
        qs_fail(e, "metadata_kv_count %llu is impossible: each KV needs at least %d bytes and only %zu remain "
                "(at byte 16)", (unsigned long long)nkv, GGUF_MIN_KV, left);
        goto fail;
    }
    if (nkv * GGUF_MIN_KV > left - ntens * GGUF_MIN_TINFO) {   /* no overflow: each term <= left */
        qs_fail(e, "tensor_count %llu and metadata_kv_count %llu are impossible together: they need at least "
                "%llu bytes and only %zu remain (at byte 8)", (unsigned long long)ntens, (unsigned long long)nkv,
                (unsigned long long)(ntens * GGUF_MIN_TINFO + nkv * GGUF_MIN_KV), left);
        goto fail;
    }

    if (!(meta = json_object()) || !(names = json_object())) { qs_fail(e, "out of memory"); goto fail; }
    uint32_t align = GGUF_DEFAULT_ALIGN;
    for (uint64_t i = 0; i < nkv; i++) {
        size_t kat = r.pos;
        free(key);
        key = NULL;
        if (rd_name(&r, "metadata key", &key)) goto fail;
        if (json_object_get(meta, key)) {
            qs_fail(e, "duplicate metadata key '%.*s' (at byte %zu)", QS_CLIP(key, 80), kat);
            goto fail;
        }
        snprintf(ctx, sizeof ctx, "metadata '%.*s'", QS_CLIP(key, 80));
        size_t tat = r.pos;
        uint32_t type;
        if (rd_u32(&r, &type, ctx)) goto fail;
        if (type >= T_COUNT) {
            qs_fail(e, "%s: invalid value type %u (at byte %zu)", ctx, type, tat);
            goto fail;
        }
        size_t vat = r.pos;
        json_t *v = NULL;
        if (read_value(&r, type, 0, ctx, &v)) goto fail;
        if (json_object_set_new(meta, key, v)) { qs_fail(e, "out of memory"); goto fail; }
        if (strcmp(key, "general.alignment") == 0) {
            if (type != T_U32) {
                qs_fail(e, "general.alignment must be a uint32, not %s (at byte %zu)", kTypeName[type], tat);
                goto fail;
            }
            align = le32(buf + vat);
            if (align == 0 || align % 8) {
                qs_fail(e, "general.alignment %u is not a nonzero multiple of 8 (at byte %zu)", align, vat);
                goto fail;
            }
        }
    }
    free(key);
    key = NULL;

    if (ntens > (len - r.pos) / GGUF_MIN_TINFO) {
        qs_fail(e, "tensor_count %llu is impossible: each tensor info needs at least %d bytes and only %zu remain "
                "after the metadata (at byte 8)", (unsigned long long)ntens, GGUF_MIN_TINFO, len - r.pos);
        goto fail;
    }
    for (uint64_t i = 0; i < ntens; i++) {
        size_t nat = r.pos;
        if (rd_name(&r, "tensor name", &name)) goto fail;
        size_t dat = r.pos;
        uint32_t nd, gt;
        uint64_t ne[GGUF_MAX_DIMS], off;
        snprintf(ctx, sizeof ctx, "tensor '%.*s'", QS_CLIP(name, 80));
        if (rd_u32(&r, &nd, ctx)) goto fail;
        if (nd > GGUF_MAX_DIMS) {
            qs_fail(e, "tensor '%.*s': n_dims %u exceeds %d (at byte %zu)", QS_CLIP(name, 80), nd, GGUF_MAX_DIMS, dat);
            goto fail;
        }
        for (uint32_t j = 0; j < nd; j++) {
            if (rd_u64(&r, &ne[j], ctx)) goto fail;
            if (ne[j] > (uint64_t)INT64_MAX) {   /* ggml reads ne as int64 */
                qs_fail(e, "tensor '%.*s': ne[%u] is negative (at byte %zu)", QS_CLIP(name, 80), j, r.pos - 8);
                goto fail;
            }
        }
        size_t tat = r.pos;
        if (rd_u32(&r, &gt, ctx)) goto fail;
        size_t oat = r.pos;
        if (rd_u64(&r, &off, ctx)) goto fail;

        if (json_object_get(names, name)) {
            qs_fail(e, "duplicate tensor name '%.*s' (at byte %zu)", QS_CLIP(name, 80), nat);
            goto fail;
        }
        if (json_object_set_new(names, name, json_true())) { qs_fail(e, "out of memory"); goto fail; }

        qs_dtype dt = gt < N_GGML ? kGgml[gt].dt : QS_DT_INVALID;
        if (dt == QS_DT_INVALID) {
            const char *tn = gt < N_GGML && kGgml[gt].name ? kGgml[gt].name : "unknown";
            if (++nskip <= GGUF_MAX_SKIP_WARN &&
                qs_container_warn(c, "tensor '%.*s' has ggml type %u (%s), which qscope does not decode: skipped",
                                  QS_CLIP(name, 80), gt, tn)) { qs_fail(e, "out of memory"); goto fail; }
            free(name);
            name = NULL;
            continue;
        }
        const qs_dtype_traits *tr = qs_dtype_get(dt);
        uint64_t ne0 = nd ? ne[0] : 1;   /* n_dims 0: ggml leaves every ne at 1 */
        if (ne0 % tr->block_elems) {
            qs_fail(e, "tensor '%.*s': ne[0] = %llu is not a multiple of the %s block size %u (at byte %zu)", QS_CLIP(name, 80),
                    (unsigned long long)ne0, kGgml[gt].name, tr->block_elems, tat);
            goto fail;
        }
        if (off % align) {
            qs_fail(e, "tensor '%.*s': offset %llu is not a multiple of the alignment %u (at byte %zu)", QS_CLIP(name, 80),
                    (unsigned long long)off, align, oat);
            goto fail;
        }
        uint64_t shape[QS_MAX_DIMS] = {0}, numel, nbytes;
        for (uint32_t j = 0; j < nd; j++) shape[j] = ne[nd - 1 - j];
        if (qs_shape_numel(shape, (int)nd, &numel) || qs_dtype_nbytes(dt, numel, &nbytes)) {
            qs_fail(e, "tensor '%.*s': shape overflows (element count too large) (at byte %zu)", QS_CLIP(name, 80), dat);
            goto fail;
        }
        if (ninfo == ncap) {
            size_t *ni = realloc(info_at, (ncap = ncap ? 2 * ncap : 16) * sizeof *ni);
            if (!ni) { qs_fail(e, "out of memory"); goto fail; }
            info_at = ni;
        }
        qs_tdesc *t = qs_container_add(c, e);
        if (!t) goto fail;
        info_at[ninfo++] = oat;
        t->name = name;
        name = NULL;
        t->dtype = dt;
        t->ndim = (int)nd;
        memcpy(t->shape, shape, sizeof t->shape);
        t->numel = numel;
        t->offset = off;   /* relative until the data section is known */
        t->nbytes = nbytes;
        t->codec = QS_CODEC_NONE;
    }

    if (nskip > GGUF_MAX_SKIP_WARN &&
        qs_container_warn(c, "%llu more tensors of types qscope does not decode: skipped",
                          (unsigned long long)(nskip - GGUF_MAX_SKIP_WARN))) { qs_fail(e, "out of memory"); goto fail; }

    /* Tensor data starts at the end of the tensor infos, rounded up to the alignment. */
    uint64_t data = ((uint64_t)r.pos + align - 1) / align * align;
    for (size_t i = 0; i < c->n; i++) {
        qs_tdesc *t = &c->t[i];
        if (data > len || t->offset > len - data || t->nbytes > len - data - t->offset) {
            qs_fail(e, "tensor '%.*s': data (%llu bytes at offset %llu of the data section, which starts at %llu) "
                    "runs past the end of the file (%zu bytes) (at byte %zu)", QS_CLIP(t->name, 80), (unsigned long long)t->nbytes,
                    (unsigned long long)t->offset, (unsigned long long)data, len, info_at[i]);
            goto fail;
        }
        t->offset += data;
    }

    if (nkv && !(c->meta_json = json_dumps(meta, JSON_COMPACT))) { qs_fail(e, "out of memory"); goto fail; }
    free(info_at);
    json_decref(meta);
    json_decref(names);
    return 0;

fail:
    free(key);
    free(name);
    free(info_at);
    json_decref(meta);
    json_decref(names);
    qs_container_free(c);
    return -1;
}
