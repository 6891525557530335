/*
** The fused training-operand kernel of the MX family (llm_fakeq_fast.h): every MX element type
** (mxfp8_e4m3/e5m2, mxfp6, mxfp4, mxint8) with RNE elements, scale rule floor or rceil, blocks of a
** multiple of 16 values, no library variant and no RHT, on AVX-512 (16 lanes) or AVX2 (8 lanes, the
** same steps); other operands, and the scalar level, take the generic path.
**
** Axis 1 (blocks along each row): per block its largest magnitude (a vector max, reduced), the scale
** code, then each 16-value vector rounded and stored.  Axis 0 (blocks of B rows down each column,
** row-major storage): no transposed panels; the 16 lanes of a vector are 16 adjacent columns, each
** lane's block maximum is the lanes' integer max of the magnitude bits over the block's rows, and the
** scale code, 1/X and X are per-lane vectors.  A final partial block (rows, or a row's last columns,
** not a multiple of B) is its own block; columns past the task's last take masked lanes.
**
** Bits: the element step is format_simd.h's (v = min(|x| / X, 2 max), (v + M) - M with M at v's
** binade, min max, times X, x's sign, +0 for MXINT8), the scale code format_mx.c's mx_scale_code
** for floor and rceil (zero blocks code 0 by the same formula), and a block holding NaN or Inf gives
** NaN in every element (code 0xFF), as the generic path does.
**
** Counts in the same pass, in 32-bit lanes (flushed every 2^28 values): llm_opstat.c's rules on x and
** y -- underflow (finite non-zero x, y = +-0), non-finite outputs, non-finite inputs, and clips: finite
** |x| above its block's threshold thr_bits(Q + half S), with Q = max element * X and S = X for the
** block's scale code (a table of the 255 codes; 0xFF: none).
**
** tests/unit/test_fakeq_fast_mx.c compares bits and counts with the generic path (QS_FAKEQ_FAST=0).
*/
#include "llm_fakeq_fast.h"

#include <math.h>
#include <string.h>

#include "format_simd.h"
#include "simd.h"

#define INF_BITS 0x7f800000u
#define FLUSH ((size_t)1 << 28)   /* values counted per lane flush: the 32-bit sums cannot wrap */

#if QS_FORMAT_SIMD
typedef struct mxk {
    qs_ek k;
    int emax;            /* floor: the element's largest exponent */
    int rceil;           /* scale rule rceil (else floor) */
    float rmul;          /* rceil: fl32(1 / max element) */
    size_t B;
    uint32_t thr[256];   /* clip threshold bits by scale code (0xFF, NaN blocks: none) */
    uint32_t thr2[256];  /* the same with none = 0x7fffffff (AVX2's signed compares) */
} mxk;

static inline float scale_of(unsigned c) { return u2f(c == 0 ? 0x00400000u : c << 23); }

/* llm_opstat.c's threshold of one scale code: Q + half * S as its amax_thresholds computes it. */
static uint32_t thr_of(const qs_format *f, float maxv, unsigned c)
{
    const double half = ldexp(0.5, f->grid.ehi - f->grid.mb);
    float X = scale_of(c), Q = maxv * X, S = 1.0f * X;
    double t = (double)Q + half * (double)S;
    if (!isfinite(t)) return UINT32_MAX;
    return t >= 3.4e38 ? INF_BITS : f2u((float)t) & 0x7fffffffu;
}

static void mxk_init(mxk *m, const qs_apply *a, int counting)
{
    const qs_format *f = a->f;
    if (f->mf) qs_ek_of_mf(&m->k, f->mf, 0);
    else qs_ek_init(&m->k, 0, 6, 127.0f / 64.0f, 0, 8, 1, 0);   /* MXINT8: q/64, +-127 */
    m->emax = ilogb(m->k.maxv);
    m->rceil = a->o.scale_rule == QS_SCALE_RCEIL;
    m->rmul = 1.0f / m->k.maxv;
    m->B = qs_format_block(f, &a->o);
    if (counting) {
        for (unsigned c = 0; c < 255; c++) m->thr[c] = thr_of(f, m->k.maxv, c);
        m->thr[255] = UINT32_MAX;
        for (unsigned c = 0; c < 256; c++) m->thr2[c] = m->thr[c] > 0x7fffffffu ? 0x7fffffffu : m->thr[c];
    }
}

/* format_mx.c's scale code of a finite block maximum ab (bits) under floor or rceil, clamped. */
static inline unsigned code_of(const mxk *m, uint32_t ab)
{
    if (!m->rceil) {
        int c = (int)(ab >> 23) - m->emax;   /* floor(log2 amax) - emax + 127; subnormal amax: <= 0 */
        return c < 0 ? 0u : (unsigned)c;
    }
    uint32_t d = f2u(u2f(ab) * m->rmul);
    unsigned c = d < 0x00800000u ? d > 0x00400000u : (d >> 23) + ((d & 0x7fffffu) != 0);
    return c > 254 ? 254u : c;
}

#endif

int qs_fq_mx_ok(const qs_apply *a, int axis, int rht, int counting)
{
    (void)axis; (void)counting;
    const qs_format *f = a->f;
    const qs_qopts *o = &a->o;
    if (!QS_FORMAT_SIMD || qs_simd_level() < QS_SIMD_AVX2) return 0;
    if (!f || f->family != QS_FAM_MX || rht || a->gran != QS_GRAN_BLOCK || a->cscale) return 0;
    if (o->round != QS_RND_DEFAULT && o->round != QS_RND_RNE) return 0;
    if (o->scale_rule != QS_SCALE_FLOOR && o->scale_rule != QS_SCALE_RCEIL) return 0;
    if (o->floor_log2f || o->zero_positive || o->flush_subnormal_blocks || o->nan_block_te || o->zero_block_scale)
        return 0;
    size_t B = qs_format_block(f, o);
    return o->block >= 0 && B >= 16 && B % 16 == 0 && B <= 4096;
}

#if QS_FORMAT_SIMD
/* The four counts of a task, lane by lane. */
typedef struct vcnt { __m512i u, nfo, nfi, cl; } vcnt;

/* Lanes [0, n) of 16. */
static inline __mmask16 lanes(size_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* One vector of 16 values: y = the MX value of x at 1/X inv and X, NaN in the lanes of nan; the counts
** of the lanes of m when cnt is not NULL (thr: the lanes' clip thresholds). */
QS_AVX512_INLINE __m512 elem16(const qs_ek *k, __m512i xb, __m512 inv, __m512 X, __mmask16 nan, __mmask16 m,
                               __m512i thr, vcnt *cnt)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), expm = _mm512_set1_epi32(0x7f800000);
    const __m512i lowexp = _mm512_set1_epi32((int)k->lowexp), shift = _mm512_set1_epi32((int)k->shift);
    const __m512 cap = _mm512_set1_ps(k->cap), maxv = _mm512_set1_ps(k->maxv);
    __m512i a = _mm512_and_si512(xb, absm);
    __m512i s = _mm512_xor_si512(xb, a);
    __m512 v = _mm512_min_ps(_mm512_mul_ps(_mm512_castsi512_ps(a), inv), cap);
    __m512i e = _mm512_max_epi32(_mm512_and_si512(_mm512_castps_si512(v), expm), lowexp);
    __m512 M = _mm512_castsi512_ps(_mm512_add_epi32(e, shift));
    __m512 t = _mm512_min_ps(_mm512_sub_ps(_mm512_add_ps(v, M), M), maxv);
    t = _mm512_mul_ps(t, X);
    t = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), s));
    if (k->int8) t = _mm512_add_ps(t, _mm512_setzero_ps());   /* -0 + 0 = +0 */
    t = _mm512_mask_mov_ps(t, nan, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
    if (cnt) {
        const __m512i one = _mm512_set1_epi32(1), inf = _mm512_set1_epi32((int)INF_BITS);
        __m512i b = _mm512_and_si512(_mm512_castps_si512(t), absm);
        __mmask16 z = _mm512_mask_cmpeq_epi32_mask(m, b, _mm512_setzero_si512());
        __mmask16 u = _mm512_mask_cmplt_epu32_mask(z, _mm512_sub_epi32(a, one), _mm512_set1_epi32((int)INF_BITS - 1));
        cnt->u = _mm512_mask_add_epi32(cnt->u, u, cnt->u, one);
        cnt->nfo = _mm512_mask_add_epi32(cnt->nfo, _mm512_mask_cmpge_epu32_mask(m, b, inf), cnt->nfo, one);
        cnt->nfi = _mm512_mask_add_epi32(cnt->nfi, _mm512_mask_cmpge_epu32_mask(m, a, inf), cnt->nfi, one);
        cnt->cl = _mm512_mask_add_epi32(cnt->cl, _mm512_mask_cmpgt_epu32_mask(m, a, thr), cnt->cl, one);
    }
    return t;
}

__attribute__((target("avx512f"))) static void flush(vcnt *c, uint64_t *out)
{
    out[0] += (uint32_t)_mm512_reduce_add_epi32(c->u);
    out[1] += (uint32_t)_mm512_reduce_add_epi32(c->nfo);
    out[2] += (uint32_t)_mm512_reduce_add_epi32(c->nfi);
    out[3] += (uint32_t)_mm512_reduce_add_epi32(c->cl);
    c->u = c->nfo = c->nfi = c->cl = _mm512_setzero_si512();
}

/* One block of len <= B values of a row, y may equal x. */
QS_AVX512_INLINE void row_block(const mxk *m, const float *x, float *y, size_t len, vcnt *cnt)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512i am = _mm512_setzero_si512();
    for (size_t i = 0; i < len; i += 16)
        am = _mm512_max_epu32(am, _mm512_and_si512(_mm512_maskz_loadu_epi32(lanes(len - i), x + i), absm));
    uint32_t ab = _mm512_reduce_max_epu32(am);
    unsigned c = ab >= INF_BITS ? 0xFFu : code_of(m, ab);
    __mmask16 nan = c == 0xFF ? (__mmask16)0xFFFF : 0;
    __m512 inv = _mm512_set1_ps(u2f(c >= 254 ? 0x00400000u : (254u - c) << 23)), X = _mm512_set1_ps(scale_of(c));
    __m512i thr = _mm512_set1_epi32(cnt ? (int)m->thr[c] : 0);
    for (size_t i = 0; i < len; i += 16) {
        __mmask16 l = lanes(len - i);
        __m512 t = elem16(&m->k, _mm512_maskz_loadu_epi32(l, x + i), inv, X, nan, l, thr, cnt);
        _mm512_mask_storeu_ps(y + i, l, t);
    }
}

QS_AVX512_INLINE void rows_do(const mxk *m, const qs_fq_task *t, vcnt *cnt)
{
    size_t C = t->cols, B = m->B, pend = 0;
    for (size_t r = t->r0; r < t->r1; r++) {
        const float *x = t->x + r * C;
        float *y = t->y + r * C;
        for (size_t j = 0; j < C; j += B) row_block(m, x + j, y + j, C - j < B ? C - j : B, cnt);
        if (cnt && (pend += C) >= FLUSH) { flush(cnt, t->cnt); pend = 0; }
    }
}

__attribute__((target("avx512f"))) static void rows_avx512(const mxk *m, const qs_fq_task *t)
{
    if (!t->cnt) { rows_do(m, t, NULL); return; }
    vcnt c = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
    rows_do(m, t, &c);
    flush(&c, t->cnt);
}

/* Per-lane scale codes of the block maxima am (bits; NaN/Inf lanes in nan get 0xFF). */
QS_AVX512_INLINE __m512i codes16(const mxk *m, __m512i am, __mmask16 nan)
{
    __m512i c;
    if (!m->rceil)
        c = _mm512_max_epi32(_mm512_sub_epi32(_mm512_srli_epi32(am, 23), _mm512_set1_epi32(m->emax)),
                             _mm512_setzero_si512());
    else {
        __m512i d = _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(am), _mm512_set1_ps(m->rmul)));
        __m512i one = _mm512_set1_epi32(1);
        __mmask16 frac = _mm512_test_epi32_mask(d, _mm512_set1_epi32(0x7fffff));
        __m512i cn = _mm512_mask_add_epi32(_mm512_srli_epi32(d, 23), frac, _mm512_srli_epi32(d, 23), one);
        __mmask16 sub = _mm512_cmplt_epu32_mask(d, _mm512_set1_epi32(0x00800000));
        __mmask16 up = _mm512_cmpgt_epu32_mask(d, _mm512_set1_epi32(0x00400000));
        __m512i cs = _mm512_maskz_mov_epi32(up, one);
        c = _mm512_min_epi32(_mm512_mask_mov_epi32(cn, sub, cs), _mm512_set1_epi32(254));
    }
    return _mm512_mask_mov_epi32(c, nan, _mm512_set1_epi32(0xFF));
}

/* The cache lines of w floats at p (w >= 1), toward L1. */
static inline void fetch_row(const float *p, size_t w)
{
    for (size_t k = 0; k < w; k += 16) _mm_prefetch((const char *)(p + k), _MM_HINT_T0);
    _mm_prefetch((const char *)(p + w - 1), _MM_HINT_T0);
}

/* One block row (nr rows) of up to 64 columns (vector j's lanes in l[j]), y may equal x.  The block
** maxima's pass fetches the next block row (nn rows of w columns at next) ahead: its rows are
** strided, which the hardware prefetchers do not follow. */
QS_AVX512_INLINE void col_block(const mxk *m, const float *x, float *y, size_t C, size_t nr, const __mmask16 *l,
                                const float *next, size_t nn, size_t w, vcnt *cnt)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), c254 = _mm512_set1_epi32(254);
    const __m512i half = _mm512_set1_epi32(0x00400000);
    __m512i am[4], thr[4];
    __m512 inv[4], X[4];
    __mmask16 nan[4];
    for (int j = 0; j < 4; j++) am[j] = _mm512_setzero_si512();
    for (size_t i = 0; i < nr; i++) {
        for (int j = 0; j < 4; j++)
            am[j] = _mm512_max_epu32(am[j], _mm512_and_si512(_mm512_maskz_loadu_epi32(l[j], x + i * C + 16 * j), absm));
        if (i < nn) fetch_row(next + i * C, w);
    }
    for (int j = 0; j < 4; j++) {
        nan[j] = _mm512_cmpge_epu32_mask(am[j], _mm512_set1_epi32((int)INF_BITS));
        __m512i c = codes16(m, am[j], nan[j]);
        inv[j] = _mm512_castsi512_ps(_mm512_mask_mov_epi32(_mm512_slli_epi32(_mm512_sub_epi32(c254, c), 23),
                                                           _mm512_cmpge_epu32_mask(c, c254), half));
        X[j] = _mm512_castsi512_ps(_mm512_mask_mov_epi32(_mm512_slli_epi32(c, 23),
                                                         _mm512_cmpeq_epi32_mask(c, _mm512_setzero_si512()), half));
        thr[j] = cnt ? _mm512_i32gather_epi32(c, (const void *)m->thr, 4) : _mm512_setzero_si512();
    }
    for (size_t i = 0; i < nr; i++)
        for (int j = 0; j < 4; j++) {
            const float *xi = x + i * C + 16 * j;
            __m512 t = elem16(&m->k, _mm512_maskz_loadu_epi32(l[j], xi), inv[j], X[j], nan[j], l[j], thr[j], cnt);
            _mm512_mask_storeu_ps(y + i * C + 16 * j, l[j], t);
        }
}

QS_AVX512_INLINE void cols_do(const mxk *m, const qs_fq_task *t, vcnt *cnt)
{
    size_t C = t->cols, R = t->rows, B = m->B, pend = 0;
    for (size_t c0 = t->c0; c0 < t->c1; c0 += 64) {
        __mmask16 l[4];
        for (int j = 0; j < 4; j++) l[j] = c0 + 16 * j < t->c1 ? lanes(t->c1 - c0 - 16 * j) : 0;
        size_t w = t->c1 - c0 < 64 ? t->c1 - c0 : 64;
        for (size_t r0 = 0; r0 < R; r0 += B) {
            size_t nr = R - r0 < B ? R - r0 : B;
            size_t nn = R - r0 - nr < B ? R - r0 - nr : B;   /* the next block row's rows */
            const float *next = nn ? t->x + (r0 + nr) * C + c0 : NULL;
            col_block(m, t->x + r0 * C + c0, t->y + r0 * C + c0, C, nr, l, next, nn, w, cnt);
            if (cnt && (pend += nr * w) >= FLUSH) { flush(cnt, t->cnt); pend = 0; }
        }
    }
}

__attribute__((target("avx512f"))) static void cols_avx512(const mxk *m, const qs_fq_task *t)
{
    if (!t->cnt) { cols_do(m, t, NULL); return; }
    vcnt c = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
    cols_do(m, t, &c);
    flush(&c, t->cnt);
}
/* ---- AVX2: the same steps in 8 lanes.  Magnitudes lie below 2^31, so signed compares order them;
** "no clip" is 0x7fffffff there (thr2). */
typedef struct vcnt2 { __m256i u, nfo, nfi, cl; } vcnt2;

QS_AVX2_INLINE __m256i lanes2(size_t n)
{
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n >= 8 ? 8 : (int)n), iota);
}

QS_AVX2_INLINE __m256 elem8(const qs_ek *k, __m256i xb, __m256 inv, __m256 X, __m256i nan, __m256i m, __m256i thr,
                            vcnt2 *cnt)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), expm = _mm256_set1_epi32(0x7f800000);
    const __m256i lowexp = _mm256_set1_epi32((int)k->lowexp), shift = _mm256_set1_epi32((int)k->shift);
    const __m256 cap = _mm256_set1_ps(k->cap), maxv = _mm256_set1_ps(k->maxv);
    __m256i a = _mm256_and_si256(xb, absm);
    __m256i s = _mm256_xor_si256(xb, a);
    __m256 v = _mm256_min_ps(_mm256_mul_ps(_mm256_castsi256_ps(a), inv), cap);
    __m256i e = _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(v), expm), lowexp);
    __m256 M = _mm256_castsi256_ps(_mm256_add_epi32(e, shift));
    __m256 t = _mm256_min_ps(_mm256_sub_ps(_mm256_add_ps(v, M), M), maxv);
    t = _mm256_mul_ps(t, X);
    t = _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(t), s));
    if (k->int8) t = _mm256_add_ps(t, _mm256_setzero_ps());   /* -0 + 0 = +0 */
    t = _mm256_blendv_ps(t, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), _mm256_castsi256_ps(nan));
    if (cnt) {   /* compare masks are -1: subtracting counts */
        const __m256i infm1 = _mm256_set1_epi32((int)INF_BITS - 1), zero = _mm256_setzero_si256();
        __m256i b = _mm256_and_si256(_mm256_castps_si256(t), absm);
        __m256i fin = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)INF_BITS), a);
        __m256i u = _mm256_and_si256(_mm256_and_si256(_mm256_cmpeq_epi32(b, zero), _mm256_cmpgt_epi32(a, zero)), fin);
        cnt->u = _mm256_sub_epi32(cnt->u, _mm256_and_si256(u, m));
        cnt->nfo = _mm256_sub_epi32(cnt->nfo, _mm256_and_si256(_mm256_cmpgt_epi32(b, infm1), m));
        cnt->nfi = _mm256_sub_epi32(cnt->nfi, _mm256_and_si256(_mm256_cmpgt_epi32(a, infm1), m));
        cnt->cl = _mm256_sub_epi32(cnt->cl, _mm256_and_si256(_mm256_cmpgt_epi32(a, thr), m));
    }
    return t;
}

QS_AVX2_INLINE uint32_t hsum8(__m256i v)
{
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(h);
}

__attribute__((target("avx2"))) static void flush2(vcnt2 *c, uint64_t *out)
{
    out[0] += hsum8(c->u);
    out[1] += hsum8(c->nfo);
    out[2] += hsum8(c->nfi);
    out[3] += hsum8(c->cl);
    c->u = c->nfo = c->nfi = c->cl = _mm256_setzero_si256();
}

QS_AVX2_INLINE void row_block2(const mxk *m, const float *x, float *y, size_t len, vcnt2 *cnt)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    __m256i am = _mm256_setzero_si256();
    for (size_t i = 0; i < len; i += 8)
        am = _mm256_max_epu32(am, _mm256_and_si256(_mm256_maskload_epi32((const int *)(x + i), lanes2(len - i)), absm));
    __m128i h = _mm_max_epu32(_mm256_castsi256_si128(am), _mm256_extracti128_si256(am, 1));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xb1));
    uint32_t ab = (uint32_t)_mm_cvtsi128_si32(h);
    unsigned c = ab >= INF_BITS ? 0xFFu : code_of(m, ab);
    __m256i nan = _mm256_set1_epi32(c == 0xFF ? -1 : 0);
    __m256 inv = _mm256_set1_ps(u2f(c >= 254 ? 0x00400000u : (254u - c) << 23)), X = _mm256_set1_ps(scale_of(c));
    __m256i thr = _mm256_set1_epi32(cnt ? (int)m->thr2[c] : 0);
    for (size_t i = 0; i < len; i += 8) {
        __m256i l = lanes2(len - i);
        __m256 t = elem8(&m->k, _mm256_maskload_epi32((const int *)(x + i), l), inv, X, nan, l, thr, cnt);
        _mm256_maskstore_ps(y + i, l, t);
    }
}

QS_AVX2_INLINE void rows_do2(const mxk *m, const qs_fq_task *t, vcnt2 *cnt)
{
    size_t C = t->cols, B = m->B, pend = 0;
    for (size_t r = t->r0; r < t->r1; r++) {
        const float *x = t->x + r * C;
        float *y = t->y + r * C;
        for (size_t j = 0; j < C; j += B) row_block2(m, x + j, y + j, C - j < B ? C - j : B, cnt);
        if (cnt && (pend += C) >= FLUSH) { flush2(cnt, t->cnt); pend = 0; }
    }
}

/* Per-lane scale codes (codes16 in 8 lanes). */
QS_AVX2_INLINE __m256i codes8(const mxk *m, __m256i am, __m256i nan)
{
    __m256i c;
    if (!m->rceil)
        c = _mm256_max_epi32(_mm256_sub_epi32(_mm256_srli_epi32(am, 23), _mm256_set1_epi32(m->emax)),
                             _mm256_setzero_si256());
    else {
        __m256i d = _mm256_castps_si256(_mm256_mul_ps(_mm256_castsi256_ps(am), _mm256_set1_ps(m->rmul)));
        __m256i one = _mm256_set1_epi32(1);
        __m256i exact = _mm256_cmpeq_epi32(_mm256_and_si256(d, _mm256_set1_epi32(0x7fffff)), _mm256_setzero_si256());
        __m256i cn = _mm256_add_epi32(_mm256_srli_epi32(d, 23), _mm256_andnot_si256(exact, one));
        __m256i sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x00800000), d);
        __m256i cs = _mm256_and_si256(_mm256_cmpgt_epi32(d, _mm256_set1_epi32(0x00400000)), one);
        c = _mm256_min_epi32(_mm256_blendv_epi8(cn, cs, sub), _mm256_set1_epi32(254));
    }
    return _mm256_blendv_epi8(c, _mm256_set1_epi32(0xFF), nan);
}

/* One block row (nr rows) of up to 32 columns (vector j's lanes in l[j]), as col_block. */
QS_AVX2_INLINE void col_block2(const mxk *m, const float *x, float *y, size_t C, size_t nr, const __m256i *l,
                               const float *next, size_t nn, size_t w, vcnt2 *cnt)
{
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), c253 = _mm256_set1_epi32(253);
    const __m256i half = _mm256_set1_epi32(0x00400000);
    __m256i am[4], thr[4], nan[4];
    __m256 inv[4], X[4];
    for (int j = 0; j < 4; j++) am[j] = _mm256_setzero_si256();
    for (size_t i = 0; i < nr; i++) {
        for (int j = 0; j < 4; j++)
            am[j] = _mm256_max_epu32(am[j],
                                     _mm256_and_si256(_mm256_maskload_epi32((const int *)(x + i * C + 8 * j), l[j]), absm));
        if (i < nn) fetch_row(next + i * C, w);
    }
    for (int j = 0; j < 4; j++) {
        nan[j] = _mm256_cmpgt_epi32(am[j], _mm256_set1_epi32((int)INF_BITS - 1));
        __m256i c = codes8(m, am[j], nan[j]);
        __m256i ib = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254), c), 23);
        inv[j] = _mm256_castsi256_ps(_mm256_blendv_epi8(ib, half, _mm256_cmpgt_epi32(c, c253)));
        X[j] = _mm256_castsi256_ps(_mm256_blendv_epi8(_mm256_slli_epi32(c, 23), half,
                                                      _mm256_cmpeq_epi32(c, _mm256_setzero_si256())));
        thr[j] = cnt ? _mm256_i32gather_epi32((const int *)m->thr2, c, 4) : _mm256_setzero_si256();
    }
    for (size_t i = 0; i < nr; i++)
        for (int j = 0; j < 4; j++) {
            const float *xi = x + i * C + 8 * j;
            __m256i xb = _mm256_maskload_epi32((const int *)xi, l[j]);
            __m256 t = elem8(&m->k, xb, inv[j], X[j], nan[j], l[j], thr[j], cnt);
            _mm256_maskstore_ps(y + i * C + 8 * j, l[j], t);
        }
}

QS_AVX2_INLINE void cols_do2(const mxk *m, const qs_fq_task *t, vcnt2 *cnt)
{
    size_t C = t->cols, R = t->rows, B = m->B, pend = 0;
    for (size_t c0 = t->c0; c0 < t->c1; c0 += 32) {
        __m256i l[4];
        for (int j = 0; j < 4; j++) l[j] = c0 + 8 * j < t->c1 ? lanes2(t->c1 - c0 - 8 * j) : _mm256_setzero_si256();
        size_t w = t->c1 - c0 < 32 ? t->c1 - c0 : 32;
        for (size_t r0 = 0; r0 < R; r0 += B) {
            size_t nr = R - r0 < B ? R - r0 : B;
            size_t nn = R - r0 - nr < B ? R - r0 - nr : B;
            const float *next = nn ? t->x + (r0 + nr) * C + c0 : NULL;
            col_block2(m, t->x + r0 * C + c0, t->y + r0 * C + c0, C, nr, l, next, nn, w, cnt);
            if (cnt && (pend += nr * w) >= FLUSH) { flush2(cnt, t->cnt); pend = 0; }
        }
    }
}

__attribute__((target("avx2"))) static void task_avx2(const mxk *m, const qs_fq_task *t)
{
    vcnt2 c = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    if (t->axis) {
        if (t->cnt) rows_do2(m, t, &c);
        else rows_do2(m, t, NULL);
    } else {
        if (t->cnt) cols_do2(m, t, &c);
        else cols_do2(m, t, NULL);
    }
    if (t->cnt) flush2(&c, t->cnt);
}
#endif

int qs_fq_mx(const qs_fq_task *t, qs_err *e)
{
    if (!qs_fq_mx_ok(t->a, t->axis, t->rht, t->cnt != NULL))
        return qs_fail(e, "internal: the mx fused kernel does not take format %s here", t->a->f->name);
#if QS_FORMAT_SIMD
    mxk m;
    mxk_init(&m, t->a, t->cnt != NULL);
    if (qs_simd_level() < QS_SIMD_AVX512) task_avx2(&m, t);
    else if (t->axis) rows_avx512(&m, t);
    else cols_avx512(&m, t);
    return 0;
#else
    return qs_fail(e, "internal: the mx fused kernel needs x86-64");
#endif
}
