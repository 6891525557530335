/*
** The one GGUF key/value reader (spec/data.md §1.4): a bounds-checked cursor over a file image
** (little-endian u32/u64, strings as u64 length + bytes), values of every type read or skipped, and a
** walk over the key/value section.  Used by the GGUF parser (parse_gguf.c, which turns the values into
** the metadata JSON) and by the model loader (llm_load_gguf.c, which reads the vocabulary arrays the
** metadata only summarises).  Errors: "what: ... (at byte N)", no file name (the caller adds it).
*/
#ifndef QS_GGUF_KV_H
#define QS_GGUF_KV_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "container.h"

/* GGUF value types (gguf.md gguf_metadata_value_type). */
enum {
    QS_GGUF_U8, QS_GGUF_I8, QS_GGUF_U16, QS_GGUF_I16, QS_GGUF_U32, QS_GGUF_I32, QS_GGUF_F32, QS_GGUF_BOOL,
    QS_GGUF_STRING, QS_GGUF_ARRAY, QS_GGUF_U64, QS_GGUF_I64, QS_GGUF_F64, QS_GGUF_COUNT
};

typedef struct qs_gguf_rd {
    const uint8_t *b;
    size_t len, pos;
    qs_err *e;
} qs_gguf_rd;

uint32_t qs_gguf_le32(const uint8_t *p);
/* n more bytes must be there; what names the field in the message. */
int qs_gguf_need(qs_gguf_rd *r, uint64_t n, const char *what);
int qs_gguf_u32(qs_gguf_rd *r, uint32_t *v, const char *what);
int qs_gguf_u64(qs_gguf_rd *r, uint64_t *v, const char *what);
/* A string; *s points into the image (no copy, no NUL). */
int qs_gguf_str(qs_gguf_rd *r, const uint8_t **s, size_t *n, const char *what);
/* A key or tensor name: valid UTF-8 without NUL, returned as a new C string. */
int qs_gguf_name(qs_gguf_rd *r, const char *what, char **out);
/* One value of `type` (< QS_GGUF_COUNT) at r->pos, skipped with every count checked against the bytes
** left; if out, also as JSON (arrays of more than 64 elements summarised; see parse_gguf.c). */
int qs_gguf_value(qs_gguf_rd *r, uint32_t type, int depth, const char *what, json_t **out);
const char *qs_gguf_type_name(uint32_t type);

/* Called at each value: read it (advancing r->pos) and return 1, or return 0 to have it skipped (r->pos
** is reset to the value), or -1 with r->e set.  what is "metadata 'KEY'". */
typedef int (*qs_gguf_kv_fn)(void *ctx, const char *key, uint32_t type, qs_gguf_rd *r, const char *what);
/* The nkv key/value pairs from r->pos: keys valid UTF-8 without NUL and unique, types known. */
int qs_gguf_kv_walk(qs_gguf_rd *r, uint64_t nkv, qs_gguf_kv_fn fn, void *ctx);

#endif
