/*
** Read-only database connections (see db_readonly.h).
*/
#include "db_readonly.h"

#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

qs_db *qs_db_open_readonly(const char *path, qs_err *e)
{
    qs_db *db = calloc(1, sizeof *db);
    if (!db || !(db->path = strdup(path))) { free(db); qs_fail(e, "out of memory"); return NULL; }
    int rc = sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        qs_fail(e, "%s: cannot open database: %s", path, db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_extended_result_codes(db->h, 1);
    sqlite3_busy_timeout(db->h, QS_BUSY_TIMEOUT_MS);
    sqlite3_stmt *st = qs_db_prepare(db, "PRAGMA user_version", e);
    if (!st) goto fail;
    int v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_finalize(st);
    if (v != QS_SCHEMA_VERSION) {
        qs_fail(e, "%s: database schema version %d, this qscope reads %d", path, v, QS_SCHEMA_VERSION);
        goto fail;
    }
    if (qs_db_exec(db, "PRAGMA foreign_keys=ON", e)) goto fail;
    return db;
fail:
    qs_db_close(db);
    return NULL;
}
