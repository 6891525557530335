/*
** `qscope ais RUN`: per-step mismatch diagnostics, AIS-R and corrections of a stored RL run.
*/
#include "cmd_rl.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../render/plot_render.h"
#include "../../analysis/ais_store.h"
#include "../../analysis/plot.h"
#include "../../store/io_err.h"
#include "../../store/json_out.h"

static int parse_band(const char *s, double *lo, double *hi)
{
    char *end;
    *lo = strtod(s, &end);
    if (*end != ',' && *end != '_') return -1;
    if (qs_parse_f64(end + 1, hi)) return -1;
    return isfinite(*lo) && isfinite(*hi) && *lo >= 0 && *lo <= *hi ? 0 : -1;
}

int qs_rl_ais_opt(const char *cmd, int ch, const char *arg, qs_ais_opts *o, int *band_set)
{
    double x;
    switch (ch) {
    case O_C:
        if (qs_parse_f64(arg, &x) || !(x > 1) || x > 1e6) return qs_cli_usage(cmd, "--C must be > 1"), -1;
        o->C = x;
        if (!(*band_set & 1)) { o->mis_lo = 1 / x; o->mis_hi = x; }
        if (!(*band_set & 2)) { o->seq_lo = 1 / x; o->seq_hi = x; }
        return 1;
    case O_TAU: if (qs_parse_f64(arg, &x) || !(x > 0)) return qs_cli_usage(cmd, "--tau-s must be > 0"), -1; o->tau_s = x; return 1;
    case O_KAPPA: if (qs_parse_f64(arg, &x) || x < 0 || x > 1) return qs_cli_usage(cmd, "--kappa must be in [0, 1]"), -1; o->kappa = x; return 1;
    case O_BETA: if (qs_parse_f64(arg, &x) || x < 0 || x >= 1) return qs_cli_usage(cmd, "--beta must be in [0, 1)"), -1; o->beta = x; return 1;
    case O_LMIN: if (qs_parse_f64(arg, &x) || x < 0 || x > 1) return qs_cli_usage(cmd, "--lambda-min must be in [0, 1]"), -1; o->lambda_min = x; return 1;
    case O_LMAX: if (qs_parse_f64(arg, &x) || x < 0 || x > 1) return qs_cli_usage(cmd, "--lambda-max must be in [0, 1]"), -1; o->lambda_max = x; return 1;
    case O_L0:
        if (!strcmp(arg, "raw")) o->lambda0_zero = 0;
        else if (!strcmp(arg, "zero")) o->lambda0_zero = 1;
        else return qs_cli_usage(cmd, "--lambda0 is raw or zero"), -1;
        return 1;
    case O_LFIX: if (qs_parse_f64(arg, &x) || x < 0 || x > 1) return qs_cli_usage(cmd, "--lambda-fixed must be in [0, 1]"), -1; o->lambda_fixed = x; return 1;
    case O_AMP:
        if (!strcmp(arg, "seq") || !strcmp(arg, "sequence")) o->vamp_grad = 0;
        else if (!strcmp(arg, "grad") || !strcmp(arg, "gradient")) o->vamp_grad = 1;
        else return qs_cli_usage(cmd, "--amplification is seq or grad"), -1;
        return 1;
    case O_AISIS:
        if (!strcmp(arg, "token")) o->ais_seq = 0;
        else if (!strcmp(arg, "seq") || !strcmp(arg, "sequence")) o->ais_seq = 1;
        else return qs_cli_usage(cmd, "--ais-is is token or seq"), -1;
        return 1;
    case O_VETO: if (qs_parse_f64(arg, &x) || x < 0 || x >= 1) return qs_cli_usage(cmd, "--veto must be in [0, 1)"), -1; o->w_veto = x; return 1;
    case O_MIS: if (parse_band(arg, &o->mis_lo, &o->mis_hi)) return qs_cli_usage(cmd, "--mis-band is LO,HI with 0 <= LO <= HI"), -1; *band_set |= 1; return 1;
    case O_SEQB: if (parse_band(arg, &o->seq_lo, &o->seq_hi)) return qs_cli_usage(cmd, "--seq-band is LO,HI with 0 <= LO <= HI"), -1; *band_set |= 2; return 1;
    case O_GEO: if (parse_band(arg, &o->geo_lo, &o->geo_hi)) return qs_cli_usage(cmd, "--geo-band is LO,HI with 0 <= LO <= HI"), -1; return 1;
    case O_CLAMP: if (qs_parse_f64(arg, &x) || !(x > 0) || x > 700) return qs_cli_usage(cmd, "--clamp must be in (0, 700]"), -1; o->clamp = x; return 1;
    default: return 0;
    }
}

typedef struct wout { FILE *f; } wout;

static int print_weight(void *ctx, int64_t step, int64_t seq, int64_t pos, int mask, double delta, const double *w, qs_err *e)
{
    wout *W = ctx;
    fprintf(W->f, "%lld,%lld,%lld,%d,%.17g", (long long)step, (long long)seq, (long long)pos, mask, delta);
    for (int m = 0; m < QS_CORR_COUNT; m++) fprintf(W->f, ",%.17g", w[m]);
    fputc('\n', W->f);
    return ferror(W->f) ? qs_write_fail(e, "<stdout>", errno) : 0;
}

/* Draw one trajectory set of the result (the same JSON that is stored) to a PNG or the terminal. */
static int plot_set(qs_cli *cli, const qs_ais_result *r, const qs_ais_opts *o, const char *set, const char *out,
                    int width, int height)
{
    char *d = qs_ais_trajectory_json(r, set);
    if (!d) return qs_cli_error(QS_EXIT_ERR, "no '%s' series for run '%s' (sets: %s)", set, r->run, qs_ais_trajectory_sets);
    json_t *j = json_loads(d, 0, NULL);
    free(d);
    json_t *ser = json_object_get(j, "series");
    size_t ns = json_array_size(ser);
    qs_line_data *ld = calloc(ns ? ns : 1, sizeof *ld);
    double *buf = malloc((2 * ns * r->nrows + 1) * sizeof *buf);
    int rc = QS_EXIT_ERR;
    qs_figure *fig = NULL;
    if (!j || !ld || !buf) { qs_cli_error(QS_EXIT_ERR, "out of memory"); goto out; }
    for (size_t i = 0; i < ns; i++) {
        json_t *sj = json_array_get(ser, i), *xs = json_object_get(sj, "x"), *ys = json_object_get(sj, "y");
        double *x = buf + 2 * i * r->nrows, *y = x + r->nrows;
        for (size_t k = 0; k < r->nrows; k++) {
            json_t *yv = json_array_get(ys, k);
            x[k] = json_number_value(json_array_get(xs, k));
            y[k] = json_is_number(yv) ? json_number_value(yv) : NAN;
        }
        ld[i] = (qs_line_data){json_string_value(json_object_get(sj, "name")), r->nrows, x, y};
    }
    fig = qs_plot_trajectory(json_string_value(json_object_get(j, "title")), json_string_value(json_object_get(j, "ylabel")), ld, ns);
    if (!fig) { qs_cli_error(QS_EXIT_ERR, "out of memory"); goto out; }
    qs_err e = {{0}};
    if (!strcmp(out, "-")) {
        qs_term_opts to = {0};
        to.color = cli->color;
        to.cols = width ? width : 100;
        to.rows = height ? height : 30;
        rc = qs_plot_term(fig, &to, stdout, &e) ? qs_cli_err(QS_EXIT_ERR, &e) : QS_EXIT_OK;
    } else {
        if (qs_plot_font_ok(&e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
        /* provenance: the command line, database, run hash, rollout format, AIS options */
        char cmd[2048] = "", dbabs[PATH_MAX], hashes[400];
        size_t L = 0;
        for (int i = 0; i < cli->argc && L + 2 < sizeof cmd; i++)
            L += (size_t)snprintf(cmd + L, sizeof cmd - L, "%s%s", i ? " " : "", cli->argv[i]);
        snprintf(hashes, sizeof hashes, "%s=%s", r->run, r->hash);
        char *oj = qs_ais_opts_json(o);
        qs_provenance pv = {cmd, realpath(cli->db_path, dbabs) ? dbabs : cli->db_path, hashes, r->format, oj};
        qs_png_opts po = {width, height, 0};
        int prc = qs_plot_png(fig, &po, &pv, out, &e);
        qs_plot_cairo_release();
        free(oj);
        if (prc) rc = qs_cli_err(QS_EXIT_ERR, &e);
        else { fprintf(stderr, "qscope: wrote %s\n", qs_esc(out)); rc = QS_EXIT_OK; }
    }
out:
    if (fig) qs_fig_free(fig);
    free(ld);
    free(buf);
    json_decref(j);
    return rc;
}

static void cell(double x, const char *fmt)
{
    if (isnan(x)) printf(" %9s", "-");
    else printf(fmt, x);
}

int qs_cmd_ais(qs_cli *cli, int argc, char **argv)
{
    enum { O_JSON = 0x2100, O_CSV, O_W, O_STEP, O_NOSTORE, O_PLOT, O_WIDTH, O_HEIGHT };
    static const struct option lo[] = {AIS_LONGOPTS, {"method", required_argument, 0, 'm'}, {"json", no_argument, 0, O_JSON},
                                       {"csv", no_argument, 0, O_CSV}, {"weights", no_argument, 0, O_W},
                                       {"step", required_argument, 0, O_STEP}, {"no-store", no_argument, 0, O_NOSTORE},
                                       {"plot", required_argument, 0, O_PLOT}, {"width", required_argument, 0, O_WIDTH},
                                       {"height", required_argument, 0, O_HEIGHT}, {0, 0, 0, 0}};
    qs_ais_opts o;
    qs_ais_opts_default(&o);
    qs_ais_method meth = QS_CORR_AIS;
    int json = 0, csv = 0, weights = 0, nostore = 0, band = 0, ch;
    long long only_step = -1;
    const char *plot = NULL, *out = NULL;
    int width = 0, height = 0;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "m:o:", lo, NULL)) != -1) {
        int k = qs_rl_ais_opt("ais", ch, optarg, &o, &band);
        if (k < 0) return QS_EXIT_USAGE;
        if (k) continue;
        switch (ch) {
        case 'm':
            if (qs_ais_method_parse(optarg, &meth))
                return qs_cli_usage("ais", "unknown method '%s' (none, tis, seq_tis, mis, seq_mis, geo, ais)", optarg);
            break;
        case O_JSON: json = 1; break;
        case O_CSV: csv = 1; break;
        case O_W: weights = 1; break;
        case O_STEP: {
            unsigned long long u;
            if (qs_parse_u64(optarg, &u) || u > (1ull << 62)) return qs_cli_usage("ais", "bad --step '%s'", optarg);
            only_step = (long long)u;
            break;
        }
        case O_NOSTORE: nostore = 1; break;
        case O_PLOT: plot = optarg; break;
        case 'o': out = optarg; break;
        case O_WIDTH:
        case O_HEIGHT: {
            unsigned long long u;
            if (qs_parse_u64(optarg, &u) || u < 10 || u > 20000) return qs_cli_usage("ais", "bad size '%s'", optarg);
            if (ch == O_WIDTH) width = (int)u; else height = (int)u;
            break;
        }
        default: return qs_cli_usage("ais", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (json + csv + weights + (plot != NULL) > 1) return qs_cli_usage("ais", "--json, --csv, --weights and --plot are exclusive");
    if ((plot != NULL) != (out != NULL)) return qs_cli_usage("ais", "--plot SET goes with -o FILE.png or -o - (terminal)");
    if (only_step >= 0 && !weights) return qs_cli_usage("ais", "--step goes with --weights");
    if (o.lambda_min > o.lambda_max) return qs_cli_usage("ais", "--lambda-min is above --lambda-max");
    if (optind != argc - 1) return qs_cli_usage("ais", "give one RUN (see `qscope runs`)");
    const char *run = argv[optind];
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    qs_err e = {{0}};
    qs_ais_result r;
    if (qs_ais_run(db, run, &o, &r, &e)) { qs_db_close(db); return qs_cli_err(QS_EXIT_ERR, &e); }
    int rc = QS_EXIT_OK;
    if (!nostore && qs_ais_store(db, &r, &o, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
    if (rc == QS_EXIT_OK && plot) {
        rc = plot_set(cli, &r, &o, plot, out, width, height);
    } else if (rc == QS_EXIT_OK && weights) {
        printf("step,seq,pos,mask,delta");
        for (int m = 0; m < QS_CORR_COUNT; m++) printf(",w_%s", qs_ais_method_name((qs_ais_method)m));
        printf("\n");
        wout W = {stdout};
        if (qs_ais_run_weights(db, &r, &o, only_step, print_weight, &W, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
    } else if (rc == QS_EXIT_OK && json) {
        char *oj = qs_ais_opts_json(&o);
        json_t *j = json_pack("{s:s,s:I,s:s,s:s,s:o}", "token_hash", r.hash, "tokens", (json_int_t)r.tokens, "method", qs_ais_method_name(meth), "reconstruction",
                              QS_AIS_RECONSTRUCTION, "options", oj ? json_loads(oj, 0, NULL) : json_null());
        free(oj);
        qs_json_set_text(j, "run", r.run);
        qs_json_set_text(j, "rollout_format", r.format);
        json_t *steps = json_array();
        for (size_t i = 0; i < r.nrows; i++) {
            json_t *s = json_object();
            for (int k = 0; k < QS_AIS_NFIELDS; k++) {
                double x = r.rows[i].v[k];
                if (k <= QS_AIS_F_n_masked) json_object_set_new(s, qs_ais_field_names[k], json_integer((json_int_t)x));
                else qs_json_set_num(s, qs_ais_field_names[k], x);
            }
            json_array_append_new(steps, s);
        }
        json_object_set_new(j, "steps", steps);
        char *s = json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
        if (s) puts(s);
        free(s);
        json_decref(j);
    } else if (rc == QS_EXIT_OK && csv) {
        fprintf(stderr, "qscope: ais_* columns are AIS-R, the project's reconstruction (exact AIS formulas unpublished)\n");
        for (int k = 0; k < QS_AIS_NFIELDS; k++) printf("%s%s", k ? "," : "", qs_ais_field_names[k]);
        printf("\n");
        for (size_t i = 0; i < r.nrows; i++) {
            for (int k = 0; k < QS_AIS_NFIELDS; k++) {
                double x = r.rows[i].v[k];
                if (k) putchar(',');
                if (k <= QS_AIS_F_n_masked) printf("%.0f", x);
                else if (isfinite(x)) printf("%.17g", x);
            }
            printf("\n");
        }
    } else if (rc == QS_EXIT_OK) {
        printf("%s%s%s: %llu tokens, %zu steps, rollout format %s, token hash %s\n", qs_c_bold(cli), qs_esc(r.run), qs_c_off(cli),
               (unsigned long long)r.tokens, r.nrows, qs_esc(r.format), r.hash);
        printf("%sR S Vamp lambda: AIS-R, the project's reconstruction of AIS (exact formulas unpublished); C=%g tau_s=%g "
               "kappa=%g beta=%g%s\n", qs_c_dim(cli), o.C, o.tau_s, o.kappa, o.beta, qs_c_off(cli));
        const char *mn = qs_ais_method_name(meth);
        printf("%s%6s %8s %9s %9s %9s %9s %9s %9s %9s %9s %9s | %-7s %9s %9s %9s %9s%s\n", qs_c_head(cli), "STEP", "TOKENS",
               "KL_K3", "MEAN|D|", "ESS_TOK", "ESS_SEQ", "CHI2_TOK", "R", "S", "VAMP", "LAMBDA", mn, "W_MEAN", "W_MIN", "W_MAX",
               "ZEROED", qs_c_off(cli));
        for (size_t i = 0; i < r.nrows; i++) {
            const double *v = r.rows[i].v, *f = &v[QS_AIS_W0 + QS_AIS_WN * meth];
            printf("%6.0f %8.0f", v[QS_AIS_F_step], v[QS_AIS_F_n_tok]);
            cell(v[QS_AIS_F_kl_k3], " %9.3g");
            cell(v[QS_AIS_F_mean_abs_dlogp], " %9.3g");
            cell(v[QS_AIS_F_ess_tok], " %9.5f");
            cell(v[QS_AIS_F_ess_seq], " %9.5f");
            cell(v[QS_AIS_F_chi2_tok], " %9.3g");
            cell(v[QS_AIS_F_ais_R], " %9.5f");
            cell(v[QS_AIS_F_ais_S], " %9.4f");
            cell(v[QS_AIS_F_ais_vamp], " %9.4f");
            cell(v[QS_AIS_F_ais_lambda], " %9.4f");
            printf(" | %-7s", "");
            cell(f[0], " %9.4f");
            cell(f[2], " %9.4g");
            cell(f[3], " %9.4g");
            cell(f[4], " %9.4f");
            printf("\n");
        }
        if (!nostore) printf("%sstored as result kind rl_ais and trajectories (qscope plot trajectory -o -)%s\n", qs_c_dim(cli), qs_c_off(cli));
    }
    qs_ais_result_free(&r);
    qs_db_close(db);
    return rc;
}
