/*
** Persisting tensor statistics (see stats_store.h).  Percentiles are columns so that users can
** query them with sqlite3; the axis summaries are small JSON objects.
*/
#include "stats_store.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sqlite3.h>

#include <jansson.h>

static void bind_real(sqlite3_stmt *st, int i, double v)
{
    if (isfinite(v)) sqlite3_bind_double(st, i, v);
    else sqlite3_bind_null(st, i);      /* SQLite has no NaN; NULL reads back as NaN */
}

static char *axis_json(const qs_axis_summary *a)
{
    json_t *o = json_pack("{s:f,s:f,s:f,s:f,s:I}", "min", a->min, "median", a->median, "max", a->max,
                          "mean", a->mean, "argmax", (json_int_t)a->argmax);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

static void axis_parse(const char *txt, qs_axis_summary *a)
{
    json_t *o = txt ? json_loads(txt, 0, NULL) : NULL;
    a->min = json_number_value(json_object_get(o, "min"));
    a->median = json_number_value(json_object_get(o, "median"));
    a->max = json_number_value(json_object_get(o, "max"));
    a->mean = json_number_value(json_object_get(o, "mean"));
    a->argmax = (uint64_t)json_integer_value(json_object_get(o, "argmax"));
    json_decref(o);
}

int qs_stats_save(qs_db *db, int64_t id, const qs_tensor_stats *s, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db,
        "INSERT OR REPLACE INTO tensor_stats(tensor_id, n_finite, n_nan, n_inf, n_zero, min, max, mean, std,"
        " absmax, kurtosis, zero_frac, outlier_frac, p0_1, p1, p5, p25, p50, p75, p95, p99, p99_9, rows, cols,"
        " row_absmax, col_absmax, top_channels) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", e);
    if (!st) return -1;
    int i = 1;
    sqlite3_bind_int64(st, i++, id);
    sqlite3_bind_int64(st, i++, (int64_t)s->n_finite);
    sqlite3_bind_int64(st, i++, (int64_t)s->n_nan);
    sqlite3_bind_int64(st, i++, (int64_t)s->n_inf);
    sqlite3_bind_int64(st, i++, (int64_t)s->n_zero);
    bind_real(st, i++, s->min);
    bind_real(st, i++, s->max);
    bind_real(st, i++, s->mean);
    bind_real(st, i++, s->std);
    bind_real(st, i++, s->absmax);
    bind_real(st, i++, s->kurtosis);
    bind_real(st, i++, s->zero_frac);
    bind_real(st, i++, s->outlier_frac);
    for (int k = 0; k < QS_NPCT; k++) bind_real(st, i++, s->pct[k]);
    char *ra = NULL, *ca = NULL, *top = NULL;
    if (s->rows) {
        sqlite3_bind_int64(st, i++, (int64_t)s->rows);
        sqlite3_bind_int64(st, i++, (int64_t)s->cols);
        ra = axis_json(&s->row_absmax);
        ca = axis_json(&s->col_absmax);
        json_t *a = json_array();
        for (int k = 0; k < s->ntop; k++)
            json_array_append_new(a, json_pack("[I,f]", (json_int_t)s->top_cols[k], s->top_cols_absmax[k]));
        top = json_dumps(a, JSON_COMPACT);
        json_decref(a);
        sqlite3_bind_text(st, i++, ra, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, i++, ca, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, i++, top, -1, SQLITE_TRANSIENT);
    } else {
        for (int k = 0; k < 5; k++) sqlite3_bind_null(st, i++);
    }
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : qs_db_fail(db, e, "statistics write");
    sqlite3_finalize(st);
    free(ra); free(ca); free(top);
    return rc;
}

static double col_real(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

int qs_stats_load(qs_db *db, int64_t id, qs_tensor_stats *s, int *found, qs_err *e)
{
    memset(s, 0, sizeof *s);
    *found = 0;
    sqlite3_stmt *st = qs_db_prepare(db,
        "SELECT n_finite, n_nan, n_inf, n_zero, min, max, mean, std, absmax, kurtosis, zero_frac, outlier_frac,"
        " p0_1, p1, p5, p25, p50, p75, p95, p99, p99_9, rows, cols, row_absmax, col_absmax, top_channels"
        " FROM tensor_stats WHERE tensor_id=?", e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        int i = 0;
        *found = 1;
        s->n_finite = (uint64_t)sqlite3_column_int64(st, i++);
        s->n_nan = (uint64_t)sqlite3_column_int64(st, i++);
        s->n_inf = (uint64_t)sqlite3_column_int64(st, i++);
        s->n_zero = (uint64_t)sqlite3_column_int64(st, i++);
        s->n = s->n_finite + s->n_nan + s->n_inf;
        s->min = col_real(st, i++); s->max = col_real(st, i++); s->mean = col_real(st, i++);
        s->std = col_real(st, i++); s->absmax = col_real(st, i++); s->kurtosis = col_real(st, i++);
        s->zero_frac = col_real(st, i++); s->outlier_frac = col_real(st, i++);
        for (int k = 0; k < QS_NPCT; k++) s->pct[k] = col_real(st, i++);
        s->rows = (uint64_t)sqlite3_column_int64(st, i++);
        s->cols = (uint64_t)sqlite3_column_int64(st, i++);
        axis_parse((const char *)sqlite3_column_text(st, i++), &s->row_absmax);
        axis_parse((const char *)sqlite3_column_text(st, i++), &s->col_absmax);
        const char *top = (const char *)sqlite3_column_text(st, i++);
        json_t *a = top ? json_loads(top, 0, NULL) : NULL;
        for (size_t k = 0; k < json_array_size(a) && k < QS_TOPK; k++) {
            s->top_cols[k] = (uint64_t)json_integer_value(json_array_get(json_array_get(a, k), 0));
            s->top_cols_absmax[k] = json_number_value(json_array_get(json_array_get(a, k), 1));
            s->ntop = (int)k + 1;
        }
        json_decref(a);
    } else if (rc != SQLITE_DONE) {
        sqlite3_finalize(st);
        return qs_db_fail(db, e, "statistics read");
    }
    sqlite3_finalize(st);
    return 0;
}
