/*
** Compute-or-reuse of `llm eval` results (llm_eval_service.h).
*/
#include "llm_eval_service.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze_key.h"
#include "llm_eval_stats.h"
#include "results.h"
#include "../kernels/qs_clock.h"
#include "../kernels/qs_version.h"
#include "../store/json_out.h"

#define KIND "llm_eval"

static json_t *apply_json(const qs_apply *a, int has)
{
    if (!has) return json_string("fp32");
    char *s = qs_quant_opts_json(a);
    json_t *v = s ? json_loads(s, 0, NULL) : NULL;
    free(s);
    return v ? v : json_string(a->f->name);
}

/* The numerics of a variant (part of the cache key). */
static json_t *numerics_json(const qs_eval_cfg *c, int scaled)
{
    if (!c) return json_pack("{s:s}", "reference", "fp32");
    return json_pack("{s:o,s:o,s:o,s:s,s:b}", "weights", apply_json(&c->w, c->has_w), "activations", apply_json(&c->a, c->has_a),
                     "kv_cache", apply_json(&c->kv, c->has_kv), "resq",
                     c->resq == QS_RESQ_DENSE ? "dense" : c->resq == QS_RESQ_24 ? "2:4" : "none", "scaled_casts", scaled);
}

static json_t *hist_json(const qs_klhist *h)
{
    json_t *ed = json_array(), *ct = json_array();
    for (int k = 0; k <= QS_KLHIST_BINS; k++) json_array_append_new(ed, json_real(qs_klhist_edge(k)));
    for (int k = 0; k < QS_KLHIST_BINS; k++) json_array_append_new(ct, json_integer((json_int_t)h->counts[k]));
    return json_pack("{s:s,s:o,s:o,s:I,s:I,s:I,s:I}", "scale", "log2", "edges", ed, "counts", ct, "zero", (json_int_t)h->zero,
                     "under", (json_int_t)h->under, "over", (json_int_t)h->over, "nonfinite", (json_int_t)h->nonfinite);
}

/* Stored data of one variant: its statistics (llm_eval_stats.h), non-finite counts and timing. */
static json_t *variant_json(const qs_eval_summary *s, const qs_eval_nonfinite *nf, int is_cfg, double secs)
{
    json_t *j = json_object();
    json_object_set_new(j, "scored", json_integer((json_int_t)s->n));
    qs_evstats_put(j, s, 1);
    json_object_set_new(j, "nonfinite", json_pack("{s:I,s:I,s:o}", "logit_rows", (json_int_t)nf->logit_rows, "activation_values",
                                                  (json_int_t)nf->act_values, "first_site", nf->first_layer < 0 ? json_null() :
                                                  json_pack("{s:i,s:s}", "layer", nf->first_layer, "site", qs_llm_site_name(nf->first_site))));
    json_object_set_new(j, "compute_seconds", json_real(secs));
    if (!s->n) json_object_set_new(j, "failed", json_true());   /* no finite row: null statistics */
    if (!is_cfg) return j;
    qs_evstats_put(j, s, 0);
    json_object_set_new(j, "kl_hist", hist_json(&s->hist));
    return j;
}

/* Store per-token arrays (float32) beside a result: what later views (sensitivity, plots) read. */
static int put_f32(qs_db *db, int64_t id, const char *name, const double *x, size_t n, qs_err *e)
{
    float *f = malloc((n ? n : 1) * sizeof(float));
    if (!f) return qs_fail(e, "out of memory");
    for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
    int rc = qs_result_blob_put(db, id, name, f, n * sizeof(float), e);
    free(f);
    return rc;
}

/* Every computed variant's summary and per-token arrays, in one transaction; datas[i] becomes the
** stored data of variant i. */
static int store_variants(qs_db *db, const qs_eval_request *rq, json_t *const *keys, const int *want, const qs_eval_out *out,
                          char **datas, int64_t *ids, qs_err *e)
{
    if (qs_db_begin(db, e)) return -1;
    for (int i = 0; i <= rq->ncfg; i++) {
        if (i > 0 && !want[i - 1]) continue;
        qs_eval_summary s;
        if (qs_eval_summarize(&out->var[0], i ? &out->var[i] : NULL, out->n, &s, e)) goto fail;
        json_t *d = variant_json(&s, &out->var[i].nf, i > 0, out->var[i].fwd_seconds + out->var[i].head_seconds);
        /* names for the readers of stored results (workbench, plot kl, report): the key holds only hashes */
        json_t *run = json_object();
        qs_json_set_text(run, "model", rq->f->name);
        qs_json_set_text(run, "text", rq->text_path);
        json_object_set_new(run, "tensor_types", json_string(rq->f->wtypes));
        json_object_set_new(d, "run", run);
        char *ds = json_dumps(d, JSON_COMPACT), *ks = json_dumps(keys[i], JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(d);
        int64_t id = 0;
        int bad = !ds || !ks ? qs_fail(e, "out of memory") :
                  qs_result_put(db, rq->f->hash, KIND, i ? rq->cfg[i - 1].label : "reference", ks, ds, &id, e) ||
                  put_f32(db, id, "nll", out->var[i].nll, out->n, e) ||
                  (i && (put_f32(db, id, "kl", out->var[i].kl, out->n, e) || put_f32(db, id, "dp", out->var[i].dp, out->n, e)));
        free(ks);
        free(datas[i]);
        datas[i] = ds;
        ids[i] = id;
        if (bad) goto fail;
    }
    if (!qs_db_commit(db, e)) return 0;
fail:
    qs_db_rollback(db);
    return -1;
}

/* The variants to compute: each wanted configuration's weights rounded once (configurations with the
** same weight format share one rounded copy) and its numerics. */
static int make_variants(qs_eval_request *rq, int *want, qs_eval_variant *var, qs_err *e)
{
    const qs_llm_model *base = &rq->f->m;
    for (int i = 0; i < rq->ncfg; i++) {
        qs_eval_cfg *c = &rq->cfg[i];
        c->m = base;
        if (want[i] || rq->force) want[i] = 1;
        if (c->has_w && want[i]) {
            char *wj = qs_quant_opts_json(&c->w);
            for (int k = 0; k < i && wj; k++) {
                char *kj = rq->cfg[k].has_w && rq->cfg[k].wm.arena ? qs_quant_opts_json(&rq->cfg[k].w) : NULL;
                if (kj && !strcmp(kj, wj)) c->m = &rq->cfg[k].wm;
                free(kj);
                if (c->m != base) break;
            }
            free(wj);
            if (c->m == base) {
                if (qs_llm_clone(&c->wm, base, e) || qs_llm_quantize_weights(&c->wm, &c->w, rq->scaled, e)) return -1;
                c->m = &c->wm;
            }
        }
        var[i].m = c->m;
        var[i].nx = (qs_llm_numerics){c->has_a ? &c->a : NULL, c->resq, c->has_kv ? &c->kv : NULL, rq->scaled, NULL};
    }
    return 0;
}

/* Chunks x configurations on the ranks; rank 0 ends with every per-token result and stores it. */
static int compute(qs_db *db, qs_eval_request *rq, json_t *const *keys, int *want, char **datas, int64_t *ids,
                   qs_eval_result *res, qs_err *e)
{
    qs_eval_variant *var = calloc((size_t)(rq->ncfg ? rq->ncfg : 1), sizeof *var);
    if (!var) return qs_fail(e, "out of memory");
    qs_eval_shard sh;
    memset(&sh, 0, sizeof sh);
    int rc = -1;
    if (make_variants(rq, want, var, e)) goto done;
    double t0 = qs_now_s();
    if (qs_eval_shard_init(&sh, &rq->f->m, var, want, rq->ncfg, rq->ids, rq->nids, &rq->su, e) || rq->run(&sh, rq->what, e))
        goto done;
    res->compute_seconds = qs_now_s() - t0;
    if (rq->rank == 0 && store_variants(db, rq, keys, want, &sh.out, datas, ids, e)) goto done;
    rc = 0;
done:
    qs_eval_shard_free(&sh);
    free(var);
    return rc;
}

/* One stored per-token array (float32) of result id into x[0 .. n). */
static int get_f32(qs_db *db, int64_t id, const char *name, double *x, size_t n, qs_err *e)
{
    void *b = NULL;
    size_t len = 0;
    if (qs_result_blob_get(db, id, name, &b, &len, e)) return -1;
    if (len != n * sizeof(float)) { free(b); return qs_fail(e, "stored %s array of an llm eval result has %zu bytes, not %zu", name, len, n * sizeof(float)); }
    const float *f = b;
    for (size_t i = 0; i < n; i++) x[i] = f[i];
    free(b);
    return 0;
}

/* res->tok: every variant's stored per-token arrays. */
static int load_tokens(qs_db *db, const qs_eval_request *rq, const int64_t *ids, qs_eval_result *res, qs_err *e)
{
    const qs_eval_setup *s = &rq->su;
    size_t n = qs_eval_ntok(s);
    res->per_chunk = s->nchunks > 0 ? n / (size_t)s->nchunks : 0;
    if (qs_eval_out_alloc(&res->tok, n, NULL, rq->ncfg)) return qs_fail(e, "out of memory");
    for (int i = 0; i <= rq->ncfg; i++) {
        qs_eval_var_out *v = &res->tok.var[i];
        if (get_f32(db, ids[i], "nll", v->nll, n, e) || (i && (get_f32(db, ids[i], "kl", v->kl, n, e) ||
                                                              get_f32(db, ids[i], "dp", v->dp, n, e))))
            return -1;
    }
    return 0;
}

/* The answer from the stored (or just computed) data. */
static int answer(const qs_eval_request *rq, json_t *const *keys, const int *want, char **datas, int computed,
                  qs_eval_result *res, qs_err *e)
{
    res->ref = json_loads(datas[0], 0, NULL);
    if (!res->ref) return qs_fail(e, "stored reference result is not JSON");
    json_object_set_new(res->ref, "cached", json_boolean(!computed));
    qs_evstats_mark_failed(res->ref);   /* also of results stored before a failure was marked */
    for (int i = 0; i < rq->ncfg; i++) {
        json_t *c = json_loads(datas[i + 1], 0, NULL);
        if (!c) return qs_fail(e, "stored result of %s is not JSON", rq->cfg[i].label);
        json_t *obj = json_pack("{s:s,s:O}", "label", rq->cfg[i].label, "numerics", json_object_get(keys[i + 1], "numerics"));
        json_object_update(obj, c);
        json_decref(c);
        qs_evstats_mark_failed(obj);
        json_object_set_new(obj, "cached", json_boolean(!(computed && want[i])));
        json_array_append_new(res->cfgs, obj);
    }
    return 0;
}

int qs_eval_service(qs_db *db, qs_eval_request *rq, qs_eval_result *res, qs_err *e)
{
    memset(res, 0, sizeof *res);
    const int n = rq->ncfg + 1;
    json_t **keys = calloc((size_t)n, sizeof *keys);
    char **datas = calloc((size_t)n, sizeof *datas);
    int64_t *ids = calloc((size_t)n, sizeof *ids);
    int *want = calloc((size_t)n, sizeof *want), rc = -1, nwant = 0, need_ref = rq->force;
    res->cfgs = json_array();
    if (!keys || !datas || !ids || !want || !res->cfgs) { qs_fail(e, "out of memory"); goto done; }
    /* cache keys: one result per variant */
    for (int i = 0; i <= rq->ncfg; i++) {
        keys[i] = json_pack("{s:s,s:i,s:i,s:s,s:i,s:o}", "text", rq->text_hash, "ctx", rq->su.ctx, "chunks", rq->su.nchunks, "score",
                            rq->su.score_all ? "all" : "half", "bos", rq->su.bos, "numerics",
                            numerics_json(i ? &rq->cfg[i - 1] : NULL, rq->scaled));
        char *ks = keys[i] ? json_dumps(keys[i], JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (!ks) { qs_fail(e, "out of memory"); goto done; }
        int bad = !rq->force && qs_result_get(db, rq->f->hash, KIND, i ? rq->cfg[i - 1].label : "reference", ks, &datas[i], &ids[i], e);
        free(ks);
        if (bad) goto done;
        if (i == 0) need_ref |= !datas[0];
        else { want[i - 1] = !datas[i]; nwant += want[i - 1]; }
    }
    if (nwant) need_ref = 1;
    if (need_ref && compute(db, rq, keys, want, datas, ids, res, e)) goto done;
    res->computed = need_ref;
    rc = rq->rank > 0 ? 0 : (answer(rq, keys, want, datas, need_ref, res, e) || load_tokens(db, rq, ids, res, e)) ? -1 : 0;
done:
    for (int i = 0; i < n && keys && datas; i++) { json_decref(keys[i]); free(datas[i]); }
    free(keys);
    free(datas);
    free(ids);
    free(want);
    if (rc) qs_eval_result_free(res);
    return rc;
}

void qs_eval_result_free(qs_eval_result *r)
{
    json_decref(r->ref);
    json_decref(r->cfgs);
    r->ref = r->cfgs = NULL;
    qs_eval_out_free(&r->tok);
}

void qs_eval_cfgs_free(qs_eval_cfg *cfg, int n)
{
    for (int i = 0; i < n; i++)
        if (cfg[i].wm.arena) qs_llm_free(&cfg[i].wm);
}
