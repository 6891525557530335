/*
** The write half of store/train_store.h: a training run's row, its steps and operand statistics as
** they complete, its end, and removal.  Each call is its own transaction (a step is committed when
** it is stored, so a killed run keeps every completed step); removal joins an open transaction
** through a savepoint, so `runs --rm` deletes RL and training runs all or nothing.
** (The read half is store/q_train.c.)
*/
#include "train_store.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "../kernels/llm_recipe.h"
#include "../kernels/qs_version.h"

/* Run one prepared statement that returns no row (DONE); finalizes it. */
static int run_done(qs_db *db, sqlite3_stmt *st, const char *what, qs_err *e)
{
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : qs_db_fail(db, e, what);
}

static void bind_num(sqlite3_stmt *st, int i, double x)
{
    if (isnan(x)) sqlite3_bind_null(st, i); else sqlite3_bind_double(st, i, x);
}

static void bind_opt_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s) sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT); else sqlite3_bind_null(st, i);
}

/* Insert the run row under name: 0, 1 when the name is taken, -1 on error. */
static int insert_run(qs_db *db, const qs_train_run_meta *m, const char *name, int64_t *id, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, "INSERT INTO train_run(name, recipe, seed, sweep, status, steps, model, options, "
                                         "data_hash, tool_version, checkpoint) VALUES(?,?,?,?,'running',?,?,?,?,?,?) "
                                         "RETURNING id", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, m->recipe, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)m->seed);   /* read back as uint64_t: the bits survive */
    bind_opt_text(st, 4, m->sweep);
    sqlite3_bind_int(st, 5, m->steps);
    sqlite3_bind_text(st, 6, m->model_json, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 7, m->options_json, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 8, m->data_hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 9, QS_VERSION, -1, SQLITE_STATIC);
    bind_opt_text(st, 10, m->checkpoint);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc == SQLITE_ROW) return 0;
    if (rc == SQLITE_CONSTRAINT_UNIQUE) return 1;
    return qs_db_fail(db, e, "train_run insert");
}

static int check_meta(const qs_train_run_meta *m, qs_err *e)
{
    if (!m->name || !*m->name || !m->recipe || !m->model_json || !m->options_json || !m->data_hash)
        return qs_fail(e, "training run: name, recipe, model, options and data hash are required");
    if (m->steps < 0) return qs_fail(e, "training run %s: %d steps", m->name, m->steps);
    return 0;
}

int qs_train_run_begin(qs_db *db, const qs_train_run_meta *m, int64_t *id, qs_err *e)
{
    if (check_meta(m, e) || qs_db_begin(db, e)) return -1;
    int rc = insert_run(db, m, m->name, id, e);
    if (rc == 1) qs_fail(e, "a training run named '%s' exists already", m->name);
    if (rc || qs_db_commit(db, e)) { qs_db_rollback(db); return -1; }
    return 0;
}

int qs_train_run_begin_unique(qs_db *db, const qs_train_run_meta *m, char *name, size_t cap, int64_t *id, qs_err *e)
{
    if (check_meta(m, e)) return -1;
    if ((size_t)snprintf(name, cap, "%s", m->name) >= cap) return qs_fail(e, "training run name '%s' is too long", m->name);
    if (qs_db_begin(db, e)) return -1;
    int rc = 1;
    for (int k = 2; rc == 1; k++) {
        if ((rc = insert_run(db, m, name, id, e)) != 1) break;
        if (k > 1000000 || (size_t)snprintf(name, cap, "%s-%d", m->name, k) >= cap) {
            rc = qs_fail(e, "training run name '%s': no free name", m->name);
            break;
        }
    }
    if (rc || qs_db_commit(db, e)) { qs_db_rollback(db); return -1; }
    return 0;
}

/* One UPDATE of run id that must touch its row (an unknown id is an error). */
static int update_run(qs_db *db, sqlite3_stmt *st, int64_t id, const char *what, qs_err *e)
{
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return qs_db_fail(db, e, what);
    if (sqlite3_changes(db->h) != 1) return qs_fail(e, "%s: no training run with id %lld", db->path, (long long)id);
    return 0;
}

int qs_train_run_val0(qs_db *db, int64_t id, double val0, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, "UPDATE train_run SET val0=? WHERE id=?", e);
    if (!st) return -1;
    bind_num(st, 1, val0);
    sqlite3_bind_int64(st, 2, id);
    return update_run(db, st, id, "train_run val0", e);
}

static int put_opstats(qs_db *db, int64_t id, int step, const qs_train_opstat_row *ops, size_t nops, qs_err *e)
{
    if (!nops) return 0;
    sqlite3_stmt *st = qs_db_prepare(db, "INSERT INTO train_opstat(run_id, step, layer, operand, n, underflow, clipped, "
                                         "nonfinite) VALUES(?,?,?,?,?,?,?,?)", e);
    if (!st) return -1;
    for (size_t i = 0; i < nops; i++) {
        const qs_train_opstat_row *o = &ops[i];
        if (o->operand < 0 || o->operand >= QS_OP_COUNT || o->layer < 0) {
            sqlite3_finalize(st);
            return qs_fail(e, "step %d: operand statistics of layer %d, operand %d: no such slot", step, o->layer,
                           o->operand);
        }
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int(st, 2, step);
        sqlite3_bind_int(st, 3, o->layer);
        sqlite3_bind_text(st, 4, qs_llm_operand_name(o->operand), -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, o->n);
        /* NOT NULL columns: a fraction of nothing is 0 */
        sqlite3_bind_double(st, 6, isnan(o->underflow) ? 0 : o->underflow);
        sqlite3_bind_double(st, 7, isnan(o->clipped) ? 0 : o->clipped);
        sqlite3_bind_double(st, 8, isnan(o->nonfinite) ? 0 : o->nonfinite);
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc != SQLITE_DONE) {
            qs_db_fail(db, e, "train_opstat insert");
            sqlite3_finalize(st);
            return -1;
        }
    }
    sqlite3_finalize(st);
    return 0;
}

int qs_train_run_step(qs_db *db, int64_t id, const qs_train_step_row *r, const qs_train_opstat_row *ops, size_t nops,
                      qs_err *e)
{
    if (r->step < 1) return qs_fail(e, "training step %d: steps count from 1", r->step);
    if (qs_db_begin(db, e)) return -1;
    sqlite3_stmt *st = qs_db_prepare(db, "INSERT INTO train_step(run_id, step, train_loss, val_loss, grad_norm, lr, tok_s) "
                                         "VALUES(?,?,?,?,?,?,?)", e);
    if (!st) goto fail;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, r->step);
    bind_num(st, 3, r->train_loss);
    bind_num(st, 4, r->val_loss);
    bind_num(st, 5, r->grad_norm);
    bind_num(st, 6, r->lr);
    bind_num(st, 7, r->tok_s);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) qs_fail(e, "%s: no training run with id %lld", db->path, (long long)id);
        else if (rc == SQLITE_CONSTRAINT_PRIMARYKEY)
            qs_fail(e, "%s: training run %lld has step %d already", db->path, (long long)id, r->step);
        else qs_db_fail(db, e, "train_step insert");
        goto fail;
    }
    if (put_opstats(db, id, r->step, ops, nops, e)) goto fail;
    /* steps_done counts the stored steps; val_final follows the last measured validation loss */
    if (!(st = qs_db_prepare(db, "UPDATE train_run SET steps_done=(SELECT count(*) FROM train_step WHERE run_id=?1), "
                                 "val_final=coalesce(?2, val_final) WHERE id=?1", e)))
        goto fail;
    sqlite3_bind_int64(st, 1, id);
    bind_num(st, 2, r->val_loss);
    if (update_run(db, st, id, "train_run steps_done", e) || qs_db_commit(db, e)) goto fail;
    return 0;
fail:
    qs_db_rollback(db);
    return -1;
}

int qs_train_run_end(qs_db *db, int64_t id, const char *status, const char *why, qs_err *e)
{
    if (!status || (strcmp(status, "done") && strcmp(status, "stopped") && strcmp(status, "failed")))
        return qs_fail(e, "training run end: status '%s' is not done, stopped or failed", status ? status : "(null)");
    sqlite3_stmt *st = qs_db_prepare(db, "UPDATE train_run SET status=?, error=?, "
                                         "finished_at=strftime('%Y-%m-%dT%H:%M:%SZ','now') WHERE id=?", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, status, -1, SQLITE_STATIC);
    bind_opt_text(st, 2, why);
    sqlite3_bind_int64(st, 3, id);
    return update_run(db, st, id, "train_run end", e);
}

/* Delete the runs named; an unknown name is an error (the caller then undoes the others). */
static int remove_all(qs_db *db, const char *const *names, size_t n, qs_err *e)
{
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *st = qs_db_prepare(db, "DELETE FROM train_run WHERE name=?", e);
        if (!st) return -1;
        sqlite3_bind_text(st, 1, names[i], -1, SQLITE_TRANSIENT);
        if (run_done(db, st, "train_run delete", e)) return -1;   /* steps and opstats go by the cascade */
        if (sqlite3_changes(db->h) != 1) return qs_fail(e, "no training run named '%s'", names[i]);
    }
    return 0;
}

int qs_train_run_remove(qs_db *db, const char *const *names, size_t n, qs_err *e)
{
    if (!sqlite3_get_autocommit(db->h)) {   /* inside the caller's transaction: all or nothing with it */
        if (qs_db_savepoint(db, "train_rm", e)) return -1;
        if (remove_all(db, names, n, e)) { qs_db_rollback_to(db, "train_rm"); return -1; }
        return qs_db_release(db, "train_rm", e);
    }
    if (qs_db_begin(db, e)) return -1;
    if (remove_all(db, names, n, e) || qs_db_commit(db, e)) { qs_db_rollback(db); return -1; }
    return 0;
}

/* The run r->name if it is the checkpoint's: 1 (*id set), 0 no such name, 2 not the checkpoint's. */
static int reopen_find(qs_db *db, const qs_train_reopen *r, int64_t *id, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT id, data_hash = ?2, (SELECT count(*) FROM train_step s WHERE "
                                         "s.run_id = train_run.id AND s.step BETWEEN 1 AND ?3) FROM train_run "
                                         "WHERE name = ?1", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, r->name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, r->data_hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 3, r->from_step);
    int rc = sqlite3_step(st), found = 0;
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(st, 0);
        found = sqlite3_column_int(st, 1) == 1 && sqlite3_column_int(st, 2) == r->from_step ? 1 : 2;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return qs_db_fail(db, e, "train_run lookup");
    return found;
}

/* Delete run id's rows of `table` beyond step from. */
static int drop_beyond(qs_db *db, const char *sql, int64_t id, int from, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, sql, e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, from);
    return run_done(db, st, "train_run reopen", e);
}

int qs_train_run_reopen(qs_db *db, const qs_train_reopen *r, int64_t *id, qs_err *e)
{
    if (!r->name || !*r->name || !r->data_hash) return qs_fail(e, "training run reopen: name and data hash are required");
    if (r->from_step < 0 || r->steps <= r->from_step)
        return qs_fail(e, "training run %s: cannot continue from step %d to %d", r->name, r->from_step, r->steps);
    if (qs_db_begin(db, e)) return -1;
    int64_t rid = 0;
    int rc = reopen_find(db, r, &rid, e);
    if (rc != 1) {   /* absent or another run: nothing changes */
        qs_db_rollback(db);
        return rc;
    }
    sqlite3_stmt *st;
    if (drop_beyond(db, "DELETE FROM train_opstat WHERE run_id=?1 AND step>?2", rid, r->from_step, e) ||
        drop_beyond(db, "DELETE FROM train_step WHERE run_id=?1 AND step>?2", rid, r->from_step, e) ||
        !(st = qs_db_prepare(db, "UPDATE train_run SET status='running', error=NULL, finished_at=NULL, steps=?2, "
                                 "options=json_set(options, '$.steps', ?2), checkpoint=coalesce(?3, checkpoint), "
                                 "steps_done=(SELECT count(*) FROM train_step WHERE run_id=?1), "
                                 "val_final=(SELECT val_loss FROM train_step WHERE run_id=?1 AND val_loss IS NOT NULL "
                                 "ORDER BY step DESC LIMIT 1) WHERE id=?1", e)))
        goto fail;
    sqlite3_bind_int64(st, 1, rid);
    sqlite3_bind_int(st, 2, r->steps);
    bind_opt_text(st, 3, r->checkpoint);
    if (update_run(db, st, rid, "train_run reopen", e) || qs_db_commit(db, e)) goto fail;
    *id = rid;
    return 1;
fail:
    qs_db_rollback(db);
    return -1;
}
