/*
** `qscope bench eval`: the speed of `llm eval` (issue 28, "Must reach"), side by side in one run.
**
** On one model and text: OpenBLAS SGEMM times the model's own weight products (every layer's seven
** matrices and the output head, ctx rows each, layer after layer, with the library's threads), then
** `llm eval`'s computation (analysis/llm_eval.h) runs the reference and the configurations over the same
** chunks, reps times.  A variant's time is its forward passes plus its head and statistics (the
** reference's computed once per chunk and shared, as in `llm eval`).  FLOPs are 2 x matrix parameters
** per token, so "% SGEMM" is the variant's rate over SGEMM's rate on the same products; "x ref" is a
** configuration's time over the reference's.  With a peer (--peer PATH to llama.cpp's
** llama-perplexity, or QS_LLAMA_PERPLEXITY), the peer runs on the same GGUF, text, context, chunks and
** threads, and its evaluation's tokens/s (its own log's time stamps) is compared with the reference's.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <cblas.h>

#include "bench_util.h"
#include "cli.h"
#include "llm_text_run.h"
#include "../../analysis/llm_eval.h"
#include "../../analysis/llm_eval_service.h"
#include "../../kernels/blas_threads.h"
#include "../../kernels/llm_wfly.h"
#include "../../kernels/llm_wtype.h"
#include "../../kernels/simd.h"

#define CMD "bench eval"
#define MAX_CFG 16

static const char *const kDefaultCfg[] = {"w=mxfp4", "a=mxfp4", "kv=fp8_e4m3", "a=int8:gran=block:block=32,kv=fp16"};

typedef struct bopts {
    const char *model, *text, *peer;
    int ctx, chunks, reps, ncfg;
    const char *cfg[MAX_CFG];
    qs_llm_weights weights;   /* --weights (as llm eval's) */
} bopts;

/* Matrix parameters: every layer's seven products and the output head. */
static double matrix_params(const qs_llm_cfg *c)
{
    const double d = c->dim, q = (double)c->n_head * c->head_dim, kv = (double)c->n_kv_head * c->head_dim, f = c->ffn;
    return c->n_layer * (2 * q * d + 2 * kv * d + 3 * f * d) + (double)c->vocab * d;
}

/* CPU seconds of the whole process: with one thread, steadier than wall time on a shared machine. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The same with typed weights (--weights mapped): each matrix of layer 0 and the head widened in turn and
** timed alone (best of reps), the layer's times counted n_layer times (every layer has its shapes), so
** that no FP32 copy of the model is made. */
static double sgemm_pass_typed(const qs_llm_model *m, int rows, int reps, double *cpu)
{
    const qs_llm_cfg *c = &m->c;
    const int q = c->n_head * c->head_dim, F = c->ffn;
    const size_t wide = (size_t)(F > c->vocab ? F : c->vocab), xin = (size_t)(F > q ? F : q);
    float *x = malloc((size_t)rows * xin * sizeof(float)), *y = malloc((size_t)rows * wide * sizeof(float));
    double tot = 0, tcpu = 0;
    for (size_t i = 0; x && i < (size_t)rows * xin; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (int i = 0; x && y && i < 8; i++) {
        const qs_wt *t = i < 7 ? &m->L[0].tw[i] : m->tw_out;
        float *W = qs_wt_widen(t);
        if (!W) { tot = 0; break; }
        double best = 1e30, bc = 1e30;
        for (int r = 0; r <= reps; r++) {
            double t0 = qs_now_s(), c0 = cpu_s();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, t->rows, t->cols, 1.0f, x, t->cols, W, t->cols, 0.0f, y, t->rows);
            double dt = qs_now_s() - t0, dc = cpu_s() - c0;
            if (r && dt < best) best = dt;
            if (r && dc < bc) bc = dc;
        }
        free(W);
        qs_wt_release(t);
        tot += best * (i < 7 ? c->n_layer : 1);
        tcpu += bc * (i < 7 ? c->n_layer : 1);
    }
    free(x); free(y);
    *cpu = tcpu;
    return tot;
}

/* Seconds of one pass of SGEMM over the model's products at `rows` rows (best of reps; *cpu its CPU seconds). */
static double sgemm_pass(const qs_llm_model *m, int rows, int reps, double *cpu)
{
    if (m->L[0].tw) return sgemm_pass_typed(m, rows, reps, cpu);
    const qs_llm_cfg *c = &m->c;
    const int d = c->dim, q = c->n_head * c->head_dim, kv = c->n_kv_head * c->head_dim, F = c->ffn;
    const size_t wide = (size_t)(F > c->vocab ? F : c->vocab);
    float *x = malloc((size_t)rows * (F > q ? F : q) * sizeof(float)), *y = malloc((size_t)rows * wide * sizeof(float));
    if (!x || !y) { free(x); free(y); return 0; }
    for (size_t i = 0; i < (size_t)rows * (F > q ? F : q); i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    double best = 1e30;
    *cpu = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t0 = qs_now_s(), c0 = cpu_s();
        for (int l = 0; l < c->n_layer; l++) {
            const qs_llm_layer *L = &m->L[l];
            const float *W[7] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
            if (!L->w_gate) { W[4] = L->moe.gate; W[5] = L->moe.up; W[6] = L->moe.down; }   /* experts: expert 0 */
            const int in[7] = {d, d, d, q, d, d, F}, out[7] = {q, kv, kv, d, F, F, d};
            for (int i = 0; i < 7; i++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out[i], in[i], 1.0f, x, in[i], W[i], in[i], 0.0f, y, out[i]);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, c->vocab, d, 1.0f, x, d, m->output, d, 0.0f, y, c->vocab);
        double t = qs_now_s() - t0, tc = cpu_s() - c0;
        if (r && t < best) best = t;   /* the first pass warms up */
        if (r && tc < *cpu) *cpu = tc;
    }
    free(x); free(y);
    return best;
}

static int cmp_d(const void *a, const void *b) { return qs_bench_cmp(a, b); }

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Seconds of a llama.cpp log line's time stamp ("M.SS.mmm.uuu I ..."), or -1. */
static double stamp(const char *line)
{
    int mi, se, ms, us;
    return sscanf(line, "%d.%d.%d.%d", &mi, &se, &ms, &us) == 4 ? mi * 60.0 + se + ms * 1e-3 + us * 1e-6 : -1;
}

/* llama-perplexity on the same GGUF/text/ctx/chunks/threads: tokens/s of its evaluation (from the line
** "calculating perplexity" to "Final estimate", tokenization and load excluded), or 0. */
static double run_peer(const bopts *o, int chunks, int threads, double *wall)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' -m '%s' -f '%s' -c %d -t %d --chunks %d 2>&1", o->peer, o->model, o->text, o->ctx,
             threads, chunks);
    double t0 = qs_now_s(), a = -1, b = -1;
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    char line[4096];
    while (fgets(line, sizeof line, p)) {
        if (strstr(line, "calculating perplexity")) a = stamp(line);
        if (strstr(line, "Final estimate")) b = stamp(line);
    }
    int st = pclose(p);
    *wall = qs_now_s() - t0;
    if (st != 0 || a < 0 || !(b > a)) return 0;
    return (double)chunks * o->ctx / (b - a);
}

static int parse(int argc, char **argv, bopts *o)
{
    *o = (bopts){NULL, "data/text/persuasion.txt", getenv("QS_LLAMA_PERPLEXITY"), 512, 4, 3, 0, {0}, QS_LLM_WEIGHTS_F32};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return qs_cli_usage(CMD, "unexpected argument '%s' (options take a value)", a);
        i++;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--text")) o->text = v;
        else if (!strcmp(a, "--peer")) o->peer = v;
        else if (!strcmp(a, "--config")) {
            if (o->ncfg == MAX_CFG) return qs_cli_usage(CMD, "at most %d --config", MAX_CFG);
            o->cfg[o->ncfg++] = v;
        } else if (!strcmp(a, "--ctx")) { if (qs_cli_parse_int(CMD, "--ctx", v, 2, 1 << 16, &o->ctx)) return QS_EXIT_USAGE; }
        else if (!strcmp(a, "--chunks")) { if (qs_cli_parse_int(CMD, "--chunks", v, 1, 1 << 20, &o->chunks)) return QS_EXIT_USAGE; }
        else if (!strcmp(a, "--reps")) { if (qs_cli_parse_int(CMD, "--reps", v, 1, 1000, &o->reps)) return QS_EXIT_USAGE; }
        else if (!strcmp(a, "--weights")) {
            if (!strcmp(v, "mapped")) o->weights = QS_LLM_WEIGHTS_MAPPED;
            else if (!strcmp(v, "f32")) o->weights = QS_LLM_WEIGHTS_F32;
            else if (!strcmp(v, "auto")) o->weights = QS_LLM_WEIGHTS_AUTO;
            else return qs_cli_usage(CMD, "--weights is mapped, f32 or auto, not '%s'", v);
        }
        else return qs_cli_usage(CMD, "unknown option '%s'", a);
    }
    if (!o->model) return qs_cli_usage(CMD, "--model PATH is required");
    if (!o->ncfg)
        for (size_t i = 0; i < sizeof kDefaultCfg / sizeof *kDefaultCfg; i++) o->cfg[o->ncfg++] = kDefaultCfg[i];
    if (o->peer && !o->peer[0]) o->peer = NULL;
    return 0;
}

/* Variants as `llm eval` makes them (per-row scaled casts, its default). */
static int make_variants(const qs_llm_model *ref, const bopts *o, qs_eval_cfg *cfg, qs_eval_variant *var)
{
    qs_err e = {{0}};
    for (int i = 0; i < o->ncfg; i++) {
        int rc = qs_llm_parse_config(CMD, "--config", o->cfg[i], &cfg[i]);
        if (rc) return rc;
        if (qs_llm_xspec_any(&cfg[i].xs)) return qs_cli_usage(CMD, "--config: rot= and rht= are supported by llm eval only");
        cfg[i].m = ref;
        if (cfg[i].has_w && qs_eval_cfg_round(&cfg[i], ref, 1, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
        var[i].m = cfg[i].m;
        var[i].nx = (qs_llm_numerics){cfg[i].has_a ? &cfg[i].a : NULL, cfg[i].resq, cfg[i].has_kv ? &cfg[i].kv : NULL, 1, NULL, NULL};
    }
    return 0;
}

static void print_row(const char *lab, double best, double med, double ntok, double fl, double sg_rate, double ref)
{
    const double tps = ntok / best, gf = tps * fl * 1e-9;
    printf("%-40s %9.1f %9.1f %9.1f %8.0f%% %8.2fx\n", lab, tps, ntok / med, gf, 100 * gf / sg_rate, best / ref);
}

int qs_bench_eval(qs_cli *cli, int argc, char **argv)
{
    (void)cli;
    bopts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    qs_llm_text_run t;
    memset(&t, 0, sizeof t);
    if ((rc = qs_llm_text_run_open_w(&t, CMD, o.model, o.text, o.ctx, o.chunks, 0, NULL, o.weights))) return rc;
    qs_eval_cfg cfg[MAX_CFG];
    qs_eval_variant var[MAX_CFG];
    memset(cfg, 0, sizeof cfg);
    memset(var, 0, sizeof var);
    double *secs = NULL;
    if ((rc = make_variants(&t.f.m, &o, cfg, var))) goto done;
    const qs_llm_cfg *c = &t.f.m.c;
    const int nv = 1 + o.ncfg, threads = qs_blas_threads(), chunks = t.su.nchunks;
    const double ntok = (double)t.su.ctx * chunks, fl = 2 * matrix_params(c);
    double sg_cpu = 0;
    const double sg = sgemm_pass(&t.f.m, t.su.ctx, 3, &sg_cpu), sg_rate = fl * t.su.ctx / sg * 1e-9;
    printf("model %s: ctx %d, %d chunks of %s (%.0f tokens), %d threads, SIMD %s, OpenBLAS core %s\n",
           qs_llm_title(&t.f), t.su.ctx, chunks, o.text, ntok, threads, qs_simd_name(qs_simd_level()), openblas_get_corename());
    printf("FLOPs = 2 x %.4g matrix parameters per token; OpenBLAS SGEMM on the model's products (%d layers x 7 + head, "
           "%d rows): %.1f GFLOP/s (%.3f s per chunk; %.3f CPU s)\n", fl / 2, c->n_layer, t.su.ctx, sg_rate, sg, sg_cpu);
    printf("weights: %s\n", t.weights);
    if (!(secs = calloc((size_t)(nv + 2) * o.reps, sizeof *secs))) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
    const int hwm_reset = qs_peak_rss_reset() == 0;   /* the evaluation's peak, not SGEMM's buffers' */
    double *ref_wall = secs + (size_t)nv * o.reps, *ref_cpu = ref_wall + o.reps;
    for (int r = 0; r < o.reps; r++)   /* a reference-only run (as `llm eval` without --config), then all variants */
        for (int all = 0; all < 2; all++) {
            qs_eval_out out;
            qs_err e = {{0}};
            double c0 = cpu_s();
            if (qs_llm_eval_run(&t.f.m, var, NULL, all ? o.ncfg : 0, t.ids, (size_t)t.ntok, &t.su, NULL, NULL, &out, &e)) {
                rc = qs_cli_err(QS_EXIT_ERR, &e);
                goto done;
            }
            if (!all) {
                ref_cpu[r] = cpu_s() - c0;
                ref_wall[r] = out.var[0].fwd_seconds + out.var[0].head_seconds;
            } else
                for (int v = 0; v < nv; v++) secs[(size_t)v * o.reps + r] = out.var[v].fwd_seconds + out.var[v].head_seconds;
            qs_eval_out_free(&out);
        }
    const double rw = median(ref_wall, o.reps), rwb = ref_wall[0], rc_med = median(ref_cpu, o.reps), rcb = ref_cpu[0];
    printf("reference-only run (llm eval without --config): %.1f tok/s best, %.1f median = %.0f%% of SGEMM; "
           "CPU time: %.1f tok/s best, %.1f median = %.0f%% of SGEMM's CPU rate\n", ntok / rwb, ntok / rw,
           100 * fl * ntok / rwb * 1e-9 / sg_rate, ntok / rcb, ntok / rc_med, 100 * (sg_cpu / t.su.ctx) / (rcb / ntok));
    printf("%-40s %9s %9s %9s %9s %9s\n", "variant (best of reps; median tok/s)", "tok/s", "med", "GFLOP/s", "% SGEMM", "x ref");
    double best[MAX_CFG + 1], med[MAX_CFG + 1];
    for (int v = 0; v < nv; v++) {
        double *s = secs + (size_t)v * o.reps;
        med[v] = median(s, o.reps);
        best[v] = s[0];   /* sorted by median() */
        char lab[300];
        snprintf(lab, sizeof lab, v ? "%s" : t.f.nwmaps ? "reference (mapped weights)" : "reference fp32", v ? cfg[v - 1].label : "");
        print_row(lab, best[v], med[v], ntok, fl, sg_rate, best[0]);
    }
    if (hwm_reset)
        printf("peak resident set of the evaluation runs (VmHWM): %.2f GiB\n", qs_peak_rss() / 1073741824.0);
    if (o.peer) {
        double wall = 0, ptps = run_peer(&o, chunks, threads, &wall);
        if (ptps > 0)
            printf("peer llama-perplexity (%s, -c %d -t %d --chunks %d): %.1f tok/s evaluating (%.1f s wall with load); "
                   "reference / peer = %.2fx\n", o.peer, t.su.ctx, threads, chunks, ptps, wall, ntok / best[0] / ptps);
        else printf("peer llama-perplexity (%s): no timing read (did it run? try it by hand)\n", o.peer);
    }
done:
    free(secs);
    qs_eval_cfgs_free(cfg, o.ncfg);
    qs_llm_text_run_free(&t);
    return rc;
}
