/*
** The loaders' part beyond the Llama core (llm_load_internal.h): QK-norm (Qwen3), sliding windows
** (Mistral), RoPE frequency factors (Llama 3's rope_scaling, linear scaling) and mixtures of experts
** (Mixtral, Qwen2-MoE, Qwen3-MoE), from GGUF metadata and tensors (experts stacked [n_expert][out][in])
** or config.json and per-expert safetensors, by the tables of llm_arch.h.
*/
#include "llm_load_internal.h"
#include "../kernels/llm_ext.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* llama.cpp's converter's factors for rope_type "llama3" (the divisors of the frequencies, written as
** GGUF rope_freqs): 1 for short wavelengths, `factor` for long ones, a smooth blend between. */
static void llama3_factors(qs_llm_cfg *c, double factor, double lo, double hi, double orig)
{
    const double lo_wl = orig / lo, hi_wl = orig / hi;
    c->rope_nff = c->head_dim / 2;
    for (int i = 0; i < c->rope_nff; i++) {
        double wl = 2 * M_PI / pow((double)c->rope_base, -2.0 * i / c->head_dim), f;
        if (wl < hi_wl) f = 1;
        else if (wl > lo_wl) f = factor;
        else {
            double s = (orig / wl - lo) / (hi - lo);
            f = 1 / ((1 - s) / factor + s);
        }
        c->rope_ff[i] = (float)f;
    }
}

static double num(json_t *o, const char *k, double dflt) { json_t *j = json_object_get(o, k); return json_is_number(j) ? json_number_value(j) : dflt; }

/* config.json "rope_scaling": llama3 and linear run, other types are refused. */
static int hf_rope_scaling(json_t *cj, qs_llm_cfg *c, qs_err *e)
{
    json_t *rs = json_object_get(cj, "rope_scaling");
    if (!rs || json_is_null(rs)) return 0;
    const char *t = json_string_value(json_object_get(rs, "rope_type"));
    if (!t) t = json_string_value(json_object_get(rs, "type"));
    if (!json_is_object(rs) || !t) return qs_fail(e, "\"rope_scaling\" has no rope_type");
    if (!strcmp(t, "default")) return 0;
    double f = num(rs, "factor", 0);
    if (!(f > 0) || c->head_dim / 2 > QS_LLM_ROPE_FF_MAX)
        return qs_fail(e, "\"rope_scaling\" %.20s: bad factor or head size", t);
    if (!strcmp(t, "linear")) {
        c->rope_nff = c->head_dim / 2;
        for (int i = 0; i < c->rope_nff; i++) c->rope_ff[i] = (float)f;
        return 0;
    }
    if (strcmp(t, "llama3")) return qs_fail(e, "\"rope_scaling\" type '%.20s' is not supported (llama3, linear)", t);
    double lo = num(rs, "low_freq_factor", 0), hi = num(rs, "high_freq_factor", 0), orig = num(rs, "original_max_position_embeddings", 0);
    if (!(lo > 0) || !(hi > lo) || !(orig > 0))
        return qs_fail(e, "\"rope_scaling\" llama3 needs low_freq_factor > 0, high_freq_factor > it and original_max_position_embeddings");
    llama3_factors(c, f, lo, hi, orig);
    return 0;
}

/* GGUF ARCH.rope.scaling.type: none or linear (llama3's factors come as the rope_freqs tensor). */
static int gguf_rope_scaling(json_t *meta, const char *arch, qs_llm_cfg *c, qs_err *e)
{
    char k[96];
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    const char *t = json_string_value(json_object_get(meta, k));
    if (!t || !strcmp(t, "none")) return 0;
    snprintf(k, sizeof k, "%s.rope.scaling.factor", arch);
    double f = num(meta, k, 0);
    if (strcmp(t, "linear") || !(f > 0) || c->head_dim / 2 > QS_LLM_ROPE_FF_MAX)
        return qs_fail(e, "RoPE scaling '%.20s' is not supported (linear, or rope_freqs)", t);
    c->rope_nff = c->head_dim / 2;
    for (int i = 0; i < c->rope_nff; i++) c->rope_ff[i] = (float)f;
    return 0;
}

static int moe_shape(json_t *obj, qs_llm_scheme s, const qs_llm_arch *A, qs_llm_cfg *c, qs_err *e)
{
    int ne = 0, nu = 0, fe = 0, fs = 0;
    if (qs_llm__hparam(obj, s, A->name, QS_H_N_EXPERT, 0, &ne, e)) return -1;
    if (!ne && s == QS_LLM_HF && json_is_integer(json_object_get(obj, "num_local_experts")))   /* Mixtral's spelling */
        ne = (int)json_integer_value(json_object_get(obj, "num_local_experts"));
    if (ne <= 0) return 0;
    if (!(A->flags & QS_ARCH_MOE)) return qs_fail(e, "%s with experts is not supported", A->name);
    if (qs_llm__hparam(obj, s, A->name, QS_H_N_EXPERT_USED, 0, &nu, e) || qs_llm__hparam(obj, s, A->name, QS_H_FFN_EXP, 0, &fe, e) ||
        qs_llm__hparam(obj, s, A->name, QS_H_FFN_SHEXP, 0, &fs, e))
        return -1;
    if (!nu) return qs_fail(e, "%d experts but no count of experts per token", ne);
    if (s == QS_LLM_HF) {   /* Qwen2-MoE's dense layers between sparse ones */
        json_t *step = json_object_get(obj, "decoder_sparse_step"), *only = json_object_get(obj, "mlp_only_layers");
        if ((json_is_integer(step) && json_integer_value(step) != 1) || json_array_size(only))
            return qs_fail(e, "dense FFN layers between mixture-of-experts layers are not supported");
    }
    char k[96];
    snprintf(k, sizeof k, s == QS_LLM_GGUF ? "%s.expert_weights_norm" : "norm_topk_prob", A->name);
    json_t *nj = json_object_get(obj, k);
    c->n_expert = ne;
    c->n_expert_used = nu;
    c->moe_norm_topk = json_is_boolean(nj) ? json_is_true(nj) : A->moe_norm[s];
    if (fe) c->ffn = fe;   /* the experts' width (Mixtral: the FFN width itself) */
    if (fs && !(A->flags & QS_ARCH_MOE)) return qs_fail(e, "a shared expert without experts");
    c->ffn_shexp = fs;
    return 0;
}

int qs_llm__ext_shape(json_t *obj, qs_llm_scheme s, const qs_llm_arch *A, qs_llm_cfg *c, qs_err *e)
{
    snprintf(c->arch, sizeof c->arch, "%s", A->name);
    if (A->flags & QS_ARCH_GEMMA) return 0;   /* Gemma's keys, RoPE scaling and windows: llm_arch_gemma.c */
    c->qk_norm = (A->flags & QS_ARCH_QK_NORM) != 0;
    if (s == QS_LLM_HF && json_is_true(json_object_get(obj, "use_sliding_window")) && !(A->flags & QS_ARCH_SWA))
        return qs_fail(e, "sliding-window attention is not supported");
    if ((A->flags & QS_ARCH_SWA) && qs_llm__hparam(obj, s, A->name, QS_H_SWA, 0, &c->sliding_window, e)) return -1;
    if (s == QS_LLM_HF ? hf_rope_scaling(obj, c, e) : gguf_rope_scaling(obj, A->name, c, e)) return -1;
    return moe_shape(obj, s, A, c, e);
}

/* GGUF rope_freqs.weight [head_dim/2]: Llama 3's divisors of the RoPE frequencies. */
static int rope_freqs(qs_llm_model *m, const qs_llm_src *src, int nsrc, const char *where, qs_err *e)
{
    char nm[96];
    qs_llm_tensor_name(QS_LLM_GGUF, QS_T_ROPE_FREQS, 0, nm, sizeof nm);
    if (!qs_llm__find(src, nsrc, nm, NULL)) return 0;
    qs_llm_cfg *c = &m->c;
    if (c->head_dim / 2 > QS_LLM_ROPE_FF_MAX) return qs_fail(e, "%s: %s needs head_dim <= %d", where, nm, 2 * QS_LLM_ROPE_FF_MAX);
    const uint64_t n = (uint64_t)c->head_dim / 2;
    if (qs_llm__load_tn(src, nsrc, where, nm, &n, 1, c->rope_ff, e)) return -1;
    c->rope_nff = (int)n;   /* replaces a linear factor: llama.cpp multiplies both, no file has both */
    return qs_llm_ext_check(c, e) ? (qs_err_prefix(e, where), -1) : 0;
}

/* The experts of layer l: GGUF stacked [E][out][in], Hugging Face one tensor per expert. */
static int experts(qs_llm_model *m, const qs_llm_arch *A, int l, const qs_llm_src *src, int nsrc, const char *where,
                   qs_llm_scheme s, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    qs_llm_moe_w *w = &m->L[l].moe;
    const uint64_t E = (uint64_t)c->n_expert, d = (uint64_t)c->dim, f = (uint64_t)c->ffn, sh = (uint64_t)c->ffn_shexp;
    char nm[128];
    const uint64_t rs[2] = {E, d};
    if (qs_llm__load_tn(src, nsrc, where, qs_llm_tensor_name_ax(A, s, QS_T_ROUTER, l, 0, nm, sizeof nm), rs, 2, w->router, e))
        return -1;
    const struct { qs_llm_tensor t; uint64_t r, cc; float *dst; } x[] = {
        {QS_T_EXP_GATE, f, d, w->gate}, {QS_T_EXP_UP, f, d, w->up}, {QS_T_EXP_DOWN, d, f, w->down}};
    for (int i = 0; i < 3; i++) {
        if (s == QS_LLM_GGUF) {
            const uint64_t ws[3] = {E, x[i].r, x[i].cc};
            if (qs_llm__load_tn(src, nsrc, where, qs_llm_tensor_name_ax(A, s, x[i].t, l, 0, nm, sizeof nm), ws, 3, x[i].dst, e))
                return -1;
            continue;
        }
        const uint64_t ws[2] = {x[i].r, x[i].cc};
        for (int ex = 0; ex < c->n_expert; ex++)
            if (qs_llm__load_tn(src, nsrc, where, qs_llm_tensor_name_ax(A, s, x[i].t, l, ex, nm, sizeof nm), ws, 2,
                                x[i].dst + (size_t)ex * f * d, e))
                return -1;
    }
    if (!sh) return 0;
    const uint64_t g[2] = {sh, d}, dn[2] = {d, sh}, gi[2] = {1, d};
    if (qs_llm__load_tn(src, nsrc, where, qs_llm_tensor_name_ax(A, s, QS_T_SH_GATE, l, 0, nm, sizeof nm), g, 2, w->sh_gate, e) ||
        qs_llm__load_tn(src, nsrc, where, qs_llm_tensor_name_ax(A, s, QS_T_SH_UP, l, 0, nm, sizeof nm), g, 2, w->sh_up, e) ||
        qs_llm__load_tn(src, nsrc, where, qs_llm_tensor_name_ax(A, s, QS_T_SH_DOWN, l, 0, nm, sizeof nm), dn, 2, w->sh_down, e))
        return -1;
    /* the gate: GGUF [dim], Hugging Face a Linear(dim, 1) [1][dim] */
    return s == QS_LLM_GGUF ? qs_llm__load_tn(src, nsrc, where, qs_llm_tensor_name_ax(A, s, QS_T_SH_INP, l, 0, nm, sizeof nm), gi + 1, 1, w->sh_inp, e)
                            : qs_llm__load_tn(src, nsrc, where, qs_llm_tensor_name_ax(A, s, QS_T_SH_INP, l, 0, nm, sizeof nm), gi, 2, w->sh_inp, e);
}

int qs_llm__load_ext(qs_llm_model *m, const qs_llm_arch *A, const qs_llm_src *src, int nsrc, const char *where,
                     qs_llm_scheme s, qs_err *e)
{
    /* QK-norm gains and the sliding flags are the core's (placed by llm_gemma.c, read with the layer's
    ** other weights; a window without a layer pattern: every layer, Mistral) */
    for (int l = 0; l < m->c.n_layer; l++)
        if (m->c.n_expert && experts(m, A, l, src, nsrc, where, s, e)) return -1;
    return s == QS_LLM_GGUF ? rope_freqs(m, src, nsrc, where, e) : 0;
}
