/* Per-step metrics of trained RL runs (rl_step.h). */
#include "rl_step.h"

#include <math.h>
#include <sqlite3.h>

#include "../kernels/llm_decode.h"

#define X(c) ", " #c
#define Q(c) ",?"
int qs_rl_step_put(qs_db *db, int64_t run_id, int64_t step, const double v[QS_RL_STEP_NCOL], qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, "INSERT OR REPLACE INTO rl_step(run_id, step" QS_RL_STEP_COLS(X)
                                         ") VALUES(?,?" QS_RL_STEP_COLS(Q) ")", e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int64(st, 2, step);
    for (int i = 0; i < QS_RL_STEP_NCOL; i++) {
        if (isfinite(v[i])) sqlite3_bind_double(st, 3 + i, v[i]);
        else sqlite3_bind_null(st, 3 + i);
    }
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : qs_db_fail(db, e, "rl_step insert");
}

int qs_rl_seq_put(qs_db *db, int64_t run_id, int64_t step, int64_t seq, const char *seq_id, const char *group_id,
                  qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, "INSERT OR REPLACE INTO rl_seq(run_id, step, seq, seq_id, group_id) "
                                         "VALUES(?,?,?,?,?)", e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int64(st, 2, step);
    sqlite3_bind_int64(st, 3, seq);
    sqlite3_bind_text(st, 4, seq_id, -1, SQLITE_STATIC);
    if (group_id) sqlite3_bind_text(st, 5, group_id, -1, SQLITE_STATIC);
    else sqlite3_bind_null(st, 5);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : qs_db_fail(db, e, "rl_seq insert");
}

static int drop_from(qs_db *db, const char *sql, int64_t id, int64_t from, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, sql, e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, from);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : qs_db_fail(db, e, "rl run reopen");
}

int qs_rl_run_reopen(qs_db *db, const char *name, int64_t from, int64_t *id, qs_err *e)
{
    if (qs_db_begin(db, e)) return -1;
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT id FROM rl_run WHERE name=?", e);
    if (!st) { qs_db_rollback(db); return -1; }
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW) {
        if (rc != SQLITE_DONE) qs_db_fail(db, e, "rl run lookup");
        qs_db_rollback(db);
        return rc == SQLITE_DONE ? 0 : -1;
    }
    if (drop_from(db, "DELETE FROM rl_token WHERE run_id=?1 AND step>=?2", *id, from, e) ||
        drop_from(db, "DELETE FROM rl_seq WHERE run_id=?1 AND step>=?2", *id, from, e) ||
        drop_from(db, "DELETE FROM rl_step WHERE run_id=?1 AND step>=?2", *id, from, e) ||
        drop_from(db, "DELETE FROM rl_underflow WHERE run_id=?1 AND step>=?2", *id, from, e) || qs_db_commit(db, e)) {
        qs_db_rollback(db);
        return -1;
    }
    return 1;
}

int qs_rl_step_count(qs_db *db, const char *run, int64_t *n, qs_err *e)
{
    *n = -1;
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT (SELECT count(*) FROM rl_step s WHERE s.run_id = r.id) FROM rl_run r "
                                         "WHERE r.name = ?", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, run, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : qs_db_fail(db, e, "rl_step count");
}

const char *qs_rl_underflow_site(int layer, int n_layer, int site)
{
    static const char *const names[QS_LLM_NLSITE] = {"attn_in", "attn_out", "ffn_in", "ffn_down_in", "kv"};
    if (layer == n_layer) return site == 0 ? "head_in" : NULL;
    return layer >= 0 && layer < n_layer && site >= 0 && site < QS_LLM_NLSITE ? names[site] : NULL;
}

int qs_rl_underflow_put(qs_db *db, int64_t run_id, int64_t step, const uint64_t *uf, int n_layer, qs_err *e)
{
    if (!uf) return 0;
    sqlite3_stmt *st = qs_db_prepare(db, "INSERT OR REPLACE INTO rl_underflow(run_id, step, layer, site, n, underflow) "
                                         "VALUES(?,?,?,?,?,?)", e);
    if (!st) return -1;
    int rc = SQLITE_DONE;
    for (int l = 0; l <= n_layer && rc == SQLITE_DONE; l++)
        for (int s = 0; s < QS_LLM_NLSITE && rc == SQLITE_DONE; s++) {
            const uint64_t *c = uf + QS_LLM_UF(l, s);
            const char *name = qs_rl_underflow_site(l, n_layer, s);
            if (!c[0] || !name) continue;
            sqlite3_reset(st);
            sqlite3_bind_int64(st, 1, run_id);
            sqlite3_bind_int64(st, 2, step);
            sqlite3_bind_int(st, 3, l);
            sqlite3_bind_text(st, 4, name, -1, SQLITE_STATIC);
            sqlite3_bind_int64(st, 5, (int64_t)c[0]);
            sqlite3_bind_double(st, 6, (double)c[1] / (double)c[0]);
            rc = sqlite3_step(st);
        }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : qs_db_fail(db, e, "rl_underflow insert");
}
