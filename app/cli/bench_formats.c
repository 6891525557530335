/*
** `qscope bench formats`: fake-quantize and encode throughput of every format (or -f LIST), one
** and two threads, on 16M float32 values, next to memcpy bandwidth measured in the same run.
**
** NAME:sr in -f LIST times that format with stochastic rounding (seed 1; element i draws counter i).
** Input: Gaussian values (seed 1) scaled by 0.02 — a weight-like tensor — with 0.1% of values
** multiplied by 50 so that block scales vary.  Each figure is min and median of repeated runs.
** Correctness is checked in the same run: the 2-thread result must equal the 1-thread result bit
** for bit, and encode+decode must equal fakeq.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "bench_util.h"
#include "cli.h"
#include "../../datasets/gen.h"
#include "../../kernels/format.h"
#include "../../kernels/format_apply.h"
#include "../../kernels/pool.h"


typedef struct {
    const qs_format *f;
    qs_qopts o;
    const float *x;
    float *y;
    uint32_t *codes;
    uint8_t *meta;
    size_t n;
    int encode;
    int rc;
} job;

static void run_job(void *p, size_t half, int slot)
{
    (void)slot;
    job *j = (job *)p + half;
    qs_err e = {{0}};
    float ts;
    j->rc = j->encode ? j->f->encode(j->f, &j->o, j->x, j->n, j->codes, j->meta, &ts, &e)
                      : j->f->fakeq(j->f, &j->o, j->x, j->n, j->y, &e);
}

/* Time one operation with `threads` threads splitting the input at a block boundary. */
static double time_op(const qs_format *f, const qs_qopts *o, const float *x, float *y, uint32_t *codes, uint8_t *meta,
                      size_t n, int encode, int threads, int *rc)
{
    size_t blk = qs_format_block(f, o);
    if (!blk) blk = n;
    size_t half = n / 2 / 64 * 64;      /* multiple of every block size in use (16, 32, 64) */
    if (blk > 64) half = n / 2 / blk * blk;
    job j[2];
    for (int t = 0; t < 2; t++) {
        size_t s = t ? half : 0, k = threads == 1 ? (t ? 0 : n) : (t ? n - half : half);
        size_t bs = blk ? s / blk : 0;
        j[t] = (job){f, *o, x + s, y + s, codes + s, meta + bs * (size_t)f->meta_bytes, k, encode, 0};
        j[t].o.index0 = s;
    }
    double t0 = qs_now_s();
    if (threads == 1) run_job(j, 0, 0);
    else qs_pool_for(2, 2, run_job, j);   /* the halves on two threads of the pool */
    double dt = qs_now_s() - t0;
    *rc |= j[0].rc | j[1].rc;
    return dt;
}

int qs_bench_formats(qs_cli *cli, int quick, int json, const char *list)
{
    const size_t N = quick ? (1u << 20) : (1u << 24);
    const int REPS = quick ? 3 : 7;
    float *x = malloc(N * sizeof *x), *y1 = malloc(N * sizeof *y1), *y2 = malloc(N * sizeof *y2);
    float *y3 = malloc(N * sizeof *y3);
    uint32_t *codes = malloc(N * sizeof *codes);
    uint8_t *meta = malloc(N * 4 + 64);
    if (!x || !y1 || !y2 || !y3 || !codes || !meta) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    qs_gen_spec g;
    memset(&g, 0, sizeof g);
    qs_gen_defaults(&g);
    g.kind = QS_GEN_GAUSSIAN;
    g.seed = 1;
    g.rows = N;
    g.scale = 0.02;
    qs_gen_fill(&g, 0, N, x);
    for (size_t i = 0; i < N; i += 997) x[i] *= 50;
    double t[16];
    json_t *rows = json_array();
    /* memcpy bandwidth, the ceiling for any streaming kernel */
    for (int r = 0; r < REPS; r++) { double t0 = qs_now_s(); memcpy(y1, x, N * sizeof *x); t[r] = qs_now_s() - t0; }
    qsort(t, (size_t)REPS, sizeof *t, qs_bench_cmp);
    double memcpy_best = (double)N / t[0] / 1e6;
    int bad = 0;
    for (size_t i = 0, nf = qs_format_count(); i < 2 * nf; i++) {
        const qs_format *f = qs_format_at(i / 2);
        int sr = (int)(i % 2);            /* NAME:sr in the list: stochastic rounding (seed 1) */
        char name[64];
        snprintf(name, sizeof name, "%s%s", f->name, sr ? ":sr" : "");
        if (sr && !(f->round_modes & (1u << QS_RND_SR))) continue;
        if (list || sr) {
            char pat[512];
            snprintf(pat, sizeof pat, ",%s,", list ? list : "");
            char key[80];
            snprintf(key, sizeof key, ",%s,", name);
            if (!strstr(pat, key)) continue;
        }
        qs_qopts o = {0};
        if (sr) {
            o.round = QS_RND_SR;
            o.seed = 1;
        }
        if (f->has_tensor_scale) {   /* one global scale for the whole tensor, as quant does */
            float amax = 0;
            for (size_t k = 0; k < N; k++) if (fabsf(x[k]) > amax) amax = fabsf(x[k]);
            o.tensor_scale = amax;
        }
        if (f->block == 0) o.block = 4096;   /* int8/int4: per-4096-block scales so threads split */
        double res[2][2][2];                 /* [encode][threads-1][min, median] */
        int rc = 0;
        for (int enc = 0; enc < 2; enc++)
            for (int th = 1; th <= 2; th++) {
                for (int r = 0; r < REPS; r++) t[r] = time_op(f, &o, x, th == 1 ? y1 : y2, codes, meta, N, enc, th, &rc);
                qsort(t, (size_t)REPS, sizeof *t, qs_bench_cmp);
                res[enc][th - 1][0] = (double)N / t[0] / 1e6;
                res[enc][th - 1][1] = (double)N / t[REPS / 2] / 1e6;
            }
        /* same run, same answers: 1 vs 2 threads, and decode(encode) == fakeq */
        qs_err e = {{0}};
        float ts = 1;
        time_op(f, &o, x, y1, codes, meta, N, 0, 1, &rc);
        time_op(f, &o, x, y2, codes, meta, N, 0, 2, &rc);
        int same = memcmp(y1, y2, N * sizeof *y1) == 0;
        int enc_ok = f->encode(f, &o, x, N, codes, meta, &ts, &e) == 0 && f->decode(f, &o, codes, meta, ts, N, y3, &e) == 0 &&
                     memcmp(y1, y3, N * sizeof *y1) == 0;
        if (rc || !same || !enc_ok) bad = 1;
        json_array_append_new(rows, json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:b,s:b}", "format", name,
            "fakeq_1t_best", res[0][0][0], "fakeq_1t_median", res[0][0][1], "fakeq_2t_best", res[0][1][0],
            "fakeq_2t_median", res[0][1][1], "encode_1t_best", res[1][0][0], "encode_1t_median", res[1][0][1],
            "encode_2t_best", res[1][1][0], "encode_2t_median", res[1][1][1], "threads_identical", same,
            "encode_decode_matches_fakeq", enc_ok));
    }
    if (json) {
        json_t *o = json_pack("{s:I,s:f,s:o}", "elements", (json_int_t)N, "memcpy_melem_per_s", memcpy_best, "results", rows);
        char *s = json_dumps(o, JSON_INDENT(2));
        puts(s);
        free(s);
        json_decref(o);
    } else {
        printf("%zu float32 values, %d runs each; memcpy %.0f M elem/s (best)\n", N, REPS, memcpy_best);
        printf("%s%-12s %21s %21s %21s %21s  %s%s\n", qs_c_head(cli), "FORMAT", "FAKEQ 1T best/median", "FAKEQ 2T best/median",
               "ENCODE 1T best/median", "ENCODE 2T best/median", "CHECKS", qs_c_off(cli));
        size_t k;
        json_t *r;
        json_array_foreach(rows, k, r) {
#define G(key) json_real_value(json_object_get(r, key))
            printf("%-12s %10.0f %10.0f %10.0f %10.0f %10.0f %10.0f %10.0f %10.0f  %s\n",
                   json_string_value(json_object_get(r, "format")), G("fakeq_1t_best"), G("fakeq_1t_median"),
                   G("fakeq_2t_best"), G("fakeq_2t_median"), G("encode_1t_best"), G("encode_1t_median"), G("encode_2t_best"),
                   G("encode_2t_median"),
                   json_is_true(json_object_get(r, "threads_identical")) && json_is_true(json_object_get(r, "encode_decode_matches_fakeq"))
                       ? "ok" : "MISMATCH");
#undef G
        }
        printf("(M elem/s)\n");
        json_decref(rows);
    }
    free(x); free(y1); free(y2); free(y3); free(codes); free(meta);
    return bad ? QS_EXIT_ERR : QS_EXIT_OK;
}
