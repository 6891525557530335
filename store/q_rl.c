/*
** The RL run questions of the CLI and the workbench (see q_rl.h).
*/
#include "q_rl.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void qs_run_items_free(qs_run_item *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++) {
        free(r[i].name); free(r[i].label); free(r[i].source); free(r[i].created_at); free(r[i].metadata);
    }
    free(r);
}

static char *dup_col(sqlite3_stmt *st, int i)
{
    const char *s = (const char *)sqlite3_column_text(st, i);
    return strdup(s ? s : "");
}

/* Columns: id, name, label, source, created_at, metadata, then the four counts when counted. */
static int runs(qs_db *db, sqlite3_stmt *st, int counted, qs_run_item **out, size_t *n, qs_err *e)
{
    qs_run_item *v = NULL;
    size_t cap = 0, k = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (k == cap) {
            cap = cap ? 2 * cap : 16;
            qs_run_item *nv = realloc(v, cap * sizeof *nv);
            if (!nv) { rc = SQLITE_NOMEM; break; }
            v = nv;
        }
        qs_run_item *r = &v[k++];
        r->id = sqlite3_column_int64(st, 0);
        r->name = dup_col(st, 1);
        r->label = dup_col(st, 2);
        r->source = dup_col(st, 3);
        r->created_at = dup_col(st, 4);
        r->metadata = sqlite3_column_type(st, 5) == SQLITE_NULL ? strdup("{}") : dup_col(st, 5);
        for (int c = 0; c < 4; c++) {
            int64_t x = counted ? sqlite3_column_int64(st, 6 + c) : -1;
            *(c == 0 ? &r->tokens : c == 1 ? &r->steps : c == 2 ? &r->first_step : &r->last_step) = x;
        }
        if (!r->name || !r->label || !r->source || !r->created_at || !r->metadata) { rc = SQLITE_NOMEM; break; }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        qs_run_items_free(v, k);
        return rc == SQLITE_NOMEM ? qs_fail(e, "out of memory") : qs_db_fail(db, e, "reading runs");
    }
    *out = v;
    *n = k;
    return 0;
}

int qs_run_list(qs_db *db, const char *glob, qs_run_item **out, size_t *n, qs_err *e)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = qs_db_prepare(db,
        "SELECT r.id, r.name, r.label, r.source, r.created_at, r.metadata, "
        "(SELECT count(*) FROM rl_token t WHERE t.run_id=r.id), "
        "(SELECT count(DISTINCT t.step) FROM rl_token t WHERE t.run_id=r.id), "
        "(SELECT min(t.step) FROM rl_token t WHERE t.run_id=r.id), "
        "(SELECT max(t.step) FROM rl_token t WHERE t.run_id=r.id) "
        "FROM rl_run r WHERE r.name GLOB ? ORDER BY r.name", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, glob, -1, SQLITE_TRANSIENT);
    return runs(db, st, 1, out, n, e);
}

int qs_run_names(qs_db *db, qs_run_order order, qs_run_item **out, size_t *n, qs_err *e)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = qs_db_prepare(db, order == QS_RUNS_SIMS_LAST
        ? "SELECT id, name, label, source, created_at, metadata FROM rl_run ORDER BY name GLOB 'sim/*', name"
        : "SELECT id, name, label, source, created_at, metadata FROM rl_run ORDER BY name", e);
    if (!st) return -1;
    return runs(db, st, 0, out, n, e);
}

int qs_run_exists(qs_db *db, const char *name, int *exists, qs_err *e)
{
    *exists = 0;
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT 1 FROM rl_run WHERE name=?", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    *exists = rc == SQLITE_ROW;
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : qs_db_fail(db, e, "looking up a run");
}

struct qs_rl_cursor {
    qs_db *db;
    sqlite3_stmt *st;
    const char *what;
};

void qs_rl_cursor_close(qs_rl_cursor *c)
{
    if (!c) return;
    sqlite3_finalize(c->st);
    free(c);
}

static qs_rl_cursor *cursor(qs_db *db, const char *sql, const char *what, qs_err *e)
{
    qs_rl_cursor *c = calloc(1, sizeof *c);
    if (!c) { qs_fail(e, "out of memory"); return NULL; }
    c->db = db;
    c->what = what;
    if (!(c->st = qs_db_prepare(db, sql, e))) { free(c); return NULL; }
    return c;
}

/* 1 a row, 0 the end, -1 error */
static int step(qs_rl_cursor *c, qs_err *e)
{
    int rc = sqlite3_step(c->st);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : qs_db_fail(c->db, e, c->what);
}

static double opt_num(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

static int64_t opt_int(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, i);
}

qs_rl_cursor *qs_rl_tokens_open(qs_db *db, const char *run, qs_err *e)
{
    qs_rl_cursor *c = cursor(db,
        "SELECT t.step, t.seq, t.pos, t.token_id, t.lp_rollout, t.lp_train, t.advantage, t.reward, t.grp, t.entropy, t.mask, "
        "s.seq_id, s.group_id FROM rl_run r JOIN rl_token t ON t.run_id = r.id "
        "LEFT JOIN rl_seq s ON s.run_id = r.id AND s.step = t.step AND s.seq = t.seq "
        "WHERE r.name = ? ORDER BY t.step, t.seq, t.pos", "rl_token read", e);
    if (c) sqlite3_bind_text(c->st, 1, run, -1, SQLITE_TRANSIENT);
    return c;
}

int qs_rl_tokens_next(qs_rl_cursor *c, qs_rl_token *t, qs_err *e)
{
    int rc = step(c, e);
    if (rc != 1) return rc;
    sqlite3_stmt *st = c->st;
    t->row = (qs_rl_row){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
                         opt_int(st, 3), opt_int(st, 8), sqlite3_column_double(st, 4), sqlite3_column_double(st, 5),
                         opt_num(st, 6), opt_num(st, 7), opt_num(st, 9), sqlite3_column_int(st, 10)};
    t->seq_id = (const char *)sqlite3_column_text(st, 11);
    t->group_id = (const char *)sqlite3_column_text(st, 12);
    return 1;
}

qs_rl_cursor *qs_rl_deltas_open(qs_db *db, int64_t run_id, qs_err *e)
{
    qs_rl_cursor *c = cursor(db,
        "SELECT step, seq, lp_train - lp_rollout, mask FROM rl_token WHERE run_id = ? ORDER BY step, seq, pos",
        "reading rl_token", e);
    if (c) sqlite3_bind_int64(c->st, 1, run_id);
    return c;
}

int qs_rl_deltas_next(qs_rl_cursor *c, qs_rl_delta *d, qs_err *e)
{
    int rc = step(c, e);
    if (rc != 1) return rc;
    d->step = sqlite3_column_int64(c->st, 0);
    d->seq = sqlite3_column_int64(c->st, 1);
    d->delta = sqlite3_column_double(c->st, 2);
    d->mask = sqlite3_column_int(c->st, 3);
    return 1;
}
