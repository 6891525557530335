/*
** Tensor names by name or glob (see tensor_names.h).
*/
#include "tensor_names.h"

#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

static int collect(qs_db *db, const char *sql, const char *pat, char ***names, size_t *n, int *found, qs_err *e)
{
    *found = 0;
    sqlite3_stmt *st = qs_db_prepare(db, sql, e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, pat, -1, SQLITE_TRANSIENT);
    int rc = 0, s;
    size_t n0 = *n;   /* one query's names are distinct: only earlier calls' can repeat */
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        const char *nm = (const char *)sqlite3_column_text(st, 0);
        *found = 1;
        int dup = 0;
        for (size_t k = 0; k < n0 && !dup; k++) dup = !strcmp((*names)[k], nm);
        if (dup) continue;
        char **nv = realloc(*names, (*n + 1) * sizeof **names);
        if (!nv) { rc = qs_fail(e, "out of memory"); break; }
        *names = nv;
        if (!(nv[*n] = strdup(nm))) { rc = qs_fail(e, "out of memory"); break; }
        (*n)++;
    }
    if (!rc && s != SQLITE_DONE) rc = qs_db_fail(db, e, "tensor list");
    sqlite3_finalize(st);
    return rc;
}

int qs_tensor_names_glob(qs_db *db, const char *pat, char ***names, size_t *n, int *found, qs_err *e)
{
    return collect(db, "SELECT name FROM tensor WHERE name GLOB ?1 ORDER BY name", pat, names, n, found, e);
}

int qs_tensor_names_match(qs_db *db, const char *arg, char ***names, size_t *n, int *found, qs_err *e)
{
    /* a name that exists is that tensor alone: "w[0]" is not the pattern matching "w0" */
    return collect(db, "SELECT name FROM tensor WHERE CASE WHEN EXISTS (SELECT 1 FROM tensor WHERE name = ?1)"
                   " THEN name = ?1 ELSE name GLOB ?1 END ORDER BY name", arg, names, n, found, e);
}

void qs_tensor_names_free(char **names, size_t n)
{
    for (size_t k = 0; k < n; k++) free(names[k]);
    free(names);
}
