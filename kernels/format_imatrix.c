/*
** Rounding with importances (format_imatrix.h) through the ggml family's codecs.
*/
#include "format_imatrix.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "format_ggml.h"
#include "pool.h"

#define ROWS_PER_TASK 16

int qs_format_takes_imatrix(const qs_format *f)
{
    const qs_ggml_codec *c = qs_ggml_codec_of(f);
    return c && c->encw;
}

typedef struct fq_job {
    const qs_ggml_codec *c;
    float *x;
    size_t rows, cols, full;
    const float *qw;
    atomic_int failed;
} fq_job;

static void fq_task(void *ctx, size_t task, int slot)
{
    (void)slot;
    fq_job *j = ctx;
    const qs_ggml_codec *c = j->c;
    size_t r0 = task * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK < j->rows ? r0 + ROWS_PER_TASK : j->rows;
    size_t B = (size_t)c->blk, rb = (j->full / B + 1) * (size_t)c->bytes;
    uint8_t *buf = malloc(rb);
    float pad[256];
    qs_err e = {{0}};
    if (!buf) { atomic_store(&j->failed, 1); return; }
    for (size_t r = r0; r < r1; r++) {
        float *xr = j->x + r * j->cols;
        if (j->full && (qs_ggml_quantize_imatrix(c, xr, 1, j->full, j->qw, buf, &e) ||
                        qs_ggml_dequantize(c, buf, j->full, xr, &e))) { atomic_store(&j->failed, 1); break; }
        size_t tail = j->cols - j->full;
        if (!tail) continue;
        memset(pad, 0, sizeof pad);
        memcpy(pad, xr + j->full, tail * sizeof *pad);
        if (qs_ggml_quantize(c, pad, B, buf, &e) || qs_ggml_dequantize(c, buf, B, pad, &e)) { atomic_store(&j->failed, 1); break; }
        memcpy(xr + j->full, pad, tail * sizeof *pad);
    }
    free(buf);
}

int qs_format_fakeq_imatrix(const qs_apply *a, float *x, size_t rows, size_t cols, const float *qw, int threads,
                            qs_err *e)
{
    const qs_ggml_codec *c = qs_ggml_codec_opt(a->f, &a->o);
    if (!c || (qw && !c->encw)) return qs_fail(e, "format %s takes no importance matrix", a->f ? a->f->name : "?");
    if (a->axis != 1 || a->gran != QS_GRAN_BLOCK || a->cscale)
        return qs_fail(e, "format %s: importances need blocks along the weight rows", a->f->name);
    fq_job j = {c, x, rows, cols, cols / (size_t)c->blk * (size_t)c->blk, qw, 0};
    if (j.full < cols && j.full == 0 && qw) return qs_fail(e, "%s: rows of %zu values hold no whole block of %d for the importances (llama-quantize "
                       "would choose another type for this weight)", c->name, cols, c->blk);
    qs_pool_for(threads, (rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK, fq_task, &j);
    return atomic_load(&j.failed) ? qs_fail(e, "out of memory rounding %zu x %zu weights", rows, cols) : 0;
}

int qs_format_ggml_block(const qs_format *f, int *blk, int *bytes, int *ggml_type)
{
    static const struct { const char *name; int id; } kIds[] = {
        {"q4_0", 2}, {"q4_1", 3}, {"q5_0", 6}, {"q5_1", 7}, {"q8_0", 8}, {"q8_1", 9}, {"q2_k", 10}, {"q3_k", 11},
        {"q4_k", 12}, {"q5_k", 13}, {"q6_k", 14}, {"q8_k", 15}, {"iq4_nl", 20}, {"iq4_xs", 23}};
    const qs_ggml_codec *c = qs_ggml_codec_of(f);
    if (!c) return -1;
    *blk = c->blk;
    *bytes = c->bytes;
    *ggml_type = -1;
    for (size_t i = 0; i < sizeof kIds / sizeof kIds[0]; i++)
        if (!strcmp(kIds[i].name, c->name)) *ggml_type = kIds[i].id;
    return 0;
}

typedef struct qg_job {
    const qs_ggml_codec *c;
    const float *x, *qw;
    uint8_t *out;
    size_t rows, cols, rb;
    atomic_int failed;
} qg_job;

static void qg_task(void *ctx, size_t task, int slot)
{
    (void)slot;
    qg_job *j = ctx;
    size_t r0 = task * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK < j->rows ? r0 + ROWS_PER_TASK : j->rows;
    qs_err e = {{0}};
    if (qs_ggml_quantize_imatrix(j->c, j->x + r0 * j->cols, r1 - r0, j->cols, j->qw, j->out + r0 * j->rb, &e))
        atomic_store(&j->failed, 1);
}

int qs_format_quantize_ggml(const qs_format *f, const float *x, size_t rows, size_t cols, const float *qw, uint8_t *out,
                            int threads, qs_err *e)
{
    const qs_ggml_codec *c = qs_ggml_codec_of(f);
    if (!c) return qs_fail(e, "format %s is not one of llama.cpp's types", f ? f->name : "?");
    if (cols % (size_t)c->blk) return qs_fail(e, "%s: rows of %zu values are not whole blocks of %d", c->name, cols, c->blk);
    qg_job j = {c, x, qw, out, rows, cols, cols / (size_t)c->blk * (size_t)c->bytes, 0};
    qs_pool_for(threads, (rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK, qg_task, &j);
    return atomic_load(&j.failed) ? qs_fail(e, "%s: quantizing failed", c->name) : 0;
}
