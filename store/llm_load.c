/*
** GGUF -> FP32 Llama model (see llm_load.h).
*/
#include "llm_load.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "container.h"
#include "tensor.h"
#include "llm_load_internal.h"
#include "llm_arch.h"

/* ---------------------------------------------------------------- vocabulary walk */

typedef struct { const uint8_t *b; size_t len, p; qs_err *e; } kvr;

static int kv_need(kvr *r, uint64_t n)
{
    if (n > r->len - r->p) return qs_fail(r->e, "truncated key/value section (at byte %zu)", r->p);
    return 0;
}
static int kv_u32(kvr *r, uint32_t *v) { if (kv_need(r, 4)) return -1; memcpy(v, r->b + r->p, 4); r->p += 4; return 0; }
static int kv_u64(kvr *r, uint64_t *v) { if (kv_need(r, 8)) return -1; memcpy(v, r->b + r->p, 8); r->p += 8; return 0; }
static int kv_str(kvr *r, const uint8_t **s, uint64_t *n)
{
    if (kv_u64(r, n) || kv_need(r, *n)) return -1;
    *s = r->b + r->p;
    r->p += (size_t)*n;
    return 0;
}

static const uint8_t kScalarSize[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

static int kv_skip(kvr *r, uint32_t type, int depth)
{
    if (type > 12) return qs_fail(r->e, "invalid value type %u (at byte %zu)", type, r->p);
    if (type == 8) { const uint8_t *s; uint64_t n; return kv_str(r, &s, &n); }
    if (type != 9) return kv_need(r, kScalarSize[type]) ? -1 : (r->p += kScalarSize[type], 0);
    if (depth > 8) return qs_fail(r->e, "arrays nested too deep (at byte %zu)", r->p);
    uint32_t et;
    uint64_t n;
    if (kv_u32(r, &et) || kv_u64(r, &n)) return -1;
    if (et > 12) return qs_fail(r->e, "invalid array element type %u (at byte %zu)", et, r->p);
    if (et != 8 && et != 9) {
        if (n > (r->len - r->p) / kScalarSize[et]) return qs_fail(r->e, "array of %llu elements overruns the file (at byte %zu)", (unsigned long long)n, r->p);
        r->p += (size_t)n * kScalarSize[et];
        return 0;
    }
    for (uint64_t i = 0; i < n; i++)
        if (kv_skip(r, et, depth + 1)) return -1;
    return 0;
}

/* An array of n strings at r->p (after its header): NUL-separated text + offsets. */
static int read_strs(kvr *r, uint64_t n, size_t at, char **text, uint32_t **off, qs_err *e)
{
    if (n > (r->len - r->p) / 8 || n > (1u << 24))
        return qs_fail(e, "array of %llu strings overruns the file (at byte %zu)", (unsigned long long)n, at);
    size_t start = r->p, total = 0;
    for (uint64_t i = 0; i < n; i++) {   /* first pass: bounds and total size */
        const uint8_t *s; uint64_t sl;
        if (kv_str(r, &s, &sl)) return -1;
        total += (size_t)sl + 1;
    }
    if (total > UINT32_MAX) return qs_fail(e, "string array too large (at byte %zu)", at);
    *text = malloc(total ? total : 1);
    *off = malloc((size_t)(n ? n : 1) * sizeof **off);
    if (!*text || !*off) return qs_fail(e, "out of memory for the vocabulary");
    r->p = start;
    size_t o = 0;
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *s; uint64_t sl;
        kv_str(r, &s, &sl);
        (*off)[i] = (uint32_t)o;
        memcpy(*text + o, s, (size_t)sl);
        for (size_t j = 0; j < sl; j++) if (!(*text)[o + j]) (*text)[o + j] = '?';
        o += (size_t)sl;
        (*text)[o++] = 0;
    }
    return 0;
}

static int read_vocab(const uint8_t *buf, size_t len, qs_llm_vocab *v, qs_err *e)
{
    kvr r = {buf, len, 0, e};
    uint32_t magic, ver;
    uint64_t nt, nkv, ntype = 0;
    if (kv_u32(&r, &magic) || kv_u32(&r, &ver) || kv_u64(&r, &nt) || kv_u64(&r, &nkv)) return -1;
    for (uint64_t k = 0; k < nkv; k++) {
        const uint8_t *key;
        uint64_t kl;
        uint32_t type;
        if (kv_str(&r, &key, &kl) || kv_u32(&r, &type)) return -1;
        int is_tok = kl == 21 && !memcmp(key, "tokenizer.ggml.tokens", 21);
        int is_type = kl == 25 && !memcmp(key, "tokenizer.ggml.token_type", 25);
        int is_merge = kl == 21 && !memcmp(key, "tokenizer.ggml.merges", 21);
        if ((is_tok || is_type || is_merge) && type == 9) {
            size_t at = r.p;
            uint32_t et;
            uint64_t n;
            if (kv_u32(&r, &et) || kv_u64(&r, &n)) return -1;
            if (is_tok && et == 8 && !v->text) {
                if (read_strs(&r, n, at, &v->text, &v->off, e)) return -1;
                v->n = (int)n;
                continue;
            }
            if (is_merge && et == 8 && !v->mtext) {
                if (read_strs(&r, n, at, &v->mtext, &v->moff, e)) return -1;
                v->nmerges = (int)n;
                continue;
            }
            if (is_type && (et == 5 || et == 4) && !v->type) {
                if (n > (len - r.p) / 4) return qs_fail(e, "token_type array overruns the file (at byte %zu)", at);
                v->type = malloc((size_t)(n ? n : 1) * sizeof *v->type);
                if (!v->type) return qs_fail(e, "out of memory");
                memcpy(v->type, buf + r.p, (size_t)n * 4);
                r.p += (size_t)n * 4;
                ntype = n;
                continue;
            }
            r.p = at;
        }
        if (kv_skip(&r, type, 0)) return -1;
    }
    if (v->type && ntype != (uint64_t)v->n) { free(v->type); v->type = NULL; }
    return 0;
}

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
    char hk[128];
    snprintf(hk, sizeof hk, "%s%s%s", s == QS_LLM_GGUF ? arch : "", s == QS_LLM_GGUF ? "." : "",
             qs_llm_hparam_key(QS_H_HEAD_DIM)->key[s]);
    json_t *hj = json_object_get(obj, hk);
    if (qs_llm__hparam(obj, s, arch, QS_H_HEAD_DIM, cfg->dim / cfg->n_head, &cfg->head_dim, e)) return -1;
    if ((!hj || json_is_null(hj)) && (int64_t)cfg->n_head * cfg->head_dim != cfg->dim)
        return qs_fail(e, "%d heads x %d head_dim != embedding length %d", cfg->n_head, cfg->head_dim, cfg->dim);
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

static const qs_tdesc *find_t(const qs_container *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->t[i].name, name) == 0) return &c->t[i];
    return NULL;
}

const qs_tdesc *qs_llm__find(const qs_llm_src *src, int nsrc, const char *name, int *which)
{
    for (int k = 0; k < nsrc; k++) {
        const qs_tdesc *d = find_t(&src[k].c, name);
        if (d) { if (which) *which = k; return d; }
    }
    return NULL;
}

/* Every message names its file: the shard holding the tensor, else `where` (the model). */
static int load_t(const qs_llm_src *src, int nsrc, const char *where, const char *name, uint64_t rows, uint64_t cols,
                  float *dst, qs_err *e)
{
    int k = 0;
    const qs_tdesc *d = qs_llm__find(src, nsrc, name, &k);
    if (!d) return qs_fail(e, "%s: missing tensor %s", where, name);
    uint64_t want[2] = {rows, cols};
    int nd = rows ? 2 : 1;
    const uint64_t *ws = rows ? want : want + 1;
    int okshape = d->ndim == nd;
    for (int i = 0; okshape && i < nd; i++) okshape = d->shape[i] == ws[i];
    if (!okshape) {
        char got[64];
        qs_shape_str(d->shape, d->ndim, got, sizeof got);
        return rows ? qs_fail(e, "%s: tensor %s has shape %s, expected %llux%llu", src[k].path, name, got,
                              (unsigned long long)rows, (unsigned long long)cols)
                    : qs_fail(e, "%s: tensor %s has shape %s, expected %llu", src[k].path, name, got,
                              (unsigned long long)cols);
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

int qs_llm__load_weights(qs_llm_model *m, const qs_llm_cfg *cfg, const qs_llm_arch *arch, const qs_llm_src *src,
                         int nsrc, const char *where, qs_llm_scheme scheme, int tie, qs_err *e)
{
    char on[96];
    int tied = tie || !qs_llm__find(src, nsrc, qs_llm_tensor_name(scheme, QS_T_OUT, 0, on, sizeof on), NULL);
    if (tied && !(arch->flags & QS_ARCH_TIED)) return qs_fail(e, "%s: missing tensor %s", where, on);
    char nm[96];
    uint64_t bytes = 0;
    for (int k = 0; k < nsrc; k++) bytes += src[k].len;
    /* never allocate more than the files can back: every parameter needs >= 4 bits in a file */
    uint64_t params = (uint64_t)cfg->vocab * cfg->dim +
        (uint64_t)cfg->n_layer * (2ull * cfg->n_head * cfg->head_dim * cfg->dim + 2ull * cfg->n_kv_head * cfg->head_dim * cfg->dim +
                                  3ull * cfg->ffn * cfg->dim);
    if (params / 2 > bytes) return qs_fail(e, "%s: the model claims %llu parameters, more than the file holds", where, (unsigned long long)params);
    /* tensors the forward pass cannot run: refused rather than ignored */
    static const struct { qs_llm_tensor t; const char *what; } kNo[] = {
        {QS_T_BO, "output-projection or MLP biases are not supported (Q/K/V biases are)"},
        {QS_T_BDOWN, "output-projection or MLP biases are not supported (Q/K/V biases are)"},
        {QS_T_Q_NORM, "QK-norm (per-head Q/K RMSNorm) is not supported"},
        {QS_T_K_NORM, "QK-norm (per-head Q/K RMSNorm) is not supported"}};
    for (size_t i = 0; i < sizeof kNo / sizeof kNo[0]; i++)
        if (qs_llm__find(src, nsrc, qs_llm_tensor_name(scheme, kNo[i].t, 0, nm, sizeof nm), NULL))
            return qs_fail(e, "%s: %s", where, kNo[i].what);
    /* biases: all layers or none, decided by layer 0 (Qwen2 has them, Llama not) */
    int bias = (arch->flags & QS_ARCH_QKV_BIAS) &&
               qs_llm__find(src, nsrc, qs_llm_tensor_name(scheme, QS_T_BQ, 0, nm, sizeof nm), NULL) != NULL;
    if (qs_llm_alloc(m, cfg, tied, e) || (bias && qs_llm_alloc_bias(m, e))) { qs_err_prefix(e, where); return -1; }
    uint64_t d = (uint64_t)cfg->dim, kvd = (uint64_t)cfg->n_kv_head * cfg->head_dim, F = (uint64_t)cfg->ffn;
    uint64_t qd = (uint64_t)cfg->n_head * cfg->head_dim;
    if (load_t(src, nsrc, where, qs_llm_tensor_name(scheme, QS_T_EMB, 0, nm, sizeof nm), (uint64_t)cfg->vocab, d, m->tok_embd, e)) return -1;
    if (!tied && load_t(src, nsrc, where, qs_llm_tensor_name(scheme, QS_T_OUT, 0, nm, sizeof nm), (uint64_t)cfg->vocab, d, m->output, e)) return -1;
    if (load_t(src, nsrc, where, qs_llm_tensor_name(scheme, QS_T_OUT_NORM, 0, nm, sizeof nm), 0, d, m->out_norm, e)) return -1;
    for (int l = 0; l < cfg->n_layer; l++) {
        qs_llm_layer *L = &m->L[l];
        struct { qs_llm_tensor role; uint64_t r, c; float *dst; } t[] = {
            {QS_T_ATTN_NORM, 0, d, L->attn_norm}, {QS_T_Q, qd, d, L->wq}, {QS_T_K, kvd, d, L->wk},
            {QS_T_V, kvd, d, L->wv}, {QS_T_O, d, qd, L->wo}, {QS_T_FFN_NORM, 0, d, L->ffn_norm},
            {QS_T_GATE, F, d, L->w_gate}, {QS_T_UP, F, d, L->w_up}, {QS_T_DOWN, d, F, L->w_down},
            {QS_T_BQ, 0, qd, L->bq}, {QS_T_BK, 0, kvd, L->bk}, {QS_T_BV, 0, kvd, L->bv}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            if (!t[i].dst) continue;   /* no biases */
            if (load_t(src, nsrc, where, qs_llm_tensor_name(scheme, t[i].role, l, nm, sizeof nm), t[i].r, t[i].c, t[i].dst, e)) return -1;
        }
    }
    return 0;
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

int qs_llm_load_gguf_mem(const uint8_t *buf, size_t len, const char *name, qs_llm_file *f, qs_err *e)
{
    memset(f, 0, sizeof *f);
    f->v.bos = f->v.eos = -1;
    qs_container c;
    memset(&c, 0, sizeof c);
    json_t *meta = NULL;
    if (len < 4 || memcmp(buf, "GGUF", 4)) { qs_fail(e, "not a GGUF file (no GGUF magic)"); goto fail; }
    if (qs_parse_gguf(buf, len, NULL, &c, e)) goto fail;
    json_error_t je;
    meta = c.meta_json ? json_loads(c.meta_json, 0, &je) : json_object();
    if (!meta) { qs_fail(e, "unreadable metadata"); goto fail; }
    const char *arch = json_string_value(json_object_get(meta, "general.architecture"));
    if (!arch) { qs_fail(e, "no general.architecture key"); goto fail; }
    const qs_llm_arch *A = qs_llm_arch_gguf(arch);
    if (!A) {
        char list[256];
        qs_fail(e, "architecture '%.40s' is not supported (%s)", arch, qs_llm_arch_list(QS_LLM_GGUF, list, sizeof list));
        goto fail;
    }
    snprintf(f->arch, sizeof f->arch, "%s", A->name);
    snprintf(f->format, sizeof f->format, "gguf");
    const char *gn = json_string_value(json_object_get(meta, "general.name"));
    snprintf(f->name, sizeof f->name, "%s", gn ? gn : "");

    qs_llm_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    if (qs_llm__shape(meta, QS_LLM_GGUF, arch, &cfg, e)) goto fail;
    cfg.rope_neox = A->gguf_rope_neox;
    cfg.vocab = 1;   /* checked again below with the real vocabulary */
    if (qs_llm_cfg_check(&cfg, e)) goto fail;
    char en[96];
    qs_llm_tensor_name(QS_LLM_GGUF, QS_T_EMB, 0, en, sizeof en);
    const qs_tdesc *te = find_t(&c, en);
    if (!te || te->ndim != 2 || te->shape[1] != (uint64_t)cfg.dim || te->shape[0] == 0 || te->shape[0] > (1u << 22)) {
        qs_fail(e, "%s missing or not [vocab x %d]", en, cfg.dim);
        goto fail;
    }
    cfg.vocab = (int)te->shape[0];
    int vkey;
    if (qs_llm__hparam(meta, QS_LLM_GGUF, arch, QS_H_VOCAB, cfg.vocab, &vkey, e)) goto fail;
    if (vkey != cfg.vocab) { qs_fail(e, "%s.vocab_size %d != token_embd rows %d", arch, vkey, cfg.vocab); goto fail; }
    if (qs_llm_cfg_check(&cfg, e)) goto fail;
    qs_llm_src src = {buf, len, c, name};
    if (qs_llm__load_weights(&f->m, &cfg, A, &src, 1, name, QS_LLM_GGUF, 0, e)) goto fail_named;
    qs_llm__wtypes(&src, 1, f->wtypes, sizeof f->wtypes);
    if (read_vocab(buf, len, &f->v, e) || qs_llm__vocab_tables(&f->v, e)) goto fail;
    if (f->v.n && f->v.n != cfg.vocab) {
        qs_fail(e, "vocabulary has %d tokens but token_embd has %d rows", f->v.n, cfg.vocab);
        goto fail;
    }
    json_t *j;
    if ((j = json_object_get(meta, "tokenizer.ggml.bos_token_id")) && json_is_integer(j) &&
        json_integer_value(j) >= 0 && json_integer_value(j) < cfg.vocab)
        f->v.bos = (int)json_integer_value(j);
    if ((j = json_object_get(meta, "tokenizer.ggml.eos_token_id")) && json_is_integer(j) &&
        json_integer_value(j) >= 0 && json_integer_value(j) < cfg.vocab)
        f->v.eos = (int)json_integer_value(j);
    f->v.add_bos = json_is_true(json_object_get(meta, "tokenizer.ggml.add_bos_token")) && f->v.bos >= 0;
    const char *tm = json_string_value(json_object_get(meta, "tokenizer.ggml.model"));
    f->v.byte_level = tm && strcmp(tm, "gpt2") == 0;
    const char *pre = json_string_value(json_object_get(meta, "tokenizer.ggml.pre"));
    snprintf(f->v.pre, sizeof f->v.pre, "%s", pre ? pre : "");
    XXH128_hash_t h = XXH3_128bits(buf, len);
    snprintf(f->hash, sizeof f->hash, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
    f->size = len;
    json_decref(meta);
    qs_container_free(&c);
    return 0;
fail:
    qs_err_prefix(e, name);
fail_named:   /* the message names its file already */
    json_decref(meta);
    qs_container_free(&c);
    qs_llm_file_free(f);
    return -1;
}

int qs_llm_load_gguf(const char *path, qs_llm_file *f, qs_err *e)
{
    memset(f, 0, sizeof *f);
    qs_file_map m;
    if (qs_file_map_open(path, &m, e)) return -1;
    int rc = qs_llm_load_gguf_mem(m.p, m.n, path, f, e);
    qs_file_map_close(&m);
    return rc;
}

int qs_llm_load(const char *path, qs_llm_file *f, qs_err *e)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return qs_llm_load_hf(path, f, e);
    return qs_llm_load_gguf(path, f, e);
}

void qs_llm_file_free(qs_llm_file *f)
{
    qs_llm_free(&f->m);
    free(f->v.text);
    free(f->v.off);
    free(f->v.type);
    free(f->v.mtext);
    free(f->v.moff);
    free(f->v.vhash);
    free(f->v.mhash);
    free(f->v.special);
    free(f->v.pre_json);
    free(f->v.pre_regex);
    memset(f, 0, sizeof *f);
    f->v.bos = f->v.eos = -1;
}

int qs_llm_vocab_find(const qs_llm_vocab *v, const char *s)
{
    if (v->vhash) return qs_llm_hash_find(v->text, v->off, v->vhash, v->vhcap, s, strlen(s));
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->text + v->off[i], s) == 0) return i;
    return -1;
}

/* GPT-2 bytes_to_unicode inverse: code point -> byte, -1 if the code point is not a byte spelling. */
static int gpt2_byte(uint32_t cp)
{
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255)) return (int)cp;
    if (cp >= 256 && cp < 256 + 68) {
        int k = (int)cp - 256, n = 0;
        for (int b = 0; b < 256; b++) {
            if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) continue;
            if (n++ == k) return b;
        }
    }
    return -1;
}

size_t qs_llm_detok(const qs_llm_vocab *v, int id, char *out, size_t cap)
{
    if (!cap) return 0;
    size_t o = 0;
    if (id < 0 || id >= v->n) return (size_t)snprintf(out, cap, "<%d>", id) < cap ? strlen(out) : cap - 1;
    const unsigned char *s = (const unsigned char *)v->text + v->off[id];
    int control = v->type && v->type[id] == 3;
    if (!v->byte_level || control) {
        size_t n = strlen((const char *)s);
        if (n > cap - 1) n = cap - 1;
        memcpy(out, s, n);
        out[n] = 0;
        return n;
    }
    while (*s && o + 1 < cap) {   /* decode UTF-8 code points, map each back to its byte */
        uint32_t cp;
        int k;
        if (*s < 0x80) { cp = *s; k = 1; }
        else if ((*s & 0xE0) == 0xC0 && (s[1] & 0xC0) == 0x80) { cp = (uint32_t)(*s & 0x1F) << 6 | (s[1] & 0x3F); k = 2; }
        else { out[o++] = (char)*s++; continue; }   /* not a byte spelling: copy as is */
        int b = gpt2_byte(cp);
        if (b < 0) { for (int i = 0; i < k && o + 1 < cap; i++) out[o++] = (char)s[i]; }
        else out[o++] = (char)b;
        s += k;
    }
    out[o] = 0;
    return o;
}
