/*
** Model parts beyond the Llama core (llm.h): where the mixture-of-experts weights live (one arena per
** model, ext_arena, laid out from the configuration alone so that a clone copies it whole; QK-norm gains
** sit in the main arena, placed by llm_gemma.c), the checks of those configuration fields, the RoPE frequencies with Llama 3's factors, and
** the refusal of paths that run only the core.
*/
#include "llm.h"
#include "llm_ext.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int qs_llm_ext_check(const qs_llm_cfg *c, qs_err *e)
{
    if (c->sliding_window < 0) return qs_fail(e, "sliding window %d < 0", c->sliding_window);
    if (c->rope_nff && c->rope_nff != c->head_dim / 2)
        return qs_fail(e, "%d RoPE frequency factors for a head of %d (want %d)", c->rope_nff, c->head_dim, c->head_dim / 2);
    if (c->rope_nff > QS_LLM_ROPE_FF_MAX)
        return qs_fail(e, "RoPE frequency factors need head_dim <= %d (have %d)", 2 * QS_LLM_ROPE_FF_MAX, c->head_dim);
    for (int i = 0; i < c->rope_nff; i++)
        if (!(c->rope_ff[i] > 0) || !isfinite(c->rope_ff[i]))
            return qs_fail(e, "RoPE frequency factor %d is %g (must be > 0)", i, c->rope_ff[i]);
    if (c->n_expert < 0 || c->n_expert > 1024 || c->ffn_shexp < 0 || c->ffn_shexp > 1 << 18)
        return qs_fail(e, "bad mixture of experts (%d experts, shared expert width %d)", c->n_expert, c->ffn_shexp);
    if (c->n_expert && (c->n_expert_used <= 0 || c->n_expert_used > c->n_expert || c->n_expert_used > QS_LLM_MOE_MAX_USED))
        return qs_fail(e, "%d experts used per token of %d (at most %d)", c->n_expert_used, c->n_expert, QS_LLM_MOE_MAX_USED);
    if (!c->n_expert && (c->n_expert_used || c->ffn_shexp)) return qs_fail(e, "expert settings without experts");
    return 0;
}

size_t qs_llm_ext_floats(const qs_llm_cfg *c)
{
    size_t d = (size_t)c->dim, f = (size_t)c->ffn, E = (size_t)c->n_expert, sh = (size_t)c->ffn_shexp;
    return E ? (E * d + 3 * E * f * d + (sh ? 3 * sh * d + d : 0)) * (size_t)c->n_layer : 0;
}

int qs_llm_ext_alloc(qs_llm_model *m, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    size_t n = qs_llm_ext_floats(c);
    if (!n) return 0;
    if (!(m->ext_arena = malloc(n * sizeof(float)))) return qs_fail(e, "out of memory for %zu expert weights", n);
    m->ext_len = n;
    size_t d = (size_t)c->dim, f = (size_t)c->ffn, E = (size_t)c->n_expert, sh = (size_t)c->ffn_shexp;
    float *p = m->ext_arena;
    for (int l = 0; l < c->n_layer; l++) {
        qs_llm_moe_w *w = &m->L[l].moe;
        w->router = p; p += E * d;
        w->gate = p; p += E * f * d;
        w->up = p; p += E * f * d;
        w->down = p; p += E * d * f;
        if (sh) {
            w->sh_gate = p; p += sh * d;
            w->sh_up = p; p += sh * d;
            w->sh_down = p; p += d * sh;
            w->sh_inp = p; p += d;
        }
    }
    return 0;
}

double qs_llm_rope_freq(const qs_llm_cfg *c, int i)
{
    double f = pow((double)c->rope_base, -2.0 * i / c->head_dim);
    return c->rope_nff ? f / c->rope_ff[i] : f;
}

int qs_llm_cfg_core_only(const qs_llm_cfg *c, int max_pos, const char *who, qs_err *e)
{
    const char *what = c->qk_norm ? "QK-norm (per-head Q/K RMSNorm)"
                     : c->n_expert ? "mixture-of-experts FFNs"
                     : c->rope_nff ? "RoPE frequency factors (Llama 3 rope_scaling)"
                     : c->sliding_window && max_pos > c->sliding_window ? "sliding-window attention" : NULL;
    if (!what) return 0;
    if (c->sliding_window && !c->qk_norm && !c->n_expert && !c->rope_nff)
        return qs_fail(e, "%s: %s does not run %s (window %d < %d positions)", c->arch[0] ? c->arch : "model", who, what,
                       c->sliding_window, max_pos);
    return qs_fail(e, "%s: %s does not run %s", c->arch[0] ? c->arch : "model", who, what);
}
