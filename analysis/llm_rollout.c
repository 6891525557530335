/* Sampling and teacher-forced re-scoring for `qscope llm score` (llm_rollout.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm_rollout.h"
#include "../kernels/qs_clock.h"
#include "../kernels/sr.h"

/* ex: room for vocab doubles keeping the exps of the first pass for the draw (the same values), or
** NULL (computed again). */
static int sample(const float *logits, int vocab, double u, double *ex, double *lp, double *ent)
{
    double mx = -INFINITY;
    for (int i = 0; i < vocab; i++) if (logits[i] > mx) mx = logits[i];
    /* z and the entropy in one pass, the terms of qs_llm_logprob in its order (so the same bits) */
    double z = 0, ez = 0;
    for (int i = 0; i < vocab; i++) {
        double d = logits[i] - mx, p = exp(d);
        if (ex) ex[i] = p;
        z += p;
        ez += p * d;
    }
    double t = u * z, acc = 0;
    int pick = vocab - 1;
    for (int i = 0; i < vocab; i++) {
        acc += ex ? ex[i] : exp(logits[i] - mx);
        if (acc > t) { pick = i; break; }
    }
    double lz = log(z);
    *ent = lz - ez / z;
    *lp = (logits[pick] - mx) - lz;
    return pick;
}

/* generate's sampling filters: temperature (0 = greedy), then top-k, then top-p (nucleus) over the
** top-k survivors renormalised, as Hugging Face's generate orders them.  lp/ent stay those of the
** unfiltered temperature-1 distribution (the model's own probabilities). */

typedef struct { float z; int i; } cand;
static int cand_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    return x->z < y->z ? 1 : x->z > y->z ? -1 : (x->i > y->i) - (x->i < y->i);
}

static int sample_filtered(const float *logits, int vocab, double u, const sampler *sp, cand *c, double *lp, double *ent)
{
    int pick = 0;
    for (int i = 1; i < vocab; i++) if (logits[i] > logits[pick]) pick = i;
    if (!(sp->greedy || sp->temp == 0)) {
        for (int i = 0; i < vocab; i++) { c[i].z = (float)(logits[i] / sp->temp); c[i].i = i; }
        qsort(c, (size_t)vocab, sizeof *c, cand_desc);
        int n = sp->top_k > 0 && sp->top_k < vocab ? sp->top_k : vocab;
        double z = 0;
        for (int k = 0; k < n; k++) z += exp((double)c[k].z - c[0].z);
        if (sp->top_p < 1) {   /* smallest prefix whose probability reaches top_p */
            double acc = 0;
            int m = 0;
            while (m < n) { acc += exp((double)c[m].z - c[0].z) / z; m++; if (acc >= sp->top_p) break; }
            n = m;
            z = 0;
            for (int k = 0; k < n; k++) z += exp((double)c[k].z - c[0].z);
        }
        double t = u * z, acc = 0;
        pick = c[n - 1].i;
        for (int k = 0; k < n; k++) {
            acc += exp((double)c[k].z - c[0].z);
            if (acc > t) { pick = c[k].i; break; }
        }
    }
    *lp = qs_llm_logprob(logits, vocab, pick, ent);
    return pick;
}


size_t llm_sample_scratch(int vocab) { return (size_t)vocab * sizeof(cand); }

int llm_sample_token(const float *logits, int vocab, double u, const sampler *sp, void *scratch, double *lp, double *ent)
{
    return sp ? sample_filtered(logits, vocab, u, sp, scratch, lp, ent) : sample(logits, vocab, u, scratch, lp, ent);
}

/* Sample N tokens for B copies of one prompt with model m / numerics nx. */
int llm_rollout(const qs_llm_model *m, const qs_llm_numerics *nx, const prompt_t *p, int B, int N, int eos,
                      uint64_t seed, uint64_t stream, const sampler *sp, rollout *ro, double *secs, qs_err *e)
{
    const int V = m->c.vocab, d = m->c.dim, L = p->n + N;
    ro->B = B; ro->plen = p->n; ro->N = N;
    ro->tok = malloc((size_t)B * L * sizeof(int32_t));
    ro->lp = malloc((size_t)B * N * sizeof(double));
    ro->ent = malloc((size_t)B * N * sizeof(double));
    ro->len = calloc((size_t)B, sizeof(int));
    float *hid = malloc((size_t)B * p->n * d * sizeof(float)), *scr = malloc((size_t)B * d * sizeof(float));
    float *lg = malloc((size_t)B * V * sizeof(float));
    int32_t *in = malloc((size_t)B * (p->n > 1 ? p->n : 1) * sizeof(int32_t));
    cand *cs = sp ? malloc((size_t)V * sizeof *cs) : NULL;
    qs_llm_state *s = qs_llm_state_new(&m->c, B, L, B * p->n > B ? B * p->n : B, e);
    int rc = -1;
    if (!ro->tok || !ro->lp || !ro->ent || !ro->len || !hid || !scr || !lg || !in || (sp && !cs)) { qs_fail(e, "out of memory"); goto out; }
    if (!s) goto out;
    double t0 = qs_now_s();
    for (int b = 0; b < B; b++) {
        memcpy(in + (size_t)b * p->n, p->ids, (size_t)p->n * sizeof(int32_t));
        memcpy(ro->tok + (size_t)b * L, p->ids, (size_t)p->n * sizeof(int32_t));
        ro->len[b] = -1;   /* still running */
    }
    if (qs_llm_forward(m, nx, s, in, B, p->n, 0, hid, NULL, NULL, e)) goto out;
    for (int b = 0; b < B; b++) memcpy(scr + (size_t)b * d, hid + ((size_t)b * p->n + p->n - 1) * d, (size_t)d * sizeof(float));
    for (int t = 0; t < N; t++) {
        if (qs_llm_logits(m, nx, scr, B, hid, lg, e)) goto out;
        for (int b = 0; b < B; b++) {
            double u = qs_sr_uniform(seed, (stream * 256 + (uint64_t)b) * 65536 + (uint64_t)t);
            int k = sp ? sample_filtered(lg + (size_t)b * V, V, u, sp, cs, &ro->lp[(size_t)b * N + t], &ro->ent[(size_t)b * N + t])
                       : sample(lg + (size_t)b * V, V, u, NULL, &ro->lp[(size_t)b * N + t], &ro->ent[(size_t)b * N + t]);
            ro->tok[(size_t)b * L + p->n + t] = k;
            in[b] = k;
            if (ro->len[b] < 0 && k == eos) ro->len[b] = t + 1;
        }
        if (t + 1 == N) break;
        if (qs_llm_forward(m, nx, s, in, B, 1, p->n + t, scr, NULL, NULL, e)) goto out;
    }
    for (int b = 0; b < B; b++) if (ro->len[b] < 0) ro->len[b] = N;
    *secs = qs_now_s() - t0;
    rc = 0;
out:
    qs_llm_state_free(s);
    free(hid); free(scr); free(lg); free(in); free(cs);
    return rc;
}

void llm_rollout_free(rollout *ro)
{
    free(ro->tok); free(ro->lp); free(ro->ent); free(ro->len);
    memset(ro, 0, sizeof *ro);
}

/* Teacher-forced log-probs of the generated tokens under model m (numerics nx): lp[b*N + t]. */
int llm_score_tokens(const qs_llm_model *m, const qs_llm_numerics *nx, const rollout *ro, double *lp, double *ent,
                    double *secs, qs_err *e)
{
    const int V = m->c.vocab, d = m->c.dim, B = ro->B, L = ro->plen + ro->N;
    /* sequences in groups of about SCORE_ROWS positions, so memory stays bounded for long runs */
    enum { SCORE_ROWS = 2048 };
    const int G = L >= SCORE_ROWS ? 1 : (SCORE_ROWS / L < B ? SCORE_ROWS / L : B);
    float *hid = malloc((size_t)G * L * d * sizeof(float));
    float *scr = malloc((size_t)64 * d * sizeof(float)), *lg = malloc((size_t)64 * V * sizeof(float));
    qs_llm_state *s = qs_llm_state_new(&m->c, G, L, G * L, e);
    int rc = -1;
    if (!hid || !scr || !lg) { qs_fail(e, "out of memory"); goto out; }
    if (!s) goto out;
    double t0 = qs_now_s();
    for (int b0 = 0; b0 < B; b0 += G) {
        int g = B - b0 < G ? B - b0 : G;
        if (qs_llm_forward(m, nx, s, ro->tok + (size_t)b0 * L, g, L, 0, hid, NULL, NULL, e)) goto out;
        /* the hidden row at position plen-1+t predicts generated token t */
        for (int bb = 0; bb < g; bb++)
            for (int t0r = 0; t0r < ro->N; t0r += 64) {
                int n = ro->N - t0r < 64 ? ro->N - t0r : 64, b = b0 + bb;
                const float *h = hid + ((size_t)bb * L + ro->plen - 1 + t0r) * d;
                if (qs_llm_logits(m, nx, h, n, scr, lg, e)) goto out;
                for (int i = 0; i < n; i++) {
                    int t = t0r + i;
                    lp[(size_t)b * ro->N + t] = qs_llm_logprob(lg + (size_t)i * V, V, ro->tok[(size_t)b * L + ro->plen + t],
                                                               &ent[(size_t)b * ro->N + t]);
                }
            }
    }
    *secs = qs_now_s() - t0;
    rc = 0;
out:
    qs_llm_state_free(s);
    free(hid); free(scr); free(lg);
    return rc;
}
