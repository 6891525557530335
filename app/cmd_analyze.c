/*
** `qscope analyze`: metrics, histograms and (optionally) per-block statistics of tensors under
** formats, stored in the database and reused.
**
** Each (tensor, format, options) result is cached by tensor hash, canonical options JSON and tool
** version; --force recomputes.  Each result is written in its own transaction, and Ctrl-C cancels
** the computation in progress before anything of it is stored.
*/
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <unistd.h>

#include <jansson.h>

#include "analyze_run.h"
#include "cli.h"
#include "quant_opts.h"
#include "../analysis/err_source.h"
#include "../analysis/results.h"
#include "../analysis/stats_store.h"
#include "../store/json_out.h"
#include "../store/tensor.h"

static volatile sig_atomic_t g_interrupted;
static void on_sigint(int sig) { (void)sig; g_interrupted = 1; }

typedef struct { const char *label; int tty; double last; } progress_ctx;

static int progress(void *ctx, uint64_t done, uint64_t total)
{
    progress_ctx *p = ctx;
    if (g_interrupted) return 1;
    if (p->tty && total) {
        double f = (double)done / (double)total;
        if (f - p->last >= 0.01 || done == total) {
            int w = 30, k = (int)(f * w);
            fprintf(stderr, "\r\033[K[%.*s%*s] %3.0f%% %s", k, "##############################", w - k, "", 100 * f, p->label);
            p->last = f;
        }
    }
    return 0;
}

/* Options JSON of a result: the canonical format options (blocks or not, metrics are the same;
** the "blocks" kind is simply present or absent). */
char *qs_analysis_options_json(const qs_apply *a, int blocks)
{
    (void)blocks;
    return qs_quant_opts_json(a);
}

void qs_value_cache_clear(qs_hist *vcache)
{
    if (!vcache) return;
    free(vcache->counts);
    memset(vcache, 0, sizeof *vcache);
}

int qs_analyze_one_cb(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int force, int threads,
                      int (*prog)(void *, uint64_t, uint64_t), void *prog_ctx, qs_hist *vcache, json_t **metrics_out,
                      int *cached, qs_err *e)
{
    if (metrics_out) *metrics_out = NULL;
    *cached = 0;
    char *opts = qs_analysis_options_json(a, blocks), *data = NULL;
    if (!opts) return qs_fail(e, "out of memory");
    int64_t rid = 0;
    int rc = -1;
    qs_treader *r = NULL;
    qs_analysis an;
    memset(&an, 0, sizeof an);
    /* a stored result is of the imported content: never hand it out for a file that changed since */
    if (qs_tensor_ref_check(t, e)) goto out;
    if (!force) {
        if (qs_result_get(db, t->hash, "metrics", a->f->name, opts, &data, &rid, e)) goto out;
        if (data && blocks) {   /* a cached result without its per-block arrays does not do */
            char *bd = NULL;
            int64_t bid;
            if (qs_result_get(db, t->hash, "blocks", a->f->name, opts, &bd, &bid, e)) goto out;
            if (!bd) { free(data); data = NULL; }
            free(bd);
        }
        if (data) {
            *cached = 1;
            rc = 0;
            if (metrics_out && !(*metrics_out = json_loads(data, 0, NULL)))
                rc = qs_fail(e, "stored result for %s / %s is not valid JSON", t->name, a->f->name);
            if (metrics_out && *metrics_out) qs_json_fix_legacy_nums(*metrics_out);
            goto out;
        }
    }
    if (!(r = qs_treader_open(db, t, e))) goto out;
    uint64_t rows, cols;
    qs_tensor_matrix_view(t->shape, t->ndim, &rows, &cols);
    qs_analyze_opts ao = {.threads = threads, .blocks = blocks, .progress = prog, .progress_ctx = prog_ctx};
    /* the stored statistics already know the absmax: spare the engine a pre-pass over the tensor */
    qs_tensor_stats ts;
    int have = 0;
    if (qs_stats_load(db, t->id, &ts, &have, e) == 0 && have && isfinite(ts.absmax)) {
        ao.absmax_known = 1;
        ao.absmax = ts.absmax;
    }
    if (vcache && vcache->counts) ao.value_hist = vcache;
    e->msg[0] = 0;
    if (qs_analyze(a, rows, cols, qs_treader_read_cb, r, 1, &ao, &an, e)) goto out;
    /* the result goes under t->hash only if those were the bytes read; and the reader's read
    ** snapshot (embedded data) must end before the write begins */
    if (qs_treader_verify(r, e)) goto out;
    qs_treader_close(r);
    r = NULL;
    if (vcache && !vcache->counts && an.value.counts) {   /* the first of a sweep: keep its value histogram */
        *vcache = an.value;
        if (!(vcache->counts = malloc((size_t)an.value.nbins * sizeof *vcache->counts))) memset(vcache, 0, sizeof *vcache);
        else memcpy(vcache->counts, an.value.counts, (size_t)an.value.nbins * sizeof *vcache->counts);
    }
    char *mj = qs_metrics_json(&an.m), *hj = qs_hists_json(&an);
    int64_t mid = 0, hid = 0, bid = 0;
    int wrc = !mj || !hj || qs_db_begin(db, e) ||
              qs_result_put(db, t->hash, "metrics", a->f->name, opts, mj, &mid, e) ||
              qs_result_put(db, t->hash, "hist", a->f->name, opts, hj, &hid, e);
    if (!wrc && blocks) {
        json_t *bj = json_pack("{s:I,s:i,s:i,s:I,s:I}", "nblocks", (json_int_t)an.nblocks, "block",
                               (int)qs_format_block(a->f, &a->o), "axis", a->axis, "rows", (json_int_t)rows, "cols",
                               (json_int_t)cols);
        char *bs = json_dumps(bj, JSON_COMPACT);
        json_decref(bj);
        size_t nb = (size_t)an.nblocks;
        wrc = qs_result_put(db, t->hash, "blocks", a->f->name, opts, bs, &bid, e) ||
              (an.block_scale_code && qs_result_blob_put(db, bid, "scale_code", an.block_scale_code, nb, e)) ||
              (an.block_absmax && qs_result_blob_put(db, bid, "absmax", an.block_absmax, nb * 4, e)) ||
              (an.block_ratio && qs_result_blob_put(db, bid, "ratio", an.block_ratio, nb * 4, e)) ||
              (an.block_rmse && qs_result_blob_put(db, bid, "rmse", an.block_rmse, nb * 4, e)) ||
              (an.row_rmse && qs_result_blob_put(db, bid, "row_rmse", an.row_rmse, (size_t)an.rows * 4, e)) ||
              (an.col_rmse && qs_result_blob_put(db, bid, "col_rmse", an.col_rmse, (size_t)an.cols * 4, e));
        free(bs);
    }
    if (!wrc) wrc = qs_db_exec(db, "COMMIT", e);
    if (wrc) {
        sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
        if (!e->msg[0]) qs_fail(e, "out of memory");
    } else {
        rc = 0;
        if (metrics_out && !(*metrics_out = json_loads(mj, 0, NULL))) rc = qs_fail(e, "out of memory");
    }
    free(mj);
    free(hj);
out:
    qs_analysis_free(&an);
    qs_treader_close(r);
    free(opts);
    free(data);
    return rc;
}

int qs_analyze_one(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int force, int threads,
                   int show_progress, qs_hist *vcache, json_t **metrics_out, int *cached, qs_err *e)
{
    char label[600], fl[128];
    qs_quant_label(a, NULL, fl, sizeof fl);
    snprintf(label, sizeof label, "%s  %s", qs_esc(t->name), fl);
    progress_ctx pc = {label, show_progress, -1};
    int rc = qs_analyze_one_cb(db, t, a, blocks, force, threads, progress, &pc, vcache, metrics_out, cached, e);
    if (show_progress && pc.last >= 0) fprintf(stderr, "\r\033[K");
    return rc;
}

static double jnum(json_t *o, const char *k) { return qs_json_get_num(o, k); }

int qs_cmd_analyze(qs_cli *cli, int argc, char **argv)
{
    static const struct option lo[] = {QS_QUANT_LONGOPTS, {"all", no_argument, 0, 'A'}, {"force", no_argument, 0, 'F'},
                                       {"json", no_argument, 0, 'J'}, {"csv", no_argument, 0, 'C'},
                                       {"blocks", no_argument, 0, 'B'}, {"jobs", required_argument, 0, 'j'}, {0, 0, 0, 0}};
    qs_apply base;
    memset(&base, 0, sizeof base);
    base.axis = 1;
    const char *flist = NULL;
    int all = 0, force = 0, json = 0, csv = 0, blocks = 0, jobs = 2, ch;
    unsigned long long u;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "f:j:", lo, NULL)) != -1) {
        if (ch == 'f') { flist = optarg; continue; }
        int k = qs_quant_opt("analyze", ch, optarg, &base);
        if (k < 0) return QS_EXIT_USAGE;
        if (k) continue;
        switch (ch) {
        case 'A': all = 1; break;
        case 'F': force = 1; break;
        case 'J': json = 1; break;
        case 'C': csv = 1; break;
        case 'B': blocks = 1; break;
        case 'j':
            if (qs_parse_u64(optarg, &u) || u < 1 || u > 64) return qs_cli_usage("analyze", "bad --jobs '%s'", optarg);
            jobs = (int)u;
            break;
        default: return qs_cli_usage("analyze", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (!flist) return qs_cli_usage("analyze", "give formats with -f F1,F2,... (see `qscope formats`)");
    if (json && csv) return qs_cli_usage("analyze", "--json and --csv are exclusive");
    if (!all && optind == argc) return qs_cli_usage("analyze", "give tensor names (globs allowed) or --all");
    qs_apply apps[64];
    int na = qs_quant_parse_list("analyze", flist, &base, apps, 64);
    if (na < 0) return QS_EXIT_USAGE;
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    /* tensors: every name matching any pattern, in name order, each once */
    qs_err e = {{0}};
    /* names as C strings: a name that is not valid UTF-8 cannot be a JSON string */
    char **names = NULL;
    size_t nnames = 0;
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT name FROM tensor WHERE name GLOB ? ORDER BY name", &e);
    for (int i = all ? argc : optind; st && (all ? i == argc : i < argc); i++) {
        const char *pat = all ? "*" : argv[i];
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, pat, -1, SQLITE_TRANSIENT);
        int found = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *nm = (const char *)sqlite3_column_text(st, 0);
            int dup = 0;
            for (size_t k = 0; k < nnames; k++) if (!strcmp(names[k], nm)) dup = 1;
            char **nv = dup ? names : realloc(names, (nnames + 1) * sizeof *names);
            if (nv && !dup && (nv[nnames] = strdup(nm)) != NULL) nnames++;
            if (nv) names = nv;
            found = 1;
        }
        if (!found && !all) {
            sqlite3_finalize(st);
            for (size_t k = 0; k < nnames; k++) free(names[k]);
            free(names);
            qs_db_close(db);
            return qs_cli_error(QS_EXIT_ERR, "no tensor matches '%s' (see `qscope ls`)", pat);
        }
        if (all) break;
    }
    sqlite3_finalize(st);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    int tty = isatty(STDERR_FILENO), rc = QS_EXIT_OK;
    json_t *out = json_array();
    /* TENSOR and FORMAT columns as wide as their longest entry, so the columns stay aligned */
    int nw = 36, lw = 22;
    for (size_t k = 0; k < nnames; k++)
        if (qs_text_cols(qs_esc(names[k])) > nw) nw = qs_text_cols(qs_esc(names[k]));
    for (int k = 0; k < na; k++) {
        char label[128];
        qs_quant_label(&apps[k], NULL, label, sizeof label);
        if (qs_text_cols(label) > lw) lw = qs_text_cols(label);
    }
    if (!json && !csv)
        printf("%s%-*s %-*s %6s %8s %9s %10s %9s %9s  %-14s %6s%s\n", qs_c_head(cli), nw, "TENSOR", lw, "FORMAT", "BITS", "EFFBITS",
               "SQNR dB", "MAX REL", "UNDERFL", "CLIPPED", "MAIN ERROR", "", qs_c_off(cli));
    else if (csv)
        printf("tensor,hash,format,options,bits_per_elem,eff_bits_energy,eff_bits_sqnr,sqnr_db,mse,rmse,max_abs_err,"
               "max_rel_err,mean_rel_err,mean_err,cosine,underflow_frac,clip_frac,nonfinite_frac,cached,err_underflow,err_clip,"
               "err_rounding\n");
    for (size_t ti = 0; ti < nnames; ti++) {
        qs_tensor_rec t;
        if (qs_tensor_get(db, names[ti], &t, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); break; }
        qs_hist vcache;
        memset(&vcache, 0, sizeof vcache);
        for (int k = 0; k < na && rc == QS_EXIT_OK; k++) {
            json_t *m = NULL;
            int cached = 0;
            if (qs_analyze_one(db, &t, &apps[k], blocks, force, jobs, tty && !g_interrupted, &vcache, &m, &cached, &e)) {
                if (g_interrupted) { fprintf(stderr, "qscope: interrupted; nothing of the unfinished result was stored\n"); rc = 130; }
                else rc = qs_cli_err(QS_EXIT_ERR, &e);
                break;
            }
            char *opts = qs_quant_opts_json(&apps[k]);
            if (json) {
                json_t *row = json_object(), *rest = json_pack("{s:s,s:s,s:o,s:b,s:O}", "hash", t.hash, "format",
                                                               apps[k].f->name, "options", json_loads(opts, 0, NULL),
                                                               "cached", cached, "metrics", m);
                qs_json_set_text(row, "tensor", t.name);
                json_object_update(row, rest);
                json_decref(rest);
                json_array_append_new(out, row);
            } else if (csv) {
                qs_csv_field(stdout, t.name);
                printf(",%s,%s,\"", t.hash, apps[k].f->name);
                for (const char *p = opts; *p; p++) { if (*p == '"') putchar('"'); putchar(*p); }
                qs_err_src es = qs_err_src_of(m);
                printf("\",%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%d,%.9g,%.9g,%.9g\n",
                       jnum(m, "bits_per_elem"), jnum(m, "eff_bits_energy"), jnum(m, "eff_bits_sqnr"), jnum(m, "sqnr_db"),
                       jnum(m, "mse"), jnum(m, "rmse"), jnum(m, "max_abs_err"), jnum(m, "max_rel_err"),
                       jnum(m, "mean_rel_err"), jnum(m, "mean_err"), jnum(m, "cosine"), jnum(m, "underflow_frac"),
                       jnum(m, "clip_frac"), jnum(m, "nonfinite_frac"), cached, es.under, es.clip, es.round);
            } else {
                char label[128];
                qs_quant_label(&apps[k], NULL, label, sizeof label);
                /* the main error source says why a format's numbers are -inf (values became NaN/Inf) */
                qs_err_src es = qs_err_src_of(m);
                char src[64];
                const char *en = qs_esc(t.name);
                printf("%s%*s %-*s %6.3g %8.3f %9.2f %10.3g %8.3f%% %8.4f%%  %-14s %s%6s%s\n", en, nw - qs_text_cols(en), "", lw, label,
                       jnum(m, "bits_per_elem"), jnum(m, "eff_bits_energy"), jnum(m, "sqnr_db"), jnum(m, "max_rel_err"),
                       100 * jnum(m, "underflow_frac"), 100 * jnum(m, "clip_frac"), qs_err_src_short(&es, src, sizeof src),
                       qs_c_dim(cli), cached ? "cached" : "", qs_c_off(cli));
            }
            free(opts);
            json_decref(m);
            fflush(stdout);
        }
        qs_value_cache_clear(&vcache);
        qs_tensor_rec_free(&t);
        if (rc != QS_EXIT_OK) break;
    }
    if (json && rc == QS_EXIT_OK) { char *s = json_dumps(out, JSON_INDENT(2)); puts(s); free(s); }
    json_decref(out);
    for (size_t k = 0; k < nnames; k++) free(names[k]);
    free(names);
    qs_db_close(db);
    return rc;
}
