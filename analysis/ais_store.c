/*
** Reading RL runs for the AIS diagnostics and storing the results (see ais_store.h).
*/
#include "ais_store.h"
#include "rl_xaxis.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include <jansson.h>
#include <xxhash.h>

#include "results.h"
#include "../store/json_out.h"

typedef struct stepbuf {
    int64_t step;
    size_t n, cap;
    int64_t *seq, *pos, *grp;
    double *lpr, *lpt, *adv, *rew, *ent;
    uint8_t *mask;
} stepbuf;

static void sb_free(stepbuf *b)
{
    free(b->seq); free(b->pos); free(b->grp); free(b->lpr); free(b->lpt); free(b->adv); free(b->rew); free(b->ent);
    free(b->mask);
    memset(b, 0, sizeof *b);
}

static int sb_grow(stepbuf *b)
{
    size_t c = b->cap ? b->cap * 2 : 4096;
#define G(f) do { void *p = realloc(b->f, c * sizeof *b->f); if (!p) return -1; b->f = p; } while (0)
    G(seq); G(pos); G(grp); G(lpr); G(lpt); G(adv); G(rew); G(ent); G(mask);
#undef G
    b->cap = c;
    return 0;
}

static qs_ais_batch sb_batch(const stepbuf *b)
{
    return (qs_ais_batch){b->step, b->n, b->seq, b->lpr, b->lpt, b->mask, b->adv, b->rew, b->ent, b->grp};
}

/* Stream the run's tokens step by step; fn(ctx, buf) for each complete step. */
typedef int (*step_fn)(void *ctx, stepbuf *b, qs_err *e);

typedef struct reader {
    qs_db *db;
    int64_t run_id;
    int64_t only_step;           /* -1: all */
    XXH3_state_t *h;             /* NULL: no hashing */
    uint64_t tokens;
} reader;

static int read_steps(reader *R, stepbuf bufs[2], step_fn fn, void *ctx, qs_err *e)
{
    const char *sql = R->only_step >= 0
        ? "SELECT step, seq, pos, lp_rollout, lp_train, mask, advantage, reward, entropy, grp FROM rl_token "
          "WHERE run_id=?1 AND step=?2 ORDER BY step, seq, pos"
        : "SELECT step, seq, pos, lp_rollout, lp_train, mask, advantage, reward, entropy, grp FROM rl_token "
          "WHERE run_id=?1 ORDER BY step, seq, pos";
    sqlite3_stmt *st = qs_db_prepare(R->db, sql, e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, R->run_id);
    if (R->only_step >= 0) sqlite3_bind_int64(st, 2, R->only_step);
    int cur = 0, rc = 0, src;
    stepbuf *b = &bufs[0];
    b->n = 0;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t step = sqlite3_column_int64(st, 0);
        if (b->n && step != b->step) {
            if ((rc = fn(ctx, b, e))) break;
            cur ^= 1;
            b = &bufs[cur];
            b->n = 0;
        }
        if (b->n == b->cap && sb_grow(b)) { rc = qs_fail(e, "out of memory"); break; }
        size_t k = b->n++;
        b->step = step;
        b->seq[k] = sqlite3_column_int64(st, 1);
        b->pos[k] = sqlite3_column_int64(st, 2);
        b->lpr[k] = sqlite3_column_double(st, 3);
        b->lpt[k] = sqlite3_column_double(st, 4);
        b->mask[k] = sqlite3_column_int(st, 5) != 0;
        b->adv[k] = sqlite3_column_type(st, 6) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 6);
        b->rew[k] = sqlite3_column_type(st, 7) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 7);
        b->ent[k] = sqlite3_column_type(st, 8) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 8);
        b->grp[k] = sqlite3_column_type(st, 9) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 9);
        if (R->h) {
            struct { int64_t step, seq, pos; double lpr, lpt; int64_t mask; double adv, rew, ent; int64_t grp; } rec =
                {step, b->seq[k], b->pos[k], b->lpr[k], b->lpt[k], b->mask[k], b->adv[k], b->rew[k], b->ent[k], b->grp[k]};
            XXH3_128bits_update(R->h, &rec, sizeof rec);
        }
        R->tokens++;
    }
    if (!rc && src != SQLITE_DONE && src != SQLITE_ROW) rc = qs_db_fail(R->db, e, "rl_token read");
    if (!rc && b->n) rc = fn(ctx, b, e);
    sqlite3_finalize(st);
    return rc;
}

/* ---- diagnostics: compute step k on a worker while step k+1 is read ----------------------- */

typedef struct job {
    const qs_ais_opts *o;
    stepbuf *b;
    qs_ais_row *row;
    qs_err e;
    int rc;
} job;

static void *job_main(void *arg)
{
    job *j = arg;
    qs_ais_batch bt = sb_batch(j->b);
    j->rc = qs_ais_step(j->o, &bt, j->row, &j->e);
    return NULL;
}

typedef struct diag_ctx {
    const qs_ais_opts *o;
    qs_ais_row *rows;
    size_t n, cap;
    pthread_t th;
    int running;
    job jb;
} diag_ctx;

static int diag_join(diag_ctx *d, qs_err *e)
{
    if (!d->running) return 0;
    pthread_join(d->th, NULL);
    d->running = 0;
    if (d->jb.rc) { *e = d->jb.e; return -1; }
    return 0;
}

static int diag_step(void *ctx, stepbuf *b, qs_err *e)
{
    diag_ctx *d = ctx;
    if (diag_join(d, e)) return -1;            /* the other buffer is free again */
    if (d->n == d->cap) {
        size_t c = d->cap ? d->cap * 2 : 64;
        qs_ais_row *r = realloc(d->rows, c * sizeof *r);
        if (!r) return qs_fail(e, "out of memory");
        d->rows = r;
        d->cap = c;
    }
    d->jb = (job){d->o, b, &d->rows[d->n++], {{0}}, 0};
    if (pthread_create(&d->th, NULL, job_main, &d->jb)) {
        job_main(&d->jb);                      /* no thread: compute here */
        if (d->jb.rc) { *e = d->jb.e; return -1; }
        return 0;
    }
    d->running = 1;
    return 0;
}

static int run_lookup(qs_db *db, const char *run, qs_ais_result *r, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db,
        "SELECT id, COALESCE(json_extract(metadata,'$.rollout_format'), json_extract(metadata,'$.header.rollout_format'), "
        "json_extract(metadata,'$.header.rollout_precision'), 'unknown'), metadata FROM rl_run WHERE name=?", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, run, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        r->run_id = sqlite3_column_int64(st, 0);
        const char *f = (const char *)sqlite3_column_text(st, 1);
        snprintf(r->format, sizeof r->format, "%s", f ? f : "unknown");
        r->per_prompt = qs_rl_run_xkind((const char *)sqlite3_column_text(st, 2)) == QS_RL_X_PROMPT;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW) return qs_fail(e, "no run named '%s' (see `qscope runs`)", run);
    return 0;
}

int qs_ais_run(qs_db *db, const char *run, const qs_ais_opts *o, qs_ais_result *r, qs_err *e)
{
    memset(r, 0, sizeof *r);
    snprintf(r->run, sizeof r->run, "%s", run);
    if (run_lookup(db, run, r, e)) return -1;
    stepbuf bufs[2];
    memset(bufs, 0, sizeof bufs);
    XXH3_state_t *h = XXH3_createState();
    if (!h) return qs_fail(e, "out of memory");
    XXH3_128bits_reset(h);
    reader R = {db, r->run_id, -1, h, 0};
    diag_ctx d = {o, NULL, 0, 0, 0, 0, {0}};
    /* one read transaction: a consistent snapshot even while another process imports */
    int rc = qs_db_exec(db, "BEGIN", e);
    if (!rc) {
        rc = read_steps(&R, bufs, diag_step, &d, e);
        qs_err e2;
        if (diag_join(&d, &e2) && !rc) { *e = e2; rc = -1; }
        sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL);
    }
    XXH128_hash_t hv = XXH3_128bits_digest(h);
    XXH3_freeState(h);
    sb_free(&bufs[0]);
    sb_free(&bufs[1]);
    if (rc) { free(d.rows); return -1; }
    if (!R.tokens) { free(d.rows); return qs_fail(e, "run '%s' has no tokens", run); }
    snprintf(r->hash, sizeof r->hash, "%016llx%016llx", (unsigned long long)hv.high64, (unsigned long long)hv.low64);
    qs_ais_finish(o, d.rows, d.n);
    r->rows = d.rows;
    r->nrows = d.n;
    r->tokens = R.tokens;
    return 0;
}

void qs_ais_result_free(qs_ais_result *r)
{
    free(r->rows);
    r->rows = NULL;
    r->nrows = 0;
}

static json_t *num(double x) { return qs_json_num(x); }

char *qs_ais_result_json(const qs_ais_result *r, const qs_ais_opts *o)
{
    json_t *j = json_object(), *f = json_object();
    qs_json_set_text(j, "run", r->run);
    json_object_set_new(j, "token_hash", json_string(r->hash));
    qs_json_set_text(j, "rollout_format", r->format);
    json_object_set_new(j, "tokens", json_integer((json_int_t)r->tokens));
    json_object_set_new(j, "reconstruction", json_string(QS_AIS_RECONSTRUCTION));
    char *oj = qs_ais_opts_json(o);
    json_object_set_new(j, "options", oj ? json_loads(oj, 0, NULL) : json_null());
    free(oj);
    for (int k = 0; k < QS_AIS_NFIELDS; k++) {
        json_t *a = json_array();
        for (size_t i = 0; i < r->nrows; i++) json_array_append_new(a, num(r->rows[i].v[k]));
        json_object_set_new(f, qs_ais_field_names[k], a);
    }
    json_object_set_new(j, "fields", f);
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

static json_t *series(const qs_ais_result *r, const char *name, int field, int one_minus)
{
    json_t *x = json_array(), *y = json_array();
    for (size_t i = 0; i < r->nrows; i++) {
        double v = r->rows[i].v[field];
        json_array_append_new(x, qs_json_num(r->rows[i].v[QS_AIS_F_step]));
        json_array_append_new(y, num(one_minus ? 1 - v : v));
    }
    return json_pack("{s:s,s:o,s:o}", "name", name, "x", x, "y", y);
}

static int any_finite(const qs_ais_result *r, int field)
{
    for (size_t i = 0; i < r->nrows; i++) if (isfinite(r->rows[i].v[field])) return 1;
    return 0;
}

static char *options_with(const qs_ais_opts *o, const char *run, const char *set)
{
    char *oj = qs_ais_opts_json(o);
    json_t *j = oj ? json_loads(oj, 0, NULL) : NULL;
    free(oj);
    if (!j) return NULL;
    qs_json_set_text(j, "run", run);   /* with run_bytes_hex, so the key stays unique per run */
    if (set) json_object_set_new(j, "set", json_string(set));
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

static const struct { const char *set, *title, *ylabel; } kSets[] = {
    {"policy", "policy", "entropy (nats) / reward"},
    {"weights", "mean effective weight per correction", "mean weight"},
    {"ais", "AIS-R (project reconstruction)", "R, S, Vamp, lambda"},
    {"ess", "importance-weight health", "ESS ratio / CV"},
    {"mismatch", "rollout-trainer mismatch", "nats"},
    {"overview", "mismatch and AIS-R lambda (reconstruction)", "k3 KL, 1 - ESS, lambda"},
};
#define NSETS (sizeof kSets / sizeof kSets[0])

const char *qs_ais_trajectory_sets = "policy, weights, ais, ess, mismatch, overview";

/* The trajectory JSON of one set, or NULL (unknown set, or no data for it). */
static json_t *set_json(const qs_ais_result *r, size_t si)
{
    json_t *ser = json_array();
    const char *set = kSets[si].set;
    if (!strcmp(set, "policy")) {
        if (any_finite(r, QS_AIS_F_entropy_mean)) json_array_append_new(ser, series(r, "entropy", QS_AIS_F_entropy_mean, 0));
        if (any_finite(r, QS_AIS_F_reward_mean)) json_array_append_new(ser, series(r, "reward", QS_AIS_F_reward_mean, 0));
    } else if (!strcmp(set, "weights")) {
        for (int m = 0; m < QS_CORR_COUNT; m++)
            json_array_append_new(ser, series(r, qs_ais_method_name((qs_ais_method)m), QS_AIS_W0 + QS_AIS_WN * m, 0));
    } else if (!strcmp(set, "ais")) {
        json_array_append_new(ser, series(r, "R (token ESS)", QS_AIS_F_ais_R, 0));
        json_array_append_new(ser, series(r, "S (severity)", QS_AIS_F_ais_S, 0));
        json_array_append_new(ser, series(r, "Vamp", QS_AIS_F_ais_vamp, 0));
        json_array_append_new(ser, series(r, "lambda raw", QS_AIS_F_ais_lambda_raw, 0));
        json_array_append_new(ser, series(r, "lambda", QS_AIS_F_ais_lambda, 0));
    } else if (!strcmp(set, "ess")) {
        json_array_append_new(ser, series(r, "ESS token", QS_AIS_F_ess_tok, 0));
        json_array_append_new(ser, series(r, "ESS sequence", QS_AIS_F_ess_seq, 0));
        json_array_append_new(ser, series(r, "CV of w", QS_AIS_F_cv_w, 0));
    } else if (!strcmp(set, "mismatch")) {
        json_array_append_new(ser, series(r, "k1 KL", QS_AIS_F_kl_k1, 0));
        json_array_append_new(ser, series(r, "k3 KL", QS_AIS_F_kl_k3, 0));
        json_array_append_new(ser, series(r, "mean |delta|", QS_AIS_F_mean_abs_dlogp, 0));
    } else {
        json_array_append_new(ser, series(r, "k3 KL", QS_AIS_F_kl_k3, 0));
        json_array_append_new(ser, series(r, "1 - ESS token", QS_AIS_F_ess_tok, 1));
        json_array_append_new(ser, series(r, "1 - ESS sequence", QS_AIS_F_ess_seq, 1));
        json_array_append_new(ser, series(r, "lambda (AIS-R)", QS_AIS_F_ais_lambda, 0));
    }
    if (!json_array_size(ser)) { json_decref(ser); return NULL; }
    char title[400];
    snprintf(title, sizeof title, "%s: %s", r->run, kSets[si].title);
    json_t *j = json_pack("{s:o,s:s,s:s,s:s,s:o}", "title", qs_json_text(title), "token_hash", r->hash, "xlabel",
                          r->per_prompt ? qs_rl_xkind_title(QS_RL_X_PROMPT) : "step",
                          "ylabel", kSets[si].ylabel, "series", ser);
    qs_json_set_text(j, "run", r->run);
    return j;
}

char *qs_ais_trajectory_json(const qs_ais_result *r, const char *set)
{
    for (size_t si = 0; si < NSETS; si++)
        if (!strcmp(set, kSets[si].set)) {
            json_t *j = set_json(r, si);
            char *d = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
            json_decref(j);
            return d;
        }
    return NULL;
}

int qs_ais_store(qs_db *db, const qs_ais_result *r, const qs_ais_opts *o, qs_err *e)
{
    if (qs_db_begin(db, e)) return -1;
    int rc = -1;
    char *data = qs_ais_result_json(r, o), *opts = options_with(o, r->run, NULL);
    if (!data || !opts) { qs_fail(e, "out of memory"); goto out; }
    if (qs_result_put(db, r->hash, "rl_ais", r->format, opts, data, NULL, e)) goto out;
    for (size_t si = 0; si < NSETS; si++) {
        json_t *j = set_json(r, si);
        if (!j) continue;
        char *d = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17)), *op = options_with(o, r->run, kSets[si].set);
        json_decref(j);
        int prc = d && op ? qs_result_put(db, r->hash, "trajectory", r->format, op, d, NULL, e) : qs_fail(e, "out of memory");
        free(d);
        free(op);
        if (prc) goto out;
    }
    rc = qs_db_commit(db, e);
out:
    free(data);
    free(opts);
    if (rc) qs_db_rollback(db);
    return rc;
}

/* ---- per-token weights ---------------------------------------------------------------------- */

typedef struct wctx {
    const qs_ais_result *r;
    const qs_ais_opts *o;
    qs_ais_token_fn fn;
    void *ctx;
    double *w[QS_CORR_COUNT];
    size_t cap;
} wctx;

static int weights_step(void *ctx, stepbuf *b, qs_err *e)
{
    wctx *W = ctx;
    double lam = NAN;
    for (size_t i = 0; i < W->r->nrows; i++)
        if (W->r->rows[i].v[QS_AIS_F_step] == (double)b->step) lam = W->r->rows[i].v[QS_AIS_F_ais_lambda];
    if (isnan(lam)) lam = 0;   /* a step without valid tokens: all weights 0 anyway */
    if (b->n > W->cap) {
        for (int m = 0; m < QS_CORR_COUNT; m++) {
            double *p = realloc(W->w[m], b->n * sizeof *p);
            if (!p) return qs_fail(e, "out of memory");
            W->w[m] = p;
        }
        W->cap = b->n;
    }
    qs_ais_batch bt = sb_batch(b);
    for (int m = 0; m < QS_CORR_COUNT; m++)
        if (qs_ais_token_weights(W->o, (qs_ais_method)m, &bt, lam, W->w[m], e)) return -1;
    for (size_t k = 0; k < b->n; k++) {
        double w[QS_CORR_COUNT];
        for (int m = 0; m < QS_CORR_COUNT; m++) w[m] = W->w[m][k];
        if (W->fn(W->ctx, b->step, b->seq[k], b->pos[k], b->mask[k], b->lpt[k] - b->lpr[k], w, e)) return -1;
    }
    return 0;
}

int qs_ais_run_weights(qs_db *db, const qs_ais_result *r, const qs_ais_opts *o, int64_t only_step,
                       qs_ais_token_fn fn, void *ctx, qs_err *e)
{
    stepbuf bufs[2];
    memset(bufs, 0, sizeof bufs);
    reader R = {db, r->run_id, only_step, NULL, 0};
    wctx W = {r, o, fn, ctx, {0}, 0};
    int rc = read_steps(&R, bufs, weights_step, &W, e);
    for (int m = 0; m < QS_CORR_COUNT; m++) free(W.w[m]);
    sb_free(&bufs[0]);
    sb_free(&bufs[1]);
    return rc;
}
