/*
** `qscope ls [PATTERN]` and `qscope rm TENSOR...`: listing and removing tensors.
*/
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "../store/json_out.h"
#include "../store/tensor.h"

static json_t *shape_array(const char *shape_json)
{
    json_t *a = json_loads(shape_json ? shape_json : "[]", 0, NULL);
    return a ? a : json_array();
}

/* NULL (no statistics) is null; a non-finite value is null with its reason (store/json_out.h) */
static void set_real(json_t *o, const char *key, sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL) json_object_set_new(o, key, json_null());
    else qs_json_set_num(o, key, sqlite3_column_double(st, i));
}

int qs_cmd_ls(qs_cli *cli, int argc, char **argv)
{
    static const struct option lo[] = {{"json", no_argument, 0, 'J'}, {"sort", required_argument, 0, 's'},
                                       {"stale", no_argument, 0, 'S'}, {0, 0, 0, 0}};
    int json = 0, stale = 0, ch;
    const char *order = "t.name";
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'J': json = 1; break;
        case 'S': stale = 1; break;
        case 's':
            if (!strcmp(optarg, "name")) order = "t.name";
            else if (!strcmp(optarg, "size")) order = "t.nbytes DESC, t.name";
            else if (!strcmp(optarg, "absmax")) order = "s.absmax DESC, t.name";
            else if (!strcmp(optarg, "kurtosis")) order = "s.kurtosis DESC, t.name";
            else if (!strcmp(optarg, "outliers")) order = "s.outlier_frac DESC, t.name";
            else return qs_cli_usage("ls", "unknown sort key '%s'", optarg);
            break;
        default: return qs_cli_usage("ls", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind > 1) return qs_cli_usage("ls", "at most one pattern");
    const char *pat = optind < argc ? argv[optind] : "*";
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    qs_err e = {{0}};
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT t.name, t.dtype, t.shape, t.numel, t.nbytes, t.storage, s.absmax, s.kurtosis, s.outlier_frac,"
             " t.hash, src.path FROM tensor t JOIN source src ON src.id = t.source_id"
             " LEFT JOIN tensor_stats s ON s.tensor_id = t.id WHERE t.name GLOB ?1 ORDER BY %s", order);
    sqlite3_stmt *st = qs_db_prepare(db, sql, &e);
    if (!st) { qs_db_close(db); return qs_cli_err(QS_EXIT_ERR, &e); }
    sqlite3_bind_text(st, 1, pat, -1, SQLITE_TRANSIENT);
    json_t *arr = json_array();
    int n = 0, rc, nw = 44;
    /* the NAME column as wide as the longest (escaped) name shown, so the columns stay aligned */
    while (!json && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int w = qs_text_cols(qs_esc((const char *)sqlite3_column_text(st, 0)));
        if (w > nw) nw = w;
    }
    sqlite3_reset(st);
    if (!json)
        printf("%s%-*s %-14s %-10s %10s %5s %11s %9s %9s%s\n", qs_c_head(cli), nw, "NAME", "SHAPE", "DTYPE", "SIZE",
               "DATA", "ABSMAX", "KURTOSIS", "OUTLIERS", qs_c_off(cli));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        const char *stor = (const char *)sqlite3_column_text(st, 5);
        int is_stale = 0;
        if (stale && strcmp(stor, "ref") == 0) {
            qs_tensor_rec t;
            qs_err e2 = {{0}};
            if (qs_tensor_get(db, name, &t, &e2) == 0) {
                qs_treader *r = qs_treader_open(db, &t, &e2);
                is_stale = r == NULL;
                qs_treader_close(r);
                qs_tensor_rec_free(&t);
            }
        }
        n++;
        if (json) {
            json_t *o = json_object(), *rest = json_pack("{s:s,s:o,s:I,s:I,s:s,s:s}", "dtype",
                                  (const char *)sqlite3_column_text(st, 1), "shape",
                                  shape_array((const char *)sqlite3_column_text(st, 2)), "numel",
                                  (json_int_t)sqlite3_column_int64(st, 3), "nbytes", (json_int_t)sqlite3_column_int64(st, 4),
                                  "storage", stor, "hash", (const char *)sqlite3_column_text(st, 9));
            qs_json_set_text(o, "name", name);   /* name first, as before */
            json_object_update(o, rest);
            json_decref(rest);
            set_real(o, "absmax", st, 6);
            set_real(o, "kurtosis", st, 7);
            set_real(o, "outlier_frac", st, 8);
            qs_json_set_text(o, "source", (const char *)sqlite3_column_text(st, 10));
            if (stale) json_object_set_new(o, "stale", json_boolean(is_stale));
            json_array_append_new(arr, o);
            continue;
        }
        json_t *sh = shape_array((const char *)sqlite3_column_text(st, 2));
        uint64_t shape[QS_MAX_DIMS];
        int nd = (int)json_array_size(sh);
        for (int k = 0; k < nd && k < QS_MAX_DIMS; k++) shape[k] = (uint64_t)json_integer_value(json_array_get(sh, (size_t)k));
        json_decref(sh);
        char shs[128], sz[32], am[32], ku[32], of[32];
        qs_shape_str(shape, nd < QS_MAX_DIMS ? nd : QS_MAX_DIMS, shs, sizeof shs);
        qs_fmt_bytes((double)sqlite3_column_int64(st, 4), sz, sizeof sz);
        qs_fmt_num(sqlite3_column_type(st, 6) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 6), 5, am, sizeof am);
        qs_fmt_num(sqlite3_column_type(st, 7) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 7), 4, ku, sizeof ku);
        snprintf(of, sizeof of, "%.3g%%", 100.0 * sqlite3_column_double(st, 8));
        const char *en = qs_esc(name);
        printf("%s%*s %-14s %-10s %10s %5s %11s %9s %9s%s%s%s\n", en, nw - qs_text_cols(en), "", shs, (const char *)sqlite3_column_text(st, 1),
               sz, stor, am, ku, of, is_stale ? qs_c_warn(cli) : "", is_stale ? "  STALE" : "", is_stale ? qs_c_off(cli) : "");
    }
    sqlite3_finalize(st);
    int out = QS_EXIT_OK;
    if (rc != SQLITE_DONE) out = qs_cli_error(QS_EXIT_ERR, "%s: %s", db->path, sqlite3_errmsg(db->h));
    else if (json) {
        char *s = json_dumps(arr, JSON_INDENT(2));
        puts(s);
        free(s);
    } else if (n == 0) {
        fprintf(stderr, "qscope: no tensors match '%s' (import some with `qscope import`)\n", qs_esc(pat));
    }
    json_decref(arr);
    qs_db_close(db);
    return out;
}

int qs_cmd_rm(qs_cli *cli, int argc, char **argv)
{
    if (argc < 2) return qs_cli_usage("rm", "no tensor names given");
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    qs_err e = {{0}};
    int rc = QS_EXIT_OK, total = 0;
    if (qs_db_begin(db, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    sqlite3_stmt *st = qs_db_prepare(db, "DELETE FROM tensor WHERE name GLOB ?", &e);
    if (!st) { rc = qs_cli_err(QS_EXIT_ERR, &e); qs_db_exec(db, "ROLLBACK", &e); goto out; }
    for (int i = 1; i < argc; i++) {
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, argv[i], -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) != SQLITE_DONE) { rc = qs_cli_error(QS_EXIT_ERR, "%s", sqlite3_errmsg(db->h)); break; }
        int k = sqlite3_changes(db->h);
        if (k == 0) { rc = qs_cli_error(QS_EXIT_ERR, "no tensor matches '%s'", argv[i]); break; }
        total += k;
    }
    sqlite3_finalize(st);
    /* Sources left without tensors go too, so `info` does not count ghosts. */
    if (rc == QS_EXIT_OK && qs_db_exec(db, "DELETE FROM source WHERE id NOT IN (SELECT source_id FROM tensor);"
                                           "COMMIT", &e) == 0) {
        printf("removed %d tensor(s)\n", total);
    } else {
        if (rc == QS_EXIT_OK) rc = qs_cli_err(QS_EXIT_ERR, &e);
        qs_db_exec(db, "ROLLBACK", &e);
    }
out:
    qs_db_close(db);
    return rc;
}
