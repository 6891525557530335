/*
** libFuzzer target for the .npy reader: parse with and without a raw-word reinterpretation, then
** check that a successful parse only points inside the input.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/container.h"

static void check(const qs_container *c, size_t size)
{
    if (c->n != 1 || !c->t[0].name || strcmp(c->kind, "npy") != 0) abort();
    const qs_tdesc *t = &c->t[0];
    if (t->codec != QS_CODEC_NONE || t->offset > size || t->nbytes > size - t->offset) abort();
    if (t->ndim < 0 || t->ndim > QS_MAX_DIMS) abort();
    uint64_t numel, nbytes;
    if (qs_shape_numel(t->shape, t->ndim, &numel) || numel != t->numel) abort();
    if (qs_dtype_nbytes(t->dtype, numel, &nbytes) || nbytes != t->nbytes) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const qs_dtype kAs[] = {QS_DT_INVALID, QS_DT_BF16, QS_DT_F8_E4M3, QS_DT_F32};
    for (size_t i = 0; i < sizeof kAs / sizeof kAs[0]; i++) {
        qs_parse_opts o = {kAs[i]};
        qs_container c;
        qs_err e;
        if (qs_parse_npy(data, size, i ? &o : NULL, &c, &e) == 0) {
            check(&c, size);
            qs_container_free(&c);
        } else if (c.n || c.t || c.nwarn || !strstr(e.msg, "(at byte ")) {
            abort();
        }
    }
    return 0;
}
