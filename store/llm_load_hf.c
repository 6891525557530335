/*
** Hugging Face checkpoint directory -> FP32 model (see llm_load.h): config.json (LlamaForCausalLM or
** Qwen2ForCausalLM), model.safetensors or model.safetensors.index.json with its shards, read through
** the store's safetensors parser and tensor reader (F32, F16, BF16, ...), and tokenizer.json
** (byte-level BPE: vocabulary, merges, added tokens, pre-tokenizer).
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

/* GPT-2's pre-tokenizer pattern (ByteLevel with use_regex = true). */
static const char kGpt2Regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";


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

static int has_type(json_t *j, const char *type, int depth)
{
    if (depth > 16) return 0;
    if (json_is_object(j)) {
        const char *t = json_string_value(json_object_get(j, "type"));
        if (t && !strcmp(t, type)) return 1;
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) if (has_type(v, type, depth + 1)) return 1;
    } else if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) if (has_type(v, type, depth + 1)) return 1;
    }
    return 0;
}

/* The first Split step's regex pattern, if any. */
static const char *split_regex(json_t *j, int depth)
{
    if (depth > 16) return NULL;
    if (json_is_object(j)) {
        const char *t = json_string_value(json_object_get(j, "type"));
        if (t && !strcmp(t, "Split")) {
            const char *r = json_string_value(json_object_get(json_object_get(j, "pattern"), "Regex"));
            if (r) return r;
        }
        json_t *seq = json_object_get(j, "pretokenizers");
        size_t i;
        json_t *v;
        json_array_foreach(seq, i, v) {
            const char *r = split_regex(v, depth + 1);
            if (r) return r;
        }
    }
    return NULL;
}

static int digits_individual(json_t *j, int depth)
{
    if (depth > 16) return 0;
    if (json_is_object(j)) {
        const char *t = json_string_value(json_object_get(j, "type"));
        if (t && !strcmp(t, "Digits")) return json_is_true(json_object_get(j, "individual_digits"));
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(j, "pretokenizers"), i, v) if (digits_individual(v, depth + 1)) return 1;
    }
    return 0;
}

static int bytelevel_regex(json_t *j, int depth)
{
    if (depth > 16) return 0;
    if (json_is_object(j)) {
        const char *t = json_string_value(json_object_get(j, "type"));
        if (t && !strcmp(t, "ByteLevel")) {
            json_t *u = json_object_get(j, "use_regex");
            return !u || json_is_true(u);   /* the tokenizers default is true */
        }
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(j, "pretokenizers"), i, v) if (bytelevel_regex(v, depth + 1)) return 1;
    }
    return 0;
}

/* tokenizer.json -> vocabulary of exactly `vocab` ids (ids the tokenizer does not use are ""). */
static int read_tokenizer(json_t *tj, int vocab, qs_llm_vocab *v, qs_err *e)
{
    json_t *model = json_object_get(tj, "model");
    const char *mt = json_string_value(json_object_get(model, "type"));
    if (!json_is_object(model) || (mt && strcmp(mt, "BPE")))
        return qs_fail(e, "tokenizer model '%s' is not supported (BPE only)", mt ? mt : "?");
    json_t *vj = json_object_get(model, "vocab"), *added = json_object_get(tj, "added_tokens");
    if (!json_is_object(vj)) return qs_fail(e, "no model.vocab object");
    const char **str = calloc((size_t)vocab, sizeof *str);
    v->type = calloc((size_t)vocab, sizeof *v->type);
    if (!str || !v->type) { free(str); return qs_fail(e, "out of memory for the vocabulary"); }
    const char *k;
    json_t *val;
    int rc = -1;
    json_object_foreach(vj, k, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= vocab) {
            qs_fail(e, "vocabulary entry \"%.40s\" has id outside 0..%d", k, vocab - 1);
            goto done;
        }
        int id = (int)json_integer_value(val);
        if (str[id]) { qs_fail(e, "vocabulary id %d is used twice", id); goto done; }
        str[id] = k;
        v->type[id] = 1;
    }
    size_t i;
    json_array_foreach(added, i, val) {
        json_t *idj = json_object_get(val, "id");
        const char *content = json_string_value(json_object_get(val, "content"));
        if (!json_is_integer(idj) || !content || json_integer_value(idj) < 0 || json_integer_value(idj) >= vocab) {
            qs_fail(e, "added_tokens[%zu] has no content or an id outside 0..%d", i, vocab - 1);
            goto done;
        }
        int id = (int)json_integer_value(idj);
        str[id] = content;
        v->type[id] = json_is_true(json_object_get(val, "special")) ? 3 : 4;   /* control / user-defined */
    }
    size_t total = 0;
    for (int t = 0; t < vocab; t++) total += (str[t] ? strlen(str[t]) : 0) + 1;
    if (total > UINT32_MAX) { qs_fail(e, "vocabulary too large"); goto done; }
    v->text = malloc(total);
    v->off = malloc((size_t)vocab * sizeof *v->off);
    if (!v->text || !v->off) { qs_fail(e, "out of memory for the vocabulary"); goto done; }
    size_t o = 0;
    for (int t = 0; t < vocab; t++) {
        size_t n = str[t] ? strlen(str[t]) : 0;
        v->off[t] = (uint32_t)o;
        memcpy(v->text + o, str[t] ? str[t] : "", n);
        o += n;
        v->text[o++] = 0;
    }
    v->n = vocab;
    /* merges: "a b" strings (older files) or ["a", "b"] pairs (tokenizers >= 0.20) */
    json_t *mj = json_object_get(model, "merges");
    size_t nm = json_is_array(mj) ? json_array_size(mj) : 0, mtot = 0;
    if (nm > (1u << 24)) { qs_fail(e, "too many merges (%zu)", nm); goto done; }
    json_array_foreach(mj, i, val) {
        if (json_is_string(val)) mtot += json_string_length(val) + 1;
        else if (json_is_array(val) && json_array_size(val) == 2 && json_is_string(json_array_get(val, 0)) &&
                 json_is_string(json_array_get(val, 1)))
            mtot += json_string_length(json_array_get(val, 0)) + json_string_length(json_array_get(val, 1)) + 2;
        else { qs_fail(e, "merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", i); goto done; }
    }
    if (mtot > UINT32_MAX) { qs_fail(e, "merges too large"); goto done; }
    v->mtext = malloc(mtot ? mtot : 1);
    v->moff = malloc((nm ? nm : 1) * sizeof *v->moff);
    if (!v->mtext || !v->moff) { qs_fail(e, "out of memory for the merges"); goto done; }
    o = 0;
    json_array_foreach(mj, i, val) {
        v->moff[i] = (uint32_t)o;
        if (json_is_string(val)) o += (size_t)sprintf(v->mtext + o, "%s", json_string_value(val)) + 1;
        else o += (size_t)sprintf(v->mtext + o, "%s %s", json_string_value(json_array_get(val, 0)),
                                  json_string_value(json_array_get(val, 1))) + 1;
    }
    v->nmerges = (int)nm;
    v->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    /* pre-tokenizer: kept whole, llm_pretok.c runs it; v->pre names its family for messages */
    json_t *pre = json_object_get(tj, "pre_tokenizer");
    v->byte_level = has_type(pre, "ByteLevel", 0) || has_type(json_object_get(tj, "decoder"), "ByteLevel", 0);
    if (pre && !json_is_null(pre)) {
        v->pre_json = json_dumps(pre, JSON_COMPACT | JSON_ENSURE_ASCII);
        const char *rx = split_regex(pre, 0);
        if (rx) {
            v->pre_regex = strdup(rx);
            snprintf(v->pre, sizeof v->pre, "hf-regex");   /* Qwen2, Llama 3 */
        } else if (bytelevel_regex(pre, 0)) {
            v->pre_regex = strdup(kGpt2Regex);
            snprintf(v->pre, sizeof v->pre, "%s", digits_individual(pre, 0) ? "smollm" : "gpt2");
        } else {
            snprintf(v->pre, sizeof v->pre, "hf-other");
        }
        if (!v->pre_json || (rx && !v->pre_regex)) { qs_fail(e, "out of memory"); goto done; }
    } else {
        snprintf(v->pre, sizeof v->pre, "hf-none");   /* not a GGUF family: the tokenizer refuses it by name */
    }
    rc = 0;
done:
    free(str);
    return rc;
}

int qs_llm_load_tokenizer(const char *path, qs_llm_file *f, qs_err *e)
{
    memset(f, 0, sizeof *f);
    f->v.bos = f->v.eos = -1;
    json_t *tj = load_json(path, NULL, NULL, e), *val;
    if (!tj) return -1;
    int vocab = 0;   /* ids 0 .. the largest one of the vocabulary and the added tokens */
    const char *k;
    size_t i;
    json_object_foreach(json_object_get(json_object_get(tj, "model"), "vocab"), k, val)
        if (json_is_integer(val) && json_integer_value(val) >= vocab && json_integer_value(val) < (1 << 24))
            vocab = (int)json_integer_value(val) + 1;
    json_array_foreach(json_object_get(tj, "added_tokens"), i, val) {
        json_t *id = json_object_get(val, "id");
        if (json_is_integer(id) && json_integer_value(id) >= vocab && json_integer_value(id) < (1 << 24))
            vocab = (int)json_integer_value(id) + 1;
    }
    int rc = vocab ? read_tokenizer(tj, vocab, &f->v, e) : qs_fail(e, "no vocabulary");
    if (!rc) rc = qs_llm__vocab_tables(&f->v, e);
    json_decref(tj);
    if (rc) { qs_llm_file_free(f); qs_err_prefix(e, path); }
    return rc;
}

int qs_llm_load_hf(const char *dir, qs_llm_file *f, qs_err *e)
{
    memset(f, 0, sizeof *f);
    f->v.bos = f->v.eos = -1;
    char path[4096];
    const char *culprit = dir;   /* the file named in an error */
    json_t *cj = NULL, *ij = NULL, *tj = NULL, *tcj = NULL;
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
    json_t *rs = json_object_get(cj, "rope_scaling");
    if (rs && !json_is_null(rs)) { qs_fail(e, "\"rope_scaling\" is not supported"); goto out; }
    if (json_is_true(json_object_get(cj, "use_sliding_window"))) { qs_fail(e, "sliding-window attention is not supported"); goto out; }
    const char *act = json_string_value(json_object_get(cj, "hidden_act"));
    if (act && strcmp(act, "silu")) { qs_fail(e, "hidden_act '%.20s' is not supported (silu)", act); goto out; }
    if (json_is_true(json_object_get(cj, "mlp_bias"))) {
        qs_fail(e, "output-projection or MLP biases are not supported (Q/K/V biases are)");
        goto out;
    }
    qs_llm_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    if (qs_llm__shape(cj, QS_LLM_HF, A->name, &cfg, e)) goto out;
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
    if (ij && check_weight_map(json_object_get(ij, "weight_map"), shard, src, nsrc, e)) goto out_noprefix;
    culprit = dir;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    int have_tok = access(path, F_OK) == 0;
    if (have_tok && !(tj = load_json(path, hs, &total, e))) goto out_noprefix;
    int tie = json_is_true(json_object_get(cj, "tie_word_embeddings"));
    if (qs_llm__load_weights(&f->m, &cfg, A, src, nsrc, dir, QS_LLM_HF, tie, e)) goto out_noprefix;
    qs_llm__wtypes(src, nsrc, f->wtypes, sizeof f->wtypes);
    if (have_tok) {
        culprit = path;
        if (read_tokenizer(tj, cfg.vocab, &f->v, e) || qs_llm__vocab_tables(&f->v, e)) goto out;
        culprit = dir;
    }
    f->v.bos = cfg_tok(cj, "bos_token_id", cfg.vocab);
    f->v.eos = cfg_tok(cj, "eos_token_id", cfg.vocab);
    {   /* tokenizer_config.json (optional, not hashed: it does not change the numbers) */
        char tp[4096];
        snprintf(tp, sizeof tp, "%s/tokenizer_config.json", dir);
        qs_err e2 = {{0}};
        if (access(tp, F_OK) == 0) tcj = load_json(tp, NULL, NULL, &e2);
    }
    if ((f->v.bos < 0 || f->v.eos < 0) && f->v.n) {   /* tokenizer_config.json names them by content */
        if (tcj) {
            const char *keys[2] = {"bos_token", "eos_token"};
            int *dst[2] = {&f->v.bos, &f->v.eos};
            for (int i = 0; i < 2; i++) {
                json_t *t = json_object_get(tcj, keys[i]);
                const char *s = json_is_object(t) ? json_string_value(json_object_get(t, "content")) : json_string_value(t);
                if (*dst[i] < 0 && s) *dst[i] = qs_llm_vocab_find(&f->v, s);
            }
        }
    }
    {   /* does the tokenizer prepend BOS? tokenizer_config's flag, else the post-processor's template */
        json_t *ab = json_object_get(tcj, "add_bos_token");
        json_t *pp = json_object_get(tj, "post_processor");
        const char *ppt = json_string_value(json_object_get(pp, "type"));
        json_t *first = json_array_get(json_object_get(pp, "single"), 0);
        if (json_is_boolean(ab)) f->v.add_bos = json_is_true(ab);
        else f->v.add_bos = ppt && !strcmp(ppt, "TemplateProcessing") && json_object_get(first, "SpecialToken") != NULL;
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
    json_decref(cj); json_decref(ij); json_decref(tj); json_decref(tcj);
    return rc;
}
