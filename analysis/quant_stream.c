/*
** Streaming, parallel fake-quantization of a stored tensor into an .npy file (see quant_stream.h).
*/
#include "quant_stream.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/pool.h"
#include "../kernels/simd.h"


typedef struct slot_st { float *buf, *y; float amax; } slot_st;   /* one pool slot's */

typedef struct qstream {
    qs_apply a;
    qs_treader *r;
    uint64_t rows, cols, n;
    /* unit u: rows [u*urows, ...) whole, or (split) columns [(u%per_row)*ucols, ...) of row u/per_row */
    int split;
    uint64_t urows, ucols, per_row, nunits;
    int pass;                      /* 0: absmax of the finite values, 1: quantize */
    int direct;                    /* every run lies in one unit: fakeq straight from the read buffer */
    qs_npy_writer *w;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t done;                 /* elements appended to w */
    int failed;
    qs_err err;
    slot_st slot[QS_POOL_MAX];
} qstream;

typedef struct unit_io { qstream *s; uint64_t base; } unit_io;

static void fail_with(qstream *s, const qs_err *e)
{
    pthread_mutex_lock(&s->mu);
    if (!s->failed) { s->failed = 1; s->err = *e; }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static int unit_read(void *ctx, uint64_t start, size_t n, float *out, qs_err *e)
{
    unit_io *io = ctx;
    return qs_treader_read_f32(io->s->r, io->base + start, n, out, e);
}

/* Appends in element order: a unit waits for the ones before it, which are already being worked on. */
static int unit_write(void *ctx, uint64_t start, size_t n, const float *y, qs_err *e)
{
    unit_io *io = ctx;
    qstream *s = io->s;
    uint64_t at = io->base + start;
    pthread_mutex_lock(&s->mu);
    while (s->done != at && !s->failed) pthread_cond_wait(&s->cv, &s->mu);
    int stop = s->failed;
    pthread_mutex_unlock(&s->mu);
    if (stop) return qs_fail(e, "stopped");
    if (qs_npy_writer_put(s->w, y, n, e)) return -1;
    pthread_mutex_lock(&s->mu);
    s->done += n;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static void unit_span(const qstream *s, uint64_t u, uint64_t *base, uint64_t *nr, uint64_t *nc)
{
    if (s->split) {
        uint64_t row = u / s->per_row, c0 = (u % s->per_row) * s->ucols;
        *base = row * s->cols + c0;
        *nr = 1;
        *nc = s->cols - c0 < s->ucols ? s->cols - c0 : s->ucols;
    } else {
        uint64_t r0 = u * s->urows;
        *base = r0 * s->cols;
        *nr = s->rows - r0 < s->urows ? s->rows - r0 : s->urows;
        *nc = s->cols;
    }
}

/* One unit on the pool: slot st keeps its buffers across units (no fresh pages to fault in per unit). */
static void unit_task(void *ctx, size_t u, int slot)
{
    qstream *s = ctx;
    slot_st *st = &s->slot[slot];
    qs_err e = {{0}};
    pthread_mutex_lock(&s->mu);
    int stop = s->failed;
    pthread_mutex_unlock(&s->mu);
    if (stop) return;
    uint64_t base, nr, nc;
    unit_span(s, u, &base, &nr, &nc);
    if (s->pass == 0) {
        /* qs_format_absmax's rule in pieces: the maximum does not depend on the order */
        size_t k = (size_t)(nr * nc);
        if (!st->buf && !(st->buf = malloc((k > QS_QSTREAM_UNIT ? k : QS_QSTREAM_UNIT) * sizeof *st->buf))) {
            qs_fail(&e, "out of memory");
            fail_with(s, &e);
            return;
        }
        if (qs_treader_read_f32(s->r, base, k, st->buf, &e)) { fail_with(s, &e); return; }
        float m = qs_finite_absmax_n(st->buf, k);
        if (m > st->amax) st->amax = m;
        return;
    }
    unit_io io = {s, base};
    if (s->direct) {
        /* qs_format_apply's row runs, without its per-call buffers: each row (or block-aligned
        ** piece) is one fakeq at its place in the tensor */
        size_t k = (size_t)(nr * nc);
        if (!st->buf && (!(st->buf = malloc(QS_QSTREAM_UNIT * sizeof *st->buf)) ||
                         !(st->y = malloc(QS_QSTREAM_UNIT * sizeof *st->y)))) {
            qs_fail(&e, "out of memory");
            fail_with(s, &e);
            return;
        }
        float *buf = st->buf, *y = st->y;
        if (qs_treader_read_f32(s->r, base, k, buf, &e)) { fail_with(s, &e); return; }
        qs_qopts o = s->a.o;
        if (s->a.gran != QS_GRAN_BLOCK) o.block = 0;
        int bad = 0;
        for (uint64_t i = 0; i < nr && !bad; i++) {
            o.index0 = s->a.o.index0 + base + i * nc;
            bad = s->a.f->fakeq(s->a.f, &o, buf + i * nc, (size_t)nc, y + i * nc, &e);
        }
        if (bad || unit_write(&io, 0, k, y, &e)) fail_with(s, &e);
        return;
    }
    qs_apply a = s->a;
    a.o.index0 += base;   /* stochastic rounding: the element's place in the whole tensor */
    if (qs_format_apply(&a, nr, nc, unit_read, &io, unit_write, &io, &e)) fail_with(s, &e);
}

static int run_pass(qstream *s, int pass, int threads, float *amax, qs_err *e)
{
    s->pass = pass;
    memset(s->slot, 0, sizeof s->slot);
    int w = qs_pool_width(threads, s->nunits);
    qs_pool_for(w, s->nunits, unit_task, s);
    if (amax) *amax = 0;
    for (int i = 0; i < w; i++) {
        if (amax && s->slot[i].amax > *amax) *amax = s->slot[i].amax;
        free(s->slot[i].buf);
        free(s->slot[i].y);
    }
    if (s->failed) { *e = s->err; return -1; }
    return 0;
}

int qs_quant_stream(const qs_apply *a, qs_treader *r, const uint64_t *shape, int ndim, qs_npy_writer *w, int threads,
                    qs_err *e)
{
    qstream s;
    memset(&s, 0, sizeof s);
    s.a = *a;
    s.r = r;
    s.w = w;
    qs_tensor_matrix_view(shape, ndim, &s.rows, &s.cols);
    s.n = s.rows * s.cols;
    if (qs_qopts_check(a->f, &a->o, e)) return -1;
    if (threads <= 0) threads = qs_pool_cpus();
    if (threads > QS_POOL_MAX) threads = QS_POOL_MAX;

    /* Which cuts leave every run, block and scale as they are in one call over the whole tensor. */
    qs_round rnd = a->o.round == QS_RND_DEFAULT ? a->f->default_round : a->o.round;
    int colrun = a->gran == QS_GRAN_COL || (a->gran == QS_GRAN_BLOCK && a->axis == 0);
    size_t blk = a->gran == QS_GRAN_BLOCK ? qs_format_block(a->f, &a->o) : 0;
    int cut = s.n > 0 && a->gran != QS_GRAN_TENSOR && a->cscale != QS_CSCALE_TENSOR && a->cscale != QS_CSCALE_COL;
    if (colrun) cut = cut && blk > 0 && rnd != QS_RND_SR && !a->cscale;
    if (!cut) {
        s.urows = s.rows ? s.rows : 1;
        s.nunits = s.n ? 1 : 0;
        threads = 1;
    } else if (colrun) {
        /* bands of whole blocks down every column */
        uint64_t per = QS_QSTREAM_UNIT / ((uint64_t)blk * s.cols);
        s.urows = (per ? per : 1) * blk;
        s.nunits = (s.rows + s.urows - 1) / s.urows;
    } else if (s.cols > QS_QSTREAM_UNIT && blk > 0 && a->cscale != QS_CSCALE_ROW) {
        /* long rows: block-aligned pieces (a row's final partial block stays at its end) */
        s.split = 1;
        s.ucols = QS_QSTREAM_UNIT / blk * blk;
        if (s.ucols == 0) s.ucols = blk;
        s.per_row = (s.cols + s.ucols - 1) / s.ucols;
        s.nunits = s.rows * s.per_row;
    } else {
        uint64_t per = s.cols ? QS_QSTREAM_UNIT / s.cols : 1;
        s.urows = per ? per : 1;
        s.nunits = (s.rows + s.urows - 1) / s.urows;
    }
    s.direct = cut && !colrun && !a->cscale && (a->gran == QS_GRAN_BLOCK || a->f->block == 0) &&
               (s.split ? s.ucols : s.urows * s.cols) <= QS_QSTREAM_UNIT;
    if ((uint64_t)threads > s.nunits) threads = s.nunits ? (int)s.nunits : 1;
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    int rc = 0;
    if (cut && a->f->has_tensor_scale && !(a->o.tensor_scale > 0)) {
        float amax;
        rc = run_pass(&s, 0, threads, &amax, e);
        s.a.o.tensor_scale = amax > 0 ? amax : 0;   /* as qs_format_apply sets it */
    }
    if (!rc) rc = run_pass(&s, 1, threads, NULL, e);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
    return rc;
}
