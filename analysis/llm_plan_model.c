/*
** A per-(layer, site) format assignment applied to a model (see llm_plan_model.h).
*/
#include "llm_plan_model.h"

#include <stdlib.h>
#include <string.h>

#include "../kernels/cast_scale.h"

double qs_plan_site_bits(const qs_llm_cfg *c, int site, const qs_apply *a, int scaled)
{
    if (!a) return 32;
    const double d = c->dim, kv = (double)c->n_kv_head * c->head_dim, f = c->ffn, qd = (double)qs_llm_q_dim(c);
    const double elems = qs_sens_site_elems(c, site);
    double b = qs_format_bits_per_elem(a->f, &a->o);
    int cast = qs_cast_scale_target(a->f) > 0 && (scaled || a->cscale);
    if (!a->f->has_tensor_scale && !cast) return b;
    double runs;   /* FP32 scales per layer (weights) or per token (activations, K/V) */
    if (site == QS_SENS_W) {
        int g = cast ? (a->cscale ? a->cscale : QS_CSCALE_ROW) : QS_CSCALE_TENSOR;
        if (g == QS_CSCALE_TENSOR) runs = 7;
        else if (g == QS_CSCALE_ROW) runs = qd + 2 * kv + d + 2 * f + d;   /* output rows: q, k, v, o, gate, up, down */
        else runs = d + d + d + qd + d + d + f;                             /* input columns */
    } else
        runs = site == QS_SENS_KV ? 2 : 1;   /* one K and one V row, or the site's row, per token */
    return b + 32 * runs / elems;
}

int qs_plan_numerics_make(const qs_llm_model *ref, const qs_apply *const *cell, int scaled, qs_plan_numerics *pn, qs_err *e)
{
    memset(pn, 0, sizeof *pn);
    const int L = ref->c.n_layer;
    pn->layer_fmt = calloc((size_t)L * QS_LLM_NLSITE, sizeof *pn->layer_fmt);
    const qs_apply **w = calloc((size_t)L, sizeof *w);
    int anyw = 0;
    if (!pn->layer_fmt || !w) { free(w); qs_plan_numerics_free(pn); return qs_fail(e, "out of memory"); }
    for (int l = 0; l < L; l++) {
        for (int s = 0; s < QS_LLM_NLSITE; s++) pn->layer_fmt[(size_t)l * QS_LLM_NLSITE + s] = cell[(size_t)l * QS_SENS_NSITE + s];
        w[l] = cell[(size_t)l * QS_SENS_NSITE + QS_SENS_W];
        anyw |= w[l] != NULL;
    }
    pn->m = ref;
    if (anyw) {
        if (qs_llm_view_quantize_per_layer(&pn->view, ref, w, scaled, e)) { free(w); qs_plan_numerics_free(pn); return -1; }
        pn->m = &pn->view;
    }
    free(w);
    return 0;
}

void qs_plan_numerics_free(qs_plan_numerics *pn)
{
    if (pn->view.L) qs_llm_view_free(&pn->view);
    free(pn->layer_fmt);
    memset(pn, 0, sizeof *pn);
}

qs_eval_variant qs_plan_variant(const qs_plan_numerics *pn, int scaled)
{
    qs_eval_variant v;
    memset(&v, 0, sizeof v);
    v.m = pn->m;
    v.nx.scaled = scaled;
    v.nx.layer_fmt = pn->layer_fmt;
    return v;
}

int qs_plan_verify(const qs_llm_model *ref, const qs_apply *const *cell, int scaled, const int32_t *text, size_t ntext,
                   const qs_eval_setup *su, qs_eval_summary *s, qs_err *e)
{
    qs_plan_numerics pn;
    if (qs_plan_numerics_make(ref, cell, scaled, &pn, e)) return -1;
    qs_eval_variant var = qs_plan_variant(&pn, scaled);
    qs_eval_out out;
    memset(&out, 0, sizeof out);
    int rc = qs_llm_eval_run(ref, &var, NULL, 1, text, ntext, su, NULL, NULL, &out, e) ||
                     qs_eval_summarize(&out.var[0], &out.var[1], out.n, s, e)
                 ? -1 : 0;
    qs_eval_out_free(&out);
    qs_plan_numerics_free(&pn);
    return rc;
}
