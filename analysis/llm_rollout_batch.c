/* Batched rollouts: every sequence of a GRPO step decoding together (llm_rollout.h). */
#include <stdlib.h>
#include <string.h>

#include "llm_rollout.h"
#include "../kernels/llm_decode.h"
#include "../kernels/llm_rows.h"
#include "../kernels/pool.h"
#include "../kernels/qs_clock.h"
#include "../kernels/sr.h"

/* prefill at most this many prompt rows per call (or one whole prompt, or the batch, if larger) */
#define PREFILL_ROWS 512

static double draw(uint64_t seed, uint64_t stream0, int i, int group, int t)
{
    return qs_sr_uniform(seed, ((stream0 + (uint64_t)(i / group)) * 256 + (uint64_t)(i % group)) * 65536 + (uint64_t)t);
}

static int check_args(const prompt_t *prompts, int nprompt, int group, int max_new, int *maxp, qs_err *e)
{
    if (nprompt < 1 || group < 1 || group > 256 || max_new < 1 || max_new > 65536 || (int64_t)nprompt * group > 65536)
        return qs_fail(e, "rollout: %d prompts x %d samples x %d tokens (1..256 samples, 1..65536 tokens, "
                          "at most 65536 sequences)", nprompt, group, max_new);
    *maxp = 0;
    for (int p = 0; p < nprompt; p++) {
        if (prompts[p].n < 1 || prompts[p].n > MAX_PROMPT)
            return qs_fail(e, "rollout: prompt %d has %d tokens (1..%d)", p, prompts[p].n, MAX_PROMPT);
        if (prompts[p].n > *maxp) *maxp = prompts[p].n;
    }
    return 0;
}

typedef struct work {
    qs_llm_dec *dec;
    float *hid, *hl, *lg;
    int32_t *tok;
    int *slot, *pos, *idx;
    char *cand;              /* sampler scratch per pool slot (llm_sample_scratch) */
    int threads;
} work;

static void work_free(work *w)
{
    qs_llm_dec_free(w->dec);
    free(w->hid); free(w->hl); free(w->lg); free(w->tok); free(w->slot); free(w->pos); free(w->idx); free(w->cand);
}

/* Sample token t of sequence i from a row of logits; end the sequence at EOS. */
static void take(rollout_batch *rb, const float *lg, int V, int i, int t, int eos, uint64_t seed, const sampler *sp, void *cand)
{
    size_t at = (size_t)i * rb->max_new + t;
    int k = llm_sample_token(lg, V, draw(seed, rb->stream0, i, rb->group, t), sp, cand, &rb->lp[at], &rb->ent[at]);
    rb->tok[at] = k;
    if (k == eos) rb->len[i] = t + 1;
}

/* Sampling on the pool: row r of the logits -> token t of sequence idx[r] (rows are independent). */
typedef struct take_job {
    rollout_batch *rb;
    const work *w;
    const sampler *sp;
    int V, t, eos;
    uint64_t seed;
} take_job;

static void take_task(void *ctx, size_t r, int slot)
{
    const take_job *j = ctx;
    void *cand = j->w->cand + (size_t)slot * llm_sample_scratch(j->V);
    take(j->rb, j->w->lg + r * (size_t)j->V, j->V, j->w->idx[r], j->t, j->eos, j->seed, j->sp, cand);
}

/* Prompts [p0, p1) in one call (prompt p in slot p*G), then their first tokens, KV copied to the G slots. */
static int prefill(const qs_llm_model *m, const qs_llm_numerics *nx, const prompt_t *pr, int p0, int p1, int eos,
                   uint64_t seed, const sampler *sp, work *w, rollout_batch *rb, qs_err *e)
{
    const int G = rb->group, d = m->c.dim, V = m->c.vocab;
    int R = 0;
    for (int p = p0; p < p1; p++)
        for (int t = 0; t < pr[p].n; t++, R++) { w->tok[R] = pr[p].ids[t]; w->slot[R] = p * G; w->pos[R] = t; }
    if (qs_llm_dec_step(m, nx, w->dec, w->tok, w->slot, w->pos, R, w->hid, rb->uf, e)) return -1;
    rb->rows += R;
    for (int p = p0, r = 0; p < p1; p++) {
        r += pr[p].n;
        memcpy(w->hl + (size_t)(p - p0) * d, w->hid + (size_t)(r - 1) * d, (size_t)d * sizeof(float));
    }
    if (qs_llm_dec_logits(m, nx, w->dec, w->hl, p1 - p0, w->lg, rb->uf, e)) return -1;
    for (int p = p0; p < p1; p++)
        for (int g = 0; g < G; g++) {
            if (g) qs_llm_dec_copy(w->dec, p * G + g, p * G, pr[p].n);
            take(rb, w->lg + (size_t)(p - p0) * V, V, p * G + g, 0, eos, seed, sp, w->cand);
        }
    return 0;
}

/* Decoding: step t forwards token t-1 of every running sequence (each at its own position). */
static int decode(const qs_llm_model *m, const qs_llm_numerics *nx, int eos, uint64_t seed, const sampler *sp, work *w,
                  rollout_batch *rb, qs_err *e)
{
    const int V = m->c.vocab;
    for (int t = 1; t < rb->max_new; t++) {
        int R = 0;
        for (int i = 0; i < rb->nseq; i++)
            if (rb->len[i] < 0) {
                w->tok[R] = rb->tok[(size_t)i * rb->max_new + t - 1];
                w->slot[R] = i;
                w->pos[R] = rb->plen[i] + t - 1;
                w->idx[R++] = i;
            }
        if (!R) break;
        take_job tj = {rb, w, sp, V, t, eos, seed};   /* sampling in the logits' pool call */
        if (qs_llm_dec_step(m, nx, w->dec, w->tok, w->slot, w->pos, R, w->hid, rb->uf, e) ||
            qs_llm_dec_logits_each(m, nx, w->dec, w->hid, R, w->lg, rb->uf, take_task, &tj, e))
            return -1;
        rb->rows += R;
    }
    return 0;
}

int llm_rollout_batch(const qs_llm_model *m, const qs_llm_numerics *nx, const prompt_t *prompts, int nprompt, int group,
                      int max_new, int eos, uint64_t seed, const sampler *sp, rollout_batch *rb, qs_err *e)
{
    return llm_rollout_batch_at(m, nx, prompts, nprompt, group, max_new, eos, seed, 0, sp, rb, e);
}

int llm_rollout_batch_at(const qs_llm_model *m, const qs_llm_numerics *nx, const prompt_t *prompts, int nprompt,
                         int group, int max_new, int eos, uint64_t seed, uint64_t stream0, const sampler *sp,
                         rollout_batch *rb, qs_err *e)
{
    memset(rb, 0, sizeof *rb);
    rb->stream0 = stream0;
    int maxp = 0;
    if (check_args(prompts, nprompt, group, max_new, &maxp, e)) return -1;
    const int S = nprompt * group, d = m->c.dim, V = m->c.vocab;
    const int cap = S > PREFILL_ROWS ? S : maxp > PREFILL_ROWS ? maxp : PREFILL_ROWS;
    rb->nseq = S; rb->group = group; rb->max_new = max_new; rb->n_layer = m->c.n_layer;
    rb->tok = calloc((size_t)S * max_new, sizeof(int32_t));
    rb->lp = calloc((size_t)S * max_new, sizeof(double));
    rb->ent = calloc((size_t)S * max_new, sizeof(double));
    rb->len = malloc((size_t)S * sizeof(int));
    rb->plen = malloc((size_t)S * sizeof(int));
    rb->uf = calloc(QS_LLM_UF_LEN(m->c.n_layer), sizeof(uint64_t));
    work w = {0};
    w.hid = malloc((size_t)cap * d * sizeof(float));
    w.hl = malloc((size_t)S * d * sizeof(float));
    w.lg = malloc((size_t)S * V * sizeof(float));
    w.tok = malloc((size_t)cap * sizeof(int32_t));
    w.slot = malloc((size_t)cap * sizeof(int));
    w.pos = malloc((size_t)cap * sizeof(int));
    w.idx = malloc((size_t)S * sizeof(int));
    w.threads = qs_llm_threads();
    w.cand = malloc((size_t)w.threads * llm_sample_scratch(V));   /* the sampler's exps or candidates */
    int rc = -1;
    if (!rb->tok || !rb->lp || !rb->ent || !rb->len || !rb->plen || !rb->uf || !w.hid || !w.hl || !w.lg || !w.tok ||
        !w.slot || !w.pos || !w.idx || !w.cand) {
        qs_fail(e, "out of memory for %d sequences x %d tokens", S, max_new);
        goto out;
    }
    if (!(w.dec = qs_llm_dec_new(&m->c, S, maxp + max_new, cap, e))) goto out;
    for (int i = 0; i < S; i++) { rb->len[i] = -1; rb->plen[i] = prompts[i / group].n; }
    double t0 = qs_now_s();
    for (int p0 = 0, p1; p0 < nprompt; p0 = p1) {
        int rows = prompts[p0].n;
        for (p1 = p0 + 1; p1 < nprompt && rows + prompts[p1].n <= cap; p1++) rows += prompts[p1].n;
        if (prefill(m, nx, prompts, p0, p1, eos, seed, sp, &w, rb, e)) goto out;
    }
    if (decode(m, nx, eos, seed, sp, &w, rb, e)) goto out;
    for (int i = 0; i < S; i++) {
        if (rb->len[i] < 0) rb->len[i] = max_new;
        rb->tokens += rb->len[i];
    }
    rb->secs = qs_now_s() - t0;
    rc = 0;
out:
    work_free(&w);
    if (rc) llm_rollout_batch_free(rb);
    return rc;
}

void llm_rollout_batch_free(rollout_batch *rb)
{
    free(rb->tok); free(rb->lp); free(rb->ent); free(rb->len); free(rb->plen); free(rb->uf);
    memset(rb, 0, sizeof *rb);
}

double llm_rollout_underflow(const rollout_batch *rb, int layer, int site)
{
    if (!rb->uf || layer < 0 || layer > rb->n_layer || site < 0 || site >= QS_LLM_NLSITE) return -1;
    const uint64_t *c = rb->uf + QS_LLM_UF(layer, site);
    return c[0] ? (double)c[1] / (double)c[0] : -1;
}
