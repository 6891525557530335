/*
** A training run recorded in memory (see train_capture.h).
*/
#include "train_capture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int qs_train_capture_step(qs_train_capture *c, const qs_train_step_row *r, const qs_train_opstat_row *ops, size_t nops,
                          qs_err *e)
{
    if (c->nstep == c->cap_step) {
        size_t cap = c->cap_step ? 2 * c->cap_step : 64;
        qs_train_step_row *s = realloc(c->step, cap * sizeof *s);
        size_t *at = s ? realloc(c->op_at, (cap + 1) * sizeof *at) : NULL;
        if (s) c->step = s;
        if (!at) return qs_fail(e, "out of memory for the run's steps");
        if (!c->op_at) at[0] = 0;
        c->op_at = at;
        c->cap_step = cap;
    }
    if (c->nops + nops > c->cap_ops) {
        size_t cap = c->cap_ops ? c->cap_ops : 256;
        while (cap < c->nops + nops) cap *= 2;
        qs_train_opstat_row *o = realloc(c->ops, cap * sizeof *o);
        if (!o) return qs_fail(e, "out of memory for the run's operand statistics");
        c->ops = o;
        c->cap_ops = cap;
    }
    if (nops) memcpy(c->ops + c->nops, ops, nops * sizeof *ops);
    c->nops += nops;
    c->step[c->nstep++] = *r;
    c->op_at[c->nstep] = c->nops;
    return 0;
}

void qs_train_capture_free(qs_train_capture *c)
{
    free(c->model_json);
    free(c->options_json);
    free(c->recipe);
    free(c->checkpoint);
    free(c->why);
    free(c->step);
    free(c->ops);
    free(c->op_at);
    memset(c, 0, sizeof *c);
}

/* ---- bytes: fixed-size fields in host order (the ranks run the same binary), strings with lengths ---- */

typedef struct { uint8_t *b; size_t len, cap; int oom; } wbuf;

static void put(wbuf *w, const void *p, size_t n)
{
    if (w->oom) return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 1024;
        while (cap < w->len + n) cap *= 2;
        uint8_t *b = realloc(w->b, cap);
        if (!b) { w->oom = 1; return; }
        w->b = b;
        w->cap = cap;
    }
    if (n) memcpy(w->b + w->len, p, n);
    w->len += n;
}

static void put_str(wbuf *w, const char *s)
{
    uint64_t n = s ? strlen(s) + 1 : 0;   /* 0: NULL */
    put(w, &n, sizeof n);
    put(w, s, n);
}

int qs_train_capture_pack(const qs_train_capture *c, uint8_t **out, size_t *len, qs_err *e)
{
    wbuf w = {0};
    uint64_t ns = c->nstep, no = c->nops;
    put_str(&w, c->model_json);
    put_str(&w, c->options_json);
    put_str(&w, c->recipe);
    put_str(&w, c->checkpoint);
    put_str(&w, c->why);
    put(&w, c->data_hash, sizeof c->data_hash);
    put(&w, c->status, sizeof c->status);
    put(&w, &c->seed, sizeof c->seed);
    put(&w, &c->steps, sizeof c->steps);
    put(&w, &c->val0, sizeof c->val0);
    put(&w, &c->seconds, sizeof c->seconds);
    put(&w, &c->rank, sizeof c->rank);
    put(&w, &ns, sizeof ns);
    put(&w, &no, sizeof no);
    put(&w, c->step, ns * sizeof *c->step);
    put(&w, c->op_at, ns ? (ns + 1) * sizeof *c->op_at : 0);
    put(&w, c->ops, no * sizeof *c->ops);
    if (w.oom) { free(w.b); return qs_fail(e, "out of memory for a run's record"); }
    *out = w.b;
    *len = w.len;
    return 0;
}

typedef struct { const uint8_t *b; size_t len, off; int bad; } rbuf;

static void get(rbuf *r, void *p, size_t n)
{
    if (r->bad || n > r->len - r->off) { r->bad = 1; return; }
    memcpy(p, r->b + r->off, n);
    r->off += n;
}

static char *get_str(rbuf *r)
{
    uint64_t n = 0;
    get(r, &n, sizeof n);
    if (r->bad || n == 0) return NULL;
    if (n > r->len - r->off || r->b[r->off + n - 1] != 0) { r->bad = 1; return NULL; }
    char *s = malloc(n);
    if (!s) { r->bad = 1; return NULL; }
    get(r, s, n);
    return s;
}

static void *get_arr(rbuf *r, uint64_t n, size_t es)
{
    if (r->bad || (es && n > (r->len - r->off) / es)) { r->bad = 1; return NULL; }
    void *p = malloc(n ? n * es : 1);
    if (!p) { r->bad = 1; return NULL; }
    get(r, p, n * es);
    return p;
}

int qs_train_capture_unpack(const uint8_t *b, size_t len, qs_train_capture *c, qs_err *e)
{
    memset(c, 0, sizeof *c);
    rbuf r = {b, len, 0, 0};
    uint64_t ns = 0, no = 0;
    c->model_json = get_str(&r);
    c->options_json = get_str(&r);
    c->recipe = get_str(&r);
    c->checkpoint = get_str(&r);
    c->why = get_str(&r);
    get(&r, c->data_hash, sizeof c->data_hash);
    get(&r, c->status, sizeof c->status);
    get(&r, &c->seed, sizeof c->seed);
    get(&r, &c->steps, sizeof c->steps);
    get(&r, &c->val0, sizeof c->val0);
    get(&r, &c->seconds, sizeof c->seconds);
    get(&r, &c->rank, sizeof c->rank);
    get(&r, &ns, sizeof ns);
    get(&r, &no, sizeof no);
    c->step = get_arr(&r, ns, sizeof *c->step);
    c->op_at = get_arr(&r, ns ? ns + 1 : 0, sizeof *c->op_at);
    c->ops = get_arr(&r, no, sizeof *c->ops);
    c->nstep = c->cap_step = (size_t)ns;
    c->nops = c->cap_ops = (size_t)no;
    c->data_hash[sizeof c->data_hash - 1] = c->status[sizeof c->status - 1] = 0;
    for (size_t k = 0; !r.bad && k < c->nstep; k++)
        if (c->op_at[k] > c->op_at[k + 1] || c->op_at[k + 1] > c->nops) r.bad = 1;
    if (!r.bad && (r.off != len || !c->model_json || !c->options_json || !c->recipe || (ns && c->op_at[0] != 0))) r.bad = 1;
    if (r.bad) {
        qs_train_capture_free(c);
        return qs_fail(e, "a rank sent a training run's record qscope cannot read");
    }
    return 0;
}

int qs_train_capture_store(qs_db *db, const char *name, const char *sweep, const qs_train_capture *c, qs_err *e)
{
    qs_train_run_meta m = {name, c->recipe, c->seed, sweep, c->steps, c->model_json, c->options_json, c->data_hash,
                           c->checkpoint};
    int64_t id;
    if (qs_train_run_begin(db, &m, &id, e)) return -1;
    if (!isnan(c->val0) && qs_train_run_val0(db, id, c->val0, e)) return -1;
    for (size_t k = 0; k < c->nstep; k++)
        if (qs_train_run_step(db, id, &c->step[k], c->ops + c->op_at[k], c->op_at[k + 1] - c->op_at[k], e)) return -1;
    return qs_train_run_end(db, id, c->status[0] ? c->status : "failed", c->why, e);
}
