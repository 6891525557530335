/*
** The prefill's row passes and fused products on the thread pool (llm_prefill.h).  Every row is
** computed exactly as the serial loops of llm.c compute it, so splitting rows over threads changes
** nothing but the time.
*/
#include "llm_prefill.h"
#include "llm_internal.h"
#include "llm_pgemm.h"
#include "llm_wtype.h"
#include "llm_rows.h"
#include "pool.h"
#include "simd.h"

#include <immintrin.h>

#include <stdatomic.h>
#include <string.h>

#define ROWS_PER_TASK 8

static int width(int R) { return R >= 2 * ROWS_PER_TASK ? qs_llm_threads() : 1; }

/* ---------------------------------------------------------------- residual + RMSNorm */

typedef struct norm_job {
    float *x, *out;
    const float *add, *w;
    int R, d;
    float eps;
} norm_job;

static void norm_task(void *ctx, size_t t, int slot)
{
    (void)slot;
    const norm_job *j = ctx;
    const int r1 = ((int)t + 1) * ROWS_PER_TASK < j->R ? ((int)t + 1) * ROWS_PER_TASK : j->R;
    for (int r = (int)t * ROWS_PER_TASK; r < r1; r++) {
        float *x = j->x + (size_t)r * j->d;
        if (j->add) {
            qs_add_row(x, j->add + (size_t)r * j->d, (size_t)j->d);
        }
        if (j->out) qs_llm_rmsnorm_row(j->out + (size_t)r * j->d, x, j->w, j->d, j->eps);
    }
}

void qs_prefill_add_norm(float *x, const float *add, float *out, const float *w, int R, int d, float eps)
{
    norm_job j = {x, out, add, w, R, d, eps};
    const size_t n = (size_t)(R + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
    qs_pool_for(width(R), n, norm_task, &j);
}

/* ---------------------------------------------------------------- gate|up with SwiGLU */

typedef struct swiglu_job {
    qs_pgemm gate, up;
    int nb;   /* blocks of rows (qs_pgemm_row_blocks) */
} swiglu_job;

static void swiglu_task(void *ctx, size_t t, int slot)
{
    (void)slot;
    const swiglu_job *j = ctx;
    _Alignas(64) float pack[QS_PGEMM_PACK];
    qs_pgemm_block(&j->gate, j->nb, t, pack);
    qs_pgemm_block(&j->up, j->nb, t, pack);
    const size_t nu = qs_pgemm_units(&j->gate);
    const int o0 = (int)(t % nu) * 2 * QS_PGEMM_NR, nc = j->gate.N - o0 < 2 * QS_PGEMM_NR ? j->gate.N - o0 : 2 * QS_PGEMM_NR;
    int r0 = 0, r1 = j->gate.R;
    if (j->nb > 1) qs_pgemm_block_rows(j->gate.R, j->nb, (int)(t / nu), &r0, &r1);
    for (int r = r0; r < r1; r++)
        qs_swiglu_row(j->gate.y + (size_t)r * j->gate.ldy + o0, j->up.y + (size_t)r * j->up.ldy + o0, (size_t)nc);
}

void qs_prefill_swiglu(qs_pgemm_cache *pc, float *h, float *u, const float *x, const float *w_gate, const float *w_up,
                       const qs_wt *tw_gate, const qs_wt *tw_up, int R, int d, int F)
{
    swiglu_job j = {{h, x, w_gate, R, d, F, d, F, NULL, 0, 0, 0, 0, tw_gate}, {u, x, w_up, R, d, F, d, F, NULL, 0, 0, 0, 0, tw_up}, 1};
    qs_pgemm_cache_bind(pc, &j.gate);
    qs_pgemm_cache_bind(pc, &j.up);
    const int nb0 = qs_pgemm_row_blocks(&j.gate), nb1 = qs_pgemm_row_blocks(&j.up);
    j.nb = nb0 < nb1 ? nb0 : nb1;   /* one cut for both (any cut gives the same bits) */
    const size_t n = qs_pgemm_units(&j.gate) * (size_t)j.nb;
    qs_pool_for(width(R) > 1 ? qs_llm_threads() : 1, n, swiglu_task, &j);
    qs_wt_release(tw_gate);
    qs_wt_release(tw_up);
}

/* ---------------------------------------------------------------- biases, RoPE, KV cache */

typedef struct rope_job {
    const qs_prefill_rope *a;
    atomic_int fail;
    qs_err err;
} rope_job;

/* Rows of a rope task: whole groups of 32 keys (the packed K's lines hold 32 keys of one dimension),
** so no line of it is written by two threads (8-row tasks shared every line between the cores). */
#define ROPE_ROWS QS_PGEMM_NR

/* V of key p of sequence b into the packed V (layout in llm_prefill.h): its own lines. */
static void pack_v(const qs_prefill_rope *a, int b, int p, const float *v)
{
    const int hd = a->hd, NR = QS_PGEMM_NR;
    for (int h = 0; h < a->n_kv_head; h++) {
        const size_t base = ((size_t)b * a->n_kv_head + h) * a->ldp * (size_t)((hd + NR - 1) / NR * NR);
        float *vp = a->vp + base + (size_t)p * NR;
        const float *vh = v + (size_t)h * hd;
        for (int i = 0; i < hd; i += NR)
            memcpy(vp + (size_t)(i / NR) * a->ldp * NR, vh + i, (size_t)(hd - i < NR ? hd - i : NR) * sizeof(float));
    }
}

/* K of rows [r0, r1) (their cache rows) into the packed K, a dimension at a time across the rows: each
** line of the packed K is written by consecutive stores. */
static void pack_k(const qs_prefill_rope *a, int r0, int r1)
{
    const int hd = a->hd, NR = QS_PGEMM_NR, kvd = a->n_kv_head * hd;
    const size_t hs = (size_t)a->ldp * (size_t)((hd + NR - 1) / NR * NR);
    for (int r = r0; r < r1;) {   /* runs of rows of one sequence and one group of 32 keys */
        const int b = r / a->T, p0 = a->pos0 + r % a->T;
        int n = NR - p0 % NR;
        if (n > r1 - r) n = r1 - r;
        if (n > a->T - r % a->T) n = a->T - r % a->T;
        const float *k0 = a->kc + ((size_t)b * a->max_pos + p0) * kvd;
        for (int h = 0; h < a->n_kv_head; h++) {
            float *kp = a->kp + ((size_t)b * a->n_kv_head + h) * hs + (size_t)(p0 / NR) * hd * NR + p0 % NR;
            for (int i = 0; i < hd; i++)
                for (int j = 0; j < n; j++) kp[(size_t)i * NR + j] = k0[(size_t)j * kvd + (size_t)h * hd + i];
        }
        r += n;
    }
}

/* RoPE of nheads heads of hd (llm.c's rope(): the same products and sums lane by lane, so the same bits):
** pairs (2i, 2i+1), or with neox (i, i + hd/2); 16 lanes where hd allows, else llm.c's row. */
__attribute__((target("avx512f"))) static void rope512(float *v, int nheads, int hd, const float *cs, const float *sn, int neox)
{
    const int half = hd / 2;
    if (neox) {
        for (int h = 0; h < nheads; h++) {
            float *p = v + (size_t)h * hd;
            for (int i = 0; i < half; i += 16) {
                const __m512 a = _mm512_loadu_ps(p + i), b = _mm512_loadu_ps(p + i + half);
                const __m512 c = _mm512_loadu_ps(cs + i), s = _mm512_loadu_ps(sn + i);
                _mm512_storeu_ps(p + i, _mm512_sub_ps(_mm512_mul_ps(a, c), _mm512_mul_ps(b, s)));
                _mm512_storeu_ps(p + i + half, _mm512_add_ps(_mm512_mul_ps(a, s), _mm512_mul_ps(b, c)));
            }
        }
        return;
    }
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    for (int h = 0; h < nheads; h++) {
        float *p = v + (size_t)h * hd;
        for (int i = 0; i < half; i += 8) {   /* lanes: a0 b0 a1 b1 ..., cos/sin of pair j in lanes 2j, 2j+1 */
            const __m512 x = _mm512_loadu_ps(p + 2 * i), sw = _mm512_permute_ps(x, 0xB1);
            const __m512 c = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(cs + i)));
            const __m512 s = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(sn + i)));
            const __m512 xc = _mm512_mul_ps(x, c), ws = _mm512_mul_ps(sw, s);
            /* even lanes a c - b s, odd lanes b c + a s (= a s + b c) */
            _mm512_storeu_ps(p + 2 * i, _mm512_mask_sub_ps(_mm512_add_ps(xc, ws), 0x5555, xc, ws));
        }
    }
}

static void rope_row(float *v, int nheads, int hd, const float *cs, const float *sn, int neox)
{
    if (qs_simd_level() >= QS_SIMD_AVX512 && hd % (neox ? 32 : 16) == 0) rope512(v, nheads, hd, cs, sn, neox);
    else qs_llm_rope_row(v, nheads, hd, cs, sn, neox);
}

static int rope_rows(const qs_prefill_rope *a, int r0, int r1, qs_err *e)
{
    const int qd = a->n_head * a->hd, kvd = a->n_kv_head * a->hd, half = a->hd / 2;
    for (int r = r0; r < r1; r++) {
        const int b = r / a->T, p = a->pos0 + r % a->T;
        float *q = a->q + (size_t)r * qd, *k = a->k + (size_t)r * kvd, *v = a->v + (size_t)r * kvd;
        if (a->bq) for (int i = 0; i < qd; i++) q[i] += a->bq[i];
        if (a->bk) for (int i = 0; i < kvd; i++) k[i] += a->bk[i];
        if (a->bv) for (int i = 0; i < kvd; i++) v[i] += a->bv[i];
        if (a->qn) qs_llm_qk_norm(q, k, a->qn, a->kn, 1, a->n_head, a->n_kv_head, a->hd, a->eps);
        const float *cs = a->rcos + (size_t)p * half, *sn = a->rsin + (size_t)p * half;
        rope_row(q, a->n_head, a->hd, cs, sn, a->neox);
        rope_row(k, a->n_kv_head, a->hd, cs, sn, a->neox);
        float *kdst = a->kc + ((size_t)b * a->max_pos + p) * kvd, *vdst = a->vc + ((size_t)b * a->max_pos + p) * kvd;
        if (a->kvf) {
            if (qs_llm_fakeq_row(a->kvf, a->scaled, k, kvd, kdst, e) || qs_llm_fakeq_row(a->kvf, a->scaled, v, kvd, vdst, e))
                return -1;
        } else {
            memcpy(kdst, k, (size_t)kvd * sizeof(float));
            memcpy(vdst, v, (size_t)kvd * sizeof(float));
        }
        if (a->vp) pack_v(a, b, p, vdst);
    }
    if (a->kp) pack_k(a, r0, r1);
    return 0;
}

static void rope_task(void *ctx, size_t t, int slot)
{
    (void)slot;
    rope_job *j = ctx;
    const int r0 = (int)t * ROPE_ROWS, r1 = r0 + ROPE_ROWS < j->a->R ? r0 + ROPE_ROWS : j->a->R;
    qs_err e = {{0}};
    if (rope_rows(j->a, r0, r1, &e) && atomic_exchange(&j->fail, 1) == 0) j->err = e;
}

int qs_prefill_rope_kv(const qs_prefill_rope *a, qs_err *e)
{
    rope_job j = {a, 0, {{0}}};
    atomic_init(&j.fail, 0);
    qs_pool_for(width(a->R), (size_t)(a->R + ROPE_ROWS - 1) / ROPE_ROWS, rope_task, &j);
    if (atomic_load(&j.fail)) { *e = j.err; return -1; }
    return 0;
}
