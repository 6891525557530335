/*
** Partial results of an analysis (struct qs_an_part in metrics_internal.h, the interface in
** metrics.h): folding band partials in band order, merging, the byte form and its reading.
*/
#include "metrics_internal.h"

#include <stdio.h>

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

void met_fold_band(bpart *t, double *row_se2, uint32_t *row_nf, double *col_se2, uint32_t *col_nf, int colacc,
                   const bpart *s)
{
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
    if (colacc) {
        add_f64(row_se2 + s->r0, s->row_se2, s->nr);
        add_u32(row_nf + s->r0, s->row_nf, s->nr);
        add_f64(col_se2 + s->c0, s->col_se2, s->nc);
        add_u32(col_nf + s->c0, s->col_nf, s->nc);
    }
}

int met_band_copy(bpart *d, const bpart *s, int colacc)
{
    *d = *s;
    d->row_se2 = d->col_se2 = NULL;
    d->row_nf = d->col_nf = NULL;
    d->ready = 0;
    if (!colacc) return 0;
    size_t nr = s->nr ? s->nr : 1, nc = s->nc ? s->nc : 1;
    if (!(d->row_se2 = malloc(nr * sizeof(double))) || !(d->row_nf = malloc(nr * sizeof(uint32_t))) ||
        !(d->col_se2 = malloc(nc * sizeof(double))) || !(d->col_nf = malloc(nc * sizeof(uint32_t))))
        return -1;
    memcpy(d->row_se2, s->row_se2, s->nr * sizeof(double));
    memcpy(d->row_nf, s->row_nf, s->nr * sizeof(uint32_t));
    memcpy(d->col_se2, s->col_se2, s->nc * sizeof(double));
    memcpy(d->col_nf, s->col_nf, s->nc * sizeof(uint32_t));
    return 0;
}

static void band_free(bpart *b)
{
    free(b->row_se2); free(b->row_nf); free(b->col_se2); free(b->col_nf);
}

int met_hists_alloc(qs_hist *h, int byte_scale, int blocky)
{
    met_hist_set(&h[H_VALUE], 0, HV_N, HV_LO, HV_HI);
    met_hist_set(&h[H_ABS], 0, HV_N, HV_LO, HV_HI);
    met_hist_set(&h[H_REL], 0, HR_N, HR_LO, HR_HI);
    met_hist_set(&h[H_ULP], 1, HU_N, -1, 1);
    met_hist_set(&h[H_CODE], 2, byte_scale ? 256 : 0, 0, 256);
    met_hist_set(&h[H_BLOCK], 0, blocky ? HV_N : 0, HV_LO, HV_HI);
    for (int k = 0; k < NHIST; k++)
        if (met_hist_alloc(&h[k])) return -1;
    return 0;
}

void qs_an_part_free(qs_an_part *P)
{
    if (!P) return;
    free(P->colS); free(P->colam);
    free(P->row_se2); free(P->col_se2); free(P->row_nf); free(P->col_nf);
    if (P->band)
        for (uint64_t b = 0; b < P->b1 - P->b0; b++) band_free(&P->band[b]);
    free(P->band);
    for (int k = 0; k < NHIST; k++) free(P->h[k].counts);
    free(P->bk_code); free(P->bk_absmax); free(P->bk_ratio); free(P->bk_rmse);
    free(P);
}

/* ---- merging ------------------------------------------------------------------------------------ */

static int same_analysis(const qs_an_part *a, const qs_an_part *b)
{
    return !memcmp(&a->p, &b->p, sizeof a->p) && a->rows == b->rows && a->cols == b->cols && a->twod == b->twod &&
           a->novalue == b->novalue && a->blocks == b->blocks && a->codes == b->codes &&
           a->h[H_CODE].nbins == b->h[H_CODE].nbins && a->h[H_BLOCK].nbins == b->h[H_BLOCK].nbins &&
           !memcmp(&a->rel_floor, &b->rel_floor, sizeof(double)) && !memcmp(&a->bpe, &b->bpe, sizeof(double)) &&
           !memcmp(&a->amax, &b->amax, sizeof(float));
}

static int grow(void **p, size_t n, size_t add, size_t size)
{
    if (add == 0) return 0;
    void *q = realloc(*p, (n + add) * size);
    if (!q) return -1;
    *p = q;
    return 0;
}

int qs_an_part_merge(qs_an_part *acc, const qs_an_part *next, qs_err *e)
{
    if (!same_analysis(acc, next)) return qs_fail(e, "partial analyses of different tensors or formats");
    if (next->b0 != acc->b1)
        return qs_fail(e, "partial analyses out of band order: bands [%llu, %llu) after [%llu, %llu)",
                       (unsigned long long)next->b0, (unsigned long long)next->b1, (unsigned long long)acc->b0,
                       (unsigned long long)acc->b1);
    const int colacc = acc->p.colacc;
    uint64_t nn = next->b1 - next->b0;
    if (next->b0 == 0) {   /* acc holds no band: next's folded sums are the sums (0 + s = s, and a sum
                           ** folded from 0 is never -0) */
        bpart s = next->tot;
        s.r0 = s.c0 = 0;
        s.nr = (size_t)next->rows;
        s.nc = (size_t)next->cols;
        s.row_se2 = next->row_se2;
        s.row_nf = next->row_nf;
        s.col_se2 = next->col_se2;
        s.col_nf = next->col_nf;
        met_fold_band(&acc->tot, acc->row_se2, acc->row_nf, acc->col_se2, acc->col_nf, colacc && next->n, &s);
    } else if (acc->b0 == 0) {   /* fold next's bands behind ours, in band order */
        for (uint64_t b = 0; b < nn; b++)
            met_fold_band(&acc->tot, acc->row_se2, acc->row_nf, acc->col_se2, acc->col_nf, colacc, &next->band[b]);
    } else {
        uint64_t na = acc->b1 - acc->b0;
        if (grow((void **)&acc->band, (size_t)na, (size_t)nn, sizeof *acc->band)) goto oom;
        for (uint64_t b = 0; b < nn; b++) {
            memset(&acc->band[na + b], 0, sizeof acc->band[na + b]);
            if (met_band_copy(&acc->band[na + b], &next->band[b], colacc)) {
                acc->b1 = next->b0 + b + 1;   /* this one is freed with acc */
                goto oom;
            }
            acc->b1 = next->b0 + b + 1;
        }
    }
    acc->b1 = next->b1;
    for (int k = 0; k < NHIST; k++) {
        qs_hist *h = &acc->h[k];
        const qs_hist *s = &next->h[k];
        if ((k == H_VALUE && acc->novalue) || !h->counts) continue;   /* the given value histogram, once */
        for (int i = 0; i < h->nbins; i++) h->counts[i] += s->counts[i];
        h->zero += s->zero;
        h->under += s->under;
        h->over += s->over;
        h->nonfinite += s->nonfinite;
    }
    if (next->nbk) {
        size_t n0 = (size_t)acc->nbk, nb = (size_t)next->nbk;
        if (grow((void **)&acc->bk_absmax, n0, nb, sizeof(float)) || grow((void **)&acc->bk_ratio, n0, nb, sizeof(float)) ||
            grow((void **)&acc->bk_rmse, n0, nb, sizeof(float)) || (acc->codes && grow((void **)&acc->bk_code, n0, nb, 1)))
            goto oom;
        memcpy(acc->bk_absmax + n0, next->bk_absmax, nb * sizeof(float));
        memcpy(acc->bk_ratio + n0, next->bk_ratio, nb * sizeof(float));
        memcpy(acc->bk_rmse + n0, next->bk_rmse, nb * sizeof(float));
        if (acc->codes) memcpy(acc->bk_code + n0, next->bk_code, nb);
        acc->nbk += next->nbk;
    }
    return 0;
oom:
    return qs_fail(e, "out of memory merging partial analyses");
}

/* ---- bytes ---------------------------------------------------------------------------------------- */

/* The byte form: native byte order and the build's plan layout (every rank of a sharded run is the
** same binary; the magic and the layout sizes say so), fields in the order of struct qs_an_part. */
static const char MAGIC[8] = {'Q', 'S', 'A', 'N', 'P', 'R', 'T', '1'};

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
    int oom;
} wbuf;

static void put(wbuf *w, const void *src, size_t n)
{
    if (w->oom || n == 0) return;
    if (w->cap - w->n < n) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap - w->n < n) cap *= 2;
        uint8_t *q = realloc(w->p, cap);
        if (!q) { w->oom = 1; return; }
        w->p = q;
        w->cap = cap;
    }
    memcpy(w->p + w->n, src, n);
    w->n += n;
}
#define PUT(w, v) put(w, &(v), sizeof(v))

typedef struct rbuf {
    const uint8_t *p;
    size_t n, at;
    int bad;
} rbuf;

static void get(rbuf *r, void *dst, size_t n)
{
    if (r->bad || n > r->n - r->at) {
        r->bad = 1;
        memset(dst, 0, n);
        return;
    }
    memcpy(dst, r->p + r->at, n);
    r->at += n;
}
#define GET(r, v) get(r, &(v), sizeof(v))

/* count elements of size bytes, allocated only when the bytes hold them */
static void *get_array(rbuf *r, uint64_t count, size_t size)
{
    if (r->bad || count > (r->n - r->at) / size) {
        r->bad = 1;
        return NULL;
    }
    void *d = malloc(count ? (size_t)count * size : 1);
    if (!d) {
        r->bad = 2;
        return NULL;
    }
    get(r, d, (size_t)count * size);
    return d;
}

static void put_band(wbuf *w, const bpart *b, int colacc, int sums)
{
    PUT(w, b->sx2); PUT(w, b->se2); PUT(w, b->se); PUT(w, b->sxe); PUT(w, b->srel);
    PUT(w, b->seu); PUT(w, b->sec); PUT(w, b->ser); PUT(w, b->maxae); PUT(w, b->maxrel);
    PUT(w, b->nfin); PUT(w, b->nunder); PUT(w, b->nclip); PUT(w, b->nnonf); PUT(w, b->nelem);
    uint64_t r0 = b->r0, c0 = b->c0, nr = b->nr, nc = b->nc;
    PUT(w, r0); PUT(w, c0); PUT(w, nr); PUT(w, nc);
    if (colacc && sums) {
        put(w, b->row_se2, b->nr * sizeof(double));
        put(w, b->row_nf, b->nr * sizeof(uint32_t));
        put(w, b->col_se2, b->nc * sizeof(double));
        put(w, b->col_nf, b->nc * sizeof(uint32_t));
    }
}

static void get_band(rbuf *r, bpart *b, const qs_an_part *P, int sums)
{
    GET(r, b->sx2); GET(r, b->se2); GET(r, b->se); GET(r, b->sxe); GET(r, b->srel);
    GET(r, b->seu); GET(r, b->sec); GET(r, b->ser); GET(r, b->maxae); GET(r, b->maxrel);
    GET(r, b->nfin); GET(r, b->nunder); GET(r, b->nclip); GET(r, b->nnonf); GET(r, b->nelem);
    uint64_t r0, c0, nr, nc;
    GET(r, r0); GET(r, c0); GET(r, nr); GET(r, nc);
    if (r0 > P->rows || nr > P->rows - r0 || c0 > P->cols || nc > P->cols - c0) r->bad = 1;   /* folded at offsets */
    if (r->bad) return;
    b->r0 = r0;
    b->c0 = c0;
    b->nr = (size_t)nr;
    b->nc = (size_t)nc;
    if (P->p.colacc && sums) {
        b->row_se2 = get_array(r, nr, sizeof(double));
        b->row_nf = get_array(r, nr, sizeof(uint32_t));
        b->col_se2 = get_array(r, nc, sizeof(double));
        b->col_nf = get_array(r, nc, sizeof(uint32_t));
    }
}

int qs_an_part_save(const qs_an_part *P, uint8_t **out, size_t *len, qs_err *e)
{
    wbuf w = {0};
    uint32_t psize = (uint32_t)sizeof(plan), bsize = (uint32_t)sizeof(bpart);
    put(&w, MAGIC, sizeof MAGIC);
    PUT(&w, psize); PUT(&w, bsize);
    PUT(&w, P->p);
    PUT(&w, P->rows); PUT(&w, P->cols); PUT(&w, P->n);
    PUT(&w, P->twod); PUT(&w, P->novalue); PUT(&w, P->blocks); PUT(&w, P->codes);
    PUT(&w, P->rel_floor); PUT(&w, P->bpe); PUT(&w, P->amax); PUT(&w, P->memS);
    PUT(&w, P->b0); PUT(&w, P->b1);
    if (P->p.mode == PM_MEM_C && P->n) {
        put(&w, P->colS, (size_t)P->cols * sizeof(double));
        put(&w, P->colam, (size_t)P->cols * sizeof(float));
    }
    const int colacc = P->p.colacc && P->n;
    if (P->b0 == 0) {
        put_band(&w, &P->tot, 0, 0);
        if (colacc) {
            put(&w, P->row_se2, (size_t)P->rows * sizeof(double));
            put(&w, P->row_nf, (size_t)P->rows * sizeof(uint32_t));
            put(&w, P->col_se2, (size_t)P->cols * sizeof(double));
            put(&w, P->col_nf, (size_t)P->cols * sizeof(uint32_t));
        }
    } else
        for (uint64_t b = 0; b < P->b1 - P->b0; b++) put_band(&w, &P->band[b], colacc, 1);
    for (int k = 0; k < NHIST; k++) {
        const qs_hist *h = &P->h[k];
        PUT(&w, h->nbins);
        if (h->nbins > 0) put(&w, h->counts, (size_t)h->nbins * sizeof(uint64_t));
        PUT(&w, h->zero); PUT(&w, h->under); PUT(&w, h->over); PUT(&w, h->nonfinite);
    }
    PUT(&w, P->nbk);
    if (P->nbk) {
        put(&w, P->bk_absmax, (size_t)P->nbk * sizeof(float));
        put(&w, P->bk_ratio, (size_t)P->nbk * sizeof(float));
        put(&w, P->bk_rmse, (size_t)P->nbk * sizeof(float));
        if (P->codes) put(&w, P->bk_code, (size_t)P->nbk);
    }
    if (w.oom) {
        free(w.p);
        return qs_fail(e, "out of memory saving a partial analysis");
    }
    *out = w.p;
    *len = w.n;
    return 0;
}

/* The plan's fields that the merge and the finish index with. */
static int plan_ok(const qs_an_part *P)
{
    const plan *p = &P->p;
    if (p->rows != P->rows || p->cols != P->cols || p->n != P->n || p->mode < PM_ROWS || p->mode > PM_MEM_C) return 0;
    if (P->b0 > P->b1 || P->b1 > p->nbands || p->nblocks > P->n) return 0;
    if (P->n == 0) return p->nbands == 0;
    if (p->colacc != (p->twod || p->mode == PM_MEM_C) || P->twod != p->twod) return 0;
    if (p->npr) {
        if (p->piece == 0 || p->piece > P->cols || p->nbands != P->rows * p->npr ||
            p->npr != (P->cols + p->piece - 1) / p->piece)
            return 0;
    } else if (p->band_rows == 0 || p->band_rows > P->rows || p->nbands != (P->rows + p->band_rows - 1) / p->band_rows)
        return 0;
    if (p->blockstats) {   /* column runs: whole blocks per band but in a single band */
        if (p->colruns && (p->blk == 0 || (p->band_rows % p->blk && p->nbands > 1) || p->nbc != (P->rows + p->blk - 1) / p->blk ||
                           p->nblocks != P->cols * p->nbc))
            return 0;
        if (!p->colruns && p->nblocks != P->rows * p->nbr) return 0;
    }
    return 1;
}

int qs_an_part_load(const uint8_t *bytes, size_t len, qs_an_part **out, qs_err *e)
{
    *out = NULL;
    rbuf r = {bytes, len, 0, 0};
    char magic[8];
    uint32_t psize, bsize;
    get(&r, magic, sizeof magic);
    GET(&r, psize); GET(&r, bsize);
    if (r.bad || memcmp(magic, MAGIC, sizeof magic) || psize != sizeof(plan) || bsize != sizeof(bpart))
        return qs_fail(e, "not a partial analysis of this qscope build");
    qs_an_part *P = calloc(1, sizeof *P);
    if (!P) return qs_fail(e, "out of memory reading a partial analysis");
    GET(&r, P->p);
    GET(&r, P->rows); GET(&r, P->cols); GET(&r, P->n);
    GET(&r, P->twod); GET(&r, P->novalue); GET(&r, P->blocks); GET(&r, P->codes);
    GET(&r, P->rel_floor); GET(&r, P->bpe); GET(&r, P->amax); GET(&r, P->memS);
    GET(&r, P->b0); GET(&r, P->b1);
    if (r.bad || (P->cols && P->rows > UINT64_MAX / P->cols) || P->rows * P->cols != P->n || !plan_ok(P)) {
        r.bad = 1;
        P->b1 = P->b0;   /* no bands to free */
        goto done;
    }
    if (P->p.mode == PM_MEM_C && P->n) {
        P->colS = get_array(&r, P->cols, sizeof(double));
        P->colam = get_array(&r, P->cols, sizeof(float));
    }
    const int colacc = P->p.colacc && P->n;
    uint64_t nb = P->b1 - P->b0;
    if (P->b0 == 0) {
        get_band(&r, &P->tot, P, 0);
        if (colacc) {
            P->row_se2 = get_array(&r, P->rows, sizeof(double));
            P->row_nf = get_array(&r, P->rows, sizeof(uint32_t));
            P->col_se2 = get_array(&r, P->cols, sizeof(double));
            P->col_nf = get_array(&r, P->cols, sizeof(uint32_t));
        }
    } else {
        /* each band takes at least its scalars: a count the bytes cannot hold is refused first */
        if (nb > (len - r.at) / (15 * 8 + 4 * 8) || !(P->band = calloc((size_t)nb, sizeof *P->band))) {
            r.bad = 1;
            P->b1 = P->b0;
            goto done;
        }
        for (uint64_t b = 0; b < nb && !r.bad; b++) get_band(&r, &P->band[b], P, 1);
    }
    for (int k = 0; k < NHIST && !r.bad; k++) {
        qs_hist *h = &P->h[k];
        static const int want[NHIST] = {HV_N, HV_N, HR_N, HU_N, 256, HV_N};
        static const int kind[NHIST] = {0, 0, 0, 1, 2, 0};
        static const double lo[NHIST] = {HV_LO, HV_LO, HR_LO, -1, 0, HV_LO}, hi[NHIST] = {HV_HI, HV_HI, HR_HI, 1, 256, HV_HI};
        GET(&r, h->nbins);
        if (h->nbins != want[k] && !((k == H_CODE || k == H_BLOCK) && h->nbins == 0)) {
            r.bad = 1;
            break;
        }
        met_hist_set(h, kind[k], h->nbins, lo[k], hi[k]);
        if (h->nbins) h->counts = get_array(&r, (uint64_t)h->nbins, sizeof(uint64_t));
        GET(&r, h->zero); GET(&r, h->under); GET(&r, h->over); GET(&r, h->nonfinite);
    }
    GET(&r, P->nbk);
    if (!r.bad && P->nbk != (P->blocks ? met_band_nblocks(&P->p, P->b0, P->b1) : 0)) r.bad = 1;
    if (!r.bad && P->nbk) {
        P->bk_absmax = get_array(&r, P->nbk, sizeof(float));
        P->bk_ratio = get_array(&r, P->nbk, sizeof(float));
        P->bk_rmse = get_array(&r, P->nbk, sizeof(float));
        if (P->codes) P->bk_code = get_array(&r, P->nbk, 1);
    }
    if (!r.bad && r.at != len) r.bad = 1;
done:
    if (r.bad) {
        int oom = r.bad == 2;
        qs_an_part_free(P);
        return oom ? qs_fail(e, "out of memory reading a partial analysis")
                   : qs_fail(e, "a partial analysis: truncated or inconsistent bytes");
    }
    *out = P;
    return 0;
}
