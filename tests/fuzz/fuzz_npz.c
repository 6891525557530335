/*
** libFuzzer target for the .npz reader: parse with and without a raw-word reinterpretation, then
** check that every range a consumer would read lies inside the input.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/container.h"

static void check(const qs_container *c, size_t size)
{
    if (strcmp(c->kind, "npz") != 0) abort();
    for (size_t i = 0; i < c->n; i++) {
        const qs_tdesc *t = &c->t[i];
        if (!t->name || t->ndim < 0 || t->ndim > QS_MAX_DIMS) abort();
        if (t->codec == QS_CODEC_NONE) {
            if (t->offset > size || t->nbytes > size - t->offset) abort();
        } else if (t->codec == QS_CODEC_DEFLATE) {
            if (t->comp_offset > size || t->comp_size > size - t->comp_offset) abort();
            if (t->offset > t->inflated_size || t->nbytes != t->inflated_size - t->offset) abort();
        } else {
            abort();
        }
        uint64_t numel, nbytes;
        if (qs_shape_numel(t->shape, t->ndim, &numel) || numel != t->numel) abort();
        if (qs_dtype_nbytes(t->dtype, numel, &nbytes) || nbytes != t->nbytes) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const qs_dtype kAs[] = {QS_DT_INVALID, QS_DT_F16};
    for (size_t i = 0; i < sizeof kAs / sizeof kAs[0]; i++) {
        qs_parse_opts o = {kAs[i]};
        qs_container c;
        qs_err e;
        if (qs_parse_npz(data, size, i ? &o : NULL, &c, &e) == 0) {
            check(&c, size);
            qs_container_free(&c);
        } else if (c.n || c.t || c.nwarn || !strstr(e.msg, "(at byte ")) {
            abort();
        }
    }
    return 0;
}
