/*
** The result questions of the CLI and the workbench (see q_results.h).
*/
#include "q_results.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void qs_result_item_free(qs_result_item *r)
{
    if (!r) return;
    free(r->kind); free(r->format); free(r->tensor_hash); free(r->options); free(r->data); free(r->created_at);
    memset(r, 0, sizeof *r);
}

static int dup_col(sqlite3_stmt *st, int i, char **out)
{
    const char *s = (const char *)sqlite3_column_text(st, i);
    *out = s ? strdup(s) : NULL;
    return s && !*out ? -1 : 0;
}

#define RESULT_COLS "id, kind, format, tensor_hash, options, data, created_at"

/* One row of RESULT_COLS from st, bound and ready to step. */
static int one_row(qs_db *db, sqlite3_stmt *st, qs_result_item *r, int *found, const char *what, qs_err *e)
{
    memset(r, 0, sizeof *r);
    *found = 0;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        r->id = sqlite3_column_int64(st, 0);
        if (dup_col(st, 1, &r->kind) || dup_col(st, 2, &r->format) || dup_col(st, 3, &r->tensor_hash) ||
            dup_col(st, 4, &r->options) || dup_col(st, 5, &r->data) || dup_col(st, 6, &r->created_at)) {
            sqlite3_finalize(st);
            qs_result_item_free(r);
            return qs_fail(e, "out of memory");
        }
        *found = 1;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : qs_db_fail(db, e, what);
}

int qs_result_latest(qs_db *db, const char *kind, qs_result_item *r, int *found, qs_err *e)
{
    memset(r, 0, sizeof *r);
    *found = 0;
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT " RESULT_COLS " FROM result WHERE kind=? ORDER BY id DESC LIMIT 1", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_TRANSIENT);
    return one_row(db, st, r, found, "reading the newest result", e);
}

int qs_result_by_id(qs_db *db, int64_t id, qs_result_item *r, int *found, qs_err *e)
{
    memset(r, 0, sizeof *r);
    *found = 0;
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT " RESULT_COLS " FROM result WHERE id = ?", e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    return one_row(db, st, r, found, "reading a result", e);
}

int qs_result_count(qs_db *db, const char *const *kinds, int nkinds, int64_t *n, qs_err *e)
{
    *n = 0;
    if (nkinds <= 0) return 0;
    char sql[512];
    size_t k = (size_t)snprintf(sql, sizeof sql, "SELECT count(*) FROM result WHERE kind IN (");
    for (int i = 0; i < nkinds && k < sizeof sql; i++) k += (size_t)snprintf(sql + k, sizeof sql - k, i ? ",?" : "?");
    if (k + 2 > sizeof sql) return qs_fail(e, "internal error: too many result kinds (%d)", nkinds);
    snprintf(sql + k, sizeof sql - k, ")");
    sqlite3_stmt *st = qs_db_prepare(db, sql, e);
    if (!st) return -1;
    for (int i = 0; i < nkinds; i++) sqlite3_bind_text(st, i + 1, kinds[i], -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : qs_db_fail(db, e, "counting results");
}

int qs_result_count_by_tensor(qs_db *db, const char *kind, const char *tool_version, qs_hash_count **out, size_t *n,
                              qs_err *e)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = qs_db_prepare(db,
        "SELECT tensor_hash, count(*) FROM result WHERE kind = ? AND tool_version = ? GROUP BY tensor_hash", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, tool_version, -1, SQLITE_TRANSIENT);
    qs_hash_count *h = NULL;
    size_t cap = 0, k = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (k == cap) {
            cap = cap ? 2 * cap : 256;
            qs_hash_count *nh = realloc(h, cap * sizeof *nh);
            if (!nh) { rc = SQLITE_NOMEM; break; }
            h = nh;
        }
        const char *hs = (const char *)sqlite3_column_text(st, 0);
        snprintf(h[k].hash, sizeof h[k].hash, "%s", hs ? hs : "");
        h[k++].n = sqlite3_column_int(st, 1);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        free(h);
        return rc == SQLITE_NOMEM ? qs_fail(e, "out of memory") : qs_db_fail(db, e, "counting results");
    }
    *out = h;
    *n = k;
    return 0;
}
