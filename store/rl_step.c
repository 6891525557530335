/* Per-step metrics of trained RL runs (rl_step.h). */
#include "rl_step.h"

#include <math.h>
#include <sqlite3.h>

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
