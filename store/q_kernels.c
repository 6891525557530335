/*
** The Kernels view's list of stored kernel experiments and trajectories (see q_kernels.h).
*/
#include "q_kernels.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void qs_kernel_items_free(qs_kernel_item *k, size_t n)
{
    for (size_t i = 0; k && i < n; i++) {
        free(k[i].format); free(k[i].tensor_hash); free(k[i].created_at);
        free(k[i].title); free(k[i].ylabel); free(k[i].run); free(k[i].set); free(k[i].options); free(k[i].data);
    }
    free(k);
}

static int dup_col(sqlite3_stmt *st, int i, char **out)
{
    const char *s = (const char *)sqlite3_column_text(st, i);
    *out = s ? strdup(s) : NULL;
    return s && !*out ? -1 : 0;
}

int qs_kernel_list(qs_db *db, qs_kernel_item **out, size_t *n, qs_err *e)
{
    *out = NULL;
    *n = 0;
    /* malformed JSON gives NULL instead of failing the query */
    sqlite3_stmt *st = qs_db_prepare(db,
        "SELECT id, kind, format, tensor_hash, created_at, "
        "CASE WHEN json_valid(data) THEN json_extract(data, '$.title') END, "
        "CASE WHEN json_valid(options) THEN json_extract(options, '$.run') END, "
        "CASE WHEN json_valid(options) THEN json_extract(options, '$.set') END, "
        "CASE WHEN json_valid(data) THEN json_extract(data, '$.ylabel') END, "
        "CASE WHEN kind <> 'trajectory' THEN options END, CASE WHEN kind <> 'trajectory' THEN data END "
        "FROM result WHERE kind IN ('trajectory','msd','attn','resq') ORDER BY kind, id DESC", e);
    if (!st) return -1;
    qs_kernel_item *v = NULL;
    size_t cap = 0, k = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (k == cap) {
            cap = cap ? 2 * cap : 16;
            qs_kernel_item *nv = realloc(v, cap * sizeof *nv);
            if (!nv) { rc = SQLITE_NOMEM; break; }
            v = nv;
        }
        qs_kernel_item *x = &v[k++];
        memset(x, 0, sizeof *x);
        x->id = sqlite3_column_int64(st, 0);
        snprintf(x->kind, sizeof x->kind, "%s", sqlite3_column_text(st, 1) ? (const char *)sqlite3_column_text(st, 1) : "");
        if (dup_col(st, 2, &x->format) || dup_col(st, 3, &x->tensor_hash) || dup_col(st, 4, &x->created_at) ||
            dup_col(st, 5, &x->title) || dup_col(st, 6, &x->run) || dup_col(st, 7, &x->set) ||
            dup_col(st, 8, &x->ylabel) || dup_col(st, 9, &x->options) || dup_col(st, 10, &x->data)) {
            rc = SQLITE_NOMEM;
            break;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        qs_kernel_items_free(v, k);
        return rc == SQLITE_NOMEM ? qs_fail(e, "out of memory") : qs_db_fail(db, e, "reading kernel results");
    }
    *out = v;
    *n = k;
    return 0;
}
