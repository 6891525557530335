/*
** Questions about the database as a whole: what `qscope info` counts and what `qscope check`
** asks SQLite to verify.
*/
#ifndef QS_Q_DB_H
#define QS_Q_DB_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"

/* Each -1 when it could not be read. */
typedef struct qs_db_counts {
    int64_t sources, tensors, elements;
    int64_t bytes_referenced, bytes_embedded;   /* of the tensors, in their storage dtype */
    int64_t results, rl_runs, rl_tokens;
    int64_t schema_version, file_bytes;
} qs_db_counts;
void qs_db_count(qs_db *db, qs_db_counts *c);

/* What SQLite's integrity and foreign-key checks report, in that order: what is "integrity" or
** "foreign key" (static strings), message the report line (foreign keys: the table). */
typedef struct qs_db_problem {
    const char *what;
    char *message;
} qs_db_problem;
int qs_db_problems(qs_db *db, qs_db_problem **out, size_t *n, qs_err *e);
void qs_db_problems_free(qs_db_problem *p, size_t n);

#endif
