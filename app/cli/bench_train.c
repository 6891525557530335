/*
** `qscope bench train`: training throughput per recipe against OpenBLAS SGEMM in the same run (issue
** 26, "Must reach").
**
** A model of the given shape (default: 4 layers, dim 256, 4 heads, ffn 4*dim, ctx 128, batch 8, byte
** vocabulary, tied embeddings) is initialised as `qscope train` does; each recipe times N optimizer
** steps (zero the gradients, forward and backward, gradient norm, AdamW) after one warm-up step, from
** the same weights, the recipes' steps interleaved (a shared machine's load changes slow them alike).  In the same run, with the same OpenBLAS threads, cblas_sgemm times the model's own
** GEMMs (every linear layer's forward, input-gradient and weight-gradient product of one step, in the
** step's order) and a large square product.  Model FLOPs are 6 x parameters x tokens (llm.c, the
** papers); "of SGEMM" is that rate over the square SGEMM's.  Timings are the median step (and the
** best); the breakdown comes from the training state's clocks (qs_llm_train_state_times).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <jansson.h>

#include "bench_util.h"
#include "cli.h"
#include "../../analysis/train_loop.h"
#include "../../kernels/blas_threads.h"
#include "../../kernels/llm_adamw.h"
#include "../../kernels/llm_train.h"

/* Seconds of CPU time of the whole process (every thread): on a loaded machine, with one thread,
** closer to the work done than wall time (waiting for a core does not count; spinning would). */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    qs_llm_cfg c;
    int batch, steps, quick, json, square;
    const char *recipes;
} bopts;

static int cmp_d(const void *a, const void *b) { return qs_bench_cmp(a, b); }

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Parameters counted once (tied: the embedding is the output projection). */
static double n_params(const qs_llm_model *m) { return (double)m->arena_len + (double)(m->bias_arena ? m->bias_len : 0); }

/* Seconds of one step's linear-layer GEMMs (forward NT, input gradient NN, weight gradient TN) on
** random operands, best of reps; *flops gets their FLOPs. */
static double time_model_gemms(const qs_llm_cfg *c, int R, int reps, double *flops)
{
    const int d = c->dim, q = c->n_head * c->head_dim, kv = c->n_kv_head * c->head_dim, F = c->ffn;
    const int sh[8][2] = {{d, q}, {d, kv}, {d, kv}, {q, d}, {d, F}, {d, F}, {F, d}, {d, c->vocab}};   /* in, out */
    size_t big = 0;
    for (int i = 0; i < 8; i++) {
        size_t n = (size_t)sh[i][0] * sh[i][1], a = (size_t)R * (sh[i][0] > sh[i][1] ? sh[i][0] : sh[i][1]);
        if (n > big) big = n;
        if (a > big) big = a;
    }
    float *x = malloc(big * 4), *w = malloc(big * 4), *y = malloc(big * 4);
    double best = INFINITY;
    *flops = 0;
    if (!x || !w || !y) { free(x); free(w); free(y); return NAN; }
    for (size_t i = 0; i < big; i++) { x[i] = (float)((i * 7919 % 1000) - 500) * 1e-3f; w[i] = x[(i * 31) % big]; y[i] = 0; }
    for (int r = 0; r < reps; r++) {
        double t0 = qs_now_s(), fl = 0;
        for (int l = 0; l <= c->n_layer; l++)
            for (int i = l < c->n_layer ? 0 : 7; i < (l < c->n_layer ? 7 : 8); i++) {
                int in = sh[i][0], out = sh[i][1];
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, in, out, 1.0f, y, out, w, in, 0.0f, x, in);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, R, 1.0f, y, out, x, in, 1.0f, w, in);
                fl += 6.0 * R * in * out;
            }
        double t = qs_now_s() - t0;
        if (t < best) best = t;
        *flops = fl;
        for (size_t i = 0; i < big; i++) w[i] = x[(i * 31) % big];   /* keep the operands bounded */
    }
    free(x); free(w); free(y);
    return best;
}

static double time_square(int n, int reps, double *cpu_best)
{
    size_t N = (size_t)n * n;
    float *a = malloc(N * 4), *b = malloc(N * 4), *y = malloc(N * 4);
    double best = INFINITY;
    if (!a || !b || !y) { free(a); free(b); free(y); return NAN; }
    for (size_t i = 0; i < N; i++) { a[i] = (float)((i * 7919 % 1000) - 500) * 1e-3f; b[i] = a[(i * 31) % N]; }
    for (int r = 0; r < reps; r++) {
        double t0 = qs_now_s(), c0 = cpu_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, y, n);
        double t = qs_now_s() - t0, c = cpu_s() - c0;
        if (t < best) best = t;
        if (c < *cpu_best) *cpu_best = c;
    }
    free(a); free(b); free(y);
    return best;
}

typedef struct {
    double step_med, step_min, cpu_med, opt, part[QS_LT_COUNT], loss;
    int deterministic;   /* fp32 only: two passes on the same weights gave the same loss bits; -1 not checked */
} rec_t;

/* One recipe's run: the model (weights of seed 1), its gradients, AdamW and training state. */
typedef struct {
    const char *name;
    qs_llm_model m;
    qs_llm_grads g;
    qs_adamw opt;
    qs_llm_train_state *s;
    double *ts, *cs, opt_t, loss;
} run_t;

static void run_free(run_t *r)
{
    free(r->ts);
    free(r->cs);
    qs_llm_train_state_free(r->s);
    qs_adamw_free(&r->opt);
    if (r->g.arena) qs_llm_grads_free(&r->g);
    if (r->m.arena) qs_llm_free(&r->m);
    memset(r, 0, sizeof *r);
}

static int run_new(const bopts *o, const char *name, run_t *r, qs_err *e)
{
    memset(r, 0, sizeof *r);
    r->name = name;
    qs_llm_recipe rc;
    if (!(r->ts = calloc((size_t)o->steps, sizeof *r->ts)) || !(r->cs = calloc((size_t)o->steps, sizeof *r->cs)))
        return qs_fail(e, "out of memory");
    if (qs_llm_alloc(&r->m, &o->c, 1, e)) return -1;
    qs_train_init(&r->m, 1);
    if (qs_llm_grads_new(&r->g, &r->m, e) || qs_adamw_new(&r->opt, &r->m, e)) return -1;
    if (!(r->s = qs_llm_train_state_new(&o->c, o->batch, o->c.ctx, e))) return -1;
    if (strcmp(name, "fp32") && (qs_llm_recipe_preset(name, &rc, e) || qs_llm_train_state_set_recipe(r->s, &rc, e)))
        return -1;
    return 0;
}

/* One optimizer step as `qscope train` takes it; st >= 0 is timed into ts[st]. */
static int run_step(const bopts *o, run_t *r, const int32_t *tok, int st, qs_err *e)
{
    static const qs_adamw_opts ao = {0.9, 0.95, 1e-8, 0.1};
    double t0 = qs_now_s(), c0 = cpu_s();
    qs_llm_grads_zero(&r->g);
    double tz = qs_now_s();
    if (qs_llm_loss_grad(&r->m, r->s, tok, o->batch, o->c.ctx, &r->loss, &r->g, e)) return -1;
    double t1 = qs_now_s(), gn = qs_llm_grads_norm(&r->g);
    if (qs_adamw_step(&r->opt, &r->m, &r->g, gn > 1 ? 1 / gn : 1, 1e-3, &ao, e)) return -1;
    double t2 = qs_now_s();
    if (st >= 0) {
        r->ts[st] = t2 - t0;
        r->cs[st] = cpu_s() - c0;
        r->opt_t += (tz - t0) + (t2 - t1);   /* zeroing, norm and AdamW */
    }
    return 0;
}

/* Every recipe's steps, interleaved (round k times step k of each recipe, so that a machine whose load
** changes during the run slows every recipe alike), after one untimed warm-up step each. */
static int time_recipes(const bopts *o, char **names, int nr, const int32_t *tok, rec_t *out, qs_err *e)
{
    run_t *runs = calloc((size_t)nr, sizeof *runs);
    int rc = -1;
    if (!runs) return qs_fail(e, "out of memory");
    for (int i = 0; i < nr; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].deterministic = -1;
        if (run_new(o, names[i], &runs[i], e)) goto done;
        if (!strcmp(names[i], "fp32")) {   /* the same pass twice on the same weights: the same bits */
            double l1, l2;
            if (qs_llm_loss_grad(&runs[i].m, runs[i].s, tok, o->batch, o->c.ctx, &l1, &runs[i].g, e) ||
                qs_llm_loss_grad(&runs[i].m, runs[i].s, tok, o->batch, o->c.ctx, &l2, &runs[i].g, e)) goto done;
            out[i].deterministic = !memcmp(&l1, &l2, sizeof l1);
        }
    }
    for (int st = -1; st < o->steps; st++)
        for (int i = 0; i < nr; i++) {
            if (st == 0) qs_llm_train_state_times_reset(runs[i].s);
            if (run_step(o, &runs[i], tok, st, e)) goto done;
        }
    for (int i = 0; i < nr; i++) {
        rec_t *r = &out[i];
        qs_llm_train_state_times(runs[i].s, r->part);
        for (int k = 0; k < QS_LT_COUNT; k++) r->part[k] /= o->steps;
        r->opt = runs[i].opt_t / o->steps;
        r->loss = runs[i].loss;
        r->step_med = median(runs[i].ts, o->steps);
        r->step_min = runs[i].ts[0];
        r->cpu_med = median(runs[i].cs, o->steps);
    }
    rc = 0;
done:
    for (int i = 0; i < nr; i++) run_free(&runs[i]);
    free(runs);
    return rc;
}

static int parse(int argc, char **argv, bopts *o)
{
    int heads = 4, kv = 0, ffn = 0, layers = 4, dim = 256, ctx = 128;
    o->batch = 8;
    o->steps = 0;
    o->recipes = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int *ip = !strcmp(a, "--layers") ? &layers : !strcmp(a, "--dim") ? &dim : !strcmp(a, "--heads") ? &heads
                  : !strcmp(a, "--kv-heads") ? &kv : !strcmp(a, "--ffn") ? &ffn : !strcmp(a, "--ctx") ? &ctx
                  : !strcmp(a, "--batch") ? &o->batch : !strcmp(a, "--steps") ? &o->steps : NULL;
        if (ip && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v <= 0 || v > 1 << 20) return qs_cli_usage("bench", "%s wants a positive integer, not '%s'", a, argv[i]);
            *ip = (int)v;
        } else if (!strcmp(a, "--recipes") && i + 1 < argc) o->recipes = argv[++i];
        else if (!strcmp(a, "--quick")) o->quick = 1;
        else if (!strcmp(a, "--json")) o->json = 1;
        else return qs_cli_usage("bench", "unexpected argument '%s'", a);
    }
    if (!o->recipes) o->recipes = o->quick ? "fp32,mxfp4" : "fp32,bf16,mxfp8,mxfp4,nvfp4,hif4";
    if (!o->steps) o->steps = o->quick ? 3 : 10;
    o->square = o->quick ? 1024 : 2048;
    if (dim % heads) return qs_cli_usage("bench", "--dim %d is not a multiple of --heads %d", dim, heads);
    o->c = (qs_llm_cfg){.n_layer = layers, .dim = dim, .n_head = heads, .n_kv_head = kv ? kv : heads, .head_dim = dim / heads,
                        .ffn = ffn ? ffn : 4 * dim, .vocab = 256, .ctx = ctx, .rope_base = 10000.0f, .eps = 1e-5f, .rope_neox = 1};
    qs_err e = {{0}};
    if (qs_llm_cfg_check(&o->c, &e)) return qs_cli_usage("bench", "bad shape: %s", e.msg);
    return 0;
}

static const char *const part_names[QS_LT_COUNT] = {"fwd_gemm", "bwd_gemm", "quant", "attention", "rows", "head"};

static void print_text(qs_cli *cli, json_t *out)
{
    json_t *sh = json_object_get(out, "shape");
    printf("%sbench train%s: %lld layers, dim %lld, %lld heads, ffn %lld, ctx %lld, batch %lld, vocab 256 "
           "(%.2fM parameters); %lld steps per recipe; %lld OpenBLAS thread(s)\n", qs_c_bold(cli), qs_c_off(cli),
           (long long)json_integer_value(json_object_get(sh, "layers")), (long long)json_integer_value(json_object_get(sh, "dim")),
           (long long)json_integer_value(json_object_get(sh, "heads")), (long long)json_integer_value(json_object_get(sh, "ffn")),
           (long long)json_integer_value(json_object_get(sh, "ctx")), (long long)json_integer_value(json_object_get(out, "batch")),
           json_real_value(json_object_get(out, "params")) / 1e6, (long long)json_integer_value(json_object_get(out, "steps")),
           (long long)json_integer_value(json_object_get(out, "threads")));
    printf("SGEMM %lld^3: %.1f GFLOP/s;  the model's GEMMs (one step's shapes): %.1f GFLOP/s\n",
           (long long)json_integer_value(json_object_get(out, "square_n")), json_real_value(json_object_get(out, "sgemm_square_gflops")),
           json_real_value(json_object_get(out, "sgemm_model_gflops")));
    printf("%s%-8s %8s %8s %9s %8s %6s %6s %6s %6s %8s %6s  %s%s\n", qs_c_head(cli), "RECIPE", "STEP ms", "BEST ms",
           "tok/s", "GFLOP/s", "SGEMM", "best", "xfp32", "best", "CPU ms", "SGEMM",
           "fwd/bwd GEMM, quant, attn, rows, head, optimizer (ms)", qs_c_off(cli));
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(out, "recipes"), i, r) {
        json_t *p = json_object_get(r, "parts_ms");
        printf("%-8s %8.1f %8.1f %9.0f %8.1f %5.0f%% %5.0f%% %6.2f %6.2f %8.1f %5.0f%%  %.1f/%.1f, %.1f, %.1f, %.1f, %.1f, %.1f\n",
               json_string_value(json_object_get(r, "recipe")), json_real_value(json_object_get(r, "step_ms")),
               json_real_value(json_object_get(r, "best_ms")), json_real_value(json_object_get(r, "tokens_per_s")),
               json_real_value(json_object_get(r, "model_gflops")), 100 * json_real_value(json_object_get(r, "of_sgemm")),
               100 * json_real_value(json_object_get(r, "best_of_sgemm")), json_real_value(json_object_get(r, "vs_fp32")),
               json_real_value(json_object_get(r, "best_vs_fp32")), json_real_value(json_object_get(r, "cpu_ms")),
               100 * json_real_value(json_object_get(r, "cpu_of_sgemm")), json_real_value(json_object_get(p, "fwd_gemm")),
               json_real_value(json_object_get(p, "bwd_gemm")), json_real_value(json_object_get(p, "quant")),
               json_real_value(json_object_get(p, "attention")), json_real_value(json_object_get(p, "rows")),
               json_real_value(json_object_get(p, "head")), json_real_value(json_object_get(p, "optimizer")));
    }
    int any = 0;
    json_array_foreach(json_object_get(out, "recipes"), i, r) {   /* the target's ratio, said plainly */
        json_t *v = json_object_get(r, "vs_fp32"), *c = json_object_get(r, "cpu_vs_fp32");
        if (!json_is_real(v) || !strcmp(json_string_value(json_object_get(r, "recipe")), "fp32")) continue;
        printf("%s%s / fp32 step: %.2fx (median wall), %.2fx (CPU)", any++ ? "; " : "",
               json_string_value(json_object_get(r, "recipe")), json_real_value(v), json_is_real(c) ? json_real_value(c) : NAN);
    }
    if (any) printf("  (issue 26: FP4 recipes <= 1.3x)\n");
    printf("model FLOPs = 6 x parameters x tokens; SGEMM: of the square product's rate; median step of %lld, recipes "
           "interleaved (best: the fastest step); CPU ms: process CPU time per step (all threads, OpenBLAS's spinning "
           "included), its SGEMM %% against the square product's FLOPs per CPU-second\n",
           (long long)json_integer_value(json_object_get(out, "steps")));
}

int qs_bench_train(qs_cli *cli, int argc, char **argv)
{
    bopts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    const int R = o.batch * o.c.ctx, T = o.c.ctx;
    int32_t *tok = malloc((size_t)o.batch * (T + 1) * sizeof *tok);
    if (!tok) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    uint64_t z = 1;
    for (size_t i = 0; i < (size_t)o.batch * (T + 1); i++) {   /* deterministic bytes (an LCG) */
        z = z * 6364136223846793005ULL + 1442695040888963407ULL;
        tok[i] = (int32_t)(z >> 56);
    }
    double gf_model, t_model = time_model_gemms(&o.c, R, o.quick ? 3 : 5, &gf_model);
    double cpu_sq = INFINITY, t_sq = time_square(o.square, o.quick ? 3 : 5, &cpu_sq);
    double sq_gflops = 2.0 * o.square * o.square * o.square / t_sq / 1e9;
    json_t *out = json_object(), *recs = json_array();
    json_object_set_new(out, "shape", json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "layers", o.c.n_layer, "dim", o.c.dim,
                                                "heads", o.c.n_head, "kv_heads", o.c.n_kv_head, "ffn", o.c.ffn, "ctx", T,
                                                "vocab", o.c.vocab));
    json_object_set_new(out, "batch", json_integer(o.batch));
    json_object_set_new(out, "steps", json_integer(o.steps));
    json_object_set_new(out, "threads", json_integer(qs_blas_threads()));
    json_object_set_new(out, "square_n", json_integer(o.square));
    json_object_set_new(out, "sgemm_square_gflops", json_real(sq_gflops));
    json_object_set_new(out, "sgemm_model_gflops", json_real(gf_model / t_model / 1e9));
    double params = 0, fp32_step = NAN;
    int bad = 0;
    char list[1024], *names[64];
    int nr = 0;
    snprintf(list, sizeof list, "%s", o.recipes);
    for (char *sv, *name = strtok_r(list, ",", &sv); name && nr < 64; name = strtok_r(NULL, ",", &sv)) names[nr++] = name;
    rec_t recs_t[64];
    qs_err e = {{0}};
    if (time_recipes(&o, names, nr, tok, recs_t, &e)) {
        json_decref(out); json_decref(recs); free(tok);
        return qs_cli_error(strstr(e.msg, "unknown training recipe") ? QS_EXIT_USAGE : QS_EXIT_ERR, "bench train: %s", e.msg);
    }
    double t_sq2 = time_square(o.square, o.quick ? 3 : 5, &cpu_sq);   /* again after the recipes: the better of the two */
    if (t_sq2 < t_sq) t_sq = t_sq2;
    sq_gflops = 2.0 * o.square * o.square * o.square / t_sq / 1e9;
    json_object_set_new(out, "sgemm_square_gflops", json_real(sq_gflops));
    double sq_cpu_gflops = 2.0 * o.square * o.square * o.square / cpu_sq / 1e9;   /* per CPU-second */
    json_object_set_new(out, "sgemm_square_gflops_per_cpu_s", json_real(sq_cpu_gflops));
    qs_llm_model pm = {0};
    if (!qs_llm_alloc(&pm, &o.c, 1, &e)) { params = n_params(&pm); qs_llm_free(&pm); }
    double fp32_best = NAN, fp32_cpu = NAN;
    for (int i = 0; i < nr; i++)
        if (!strcmp(names[i], "fp32")) {
            fp32_step = recs_t[i].step_med;
            fp32_best = recs_t[i].step_min;
            fp32_cpu = recs_t[i].cpu_med;
        }
    for (int i = 0; i < nr; i++) {
        const rec_t *r = &recs_t[i];
        if (r->deterministic == 0 || !isfinite(r->loss)) bad = 1;
        double fl = 6.0 * params * R;
        json_t *p = json_object();
        for (int k = 0; k < QS_LT_COUNT; k++) json_object_set_new(p, part_names[k], json_real(1e3 * r->part[k]));
        json_object_set_new(p, "optimizer", json_real(1e3 * r->opt));
        json_t *j = json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:o}", "recipe", names[i], "step_ms", 1e3 * r->step_med,
                              "best_ms", 1e3 * r->step_min, "tokens_per_s", R / r->step_med, "model_gflops",
                              fl / r->step_med / 1e9, "of_sgemm", fl / r->step_med / 1e9 / sq_gflops, "best_of_sgemm",
                              fl / r->step_min / 1e9 / sq_gflops, "loss", r->loss, "parts_ms", p);
        json_object_set_new(j, "vs_fp32", isnan(fp32_step) ? json_null() : json_real(r->step_med / fp32_step));
        json_object_set_new(j, "best_vs_fp32", isnan(fp32_best) ? json_null() : json_real(r->step_min / fp32_best));
        json_object_set_new(j, "cpu_ms", json_real(1e3 * r->cpu_med));
        json_object_set_new(j, "cpu_vs_fp32", isnan(fp32_cpu) ? json_null() : json_real(r->cpu_med / fp32_cpu));
        json_object_set_new(j, "cpu_of_sgemm", json_real(fl / r->cpu_med / 1e9 / sq_cpu_gflops));
        if (r->deterministic >= 0) json_object_set_new(j, "rerun_identical", json_boolean(r->deterministic));
        json_array_append_new(recs, j);
    }
    json_object_set_new(out, "params", json_real(params));
    json_object_set_new(out, "recipes", recs);
    if (o.json) {
        char *s = json_dumps(out, JSON_INDENT(2));
        puts(s);
        free(s);
    } else print_text(cli, out);
    if (bad) fprintf(stderr, "qscope: bench train: a rerun differed or a loss is not finite\n");
    json_decref(out);
    free(tok);
    return bad ? QS_EXIT_ERR : QS_EXIT_OK;
}
