/*
** GGUF file -> FP32 model (see llm_load.h): metadata and tensor infos through the store's GGUF parser
** (parse_gguf.c), the architecture and keys from llm_arch.h, the vocabulary (too long for the parser's
** metadata summary) by a bounded walk of the key/value section.
*/
#include "llm_load_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

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
    const qs_tdesc *te = qs_llm__find_t(&c, en);
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

