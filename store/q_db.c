/*
** Database-wide counts and SQLite's own checks (see q_db.h).
*/
#include "q_db.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static int64_t scalar(qs_db *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

void qs_db_count(qs_db *db, qs_db_counts *c)
{
    c->sources = scalar(db, "SELECT count(*) FROM source");
    c->tensors = scalar(db, "SELECT count(*) FROM tensor");
    c->elements = scalar(db, "SELECT coalesce(sum(numel),0) FROM tensor");
    c->bytes_referenced = scalar(db, "SELECT coalesce(sum(nbytes),0) FROM tensor WHERE storage='ref'");
    c->bytes_embedded = scalar(db, "SELECT coalesce(sum(nbytes),0) FROM tensor WHERE storage='blob'");
    c->results = scalar(db, "SELECT count(*) FROM result");
    c->rl_runs = scalar(db, "SELECT count(*) FROM rl_run");
    c->rl_tokens = scalar(db, "SELECT count(*) FROM rl_token");
    c->schema_version = scalar(db, "PRAGMA user_version");
    c->file_bytes = scalar(db, "SELECT page_count*page_size FROM pragma_page_count, pragma_page_size");
}

void qs_db_problems_free(qs_db_problem *p, size_t n)
{
    for (size_t i = 0; p && i < n; i++) free(p[i].message);
    free(p);
}

static int add(qs_db_problem **v, size_t *n, size_t *cap, const char *what, const char *msg)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 8;
        qs_db_problem *nv = realloc(*v, c * sizeof *nv);
        if (!nv) return -1;
        *v = nv;
        *cap = c;
    }
    char *m = strdup(msg ? msg : "");
    if (!m) return -1;
    (*v)[(*n)++] = (qs_db_problem){what, m};
    return 0;
}

int qs_db_problems(qs_db *db, qs_db_problem **out, size_t *n, qs_err *e)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    int bad = 0;
    sqlite3_stmt *st = qs_db_prepare(db, "PRAGMA integrity_check", e);
    if (!st) return -1;
    while (!bad && sqlite3_step(st) == SQLITE_ROW) {
        const char *m = (const char *)sqlite3_column_text(st, 0);
        if (strcmp(m ? m : "", "ok") != 0) bad = add(out, n, &cap, "integrity", m);
    }
    sqlite3_finalize(st);
    if (!bad && !(st = qs_db_prepare(db, "PRAGMA foreign_key_check", e))) { qs_db_problems_free(*out, *n); *out = NULL; *n = 0; return -1; }
    while (!bad && sqlite3_step(st) == SQLITE_ROW) bad = add(out, n, &cap, "foreign key", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (bad) {
        qs_db_problems_free(*out, *n);
        *out = NULL;
        *n = 0;
        return qs_fail(e, "out of memory");
    }
    return 0;
}
