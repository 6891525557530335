/*
** Hugging Face checkpoint directory -> FP32 model (see llm_load.h): config.json (LlamaForCausalLM or
** Qwen2ForCausalLM), model.safetensors or model.safetensors.index.json with its shards, read through
** the store's safetensors parser and tensor reader (F32, F16, BF16, ...), and tokenizer.json
** (byte-level BPE: vocabulary, merges, added tokens, pre-tokenizer; read by llm_tok_json.c).
**
** RoPE: Hugging Face checkpoints rotate the pairs (i, i + head_dim/2) (rotate_half); the Q/K rows are
** kept as stored and the forward pass is told so (cfg.rope_neox), unlike llama.cpp's converter which
** permutes them into adjacent pairs.
*/
#include "llm_load_internal.h"
#include "llm_tok_wordpiece.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define MAX_SHARDS 1024
#define MAX_JSON ((size_t)512 << 20)

static json_t *load_json(const char *path, XXH3_state_t *h, uint64_t *size, qs_err *e)
{
    qs_file_map m;
    if (qs_file_map_open(path, &m, e)) return NULL;
    if (m.n > MAX_JSON) { qs_file_map_close(&m); qs_fail(e, "%s: larger than %zu bytes", path, MAX_JSON); return NULL; }
    json_error_t je;
    json_t *j = json_loadb((const char *)m.p, m.n, JSON_REJECT_DUPLICATES, &je);
    if (h) { XXH3_128bits_update(h, m.p, m.n); *size += m.n; }
    qs_file_map_close(&m);
    if (!j) { qs_fail(e, "%s: invalid JSON at line %d: %s", path, je.line, je.text); return NULL; }
    if (!json_is_object(j)) { json_decref(j); qs_fail(e, "%s: not a JSON object", path); return NULL; }
    return j;
}

/* A token id from config.json (an integer or a list whose first element is one), or -1. */
static int cfg_tok(json_t *c, const char *key, int vocab)
{
    json_t *j = json_object_get(c, key);
    if (json_is_array(j)) j = json_array_get(j, 0);
    if (!json_is_integer(j) || json_integer_value(j) < 0 || json_integer_value(j) >= vocab) return -1;
    return (int)json_integer_value(j);
}

/* The index's weight_map is the truth about where each tensor lives: every tensor it maps must be in
** that shard, and no tensor may be in two shards (otherwise which copy is loaded would depend on the
** order of the shards).  Messages name the shard at fault. */
static int check_weight_map(json_t *wm, char *const *shard, const qs_llm_src *src, int nsrc, qs_err *e)
{
    json_t *where = json_object();   /* tensor name -> shard index */
    if (!where) return qs_fail(e, "out of memory");
    int rc = -1;
    for (int k = 0; k < nsrc; k++)
        for (size_t i = 0; i < src[k].c.n; i++) {
            const char *name = src[k].c.t[i].name;
            json_t *had = json_object_get(where, name);
            if (had) {
                qs_fail(e, "%s: tensor '%.80s' is also in %s (a tensor may be in one shard only)", src[k].path, name,
                        shard[json_integer_value(had)]);
                goto done;
            }
            if (json_object_set_new_nocheck(where, name, json_integer(k))) { qs_fail(e, "out of memory"); goto done; }
        }
    const char *name;
    json_t *val;
    json_object_foreach(wm, name, val) {
        int k = 0;
        while (k < nsrc && strcmp(shard[k], json_string_value(val))) k++;
        json_t *at = json_object_get(where, name);
        if (k < nsrc && (!at || json_integer_value(at) != k)) {
            qs_fail(e, "%s: holds no tensor '%.80s' (model.safetensors.index.json maps it there)", src[k].path, name);
            goto done;
        }
    }
    rc = 0;
done:
    json_decref(where);
    return rc;
}

/* Shard file names must stay inside the directory. */
static int shard_name_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n < 256 && s[0] != '.' && !strchr(s, '/') && !strchr(s, '\\');
}

/* A BERT vocab.txt, with the tokenizer_config.json of its directory when there is one
** (llm_tok_vocabtxt.c).  Errors name the file at fault. */
static int read_vocab_txt(const char *path, qs_llm_vocab *v, qs_err *e)
{
    char cfg[4096];
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path + 1) : 0;
    if (snprintf(cfg, sizeof cfg, "%.*stokenizer_config.json", dl, path) >= (int)sizeof cfg) return qs_fail(e, "%s: path too long", path);
    qs_file_map m, c = {0};
    int have_cfg = access(cfg, F_OK) == 0;
    if (have_cfg && qs_file_map_open(cfg, &c, e)) return -1;
    if (qs_file_map_open(path, &m, e)) { if (have_cfg) qs_file_map_close(&c); return -1; }
    int rc = qs_llm_vocab_txt_parse((const char *)m.p, m.n, have_cfg ? (const char *)c.p : NULL, have_cfg ? c.n : 0,
                                    path, v, e);
    static const char kCfg[] = "tokenizer_config.json: ";
    if (rc && !strncmp(e->msg, kCfg, strlen(kCfg))) {   /* the config's fault: name it by its path */
        memmove(e->msg, e->msg + strlen(kCfg), strlen(e->msg + strlen(kCfg)) + 1);
        qs_err_prefix(e, cfg);
    } else if (rc) {
        qs_err_prefix(e, path);
    }
    qs_file_map_close(&m);
    if (have_cfg) qs_file_map_close(&c);
    return rc;
}

/* tokenizer.json -> f->v (ids 0..vocab-1; 0: as many as its ids need) through llm_tok_json.c, which
** does not build a JSON tree of it; hashed into h when h is given.  Errors name the file.  A path
** ending in .txt is a BERT vocab.txt (qs_llm_load_tokenizer's --tokenizer vocab.txt). */
static int read_tokenizer(const char *path, int vocab, qs_llm_vocab *v, int *pp_bos, XXH3_state_t *h, uint64_t *size,
                          qs_err *e)
{
    size_t pl = strlen(path);
    if (pl >= 4 && !strcmp(path + pl - 4, ".txt")) { *pp_bos = 0; return read_vocab_txt(path, v, e); }   /* BERT */
    qs_file_map m;
    if (qs_file_map_open(path, &m, e)) return -1;
    if (h) { XXH3_128bits_update(h, m.p, m.n); *size += m.n; }
    int rc = qs_llm_tok_json_parse((const char *)m.p, m.n, vocab, path, v, pp_bos, e);
    qs_file_map_close(&m);
    if (rc) qs_err_prefix(e, path);
    return rc;
}

int qs_llm_load_tokenizer(const char *path, qs_llm_file *f, qs_err *e)
{
    memset(f, 0, sizeof *f);
    f->v.bos = f->v.eos = -1;
    int pp_bos;
    size_t pl = strlen(path);
    if (pl >= 6 && !strcmp(path + pl - 6, ".model")) {   /* SentencePiece's tokenizer.model */
        qs_file_map m;
        if (qs_file_map_open(path, &m, e)) return -1;
        int rc = qs_llm_tok_spm_parse(m.p, m.n, path, &f->v, e);
        qs_file_map_close(&m);
        if (rc) { qs_err_prefix(e, path); qs_llm_file_free(f); }
        return rc;
    }
    char file[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {   /* a Hugging Face directory: its tokenizer.json, */
        if (strlen(path) > 4000) return qs_fail(e, "%s: path too long", path);
        snprintf(file, sizeof file, "%s/tokenizer.model", path);
        int spm_only = access(file, F_OK) == 0;           /* else its tokenizer.model */
        snprintf(file, sizeof file, "%s/tokenizer.json", path);
        if (spm_only && access(file, F_OK) != 0) {
            snprintf(file, sizeof file, "%s/tokenizer.model", path);
            return qs_llm_load_tokenizer(file, f, e);
        }
        path = file;
    }
    if (read_tokenizer(path, 0, &f->v, &pp_bos, NULL, NULL, e)) { qs_llm_file_free(f); return -1; }
    return 0;
}

/* mapped: the weights left in the mapped shards (qs_llm_load_hf_mapped, llm_load_mapped.c). */
static int load_hf(const char *dir, qs_llm_file *f, int mapped, qs_err *e)
{
    memset(f, 0, sizeof *f);
    f->v.bos = f->v.eos = -1;
    char path[4096];
    const char *culprit = dir;   /* the file named in an error */
    json_t *cj = NULL, *ij = NULL;
    qs_llm_src src[MAX_SHARDS];
    qs_file_map mp[MAX_SHARDS];
    char *shard[MAX_SHARDS];
    int ns = 0, nsrc = 0;
    int rc = -1;
    XXH3_state_t *hs = XXH3_createState();
    if (!hs) return qs_fail(e, "out of memory");
    XXH3_128bits_reset(hs);
    uint64_t total = 0;
    if (strlen(dir) > 3800) { qs_fail(e, "%s: path too long", dir); goto out; }

    snprintf(path, sizeof path, "%s/config.json", dir);
    if (!(cj = load_json(path, hs, &total, e))) goto out_noprefix;
    culprit = path;
    const char *mtype = json_string_value(json_object_get(cj, "model_type"));
    const char *archs = json_string_value(json_array_get(json_object_get(cj, "architectures"), 0));
    const qs_llm_arch *A = qs_llm_arch_hf(archs, mtype);
    if (!A) {
        char list[256];
        qs_fail(e, "architecture '%.40s' is not supported (%s)", archs ? archs : mtype ? mtype : "?",
                qs_llm_arch_list(QS_LLM_HF, list, sizeof list));
        goto out;
    }
    snprintf(f->arch, sizeof f->arch, "%s", A->name);
    snprintf(f->format, sizeof f->format, "safetensors");
    const int gemma = (A->flags & QS_ARCH_GEMMA) != 0;   /* its own keys: llm_arch_gemma.c; rope_scaling and
                                                         ** sliding windows of the others: llm_load_ext.c */
    const char *act = json_string_value(json_object_get(cj, "hidden_act"));
    if (!gemma && act && strcmp(act, "silu")) { qs_fail(e, "hidden_act '%.20s' is not supported (silu)", act); goto out; }
    if (json_is_true(json_object_get(cj, "mlp_bias"))) {
        qs_fail(e, "output-projection or MLP biases are not supported (Q/K/V biases are)");
        goto out;
    }
    qs_llm_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    if (qs_llm__shape(cj, QS_LLM_HF, A->name, &cfg, e) || qs_llm__gemma_cfg(cj, QS_LLM_HF, A, &cfg, e) ||
        qs_llm__ext_shape(cj, QS_LLM_HF, A, &cfg, e))
        goto out;
    cfg.rope_neox = 1;
    if (qs_llm_cfg_check(&cfg, e)) goto out;

    /* weights: one file, or the shards an index names */
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (access(path, F_OK) == 0) {
        if (!(ij = load_json(path, hs, &total, e))) goto out_noprefix;
        json_t *wm = json_object_get(ij, "weight_map");
        if (!json_is_object(wm)) { qs_fail(e, "no \"weight_map\" object"); goto out; }
        const char *k;
        json_t *val;
        json_object_foreach(wm, k, val) {
            const char *s = json_string_value(val);
            if (!s || !shard_name_ok(s)) { qs_fail(e, "weight_map[\"%.60s\"] is not a file name in the directory", k); goto out; }
            int seen = 0;
            for (int i = 0; i < ns && !seen; i++) seen = !strcmp(shard[i], s);
            if (seen) continue;
            if (ns == MAX_SHARDS) { qs_fail(e, "more than %d shards", MAX_SHARDS); goto out; }
            shard[ns++] = (char *)s;
        }
        if (!ns) { qs_fail(e, "\"weight_map\" is empty"); goto out; }
    } else {
        shard[ns++] = (char *)"model.safetensors";
    }
    for (int i = 0; i < ns; i++) {
        char *sp = malloc(4096);
        if (!sp) { qs_fail(e, "out of memory"); goto out; }
        snprintf(sp, 4096, "%s/%s", dir, shard[i]);
        memset(&src[i], 0, sizeof src[i]);
        mp[i].p = NULL;
        src[i].path = sp;
        nsrc++;
        culprit = sp;
        if (qs_file_map_open(sp, &mp[i], e)) goto out_noprefix;
        src[i].buf = mp[i].p;
        src[i].len = mp[i].n;
        qs_llm__hash_update(hs, mp[i].p, mp[i].n, mapped);
        total += mp[i].n;
        if (qs_parse_safetensors(mp[i].p, mp[i].n, NULL, &src[i].c, e)) goto out;
    }
    if (ij && check_weight_map(json_object_get(ij, "weight_map"), shard, src, nsrc, e)) goto out_noprefix;
    culprit = dir;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    int have_tok = access(path, F_OK) == 0, pp_bos = 0;
    int tie = json_is_true(json_object_get(cj, "tie_word_embeddings"));
    if (mapped ? qs_llm__map_weights(f, &cfg, A, src, nsrc, dir, QS_LLM_HF, tie, e)
               : qs_llm__load_weights(&f->m, &cfg, A, src, nsrc, dir, QS_LLM_HF, tie, e))
        goto out_noprefix;
    if (!mapped) qs_llm__gemma_hf_norms(&f->m);   /* Gemma's (1 + w); mapped models are Llama-core only */
    qs_llm__wtypes(src, nsrc, f->wtypes, sizeof f->wtypes);
    /* after the weights, whose size bounds vocab_size; hashed after the shards, as always */
    if (have_tok && read_tokenizer(path, cfg.vocab, &f->v, &pp_bos, hs, &total, e)) goto out_noprefix;
    f->v.bos = cfg_tok(cj, "bos_token_id", cfg.vocab);
    f->v.eos = cfg_tok(cj, "eos_token_id", cfg.vocab);
    {   /* tokenizer_config.json (optional, llm_tok_config.c): BOS/EOS by content, add_bos_token, else
        ** the post-processor's template */
        char tp[4096];
        snprintf(tp, sizeof tp, "%s/tokenizer_config.json", dir);
        qs_err e2 = {{0}};
        qs_llm_tok_cfg tc = {-1, -1, -1};
        if (access(tp, F_OK) == 0) qs_llm_tok_config_read(tp, &f->v, &tc, &e2);
        if (f->v.bos < 0) f->v.bos = tc.bos;
        if (f->v.eos < 0) f->v.eos = tc.eos;
        f->v.add_bos = tc.add_bos >= 0 ? tc.add_bos : pp_bos;
        if (f->v.bos < 0) f->v.add_bos = 0;
    }
    const char *gn = json_string_value(json_object_get(cj, "_name_or_path"));
    const char *base = strrchr(dir, '/');
    snprintf(f->name, sizeof f->name, "%s", gn ? gn : base && base[1] ? base + 1 : dir);
    XXH128_hash_t h = XXH3_128bits_digest(hs);
    snprintf(f->hash, sizeof f->hash, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
    f->size = total;
    if (mapped) {   /* the model reads its matrices from the shards until qs_llm_file_free */
        if (!(f->wmaps = malloc((size_t)nsrc * sizeof *f->wmaps))) { qs_fail(e, "out of memory"); goto out_noprefix; }
        for (int i = 0; i < nsrc; i++) { f->wmaps[i] = mp[i]; mp[i].p = NULL; }
        f->nwmaps = nsrc;
    }
    rc = 0;
    goto done;
out:
    qs_err_prefix(e, culprit);
out_noprefix:
    qs_llm_file_free(f);
done:
    for (int i = 0; i < nsrc; i++) {
        qs_container_free(&src[i].c);
        qs_file_map_close(&mp[i]);
        free((char *)src[i].path);
    }
    XXH3_freeState(hs);
    json_decref(cj); json_decref(ij);
    return rc;
}

int qs_llm_load_hf(const char *dir, qs_llm_file *f, qs_err *e) { return load_hf(dir, f, 0, e); }
int qs_llm_load_hf_mapped(const char *dir, qs_llm_file *f, qs_err *e) { return load_hf(dir, f, 1, e); }
