/*
** Shared by the model-loader fuzz targets: a loaded model small enough runs a forward pass over
** two tokens (finite output is not required: the weights are arbitrary).
*/
#ifndef QS_FUZZ_LLM_H
#define QS_FUZZ_LLM_H

#include <stdlib.h>

#include "../../kernels/llm.h"
#include "../../store/llm_load.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

static void check_forward(const qs_llm_model *m)
{
    if ((size_t)m->c.dim * m->c.vocab >= (1u << 20) || m->c.n_layer > 4) return;
    qs_err e = {{0}};
    qs_llm_state *s = qs_llm_state_new(&m->c, 1, 2, 2, &e);
    if (!s) return;
    float *h = malloc((size_t)2 * m->c.dim * sizeof(float));
    int32_t tok[2] = {0, m->c.vocab - 1};
    if (h) CHECK(qs_llm_forward(m, NULL, s, tok, 1, 2, 0, h, NULL, NULL, &e) == 0);
    free(h);
    qs_llm_state_free(s);
}

#endif
