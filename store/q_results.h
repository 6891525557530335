/*
** Questions about stored analysis results (the `result` table; analysis/results.h writes and
** reads one result by its key) that the CLI and the workbench ask.  Answers are plain structs
** the caller frees.
*/
#ifndef QS_Q_RESULTS_H
#define QS_Q_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"

typedef struct qs_result_item {
    int64_t id;
    char *kind, *format, *tensor_hash, *options, *data, *created_at;
} qs_result_item;

void qs_result_item_free(qs_result_item *r);   /* the strings; r itself is the caller's */

/* The newest result of that kind; *found = 0 (and r zeroed) when there is none. */
int qs_result_latest(qs_db *db, const char *kind, qs_result_item *r, int *found, qs_err *e);
/* The result of that id; *found = 0 when it is gone. */
int qs_result_by_id(qs_db *db, int64_t id, qs_result_item *r, int *found, qs_err *e);

/* How many results have one of the kinds. */
int qs_result_count(qs_db *db, const char *const *kinds, int nkinds, int64_t *n, qs_err *e);

/* Per tensor hash, how many results of that kind were made by that tool version. */
typedef struct qs_hash_count {
    char hash[40];
    int n;
} qs_hash_count;
int qs_result_count_by_tensor(qs_db *db, const char *kind, const char *tool_version, qs_hash_count **out, size_t *n,
                              qs_err *e);

#endif
