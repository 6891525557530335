/*
** `qscope bench`: throughput of the store's hot paths on this machine.
**
** Each measurement is repeated; min and median are reported (never the mean alone: on small VMs
** the spread is large).  Correctness is checked in the same run (decoded values and statistics
** are compared against a straightforward reference) so a fast wrong path cannot win.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <xxhash.h>

#include "bench_util.h"
#include "../tui/tui.h"
#include "cli.h"

int qs_bench_formats(qs_cli *cli, int quick, int json, const char *list);
int qs_bench_analyze(qs_cli *cli, int quick, int json);
int qs_bench_rl(qs_cli *cli, int quick, int json);   /* app/cli/cmd_rl_bench.c */
int qs_bench_rl_sample(qs_cli *cli, int quick, int json, const char *model);   /* app/cli/cmd_rl_sample_bench.c */
int qs_bench_kernels(qs_cli *cli, int quick, int json, int score);   /* app/cli/bench_kernels.c */
int qs_bench_train(qs_cli *cli, int argc, char **argv);               /* app/cli/bench_train.c */
int qs_bench_eval(qs_cli *cli, int argc, char **argv);                /* app/cli/bench_eval.c */
int qs_bench_tokenize(qs_cli *cli, int argc, char **argv);            /* app/cli/bench_tokenize.c */
int qs_bench_quantize(qs_cli *cli, int argc, char **argv);            /* app/cli/bench_quantize.c */
#include "../../analysis/importer.h"
#include "../../analysis/tensor_stats.h"
#include "../../datasets/gen.h"
#include "../../kernels/dtype.h"
#include "../../kernels/qs_version.h"
#include "../../store/npy_write.h"


typedef struct { double min, med; } timing;

static timing summarize(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, qs_bench_cmp);
    timing r = {t[0], n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2])};
    return r;
}

typedef struct { const float *x; } memsrc;
static int mem_read(void *ctx, uint64_t start, size_t n, float *out, qs_err *e)
{
    memcpy(out, ((memsrc *)ctx)->x + start, n * sizeof(float));
    return 0;
}

static void machine(json_t *o)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096], model[256] = "unknown";
    int avx2 = 0, avx512 = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = 0;
        }
        if (!strncmp(line, "flags", 5)) { avx2 = strstr(line, " avx2") != NULL; avx512 = strstr(line, " avx512f") != NULL; }
    }
    if (f) fclose(f);
    json_object_set_new(o, "cpu", json_string(model));
    json_object_set_new(o, "cores", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    json_object_set_new(o, "avx2", json_boolean(avx2));
    json_object_set_new(o, "avx512f", json_boolean(avx512));
    #ifdef __clang__
    json_object_set_new(o, "compiler", json_string("clang " __clang_version__));
#else
    json_object_set_new(o, "compiler", json_string("gcc " __VERSION__));
#endif
    json_object_set_new(o, "qscope", json_string(QS_VERSION " " QS_GIT_REV));
}

static void row(json_t *rows, const char *what, double units, const char *unit, timing t, const char *note)
{
    json_array_append_new(rows, json_pack("{s:s,s:s,s:f,s:f,s:f,s:f,s:s}", "benchmark", what, "unit", unit, "min_s", t.min,
                                          "median_s", t.med, "best_rate", units / t.min, "median_rate", units / t.med,
                                          "note", note ? note : ""));
}

static int fill_gauss(void *ctx, uint64_t start, size_t n, float *out)
{
    qs_gen_fill(ctx, start, n, out);
    return 0;
}

int qs_cmd_bench(qs_cli *cli, int argc, char **argv)
{
    int quick = 0, json = 0;
    const char *user_npy = NULL, *flist = NULL, *model = NULL;
    int sample = 0;
    if (argc > 1 && !strcmp(argv[1], "tui")) return qs_bench_tui(cli, argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "train")) return qs_bench_train(cli, argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "eval")) return qs_bench_eval(cli, argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "tokenize")) return qs_bench_tokenize(cli, argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "quantize")) return qs_bench_quantize(cli, argc - 1, argv + 1);
    int formats = argc > 1 && !strcmp(argv[1], "formats"), analyze = argc > 1 && !strcmp(argv[1], "analyze");
    int rl = argc > 1 && !strcmp(argv[1], "rl");
    int kernels = argc > 1 && !strcmp(argv[1], "kernels"), score = 0;
    for (int i = 1 + formats + analyze + rl + kernels; i < argc; i++) {
        if (!formats && !analyze && !strcmp(argv[i], "--score")) { score = 1; continue; }
        if (formats && !strcmp(argv[i], "-f") && i + 1 < argc) { flist = argv[++i]; continue; }
        if (rl && !strcmp(argv[i], "--sample")) { sample = 1; continue; }
        if (rl && !strcmp(argv[i], "--model") && i + 1 < argc) { model = argv[++i]; continue; }
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--npy") && i + 1 < argc) user_npy = argv[++i];
        else return qs_cli_usage("bench", "unexpected argument '%s'", argv[i]);
    }
    if (formats) return qs_bench_formats(cli, quick, json, flist);
    if (analyze) return qs_bench_analyze(cli, quick, json);
    if (rl && (sample || model)) return qs_bench_rl_sample(cli, quick, json, model);
    if (rl) return qs_bench_rl(cli, quick, json);
    if (kernels || score) return qs_bench_kernels(cli, quick, json, score);
    const size_t N = quick ? (1u << 20) : (1u << 24);
    const int REPS = quick ? 3 : 9;
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    uint8_t *raw = malloc(N * 4);
    if (!x || !y || !raw) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    qs_gen_spec g;
    memset(&g, 0, sizeof g);
    qs_gen_defaults(&g);
    g.kind = QS_GEN_GAUSSIAN;
    g.rows = N;
    qs_gen_fill(&g, 0, N, x);
    json_t *out = json_object(), *rows = json_array();
    machine(out);
    double t[16];
    int bad = 0;

    /* content hash over the f32 bytes */
    for (int r = 0; r < REPS; r++) { double t0 = qs_now_s(); volatile XXH128_hash_t h = XXH3_128bits(x, N * 4); (void)h; t[r] = qs_now_s() - t0; }
    row(rows, "hash xxh3-128", (double)N * 4 / 1e9, "GB/s", summarize(t, REPS), NULL);

    /* decode of each element dtype to f32 (bytes made from the same data) */
    static const qs_dtype dts[] = {QS_DT_F16, QS_DT_BF16, QS_DT_F8_E4M3, QS_DT_F8_E5M2, QS_DT_I8,
                                   QS_DT_Q8_0, QS_DT_Q4_0, QS_DT_GGML_MXFP4, QS_DT_Q4_K, QS_DT_Q6_K};
    for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
        const qs_dtype_traits *tr = qs_dtype_get(dts[k]);
        size_t nb = N / tr->block_elems;
        for (size_t i = 0; i < nb * tr->block_bytes; i++) raw[i] = (uint8_t)(((const uint8_t *)x)[i] ^ (i * 131));
        /* keep f16/bf16 finite-ish: random bytes are still a valid decode workload */
        for (int r = 0; r < REPS; r++) { double t0 = qs_now_s(); tr->decode(raw, y, nb); t[r] = qs_now_s() - t0; }
        char what[64];
        snprintf(what, sizeof what, "decode %s -> f32", tr->name);
        row(rows, what, (double)N / 1e6, "M elem/s", summarize(t, REPS), NULL);
    }

    /* statistics, 1 and 2 threads, with a determinism check */
    qs_tensor_stats s1, s2;
    memsrc ms = {x};
    qs_err e = {{0}};
    for (int th = 1; th <= 2; th++) {
        for (int r = 0; r < REPS; r++) {
            double t0 = qs_now_s();
            if (qs_tensor_stats_compute(mem_read, &ms, 1, N, N / 1024, 1024, th, th == 1 ? &s1 : &s2, &e)) bad = 1;
            t[r] = qs_now_s() - t0;
        }
        char what[64];
        snprintf(what, sizeof what, "statistics (%d thread%s)", th, th > 1 ? "s" : "");
        row(rows, what, (double)N / 1e6, "M elem/s", summarize(t, REPS), "2 passes, exact percentiles");
    }
    if (memcmp(&s1, &s2, sizeof s1) != 0) { bad = 1; fprintf(stderr, "qscope: bench: statistics differ between 1 and 2 threads\n"); }
    if (fabs(s1.mean) > 0.01 || fabs(s1.std - 1) > 0.01) { bad = 1; fprintf(stderr, "qscope: bench: statistics look wrong\n"); }

    /* end to end: write a .npy, import it by reference (hash + stats + rows) */
    char dir[512];
    const char *tmpdir = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/qscope-bench-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (mkdtemp(dir)) {
        char npy[4096], dbp[600];
        snprintf(npy, sizeof npy, "%s", user_npy ? user_npy : "");
        if (!user_npy) snprintf(npy, sizeof npy, "%s/bench.npy", dir);
        snprintf(dbp, sizeof dbp, "%s/bench.db", dir);
        uint64_t shape[2] = {N / 1024, 1024};
        if (user_npy || qs_npy_write_f32(npy, shape, 2, fill_gauss, &g, &e) == 0) {
            uint64_t nel = N;
            int reps = quick ? 2 : 5;
            for (int r = 0; r < reps; r++) {
                unlink(dbp);
                qs_db *db = qs_db_open(dbp, &e);
                qs_import_opts o = {.jobs = 2};
                json_t *rep = json_array();
                double t0 = qs_now_s();
                int rc = !db || qs_db_begin(db, &e) || qs_import_file(db, npy, &o, rep, &e) || qs_db_commit(db, &e);
                t[r] = qs_now_s() - t0;
                if (!rc) nel = (uint64_t)json_integer_value(json_object_get(json_array_get(rep, 0), "numel"));
                json_decref(rep);
                if (rc) { bad = 1; fprintf(stderr, "qscope: bench: %s\n", e.msg); }
                qs_db_close(db);
            }
            row(rows, user_npy ? "import --npy FILE by reference" : "import .npy by reference", (double)nel / 1e6,
                "M elem/s", summarize(t, reps), "open+parse+hash+stats+insert");
        }
        if (!user_npy) unlink(npy);
        unlink(dbp);
        char wal[700];
        snprintf(wal, sizeof wal, "%s-wal", dbp); unlink(wal);
        snprintf(wal, sizeof wal, "%s-shm", dbp); unlink(wal);
        rmdir(dir);
    }
    json_object_set_new(out, "elements", json_integer((json_int_t)N));
    json_object_set_new(out, "results", rows);
    if (json) {
        char *s = json_dumps(out, JSON_INDENT(2));
        puts(s);
        free(s);
    } else {
        printf("%s%s%s  (%lld cores, avx2 %s, avx512f %s)\n%s\n", qs_c_bold(cli),
               json_string_value(json_object_get(out, "cpu")), qs_c_off(cli),
               (long long)json_integer_value(json_object_get(out, "cores")),
               json_is_true(json_object_get(out, "avx2")) ? "yes" : "no",
               json_is_true(json_object_get(out, "avx512f")) ? "yes" : "no", json_string_value(json_object_get(out, "compiler")));
        printf("%s%-34s %14s %14s  %-10s %s%s\n", qs_c_head(cli), "BENCHMARK", "BEST", "MEDIAN", "UNIT", "NOTE", qs_c_off(cli));
        size_t i;
        json_t *r;
        json_array_foreach(rows, i, r)
            printf("%-34s %14.1f %14.1f  %-10s %s\n", json_string_value(json_object_get(r, "benchmark")),
                   json_real_value(json_object_get(r, "best_rate")), json_real_value(json_object_get(r, "median_rate")),
                   json_string_value(json_object_get(r, "unit")), json_string_value(json_object_get(r, "note")));
        printf("%zu elements per run, %d runs each\n", N, REPS);
    }
    json_decref(out);
    free(x); free(y); free(raw);
    return bad ? QS_EXIT_ERR : QS_EXIT_OK;
}
