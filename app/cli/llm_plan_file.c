/*
** Plan files read back (see llm_plan_file.h; the format is docs/llm.md "Plans across formats").
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "cli.h"
#include "llm_plan_file.h"
#include "../../kernels/format.h"

#define MAX_PLAN_BYTES (64u << 20)

int qs_plan_file_is_plan(json_t *j) { return json_object_get(j, "qscope_plan") != NULL; }

void qs_plan_file_free(qs_plan_file *p)
{
    qs_plan_numerics_free(&p->pn);
    free(p->cellfmt);
    free(p->cell);
    memset(p, 0, sizeof *p);
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= MAX_PLAN_BYTES) { errno = EFBIG; break; }
            char *nb = realloc(buf, cap ? 2 * cap : 4096);
            if (!nb) break;
            buf = nb;
            cap = cap ? 2 * cap : 4096;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0) {
            if (ferror(f)) break;
            fclose(f);
            *n = len;
            return buf;
        }
    }
    int err = errno;
    fclose(f);
    free(buf);
    errno = err ? err : EIO;
    return NULL;
}

/* The format index of spec (added when new): -1 with a message. */
static int format_of(const char *cmd, qs_plan_file *p, const char *spec, int site, int layer, int *rc)
{
    for (int i = 0; i < p->nfmt; i++)
        if (!strcmp(p->spec[i], spec)) return i;
    char name[96];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(spec, ":"), spec);
    if (!qs_format_find(name)) {
        *rc = qs_cli_error(QS_EXIT_USAGE, "%s: layer %d, site %s: unknown format '%s' (see `qscope formats`)", qs_esc(p->path), layer,
                           qs_sens_site_name(site), qs_esc(name));
        return -1;
    }
    if (p->nfmt == QS_PLAN_FILE_MAXFMT || strlen(spec) >= sizeof p->spec[0]) {
        *rc = qs_cli_error(QS_EXIT_ERR, "%s: more than %d formats, or a spec that long", qs_esc(p->path), QS_PLAN_FILE_MAXFMT);
        return -1;
    }
    qs_apply *a = &p->fmt[p->nfmt];
    char what[640];
    snprintf(what, sizeof what, "%s: layer %d, site %s: ", p->path, layer, qs_sens_site_name(site));
    if (qs_llm_parse_fmt(cmd, spec, a) ||
        qs_llm_fmt_site_check(cmd, what, spec, a, site == QS_SENS_W ? NULL : "activations and the KV cache")) {
        *rc = QS_EXIT_USAGE;
        return -1;
    }
    snprintf(p->spec[p->nfmt], sizeof p->spec[0], "%s", spec);
    return p->nfmt++;
}

/* The "layers" array: one object per layer, {"layer": l, SITE: {"format": SPEC, ...}, ...}. */
static int read_layers(const char *cmd, qs_plan_file *p, json_t *la)
{
    const char *path = qs_esc(p->path);
    if (!json_is_array(la) || (int)json_array_size(la) != p->layers)
        return qs_cli_error(QS_EXIT_ERR, "%s: \"layers\" is not an array of %d layers", path, p->layers);
    for (int l = 0; l < p->layers; l++) {
        json_t *x = json_array_get(la, (size_t)l), *v;
        const char *key;
        if (!json_is_object(x) || json_integer_value(json_object_get(x, "layer")) != l || !json_is_integer(json_object_get(x, "layer")))
            return qs_cli_error(QS_EXIT_ERR, "%s: layers[%d] is not {\"layer\": %d, ...}", path, l, l);
        json_object_foreach(x, key, v) {
            if (!strcmp(key, "layer")) continue;
            int s = qs_sens_site_parse(key), rc = 0;
            if (s < 0)
                return qs_cli_error(QS_EXIT_ERR, "%s: layer %d: unknown site '%s' (attn_in, attn_out, ffn_in, ffn_down_in, kv, w)",
                                    path, l, qs_esc(key));
            const char *spec = json_string_value(json_object_get(v, "format"));
            if (!spec) return qs_cli_error(QS_EXIT_ERR, "%s: layer %d, site %s: no \"format\" string", path, l, key);
            if (!strcmp(spec, "fp32")) continue;
            int f = format_of(cmd, p, spec, s, l, &rc);
            if (f < 0) return rc;
            p->cellfmt[l * QS_SENS_NSITE + s] = f;
        }
    }
    return 0;
}

int qs_plan_file_read(const char *cmd, const char *path, qs_plan_file *p)
{
    memset(p, 0, sizeof *p);
    snprintf(p->path, sizeof p->path, "%s", path);
    size_t n = 0;
    char *buf = slurp(path, &n);
    if (!buf) return qs_cli_error(QS_EXIT_ERR, "%s: cannot read: %s", qs_esc(path), strerror(errno));
    snprintf(p->hash, sizeof p->hash, "%016llx", (unsigned long long)XXH64(buf, n, 0));
    json_error_t je;
    json_t *j = json_loadb(buf, n, 0, &je);
    free(buf);
    if (!j) return qs_cli_error(QS_EXIT_ERR, "%s: not JSON (line %d: %s)", qs_esc(path), je.line, je.text);
    json_t *m = json_object_get(j, "model");
    json_t *nl = json_object_get(m, "layers");
    const char *mh = json_string_value(json_object_get(m, "hash")), *mn = json_string_value(json_object_get(m, "name"));
    int rc = 0;
    if (!json_is_object(j) || json_integer_value(json_object_get(j, "qscope_plan")) != 1)
        rc = qs_cli_error(QS_EXIT_ERR, "%s: not a qscope plan file (no \"qscope_plan\": 1; `llm sensitivity --formats ... --bits B` "
                          "writes them)", qs_esc(path));
    else if (!mh || strlen(mh) >= sizeof p->model_hash || !json_is_integer(nl) || json_integer_value(nl) < 1 ||
             json_integer_value(nl) > 4096)
        rc = qs_cli_error(QS_EXIT_ERR, "%s: no model {\"hash\", \"layers\"} in the plan", qs_esc(path));
    if (!rc) {
        snprintf(p->model_hash, sizeof p->model_hash, "%s", mh);
        snprintf(p->model_name, sizeof p->model_name, "%s", mn ? mn : "");
        p->layers = (int)json_integer_value(nl);
        static const char *const sk[5] = {"dim", "n_head", "n_kv_head", "head_dim", "ffn"};
        for (int i = 0; i < 5; i++) p->shape[i] = (int)json_integer_value(json_object_get(json_object_get(m, "shape"), sk[i]));
        json_t *sc = json_object_get(j, "scaled_casts");
        p->scaled = !json_is_false(sc);
        p->cellfmt = malloc((size_t)p->layers * QS_SENS_NSITE * sizeof *p->cellfmt);
        p->cell = calloc((size_t)p->layers * QS_SENS_NSITE, sizeof *p->cell);
        if (!p->cellfmt || !p->cell) rc = qs_cli_error(QS_EXIT_ERR, "out of memory");
        for (int i = 0; !rc && i < p->layers * QS_SENS_NSITE; i++) p->cellfmt[i] = -1;
        if (!rc) rc = read_layers(cmd, p, json_object_get(j, "layers"));
    }
    json_decref(j);
    if (rc) qs_plan_file_free(p);
    return rc;
}

int qs_plan_file_bind(const char *cmd, qs_plan_file *p, const qs_llm_file *f, int scaled)
{
    (void)cmd;
    if (strcmp(p->model_hash, f->hash) || p->layers != f->m.c.n_layer)
        return qs_cli_error(QS_EXIT_ERR, "%s: a plan for another model (%s, %d layers, hash %.12s), not this one (%d layers, hash "
                            "%.12s)", qs_esc(p->path), p->model_name[0] ? qs_esc(p->model_name) : "unnamed", p->layers,
                            p->model_hash, f->m.c.n_layer, f->hash);
    for (int i = 0; i < p->layers * QS_SENS_NSITE; i++) p->cell[i] = p->cellfmt[i] < 0 ? NULL : &p->fmt[p->cellfmt[i]];
    qs_err e = {{0}};
    if (qs_plan_numerics_make(&f->m, p->cell, scaled, &p->pn, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    return 0;
}

int qs_plan_file_cfg(const char *cmd, const char *path, qs_plan_file *p, qs_eval_cfg *c)
{
    memset(c, 0, sizeof *c);
    int rc = qs_plan_file_read(cmd, path, p);
    if (rc) return rc;
    snprintf(c->plan_hash, sizeof c->plan_hash, "%s", p->hash);
    const char *b = strrchr(path, '/');
    snprintf(c->label, sizeof c->label, "plan:%.200s@%.12s", b ? b + 1 : path, p->hash);
    return 0;
}

int qs_plan_file_bind_cfg(const char *cmd, qs_plan_file *p, qs_eval_cfg *c, const qs_llm_file *f, int scaled)
{
    int rc = qs_plan_file_bind(cmd, p, f, scaled);
    if (!rc) c->plan = &p->pn;
    return rc;
}
