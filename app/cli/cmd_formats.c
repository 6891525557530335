/*
** `qscope formats` (the registry as a table) and `qscope explain` (one value, down to its bits).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "quant_opts.h"
#include "../../kernels/minifloat.h"

static double binades(const qs_format *f)
{
    return f->min_subnormal > 0 && f->max_finite > 0 ? log2(f->max_finite / f->min_subnormal) : 0;
}

int qs_cmd_formats(qs_cli *cli, int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else return qs_cli_usage("formats", "unexpected argument '%s'", argv[i]);
    }
    json_t *arr = json_array();
    if (!json)
        printf("%s%-12s %-8s %6s %6s %12s %12s %12s %7s %-4s %-4s %-5s %s%s\n", qs_c_head(cli), "FORMAT", "FAMILY", "BITS",
               "BLOCK", "MIN SUBNORM", "MIN NORMAL", "MAX FINITE", "BINADES", "INF", "NAN", "ROUND", "DESCRIPTION", qs_c_off(cli));
    for (size_t i = 0, n = qs_format_count(); i < n; i++) {
        const qs_format *f = qs_format_at(i);
        qs_qopts o = {0};
        double bpe = qs_format_bits_per_elem(f, &o);
        if (json) {
            json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:f,s:i,s:i,s:f,s:f,s:f,s:f,s:b,s:b,s:s,s:b}", "name", f->name,
                                                 "family", qs_family_name(f->family), "summary", f->summary, "bits_per_element", bpe,
                                                 "element_bits", f->elem_bits, "block", f->block, "min_subnormal",
                                                 f->min_subnormal, "min_normal", f->min_normal, "max_finite", f->max_finite,
                                                 "binades", binades(f), "has_inf", f->has_inf, "has_nan", f->has_nan,
                                                 "default_round", qs_round_name(f->default_round), "block_scale_rule",
                                                 f->has_scale_rule));
            continue;
        }
        char blk[16], a[24], b[24], c[24];
        if (f->block == 0) snprintf(blk, sizeof blk, "tensor");
        else snprintf(blk, sizeof blk, "%d", f->block);
        qs_fmt_num(f->min_subnormal, 5, a, sizeof a);
        qs_fmt_num(f->min_normal, 5, b, sizeof b);
        qs_fmt_num(f->max_finite, 6, c, sizeof c);
        printf("%-12s %-8s %6.3g %6s %12s %12s %12s %7.1f %-4s %-4s %-5s %s\n", f->name, qs_family_name(f->family), bpe, blk, a, b, c,
               binades(f), f->has_inf ? "yes" : "no", f->has_nan ? "yes" : "no", qs_round_name(f->default_round), f->summary);
    }
    if (json) { char *s = json_dumps(arr, JSON_INDENT(2)); puts(s); free(s); }
    json_decref(arr);
    return QS_EXIT_OK;
}

/* Neighbouring grid values of q (element casts): by code table scan, or by stepping the code. */
static void neighbours(const qs_format *f, float q, uint32_t code, double *below, double *above)
{
    *below = -INFINITY;
    *above = INFINITY;
    if (isnan(q)) { *below = *above = NAN; return; }
    if (f->code_value) {
        for (unsigned c = 0; c < f->ncodes; c++) {
            float v = f->code_value(c);
            if (!isfinite(v) && !isinf(v)) continue;
            if (v < q && v > *below) *below = v;
            if (v > q && v < *above) *above = v;
        }
        return;
    }
    /* wide IEEE formats: adjacent codes in magnitude */
    int nb = f->elem_bits;
    uint32_t sign = 1u << (nb - 1), mag = code & (sign - 1);
    const qs_minifloat *mf = f->mf ? f->mf : &qs_mf_fp32;
    float up = qs_mf_decode(mf, (code & sign) | (mag + 1));
    float dn = mag ? qs_mf_decode(mf, (code & sign) | (mag - 1)) : -qs_mf_decode(mf, 1);
    if (code & sign) { *below = up; *above = dn; }
    else { *below = dn; *above = up; }
}

static void explain_element(const qs_format *f, const qs_qopts *o, float x)
{
    uint32_t code = 0;
    float ts = 1, q;
    qs_err e = {{0}};
    if (f->encode(f, o, &x, 1, &code, NULL, &ts, &e) || f->fakeq(f, o, &x, 1, &q, &e)) {
        printf("  %s\n", e.msg);
        return;
    }
    char fields[200], a[32], b[32], c[32], d[32];
    qs_format_code_text(f, code, fields, sizeof fields);
    double below, above;
    neighbours(f, q, code, &below, &above);
    qs_fmt_num(x, 9, a, sizeof a);
    qs_fmt_num(q, 9, b, sizeof b);
    printf("input      %s\n", a);
    printf("code       0x%0*x  %s\n", (f->elem_bits + 3) / 4, code, fields);
    printf("value      %s\n", b);
    qs_fmt_num(below, 9, c, sizeof c);
    qs_fmt_num(above, 9, d, sizeof d);
    printf("neighbours below %s, above %s\n", c, d);
    double err = (double)q - (double)x;
    double ulp = err >= 0 ? q - below : above - q;
    if (!isfinite(ulp) || ulp <= 0) ulp = isfinite(above - below) ? (above - below) / 2 : NAN;
    if (isfinite(err))
        printf("error      %+.6g absolute, %+.6g relative, %+.4f ulp\n", err, x != 0 ? err / fabs((double)x) : 0.0,
               isfinite(ulp) && ulp > 0 ? err / ulp : NAN);
}

static void num6(double v, char *buf, size_t cap) { qs_fmt_num(v, 6, buf, cap); }

static void explain_block(const qs_format *f, const qs_qopts *o, const float *x, size_t n)
{
    size_t nb = qs_format_nblocks(f, o, n), blk = qs_format_block(f, o);
    uint32_t *codes = calloc(n, sizeof *codes);
    uint8_t *meta = calloc(nb * (size_t)f->meta_bytes + 1, 1);
    float *y = calloc(n, sizeof *y), ts = 1;
    qs_err e = {{0}};
    if (!codes || !meta || !y || f->encode(f, o, x, n, codes, meta, &ts, &e) || f->fakeq(f, o, x, n, y, &e)) {
        printf("  %s\n", e.msg[0] ? e.msg : "out of memory");
        goto out;
    }
    for (size_t b = 0; b < nb; b++) {
        printf("block %zu  metadata 0x", b);
        for (int k = 0; k < f->meta_bytes; k++) printf("%02x", meta[b * (size_t)f->meta_bytes + (size_t)k]);
        if (f->meta_text) {   /* the row's own words for its metadata, as the inspector shows them */
            const uint8_t *m = meta + b * (size_t)f->meta_bytes;
            char t[256];
            float step;
            qs_format_elem_steps(f, o, m, ts, 1, &step);
            qs_format_meta_text(f, o, m, ts, step, num6, t, sizeof t);
            printf("  (%s)", t);
        }
        printf("\n");
        size_t end = blk ? (b + 1) * blk : n;
        for (size_t i = blk ? b * blk : 0; i < end && i < n; i++) {
            char a[32], c[32], fields[200];
            qs_format_code_text(f, codes[i], fields, sizeof fields);
            qs_fmt_num(x[i], 9, a, sizeof a);
            qs_fmt_num(y[i], 9, c, sizeof c);
            double err = (double)y[i] - (double)x[i];
            printf("  [%zu] %-14s -> code 0x%0*x %-40s value %-14s error %+.4g (%+.3g%%)\n", i, a, (f->elem_bits + 3) / 4,
                   codes[i], fields, c, err, x[i] != 0 ? 100 * err / fabs((double)x[i]) : 0.0);
        }
    }
out:
    free(codes); free(meta); free(y);
}

static int explain_run(qs_cli *cli, qs_apply *ap, int table, int nargs, char **args);

int qs_cmd_explain(qs_cli *cli, int argc, char **argv)
{
    static const struct option lo[] = {QS_QUANT_LONGOPTS, {"table", no_argument, 0, 'T'}, {0, 0, 0, 0}};
    qs_apply a;
    memset(&a, 0, sizeof a);
    a.axis = 1;
    int table = 0, ch;
    /* Values may be negative ("-1.5", "-inf"): split options from values ourselves, keeping the
    ** values in their order (it matters for block formats), and hand getopt "options -- values". */
    static const char *const kWithArg[] = {"-f", "--format", "--round", "--scale-rule", "--block", "--axis",
                                           "--gran", "--seed", "--nvfp4", "--m2x", "--nonfinite-block",
                                           "--zero-block-scale", "--scale"};
    char **av = calloc((size_t)argc + 2, sizeof *av), **vals = calloc((size_t)argc + 1, sizeof *vals);
    if (!av || !vals) { free(av); free(vals); return qs_cli_error(QS_EXIT_ERR, "out of memory"); }
    int ac = 0, nv = 0;
    av[ac++] = argv[0];
    for (int i = 1; i < argc; i++) {
        char *end;
        const char *s = argv[i];
        int numeric = (strtof(s, &end), end != s && *end == 0);
        if (s[0] != '-' || numeric) { vals[nv++] = argv[i]; continue; }
        av[ac++] = argv[i];
        for (size_t k = 0; k < sizeof kWithArg / sizeof *kWithArg; k++)
            if (!strcmp(s, kWithArg[k]) && i + 1 < argc) { av[ac++] = argv[++i]; break; }
    }
    av[ac++] = "--";
    for (int i = 0; i < nv; i++) av[ac++] = vals[i];
    free(vals);
    argv = av;
    argc = ac;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "f:", lo, NULL)) != -1) {
        int k = qs_quant_opt("explain", ch, optarg, &a);
        if (k < 0) { free(av); return QS_EXIT_USAGE; }
        if (k) continue;
        if (ch == 'T') table = 1;
        else { int u = qs_cli_usage("explain", "unknown option '%s'", argv[optind - 1]); free(av); return u; }
    }
    int rc = qs_quant_opts_done("explain", &a);
    if (!rc && a.cscale) return qs_cli_usage("explain", "--scale scales tensors and value lists (analyze, quant), not single values");
    if (rc) { free(av); return rc; }
    rc = explain_run(cli, &a, table, argc - optind, argv + optind);
    free(av);
    return rc;
}

static int explain_run(qs_cli *cli, qs_apply *ap, int table, int nargs, char **args)
{
    qs_apply a = *ap;
    const qs_format *f = a.f;
    if (table) {
        if (!f->code_value) return qs_cli_usage("explain", "--table needs an element format with a fixed code table (8 bits or fewer, no block scale); %s has none", f->name);
        printf("%s%-6s %-28s %s%s\n", qs_c_head(cli), "CODE", "BITS", "VALUE", qs_c_off(cli));
        for (unsigned c = 0; c < f->ncodes; c++) {
            char fields[200], v[32];
            qs_format_code_text(f, c, fields, sizeof fields);
            char *paren = strstr(fields, "  (");
            if (paren) *paren = 0;
            qs_fmt_num(f->code_value(c), 9, v, sizeof v);
            printf("0x%0*x   %-28s %s\n", (f->elem_bits + 3) / 4, c, fields, v);
        }
        return QS_EXIT_OK;
    }
    if (nargs <= 0) return qs_cli_usage("explain", "give one or more values, or --table");
    size_t n = (size_t)nargs;
    float *x = calloc(n, sizeof *x);
    if (!x) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char *end;
        x[i] = strtof(args[i], &end);
        if (end == args[i] || *end) { free(x); return qs_cli_usage("explain", "'%s' is not a number", args[i]); }
    }
    printf("%s%s%s  %s\n", qs_c_bold(cli), f->name, qs_c_off(cli), f->summary);
    if (f->block == 1) {
        for (size_t i = 0; i < n; i++) { if (i) printf("\n"); explain_element(f, &a.o, x[i]); }
    } else {
        qs_qopts o = a.o;
        if (a.gran == QS_GRAN_TENSOR) o.block = 0;
        explain_block(f, &o, x, n);
    }
    free(x);
    return QS_EXIT_OK;
}
