/*
** The "compute or reuse one analysis" service (see analyze_service.h).
*/
#include "analyze_service.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "results.h"
#include "stats_store.h"
#include "../store/json_out.h"

/* the per-block arrays, in the order they are stored */
static const char *const blob_names[6] = {"scale_code", "absmax", "ratio", "rmse", "row_rmse", "col_rmse"};

void qs_value_cache_clear(qs_hist *vcache)
{
    if (!vcache) return;
    free(vcache->counts);
    memset(vcache, 0, sizeof *vcache);
}

void qs_an_result_free(qs_an_result *r)
{
    if (!r) return;
    free(r->metrics);
    free(r->hist);
    free(r->blocks);
    for (int i = 0; i < r->nblobs; i++) free(r->blob[i].data);
    memset(r, 0, sizeof *r);
}

int qs_analysis_lookup(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, char **metrics, qs_err *e)
{
    *metrics = NULL;
    char *opts = qs_analysis_options_json(a, blocks), *data = NULL;
    if (!opts) return qs_fail(e, "out of memory");
    int64_t rid;
    int rc = -1;
    if (qs_result_get(db, t->hash, "metrics", a->f->name, opts, &data, &rid, e)) goto out;
    if (data && blocks) {   /* a stored result without its per-block arrays does not do */
        char *bd = NULL;
        int64_t bid;
        if (qs_result_get(db, t->hash, "blocks", a->f->name, opts, &bd, &bid, e)) goto out;
        if (!bd) { free(data); data = NULL; }
        free(bd);
    }
    *metrics = data;
    data = NULL;
    rc = 0;
out:
    free(data);
    free(opts);
    return rc;
}

static void add_blob(qs_an_result *r, int k, void **data, size_t nbytes)
{
    if (!*data) return;
    r->blob[r->nblobs].name = blob_names[k];
    r->blob[r->nblobs].data = *data;
    r->blob[r->nblobs].nbytes = nbytes;
    r->nblobs++;
    *data = NULL;   /* now r's */
}

int qs_an_result_of(qs_analysis *an, const qs_apply *a, int blocks, uint64_t rows, uint64_t cols, qs_an_result *r,
                    qs_err *e)
{
    memset(r, 0, sizeof *r);
    r->metrics = qs_metrics_json(&an->m);
    r->hist = qs_hists_json(an);
    if (!r->metrics || !r->hist) goto oom;
    if (blocks) {
        json_t *bj = json_pack("{s:I,s:i,s:i,s:I,s:I}", "nblocks", (json_int_t)an->nblocks, "block",
                               (int)qs_format_block(a->f, &a->o), "axis", a->axis, "rows", (json_int_t)rows, "cols",
                               (json_int_t)cols);
        r->blocks = bj ? json_dumps(bj, JSON_COMPACT) : NULL;
        json_decref(bj);
        if (!r->blocks) goto oom;
        size_t nb = (size_t)an->nblocks;
        add_blob(r, 0, (void **)&an->block_scale_code, nb);
        add_blob(r, 1, (void **)&an->block_absmax, nb * 4);
        add_blob(r, 2, (void **)&an->block_ratio, nb * 4);
        add_blob(r, 3, (void **)&an->block_rmse, nb * 4);
        add_blob(r, 4, (void **)&an->row_rmse, (size_t)an->rows * 4);
        add_blob(r, 5, (void **)&an->col_rmse, (size_t)an->cols * 4);
    }
    return 0;
oom:
    qs_an_result_free(r);
    return qs_fail(e, "out of memory");
}

int qs_analysis_compute(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int threads,
                        int (*prog)(void *, uint64_t, uint64_t), void *prog_ctx, qs_hist *vcache, qs_an_result *r,
                        qs_err *e)
{
    memset(r, 0, sizeof *r);
    qs_analysis an;
    memset(&an, 0, sizeof an);
    int rc = -1;
    qs_treader *rd = qs_treader_open(db, t, e);
    if (!rd) return -1;
    uint64_t rows, cols;
    qs_tensor_matrix_view(t->shape, t->ndim, &rows, &cols);
    qs_analyze_opts ao = {.threads = threads, .blocks = blocks, .progress = prog, .progress_ctx = prog_ctx};
    /* the stored statistics already know the absmax: spare the engine a pre-pass over the tensor */
    qs_tensor_stats ts;
    int have = 0;
    if (qs_stats_load(db, t->id, &ts, &have, e) == 0 && have && isfinite(ts.absmax)) {
        ao.absmax_known = 1;
        ao.absmax = ts.absmax;
    }
    if (vcache && vcache->counts) ao.value_hist = vcache;
    e->msg[0] = 0;
    if (qs_analyze(a, rows, cols, qs_treader_read_cb, rd, 1, &ao, &an, e)) goto out;
    /* the result is of t->hash only if those were the bytes read; and the reader's read snapshot
    ** (embedded data) must end before a write begins */
    if (qs_treader_verify(rd, e)) goto out;
    qs_treader_close(rd);
    rd = NULL;
    if (vcache && !vcache->counts && an.value.counts) {   /* the first of a sweep: keep its value histogram */
        *vcache = an.value;
        if (!(vcache->counts = malloc((size_t)an.value.nbins * sizeof *vcache->counts))) memset(vcache, 0, sizeof *vcache);
        else memcpy(vcache->counts, an.value.counts, (size_t)an.value.nbins * sizeof *vcache->counts);
    }
    if (qs_an_result_of(&an, a, blocks, rows, cols, r, e)) goto out;
    rc = 0;
out:
    qs_analysis_free(&an);
    qs_treader_close(rd);
    if (rc) qs_an_result_free(r);
    return rc;
}

int qs_analysis_nbands(const qs_tensor_rec *t, const qs_apply *a, uint64_t *nbands, qs_err *e)
{
    uint64_t rows, cols;
    qs_tensor_matrix_view(t->shape, t->ndim, &rows, &cols);
    return qs_analyze_nbands(a, rows, cols, nbands, e);
}

int qs_analysis_compute_part(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int threads, uint64_t b0,
                             uint64_t b1, uint8_t **bytes, size_t *len, qs_err *e)
{
    qs_treader *rd = qs_treader_open(db, t, e);
    if (!rd) return -1;
    uint64_t rows, cols;
    qs_tensor_matrix_view(t->shape, t->ndim, &rows, &cols);
    qs_analyze_opts ao = {.threads = threads, .blocks = blocks};
    /* without the stored absmax every part would read the whole tensor once more to find it */
    qs_tensor_stats ts;
    int have = 0;
    if (qs_stats_load(db, t->id, &ts, &have, e) == 0 && have && isfinite(ts.absmax)) {
        ao.absmax_known = 1;
        ao.absmax = ts.absmax;
    }
    e->msg[0] = 0;
    qs_an_part *p = NULL;
    int rc = qs_analyze_part(a, rows, cols, qs_treader_read_cb, rd, 1, &ao, b0, b1, &p, e) || qs_treader_verify(rd, e) ||
             qs_an_part_save(p, bytes, len, e);
    qs_an_part_free(p);
    qs_treader_close(rd);
    return rc ? -1 : 0;
}

int qs_analysis_write(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, const qs_an_result *r, qs_err *e)
{
    char *opts = qs_analysis_options_json(a, r->blocks != NULL);
    int64_t mid = 0, hid = 0, bid = 0;
    int wrc = !opts || !r->metrics || !r->hist ||
              qs_result_put(db, t->hash, "metrics", a->f->name, opts, r->metrics, &mid, e) ||
              qs_result_put(db, t->hash, "hist", a->f->name, opts, r->hist, &hid, e);
    if (!wrc && r->blocks) {
        wrc = qs_result_put(db, t->hash, "blocks", a->f->name, opts, r->blocks, &bid, e);
        for (int i = 0; i < r->nblobs && !wrc; i++)
            wrc = qs_result_blob_put(db, bid, r->blob[i].name, r->blob[i].data, r->blob[i].nbytes, e);
    }
    free(opts);
    return wrc ? -1 : 0;
}

int qs_analysis_store(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, const qs_an_result *r, qs_err *e)
{
    e->msg[0] = 0;
    int wrc = qs_db_begin(db, e) || qs_analysis_write(db, t, a, r, e) || qs_db_commit(db, e);
    if (wrc) {
        qs_db_rollback(db);
        if (!e->msg[0]) qs_fail(e, "out of memory");
    }
    return wrc ? -1 : 0;
}

int qs_analyze_one_cb(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int force, int threads,
                      int (*prog)(void *, uint64_t, uint64_t), void *prog_ctx, qs_hist *vcache, json_t **metrics_out,
                      int *cached, qs_err *e)
{
    if (metrics_out) *metrics_out = NULL;
    *cached = 0;
    /* a stored result is of the imported content: never hand it out for a file that changed since */
    if (qs_tensor_ref_check(t, e)) return -1;
    char *data = NULL;
    const char *mj = NULL;
    qs_an_result r;
    memset(&r, 0, sizeof r);
    if (!force && qs_analysis_lookup(db, t, a, blocks, &data, e)) return -1;
    if (data) {
        *cached = 1;
        mj = data;
    } else {
        if (qs_analysis_compute(db, t, a, blocks, threads, prog, prog_ctx, vcache, &r, e) ||
            qs_analysis_store(db, t, a, &r, e)) {
            qs_an_result_free(&r);
            return -1;
        }
        mj = r.metrics;
    }
    int rc = 0;
    if (metrics_out) {
        if (!(*metrics_out = json_loads(mj, 0, NULL)))
            rc = data ? qs_fail(e, "stored result for %s / %s is not valid JSON", t->name, a->f->name)
                      : qs_fail(e, "out of memory");
        else if (data) qs_json_fix_legacy_nums(*metrics_out);
    }
    free(data);
    qs_an_result_free(&r);
    return rc;
}

/* ---- bytes ---- */

typedef struct { uint8_t *b; size_t n, cap; int oom; } wbuf;

static void put(wbuf *w, const void *p, size_t n)
{
    if (w->oom) return;
    if (w->n + n > w->cap) {
        size_t c = w->cap ? w->cap : 256;
        while (c < w->n + n) c *= 2;
        uint8_t *nb = realloc(w->b, c);
        if (!nb) { w->oom = 1; return; }
        w->b = nb;
        w->cap = c;
    }
    if (n) memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void put_u64(wbuf *w, uint64_t v) { put(w, &v, sizeof v); }

static void put_text(wbuf *w, const char *s)
{
    put_u64(w, s ? strlen(s) + 1 : 0);   /* 0: absent; else the length with its NUL */
    if (s) put(w, s, strlen(s) + 1);
}

int qs_an_result_pack(const qs_an_result *r, uint8_t **out, size_t *len, qs_err *e)
{
    wbuf w = {0};
    put(&w, "QSAN1", 5);
    put_text(&w, r->metrics);
    put_text(&w, r->hist);
    put_text(&w, r->blocks);
    put_u64(&w, (uint64_t)r->nblobs);
    for (int i = 0; i < r->nblobs; i++) {
        uint64_t k = 0;
        while (k < 6 && strcmp(blob_names[k], r->blob[i].name)) k++;
        put_u64(&w, k);
        put_u64(&w, r->blob[i].nbytes);
        put(&w, r->blob[i].data, r->blob[i].nbytes);
    }
    if (w.oom) { free(w.b); return qs_fail(e, "out of memory"); }
    *out = w.b;
    *len = w.n;
    return 0;
}

typedef struct { const uint8_t *b; size_t n, at; } rbuf;

static int get(rbuf *r, void *p, size_t n)
{
    if (n > r->n - r->at) return -1;
    memcpy(p, r->b + r->at, n);
    r->at += n;
    return 0;
}

static int get_u64(rbuf *r, uint64_t *v) { return get(r, v, sizeof *v); }

static int get_text(rbuf *r, char **s)
{
    uint64_t n;
    *s = NULL;
    if (get_u64(r, &n)) return -1;
    if (n == 0) return 0;
    if (n > r->n - r->at || r->b[r->at + n - 1] != 0) return -1;
    if (!(*s = malloc(n))) return -1;
    return get(r, *s, n);
}

int qs_an_result_unpack(const uint8_t *b, size_t len, qs_an_result *res, qs_err *e)
{
    memset(res, 0, sizeof *res);
    rbuf r = {b, len, 0};
    char magic[5];
    uint64_t nb;
    if (get(&r, magic, 5) || memcmp(magic, "QSAN1", 5) || get_text(&r, &res->metrics) || get_text(&r, &res->hist) ||
        get_text(&r, &res->blocks) || get_u64(&r, &nb) || nb > 6)
        goto bad;
    for (uint64_t i = 0; i < nb; i++) {
        uint64_t k, n;
        if (get_u64(&r, &k) || k >= 6 || get_u64(&r, &n) || n > len - r.at) goto bad;
        void *d = malloc(n ? n : 1);
        if (!d) goto bad;
        res->blob[res->nblobs].name = blob_names[k];
        res->blob[res->nblobs].data = d;
        res->blob[res->nblobs].nbytes = n;
        res->nblobs++;
        if (get(&r, d, n)) goto bad;
    }
    if (r.at != len) goto bad;
    return 0;
bad:
    qs_an_result_free(res);
    return qs_fail(e, "a rank's analysis result is malformed (%zu bytes)", len);
}
