/*
** `qscope msd`: Multi-Scale Dequant experiments (effective bits, GEMM errors against FP64, the
** element-wise M/64516 bound, exactness of the integer GEMM, the reconstructed latency / HBM model),
** stored as a result of kind "msd".
*/
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "kernel_cli.h"
#include "../../analysis/kernel_exp.h"
#include "../../analysis/kernel_model.h"
#include "../../analysis/results.h"
#include "../../store/tensor.h"
#include "../../store/json_out.h"

static void pnum(double v, int w)
{
    if (!isfinite(v)) printf(" %*s", w, v > 0 ? "inf" : "-");
    else printf(" %*.4g", w, v);
}

static double jd(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void print_msd(qs_cli *cli, json_t *d, json_t *models)
{
    size_t i;
    json_t *r;
    printf("%sEffective bits%s  (rms = -1/2 log2(sum e^2 / sum x^2); bound = log2(M / max|e|) per row absmax M)\n",
           qs_c_bold(cli), qs_c_off(cli));
    printf("%s%-18s %-9s %6s %10s %10s  %s%s\n", qs_c_head(cli), "SCHEME", "DATA", "PASSES", "RMS BITS", "BOUND BITS", "NOTE",
           qs_c_off(cli));
    json_array_foreach(json_object_get(d, "effective_bits"), i, r) {
        const char *sc = json_string_value(json_object_get(r, "scheme"));
        double b = jd(r, "bits_bound");
        if (isnan(b)) b = jd(r, "bits_block_bound");
        const char *note = json_string_value(json_object_get(r, "scale_rule"));
        if (!note && !strncmp(sc, "int4", 4)) note = "CANN's INT4-KV constants, an ablation (bound: M/(2L E^(k-1)))";
        char nb[160];
        if (!note && strcmp(sc, "int8")) {
            double x1 = jd(r, "max_err_over_x1");
            snprintf(nb, sizeof nb, "bound: max|e| per 32-block amax; max|e|/X1 = 1/%.3g; reconstructed recipe", 1 / x1);
            note = nb;
        }
        printf("%-18s %-9s %6lld", sc, json_string_value(json_object_get(r, "data")),
               (long long)json_integer_value(json_object_get(r, "passes")));
        pnum(jd(r, "bits_rms"), 10);
        pnum(b, 10);
        printf("  %s\n", note ? note : "");
    }
    printf("\n%sGEMM errors%s  (relative L2 / max |diff| against FP64 of the quantized model and of the unquantized weights)\n",
           qs_c_bold(cli), qs_c_off(cli));
    printf("%s%-18s %-42s %11s %11s %11s%s\n", qs_c_head(cli), "WEIGHTS", "METHOD", "REL-L2 (Q)", "MAX|D| (Q)", "REL-L2 (U)",
           qs_c_off(cli));
    json_array_foreach(json_object_get(d, "gemm"), i, r) {
        json_t *q = json_object_get(r, "vs_quantized"), *u = json_object_get(r, "vs_unquantized");
        printf("%-18s %-42s", json_string_value(json_object_get(r, "weights")), json_string_value(json_object_get(r, "method")));
        pnum(jd(q, "rel_l2"), 11);
        pnum(jd(q, "max_abs"), 11);
        pnum(jd(u, "rel_l2"), 11);
        printf("\n");
    }
    json_t *c = json_object_get(d, "checks");
    printf("\n%sChecks%s\n", qs_c_bold(cli), qs_c_off(cli));
    printf("  INT8 two-pass bound |x - x^| <= M/64516: %lld violations on the random rows (max err/bound %.4f), "
           "%lld on adversarial rows (max %.4f)\n",
           (long long)json_integer_value(json_object_get(c, "bound_violations_random")), jd(c, "bound_max_ratio_random"),
           (long long)json_integer_value(json_object_get(c, "bound_violations_adversarial")), jd(c, "bound_max_ratio_adversarial"));
    printf("  GEMM bound |y - y_ref| <= sigma_n sum|W| M/64516: %lld violations (max ratio %.4f)\n",
           (long long)json_integer_value(json_object_get(c, "gemm_bound_violations")), jd(c, "gemm_bound_max_ratio"));
    printf("  integer GEMM on SGEMM K-chunks equals the int32 loop: %s\n",
           json_is_true(json_object_get(c, "int_gemm_exact")) ? "yes" : "NO");
    json_t *m;
    json_array_foreach(models, i, m) {
        printf("\n%sLatency model, %s%s  (RECONSTRUCTED, spec msd-attention.md A.5; %s)\n", qs_c_bold(cli),
               json_string_value(json_object_get(m, "profile")), qs_c_off(cli), json_string_value(json_object_get(m, "note")));
        printf("%s%6s %6s %6s %14s %14s %12s %9s %9s%s\n", qs_c_head(cli), "M", "N", "K", "DEQ PIPE us", "DEQ STALL us",
               "MSD us", "x PIPE", "x STALL", qs_c_off(cli));
        size_t j;
        json_t *row;
        json_array_foreach(json_object_get(m, "rows"), j, row)
            printf("%6lld %6lld %6lld %14.3f %14.3f %12.3f %9.2f %9.2f\n", (long long)json_integer_value(json_object_get(row, "M")),
                   (long long)json_integer_value(json_object_get(row, "N")), (long long)json_integer_value(json_object_get(row, "K")),
                   jd(row, "t_dequant_pipelined_us"), jd(row, "t_dequant_stalled_us"), jd(row, "t_msd_us"),
                   jd(row, "speedup_vs_pipelined"), jd(row, "speedup_vs_stalled"));
    }
    json_t *kv = json_object_get(d, "kv_ledger");
    if (kv) {
        printf("\n%sKV-cache HBM bytes per cached element%s (RECONSTRUCTED ledger)\n", qs_c_bold(cli), qs_c_off(cli));
        json_array_foreach(kv, i, r) {
            if (json_object_get(r, "terms"))
                printf("  %-32s %4.1f B  %s\n", json_string_value(json_object_get(r, "path")), jd(r, "bytes_per_elem"),
                       json_string_value(json_object_get(r, "terms")));
            else
                printf("  reduction: %.1fx with a stacked GEMM, %.1fx with one GEMM per component (the paper's \"up to 2.5x\")\n",
                       jd(r, "stacked"), jd(r, "per_component"));
        }
    }
}


int qs_cmd_msd(qs_cli *cli, int argc, char **argv)
{
    qs_kx_msd o;
    memset(&o, 0, sizeof o);
    o.M = 16; o.K = 4096; o.N = 4096;
    o.dist = QS_GEN_GAUSSIAN;
    o.outlier_mag = 20;
    o.bits_samples = 1u << 20;
    o.mx = qs_format_find("mxfp4");
    o.mx_o1.scale_rule = QS_SCALE_RCEIL;
    o.mx_ores.scale_rule = QS_SCALE_RCEIL;
    o.mx_w.scale_rule = QS_SCALE_FLOOR;
    o.mx_shift = -1;
    int json = 0, store = 1, k = 2;
    const char *profiles = "ascend910,h100", *tensor = NULL, *r1 = "rceil", *rr = "rceil", *rw = "floor";
    unsigned long long u;
    static const struct option lo[] = {
        {"M", required_argument, 0, 'M'}, {"K", required_argument, 0, 'K'}, {"N", required_argument, 0, 'N'},
        {"dist", required_argument, 0, 'd'}, {"seed", required_argument, 0, 's'}, {"outliers", required_argument, 0, 'o'},
        {"outlier-mag", required_argument, 0, 'g'}, {"bits-samples", required_argument, 0, 'b'},
        {"mx-format", required_argument, 0, 'f'}, {"mx-rule", required_argument, 0, '1'},
        {"mx-res-rule", required_argument, 0, '2'}, {"mx-w-rule", required_argument, 0, '3'},
        {"mx-fixed-shift", required_argument, 0, 'x'}, {"model", required_argument, 0, 'm'},
        {"passes", required_argument, 0, 'p'}, {"tensor", required_argument, 0, 't'}, {"json", no_argument, 0, 'j'},
        {"no-store", no_argument, 0, 'n'}, {0, 0, 0, 0}};
    int ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'M': case 'K': case 'N': case 'b': case 'o': case 'p': case 's': case 'x':
            if (ch == 'x' && !strcmp(optarg, "own")) { o.mx_shift = -1; break; }
            if (qs_parse_u64(optarg, &u) || u > (1ull << 40)) return qs_cli_usage("msd", "bad number '%s'", optarg);
            if (ch == 'M') o.M = u; else if (ch == 'K') o.K = u; else if (ch == 'N') o.N = u;
            else if (ch == 'b') o.bits_samples = u; else if (ch == 'o') o.outliers = (int)(u > 100000 ? 100000 : u);
            else if (ch == 'p') k = (int)u; else if (ch == 's') o.seed = u;
            else o.mx_shift = (int)(u > 30 ? 30 : u);
            break;
        case 'g':
            if (qs_parse_f64(optarg, &o.outlier_mag) || !(o.outlier_mag > 0)) return qs_cli_usage("msd", "bad --outlier-mag '%s'", optarg);
            break;
        case 'd':
            if (qs_gen_from_name(optarg, &o.dist)) return qs_cli_usage("msd", "unknown distribution '%s'", optarg);
            break;
        case 'f':
            o.mx = qs_format_find(optarg);
            if (!o.mx || !o.mx->has_scale_rule) return qs_cli_usage("msd", "--mx-format needs an MX format (mxfp4, mxfp6_*, mxfp8_*), not '%s'", optarg);
            break;
        case '1': r1 = optarg; break;
        case '2': rr = optarg; break;
        case '3': rw = optarg; break;
        case 'm': profiles = optarg; break;
        case 't': tensor = optarg; break;
        case 'j': json = 1; break;
        case 'n': store = 0; break;
        default: return qs_cli_usage("msd", "unexpected argument '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return qs_cli_usage("msd", "unexpected argument '%s'", argv[optind]);
    if (k < 1 || k > 3) return qs_cli_usage("msd", "--passes must be 1..3");
    if (o.bits_samples < o.K) o.bits_samples = o.K;
    if (o.bits_samples > (1u << 24)) return qs_cli_usage("msd", "--bits-samples at most 2^24");
    {
        char *pl = strdup(profiles), *sv = NULL;
        if (!pl) return qs_cli_error(QS_EXIT_ERR, "out of memory");
        for (char *p = strtok_r(pl, ",", &sv); p; p = strtok_r(NULL, ",", &sv)) {
            qs_hw chk;
            if (strcmp(p, "none") && strcmp(p, "ascend910") && strcmp(p, "h100") && strcmp(p, "cpu") &&
                (strncmp(p, "custom:", 7) || qs_hw_profile(p, 1, &chk))) {
                int rc = qs_cli_usage("msd", "unknown hardware profile '%s' (%s, none)", p, qs_hw_names());
                free(pl);
                return rc;
            }
        }
        free(pl);
    }
    double q;
    if (qs_scale_rule_parse(r1, &o.mx_o1.scale_rule, &q)) return qs_cli_usage("msd", "unknown scale rule '%s'", r1);
    if (o.mx_o1.scale_rule == QS_SCALE_UOS) o.mx_o1.uos_qmax = q;
    if (qs_scale_rule_parse(rr, &o.mx_ores.scale_rule, &q)) return qs_cli_usage("msd", "unknown scale rule '%s'", rr);
    if (o.mx_ores.scale_rule == QS_SCALE_UOS) o.mx_ores.uos_qmax = q;
    if (qs_scale_rule_parse(rw, &o.mx_w.scale_rule, &q)) return qs_cli_usage("msd", "unknown scale rule '%s'", rw);
    if (o.mx_w.scale_rule == QS_SCALE_UOS) o.mx_w.uos_qmax = q;

    /* input spec (hashed) and options (canonical) */
    char hash[33];
    json_t *spec;
    float *xin = NULL;
    qs_db *db = NULL;
    if (tensor) {
        db = qs_cli_open_db(cli);
        if (!db) return QS_EXIT_ERR;
        uint64_t rows, cols;
        qs_err le = {{0}};
        if (qs_kx_load_tensor(db, "msd", tensor, QS_KX_MAX_K, &rows, &cols, hash, &xin, &le)) {
            qs_db_close(db);
            return qs_cli_err(QS_EXIT_ERR, &le);
        }
        o.M = rows; o.K = cols; o.x_in = xin;
        spec = json_pack("{s:o,s:s}", "tensor", qs_json_text(tensor), "hash", hash);
    } else {
        spec = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:i,s:f}", "kind", "msd-gemm", "dist", qs_gen_name(o.dist), "seed",
                         (json_int_t)o.seed, "M", (json_int_t)o.M, "K", (json_int_t)o.K, "N", (json_int_t)o.N, "outliers",
                         o.outliers, "outlier_mag", o.outlier_mag);
        char *st = qs_kx_canon(spec);
        qs_kx_hash_text(st ? st : "", hash);
        free(st);
    }
    json_t *opts = json_pack("{s:o,s:s,s:s,s:s,s:s,s:i,s:I,s:i,s:s}", "input", spec, "mx_format", o.mx->name, "mx_rule", r1,
                             "mx_res_rule", rr, "mx_w_rule", rw, "mx_fixed_shift", o.mx_shift, "bits_samples",
                             (json_int_t)o.bits_samples, "passes_model", k, "weights", "gaussian std 0.02, seed+1");
    qs_err e = {{0}};
    if (!json) fprintf(stderr, "qscope: msd: M=%zu K=%zu N=%zu, %s activations (BF16)%s ...\n", o.M, o.K, o.N,
                       tensor ? tensor : qs_gen_name(o.dist), o.outliers ? " with outlier channels" : "");
    json_t *d = qs_kx_msd_run(&o, opts, &e);
    free(xin);
    if (!d) { json_decref(opts); qs_db_close(db); return qs_cli_err(QS_EXIT_ERR, &e); }
    /* latency model for the requested profiles */
    json_t *models = json_array();
    char *pl = strdup(profiles), *sv = NULL;
    for (char *p = strtok_r(pl, ",", &sv); p; p = strtok_r(NULL, ",", &sv)) {
        if (!strcmp(p, "none")) continue;
        qs_hw hw;
        if (qs_hw_profile(p, 2, &hw)) continue;   /* names were validated before the run */
        json_array_append_new(models, json_pack("{s:s,s:s,s:f,s:f,s:f,s:f,s:o}", "profile", hw.name, "note", hw.note, "p_bf16",
                                                 hw.p_bf16, "p_low", hw.p_low, "r_vec", hw.r_vec, "bw", hw.bw, "rows",
                                                 qs_model_table(&hw, k, 1.0)));
    }
    free(pl);
    json_object_set_new(d, "model", models);
    json_object_set_new(d, "kv_ledger", qs_model_kv_ledger(k));
    int rc = QS_EXIT_OK;
    if (store) {
        if (!db) db = qs_cli_open_db(cli);
        int64_t id;
        if (!db || qs_kx_store(db, hash, "msd", "int8", opts, d, &id, &e)) rc = db ? qs_cli_err(QS_EXIT_ERR, &e) : QS_EXIT_ERR;
    }
    if (json) {
        char *s = json_dumps(d, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        puts(s);
        free(s);
    } else {
        print_msd(cli, d, models);
        if (store && rc == QS_EXIT_OK) printf("\nstored as result kind msd (input %s); `qscope plot msd -o FILE.png`\n", hash);
    }
    json_decref(d);
    json_decref(opts);
    qs_db_close(db);
    return rc;
}
