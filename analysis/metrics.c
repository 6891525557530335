/*
** The analysis engine's driver (interface, definitions and conventions in metrics.h; the engine's
** files are listed in metrics_internal.h): one streaming pass that fake-quantizes a tensor exactly as
** kernels/format_apply.c does and accumulates error metrics, histograms and per-block / per-row /
** per-column statistics, on `threads` threads of the pool, bit-identical for any thread count.
**
** Work is cut into bands whose boundaries depend only on the shape and the format, never on the
** thread count (metrics_plan.c).  Bands are pool tasks, handed out in order to whichever thread is
** free; each band's partial sums (double, LANES independent accumulators combined in a fixed order)
** go to a window of slots and are merged
** strictly in band order by whichever thread completes the band at the frontier.  Histograms,
** counts and maxima are order-independent and are summed per thread at the end.  Per-block arrays
** are written in place (every block belongs to exactly one band).  FP contraction is off, so the
** bits do not depend on the compiler's choices either.
**
** The per-value kernel (AVX-512, portable path elem() with the same bits) works on chunks of CH run
** positions in two passes of 16 lanes: sums, counts and block/row statistics; then the bins of the
** value and error histograms, stored relative to each histogram's window and counted by the window
** counters (bit-sliced adder trees; values outside the window directly).
*/
#include "metrics_internal.h"
#include "../kernels/pool.h"

#include <stdio.h>

static void record_error(job *j, uint64_t band, const char *msg)
{
    pthread_mutex_lock(&j->mu);
    if (!j->failed || band < j->err_band) {
        j->failed = 1;
        j->err_band = band;
        snprintf(j->err.msg, sizeof j->err.msg, "%s", msg && msg[0] ? msg : "read failed");
    }
    atomic_store(&j->stop, 1);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* Hand a band partial, in band order and under the mutex, to the pass's results: folded from band 0
** on, else kept (the partial of bands [b0, b1)). */
static int take_band(job *j, const bpart *s)
{
    qs_an_part *P = j->part;
    if (!j->keep) {
        met_fold_band(&P->tot, P->row_se2, P->row_nf, P->col_se2, P->col_nf, j->p->colacc, s);
        return 0;
    }
    return met_band_copy(&P->band[j->frontier - j->b0], s, j->p->colacc);
}

/* One band on the pool (kernels/pool.h), with the state of the pool slot running it.  Bands go out in
** increasing order, so a band waiting for the window only waits for lower bands being worked on. */
typedef struct { job *j; worker *w; } band_ctx;

static void band_task(void *ctx, size_t t, int slot)
{
    band_ctx *bc = ctx;
    job *j = bc->j;
    worker *w = &bc->w[slot];
    uint64_t b = j->b0 + t;
    if (atomic_load(&j->stop)) return;
    pthread_mutex_lock(&j->mu);
    while (!atomic_load(&j->stop) && b >= j->frontier + j->wsize) pthread_cond_wait(&j->cv, &j->mu);
    pthread_mutex_unlock(&j->mu);
    if (atomic_load(&j->stop)) return;
    bpart *sl = &j->slots[b % j->wsize];
    w->err.msg[0] = 0;
    if (met_do_band(w, b, sl, &w->err)) {
        record_error(j, b, w->err.msg);
        return;
    }
    pthread_mutex_lock(&j->mu);
    sl->ready = 1;
    int moved = 0, oom = 0;
    while (j->frontier < j->b1 && j->slots[j->frontier % j->wsize].ready) {
        bpart *s = &j->slots[j->frontier % j->wsize];
        if (take_band(j, s)) {
            oom = 1;
            break;
        }
        j->done_elems += s->nelem;
        s->ready = 0;
        j->frontier++;
        moved = 1;
    }
    if (moved) pthread_cond_broadcast(&j->cv);
    uint64_t done = j->done_elems;
    pthread_mutex_unlock(&j->mu);
    if (oom) {
        record_error(j, b, "out of memory in the analysis");
        return;
    }
    /* progress and cancellation on the calling thread (slot 0) only */
    if (slot == 0 && j->progress && j->progress(j->pctx, j->pbase + done, j->ptotal)) {
        pthread_mutex_lock(&j->mu);
        j->cancelled = 1;
        pthread_mutex_unlock(&j->mu);
        record_error(j, 0, "cancelled");
    }
}

/* ---- entry point ---------------------------------------------------------------------------- */

static void worker_free(worker *w)
{
    free(w->x); free(w->xt); free(w->q); free(w->codes); free(w->meta);
    free(w->reps); free(w->sS); free(w->sQ); free(w->pS); free(w->pQ);
    free(w->bcode); free(w->bslot); free(w->bscale); free(w->bse2); free(w->bnf); free(w->bam);
    free(w->hv.c); free(w->ha.c); free(w->hr.c); free(w->hu.c); free(w->hb.c); free(w->hs.c);
    free(w->kSf); free(w->kSE); free(w->kSM); free(w->kQb); free(w->hb4); free(w->hs4);
    free(w->wv); free(w->wa); free(w->wr); free(w->wu);
}

static int worker_alloc(worker *w, const plan *p, const prof *pf)
{
    size_t L = p->max_len ? p->max_len : 1, nb = p->max_blocks ? p->max_blocks : 1;
    size_t ns = p->max_segs ? p->max_segs : 1, mb = pf->f->meta_bytes > 0 ? (size_t)pf->f->meta_bytes : 1;
    size_t run = p->colruns ? p->max_nr : p->max_nc;
    if (!(w->x = malloc(L * sizeof(float)))) return -1;
    if (p->colruns && !(w->xt = malloc(L * sizeof(float)))) return -1;
    if (!(w->q = malloc(L * sizeof(float)))) return -1;
    if (pf->fam == FAM_CODED) {   /* a run's metadata, segment scales and (without fakeq_meta) codes */
        size_t nbr = run / (p->blk ? p->blk : 1) + 1, nsr = nbr * (p->blk / pf->seg);
        if (!(w->meta = malloc(nbr * mb)) || !(w->sS = malloc(nsr * sizeof(float))) || !(w->sQ = malloc(nsr * sizeof(float))))
            return -1;
        if (!pf->f->fakeq_meta && !(w->codes = malloc((run ? run : 1) * sizeof(uint32_t)))) return -1;
    }
    if (!(w->reps = malloc(nb * sizeof(float))) || !(w->pS = malloc(nb * sizeof(float))) ||
        !(w->pQ = malloc(nb * sizeof(float))) || !(w->bcode = malloc(nb)) ||
        !(w->bscale = malloc(nb * sizeof(double))) || !(w->bse2 = malloc(nb * sizeof(double))) ||
        !(w->bslot = malloc(nb * sizeof(uint32_t))) ||
        !(w->bnf = malloc(nb * sizeof(uint64_t))) || !(w->bam = malloc(nb * sizeof(float))))
        return -1;
    size_t nk = (ns > nb ? ns : nb) + 16;   /* a run's segments, padded for 16-lane loads */
    if (!(w->kSf = calloc(nk, sizeof(float))) || !(w->kSE = calloc(nk, sizeof(int32_t))) ||
        !(w->kSM = calloc(nk, sizeof(uint32_t))) || !(w->kQb = calloc(nk, sizeof(uint32_t))))
        return -1;
    hacc *h[6] = {&w->hv, &w->ha, &w->hr, &w->hu, &w->hb, &w->hs};
    int n[6] = {HV_N, HV_N, HR_N, HU_N, HV_N, 256};
    int off[6] = {RAW_OFF_V, RAW_OFF_V, RAW_OFF_R, HU_N / 2, 0, 0};
    for (int k = 0; k < 6; k++) {
        h[k]->n = n[k];
        h[k]->off = off[k];
        if (!(h[k]->c = calloc((size_t)n[k] + NSLOT, sizeof(uint64_t)))) return -1;
    }
    if (!(w->hb4 = calloc(4 * ((size_t)HV_N + NSLOT), sizeof(uint32_t))) || !(w->hs4 = calloc(4 * 256, sizeof(uint32_t))))
        return -1;
    hwin **hw[4] = {&w->wv, &w->wa, &w->wr, &w->wu};
    for (int k = 0; k < 4; k++) {
        void *m = NULL;
        if (posix_memalign(&m, 64, sizeof(hwin))) return -1;
        memset(m, 0, sizeof(hwin));
        *hw[k] = m;
        (*hw[k])->top = 8;
    }
    return 0;
}

/* Progress + cancellation from the calling thread outside the band pass. */
static int tick(job *j, uint64_t done, qs_err *e)
{
    if (j->progress && j->progress(j->pctx, done, j->ptotal)) {
        j->cancelled = 1;
        return qs_fail(e, "cancelled");
    }
    return 0;
}

static int read_chunked(job *j, uint64_t n, float *dst, float *amax, uint64_t pbase, qs_err *e)
{
    float m = 0;
    for (uint64_t s = 0; s < n;) {
        size_t k = n - s > BAND ? BAND : (size_t)(n - s);
        float *buf = dst;
        e->msg[0] = 0;
        if (j->rd(j->rctx, s, k, buf, e)) {
            if (!e->msg[0]) qs_fail(e, "read failed at element %llu", (unsigned long long)s);
            return -1;
        }
        for (size_t i = 0; i < k; i++) {
            float v = fabsf(buf[i]);
            if (v > m && v != INFINITY) m = v;
        }
        s += k;
        if (tick(j, pbase + s, e)) return -1;
    }
    *amax = m;
    return 0;
}

/* Options that do not depend on the tensor: checked, resolved into o. */
static int resolve_opts(const qs_apply *a, qs_qopts *o, qs_err *e)
{
    *o = a->o;
    if (qs_qopts_check(a->f, o, e)) return -1;
    if (a->gran == QS_GRAN_ROW || a->gran == QS_GRAN_COL || a->gran == QS_GRAN_TENSOR) {
        if (a->f->block != 0)
            return qs_fail(e, "format %s has fixed blocks: granularity '%s' needs int8 or int4", a->f->name,
                           qs_gran_name(a->gran));
        o->block = 0;
    }
    return 0;
}

/* Elements of bands [b0, b1). */
static uint64_t band_elems(const plan *p, uint64_t b0, uint64_t b1)
{
    if (b0 == 0 && b1 == p->nbands) return p->n;
    uint64_t t = 0, r0, c0;
    size_t nr, nc;
    for (uint64_t b = b0; b < b1; b++) {
        met_band_geom(p, b, &r0, &nr, &c0, &nc);
        t += (uint64_t)nr * nc;
    }
    return t;
}

/* ---- the pass, step by step (run_pass) ----------------------------------------------------------- */

/* The state of one pass, shared by its steps: the job the pool threads work on, the format profile
** and band plan the job points to, one worker per pool slot and the partial being filled.  It stays
** at one address for the whole pass (the job and the workers point into it); pass_free releases it. */
typedef struct {
    const qs_apply *a;
    qs_analyze_opts od;
    uint64_t rows, cols, n;
    uint64_t b0, b1;         /* the bands of this pass */
    double rel_floor;
    qs_qopts o;
    prof pf;
    plan p;
    job j;
    int prepass;             /* one reading pass for the tensor's absmax (not given) */
    int memmode;             /* one reading pass for the one-scale modes' scales */
    float amax;
    size_t ncs;              /* scaled casts: the number of scales */
    int T, sync_init;
    worker *w;               /* T of them */
    qs_an_part *P;
} pass;

static int no_memory(qs_err *e)
{
    return qs_fail(e, "out of memory in the analysis");
}

/* A given value histogram must be this tensor's, in the engine's binning (it replaces the kernels'). */
static int check_value_hist(const qs_hist *vh, uint64_t n, qs_err *e)
{
    uint64_t tot = vh->zero + vh->under + vh->over + vh->nonfinite;
    for (int i = 0; vh->counts && i < vh->nbins; i++) tot += vh->counts[i];
    if (vh->kind != 0 || vh->nbins != HV_N || vh->lo != HV_LO || vh->hi != HV_HI || !vh->counts || tot != n)
        return qs_fail(e, "the given value histogram is not this tensor's (%llu values for %llu)",
                       (unsigned long long)tot, (unsigned long long)n);
    return 0;
}

/* The arguments and options checked; the format's profile, the band plan and the bands [b0, b1)
** (b1 = UINT64_MAX: to the last).  Nothing is allocated yet. */
static int pass_begin(pass *s, const qs_apply *a, uint64_t rows, uint64_t cols, qs_an_read rd, void *rctx,
                      int read_threadsafe, const qs_analyze_opts *opts, uint64_t b0, uint64_t b1, qs_err *e)
{
    const qs_analyze_opts *od = &s->od;
    job *j = &s->j;
    if (opts) s->od = *opts;
    if (!a || !a->f) return qs_fail(e, "no format");
    if (cols && rows > UINT64_MAX / cols) return qs_fail(e, "tensor too large");
    uint64_t n = rows * cols;
    if (n && !rd) return qs_fail(e, "no read function");
    if (!(od->rel_floor >= 0) || isinf(od->rel_floor)) return qs_fail(e, "relative-error floor must be >= 0");
    s->rel_floor = od->rel_floor > 0 ? od->rel_floor : QS_REL_FLOOR_DEFAULT;
    if (resolve_opts(a, &s->o, e)) return -1;
    j->rd = rd;
    j->rctx = rctx;
    j->serial = !read_threadsafe;
    j->progress = od->progress;
    if (od->value_hist) {
        if (check_value_hist(od->value_hist, n, e)) return -1;
        j->novalue = 1;
    }
    j->pctx = od->progress_ctx;
    s->prepass = !od->absmax_known && n > 0;
    if (met_prof_init(&s->pf, a, &s->o, e)) return -1;
    if (met_plan_init(&s->p, &s->pf, a, rows, cols, e)) return -1;
    if (b1 == UINT64_MAX) b1 = s->p.nbands;
    if (b0 > b1 || b1 > s->p.nbands)
        return qs_fail(e, "bands [%llu, %llu) outside the analysis' %llu bands", (unsigned long long)b0,
                       (unsigned long long)b1, (unsigned long long)s->p.nbands);
    s->memmode = s->p.mode == PM_MEM_T || s->p.mode == PM_MEM_C;
    j->ptotal = n * (uint64_t)(s->prepass + s->memmode) + band_elems(&s->p, b0, b1);
    s->a = a;
    s->rows = rows;
    s->cols = cols;
    s->n = n;
    s->b0 = b0;
    s->b1 = b1;
    return 0;
}

/* The tensor's absmax, given or from one reading pass (it covers the whole tensor, so every partial
** of one analysis starts from the same state), and what hangs on it: the tensor scale of formats that
** have one and the absolute relative-error floor. */
static int pass_absmax(pass *s, qs_err *e)
{
    job *j = &s->j;
    uint64_t n = s->n;
    float amax = 0;
    if (s->prepass) {
        float *buf = malloc((n < BAND ? (size_t)n : BAND) * sizeof(float));
        if (!buf) return qs_fail(e, "out of memory");
        int r = read_chunked(j, n, buf, &amax, 0, e);
        free(buf);
        if (r) return -1;
    } else if (s->od.absmax_known) {
        if (!(s->od.absmax >= 0) || !(s->od.absmax <= FLT_MAX)) return qs_fail(e, "absmax must be finite and >= 0");
        amax = (float)s->od.absmax;
    }
    if (s->a->f->has_tensor_scale && !(s->o.tensor_scale > 0)) s->o.tensor_scale = amax > 0 ? amax : 0;
    s->pf.o = s->o;
    j->F = s->rel_floor * (double)amax;
    s->pf.Ff = (float)j->F > 0 ? (float)j->F : u2f(1);
    j->pf = &s->pf;
    j->p = &s->p;
    s->amax = amax;
    return 0;
}

/* Scaled casts: one more reading pass for the absmax of each scale's run (format_apply's scales),
** then each scale in the kernel's terms. */
static int pass_cast_scales(pass *s, qs_err *e)
{
    const qs_apply *a = s->a;
    job *j = &s->j;
    if (!a->cscale) return 0;
    if (s->pf.fam != FAM_CAST) return qs_fail(e, "format %s takes no scale=", a->f->name);
    size_t ncs = 0;
    if (qs_cast_scales(a, s->rows, s->cols, j->rd, j->rctx, &j->cs, &j->ci, &ncs, e)) return -1;
    s->ncs = ncs;
    j->cscale = a->cscale;
    if (!(j->cSf = calloc(ncs + 16, sizeof(float))) || !(j->cSE = calloc(ncs + 16, sizeof(int32_t))) ||
        !(j->cSM = calloc(ncs + 16, sizeof(uint32_t))) || !(j->cQb = calloc(ncs + 16, sizeof(uint32_t))))
        return no_memory(e);
    j->cpow2 = j->cse0 = 1;
    for (size_t i = 0; i < ncs; i++) {
        /* an unscaled run (s = 0) keeps S = 1 and the cast's top; else q = Q(x s) inv lives on the
        ** grid times inv, and nothing clips: the run's absmax maps onto the target (<= max_finite), and
        ** an absmax landing on max_finite * inv, a hair below x after fl32(inv), is rounding, not clipping */
        double S = j->cs[i] != 0 ? (double)j->ci[i] : 1.0;
        float top = j->cs[i] != 0 ? 0.0f : s->pf.cast_top;
        scale_parts(san_S(S), &j->cSf[i], &j->cSE[i], &j->cSM[i]);
        j->cQb[i] = san_Q(top);
        j->cpow2 &= j->cSM[i] == 0 && S > 0;
        j->cse0 &= j->cSE[i] == 0;
    }
    return 0;
}

/* Bits per element: the elements', each block's metadata, a tensor scale and a scaled cast's FP32
** scales, spread over the n elements. */
static double bits_per_elem(const qs_format *f, uint64_t n, uint64_t nblocks, size_t ncs)
{
    double bpe = f->elem_bits;
    if (n && nblocks) bpe += f->meta_bits * (double)nblocks / (double)n;
    if (n && f->has_tensor_scale) bpe += 32.0 / (double)n;
    if (n && ncs) bpe += 32.0 * (double)ncs / (double)n;
    return bpe;
}

/* The partial's outputs: its header, histograms (a given value histogram taken as it is), the
** per-block arrays of its bands and, from band 0, the row and column sums the bands fold into. */
static int pass_part(pass *s, qs_err *e)
{
    const plan *p = &s->p;
    job *j = &s->j;
    uint64_t n = s->n, b0 = s->b0, b1 = s->b1;
    qs_an_part *P = s->P = calloc(1, sizeof *P);
    if (!P) return no_memory(e);
    P->p = *p;
    P->rows = s->rows;
    P->cols = s->cols;
    P->n = n;
    P->twod = p->twod;
    P->novalue = j->novalue;
    P->blocks = s->od.blocks && p->nblocks;
    P->codes = P->blocks && s->pf.byte_scale;
    P->rel_floor = s->rel_floor;
    P->amax = s->amax;
    P->b0 = P->b1 = b0;   /* b1 once the pass is through */
    P->bpe = bits_per_elem(s->pf.f, n, p->nblocks, s->ncs);
    if (met_hists_alloc(P->h, s->pf.byte_scale, p->nblocks != 0)) return no_memory(e);
    if (j->novalue) {
        const qs_hist *vh = s->od.value_hist;
        qs_hist *h = &P->h[H_VALUE];
        memcpy(h->counts, vh->counts, (size_t)vh->nbins * sizeof *vh->counts);
        h->zero = vh->zero;
        h->under = vh->under;
        h->over = vh->over;
        h->nonfinite = vh->nonfinite;
    }
    if (P->blocks && p->blockstats) {
        size_t nb = (size_t)met_band_nblocks(p, b0, b1), nb1 = nb ? nb : 1;
        P->nbk = nb;
        if (!(P->bk_absmax = malloc(nb1 * sizeof(float))) || !(P->bk_ratio = malloc(nb1 * sizeof(float))) ||
            !(P->bk_rmse = malloc(nb1 * sizeof(float))))
            return no_memory(e);
        if (P->codes && !(P->bk_code = malloc(nb1))) return no_memory(e);
        j->bk_absmax = P->bk_absmax;
        j->bk_ratio = P->bk_ratio;
        j->bk_rmse = P->bk_rmse;
        j->bk_code = P->bk_code;
    }
    j->b0 = b0;
    j->b1 = b1;
    j->keep = b0 > 0;
    j->part = P;
    if (j->keep && b1 > b0 && !(P->band = calloc((size_t)(b1 - b0), sizeof *P->band))) return no_memory(e);
    if (!j->keep && p->colacc && n) {
        size_t nr = (size_t)s->rows, nc = (size_t)s->cols;
        if (!(P->row_se2 = calloc(nr, sizeof(double))) || !(P->row_nf = calloc(nr, sizeof(uint32_t))) ||
            !(P->col_se2 = calloc(nc, sizeof(double))) || !(P->col_nf = calloc(nc, sizeof(uint32_t))))
            return no_memory(e);
    }
    return 0;
}

/* Threads (no more than bands), the merge window of 2 T band slots with its locks, and a worker per
** pool slot. */
static int pass_workers(pass *s, qs_err *e)
{
    const plan *p = &s->p;
    job *j = &s->j;
    int T = s->od.threads < 1 ? 1 : s->od.threads > MAX_THREADS ? MAX_THREADS : s->od.threads;
    if ((uint64_t)T > s->b1 - s->b0) T = s->b1 > s->b0 ? (int)(s->b1 - s->b0) : 1;
    s->T = T;
    j->wsize = 2 * (uint64_t)T;
    if (pthread_mutex_init(&j->mu, NULL)) return qs_fail(e, "cannot create a mutex");
    if (pthread_mutex_init(&j->read_mu, NULL)) {
        pthread_mutex_destroy(&j->mu);
        return qs_fail(e, "cannot create a mutex");
    }
    if (pthread_cond_init(&j->cv, NULL)) {
        pthread_mutex_destroy(&j->mu);
        pthread_mutex_destroy(&j->read_mu);
        return qs_fail(e, "cannot create a condition variable");
    }
    s->sync_init = 1;
    if (!(j->slots = calloc((size_t)j->wsize, sizeof *j->slots))) return no_memory(e);
    if (p->colacc)
        for (uint64_t k = 0; k < j->wsize; k++) {
            bpart *sl = &j->slots[k];
            size_t nr = p->max_nr ? p->max_nr : 1, nc = p->max_nc ? p->max_nc : 1;
            if (!(sl->row_se2 = malloc(nr * sizeof(double))) || !(sl->row_nf = malloc(nr * sizeof(uint32_t))) ||
                !(sl->col_se2 = malloc(nc * sizeof(double))) || !(sl->col_nf = malloc(nc * sizeof(uint32_t))))
                return no_memory(e);
        }
    worker *w = s->w = calloc((size_t)T, sizeof *w);
    if (!w) return no_memory(e);
    for (int t = 0; t < T; t++) {
        w[t].j = j;
        w[t].simd = MET_X86 ? qs_simd_level() : QS_SIMD_SCALAR;
        if (worker_alloc(&w[t], p, &s->pf)) return no_memory(e);
    }
    return 0;
}

/* The one-scale modes' reading pass: into *m the tensor's largest finite |x| (the representative of
** its one block, PM_MEM_T), or each column's into j->colam (PM_MEM_C; NaN compares false). */
static int mem_read(pass *s, float *buf, float *m, qs_err *e)
{
    job *j = &s->j;
    uint64_t n = s->n, cols = s->cols;
    float *colam = j->colam, mx = 0;
    for (uint64_t i0 = 0; i0 < n;) {
        size_t k = n - i0 > BAND ? BAND : (size_t)(n - i0);
        e->msg[0] = 0;
        if (j->rd(j->rctx, i0, k, buf, e)) {
            if (!e->msg[0]) qs_fail(e, "read failed at element %llu", (unsigned long long)i0);
            return -1;
        }
        if (s->p.mode == PM_MEM_T) {
            float r = met_block_rep(&s->w[0], buf, k, s->pf.finite_rep);
            if (r > mx) mx = r;
        } else {
            uint64_t c = i0 % cols;
            for (size_t i = 0; i < k; i++) {
                float v = fabsf(buf[i]);
                if (v > colam[c] && v != INFINITY) colam[c] = v;
                if (++c == cols) c = 0;
            }
        }
        i0 += k;
        if (tick(j, n * (uint64_t)s->prepass + i0, e)) return -1;
    }
    *m = mx;
    return 0;
}

/* One-scale modes: the tensor's or each column's largest finite |x| in one reading pass, then its
** scale, under which every band is quantized (int tensor_scale / gran col). */
static int pass_mem_scales(pass *s, qs_err *e)
{
    job *j = &s->j;
    worker *w0 = &s->w[0];
    qs_an_part *P = s->P;
    uint64_t n = s->n, cols = s->cols;
    if (!s->memmode || !n) return 0;
    float *buf = malloc((n < BAND ? (size_t)n : BAND) * sizeof(float));
    if (!buf) return no_memory(e);
    if (s->p.mode == PM_MEM_C && !(j->colam = P->colam = calloc((size_t)cols, sizeof(float)))) {
        free(buf);
        return no_memory(e);
    }
    float m;
    int r = mem_read(s, buf, &m, e);
    free(buf);
    if (r) return -1;
    if (s->p.mode == PM_MEM_T) {
        w0->reps[0] = j->memam = m;
        if (met_block_scales(w0, 1, e)) return -1;
        j->memS = w0->pS[0];
        j->memQ = w0->pQ[0];
    } else {
        j->colS = P->colS = malloc((size_t)cols * sizeof(double));   /* the partial's */
        j->colQ = malloc((size_t)cols * sizeof(float));
        if (!j->colS || !j->colQ) return no_memory(e);
        memcpy(w0->reps, j->colam, (size_t)cols * sizeof(float));
        if (met_block_scales(w0, (size_t)cols, e)) return -1;
        for (uint64_t c = 0; c < cols; c++) {
            j->colS[c] = w0->pS[c];
            j->colQ[c] = w0->pQ[c];
        }
    }
    P->memS = j->memS;
    return 0;
}

/* The band pass on the pool: every band of [b0, b1) quantized and merged in band order. */
static int pass_bands(pass *s, qs_err *e)
{
    job *j = &s->j;
    uint64_t b0 = s->b0, b1 = s->b1;
    j->pbase = s->n * (uint64_t)(s->prepass + s->memmode);
    j->frontier = b0;
    if (b1 > b0) {
        band_ctx bc = {j, s->w};
        qs_pool_for(s->T, (size_t)(b1 - b0), band_task, &bc);
        if (j->failed) {
            memcpy(e->msg, j->err.msg, sizeof e->msg);
            return -1;
        }
        if (tick(j, j->ptotal, e)) return -1;   /* the last bands may have been merged by another thread */
        if (j->frontier != b1)
            return qs_fail(e, "internal error: %llu of %llu bands merged", (unsigned long long)(j->frontier - b0),
                           (unsigned long long)(b1 - b0));
    }
    s->P->b1 = b1;
    return 0;
}

/* Every worker's histograms into the partial's (counts: the order does not matter). */
static void pass_hists(pass *s)
{
    qs_an_part *P = s->P;
    for (int k = 0; k < s->T; k++) {
        worker *w = &s->w[k];
        met_hwin_flush(w->wv, &w->hv);
        met_hwin_flush(w->wa, &w->ha);
        met_hwin_flush(w->wr, &w->hr);
        met_hwin_flush(w->wu, &w->hu);
        if (!s->j.novalue) met_hist_add(&P->h[H_VALUE], &w->hv);
        met_hist_add(&P->h[H_ABS], &w->ha);
        met_hist_add(&P->h[H_REL], &w->hr);
        met_hist_add(&P->h[H_ULP], &w->hu);
        met_hist_add(&P->h[H_BLOCK], &w->hb);
        met_hist_add(&P->h[H_CODE], &w->hs);
    }
}

static void pass_free(pass *s)
{
    job *j = &s->j;
    qs_an_part_free(s->P);
    if (s->w) {
        for (int t = 0; t < s->T; t++) worker_free(&s->w[t]);
        free(s->w);
    }
    if (j->slots)
        for (uint64_t k = 0; k < j->wsize; k++) {
            free(j->slots[k].row_se2); free(j->slots[k].row_nf); free(j->slots[k].col_se2); free(j->slots[k].col_nf);
        }
    free(j->slots);
    free(j->colQ);
    free(j->cs); free(j->ci); free(j->cSf); free(j->cSE); free(j->cSM); free(j->cQb);
    if (s->sync_init) {
        pthread_cond_destroy(&j->cv);
        pthread_mutex_destroy(&j->read_mu);
        pthread_mutex_destroy(&j->mu);
    }
}

/* The pass over bands [b0, b1) (b1 = UINT64_MAX: to the last) into a new partial *out.  Everything
** before the band pass (absmax, scaled casts' scales, the in-memory modes' scales) covers the whole
** tensor, so every partial of one analysis starts from the same state. */
static int run_pass(const qs_apply *a, uint64_t rows, uint64_t cols, qs_an_read rd, void *rctx, int read_threadsafe,
                    const qs_analyze_opts *opts, uint64_t b0, uint64_t b1, qs_an_part **out, qs_err *e)
{
    pass s;
    memset(&s, 0, sizeof s);
    *out = NULL;
    int rc = -1;
    if (!pass_begin(&s, a, rows, cols, rd, rctx, read_threadsafe, opts, b0, b1, e) && !pass_absmax(&s, e) &&
        !pass_cast_scales(&s, e) && !pass_part(&s, e) && !pass_workers(&s, e) && !pass_mem_scales(&s, e) &&
        !pass_bands(&s, e)) {
        pass_hists(&s);
        *out = s.P;
        s.P = NULL;
        rc = 0;
    }
    pass_free(&s);
    return rc;
}

/* The metrics from the totals (their definitions: metrics.h). */
static void finish_metrics(qs_metrics *m, const qs_an_part *P)
{
    const bpart *t = &P->tot;
    m->n = P->n;
    m->n_finite = t->nfin;
    m->rel_floor = P->rel_floor;
    m->sum_x2 = t->sx2;
    m->sum_e2 = t->se2;
    if (t->nfin) {
        double nf = (double)t->nfin;
        m->mse = t->se2 / nf;
        m->rmse = sqrt(m->mse);
        if (t->se2 == 0) {
            m->sqnr_db = m->eff_bits_energy = m->eff_bits_sqnr = INFINITY;
        } else {
            m->sqnr_db = 10.0 * log10(t->sx2 / t->se2);
            m->eff_bits_energy = -0.5 * log2(t->se2 / t->sx2);
            m->eff_bits_sqnr = (m->sqnr_db - 1.76) / 6.02;
        }
        m->max_abs_err = t->maxae;
        m->max_rel_err = t->maxrel;
        m->mean_rel_err = t->srel / nf;
        m->mean_err = t->nnonf ? NAN : t->se / nf;
        /* sum x q = sum x^2 + sum x e, sum q^2 = sum x^2 + 2 sum x e + sum e^2 (metrics.h) */
        double sxq = t->sx2 + t->sxe, sq2 = (t->sx2 + 2.0 * t->sxe) + t->se2;
        m->cosine = t->nnonf || !(t->sx2 > 0) || !(sq2 > 0) ? NAN : sxq / (sqrt(t->sx2) * sqrt(sq2));
        m->underflow_frac = (double)t->nunder / nf;
        m->clip_frac = (double)t->nclip / nf;
        m->nonfinite_frac = (double)t->nnonf / nf;
    } else {
        m->mse = m->rmse = m->sqnr_db = m->eff_bits_energy = m->eff_bits_sqnr = NAN;
        m->max_abs_err = m->max_rel_err = m->mean_rel_err = m->mean_err = m->cosine = NAN;
    }
    /* error energy by source (metrics.h): shares of the finite sum_e2, NaN when it is 0 */
    m->sum_e2_under = t->seu;
    m->sum_e2_clip = t->sec;
    m->sum_e2_round = t->ser;
    double fin = (t->seu + t->sec) + t->ser;
    m->err_under = fin > 0 ? t->seu / fin : NAN;
    m->err_clip = fin > 0 ? t->sec / fin : NAN;
    m->err_round = fin > 0 ? t->ser / fin : NAN;
    m->bits_per_elem = P->bpe;
}

/* The per-block arrays in the tensor's block order: for row runs the partial's order already; for
** column runs (axis 0) band by band, column by column there, into column by column. */
static void blocks_out(const qs_an_part *P, qs_analysis *an)
{
    const plan *p = &P->p;
    if (!p->colruns) {
        memcpy(an->block_absmax, P->bk_absmax, (size_t)P->nbk * sizeof(float));
        memcpy(an->block_ratio, P->bk_ratio, (size_t)P->nbk * sizeof(float));
        memcpy(an->block_rmse, P->bk_rmse, (size_t)P->nbk * sizeof(float));
        if (P->codes) memcpy(an->block_scale_code, P->bk_code, (size_t)P->nbk);
        return;
    }
    for (uint64_t b = 0; b < p->nbands; b++) {
        uint64_t r0, c0, s = met_band_block0(p, 0, b);
        size_t nr, nc;
        met_band_geom(p, b, &r0, &nr, &c0, &nc);
        size_t bpr = (nr + p->blk - 1) / p->blk;
        for (size_t k = 0; k < nc; k++) {
            uint64_t g = (c0 + k) * p->nbc + r0 / p->blk, l = s + k * bpr;
            memcpy(an->block_absmax + g, P->bk_absmax + l, bpr * sizeof(float));
            memcpy(an->block_ratio + g, P->bk_ratio + l, bpr * sizeof(float));
            memcpy(an->block_rmse + g, P->bk_rmse + l, bpr * sizeof(float));
            if (P->codes) memcpy(an->block_scale_code + g, P->bk_code + l, bpr);
        }
    }
}

/* The result from a partial of every band.  steal: take its arrays where they are the result's. */
static int finish(qs_an_part *P, int steal, qs_analysis *an, qs_err *e)
{
    memset(an, 0, sizeof *an);
    const plan *p = &P->p;
    if (P->b0 != 0 || P->b1 != p->nbands)
        return qs_fail(e, "a partial analysis of bands [%llu, %llu) of %llu: every band is needed",
                       (unsigned long long)P->b0, (unsigned long long)P->b1, (unsigned long long)p->nbands);
    const uint64_t n = P->n, rows = P->rows, cols = P->cols;
    an->rows = rows;
    an->cols = cols;
    qs_hist *H[NHIST] = {&an->value, &an->abs_err, &an->rel_err, &an->ulp_err, &an->scale_code, &an->block_err};
    for (int k = 0; k < NHIST; k++) {
        *H[k] = P->h[k];
        if (steal) P->h[k].counts = NULL;
        else if (H[k]->counts) {
            H[k]->counts = NULL;
            if (met_hist_alloc(H[k])) goto oom;
            memcpy(H[k]->counts, P->h[k].counts, (size_t)P->h[k].nbins * sizeof(uint64_t));
        }
    }
    an->nblocks = p->nblocks;
    if (P->blocks) {
        size_t nb = (size_t)p->nblocks;
        if (steal && p->blockstats && !p->colruns) {
            an->block_absmax = P->bk_absmax;
            an->block_ratio = P->bk_ratio;
            an->block_rmse = P->bk_rmse;
            an->block_scale_code = P->bk_code;
            P->bk_absmax = P->bk_ratio = P->bk_rmse = NULL;
            P->bk_code = NULL;
        } else {
            if (!(an->block_absmax = malloc(nb * sizeof(float))) || !(an->block_ratio = malloc(nb * sizeof(float))) ||
                !(an->block_rmse = malloc(nb * sizeof(float))))
                goto oom;
            if (P->codes && !(an->block_scale_code = malloc(nb))) goto oom;
            if (p->blockstats) blocks_out(P, an);
        }
    }
    if (p->twod && n) {
        if (!(an->row_rmse = malloc((size_t)rows * sizeof(float))) || !(an->col_rmse = malloc((size_t)cols * sizeof(float))))
            goto oom;
    }
    const bpart *t = &P->tot;
    finish_metrics(&an->m, P);
    /* special slots from the counters: every finite input is binned, zero or (errors) non-finite */
    if (!P->novalue) {
        an->value.nonfinite += n - t->nfin;
        an->value.zero += t->nfin - met_hist_binned(&an->value);
    }
    qs_hist *eh[3] = {&an->abs_err, &an->rel_err, &an->ulp_err};
    uint64_t binned = met_hist_binned(&an->abs_err);
    for (int k = 0; k < 3; k++) {
        eh[k]->zero += t->nfin - t->nnonf - binned;
        eh[k]->nonfinite += t->nnonf;
    }
    if ((p->mode == PM_MEM_T || p->mode == PM_MEM_C) && n) {
        /* one block per tensor or per column: statistics from the totals */
        uint64_t nb = p->mode == PM_MEM_T ? 1 : cols;
        for (uint64_t b = 0; b < nb; b++) {
            double se2 = p->mode == PM_MEM_T ? t->se2 : P->col_se2[b];
            uint64_t nf = p->mode == PM_MEM_T ? t->nfin : P->col_nf[b];
            double S = p->mode == PM_MEM_T ? P->memS : P->colS[b];
            float bam = p->mode == PM_MEM_T ? P->amax : P->colam[b];
            double rmse = nf ? sqrt(se2 / (double)nf) : NAN;
            qs_hist *h = &an->block_err;
            if (rmse == 0) h->zero++;
            else if (!(rmse <= DBL_MAX)) h->nonfinite++;
            else {
                int i = log4bin(rmse) - 4 * HV_LO;
                if (i < 0) h->under++;
                else if (i >= h->nbins) h->over++;
                else h->counts[i]++;
            }
            if (an->block_absmax) {
                an->block_absmax[b] = bam;
                an->block_rmse[b] = (float)rmse;
                an->block_ratio[b] = S > 0 && S <= DBL_MAX ? (float)((double)bam / S) : NAN;
            }
        }
    }
    if (p->twod && n) {
        for (uint64_t r = 0; r < rows; r++)
            an->row_rmse[r] = P->row_nf[r] ? (float)sqrt(P->row_se2[r] / P->row_nf[r]) : NAN;
        for (uint64_t c = 0; c < cols; c++)
            an->col_rmse[c] = P->col_nf[c] ? (float)sqrt(P->col_se2[c] / P->col_nf[c]) : NAN;
    }
    return 0;
oom:
    qs_analysis_free(an);
    return qs_fail(e, "out of memory in the analysis");
}

int qs_analyze(const qs_apply *a, uint64_t rows, uint64_t cols, qs_an_read rd, void *rctx, int read_threadsafe,
               const qs_analyze_opts *opts, qs_analysis *out, qs_err *e)
{
    qs_an_part *P;
    memset(out, 0, sizeof *out);
    if (run_pass(a, rows, cols, rd, rctx, read_threadsafe, opts, 0, UINT64_MAX, &P, e)) return -1;
    int rc = finish(P, 1, out, e);
    qs_an_part_free(P);
    return rc;
}

int qs_analyze_nbands(const qs_apply *a, uint64_t rows, uint64_t cols, uint64_t *nbands, qs_err *e)
{
    qs_qopts o;
    prof pf;
    plan p;
    *nbands = 0;
    if (!a || !a->f) return qs_fail(e, "no format");
    if (cols && rows > UINT64_MAX / cols) return qs_fail(e, "tensor too large");
    if (resolve_opts(a, &o, e) || met_prof_init(&pf, a, &o, e) || met_plan_init(&p, &pf, a, rows, cols, e)) return -1;
    *nbands = p.nbands;
    return 0;
}

int qs_analyze_part(const qs_apply *a, uint64_t rows, uint64_t cols, qs_an_read rd, void *rctx, int read_threadsafe,
                    const qs_analyze_opts *o, uint64_t b0, uint64_t b1, qs_an_part **out, qs_err *e)
{
    return run_pass(a, rows, cols, rd, rctx, read_threadsafe, o, b0, b1, out, e);
}

int qs_an_part_finish(const qs_an_part *p, qs_analysis *out, qs_err *e)
{
    return finish((qs_an_part *)p, 0, out, e);   /* steal = 0 leaves p as it is */
}

void qs_analysis_free(qs_analysis *an)
{
    if (!an) return;
    free(an->value.counts); free(an->abs_err.counts); free(an->rel_err.counts);
    free(an->ulp_err.counts); free(an->scale_code.counts); free(an->block_err.counts);
    free(an->block_scale_code); free(an->block_absmax); free(an->block_ratio); free(an->block_rmse);
    free(an->row_rmse); free(an->col_rmse);
    memset(an, 0, sizeof *an);
}
