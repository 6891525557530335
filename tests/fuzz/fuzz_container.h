/*
** Shared by the fuzz targets of the container readers (GGUF, safetensors): on success every
** descriptor is self-consistent with its bytes inside the input (they are decoded, so ASan sees any
** stray range) and meta_json is a JSON object of bounded size; on failure the message carries a
** position and nothing is left allocated (LeakSanitizer checks the rest).
*/
#ifndef QS_FUZZ_CONTAINER_H
#define QS_FUZZ_CONTAINER_H

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/container.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

static void check_tensors(const qs_container *c, const uint8_t *data, size_t size)
{
    static float out[4096];
    for (size_t i = 0; i < c->n; i++) {
        const qs_tdesc *t = &c->t[i];
        const qs_dtype_traits *tr = qs_dtype_get(t->dtype);
        uint64_t numel, nbytes;
        CHECK(t->name && tr && t->codec == QS_CODEC_NONE);
        CHECK(t->ndim >= 0 && t->ndim <= QS_MAX_DIMS);
        CHECK(qs_shape_numel(t->shape, t->ndim, &numel) == 0 && numel == t->numel);
        CHECK(qs_dtype_nbytes(t->dtype, numel, &nbytes) == 0 && nbytes == t->nbytes);
        CHECK(t->offset <= size && t->nbytes <= size - t->offset);
        size_t nb = (size_t)(t->numel / tr->block_elems), cap = sizeof out / sizeof out[0] / tr->block_elems;
        tr->decode(data + t->offset, out, nb < cap ? nb : cap);
    }
    if (c->meta_json) {
        /* Long arrays are summarised, so the JSON stays proportional to the input (worst case: a
        ** 1-byte bool or control character becoming 6 characters). */
        CHECK(strlen(c->meta_json) <= 8 * size + 64);
        json_t *j = json_loads(c->meta_json, 0, NULL);
        CHECK(json_is_object(j));
        json_decref(j);
    }
    for (size_t i = 0; i < c->nwarn; i++) CHECK(c->warnings[i] != NULL);
}

/* Parse data with one reader and check the outcome; kind is the container kind it must report. */
static void check_parse(int (*parse)(const uint8_t *, size_t, const qs_parse_opts *, qs_container *, qs_err *),
                        const char *kind, const uint8_t *data, size_t size)
{
    qs_container c;
    qs_err e = {{0}};
    if (parse(data, size, NULL, &c, &e) == 0) {
        CHECK(strcmp(c.kind, kind) == 0);
        check_tensors(&c, data, size);
        qs_container_free(&c);
    } else {
        CHECK(strstr(e.msg, "(at byte ") != NULL || strstr(e.msg, "out of memory") != NULL);
        CHECK(c.n == 0 && c.t == NULL && c.meta_json == NULL && c.warnings == NULL);
    }
}

#endif
