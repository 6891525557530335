/*
** Stored chunks of `llm eval` variants (llm_eval_chunk.h).
*/
#include "llm_eval_chunk.h"

#include <stdlib.h>
#include <string.h>

#include "results.h"

char *qs_evchunk_options(json_t *variant_key, int c)
{
    json_t *o = json_deep_copy(variant_key);
    if (!o) return NULL;
    json_object_del(o, "chunks");
    json_object_set_new(o, "chunk", json_integer(c));
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

int qs_evchunk_put(qs_db *db, const char *model_hash, const char *label, const char *options, int is_cfg,
                   const qs_eval_var_out *vo, size_t k0, size_t per, const qs_eval_chunk_var *cv, qs_err *e)
{
    const qs_eval_nonfinite *nf = &cv->nf;
    json_t *d = json_pack("{s:I,s:I,s:I,s:i,s:i,s:f}", "scored", (json_int_t)per, "logit_rows", (json_int_t)nf->logit_rows,
                          "activation_values", (json_int_t)nf->act_values, "first_layer", nf->first_layer, "first_site",
                          (int)nf->first_site, "compute_seconds", cv->seconds);
    char *ds = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (!ds) return qs_fail(e, "out of memory");
    int64_t id = 0;
    int rc = qs_result_put(db, model_hash, QS_EVCHUNK_KIND, label, options, ds, &id, e) ||
             qs_result_blob_put(db, id, "nll", vo->nll + k0, per * sizeof(double), e) ||
             (is_cfg && (qs_result_blob_put(db, id, "kl", vo->kl + k0, per * sizeof(double), e) ||
                         qs_result_blob_put(db, id, "dp", vo->dp + k0, per * sizeof(double), e) ||
                         qs_result_blob_put(db, id, "same_top", vo->same_top + k0, per, e)));
    free(ds);
    return rc ? -1 : 0;
}

/* One stored array of chunk row id into dst (exactly n bytes). */
static int get_blob(qs_db *db, int64_t id, const char *label, const char *name, void *dst, size_t n, qs_err *e)
{
    void *b = NULL;
    size_t len = 0;
    if (qs_result_blob_get(db, id, name, &b, &len, e)) return -1;
    int rc = 0;
    if (len != n) rc = qs_fail(e, "stored chunk of %s: its %s array has %zu bytes, not %zu (--force recomputes)", label, name, len, n);
    else memcpy(dst, b, n);
    free(b);
    return rc;
}

int qs_evchunk_get(qs_db *db, const char *model_hash, const char *label, const char *options, int is_cfg,
                   qs_eval_var_out *vo, size_t k0, size_t per, qs_eval_chunk_var *cv, int *found, qs_err *e)
{
    *found = 0;
    char *ds = NULL;
    int64_t id = 0;
    if (qs_result_get(db, model_hash, QS_EVCHUNK_KIND, label, options, &ds, &id, e)) return -1;
    if (!ds) return 0;
    json_t *d = json_loads(ds, 0, NULL);
    free(ds);
    if (!json_is_object(d) || json_integer_value(json_object_get(d, "scored")) != (json_int_t)per) {
        json_decref(d);
        return qs_fail(e, "stored chunk of %s is not a chunk of %zu scored tokens (--force recomputes)", label, per);
    }
    memset(cv, 0, sizeof *cv);
    cv->have = 1;
    cv->nf.logit_rows = (uint64_t)json_integer_value(json_object_get(d, "logit_rows"));
    cv->nf.act_values = (uint64_t)json_integer_value(json_object_get(d, "activation_values"));
    cv->nf.first_layer = (int)json_integer_value(json_object_get(d, "first_layer"));
    cv->nf.first_site = (qs_llm_site)json_integer_value(json_object_get(d, "first_site"));
    cv->seconds = json_real_value(json_object_get(d, "compute_seconds"));
    json_decref(d);
    if (get_blob(db, id, label, "nll", vo->nll + k0, per * sizeof(double), e) ||
        (is_cfg && (get_blob(db, id, label, "kl", vo->kl + k0, per * sizeof(double), e) ||
                    get_blob(db, id, label, "dp", vo->dp + k0, per * sizeof(double), e) ||
                    get_blob(db, id, label, "same_top", vo->same_top + k0, per, e))))
        return -1;
    *found = 1;
    return 0;
}
