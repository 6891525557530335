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

#include "../store/container.h"
#include "../store/tensor.h"

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

static int vocab_tables(qs_llm_vocab *v, qs_err *e)
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

/* ---------------------------------------------------------------- metadata */

static int meta_int(json_t *meta, const char *arch, const char *key, int required, int dflt, int *out, qs_err *e)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    json_t *j = json_object_get(meta, k);
    if (!j) {
        if (required) return qs_fail(e, "missing metadata key %s", k);
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(j) || json_integer_value(j) <= 0 || json_integer_value(j) > (1 << 24))
        return qs_fail(e, "metadata %s is not a positive integer", k);
    *out = (int)json_integer_value(j);
    return 0;
}

static int meta_real(json_t *meta, const char *arch, const char *key, double dflt, float *out, qs_err *e)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    json_t *j = json_object_get(meta, k);
    if (!j) { *out = (float)dflt; return 0; }
    if (!json_is_number(j)) return qs_fail(e, "metadata %s is not a number", k);
    *out = (float)json_number_value(j);
    return 0;
}

/* ---------------------------------------------------------------- tensors */

static const qs_tdesc *find_t(const qs_container *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->t[i].name, name) == 0) return &c->t[i];
    return NULL;
}

static int load_t(const uint8_t *buf, size_t len, const qs_container *c, const char *name, uint64_t rows,
                  uint64_t cols, float *dst, const char *path, qs_err *e)
{
    const qs_tdesc *d = find_t(c, name);
    if (!d) return qs_fail(e, "missing tensor %s", name);
    uint64_t want[2] = {rows, cols};
    int nd = rows ? 2 : 1;
    const uint64_t *ws = rows ? want : want + 1;
    int okshape = d->ndim == nd;
    for (int i = 0; okshape && i < nd; i++) okshape = d->shape[i] == ws[i];
    if (!okshape) {
        char got[64];
        qs_shape_str(d->shape, d->ndim, got, sizeof got);
        return rows ? qs_fail(e, "tensor %s has shape %s, expected %llux%llu", name, got, (unsigned long long)rows,
                              (unsigned long long)cols)
                    : qs_fail(e, "tensor %s has shape %s, expected %llu", name, got, (unsigned long long)cols);
    }
    qs_treader *r = qs_treader_from_image(buf, len, d, path, e);
    if (!r) return -1;
    int rc = qs_treader_read_f32(r, 0, (size_t)d->numel, dst, e);
    qs_treader_close(r);
    if (rc) return -1;
    for (uint64_t i = 0; i < d->numel; i++)
        if (!(dst[i] - dst[i] == 0)) return qs_fail(e, "tensor %s holds NaN or Inf at element %llu", name, (unsigned long long)i);
    return 0;
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
    if (strcmp(arch, "llama") != 0) { qs_fail(e, "architecture '%.40s' is not supported (only llama)", arch); goto fail; }
    snprintf(f->arch, sizeof f->arch, "%s", arch);
    const char *gn = json_string_value(json_object_get(meta, "general.name"));
    snprintf(f->name, sizeof f->name, "%s", gn ? gn : "");

    qs_llm_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    int rope_dim;
    if (meta_int(meta, arch, "block_count", 1, 0, &cfg.n_layer, e) ||
        meta_int(meta, arch, "embedding_length", 1, 0, &cfg.dim, e) ||
        meta_int(meta, arch, "feed_forward_length", 1, 0, &cfg.ffn, e) ||
        meta_int(meta, arch, "attention.head_count", 1, 0, &cfg.n_head, e) ||
        meta_int(meta, arch, "attention.head_count_kv", 0, cfg.n_head, &cfg.n_kv_head, e) ||
        meta_int(meta, arch, "context_length", 0, 2048, &cfg.ctx, e) ||
        meta_real(meta, arch, "rope.freq_base", 10000.0, &cfg.rope_base, e) ||
        meta_real(meta, arch, "attention.layer_norm_rms_epsilon", 1e-5, &cfg.eps, e))
        goto fail;
    cfg.head_dim = cfg.dim / cfg.n_head;
    cfg.vocab = 1;   /* checked again below with the real vocabulary */
    if (qs_llm_cfg_check(&cfg, e)) goto fail;
    if (meta_int(meta, arch, "rope.dimension_count", 0, cfg.head_dim, &rope_dim, e)) goto fail;
    if (rope_dim != cfg.head_dim) { qs_fail(e, "partial RoPE (%d of %d dims) is not supported", rope_dim, cfg.head_dim); goto fail; }
    const qs_tdesc *te = find_t(&c, "token_embd.weight");
    if (!te || te->ndim != 2 || te->shape[1] != (uint64_t)cfg.dim || te->shape[0] == 0 || te->shape[0] > (1u << 22)) {
        qs_fail(e, "token_embd.weight missing or not [vocab x %d]", cfg.dim);
        goto fail;
    }
    cfg.vocab = (int)te->shape[0];
    int vkey;
    if (meta_int(meta, arch, "vocab_size", 0, cfg.vocab, &vkey, e)) goto fail;
    if (vkey != cfg.vocab) { qs_fail(e, "%s.vocab_size %d != token_embd rows %d", arch, vkey, cfg.vocab); goto fail; }
    if (qs_llm_cfg_check(&cfg, e)) goto fail;
    /* never allocate more than the file can back: every parameter needs >= 4 bits in the file */
    uint64_t params = (uint64_t)cfg.vocab * cfg.dim +
        (uint64_t)cfg.n_layer * ((uint64_t)cfg.dim * cfg.dim * 2 + 2ull * cfg.n_kv_head * cfg.head_dim * cfg.dim +
                                 3ull * cfg.ffn * cfg.dim);
    if (params / 2 > len) { qs_fail(e, "the model claims %llu parameters, more than the file holds", (unsigned long long)params); goto fail; }
    int tied = find_t(&c, "output.weight") == NULL;
    if (qs_llm_alloc(&f->m, &cfg, tied, e)) goto fail;
    qs_llm_model *m = &f->m;
    uint64_t d = (uint64_t)cfg.dim, kvd = (uint64_t)cfg.n_kv_head * cfg.head_dim, F = (uint64_t)cfg.ffn;
    if (load_t(buf, len, &c, "token_embd.weight", (uint64_t)cfg.vocab, d, m->tok_embd, name, e)) goto fail;
    if (!tied && load_t(buf, len, &c, "output.weight", (uint64_t)cfg.vocab, d, m->output, name, e)) goto fail;
    if (load_t(buf, len, &c, "output_norm.weight", 0, d, m->out_norm, name, e)) goto fail;
    for (int l = 0; l < cfg.n_layer; l++) {
        qs_llm_layer *L = &m->L[l];
        char nm[9][64];
        const char *suffix[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
        for (int i = 0; i < 9; i++) snprintf(nm[i], sizeof nm[i], "blk.%d.%s.weight", l, suffix[i]);
        if (load_t(buf, len, &c, nm[0], 0, d, L->attn_norm, name, e) ||
            load_t(buf, len, &c, nm[1], d, d, L->wq, name, e) ||
            load_t(buf, len, &c, nm[2], kvd, d, L->wk, name, e) ||
            load_t(buf, len, &c, nm[3], kvd, d, L->wv, name, e) ||
            load_t(buf, len, &c, nm[4], d, d, L->wo, name, e) ||
            load_t(buf, len, &c, nm[5], 0, d, L->ffn_norm, name, e) ||
            load_t(buf, len, &c, nm[6], F, d, L->w_gate, name, e) ||
            load_t(buf, len, &c, nm[7], F, d, L->w_up, name, e) ||
            load_t(buf, len, &c, nm[8], d, F, L->w_down, name, e))
            goto fail;
    }
    /* per-tensor types summary */
    {
        const char *tn[16]; int cnt[16]; int nt = 0;
        for (size_t i = 0; i < c.n; i++) {
            const char *s = qs_dtype_get(c.t[i].dtype)->name;
            int j = 0;
            while (j < nt && strcmp(tn[j], s)) j++;
            if (j == nt) { if (nt == 16) continue; tn[nt] = s; cnt[nt++] = 0; }
            cnt[j]++;
        }
        size_t o = 0;
        for (int j = 0; j < nt && o < sizeof f->wtypes; j++)
            o += (size_t)snprintf(f->wtypes + o, sizeof f->wtypes - o, "%s%s x%d", j ? ", " : "", tn[j], cnt[j]);
    }
    if (read_vocab(buf, len, &f->v, e) || vocab_tables(&f->v, e)) goto fail;
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
    f->v.add_bos = json_is_true(json_object_get(meta, "tokenizer.ggml.add_bos_token"));
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
    json_decref(meta);
    qs_container_free(&c);
    qs_llm_file_free(f);
    qs_err_prefix(e, name);
    return -1;
}

int qs_llm_load_gguf(const char *path, qs_llm_file *f, qs_err *e)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return qs_fail(e, "%s: cannot open: %m", path);
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        close(fd);
        return qs_fail(e, "%s: not a regular non-empty file", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return qs_fail(e, "%s: cannot map: %m", path);
    int rc = qs_llm_load_gguf_mem(p, (size_t)st.st_size, path, f, e);
    munmap(p, (size_t)st.st_size);
    return rc;
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
