/*
** An evaluation cut into units whose results are bytes (see llm_eval_shard.h).
**
** A unit's bytes: a header {chunk, group, variants} and, per variant it holds (the reference in
** group 0, then the group's configurations in order), {index, first non-finite layer and site,
** non-finite counts, seconds} and its per-token arrays (nll; for a configuration also kl, dp and
** same_top) of the chunk's scored tokens.
*/
#include "llm_eval_shard.h"

#include <stdlib.h>
#include <string.h>

#include "../kernels/qs_stop.h"

typedef struct unit_hdr { int32_t chunk, group, nvar, magic; } unit_hdr;
typedef struct var_hdr {
    int32_t index, first_layer, first_site, pad;
    uint64_t logit_rows, act_values;
    double fwd_seconds, head_seconds;
} var_hdr;
#define UNIT_MAGIC 0x51534556   /* "QSEV" */

/* Forward-pass work per token of a layer and of the output projection (multiply-adds). */
static double layer_work(const qs_llm_cfg *c, int ctx)
{
    double kv = (double)c->n_kv_head * c->head_dim;
    return (double)c->dim * (2.0 * (double)qs_llm_q_dim(c) + 2 * kv + 3.0 * c->ffn) + (double)ctx * (double)qs_llm_q_dim(c);
}

int qs_eval_shard_init(qs_eval_shard *sh, const qs_llm_model *ref, const qs_eval_variant *cfg, const int *want, int ncfg,
                       const int32_t *text, size_t ntext, const qs_eval_setup *s, qs_err *e)
{
    memset(sh, 0, sizeof *sh);
    int resid;
    if (qs_eval_check(ref, cfg, want, ncfg, text, ntext, s, &resid, e)) return -1;
    sh->ref = ref;
    sh->cfg = cfg;
    sh->ncfg = ncfg;
    sh->text = text;
    sh->su = *s;
    sh->resid = resid;
    sh->ngroup = 1;
    sh->nrun = s->nchunks;
    sh->group = malloc((size_t)(ncfg ? ncfg : 1) * sizeof *sh->group);
    sh->vcost = malloc((size_t)(ncfg ? ncfg : 1) * sizeof *sh->vcost);
    sh->cur = calloc((size_t)ncfg + 1, sizeof *sh->cur);
    if (!sh->group || !sh->vcost || !sh->cur) { qs_eval_shard_free(sh); return qs_fail(e, "out of memory"); }
    const double lw = layer_work(&ref->c, s->ctx), hw = (double)ref->c.vocab * ref->c.dim;
    sh->rcost = ref->c.n_layer * lw + hw;
    for (int i = 0; i < ncfg; i++) {
        sh->group[i] = !want || want[i] ? 0 : -1;
        sh->nwant += sh->group[i] == 0;
        sh->vcost[i] = (ref->c.n_layer - cfg[i].from_layer) * lw + hw;
    }
    return 0;
}

void qs_eval_shard_free(qs_eval_shard *sh)
{
    free(sh->group);
    free(sh->vcost);
    free(sh->cur);
    qs_eval_work_free(sh->w);
    qs_eval_out_free(&sh->out);
    memset(sh, 0, sizeof *sh);
}

void qs_eval_shard_groups(qs_eval_shard *sh, int ngroup)
{
    if (ngroup > sh->nwant) ngroup = sh->nwant;
    if (ngroup < 1) ngroup = 1;
    sh->ngroup = ngroup;
    for (int i = 0, k = 0; i < sh->ncfg; i++)
        if (sh->group[i] >= 0) sh->group[i] = k++ % ngroup;
}

size_t qs_eval_shard_units(const qs_eval_shard *sh) { return (size_t)sh->nrun * sh->ngroup; }

int qs_eval_shard_chunk(const qs_eval_shard *sh, size_t u)
{
    size_t k = u / (size_t)sh->ngroup;
    return sh->run ? sh->run[k] : (int)k;
}

/* Configuration i is computed in chunk c. */
static int needs(const qs_eval_shard *sh, int c, int i)
{
    return sh->group[i] >= 0 && (!sh->need || sh->need[(size_t)c * sh->ncfg + i]);
}

/* The configurations of group g that chunk c computes (want may be NULL). */
static int unit_configs(const qs_eval_shard *sh, int c, int g, int *want)
{
    int n = 0;
    for (int i = 0; i < sh->ncfg; i++) {
        int w = sh->group[i] == g && needs(sh, c, i);
        if (want) want[i] = w;
        n += w;
    }
    return n;
}

void qs_eval_shard_costs(const qs_eval_shard *sh, double *cost)
{
    for (size_t u = 0; u < qs_eval_shard_units(sh); u++) {
        const int c = qs_eval_shard_chunk(sh, u), g = (int)(u % (size_t)sh->ngroup);
        double w = 0;
        for (int i = 0; i < sh->ncfg; i++) if (sh->group[i] == g && needs(sh, c, i)) w += sh->vcost[i];
        /* a group without work in this chunk skips even the reference pass */
        cost[u] = g == 0 || w > 0 ? sh->rcost + w : 0;
    }
}

static size_t per_chunk(const qs_eval_shard *sh) { return (size_t)(sh->su.ctx - 1 - qs_eval_first(&sh->su)); }

static size_t var_bytes(size_t per, int is_cfg) { return sizeof(var_hdr) + per * (is_cfg ? 3 * sizeof(double) + 1 : sizeof(double)); }

int qs_eval_shard_unit(qs_eval_shard *sh, size_t u, uint8_t **b, size_t *len, qs_err *e)
{
    *b = NULL;
    *len = 0;
    if (u >= qs_eval_shard_units(sh)) return qs_fail(e, "evaluation: unit %zu of %zu", u, qs_eval_shard_units(sh));
    if (sh->enough) return 0;
    if (qs_stop_requested()) return qs_fail(e, "interrupted");
    const int c = qs_eval_shard_chunk(sh, u), g = (int)(u % (size_t)sh->ngroup);
    if (c < 0 || c >= sh->su.nchunks) return qs_fail(e, "evaluation: chunk %d of %d", c, sh->su.nchunks);
    const size_t per = per_chunk(sh);
    /* this unit's variants: the reference runs whenever a configuration does (its results are kept by
    ** group 0 only); a group without configurations in this chunk computes nothing */
    int *want = calloc((size_t)(sh->ncfg ? sh->ncfg : 1), sizeof *want);
    if (!want) return qs_fail(e, "out of memory");
    const int nw = unit_configs(sh, c, g, want);
    if (g > 0 && !nw) {
        free(want);
        unit_hdr h0 = {c, g, 0, UNIT_MAGIC};
        if (!(*b = malloc(sizeof h0))) return qs_fail(e, "out of memory");
        memcpy(*b, &h0, sizeof h0);
        *len = sizeof h0;
        return 0;
    }
    if (!sh->w && !(sh->w = qs_eval_work_new(sh->ref, &sh->su, sh->resid, e))) { free(want); return -1; }
    qs_eval_out o;
    int rc = -1;
    if (qs_eval_out_alloc(&o, per, want, sh->ncfg)) { free(want); return qs_fail(e, "out of memory"); }
    if (qs_eval_chunk(sh->w, sh->ref, sh->cfg, sh->text, &sh->su, c, &o, 0, e)) goto out;
    unit_hdr h = {c, g, g == 0, UNIT_MAGIC};
    size_t n = sizeof h + (g == 0 ? var_bytes(per, 0) : 0);
    for (int i = 0; i < sh->ncfg; i++) if (want[i]) { h.nvar++; n += var_bytes(per, 1); }
    uint8_t *p = malloc(n);
    if (!p) { qs_fail(e, "out of memory"); goto out; }
    *b = p;
    *len = n;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    for (int v = g == 0 ? 0 : 1; v <= sh->ncfg; v++) {
        if (v && !want[v - 1]) continue;
        const qs_eval_var_out *vo = &o.var[v];
        var_hdr vh = {v, vo->nf.first_layer, (int32_t)vo->nf.first_site, 0, vo->nf.logit_rows, vo->nf.act_values,
                      vo->fwd_seconds, vo->head_seconds};
        memcpy(p, &vh, sizeof vh);
        p += sizeof vh;
        memcpy(p, vo->nll, per * sizeof(double));
        p += per * sizeof(double);
        if (!v) continue;
        memcpy(p, vo->kl, per * sizeof(double));
        p += per * sizeof(double);
        memcpy(p, vo->dp, per * sizeof(double));
        p += per * sizeof(double);
        memcpy(p, vo->same_top, per);
        p += per;
    }
    rc = 0;
out:
    qs_eval_out_free(&o);
    free(want);
    return rc;
}

int qs_eval_shard_merge(qs_eval_shard *sh, size_t u, const uint8_t *b, size_t len, qs_err *e)
{
    const size_t per = per_chunk(sh);
    if (u != sh->merged || u >= qs_eval_shard_units(sh))
        return qs_fail(e, "evaluation: unit %zu merged after %zu units", u, sh->merged);
    const int c = qs_eval_shard_chunk(sh, u), g = (int)(u % (size_t)sh->ngroup);
    if (!len && sh->enough) { sh->merged++; return 0; }   /* skipped: enough chunks */
    if (!sh->out.var) {
        int *want = calloc((size_t)(sh->ncfg ? sh->ncfg : 1), sizeof *want);
        if (!want) return qs_fail(e, "out of memory");
        for (int i = 0; i < sh->ncfg; i++) want[i] = sh->group[i] >= 0;
        int bad = qs_eval_out_alloc(&sh->out, qs_eval_ntok(&sh->su), want, sh->ncfg);
        free(want);
        if (bad) return qs_fail(e, "out of memory");
    }
    unit_hdr h;
    if (!b || len < sizeof h) return qs_fail(e, "evaluation: unit %zu: %zu bytes, no header", u, len);
    memcpy(&h, b, sizeof h);
    size_t want_len = sizeof h + (g == 0 ? var_bytes(per, 0) : 0);
    int nvar = g == 0;
    for (int i = 0; i < sh->ncfg; i++) if (sh->group[i] == g && needs(sh, c, i)) { nvar++; want_len += var_bytes(per, 1); }
    /* a rank that saw other cached results would send other variants: refuse rather than mix */
    if (h.magic != UNIT_MAGIC || h.chunk != c || h.group != g || h.nvar != nvar || len != want_len)
        return qs_fail(e, "evaluation: unit %zu (chunk %d, group %d) is not what this rank planned (the database changed "
                          "during the run?)", u, c, g);
    const uint8_t *p = b + sizeof h;
    const size_t k0 = (size_t)c * per;
    if (g == 0) memset(sh->cur, 0, ((size_t)sh->ncfg + 1) * sizeof *sh->cur);
    for (int v = g == 0 ? 0 : 1; v <= sh->ncfg; v++) {
        if (v && (sh->group[v - 1] != g || !needs(sh, c, v - 1))) continue;
        var_hdr vh;
        memcpy(&vh, p, sizeof vh);
        p += sizeof vh;
        if (vh.index != v) return qs_fail(e, "evaluation: unit %zu holds variant %d where %d was planned", u, vh.index, v);
        qs_eval_var_out *vo = &sh->out.var[v];
        if (!vo->nll) return qs_fail(e, "evaluation: unit %zu holds variant %d, which has no outputs", u, v);
        sh->cur[v] = (qs_eval_chunk_var){1, {vh.logit_rows, vh.act_values, vh.first_layer, (qs_llm_site)vh.first_site},
                                         vh.fwd_seconds + vh.head_seconds};
        /* chunk order: the first non-finite site met is the single process's */
        if (vo->nf.first_layer < 0 && vh.first_layer >= 0) {
            vo->nf.first_layer = vh.first_layer;
            vo->nf.first_site = (qs_llm_site)vh.first_site;
        }
        vo->nf.logit_rows += vh.logit_rows;
        vo->nf.act_values += vh.act_values;
        vo->fwd_seconds += vh.fwd_seconds;
        vo->head_seconds += vh.head_seconds;
        memcpy(vo->nll + k0, p, per * sizeof(double));
        p += per * sizeof(double);
        if (!v) continue;
        memcpy(vo->kl + k0, p, per * sizeof(double));
        p += per * sizeof(double);
        memcpy(vo->dp + k0, p, per * sizeof(double));
        p += per * sizeof(double);
        memcpy(vo->same_top + k0, p, per);
        p += per;
    }
    sh->merged++;
    if (g == sh->ngroup - 1 && sh->chunk_done) return sh->chunk_done(sh->done_ctx, sh, c, e);
    return 0;
}
