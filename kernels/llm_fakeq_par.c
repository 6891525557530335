/* Parallel in-memory fake quantization of training operands (see llm_fakeq_par.h). */
#include "llm_fakeq_par.h"
#include "llm_fakeq_fast.h"
#include "llm_fakeq_nvfp4.h"
#include "llm_recipe.h"
#include "pool.h"
#include "resq.h"
#include "simd.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#define MIN_PAR ((size_t)1 << 14)   /* smaller operands take the plain path */
#define PANEL 64                     /* columns per axis-0 task */
#define WIDE 1024                    /* columns per axis-0 task of the nvfp4 kernel, at most (wide()) */
#define ROWS_MIN 16                  /* rows per axis-1 task, at least */
#define BAND ((size_t)1 << 20)       /* qs_format_apply's band: longer runs are cut there */
#define CHUNK ((size_t)1 << 13)      /* values per row group counted together (axis 1) */

/* 8 x 8 block: d[c][r] = s[r][c] (unpack, shuffle, permute; written out so that it stays in registers). */
__attribute__((target("avx2"))) static void tr8(const float *s, size_t ls, float *d, size_t ld)
{
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ls), r2 = _mm256_loadu_ps(s + 2 * ls);
    __m256 r3 = _mm256_loadu_ps(s + 3 * ls), r4 = _mm256_loadu_ps(s + 4 * ls), r5 = _mm256_loadu_ps(s + 5 * ls);
    __m256 r6 = _mm256_loadu_ps(s + 6 * ls), r7 = _mm256_loadu_ps(s + 7 * ls);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3);
    __m256 t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)), u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)), u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + ld, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* d (nc x nr, leading dimension ld) = the nr x nc block of s (leading dimension ls) transposed. */
static void transpose(const float *s, size_t ls, float *d, size_t ld, size_t nr, size_t nc, int avx)
{
    size_t r8 = avx ? nr / 8 * 8 : 0, c8 = avx ? nc / 8 * 8 : 0;
    for (size_t r = 0; r < r8; r += 8)
        for (size_t c = 0; c < c8; c += 8) tr8(s + r * ls + c, ls, d + c * ld + r, ld);
    for (size_t r = 0; r < nr; r++)
        for (size_t c = r < r8 ? c8 : 0; c < nc; c++) d[c * ld + r] = s[r * ls + c];
}

typedef struct {
    qs_apply a;   /* axis 1, tensor scale resolved */
    const float *x;
    float *y;
    size_t rows, cols, per;   /* per: rows (axis 1) or columns (axis 0) per task */
    int axis, rht;
    int fast;     /* a family's fused kernel takes every task (llm_fakeq_fast.h) */
    int bands;    /* axis 0 on the nvfp4 kernel: each task a range of 16-row bands across every column
                  ** (per: its rows), so each row is read whole, by one task */
    uint64_t seed;
    int *rc;
    qs_err *err;
    uint64_t (*cnt)[4];   /* with statistics: each task's counts (qs_llm_opstat_runs), else NULL */
    float ts;             /* the matrix's finite absmax, for them */
} job;

/* One run of n values (blocks from its start, SR counters from index0): qs_format_apply's own call for
** a run it holds in memory (no scaled cast here; a run of at most BAND values is never cut). */
static int run(const qs_apply *a, uint64_t index0, const float *x, size_t n, float *y, qs_err *e)
{
    qs_qopts o = a->o;
    o.index0 += index0;
    return a->f->fakeq(a->f, &o, x, n, y, e);
}

static void task_rows(void *ctx, size_t t, int slot)
{
    (void)slot;
    job *j = ctx;
    size_t r0 = t * j->per, nr = j->rows - r0 < j->per ? j->rows - r0 : j->per, C = j->cols;
    if (j->fast) {
        qs_fq_task ft = {&j->a, 1, j->x, j->y, j->rows, C, r0, r0 + nr, 0, C, j->rht, j->seed,
                         j->cnt ? j->cnt[t] : NULL, j->ts};
        j->rc[t] = qs_llm_fakeq_fast(&ft, &j->err[t]);
        return;
    }
    const float *x = j->x + r0 * C;
    float *y = j->y + r0 * C;
    if (j->rht || x == y || C > BAND) {   /* through qs_format_apply's band buffers */
        qs_apply a = j->a;
        a.o.index0 += r0 * C;   /* these rows' SR counters in the whole matrix */
        if (j->rht) {           /* along the rows: each row on its own */
            if (y != x) memcpy(y, x, nr * C * sizeof *y);
            qs_llm_rht16(y, nr, C, 1, j->seed, 0);
        }
        j->rc[t] = qs_fakeq_matrix(&a, j->rht ? y : x, nr, C, y, &j->err[t]);
        return;
    }
    size_t k = j->cnt && C < CHUNK ? CHUNK / C : 1;   /* rows counted together, still in cache */
    for (size_t r = 0; r < nr && !j->rc[t]; r += k) {
        size_t nk = nr - r < k ? nr - r : k;
        for (size_t i = r; i < r + nk && !j->rc[t]; i++)
            j->rc[t] = run(&j->a, (r0 + i) * C, x + i * C, C, y + i * C, &j->err[t]);
        if (j->cnt && !j->rc[t])
            j->rc[t] = qs_llm_opstat_runs(&j->a, x + r * C, y + r * C, nk, C, C, j->ts, j->cnt[t], &j->err[t]);
    }
}

static void task_panel(void *ctx, size_t t, int slot)
{
    (void)slot;
    job *j = ctx;
    size_t c0 = t * j->per, nc = j->cols - c0 < j->per ? j->cols - c0 : j->per, R = j->rows;
    if (j->bands) {
        size_t r0 = t * j->per, r1 = R - r0 < j->per ? R : r0 + j->per;
        qs_fq_task ft = {&j->a, 0, j->x, j->y, R, j->cols, r0, r1, 0, j->cols, j->rht, j->seed,
                         j->cnt ? j->cnt[t] : NULL, j->ts};
        j->rc[t] = qs_llm_fakeq_fast(&ft, &j->err[t]);
        return;
    }
    if (j->fast) {
        qs_fq_task ft = {&j->a, 0, j->x, j->y, R, j->cols, 0, R, c0, c0 + nc, j->rht, j->seed,
                         j->cnt ? j->cnt[t] : NULL, j->ts};
        j->rc[t] = qs_llm_fakeq_fast(&ft, &j->err[t]);
        return;
    }
    size_t ld = R <= BAND ? R + 16 : R;   /* padded rows: no 4 KiB strides in the transposes */
    float *p = malloc(2 * nc * ld * sizeof *p), *q = p + nc * ld;
    if (!p) {
        j->rc[t] = qs_fail(&j->err[t], "out of memory for an operand panel (%zu floats)", 2 * nc * ld);
        return;
    }
    int avx = qs_simd_level() >= QS_SIMD_AVX2;
    transpose(j->x + c0, j->cols, p, ld, R, nc, avx);   /* p[c]: column c0 + c as a row */
    if (j->rht)   /* blocks of 16 down each column, as axis 0 */
        for (size_t c = 0; c < nc; c++) qs_llm_rht16(p + c * ld, 1, R, 1, j->seed, 0);
    if (ld == R) {
        qs_apply a = j->a;
        a.o.index0 += c0 * R;
        j->rc[t] = qs_fakeq_matrix(&a, p, nc, R, q, &j->err[t]);
    } else   /* axis 0 numbers element (r, c) c * rows + r */
        for (size_t c = 0; c < nc && !j->rc[t]; c++) j->rc[t] = run(&j->a, (c0 + c) * R, p + c * ld, R, q + c * ld, &j->err[t]);
    if (j->cnt && !j->rc[t])   /* the panel's columns as runs, after the RHT, while in cache */
        j->rc[t] = qs_llm_opstat_runs(&j->a, p, q, nc, R, ld, j->ts, j->cnt[t], &j->err[t]);
    if (!j->rc[t]) transpose(q, ld, j->y + c0, j->cols, nc, R, avx);
    free(p);
}

/* Columns per axis-0 task of the nvfp4 kernel, which walks each band of 16 rows across its panel:
** up to WIDE (longer runs of each row for the prefetchers), two tasks per worker at least. */
static size_t wide(size_t cols, int w)
{
    size_t per = PANEL;
    while (per < WIDE && (w == 1 || cols >= 2 * (size_t)w * 2 * per)) per *= 2;
    return per;
}

/* The finite absmax of the matrix after the RHT down its columns, panels of columns on the pool
** (the maximum does not depend on the order). */
typedef struct { const float *x; size_t rows, cols, per; uint64_t seed; float *m; } rmax_job;

static void task_rmax(void *ctx, size_t t, int slot)
{
    (void)slot;
    rmax_job *j = ctx;
    size_t c0 = t * j->per, c1 = j->cols - c0 < j->per ? j->cols : c0 + j->per;
    j->m[t] = qs_fq_nvfp4_rht_absmax(j->x, j->rows, j->cols, c0, c1, j->seed);
}

static float rht_absmax(const float *x, size_t rows, size_t cols, uint64_t seed, int threads)
{
    size_t per = wide(cols, qs_pool_width(threads, cols / PANEL + 1)), n = (cols + per - 1) / per;
    float m1, *m = n > 1 ? malloc(n * sizeof *m) : &m1;
    if (!m) return qs_fq_nvfp4_rht_absmax(x, rows, cols, 0, cols, seed);
    rmax_job j = {x, rows, cols, per, seed, m};
    qs_pool_for(qs_pool_width(threads, n), n, task_rmax, &j);
    float r = 0;
    for (size_t t = 0; t < n; t++) r = m[t] > r ? m[t] : r;
    if (m != &m1) free(m);
    return r;
}

/* Rows per task of a pass in 16-row bands across every column: about four tasks per worker, each
** reading whole rows. */
static size_t band_rows(size_t rows, int threads)
{
    int w = qs_pool_width(threads, (rows + 15) / 16);
    size_t want = w > 1 ? 4 * (size_t)w : 1, per = (rows + want - 1) / want;
    return (per + 15) / 16 * 16;
}

/* Both maxima (qs_fq_nvfp4_absmax2) of row bands on the pool. */
typedef struct { const float *x; size_t rows, cols, per; uint64_t seed; float *m; } am2_job;

static void task_am2(void *ctx, size_t t, int slot)
{
    (void)slot;
    am2_job *j = ctx;
    size_t r0 = t * j->per, r1 = j->rows - r0 < j->per ? j->rows : r0 + j->per;
    qs_fq_nvfp4_absmax2(j->x, j->rows, j->cols, r0, r1, j->seed, &j->m[2 * t], &j->m[2 * t + 1]);
}

int qs_llm_absmax2(const float *x, size_t rows, size_t cols, uint64_t seed, int threads, float *plain, float *rht)
{
    float p, h;
    if (!rows || !cols || qs_fq_nvfp4_absmax2(x, 0, cols, 0, 0, seed, &p, &h)) return 1;   /* the CPU's answer */
    size_t per = band_rows(rows, threads), n = (rows + per - 1) / per;
    float m2[2], *m = n > 1 ? malloc(2 * n * sizeof *m) : m2;
    if (!m) return 1;
    am2_job j = {x, rows, cols, per, seed, m};
    qs_pool_for(qs_pool_width(threads, n), n, task_am2, &j);
    *plain = *rht = 0;
    for (size_t t = 0; t < n; t++) {
        if (m[2 * t] > *plain) *plain = m[2 * t];
        if (m[2 * t + 1] > *rht) *rht = m[2 * t + 1];
    }
    if (m != m2) free(m);
    return 0;
}

static int par(const qs_apply *a0, const float *x, float *y, size_t rows, size_t cols, int rht, uint64_t seed,
               int threads, qs_llm_opstat *st, qs_err *e)
{
    int fast = a0->gran == QS_GRAN_BLOCK && !a0->cscale && rows && cols &&
               qs_llm_fakeq_fast_ok(a0, a0->axis, rht, st != NULL);
    if (st && !fast && (a0->cscale || a0->gran != QS_GRAN_BLOCK || rows * cols < MIN_PAR || rows < 2 || cols < 2 || x == y ||
               (a0->axis ? rht || cols > BAND : rows > BAND) || !qs_llm_opstat_run_block(a0, rows, cols)))
        return 1;   /* counted apart (qs_llm_opstat_add) */
    if (!fast && (a0->cscale || a0->gran != QS_GRAN_BLOCK || rows * cols < MIN_PAR || rows < 2 || cols < 2)) {
        if (y != x) memcpy(y, x, rows * cols * sizeof *y);
        if (rht) qs_llm_rht16(y, rows, cols, a0->axis, seed, 0);
        return qs_fakeq_matrix(a0, y, rows, cols, y, e);
    }
    job j = {*a0, x, y, rows, cols, 0, a0->axis, rht, fast, 0, seed, NULL, NULL, NULL, 0};
    if (qs_qopts_check(j.a.f, &j.a.o, e)) return -1;
    if (j.a.f->has_tensor_scale && !(j.a.o.tensor_scale > 0)) {   /* qs_format_apply's rule, whole matrix */
        float m;
        float p;
        if (rht && fast && j.axis == 0 && qs_fq_nvfp4_ok(a0, 0, 1, st != NULL)) {
            if (qs_llm_absmax2(x, rows, cols, seed, threads, &p, &m))   /* row bands: whole rows */
                m = rht_absmax(x, rows, cols, seed, threads);   /* the kernel transforms again, in registers */
        }
        else {
            if (rht) {   /* the scale is the transformed matrix's: transform first */
                if (y != x) memcpy(y, x, rows * cols * sizeof *y);
                qs_llm_rht16(y, rows, cols, a0->axis, seed, 0);
                j.x = y;
                j.rht = rht = 0;
            }
            m = qs_fq_absmax_par(j.x, rows * cols, threads);
        }
        if (m > 0) j.a.o.tensor_scale = m;
        j.ts = m;
    }
    if (!fast && j.axis == 0 && qs_format_block(j.a.f, &j.a.o) == 1 && j.a.o.round != QS_RND_SR && !rht)
        j.axis = 1;   /* elementwise without counters: the blocks' direction does not matter */
    j.a.axis = 1;
    int w = qs_pool_width(threads, j.axis ? rows / ROWS_MIN + 1 : cols / PANEL + 1);
    size_t n;
    if (j.axis) {
        size_t want = w > 1 ? 4 * (size_t)w : 1;
        j.per = (rows + want - 1) / want;
        if (j.per < ROWS_MIN) j.per = ROWS_MIN;
        n = (rows + j.per - 1) / j.per;
    } else if (fast && qs_fq_nvfp4_ok(a0, 0, rht, st != NULL)) {   /* bands of rows, whole rows each */
        j.bands = 1;
        j.per = band_rows(rows, threads);
        n = (rows + j.per - 1) / j.per;
        w = qs_pool_width(threads, n);
    } else {
        j.per = PANEL;
        n = (cols + j.per - 1) / j.per;
    }
    j.rc = calloc(n, sizeof *j.rc);
    j.err = calloc(n, sizeof *j.err);
    j.cnt = st ? calloc(n, sizeof *j.cnt) : NULL;
    if (!j.rc || !j.err || (st && !j.cnt)) { free(j.rc); free(j.err); free(j.cnt); return qs_fail(e, "out of memory"); }
    qs_pool_for(n > 1 ? w : 1, n, j.axis ? task_rows : task_panel, &j);
    int rc = 0;
    for (size_t t = 0; t < n && !rc; t++)
        if (j.rc[t]) { *e = j.err[t]; rc = -1; }
    if (st && !rc) {   /* the tasks' counts, in task order */
        uint64_t c[4] = {0, 0, 0, 0};
        for (size_t t = 0; t < n; t++)
            for (int i = 0; i < 4; i++) c[i] += j.cnt[t][i];
        st->n += rows * cols;
        st->underflow += c[0];
        st->nonfinite += c[1];
        st->clipped += c[3];
    }
    free(j.rc);
    free(j.err);
    free(j.cnt);
    return rc;
}

int qs_llm_fakeq_par(const qs_apply *a, const float *x, float *y, size_t rows, size_t cols, int rht, uint64_t seed,
                     int threads, qs_err *e)
{
    return par(a, x, y, rows, cols, rht, seed, threads, NULL, e);
}

int qs_llm_fakeq_par_stat(const qs_apply *a, const float *x, float *y, size_t rows, size_t cols, int rht,
                          uint64_t seed, int threads, qs_llm_opstat *st, qs_err *e)
{
    return par(a, x, y, rows, cols, rht, seed, threads, st, e);
}
