/* grpo_state.json (grpo_state.h).  Reals with 17 significant digits read back bit for bit; the call
** counters, which may exceed 2^63, are decimal strings. */
#include "grpo_state.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/qs_version.h"
#include "train_ckpt.h"

#define FORMAT_NAME "qscope grpo_state"
#define FORMAT_VERSION 1

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }
static json_t *u64_str(uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    return json_string(b);
}

int qs_grpo_state_write(const char *path, const void *p, qs_err *e)
{
    const qs_grpo_ckpt_state *s = p;
    json_t *args = json_array();
    for (int i = 0; i < s->nargs; i++) json_array_append_new(args, json_string(s->args[i]));
    json_t *j = json_pack("{s:s,s:i,s:s,s:i,s:i,s:I,s:f,s:o,s:o,s:o,s:o,s:o,s:s,s:o,s:i}", "format", FORMAT_NAME,
                          "version", FORMAT_VERSION, "tool_version", QS_VERSION " (" QS_GIT_REV ")", "step", s->step,
                          "steps", s->steps, "adam_t", (json_int_t)s->adam_t, "lambda", s->lambda, "sr_calls",
                          u64_str(s->calls), "sr_calls_init", u64_str(s->calls0), "args", args, "model",
                          str_or_null(s->model), "init", str_or_null(s->init_dir), "init_hash", s->init_hash,
                          "run_name", str_or_null(s->run_name), "checkpoint_every", s->ckpt_every);
    if (!j) return qs_fail(e, "%s: out of memory", path);
    int rc = json_dump_file(j, path, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    json_decref(j);
    return rc ? qs_fail(e, "%s: cannot write", path) : 0;
}

/* ---- reading: each check names the field it refuses ---- */

static int bad(qs_err *e, const char *path, const char *key, const char *what)
{
    return qs_fail(e, "%s: %s %s", path, key, what);
}

static int get_int(const char *path, json_t *j, const char *key, long long lo, long long hi, long long *out, qs_err *e)
{
    json_t *v = json_object_get(j, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return qs_fail(e, "%s: %s is missing or not an integer in %lld..%lld", path, key, lo, hi);
    *out = json_integer_value(v);
    return 0;
}

static int get_u64(const char *path, json_t *j, const char *key, uint64_t *out, qs_err *e)
{
    const char *s = json_string_value(json_object_get(j, key));
    char *end = NULL;
    if (s && *s >= '0' && *s <= '9' && strlen(s) <= 20) *out = strtoull(s, &end, 10);
    if (!end || *end) return bad(e, path, key, "is missing or not a decimal string");
    return 0;
}

static int get_str(const char *path, json_t *j, const char *key, int nullable, char **out, qs_err *e)
{
    json_t *v = json_object_get(j, key);
    *out = NULL;
    if (nullable && json_is_null(v)) return 0;
    if (!json_is_string(v) || json_string_length(v) > 4000 || !json_string_length(v))
        return bad(e, path, key, nullable ? "is missing or not a string or null" : "is missing or not a string");
    if (!(*out = strdup(json_string_value(v)))) return qs_fail(e, "out of memory");
    return 0;
}

static int read_all(const char *path, json_t *j, qs_grpo_ckpt_state *s, qs_err *e)
{
    const char *fmt = json_string_value(json_object_get(j, "format"));
    json_t *ver = json_object_get(j, "version"), *lam = json_object_get(j, "lambda"), *a = json_object_get(j, "args");
    if (!fmt || strcmp(fmt, FORMAT_NAME) || !json_is_integer(ver) || json_integer_value(ver) != FORMAT_VERSION)
        return qs_fail(e, "%s: not a qscope grpo state of version %d", path, FORMAT_VERSION);
    long long step, steps, t, every;
    char *h = NULL;
    if (get_int(path, j, "step", 0, 1 << 20, &step, e) || get_int(path, j, "steps", 0, 1 << 20, &steps, e) ||
        get_int(path, j, "adam_t", 0, 1 << 20, &t, e) || get_int(path, j, "checkpoint_every", 1, 1 << 20, &every, e) ||
        get_u64(path, j, "sr_calls", &s->calls, e) || get_u64(path, j, "sr_calls_init", &s->calls0, e) ||
        get_str(path, j, "model", 1, &s->model, e) || get_str(path, j, "init", 0, &s->init_dir, e) ||
        get_str(path, j, "run_name", 1, &s->run_name, e) || get_str(path, j, "init_hash", 0, &h, e))
        return -1;
    int hok = strlen(h) == 32 && strspn(h, "0123456789abcdef") == 32;
    if (hok) memcpy(s->init_hash, h, 33);
    free(h);
    if (!hok) return bad(e, path, "init_hash", "is not 32 hex digits");
    if (!json_is_number(lam) || !isfinite(json_number_value(lam))) return bad(e, path, "lambda", "is not a finite number");
    if (!json_is_array(a) || json_array_size(a) > QS_GRPO_STATE_MAX_ARGS)
        return bad(e, path, "args", "is not a list of at most 64 strings");
    for (size_t i = 0; i < json_array_size(a); i++) {
        const char *v = json_string_value(json_array_get(a, i));
        if (!v || strncmp(v, "--", 2) || strlen(v) > 4000) return qs_fail(e, "%s: args[%zu] is not an option", path, i);
        if (!(s->args[s->nargs] = strdup(v))) return qs_fail(e, "out of memory");
        s->nargs++;
    }
    s->step = (int)step;
    s->steps = (int)steps;
    s->adam_t = (long)t;
    s->ckpt_every = (int)every;
    s->lambda = json_number_value(lam);
    if (s->step > s->steps || s->adam_t != s->step)
        return qs_fail(e, "%s: step %d, steps %d and adam_t %ld do not agree", path, s->step, s->steps, s->adam_t);
    return 0;
}

int qs_grpo_state_read(const char *dir, qs_grpo_ckpt_state *s, qs_err *e)
{
    memset(s, 0, sizeof *s);
    char path[4200];
    snprintf(path, sizeof path, "%.4000s/%s", dir, QS_GRPO_STATE_FILE);
    json_t *j = qs_ckpt_state_load(path, 1, "grpo state", e);
    if (!j) return -1;
    int rc = read_all(path, j, s, e);
    json_decref(j);
    if (rc) qs_grpo_state_free(s);
    return rc;
}

void qs_grpo_state_free(qs_grpo_ckpt_state *s)
{
    for (int i = 0; i < s->nargs; i++) free(s->args[i]);
    free(s->model);
    free(s->init_dir);
    free(s->run_name);
    memset(s, 0, sizeof *s);
}
