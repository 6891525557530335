/* `qscope resq`: Rollout-ResQ variants on LLM-like activations, stored as a result of kind "resq". */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "kernel_cli.h"
#include "../../analysis/kernel_exp.h"
#include "../../store/json_out.h"

static double jd(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

int qs_cmd_resq(qs_cli *cli, int argc, char **argv)
{
    qs_kx_resq o;
    memset(&o, 0, sizeof o);
    o.m = 256; o.d = 2048; o.n = 1024;
    o.outliers = -1;
    o.bh = 32; o.bw = 64;
    o.formats = "hif4,mxfp4,nvfp4";
    int json = 0, store = 1;
    const char *tensor = NULL;
    static const struct option lo[] = {
        {"tensor", required_argument, 0, 't'},
        {"m", required_argument, 0, 'm'}, {"d", required_argument, 0, 'd'}, {"n", required_argument, 0, 'n'},
        {"formats", required_argument, 0, 'f'}, {"outliers", required_argument, 0, 'o'},
        {"outlier-range", required_argument, 0, 'r'}, {"block", required_argument, 0, 'b'}, {"seed", required_argument, 0, 's'},
        {"json", no_argument, 0, 'j'}, {"no-store", no_argument, 0, 'N'}, {0, 0, 0, 0}};
    int ch;
    unsigned long long u;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "f:", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': case 'd': case 'n': case 'o': case 's':
            if (qs_parse_u64(optarg, &u) || (ch != 's' && (u < (ch == 'o' ? 0u : 1u) || u > (1u << 20))))
                return qs_cli_usage("resq", "bad number '%s'", optarg);
            if (ch == 'm') o.m = u; else if (ch == 'd') o.d = u; else if (ch == 'n') o.n = u;
            else if (ch == 'o') o.outliers = (int)u; else o.seed = u;
            break;
        case 'f': {
            char *cp = strdup(optarg), *sv = NULL;
            for (char *t = strtok_r(cp, ",", &sv); t; t = strtok_r(NULL, ",", &sv))
                if (!qs_format_find(t)) {
                    int rc = qs_cli_usage("resq", "unknown format '%s' (see `qscope formats`)", t);
                    free(cp);
                    return rc;
                }
            free(cp);
            o.formats = optarg;
            break;
        }
        case 'r': {
            char *end;
            o.outlier_min = strtod(optarg, &end);
            if (*end != ',' || !(o.outlier_min > 0)) return qs_cli_usage("resq", "bad --outlier-range '%s' (LO,HI)", optarg);
            o.outlier_max = strtod(end + 1, &end);
            if (*end || !(o.outlier_max >= o.outlier_min)) return qs_cli_usage("resq", "bad --outlier-range '%s' (LO,HI)", optarg);
            break;
        }
        case 'b': {
            char *end;
            unsigned long r = strtoul(optarg, &end, 10), c = 0;
            if (*end == 'x') c = strtoul(end + 1, &end, 10);
            if (*end || !r || !c || r > 65536 || c > 65536) return qs_cli_usage("resq", "bad --block '%s' (RxC)", optarg);
            o.bh = r; o.bw = c;
            break;
        }
        case 't': tensor = optarg; break;
        case 'j': json = 1; break;
        case 'N': store = 0; break;
        default: return qs_cli_usage("resq", "unexpected argument '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return qs_cli_usage("resq", "unexpected argument '%s'", argv[optind]);
    json_t *spec;
    char hash[33];
    float *xin = NULL;
    if (tensor) {   /* stored activations: tokens x channels; keyed by the tensor's content hash */
        qs_db *db = qs_cli_open_db(cli);
        if (!db) return QS_EXIT_ERR;
        uint64_t rows, cols;
        qs_err le = {{0}};
        int rc = qs_kx_load_tensor(db, "resq", tensor, 1u << 20, &rows, &cols, hash, &xin, &le);
        qs_db_close(db);
        if (rc) return qs_cli_err(QS_EXIT_ERR, &le);
        o.m = rows; o.d = cols; o.x_in = xin;
        spec = json_pack("{s:o,s:s,s:I,s:I}", "tensor", qs_json_text(tensor), "hash", hash, "n", (json_int_t)o.n, "seed", (json_int_t)o.seed);
    } else {
        spec = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:i,s:f,s:f}", "kind", "resq", "dist", "llm_act", "seed",
                         (json_int_t)o.seed, "m", (json_int_t)o.m, "d", (json_int_t)o.d, "n", (json_int_t)o.n, "outliers",
                         o.outliers, "outlier_min", o.outlier_min, "outlier_max", o.outlier_max);
        char *st = qs_kx_canon(spec);
        qs_kx_hash_text(st ? st : "", hash);
        free(st);
    }
    json_t *opts = json_pack("{s:o,s:s,s:I,s:I}", "input", spec, "formats", o.formats, "block_rows", (json_int_t)o.bh,
                             "block_cols", (json_int_t)o.bw);
    qs_err e = {{0}};
    json_t *d = qs_kx_resq_run(&o, opts, &e);
    free(xin);
    if (!d) { json_decref(opts); return qs_cli_err(QS_EXIT_ERR, &e); }
    int rc = QS_EXIT_OK;
    if (store) {
        qs_db *db = qs_cli_open_db(cli);
        int64_t id;
        if (!db) rc = QS_EXIT_ERR;
        else if (qs_kx_store(db, hash, "resq", o.formats, opts, d, &id, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
        qs_db_close(db);
    }
    if (json) {
        char *s = json_dumps(d, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        puts(s);
        free(s);
    } else {
        printf("Rollout-ResQ, m=%zu d=%zu n=%zu, %s (reconstructed method, formats-hifloat.md 4)\n", o.m, o.d, o.n,
               tensor ? tensor : "LLM-like activations");
        printf("%s%-8s %-7s %12s %12s %12s %10s %10s %10s %9s%s\n", qs_c_head(cli), "FORMAT", "S", "REL-L2", "COSINE", "ACT REL-L2", "UNDERFLOW",
               "RECOVERED", "RES.KEPT", "DENSITY", qs_c_off(cli));
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(d, "rows"), i, r) {
            json_t *c = json_object_get(r, "vs_fp32"), *cw = json_object_get(r, "vs_fp32_act_quant_w");
            printf("%-8s %-7s %12.5g %12.8f %12.5g %9.4f%% %9.2f%% %9.2f%% %8.2f%%\n", json_string_value(json_object_get(r, "format")),
                   json_string_value(json_object_get(r, "sparsity")), jd(c, "rel_l2"), jd(c, "cosine"), jd(cw, "rel_l2"), 100 * jd(r, "underflow"),
                   100 * jd(r, "recovered"), 100 * jd(r, "residual_energy_kept"), 100 * jd(r, "density"));
        }
        printf("REL-L2: against the FP32 layer X W^T; ACT REL-L2: against X Q(W)^T (the activation error ResQ corrects)\n");
        printf("UNDERFLOW: non-zero activations that Q maps to 0; RECOVERED: of those, the ones the correction term restores\n");
        if (store && rc == QS_EXIT_OK) printf("stored as result kind resq (input %s)\n", hash);
    }
    json_decref(d);
    json_decref(opts);
    return rc;
}
