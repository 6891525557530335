/* The prefill's weight products on the thread pool (llm_pgemm.h). */
#include "llm_pgemm.h"
#include "llm_wtype.h"
#include "pool.h"
#include "simd.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NR QS_PGEMM_NR
#define KC (QS_PGEMM_PACK / NR)   /* k's per packed block: 32 KB of W in L1 */
#define MR 12    /* AVX-512 rows per tile (24 accumulators) */
#define MR2 6    /* AVX2 rows per tile (2 x 16 columns x 6 rows = 24 accumulators) */
#define MRW 6    /* AVX-512 rows per tile of two panels (6 x 64 columns) */
#define KCW 128  /* k's per block of a unit: 2 x 16 KB of W in L1 */
#define XBLOCK ((size_t)1 << 20)   /* bytes of x per block of rows: stays in L2 while the panels pass */

size_t qs_pgemm_panels(const qs_pgemm *g) { return (size_t)(g->N + NR - 1) / NR; }

/* dst[k][j] = src[j][k] for a 16 x 16 block (src rows of stride ls, dst rows of stride ld): a copy, in
** 64 shuffles instead of 256 scalar loads and stores */
__attribute__((target("avx512f"))) static void tr16(const float *src, size_t ls, float *dst, size_t ld)
{
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * ls);
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2])));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2])));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
    }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    }
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(dst + i * ld, r[i]);
}

/* W rows [o0, o0 + 32) x k's [k0, k0 + kc) as pack[k][32], rows past N zero. */
static void pack_panel(const qs_pgemm *g, int o0, int k0, int kc, float *pack)
{
    const int nc = g->N - o0 < NR ? g->N - o0 : NR;
    if (g->wt) {   /* rows of W are k's: a copy of nc values per k */
        const size_t ldw = (size_t)(g->ldw ? g->ldw : g->N);
        for (int k = 0; k < kc; k++) {
            memcpy(pack + k * NR, g->W + (size_t)(k0 + k) * ldw + o0, (size_t)nc * sizeof(float));
            memset(pack + k * NR + nc, 0, (size_t)(NR - nc) * sizeof(float));
        }
        return;
    }
    size_t ldw = (size_t)(g->ldw ? g->ldw : g->K);
    const float *w = g->W ? g->W + (size_t)o0 * ldw + k0 : NULL;
    _Alignas(64) float wide[NR * KC];   /* kc <= KC: typed weights are never packed whole (cache_bind) */
    if (g->tw) {   /* typed weights (llm_wtype.h): this block of the panel's rows widened, then packed as FP32 */
        for (int j = 0; j < nc; j++) qs_wt_row(g->tw, o0 + j, k0, kc, wide + (size_t)j * kc);
        w = wide;
        ldw = (size_t)kc;
    }
    /* blocks of 16 k's: the 16 rows of pack they write (8 KB) stay in L1 while the 32 w rows are read
    ** (a whole k column of pack per w row evicted and refetched each line 32 times) */
    const int vec = qs_simd_level() >= QS_SIMD_AVX512;
    for (int kb = 0; kb < kc; kb += 16) {
        const int kn = kc - kb < 16 ? kc - kb : 16;
        float *p = pack + (size_t)kb * NR;
        int j0 = 0;
        if (vec && kn == 16)
            for (; j0 + 16 <= nc; j0 += 16) tr16(w + (size_t)j0 * ldw + kb, ldw, p + j0, NR);
        for (int j = j0; j < nc; j++)
            for (int k = 0; k < kn; k++) p[k * NR + j] = w[(size_t)j * ldw + kb + k];
        for (int j = nc; j < NR; j++)
            for (int k = 0; k < kn; k++) p[k * NR + j] = 0;
    }
}

/* ---------------------------------------------------------------- AVX-512 */

/* Rows [0, mr) of x (from k0) against the packed block; acc continues y's chain when k0 > 0. */
__attribute__((target("avx512f"), always_inline)) static inline void
tile512(int mr, const float *x, size_t ldx, const float *pack, int kc, float *y, size_t ldy, int cont,
        __mmask16 m0, __mmask16 m1)
{
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 12
    for (int r = 0; r < mr; r++) {
        c0[r] = cont ? _mm512_maskz_loadu_ps(m0, y + r * ldy) : _mm512_setzero_ps();
        c1[r] = cont ? _mm512_maskz_loadu_ps(m1, y + r * ldy + 16) : _mm512_setzero_ps();
    }
    for (int k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_load_ps(pack + k * NR), b1 = _mm512_load_ps(pack + k * NR + 16);
#pragma GCC unroll 12
        for (int r = 0; r < mr; r++) {
            const __m512 a = _mm512_set1_ps(x[r * ldx + k]);
            c0[r] = _mm512_fmadd_ps(a, b0, c0[r]);
            c1[r] = _mm512_fmadd_ps(a, b1, c1[r]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < mr; r++) {
        _mm512_mask_storeu_ps(y + r * ldy, m0, c0[r]);
        _mm512_mask_storeu_ps(y + r * ldy + 16, m1, c1[r]);
    }
}

__attribute__((target("avx512f"))) static void rows512(const qs_pgemm *g, int o0, int k0, int kc, const float *pack)
{
    const int nc = g->N - o0 < NR ? g->N - o0 : NR;
    const __mmask16 m0 = (__mmask16)(nc >= 16 ? 0xffff : (1u << nc) - 1);
    const __mmask16 m1 = (__mmask16)(nc >= 32 ? 0xffff : nc <= 16 ? 0 : (1u << (nc - 16)) - 1);
    const size_t ldx = (size_t)g->ldx, ldy = (size_t)g->ldy;
    const int cont = k0 > 0;
    int r = 0;
    for (; r + MR <= g->R; r += MR)
        tile512(MR, g->x + r * ldx + k0, ldx, pack, kc, g->y + r * ldy + o0, ldy, cont, m0, m1);
    const float *x = g->x + r * ldx + k0;
    float *y = g->y + r * ldy + o0;
    switch (g->R - r) {   /* constant row counts: the accumulators stay in registers */
    case 1: tile512(1, x, ldx, pack, kc, y, ldy, cont, m0, m1); break;
    case 2: tile512(2, x, ldx, pack, kc, y, ldy, cont, m0, m1); break;
    case 3: tile512(3, x, ldx, pack, kc, y, ldy, cont, m0, m1); break;
    case 4: tile512(4, x, ldx, pack, kc, y, ldy, cont, m0, m1); break;
    case 5: tile512(5, x, ldx, pack, kc, y, ldy, cont, m0, m1); break;
    case 6: tile512(6, x, ldx, pack, kc, y, ldy, cont, m0, m1); break;
    case 7: tile512(7, x, ldx, pack, kc, y, ldy, cont, m0, m1); break;
    case 8: tile512(8, x, ldx, pack, kc, y, ldy, cont, m0, m1); break;
    case 9: tile512(9, x, ldx, pack, kc, y, ldy, cont, m0, m1); break;
    case 10: tile512(10, x, ldx, pack, kc, y, ldy, cont, m0, m1); break;
    case 11: tile512(11, x, ldx, pack, kc, y, ldy, cont, m0, m1); break;
    default: break;
    }
}

/* Two panels at once (packed weights): 6 rows x 64 columns, 24 accumulators, each broadcast value used by
** 4 FMAs (12 x 32: by 2), half the traffic of x through L1 per FLOP.  The same chains. */
__attribute__((target("avx512f"), always_inline)) static inline void
tile512w(int mr, const float *x, size_t ldx, const float *pa, const float *pb, int kc, float *y, size_t ldy, int cont,
         const __mmask16 *m)
{
    __m512 c[MRW][4];
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) c[r][q] = cont ? _mm512_maskz_loadu_ps(m[q], y + r * ldy + 16 * q) : _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_load_ps(pa + k * NR), b1 = _mm512_load_ps(pa + k * NR + 16);
        const __m512 b2 = _mm512_load_ps(pb + k * NR), b3 = _mm512_load_ps(pb + k * NR + 16);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            const __m512 a = _mm512_set1_ps(x[r * ldx + k]);
            c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
            c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
            c[r][2] = _mm512_fmadd_ps(a, b2, c[r][2]);
            c[r][3] = _mm512_fmadd_ps(a, b3, c[r][3]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) _mm512_mask_storeu_ps(y + r * ldy + 16 * q, m[q], c[r][q]);
}

/* Columns [o0, o0 + 64) (the second panel may be short) against the packed blocks pa, pb. */
__attribute__((target("avx512f"))) static void rows512w(const qs_pgemm *g, int o0, int k0, int kc, const float *pa,
                                                         const float *pb)
{
    __mmask16 m[4];
    for (int q = 0; q < 4; q++) {
        const int n = g->N - o0 - 16 * q;
        m[q] = (__mmask16)(n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1);
    }
    const size_t ldx = (size_t)g->ldx, ldy = (size_t)g->ldy;
    const int cont = k0 > 0;
    int r = 0;
    for (; r + MRW <= g->R; r += MRW) tile512w(MRW, g->x + r * ldx + k0, ldx, pa, pb, kc, g->y + r * ldy + o0, ldy, cont, m);
    const float *x = g->x + r * ldx + k0;
    float *y = g->y + r * ldy + o0;
    switch (g->R - r) {
    case 1: tile512w(1, x, ldx, pa, pb, kc, y, ldy, cont, m); break;
    case 2: tile512w(2, x, ldx, pa, pb, kc, y, ldy, cont, m); break;
    case 3: tile512w(3, x, ldx, pa, pb, kc, y, ldy, cont, m); break;
    case 4: tile512w(4, x, ldx, pa, pb, kc, y, ldy, cont, m); break;
    case 5: tile512w(5, x, ldx, pa, pb, kc, y, ldy, cont, m); break;
    default: break;
    }
}

/* ---------------------------------------------------------------- AVX2 */

/* 16 columns (half a panel, at offset h) of rows [0, mr). */
__attribute__((target("avx2,fma"), always_inline)) static inline void
tile256(int mr, const float *x, size_t ldx, const float *pack, int kc, float *y, size_t ldy, int cont, int nc)
{
    __m256 c0[MR2], c1[MR2];
    float t[16];
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        if (cont) {
            memset(t, 0, sizeof t);
            memcpy(t, y + r * ldy, (size_t)nc * sizeof(float));
            c0[r] = _mm256_loadu_ps(t);
            c1[r] = _mm256_loadu_ps(t + 8);
        } else c0[r] = c1[r] = _mm256_setzero_ps();
    }
    for (int k = 0; k < kc; k++) {
        const __m256 b0 = _mm256_loadu_ps(pack + k * NR), b1 = _mm256_loadu_ps(pack + k * NR + 8);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            const __m256 a = _mm256_set1_ps(x[r * ldx + k]);
            c0[r] = _mm256_fmadd_ps(a, b0, c0[r]);
            c1[r] = _mm256_fmadd_ps(a, b1, c1[r]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        if (nc == 16) {
            _mm256_storeu_ps(y + r * ldy, c0[r]);
            _mm256_storeu_ps(y + r * ldy + 8, c1[r]);
            continue;
        }
        _mm256_storeu_ps(t, c0[r]);
        _mm256_storeu_ps(t + 8, c1[r]);
        memcpy(y + r * ldy, t, (size_t)nc * sizeof(float));
    }
}

__attribute__((target("avx2,fma"))) static void rows256(const qs_pgemm *g, int o0, int k0, int kc, const float *pack)
{
    const size_t ldx = (size_t)g->ldx, ldy = (size_t)g->ldy;
    const int cont = k0 > 0;
    for (int h = 0; h < NR && o0 + h < g->N; h += 16) {
        const int nc = g->N - o0 - h < 16 ? g->N - o0 - h : 16;
        const float *p = pack + h;
        int r = 0;
        for (; r + MR2 <= g->R; r += MR2)
            tile256(MR2, g->x + r * ldx + k0, ldx, p, kc, g->y + r * ldy + o0 + h, ldy, cont, nc);
        const float *x = g->x + r * ldx + k0;
        float *y = g->y + r * ldy + o0 + h;
        switch (g->R - r) {
        case 1: tile256(1, x, ldx, p, kc, y, ldy, cont, nc); break;
        case 2: tile256(2, x, ldx, p, kc, y, ldy, cont, nc); break;
        case 3: tile256(3, x, ldx, p, kc, y, ldy, cont, nc); break;
        case 4: tile256(4, x, ldx, p, kc, y, ldy, cont, nc); break;
        case 5: tile256(5, x, ldx, p, kc, y, ldy, cont, nc); break;
        default: break;
        }
    }
}

/* ---------------------------------------------------------------- portable: fmaf, the same chains */

static void rows_scalar(const qs_pgemm *g, int o0, int k0, int kc, const float *pack)
{
    const int nc = g->N - o0 < NR ? g->N - o0 : NR;
    for (int r = 0; r < g->R; r++) {
        const float *x = g->x + (size_t)r * g->ldx + k0;
        float *y = g->y + (size_t)r * g->ldy + o0;
        for (int j = 0; j < nc; j++) {
            float a = k0 > 0 ? y[j] : 0.0f;
            for (int k = 0; k < kc; k++) a = fmaf(x[k], pack[k * NR + j], a);
            y[j] = a;
        }
    }
}

/* ---------------------------------------------------------------- driver */

void qs_pgemm_panel(const qs_pgemm *g, size_t p, float *pack)
{
    const int o0 = (int)p * NR, level = qs_simd_level();
    for (int k0 = 0; k0 < g->K; k0 += KC) {
        const int kc = g->K - k0 < KC ? g->K - k0 : KC;
        if (g->P) pack = (float *)g->P + ((size_t)p * (size_t)(g->ldp ? g->ldp : g->K) + (size_t)k0) * NR;
        if (!g->P || g->fill) pack_panel(g, o0, k0, kc, pack);
        if (level >= QS_SIMD_AVX512) rows512(g, o0, k0, kc, pack);
        else if (level >= QS_SIMD_AVX2) rows256(g, o0, k0, kc, pack);
        else rows_scalar(g, o0, k0, kc, pack);
    }
    if (g->K == 0)
        for (int r = 0; r < g->R; r++)
            for (int j = o0; j < g->N && j < o0 + NR; j++) g->y[(size_t)r * g->ldy + j] = 0;
}

/* ---------------------------------------------------------------- units of two panels */

size_t qs_pgemm_units(const qs_pgemm *g) { return (qs_pgemm_panels(g) + 1) / 2; }

/* Panels 2u and 2u + 1: with packed weights and AVX-512, both at once (tile512w) by k blocks of KCW (two
** blocks of W in L1); else one after the other. */
static void unit(const qs_pgemm *g, size_t u, float *pack)
{
    const size_t p = 2 * u, np = qs_pgemm_panels(g);
    if ((!g->P && !g->tw) || p + 1 >= np || g->K == 0 || qs_simd_level() < QS_SIMD_AVX512) {
        qs_pgemm_panel(g, p, pack);
        if (p + 1 < np) qs_pgemm_panel(g, p + 1, pack);
        return;
    }
    const size_t ldp = (size_t)(g->ldp ? g->ldp : g->K);
    const int o0 = (int)p * NR;
    _Alignas(64) float own[g->tw ? 2 * KCW * NR : 1];   /* typed weights: both panels' block widened here */
    for (int k0 = 0; k0 < g->K; k0 += KCW) {
        const int kc = g->K - k0 < KCW ? g->K - k0 : KCW;
        if (g->tw) {
            pack_panel(g, o0, k0, kc, own);
            pack_panel(g, o0 + NR, k0, kc, own + KCW * NR);
            rows512w(g, o0, k0, kc, own, own + KCW * NR);
            continue;
        }
        float *pa = (float *)g->P + (p * ldp + (size_t)k0) * NR, *pb = pa + ldp * NR;
        if (g->fill) {
            pack_panel(g, o0, k0, kc, pa);
            pack_panel(g, o0 + NR, k0, kc, pb);
        }
        rows512w(g, o0, k0, kc, pa, pb);
    }
}

/* ---------------------------------------------------------------- blocks of rows */

int qs_pgemm_row_blocks(const qs_pgemm *g)
{
    if (!g->P || g->fill || g->R < 2 * MR) return 1;
    const size_t bytes = (size_t)g->R * (size_t)g->K * sizeof(float);
    size_t nb = (bytes + XBLOCK - 1) / XBLOCK;
    if (nb > (size_t)(g->R / MR)) nb = (size_t)(g->R / MR);
    return nb < 1 ? 1 : (int)nb;
}

void qs_pgemm_block_rows(int R, int nb, int b, int *r0, int *r1)
{
    const int per = ((R + nb - 1) / nb + MR - 1) / MR * MR;   /* whole tiles, the rest in the last block */
    *r0 = b * per < R ? b * per : R;
    *r1 = (b + 1) * per < R ? (b + 1) * per : R;
}

void qs_pgemm_block(const qs_pgemm *g, int nb, size_t t, float *pack)
{
    const size_t np = qs_pgemm_units(g);
    if (nb <= 1) { unit(g, t, pack); return; }
    int r0, r1;
    qs_pgemm_block_rows(g->R, nb, (int)(t / np), &r0, &r1);
    if (r1 <= r0) return;
    qs_pgemm h = *g;
    h.x += (size_t)r0 * g->ldx;
    h.y += (size_t)r0 * g->ldy;
    h.R = r1 - r0;
    unit(&h, t % np, pack);
}

void qs_pgemm_run(const qs_pgemm *g, int threads) { qs_pgemm_run_n(g, 1, threads); }

typedef struct multi { const qs_pgemm *g; int n; int nb[8]; } multi;

static void multi_task(void *ctx, size_t t, int slot)
{
    (void)slot;
    const multi *m = ctx;
    int i = 0;
    for (size_t np; i < m->n - 1 && t >= (np = qs_pgemm_units(&m->g[i]) * (size_t)m->nb[i]); i++) t -= np;
    _Alignas(64) float pack[NR * KC];
    qs_pgemm_block(&m->g[i], m->nb[i], t, pack);
}

void qs_pgemm_run_n(const qs_pgemm *g, int n, int threads)
{
    multi m = {g, n, {0}};
    size_t tot = 0;
    for (int i = 0; i < n; i++) {
        m.nb[i] = i < 8 ? qs_pgemm_row_blocks(&g[i]) : 1;
        tot += qs_pgemm_units(&g[i]) * (size_t)m.nb[i];
    }
    if (threads > 1 && tot > 1) qs_pool_for(threads, tot, multi_task, &m);
    else
        for (size_t t = 0; t < tot; t++) multi_task(&m, t, 0);
}

/* ---------------------------------------------------------------- packed weights, once */

typedef struct centry { const float *W; int N, K; float *P; } centry;

struct qs_pgemm_cache {
    centry *e;
    size_t n, cap, used, max;
};

qs_pgemm_cache *qs_pgemm_cache_new(size_t max_floats)
{
    qs_pgemm_cache *c = calloc(1, sizeof *c);
    if (c) c->max = max_floats;
    return c;
}

void qs_pgemm_cache_free(qs_pgemm_cache *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) free(c->e[i].P);
    free(c->e);
    free(c);
}

static void pack_task(void *ctx, size_t p, int slot)
{
    (void)slot;
    const centry *t = ctx;
    const qs_pgemm g = {NULL, NULL, t->W, 0, t->K, t->N, 0, 0, NULL, 0, 0, 0, 0, NULL};
    pack_panel(&g, (int)p * NR, 0, t->K, t->P + p * (size_t)t->K * NR);
}

/* The entry of W (packed or, with *fresh = 1, only allocated), or NULL. */
static float *entry(qs_pgemm_cache *c, const float *W, int N, int K, int *fresh)
{
    *fresh = 0;
    if (!c || N <= 0 || K <= 0) return NULL;
    for (size_t i = c->n; i-- > 0;)
        if (c->e[i].W == W && c->e[i].N == N && c->e[i].K == K) return c->e[i].P;
    const size_t np = (size_t)(N + NR - 1) / NR, len = np * NR * (size_t)K;
    if (c->used + len > c->max) return NULL;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        centry *e = realloc(c->e, cap * sizeof *e);
        if (!e) return NULL;
        c->e = e;
        c->cap = cap;
    }
    /* (madvise(MADV_HUGEPAGE) here made runs slower: direct compaction under THP defrag=madvise) */
    centry t = {W, N, K, aligned_alloc(64, (len * sizeof(float) + 63) / 64 * 64)};
    if (!t.P) return NULL;
    c->e[c->n++] = t;
    c->used += len;
    *fresh = 1;
    return t.P;
}

const float *qs_pgemm_cache_get(qs_pgemm_cache *c, const float *W, int N, int K, int threads)
{
    int fresh;
    float *P = entry(c, W, N, K, &fresh);
    if (!fresh) return P;
    const size_t np = (size_t)(N + NR - 1) / NR;
    centry t = {W, N, K, P};
    if (threads > 1 && np > 1) qs_pool_for(threads, np, pack_task, &t);
    else
        for (size_t p = 0; p < np; p++) pack_task(&t, p, 0);
    return P;
}

void qs_pgemm_cache_bind(qs_pgemm_cache *c, qs_pgemm *g)
{
    g->fill = 0;
    g->P = g->tw || g->wt || (g->ldw && g->ldw != g->K) ? NULL : entry(c, g->W, g->N, g->K, &g->fill);
}
