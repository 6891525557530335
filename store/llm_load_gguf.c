/*
** GGUF file -> FP32 model (see llm_load.h): metadata and tensor infos through the store's GGUF parser
** (parse_gguf.c), the architecture and keys from llm_arch.h, the vocabulary (too long for the parser's
** metadata summary) by a bounded walk of the key/value section.  The vocabulary alone
** (qs_llm_load_gguf_vocab) reads the metadata and the tokenizer.* keys and no tensor data.
*/
#include "llm_load_internal.h"
#include "gguf_kv.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* ---------------------------------------------------------------- vocabulary walk */

/* An array of n strings at r->pos (after its header): NUL-separated text + offsets. */
static int read_strs(qs_gguf_rd *r, uint64_t n, const char *what, char **text, uint32_t **off)
{
    if (n > (r->len - r->pos) / 8 || n > (1u << 24))
        return qs_fail(r->e, "%s: array of %llu strings overruns the file (at byte %zu)", what, (unsigned long long)n, r->pos);
    size_t start = r->pos, total = 0;
    for (uint64_t i = 0; i < n; i++) {   /* first pass: bounds and total size */
        const uint8_t *s;
        size_t sl;
        if (qs_gguf_str(r, &s, &sl, what)) return -1;
        total += sl + 1;
    }
    if (total > UINT32_MAX) return qs_fail(r->e, "%s: string array too large (at byte %zu)", what, start);
    *text = malloc(total ? total : 1);
    *off = malloc((size_t)(n ? n : 1) * sizeof **off);
    if (!*text || !*off) return qs_fail(r->e, "out of memory for the vocabulary");
    r->pos = start;
    size_t o = 0;
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *s;
        size_t sl;
        qs_gguf_str(r, &s, &sl, what);
        (*off)[i] = (uint32_t)o;
        memcpy(*text + o, s, sl);
        for (size_t j = 0; j < sl; j++) if (!(*text)[o + j]) (*text)[o + j] = '?';
        o += sl;
        (*text)[o++] = 0;
    }
    return 0;
}

/* tokenizer.ggml.tokens, .token_type and .merges, which the metadata JSON only summarises. */
typedef struct vocab_ctx { qs_llm_vocab *v; uint64_t ntype, nscore; } vocab_ctx;

static int vocab_kv(void *ctx, const char *key, uint32_t type, qs_gguf_rd *r, const char *what)
{
    qs_llm_vocab *v = ((vocab_ctx *)ctx)->v;
    int is_tok = !strcmp(key, "tokenizer.ggml.tokens"), is_type = !strcmp(key, "tokenizer.ggml.token_type");
    int is_merge = !strcmp(key, "tokenizer.ggml.merges"), is_score = !strcmp(key, "tokenizer.ggml.scores");
    if (!(is_tok || is_type || is_merge || is_score) || type != QS_GGUF_ARRAY) return 0;
    uint32_t et;
    uint64_t n;
    if (qs_gguf_u32(r, &et, what) || qs_gguf_u64(r, &n, what)) return -1;
    if (is_tok && et == QS_GGUF_STRING && !v->text) {
        if (read_strs(r, n, what, &v->text, &v->off)) return -1;
        v->n = (int)n;
        return 1;
    }
    if (is_merge && et == QS_GGUF_STRING && !v->mtext) {
        if (read_strs(r, n, what, &v->mtext, &v->moff)) return -1;
        v->nmerges = (int)n;
        return 1;
    }
    if (is_score && et == QS_GGUF_F32 && !v->score) {   /* SentencePiece piece scores ("llama") */
        if (n > (r->len - r->pos) / 4) return qs_fail(r->e, "%s: array overruns the file (at byte %zu)", what, r->pos);
        v->score = malloc((size_t)(n ? n : 1) * sizeof *v->score);
        if (!v->score) return qs_fail(r->e, "out of memory");
        for (uint64_t i = 0; i < n; i++) {
            float f;
            memcpy(&f, r->b + r->pos + 4 * i, 4);
            v->score[i] = f;
        }
        r->pos += (size_t)n * 4;
        ((vocab_ctx *)ctx)->nscore = n;
        return 1;
    }
    if (is_type && (et == QS_GGUF_I32 || et == QS_GGUF_U32) && !v->type) {
        if (n > (r->len - r->pos) / 4) return qs_fail(r->e, "%s: array overruns the file (at byte %zu)", what, r->pos);
        v->type = malloc((size_t)(n ? n : 1) * sizeof *v->type);
        if (!v->type) return qs_fail(r->e, "out of memory");
        memcpy(v->type, r->b + r->pos, (size_t)n * 4);
        r->pos += (size_t)n * 4;
        ((vocab_ctx *)ctx)->ntype = n;
        return 1;
    }
    return 0;
}

/* The vocabulary from a file image qs_parse_gguf has accepted (the header is known good). */
static int read_vocab(const uint8_t *buf, size_t len, qs_llm_vocab *v, qs_err *e)
{
    qs_gguf_rd r = {buf, len, 16, e};
    uint64_t nkv;
    vocab_ctx c = {v, 0, 0};
    if (qs_gguf_u64(&r, &nkv, "header") || qs_gguf_kv_walk(&r, nkv, vocab_kv, &c)) return -1;
    if (v->type && c.ntype != (uint64_t)v->n) { free(v->type); v->type = NULL; }
    if (v->score && c.nscore != (uint64_t)v->n) { free(v->score); v->score = NULL; }
    return 0;
}

/* tokenizer.ggml.model "llama": SentencePiece BPE by piece scores, as llama.cpp's llm_tokenizer_spm
** (a space before each stretch of text when add_space_prefix, spaces spelled "▁", no whitespace
** removal, byte fallback to the <0xXX> tokens) -> v->model_json, which llm_tok_spm.c reads. */
static int llama_vocab(json_t *meta, qs_llm_vocab *v, qs_err *e)
{
    json_t *u = json_object_get(meta, "tokenizer.ggml.unknown_token_id"), *asp = json_object_get(meta, "tokenizer.ggml.add_space_prefix");
    int unk = json_is_integer(u) && json_integer_value(u) >= 0 && json_integer_value(u) < v->n ? (int)json_integer_value(u) : -1;
    for (int i = 0; unk < 0 && v->type && i < v->n; i++)
        if (v->type[i] == 2) unk = i;
    json_t *m = json_pack("{s:i, s:b, s:{s:b, s:b, s:b, s:b}}", "unk_id", unk, "byte_fallback", 1, "sentencepiece",
                          "add_dummy_prefix", !json_is_false(asp), "remove_extra_whitespaces", 0, "escape_whitespaces", 1,
                          "llama_cpp", 1);
    if (unk < 0) json_object_set_new(m, "unk_id", json_null());
    v->model = QS_TOK_BPE;
    v->model_json = m ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    return v->model_json ? 0 : qs_fail(e, "out of memory");
}

/* The tokenizer.* keys -> v: tokens, types, scores, merges and their tables, BOS/EOS, the model and
** pre-tokenizer family, prepared.  rows: the embedding's rows the vocabulary must match, or 0. */
static int gguf_vocab(const uint8_t *buf, size_t len, json_t *meta, int rows, const char *name, qs_llm_vocab *v,
                      qs_err *e)
{
    if (read_vocab(buf, len, v, e) || qs_llm__vocab_tables(v, e)) return -1;
    if (rows && v->n && v->n != rows) return qs_fail(e, "vocabulary has %d tokens but token_embd has %d rows", v->n, rows);
    int lim = rows ? rows : v->n;
    json_t *j;
    if ((j = json_object_get(meta, "tokenizer.ggml.bos_token_id")) && json_is_integer(j) &&
        json_integer_value(j) >= 0 && json_integer_value(j) < lim)
        v->bos = (int)json_integer_value(j);
    if ((j = json_object_get(meta, "tokenizer.ggml.eos_token_id")) && json_is_integer(j) &&
        json_integer_value(j) >= 0 && json_integer_value(j) < lim)
        v->eos = (int)json_integer_value(j);
    v->add_bos = json_is_true(json_object_get(meta, "tokenizer.ggml.add_bos_token")) && v->bos >= 0;
    const char *tm = json_string_value(json_object_get(meta, "tokenizer.ggml.model"));
    v->byte_level = tm && strcmp(tm, "gpt2") == 0;
    if (tm && !strcmp(tm, "llama") && llama_vocab(meta, v, e)) return -1;
    const char *pre = json_string_value(json_object_get(meta, "tokenizer.ggml.pre"));
    snprintf(v->pre, sizeof v->pre, "%s", pre ? pre : "");
    return qs_llm_tok_prepare(v, name, e);
}

/* The model of a file image; mapped: its matrices left in the image (qs_llm_load_mapped). */
static int load_image(const uint8_t *buf, size_t len, const char *name, qs_llm_file *f, int mapped, qs_err *e)
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
    if (qs_llm__shape(meta, QS_LLM_GGUF, arch, &cfg, e) || qs_llm__gemma_cfg(meta, QS_LLM_GGUF, A, &cfg, e) ||
        qs_llm__ext_shape(meta, QS_LLM_GGUF, A, &cfg, e))
        goto fail;
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
    if (mapped ? qs_llm__map_weights(f, &cfg, A, &src, 1, name, QS_LLM_GGUF, 0, e)
               : qs_llm__load_weights(&f->m, &cfg, A, &src, 1, name, QS_LLM_GGUF, 0, e))
        goto fail_named;
    qs_llm__wtypes(&src, 1, f->wtypes, sizeof f->wtypes);
    if (gguf_vocab(buf, len, meta, cfg.vocab, name, &f->v, e)) goto fail;
    qs_llm__hash(buf, len, mapped, f->hash);
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

int qs_llm_load_gguf_mem(const uint8_t *buf, size_t len, const char *name, qs_llm_file *f, qs_err *e)
{
    return load_image(buf, len, name, f, 0, e);
}

int qs_llm_load_gguf_mapped(const char *path, qs_llm_file *f, qs_err *e)
{
    memset(f, 0, sizeof *f);
    qs_file_map m, *keep = malloc(sizeof *keep);
    if (!keep) return qs_fail(e, "out of memory");
    if (qs_file_map_open(path, &m, e)) { free(keep); return -1; }
    if (load_image(m.p, m.n, path, f, 1, e)) { qs_file_map_close(&m); free(keep); return -1; }
    *keep = m;   /* the model reads its matrices from here until qs_llm_file_free */
    f->wmaps = keep;
    f->nwmaps = 1;
    return 0;
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


/* The vocabulary alone: the metadata and the tokenizer.* keys, no architecture check, no weights. */
int qs_llm_load_gguf_vocab_mem(const uint8_t *buf, size_t len, const char *name, qs_llm_file *f, qs_err *e)
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
    if (gguf_vocab(buf, len, meta, 0, name, &f->v, e)) goto fail;
    if (!f->v.n) { qs_fail(e, "no tokenizer.ggml.tokens (the file has no vocabulary)"); goto fail; }
    const char *gn = json_string_value(json_object_get(meta, "general.name"));
    const char *arch = json_string_value(json_object_get(meta, "general.architecture"));
    snprintf(f->name, sizeof f->name, "%s", gn ? gn : "");
    snprintf(f->arch, sizeof f->arch, "%s", arch ? arch : "");
    snprintf(f->format, sizeof f->format, "gguf");
    f->size = len;
    json_decref(meta);
    qs_container_free(&c);
    return 0;
fail:
    qs_err_prefix(e, name);
    json_decref(meta);
    qs_container_free(&c);
    qs_llm_file_free(f);
    return -1;
}

int qs_llm_load_gguf_vocab(const char *path, qs_llm_file *f, qs_err *e)
{
    memset(f, 0, sizeof *f);
    qs_file_map m;
    if (qs_file_map_open(path, &m, e)) return -1;
    int rc = qs_llm_load_gguf_vocab_mem(m.p, m.n, path, f, e);
    qs_file_map_close(&m);
    return rc;
}
