/*
** A GGUF file's tensor directory (gguf_tensors.h), read with the store's GGUF cursor (gguf_kv.h).
*/
#include "gguf_tensors.h"

#include <stdlib.h>
#include <string.h>

#include "gguf_kv.h"

typedef struct { uint32_t align; } tmeta;

static int align_kv(void *ctx, const char *key, uint32_t type, qs_gguf_rd *r, const char *what)
{
    if (strcmp(key, "general.alignment") || type != QS_GGUF_U32) return 0;
    uint32_t v;
    if (qs_gguf_u32(r, &v, what)) return -1;
    if (v == 0 || (v & (v - 1)) || v > 65536) return qs_fail(r->e, "%s: alignment %u is not a power of two", what, v);
    ((tmeta *)ctx)->align = v;
    return 1;
}

static int one(qs_gguf_rd *r, qs_gguf_tensor *t)
{
    size_t at = r->pos;
    uint32_t nd;
    if (qs_gguf_name(r, "tensor name", &t->name) || qs_gguf_u32(r, &nd, "tensor info")) return -1;
    if (nd < 1 || nd > 4) return qs_fail(r->e, "tensor info: %u dimensions (at byte %zu)", nd, at);
    t->nd = (int)nd;
    t->nel = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        if (qs_gguf_u64(r, &t->ne[d], "tensor info")) return -1;
        if (t->ne[d] == 0 || t->ne[d] > (1ull << 40) || t->nel > (1ull << 40) / t->ne[d])
            return qs_fail(r->e, "tensor info: dimension out of range (at byte %zu)", at);
        t->nel *= t->ne[d];
    }
    return qs_gguf_u32(r, &t->type, "tensor info") || qs_gguf_u64(r, &t->off, "tensor info") ? -1 : 0;
}

int qs_gguf_tensors(const uint8_t *b, size_t len, qs_gguf_tensor **out, size_t *n, qs_err *e)
{
    *out = NULL;
    *n = 0;
    if (len < 24 || memcmp(b, "GGUF", 4)) return qs_fail(e, "not a GGUF file (at byte 0)");
    qs_gguf_rd r = {b, len, 4, e};
    uint32_t ver;
    uint64_t nt, nkv;
    if (qs_gguf_u32(&r, &ver, "header") || qs_gguf_u64(&r, &nt, "header") || qs_gguf_u64(&r, &nkv, "header")) return -1;
    if (ver != 2 && ver != 3) return qs_fail(e, "unsupported GGUF version %u (at byte 4)", ver);
    if (nt > (len - r.pos) / 29 || nkv > (len - r.pos) / 13) return qs_fail(e, "tensor or key count does not fit the file (at byte 8)");
    tmeta m = {32};
    if (qs_gguf_kv_walk(&r, nkv, align_kv, &m)) return -1;
    qs_gguf_tensor *t = calloc(nt ? (size_t)nt : 1, sizeof *t);
    if (!t) return qs_fail(e, "out of memory");
    for (uint64_t i = 0; i < nt; i++)
        if (one(&r, &t[i])) { qs_gguf_tensors_free(t, (size_t)nt); return -1; }
    uint64_t data = (r.pos + m.align - 1) / m.align * m.align;
    for (uint64_t i = 0; i < nt; i++) {
        if (t[i].off > UINT64_MAX - data) { qs_gguf_tensors_free(t, (size_t)nt); return qs_fail(e, "tensor offset out of range"); }
        t[i].off += data;
    }
    *out = t;
    *n = (size_t)nt;
    return 0;
}

void qs_gguf_tensors_free(qs_gguf_tensor *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++) free(t[i].name);
    free(t);
}
