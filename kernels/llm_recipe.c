/* Low-precision training recipes: operand slots, presets, the per-operand quantization (llm_recipe.h). */
#include "llm_recipe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cast_scale.h"
#include "llm_fakeq_fast.h"
#include "llm_fakeq_nvfp4.h"
#include "llm_fakeq_par.h"
#include "llm_rows.h"
#include "pool.h"
#include "resq.h"
#include "simd.h"
#include "sr.h"

static const char *const op_names[QS_OP_COUNT] = {"fwd.x", "fwd.w", "dgrad.dy", "dgrad.w", "wgrad.dy", "wgrad.x"};
/* The reduction dimension of each operand: columns (axis 1) or rows (axis 0). */
static const int op_axis[QS_OP_COUNT] = {1, 1, 1, 0, 0, 0};

const char *qs_llm_operand_name(int op) { return (unsigned)op < QS_OP_COUNT ? op_names[op] : "?"; }
int qs_llm_operand_axis(int op) { return (unsigned)op < QS_OP_COUNT ? op_axis[op] : 1; }

int qs_llm_operand_parse(const char *s, int *op)
{
    for (int i = 0; i < QS_OP_COUNT; i++)
        if (!strcmp(s, op_names[i])) { *op = i; return 0; }
    return -1;
}

/* splitmix64 finaliser: decorrelates the per-call seeds. */
static uint64_t mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint64_t qs_llm_recipe_call_seed(uint64_t seed, uint64_t call) { return mix(seed ^ mix(call)); }

uint64_t qs_llm_recipe_rht_seed(const qs_llm_recipe *r) { return mix(r->seed ^ 0x52485431365349ULL); }

/* ---------------------------------------------------------------- RHT */

/* In-place normalised 16-point Walsh-Hadamard transform of v[0], v[st], ..., v[15 st] (H16 is symmetric
** and H16 · H16 = I after the 1/4 scaling, an exact power of two). */
static void wht16(float *v, size_t st)
{
    for (size_t h = 1; h < 16; h *= 2)
        for (size_t i = 0; i < 16; i += 2 * h)
            for (size_t j = i; j < i + h; j++) {
                float a = v[j * st], b = v[(j + h) * st];
                v[j * st] = a + b;
                v[(j + h) * st] = a - b;
            }
    for (size_t i = 0; i < 16; i++) v[i * st] *= 0.25f;
}

/* Axis 0: 16 consecutive rows at a time, each butterfly a pass along the rows (contiguous, so the loops
** vectorise); per element the same operations in the same order as wht16, so the same bits. */
static void rht16_rows(float *x, size_t cols, const float sg[16], int inverse)
{
    if (!inverse)
        for (size_t i = 0; i < 16; i++)
            for (size_t c = 0; c < cols; c++) x[i * cols + c] *= sg[i];
    for (size_t h = 1; h < 16; h *= 2)
        for (size_t i = 0; i < 16; i += 2 * h)
            for (size_t j = i; j < i + h; j++) {
                float *a = x + j * cols, *b = x + (j + h) * cols;
                for (size_t c = 0; c < cols; c++) {
                    float u = a[c], v = b[c];
                    a[c] = u + v;
                    b[c] = u - v;
                }
            }
    for (size_t i = 0; i < 16; i++)
        for (size_t c = 0; c < cols; c++) x[i * cols + c] *= 0.25f;
    if (inverse)
        for (size_t i = 0; i < 16; i++)
            for (size_t c = 0; c < cols; c++) x[i * cols + c] *= sg[i];
}

void qs_llm_rht16(float *x, size_t rows, size_t cols, int axis, uint64_t seed, int inverse)
{
    float sg[16];
    for (int i = 0; i < 16; i++) sg[i] = qs_sr_uniform(seed, (uint64_t)i) < 0.5 ? -1.0f : 1.0f;
    if (!axis) {
        for (size_t b = 0; b + 16 <= rows; b += 16) rht16_rows(x + b * cols, cols, sg, inverse);
        return;
    }
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b + 16 <= cols; b += 16) {
            float *v = x + r * cols + b;
            if (!inverse) for (int i = 0; i < 16; i++) v[i] *= sg[i];   /* M = H16 · D: D first */
            wht16(v, 1);
            if (inverse) for (int i = 0; i < 16; i++) v[i] *= sg[i];
        }
}

/* ---------------------------------------------------------------- operands */

static void slot_apply(const qs_llm_slot *sl, int op, uint64_t cs, qs_apply *a);

/* NVFP4's tiles on the fused kernel (llm_fakeq_nvfp4.h): each task a band of 16 rows, in place, its
** counts apart (summed in task order). */
typedef struct {
    const qs_apply *a;
    const float *src;
    float *x;
    size_t rows, cols;
    uint64_t (*cnt)[4];
    int *rc;
    qs_err *err;
} tile_job;

static void tile_task(void *ctx, size_t t, int slot)
{
    (void)slot;
    tile_job *j = ctx;
    j->rc[t] = qs_fq_nvfp4_tiles(j->a, j->src, j->x, j->rows, j->cols, 16 * t, 16 * t + 16, j->cnt ? j->cnt[t] : NULL,
                                 &j->err[t]);
}

static int tiles16_fast(const qs_apply *a0, const float *src, float *x, size_t rows, size_t cols, qs_llm_opstat *st,
                        qs_err *e)
{
    qs_apply a = *a0;
    if (a.f->has_tensor_scale && !(a.o.tensor_scale > 0)) a.o.tensor_scale = qs_fq_absmax_par(src, rows * cols, qs_llm_threads());
    size_t n = (rows + 15) / 16;
    tile_job j = {&a, src, x, rows, cols, st ? calloc(n, sizeof *j.cnt) : NULL, calloc(n, sizeof *j.rc),
                  calloc(n, sizeof *j.err)};
    int rc = 0;
    if (!j.rc || !j.err || (st && !j.cnt)) rc = qs_fail(e, "out of memory for the 16x16 tiles");
    else qs_pool_for(qs_pool_width(qs_llm_threads(), n), n, tile_task, &j);
    for (size_t t = 0; t < n && !rc; t++)
        if (j.rc[t]) { *e = j.err[t]; rc = -1; }
    if (st && !rc) {
        uint64_t c[4] = {0, 0, 0, 0};
        for (size_t t = 0; t < n; t++)
            for (int i = 0; i < 4; i++) c[i] += j.cnt[t][i];
        st->n += rows * cols;
        st->underflow += c[0];
        st->nonfinite += c[1];
        st->clipped += c[3];
    }
    free(j.cnt); free(j.rc); free(j.err);
    return rc;
}

/* x = the tiles of src (which may be x).  With st: counted too (qs_llm_fakeq_par_stat on the tiles as
** rows of 256), when whole tiles allow it, else 1 with x = src. */
static int tiles16(const qs_apply *a0, const float *src, float *x, size_t rows, size_t cols, qs_llm_opstat *st,
                   qs_err *e)
{
    if (rows && cols && qs_llm_fakeq_fast_ok(a0, 1, 0, st != NULL) && qs_fq_nvfp4_tiles_ok(a0))
        return tiles16_fast(a0, src, x, rows, cols, st, e);
    if (src != x) memcpy(x, src, rows * cols * sizeof *x);
    int whole = rows % 16 == 0 && cols % 16 == 0 && rows * cols >= 4096 && a0->o.round != QS_RND_SR;
    if (st && (!whole || a0->f->block == 1 || a0->cscale || a0->gran != QS_GRAN_BLOCK)) return 1;
    if (a0->f->block == 1 || a0->cscale || a0->gran != QS_GRAN_BLOCK)
        return qs_fail(e, "format %s: 16x16 tiles need a block format", a0->f->name);
    qs_apply a = *a0;
    a.axis = 1;
    if (a.f->has_tensor_scale && !(a.o.tensor_scale > 0)) {   /* as qs_format_apply: finite absmax */
        float m = 0;
        for (size_t i = 0; i < rows * cols; i++) {
            float v = fabsf(x[i]);
            if (v > m && v != INFINITY) m = v;
        }
        a.o.tensor_scale = m;
    }
    if (whole) {
        /* whole tiles, no counters: gathered as rows of 256 (one block each), quantized in parallel */
        size_t nt = rows / 16 * (cols / 16);
        float *t = malloc((st ? 2 : 1) * rows * cols * sizeof *t), *q = st ? t + rows * cols : t;
        if (!t) return qs_fail(e, "out of memory for the 16x16 tiles (%zu floats)", rows * cols);
        for (size_t k = 0; k < nt; k++) {
            size_t r0 = k / (cols / 16) * 16, c0 = k % (cols / 16) * 16;
            for (size_t i = 0; i < 16; i++) memcpy(t + k * 256 + i * 16, x + (r0 + i) * cols + c0, 16 * sizeof(float));
        }
        a.o.block = 256;
        int rc = st ? qs_llm_fakeq_par_stat(&a, t, q, nt, 256, 0, 0, qs_llm_threads(), st, e)
                    : qs_llm_fakeq_par(&a, t, t, nt, 256, 0, 0, qs_llm_threads(), e);
        for (size_t k = 0; !rc && k < nt; k++) {
            size_t r0 = k / (cols / 16) * 16, c0 = k % (cols / 16) * 16;
            for (size_t i = 0; i < 16; i++) memcpy(x + (r0 + i) * cols + c0, q + k * 256 + i * 16, 16 * sizeof(float));
        }
        free(t);
        return rc;
    }
    float buf[256];
    for (size_t r0 = 0; r0 < rows; r0 += 16)
        for (size_t c0 = 0; c0 < cols; c0 += 16) {
            size_t h = rows - r0 < 16 ? rows - r0 : 16, w = cols - c0 < 16 ? cols - c0 : 16;
            for (size_t i = 0; i < h; i++) memcpy(buf + i * w, x + (r0 + i) * cols + c0, w * sizeof(float));
            a.o.block = (int)(h * w);
            a.o.index0 = a0->o.index0 + r0 * cols + c0 * 16;   /* distinct SR counters per tile */
            if (qs_fakeq_matrix(&a, buf, 1, h * w, buf, e)) return -1;
            for (size_t i = 0; i < h; i++) memcpy(x + (r0 + i) * cols + c0, buf + i * w, w * sizeof(float));
        }
    return 0;
}

int qs_llm_fakeq_tiles16(const qs_apply *a, float *x, size_t rows, size_t cols, qs_err *e)
{
    return tiles16(a, x, x, rows, cols, NULL, e);
}

int qs_llm_recipe_operand(const qs_llm_recipe *r, int op, const float *x, size_t rows, size_t cols, uint64_t call,
                          float *y, qs_err *e)
{
    return qs_llm_recipe_operand_stat(r, op, x, rows, cols, call, y, NULL, NULL, e);
}

int qs_llm_recipe_operand_stat(const qs_llm_recipe *r, int op, const float *x, size_t rows, size_t cols,
                               uint64_t call, float *y, float *tmp, qs_llm_opstat *st, qs_err *e)
{
    return qs_llm_recipe_operand_am(r, op, x, rows, cols, call, 0, y, tmp, st, e);
}

int qs_llm_recipe_operand_am(const qs_llm_recipe *r, int op, const float *x, size_t rows, size_t cols, uint64_t call,
                             float amax, float *y, float *tmp, qs_llm_opstat *st, qs_err *e)
{
    if ((unsigned)op >= QS_OP_COUNT) return qs_fail(e, "no training operand %d", op);
    const qs_llm_slot *sl = &r->op[op];
    uint64_t cs = qs_llm_recipe_call_seed(r->seed, call), rs = qs_llm_recipe_rht_seed(r);
    if (!sl->on) {
        if (y != x) memcpy(y, x, rows * cols * sizeof(float));
        return 0;
    }
    qs_apply a;
    slot_apply(sl, op, cs, &a);
    if (amax > 0 && a.f->has_tensor_scale && !(a.o.tensor_scale > 0)) a.o.tensor_scale = amax;   /* as found */
    if (!st) {   /* the hot path: copy, RHT and quantization in one pass on the pool */
        if (!sl->tile2d) return qs_llm_fakeq_par(&a, x, y, rows, cols, sl->rht, rs, qs_llm_threads(), e);
        if (!sl->rht) return tiles16(&a, x, y, rows, cols, NULL, e);   /* no copy first */
        if (y != x) memcpy(y, x, rows * cols * sizeof(float));
        qs_llm_rht16(y, rows, cols, op_axis[op], rs, 0);
        return qs_llm_fakeq_tiles16(&a, y, rows, cols, e);
    }
    if (!sl->tile2d) {   /* statistics counted by the quantizer's tasks (amax block formats) */
        int rc = qs_llm_fakeq_par_stat(&a, x, y, rows, cols, sl->rht, rs, qs_llm_threads(), st, e);
        if (rc != 1) return rc;
    } else if (!sl->rht) {   /* whole 16x16 tiles: counted as their rows of 256 */
        int rc = tiles16(&a, x, y, rows, cols, st, e);
        if (rc != 1) return rc;
    }
    /* else what the format sees (after the RHT) must outlive the quantization */
    const float *in = x;
    float *own = NULL;
    if (sl->rht || y == x) {
        if (!tmp && !(tmp = own = malloc(rows * cols * sizeof(float))))
            return qs_fail(e, "out of memory for operand statistics");
        memcpy(tmp, x, rows * cols * sizeof(float));
        if (sl->rht) qs_llm_rht16(tmp, rows, cols, op_axis[op], rs, 0);
        in = tmp;
    }
    int rc = 1;
    if (!sl->tile2d) rc = qs_llm_opstat_quantize(&a, in, y, rows, cols, st, e);   /* HiF4: one pass */
    if (rc == 1) {
        if (sl->tile2d) {
            memcpy(y, in, rows * cols * sizeof(float));
            rc = qs_llm_fakeq_tiles16(&a, y, rows, cols, e);
        } else {
            rc = qs_llm_fakeq_par(&a, in, y, rows, cols, 0, cs, qs_llm_threads(), e);
        }
        if (!rc) rc = qs_llm_opstat_add(&a, sl->tile2d, in, y, rows, cols, st, e);
    }
    free(own);
    return rc;
}

/* The slot's format along the operand's axis (SR seed from the call's). */
static void slot_apply(const qs_llm_slot *sl, int op, uint64_t cs, qs_apply *a)
{
    *a = sl->a;
    if (a->gran == QS_GRAN_BLOCK) a->axis = op_axis[op];
    if (sl->sr) {
        a->o.round = QS_RND_SR;
        a->o.seed = mix(cs + (uint64_t)op + 1);   /* the two operands of a GEMM draw apart */
        a->o.index0 = 0;
    }
}

int qs_llm_slot_same_apply(const qs_apply *a, const qs_apply *b)
{
    const qs_qopts *p = &a->o, *q = &b->o;
    return a->f == b->f && a->gran == b->gran && a->cscale == b->cscale && p->round == q->round &&
           p->seed == q->seed && p->index0 == q->index0 && p->sat == q->sat && p->scale_rule == q->scale_rule &&
           p->uos_qmax == q->uos_qmax && p->block == q->block && p->nvfp4 == q->nvfp4 && p->m2x == q->m2x &&
           p->tensor_scale == q->tensor_scale && p->floor_log2f == q->floor_log2f &&
           p->zero_positive == q->zero_positive && p->flush_subnormal_blocks == q->flush_subnormal_blocks &&
           p->nan_block_te == q->nan_block_te && p->zero_block_scale == q->zero_block_scale;
}

int qs_llm_recipe_weight_reuse(const qs_llm_recipe *r)
{
    const qs_llm_slot *f = &r->op[QS_OP_FWD_W], *d = &r->op[QS_OP_DGRAD_W];
    if (!f->on || !d->on || f->sr || d->sr || f->rht || d->rht || f->tile2d != d->tile2d || !f->a.f ||
        !qs_llm_slot_same_apply(&f->a, &d->a) || f->a.o.round == QS_RND_SR || f->a.gran != QS_GRAN_BLOCK)
        return 0;
    if (f->tile2d) return 1;   /* one scale per 16x16 tile, whichever the axis */
    /* elementwise, unscaled or one scale for the whole tensor */
    return qs_format_block(f->a.f, &f->a.o) == 1 && (f->a.cscale == QS_CSCALE_NONE || f->a.cscale == QS_CSCALE_TENSOR);
}

int qs_llm_recipe_check(const qs_llm_recipe *r, qs_err *e)
{
    for (int i = 0; i < QS_OP_COUNT; i++) {
        const qs_llm_slot *sl = &r->op[i];
        if (!sl->on) {
            if (sl->rht) return qs_fail(e, "recipe %s: %s has a Hadamard transform but no format", r->name, op_names[i]);
            continue;
        }
        if (!sl->a.f) return qs_fail(e, "recipe %s: %s has no format", r->name, op_names[i]);
        qs_qopts o = sl->a.o;
        if (sl->sr) o.round = QS_RND_SR;
        qs_err sub = {{0}};
        if (qs_qopts_check(sl->a.f, &o, &sub))
            return qs_fail(e, "recipe %s: %s (%s): %.400s", r->name, op_names[i], sl->a.f->name, sub.msg);
        if (sl->tile2d && (sl->a.f->block == 1 || sl->a.cscale || sl->a.gran != QS_GRAN_BLOCK))
            return qs_fail(e, "recipe %s: %s: 16x16 tiles need a block format (%s is not)", r->name, op_names[i],
                           sl->a.f->name);
        if (sl->a.cscale && !(qs_cast_scale_target(sl->a.f) > 0))
            return qs_fail(e, "recipe %s: %s: format %s takes no scale=", r->name, op_names[i], sl->a.f->name);
    }
    if (r->op[QS_OP_FWD_X].rht || r->op[QS_OP_FWD_W].rht)
        return qs_fail(e, "recipe %s: a Hadamard transform on the forward operands is not supported", r->name);
    for (int g = QS_OP_DGRAD_DY; g <= QS_OP_WGRAD_DY; g += 2)
        if (!r->op[g].rht != !r->op[g + 1].rht)
            return qs_fail(e, "recipe %s: the Hadamard transform must be on both %s and %s (the same signs keep the "
                           "product)", r->name, op_names[g], op_names[g + 1]);
    return 0;
}

/* ---------------------------------------------------------------- presets */

static int slot(qs_llm_recipe *r, int op, const char *fmt, int cscale, qs_scale_rule rule, int sr, int rht, qs_err *e)
{
    const qs_format *f = qs_format_find(fmt);
    if (!f) return qs_fail(e, "recipe %s: format %s is not in the registry", r->name, fmt);
    qs_llm_slot *sl = &r->op[op];
    memset(sl, 0, sizeof *sl);
    sl->on = 1;
    sl->a.f = f;
    sl->a.gran = QS_GRAN_BLOCK;
    sl->a.axis = op_axis[op];
    sl->a.cscale = cscale;
    sl->a.o.scale_rule = rule;
    sl->a.o.sat = cscale != 0;   /* scaled FP8 casts saturate (TE's satfinite) */
    sl->sr = sr;
    sl->rht = rht;
    return 0;
}

static int all(qs_llm_recipe *r, const char *fmt, int cscale, qs_scale_rule rule, qs_err *e)
{
    for (int i = 0; i < QS_OP_COUNT; i++)
        if (slot(r, i, fmt, cscale, rule, 0, 0, e)) return -1;
    return 0;
}

int qs_llm_recipe_preset(const char *name, qs_llm_recipe *r, qs_err *e)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->seed = 0x5EEDULL;
    int rc;
    if (!strcmp(name, "fp32")) rc = 0;
    else if (!strcmp(name, "bf16")) rc = all(r, "bf16", 0, QS_SCALE_FLOOR, e);
    else if (!strcmp(name, "fp8-hybrid")) {   /* TE Float8CurrentScaling, HYBRID: E4M3 forward, E5M2 gradients */
        rc = all(r, "fp8_e4m3", QS_CSCALE_TENSOR, QS_SCALE_FLOOR, e);
        if (!rc) rc = slot(r, QS_OP_DGRAD_DY, "fp8_e5m2", QS_CSCALE_TENSOR, QS_SCALE_FLOOR, 0, 0, e);
        if (!rc) rc = slot(r, QS_OP_WGRAD_DY, "fp8_e5m2", QS_CSCALE_TENSOR, QS_SCALE_FLOOR, 0, 0, e);
    } else if (!strcmp(name, "mxfp8")) rc = all(r, "mxfp8_e4m3", 0, QS_SCALE_RCEIL, e);   /* TE MXFP8BlockScaling */
    else if (!strcmp(name, "mxfp4")) rc = all(r, "mxfp4", 0, QS_SCALE_FLOOR, e);          /* OCP / microxcaling */
    else if (!strcmp(name, "nvfp4") || !strcmp(name, "nvfp4-1d")) {   /* TE NVFP4BlockScaling */
        rc = all(r, "nvfp4", 0, QS_SCALE_FLOOR, e);
        r->op[QS_OP_FWD_W].tile2d = r->op[QS_OP_DGRAD_W].tile2d = !strcmp(name, "nvfp4");   /* 16x16 weights */
        if (!rc) rc = slot(r, QS_OP_DGRAD_DY, "nvfp4", 0, QS_SCALE_FLOOR, 1, 0, e);
        if (!rc) rc = slot(r, QS_OP_WGRAD_DY, "nvfp4", 0, QS_SCALE_FLOOR, 1, 1, e);
        if (!rc) rc = slot(r, QS_OP_WGRAD_X, "nvfp4", 0, QS_SCALE_FLOOR, 0, 1, e);
    } else if (!strcmp(name, "hif4")) rc = all(r, "hif4", 0, QS_SCALE_FLOOR, e);
    else if (!strcmp(name, "hif8")) rc = all(r, "hif8", QS_CSCALE_TENSOR, QS_SCALE_FLOOR, e);
    else return qs_fail(e, "unknown training recipe '%s' (known: %s)", name, QS_LLM_RECIPE_PRESETS);
    if (rc) return -1;
    return qs_llm_recipe_check(r, e);
}
