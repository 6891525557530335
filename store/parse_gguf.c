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
** allocation.  Arrays of arrays are legal (gguf.md) and read recursively up to 8 deep.  The
** key/value reader itself is gguf_kv.c (shared with the model loader's vocabulary walk).
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
#include "gguf_kv.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_MAX_DIMS      4
#define GGUF_DEFAULT_ALIGN 32
#define GGUF_MIN_KV        12   /* u64 key length + u32 type (+ value) */
#define GGUF_MIN_TINFO     24   /* u64 name length + u32 n_dims + u32 type + u64 offset */
#define GGUF_MAX_SKIP_WARN 16   /* one warning per skipped tensor up to here, then one summary */

/* ggml_type -> storage dtype (QS_DT_INVALID: known to ggml, not decoded here).  Names for warnings. */
static const struct { const char *name; qs_dtype dt; } kGgml[] = {
    [0] = {"F32", QS_DT_F32},       [1] = {"F16", QS_DT_F16},       [2] = {"Q4_0", QS_DT_Q4_0},
    [3] = {"Q4_1", QS_DT_Q4_1},     [6] = {"Q5_0", QS_DT_Q5_0},     [7] = {"Q5_1", QS_DT_Q5_1},
    [8] = {"Q8_0", QS_DT_Q8_0},     [9] = {"Q8_1", QS_DT_INVALID},  [10] = {"Q2_K", QS_DT_Q2_K},
    [11] = {"Q3_K", QS_DT_Q3_K}, [12] = {"Q4_K", QS_DT_Q4_K},    [13] = {"Q5_K", QS_DT_Q5_K},
    [14] = {"Q6_K", QS_DT_Q6_K},    [15] = {"Q8_K", QS_DT_Q8_K}, [16] = {"IQ2_XXS", QS_DT_INVALID},
    [17] = {"IQ2_XS", QS_DT_INVALID}, [18] = {"IQ3_XXS", QS_DT_INVALID}, [19] = {"IQ1_S", QS_DT_INVALID},
    [20] = {"IQ4_NL", QS_DT_IQ4_NL}, [21] = {"IQ3_S", QS_DT_INVALID}, [22] = {"IQ2_S", QS_DT_INVALID},
    [23] = {"IQ4_XS", QS_DT_IQ4_XS}, [24] = {"I8", QS_DT_I8},      [25] = {"I16", QS_DT_I16},
    [26] = {"I32", QS_DT_I32},      [27] = {"I64", QS_DT_I64},      [28] = {"F64", QS_DT_F64},
    [29] = {"IQ1_M", QS_DT_INVALID}, [30] = {"BF16", QS_DT_BF16},   [34] = {"TQ1_0", QS_DT_INVALID},
    [35] = {"TQ2_0", QS_DT_INVALID}, [39] = {"MXFP4", QS_DT_GGML_MXFP4}, [40] = {"NVFP4", QS_DT_GGML_NVFP4},
    [41] = {"Q1_0", QS_DT_INVALID}, [42] = {"Q2_0", QS_DT_INVALID},
};
#define N_GGML (sizeof kGgml / sizeof kGgml[0])

/* The key/value walk of qs_parse_gguf: every value into the metadata JSON; general.alignment checked. */
typedef struct meta_ctx { json_t *meta; uint32_t align; } meta_ctx;

static int meta_kv(void *ctx, const char *key, uint32_t type, qs_gguf_rd *r, const char *what)
{
    meta_ctx *mc = ctx;
    size_t vat = r->pos;
    json_t *v = NULL;
    if (qs_gguf_value(r, type, 0, what, &v)) return -1;
    if (json_object_set_new(mc->meta, key, v)) return qs_fail(r->e, "out of memory");
    if (strcmp(key, "general.alignment") == 0) {
        if (type != QS_GGUF_U32)
            return qs_fail(r->e, "general.alignment must be a uint32, not %s (at byte %zu)", qs_gguf_type_name(type),
                           vat - 4);
        mc->align = qs_gguf_le32(r->b + vat);
        if (mc->align == 0 || mc->align % 8)
            return qs_fail(r->e, "general.alignment %u is not a nonzero multiple of 8 (at byte %zu)", mc->align, vat);
    }
    return 1;
}

/* The header: magic, a version we read (2 or 3, little-endian), and tensor and key/value counts the
** remaining bytes can hold. */
static int gguf_header(qs_gguf_rd *r, uint64_t *ntens, uint64_t *nkv)
{
    if (r->len < 4 || memcmp(r->b, "GGUF", 4) != 0) {
        qs_fail(r->e, "bad magic: not a GGUF file (at byte 0)");
        return -1;
    }
    r->pos = 4;
    uint32_t ver;
    if (qs_gguf_u32(r, &ver, "header")) return -1;
    if ((ver & 0xFFFF) == 0) {   /* ggml's own test: a big-endian writer's 3 reads as 0x03000000 */
        qs_fail(r->e, "big-endian GGUF file (version field 0x%08x) is not supported (at byte 4)", ver);
        return -1;
    }
    if (ver == 1) {
        qs_fail(r->e, "GGUF version 1 (32-bit counts) is not supported (at byte 4)");
        return -1;
    }
    if (ver != 2 && ver != 3) {
        qs_fail(r->e, "unsupported GGUF version %u (at byte 4)", ver);
        return -1;
    }
    if (qs_gguf_u64(r, ntens, "header") || qs_gguf_u64(r, nkv, "header")) return -1;
    size_t left = r->len - r->pos;
    if (*ntens > left / GGUF_MIN_TINFO) {
        qs_fail(r->e, "tensor_count %llu is impossible: each tensor info needs at least %d bytes and only %zu remain "
                "(at byte 8)", (unsigned long long)*ntens, GGUF_MIN_TINFO, left);
        return -1;
    }
    if (*nkv > left / GGUF_MIN_KV) {
        qs_fail(r->e, "metadata_kv_count %llu is impossible: each KV needs at least %d bytes and only %zu remain "
                "(at byte 16)", (unsigned long long)*nkv, GGUF_MIN_KV, left);
        return -1;
    }
    if (*nkv * GGUF_MIN_KV > left - *ntens * GGUF_MIN_TINFO) {   /* no overflow: each term <= left */
        qs_fail(r->e, "tensor_count %llu and metadata_kv_count %llu are impossible together: they need at least "
                "%llu bytes and only %zu remain (at byte 8)", (unsigned long long)*ntens, (unsigned long long)*nkv,
                (unsigned long long)(*ntens * GGUF_MIN_TINFO + *nkv * GGUF_MIN_KV), left);
        return -1;
    }
    return 0;
}

/* Tensor data starts at the end of the tensor infos (at byte end), rounded up to the alignment: each
** tensor's relative offset made absolute, once its bytes are known to lie inside the file. */
static int place_data(qs_container *c, uint64_t end, uint32_t align, size_t len, const size_t *info_at, qs_err *e)
{
    uint64_t data = (end + align - 1) / align * align;
    for (size_t i = 0; i < c->n; i++) {
        qs_tdesc *t = &c->t[i];
        if (data > len || t->offset > len - data || t->nbytes > len - data - t->offset)
            return qs_fail(e, "tensor '%.*s': data (%llu bytes at offset %llu of the data section, which starts at %llu) "
                           "runs past the end of the file (%zu bytes) (at byte %zu)", QS_CLIP(t->name, 80), (unsigned long long)t->nbytes,
                           (unsigned long long)t->offset, (unsigned long long)data, len, info_at[i]);
        t->offset += data;
    }
    return 0;
}

int qs_parse_gguf(const uint8_t *buf, size_t len, const qs_parse_opts *o, qs_container *c, qs_err *e)
{
    (void)o;   /* reinterpretation applies to npy words only */
    json_t *meta = NULL, *names = NULL;
    char *name = NULL;
    char ctx[112];   /* "tensor 'NAME'" for messages */
    size_t *info_at = NULL, ninfo = 0, ncap = 0;   /* where each kept tensor's offset field is */
    uint64_t nskip = 0;                            /* tensors of types we do not decode */
    qs_gguf_rd r = {buf, len, 0, e};
    memset(c, 0, sizeof *c);
    strcpy(c->kind, "gguf");

    uint64_t ntens, nkv;
    if (gguf_header(&r, &ntens, &nkv)) goto fail;

    if (!(meta = json_object()) || !(names = json_object())) { qs_fail(e, "out of memory"); goto fail; }
    meta_ctx mc = {meta, GGUF_DEFAULT_ALIGN};
    if (qs_gguf_kv_walk(&r, nkv, meta_kv, &mc)) goto fail;
    uint32_t align = mc.align;

    if (ntens > (len - r.pos) / GGUF_MIN_TINFO) {
        qs_fail(e, "tensor_count %llu is impossible: each tensor info needs at least %d bytes and only %zu remain "
                "after the metadata (at byte 8)", (unsigned long long)ntens, GGUF_MIN_TINFO, len - r.pos);
        goto fail;
    }
    for (uint64_t i = 0; i < ntens; i++) {
        size_t nat = r.pos;
        if (qs_gguf_name(&r, "tensor name", &name)) goto fail;
        size_t dat = r.pos;
        uint32_t nd, gt;
        uint64_t ne[GGUF_MAX_DIMS], off;
        snprintf(ctx, sizeof ctx, "tensor '%.*s'", QS_CLIP(name, 80));
        if (qs_gguf_u32(&r, &nd, ctx)) goto fail;
        if (nd > GGUF_MAX_DIMS) {
            qs_fail(e, "tensor '%.*s': n_dims %u exceeds %d (at byte %zu)", QS_CLIP(name, 80), nd, GGUF_MAX_DIMS, dat);
            goto fail;
        }
        for (uint32_t j = 0; j < nd; j++) {
            if (qs_gguf_u64(&r, &ne[j], ctx)) goto fail;
            if (ne[j] > (uint64_t)INT64_MAX) {   /* ggml reads ne as int64 */
                qs_fail(e, "tensor '%.*s': ne[%u] is negative (at byte %zu)", QS_CLIP(name, 80), j, r.pos - 8);
                goto fail;
            }
        }
        size_t tat = r.pos;
        if (qs_gguf_u32(&r, &gt, ctx)) goto fail;
        size_t oat = r.pos;
        if (qs_gguf_u64(&r, &off, ctx)) goto fail;

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

    if (place_data(c, (uint64_t)r.pos, align, len, info_at, e)) goto fail;

    if (nkv && !(c->meta_json = json_dumps(meta, JSON_COMPACT))) { qs_fail(e, "out of memory"); goto fail; }
    free(info_at);
    json_decref(meta);
    json_decref(names);
    return 0;

fail:
    free(name);
    free(info_at);
    json_decref(meta);
    json_decref(names);
    qs_container_free(c);
    return -1;
}
