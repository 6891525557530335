/*
** `qscope ls [PATTERN]` and `qscope rm TENSOR...`: listing and removing tensors.
*/
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "../../store/json_out.h"
#include "../../store/q_tensors.h"
#include "../../store/tensor.h"
#include "../../store/tensor_names.h"

static json_t *shape_array(const char *shape_json)
{
    json_t *a = json_loads(shape_json ? shape_json : "[]", 0, NULL);
    return a ? a : json_array();
}

/* NaN (no statistics) is null; an infinite value is null with its reason (store/json_out.h) */
static void set_real(json_t *o, const char *key, double v)
{
    if (isnan(v)) json_object_set_new(o, key, json_null());
    else qs_json_set_num(o, key, v);
}

int qs_cmd_ls(qs_cli *cli, int argc, char **argv)
{
    static const struct option lo[] = {{"json", no_argument, 0, 'J'}, {"sort", required_argument, 0, 's'},
                                       {"stale", no_argument, 0, 'S'}, {0, 0, 0, 0}};
    int json = 0, stale = 0, ch;
    qs_tensor_order order = QS_TENSORS_BY_NAME;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'J': json = 1; break;
        case 'S': stale = 1; break;
        case 's':
            if (!strcmp(optarg, "name")) order = QS_TENSORS_BY_NAME;
            else if (!strcmp(optarg, "size")) order = QS_TENSORS_BY_SIZE;
            else if (!strcmp(optarg, "absmax")) order = QS_TENSORS_BY_ABSMAX;
            else if (!strcmp(optarg, "kurtosis")) order = QS_TENSORS_BY_KURTOSIS;
            else if (!strcmp(optarg, "outliers")) order = QS_TENSORS_BY_OUTLIERS;
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
    qs_tensor_item *ts;
    size_t nts;
    if (qs_tensor_list(db, pat, order, &ts, &nts, &e)) { qs_db_close(db); return qs_cli_err(QS_EXIT_ERR, &e); }
    json_t *arr = json_array();
    int n = 0, nw = 44;
    /* the NAME column as wide as the longest (escaped) name shown, so the columns stay aligned */
    for (size_t i = 0; !json && i < nts; i++) {
        int w = qs_text_cols(qs_esc(ts[i].name));
        if (w > nw) nw = w;
    }
    if (!json)
        printf("%s%-*s %-14s %-10s %10s %5s %11s %9s %9s%s\n", qs_c_head(cli), nw, "NAME", "SHAPE", "DTYPE", "SIZE",
               "DATA", "ABSMAX", "KURTOSIS", "OUTLIERS", qs_c_off(cli));
    for (size_t i = 0; i < nts; i++) {
        const qs_tensor_item *ti = &ts[i];
        const char *name = ti->name;
        const char *stor = ti->storage;
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
                                  ti->dtype, "shape",
                                  shape_array(ti->shape), "numel",
                                  (json_int_t)ti->numel, "nbytes", (json_int_t)ti->nbytes,
                                  "storage", stor, "hash", ti->hash);
            qs_json_set_text(o, "name", name);   /* name first, as before */
            json_object_update(o, rest);
            json_decref(rest);
            set_real(o, "absmax", ti->absmax);
            set_real(o, "kurtosis", ti->kurtosis);
            set_real(o, "outlier_frac", ti->outlier_frac);
            qs_json_set_text(o, "source", ti->source);
            if (stale) json_object_set_new(o, "stale", json_boolean(is_stale));
            json_array_append_new(arr, o);
            continue;
        }
        json_t *sh = shape_array(ti->shape);
        uint64_t shape[QS_MAX_DIMS];
        int nd = (int)json_array_size(sh);
        for (int k = 0; k < nd && k < QS_MAX_DIMS; k++) shape[k] = (uint64_t)json_integer_value(json_array_get(sh, (size_t)k));
        json_decref(sh);
        char shs[128], sz[32], am[32], ku[32], of[32];
        qs_shape_str(shape, nd < QS_MAX_DIMS ? nd : QS_MAX_DIMS, shs, sizeof shs);
        qs_fmt_bytes((double)ti->nbytes, sz, sizeof sz);
        qs_fmt_num(ti->absmax, 5, am, sizeof am);
        qs_fmt_num(ti->kurtosis, 4, ku, sizeof ku);
        snprintf(of, sizeof of, "%.3g%%", 100.0 * (isnan(ti->outlier_frac) ? 0 : ti->outlier_frac));
        const char *en = qs_esc(name);
        printf("%s%*s %-14s %-10s %10s %5s %11s %9s %9s%s%s%s\n", en, nw - qs_text_cols(en), "", shs, ti->dtype,
               sz, stor, am, ku, of, is_stale ? qs_c_warn(cli) : "", is_stale ? "  STALE" : "", is_stale ? qs_c_off(cli) : "");
    }
    qs_tensor_items_free(ts, nts);
    int out = QS_EXIT_OK;
    if (json) {
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
    char **names = NULL;
    size_t nnames = 0;
    if (qs_db_begin(db, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    /* every argument resolved before anything goes: an exact name is that tensor alone ("w[0]" is
    ** not the pattern matching "w0"), else the names matching it as a glob (as `analyze` does) */
    for (int i = 1; i < argc; i++) {
        int found = 0;
        if (qs_tensor_names_match(db, argv[i], &names, &nnames, &found, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); break; }
        if (!found) { rc = qs_cli_error(QS_EXIT_ERR, "no tensor matches '%s'", qs_esc(argv[i])); break; }
    }
    for (size_t k = 0; rc == QS_EXIT_OK && k < nnames; k++) {
        int n;
        if (qs_tensor_delete_name(db, names[k], &n, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
        else total += n;
    }
    /* Sources left without tensors go too, so `info` does not count ghosts. */
    if (rc == QS_EXIT_OK && qs_source_delete_empty(db, &e) == 0 && qs_db_commit(db, &e) == 0) {
        printf("removed %d tensor(s)\n", total);
    } else {
        if (rc == QS_EXIT_OK) rc = qs_cli_err(QS_EXIT_ERR, &e);
        qs_db_rollback(db);
    }
out:
    qs_tensor_names_free(names, nnames);
    qs_db_close(db);
    return rc;
}
