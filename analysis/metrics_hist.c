/*
** Histogram accumulators of the analysis engine (layouts in metrics.h, raw bin coordinates in
** metrics_internal.h).  The portable path adds each value's raw bin into its hacc (h_raw).  The AVX-512
** path counts a histogram's bins inside a window with bit-sliced counters (below) and the values
** outside it one by one; the counts are the same whatever the window, only the speed differs.
*/
#include "metrics_internal.h"

/* ---- window counters --------------------------------------------------------------------------- */

void met_hwin_flush(hwin *W, hacc *h)
{
    if (W->set)
        for (int s = 0; s < W->ns; s++) {
            uint64_t cnt[32] = {0};
            for (int p = 0; p < W->top; p++) {
                uint32_t *v = W->pl[s][p];
                for (int L = 0; L < 16; L++) {
                    for (uint32_t bits = v[L]; bits; bits &= bits - 1) cnt[__builtin_ctz(bits)] += (uint64_t)1 << p;
                    v[L] = 0;
                }
            }
            for (int t = 0; t < W->nbuf; t++)
                for (int L = 0; L < 16; L++)
                    for (uint32_t bits = W->buf[s][t][L]; bits; bits &= bits - 1) cnt[__builtin_ctz(bits)] += 16;
            for (int k = 0; k < 32; k++)
                if (cnt[k]) h_raw(h, W->base + 32 * s + k, cnt[k]);
        }
    W->nbuf = 0;
    W->set = 0;
    W->top = 8;
    W->words = W->nout = 0;
}

/* The window as the AVX-512 kernel reads it for the next chunk: bins are stored as d = raw - gbase,
** and a binned value with d >= gwidth (unsigned) raises the chunk's flag (no window yet: all do).
** The kernel assigns the flags of its groups; those from group g0 on (the portable tail) are
** cleared here for the tail's |= (a memset of the whole array costs more than the rest). */
void met_hwin_arm(hwin *W, size_t g0, size_t ngr)
{
    W->gbase = W->set ? W->base : 0;
    W->gwidth = W->set ? 32u * (uint32_t)W->ns : 0;
    for (size_t g = g0; g < ngr; g++) W->om[g] = 0;
}

#if MET_X86
/* Choose the window of a histogram from a chunk's bins (raw = d + gbase): the highest bin present,
** 2 binades of room above it (log2 histograms); ulp: all 64 bins, [-1, 1) ulp (the central 32 hold
** every correctly rounded value, but a clipped one misses them, and misses cost more than a stream). */
static void hwin_choose(hwin *W, const int32_t *d, size_t k, int ulp)
{
    int32_t hi = INT32_MIN;
    for (size_t i = 0; i < k; i++)
        if (d[i] != D_SENT && d[i] + W->gbase > hi) hi = d[i] + W->gbase;
    if (hi == INT32_MIN) return;   /* nothing binned yet */
    if (ulp) {
        W->ns = 2;
        W->base = -32;
    } else {
        W->ns = W->nsw < 2 ? 2 : W->nsw;
        W->base = hi + 8 - 32 * W->ns + 1;
    }
    W->set = 1;
}

/* Place a log2 window from the histogram counted so far (a first chunk can mislead: an outlier's
** block): the placement of 2 streams holding most of it, the highest such; one stream more while
** the best still misses more than 1 in 128. */
static void hwin_place(hwin *W, const hacc *h)
{
    uint64_t tot = 0;
    for (int i = 0; i < h->n + NSLOT; i++) tot += h->c[i];
    for (int ns = 2; ns <= HS_NS; ns++) {
        const int w = 32 * ns;
        uint64_t run = 0, most = 0;
        int best = h->n - w;
        for (int b = h->n - 1; b >= 0; b--) {   /* windows [b, b + w) of bins, from the highest down */
            run += h->c[b];
            if (b + w < h->n) run -= h->c[b + w];
            if (run > most) {
                most = run;
                best = b;
            }
        }
        W->ns = ns;
        W->base = best - h->off;
        if ((tot - most) * 128 <= tot) break;
    }
    W->nsw = W->ns;
    W->set = 1;
}

#define CSA(h, l, a, b, c)                                                   \
    do {                                                                      \
        __m512i a_ = (a), b_ = (b), c_ = (c);                                 \
        h = _mm512_ternarylogic_epi32(a_, b_, c_, 0xe8);                      \
        l = _mm512_ternarylogic_epi32(a_, b_, c_, 0x96);                      \
    } while (0)

/* Add a carry word into planes p.. of a stream (ripple; the carry dies out fast). */
__attribute__((target("avx512f")))
static inline void hs_ripple(hwin *W, uint32_t (*pl)[16], int p, __m512i c)
{
    while (p < HS_PL && _mm512_test_epi32_mask(c, c)) {
        if (p + 1 > W->top) W->top = p + 1;
        __m512i v = _mm512_load_si512(pl[p]);
        _mm512_store_si512(pl[p], _mm512_xor_si512(v, c));
        c = _mm512_and_si512(v, c);
        p++;
    }
}

/* 16 words into the 4 planes st[0..3] (weights 1, 2, 4, 8 of the tree's unit); returns the carry-out
** word (weight 16 units). */
__attribute__((target("avx512f"), always_inline))
static inline __m512i hs_tree16(const __m512i *wd, uint32_t (*st)[16])
{
    __m512i ones = _mm512_load_si512(st[0]), twos = _mm512_load_si512(st[1]);
    __m512i fours = _mm512_load_si512(st[2]), eights = _mm512_load_si512(st[3]);
    __m512i twosA, twosB, foursA, foursB, eightsA, eightsB, sixteens;
    CSA(twosA, ones, ones, wd[0], wd[1]);
    CSA(twosB, ones, ones, wd[2], wd[3]);
    CSA(foursA, twos, twos, twosA, twosB);
    CSA(twosA, ones, ones, wd[4], wd[5]);
    CSA(twosB, ones, ones, wd[6], wd[7]);
    CSA(foursB, twos, twos, twosA, twosB);
    CSA(eightsA, fours, fours, foursA, foursB);
    CSA(twosA, ones, ones, wd[8], wd[9]);
    CSA(twosB, ones, ones, wd[10], wd[11]);
    CSA(foursA, twos, twos, twosA, twosB);
    CSA(twosA, ones, ones, wd[12], wd[13]);
    CSA(twosB, ones, ones, wd[14], wd[15]);
    CSA(foursB, twos, twos, twosA, twosB);
    CSA(eightsB, fours, fours, foursA, foursB);
    CSA(sixteens, eights, eights, eightsA, eightsB);
    _mm512_store_si512(st[0], ones);
    _mm512_store_si512(st[1], twos);
    _mm512_store_si512(st[2], fours);
    _mm512_store_si512(st[3], eights);
    return sixteens;
}
/* The same tree over the one-hot words 1 << (d[16 t + L] - sh), t = 0..15. */
__attribute__((target("avx512f"), always_inline))
static inline __m512i hs_tree16_oh(const int32_t *d, __m512i sh, uint32_t (*st)[16])
{
    const __m512i one = _mm512_set1_epi32(1);
    __m512i wd[16];
    for (int t = 0; t < 16; t++) wd[t] = _mm512_sllv_epi32(one, _mm512_sub_epi32(_mm512_loadu_si512(d + 16 * t), sh));
    return hs_tree16(wd, st);
}

/* Both streams of a two-stream window in one pass (one load of each d, two independent chains). */
__attribute__((target("avx512f"), always_inline))
static inline void hs_tree16_oh2(const int32_t *d, int s0, uint32_t (*st0)[16], uint32_t (*st1)[16], uint32_t *c0,
                                 uint32_t *c1)
{
    const __m512i one = _mm512_set1_epi32(1), sh0 = _mm512_set1_epi32(32 * s0), sh = _mm512_set1_epi32(32 * s0 + 32);
    __m512i o0 = _mm512_load_si512(st0[0]), t0 = _mm512_load_si512(st0[1]);
    __m512i f0 = _mm512_load_si512(st0[2]), e0 = _mm512_load_si512(st0[3]);
    __m512i o1 = _mm512_load_si512(st1[0]), t1 = _mm512_load_si512(st1[1]);
    __m512i f1 = _mm512_load_si512(st1[2]), e1 = _mm512_load_si512(st1[3]);
    __m512i tA0, tB0, fA0, fB0, eA0, eB0, x0, tA1, tB1, fA1, fB1, eA1, eB1, x1;
#define PAIR(t, ta, tb)                                                                                  \
    do {                                                                                                  \
        __m512i v_ = _mm512_loadu_si512(d + 16 * (t)), u_ = _mm512_loadu_si512(d + 16 * ((t) + 1));      \
        CSA(ta##0, o0, o0, _mm512_sllv_epi32(one, s0 ? _mm512_sub_epi32(v_, sh0) : v_),                     \
            _mm512_sllv_epi32(one, s0 ? _mm512_sub_epi32(u_, sh0) : u_));                                   \
        CSA(ta##1, o1, o1, _mm512_sllv_epi32(one, _mm512_sub_epi32(v_, sh)),                                \
            _mm512_sllv_epi32(one, _mm512_sub_epi32(u_, sh)));                                              \
        (void)tb;                                                                                         \
    } while (0)
    PAIR(0, tA, 0); PAIR(2, tB, 0);
    CSA(fA0, t0, t0, tA0, tB0); CSA(fA1, t1, t1, tA1, tB1);
    PAIR(4, tA, 0); PAIR(6, tB, 0);
    CSA(fB0, t0, t0, tA0, tB0); CSA(fB1, t1, t1, tA1, tB1);
    CSA(eA0, f0, f0, fA0, fB0); CSA(eA1, f1, f1, fA1, fB1);
    PAIR(8, tA, 0); PAIR(10, tB, 0);
    CSA(fA0, t0, t0, tA0, tB0); CSA(fA1, t1, t1, tA1, tB1);
    PAIR(12, tA, 0); PAIR(14, tB, 0);
    CSA(fB0, t0, t0, tA0, tB0); CSA(fB1, t1, t1, tA1, tB1);
    CSA(eB0, f0, f0, fA0, fB0); CSA(eB1, f1, f1, fA1, fB1);
    CSA(x0, e0, e0, eA0, eB0); CSA(x1, e1, e1, eA1, eB1);
#undef PAIR
    _mm512_store_si512(st0[0], o0); _mm512_store_si512(st0[1], t0);
    _mm512_store_si512(st0[2], f0); _mm512_store_si512(st0[3], e0);
    _mm512_store_si512(st1[0], o1); _mm512_store_si512(st1[1], t1);
    _mm512_store_si512(st1[2], f1); _mm512_store_si512(st1[3], e1);
    _mm512_store_si512(c0, x0);
    _mm512_store_si512(c1, x1);
}
#undef CSA

/* Count a chunk's k bins d[] (relative to gbase, D_SENT: not binned).  A new window rebases them;
** the values flagged outside it (om) are counted directly and replaced by D_SENT; then 256 values at
** a time go through the adder trees, whole vectors by ripple, the rest directly. */
__attribute__((target("avx512f,avx512bw")))
void met_hs_count(hwin *W, hacc *h, int32_t *d, size_t k, int ulp)
{
    if (!W->set) hwin_choose(W, d, k, ulp);
    if (!W->set) return;   /* nothing binned */
    const uint32_t width = 32u * (uint32_t)W->ns;
    const size_t ngr = (k + 15) / 16;
    if (W->gbase != W->base) {   /* a new window: rebase and flag again (bins outside give no one-hot) */
        const int32_t shift = W->gbase - W->base;
        memset(W->om, 0, sizeof W->om);
        for (size_t i = 0; i < k; i++)
            if (d[i] != D_SENT) {
                d[i] += shift;
                if ((uint32_t)d[i] >= width) W->om[i / 16] |= (uint16_t)(1u << (i % 16));
            }
    }
    /* count the bins outside the window directly: the groups with a flag, 32 masks at a time */
    for (size_t g0 = 0; g0 < ngr; g0 += 32) {
        __m512i om = _mm512_loadu_si512(W->om + g0);   /* om has CH / 16 + 1 entries, padded */
        for (uint32_t nz = _mm512_test_epi16_mask(om, om); nz; nz &= nz - 1) {
            size_t g = g0 + (size_t)__builtin_ctz(nz);
            if (g >= ngr) break;
            for (unsigned o = W->om[g]; o; o &= o - 1) {
                size_t i = g * 16 + (size_t)__builtin_ctz(o);
                h_raw(h, d[i] + W->base, 1);
                W->nout++;
                d[i] = D_SENT;
            }
        }
    }
    if (W->words > ((uint64_t)1 << (HS_PL - 2))) {   /* keep the counters below 2^HS_PL */
        int32_t base = W->base;
        int ns = W->ns;
        met_hwin_flush(W, h);
        W->base = base;
        W->ns = ns;
        W->set = 1;
    }
    const __m512i one = _mm512_set1_epi32(1);
    const int ns = W->ns;
    size_t i = 0;
    for (; i + 256 <= k; i += 256) {
        int s2 = 0;
        for (; s2 + 1 < ns; s2 += 2)
            hs_tree16_oh2(d + i, s2, W->pl[s2], W->pl[s2 + 1], W->buf[s2][W->nbuf], W->buf[s2 + 1][W->nbuf]);
        if (s2 < ns)
            _mm512_store_si512(W->buf[s2][W->nbuf], hs_tree16_oh(d + i, _mm512_set1_epi32(32 * s2), W->pl[s2]));
        if (++W->nbuf == 16) {   /* the second tree, every 4096 values */
            for (int s = 0; s < ns; s++) {
                __m512i c16[16];
                for (int t = 0; t < 16; t++) c16[t] = _mm512_load_si512(W->buf[s][t]);
                hs_ripple(W, W->pl[s], 8, hs_tree16(c16, W->pl[s] + 4));
            }
            W->nbuf = 0;
        }
        W->words += 16;
    }
    for (; i + 16 <= k; i += 16) {
        __m512i v = _mm512_loadu_si512(d + i);
        for (int s = 0; s < ns; s++) hs_ripple(W, W->pl[s], 0, _mm512_sllv_epi32(one, _mm512_sub_epi32(v, _mm512_set1_epi32(32 * s))));
        W->words++;
    }
    for (; i < k; i++)
        if (d[i] != D_SENT) h_raw(h, d[i] + W->base, 1);
    /* a window that misses more than 1 value in 16 is chosen again from the next chunk; a log2 window
    ** that misses more than 1 in 128 of its first 64K values placed from the counts so far (hwin_place) */
    if (W->nout > W->words && W->words * 16 >= 4096) met_hwin_flush(W, h);
    else if (!ulp && W->ns < HS_NS && W->nout * 8 > W->words && W->words * 16 >= 65536) {
        met_hwin_flush(W, h);
        hwin_place(W, h);
    }
}

#endif

/* ---- the results' histograms ---------------------------------------------------------------- */

void met_hist_set(qs_hist *h, int kind, int nbins, double lo, double hi)
{
    h->kind = kind;
    h->nbins = nbins;
    h->lo = lo;
    h->hi = hi;
}

int met_hist_alloc(qs_hist *h)
{
    if (h->nbins == 0) return 0;
    h->counts = calloc((size_t)h->nbins, sizeof *h->counts);
    return h->counts ? 0 : -1;
}

void met_hist_add(qs_hist *h, const hacc *a)
{
    if (!h->counts || !a->c) return;
    const uint64_t *c = a->c;
    for (int i = 0; i < h->nbins; i++) h->counts[i] += c[i];
    h->zero += c[a->n + S_ZERO];
    h->under += c[a->n + S_UNDER];
    h->over += c[a->n + S_OVER];
    h->nonfinite += c[a->n + S_NONF];
}

/* Values in the bins, under or over. */
uint64_t met_hist_binned(const qs_hist *h)
{
    uint64_t t = h->under + h->over;
    for (int i = 0; i < h->nbins; i++) t += h->counts[i];
    return t;
}
