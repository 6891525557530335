/*
** Analyses from the command line (see analyze_run.h).
*/
#include "analyze_run.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "par.h"
#include "quant_opts.h"
#include "../../store/json_out.h"

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

/* A unit: the pairs [pair, pair + npairs) (formats of one tensor), or, under MPI, for a pair much
** larger than a rank's share, the part r of k of its bands, [b0, b1). */
typedef struct { size_t pair, npairs; uint64_t b0, b1; uint32_t r, k; } sweep_unit;

typedef struct {
    const qs_sweep *s;
    qs_tensor_rec *t;
    sweep_unit *u;
    qs_hist vcache;     /* the value histogram of tensor vc_t */
    size_t vc_t;
    qs_an_part *acc;    /* rank 0: the parts of the pair being merged, in band order */
    int in_tx;          /* rank 0: storing a unit's pairs in one transaction */
} sweep_ctx;

static int bytes_of(char tag, const void *p, size_t n, uint8_t **out, size_t *out_len, qs_err *e)
{
    uint8_t *b = malloc(n + 1);
    if (!b) return qs_fail(e, "out of memory");
    b[0] = (uint8_t)tag;
    if (n) memcpy(b + 1, p, n);
    *out = b;
    *out_len = n + 1;
    return 0;
}

/* A unit's bytes: 'R' + the stored metrics JSON text with its NUL (reused; 'S' for the parts after
** the first of a reused pair), 'C' + a packed qs_an_result (computed), 'P' + a saved partial. */
static int pair_fn(sweep_ctx *c, const sweep_unit *u, size_t pair, uint8_t **out, size_t *out_len, qs_err *e)
{
    const qs_sweep *s = c->s;
    size_t ti = pair / (size_t)s->napps;
    const qs_tensor_rec *t = &c->t[ti];
    const qs_apply *a = &s->apps[pair % (size_t)s->napps];
    if (c->vc_t != ti) {
        qs_value_cache_clear(&c->vcache);
        c->vc_t = ti;
    }
    /* a stored result is of the imported content: never hand it out for a file that changed since */
    if (qs_tensor_ref_check(t, e)) return -1;
    char *data = NULL;
    if (!s->force && qs_analysis_lookup(s->db, t, a, s->blocks, &data, e)) return -1;
    if (data) {
        int rc = u->r == 0 ? bytes_of('R', data, strlen(data) + 1, out, out_len, e) : bytes_of('S', NULL, 0, out, out_len, e);
        free(data);
        return rc;
    }
    uint8_t *p = NULL;
    size_t n = 0;
    if (u->k > 1) {
        if (qs_analysis_compute_part(s->db, t, a, s->blocks, s->threads, u->b0, u->b1, &p, &n, e)) return -1;
        int rc = bytes_of('P', p, n, out, out_len, e);
        free(p);
        return rc;
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
    rc = qs_an_result_pack(&r, &p, &n, e);
    qs_an_result_free(&r);
    if (rc) return -1;
    rc = bytes_of('C', p, n, out, out_len, e);
    free(p);
    return rc;
}

/* Rank 0, a pair done: store what was computed (r) unless reused (mj), then its row. */
static int deliver(sweep_ctx *c, size_t pair, const char *mj, qs_an_result *r, qs_err *e)
{
    const qs_sweep *s = c->s;
    const qs_tensor_rec *t = &c->t[pair / (size_t)s->napps];
    int k = (int)(pair % (size_t)s->napps);
    const qs_apply *a = &s->apps[k];
    int cached = mj != NULL;
    char *stored = NULL;
    if (!cached) {
        /* two tensors of one content are one result: an earlier unit of this job stored it, as a
        ** single process would have found it stored */
        if (qs_par_size() > 1 && !s->force && qs_analysis_lookup(s->db, t, a, s->blocks, &stored, e)) return -1;
        if (stored) {
            cached = 1;
            mj = stored;
        } else {
            if ((c->in_tx ? qs_analysis_write : qs_analysis_store)(s->db, t, a, r, e)) return -1;
            mj = r->metrics;
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
    return rc;
}

static int collect_pair(sweep_ctx *c, const sweep_unit *u, size_t pair, const uint8_t *b, size_t len, qs_err *e)
{
    char tag = len ? (char)b[0] : 0;
    if (!len || (tag == 'R' && b[len - 1] != 0) || (tag == 'S' && (u->r == 0 || c->acc)) || (tag == 'C' && u->k != 1) ||
        (tag == 'P' && (u->k == 1 || (u->r == 0) != !c->acc)) || !strchr("RSCP", tag))
        return qs_fail(e, "a rank's analysis result is malformed (%zu bytes)", len);
    if (tag == 'S') return 0;
    if (tag == 'R') return deliver(c, pair, (const char *)b + 1, NULL, e);
    qs_an_result r;
    memset(&r, 0, sizeof r);
    if (tag == 'C') {
        if (qs_an_result_unpack(b + 1, len - 1, &r, e)) return -1;
    } else {
        qs_an_part *p = NULL;
        if (qs_an_part_load(b + 1, len - 1, &p, e)) return -1;
        if (!c->acc) c->acc = p;
        else {
            int mrc = qs_an_part_merge(c->acc, p, e);
            qs_an_part_free(p);
            if (mrc) return -1;
        }
        if (u->r + 1 < u->k) return 0;
        const qs_tensor_rec *t = &c->t[pair / (size_t)c->s->napps];
        const qs_apply *a = &c->s->apps[pair % (size_t)c->s->napps];
        uint64_t rows, cols;
        qs_tensor_matrix_view(t->shape, t->ndim, &rows, &cols);
        qs_analysis an;
        memset(&an, 0, sizeof an);
        int frc = qs_an_part_finish(c->acc, &an, e) || qs_an_result_of(&an, a, c->s->blocks, rows, cols, &r, e);
        qs_analysis_free(&an);
        qs_an_part_free(c->acc);
        c->acc = NULL;
        if (frc) return -1;
    }
    int rc = deliver(c, pair, NULL, &r, e);
    qs_an_result_free(&r);
    return rc;
}

/* A unit's bytes: one pair's, or for several pairs each one's preceded by its length (u64). */
static int unit_fn(size_t i, void *ctx, uint8_t **out, size_t *out_len, qs_err *e)
{
    sweep_ctx *c = ctx;
    const sweep_unit *u = &c->u[i];
    if (u->npairs == 1) return pair_fn(c, u, u->pair, out, out_len, e);
    uint8_t *acc = NULL;
    size_t n = 0;
    for (size_t p = u->pair; p < u->pair + u->npairs; p++) {
        uint8_t *b = NULL;
        size_t bn = 0;
        if (pair_fn(c, u, p, &b, &bn, e)) { free(acc); return -1; }
        uint8_t *na = realloc(acc, n + 8 + bn);
        if (!na) { free(b); free(acc); return qs_fail(e, "out of memory"); }
        acc = na;
        uint64_t l = bn;
        memcpy(acc + n, &l, 8);
        memcpy(acc + n + 8, b, bn);
        n += 8 + bn;
        free(b);
    }
    *out = acc;
    *out_len = n;
    return 0;
}

static int collect_fn(size_t i, const uint8_t *b, size_t len, void *ctx, qs_err *e)
{
    sweep_ctx *c = ctx;
    const sweep_unit *u = &c->u[i];
    if (u->npairs == 1) return collect_pair(c, u, u->pair, b, len, e);
    /* one unit of work, one transaction: a tensor's formats are stored together */
    size_t at = 0;
    int rc = qs_db_begin(c->s->db, e);
    c->in_tx = !rc;
    for (size_t p = u->pair; p < u->pair + u->npairs && !rc; p++) {
        uint64_t l = 0;
        if (len - at < 8 || (memcpy(&l, b + at, 8), l > len - at - 8))
            rc = qs_fail(e, "a rank's analysis result is malformed (%zu bytes)", len);
        else rc = collect_pair(c, u, p, b + at + 8, (size_t)l, e);
        at += 8 + (size_t)l;
    }
    if (!rc && at != len) rc = qs_fail(e, "a rank's analysis result is malformed (%zu bytes)", len);
    if (c->in_tx) {
        c->in_tx = 0;
        if (!rc) rc = qs_db_commit(c->s->db, e);
        if (rc) qs_db_rollback(c->s->db);
    }
    return rc;
}

/* Under MPI the units are a tensor's formats together when that costs at most a quarter of a
** rank's share (each rank then reads a tensor once for all its formats), else its formats apart,
** and a pair costing more than that share is cut into parts of its bands, so every rank gets work
** and the largest tensors do not decide the job's length.  One rank: one pair per unit, as ever.
** The same tensors give the same units on every rank. */
static int plan_units(sweep_ctx *c, double **cost, size_t *nu, qs_err *e)
{
    const qs_sweep *s = c->s;
    size_t na = (size_t)s->napps, np = s->nnames * na, n = 0, cap = np ? np : 1;
    double total = 0, target = 0;
    for (size_t ti = 0; ti < s->nnames; ti++) total += (double)c->t[ti].numel * (double)na;
    if (qs_par_size() > 1) target = total / (4.0 * qs_par_size());
    c->u = malloc(cap * sizeof *c->u);
    *cost = malloc(cap * sizeof **cost);
    if (!c->u || !*cost) return qs_fail(e, "out of memory");
    for (size_t ti = 0; ti < s->nnames; ti++) {
        double ci = (double)c->t[ti].numel;
        int whole = target > 0 && ci * (double)na <= target;
        for (size_t k = 0; k < na; k++) {
            uint64_t nb = 1, parts = 1;
            qs_err ignore;
            if (whole && k > 0) break;
            if (target > 0 && !whole && ci > target && qs_analysis_nbands(&c->t[ti], &s->apps[k], &nb, &ignore) == 0 &&
                nb > 1) {
                parts = (uint64_t)(ci / target + 0.999999);
                if (parts > nb) parts = nb;
            }
            if (n + parts > cap) {
                while (n + parts > cap) cap *= 2;
                sweep_unit *nu2 = realloc(c->u, cap * sizeof *nu2);
                if (nu2) c->u = nu2;
                double *nc = nu2 ? realloc(*cost, cap * sizeof *nc) : NULL;
                if (nc) *cost = nc;
                if (!nu2 || !nc) return qs_fail(e, "out of memory");
            }
            for (uint64_t r = 0; r < parts; r++) {
                sweep_unit *u = &c->u[n];
                u->pair = ti * na + k;
                u->npairs = whole ? na : 1;
                u->r = (uint32_t)r;
                u->k = (uint32_t)parts;
                u->b0 = parts > 1 ? nb * r / parts : 0;
                u->b1 = parts > 1 ? nb * (r + 1) / parts : 0;
                (*cost)[n++] = whole ? ci * (double)na : parts > 1 ? ci * (double)(u->b1 - u->b0) / (double)nb : ci;
            }
        }
    }
    *nu = n;
    return 0;
}

int qs_analyze_sweep(const qs_sweep *s, qs_err *e)
{
    sweep_ctx c = {.s = s, .vc_t = (size_t)-1};
    c.t = calloc(s->nnames ? s->nnames : 1, sizeof *c.t);
    double *cost = NULL;
    size_t loaded = 0, nu = 0;
    int rc = -1;
    if (!c.t) { qs_fail(e, "out of memory"); goto out; }
    for (; loaded < s->nnames; loaded++)
        if (qs_tensor_get(s->db, s->names[loaded], &c.t[loaded], e)) goto out;
    /* the cost of a unit is the values it reads: every format reads and quantizes every value once */
    if (plan_units(&c, &cost, &nu, e)) goto out;
    rc = qs_par_run(nu, cost, unit_fn, collect_fn, &c, qs_par_size() > 1 ? "analyze" : NULL, e);
out:
    qs_an_part_free(c.acc);
    qs_value_cache_clear(&c.vcache);
    for (size_t k = 0; k < loaded; k++) qs_tensor_rec_free(&c.t[k]);
    free(c.t);
    free(c.u);
    free(cost);
    return rc;
}
