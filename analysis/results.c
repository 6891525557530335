/*
** Stored analysis results (see results.h).  Keyed by tensor hash, kind, format, canonical options
** and tool version: a result computed by another version of qscope is never reused.
*/
#include "results.h"

#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "../kernels/qs_version.h"

/* The five key columns, bound as parameters 1..5 in the order of the table's UNIQUE constraint. */
static void bind_key(sqlite3_stmt *st, const char *hash, const char *kind, const char *format, const char *options)
{
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, kind, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, format, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 4, options ? options : "{}", -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 5, QS_VERSION, -1, SQLITE_STATIC);
}

int qs_result_put(qs_db *db, const char *hash, const char *kind, const char *format, const char *options,
                  const char *data, int64_t *id, qs_err *e)
{
    /* An explicit DELETE first, so the old row's blobs go with it (ON DELETE CASCADE); a REPLACE's
    ** implicit delete is not guaranteed to run foreign-key actions. */
    sqlite3_stmt *st = qs_db_prepare(db,
        "DELETE FROM result WHERE tensor_hash=? AND kind=? AND format=? AND options=? AND tool_version=?", e);
    if (!st) return -1;
    bind_key(st, hash, kind, format, options);
    int drc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (drc != SQLITE_DONE) return qs_db_fail(db, e, "result replace");
    st = qs_db_prepare(db,
        "INSERT INTO result(tensor_hash, kind, format, options, tool_version, data) VALUES(?,?,?,?,?,?) RETURNING id", e);
    if (!st) return -1;
    bind_key(st, hash, kind, format, options);
    sqlite3_bind_text(st, 6, data, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) { qs_db_fail(db, e, "result write"); sqlite3_finalize(st); return -1; }
    if (id) *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return 0;
}

int qs_result_get(qs_db *db, const char *hash, const char *kind, const char *format, const char *options,
                  char **data, int64_t *id, qs_err *e)
{
    *data = NULL;
    sqlite3_stmt *st = qs_db_prepare(db,
        "SELECT id, data FROM result WHERE tensor_hash=? AND kind=? AND format=? AND options=? AND tool_version=?", e);
    if (!st) return -1;
    bind_key(st, hash, kind, format, options);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        if (id) *id = sqlite3_column_int64(st, 0);
        const char *t = (const char *)sqlite3_column_text(st, 1);
        *data = strdup(t ? t : "{}");
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return qs_db_fail(db, e, "result read");
    if (rc == SQLITE_ROW && !*data) return qs_fail(e, "out of memory");
    return 0;
}

int qs_result_blob_put(qs_db *db, int64_t result_id, const char *name, const void *data, size_t nbytes, qs_err *e)
{
    if (nbytes > 1000000000u) return qs_fail(e, "result array '%s' too large to store (%zu bytes)", name, nbytes);
    sqlite3_stmt *st = qs_db_prepare(db, "INSERT OR REPLACE INTO result_blob(result_id, name, data) VALUES(?,?,?)", e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, result_id);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_blob(st, 3, nbytes ? data : "", (int)nbytes, SQLITE_STATIC);
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : qs_db_fail(db, e, "result array write");
    sqlite3_finalize(st);
    return rc;
}

int qs_result_blob_get(qs_db *db, int64_t result_id, const char *name, void **data, size_t *nbytes, qs_err *e)
{
    *data = NULL;
    *nbytes = 0;
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT data FROM result_blob WHERE result_id=? AND name=?", e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, result_id);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        size_t n = (size_t)sqlite3_column_bytes(st, 0);
        void *p = malloc(n ? n : 1);
        if (!p) { sqlite3_finalize(st); return qs_fail(e, "out of memory"); }
        if (n) memcpy(p, sqlite3_column_blob(st, 0), n);
        *data = p;
        *nbytes = n;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : qs_db_fail(db, e, "result array read");
}
