/*
** Analyses from the command line (see analyze_run.h).
*/
#include "analyze_run.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "par.h"
#include "quant_opts.h"
#include "../store/json_out.h"

typedef struct { const char *label; int tty; double last; volatile sig_atomic_t *stop; } progress_ctx;

static int progress(void *ctx, uint64_t done, uint64_t total)
{
    progress_ctx *p = ctx;
    if (p->stop && *p->stop) return 1;
    if (p->tty && total) {
        double f = (double)done / (double)total;
        if (f - p->last >= 0.01 || done == total) {
            int w = 30, k = (int)(f * w);
            fprintf(stderr, "\r\033[K[%.*s%*s] %3.0f%% %s", k, "##############################", w - k, "", 100 * f, p->label);
            p->last = f;
        }
    }
    return 0;
}

static int analyze_one_stop(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int force, int threads,
                            int show_progress, volatile sig_atomic_t *stop, qs_hist *vcache, json_t **metrics_out,
                            int *cached, qs_err *e)
{
    char label[600], fl[128];
    qs_quant_label(a, NULL, fl, sizeof fl);
    snprintf(label, sizeof label, "%s  %s", qs_esc(t->name), fl);
    progress_ctx pc = {label, show_progress, -1, stop};
    int rc = qs_analyze_one_cb(db, t, a, blocks, force, threads, progress, &pc, vcache, metrics_out, cached, e);
    if (show_progress && pc.last >= 0) fprintf(stderr, "\r\033[K");
    return rc;
}

int qs_analyze_one(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int force, int threads,
                   int show_progress, qs_hist *vcache, json_t **metrics_out, int *cached, qs_err *e)
{
    return analyze_one_stop(db, t, a, blocks, force, threads, show_progress, NULL, vcache, metrics_out, cached, e);
}

/* ---- the sweep ---- */

typedef struct {
    const qs_sweep *s;
    qs_tensor_rec *t;
    qs_hist vcache;     /* the value histogram of tensor vc_t */
    size_t vc_t;
} sweep_ctx;

/* A unit's bytes: 'R' + the stored metrics JSON text with its NUL (reused), or 'C' + a packed
** qs_an_result (computed). */
static int unit_fn(size_t i, void *ctx, uint8_t **out, size_t *out_len, qs_err *e)
{
    sweep_ctx *c = ctx;
    const qs_sweep *s = c->s;
    size_t ti = i / (size_t)s->napps;
    int k = (int)(i % (size_t)s->napps);
    const qs_tensor_rec *t = &c->t[ti];
    const qs_apply *a = &s->apps[k];
    if (c->vc_t != ti) {
        qs_value_cache_clear(&c->vcache);
        c->vc_t = ti;
    }
    /* a stored result is of the imported content: never hand it out for a file that changed since */
    if (qs_tensor_ref_check(t, e)) return -1;
    char *data = NULL;
    if (!s->force && qs_analysis_lookup(s->db, t, a, s->blocks, &data, e)) return -1;
    if (data) {
        size_t n = strlen(data) + 1;
        uint8_t *b = malloc(n + 1);
        if (!b) { free(data); return qs_fail(e, "out of memory"); }
        b[0] = 'R';
        memcpy(b + 1, data, n);
        free(data);
        *out = b;
        *out_len = n + 1;
        return 0;
    }
    char label[600], fl[128];
    qs_quant_label(a, NULL, fl, sizeof fl);
    snprintf(label, sizeof label, "%s  %s", qs_esc(t->name), fl);
    /* one rank shows each analysis's own bar; under MPI rank 0 shows the job's line instead */
    progress_ctx pc = {label, s->tty && qs_par_size() == 1 && !(s->stop && *s->stop), -1, s->stop};
    qs_an_result r;
    int rc = qs_analysis_compute(s->db, t, a, s->blocks, s->threads, progress, &pc, &c->vcache, &r, e);
    if (pc.tty && pc.last >= 0) fprintf(stderr, "\r\033[K");
    if (rc) return -1;
    uint8_t *p = NULL;
    size_t n = 0;
    rc = qs_an_result_pack(&r, &p, &n, e);
    qs_an_result_free(&r);
    if (rc) return -1;
    uint8_t *b = malloc(n + 1);
    if (!b) { free(p); return qs_fail(e, "out of memory"); }
    b[0] = 'C';
    memcpy(b + 1, p, n);
    free(p);
    *out = b;
    *out_len = n + 1;
    return 0;
}

static int collect_fn(size_t i, const uint8_t *b, size_t len, void *ctx, qs_err *e)
{
    sweep_ctx *c = ctx;
    const qs_sweep *s = c->s;
    size_t ti = i / (size_t)s->napps;
    int k = (int)(i % (size_t)s->napps);
    const qs_tensor_rec *t = &c->t[ti];
    const qs_apply *a = &s->apps[k];
    if (len < 2 || (b[0] != 'R' && b[0] != 'C') || (b[0] == 'R' && b[len - 1] != 0))
        return qs_fail(e, "a rank's analysis result is malformed (%zu bytes)", len);
    int cached = b[0] == 'R';
    char *stored = NULL;
    const char *mj = (const char *)b + 1;
    qs_an_result r;
    memset(&r, 0, sizeof r);
    if (!cached) {
        if (qs_an_result_unpack(b + 1, len - 1, &r, e)) return -1;
        /* two tensors of one content are one result: an earlier unit of this job stored it, as a
        ** single process would have found it stored */
        if (qs_par_size() > 1 && !s->force && qs_analysis_lookup(s->db, t, a, s->blocks, &stored, e)) goto fail;
        if (stored) {
            cached = 1;
            mj = stored;
        } else {
            if (qs_analysis_store(s->db, t, a, &r, e)) goto fail;
            mj = r.metrics;
        }
    }
    int rc = 0;
    if (s->row) {
        json_t *m = json_loads(mj, 0, NULL);
        if (!m) rc = cached ? qs_fail(e, "stored result for %s / %s is not valid JSON", t->name, a->f->name)
                            : qs_fail(e, "out of memory");
        else {
            if (cached) qs_json_fix_legacy_nums(m);
            rc = s->row(s->row_ctx, t, k, m, cached, e);
        }
        json_decref(m);
    }
    free(stored);
    qs_an_result_free(&r);
    return rc;
fail:
    free(stored);
    qs_an_result_free(&r);
    return -1;
}

int qs_analyze_sweep(const qs_sweep *s, qs_err *e)
{
    size_t n = s->nnames * (size_t)s->napps;
    sweep_ctx c = {.s = s, .vc_t = (size_t)-1};
    c.t = calloc(s->nnames ? s->nnames : 1, sizeof *c.t);
    double *cost = malloc((n ? n : 1) * sizeof *cost);
    int rc = -1;
    size_t loaded = 0;
    if (!c.t || !cost) { qs_fail(e, "out of memory"); goto out; }
    for (; loaded < s->nnames; loaded++)
        if (qs_tensor_get(s->db, s->names[loaded], &c.t[loaded], e)) goto out;
    /* the cost of a pair is its tensor's size: every format reads and quantizes every value once */
    for (size_t i = 0; i < n; i++) cost[i] = (double)c.t[i / (size_t)s->napps].numel;
    rc = qs_par_run(n, cost, unit_fn, collect_fn, &c, qs_par_size() > 1 ? "analyze" : NULL, e);
out:
    qs_value_cache_clear(&c.vcache);
    for (size_t k = 0; k < loaded; k++) qs_tensor_rec_free(&c.t[k]);
    free(c.t);
    free(cost);
    return rc;
}
