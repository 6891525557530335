/*
** Fixed-text model evaluation, chunk by chunk (see llm_eval.h).
*/
#include "llm_eval.h"
#include "../kernels/llm_rows.h"
#include "../kernels/pool.h"
#include "../kernels/qs_clock.h"
#include "../kernels/qs_stop.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const double qs_eval_kl_qs[11] = {0, 0.001, 0.01, 0.05, 0.10, 0.50, 0.90, 0.95, 0.99, 0.999, 1};

/* rows of logits computed at once: every scored row of a chunk when they fit in HEAD_FLOATS (one
** product through the output head), never fewer than 64 */
#define HEAD_FLOATS ((size_t)1 << 24)
/* packed weight copies kept by a work's state (kernels/llm_pgemm.h): the reference's and the rounded
** weights of a few configurations; past it, products pack their weights as they go */
#define PACK_BYTES ((size_t)4 << 30)

int qs_eval_first(const qs_eval_setup *s) { return s->score_all ? 0 : s->ctx / 2; }

size_t qs_eval_ntok(const qs_eval_setup *s) { return (size_t)s->nchunks * (size_t)(s->ctx - 1 - qs_eval_first(s)); }

void qs_eval_chunk_input(const qs_eval_setup *s, const int32_t *text, int c, int32_t *in)
{
    memcpy(in, text + (size_t)c * s->ctx, (size_t)s->ctx * sizeof(int32_t));
    if (s->bos >= 0) in[0] = s->bos;
}

/* ---------------------------------------------------------------- non-finite taps */

typedef struct nf_tap {
    qs_eval_nonfinite *nf;
    float *resid;             /* reference pass with reuse: residual entering layer l at l * rows * cols */
    int nlayer;
} nf_tap;

/* Non-finite values of a site, counted in blocks of rows on the pool (a count: any order, same sum). */
#define NF_ROWS 32
typedef struct nf_job { const float *x; int rows, cols; _Atomic size_t bad; } nf_job;

static void nf_task(void *ctx, size_t t, int slot)
{
    (void)slot;
    nf_job *j = ctx;
    const int r0 = (int)t * NF_ROWS, n = j->rows - r0 < NF_ROWS ? j->rows - r0 : NF_ROWS;
    j->bad += qs_count_nonfinite(j->x + (size_t)r0 * j->cols, (size_t)n * j->cols);
}

static void tap_nonfinite(void *ctx, int layer, qs_llm_site site, const float *x, int rows, int cols)
{
    nf_tap *t = ctx;
    if (t->resid && site == QS_SITE_RESID && layer + 1 < t->nlayer)
        memcpy(t->resid + (size_t)(layer + 1) * rows * cols, x, (size_t)rows * cols * sizeof(float));
    qs_eval_nonfinite *nf = t->nf;
    nf_job j = {x, rows, cols, 0};
    const size_t ntask = (size_t)(rows + NF_ROWS - 1) / NF_ROWS;
    qs_pool_for(ntask > 1 ? qs_llm_threads() : 1, ntask, nf_task, &j);
    size_t bad = j.bad;
    if (bad && nf->first_layer < 0) { nf->first_layer = layer; nf->first_site = site; }
    nf->act_values += bad;
}

/* ---------------------------------------------------------------- per-row statistics */

/* One block of logit rows: the reference's rows (probabilities kept) or a configuration's against
** them.  Rows write disjoint outputs, so they run on the task pool. */
typedef struct row_job {
    const float *lg;
    int V, r0;
    size_t k0;
    const int32_t *tgt;
    float *pref;
    qs_ref_row *rr;
    qs_eval_var_out *vo;
    int is_ref;
} row_job;

static void row_task(void *ctx, size_t task, int slot)
{
    (void)slot;
    const row_job *j = ctx;
    const int r = j->r0 + (int)task, V = j->V;
    const float *l = j->lg + task * (size_t)V;
    const size_t k = j->k0 + (size_t)r;
    qs_eval_var_out *vo = j->vo;
    if (j->is_ref) {
        qs_ref_row_make(l, V, j->tgt[r], j->pref + (size_t)r * V, &j->rr[r]);
        vo->nll[k] = j->rr[r].finite ? -j->rr[r].lp_tok : NAN;
    } else {
        qs_tok_stat ts;
        qs_tok_stat_make(l, V, j->tgt[r], j->pref + (size_t)r * V, &j->rr[r], &ts);
        vo->nll[k] = ts.finite ? -ts.lp_q : NAN;
        vo->kl[k] = ts.kl;
        vo->dp[k] = ts.dp;
        vo->same_top[k] = (uint8_t)ts.same_top;
    }
}

/* ---------------------------------------------------------------- run */

static int var_alloc(qs_eval_var_out *v, size_t n, int cfg)
{
    v->nf.first_layer = -1;
    v->nll = malloc(n * sizeof(double));
    if (!cfg) return v->nll ? 0 : -1;
    v->kl = malloc(n * sizeof(double));
    v->dp = malloc(n * sizeof(double));
    v->same_top = malloc(n);
    return v->nll && v->kl && v->dp && v->same_top ? 0 : -1;
}

void qs_eval_out_free(qs_eval_out *o)
{
    for (int i = 0; o->var && i < o->nvar; i++) {
        free(o->var[i].nll); free(o->var[i].kl); free(o->var[i].dp); free(o->var[i].same_top);
    }
    free(o->var);
    memset(o, 0, sizeof *o);
}

/* Buffers of one chunk's evaluation, reused chunk after chunk. */
struct qs_eval_work {
    int ctx, per, first, V, d, nlayer, head_rows;
    float *pref;              /* the chunk's reference probabilities */
    float *lg;                /* one block of logits */
    float *hid, *scr;
    qs_ref_row *rr;
    int32_t *in;
    float *resid;             /* the reference's residual stream entering each layer (reuse), or NULL */
    qs_llm_state *st;
};

void qs_eval_work_free(qs_eval_work *w)
{
    if (!w) return;
    qs_llm_state_free(w->st);
    free(w->pref); free(w->lg); free(w->hid); free(w->scr); free(w->rr); free(w->in); free(w->resid);
    free(w);
}

qs_eval_work *qs_eval_work_new(const qs_llm_model *ref, const qs_eval_setup *s, int resid, qs_err *e)
{
    qs_eval_work *w = calloc(1, sizeof *w);
    if (!w) { qs_fail(e, "out of memory"); return NULL; }
    const int ctx = s->ctx, first = qs_eval_first(s), per = ctx - 1 - first, V = ref->c.vocab, d = ref->c.dim;
    size_t hr = HEAD_FLOATS / (size_t)V;
    hr = hr < 64 ? 64 : hr > (size_t)per ? (size_t)per : hr;
    *w = (qs_eval_work){ctx, per, first, V, d, ref->c.n_layer, (int)hr, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    w->pref = malloc((size_t)per * V * sizeof(float));
    w->lg = malloc(hr * V * sizeof(float));
    w->hid = malloc((size_t)ctx * d * sizeof(float));
    w->scr = malloc(hr * d * sizeof(float));
    w->rr = malloc((size_t)per * sizeof *w->rr);
    w->in = malloc((size_t)ctx * sizeof(int32_t));
    if (!w->pref || !w->lg || !w->hid || !w->scr || !w->rr || !w->in) { qs_fail(e, "out of memory"); goto fail; }
    if (resid && !(w->resid = malloc((size_t)ref->c.n_layer * ctx * d * sizeof(float)))) {
        qs_fail(e, "out of memory for the residual streams of %d layers", ref->c.n_layer);
        goto fail;
    }
    /* mapped weights (kernels/llm_wtype.h) are widened as the products go, never kept packed (their point is
    ** the memory a packed FP32 copy would take) */
    if (!(w->st = qs_llm_state_new(&ref->c, 1, ctx, ctx, e)) || (!ref->tw_embd && qs_llm_state_pack_weights(w->st, PACK_BYTES, e)))
        goto fail;
    return w;
fail:
    qs_eval_work_free(w);
    return NULL;
}

int qs_eval_check(const qs_llm_model *ref, const qs_eval_variant *cfg, const int *want, int ncfg, const int32_t *text,
                  size_t ntext, const qs_eval_setup *s, int *resid, qs_err *e)
{
    const int ctx = s->ctx, per = ctx - 1 - qs_eval_first(s), V = ref->c.vocab;
    if (ctx < 2 || per < 1 || s->nchunks < 1 || (size_t)s->nchunks * ctx > ntext || ctx > ref->c.ctx)
        return qs_fail(e, "evaluation: %d chunks of %d tokens do not fit %zu tokens / model context %d", s->nchunks, ctx,
                       ntext, ref->c.ctx);
    for (size_t i = 0; i < (size_t)s->nchunks * ctx; i++)
        if (text[i] < 0 || text[i] >= V) return qs_fail(e, "token id %d out of range (vocabulary %d)", text[i], V);
    *resid = 0;
    for (int i = 0; i < ncfg; i++)
        if ((!want || want[i]) && cfg[i].from_layer) {
            if (cfg[i].from_layer < 0 || cfg[i].from_layer >= ref->c.n_layer)
                return qs_fail(e, "evaluation: start layer %d of %d", cfg[i].from_layer, ref->c.n_layer);
            *resid = 1;
        }
    return 0;
}

int qs_eval_chunk(qs_eval_work *w, const qs_llm_model *ref, const qs_eval_variant *cfg, const int32_t *text,
                  const qs_eval_setup *s, int c, qs_eval_out *out, size_t k0, qs_err *e)
{
    const int ctx = w->ctx, first = w->first, per = w->per, V = w->V, d = w->d;
    qs_eval_chunk_input(s, text, c, w->in);
    const int32_t *tgt = text + (size_t)c * ctx + first + 1;
    for (int vi = 0; vi < out->nvar; vi++) {
        qs_eval_var_out *vo = &out->var[vi];
        if (!vo->nll) continue;
        const qs_llm_model *m = vi ? cfg[vi - 1].m : ref;
        const qs_llm_numerics *nx = vi ? &cfg[vi - 1].nx : NULL;
        nf_tap tc = {&vo->nf, vi ? NULL : w->resid, w->nlayer};
        const int l0 = vi ? cfg[vi - 1].from_layer : 0;
        if (l0 && !w->resid) return qs_fail(e, "evaluation: start layer %d without the reference's residual stream", l0);
        if (qs_stop_requested()) return qs_fail(e, "interrupted");   /* Ctrl-C: between passes */
        double t0 = qs_now_s();
        if (qs_llm_forward_from(m, nx, w->st, w->in, 1, ctx, 0, l0, l0 ? w->resid + (size_t)l0 * ctx * d : NULL, w->hid,
                                tap_nonfinite, &tc, e))
            return -1;
        double t1 = qs_now_s();
        for (int r0 = 0; r0 < per; r0 += w->head_rows) {
            int nr = per - r0 < w->head_rows ? per - r0 : w->head_rows;
            if (qs_stop_requested()) return qs_fail(e, "interrupted");
            if (qs_llm_logits_st(m, nx, w->st, w->hid + (size_t)(first + r0) * d, nr, w->scr, w->lg, e)) return -1;
            row_job rj = {w->lg, V, r0, k0, tgt, w->pref, w->rr, vo, vi == 0};
            qs_pool_for(nr >= 8 ? qs_llm_threads() : 1, (size_t)nr, row_task, &rj);
        }
        for (int r = 0; r < per; r++)   /* rows left out: the reference's, or this config's own */
            vo->nf.logit_rows += vi == 0 ? !w->rr[r].finite : (w->rr[r].finite && isnan(vo->nll[k0 + r]));
        vo->fwd_seconds += t1 - t0;
        vo->head_seconds += qs_now_s() - t1;
    }
    return 0;
}

int qs_eval_out_alloc(qs_eval_out *out, size_t n, const int *want, int ncfg)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->nvar = 1 + ncfg;
    if (!(out->var = calloc((size_t)out->nvar, sizeof *out->var))) return -1;
    for (int i = 0; i < out->nvar; i++)
        if ((i == 0 || !want || want[i - 1]) && var_alloc(&out->var[i], n, i > 0)) { qs_eval_out_free(out); return -1; }
    return 0;
}

int qs_llm_eval_run(const qs_llm_model *ref, const qs_eval_variant *cfg, const int *want, int ncfg,
                    const int32_t *text, size_t ntext, const qs_eval_setup *s, qs_eval_progress prog, void *pctx,
                    qs_eval_out *out, qs_err *e)
{
    memset(out, 0, sizeof *out);
    int resid;
    if (qs_eval_check(ref, cfg, want, ncfg, text, ntext, s, &resid, e)) return -1;
    qs_eval_work *w = qs_eval_work_new(ref, s, resid, e);
    if (!w) return -1;
    int rc = -1;
    if (qs_eval_out_alloc(out, qs_eval_ntok(s), want, ncfg)) { qs_fail(e, "out of memory"); goto fail; }
    for (int c = 0; c < s->nchunks; c++) {
        if (qs_eval_chunk(w, ref, cfg, text, s, c, out, (size_t)c * w->per, e)) goto fail;
        if (prog) prog(pctx, c + 1, s->nchunks);
    }
    rc = 0;
fail:
    if (rc) qs_eval_out_free(out);
    qs_eval_work_free(w);
    return rc;
}

/* ---------------------------------------------------------------- summaries */

/* A variant without one finite scored row has no statistics: NaN (stored as null), never the
** 1.0 and 0 that empty means and sums would make of it. */
static void no_statistics(qs_eval_summary *s)
{
    double *nan_fields[] = {&s->ppl, &s->ppl_se, &s->nll_mean, &s->nll_se, &s->kl_mean, &s->kl_se, &s->dp_rms,
                            &s->dp_rms_se, &s->dp_mean, &s->dp_mean_se, &s->top1, &s->top1_se, &s->lnratio_mean,
                            &s->lnratio_se, &s->ppl_ratio, &s->ppl_ratio_se, &s->dppl_rel, &s->dppl_lo, &s->dppl_hi,
                            &s->ppl_diff, &s->ppl_diff_se, &s->cor_lnppl};
    for (size_t i = 0; i < sizeof nan_fields / sizeof *nan_fields; i++) *nan_fields[i] = NAN;
    for (int q = 0; q < 11; q++) s->kl_q[q] = s->dp_q[q] = NAN;
}

int qs_eval_summarize(const qs_eval_var_out *ref, const qs_eval_var_out *cfg, size_t n, qs_eval_summary *s, qs_err *e)
{
    memset(s, 0, sizeof *s);
    const size_t na = n ? n : 1;
    double *a = calloc(na, sizeof(double)), *b = calloc(na, sizeof(double)), *c = calloc(na, sizeof(double));
    double *dd = calloc(na, sizeof(double)), *sq = calloc(na, sizeof(double));
    double *sorted = NULL;
    int rc = -1;
    if (!a || !b || !c || !dd || !sq) { qs_fail(e, "out of memory"); goto out; }
    const qs_eval_var_out *v = cfg ? cfg : ref;
    size_t m = 0;
    for (size_t k = 0; k < n; k++) {
        if (!isfinite(ref->nll[k]) || !isfinite(v->nll[k])) continue;
        a[m] = v->nll[k];        /* nll of this variant */
        b[m] = ref->nll[k];      /* nll of the reference */
        m++;
    }
    s->n = m;
    qs_mean_se(a, m, &s->nll_mean, &s->nll_se);
    s->ppl = exp(s->nll_mean);
    s->ppl_se = s->ppl * s->nll_se;
    if (!cfg) { rc = 0; goto out; }
    double rmean, rse;
    qs_mean_se(b, m, &rmean, &rse);
    double ppl_ref = exp(rmean);
    s->cor_lnppl = qs_pearson(a, b, m);
    for (size_t k = 0; k < m; k++) dd[k] = a[k] - b[k];   /* ln p_ref - ln p_Q */
    qs_mean_se(dd, m, &s->lnratio_mean, &s->lnratio_se);
    s->ppl_ratio = exp(s->lnratio_mean);
    s->ppl_ratio_se = s->ppl_ratio * s->lnratio_se;
    s->dppl_rel = s->ppl_ratio - 1;
    s->dppl_lo = s->dppl_rel - 1.959964 * s->ppl_ratio_se;
    s->dppl_hi = s->dppl_rel + 1.959964 * s->ppl_ratio_se;
    s->ppl_diff = s->ppl - ppl_ref;
    {   /* PPL(Q) - PPL(ref): the two means are correlated (same tokens) */
        double cov = 0;
        for (size_t k = 0; k < m; k++) cov += (a[k] - s->nll_mean) * (b[k] - rmean);
        cov = m > 1 ? cov / m / (double)(m - 1) : 0;
        double var = s->ppl * s->ppl * s->nll_se * s->nll_se + ppl_ref * ppl_ref * rse * rse - 2 * s->ppl * ppl_ref * cov;
        s->ppl_diff_se = var > 0 ? sqrt(var) : 0;
    }
    size_t j = 0, same = 0;
    for (size_t k = 0; k < n; k++) {
        if (!isfinite(ref->nll[k]) || !isfinite(v->nll[k])) continue;
        c[j] = cfg->kl[k];
        dd[j] = cfg->dp[k];
        sq[j] = cfg->dp[k] * cfg->dp[k];
        same += cfg->same_top[k];
        qs_klhist_add(&s->hist, cfg->kl[k]);
        j++;
    }
    qs_mean_se(c, m, &s->kl_mean, &s->kl_se);
    if (!(sorted = qs_sorted_copy(c, m))) { qs_fail(e, "out of memory"); goto out; }
    for (int q = 0; q < 11; q++) s->kl_q[q] = qs_quantile_sorted(sorted, m, qs_eval_kl_qs[q]);
    free(sorted);
    if (!(sorted = qs_sorted_copy(dd, m))) { qs_fail(e, "out of memory"); goto out; }
    for (int q = 0; q < 11; q++) s->dp_q[q] = qs_quantile_sorted(sorted, m, qs_eval_kl_qs[q]);
    qs_mean_se(dd, m, &s->dp_mean, &s->dp_mean_se);
    double sqm, sqse;
    qs_mean_se(sq, m, &sqm, &sqse);
    s->dp_rms = sqrt(sqm);
    s->dp_rms_se = s->dp_rms > 0 ? 0.5 / s->dp_rms * sqse : 0;
    s->top1 = m ? (double)same / m : 0;
    s->top1_se = m > 1 ? sqrt(s->top1 * (1 - s->top1) / (double)(m - 1)) : 0;
    rc = 0;
out:
    if (!rc && !m) no_statistics(s);
    free(a); free(b); free(c); free(dd); free(sq); free(sorted);
    return rc;
}
