/*
** Stored results of one kind, row by row (llm_results.h).
*/
#include "llm_results.h"

#include <sqlite3.h>

#include "../kernels/qs_version.h"

int qs_llm_results_each(qs_db *db, const char *kind, int (*fn)(void *ctx, const qs_llm_result_row *row, qs_err *e), void *ctx,
                        qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT id, tensor_hash, format, options, data FROM result WHERE kind = ? "
                                         "AND tool_version = ? ORDER BY id", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, QS_VERSION, -1, SQLITE_STATIC);
    int rc = 0;
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
        qs_llm_result_row r = {sqlite3_column_int64(st, 0), (const char *)sqlite3_column_text(st, 1),
                               (const char *)sqlite3_column_text(st, 2), (const char *)sqlite3_column_text(st, 3), NULL, NULL};
        const char *data = (const char *)sqlite3_column_text(st, 4);
        r.opts = r.options ? json_loads(r.options, 0, NULL) : NULL;
        r.data = data ? json_loads(data, 0, NULL) : NULL;
        if (r.hash && r.data) rc = fn(ctx, &r, e);
        json_decref(r.opts);
        json_decref(r.data);
    }
    sqlite3_finalize(st);
    return rc;
}
