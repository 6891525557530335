/*
** Shared by the model loaders (llm_load_internal.h): vocabulary hash tables, hyper-parameters by the
** table of llm_arch.h, and tensors by role over one or several files, decoded to FP32 by the store's
** tensor reader with their shapes checked.
*/
#include "llm_load_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/llm_ext.h"
#include "tensor.h"

/* FNV-1a */
static uint32_t hstr(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) { h ^= (uint8_t)s[i]; h *= 16777619u; }
    return h;
}

static int build_hash(const char *text, const uint32_t *off, int n, uint32_t **tab, size_t *cap, qs_err *e)
{
    size_t c = 16;
    while (c < (size_t)n * 2) c <<= 1;
    *tab = calloc(c, sizeof **tab);
    if (!*tab) return qs_fail(e, "out of memory");
    *cap = c;
    for (int i = 0; i < n; i++) {
        const char *s = text + off[i];
        size_t h = hstr(s, strlen(s)) & (c - 1);
        while ((*tab)[h]) {
            if (!strcmp(text + off[(*tab)[h] - 1], s)) break;   /* duplicate: first one wins */
            h = (h + 1) & (c - 1);
        }
        if (!(*tab)[h]) (*tab)[h] = (uint32_t)i + 1;
    }
    return 0;
}

int qs_llm_hash_find(const char *text, const uint32_t *off, const uint32_t *tab, size_t cap, const char *s, size_t n)
{
    if (!tab) return -1;
    size_t h = hstr(s, n) & (cap - 1);
    while (tab[h]) {
        const char *t = text + off[tab[h] - 1];
        if (strlen(t) == n && !memcmp(t, s, n)) return (int)tab[h] - 1;
        h = (h + 1) & (cap - 1);
    }
    return -1;
}

static int cmp_len_desc(const void *a, const void *b, void *ctx)
{
    const qs_llm_vocab *v = ctx;
    size_t la = strlen(v->text + v->off[*(const int *)a]);
    size_t lb = strlen(v->text + v->off[*(const int *)b]);
    if (la != lb) return la < lb ? 1 : -1;
    return *(const int *)a - *(const int *)b;
}

int qs_llm__vocab_tables(qs_llm_vocab *v, qs_err *e)
{
    if (!v->n) return 0;
    if (build_hash(v->text, v->off, v->n, &v->vhash, &v->vhcap, e)) return -1;
    if (v->nmerges && build_hash(v->mtext, v->moff, v->nmerges, &v->mhash, &v->mhcap, e)) return -1;
    if (v->type) {
        v->special = malloc((size_t)v->n * sizeof *v->special);
        if (!v->special) return qs_fail(e, "out of memory");
        for (int i = 0; i < v->n; i++)
            if (v->type[i] == 3 && v->text[v->off[i]]) v->special[v->nspecial++] = i;
        qsort_r(v->special, (size_t)v->nspecial, sizeof *v->special, cmp_len_desc, v);
    }
    return 0;
}

/* ---------------------------------------------------------------- hyper-parameters */

int qs_llm__hparam(json_t *obj, qs_llm_scheme s, const char *arch, qs_llm_hparam h, double derived, void *out, qs_err *e)
{
    const qs_llm_hkey *hk = qs_llm_hparam_key(h);
    char k[128];
    if (s == QS_LLM_GGUF) snprintf(k, sizeof k, "%s.%s", arch, hk->key[s]);
    else snprintf(k, sizeof k, "%s", hk->key[s]);
    json_t *j = json_object_get(obj, k);
    const char *what = s == QS_LLM_GGUF ? "metadata " : "";
    const char *q = s == QS_LLM_GGUF ? "" : "\"";
    if (!j || json_is_null(j)) {
        if (hk->required[s]) return s == QS_LLM_GGUF ? qs_fail(e, "missing metadata key %s", k) : qs_fail(e, "missing key \"%s\"", k);
        double v = hk->dflt[s] ? hk->dflt[s] : derived;
        if (hk->real) *(float *)out = (float)v;
        else *(int *)out = (int)v;
        return 0;
    }
    if (hk->real) {
        if (!json_is_number(j)) return qs_fail(e, "%s%s%s%s is not a number", what, q, k, q);
        *(float *)out = (float)json_number_value(j);
        return 0;
    }
    if (!json_is_integer(j) || json_integer_value(j) <= 0 || json_integer_value(j) > (1 << 24))
        return qs_fail(e, "%s%s%s%s is not a positive integer", what, q, k, q);
    *(int *)out = (int)json_integer_value(j);
    return 0;
}

int qs_llm__shape(json_t *obj, qs_llm_scheme s, const char *arch, qs_llm_cfg *cfg, qs_err *e)
{
    if (qs_llm__hparam(obj, s, arch, QS_H_N_LAYER, 0, &cfg->n_layer, e) ||
        qs_llm__hparam(obj, s, arch, QS_H_DIM, 0, &cfg->dim, e) ||
        qs_llm__hparam(obj, s, arch, QS_H_FFN, 0, &cfg->ffn, e) ||
        qs_llm__hparam(obj, s, arch, QS_H_N_HEAD, 0, &cfg->n_head, e) ||
        qs_llm__hparam(obj, s, arch, QS_H_N_KV_HEAD, cfg->n_head, &cfg->n_kv_head, e) ||
        (s == QS_LLM_HF && qs_llm__hparam(obj, s, arch, QS_H_VOCAB, 0, &cfg->vocab, e)) ||
        qs_llm__hparam(obj, s, arch, QS_H_CTX, 0, &cfg->ctx, e) ||
        qs_llm__hparam(obj, s, arch, QS_H_EPS, 0, &cfg->eps, e) ||
        qs_llm__hparam(obj, s, arch, QS_H_ROPE_BASE, 0, &cfg->rope_base, e))
        return -1;
    /* head_dim is its own key (Qwen3, Gemma: != dim / n_head); derived, it must divide dim exactly */
    if (qs_llm__hparam(obj, s, arch, QS_H_HEAD_DIM, 0, &cfg->head_dim, e)) return -1;
    if (!cfg->head_dim) {
        cfg->head_dim = cfg->dim / cfg->n_head;
        if ((int64_t)cfg->n_head * cfg->head_dim != cfg->dim)
            return qs_fail(e, "%d heads x %d head_dim != embedding length %d", cfg->n_head, cfg->head_dim, cfg->dim);
    }
    if (s == QS_LLM_GGUF) {   /* the forward pass has one head size for K and V, and full-width RoPE */
        int vd, rd;
        if (qs_llm__hparam(obj, s, arch, QS_H_VALUE_DIM, cfg->head_dim, &vd, e) ||
            qs_llm__hparam(obj, s, arch, QS_H_ROPE_DIM, cfg->head_dim, &rd, e))
            return -1;
        if (vd != cfg->head_dim) return qs_fail(e, "value head size %d != key head size %d is not supported", vd, cfg->head_dim);
        if (rd != cfg->head_dim) return qs_fail(e, "partial RoPE (%d of %d dims) is not supported", rd, cfg->head_dim);
    }
    return 0;
}

/* ---------------------------------------------------------------- tensors */

const qs_tdesc *qs_llm__find_t(const qs_container *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->t[i].name, name) == 0) return &c->t[i];
    return NULL;
}

const qs_tdesc *qs_llm__find(const qs_llm_src *src, int nsrc, const char *name, int *which)
{
    for (int k = 0; k < nsrc; k++) {
        const qs_tdesc *d = qs_llm__find_t(&src[k].c, name);
        if (d) { if (which) *which = k; return d; }
    }
    return NULL;
}

/* Every message names its file: the shard holding the tensor, else `where` (the model). */
int qs_llm__load_tn(const qs_llm_src *src, int nsrc, const char *where, const char *name, const uint64_t *ws, int nd,
                    float *dst, qs_err *e)
{
    int k = 0;
    const qs_tdesc *d = qs_llm__find(src, nsrc, name, &k);
    if (!d) return qs_fail(e, "%s: missing tensor %s", where, name);
    int okshape = d->ndim == nd;
    for (int i = 0; okshape && i < nd; i++) okshape = d->shape[i] == ws[i];
    if (!okshape) {
        char got[64], want[64];
        qs_shape_str(d->shape, d->ndim, got, sizeof got);
        qs_shape_str(ws, nd, want, sizeof want);
        return qs_fail(e, "%s: tensor %s has shape %s, expected %s", src[k].path, name, got, want);
    }
    qs_treader *r = qs_treader_from_image(src[k].buf, src[k].len, d, src[k].path, e);   /* its errors name the path */
    if (!r) return -1;
    int rc = qs_treader_read_f32(r, 0, (size_t)d->numel, dst, e);
    qs_treader_close(r);
    if (rc) return -1;
    for (uint64_t i = 0; i < d->numel; i++)
        if (!(dst[i] - dst[i] == 0))
            return qs_fail(e, "%s: tensor %s holds NaN or Inf at element %llu", src[k].path, name, (unsigned long long)i);
    return 0;
}

int qs_llm__load_t(const qs_llm_src *src, int nsrc, const char *where, const char *name, uint64_t rows, uint64_t cols,
                  float *dst, qs_err *e)
{
    const uint64_t want[2] = {rows, cols};
    return rows ? qs_llm__load_tn(src, nsrc, where, name, want, 2, dst, e) : qs_llm__load_tn(src, nsrc, where, name, want + 1, 1, dst, e);
}

int qs_llm__load_weights(qs_llm_model *m, const qs_llm_cfg *cfg, const qs_llm_arch *arch, const qs_llm_src *src,
                         int nsrc, const char *where, qs_llm_scheme scheme, int tie, qs_err *e)
{
    char on[96];
    int tied = tie || !qs_llm__find(src, nsrc, qs_llm_arch_tensor_name(arch, scheme, QS_T_OUT, 0, on, sizeof on), NULL);
    if (tied && !(arch->flags & QS_ARCH_TIED)) return qs_fail(e, "%s: missing tensor %s", where, on);
    char nm[96];
    uint64_t bytes = 0;
    for (int k = 0; k < nsrc; k++) bytes += src[k].len;
    /* never allocate more than the files can back: every parameter needs >= 4 bits in a file */
    uint64_t params = (uint64_t)cfg->vocab * cfg->dim + qs_llm_ext_floats(cfg) +
        (uint64_t)cfg->n_layer * (2ull * cfg->n_head * cfg->head_dim * cfg->dim + 2ull * cfg->n_kv_head * cfg->head_dim * cfg->dim +
                                  (cfg->n_expert ? 0 : 3ull * cfg->ffn * cfg->dim));
    if (params / 2 > bytes) return qs_fail(e, "%s: the model claims %llu parameters, more than the file holds", where, (unsigned long long)params);
    /* tensors the forward pass cannot run: refused rather than ignored */
    static const struct { qs_llm_tensor t; const char *what; } kNo[] = {
        {QS_T_BO, "output-projection or MLP biases are not supported (Q/K/V biases are)"},
        {QS_T_BDOWN, "output-projection or MLP biases are not supported (Q/K/V biases are)"},
        {QS_T_Q_NORM, "QK-norm (per-head Q/K RMSNorm) is not supported"},
        {QS_T_K_NORM, "QK-norm (per-head Q/K RMSNorm) is not supported"}};
    for (size_t i = 0; i < sizeof kNo / sizeof kNo[0]; i++)
        if (!((kNo[i].t == QS_T_Q_NORM || kNo[i].t == QS_T_K_NORM) && (arch->flags & QS_ARCH_QK_NORM)) &&
            qs_llm__find(src, nsrc, qs_llm_arch_tensor_name(arch, scheme, kNo[i].t, 0, nm, sizeof nm), NULL))
            return qs_fail(e, "%s: %s", where, kNo[i].what);
    /* biases: all layers or none, decided by layer 0 (Qwen2 has them, Llama not) */
    int bias = (arch->flags & QS_ARCH_QKV_BIAS) &&
               qs_llm__find(src, nsrc, qs_llm_arch_tensor_name(arch, scheme, QS_T_BQ, 0, nm, sizeof nm), NULL) != NULL;
    if (qs_llm_alloc(m, cfg, tied, e) || (bias && qs_llm_alloc_bias(m, e))) { qs_err_prefix(e, where); return -1; }
    uint64_t d = (uint64_t)cfg->dim, kvd = (uint64_t)cfg->n_kv_head * cfg->head_dim, F = (uint64_t)cfg->ffn;
    uint64_t qd = (uint64_t)cfg->n_head * cfg->head_dim;
    if (qs_llm__load_t(src, nsrc, where, qs_llm_arch_tensor_name(arch, scheme, QS_T_EMB, 0, nm, sizeof nm), (uint64_t)cfg->vocab, d, m->tok_embd, e)) return -1;
    if (!tied && qs_llm__load_t(src, nsrc, where, qs_llm_arch_tensor_name(arch, scheme, QS_T_OUT, 0, nm, sizeof nm), (uint64_t)cfg->vocab, d, m->output, e)) return -1;
    if (qs_llm__load_t(src, nsrc, where, qs_llm_arch_tensor_name(arch, scheme, QS_T_OUT_NORM, 0, nm, sizeof nm), 0, d, m->out_norm, e)) return -1;
    for (int l = 0; l < cfg->n_layer; l++) {
        qs_llm_layer *L = &m->L[l];
        struct { qs_llm_tensor role; uint64_t r, c; float *dst; } t[] = {
            {QS_T_ATTN_NORM, 0, d, L->attn_norm}, {QS_T_Q, qd, d, L->wq}, {QS_T_K, kvd, d, L->wk},
            {QS_T_V, kvd, d, L->wv}, {QS_T_O, d, qd, L->wo}, {QS_T_FFN_NORM, 0, d, L->ffn_norm},
            {QS_T_GATE, F, d, L->w_gate}, {QS_T_UP, F, d, L->w_up}, {QS_T_DOWN, d, F, L->w_down},
            {QS_T_BQ, 0, qd, L->bq}, {QS_T_BK, 0, kvd, L->bk}, {QS_T_BV, 0, kvd, L->bv},
            /* Gemma: present when the configuration has them (qs_llm_alloc placed them) */
            {QS_T_POST_ATTN_NORM, 0, d, L->post_attn_norm}, {QS_T_POST_FFN_NORM, 0, d, L->post_ffn_norm},
            {QS_T_Q_NORM, 0, (uint64_t)cfg->head_dim, L->q_norm}, {QS_T_K_NORM, 0, (uint64_t)cfg->head_dim, L->k_norm}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            if (!t[i].dst) continue;   /* no biases, no Gemma norms */
            if (qs_llm__load_t(src, nsrc, where, qs_llm_arch_tensor_name(arch, scheme, t[i].role, l, nm, sizeof nm), t[i].r, t[i].c, t[i].dst, e)) return -1;
        }
    }
    return qs_llm__load_ext(m, arch, src, nsrc, where, scheme, e);   /* QK-norm, experts, RoPE factors (llm_load_ext.c) */
}

void qs_llm__wtypes(const qs_llm_src *src, int nsrc, char *out, size_t cap)
{
    const char *tn[16]; int cnt[16]; int nt = 0;
    for (int k = 0; k < nsrc; k++)
        for (size_t i = 0; i < src[k].c.n; i++) {
            const char *s = qs_dtype_get(src[k].c.t[i].dtype)->name;
            int j = 0;
            while (j < nt && strcmp(tn[j], s)) j++;
            if (j == nt) { if (nt == 16) continue; tn[nt] = s; cnt[nt++] = 0; }
            cnt[j]++;
        }
    size_t o = 0;
    out[0] = 0;
    for (int j = 0; j < nt && o < cap; j++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s x%d", j ? ", " : "", tn[j], cnt[j]);
}

