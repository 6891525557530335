/*
** The read half of store/train_store.h: the training runs, the steps of one run and its operand
** statistics, as the CLI, the workbench, `plot loss`, the report and the claims ask for them.
** (The write half is store/train_store.c.)
*/
#include "train_store.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/llm_recipe.h"

void qs_train_run_item_clear(qs_train_run_item *x)
{
    free(x->name); free(x->recipe); free(x->sweep); free(x->status); free(x->model); free(x->options);
    free(x->data_hash); free(x->tool_version); free(x->checkpoint); free(x->error); free(x->created_at);
    free(x->finished_at);
    memset(x, 0, sizeof *x);
}

void qs_train_run_items_free(qs_train_run_item *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++) qs_train_run_item_clear(&r[i]);
    free(r);
}

static char *dup_col(sqlite3_stmt *st, int i)
{
    const char *s = (const char *)sqlite3_column_text(st, i);
    return strdup(s ? s : "");
}

static double opt_num(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

#define RUN_COLS "id, name, recipe, seed, sweep, status, steps, steps_done, val0, val_final, model, options, " \
                 "data_hash, tool_version, checkpoint, error, created_at, finished_at"

/* One row of RUN_COLS; 0 or -1 out of memory (the item is then freed). */
static int run_row(sqlite3_stmt *st, qs_train_run_item *r)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    r->seed = (uint64_t)sqlite3_column_int64(st, 3);
    r->steps = sqlite3_column_int(st, 6);
    r->steps_done = sqlite3_column_int(st, 7);
    r->val0 = opt_num(st, 8);
    r->val_final = opt_num(st, 9);
    char **txt[] = {&r->name, &r->recipe, &r->sweep, &r->status, &r->model, &r->options, &r->data_hash,
                    &r->tool_version, &r->checkpoint, &r->error, &r->created_at, &r->finished_at};
    static const int col[] = {1, 2, 4, 5, 10, 11, 12, 13, 14, 15, 16, 17};
    int bad = 0;
    for (size_t k = 0; k < sizeof col / sizeof *col; k++)
        if (!(*txt[k] = dup_col(st, col[k]))) bad = 1;
    if (bad) {
        for (size_t k = 0; k < sizeof col / sizeof *col; k++) { free(*txt[k]); *txt[k] = NULL; }
        return -1;
    }
    return 0;
}

int qs_train_run_list(qs_db *db, const char *glob, qs_train_run_item **out, size_t *n, qs_err *e)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT " RUN_COLS " FROM train_run WHERE ?1 IS NULL OR name GLOB ?1 "
                                         "ORDER BY name", e);
    if (!st) return -1;
    if (glob) sqlite3_bind_text(st, 1, glob, -1, SQLITE_TRANSIENT);
    qs_train_run_item *v = NULL;
    size_t cap = 0, k = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (k == cap) {
            cap = cap ? 2 * cap : 16;
            qs_train_run_item *nv = realloc(v, cap * sizeof *nv);
            if (!nv) { rc = SQLITE_NOMEM; break; }
            v = nv;
        }
        if (run_row(st, &v[k])) { rc = SQLITE_NOMEM; break; }
        k++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        qs_train_run_items_free(v, k);
        return rc == SQLITE_NOMEM ? qs_fail(e, "out of memory") : qs_db_fail(db, e, "reading train_run");
    }
    *out = v;
    *n = k;
    return 0;
}

int qs_train_run_get(qs_db *db, const char *name, qs_train_run_item *out, qs_err *e)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT " RUN_COLS " FROM train_run WHERE name = ?", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st), found = 0;
    if (rc == SQLITE_ROW) {
        if (run_row(st, out)) rc = SQLITE_NOMEM;
        else found = 1;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_NOMEM) return qs_fail(e, "out of memory");
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return qs_db_fail(db, e, "reading train_run");
    return found;
}

int qs_train_run_steps(qs_db *db, int64_t id, qs_train_step_row **out, size_t *n, qs_err *e)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT step, train_loss, val_loss, grad_norm, lr, tok_s FROM train_step "
                                         "WHERE run_id = ? ORDER BY step", e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    qs_train_step_row *v = NULL;
    size_t cap = 0, k = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (k == cap) {
            cap = cap ? 2 * cap : 64;
            qs_train_step_row *nv = realloc(v, cap * sizeof *nv);
            if (!nv) { rc = SQLITE_NOMEM; break; }
            v = nv;
        }
        v[k++] = (qs_train_step_row){sqlite3_column_int(st, 0), opt_num(st, 1), opt_num(st, 2), opt_num(st, 3),
                                     opt_num(st, 4), opt_num(st, 5)};
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        free(v);
        return rc == SQLITE_NOMEM ? qs_fail(e, "out of memory") : qs_db_fail(db, e, "reading train_step");
    }
    *out = v;
    *n = k;
    return 0;
}

static int by_layer_operand(const void *a, const void *b)
{
    const qs_train_opstat_row *x = a, *y = b;
    return x->layer != y->layer ? (x->layer > y->layer) - (x->layer < y->layer)
                                : (x->operand > y->operand) - (x->operand < y->operand);
}

/* Step 0: the fractions over the whole run, i.e. each step's weighted by its count (the plain mean
** when no step counted anything). */
int qs_train_run_opstats(qs_db *db, int64_t id, int step, qs_train_opstat_row **out, size_t *n, qs_err *e)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = qs_db_prepare(db, step > 0
        ? "SELECT layer, operand, n, underflow, clipped, nonfinite FROM train_opstat WHERE run_id = ?1 AND step = ?2"
        : "SELECT layer, operand, sum(n), "
          "CASE WHEN sum(n) > 0 THEN sum(underflow * n) / sum(n) ELSE avg(underflow) END, "
          "CASE WHEN sum(n) > 0 THEN sum(clipped * n) / sum(n) ELSE avg(clipped) END, "
          "CASE WHEN sum(n) > 0 THEN sum(nonfinite * n) / sum(n) ELSE avg(nonfinite) END "
          "FROM train_opstat WHERE run_id = ?1 GROUP BY layer, operand", e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    if (step > 0) sqlite3_bind_int(st, 2, step);
    qs_train_opstat_row *v = NULL;
    size_t cap = 0, k = 0;
    int rc, bad_op = 0;
    char bad[32] = "";
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int op;
        const char *name = (const char *)sqlite3_column_text(st, 1);
        if (!name || qs_llm_operand_parse(name, &op)) {
            snprintf(bad, sizeof bad, "%s", name ? name : "NULL");
            bad_op = 1;
            break;
        }
        if (k == cap) {
            cap = cap ? 2 * cap : 64;
            qs_train_opstat_row *nv = realloc(v, cap * sizeof *nv);
            if (!nv) { rc = SQLITE_NOMEM; break; }
            v = nv;
        }
        v[k++] = (qs_train_opstat_row){sqlite3_column_int(st, 0), op, sqlite3_column_int64(st, 2),
                                       sqlite3_column_double(st, 3), sqlite3_column_double(st, 4),
                                       sqlite3_column_double(st, 5)};
    }
    sqlite3_finalize(st);
    if (bad_op) {
        free(v);
        return qs_fail(e, "%s: train_opstat of run %lld: unknown operand '%s'", db->path, (long long)id, bad);
    }
    if (rc != SQLITE_DONE) {
        free(v);
        return rc == SQLITE_NOMEM ? qs_fail(e, "out of memory") : qs_db_fail(db, e, "reading train_opstat");
    }
    if (k > 1) qsort(v, k, sizeof *v, by_layer_operand);
    *out = v;
    *n = k;
    return 0;
}
