/*
** Calibration capture for the weight transforms of `llm eval` (smooth=, w=F:gptq, w=F:awq;
** docs/llm.md "Calibration transforms"): the FP32 reference runs over a calibration text (never the
** evaluation text) in chunks of ctx tokens (the first replaced by BOS when the model adds one, as the
** evaluation's chunks), and the forward pass's tap (qs_llm_tap_fn) gives the inputs x of the linear
** layers at the four sites of every layer (attn_in: Q/K/V, attn_out: o_proj, ffn_in: gate/up,
** ffn_down_in: down).  Per (layer, site) it keeps max |x_j| and mean |x_j| per channel (SmoothQuant,
** AWQ) and, for the layers [l0, l1) asked for, GPTQ's Hessian H = 2/N X^T X in double (float products
** of one chunk, summed over chunks in double).  The Hessians of SmolLM2 take 27 MB per layer (dims 576
** and 1536), so callers hold a group of layers at a time (qs_calib_layers_per_pass).
*/
#ifndef QS_LLM_CALIB_H
#define QS_LLM_CALIB_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/llm.h"

/* The calibration text, tokenized, and how it is cut. */
typedef struct qs_calib_src {
    const int32_t *ids;
    size_t nids;
    int ctx, chunks, bos;     /* chunks of ctx tokens (at most chunks, > 0); bos < 0: none */
    char hash[33];            /* XXH3-128 of the text (keys, labels) */
    size_t budget;            /* bytes of Hessians one pass may hold (0: QS_CALIB_BUDGET) */
} qs_calib_src;
#define QS_CALIB_BUDGET ((size_t)1 << 30)

typedef struct qs_calib_site {
    size_t n;                 /* channels */
    float *xmax, *xmean;      /* [n] */
    double *H;                /* [n][n] for layers l0 .. l1-1, else NULL */
} qs_calib_site;

typedef struct qs_calib {
    int n_layer, l0, l1;      /* Hessians held for layers l0 .. l1-1 */
    uint64_t rows;            /* calibration tokens */
    qs_calib_site *site;      /* [n_layer * QS_SITE_LINEAR_COUNT] */
} qs_calib;

/* Chunks the source gives (min(chunks, nids / ctx)); 0 when the text is shorter than one chunk. */
int qs_calib_nchunks(const qs_calib_src *src);
/* Layers whose Hessians fit in the budget together (at least 1). */
int qs_calib_layers_per_pass(const qs_llm_cfg *c, const qs_calib_src *src);

/* Run the FP32 model m over the source: the statistics of every layer and the Hessians of layers
** [l0, l1) (l0 == l1: none).  c is (re)filled; free with qs_calib_free. */
int qs_calib_capture(qs_calib *c, const qs_llm_model *m, const qs_calib_src *src, int l0, int l1, qs_err *e);
void qs_calib_free(qs_calib *c);

static inline qs_calib_site *qs_calib_at(const qs_calib *c, int l, int site)
{
    return &c->site[(size_t)l * QS_SITE_LINEAR_COUNT + (size_t)site];
}

#endif
