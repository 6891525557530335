/*
** Compute-or-reuse of `llm eval` results (llm_eval_service.h).
*/
#include "llm_eval_service.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze_key.h"
#include "llm_plan_model.h"
#include "llm_eval_chunk.h"
#include "llm_eval_stats.h"
#include "results.h"
#include "../kernels/llm_wfly.h"
#include "../kernels/qs_clock.h"
#include "../kernels/qs_stop.h"
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

static json_t *numerics_json(const qs_eval_cfg *c, int scaled, const qs_calib_src *cs);
/* With an importance matrix: the file's hash beside the weights' format (imatrix absent otherwise, so
** the keys of stored results without one are unchanged). */
static json_t *imatrix_numerics(const qs_eval_cfg *c, int scaled, const qs_calib_src *cs)
{
    qs_eval_cfg plain = *c;
    plain.imat = NULL;
    json_t *j = numerics_json(&plain, scaled, cs);
    if (j) json_object_set_new(j, "imatrix", json_string(c->imat_hash));
    return j;
}

int qs_eval_cfg_round(qs_eval_cfg *c, const qs_llm_model *ref, int scaled, qs_err *e)
{
    if (!c->imat) {   /* mapped weights: rounded layer by layer (kernels/llm_wfly.h); else an FP32 copy */
        if (qs_llm_round_copy(&c->wm, ref, &c->w, scaled, e)) return -1;
        c->m = &c->wm;
        return 0;
    }
    if (qs_llm_clone(&c->wm, ref, e)) return -1;
    if (c->imat ? qs_llm_quantize_weights_imatrix(&c->wm, &c->w, c->imat, &c->imat_use, e)
                : qs_llm_quantize_weights(&c->wm, &c->w, scaled, e)) return -1;
    c->m = &c->wm;
    return 0;
}

/* rot= and rht= of a configuration, as their canonical texts (a key only for a configuration that has
** them: results stored before the transforms keep their keys). */
static void transform_json(json_t *num, const qs_llm_xspec *x)
{
    if (!num || !qs_llm_xspec_any(x)) return;
    json_t *t = json_object();
    char buf[96];
    for (int i = 0; i < 2; i++) {
        const char *k = i ? "rht" : "rot";
        qs_llm_xspec_text(x, k, buf, sizeof buf);
        if (buf[0]) json_object_set_new(t, k, json_string(buf));
    }
    json_object_set_new(num, "transform", t);
}

/* The numerics of a variant (part of the cache key); a transform's part only when there is one, so the
** keys of configurations without stay as they were (rot=/rht= and the calibration transforms are never
** combined: qs_llm_parse_config refuses it). */
static json_t *numerics_json(const qs_eval_cfg *c, int scaled, const qs_calib_src *cs)
{
    if (!c) return json_pack("{s:s}", "reference", "fp32");
    if (c->plan) return json_pack("{s:s,s:b}", "plan", c->plan_hash, "scaled_casts", scaled);
    if (c->imat) return imatrix_numerics(c, scaled, cs);
    json_t *tj = cs ? qs_wtrans_json(&c->wt, cs) : NULL, *j = json_pack("{s:o,s:o,s:o,s:s,s:b}", "weights", apply_json(&c->w, c->has_w), "activations", apply_json(&c->a, c->has_a),
                     "kv_cache", apply_json(&c->kv, c->has_kv), "resq",
                     c->resq == QS_RESQ_DENSE ? "dense" : c->resq == QS_RESQ_24 ? "2:4" : "none", "scaled_casts", scaled);
    if (tj) json_object_set_new(j, "transform", tj);
    transform_json(j, &c->xs);
    return j;
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

/* One evaluation under way: the variants, what is stored of their chunks and what this run computed. */
typedef struct svc {
    qs_db *db;
    qs_eval_request *rq;
    int nv, K;                /* variants (the reference and the configurations); chunks asked for */
    size_t per;               /* scored tokens per chunk */
    json_t **keys;            /* per variant: the key of its "llm_eval" result */
    char **datas;             /* per variant: its stored data (the answer) */
    int64_t *ids;
    int *done;                /* the variant's "llm_eval" result is reused as it is */
    int *active;              /* assembled from chunks (not done; the reference whenever a configuration is) */
    uint8_t *have, *fresh;    /* [K x nv]: chunk stored; stored by this run */
    qs_eval_chunk_var *cv;    /* [K x nv]: its non-finite counts and seconds */
    qs_eval_out all;          /* the active variants' per-token results over the K chunks */
    const qs_eval_out *outp;  /* where they are: &all, or the shard's out during the run */
    int kdone, kfinal;        /* chunks 0..kdone-1 complete for every active variant; chunks of the answer */
    int todo, computed;       /* chunks to compute, computed */
    double *scratch;          /* until: one value per scored token */
} svc;

#define AT(S, c, v) ((size_t)(c) * (size_t)(S)->nv + (size_t)(v))

static const char *label_of(const svc *S, int v) { return v ? S->rq->cfg[v - 1].label : "reference"; }

/* Every active variant not reused whole, over the first kfinal chunks: its summary, non-finite counts
** and seconds summed over its chunks in order, and its per-token arrays, in one transaction;
** datas[v] becomes its stored data. */
static int store_variants(svc *S, qs_err *e)
{
    const qs_eval_request *rq = S->rq;
    const size_t n = (size_t)S->kfinal * S->per;
    if (qs_db_begin(S->db, e)) return -1;
    for (int v = 0; v < S->nv; v++) {
        if (!S->active[v] || S->done[v]) continue;
        qs_eval_summary s;
        if (qs_eval_summarize(&S->all.var[0], v ? &S->all.var[v] : NULL, n, &s, e)) goto fail;
        qs_eval_nonfinite nf = {0, 0, -1, 0};
        double secs = 0;
        for (int c = 0; c < S->kfinal; c++) {
            const qs_eval_chunk_var *cv = &S->cv[AT(S, c, v)];
            if (nf.first_layer < 0 && cv->nf.first_layer >= 0) { nf.first_layer = cv->nf.first_layer; nf.first_site = cv->nf.first_site; }
            nf.logit_rows += cv->nf.logit_rows;
            nf.act_values += cv->nf.act_values;
            secs += cv->seconds;
        }
        json_t *d = variant_json(&s, &nf, v > 0, secs);
        /* names for the readers of stored results (workbench, plot kl, report): the key holds only hashes */
        json_t *run = json_object();
        qs_json_set_text(run, "model", rq->f->name);
        qs_json_set_text(run, "text", rq->text_path);
        json_object_set_new(run, "tensor_types", json_string(rq->f->wtypes));
        json_object_set_new(d, "run", run);
        char *ds = json_dumps(d, JSON_COMPACT), *ks = json_dumps(S->keys[v], JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(d);
        int64_t id = 0;
        const qs_eval_var_out *vo = &S->all.var[v];
        int bad = !ds || !ks ? qs_fail(e, "out of memory") :
                  qs_result_put(S->db, rq->f->hash, KIND, label_of(S, v), ks, ds, &id, e) ||
                  put_f32(S->db, id, "nll", vo->nll, n, e) ||
                  (v && (put_f32(S->db, id, "kl", vo->kl, n, e) || put_f32(S->db, id, "dp", vo->dp, n, e)));
        free(ks);
        free(S->datas[v]);
        S->datas[v] = ds;
        S->ids[v] = id;
        if (bad) goto fail;
    }
    if (!qs_db_commit(S->db, e)) return 0;
fail:
    qs_db_rollback(S->db);
    return -1;
}

/* rot=, rht=: the configuration's own transformed copy of the model (kernels/llm_rot.h), its weights
** then rounded. */
static int transformed_model(qs_eval_cfg *c, const qs_llm_model *base, int scaled, qs_err *e)
{
    if (!c->wm.arena && (qs_llm_transform(&c->wm, base, &c->xs, &c->on, e) ||
                         (c->has_w && qs_llm_transform_quantize(&c->wm, base, &c->w, scaled, e))))
        return -1;
    c->m = &c->wm;
    return 0;
}

/* A configuration with calibration transforms: its own transformed, rounded copy (llm_wtrans.h). */
static int make_transformed(qs_eval_request *rq, qs_eval_cfg *c, qs_calib *cache, qs_err *e)
{
    if (!rq->calib) return qs_fail(e, "%s: the transforms need a calibration text (--calib FILE)", c->label);
    if (qs_wtrans_build(&c->wm, &rq->f->m, &c->wt, c->has_w ? &c->w : NULL, rq->scaled, rq->calib, cache, e)) return -1;
    c->m = &c->wm;
    return 0;
}

/* The variants to compute: each wanted configuration's weights rounded once (configurations with the
** same weight format share one rounded copy) and its numerics. */
static int make_variants(qs_eval_request *rq, const int *want, qs_eval_variant *var, qs_err *e)
{
    const qs_llm_model *base = &rq->f->m;
    qs_calib cache;
    memset(&cache, 0, sizeof cache);
    for (int i = 0; i < rq->ncfg; i++) {
        qs_eval_cfg *c = &rq->cfg[i];
        c->m = base;
        if (qs_stop_requested()) { qs_calib_free(&cache); return qs_fail(e, "interrupted"); }   /* rounding takes seconds */
        if (want[i] && qs_wtrans_on(&c->wt)) {
            if (make_transformed(rq, c, &cache, e)) { qs_calib_free(&cache); return -1; }
        } else if (qs_llm_xspec_any(&c->xs) && want[i]) {
            if (transformed_model(c, base, rq->scaled, e)) { qs_calib_free(&cache); return -1; }
        } else if (c->has_w && want[i]) {
            char *wj = qs_quant_opts_json(&c->w);
            for (int k = 0; k < i && wj; k++) {
                char *kj = rq->cfg[k].has_w && rq->cfg[k].wm.arena && !qs_llm_xspec_any(&rq->cfg[k].xs) && !qs_wtrans_on(&rq->cfg[k].wt)
                               ? qs_quant_opts_json(&rq->cfg[k].w) : NULL;
                if (kj && !strcmp(kj, wj) && !strcmp(rq->cfg[k].imat_hash, c->imat_hash)) c->m = &rq->cfg[k].wm;
                free(kj);
                if (c->m != base) break;
            }
            free(wj);
            if (c->m == base && qs_eval_cfg_round(c, base, rq->scaled, e)) { qs_calib_free(&cache); return -1; }
        }
        if (c->plan) { var[i] = qs_plan_variant(c->plan, rq->scaled); continue; }   /* llm_plan_model.h */
        var[i].m = c->m;
        var[i].nx = (qs_llm_numerics){c->has_a ? &c->a : NULL, c->resq, c->has_kv ? &c->kv : NULL, rq->scaled, NULL, NULL};
        var[i].nx.online = c->on;
    }
    qs_calib_free(&cache);
    return 0;
}

/* --until-ci: the 95% interval of every configuration's dPPL (or KL mean) over the first k chunks is
** narrower than the target (a configuration without statistics holds nothing back).  The means and
** standard errors of qs_eval_summarize, over the same tokens, without its quantiles. */
static int narrow_enough(svc *S, int k, int *ok, qs_err *e)
{
    const size_t n = (size_t)k * S->per;
    if (!S->scratch && !(S->scratch = malloc((size_t)S->K * S->per * sizeof *S->scratch))) return qs_fail(e, "out of memory");
    const qs_eval_var_out *ref = &S->outp->var[0];
    *ok = 1;
    for (int v = 1; v < S->nv && *ok; v++) {
        const qs_eval_var_out *q = &S->outp->var[v];
        size_t m = 0;
        for (size_t t = 0; t < n; t++)
            if (isfinite(ref->nll[t]) && isfinite(q->nll[t])) S->scratch[m++] = S->rq->until_kl ? q->kl[t] : q->nll[t] - ref->nll[t];
        if (!m) continue;
        double mean, se;
        qs_mean_se(S->scratch, m, &mean, &se);
        double w = 2 * 1.959964 * (S->rq->until_kl ? se : exp(mean) * se);
        if (isfinite(w) && !(w < S->rq->until)) *ok = 0;
    }
    return 0;
}

/* Move kdone past the chunks complete for every active variant; with until, stop at the first count
** (at least 2 chunks) whose intervals are narrow enough. */
static int advance(svc *S, qs_err *e)
{
    while (!S->kfinal && S->kdone < S->K) {
        for (int v = 0; v < S->nv; v++)
            if (S->active[v] && !S->have[AT(S, S->kdone, v)]) return 0;
        S->kdone++;
        int ok = 0;
        if (S->rq->until > 0 && S->kdone >= 2 && narrow_enough(S, S->kdone, &ok, e)) return -1;
        if (ok) S->kfinal = S->kdone;
    }
    return 0;
}

static void tick(const svc *S)
{
    if (!S->rq->tick) return;
    qs_eval_tick t = {S->kfinal ? S->kfinal : S->kdone, S->kfinal ? S->kfinal : S->K, S->computed, S->todo};
    S->rq->tick(S->rq->tick_ctx, &t);
}

/* A chunk merged (rank 0): its computed variants stored in one transaction, at once. */
static int chunk_done(void *ctx, qs_eval_shard *sh, int c, qs_err *e)
{
    svc *S = ctx;
    if (qs_db_begin(S->db, e)) return -1;
    for (int v = 0; v < S->nv; v++) {
        if (!sh->cur[v].have || S->have[AT(S, c, v)]) continue;   /* a stored chunk is the same bits */
        char *opts = qs_evchunk_options(S->keys[v], c);
        int bad = !opts ? qs_fail(e, "out of memory")
                        : qs_evchunk_put(S->db, S->rq->f->hash, label_of(S, v), opts, v > 0, &sh->out.var[v], (size_t)c * S->per,
                                         S->per, &sh->cur[v], e);
        free(opts);
        if (bad) { qs_db_rollback(S->db); return -1; }
    }
    if (qs_db_commit(S->db, e)) { qs_db_rollback(S->db); return -1; }
    for (int v = 0; v < S->nv; v++)
        if (sh->cur[v].have && !S->have[AT(S, c, v)]) {
            S->have[AT(S, c, v)] = S->fresh[AT(S, c, v)] = 1;
            S->cv[AT(S, c, v)] = sh->cur[v];
        }
    S->computed++;
    if (advance(S, e)) return -1;
    if (S->kfinal) sh->enough = 1;
    tick(S);
    return 0;
}

/* The chunks some active variant lacks, on the ranks; rank 0 stores each as it is merged. */
static int compute(svc *S, qs_err *e)
{
    qs_eval_request *rq = S->rq;
    const int ncfg = rq->ncfg, kmax = S->kfinal ? S->kfinal : S->K;
    qs_eval_variant *var = calloc((size_t)(ncfg ? ncfg : 1), sizeof *var);
    int *run = malloc((size_t)S->K * sizeof *run), *want = calloc((size_t)(ncfg ? ncfg : 1), sizeof *want);
    uint8_t *need = calloc((size_t)S->K * (ncfg ? ncfg : 1), 1);
    qs_eval_shard sh;
    memset(&sh, 0, sizeof sh);
    int rc = -1, nrun = 0;
    if (!var || !run || !want || !need) { qs_fail(e, "out of memory"); goto done; }
    for (int c = 0; c < kmax; c++) {
        int any = S->active[0] && !S->have[AT(S, c, 0)];
        for (int i = 0; i < ncfg; i++) {
            need[(size_t)c * ncfg + i] = S->active[i + 1] && !S->have[AT(S, c, i + 1)];
            any |= need[(size_t)c * ncfg + i];
            want[i] |= need[(size_t)c * ncfg + i];
        }
        if (any) run[nrun++] = c;
    }
    S->todo = nrun;
    if (!nrun) { rc = 0; goto done; }
    if (make_variants(rq, want, var, e) ||
        qs_eval_shard_init(&sh, &rq->f->m, var, want, ncfg, rq->ids, rq->nids, &rq->su, e))
        goto done;
    sh.run = run;
    sh.nrun = nrun;
    sh.need = need;
    sh.chunk_done = chunk_done;
    sh.done_ctx = S;
    sh.out = S->all;   /* merged in place: the stored chunks are already there */
    memset(&S->all, 0, sizeof S->all);
    S->outp = &sh.out;
    if (rq->rank == 0) tick(S);
    rc = rq->run(&sh, rq->what, e);
    S->all = sh.out;
    S->outp = &S->all;
    memset(&sh.out, 0, sizeof sh.out);
done:
    qs_eval_shard_free(&sh);
    free(var);
    free(run);
    free(want);
    free(need);
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
static int load_tokens(const svc *S, qs_eval_result *res, qs_err *e)
{
    size_t n = (size_t)S->kfinal * S->per;
    res->per_chunk = S->per;
    if (qs_eval_out_alloc(&res->tok, n, NULL, S->rq->ncfg)) return qs_fail(e, "out of memory");
    for (int i = 0; i < S->nv; i++) {
        qs_eval_var_out *v = &res->tok.var[i];
        if (get_f32(S->db, S->ids[i], "nll", v->nll, n, e) ||
            (i && (get_f32(S->db, S->ids[i], "kl", v->kl, n, e) || get_f32(S->db, S->ids[i], "dp", v->dp, n, e))))
            return -1;
    }
    return 0;
}

/* Chunks of variant v this run computed (of the answer's). */
static int fresh_chunks(const svc *S, int v)
{
    int n = 0;
    for (int c = 0; c < S->kfinal; c++) n += S->fresh[AT(S, c, v)];
    return n;
}

/* The answer from the stored (or just computed) data. */
static int answer(const svc *S, qs_eval_result *res, qs_err *e)
{
    const qs_eval_request *rq = S->rq;
    res->ref = json_loads(S->datas[0], 0, NULL);
    if (!res->ref) return qs_fail(e, "stored reference result is not JSON");
    json_object_set_new(res->ref, "cached", json_boolean(!fresh_chunks(S, 0)));
    json_object_set_new(res->ref, "chunks_computed", json_integer(fresh_chunks(S, 0)));
    qs_evstats_mark_failed(res->ref);   /* also of results stored before a failure was marked */
    for (int i = 0; i < rq->ncfg; i++) {
        json_t *c = json_loads(S->datas[i + 1], 0, NULL);
        if (!c) return qs_fail(e, "stored result of %s is not JSON", rq->cfg[i].label);
        json_t *obj = json_pack("{s:s,s:O}", "label", rq->cfg[i].label, "numerics", json_object_get(S->keys[i + 1], "numerics"));
        json_object_update(obj, c);
        json_decref(c);
        qs_evstats_mark_failed(obj);
        json_object_set_new(obj, "cached", json_boolean(!fresh_chunks(S, i + 1)));
        json_object_set_new(obj, "chunks_computed", json_integer(fresh_chunks(S, i + 1)));
        json_array_append_new(res->cfgs, obj);
    }
    return 0;
}

static void svc_free(svc *S)
{
    for (int i = 0; i < S->nv; i++) {
        if (S->keys) json_decref(S->keys[i]);
        if (S->datas) free(S->datas[i]);
    }
    free(S->keys); free(S->datas); free(S->ids); free(S->done); free(S->active);
    free(S->have); free(S->fresh); free(S->cv); free(S->scratch);
    qs_eval_out_free(&S->all);
}

/* The cache keys, the variants reused whole, and the stored chunks of the others. */
static int lookup(svc *S, qs_err *e)
{
    const qs_eval_request *rq = S->rq;
    for (int v = 0; v < S->nv; v++) {
        S->keys[v] = json_pack("{s:s,s:i,s:i,s:s,s:i,s:o}", "text", rq->text_hash, "ctx", rq->su.ctx, "chunks", rq->su.nchunks,
                               "score", rq->su.score_all ? "all" : "half", "bos", rq->su.bos, "numerics",
                               numerics_json(v ? &rq->cfg[v - 1] : NULL, rq->scaled, rq->calib));
        char *ks = S->keys[v] ? json_dumps(S->keys[v], JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (!ks) return qs_fail(e, "out of memory");
        /* with until the chunk count is not known yet: everything comes from the chunks */
        int bad = !rq->force && rq->until <= 0 && qs_result_get(S->db, rq->f->hash, KIND, label_of(S, v), ks, &S->datas[v], &S->ids[v], e);
        free(ks);
        if (bad) return -1;
        S->done[v] = S->datas[v] != NULL;
    }
    for (int v = 1; v < S->nv; v++) S->active[v] = !S->done[v];
    S->active[0] = !S->done[0];
    for (int v = 1; v < S->nv; v++) S->active[0] |= S->active[v];
    int *wantc = calloc((size_t)S->nv, sizeof *wantc);
    if (!wantc) return qs_fail(e, "out of memory");
    for (int v = 1; v < S->nv; v++) wantc[v - 1] = S->active[v];
    int bad = S->active[0] && qs_eval_out_alloc(&S->all, (size_t)S->K * S->per, wantc, rq->ncfg);
    free(wantc);
    if (bad) return qs_fail(e, "out of memory for the per-token results of %d chunks", S->K);
    for (int v = 0; v < S->nv && !rq->force; v++)
        for (int c = 0; c < S->K && S->active[v]; c++) {
            char *opts = qs_evchunk_options(S->keys[v], c);
            int found = 0;
            bad = !opts ? qs_fail(e, "out of memory") : qs_evchunk_get(S->db, rq->f->hash, label_of(S, v), opts, v > 0, &S->all.var[v],
                                                                       (size_t)c * S->per, S->per, &S->cv[AT(S, c, v)], &found, e);
            free(opts);
            if (bad) return -1;
            S->have[AT(S, c, v)] = (uint8_t)found;
        }
    return 0;
}

int qs_eval_service(qs_db *db, qs_eval_request *rq, qs_eval_result *res, qs_err *e)
{
    memset(res, 0, sizeof *res);
    svc S;
    memset(&S, 0, sizeof S);
    S.db = db;
    S.rq = rq;
    S.nv = rq->ncfg + 1;
    S.K = rq->su.nchunks;
    S.outp = &S.all;
    const size_t nk = (size_t)(S.K > 0 ? S.K : 1) * (size_t)S.nv;
    S.per = S.K > 0 ? qs_eval_ntok(&rq->su) / (size_t)S.K : 0;
    S.keys = calloc((size_t)S.nv, sizeof *S.keys);
    S.datas = calloc((size_t)S.nv, sizeof *S.datas);
    S.ids = calloc((size_t)S.nv, sizeof *S.ids);
    S.done = calloc((size_t)S.nv, sizeof *S.done);
    S.active = calloc((size_t)S.nv, sizeof *S.active);
    S.have = calloc(nk, 1);
    S.fresh = calloc(nk, 1);
    S.cv = calloc(nk, sizeof *S.cv);
    int rc = -1;
    res->cfgs = json_array();
    if (!S.keys || !S.datas || !S.ids || !S.done || !S.active || !S.have || !S.fresh || !S.cv || !res->cfgs) {
        qs_fail(e, "out of memory");
        goto done;
    }
    if (S.K < 1) { qs_fail(e, "evaluation: no chunk to evaluate"); goto done; }
    if (lookup(&S, e) || advance(&S, e)) goto done;
    double t0 = qs_now_s();
    int crc = S.active[0] ? compute(&S, e) : 0;
    res->compute_seconds = qs_now_s() - t0;
    res->chunks_computed = S.computed;
    res->chunks_todo = S.todo;
    if (crc) goto done;
    res->computed = S.computed > 0;
    if (rq->rank > 0) { rc = 0; goto done; }   /* rank 0 stores and answers */
    if (S.active[0] && advance(&S, e)) goto done;
    res->until_met = S.kfinal > 0;
    if (!S.kfinal) S.kfinal = rq->until > 0 && S.active[0] ? S.kdone : S.K;
    if (S.active[0] && S.kdone < S.kfinal) { qs_fail(e, "evaluation: chunk %d of %s is missing after the run", S.kdone, "a variant"); goto done; }
    for (int v = 0; v < S.nv && S.kfinal != S.K; v++) json_object_set_new(S.keys[v], "chunks", json_integer(S.kfinal));
    res->nchunks = S.kfinal;
    rc = (S.active[0] && store_variants(&S, e)) || answer(&S, res, e) || load_tokens(&S, res, e) ? -1 : 0;
done:
    svc_free(&S);
    if (rc) {
        json_decref(res->ref);
        json_decref(res->cfgs);
        res->ref = res->cfgs = NULL;
        qs_eval_out_free(&res->tok);
    }
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
    for (int i = 0; i < n; i++) {
        if (cfg[i].wm.arena) qs_llm_free(&cfg[i].wm);
        if (cfg[i].imat) { qs_imatrix_free(cfg[i].imat); free(cfg[i].imat); cfg[i].imat = NULL; }
        qs_llm_online_free(cfg[i].on);
        cfg[i].on = NULL;
    }
}
