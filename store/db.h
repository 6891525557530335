/*
** The qscope database: one SQLite file holding tensor sources, tensors (by reference or embedded
** as chunked blobs), their statistics, analysis results and RL logs.
**
** Opening a database applies any pending schema migrations (PRAGMA user_version), turns on WAL,
** foreign keys and a busy timeout, so an import and a reader can run at the same time.
*/
#ifndef QS_DB_H
#define QS_DB_H

#include <stdint.h>

#include "../kernels/qs_err.h"

/* SQLite's handles, declared only: the code that writes SQL (store/, analysis/'s result stores)
** includes <sqlite3.h> itself; the commands and the workbench ask the store's query functions. */
typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;

#define QS_SCHEMA_VERSION 7
#define QS_BUSY_TIMEOUT_MS 60000
#define QS_CHUNK_BYTES (1u << 20)   /* embedded tensor data is stored in rows of this many bytes */

typedef struct qs_db {
    sqlite3 *h;
    char *path;
} qs_db;

/* Open (creating if needed) and migrate.  Returns NULL with a message on failure. */
qs_db *qs_db_open(const char *path, qs_err *e);
void qs_db_close(qs_db *db);

/* Run SQL without results (BEGIN, COMMIT, SAVEPOINT ...). */
int qs_db_exec(qs_db *db, const char *sql, qs_err *e);

/* Start a write transaction (BEGIN IMMEDIATE, waiting up to the busy timeout for another
** writer).  Fails if a statement or blob handle of this connection is still reading: its
** snapshot could not be upgraded once another process commits.  Commands write through this. */
int qs_db_begin(qs_db *db, qs_err *e);   /* also refused inside another transaction */
int qs_db_commit(qs_db *db, qs_err *e);
/* Undo the open transaction, if any.  For error paths: SQLite's own answer is dropped, the
** caller reports the error that made it roll back. */
void qs_db_rollback(qs_db *db);

/* A nested unit of work inside the transaction (name: a plain identifier).  rollback_to undoes
** what was done since the savepoint and ends it; the transaction stays open. */
int qs_db_savepoint(qs_db *db, const char *name, qs_err *e);
int qs_db_release(qs_db *db, const char *name, qs_err *e);
void qs_db_rollback_to(qs_db *db, const char *name);

/* Prepare a statement; on failure writes the SQLite message. */
sqlite3_stmt *qs_db_prepare(qs_db *db, const char *sql, qs_err *e);

/* PRAGMA data_version: changes when another connection (another process, or another connection of
** this one) commits to the database; -1 when it cannot be read.  Cheap: for polling. */
int64_t qs_db_data_version(qs_db *db);

/* Set the error from the connection's last SQLite error. */
int qs_db_fail(qs_db *db, qs_err *e, const char *what);

/* The migration scripts, exposed for `qscope schema` and the README. */
int qs_db_schema_count(void);
const char *qs_db_schema_sql(int version);   /* SQL that moves version-1 to version */

#endif
