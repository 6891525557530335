/*
** safetensors reader: header validation and tensor descriptors (spec/data.md §1.3).
**
** Layout: u64 LE header length N, N bytes of UTF-8 JSON (starting with '{', maybe right-padded
** with spaces), then the byte buffer.  The JSON maps tensor name -> {dtype, shape, data_offsets}
** plus an optional "__metadata__" object of string -> string.
**
** We enforce the same rules as the reference parser (safetensors/src/tensor.rs): N <= 100e6;
** after sorting by data_offsets there are no holes and no overlaps, the last end is exactly the
** buffer length, and every tensor's byte span equals numel x element bits / 8.  Duplicate names
** are rejected by the JSON parser itself.
**
** Results:
**   - tensors appear in the container in buffer order (sorted by data_offsets, ties in header
**     order), which for files from the official writer is also the writer's order;
**   - qs_tdesc.offset is absolute (8 + N + begin);
**   - tensors of valid safetensors dtypes that qscope cannot decode (FNUZ FP8, FP6, C64) are
**     validated like the others, then skipped with a container warning (one per tensor for the
**     first 16, then a single summary, so a pathological file cannot flood the warning list);
**   - container meta_json is the "__metadata__" object itself, compact, keys in file order
**     (e.g. {"format":"pt"}), or NULL when the header has none.
*/
#include "container.h"

#include <jansson.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ST_MAX_HEADER 100000000u   /* the reference parser's MAX_HEADER_SIZE */
#define ST_MAX_SKIP_WARN 16        /* one warning per skipped tensor up to here, then one summary */

typedef struct st_dtype {
    const char *name;   /* safetensors spelling */
    qs_dtype    dt;     /* QS_DT_INVALID: valid in safetensors, not decoded by qscope */
    unsigned    bits;   /* bits per element, for the size rule */
} st_dtype;

static const st_dtype kDtypes[] = {
    {"BOOL", QS_DT_BOOL, 8},        {"U8", QS_DT_U8, 8},           {"I8", QS_DT_I8, 8},
    {"I16", QS_DT_I16, 16},         {"U16", QS_DT_U16, 16},        {"F16", QS_DT_F16, 16},
    {"BF16", QS_DT_BF16, 16},       {"I32", QS_DT_I32, 32},        {"U32", QS_DT_U32, 32},
    {"F32", QS_DT_F32, 32},         {"F64", QS_DT_F64, 64},        {"I64", QS_DT_I64, 64},
    {"U64", QS_DT_U64, 64},         {"F8_E4M3", QS_DT_F8_E4M3, 8}, {"F8_E5M2", QS_DT_F8_E5M2, 8},
    {"F8_E8M0", QS_DT_F8_E8M0, 8},  {"F4", QS_DT_F4_E2M1, 4},
    {"F8_E4M3FNUZ", QS_DT_INVALID, 8}, {"F8_E5M2FNUZ", QS_DT_INVALID, 8},
    {"F6_E2M3", QS_DT_INVALID, 6},  {"F6_E3M2", QS_DT_INVALID, 6}, {"C64", QS_DT_INVALID, 64},
};

/* One tensor entry of the header, validated on its own; the cross-entry rules come after. */
typedef struct st_entry {
    const char     *name;     /* borrowed from the JSON tree */
    const st_dtype *dt;
    int             ndim;
    uint64_t        shape[QS_MAX_DIMS];
    uint64_t        numel, nbytes, begin, end;
    size_t          at;       /* file offset of the entry's key, for messages */
    size_t          order;    /* header order, to keep the sort stable */
} st_entry;

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static const st_dtype *find_dtype(const char *s)
{
    for (size_t i = 0; i < sizeof kDtypes / sizeof kDtypes[0]; i++)
        if (strcmp(kDtypes[i].name, s) == 0) return &kDtypes[i];
    return NULL;
}

/*
** Offsets (within the header text) of the root object's keys, in text order.  jansson keeps
** object keys in insertion order and duplicates were rejected, so the i-th key found here is the
** i-th key json_object_foreach yields: that is how messages about a tensor point at its place in
** the file.  The text has already been validated by jansson, so a shallow scan is enough.
*/
static void key_offsets(const char *h, size_t n, size_t *pos, size_t npos)
{
    int depth = 0, in_str = 0, want_key = 0;
    size_t k = 0;
    for (size_t i = 0; i < n && k < npos; i++) {
        char ch = h[i];
        if (in_str) {
            if (ch == '\\') i++;
            else if (ch == '"') in_str = 0;
            continue;
        }
        switch (ch) {
        case '"':
            if (depth == 1 && want_key) { pos[k++] = i; want_key = 0; }
            in_str = 1;
            break;
        case '{': case '[': if (++depth == 1) want_key = 1; break;
        case '}': case ']': depth--; break;
        case ',': if (depth == 1) want_key = 1; break;
        default: break;
        }
    }
}

static int get_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* Validate one tensor entry: dtype, shape, data_offsets and the size rule. */
static int read_entry(const char *name, const json_t *v, uint64_t buflen, st_entry *t, qs_err *e)
{
    size_t at = t->at;
    if (!json_is_object(v))
        return qs_fail(e, "tensor '%.*s': entry is not a JSON object (at byte %zu)", QS_CLIP(name, 80), at);

    const json_t *jd = json_object_get(v, "dtype");
    if (!json_is_string(jd))
        return qs_fail(e, "tensor '%.*s': missing or non-string \"dtype\" (at byte %zu)", QS_CLIP(name, 80), at);
    if (!(t->dt = find_dtype(json_string_value(jd))))
        return qs_fail(e, "tensor '%.*s': unknown dtype \"%.*s\" (at byte %zu)", QS_CLIP(name, 80),
                       QS_CLIP(json_string_value(jd), 40), at);

    const json_t *js = json_object_get(v, "shape");
    if (!json_is_array(js))
        return qs_fail(e, "tensor '%.*s': missing or non-array \"shape\" (at byte %zu)", QS_CLIP(name, 80), at);
    if (json_array_size(js) > QS_MAX_DIMS)
        return qs_fail(e, "tensor '%.*s': shape has %zu dimensions, more than %d (at byte %zu)", QS_CLIP(name, 80),
                       json_array_size(js), QS_MAX_DIMS, at);
    t->ndim = (int)json_array_size(js);
    for (int i = 0; i < t->ndim; i++)
        if (get_u64(json_array_get(js, (size_t)i), &t->shape[i]))
            return qs_fail(e, "tensor '%.*s': shape must be a list of non-negative integers (at byte %zu)",
                           QS_CLIP(name, 80), at);
    if (qs_shape_numel(t->shape, t->ndim, &t->numel))
        return qs_fail(e, "tensor '%.*s': shape overflows (element count too large) (at byte %zu)", QS_CLIP(name, 80), at);

    const json_t *jo = json_object_get(v, "data_offsets");
    if (!json_is_array(jo) || json_array_size(jo) != 2 || get_u64(json_array_get(jo, 0), &t->begin) ||
        get_u64(json_array_get(jo, 1), &t->end))
        return qs_fail(e, "tensor '%.*s': \"data_offsets\" must be [begin, end] with non-negative integers (at byte %zu)",
                       QS_CLIP(name, 80), at);
    if (t->begin > t->end)
        return qs_fail(e, "tensor '%.*s': data_offsets begin %llu is after end %llu (at byte %zu)", QS_CLIP(name, 80),
                       (unsigned long long)t->begin, (unsigned long long)t->end, at);
    if (t->end > buflen)
        return qs_fail(e, "tensor '%.*s': data_offsets end %llu is beyond the end of the file "
                       "(the byte buffer has %llu bytes) (at byte %zu)", QS_CLIP(name, 80), (unsigned long long)t->end,
                       (unsigned long long)buflen, at);

    /* Size rule: numel x bits must be whole bytes and equal the span.  numel <= INT64_MAX/8, so
    ** numel x bits (bits <= 64) fits in 64 bits only after this check. */
    if (t->numel > UINT64_MAX / t->dt->bits)
        return qs_fail(e, "tensor '%.*s': shape overflows (byte size too large) (at byte %zu)", QS_CLIP(name, 80), at);
    uint64_t nbits = t->numel * t->dt->bits;
    if (nbits % 8)
        return qs_fail(e, "tensor '%.*s': %llu elements of %s (%u bits each) are not a whole number of bytes "
                       "(odd element count?) (at byte %zu)", QS_CLIP(name, 80), (unsigned long long)t->numel, t->dt->name,
                       t->dt->bits, at);
    t->nbytes = nbits / 8;
    if (t->dt->dt != QS_DT_INVALID) {
        uint64_t nb;   /* the dtype table must agree with the bit count; cheap insurance */
        if (qs_dtype_nbytes(t->dt->dt, t->numel, &nb) || nb != t->nbytes)
            return qs_fail(e, "tensor '%.*s': internal size mismatch for %s (at byte %zu)", QS_CLIP(name, 80), t->dt->name, at);
    }
    if (t->end - t->begin != t->nbytes)
        return qs_fail(e, "tensor '%.*s': size mismatch: data_offsets span %llu bytes but %s with %llu elements "
                       "needs %llu (at byte %zu)", QS_CLIP(name, 80), (unsigned long long)(t->end - t->begin), t->dt->name,
                       (unsigned long long)t->numel, (unsigned long long)t->nbytes, at);
    return 0;
}

/* __metadata__: an object of string -> string, kept as compact JSON text. */
static int read_metadata(const json_t *v, size_t at, qs_container *c, qs_err *e)
{
    const char *k;
    const json_t *x;
    if (!json_is_object(v))
        return qs_fail(e, "__metadata__ must be an object of string to string (at byte %zu)", at);
    json_object_foreach((json_t *)v, k, x)
        if (!json_is_string(x))
            return qs_fail(e, "__metadata__ value for '%.*s' is not a string (at byte %zu)", QS_CLIP(k, 80), at);
    if (!(c->meta_json = json_dumps(v, JSON_COMPACT))) return qs_fail(e, "out of memory");
    return 0;
}

static int cmp_entry(const void *pa, const void *pb)
{
    const st_entry *a = pa, *b = pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* buf holds the first min(len, 8 + header length) bytes of a file of len bytes: nothing past the
** header is ever read, only checked against len. */
static int parse_st(const uint8_t *buf, uint64_t len, const qs_parse_opts *o, qs_container *c, qs_err *e)
{
    (void)o;   /* reinterpretation applies to npy words only */
    json_t *root = NULL;
    st_entry *ent = NULL;
    size_t *kpos = NULL;
    size_t nent = 0;
    memset(c, 0, sizeof *c);
    strcpy(c->kind, "safetensors");

    if (len < 8) {
        qs_fail(e, "file too short for a safetensors header length (%llu bytes) (at byte 0)", (unsigned long long)len);
        goto fail;
    }
    uint64_t n = rd64(buf);
    if (n > ST_MAX_HEADER) {
        qs_fail(e, "header length %llu is absurd (limit %u) (at byte 0)", (unsigned long long)n, ST_MAX_HEADER);
        goto fail;
    }
    if (n > len - 8) {
        qs_fail(e, "header length %llu runs past the end of the file (%llu bytes) (at byte 0)",
                (unsigned long long)n, (unsigned long long)len);
        goto fail;
    }
    const char *hdr = (const char *)buf + 8;
    if (n == 0 || hdr[0] != '{') {
        qs_fail(e, "header does not start with '{' (at byte 8)");
        goto fail;
    }
    uint64_t buflen = len - 8 - n;

    /* jansson stops at a NUL and then blames "end of file"; say what it is instead. */
    const char *nul = memchr(hdr, 0, (size_t)n);
    if (nul) {
        qs_fail(e, "invalid JSON/UTF-8 in header: NUL byte (at byte %zu)", (size_t)(8 + (nul - hdr)));
        goto fail;
    }
    json_error_t je;
    if (!(root = json_loadb(hdr, (size_t)n, JSON_REJECT_DUPLICATES, &je))) {
        if (json_error_code(&je) == json_error_duplicate_key)   /* usually a tensor name given twice */
            qs_fail(e, "duplicate key in header: %s (at byte %llu)", je.text,
                    (unsigned long long)(8 + (uint64_t)je.position));
        else if (json_error_code(&je) == json_error_out_of_memory)
            qs_fail(e, "out of memory parsing the header (at byte 8)");
        else
            qs_fail(e, "invalid JSON/UTF-8 in header: %s (at byte %llu)", je.text,
                    (unsigned long long)(8 + (uint64_t)je.position));
        goto fail;
    }
    if (!json_is_object(root)) {   /* cannot happen after '{', kept for robustness */
        qs_fail(e, "header is not a JSON object (at byte 8)");
        goto fail;
    }

    size_t nkeys = json_object_size(root);
    kpos = calloc(nkeys ? nkeys : 1, sizeof *kpos);
    ent = calloc(nkeys ? nkeys : 1, sizeof *ent);
    if (!kpos || !ent) { qs_fail(e, "out of memory"); goto fail; }
    key_offsets(hdr, (size_t)n, kpos, nkeys);

    const char *key;
    json_t *val;
    size_t ki = 0;
    json_object_foreach(root, key, val) {
        size_t at = 8 + kpos[ki++];
        if (strcmp(key, "__metadata__") == 0) {
            if (read_metadata(val, at, c, e)) goto fail;
            continue;
        }
        st_entry *t = &ent[nent];
        t->name = key;
        t->at = at;
        t->order = nent;
        if (read_entry(key, val, buflen, t, e)) goto fail;
        nent++;
    }

    /* Cross-entry rules, in buffer order: contiguous from 0 and ending exactly at the buffer end. */
    qsort(ent, nent, sizeof *ent, cmp_entry);
    uint64_t prev = 0;
    for (size_t i = 0; i < nent; i++) {
        const st_entry *t = &ent[i];
        if (t->begin > prev) {
            qs_fail(e, "tensor '%.*s': hole in the byte buffer: bytes [%llu, %llu) before this tensor belong "
                    "to no tensor (at byte %zu)", QS_CLIP(t->name, 80), (unsigned long long)prev, (unsigned long long)t->begin, t->at);
            goto fail;
        }
        if (t->begin < prev) {
            qs_fail(e, "tensor '%.*s': data_offsets [%llu, %llu] overlap tensor '%.*s' (at byte %zu)", QS_CLIP(t->name, 80),
                    (unsigned long long)t->begin, (unsigned long long)t->end, QS_CLIP(ent[i - 1].name, 80), t->at);
            goto fail;
        }
        prev = t->end;
    }
    if (prev != buflen) {
        qs_fail(e, "%llu trailing bytes after the last tensor: the tensors cover %llu of the %llu-byte buffer "
                "(at byte %llu)", (unsigned long long)(buflen - prev), (unsigned long long)prev,
                (unsigned long long)buflen, (unsigned long long)(8 + n + prev));
        goto fail;
    }

    size_t nskip = 0;
    for (size_t i = 0; i < nent; i++) {
        const st_entry *t = &ent[i];
        if (t->dt->dt == QS_DT_INVALID) {
            if (++nskip <= ST_MAX_SKIP_WARN &&
                qs_container_warn(c, "tensor '%.*s' has dtype %s, which qscope does not decode yet: skipped",
                                  QS_CLIP(t->name, 80), t->dt->name)) { qs_fail(e, "out of memory"); goto fail; }
            continue;
        }
        qs_tdesc *d = qs_container_add(c, e);
        if (!d) goto fail;
        if (!(d->name = strdup(t->name))) { qs_fail(e, "out of memory"); goto fail; }
        d->dtype = t->dt->dt;
        d->ndim = t->ndim;
        memcpy(d->shape, t->shape, sizeof d->shape);
        d->numel = t->numel;
        d->offset = 8 + n + t->begin;
        d->nbytes = t->nbytes;
        d->codec = QS_CODEC_NONE;
    }

    if (nskip > ST_MAX_SKIP_WARN &&
        qs_container_warn(c, "%zu more tensors of dtypes qscope does not decode yet: skipped",
                          nskip - ST_MAX_SKIP_WARN)) { qs_fail(e, "out of memory"); goto fail; }

    free(ent);
    free(kpos);
    json_decref(root);
    return 0;

fail:
    free(ent);
    free(kpos);
    json_decref(root);
    qs_container_free(c);
    return -1;
}

int qs_parse_safetensors(const uint8_t *buf, size_t len, const qs_parse_opts *o, qs_container *c, qs_err *e)
{
    return parse_st(buf, len, o, c, e);
}

int qs_parse_safetensors_fd(int fd, uint64_t len, const qs_parse_opts *o, qs_container *c, qs_err *e)
{
    memset(c, 0, sizeof *c);
    uint8_t pre[8];
    size_t want = len < 8 ? (size_t)len : 8;
    if (qs_pread_head(fd, pre, want) != want) return qs_fail(e, "read: %s (at byte 0)", strerror(errno ? errno : EIO));
    if (want == 8) {
        uint64_t n = rd64(pre);   /* read only when the file holds it, never more than the parser's limit */
        if (n <= ST_MAX_HEADER && n <= len - 8) want = (size_t)(8 + n);
    }
    uint8_t *buf = malloc(want ? want : 1);
    if (!buf) return qs_fail(e, "out of memory (at byte 0)");
    int rc = qs_pread_head(fd, buf, want) != want ? qs_fail(e, "read: %s (at byte 0)", strerror(errno ? errno : EIO))
                                             : parse_st(buf, len, o, c, e);
    free(buf);
    return rc;
}
