/*
** `qscope analyze`: metrics, histograms and (optionally) per-block statistics of tensors under
** formats, stored in the database and reused.
**
** Each (tensor, format, options) result is cached by tensor hash, canonical options JSON and tool
** version; --force recomputes.  Each result is written in its own transaction, and Ctrl-C cancels
** the computation in progress before anything of it is stored.  The sweep itself (and its sharding
** over MPI ranks) is qs_analyze_sweep (analyze_run.h); this file parses and prints.
*/
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "analyze_run.h"
#include "cli.h"
#include "par.h"
#include "quant_opts.h"
#include "../../analysis/err_source.h"
#include "../../kernels/cast_scale.h"
#include "../../store/json_out.h"
#include "../../store/tensor_names.h"

static volatile sig_atomic_t g_interrupted;
static void on_sigint(int sig) { (void)sig; g_interrupted = 1; }

static double jnum(json_t *o, const char *k) { return qs_json_get_num(o, k); }

typedef struct {
    qs_cli *cli;
    int json, csv, nw, lw;
    const qs_apply *apps;
    json_t *out;
    int over_n[64];          /* per format: tensors whose unscaled cast overflowed (NaN/Inf or saturated) */
    double over_max[64];     /* the largest such fraction of values */
} row_ctx;

/* An element cast that takes a scale but runs raw (analyze's default, scale=none) and overflowed on
** this tensor: values beyond the format's range became NaN/Inf (or saturated under --sat). */
static void note_overflow(row_ctx *c, int k, json_t *m)
{
    const qs_apply *a = &c->apps[k];
    double f = jnum(m, "nonfinite_frac") + (a->o.sat ? jnum(m, "clip_frac") : 0);
    if (k >= 64 || a->cscale != QS_CSCALE_NONE || !(qs_cast_scale_target(a->f) > 0) || !(f > 0)) return;
    c->over_n[k]++;
    if (f > c->over_max[k]) c->over_max[k] = f;
}

/* One line per such format, after the table (issue 28: llm eval scales per row by default, analyze
** does not, and a user comparing them should not have to guess why FP8 reads as NaN here). */
static void print_overflow_notes(const row_ctx *c, int na)
{
    for (int k = 0; k < na && k < 64; k++) {
        if (!c->over_n[k]) continue;
        char label[128];
        qs_quant_label(&c->apps[k], NULL, label, sizeof label);
        fprintf(stderr, "qscope: note: %s overflowed on %d tensor%s (up to %.3g%% of the values %s): analyze casts unscaled "
                "by default (scale=none, the raw format; llm eval scales per row); -f %s:scale=row (or --scale row|tensor) "
                "maps each row's absmax onto the format's scale target first\n", label, c->over_n[k], c->over_n[k] == 1 ? "" : "s",
                100 * c->over_max[k], c->apps[k].o.sat ? "saturated or became NaN/Inf" : "became NaN/Inf", label);
    }
}

/* One row of the table (or of --json / --csv), in tensor then format order. */
static int print_row(void *ctx, const qs_tensor_rec *t, int k, json_t *m, int cached, qs_err *e)
{
    row_ctx *c = ctx;
    const qs_apply *a = &c->apps[k];
    int nw = c->nw, lw = c->lw;
    note_overflow(c, k, m);
    char *opts = qs_quant_opts_json(a);
    if (!opts) return qs_fail(e, "out of memory");
    if (c->json) {
        json_t *row = json_object(), *rest = json_pack("{s:s,s:s,s:o,s:b,s:O}", "hash", t->hash, "format", a->f->name,
                                                       "options", json_loads(opts, 0, NULL), "cached", cached, "metrics", m);
        qs_json_set_text(row, "tensor", t->name);
        json_object_update(row, rest);
        json_decref(rest);
        json_array_append_new(c->out, row);
    } else if (c->csv) {
        qs_csv_field(stdout, t->name);
        printf(",%s,%s,\"", t->hash, a->f->name);
        for (const char *p = opts; *p; p++) { if (*p == '"') putchar('"'); putchar(*p); }
        qs_err_src es = qs_err_src_of(m);
        printf("\",%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%d,%.9g,%.9g,%.9g\n",
               jnum(m, "bits_per_elem"), jnum(m, "eff_bits_energy"), jnum(m, "eff_bits_sqnr"), jnum(m, "sqnr_db"),
               jnum(m, "mse"), jnum(m, "rmse"), jnum(m, "max_abs_err"), jnum(m, "max_rel_err"), jnum(m, "mean_rel_err"),
               jnum(m, "mean_err"), jnum(m, "cosine"), jnum(m, "underflow_frac"), jnum(m, "clip_frac"),
               jnum(m, "nonfinite_frac"), cached, es.under, es.clip, es.round);
    } else {
        char label[128];
        qs_quant_label(a, NULL, label, sizeof label);
        /* the main error source says why a format's numbers are -inf (values became NaN/Inf) */
        qs_err_src es = qs_err_src_of(m);
        char src[64];
        const char *en = qs_esc(t->name);
        printf("%s%*s %-*s %6.3g %8.3f %9.2f %10.3g %8.3f%% %8.4f%%  %-14s %s%6s%s\n", en, nw - qs_text_cols(en), "", lw, label,
               jnum(m, "bits_per_elem"), jnum(m, "eff_bits_energy"), jnum(m, "sqnr_db"), jnum(m, "max_rel_err"),
               100 * jnum(m, "underflow_frac"), 100 * jnum(m, "clip_frac"), qs_err_src_short(&es, src, sizeof src),
               qs_c_dim(c->cli), cached ? "cached" : "", qs_c_off(c->cli));
    }
    free(opts);
    fflush(stdout);
    return 0;
}

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
    if (!all && optind == argc) return qs_cli_usage("analyze", "give tensor names (or globs) or --all");
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
    for (int i = all ? argc : optind; all ? i == argc : i < argc; i++) {
        const char *pat = all ? "*" : argv[i];
        int found = 0;
        if ((all ? qs_tensor_names_glob : qs_tensor_names_match)(db, pat, &names, &nnames, &found, &e)) {
            qs_tensor_names_free(names, nnames);
            qs_db_close(db);
            return qs_cli_err(QS_EXIT_ERR, &e);
        }
        if (!found && !all) {
            qs_tensor_names_free(names, nnames);
            qs_db_close(db);
            return qs_cli_error(QS_EXIT_ERR, "no tensor matches '%s' (see `qscope ls`)", pat);
        }
        if (all) break;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    int tty = qs_par_isatty(STDERR_FILENO), rc = QS_EXIT_OK;
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
    row_ctx rc_ = {cli, json, csv, nw, lw, apps, out, {0}, {0}};
    qs_sweep sw = {db, names, nnames, apps, na, blocks, force, jobs, tty, &g_interrupted, print_row, &rc_};
    if (qs_analyze_sweep(&sw, &e)) {
        if (g_interrupted) { fprintf(stderr, "qscope: interrupted; nothing of the unfinished result was stored\n"); rc = 130; }
        else rc = qs_cli_err(QS_EXIT_ERR, &e);
    }
    if (json && rc == QS_EXIT_OK) { char *s = json_dumps(out, JSON_INDENT(2)); puts(s); free(s); }
    print_overflow_notes(&rc_, na);
    json_decref(out);
    qs_tensor_names_free(names, nnames);
    qs_db_close(db);
    return rc;
}
