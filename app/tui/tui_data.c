/*
** What the workbench reads from the database: the tensor list with statistics, stored results of
** `qscope analyze` (metrics, hist, blocks + blobs; analysis/results.h), RL runs with per-step
** diagnostics computed from rl_token, and stored trajectory / msd / attn results (docs/plots.md).
**
** Everything is read on the main thread through the main connection, only when a view needs it,
** and kept until the selection changes.  Missing or malformed data never fails a view: it shows
** as "-" or a message.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../../analysis/rl_xaxis.h"
#include "../cli/analyze_run.h"
#include "../cli/quant_opts.h"
#include "tui.h"
#include "../../analysis/err_source.h"
#include "../../analysis/hist_json.h"
#include "../../analysis/kernel_exp.h"
#include "../../analysis/results.h"
#include "../../kernels/qs_version.h"
#include "../../store/json_out.h"
#include "../../store/q_kernels.h"
#include "../../store/q_results.h"
#include "../../store/q_rl.h"
#include "../../store/q_tensors.h"

static char *dupz(const char *s) { return strdup(s ? s : ""); }

static void tensors_free(tui *T)
{
    for (size_t i = 0; i < T->nt; i++) { free(T->t[i].name); free(T->t[i].hash); free(T->t[i].dtype); }
    free(T->t);
    free(T->vis);
    T->t = NULL;
    T->vis = NULL;
    T->nt = T->nvis = 0;
}

int tui_load_tensors(tui *T, qs_err *e)
{
    tensors_free(T);
    qs_tensor_item *ts;
    size_t nts;
    if (qs_tensor_list_stats(T->db, "*", &ts, &nts, e)) return -1;
    if (nts && !(T->t = malloc(nts * sizeof *T->t))) { qs_tensor_items_free(ts, nts); return qs_fail(e, "out of memory"); }
    for (size_t ti = 0; ti < nts; ti++) {
        qs_tensor_item *it = &ts[ti];
        tui_tensor *x = &T->t[T->nt++];
        memset(x, 0, sizeof *x);
        x->id = it->id;
        x->name = it->name;   /* taken over */
        x->hash = it->hash;
        x->dtype = it->dtype;
        it->name = it->hash = it->dtype = NULL;
        /* shape JSON "[a,b]" -> "a x b" without a JSON parser on 10,000 rows */
        const char *sj = it->shape;
        uint64_t dims[8];
        int nd = 0;
        for (const char *p = sj ? sj : ""; *p && nd < 8; p++)
            if (*p >= '0' && *p <= '9') { dims[nd++] = strtoull(p, (char **)&p, 10); p--; }
        size_t k = 0;
        x->shape[0] = 0;
        for (int d = 0; d < nd && k < sizeof x->shape - 1; d++)
            k += (size_t)snprintf(x->shape + k, sizeof x->shape - k, d ? "x%llu" : "%llu", (unsigned long long)dims[d]);
        if (!nd) snprintf(x->shape, sizeof x->shape, "scalar");
        qs_tensor_matrix_view(dims, nd, &x->rows, &x->cols);
        x->numel = (uint64_t)it->numel;
        x->nbytes = (uint64_t)it->nbytes;
        x->absmax = it->absmax;
        x->kurtosis = it->kurtosis;
        x->outlier = it->outlier_frac;
    }
    qs_tensor_items_free(ts, nts);
    T->vis = malloc((T->nt ? T->nt : 1) * sizeof *T->vis);
    if (!T->vis) return qs_fail(e, "out of memory");
    tui_count_results(T);
    tui_apply_view(T);
    return 0;
}

typedef qs_hash_count hcount;
static int hc_cmp(const void *a, const void *b) { return strcmp(((const hcount *)a)->hash, ((const hcount *)b)->hash); }

void tui_count_results(tui *T)
{
    for (size_t i = 0; i < T->nt; i++) T->t[i].nresults = 0;
    qs_err e = {{0}};
    hcount *h = NULL;
    size_t n = 0;
    if (qs_result_count_by_tensor(T->db, "metrics", QS_VERSION, &h, &n, &e)) return;
    if (n) {
        qsort(h, n, sizeof *h, hc_cmp);
        for (size_t i = 0; i < T->nt; i++) {
            hcount key;
            snprintf(key.hash, sizeof key.hash, "%s", T->t[i].hash);
            hcount *f = bsearch(&key, h, n, sizeof *h, hc_cmp);
            if (f) T->t[i].nresults = f->n;
        }
    }
    free(h);
}

static int keycmp(double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);   /* missing values last */
    return a < b ? -1 : a > b;
}
static int tcmp(const void *pa, const void *pb, void *ctx)
{
    const tui *T = ctx;
    const tui_tensor *a = &T->t[*(const size_t *)pa], *b = &T->t[*(const size_t *)pb];
    int c = 0;
    switch (T->sort_key) {
    case 1: c = keycmp((double)a->nbytes, (double)b->nbytes); break;
    case 2: c = keycmp(a->absmax, b->absmax); break;
    case 3: c = keycmp(a->kurtosis, b->kurtosis); break;
    case 4: c = keycmp(a->outlier, b->outlier); break;
    default: break;
    }
    if (T->sort_desc) c = -c;
    if (!c) c = strcmp(a->name, b->name);
    return c;
}

void tui_apply_view(tui *T)
{
    int cur = tui_cur_tensor_index(T);
    T->nvis = 0;
    for (size_t i = 0; i < T->nt; i++)
        if (!T->filter[0] || strcasestr(T->t[i].name, T->filter)) T->vis[T->nvis++] = i;
    if (T->sort_key || T->sort_desc) qsort_r(T->vis, T->nvis, sizeof *T->vis, tcmp, T);
    T->lt.cur = 0;
    for (size_t i = 0; i < T->nvis; i++)
        if ((int)T->vis[i] == cur) T->lt.cur = (int)i;
}

int tui_cur_tensor_index(tui *T)
{
    if (!T->vis || T->lt.cur < 0 || (size_t)T->lt.cur >= T->nvis) return -1;
    return (int)T->vis[T->lt.cur];
}

tui_tensor *tui_cur_tensor(tui *T)
{
    int i = tui_cur_tensor_index(T);
    return i < 0 ? NULL : &T->t[i];
}

int tui_fmt_set(tui_fmt *F, const qs_apply *a)
{
    free(F->opts);
    F->a = *a;
    F->opts = qs_analysis_options_json(a, 1);
    qs_quant_label(a, NULL, F->label, sizeof F->label);
    return F->opts ? 0 : -1;
}

void tui_fmts_free(tui *T)
{
    for (int i = 0; i < T->nfmts; i++) { free(T->fmts[i].opts); T->fmts[i].opts = NULL; }
    T->nfmts = 0;
}

static double jnum(json_t *o, const char *k) { return qs_json_get_num(o, k); }

void tui_hist_cache_clear(tui *T)
{
    for (int i = 0; i < TUI_MAX_FMTS; i++)
        for (int k = 0; k < 4; k++) {
            free(T->hc[i][k].counts);
            memset(&T->hc[i][k], 0, sizeof T->hc[i][k]);
            T->hc_state[i][k] = 0;
        }
}

void tui_load_metrics(tui *T)
{
    tui_hist_cache_clear(T);
    memset(T->met, 0, sizeof T->met);
    T->met_for = tui_cur_tensor_index(T);
    tui_tensor *t = tui_cur_tensor(T);
    if (!t) return;
    for (int i = 0; i < T->nfmts; i++) {
        char *data = NULL;
        int64_t id;
        qs_err e = {{0}};
        if (qs_result_get(T->db, t->hash, "metrics", T->fmts[i].a.f->name, T->fmts[i].opts, &data, &id, &e) || !data) continue;
        json_t *j = json_loads(data, 0, NULL);
        free(data);
        if (!j) continue;
        tui_metrics *m = &T->met[i];
        m->have = 1;
        if (T->fmts[i].a.f->block != 1) {   /* the Blocks view needs them: the background job adds them */
            char *bd = NULL;
            int64_t bid;
            m->no_blocks = qs_result_get(T->db, t->hash, "blocks", T->fmts[i].a.f->name, T->fmts[i].opts, &bd, &bid, &e) || !bd;
            free(bd);
        }
        m->bits = jnum(j, "bits_per_elem");
        m->eff_bits = jnum(j, "eff_bits_energy");
        m->sqnr = jnum(j, "sqnr_db");
        m->max_rel = jnum(j, "max_rel_err");
        m->under = jnum(j, "underflow_frac");
        m->clip = jnum(j, "clip_frac");
        m->rmse = jnum(j, "rmse");
        m->nonfinite = jnum(j, "nonfinite_frac");
        qs_err_src es = qs_err_src_of(j);
        qs_err_src_short(&es, m->src, sizeof m->src);
        json_decref(j);
    }
    tui_sort_formats(T);
    if (T->fauto_for != T->met_for) { T->fauto_for = T->met_for; T->fauto = 1; }
    if (T->fauto) tui_cursor_best_format(T);
}

/* The Formats cursor on the format a first look wants (Enter then shows blocks): of the block
** formats, the most effective bits at <= 4.5 bits per element, else at any width; element casts
** (bf16, fp8) only when nothing else has a result. */
void tui_cursor_best_format(tui *T)
{
    int best = -1, rank = -1;
    for (int r = 0; r < T->nfmts; r++) {
        int i = T->forder ? T->forder[r] : r;
        const tui_metrics *m = &T->met[i];
        if (!m->have || !(m->eff_bits == m->eff_bits)) continue;
        int k = T->fmts[i].a.f->block == 1 ? 0 : m->bits <= 4.5 ? 2 : 1;
        if (k > rank || (k == rank && m->eff_bits > T->met[T->forder ? T->forder[best] : best].eff_bits)) {
            best = r;
            rank = k;
        }
    }
    if (best >= 0) T->lf.cur = best;
}

/* Formats view order: as chosen, or by a column (missing results last). */
static double fkey(const tui_metrics *m, int col)
{
    if (!m->have) return NAN;
    switch (col) {
    case 1: return m->bits;
    case 2: return m->eff_bits;
    case 3: return m->sqnr;
    case 4: return m->max_rel;
    case 5: return m->under;
    default: return m->clip;
    }
}
static int fcmp(const void *pa, const void *pb, void *ctx)
{
    const tui *T = ctx;
    int a = *(const int *)pa, b = *(const int *)pb;
    int c = keycmp(fkey(&T->met[a], T->fsort), fkey(&T->met[b], T->fsort));
    if (T->fsort_desc && !(isnan(fkey(&T->met[a], T->fsort)) || isnan(fkey(&T->met[b], T->fsort)))) c = -c;
    return c ? c : a - b;
}
void tui_sort_formats(tui *T)
{
    if (!T->forder) T->forder = malloc(TUI_MAX_FMTS * sizeof *T->forder);
    if (!T->forder) return;
    for (int i = 0; i < T->nfmts; i++) T->forder[i] = i;
    if (T->fsort) qsort_r(T->forder, (size_t)T->nfmts, sizeof *T->forder, fcmp, T);
    else if (T->fsort_desc)
        for (int i = 0; i < T->nfmts / 2; i++) { int x = T->forder[i]; T->forder[i] = T->forder[T->nfmts - 1 - i]; T->forder[T->nfmts - 1 - i] = x; }
}

/* One stored histogram of the current tensor under format fi (a copy: the caller frees counts).
** The "hist" result of a format is parsed once and its four histograms cached. */
int tui_load_hist(tui *T, int fi, const char *which, qs_hist *h)
{
    static const char *const names[4] = {"rel_err", "abs_err", "ulp_err", "value"};
    memset(h, 0, sizeof *h);
    int k = 0;
    while (k < 4 && strcmp(names[k], which)) k++;
    tui_tensor *t = tui_cur_tensor(T);
    if (!t || fi < 0 || fi >= T->nfmts || k == 4) return -1;
    if (T->met_for != tui_cur_tensor_index(T)) tui_load_metrics(T);
    if (!T->hc_state[fi][k]) {
        char *data = NULL;
        int64_t id;
        qs_err e = {{0}};
        json_t *j = NULL;
        if (!qs_result_get(T->db, t->hash, "hist", T->fmts[fi].a.f->name, T->fmts[fi].opts, &data, &id, &e) && data)
            j = json_loads(data, 0, NULL);
        free(data);
        for (int q = 0; q < 4; q++)
            T->hc_state[fi][q] = j && !qs_hist_from_json(json_object_get(j, names[q]), &T->hc[fi][q]) ? 1 : -1;
        json_decref(j);
    }
    if (T->hc_state[fi][k] < 0) return -1;
    *h = T->hc[fi][k];
    size_t nb = (size_t)(h->nbins > 0 ? h->nbins : 0);
    h->counts = malloc((nb ? nb : 1) * sizeof *h->counts);
    if (!h->counts) return -1;
    if (nb) memcpy(h->counts, T->hc[fi][k].counts, nb * sizeof *h->counts);
    return 0;
}

void tui_blocks_free(tui_blocks *b)
{
    free(b->rmse); free(b->absmax); free(b->ratio); free(b->scale);
    memset(b, 0, sizeof *b);
}

static float *blob_f32(qs_db *db, int64_t id, const char *name, uint64_t n)
{
    void *p = NULL;
    size_t nb = 0;
    qs_err e = {{0}};
    if (qs_result_blob_get(db, id, name, &p, &nb, &e) || !p) return NULL;
    if (nb != n * 4) { free(p); return NULL; }   /* a blob of the wrong size is ignored, never read past */
    return p;
}

int tui_load_blocks(tui *T, int ti, int fi)
{
    tui_blocks_free(&T->blk);
    T->blk_for = ti;
    T->blk_fmt = fi;
    if (ti < 0 || fi < 0 || fi >= T->nfmts) return -1;
    tui_tensor *t = &T->t[ti];
    char *data = NULL;
    int64_t id;
    qs_err e = {{0}};
    if (qs_result_get(T->db, t->hash, "blocks", T->fmts[fi].a.f->name, T->fmts[fi].opts, &data, &id, &e) || !data) return -1;
    json_t *j = json_loads(data, 0, NULL);
    free(data);
    if (!j) return -1;
    tui_blocks *b = &T->blk;
    b->nblocks = (uint64_t)json_integer_value(json_object_get(j, "nblocks"));
    b->block = (int)json_integer_value(json_object_get(j, "block"));
    b->axis = (int)json_integer_value(json_object_get(j, "axis"));
    b->rows = (uint64_t)json_integer_value(json_object_get(j, "rows"));
    b->cols = (uint64_t)json_integer_value(json_object_get(j, "cols"));
    json_decref(j);
    if (!b->nblocks || b->nblocks > (1ull << 31) || b->rows * b->cols != t->numel) { tui_blocks_free(b); return -1; }
    b->rmse = blob_f32(T->db, id, "rmse", b->nblocks);
    b->absmax = blob_f32(T->db, id, "absmax", b->nblocks);
    b->ratio = blob_f32(T->db, id, "ratio", b->nblocks);
    void *p = NULL;
    size_t nb = 0;
    if (!qs_result_blob_get(T->db, id, "scale_code", &p, &nb, &e) && p) {
        if (nb == b->nblocks) b->scale = p;
        else free(p);
    }
    if (!b->rmse) { tui_blocks_free(b); return -1; }
    b->lo = INFINITY;
    b->hi = -INFINITY;
    for (uint64_t i = 0; i < b->nblocks; i++) {
        double v = b->rmse[i];
        if (!(v > 0) || !isfinite(v)) continue;
        double l = log10(v);
        if (l < b->lo) b->lo = l;
        if (l > b->hi) b->hi = l;
    }
    b->have = 1;
    return 0;
}

/* ---- RL runs ---- */

static void runs_free(tui *T)
{
    for (size_t i = 0; i < T->nruns; i++) { free(T->runs[i].name); free(T->runs[i].label); }
    free(T->runs);
    T->runs = NULL;
    T->nruns = 0;
}

void tui_rlc_free(tui_rlc *c)
{
    free(c->x);
    for (int m = 0; m < 8; m++) free(c->y[m]);
    memset(c, 0, sizeof *c);
}

void tui_rl_cache_clear(tui *T)
{
    for (int i = 0; i < T->nrlc; i++) tui_rlc_free(&T->rlc[i]);
    free(T->rlc);
    T->rlc = NULL;
    T->nrlc = 0;
}

void tui_rl_cache_take(tui *T, tui_rlc *c, int n)
{
    tui_rlc *nc = realloc(T->rlc, (size_t)(T->nrlc + n) * sizeof *nc);
    if (!nc) { for (int i = 0; i < n; i++) tui_rlc_free(&c[i]); free(c); return; }
    T->rlc = nc;
    for (int i = 0; i < n; i++) {
        T->rlc[T->nrlc++] = c[i];
        for (size_t r = 0; r < T->nruns; r++)
            if (T->runs[r].id == c[i].run) {
                T->runs[r].tokens = c[i].tokens; T->runs[r].steps = c[i].steps; T->runs[r].seqs = c[i].seqs;
                T->runs[r].first = c[i].n ? c[i].x[0] : NAN;
                T->runs[r].last = c[i].n ? c[i].x[c[i].n - 1] : NAN;
            }
    }
    free(c);
}

const tui_rlc *tui_rl_get(tui *T, int64_t run)
{
    for (int i = 0; i < T->nrlc; i++)
        if (T->rlc[i].run == run) return &T->rlc[i];
    return NULL;
}

int tui_load_runs(tui *T, qs_err *e)
{
    tui_rl_cache_clear(T);
    runs_free(T);
    T->runs_loaded = 1;
    /* names only: the token counts read every token and come from the worker (tui_rl_compute) */
    qs_run_item *ri;
    size_t nri;
    if (qs_run_names(T->db, QS_RUNS_BY_NAME, &ri, &nri, e)) return -1;
    if (nri && !(T->runs = malloc(nri * sizeof *T->runs))) { qs_run_items_free(ri, nri); return 0; }
    for (size_t i = 0; i < nri; i++) {
        tui_run *r = &T->runs[T->nruns++];
        r->id = ri[i].id;
        r->name = dupz(ri[i].name);
        const char *lab = ri[i].label, *src = ri[i].source;
        if ((!lab || !*lab) && src && strrchr(src, '/')) src = strrchr(src, '/') + 1;   /* a path: its file name */
        r->label = strdup(lab && *lab ? lab : src ? src : "");
        r->tokens = r->steps = r->seqs = -1;
        r->per_prompt = qs_rl_run_xkind(ri[i].metadata) == QS_RL_X_PROMPT;
    }
    qs_run_items_free(ri, nri);
    return 0;
}

/* Per-step diagnostics of spec/ais-rl.md §3.7, from the masked tokens, delta = lp_train - lp_rollout. */
static const char *const kRlMetrics[] = {
    "mean |dlogp| (nats)", "p95 |dlogp| (nats)", "max |dlogp| (nats)", "KL k3 = mean(e^d - 1 - d)",
    "KL k1 = mean(-d)", "token IS weight max e^d", "fraction of tokens with e^d outside [0.8, 1.2]",
};
int tui_rl_nmetrics(void) { return (int)(sizeof kRlMetrics / sizeof *kRlMetrics); }
const char *tui_rl_metric_name(int m) { return m >= 0 && m < tui_rl_nmetrics() ? kRlMetrics[m] : "?"; }

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double step_metric(int metric, double *d, size_t n)
{
    if (!n) return NAN;
    double s = 0, mx = 0, wmax = 0;
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        double a = fabs(d[i]), w = exp(d[i]);
        switch (metric) {
        case 0: s += a; break;
        case 2: if (a > mx) mx = a; break;
        case 3: s += expm1(d[i]) - d[i]; break;
        case 4: s += -d[i]; break;
        case 5: if (w > wmax) wmax = w; break;
        case 6: out += w < 0.8 || w > 1.2; break;
        default: break;
        }
    }
    switch (metric) {
    case 0: case 3: case 4: return s / (double)n;
    case 1: {
        for (size_t i = 0; i < n; i++) d[i] = fabs(d[i]);
        qsort(d, n, sizeof *d, dcmp);
        return d[(size_t)ceil(0.95 * (double)n) - 1];   /* nearest rank */
    }
    case 2: return mx;
    case 5: return wmax;
    default: return (double)out / (double)n;
    }
}

/* Counts (tokens, steps, sequences) and every diagnostic per step, in one pass over the run's tokens
** in (step, seq, pos) order; the diagnostics use the unmasked tokens.  The p95 sorts the step's
** deltas, so it is computed last. */
int tui_rl_compute(qs_db *db, int64_t run, tui_rlc *out, qs_err *e)
{
    int nm = tui_rl_nmetrics();
    memset(out, 0, sizeof *out);
    out->run = run;
    qs_rl_cursor *st = qs_rl_deltas_open(db, run, e);
    if (!st) return -1;
    qs_rl_delta row;
    size_t cap = 0, ns = 0, capd = 1024, nd = 0;
    double *d = malloc(capd * sizeof *d);
    int64_t cur = 0, last_seq = -1;
    int have = 0, rc = d ? 0 : qs_fail(e, "out of memory");
    while (!rc) {
        int r = qs_rl_deltas_next(st, &row, e);
        if (r < 0) { rc = -1; break; }
        int64_t stp = r ? row.step : 0;
        if (have && (!r || stp != cur)) {
            if (nd) {   /* a step with unmasked tokens: one point */
                if (ns == cap) {
                    cap = cap ? 2 * cap : 64;
                    double *nx = realloc(out->x, cap * sizeof *nx);
                    if (!nx) { rc = qs_fail(e, "out of memory"); break; }
                    out->x = nx;
                    for (int m = 0; m < nm && !rc; m++) {
                        double *ny = realloc(out->y[m], cap * sizeof *ny);
                        if (!ny) rc = qs_fail(e, "out of memory");
                        else out->y[m] = ny;
                    }
                    if (rc) break;
                }
                out->x[ns] = (double)cur;
                for (int m = 0; m < nm; m++) if (m != 1) out->y[m][ns] = step_metric(m, d, nd);
                out->y[1][ns] = step_metric(1, d, nd);   /* sorts d */
                ns++;
            }
            nd = 0;
            last_seq = -1;
        }
        if (!r) break;
        if (!have || stp != cur) out->steps++;
        int64_t sq = row.seq;
        if (sq != last_seq) { out->seqs++; last_seq = sq; }
        out->tokens++;
        cur = stp;
        have = 1;
        if (!row.mask) continue;
        if (nd == capd) {
            double *nd2 = realloc(d, 2 * capd * sizeof *d);
            if (!nd2) { rc = qs_fail(e, "out of memory"); break; }
            d = nd2;
            capd *= 2;
        }
        d[nd++] = row.delta;
    }
    qs_rl_cursor_close(st);
    free(d);
    if (rc) { tui_rlc_free(out); return -1; }
    out->n = ns;
    return 0;
}

/* ---- stored trajectory / msd / attn results ---- */

int tui_load_kres(tui *T, qs_err *e)
{
    for (size_t i = 0; i < T->nkres; i++) { free(T->kres[i].format); free(T->kres[i].hash); free(T->kres[i].created); free(T->kres[i].what); }
    free(T->kres);
    T->kres = NULL;
    T->nkres = 0;
    /* what a row is about: the data's title (RL trajectories: "overview", "ess", ...), else the run
    ** and set of its options, else what it plots (ylabel) */
    qs_kernel_item *ki;
    size_t nki;
    if (qs_kernel_list(T->db, &ki, &nki, e)) return -1;
    if (nki && !(T->kres = malloc(nki * sizeof *T->kres))) { qs_kernel_items_free(ki, nki); return 0; }
    for (size_t i = 0; i < nki; i++) {
        tui_kres *k = &T->kres[T->nkres++];
        k->id = ki[i].id;
        snprintf(k->kind, sizeof k->kind, "%s", ki[i].kind);
        k->format = dupz(ki[i].format);
        k->hash = dupz(ki[i].tensor_hash);
        k->created = dupz(ki[i].created_at);
        const char *ti = ki[i].title, *run = ki[i].run, *set = ki[i].set, *yl = ki[i].ylabel;
        char w[300];
        if (strcmp(k->kind, "trajectory"))   /* a kernel experiment covers many formats: name it by what it is */
            qs_kx_label(k->kind, ki[i].options, ki[i].data, w, sizeof w);
        else if (ti && *ti) snprintf(w, sizeof w, "%s", ti);
        else if (run || set) snprintf(w, sizeof w, "%s%s%s", run ? run : "", run && set ? " / " : "", set ? set : "");
        else if (yl && *yl) snprintf(w, sizeof w, "%s", yl);
        else snprintf(w, sizeof w, "-");
        k->what = strdup(w);
    }
    qs_kernel_items_free(ki, nki);
    return 0;
}

/* A stored kernel or RL result in the documented line layout (docs/plots.md), drawn by the CLI's
** builder; the workbench titles it "KIND  FORMAT" unless the result has a title, and always uses the
** stored x-axis title. */
qs_figure *tui_kres_figure(tui *T, int64_t id, qs_err *e)
{
    qs_result_item ri;
    int found;
    if (qs_result_by_id(T->db, id, &ri, &found, e)) return NULL;
    if (!found) { qs_fail(e, "result %lld is gone", (long long)id); return NULL; }
    char kind[16], title[160];
    snprintf(kind, sizeof kind, "%s", ri.kind ? ri.kind : "");
    snprintf(title, sizeof title, "%s  %s", kind, ri.format ? ri.format : "");
    for (size_t i = 0; i < T->nkres; i++)   /* kernel experiments: the name of the list */
        if (T->kres[i].id == id && strcmp(kind, "trajectory")) snprintf(title, sizeof title, "%s", T->kres[i].what);
    char *text = strdup(ri.data ? ri.data : "");
    qs_result_item_free(&ri);
    if (!text) { qs_fail(e, "out of memory"); return NULL; }
    qs_figure *fig = qs_plot_lines_json(kind, text, title, e);
    const char *why = fig ? NULL : qs_plot_lines_json_problem(text);
    if (why)   /* name the result and what is wrong with it */
        qs_fail(e, "stored %s result %lld is not in the documented layout (docs/plots.md): %s", kind, (long long)id, why);
    json_t *j = fig ? json_loads(text, 0, NULL) : NULL;
    const char *xl = json_string_value(json_object_get(j, "xlabel"));
    if (xl) snprintf(fig->x.title, sizeof fig->x.title, "%s", xl);
    json_decref(j);
    free(text);
    return fig;
}
