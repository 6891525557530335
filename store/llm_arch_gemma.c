/*
** Gemma 2 / Gemma 3 hyper-parameters (the QS_ARCH_GEMMA rows of llm_arch.c) into the cfg fields of the
** Gemma block (kernels/llm_gemma.h), from GGUF metadata (llama.cpp's keys and defaults: src/models/
** gemma2.cpp, gemma3.cpp) or a config.json (transformers' Gemma2Config / Gemma3TextConfig), and the
** (1 + w) of Hugging Face's Gemma RMSNorm (llama.cpp's converter stores w + 1 in GGUF files already).
*/
#include "llm_load_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A number under key k (absent or null: dflt; present and not a number: error). */
static int num(json_t *o, const char *k, double dflt, double *out, qs_err *e)
{
    json_t *j = json_object_get(o, k);
    if (!j || json_is_null(j)) { *out = dflt; return 0; }
    if (!json_is_number(j) || !isfinite(json_number_value(j)) || json_number_value(j) < 0)
        return qs_fail(e, "%s is not a number >= 0", k);
    *out = json_number_value(j);
    return 0;
}

/* The period p of a per-layer local/global list (layer l local iff l % p < p - 1), or -1 when it has
** none.  is_local(ctx, l) reads the list. */
static int pattern_of(int n, int (*is_local)(json_t *, int), json_t *list)
{
    for (int p = 1; p <= n + 1; p++) {
        int ok = 1;
        for (int l = 0; l < n && ok; l++) ok = is_local(list, l) == (l % p < p - 1);
        if (ok) return p;
    }
    return -1;
}
static int hf_local(json_t *a, int l)
{
    const char *t = json_string_value(json_array_get(a, (size_t)l));
    return t && !strcmp(t, "sliding_attention");
}
static int gguf_local(json_t *a, int l) { return json_is_true(json_array_get(a, (size_t)l)); }

static int gguf_keys(json_t *meta, const qs_llm_arch *A, qs_llm_cfg *c, qs_err *e)
{
    const int g2 = !strcmp(A->name, "gemma2");
    char k[128];
    double v;
#define KEY(key) (snprintf(k, sizeof k, "%s.%s", A->name, key), k)
    if (num(meta, KEY("attn_logit_softcapping"), g2 ? 50.0 : 0.0, &v, e)) return -1;
    c->attn_softcap = (float)v;
    if (num(meta, KEY("final_logit_softcapping"), g2 ? 30.0 : 0.0, &v, e)) return -1;
    c->final_softcap = (float)v;
    if (num(meta, KEY("attention.sliding_window"), g2 ? 4096.0 : 0.0, &v, e)) return -1;
    if (v > 1 << 24) return qs_fail(e, "%s %g is out of range", k, v);
    c->sliding_window = (int)v;
    json_t *pat = json_object_get(meta, KEY("attention.sliding_window_pattern"));
    c->swa_pattern = g2 ? 2 : 6;
    if (json_is_integer(pat) && json_integer_value(pat) >= 0 && json_integer_value(pat) <= 4096) c->swa_pattern = (int)json_integer_value(pat);
    else if (json_is_array(pat)) {   /* per layer: true = local */
        if (json_array_size(pat) != (size_t)c->n_layer || (c->swa_pattern = pattern_of(c->n_layer, gguf_local, pat)) < 0)
            return qs_fail(e, "%s is not a periodic pattern of local layers (not supported)", k);
    } else if (pat) return qs_fail(e, "%s is not an integer", k);
    if (num(meta, KEY("rope.freq_base_swa"), g2 ? c->rope_base : 10000.0, &v, e)) return -1;
    c->rope_base_swa = (float)v;
    const char *st = json_string_value(json_object_get(meta, KEY("rope.scaling.type")));
    if (st && strcmp(st, "none") && strcmp(st, "linear")) return qs_fail(e, "RoPE scaling '%.20s' is not supported (linear)", st);
    if (st && !strcmp(st, "linear")) {
        if (num(meta, KEY("rope.scaling.factor"), 1.0, &v, e)) return -1;
        if (g2 && v != 1) return qs_fail(e, "RoPE scaling of gemma2 is not supported");
        c->rope_linear = v > 0 && v != 1 ? (float)v : 0;
    }
    /* llama.cpp: 1/sqrt(head_dim), the 27B models (46 / 62 layers) 1/sqrt(dim / n_head) (their query_pre_attn_scalar) */
    c->attn_scale = 1.0f / sqrtf((float)((c->n_layer == (g2 ? 46 : 62)) ? c->dim / c->n_head : c->head_dim));
#undef KEY
    return 0;
}

static int hf_keys(json_t *cj, const qs_llm_arch *A, qs_llm_cfg *c, qs_err *e)
{
    const int g2 = !strcmp(A->name, "gemma2");
    const char *act = json_string_value(json_object_get(cj, "hidden_activation"));
    if (!act) act = json_string_value(json_object_get(cj, "hidden_act"));
    if (act && strcmp(act, "gelu_pytorch_tanh"))
        return qs_fail(e, "hidden_activation '%.20s' is not supported (gelu_pytorch_tanh)", act);
    double v;
    if (num(cj, "query_pre_attn_scalar", 256.0, &v, e)) return -1;
    if (!(v > 0)) return qs_fail(e, "query_pre_attn_scalar must be > 0");
    c->attn_scale = (float)(1.0 / sqrt(v));
    if (num(cj, "attn_logit_softcapping", g2 && !json_object_get(cj, "attn_logit_softcapping") ? 50.0 : 0.0, &v, e)) return -1;
    c->attn_softcap = (float)v;
    if (num(cj, "final_logit_softcapping", g2 && !json_object_get(cj, "final_logit_softcapping") ? 30.0 : 0.0, &v, e)) return -1;
    c->final_softcap = (float)v;
    if (num(cj, "sliding_window", 4096.0, &v, e)) return -1;
    if (v > 1 << 24) return qs_fail(e, "sliding_window %g is out of range", v);
    c->sliding_window = (int)v;
    json_t *lt = json_object_get(cj, "layer_types"), *sp = json_object_get(cj, "sliding_window_pattern");
    c->swa_pattern = g2 ? 2 : 6;
    if (json_is_array(lt)) {
        if (json_array_size(lt) != (size_t)c->n_layer || (c->swa_pattern = pattern_of(c->n_layer, hf_local, lt)) < 0)
            return qs_fail(e, "\"layer_types\" is not a periodic pattern of sliding_attention layers (not supported)");
    } else if (json_is_integer(sp) && json_integer_value(sp) >= 0 && json_integer_value(sp) <= 4096) {
        c->swa_pattern = (int)json_integer_value(sp);
    } else if (sp && !json_is_null(sp)) return qs_fail(e, "\"sliding_window_pattern\" is not an integer");
    if (num(cj, "rope_local_base_freq", g2 ? c->rope_base : 10000.0, &v, e)) return -1;
    c->rope_base_swa = (float)v;
    json_t *rs = json_object_get(cj, "rope_scaling"), *rp = json_object_get(cj, "rope_parameters");
    if (json_is_object(rp) && json_is_object(json_object_get(rp, "full_attention"))) {
        /* transformers 5: {"full_attention": {rope_theta, rope_type, factor}, "sliding_attention": {rope_theta}} */
        json_t *full = json_object_get(rp, "full_attention"), *loc = json_object_get(rp, "sliding_attention");
        if (num(full, "rope_theta", c->rope_base, &v, e)) return -1;
        c->rope_base = (float)v;
        if (json_is_object(loc)) {
            if (num(loc, "rope_theta", c->rope_base_swa, &v, e)) return -1;
            c->rope_base_swa = (float)v;
        }
        const char *t = json_string_value(json_object_get(full, "rope_type"));
        rs = t && strcmp(t, "default") ? full : NULL;
    }
    if (rs && !json_is_null(rs)) {
        const char *t = json_string_value(json_object_get(rs, "rope_type"));
        if (!t) t = json_string_value(json_object_get(rs, "type"));
        if (g2 || !t || strcmp(t, "linear")) return qs_fail(e, "\"rope_scaling\" other than linear (Gemma 3) is not supported");
        if (num(rs, "factor", 1.0, &v, e)) return -1;
        c->rope_linear = v > 0 && v != 1 ? (float)v : 0;
    }
    return 0;
}

int qs_llm__gemma_cfg(json_t *obj, qs_llm_scheme s, const qs_llm_arch *A, qs_llm_cfg *c, qs_err *e)
{
    if (!(A->flags & QS_ARCH_GEMMA)) return 0;
    c->ffn_gelu = 1;
    c->sandwich = 1;
    c->qk_norm = (A->flags & QS_ARCH_QK_NORM) != 0;
    c->emb_scale = sqrtf((float)c->dim);   /* llama.cpp: sqrtf(n_embd); transformers: sqrt(hidden_size) in the dtype */
    return s == QS_LLM_GGUF ? gguf_keys(obj, A, c, e) : hf_keys(obj, A, c, e);
}

void qs_llm__gemma_hf_norms(qs_llm_model *m)
{
    const qs_llm_cfg *c = &m->c;
    if (!c->sandwich) return;
    for (int i = 0; i < c->dim; i++) m->out_norm[i] += 1.0f;
    for (int l = 0; l < c->n_layer; l++) {
        qs_llm_layer *L = &m->L[l];
        float *d[] = {L->attn_norm, L->ffn_norm, L->post_attn_norm, L->post_ffn_norm};
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < c->dim; i++) d[k][i] += 1.0f;
        for (int i = 0; L->q_norm && i < c->head_dim; i++) { L->q_norm[i] += 1.0f; L->k_norm[i] += 1.0f; }
    }
}
