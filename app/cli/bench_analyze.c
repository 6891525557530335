/*
** `qscope bench analyze`: the cost of the analysis over fake-quantization alone.
**
** A 64M-element (8192 x 8192, --quick: 1024 x 1024) weight-like tensor, analyzed under 10 formats;
** for each, the same run times format_apply alone (fake-quantize, read and write) and qs_analyze
** (fake-quantize plus every metric and histogram) with 1 and 2 threads, as one step of a sweep: the
** tensor's value histogram comes from the sweep's first analysis (computed once, untimed).  The target: the
** metrics and histograms add at most 30% over fake-quantization alone.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bench_util.h"
#include "cli.h"
#include "quant_opts.h"
#include "../../analysis/metrics.h"
#include "../../datasets/gen.h"

typedef struct { const float *x; float *y; } mem;
static int rd(void *c, uint64_t s, size_t n, float *out, qs_err *e) { memcpy(out, ((mem *)c)->x + s, n * 4); return 0; }
static int wr(void *c, uint64_t s, size_t n, const float *y, qs_err *e) { memcpy(((mem *)c)->y + s, y, n * 4); return 0; }

int qs_bench_analyze(qs_cli *cli, int quick, int json)
{
    const uint64_t R = quick ? 1024 : 8192, C = quick ? 1024 : 8192, N = R * C;
    const int REPS = quick ? 3 : 5;
    static const char *list = "fp8_e4m3,fp8_e5m2,bf16,hif8,mxfp8_e4m3,mxfp6_e2m3,mxfp4,nvfp4,hif4,int8:gran=row";
    float *x = malloc(N * 4), *y = malloc(N * 4);
    if (!x || !y) { free(x); free(y); return qs_cli_error(QS_EXIT_ERR, "out of memory (%llu values)", (unsigned long long)N); }
    qs_gen_matrix(QS_GEN_GAUSSIAN, 1, R, C, 0.02, x);
    for (uint64_t i = 0; i < N; i += 997) x[i] *= 50;
    qs_apply base;
    memset(&base, 0, sizeof base);
    base.axis = 1;
    qs_apply apps[16];
    int na = qs_quant_parse_list("bench", list, &base, apps, 16);
    if (na < 0) { free(x); free(y); return QS_EXIT_USAGE; }
    /* `analyze` passes the absmax it already has from the stored statistics; so does the bench */
    double amax = 0;
    for (uint64_t i = 0; i < N; i++) if (isfinite(x[i]) && fabs(x[i]) > amax) amax = fabs(x[i]);
    json_t *rows = json_array();
    mem m = {x, y};
    qs_err e = {{0}};
    int bad = 0;
    /* a sweep computes the tensor's value histogram once (with its first format) and the other
    ** formats reuse it, as `analyze` and `report` do: the timed runs measure that marginal cost */
    qs_analysis first;
    qs_analyze_opts fo = {.threads = 2, .absmax_known = 1, .absmax = amax};
    if (qs_analyze(&apps[0], R, C, rd, &m, 1, &fo, &first, &e)) {
        fprintf(stderr, "qscope: bench analyze: %s\n", e.msg);
        free(x); free(y); json_decref(rows);
        return QS_EXIT_ERR;
    }
    for (int k = 0; k < na; k++) {
        /* each measurement REPS times in a row, best of them (on this VM an idle second core is slow
        ** to come back: interleaving the one- and two-thread runs costs the latter up to a third) */
        double best[3] = {INFINITY, INFINITY, INFINITY};
        for (int mode = 0; mode < 3; mode++)             /* fakeq only; analyze 1 thread; 2 threads */
            for (int r = 0; r < REPS; r++) {
                double t0 = qs_now_s();
                int rc;
                if (mode == 0) rc = qs_format_apply(&apps[k], R, C, rd, &m, wr, &m, &e);
                else {
                    qs_analysis an;
                    qs_analyze_opts ao = {.threads = mode, .absmax_known = 1, .absmax = amax, .value_hist = &first.value};
                    rc = qs_analyze(&apps[k], R, C, rd, &m, 1, &ao, &an, &e);
                    if (!rc) qs_analysis_free(&an);
                }
                double t = qs_now_s() - t0;
                if (rc) { bad = 1; fprintf(stderr, "qscope: bench analyze: %s\n", e.msg); }
                if (t < best[mode]) best[mode] = t;
            }
        char label[96];
        qs_quant_label(&apps[k], NULL, label, sizeof label);
        json_array_append_new(rows, json_pack("{s:s,s:f,s:f,s:f,s:f,s:f}", "format", label, "fakeq_melem_s", N / best[0] / 1e6,
                                              "analyze_1t_melem_s", N / best[1] / 1e6, "analyze_2t_melem_s", N / best[2] / 1e6,
                                              "overhead_1t", best[1] / best[0] - 1, "overhead_2t", best[2] / best[0] - 1));
    }
    if (json) {
        json_t *o = json_pack("{s:I,s:o}", "elements", (json_int_t)N, "results", rows);
        char *s = json_dumps(o, JSON_INDENT(2));
        puts(s);
        free(s);
        json_decref(o);
    } else {
        printf("%llu x %llu float32 (weight-like, 0.1%% outliers), best of %d\n", (unsigned long long)R, (unsigned long long)C, REPS);
        printf("%s%-16s %14s %14s %14s %12s %12s%s\n", qs_c_head(cli), "FORMAT", "FAKEQ M/s", "ANALYZE 1T", "ANALYZE 2T",
               "OVERHEAD 1T", "OVERHEAD 2T", qs_c_off(cli));
        size_t i;
        json_t *r;
        json_array_foreach(rows, i, r)
            printf("%-16s %14.0f %14.0f %14.0f %11.0f%% %11.0f%%\n", json_string_value(json_object_get(r, "format")),
                   json_real_value(json_object_get(r, "fakeq_melem_s")), json_real_value(json_object_get(r, "analyze_1t_melem_s")),
                   json_real_value(json_object_get(r, "analyze_2t_melem_s")), 100 * json_real_value(json_object_get(r, "overhead_1t")),
                   100 * json_real_value(json_object_get(r, "overhead_2t")));
        printf("(fake-quantize alone = format_apply reading and writing the tensor in memory, one thread)\n");
        json_decref(rows);
    }
    qs_analysis_free(&first);
    free(x);
    free(y);
    return bad ? QS_EXIT_ERR : QS_EXIT_OK;
}
