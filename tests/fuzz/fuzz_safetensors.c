/*
** libFuzzer target for the safetensors reader (store/parse_safetensors.c).
**
** On success every descriptor must be self-consistent and its bytes inside the input (they are
** decoded, so ASan sees any stray range); meta_json must be a JSON object.  On failure the message
** must carry a position and nothing may be left allocated (LeakSanitizer checks the rest).
*/
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
        json_t *j = json_loads(c->meta_json, 0, NULL);
        CHECK(json_is_object(j));
        json_decref(j);
    }
    for (size_t i = 0; i < c->nwarn; i++) CHECK(c->warnings[i] != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    qs_container c;
    qs_err e = {{0}};
    if (qs_parse_safetensors(data, size, NULL, &c, &e) == 0) {
        CHECK(strcmp(c.kind, "safetensors") == 0);
        check_tensors(&c, data, size);
        qs_container_free(&c);
    } else {
        CHECK(strstr(e.msg, "(at byte ") != NULL || strstr(e.msg, "out of memory") != NULL);
        CHECK(c.n == 0 && c.t == NULL && c.meta_json == NULL && c.warnings == NULL);
    }
    return 0;
}
