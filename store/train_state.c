/*
** trainer_state.json of a training checkpoint (see train_ckpt.h): written by jansson, read back with
** every field checked, so a damaged or foreign file is refused with the field at fault.  Reals are
** written with 17 significant digits (jansson's default), so they read back bit for bit; the seed and
** the call counter, which may exceed 2^63, are decimal strings.
*/
#include "train_ckpt.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../kernels/qs_version.h"
#include "container.h"

#define FORMAT_NAME "qscope trainer_state"
#define FORMAT_VERSION 1

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }
static json_t *u64_str(uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    return json_string(b);
}

int qs_train_state_write(const char *path, const qs_train_state *s, qs_err *e)
{
    json_t *ops = json_array(), *texts = json_array();
    for (int i = 0; i < s->nops; i++) json_array_append_new(ops, json_string(s->op[i]));
    for (int i = 0; i < s->ntext; i++) json_array_append_new(texts, json_string(s->text[i]));
    json_t *j = json_pack(
        "{s:s,s:i,s:s,s:i,s:i,s:I,s:o,"
        "s:{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:b,s:b,s:s},"
        "s:{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:o},"
        "s:{s:o,s:o},s:{s:o,s:o,s:o,s:o,s:I,s:I,s:s},s:o,s:o}",
        "format", FORMAT_NAME, "version", FORMAT_VERSION, "tool_version", QS_VERSION " (" QS_GIT_REV ")", "step",
        s->step, "steps", s->steps, "adam_t", (json_int_t)s->adam_t, "sr_calls", u64_str(s->sr_calls),
        "model", "layers", s->layers, "dim", s->dim, "heads", s->heads, "kv_heads", s->kv_heads, "head_dim",
        s->head_dim, "ffn", s->ffn, "vocab", s->vocab, "tied", s->tied, "bias", s->bias, "rope",
        s->rope_adjacent ? "adjacent" : "rotate_half",
        "options", "batch", s->batch, "ctx", s->ctx, "accum", s->accum, "warmup", s->warmup, "eval_every",
        s->eval_every, "val_seqs", s->val_seqs, "checkpoint_every", s->ckpt_every, "lr", s->lr, "min_lr",
        s->min_frac, "clip", s->clip, "beta1", s->beta1, "beta2", s->beta2, "eps", s->eps, "wd", s->wd, "seed",
        u64_str(s->seed),
        "recipe", "preset", str_or_null(s->recipe), "ops", ops,
        "data", "texts", texts, "val_text", str_or_null(s->val_text), "tokenizer", str_or_null(s->tokenizer), "init",
        str_or_null(s->init), "train_tokens", (json_int_t)s->ntrain, "val_tokens", (json_int_t)s->nval, "hash",
        s->data_hash,
        "val0", isfinite(s->val0) ? json_real(s->val0) : json_null(), "run_name", str_or_null(s->run_name));
    if (!j) return qs_fail(e, "%s: out of memory", path);
    int rc = json_dump_file(j, path, JSON_INDENT(1));
    json_decref(j);
    return rc ? qs_fail(e, "%s: cannot write", path) : 0;
}

/* ---- reading: each getter names the field it refuses ---- */

typedef struct rd { const char *path; qs_err *e; char key[96]; } rd;

/* "sect.key", or "key" at the top level, for messages. */
static const char *kname(rd *r, const char *sect, const char *key)
{
    snprintf(r->key, sizeof r->key, "%s%s%s", sect ? sect : "", sect ? "." : "", key);
    return r->key;
}

static json_t *field(rd *r, json_t *o, const char *sect, const char *key)
{
    json_t *v = o ? json_object_get(o, key) : NULL;
    if (!v) qs_fail(r->e, "%s: %s missing", r->path, kname(r, sect, key));
    return v;
}

static int get_int(rd *r, json_t *o, const char *sect, const char *key, long long lo, long long hi, long long *out)
{
    json_t *v = field(r, o, sect, key);
    if (!v) return -1;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return qs_fail(r->e, "%s: %s is not an integer in %lld..%lld", r->path, kname(r, sect, key), lo, hi);
    *out = json_integer_value(v);
    return 0;
}

static int get_i(rd *r, json_t *o, const char *sect, const char *key, int lo, int hi, int *out)
{
    long long v;
    if (get_int(r, o, sect, key, lo, hi, &v)) return -1;
    *out = (int)v;
    return 0;
}

static int get_num(rd *r, json_t *o, const char *sect, const char *key, double *out)
{
    json_t *v = field(r, o, sect, key);
    if (!v) return -1;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return qs_fail(r->e, "%s: %s is not a finite number", r->path, kname(r, sect, key));
    *out = json_number_value(v);
    return 0;
}

static int get_u64(rd *r, json_t *o, const char *sect, const char *key, uint64_t *out)
{
    json_t *v = field(r, o, sect, key);
    if (!v) return -1;
    const char *s = json_string_value(v);
    char *end = NULL;
    if (s && *s >= '0' && *s <= '9') *out = strtoull(s, &end, 10);
    if (!s || !end || *end || strlen(s) > 20)
        return qs_fail(r->e, "%s: %s is not a decimal string", r->path, kname(r, sect, key));
    return 0;
}

/* A string (copied) or, when nullable, null (*out = NULL). */
static int get_str(rd *r, json_t *o, const char *sect, const char *key, int nullable, char **out)
{
    json_t *v = field(r, o, sect, key);
    if (!v) return -1;
    if (nullable && json_is_null(v)) { *out = NULL; return 0; }
    if (!json_is_string(v) || json_string_length(v) > 4000)
        return qs_fail(r->e, "%s: %s is not a string%s", r->path, kname(r, sect, key), nullable ? " or null" : "");
    if (!(*out = strdup(json_string_value(v)))) return qs_fail(r->e, "out of memory");
    return 0;
}

static int get_strs(rd *r, json_t *o, const char *sect, const char *key, int cap, char **out, int *n)
{
    json_t *a = field(r, o, sect, key);
    if (!a) return -1;
    if (!json_is_array(a) || json_array_size(a) > (size_t)cap)
        return qs_fail(r->e, "%s: %s.%s is not a list of at most %d strings", r->path, sect, key, cap);
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_string(v) || json_string_length(v) > 4000)
            return qs_fail(r->e, "%s: %s.%s[%zu] is not a string", r->path, sect, key, i);
        if (!(out[*n] = strdup(json_string_value(v)))) return qs_fail(r->e, "out of memory");
        (*n)++;
    }
    return 0;
}

static int read_model(rd *r, json_t *m, qs_train_state *s)
{
    const char *S = "model";
    json_t *t = field(r, m, S, "tied"), *b = t ? field(r, m, S, "bias") : NULL;
    if (!b) return -1;
    if (!json_is_boolean(t) || !json_is_boolean(b)) return qs_fail(r->e, "%s: model.tied/bias are not booleans", r->path);
    s->tied = json_is_true(t);
    s->bias = json_is_true(b);
    const char *rope = json_string_value(json_object_get(m, "rope"));
    if (!rope || (strcmp(rope, "adjacent") && strcmp(rope, "rotate_half")))
        return qs_fail(r->e, "%s: model.rope is not \"adjacent\" or \"rotate_half\"", r->path);
    s->rope_adjacent = !strcmp(rope, "adjacent");
    return get_i(r, m, S, "layers", 1, 4096, &s->layers) || get_i(r, m, S, "dim", 1, 65536, &s->dim) ||
                   get_i(r, m, S, "heads", 1, 4096, &s->heads) || get_i(r, m, S, "kv_heads", 1, 4096, &s->kv_heads) ||
                   get_i(r, m, S, "head_dim", 1, 4096, &s->head_dim) || get_i(r, m, S, "ffn", 1, 1 << 18, &s->ffn) ||
                   get_i(r, m, S, "vocab", 1, 1 << 22, &s->vocab)
               ? -1
               : 0;
}

static int read_options(rd *r, json_t *o, qs_train_state *s)
{
    const char *S = "options";
    return get_i(r, o, S, "batch", 1, 1 << 16, &s->batch) || get_i(r, o, S, "ctx", 1, 1 << 16, &s->ctx) ||
                   get_i(r, o, S, "accum", 1, 1 << 16, &s->accum) || get_i(r, o, S, "warmup", 0, 1 << 24, &s->warmup) ||
                   get_i(r, o, S, "eval_every", 0, 1 << 24, &s->eval_every) ||
                   get_i(r, o, S, "val_seqs", 1, 1 << 16, &s->val_seqs) ||
                   get_i(r, o, S, "checkpoint_every", 0, 1 << 24, &s->ckpt_every) || get_num(r, o, S, "lr", &s->lr) ||
                   get_num(r, o, S, "min_lr", &s->min_frac) || get_num(r, o, S, "clip", &s->clip) ||
                   get_num(r, o, S, "beta1", &s->beta1) || get_num(r, o, S, "beta2", &s->beta2) ||
                   get_num(r, o, S, "eps", &s->eps) || get_num(r, o, S, "wd", &s->wd) ||
                   get_u64(r, o, S, "seed", &s->seed)
               ? -1
               : 0;
}

static int read_data(rd *r, json_t *d, qs_train_state *s)
{
    const char *S = "data";
    long long nt, nv;
    char *h = NULL;
    if (get_strs(r, d, S, "texts", QS_TRAIN_MAX_TEXTS, s->text, &s->ntext) ||
        get_str(r, d, S, "val_text", 0, &s->val_text) || get_str(r, d, S, "tokenizer", 1, &s->tokenizer) ||
        get_str(r, d, S, "init", 1, &s->init) || get_int(r, d, S, "train_tokens", 1, INT64_MAX, &nt) ||
        get_int(r, d, S, "val_tokens", 1, INT64_MAX, &nv) || get_str(r, d, S, "hash", 0, &h))
        return -1;
    size_t hl = strlen(h);
    int bad = hl != 32 || strspn(h, "0123456789abcdef") != 32 || !s->ntext;
    if (!bad) memcpy(s->data_hash, h, 33);
    free(h);
    if (bad) return qs_fail(r->e, "%s: data.hash is not 32 hex digits or data.texts is empty", r->path);
    s->ntrain = (uint64_t)nt;
    s->nval = (uint64_t)nv;
    return 0;
}

static int read_all(rd *r, json_t *j, qs_train_state *s)
{
    const char *fmt = json_string_value(json_object_get(j, "format"));
    json_t *ver = json_object_get(j, "version");
    if (!fmt || strcmp(fmt, FORMAT_NAME) || !json_is_integer(ver) || json_integer_value(ver) != FORMAT_VERSION)
        return qs_fail(r->e, "%s: not a qscope trainer state of version %d", r->path, FORMAT_VERSION);
    long long t;
    char *tv = NULL;
    json_t *rec = json_object_get(j, "recipe"), *v0 = json_object_get(j, "val0");
    if (get_i(r, j, NULL, "step", 0, 1 << 24, &s->step) || get_i(r, j, NULL, "steps", 0, 1 << 24, &s->steps) ||
        get_int(r, j, NULL, "adam_t", 0, INT64_MAX, &t) || get_u64(r, j, NULL, "sr_calls", &s->sr_calls) ||
        read_model(r, field(r, j, NULL, "model"), s) || read_options(r, field(r, j, NULL, "options"), s) ||
        !field(r, j, NULL, "recipe") || get_str(r, rec, "recipe", "preset", 1, &s->recipe) ||
        get_strs(r, rec, "recipe", "ops", QS_TRAIN_MAX_OPS, s->op, &s->nops) ||
        read_data(r, field(r, j, NULL, "data"), s) || get_str(r, j, NULL, "run_name", 1, &s->run_name) ||
        get_str(r, j, NULL, "tool_version", 0, &tv))
        return -1;
    snprintf(s->tool_version, sizeof s->tool_version, "%s", tv);
    free(tv);
    s->adam_t = (long)t;
    if (s->step > s->steps || s->adam_t != s->step)
        return qs_fail(r->e, "%s: step %d, steps %d and adam_t %ld do not agree", r->path, s->step, s->steps, s->adam_t);
    if (v0 && !json_is_null(v0) && !json_is_number(v0)) return qs_fail(r->e, "%s: val0 is not a number", r->path);
    s->val0 = v0 && json_is_number(v0) ? json_number_value(v0) : NAN;
    return 0;
}

json_t *qs_ckpt_state_load(const char *path, int max_mib, const char *what, qs_err *e)
{
    /* a regular file of sane size (a FIFO would block, a huge file is no state of ours) */
    int fd = qs_open_regular(path, e);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) || st.st_size > ((off_t)max_mib << 20)) {
        close(fd);
        qs_fail(e, "%s: larger than %d MiB, not a %s", path, max_mib, what);
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
    close(fd);
    if (!j) { qs_fail(e, "%s: %s (line %d)", path, je.text, je.line); return NULL; }
    if (!json_is_object(j)) { json_decref(j); qs_fail(e, "%s: not a JSON object", path); return NULL; }
    return j;
}

int qs_train_state_read(const char *dir, qs_train_state *s, qs_err *e)
{
    memset(s, 0, sizeof *s);
    s->val0 = NAN;
    char path[4200];
    snprintf(path, sizeof path, "%.4000s/%s", dir, QS_TRAIN_STATE_FILE);
    json_t *j = qs_ckpt_state_load(path, 16, "trainer state", e);
    if (!j) return -1;
    rd r = {path, e, ""};
    int rc = read_all(&r, j, s);
    json_decref(j);
    if (rc) qs_train_state_free(s);
    return rc;
}

void qs_train_state_free(qs_train_state *s)
{
    free(s->recipe);
    for (int i = 0; i < s->nops; i++) free(s->op[i]);
    for (int i = 0; i < s->ntext; i++) free(s->text[i]);
    free(s->val_text);
    free(s->tokenizer);
    free(s->init);
    free(s->run_name);
    memset(s, 0, sizeof *s);
    s->val0 = NAN;
}
