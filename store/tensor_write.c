/*
** Writing tensors into the store (see tensor_write.h).  Prepared statements only: a tensor
** named "x'); DROP TABLE t;--" is just a name.
*/
#include "tensor_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

static int step_done(qs_db *db, sqlite3_stmt *st, const char *what, qs_err *e)
{
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) { qs_db_fail(db, e, what); sqlite3_finalize(st); return -1; }
    return 0;
}

int qs_source_upsert(qs_db *db, const char *path, const char *kind, int64_t size, int64_t mtime_ns,
                     const char *meta_json, int64_t *id, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db,
        "INSERT INTO source(path, kind, size, mtime_ns, metadata) VALUES(?1,?2,?3,?4,?5)"
        " ON CONFLICT(path) DO UPDATE SET kind=?2, size=?3, mtime_ns=?4, metadata=?5, ctime_ns=NULL, inode=NULL, dev=NULL,"
        " imported_at=strftime('%Y-%m-%dT%H:%M:%SZ','now') RETURNING id", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, path, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, kind, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, size);
    sqlite3_bind_int64(st, 4, mtime_ns);
    if (meta_json) sqlite3_bind_text(st, 5, meta_json, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, 5);
    if (sqlite3_step(st) != SQLITE_ROW) { qs_db_fail(db, e, "source upsert"); sqlite3_finalize(st); return -1; }
    *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return 0;
}

int qs_source_set_identity(qs_db *db, int64_t id, int64_t ctime_ns, int64_t inode, int64_t dev, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, "UPDATE source SET ctime_ns=?, inode=?, dev=? WHERE id=?", e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, ctime_ns);
    sqlite3_bind_int64(st, 2, inode);
    sqlite3_bind_int64(st, 3, dev);
    sqlite3_bind_int64(st, 4, id);
    if (step_done(db, st, "source identity", e)) return -1;
    sqlite3_finalize(st);
    return 0;
}

int qs_tensor_find(qs_db *db, const char *name, int64_t *id, char hash[33], int64_t *source_id,
                   int *is_blob, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT id, hash, source_id, storage='blob' FROM tensor WHERE name=?", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    *id = 0;
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(st, 0);
        snprintf(hash, 33, "%s", (const char *)sqlite3_column_text(st, 1));
        *source_id = sqlite3_column_int64(st, 2);
        *is_blob = sqlite3_column_int(st, 3);
    } else if (rc != SQLITE_DONE) {
        qs_db_fail(db, e, "tensor lookup");
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    return 0;
}

int qs_tensor_put(qs_db *db, const qs_tensor_row *w, int64_t *id, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, *id == 0
        ? "INSERT INTO tensor(name, source_id, member, dtype, shape, ndim, numel, nbytes, storage, fortran,"
          " codec, data_offset, comp_offset, comp_size, hash, metadata)"
          " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16) RETURNING id"
        /* updated_at moves only when the row changes: re-importing an unchanged file is a no-op */
        : "UPDATE tensor SET updated_at=CASE WHEN (name, source_id, member, dtype, shape, ndim, numel, nbytes,"
          " storage, fortran, codec, data_offset, comp_offset, comp_size, hash, metadata) IS"
          " (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16) THEN updated_at"
          " ELSE strftime('%Y-%m-%dT%H:%M:%SZ','now') END,"
          " name=?1, source_id=?2, member=?3, dtype=?4, shape=?5, ndim=?6, numel=?7,"
          " nbytes=?8, storage=?9, fortran=?10, codec=?11, data_offset=?12, comp_offset=?13, comp_size=?14,"
          " hash=?15, metadata=?16 WHERE id=?17 RETURNING id", e);
    if (!st) return -1;
    char shape[QS_MAX_DIMS * 24 + 4];
    qs_shape_json(w->shape, w->ndim, shape, sizeof shape);
    sqlite3_bind_text(st, 1, w->name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, w->source_id);
    sqlite3_bind_text(st, 3, w->member ? w->member : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 4, qs_dtype_get(w->dtype)->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, shape, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 6, w->ndim);
    sqlite3_bind_int64(st, 7, (int64_t)w->numel);
    sqlite3_bind_int64(st, 8, (int64_t)w->nbytes);
    sqlite3_bind_text(st, 9, w->is_blob ? "blob" : "ref", -1, SQLITE_STATIC);
    /* blobs are written in C order, so they are never column-major and never compressed */
    sqlite3_bind_int(st, 10, w->is_blob ? 0 : w->fortran);
    sqlite3_bind_text(st, 11, !w->is_blob && w->codec == QS_CODEC_DEFLATE ? "deflate" : "none", -1, SQLITE_STATIC);
    if (w->is_blob) {
        sqlite3_bind_null(st, 12); sqlite3_bind_null(st, 13); sqlite3_bind_null(st, 14);
    } else {
        sqlite3_bind_int64(st, 12, (int64_t)w->data_offset);
        if (w->codec == QS_CODEC_DEFLATE) {
            sqlite3_bind_int64(st, 13, (int64_t)w->comp_offset);
            sqlite3_bind_int64(st, 14, (int64_t)w->comp_size);
        } else { sqlite3_bind_null(st, 13); sqlite3_bind_null(st, 14); }
    }
    sqlite3_bind_text(st, 15, w->hash, -1, SQLITE_TRANSIENT);
    if (w->metadata) sqlite3_bind_text(st, 16, w->metadata, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, 16);
    if (*id) sqlite3_bind_int64(st, 17, *id);
    if (sqlite3_step(st) != SQLITE_ROW) { qs_db_fail(db, e, "tensor write"); sqlite3_finalize(st); return -1; }
    *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return 0;
}

int qs_tensor_embed(qs_db *db, int64_t id, qs_treader *r, qs_err *e)
{
    sqlite3_stmt *del = qs_db_prepare(db, "DELETE FROM tensor_chunk WHERE tensor_id=?", e);
    if (!del) return -1;
    sqlite3_bind_int64(del, 1, id);
    if (step_done(db, del, "chunk delete", e)) return -1;
    sqlite3_finalize(del);
    sqlite3_stmt *ins = qs_db_prepare(db, "INSERT INTO tensor_chunk(tensor_id, seq, data) VALUES(?,?,?)", e);
    uint8_t *buf = malloc(QS_CHUNK_BYTES);
    if (!ins || !buf) { sqlite3_finalize(ins); free(buf); return ins ? qs_fail(e, "out of memory") : -1; }
    int rc = 0;
    uint64_t total = qs_treader_nbytes(r);
    for (uint64_t off = 0, seq = 0; off < total; off += QS_CHUNK_BYTES, seq++) {
        size_t n = total - off > QS_CHUNK_BYTES ? QS_CHUNK_BYTES : (size_t)(total - off);
        if ((rc = qs_treader_read_bytes(r, off, n, buf, e))) break;
        sqlite3_reset(ins);
        sqlite3_bind_int64(ins, 1, id);
        sqlite3_bind_int64(ins, 2, (int64_t)seq);
        sqlite3_bind_blob(ins, 3, buf, (int)n, SQLITE_STATIC);
        if (sqlite3_step(ins) != SQLITE_DONE) { rc = qs_db_fail(db, e, "chunk insert"); break; }
    }
    sqlite3_finalize(ins);
    free(buf);
    return rc;
}

int qs_source_prune(qs_db *db, int64_t source_id, const int64_t *keep, size_t nkeep, int *removed, qs_err *e)
{
    /* Ids go in as a JSON array so the statement stays a single prepared one. */
    size_t cap = 16 + nkeep * 21;
    char *ids = malloc(cap);
    if (!ids) return qs_fail(e, "out of memory");
    size_t k = (size_t)snprintf(ids, cap, "[");
    for (size_t i = 0; i < nkeep; i++) k += (size_t)snprintf(ids + k, cap - k, "%s%lld", i ? "," : "", (long long)keep[i]);
    snprintf(ids + k, cap - k, "]");
    sqlite3_stmt *st = qs_db_prepare(db,
        "DELETE FROM tensor WHERE source_id=?1 AND id NOT IN (SELECT value FROM json_each(?2))", e);
    if (!st) { free(ids); return -1; }
    sqlite3_bind_int64(st, 1, source_id);
    sqlite3_bind_text(st, 2, ids, -1, SQLITE_TRANSIENT);
    free(ids);
    if (step_done(db, st, "prune", e)) return -1;
    *removed = sqlite3_changes(db->h);
    sqlite3_finalize(st);
    return 0;
}
