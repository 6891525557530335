/*
** The ggml family's registry rows (format_families.h): llama.cpp's quantization types, each run of
** values cut into ggml's blocks (32 or 256 values along the run, i.e. along a weight row: the GEMM's
** reduction dimension, as ggml quantizes a row) and handed to the type's codec (format_ggml.h).
**
** A run whose length is not a multiple of the block ends in a partial block: it is quantized as the
** block padded with zeros and its first values kept (llama.cpp instead refuses such a row and
** llama-quantize falls back to another type for the tensor; docs/formats.md).  Rounding, block size
** and the library variants are ggml's own and take no options.  Codes: one per value, the unpacked
** integer ggml stores; metadata: the block's header bytes in ggml's order (qs_ggml_codec).
*/
#include <float.h>
#include <stdio.h>
#include <stdlib.h>

#include "format_families.h"
#include "format_ggml.h"

#define MAXB 256

static const qs_ggml_codec *const kCodecs[] = {
    &qs_ggml_q4_0, &qs_ggml_q4_1, &qs_ggml_q5_0, &qs_ggml_q5_1, &qs_ggml_q8_0, &qs_ggml_q2_k, &qs_ggml_q3_k,
    &qs_ggml_q4_k, &qs_ggml_q5_k, &qs_ggml_q6_k, &qs_ggml_iq4_nl, &qs_ggml_iq4_xs, &qs_ggml_q8_1, &qs_ggml_q8_k,
};
#define NCODECS (sizeof kCodecs / sizeof kCodecs[0])

const qs_ggml_codec *qs_ggml_codec_find(const char *name)
{
    for (size_t i = 0; i < NCODECS; i++)
        if (name && strcmp(kCodecs[i]->name, name) == 0) return kCodecs[i];
    return NULL;
}

const qs_ggml_codec *qs_ggml_codec_of(const qs_format *f)
{
    return f && f->family == QS_FAM_GGML ? qs_ggml_codec_find(f->name) : NULL;
}

const qs_ggml_codec *qs_ggml_codec_opt(const qs_format *f, const qs_qopts *o)
{
    const qs_ggml_codec *c = qs_ggml_codec_of(f);
    if (c && o && o->round == QS_RND_RNE) {
        if (c == &qs_ggml_q8_0) return &qs_ggml_q8_0_cpu;
        if (c == &qs_ggml_q8_1) return &qs_ggml_q8_1_cpu;
    }
    return c;
}

int qs_ggml_quantize(const qs_ggml_codec *c, const float *x, size_t n, uint8_t *out, qs_err *e)
{
    if (n % (size_t)c->blk) return qs_fail(e, "%s: %zu values are not whole blocks of %d", c->name, n, c->blk);
    uint8_t L[MAXB], m[64];
    for (size_t b = 0; b < n / (size_t)c->blk; b++) {
        c->enc(x + b * (size_t)c->blk, L, m);
        c->pack(L, m, out + b * (size_t)c->bytes);
    }
    return 0;
}

int qs_ggml_quantize_imatrix(const qs_ggml_codec *c, const float *x, size_t nrows, size_t n_per_row, const float *qw,
                             uint8_t *out, qs_err *e)
{
    if (n_per_row % (size_t)c->blk)
        return qs_fail(e, "%s: rows of %zu values are not whole blocks of %d", c->name, n_per_row, c->blk);
    if (!c->encw || !qw) return qs_ggml_quantize(c, x, nrows * n_per_row, out, e);
    uint8_t L[MAXB], m[64];
    size_t nb = n_per_row / (size_t)c->blk;
    for (size_t r = 0; r < nrows; r++) {
        const float *xr = x + r * n_per_row;
        float sum_x2 = 0;   /* the legacy types' sigma2: over the row, in ggml's order */
        for (size_t j = 0; j < n_per_row; j++) sum_x2 += xr[j] * xr[j];
        float sigma2 = sum_x2 / (float)(int64_t)n_per_row;
        for (size_t b = 0; b < nb; b++) {
            c->encw(xr + b * (size_t)c->blk, qw + b * (size_t)c->blk, sigma2, L, m);
            c->pack(L, m, out + (r * nb + b) * (size_t)c->bytes);
        }
    }
    return 0;
}

int qs_ggml_dequantize(const qs_ggml_codec *c, const uint8_t *in, size_t n, float *y, qs_err *e)
{
    if (n % (size_t)c->blk) return qs_fail(e, "%s: %zu values are not whole blocks of %d", c->name, n, c->blk);
    uint8_t L[MAXB], m[64];
    for (size_t b = 0; b < n / (size_t)c->blk; b++) {
        c->unpack(in + b * (size_t)c->bytes, L, m);
        c->dec(L, m, y + b * (size_t)c->blk);
    }
    return 0;
}

static int setup(const qs_format *f, const qs_qopts *o, const qs_ggml_codec **c, qs_err *e)
{
    *c = qs_ggml_codec_opt(f, o);
    if (!*c) return qs_fail(e, "format %s: no ggml codec", f->name);
    if (o && o->block > 0 && o->block != (*c)->blk)
        return qs_fail(e, "format %s has ggml's fixed blocks of %d values (asked for %d)", f->name, (*c)->blk, o->block);
    if (o && o->round != QS_RND_DEFAULT && o->round != QS_RND_GGML && !(o->round == QS_RND_RNE && (f->round_modes >> QS_RND_RNE & 1)))
        return qs_fail(e, "format %s rounds as ggml does: no rounding option", f->name);
    return 0;
}

/* Block b of a run of n: its values (a partial block padded with zeros) and its length. */
static const float *block_in(const qs_ggml_codec *c, const float *x, size_t n, size_t b0, float *pad, size_t *len)
{
    size_t B = (size_t)c->blk;
    *len = n - b0 < B ? n - b0 : B;
    if (*len == B) return x + b0;
    memset(pad, 0, B * sizeof *pad);
    memcpy(pad, x + b0, *len * sizeof *pad);
    return pad;
}

static int gg_encode(const qs_format *f, const qs_qopts *o, const float *x, size_t n, uint32_t *codes, uint8_t *meta,
                     float *tensor_scale, qs_err *e)
{
    const qs_ggml_codec *c;
    if (setup(f, o, &c, e)) return -1;
    float pad[MAXB];
    uint8_t L[MAXB];
    for (size_t b0 = 0, k = 0; b0 < n; b0 += (size_t)c->blk, k++) {
        size_t len;
        c->enc(block_in(c, x, n, b0, pad, &len), L, meta + k * (size_t)c->meta);
        for (size_t i = 0; i < len; i++) codes[b0 + i] = L[i];
    }
    if (tensor_scale) *tensor_scale = 1.0f;
    return 0;
}

static int gg_decode(const qs_format *f, const qs_qopts *o, const uint32_t *codes, const uint8_t *meta, float tensor_scale,
                     size_t n, float *y, qs_err *e)
{
    (void)tensor_scale;
    const qs_ggml_codec *c;
    if (setup(f, o, &c, e)) return -1;
    uint8_t L[MAXB];
    float v[MAXB];
    for (size_t b0 = 0, k = 0; b0 < n; b0 += (size_t)c->blk, k++) {
        size_t len = n - b0 < (size_t)c->blk ? n - b0 : (size_t)c->blk;
        memset(L, 0, sizeof L);
        for (size_t i = 0; i < len; i++) {
            if (codes[b0 + i] >> f->elem_bits)
                return qs_fail(e, "format %s: code 0x%x out of range (element %zu)", f->name, codes[b0 + i], b0 + i);
            L[i] = (uint8_t)codes[b0 + i];
        }
        c->dec(L, meta + k * (size_t)c->meta, v);
        memcpy(y + b0, v, len * sizeof *v);
    }
    return 0;
}

static int gg_fakeq_meta(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, uint8_t *meta,
                         qs_err *e)
{
    const qs_ggml_codec *c;
    if (setup(f, o, &c, e)) return -1;
    float pad[MAXB], v[MAXB];
    uint8_t L[MAXB], m[64];
    for (size_t b0 = 0, k = 0; b0 < n; b0 += (size_t)c->blk, k++) {
        size_t len;
        uint8_t *mk = meta ? meta + k * (size_t)c->meta : m;
        c->enc(block_in(c, x, n, b0, pad, &len), L, mk);
        c->dec(L, mk, v);
        memcpy(y + b0, v, len * sizeof *v);
    }
    return 0;
}

static int gg_fakeq(const qs_format *f, const qs_qopts *o, const float *x, size_t n, float *y, qs_err *e)
{
    return gg_fakeq_meta(f, o, x, n, y, NULL, e);
}

/* The analysis' scales: per sub-block (scale_seg values) the element step and the largest magnitude. */
static void gg_seg_scales(const qs_format *f, const qs_qopts *o, const uint8_t *meta, size_t n, float *S, float *Q)
{
    (void)o;
    const qs_ggml_codec *c = qs_ggml_codec_of(f);
    size_t per = (size_t)(c->blk / c->seg);
    for (size_t k = 0; k < n; k++) c->steps(meta + k * (size_t)c->meta, S + k * per, Q + k * per);
}

static void gg_elem_steps(const qs_format *f, const qs_qopts *o, const uint8_t *m, size_t n, float *step)
{
    (void)o;
    const qs_ggml_codec *c = qs_ggml_codec_of(f);
    float S[16], Q[16];
    c->steps(m, S, Q);
    for (size_t i = 0; i < n; i++) step[i] = S[i / (size_t)c->seg];
}

static void gg_meta_text(const qs_format *f, const qs_qopts *o, const uint8_t *m, float ts, double step, qs_num_fmt num,
                         char *out, size_t cap)
{
    (void)o; (void)ts; (void)step; (void)num;
    qs_ggml_codec_of(f)->text(m, out, cap);
}

#define H 65504.0   /* FP16 max: the largest d */
#define GG(NAME, SUMMARY, BITS, ELEM, BLK, META, MBITS, SEG, MAXV, MINV) GGR(NAME, SUMMARY, BITS, ELEM, BLK, META, MBITS, SEG, MAXV, MINV, 0)
#define GGR(NAME, SUMMARY, BITS, ELEM, BLK, META, MBITS, SEG, MAXV, MINV, MORE)                                        \
    {.name = NAME, .family = QS_FAM_GGML, .summary = SUMMARY, .elem_bits = BITS, .block = BLK, .meta_bytes = META,     \
     .meta_bits = MBITS, .has_inf = 1, .has_nan = 1, .max_finite = MAXV, .min_normal = 0, .min_subnormal = MINV,      \
     .default_round = QS_RND_GGML, .round_modes = 1u << QS_RND_GGML | (MORE), .encode = gg_encode, .decode = gg_decode, .fakeq = gg_fakeq,  \
     .elem = ELEM, .scale_kind = QS_SK_GGML, .meta_text = gg_meta_text, .elem_steps = gg_elem_steps,                  \
     .grid = QS_GRID(0, 0, 0), .scale_seg = SEG, .seg_scales = gg_seg_scales, .fakeq_meta = gg_fakeq_meta}

#define U QS_ELEM_UINT
#define I QS_ELEM_INT
#define F16SUB 0x1p-24   /* smallest FP16 subnormal d */
const qs_format qs_formats_ggml[] = {
    GG("q4_0", "llama.cpp Q4_0: 32 x 4-bit (q - 8) times an FP16 scale max/-8, 4.5 bits", 4, U, 32, 2, 16, 32, H * 8, F16SUB),
    GG("q4_1", "llama.cpp Q4_1: 32 x 4-bit q times an FP16 scale plus an FP16 min, 5 bits", 4, U, 32, 4, 32, 32, H * 16, F16SUB),
    GG("q5_0", "llama.cpp Q5_0: 32 x 5-bit (q - 16) times an FP16 scale max/-16, 5.5 bits", 5, U, 32, 2, 16, 32, H * 16, F16SUB),
    GG("q5_1", "llama.cpp Q5_1: 32 x 5-bit q times an FP16 scale plus an FP16 min, 6 bits", 5, U, 32, 4, 32, 32, H * 32, F16SUB),
    GGR("q8_0", "llama.cpp Q8_0: 32 x int8 times an FP16 scale amax/127, 8.5 bits", 8, I, 32, 2, 16, 32, H * 128, F16SUB,
        1u << QS_RND_RNE),
    GG("q2_k", "llama.cpp Q2_K: 256 = 16 x 16 2-bit q, 4-bit scales and mins under FP16 d, dmin, 2.625 bits", 2, U, 256,
       20, 160, 16, H * 15 * 3 + H * 15, F16SUB),
    GG("q3_k", "llama.cpp Q3_K: 256 = 16 x 16 3-bit (q - 4), 6-bit scales under an FP16 d, 3.4375 bits", 3, U, 256, 14,
       112, 16, H * 32 * 4, F16SUB),
    GG("q4_k", "llama.cpp Q4_K: 256 = 8 x 32 4-bit q, 6-bit scales and mins under FP16 d, dmin, 4.5 bits", 4, U, 256,
       16, 128, 32, H * 63 * 15 + H * 63, F16SUB),
    GG("q5_k", "llama.cpp Q5_K: 256 = 8 x 32 5-bit q, 6-bit scales and mins under FP16 d, dmin, 5.5 bits", 5, U, 256,
       16, 128, 32, H * 63 * 31 + H * 63, F16SUB),
    GG("q6_k", "llama.cpp Q6_K: 256 = 16 x 16 6-bit (q - 32), int8 scales under an FP16 d, 6.5625 bits", 6, U, 256, 18,
       144, 16, H * 128 * 32, F16SUB),
    GG("iq4_nl", "llama.cpp IQ4_NL: 32 x 4-bit index into a non-linear table (-127..113) times an FP16 scale, 4.5 bits",
       4, U, 32, 2, 16, 32, H * 127, F16SUB),
    GG("iq4_xs", "llama.cpp IQ4_XS: 256 = 8 x 32 IQ4_NL codes, 6-bit scales under an FP16 d, 4.25 bits", 4, U, 256, 8,
       64, 32, H * 32 * 127, F16SUB),
    GGR("q8_1", "llama.cpp Q8_1 (activations): Q8_0's 32 x int8 and FP16 scale, plus an FP16 block sum d*sum(q), 9 bits",
        8, I, 32, 4, 32, 32, H * 128, F16SUB, 1u << QS_RND_RNE),
    GG("q8_k", "llama.cpp Q8_K (activations): 256 x int8 times an FP32 scale max/-127, 16 int16 block sums, 9.125 bits",
       8, I, 256, 36, 288, 256, FLT_MAX, FLT_TRUE_MIN),
};
const size_t qs_formats_ggml_n = sizeof qs_formats_ggml / sizeof qs_formats_ggml[0];
