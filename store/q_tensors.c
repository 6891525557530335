/*
** The tensor and source questions of the CLI and the workbench (see q_tensors.h).
*/
#include "q_tensors.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_col(sqlite3_stmt *st, int i)
{
    const char *s = (const char *)sqlite3_column_text(st, i);
    return s ? strdup(s) : NULL;
}

static double num_col(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

void qs_tensor_items_free(qs_tensor_item *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++) {
        free(t[i].name); free(t[i].dtype); free(t[i].storage); free(t[i].hash); free(t[i].shape); free(t[i].source);
    }
    free(t);
}

/* One query for every list: the source joined only when asked for (a tensor always has one). */
static int list(qs_db *db, const char *glob, const char *order, int limit, int with_source, qs_tensor_item **out,
                size_t *n, qs_err *e)
{
    *out = NULL;
    *n = 0;
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT t.id, t.name, t.dtype, t.shape, t.numel, t.nbytes, t.storage, t.hash, %s, s.mean, s.std, s.absmax,"
             " s.kurtosis, s.outlier_frac FROM tensor t %s LEFT JOIN tensor_stats s ON s.tensor_id = t.id"
             " WHERE t.name GLOB ?1 ORDER BY %s LIMIT %d",
             with_source ? "src.path" : "NULL", with_source ? "JOIN source src ON src.id = t.source_id" : "", order, limit);
    sqlite3_stmt *st = qs_db_prepare(db, sql, e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, glob, -1, SQLITE_TRANSIENT);
    qs_tensor_item *v = NULL;
    size_t cap = 0, k = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (k == cap) {
            cap = cap ? 2 * cap : 64;
            qs_tensor_item *nv = realloc(v, cap * sizeof *nv);
            if (!nv) { rc = SQLITE_NOMEM; break; }
            v = nv;
        }
        qs_tensor_item *x = &v[k++];
        x->id = sqlite3_column_int64(st, 0);
        x->name = dup_col(st, 1);
        x->dtype = dup_col(st, 2);
        x->shape = dup_col(st, 3);
        x->numel = sqlite3_column_int64(st, 4);
        x->nbytes = sqlite3_column_int64(st, 5);
        x->storage = dup_col(st, 6);
        x->hash = dup_col(st, 7);
        x->source = dup_col(st, 8);
        x->mean = num_col(st, 9);
        x->std = num_col(st, 10);
        x->absmax = num_col(st, 11);
        x->kurtosis = num_col(st, 12);
        x->outlier_frac = num_col(st, 13);
        if (!x->name || !x->dtype || !x->shape || !x->storage || !x->hash || (with_source && !x->source)) {
            rc = SQLITE_NOMEM;
            break;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        qs_tensor_items_free(v, k);
        return rc == SQLITE_NOMEM ? qs_fail(e, "out of memory") : qs_db_fail(db, e, "reading tensors");
    }
    *out = v;
    *n = k;
    return 0;
}

int qs_tensor_list(qs_db *db, const char *glob, qs_tensor_order order, qs_tensor_item **out, size_t *n, qs_err *e)
{
    static const char *const by[] = {"t.name", "t.nbytes DESC, t.name", "s.absmax DESC, t.name",
                                     "s.kurtosis DESC, t.name", "s.outlier_frac DESC, t.name"};
    if ((unsigned)order >= sizeof by / sizeof *by) return qs_fail(e, "internal error: tensor order %d", (int)order);
    return list(db, glob, by[order], -1, 1, out, n, e);
}

int qs_tensor_list_stats(qs_db *db, const char *glob, qs_tensor_item **out, size_t *n, qs_err *e)
{
    return list(db, glob, "t.name", -1, 0, out, n, e);
}

int qs_tensor_largest(qs_db *db, int limit, qs_tensor_item **out, size_t *n, qs_err *e)
{
    return list(db, "*", "t.nbytes DESC, t.name", limit, 0, out, n, e);
}

int qs_tensor_count(qs_db *db, const char *glob, int64_t *n, qs_err *e)
{
    *n = 0;
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT count(*) FROM tensor WHERE name GLOB ?", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, glob, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : qs_db_fail(db, e, "counting tensors");
}

/* One statement that binds an integer and writes. */
static int exec_id(qs_db *db, const char *sql, int64_t id, const char *what, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, sql, e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : qs_db_fail(db, e, what);
}

int qs_tensor_delete_glob(qs_db *db, const char *glob, int *removed, qs_err *e)
{
    *removed = 0;
    sqlite3_stmt *st = qs_db_prepare(db, "DELETE FROM tensor WHERE name GLOB ?", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, glob, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) qs_db_fail(db, e, "tensor delete");
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return -1;
    *removed = sqlite3_changes(db->h);
    return 0;
}

int qs_tensor_delete_name(qs_db *db, const char *name, int *removed, qs_err *e)
{
    *removed = 0;
    sqlite3_stmt *st = qs_db_prepare(db, "DELETE FROM tensor WHERE name = ?", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return qs_fail(e, "%s", sqlite3_errmsg(db->h));
    *removed = sqlite3_changes(db->h);
    return 0;
}

int qs_tensor_chunks_delete(qs_db *db, int64_t tensor_id, qs_err *e)
{
    return exec_id(db, "DELETE FROM tensor_chunk WHERE tensor_id=?", tensor_id, "chunk delete", e);
}

int qs_source_id(qs_db *db, const char *path, int64_t *id, qs_err *e)
{
    *id = 0;
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT id FROM source WHERE path=?", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, path, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : qs_db_fail(db, e, "source lookup");
}

int qs_source_delete(qs_db *db, int64_t id, qs_err *e)
{
    return exec_id(db, "DELETE FROM source WHERE id=?", id, "source delete", e);
}

int qs_source_delete_empty(qs_db *db, qs_err *e)
{
    return qs_db_exec(db, "DELETE FROM source WHERE id NOT IN (SELECT source_id FROM tensor)", e);
}
