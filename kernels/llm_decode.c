/* Ragged batched decoding (llm_decode.h). */
#include "llm_decode.h"
#include "llm_gemma.h"
#include "llm_decode_internal.h"
#include "llm_dec_attn.h"
#include "llm_gemm.h"
#include "llm_internal.h"
#include "llm_rows.h"
#include "pool.h"
#include "simd.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

qs_llm_dec *qs_llm_dec_new(const qs_llm_cfg *c, int slots, int max_pos, int max_rows, qs_err *e)
{
    if (qs_llm_cfg_check(c, e) || qs_llm_gemma_refuse(c, "the batched decoder", e) ||
        qs_llm_cfg_core_only(c, max_pos, "the batched decoder (rl grpo, sampling)", e))
        return NULL;
    if (slots <= 0 || max_pos <= 0 || max_rows <= 0 || slots > 1 << 16 || max_pos > 1 << 20 || max_rows > 1 << 20) {
        qs_fail(e, "bad decoder size (%d slots, %d positions, %d rows)", slots, max_pos, max_rows);
        return NULL;
    }
    qs_llm_dec *d = calloc(1, sizeof *d);
    if (!d) { qs_fail(e, "out of memory"); return NULL; }
    d->c = *c;
    d->slots = slots; d->max_pos = max_pos; d->max_rows = max_rows;
    d->threads = qs_llm_threads();
    size_t kvd = (size_t)c->n_kv_head * c->head_dim, R = (size_t)max_rows, dm = (size_t)c->dim, qd = qs_llm_q_dim(c);
    size_t F = (size_t)c->ffn, wide = F > dm ? F : dm, fused = 2 * F > qd + 2 * kvd ? 2 * F : qd + 2 * kvd;
    if (qd > wide) wide = qd;
    size_t cache = (size_t)c->n_layer * slots * max_pos * kvd;
    d->kc = malloc(cache * sizeof(float));
    d->vc = malloc(cache * sizeof(float));
    d->x = malloc(R * dm * sizeof(float));
    d->xn = malloc(R * wide * sizeof(float));
    d->q = malloc(R * qd * sizeof(float));
    d->k = malloc(R * kvd * sizeof(float));
    d->v = malloc(R * kvd * sizeof(float));
    d->att = malloc(R * qd * sizeof(float));
    d->h = malloc(R * F * sizeof(float));
    d->y = malloc(R * fused * sizeof(float));
    d->save = malloc(R * wide * sizeof(float));
    d->tmp = malloc(3 * wide * sizeof(float));
    d->sc = malloc((size_t)d->threads * c->n_head * max_pos * sizeof(float));
    d->mp = qs_llm_gemm_mp(max_rows);
    d->wide = (int)wide;
    d->xt = malloc((size_t)d->mp * wide * sizeof(float));
    d->scr = malloc((size_t)d->threads * 4 * wide * sizeof(float));
    d->seen = calloc((size_t)slots, sizeof(int));
    d->fused = 1;
    d->rcos = malloc((size_t)max_pos * (c->head_dim / 2) * sizeof(float));
    d->rsin = malloc((size_t)max_pos * (c->head_dim / 2) * sizeof(float));
    if (!d->kc || !d->vc || !d->x || !d->xn || !d->q || !d->k || !d->v || !d->att || !d->h || !d->y || !d->save ||
        !d->tmp || !d->sc || !d->rcos || !d->rsin || !d->xt || !d->scr || !d->seen) {
        qs_llm_dec_free(d);
        qs_fail(e, "out of memory for the KV caches of %d sequences x %d positions", slots, max_pos);
        return NULL;
    }
    int half = c->head_dim / 2;
    for (int p = 0; p < max_pos; p++)   /* the angles of qs_llm_state_new, computed the same way */
        for (int i = 0; i < half; i++) {
            double a = p * pow((double)c->rope_base, -2.0 * i / c->head_dim);
            d->rcos[(size_t)p * half + i] = (float)cos(a);
            d->rsin[(size_t)p * half + i] = (float)sin(a);
        }
    return d;
}

void qs_llm_dec_free(qs_llm_dec *d)
{
    if (!d) return;
    free(d->kc); free(d->vc); free(d->x); free(d->xn); free(d->q); free(d->k); free(d->v); free(d->att); free(d->h);
    free(d->y); free(d->save); free(d->tmp); free(d->sc); free(d->rcos); free(d->rsin);
    free(d->xt); free(d->scr); free(d->seen); free(d->ph);
    free(d);
}

void qs_llm_dec_copy(qs_llm_dec *d, int dst, int src, int npos)
{
    size_t kvd = (size_t)d->c.n_kv_head * d->c.head_dim;
    for (int l = 0; l < d->c.n_layer; l++) {
        size_t base = (size_t)l * d->slots * d->max_pos * kvd;
        size_t so = base + (size_t)src * d->max_pos * kvd, dof = base + (size_t)dst * d->max_pos * kvd;
        memcpy(d->kc + dof, d->kc + so, (size_t)npos * kvd * sizeof(float));
        memcpy(d->vc + dof, d->vc + so, (size_t)npos * kvd * sizeof(float));
    }
}

/* ---------------------------------------------------------------- rounding with underflow counts */

/* 8 at a time: masks of before != 0 (NaN counts, as in the loop) and after == 0, counted. */
__attribute__((target("avx2,popcnt"))) static size_t count_uf_avx2(const float *before, const float *after, size_t n,
                                                                   uint64_t *nz, uint64_t *z)
{
    const __m256 zero = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 b = _mm256_cmp_ps(_mm256_loadu_ps(before + i), zero, _CMP_NEQ_UQ);
        const __m256 a = _mm256_cmp_ps(_mm256_loadu_ps(after + i), zero, _CMP_EQ_OQ);
        *nz += (uint64_t)_mm_popcnt_u32((unsigned)_mm256_movemask_ps(b));
        *z += (uint64_t)_mm_popcnt_u32((unsigned)_mm256_movemask_ps(_mm256_and_ps(a, b)));
    }
    return i;
}

void qs_dec_count_uf(const float *before, const float *after, size_t n, uint64_t *c)
{
    uint64_t nz = 0, z = 0;
    size_t i = qs_simd_level() >= QS_SIMD_AVX2 ? count_uf_avx2(before, after, n, &nz, &z) : 0;
    for (; i < n; i++)
        if (before[i] != 0) { nz++; z += after[i] == 0; }
    c[0] += nz;
    c[1] += z;
}

static int round_site(qs_llm_dec *d, const qs_apply *a, int scaled, qs_llm_resq resq, float *x, int rows, int cols,
                      uint64_t *uf, qs_err *e)
{
    if (!a) return 0;
    size_t n = (size_t)rows * cols;
    if (uf) memcpy(d->save, x, n * sizeof(float));
    if (qs_llm_round_rows(a, scaled, resq, x, rows, cols, d->tmp, e)) return -1;
    if (uf) qs_dec_count_uf(d->save, x, n, uf);
    return 0;
}

/* ---------------------------------------------------------------- attention, one row per task */

typedef struct att_job {
    qs_llm_dec *d;
    const int *slot, *pos;
    int l;
    float scale;
} att_job;

static void att_row(void *ctx, size_t task, int tslot)
{
    const att_job *j = ctx;
    qs_llm_dec *d = j->d;
    const qs_llm_cfg *c = &d->c;
    const int hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd, r = (int)task;
    const size_t base = ((size_t)j->l * d->slots + (size_t)j->slot[r]) * d->max_pos * kvd;
    qs_dec_attn_row(d->att + (size_t)r * qd, d->q + (size_t)r * qd, d->kc + base, d->vc + base, kvd, j->pos[r] + 1,
                    c->n_head, hd, c->n_head / c->n_kv_head, j->scale, d->sc + (size_t)tslot * c->n_head * d->max_pos, 1);
}

/* ---------------------------------------------------------------- the step */

static int check_rows(const qs_llm_dec *d, const int32_t *tok, const int *slot, const int *pos, int R, int vocab, qs_err *e)
{
    if (R <= 0 || R > d->max_rows) return qs_fail(e, "decode: %d rows (room for %d)", R, d->max_rows);
    for (int r = 0; r < R; r++) {
        if (tok[r] < 0 || tok[r] >= vocab) return qs_fail(e, "token id %d out of range (vocabulary %d)", tok[r], vocab);
        if (slot[r] < 0 || slot[r] >= d->slots || pos[r] < 0 || pos[r] >= d->max_pos)
            return qs_fail(e, "decode: row %d (sequence %d, position %d) outside the cache (%d x %d)", r, slot[r], pos[r],
                           d->slots, d->max_pos);
    }
    return 0;
}

static void add_bias(float *y, const float *b, int rows, int n)
{
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) y[(size_t)r * n + i] += b[i];
}

/* Q, K, V of R rows (one GEMM when the weights are adjacent), biases, RoPE; K/V rounded into the cache. */
static int qkv_into_cache(const qs_llm_model *m, const qs_llm_layer *L, const qs_apply *kvf, int scaled, qs_llm_dec *d,
                          int l, const int *slot, const int *pos, int R, uint64_t *uf, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    const int dm = c->dim, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd, half = hd / 2;
    if (L->wk == L->wq + (size_t)qd * dm && L->wv == L->wk + (size_t)kvd * dm) {
        const int W3 = qd + 2 * kvd;
        qs_llm_gemm_nt(d->y, d->xn, L->wq, R, dm, W3, d->threads);
        for (int r = 0; r < R; r++) {
            const float *yr = d->y + (size_t)r * W3;
            memcpy(d->q + (size_t)r * qd, yr, (size_t)qd * sizeof(float));
            memcpy(d->k + (size_t)r * kvd, yr + qd, (size_t)kvd * sizeof(float));
            memcpy(d->v + (size_t)r * kvd, yr + qd + kvd, (size_t)kvd * sizeof(float));
        }
    } else {
        qs_llm_gemm_nt(d->q, d->xn, L->wq, R, dm, qd, d->threads);
        qs_llm_gemm_nt(d->k, d->xn, L->wk, R, dm, kvd, d->threads);
        qs_llm_gemm_nt(d->v, d->xn, L->wv, R, dm, kvd, d->threads);
    }
    if (L->bq) add_bias(d->q, L->bq, R, qd);
    if (L->bk) add_bias(d->k, L->bk, R, kvd);
    if (L->bv) add_bias(d->v, L->bv, R, kvd);
    const size_t lbase = (size_t)l * d->slots * d->max_pos * kvd;
    for (int r = 0; r < R; r++) {
        const float *cs = d->rcos + (size_t)pos[r] * half, *sn = d->rsin + (size_t)pos[r] * half;
        qs_llm_rope_row(d->q + (size_t)r * qd, c->n_head, hd, cs, sn, c->rope_neox);
        qs_llm_rope_row(d->k + (size_t)r * kvd, c->n_kv_head, hd, cs, sn, c->rope_neox);
        const size_t at = lbase + ((size_t)slot[r] * d->max_pos + (size_t)pos[r]) * kvd;
        float *kr = d->k + (size_t)r * kvd, *vr = d->v + (size_t)r * kvd;
        if (!kvf) {
            memcpy(d->kc + at, kr, (size_t)kvd * sizeof(float));
            memcpy(d->vc + at, vr, (size_t)kvd * sizeof(float));
            continue;
        }
        if (qs_llm_fakeq_row(kvf, scaled, kr, kvd, d->kc + at, e) || qs_llm_fakeq_row(kvf, scaled, vr, kvd, d->vc + at, e))
            return -1;
        if (uf) { qs_dec_count_uf(kr, d->kc + at, (size_t)kvd, uf); qs_dec_count_uf(vr, d->vc + at, (size_t)kvd, uf); }
    }
    return 0;
}

/* The step pass by pass (the reference of the fused passes, llm_decode_fused.c). */
static int step_unfused(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const int32_t *tok,
                        const int *slot, const int *pos, int R, float *hidden, uint64_t *uf, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    const int dm = c->dim, qd = c->n_head * c->head_dim, F = c->ffn;
    const qs_apply *act = nx ? nx->act : NULL, *kv_all = nx ? nx->kv : NULL;
    const qs_llm_resq resq = nx ? nx->resq : QS_RESQ_NONE;
    const int scaled = nx ? nx->scaled : 0;
    for (int r = 0; r < R; r++) memcpy(d->x + (size_t)r * dm, m->tok_embd + (size_t)tok[r] * dm, (size_t)dm * sizeof(float));
    for (int l = 0; l < c->n_layer; l++) {
        const qs_llm_layer *L = &m->L[l];
        const qs_apply *const *lf = nx && nx->layer_fmt ? nx->layer_fmt + (size_t)l * QS_LLM_NLSITE : NULL;
        uint64_t *u = uf ? uf + QS_LLM_UF(l, 0) : NULL;
#define UF(site) (u ? u + 2 * (site) : NULL)
        for (int r = 0; r < R; r++) qs_llm_rmsnorm_row(d->xn + (size_t)r * dm, d->x + (size_t)r * dm, L->attn_norm, dm, c->eps);
        if (round_site(d, lf ? lf[QS_SITE_ATTN_IN] : act, scaled, resq, d->xn, R, dm, UF(QS_SITE_ATTN_IN), e)) return -1;
        if (qkv_into_cache(m, L, lf ? lf[QS_LLM_LSITE_KV] : kv_all, scaled, d, l, slot, pos, R, UF(QS_LLM_LSITE_KV), e))
            return -1;
        att_job aj = {d, slot, pos, l, 1.0f / sqrtf((float)c->head_dim)};
        if (d->threads > 1 && R > 1) qs_pool_for(d->threads, (size_t)R, att_row, &aj);
        else
            for (int r = 0; r < R; r++) att_row(&aj, (size_t)r, 0);
        if (round_site(d, lf ? lf[QS_SITE_ATTN_OUT] : act, scaled, resq, d->att, R, qd, UF(QS_SITE_ATTN_OUT), e)) return -1;
        qs_llm_gemm_nt(d->xn, d->att, L->wo, R, qd, dm, d->threads);
        for (size_t i = 0; i < (size_t)R * dm; i++) d->x[i] += d->xn[i];

        for (int r = 0; r < R; r++) qs_llm_rmsnorm_row(d->xn + (size_t)r * dm, d->x + (size_t)r * dm, L->ffn_norm, dm, c->eps);
        if (round_site(d, lf ? lf[QS_SITE_FFN_IN] : act, scaled, resq, d->xn, R, dm, UF(QS_SITE_FFN_IN), e)) return -1;
        if (L->w_up == L->w_gate + (size_t)F * dm) {   /* gate | up in one GEMM, SwiGLU per row */
            qs_llm_gemm_nt(d->y, d->xn, L->w_gate, R, dm, 2 * F, d->threads);
            for (int r = 0; r < R; r++) {
                float *yr = d->y + (size_t)r * 2 * F;
                qs_swiglu_row(yr, yr + F, (size_t)F);
                memcpy(d->h + (size_t)r * F, yr, (size_t)F * sizeof(float));
            }
        } else {
            qs_llm_gemm_nt(d->h, d->xn, L->w_gate, R, dm, F, d->threads);
            qs_llm_gemm_nt(d->y, d->xn, L->w_up, R, dm, F, d->threads);
            for (int r = 0; r < R; r++) qs_swiglu_row(d->h + (size_t)r * F, d->y + (size_t)r * F, (size_t)F);
        }
        if (round_site(d, lf ? lf[QS_SITE_FFN_DOWN_IN] : act, scaled, resq, d->h, R, F, UF(QS_SITE_FFN_DOWN_IN), e)) return -1;
        qs_llm_gemm_nt(d->xn, d->h, L->w_down, R, F, dm, d->threads);
        for (size_t i = 0; i < (size_t)R * dm; i++) d->x[i] += d->xn[i];
#undef UF
    }
    for (int r = 0; r < R; r++) qs_llm_rmsnorm_row(hidden + (size_t)r * dm, d->x + (size_t)r * dm, m->out_norm, dm, c->eps);
    return 0;
}

int qs_llm_dec_step(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const int32_t *tok,
                    const int *slot, const int *pos, int R, float *hidden, uint64_t *uf, qs_err *e)
{
    if (memcmp(&m->c, &d->c, sizeof m->c)) return qs_fail(e, "decode: state made for another model shape");
    if (nx && nx->online) return qs_fail(e, "decode: rot= and rht= are supported by llm eval's forward pass only");
    if (check_rows(d, tok, slot, pos, R, m->c.vocab, e)) return -1;
    return d->fused ? qs_dec_step_fused(m, nx, d, tok, slot, pos, R, hidden, uf, e)
                    : step_unfused(m, nx, d, tok, slot, pos, R, hidden, uf, e);
}

void qs_llm_dec_set_fused(qs_llm_dec *d, int on) { d->fused = on; }

int qs_llm_dec_logits(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const float *hidden, int R,
                      float *out, uint64_t *uf, qs_err *e)
{
    return qs_llm_dec_logits_each(m, nx, d, hidden, R, out, uf, NULL, NULL, e);
}

static int logits_unfused(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const float *hidden, int R,
                          float *out, uint64_t *uf, qs_err *e);

int qs_llm_dec_logits_each(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const float *hidden, int R,
                           float *out, uint64_t *uf, qs_pool_fn each, void *ctx, qs_err *e)
{
    if (R <= 0 || R > d->max_rows) return qs_fail(e, "decode: %d rows (room for %d)", R, d->max_rows);
    if (nx && nx->online) return qs_fail(e, "decode: rot= and rht= are supported by llm eval's forward pass only");
    if (d->fused) return qs_dec_logits_fused(m, nx, d, hidden, R, out, uf, each, ctx, e);
    if (logits_unfused(m, nx, d, hidden, R, out, uf, e)) return -1;
    if (each) qs_pool_for(d->threads, (size_t)R, each, ctx);
    return 0;
}

static int logits_unfused(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_dec *d, const float *hidden, int R,
                          float *out, uint64_t *uf, qs_err *e)
{
    const int dm = m->c.dim;
    const float *x = hidden;
    if (nx && nx->act) {
        memcpy(d->xn, hidden, (size_t)R * dm * sizeof(float));
        if (round_site(d, nx->act, nx->scaled, nx->resq, d->xn, R, dm, uf ? uf + QS_LLM_UF(m->c.n_layer, 0) : NULL, e))
            return -1;
        x = d->xn;
    }
    qs_llm_gemm_nt(out, x, m->output, R, dm, m->c.vocab, d->threads);
    return 0;
}
