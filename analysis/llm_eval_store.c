/*
** Stored `llm eval` results grouped into runs (llm_eval_store.h).
*/
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_eval_store.h"
#include "llm_results.h"
#include "../kernels/qs_version.h"
#include "../store/text_escape.h"

static void read_hist(json_t *h, qs_klhist *out)
{
    memset(out, 0, sizeof *out);
    json_t *c = json_object_get(h, "counts");
    for (size_t k = 0; k < json_array_size(c) && k < QS_KLHIST_BINS; k++)
        out->counts[k] = (uint64_t)json_integer_value(json_array_get(c, k));
    out->zero = (uint64_t)json_integer_value(json_object_get(h, "zero"));
    out->under = (uint64_t)json_integer_value(json_object_get(h, "under"));
    out->over = (uint64_t)json_integer_value(json_object_get(h, "over"));
    out->nonfinite = (uint64_t)json_integer_value(json_object_get(h, "nonfinite"));
}

void qs_evruns_free(qs_evrun *runs, size_t n)
{
    for (size_t i = 0; i < n; i++) free(runs[i].cfg);
    free(runs);
}

/* The runs read so far, and the grouping key of each (model hash and options without the numerics). */
typedef struct evload {
    qs_evrun *R;
    char **keys;
    size_t nr, cap;
} evload;

/* The run of key, a new one (from its options o) when there is none yet; NULL when out of memory. */
static qs_evrun *run_of(evload *L, char *key, const char *hash, json_t *o)
{
    size_t r = 0;
    while (r < L->nr && strcmp(L->keys[r], key)) r++;
    if (r < L->nr) { free(key); return &L->R[r]; }
    if (L->nr == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 8;
        qs_evrun *NR = realloc(L->R, L->cap * sizeof *NR);
        char **NK = NR ? realloc(L->keys, L->cap * sizeof *NK) : NULL;
        if (NR) L->R = NR;
        if (NK) L->keys = NK;
        if (!NR || !NK) { free(key); return NULL; }
    }
    qs_evrun *u = &L->R[L->nr];
    memset(u, 0, sizeof *u);
    L->keys[L->nr++] = key;
    snprintf(u->model_hash, sizeof u->model_hash, "%s", hash);
    u->ctx = (int)json_integer_value(json_object_get(o, "ctx"));
    u->chunks = (int)json_integer_value(json_object_get(o, "chunks"));
    snprintf(u->score, sizeof u->score, "%s", json_string_value(json_object_get(o, "score")) ? json_string_value(json_object_get(o, "score")) : "?");
    snprintf(u->text, sizeof u->text, "text %.12s", json_string_value(json_object_get(o, "text")) ? json_string_value(json_object_get(o, "text")) : "?");
    for (int i = 0; i < QS_EVS_N; i++) u->ref[i] = NAN;
    return u;
}

/* names, when the result carries them */
static void read_names(qs_evrun *u, json_t *run)
{
    if (!json_is_object(run)) return;
    const char *s;
    /* cut, if at all, between characters: the names go on into titles and JSON */
    if ((s = json_string_value(json_object_get(run, "model"))))
        snprintf(u->model, sizeof u->model, "%.*s", (int)qs_utf8_prefix(s, sizeof u->model - 1), s);
    if ((s = json_string_value(json_object_get(run, "text")))) {   /* the file's name: paths differ between machines */
        const char *b = strrchr(s, '/');
        s = b ? b + 1 : s;
        snprintf(u->text, sizeof u->text, "%.*s", (int)qs_utf8_prefix(s, sizeof u->text - 1), s);
    }
    if ((s = json_string_value(json_object_get(run, "tensor_types")))) snprintf(u->wtypes, sizeof u->wtypes, "%s", s);
}

/* One stored variant into its run: the reference's statistics, or one more configuration. */
static int add_row(void *ctx, const qs_llm_result_row *row, qs_err *e)
{
    evload *L = ctx;
    json_t *o = row->opts, *d = row->data;
    if (!o || !row->format) return 0;   /* not ours to judge here */
    json_t *nx = json_incref(json_object_get(o, "numerics"));
    json_object_del(o, "numerics");
    char *ks = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS), *key = NULL;
    if (ks && asprintf(&key, "%s %s", row->hash, ks) < 0) key = NULL;
    free(ks);
    qs_evrun *u = key ? run_of(L, key, row->hash, o) : NULL;
    int rc = 0;
    if (!u) { rc = qs_fail(e, "out of memory"); goto done; }
    read_names(u, json_object_get(d, "run"));
    if (!strcmp(row->format, "reference")) {
        u->have_ref = 1;
        qs_evstats_get(d, u->ref);
        u->scored = (size_t)json_integer_value(json_object_get(d, "scored"));
        goto done;
    }
    qs_evcfg *NC = realloc(u->cfg, (size_t)(u->ncfg + 1) * sizeof *NC);
    if (!NC) { rc = qs_fail(e, "out of memory"); goto done; }
    u->cfg = NC;
    qs_evcfg *c = &u->cfg[u->ncfg++];
    memset(c, 0, sizeof *c);
    c->id = row->id;
    snprintf(c->label, sizeof c->label, "%s", row->format);
    json_t *w = json_object_get(nx, "weights");
    c->has_w = w && !(json_is_string(w) && !strcmp(json_string_value(w), "fp32"));
    c->scored = (size_t)json_integer_value(json_object_get(d, "scored"));
    c->failed = qs_evstats_failed(d, &c->nonfinite_rows);
    qs_evstats_get(d, c->v);
    read_hist(json_object_get(d, "kl_hist"), &c->hist);
done:
    json_decref(nx);
    return rc;
}

int qs_evruns_load(qs_db *db, qs_evrun **runs, size_t *n, qs_err *e)
{
    *runs = NULL;
    *n = 0;
    evload L = {NULL, NULL, 0, 0};
    int rc = qs_llm_results_each(db, "llm_eval", add_row, &L, e);
    for (size_t i = 0; i < L.nr; i++) free(L.keys[i]);
    free(L.keys);
    if (rc) { qs_evruns_free(L.R, L.nr); return -1; }
    *runs = L.R;
    *n = L.nr;
    return 0;
}

int qs_evrun_quantized_origin(const qs_evrun *r)
{
    static const char *const q[] = {"q4", "q5", "q6", "q8", "Q4", "Q5", "Q6", "Q8", "iq"};
    for (size_t i = 0; i < sizeof q / sizeof *q; i++)
        if (strstr(r->wtypes, q[i])) return 1;
    return 0;
}

/* The most frequent quantized type of a "TYPE xN, ..." list (q4_1 for SmolLM2), or "" */
static void main_qtype(const char *wt, char *out, size_t cap)
{
    long best = 0;
    out[0] = 0;
    for (const char *p = wt; p && *p;) {
        while (*p == ' ' || *p == ',') p++;
        char ty[32];
        long cnt = 0;
        if (sscanf(p, "%31s x%ld", ty, &cnt) == 2 && (ty[0] == 'q' || ty[0] == 'Q' || ty[0] == 'i') && cnt > best) {
            best = cnt;
            snprintf(out, cap, "%s", ty);
        }
        p = strchr(p, ',');
    }
}

void qs_evrun_caveat(const qs_evrun *r, char *buf, size_t cap)
{
    int w = 0;
    for (int i = 0; i < r->ncfg; i++) w |= r->cfg[i].has_w;
    char qt[32];
    main_qtype(r->wtypes, qt, sizeof qt);
    int bits = 0;
    for (const char *p = qt; *p && !bits; p++) if (*p >= '1' && *p <= '9') bits = *p - '0';
    if (w && qs_evrun_quantized_origin(r)) {
        char grid[16] = "quantized";
        if (bits) snprintf(grid, sizeof grid, "%d-bit", bits);
        snprintf(buf, cap, "weights already on a %s grid (%s): weight-format results are relative to it", grid, qt[0] ? qt : r->wtypes);
    } else if (w && !r->wtypes[0])
        snprintf(buf, cap, "the model's weight types are not stored with this result: if they were quantized, "
                           "weight-format results are relative to that grid");
    else if (cap) buf[0] = 0;
}

const char *qs_evrun_model(const qs_evrun *r) { return r->model[0] ? r->model : r->model_hash; }

qs_figure *qs_plot_kl(const qs_evrun *r, const int *sel, int nsel, int cdf)
{
    char title[256];
    const char *mn = qs_evrun_model(r);
    snprintf(title, sizeof title, "Per-token KL(reference || config)%s: %.*s, %.*s, ctx %d", cdf ? " CDF" : "",
             (int)qs_utf8_prefix(mn, 60), mn, (int)qs_utf8_prefix(r->text, 80), r->text, r->ctx);
    qs_figure *f = qs_fig_new(title);
    if (!f) return NULL;
    qs_axis_set(&f->x, QS_AX_LOG10, "KL divergence per token (nats)");
    qs_axis_set(&f->y, QS_AX_LINEAR, cdf ? "fraction of tokens with KL <= x" : "fraction of tokens per bin (quarter octave)");
    f->y.zero_base = 1;
    double ed[QS_KLHIST_BINS + 1], y[QS_KLHIST_BINS + 1], x[QS_KLHIST_BINS + 1];
    for (int k = 0; k <= QS_KLHIST_BINS; k++) ed[k] = qs_klhist_edge(k);
    uint64_t zeros = 0;
    for (int s = 0; s < nsel; s++) {
        const qs_evcfg *c = &r->cfg[sel[s]];
        const qs_klhist *h = &c->hist;
        uint64_t tot = h->zero + h->under + h->over;
        int lo = QS_KLHIST_BINS, hi = -1;
        for (int k = 0; k < QS_KLHIST_BINS; k++) {
            tot += h->counts[k];
            if (h->counts[k]) { if (k < lo) lo = k; hi = k; }
        }
        zeros += h->zero;
        if (!tot) continue;
        qs_series *se;
        if (hi < 0) {   /* every token KL = 0 (identical numerics): nothing on a log axis */
            se = qs_fig_add(f, QS_SER_LINE, c->label, NULL, NULL, 0);
        } else if (cdf) {
            /* the fraction at or below each edge; tokens with KL <= 0 or under the first bin count from the start */
            double acc = (double)(h->zero + h->under);
            int m = 0;
            x[m] = ed[lo]; y[m++] = acc / (double)tot;
            for (int k = lo; k <= hi; k++) { acc += (double)h->counts[k]; x[m] = ed[k + 1]; y[m++] = acc / (double)tot; }
            se = qs_fig_add(f, QS_SER_LINE, c->label, x, y, (size_t)m);
            if (se) se->marker = QS_MK_NONE;   /* a curve of 140 bins, not points */
        } else {
            for (int k = lo; k <= hi; k++) y[k - lo] = (double)h->counts[k] / (double)tot;
            se = qs_fig_add(f, QS_SER_STEP, c->label, ed + lo, y, (size_t)(hi - lo + 1));
        }
        if (!se) { qs_fig_free(f); return NULL; }
        se->color = s % QS_PALETTE_N;
    }
    if (cdf) { f->y.lo = 0; f->y.hi = 1; }
    if (zeros)
        snprintf(f->note, sizeof f->note, cdf ? "%llu token%s with KL = 0 (identical distributions) counted from the left edge"
                                              : "%llu token%s with KL = 0 (identical distributions) not drawn on the log axis",
                 (unsigned long long)zeros, zeros == 1 ? "" : "s");
    return f;
}
