/*
** `qscope gen KIND` (synthetic tensors) and `qscope demo` (the demo set of `make run`).
**
** A generated tensor destined for the database is written to a temporary .npy and imported
** embedded, so it goes through exactly the same hashing, statistics and storage as a file.
*/
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "cmd_rl.h"
#include "kernel_cli.h"
#include "../../analysis/importer.h"
#include "../../datasets/gen.h"
#include "../../store/npy_write.h"
#include "../../store/q_tensors.h"

static int fill_cb(void *ctx, uint64_t start, size_t n, float *out)
{
    qs_gen_fill(ctx, start, n, out);
    return 0;
}

static char *spec_json(const qs_gen_spec *s)
{
    json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:f}", "generator", qs_gen_name(s->kind), "seed", (json_int_t)s->seed,
                          "rows", (json_int_t)s->rows, "cols", (json_int_t)s->cols, "scale", s->scale);
    if (s->kind == QS_GEN_STUDENT_T) json_object_set_new(o, "nu", json_real(s->nu));
    if (s->kind == QS_GEN_LOGNORMAL) {
        json_object_set_new(o, "sigma", json_real(s->sigma));
        json_object_set_new(o, "signed", json_boolean(s->lognormal_signed));
    }
    if (s->kind == QS_GEN_LLM_ACT) {
        json_object_set_new(o, "outlier_channels", json_integer(s->outlier_channels));
        json_object_set_new(o, "outlier_range", json_pack("[f,f]", s->outlier_min, s->outlier_max));
    }
    char *txt = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return txt;
}

static void spec_shape(const qs_gen_spec *s, uint64_t shape[2], int *ndim)
{
    if (s->cols) { shape[0] = s->rows; shape[1] = s->cols; *ndim = 2; }
    else { shape[0] = s->rows; *ndim = 1; }
}

/* Generate into the database as `name` (caller holds the transaction). */
static int gen_into_db(qs_db *db, const qs_gen_spec *s, const char *name, json_t *report, qs_err *e)
{
    uint64_t shape[2];
    int nd;
    spec_shape(s, shape, &nd);
    char src[600];
    snprintf(src, sizeof src, "gen:%s", name);
    char *meta = spec_json(s);
    int rc = qs_import_f32(db, name, shape, nd, fill_cb, (void *)s, src, "generated", meta, report, e);
    free(meta);
    return rc;
}

static int parse_shape_opt(const char *s, qs_gen_spec *g)
{
    unsigned long long r, c;
    char *x = strchr(s, 'x');
    if (!x) return -1;
    char a[64];
    snprintf(a, sizeof a, "%.*s", (int)(x - s), s);
    if (qs_parse_u64(a, &r) || qs_parse_u64(x + 1, &c) || r == 0 || c == 0) return -1;
    g->rows = r;
    g->cols = c;
    return 0;
}

int qs_cmd_gen(qs_cli *cli, int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "model")) return qs_cmd_gen_model(cli, argc - 1, argv + 1);
    static const struct option lo[] = {
        {"n", required_argument, 0, 'n'}, {"shape", required_argument, 0, 's'}, {"seed", required_argument, 0, 'S'},
        {"scale", required_argument, 0, 'x'}, {"nu", required_argument, 0, 'u'}, {"sigma", required_argument, 0, 'g'},
        {"outliers", required_argument, 0, 'O'}, {"outlier-range", required_argument, 0, 'R'},
        {"name", required_argument, 0, 'N'}, {"list", no_argument, 0, 'L'}, {"json", no_argument, 0, 'J'},
        {0, 0, 0, 0}};
    qs_gen_spec g;
    memset(&g, 0, sizeof g);
    qs_gen_defaults(&g);
    g.rows = 65536;
    const char *name = NULL, *out = NULL;
    int ch, json = 0;
    unsigned long long u;
    double d;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "o:", lo, NULL)) != -1) {
        switch (ch) {
        case 'n':
            if (qs_parse_u64(optarg, &u) || u == 0) return qs_cli_usage("gen", "bad --n '%s'", optarg);
            g.rows = u; g.cols = 0; break;
        case 's': if (parse_shape_opt(optarg, &g)) return qs_cli_usage("gen", "bad --shape '%s' (want RxC)", optarg); break;
        case 'S': if (qs_parse_u64(optarg, &u)) return qs_cli_usage("gen", "bad --seed '%s'", optarg); g.seed = u; break;
        case 'x': if (qs_parse_f64(optarg, &d) || d <= 0) return qs_cli_usage("gen", "bad --scale '%s'", optarg); g.scale = d; break;
        case 'u': if (qs_parse_f64(optarg, &d) || d <= 0) return qs_cli_usage("gen", "bad --nu '%s'", optarg); g.nu = d; break;
        case 'g': if (qs_parse_f64(optarg, &d) || d <= 0) return qs_cli_usage("gen", "bad --sigma '%s'", optarg); g.sigma = d; break;
        case 'O': if (qs_parse_u64(optarg, &u) || u > 1u << 30) return qs_cli_usage("gen", "bad --outliers '%s'", optarg); g.outlier_channels = (int)u; break;
        case 'R': {
            char *c = strchr(optarg, ',');
            double lo_, hi_;
            char a[64];
            if (!c) return qs_cli_usage("gen", "bad --outlier-range '%s' (want LO,HI)", optarg);
            snprintf(a, sizeof a, "%.*s", (int)(c - optarg), optarg);
            if (qs_parse_f64(a, &lo_) || qs_parse_f64(c + 1, &hi_) || lo_ <= 0 || hi_ < lo_)
                return qs_cli_usage("gen", "bad --outlier-range '%s' (want LO,HI)", optarg);
            g.outlier_min = lo_; g.outlier_max = hi_;
            break;
        }
        case 'N': name = optarg; break;
        case 'o': out = optarg; break;
        case 'J': json = 1; break;
        case 'L':
            for (int k = 0; k < QS_GEN_COUNT; k++) printf("%-10s %s\n", qs_gen_name((qs_gen_kind)k), qs_gen_describe((qs_gen_kind)k));
            return QS_EXIT_OK;
        default: return qs_cli_usage("gen", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 1) return qs_cli_usage("gen", "give exactly one KIND (see `qscope gen --list`)");
    if (qs_gen_from_name(argv[optind], &g.kind)) return qs_cli_usage("gen", "unknown kind '%s' (see `qscope gen --list`)", argv[optind]);
    if (!name == !out) return qs_cli_usage("gen", "give either --name NAME (store in the database) or -o FILE.npy");
    uint64_t shape[2];
    int nd;
    spec_shape(&g, shape, &nd);
    if (g.rows > (1ull << 40) || (g.cols && g.rows > (1ull << 40) / g.cols))
        return qs_cli_usage("gen", "tensor too large (at most 2^40 elements)");
    qs_err e = {{0}};
    if (out) {
        if (qs_npy_write_f32(out, shape, nd, fill_cb, &g, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
        if (strcmp(out, "-") != 0) fprintf(stderr, "qscope: wrote %s\n", qs_esc(out));
        return QS_EXIT_OK;
    }
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    json_t *rep = json_array();
    int rc = QS_EXIT_OK;
    if (qs_db_begin(db, &e) || gen_into_db(db, &g, name, rep, &e) || qs_db_commit(db, &e)) {
        qs_db_rollback(db);
        rc = qs_cli_err(QS_EXIT_ERR, &e);
    } else if (json) {
        char *s = json_dumps(rep, JSON_INDENT(2));
        puts(s);
        free(s);
    } else {
        json_t *o = json_array_get(rep, 0);
        printf("%s %s\n", json_string_value(json_object_get(o, "status")), qs_esc(name));
    }
    json_decref(rep);
    qs_db_close(db);
    return rc;
}

/* The demo set: weights-like and activation-like tensors with different tails. */
typedef struct { const char *name; qs_gen_kind kind; uint64_t rows, cols; double scale, nu; uint64_t seed; } demo_item;
static const demo_item kDemo[] = {
    {"demo:gaussian-w", QS_GEN_GAUSSIAN, 1024, 1024, 0.02, 0, 1},
    {"demo:laplace-w", QS_GEN_LAPLACE, 1024, 1024, 0.02, 0, 2},
    {"demo:student-t3-w", QS_GEN_STUDENT_T, 1024, 1024, 0.02, 3, 3},
    {"demo:student-t10-w", QS_GEN_STUDENT_T, 512, 512, 0.02, 10, 4},
    {"demo:uniform", QS_GEN_UNIFORM, 256, 256, 1.0, 0, 5},
    {"demo:lognormal", QS_GEN_LOGNORMAL, 65536, 0, 1.0, 0, 6},
    {"demo:llm-act", QS_GEN_LLM_ACT, 512, 2048, 1.0, 0, 7},
    {"demo:llm-act-ffn", QS_GEN_LLM_ACT, 256, 1536, 0.5, 0, 8},
    {"demo:gaussian-1d", QS_GEN_GAUSSIAN, 1 << 20, 0, 1.0, 0, 9},
};

/* The committed real-weight sample (datasets/sample, a few all-MiniLM-L6-v2 matrices): looked up in
** $QSCOPE_SAMPLE_DIR only when that is set, else in ./datasets/sample, then in datasets/sample of the
** binary's directory and up to three levels above it (build/qscope, build/asan/qscope), then in
** ../share/qscope/sample beside it (`make install`);
** embedded (--copy) so the demo database does not depend on where the repository lives. */
#define DEMO_SAMPLE "all-MiniLM-L6-v2-sample.safetensors"
static int demo_real_sample(qs_db *db, json_t *rep, qs_err *e)
{
    enum { NDIRS = 7 };
    char path[4200], exe[4096], up[NDIRS][4200];
    const char *env = getenv("QSCOPE_SAMPLE_DIR");
    const char *dirs[NDIRS] = {env, env ? NULL : "datasets/sample"};
    ssize_t n = env ? -1 : readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *sl = strrchr(exe, '/');
        if (sl) *sl = 0;   /* the binary's directory */
        snprintf(up[6], sizeof up[6], "%s/../share/qscope/sample", exe);
        dirs[6] = up[6];
        for (int k = 2; k < 6; k++) {
            snprintf(up[k], sizeof up[k], "%s/datasets/sample", exe);
            dirs[k] = up[k];
            if (!(sl = strrchr(exe, '/'))) break;
            *sl = 0;
        }
    }
    for (int i = 0; i < NDIRS; i++) {
        if (!dirs[i]) continue;
        snprintf(path, sizeof path, "%s/%s", dirs[i], DEMO_SAMPLE);
        if (access(path, R_OK) != 0) continue;
        qs_import_opts o;
        memset(&o, 0, sizeof o);
        o.copy = 1;
        o.prefix = "minilm-sample";
        o.jobs = 1;
        fprintf(stderr, "qscope: importing the real-weight sample %s\n", path);
        return qs_import_file(db, path, &o, rep, e);
    }
    fprintf(stderr, "qscope: note: real-weight sample %s not found (set QSCOPE_SAMPLE_DIR)\n", DEMO_SAMPLE);
    return 0;
}

/* Small runs that give the RL and Kernels views of the workbench something to show (about a second
** of CPU in all): the commands themselves, with their tables silenced. */
static int demo_results(qs_cli *cli)
{
    static char *sim[] = {"sim", "grpo", "--formats", "mxfp4", "--methods", "exact,none,ais_r", "--seeds", "1",
                          "--steps", "60", "--log-every", "10", "--replace", NULL};
    static char *msd[] = {"msd", "--M", "16", "--K", "1024", "--N", "1024", "--bits-samples", "65536", NULL};
    static char *attn[] = {"attn", "--L", "256,512", "--H", "2", NULL};
    static char *resq[] = {"resq", "--m", "64", "--d", "512", "--n", "256", NULL};
    static const struct { const char *what; char **argv; } k[] = {
        {"a short GRPO simulation (sim grpo)", sim},
        {"an MSD measurement (msd)", msd},
        {"attention kernels (attn)", attn},
        {"a Rollout-ResQ layer (resq)", resq},
    };
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY);
    if (saved < 0 || null < 0) {
        if (saved >= 0) close(saved);
        if (null >= 0) close(null);
        return qs_cli_error(QS_EXIT_ERR, "demo: cannot open /dev/null");
    }
    int rc = QS_EXIT_OK;
    for (size_t i = 0; i < sizeof k / sizeof *k && rc == QS_EXIT_OK; i++) {
        int argc = 0;
        while (k[i].argv[argc]) argc++;
        fprintf(stderr, "qscope: running %s\n", k[i].what);
        dup2(null, STDOUT_FILENO);
        optind = 0;   /* each command parses with getopt from the start */
        rc = qs_command_run(cli, qs_command_find(k[i].argv[0]), argc, k[i].argv);
        fflush(stdout);
        dup2(saved, STDOUT_FILENO);
    }
    close(saved);
    close(null);
    return rc;
}

int qs_cmd_demo(qs_cli *cli, int argc, char **argv)
{
    int force = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--force") == 0) force = 1;
        else return qs_cli_usage("demo", "unexpected argument '%s'", argv[i]);
    }
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    qs_err e = {{0}};
    int64_t nhave = 0;   /* an unreadable count is none: the demo set is then written */
    qs_tensor_count(db, "demo:*", &nhave, &e);
    int have = (int)nhave;
    int rc = QS_EXIT_OK;
    if (have && !force) {
        fprintf(stderr, "qscope: %s already has the demo set (%d tensors); --force regenerates it\n", db->path, have);
        goto out;
    }
    json_t *rep = json_array();
    if (qs_db_begin(db, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); json_decref(rep); goto out; }
    for (size_t i = 0; i < sizeof kDemo / sizeof *kDemo; i++) {
        qs_gen_spec g;
        memset(&g, 0, sizeof g);
        qs_gen_defaults(&g);
        g.kind = kDemo[i].kind;
        g.rows = kDemo[i].rows;
        g.cols = kDemo[i].cols;
        g.scale = kDemo[i].scale;
        g.seed = kDemo[i].seed;
        if (kDemo[i].nu > 0) g.nu = kDemo[i].nu;
        fprintf(stderr, "qscope: generating %s\n", kDemo[i].name);
        if (gen_into_db(db, &g, kDemo[i].name, rep, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); break; }
    }
    if (rc == QS_EXIT_OK && demo_real_sample(db, rep, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
    if (rc == QS_EXIT_OK && qs_db_commit(db, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
    if (rc != QS_EXIT_OK) qs_db_rollback(db);
    size_t n_tensors = json_array_size(rep);
    json_decref(rep);
    qs_db_close(db);
    if (rc == QS_EXIT_OK) rc = demo_results(cli);
    if (rc == QS_EXIT_OK)
        fprintf(stderr, "qscope: demo set ready in %s (%zu tensors, an RL run, kernel results)\n", cli->db_path, n_tensors);
    return rc;
out:
    qs_db_close(db);
    return rc;
}
