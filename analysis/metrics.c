/*
** The analysis engine's driver (interface, definitions and conventions in metrics.h; the engine's
** files are listed in metrics_internal.h): one streaming pass that fake-quantizes a tensor exactly as
** kernels/format_apply.c does and accumulates error metrics, histograms and per-block / per-row /
** per-column statistics, on `threads` threads, bit-identical for any thread count.
**
** Work is cut into bands whose boundaries depend only on the shape and the format, never on the
** thread count (metrics_plan.c).  Threads claim bands in any order; each band's partial sums (double,
** LANES independent accumulators combined in a fixed order) go to a window of slots and are merged
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

#if MET_X86
__attribute__((target("avx512f")))
static size_t add_f64_avx512(double *restrict d, const double *restrict s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm512_storeu_pd(d + i, _mm512_add_pd(_mm512_loadu_pd(d + i), _mm512_loadu_pd(s + i)));
    return i;
}

__attribute__((target("avx512f")))
static size_t add_u32_avx512(uint32_t *restrict d, const uint32_t *restrict s, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_si512(d + i, _mm512_add_epi32(_mm512_loadu_si512(d + i), _mm512_loadu_si512(s + i)));
    return i;
}
#endif

/* d[i] += s[i]: element-wise, so any vector width gives the same bits (a band's column sums hold
** one double per column: the scalar loop showed in profiles of wide tensors). */
static void add_f64(double *restrict d, const double *restrict s, size_t n)
{
    size_t i = 0;
#if MET_X86
    if (qs_simd_level() >= QS_SIMD_AVX512) i = add_f64_avx512(d, s, n);
#endif
    for (; i < n; i++) d[i] += s[i];
}

static void add_u32(uint32_t *restrict d, const uint32_t *restrict s, size_t n)
{
    size_t i = 0;
#if MET_X86
    if (qs_simd_level() >= QS_SIMD_AVX512) i = add_u32_avx512(d, s, n);
#endif
    for (; i < n; i++) d[i] += s[i];
}

/* Merge one band partial into the totals (called in band order, under the mutex). */
static void merge_part(job *j, const bpart *s)
{
    bpart *t = &j->tot;
    t->sx2 += s->sx2;
    t->se2 += s->se2;
    t->se += s->se;
    t->sxe += s->sxe;
    t->srel += s->srel;
    t->seu += s->seu;
    t->sec += s->sec;
    t->ser += s->ser;
    t->maxae = s->maxae > t->maxae ? s->maxae : t->maxae;
    t->maxrel = s->maxrel > t->maxrel ? s->maxrel : t->maxrel;
    t->nfin += s->nfin;
    t->nunder += s->nunder;
    t->nclip += s->nclip;
    t->nnonf += s->nnonf;
    t->nelem += s->nelem;
    if (j->p->colacc) {
        add_f64(j->row_se2 + s->r0, s->row_se2, s->nr);
        add_u32(j->row_nf + s->r0, s->row_nf, s->nr);
        add_f64(j->col_se2 + s->c0, s->col_se2, s->nc);
        add_u32(j->col_nf + s->c0, s->col_nf, s->nc);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    job *j = w->j;
    for (;;) {
        if (atomic_load(&j->stop)) break;
        uint64_t b = atomic_fetch_add(&j->next, 1);
        if (b >= j->p->nbands) break;
        pthread_mutex_lock(&j->mu);
        while (!atomic_load(&j->stop) && b >= j->frontier + j->wsize) pthread_cond_wait(&j->cv, &j->mu);
        pthread_mutex_unlock(&j->mu);
        if (atomic_load(&j->stop)) break;
        bpart *sl = &j->slots[b % j->wsize];
        w->err.msg[0] = 0;
        if (met_do_band(w, b, sl, &w->err)) {
            record_error(j, b, w->err.msg);
            break;
        }
        pthread_mutex_lock(&j->mu);
        sl->ready = 1;
        int moved = 0;
        while (j->frontier < j->p->nbands && j->slots[j->frontier % j->wsize].ready) {
            bpart *s = &j->slots[j->frontier % j->wsize];
            merge_part(j, s);
            j->done_elems += s->nelem;
            s->ready = 0;
            j->frontier++;
            moved = 1;
        }
        if (moved) pthread_cond_broadcast(&j->cv);
        uint64_t done = j->done_elems;
        pthread_mutex_unlock(&j->mu);
        if (w->id == 0 && j->progress && j->progress(j->pctx, j->pbase + done, j->ptotal)) {
            pthread_mutex_lock(&j->mu);
            j->cancelled = 1;
            pthread_mutex_unlock(&j->mu);
            record_error(j, 0, "cancelled");
            break;
        }
    }
    return NULL;
}

/* ---- entry point ---------------------------------------------------------------------------- */

static void worker_free(worker *w)
{
    free(w->x); free(w->xt); free(w->q); free(w->codes); free(w->meta);
    free(w->reps); free(w->pcodes); free(w->pmeta); free(w->pS); free(w->pQ);
    free(w->bcode); free(w->bslot); free(w->bscale); free(w->bse2); free(w->bnf); free(w->bam);
    free(w->hv.c); free(w->ha.c); free(w->hr.c); free(w->hu.c); free(w->hb.c); free(w->hs.c);
    free(w->kSf); free(w->kSE); free(w->kSM); free(w->kQb); free(w->hb4); free(w->hs4);
    free(w->wv); free(w->wa); free(w->wr); free(w->wu);
}

static int worker_alloc(worker *w, const plan *p, const prof *pf)
{
    size_t L = p->max_len ? p->max_len : 1, nb = p->max_blocks ? p->max_blocks : 1;
    size_t ns = p->max_segs ? p->max_segs : 1, mb = pf->f->meta_bytes > 0 ? (size_t)pf->f->meta_bytes : 1;
    int mem = p->mode == PM_MEM_T || p->mode == PM_MEM_C;
    size_t run = p->colruns ? p->max_nr : p->max_nc;
    if (!mem && !(w->x = malloc(L * sizeof(float)))) return -1;
    if (p->colruns && !(w->xt = malloc(L * sizeof(float)))) return -1;
    if (!(w->q = malloc(L * sizeof(float)))) return -1;
    if (pf->fam == FAM_HIF4 || pf->fam == FAM_M2X) {
        size_t nbr = run / (p->blk ? p->blk : 1) + 1;
        if (!(w->codes = malloc((run ? run : 1) * sizeof(uint32_t))) || !(w->meta = malloc(nbr * mb))) return -1;
    }
    if (!(w->reps = malloc(nb * sizeof(float))) || !(w->pcodes = malloc(nb * sizeof(uint32_t))) ||
        !(w->pmeta = malloc(nb * mb)) || !(w->pS = malloc(nb * sizeof(float))) ||
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
        float *buf = dst + (dst == j->X ? s : 0);
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

int qs_analyze(const qs_apply *a, uint64_t rows, uint64_t cols, qs_an_read rd, void *rctx, int read_threadsafe,
               const qs_analyze_opts *opts, qs_analysis *out, qs_err *e)
{
    qs_analyze_opts od;
    memset(&od, 0, sizeof od);
    if (opts) od = *opts;
    memset(out, 0, sizeof *out);
    if (!a || !a->f) return qs_fail(e, "no format");
    if (cols && rows > UINT64_MAX / cols) return qs_fail(e, "tensor too large");
    uint64_t n = rows * cols;
    if (n && !rd) return qs_fail(e, "no read function");
    if (!(od.rel_floor >= 0) || isinf(od.rel_floor)) return qs_fail(e, "relative-error floor must be >= 0");
    double rel_floor = od.rel_floor > 0 ? od.rel_floor : QS_REL_FLOOR_DEFAULT;

    qs_qopts o = a->o;
    if (qs_qopts_check(a->f, &o, e)) return -1;
    if (a->gran == QS_GRAN_ROW || a->gran == QS_GRAN_COL || a->gran == QS_GRAN_TENSOR) {
        if (a->f->block != 0)
            return qs_fail(e, "format %s has fixed blocks: granularity '%s' needs int8 or int4", a->f->name,
                           qs_gran_name(a->gran));
        o.block = 0;
    }

    job j;
    memset(&j, 0, sizeof j);
    prof pf;
    plan p;
    worker *w = NULL;
    int T = 0, rc = -1, sync_init = 0;
    j.rd = rd;
    j.rctx = rctx;
    j.serial = !read_threadsafe;
    j.progress = od.progress;
    if (od.value_hist) {
        const qs_hist *vh = od.value_hist;
        uint64_t tot = vh->zero + vh->under + vh->over + vh->nonfinite;
        for (int i = 0; vh->counts && i < vh->nbins; i++) tot += vh->counts[i];
        if (vh->kind != 0 || vh->nbins != HV_N || vh->lo != HV_LO || vh->hi != HV_HI || !vh->counts || tot != n)
            return qs_fail(e, "the given value histogram is not this tensor's (%llu values for %llu)",
                           (unsigned long long)tot, (unsigned long long)n);
        j.novalue = 1;
    }
    j.pctx = od.progress_ctx;

    /* absmax: given, or one reading pass */
    int prepass = !od.absmax_known && n > 0;
    int memmode = 0;
    if (met_prof_init(&pf, a, &o, e)) return -1;
    if (met_plan_init(&p, &pf, a, rows, cols, e)) return -1;
    memmode = p.mode == PM_MEM_T || p.mode == PM_MEM_C;
    j.ptotal = n * (uint64_t)(1 + prepass + memmode);
    float amax = 0;
    if (prepass) {
        float *buf = malloc((n < BAND ? (size_t)n : BAND) * sizeof(float));
        if (!buf) return qs_fail(e, "out of memory");
        int r = read_chunked(&j, n, buf, &amax, 0, e);
        free(buf);
        if (r) return -1;
    } else if (od.absmax_known) {
        if (!(od.absmax >= 0) || !(od.absmax <= FLT_MAX)) return qs_fail(e, "absmax must be finite and >= 0");
        amax = (float)od.absmax;
    }
    if (!strcmp(a->f->family, "nvfp4") && !(o.tensor_scale > 0)) o.tensor_scale = amax > 0 ? amax : 0;
    pf.o = o;
    j.F = rel_floor * (double)amax;
    pf.Ff = (float)j.F > 0 ? (float)j.F : u2f(1);
    j.pf = &pf;
    j.p = &p;

    /* scaled casts: one more reading pass for the absmax of each scale's run (format_apply's scales) */
    size_t ncs = 0;
    if (a->cscale) {
        if (pf.fam != FAM_CAST) { qs_fail(e, "format %s takes no scale=", a->f->name); goto fail; }
        if (qs_cast_scales(a, rows, cols, rd, rctx, &j.cs, &j.ci, &ncs, e)) goto fail;
        j.cscale = a->cscale;
        if (!(j.cSf = calloc(ncs + 16, sizeof(float))) || !(j.cSE = calloc(ncs + 16, sizeof(int32_t))) ||
            !(j.cSM = calloc(ncs + 16, sizeof(uint32_t))) || !(j.cQb = calloc(ncs + 16, sizeof(uint32_t))))
            goto oom;
        j.cpow2 = j.cse0 = 1;
        for (size_t i = 0; i < ncs; i++) {
            /* an unscaled run (s = 0) keeps S = 1 and the cast's top; else q = Q(x s) inv lives on the
            ** grid times inv, and nothing clips: the run's absmax maps onto the target (<= max_finite), and
            ** an absmax landing on max_finite * inv, a hair below x after fl32(inv), is rounding, not clipping */
            double S = j.cs[i] != 0 ? (double)j.ci[i] : 1.0;
            float top = j.cs[i] != 0 ? 0.0f : pf.cast_top;
            scale_parts(san_S(S), &j.cSf[i], &j.cSE[i], &j.cSM[i]);
            j.cQb[i] = san_Q(top);
            j.cpow2 &= j.cSM[i] == 0 && S > 0;
            j.cse0 &= j.cSE[i] == 0;
        }
    }

    /* outputs */
    qs_analysis *an = out;
    an->rows = rows;
    an->cols = cols;
    met_hist_set(&an->value, 0, HV_N, HV_LO, HV_HI);
    met_hist_set(&an->abs_err, 0, HV_N, HV_LO, HV_HI);
    met_hist_set(&an->rel_err, 0, HR_N, HR_LO, HR_HI);
    met_hist_set(&an->ulp_err, 1, HU_N, -1, 1);
    met_hist_set(&an->scale_code, 2, pf.byte_scale ? 256 : 0, 0, 256);
    met_hist_set(&an->block_err, 0, p.nblocks ? HV_N : 0, HV_LO, HV_HI);
    if (met_hist_alloc(&an->value) || met_hist_alloc(&an->abs_err) || met_hist_alloc(&an->rel_err) || met_hist_alloc(&an->ulp_err) ||
        met_hist_alloc(&an->scale_code) || met_hist_alloc(&an->block_err))
        goto oom;
    an->nblocks = p.nblocks;
    if (od.blocks && p.nblocks) {
        size_t nb = (size_t)p.nblocks;
        if (!(an->block_absmax = malloc(nb * sizeof(float))) || !(an->block_ratio = malloc(nb * sizeof(float))) ||
            !(an->block_rmse = malloc(nb * sizeof(float))))
            goto oom;
        if (pf.byte_scale && !(an->block_scale_code = malloc(nb))) goto oom;
        j.bk_absmax = an->block_absmax;
        j.bk_ratio = an->block_ratio;
        j.bk_rmse = an->block_rmse;
        j.bk_code = an->block_scale_code;
    }
    if (p.colacc && n) {
        if (!(j.row_se2 = calloc((size_t)rows, sizeof(double))) || !(j.row_nf = calloc((size_t)rows, sizeof(uint32_t))) ||
            !(j.col_se2 = calloc((size_t)cols, sizeof(double))) || !(j.col_nf = calloc((size_t)cols, sizeof(uint32_t))))
            goto oom;
    }
    if (p.twod && n) {
        if (!(an->row_rmse = malloc((size_t)rows * sizeof(float))) || !(an->col_rmse = malloc((size_t)cols * sizeof(float))))
            goto oom;
    }

    /* threads and the window */
    T = od.threads < 1 ? 1 : od.threads > MAX_THREADS ? MAX_THREADS : od.threads;
    if ((uint64_t)T > p.nbands) T = p.nbands ? (int)p.nbands : 1;
    j.nthreads = T;
    j.wsize = 2 * (uint64_t)T;
    if (pthread_mutex_init(&j.mu, NULL)) { qs_fail(e, "cannot create a mutex"); goto fail; }
    if (pthread_mutex_init(&j.read_mu, NULL)) { pthread_mutex_destroy(&j.mu); qs_fail(e, "cannot create a mutex"); goto fail; }
    if (pthread_cond_init(&j.cv, NULL)) {
        pthread_mutex_destroy(&j.mu);
        pthread_mutex_destroy(&j.read_mu);
        qs_fail(e, "cannot create a condition variable");
        goto fail;
    }
    sync_init = 1;
    if (!(j.slots = calloc((size_t)j.wsize, sizeof *j.slots))) goto oom;
    if (p.colacc)
        for (uint64_t s = 0; s < j.wsize; s++) {
            bpart *sl = &j.slots[s];
            size_t nr = p.max_nr ? p.max_nr : 1, nc = p.max_nc ? p.max_nc : 1;
            if (!(sl->row_se2 = malloc(nr * sizeof(double))) || !(sl->row_nf = malloc(nr * sizeof(uint32_t))) ||
                !(sl->col_se2 = malloc(nc * sizeof(double))) || !(sl->col_nf = malloc(nc * sizeof(uint32_t))))
                goto oom;
        }
    if (!(w = calloc((size_t)T, sizeof *w))) goto oom;
    for (int t = 0; t < T; t++) {
        w[t].j = &j;
        w[t].id = t;
        w[t].simd = MET_X86 ? qs_simd_level() : QS_SIMD_SCALAR;
        if (worker_alloc(&w[t], &p, &pf)) goto oom;
    }

    /* in-memory modes: the whole tensor, fake-quantized first */
    if (memmode && n) {
        if (n > SIZE_MAX / sizeof(float)) { qs_fail(e, "tensor too large"); goto fail; }
        j.X = malloc((size_t)n * sizeof(float));
        j.Y = malloc((size_t)n * sizeof(float));
        if (!j.X || !j.Y) goto oom;
        float am2;
        if (read_chunked(&j, n, j.X, &am2, n * (uint64_t)prepass, e)) goto fail;
        const qs_format *f = pf.f;
        if (p.mode == PM_MEM_T) {
            if (f->fakeq(f, &o, j.X, (size_t)n, j.Y, e)) goto fail;
            w[0].reps[0] = met_block_rep(&w[0], j.X, (size_t)n, pf.finite_rep);
            if (met_proxy_scales(&w[0], 1, e)) goto fail;
            j.memS = w[0].pS[0];
            j.memQ = w[0].pQ[0];
        } else {
            float *cx = malloc((size_t)rows * sizeof(float)), *cy = malloc((size_t)rows * sizeof(float));
            j.colS = malloc((size_t)cols * sizeof(double));
            j.colQ = malloc((size_t)cols * sizeof(float));
            if (!cx || !cy || !j.colS || !j.colQ) { free(cx); free(cy); goto oom; }
            int bad = 0;
            for (uint64_t c = 0; c < cols && !bad; c++) {
                for (uint64_t i = 0; i < rows; i++) cx[i] = j.X[i * cols + c];
                qs_qopts oc = o;
                oc.index0 += c * rows;
                if (f->fakeq(f, &oc, cx, (size_t)rows, cy, e)) bad = 1;
                for (uint64_t i = 0; i < rows; i++) j.Y[i * cols + c] = cy[i];
                w[0].reps[c] = met_block_rep(&w[0], cx, (size_t)rows, pf.finite_rep);
            }
            free(cx);
            free(cy);
            if (bad || met_proxy_scales(&w[0], (size_t)cols, e)) goto fail;
            for (uint64_t c = 0; c < cols; c++) {
                j.colS[c] = w[0].pS[c];
                j.colQ[c] = w[0].pQ[c];
            }
            if (j.bk_absmax)
                for (uint64_t c = 0; c < cols; c++) j.bk_absmax[c] = w[0].reps[c];
        }
    }

    /* the band pass */
    j.pbase = n * (uint64_t)(prepass + memmode);
    if (p.nbands) {
        int started = 1;
        for (int t = 1; t < T; t++) {
            if (pthread_create(&w[t].th, NULL, worker_main, &w[t]) != 0) {
                record_error(&j, 0, "cannot create a worker thread");
                break;
            }
            started++;
        }
        if (!atomic_load(&j.stop)) worker_main(&w[0]);
        for (int t = 1; t < started; t++) pthread_join(w[t].th, NULL);
        if (j.failed) {
            memcpy(e->msg, j.err.msg, sizeof e->msg);
            goto fail;
        }
        if (tick(&j, j.ptotal, e)) goto fail;   /* the last bands may have been merged by another thread */
        if (j.frontier != p.nbands) { qs_fail(e, "internal error: %llu of %llu bands merged",
                                              (unsigned long long)j.frontier, (unsigned long long)p.nbands); goto fail; }
    }

    /* results */
    {
        const bpart *t = &j.tot;
        qs_metrics *m = &an->m;
        m->n = n;
        m->n_finite = t->nfin;
        m->rel_floor = rel_floor;
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
        const qs_format *f = pf.f;
        m->bits_per_elem = f->elem_bits;
        if (n && p.nblocks) m->bits_per_elem += f->meta_bits * (double)p.nblocks / (double)n;
        if (n && !strcmp(f->family, "nvfp4")) m->bits_per_elem += 32.0 / (double)n;
        if (n && ncs) m->bits_per_elem += 32.0 * (double)ncs / (double)n;   /* a scaled cast's FP32 scales */

        for (int k = 0; k < T; k++) {
            met_hwin_flush(w[k].wv, &w[k].hv);
            met_hwin_flush(w[k].wa, &w[k].ha);
            met_hwin_flush(w[k].wr, &w[k].hr);
            met_hwin_flush(w[k].wu, &w[k].hu);
            if (!j.novalue) met_hist_add(&an->value, &w[k].hv);
            met_hist_add(&an->abs_err, &w[k].ha);
            met_hist_add(&an->rel_err, &w[k].hr);
            met_hist_add(&an->ulp_err, &w[k].hu);
            met_hist_add(&an->block_err, &w[k].hb);
            met_hist_add(&an->scale_code, &w[k].hs);
        }
        /* special slots from the counters: every finite input is binned, zero or (errors) non-finite */
        if (!j.novalue) {
            an->value.nonfinite += n - t->nfin;
            an->value.zero += t->nfin - met_hist_binned(&an->value);
        }
        qs_hist *eh[3] = {&an->abs_err, &an->rel_err, &an->ulp_err};
        uint64_t binned = met_hist_binned(&an->abs_err);
        for (int k = 0; k < 3; k++) {
            eh[k]->zero += t->nfin - t->nnonf - binned;
            eh[k]->nonfinite += t->nnonf;
        }
        if (j.novalue) {
            const qs_hist *vh = od.value_hist;
            memcpy(an->value.counts, vh->counts, (size_t)vh->nbins * sizeof *vh->counts);
            an->value.zero = vh->zero;
            an->value.under = vh->under;
            an->value.over = vh->over;
            an->value.nonfinite = vh->nonfinite;
        }
        if (memmode && n) {
            /* one block per tensor or per column: statistics from the totals */
            uint64_t nb = p.mode == PM_MEM_T ? 1 : cols;
            for (uint64_t b = 0; b < nb; b++) {
                double se2 = p.mode == PM_MEM_T ? t->se2 : j.col_se2[b];
                uint64_t nf = p.mode == PM_MEM_T ? t->nfin : j.col_nf[b];
                double S = p.mode == PM_MEM_T ? j.memS : j.colS[b];
                float bam = p.mode == PM_MEM_T ? amax : w[0].reps[b];
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
                if (j.bk_absmax) {
                    j.bk_absmax[b] = bam;
                    j.bk_rmse[b] = (float)rmse;
                    j.bk_ratio[b] = S > 0 && S <= DBL_MAX ? (float)((double)bam / S) : NAN;
                }
            }
        }
        if (p.twod && n) {
            for (uint64_t r = 0; r < rows; r++)
                an->row_rmse[r] = j.row_nf[r] ? (float)sqrt(j.row_se2[r] / j.row_nf[r]) : NAN;
            for (uint64_t c = 0; c < cols; c++)
                an->col_rmse[c] = j.col_nf[c] ? (float)sqrt(j.col_se2[c] / j.col_nf[c]) : NAN;
        }
    }
    rc = 0;
    goto done;
oom:
    qs_fail(e, "out of memory in the analysis");
fail:
    rc = -1;
done:
    if (w) {
        for (int t = 0; t < T; t++) worker_free(&w[t]);
        free(w);
    }
    if (j.slots)
        for (uint64_t s = 0; s < j.wsize; s++) {
            free(j.slots[s].row_se2); free(j.slots[s].row_nf); free(j.slots[s].col_se2); free(j.slots[s].col_nf);
        }
    free(j.slots);
    free(j.row_se2); free(j.row_nf); free(j.col_se2); free(j.col_nf);
    free(j.X); free(j.Y); free(j.colS); free(j.colQ);
    free(j.cs); free(j.ci); free(j.cSf); free(j.cSE); free(j.cSM); free(j.cQb);
    if (sync_init) {
        pthread_cond_destroy(&j.cv);
        pthread_mutex_destroy(&j.read_mu);
        pthread_mutex_destroy(&j.mu);
    }
    if (rc) qs_analysis_free(out);
    return rc;
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
