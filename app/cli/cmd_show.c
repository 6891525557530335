/*
** `qscope show TENSOR`: a tensor's record and statistics.
*/
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "../../analysis/stats_store.h"
#include "../../store/json_out.h"
#include "../../store/tensor.h"

static json_t *jreal(double v) { return qs_json_num(v); }

static json_t *axis_obj(const qs_axis_summary *a)
{
    return json_pack("{s:o,s:o,s:o,s:o,s:I}", "min", jreal(a->min), "median", jreal(a->median), "max", jreal(a->max),
                     "mean", jreal(a->mean), "argmax", (json_int_t)a->argmax);
}

static const char *pct_key(int k)
{
    static const char *keys[QS_NPCT] = {"p0.1", "p1", "p5", "p25", "p50", "p75", "p95", "p99", "p99.9"};
    return keys[k];
}

int qs_cmd_show(qs_cli *cli, int argc, char **argv)
{
    static const struct option lo[] = {{"json", no_argument, 0, 'J'}, {0, 0, 0, 0}};
    int json = 0, ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (ch == 'J') json = 1;
        else return qs_cli_usage("show", "unknown option '%s'", argv[optind - 1]);
    }
    if (argc - optind != 1) return qs_cli_usage("show", "give exactly one tensor name");
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    qs_err e = {{0}};
    qs_tensor_rec t;
    qs_tensor_stats s;
    int found = 0, rc = QS_EXIT_OK;
    if (qs_tensor_get(db, argv[optind], &t, &e)) { qs_db_close(db); return qs_cli_err(QS_EXIT_ERR, &e); }
    if (qs_stats_load(db, t.id, &s, &found, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    /* a reference whose file changed: the record and statistics are of the imported content */
    qs_err se = {{0}};
    int stale = qs_tensor_ref_check(&t, &se) != 0;
    char shs[160], shj[160], sz[32];
    qs_shape_str(t.shape, t.ndim, shs, sizeof shs);
    qs_shape_json(t.shape, t.ndim, shj, sizeof shj);
    qs_fmt_bytes((double)t.nbytes, sz, sizeof sz);
    if (json) {
        json_t *o = json_object(), *rest = json_pack("{s:s,s:o,s:I,s:I,s:s,s:s,s:s}", "dtype", qs_dtype_get(t.dtype)->name,
                              "shape", json_loads(shj, 0, NULL), "numel", (json_int_t)t.numel, "nbytes", (json_int_t)t.nbytes,
                              "storage", t.is_blob ? "blob" : "ref", "hash", t.hash, "source_kind", t.source_kind);
        qs_json_set_text(o, "name", t.name);
        qs_json_set_text(o, "member", t.member);
        json_object_update(o, rest);
        json_decref(rest);
        qs_json_set_text(o, "source", t.source_path);
        if (t.metadata) json_object_set_new(o, "metadata", json_loads(t.metadata, 0, NULL));
        if (stale) json_object_set_new(o, "stale", qs_json_text(se.msg));
        if (found) {
            json_t *st = json_pack("{s:I,s:I,s:I,s:I}", "n_finite", (json_int_t)s.n_finite, "n_nan", (json_int_t)s.n_nan,
                                   "n_inf", (json_int_t)s.n_inf, "n_zero", (json_int_t)s.n_zero);
            const char *fk[] = {"min", "max", "mean", "std", "absmax", "kurtosis", "zero_frac", "outlier_frac"};
            const double fv[] = {s.min, s.max, s.mean, s.std, s.absmax, s.kurtosis, s.zero_frac, s.outlier_frac};
            for (int k = 0; k < 8; k++) qs_json_set_num(st, fk[k], fv[k]);
            json_t *p = json_object();
            for (int k = 0; k < QS_NPCT; k++) json_object_set_new(p, pct_key(k), jreal(s.pct[k]));
            json_object_set_new(st, "percentiles", p);
            if (s.rows) {
                json_object_set_new(st, "rows", json_integer((json_int_t)s.rows));
                json_object_set_new(st, "cols", json_integer((json_int_t)s.cols));
                json_object_set_new(st, "row_absmax", axis_obj(&s.row_absmax));
                json_object_set_new(st, "col_absmax", axis_obj(&s.col_absmax));
                json_t *top = json_array();
                for (int k = 0; k < s.ntop; k++)
                    json_array_append_new(top, json_pack("{s:I,s:o}", "col", (json_int_t)s.top_cols[k], "absmax",
                                                         jreal(s.top_cols_absmax[k])));
                json_object_set_new(st, "top_channels", top);
            }
            json_object_set_new(o, "stats", st);
        }
        char *txt = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        puts(txt);
        free(txt);
        json_decref(o);
        goto out;
    }
    const char *B = qs_c_bold(cli), *H = qs_c_head(cli), *O = qs_c_off(cli);
    char a[40], b[40], c[40], d[40];
    printf("%s%s%s\n", B, qs_esc(t.name), O);
    printf("  %-10s %s (%s)\n", "source", qs_esc(t.source_path), t.source_kind);
    if (stale) printf("  %s%-10s %s (the record and statistics below are of the imported content)%s\n", qs_c_warn(cli),
                      "STALE", qs_esc(se.msg), O);
    if (t.member && *t.member) printf("  %-10s %s\n", "member", qs_esc(t.member));
    printf("  %-10s %s  %s  %llu elements  %s  %s%s\n", "tensor", shs, qs_dtype_get(t.dtype)->name,
           (unsigned long long)t.numel, sz, t.is_blob ? "embedded" : "referenced", t.fortran ? " (column-major)" : "");
    printf("  %-10s %s\n", "hash", t.hash);
    if (!found) { printf("  (no statistics)\n"); goto out; }
    printf("%sstatistics%s (finite values: %llu", H, O, (unsigned long long)s.n_finite);
    if (s.n_nan || s.n_inf) printf(", %s%llu NaN, %llu Inf%s", qs_c_warn(cli), (unsigned long long)s.n_nan,
                                   (unsigned long long)s.n_inf, O);
    printf(")\n");
    qs_fmt_num(s.min, 6, a, sizeof a); qs_fmt_num(s.max, 6, b, sizeof b);
    qs_fmt_num(s.mean, 6, c, sizeof c); qs_fmt_num(s.std, 6, d, sizeof d);
    printf("  min %-14s max %-14s mean %-14s std %s\n", a, b, c, d);
    qs_fmt_num(s.absmax, 6, a, sizeof a); qs_fmt_num(s.kurtosis, 5, b, sizeof b);
    printf("  absmax %-11s kurtosis %-9s (Gaussian 3)  zeros %.4g%%  outliers (|x-mean|>6σ) %.4g%%\n", a, b,
           100 * s.zero_frac, 100 * s.outlier_frac);
    printf("  percentiles");
    for (int k = 0; k < QS_NPCT; k++) { qs_fmt_num(s.pct[k], 5, a, sizeof a); printf("  %s %s", pct_key(k), a); }
    printf("\n");
    if (s.rows) {
        printf("%smatrix view%s %llu rows x %llu columns\n", H, O, (unsigned long long)s.rows, (unsigned long long)s.cols);
        const qs_axis_summary *ax[2] = {&s.row_absmax, &s.col_absmax};
        const char *nm[2] = {"row absmax", "col absmax"};
        for (int k = 0; k < 2; k++) {
            qs_fmt_num(ax[k]->min, 5, a, sizeof a); qs_fmt_num(ax[k]->median, 5, b, sizeof b);
            qs_fmt_num(ax[k]->max, 5, c, sizeof c);
            printf("  %-11s min %-11s median %-11s max %-11s (at %llu, %.3gx median)\n", nm[k], a, b, c,
                   (unsigned long long)ax[k]->argmax, ax[k]->median > 0 ? ax[k]->max / ax[k]->median : NAN);
        }
        printf("  top channels");
        for (int k = 0; k < s.ntop; k++) { qs_fmt_num(s.top_cols_absmax[k], 4, a, sizeof a); printf("  %llu:%s", (unsigned long long)s.top_cols[k], a); }
        printf("\n");
    }
out:
    qs_tensor_rec_free(&t);
    qs_db_close(db);
    return rc;
}
