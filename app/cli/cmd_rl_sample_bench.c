/*
** `qscope bench rl --sample`: throughput of the batched sampler (analysis/llm_rollout.h,
** llm_rollout_batch) with 64 sequences decoding together (8 prompts of different lengths x 8
** samples), on the SmolLM2 model of `make data` (or --model) and on a small synthetic model, for fp32
** and a few rollout configs: generated tokens/s and the GEMM FLOP/s of the run as a fraction of
** OpenBLAS SGEMM over the same matrices at M = 64, timed in the same run just before each config
** (issue 27, "Must reach"), and of OpenBLAS SGEMM on square 2048^3 matrices measured once per model
** (the M = 64 reference moves with the load of a shared machine; the CPU seconds and the load average
** of each config are reported next to it, and the ratio per CPU second of the rollout and of SGEMM).  GEMM FLOP/s count the weight products of every forwarded
** row and every row of logits over the whole call (prefill, attention, rounding and sampling included
** in the time).
*/
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "bench_util.h"
#include "cli.h"
#include "../../analysis/llm_rollout.h"
#include "../../kernels/format.h"
#include "../../kernels/llm_gemm.h"
#include "../../kernels/llm_rows.h"
#include "../../store/llm_load.h"

int qs_bench_rl_sample(qs_cli *cli, int quick, int json, const char *model);

enum { NPROMPT = 8, GROUP = 8 };

typedef struct scfg { const char *name, *w, *a, *kv; qs_llm_resq resq; } scfg;
static const scfg kCfg[] = {
    {"fp32", NULL, NULL, NULL, QS_RESQ_NONE},
    {"w=mxfp4,a=mxfp4", "mxfp4", "mxfp4", NULL, QS_RESQ_NONE},
    {"w=mxfp4,a=mxfp4,resq=dense", "mxfp4", "mxfp4", NULL, QS_RESQ_DENSE},
    {"w=hif4,a=hif4", "hif4", "hif4", NULL, QS_RESQ_NONE},
    {"kv=fp8_e4m3", NULL, NULL, "fp8_e4m3", QS_RESQ_NONE},
};
#define NCFG (int)(sizeof kCfg / sizeof kCfg[0])

/* GEMM FLOPs of one forwarded row through the layers, and of one row of logits. */
static double layer_flops(const qs_llm_cfg *c)
{
    double d = c->dim, kv = (double)c->n_kv_head * c->head_dim, f = c->ffn, qd = (double)qs_llm_q_dim(c);
    return 2.0 * c->n_layer * (qd * d * 2 + kv * d * 2 + 3 * f * d);
}

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One decode step's weight products at M rows, OpenBLAS SGEMM and qscope's GEMM alternately, best
** seconds of each over reps (and the process CPU seconds of SGEMM's best). */
static void step_gemms(const qs_llm_model *m, int M, int reps, double *t_blas, double *t_ours, double *cpu_blas)
{
    const qs_llm_cfg *c = &m->c;
    int d = c->dim, kv = c->n_kv_head * c->head_dim, f = c->ffn, qd = (int)qs_llm_q_dim(c), V = c->vocab;
    int wide = f > d ? f : d;
    if (qd > wide) wide = qd;
    float *x = malloc((size_t)M * wide * sizeof(float)), *y = malloc((size_t)M * (V > 2 * f ? V : 2 * f) * sizeof(float));
    *t_blas = *t_ours = *cpu_blas = INFINITY;
    if (!x || !y) { free(x); free(y); return; }
    for (size_t i = 0; i < (size_t)M * wide; i++) x[i] = (float)sin((double)i);
    for (int r = 0; r < reps; r++)
        for (int who = 0; who < 2; who++) {
            double t0 = qs_now_s(), c0 = cpu_now();
            for (int l = 0; l <= c->n_layer; l++) {
                const qs_llm_layer *L = l < c->n_layer ? &m->L[l] : NULL;
                const float *W[7] = {L ? L->wq : m->output, L ? L->wk : 0, L ? L->wv : 0, L ? L->wo : 0, L ? L->w_gate : 0,
                                     L ? L->w_up : 0, L ? L->w_down : 0};
                const int N[7] = {L ? qd : V, kv, kv, d, f, f, d}, K[7] = {d, d, d, qd, d, d, f};
                for (int i = 0; i < (L ? 7 : 1); i++) {
                    if (who) qs_llm_gemm_nt(y, x, W[i], M, K[i], N[i], qs_llm_threads());
                    else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N[i], K[i], 1.0f, x, K[i], W[i], K[i], 0.0f, y, N[i]);
                }
            }
            double t = qs_now_s() - t0;
            double *best = who ? t_ours : t_blas;
            if (t < *best) { *best = t; if (!who) *cpu_blas = cpu_now() - c0; }
        }
    free(x); free(y);
}

/* OpenBLAS SGEMM on square 2048 x 2048 matrices, best of three: the machine's GEMM rate in the same
** run, free of the small-M effects of the step's shapes. */
static double square_sgemm(void)
{
    enum { N = 2048 };
    float *a = malloc((size_t)N * N * sizeof(float)), *b = malloc((size_t)N * N * sizeof(float)),
          *c = malloc((size_t)N * N * sizeof(float));
    double best = INFINITY;
    if (a && b && c) {
        for (size_t i = 0; i < (size_t)N * N; i++) { a[i] = (float)sin((double)i); b[i] = (float)cos((double)i); }
        for (int r = 0; r < 3; r++) {
            double t0 = qs_now_s();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
            double t = qs_now_s() - t0;
            if (t < best) best = t;
        }
    }
    free(a); free(b); free(c);
    return 2.0 * N * N * N / best;
}

/* A small random model (a GRPO task policy's size): 4 layers, dim 256, 8/4 heads, ffn 768, vocab 2048. */
static int small_model(qs_llm_model *m, qs_err *e)
{
    qs_llm_cfg c = {.n_layer = 4, .dim = 256, .n_head = 8, .n_kv_head = 4, .head_dim = 32, .ffn = 768, .vocab = 2048,
                    .ctx = 512, .rope_base = 10000.0f, .eps = 1e-5f};
    if (qs_llm_alloc(m, &c, 1, e)) return -1;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < m->arena_len; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        m->arena[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 0.1f;
    }
    for (int i = 0; i < c.dim; i++) m->out_norm[i] = 1;
    for (int l = 0; l < c.n_layer; l++)
        for (int i = 0; i < c.dim; i++) m->L[l].attn_norm[i] = m->L[l].ffn_norm[i] = 1;
    return 0;
}

typedef struct sres { const char *cfg; double tok_s, gflops, frac, secs, cpu, load; long tokens; double uf_max; } sres;

/* The configs on one model: rows of results, the SGEMM reference first. */
static int bench_model(const char *name, const qs_llm_model *m, int quick, int json, json_t *out, qs_err *e)
{
    const int max_new = quick ? 16 : 64, S = NPROMPT * GROUP;
    /* best of two, or one when a run is long (a 135M model: about a minute on a shared 2-core machine) */
    const int reps = quick || layer_flops(&m->c) * S * max_new > 1e12 ? 1 : 2;
    prompt_t pr[NPROMPT];
    memset(pr, 0, sizeof pr);
    for (int p = 0; p < NPROMPT; p++) {   /* 16 .. 30 tokens: each sequence at its own position */
        pr[p].n = 16 + 2 * p;
        for (int t = 0; t < pr[p].n; t++) pr[p].ids[t] = (int32_t)((p * 7919 + t * 104729 + 17) % m->c.vocab);
    }
    double tb, to, tc;
    step_gemms(m, S, quick ? 2 : 5, &tb, &to, &tc);
    const double step = S * (layer_flops(&m->c) + 2.0 * m->c.dim * m->c.vocab), sgemm = step / tb, square = square_sgemm();
    json_t *rows = json_array();
    if (!json) {
        printf("\n%s: %d layers, dim %d, ffn %d, vocab %d; %d sequences (%d prompts of 16..30 tokens x %d samples), "
               "%d new tokens each, %d threads\n", name, m->c.n_layer, m->c.dim, m->c.ffn, m->c.vocab, S, NPROMPT, GROUP,
               max_new, qs_llm_threads());
        printf("  one decode step's GEMMs at M = %d: OpenBLAS SGEMM %.1f GFLOP/s, qscope's batch-independent GEMM %.1f "
               "GFLOP/s (%.0f%%); square SGEMM (2048^3) %.1f GFLOP/s\n", S, sgemm / 1e9, step / to / 1e9, 100 * tb / to,
               square / 1e9);
        printf("  %-30s %10s %12s %12s %11s %9s %9s %8s %8s %5s %13s\n", "rollout config", "tokens/s", "GEMM GFLOP/s",
               "SGEMM GFLOP/s", "% of SGEMM", "% square", "% CPU s", "secs", "CPU s", "load", "max underflow");
    }
    int rc = 0;
    for (int k = 0; k < NCFG && !rc; k++) {
        const scfg *c = &kCfg[k];
        qs_apply w = {0}, a = {0}, kv = {0};
        w.f = c->w ? qs_format_find(c->w) : NULL; a.f = c->a ? qs_format_find(c->a) : NULL; kv.f = c->kv ? qs_format_find(c->kv) : NULL;
        w.axis = a.axis = kv.axis = 1;
        if ((c->w && !w.f) || (c->a && !a.f) || (c->kv && !kv.f)) continue;   /* a format this build lacks */
        qs_llm_model q;
        const qs_llm_model *use = m;
        if (w.f) {
            if (qs_llm_clone(&q, m, e) || qs_llm_quantize_weights(&q, &w, 1, e)) { rc = -1; break; }
            use = &q;
        }
        qs_llm_numerics nx = {a.f ? &a : NULL, c->resq, kv.f ? &kv : NULL, 1, NULL, NULL};
        /* SGEMM again just before this config's runs: on a shared machine the load moves between configs */
        double tb1, to1, tc1;
        step_gemms(m, S, quick ? 2 : 3, &tb1, &to1, &tc1);
        const double sg = step / tb1, sg_cpu = step / tc1;   /* per CPU second: all threads' time */
        double best = INFINITY, ufm = 0, cpu = 0, la[1] = {-1};
        long tokens = 0, rowsf = 0;
        if (getloadavg(la, 1) < 1) la[0] = -1;
        for (int r = 0; r < reps && !rc; r++) {
            rollout_batch rb;
            double c0 = cpu_now();
            if (llm_rollout_batch(use, &nx, pr, NPROMPT, GROUP, max_new, -1, 1 + (uint64_t)r, NULL, &rb, e)) { rc = -1; break; }
            if (rb.secs < best) { best = rb.secs; tokens = rb.tokens; rowsf = rb.rows; cpu = cpu_now() - c0; }
            for (int l = 0; l <= use->c.n_layer; l++)
                for (int s = 0; s < QS_LLM_NLSITE; s++) ufm = fmax(ufm, llm_rollout_underflow(&rb, l, s));
            llm_rollout_batch_free(&rb);
        }
        if (use != m) qs_llm_free(&q);
        if (rc) break;
        /* logits rows: one per prompt (prefill) and one per decoded row */
        long prefill = 0;
        for (int p = 0; p < NPROMPT; p++) prefill += pr[p].n;
        double fl = rowsf * layer_flops(&m->c) + (double)(NPROMPT + rowsf - prefill) * 2.0 * m->c.dim * m->c.vocab;
        sres s = {c->name, tokens / best, fl / best / 1e9, fl / best / sg, best, cpu, la[0], tokens, ufm};
        if (!json)
            printf("  %-30s %10.1f %12.1f %12.1f %10.0f%% %8.0f%% %8.0f%% %8.2f %8.2f %5.1f %13.4f\n", s.cfg, s.tok_s,
                   s.gflops, sg / 1e9, 100 * s.frac, 100 * fl / best / square, 100 * fl / s.cpu / sg_cpu, s.secs, s.cpu,
                   s.load, s.uf_max);
        json_t *row = json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:I,s:f}", "config", s.cfg, "tokens_per_s", s.tok_s, "gemm_gflops",
                                s.gflops, "sgemm_gflops", sg / 1e9, "fraction_of_sgemm", s.frac, "seconds", s.secs, "tokens",
                                (json_int_t)s.tokens, "max_underflow", s.uf_max);
        json_object_set_new(row, "fraction_of_square_sgemm", json_real(fl / best / square));
        json_object_set_new(row, "cpu_seconds", json_real(s.cpu));
        /* the same ratio per CPU second (rollout's and SGEMM's process CPU time): what a loaded machine
        ** moves least, at one thread (OpenBLAS's threads also count their waits) */
        json_object_set_new(row, "fraction_of_sgemm_cpu", json_real(fl / s.cpu / sg_cpu));
        json_object_set_new(row, "load_average", json_real(s.load));
        json_array_append_new(rows, row);
    }
    json_array_append_new(out, json_pack("{s:s,s:i,s:i,s:i,s:i,s:f,s:f,s:o}", "model", name, "sequences", S, "max_new",
                                         max_new, "threads", qs_llm_threads(), "vocab", m->c.vocab, "sgemm_gflops",
                                         sgemm / 1e9, "qscope_gemm_gflops", step / to / 1e9, "configs", rows));
    json_object_set_new(json_array_get(out, json_array_size(out) - 1), "square_sgemm_gflops", json_real(square / 1e9));
    return rc;
}

int qs_bench_rl_sample(qs_cli *cli, int quick, int json, const char *model)
{
    (void)cli;
    qs_err e = {{0}};
    json_t *out = json_array();
    int rc = QS_EXIT_OK;
    const char *path = model ? model : QS_LLM_DEFAULT_MODEL;
    if (model || access(path, R_OK) == 0) {
        qs_llm_file f;
        if (qs_llm_load(path, &f, &e)) { json_decref(out); return qs_cli_err(QS_EXIT_ERR, &e); }
        if (qs_llm_cfg_core_only(&f.m.c, 0, "the batched decoder (bench rl --sample)", &e)) {   /* Qwen3, MoE, ... */
            qs_llm_file_free(&f);
            json_decref(out);
            return qs_cli_err(QS_EXIT_ERR, &e);
        }
        if (bench_model(f.name[0] ? f.name : path, &f.m, quick, json, out, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
        qs_llm_file_free(&f);
    } else if (!json)
        printf("%s: not found (make data): the small model only\n", path);
    qs_llm_model sm;
    if (rc == QS_EXIT_OK) {
        if (small_model(&sm, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
        else {
            if (bench_model("small synthetic model", &sm, quick, json, out, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
            qs_llm_free(&sm);
        }
    }
    if (rc == QS_EXIT_OK && json) {
        json_t *top = json_pack("{s:s,s:o}", "bench", "rl-sample", "models", out);
        char *s = json_dumps(top, JSON_INDENT(2));
        if (s) puts(s);
        free(s);
        json_decref(top);
    } else
        json_decref(out);
    return rc;
}
