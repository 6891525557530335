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

static int cfg_int(json_t *c, const char *key, int required, int dflt, int *out, qs_err *e)
{
    json_t *j = json_object_get(c, key);
    if (!j || json_is_null(j)) {
        if (required) return qs_fail(e, "missing key \"%s\"", key);
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(j) || json_integer_value(j) <= 0 || json_integer_value(j) > (1 << 24))
        return qs_fail(e, "\"%s\" is not a positive integer", key);
    *out = (int)json_integer_value(j);
    return 0;
}

static int cfg_real(json_t *c, const char *key, double dflt, float *out, qs_err *e)
{
    json_t *j = json_object_get(c, key);
    if (!j || json_is_null(j)) { *out = (float)dflt; return 0; }
    if (!json_is_number(j)) return qs_fail(e, "\"%s\" is not a number", key);
    *out = (float)json_number_value(j);
    return 0;
}

/* A token id from config.json (an integer or a list whose first element is one), or -1. */
static int cfg_tok(json_t *c, const char *key, int vocab)
{
    json_t *j = json_object_get(c, key);
    if (json_is_array(j)) j = json_array_get(j, 0);
    if (!json_is_integer(j) || json_integer_value(j) < 0 || json_integer_value(j) >= vocab) return -1;
    return (int)json_integer_value(j);
}

/* Shard file names must stay inside the directory. */
static int shard_name_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n < 256 && s[0] != '.' && !strchr(s, '/') && !strchr(s, '\\');
}

/* tokenizer.json -> f->v (ids 0..vocab-1; 0: as many as its ids need) through llm_tok_json.c, which
** does not build a JSON tree of it; hashed into h when h is given.  Errors name the file. */
static int read_tokenizer(const char *path, int vocab, qs_llm_vocab *v, int *pp_bos, XXH3_state_t *h, uint64_t *size,
                          qs_err *e)
{
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
    if (read_tokenizer(path, 0, &f->v, &pp_bos, NULL, NULL, e)) { qs_llm_file_free(f); return -1; }
    return 0;
}

int qs_llm_load_hf(const char *dir, qs_llm_file *f, qs_err *e)
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
    int qwen = (mtype && !strcmp(mtype, "qwen2")) || (archs && !strcmp(archs, "Qwen2ForCausalLM"));
    int llama = (mtype && !strcmp(mtype, "llama")) || (archs && !strcmp(archs, "LlamaForCausalLM"));
    if (!qwen && !llama) {
        qs_fail(e, "architecture '%.40s' is not supported (LlamaForCausalLM, Qwen2ForCausalLM)",
                archs ? archs : mtype ? mtype : "?");
        goto out;
    }
    snprintf(f->arch, sizeof f->arch, "%s", qwen ? "qwen2" : "llama");
    snprintf(f->format, sizeof f->format, "safetensors");
    json_t *rs = json_object_get(cj, "rope_scaling");
    if (rs && !json_is_null(rs)) { qs_fail(e, "\"rope_scaling\" is not supported"); goto out; }
    if (json_is_true(json_object_get(cj, "use_sliding_window"))) { qs_fail(e, "sliding-window attention is not supported"); goto out; }
    const char *act = json_string_value(json_object_get(cj, "hidden_act"));
    if (act && strcmp(act, "silu")) { qs_fail(e, "hidden_act '%.20s' is not supported (silu)", act); goto out; }
    qs_llm_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    int hd;
    if (cfg_int(cj, "num_hidden_layers", 1, 0, &cfg.n_layer, e) || cfg_int(cj, "hidden_size", 1, 0, &cfg.dim, e) ||
        cfg_int(cj, "intermediate_size", 1, 0, &cfg.ffn, e) ||
        cfg_int(cj, "num_attention_heads", 1, 0, &cfg.n_head, e) ||
        cfg_int(cj, "num_key_value_heads", 0, cfg.n_head, &cfg.n_kv_head, e) ||
        cfg_int(cj, "vocab_size", 1, 0, &cfg.vocab, e) ||
        cfg_int(cj, "max_position_embeddings", 0, 2048, &cfg.ctx, e) ||
        cfg_real(cj, "rms_norm_eps", 1e-6, &cfg.eps, e) || cfg_real(cj, "rope_theta", 10000.0, &cfg.rope_base, e))
        goto out;
    cfg.head_dim = cfg.dim / cfg.n_head;
    if (cfg_int(cj, "head_dim", 0, cfg.head_dim, &hd, e)) goto out;
    if (hd != cfg.head_dim) { qs_fail(e, "head_dim %d != hidden_size / num_attention_heads", hd); goto out; }
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
        XXH3_128bits_update(hs, mp[i].p, mp[i].n);
        total += mp[i].n;
        if (qs_parse_safetensors(mp[i].p, mp[i].n, NULL, &src[i].c, e)) goto out;
    }
    culprit = dir;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    int have_tok = access(path, F_OK) == 0, pp_bos = 0;
    json_t *tie = json_object_get(cj, "tie_word_embeddings");
    int tied = json_is_true(tie) || !qs_llm__find(src, nsrc, "lm_head.weight", NULL);
    if (json_is_true(json_object_get(cj, "mlp_bias")) ||
        qs_llm__find(src, nsrc, "model.layers.0.self_attn.o_proj.bias", NULL) ||
        qs_llm__find(src, nsrc, "model.layers.0.mlp.down_proj.bias", NULL)) {
        qs_fail(e, "output-projection or MLP biases are not supported (Q/K/V biases are)");
        goto out;
    }
    if (qs_llm__load_weights(&f->m, &cfg, src, nsrc, 1, tied, e)) goto out;
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
