/* GRPO on a transformer (grpo_llm.h). */
#include "grpo_llm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm_rollout.h"
#include "../kernels/llm_adamw.h"
#include "../kernels/llm_decode.h"
#include "../kernels/llm_train.h"
#include "../kernels/qs_clock.h"
#include "../store/llm_lopt.h"

void qs_grpo_llm_cfg_default(qs_grpo_llm_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->task = QS_RL_TASK_ARITH;
    c->B = 32;
    c->G = 8;
    c->max_new = 8;
    c->steps = 600;
    c->temp = 1;
    c->lr = 2e-4;
    c->clip = 1;
    c->roll.scaled = 1;
    c->method = QS_CORR_NONE;
    qs_ais_opts_default(&c->ais);
}

/* One step's samples: n = B*G sequences of plen[i] prompt tokens then len[i] generated ones (the last
** one the end-of-line token when it came), their rollout log-probs and entropies. */
typedef struct samples {
    int n, L;                  /* sequences; tokens per sequence at most (prompt + max_new) */
    int32_t *tok;              /* [n][L] */
    int *plen, *len;
    double *lp, *ent;          /* [n][max_new] */
    char (*answer)[QS_RL_TASK_ANSWER_MAX];   /* [B] */
    char (*prompt)[QS_RL_TASK_PROMPT_MAX];   /* [B] */
    uint64_t *uf;              /* [QS_LLM_UF_LEN(n_layer)] the rollout's underflow counters */
} samples;

static int byte_level(const qs_grpo_llm_cfg *c) { return !c->vocab || c->vocab->n <= 0; }

/* The prompt's token ids: bytes, or the vocabulary's tokens. */
static int tokenize(const qs_grpo_llm_cfg *c, const char *text, prompt_t *p, qs_err *e)
{
    size_t n = strlen(text);
    if (byte_level(c)) {
        for (size_t i = 0; i < n; i++) p->ids[i] = (unsigned char)text[i];
        p->n = (int)n;
        return 0;
    }
    int32_t *ids = NULL;   /* through LoPT like every text path (a prompt is one chunk: sequential) */
    size_t k = 0;
    if (qs_lopt_tokenize(c->vocab, NULL, text, n, NULL, &ids, NULL, &k, NULL, e)) return -1;
    if (k > MAX_PROMPT) { free(ids); return qs_fail(e, "text gives more than %d tokens", MAX_PROMPT); }
    memcpy(p->ids, ids, k * sizeof *ids);
    free(ids);
    p->n = (int)k;
    return 0;
}

/* The end-of-answer token: the newline byte, or the vocabulary's single token for "\n" (else its EOS). */
static int eol_token(const qs_grpo_llm_cfg *c)
{
    if (byte_level(c)) return '\n';
    int32_t ids[4];
    qs_err e = {{0}};
    int k = qs_llm_tokenize(c->vocab, "\n", 1, ids, 4, &e);
    return k == 1 ? ids[0] : c->vocab->eos;
}

/* The completion's text (detokenized), for the reward. */
static size_t detok(const qs_grpo_llm_cfg *c, const int32_t *t, int n, char *out, size_t cap)
{
    size_t o = 0;
    for (int i = 0; i < n && o + 1 < cap; i++) {
        if (byte_level(c)) out[o++] = (char)t[i];
        else o += qs_llm_detok(c->vocab, t[i], out + o, cap - o);
    }
    return o;
}

/* Sampling: the only place that calls the decoder.  All B*G sequences of step st decode together;
** prompt b is problem st*B + b of the seed, its G samples draw from stream st*B + b (the counters of
** llm_rollout one prompt at a time, so the tokens are those of the unbatched sampler). */
static int grpo_sample(const qs_llm_model *roll, const qs_llm_numerics *nx, const qs_grpo_llm_cfg *c, int st,
                       samples *S, qs_err *e)
{
    const int N = c->max_new, eol = eol_token(c);
    sampler sp = {c->temp, 1, 0, 0};
    prompt_t *p = calloc((size_t)c->B, sizeof *p);
    if (!p) return qs_fail(e, "out of memory for %d prompts", c->B);
    for (int b = 0; b < c->B; b++) {
        qs_rl_task_prompt(c->task, c->seed, (uint64_t)st * c->B + b, S->prompt[b], S->answer[b]);
        if (tokenize(c, S->prompt[b], &p[b], e)) { free(p); return -1; }
        if (p[b].n + N > S->L || p[b].n + N > roll->c.ctx) {
            qs_fail(e, "a prompt of %d tokens + --max-new %d exceed the model's context of %d tokens", p[b].n, N,
                    roll->c.ctx);
            free(p);
            return -1;
        }
    }
    rollout_batch rb;
    int rc = llm_rollout_batch_at(roll, nx, p, c->B, c->G, N, eol, c->seed, (uint64_t)st * c->B,
                                  c->temp == 1 ? NULL : &sp, &rb, e);
    if (!rc) {
        for (int i = 0; i < S->n; i++) {
            int32_t *dst = S->tok + (size_t)i * S->L;
            const prompt_t *pi = &p[i / c->G];
            memcpy(dst, pi->ids, (size_t)pi->n * sizeof(int32_t));
            memcpy(dst + pi->n, rb.tok + (size_t)i * N, (size_t)N * sizeof(int32_t));
            S->plen[i] = pi->n;
            S->len[i] = rb.len[i];
            memcpy(S->lp + (size_t)i * N, rb.lp + (size_t)i * N, (size_t)N * sizeof(double));
            memcpy(S->ent + (size_t)i * N, rb.ent + (size_t)i * N, (size_t)N * sizeof(double));
        }
        memcpy(S->uf, rb.uf, QS_LLM_UF_LEN(roll->c.n_layer) * sizeof(uint64_t));
    }
    llm_rollout_batch_free(&rb);
    free(p);
    return rc;
}

/* Everything a run allocates once. */
typedef struct work {
    samples S;
    qs_llm_model roll, init;           /* rounded rollout weights (has_w), the initial policy */
    int has_roll, has_init;
    qs_llm_train_state *ts, *ts0;      /* trainer (its recipe), initial policy (FP32) */
    qs_llm_grads g;
    int has_g;
    qs_adamw opt;
    int has_opt;
    int32_t *btok;                     /* [n][Tcap+1] training windows */
    double *lp, *lp0, *coef;           /* [n*Tcap] per position */
    /* per response token (at most n*max_new) */
    int64_t *seq, *grp;
    double *lpr, *lpt, *adv, *rew, *ent, *w;
    qs_rl_row *rows;
    double *r, *aseq;                  /* [n] rewards, advantages */
} work;

static void work_free(work *W)
{
    free(W->S.tok); free(W->S.plen); free(W->S.len); free(W->S.lp); free(W->S.ent); free(W->S.answer); free(W->S.prompt); free(W->S.uf);
    if (W->has_roll) qs_llm_free(&W->roll);
    if (W->has_init) qs_llm_free(&W->init);
    qs_llm_train_state_free(W->ts);
    qs_llm_train_state_free(W->ts0);
    if (W->has_g) qs_llm_grads_free(&W->g);
    if (W->has_opt) qs_adamw_free(&W->opt);
    free(W->btok); free(W->lp); free(W->lp0); free(W->coef);
    free(W->seq); free(W->grp); free(W->lpr); free(W->lpt); free(W->adv); free(W->rew); free(W->ent); free(W->w);
    free(W->rows); free(W->r); free(W->aseq);
}

static int work_new(work *W, const qs_llm_model *m, const qs_llm_model *init, const qs_grpo_llm_cfg *c, qs_err *e)
{
    memset(W, 0, sizeof *W);
    const int n = c->B * c->G, N = c->max_new, L = QS_RL_TASK_PROMPT_MAX + N, Tcap = L - 1;
    const size_t ntok = (size_t)n * N;
    W->S.n = n;
    W->S.L = L;
    W->S.tok = malloc((size_t)n * L * sizeof(int32_t));
    W->S.plen = malloc((size_t)n * sizeof(int));
    W->S.len = malloc((size_t)n * sizeof(int));
    W->S.lp = malloc(ntok * sizeof(double));
    W->S.ent = malloc(ntok * sizeof(double));
    W->S.answer = malloc((size_t)c->B * sizeof *W->S.answer);
    W->S.prompt = malloc((size_t)c->B * sizeof *W->S.prompt);
    W->S.uf = calloc(QS_LLM_UF_LEN(m->c.n_layer), sizeof(uint64_t));
    W->btok = malloc((size_t)n * (Tcap + 1) * sizeof(int32_t));
    W->lp = malloc((size_t)n * Tcap * sizeof(double));
    W->lp0 = malloc((size_t)n * Tcap * sizeof(double));
    W->coef = malloc((size_t)n * Tcap * sizeof(double));
    W->seq = malloc(ntok * sizeof(int64_t));
    W->grp = malloc(ntok * sizeof(int64_t));
    W->lpr = malloc(ntok * sizeof(double)); W->lpt = malloc(ntok * sizeof(double));
    W->adv = malloc(ntok * sizeof(double)); W->rew = malloc(ntok * sizeof(double));
    W->ent = malloc(ntok * sizeof(double)); W->w = malloc(ntok * sizeof(double));
    W->rows = malloc(ntok * sizeof(qs_rl_row));
    W->r = malloc((size_t)n * sizeof(double));
    W->aseq = malloc((size_t)n * sizeof(double));
    if (!W->S.tok || !W->S.plen || !W->S.len || !W->S.lp || !W->S.ent || !W->S.answer || !W->S.prompt || !W->S.uf ||
        !W->btok || !W->lp ||
        !W->lp0 || !W->coef || !W->seq || !W->grp || !W->lpr || !W->lpt || !W->adv || !W->rew || !W->ent || !W->w ||
        !W->rows || !W->r || !W->aseq)
        return qs_fail(e, "out of memory");
    if (qs_llm_clone(&W->init, init ? init : m, e)) return -1;
    W->has_init = 1;
    if (c->roll.has_w) {
        if (qs_llm_clone(&W->roll, m, e)) return -1;
        W->has_roll = 1;
    }
    if (!(W->ts = qs_llm_train_state_new(&m->c, n, Tcap, e)) || !(W->ts0 = qs_llm_train_state_new(&m->c, n, Tcap, e)))
        return -1;
    if (c->trainer && qs_llm_train_state_set_recipe(W->ts, c->trainer, e)) return -1;
    if (qs_llm_grads_new(&W->g, m, e)) return -1;
    W->has_g = 1;
    if (qs_adamw_new(&W->opt, m, e)) return -1;
    W->has_opt = 1;
    return 0;
}

/* GRPO advantages per sequence (grpo_sim.c's rule); returns the mean reward, *sd their std. */
static double advantages(const qs_grpo_llm_cfg *c, const double *r, double *a, double *sd)
{
    double tot = 0, tot2 = 0;
    for (int b = 0; b < c->B; b++) {
        double m = 0, ss = 0;
        for (int g = 0; g < c->G; g++) m += r[b * c->G + g];
        m /= c->G;
        for (int g = 0; g < c->G; g++) ss += (r[b * c->G + g] - m) * (r[b * c->G + g] - m);
        double s = sqrt(ss / (c->G - 1));
        for (int g = 0; g < c->G; g++) {
            int i = b * c->G + g;
            a[i] = (r[i] - m) / (s + c->ais.grpo_eps);
            tot += r[i];
            tot2 += r[i] * r[i];
        }
    }
    double n = (double)c->B * c->G, mean = tot / n;
    *sd = sqrt(fmax(0, tot2 / n - mean * mean));
    return mean;
}

/* The teacher-forced windows: sequence i's prompt and generated tokens, padded with its last token;
** returns T (positions per window). */
static int windows(const samples *S, int32_t *btok)
{
    int T = 1;
    for (int i = 0; i < S->n; i++) if (S->plen[i] + S->len[i] - 1 > T) T = S->plen[i] + S->len[i] - 1;
    for (int i = 0; i < S->n; i++) {
        int k = S->plen[i] + S->len[i];
        const int32_t *src = S->tok + (size_t)i * S->L;
        for (int t = 0; t <= T; t++) btok[(size_t)i * (T + 1) + t] = src[t < k ? t : k - 1];
    }
    return T;
}

/* The step's response tokens (flat, sequence by sequence) with their log-probs, advantages and the
** KL sum to the initial policy; returns how many. */
static size_t gather(work *W, const qs_grpo_llm_cfg *c, int st, int T, double *klsum, qs_err *e)
{
    const samples *S = &W->S;
    const int N = c->max_new;
    size_t k = 0;
    *klsum = 0;
    for (int i = 0; i < S->n; i++)
        for (int t = 0; t < S->len[i]; t++, k++) {
            size_t r = (size_t)i * T + S->plen[i] - 1 + t;
            W->seq[k] = i;
            W->grp[k] = (int64_t)st * c->B + i / c->G;
            W->lpr[k] = S->lp[(size_t)i * N + t];
            W->lpt[k] = W->lp[r];
            W->adv[k] = W->aseq[i];
            W->rew[k] = W->r[i];
            W->ent[k] = S->ent[(size_t)i * N + t];
            if (!isfinite(W->lpr[k]) || !isfinite(W->lpt[k]) || !isfinite(W->lp0[r])) {
                qs_fail(e, "step %d, sequence %d, token %d: non-finite log-probability (%s)", st, i, t,
                        !isfinite(W->lpr[k]) ? "the rollout" : "the trainer");
                return 0;
            }
            double d0 = W->lp0[r] - W->lpt[k];
            *klsum += exp(d0) - d0 - 1;
        }
    return k;
}

/* One GRPO step: sample, score, weigh, update; rec and W->rows (*nrows) describe it. */
static int grpo_step(work *W, qs_llm_model *m, const qs_grpo_llm_cfg *c, int st, double *lam, qs_grpo_llm_step *rec,
                     size_t *nrows, qs_err *e)
{
    samples *S = &W->S;
    const int n = S->n;
    memset(rec, 0, sizeof *rec);
    rec->step = st;
    double t0 = qs_now_s();
    const qs_llm_model *roll = m;
    if (c->roll.has_w) {   /* the rollout engine's copy of the current weights, rounded */
        memcpy(W->roll.arena, m->arena, m->arena_len * sizeof(float));
        if (m->bias_len) memcpy(W->roll.bias_arena, m->bias_arena, m->bias_len * sizeof(float));
        if (qs_llm_quantize_weights(&W->roll, &c->roll.w, c->roll.scaled, e)) return -1;
        roll = &W->roll;
    }
    qs_llm_numerics nx = {c->roll.has_a ? &c->roll.a : NULL, c->roll.resq, c->roll.has_kv ? &c->roll.kv : NULL,
                          c->roll.scaled, NULL, NULL};
    if (grpo_sample(roll, &nx, c, st, S, e)) return -1;
    rec->sample_s = qs_now_s() - t0;
    rec->uf = S->uf;
    rec->uf_layers = m->c.n_layer;
    double t1 = qs_now_s(), lsum = 0;
    for (int i = 0; i < n; i++) {
        char txt[256];
        size_t k = detok(c, S->tok + (size_t)i * S->L + S->plen[i], S->len[i], txt, sizeof txt);
        W->r[i] = qs_rl_task_reward(S->answer[i / c->G], txt, k);
        lsum += S->len[i];
    }
    rec->reward = advantages(c, W->r, W->aseq, &rec->reward_std);
    rec->resp_len = lsum / n;
    /* the trainer's and the initial policy's log-probs of every position (forward only) */
    int T = windows(S, W->btok);
    uint64_t calls = qs_llm_train_state_calls(W->ts);
    double unused, klsum;
    if (qs_llm_loss_grad_w(m, W->ts, W->btok, n, T, NULL, W->lp, &unused, NULL, e) ||
        qs_llm_loss_grad_w(&W->init, W->ts0, W->btok, n, T, NULL, W->lp0, &unused, NULL, e))
        return -1;
    size_t nt = gather(W, c, st, T, &klsum, e);
    if (!nt) return -1;
    qs_ais_batch bt = {st, nt, W->seq, W->lpr, W->lpt, NULL, W->adv, W->rew, W->ent, W->grp};
    qs_ais_row diag;
    if (qs_ais_step(&c->ais, &bt, &diag, e)) return -1;
    *lam = qs_ais_lambda_next(&c->ais, *lam, diag.v[QS_AIS_F_ais_lambda_raw], st == 0);
    if (qs_ais_token_weights(&c->ais, c->method, &bt, *lam, W->w, e)) return -1;
    /* loss coefficients per position: -(A w - kl (1 - e^(lp0 - lp))) / N is d loss / d log p */
    memset(W->coef, 0, (size_t)n * T * sizeof *W->coef);
    double wsum = 0, wzero = 0, esum = 0;
    for (size_t k = 0, i = 0; i < (size_t)n; i++)
        for (int t = 0; t < S->len[i]; t++, k++) {
            size_t r = i * T + S->plen[i] - 1 + t;
            W->coef[r] = (W->adv[k] * W->w[k] - c->kl_coef * (1 - exp(W->lp0[r] - W->lpt[k]))) / (double)nt;
            wsum += W->w[k];
            wzero += W->w[k] == 0;
            esum += W->ent[k];
            W->rows[k] = (qs_rl_row){st, (int64_t)i, t, S->tok[i * S->L + S->plen[i] + t], W->grp[k], W->lpr[k],
                                     W->lpt[k], W->adv[k], W->rew[k], W->ent[k], 1};
        }
    /* the update: the same forward again (the recipe's counter rewound), now with the gradient */
    qs_llm_train_state_set_calls(W->ts, calls);
    qs_llm_grads_zero(&W->g);
    if (qs_llm_loss_grad_w(m, W->ts, W->btok, n, T, W->coef, NULL, &rec->loss, &W->g, e)) return -1;
    rec->loss += c->kl_coef * klsum / (double)nt;
    rec->grad_norm = qs_llm_grads_norm(&W->g);
    if (!isfinite(rec->loss) || !isfinite(rec->grad_norm))
        return qs_fail(e, "step %d: non-finite loss or gradient (loss %g, gradient norm %g)", st, rec->loss, rec->grad_norm);
    double gscale = c->clip > 0 && rec->grad_norm > c->clip ? c->clip / rec->grad_norm : 1;
    qs_adamw_opts ao = {0.9, 0.999, 1e-8, 0};
    if (qs_adamw_step(&W->opt, m, &W->g, gscale, c->lr, &ao, e)) return -1;
    rec->entropy = esum / (double)nt;
    rec->kl_init = klsum / (double)nt;
    rec->mismatch_k3 = diag.v[QS_AIS_F_kl_k3];
    rec->weight_mean = wsum / (double)nt;
    rec->weight_zero = wzero / (double)nt;
    rec->lambda = *lam;
    rec->train_s = qs_now_s() - t1;
    *nrows = nt;
    return 0;
}

int qs_grpo_llm_check(const qs_llm_model *m, const qs_grpo_llm_cfg *c, qs_err *e)
{
    if (c->B < 1 || c->G < 2 || c->max_new < 1 || c->steps < 0)
        return qs_fail(e, "GRPO needs prompts >= 1, a group of >= 2 samples and max_new >= 1");
    for (int b = 0; b < c->B; b++) {   /* the first step's prompts (the task's prompts differ by a few bytes) */
        char text[QS_RL_TASK_PROMPT_MAX], ans[QS_RL_TASK_ANSWER_MAX];
        prompt_t p;
        qs_rl_task_prompt(c->task, c->seed, (uint64_t)b, text, ans);
        if (tokenize(c, text, &p, e)) return -1;
        if (p.n + c->max_new + 2 > m->c.ctx)
            return qs_fail(e, "a prompt of %d tokens + --max-new %d (+2 for longer prompts) exceed the model's context of "
                              "%d tokens", p.n, c->max_new, m->c.ctx);
    }
    return 0;
}

int qs_grpo_llm_run(qs_llm_model *m, const qs_grpo_llm_cfg *c, qs_grpo_llm_cb cb, void *ctx,
                    const volatile sig_atomic_t *stop, int *steps_done, qs_err *e)
{
    return qs_grpo_llm_run_from(m, NULL, c, NULL, cb, NULL, ctx, stop, steps_done, e);
}

/* Put the run where `from` left it: moments, AdamW's step count, the call counters. */
static int restore(work *W, const qs_grpo_llm_state *from, qs_err *e)
{
    const qs_adamw *o = from->opt;
    if (o) {
        if (o->arena_len != W->opt.arena_len || o->bias_len != W->opt.bias_len)
            return qs_fail(e, "the optimizer state does not have the model's shape");
        memcpy(W->opt.m, o->m, (o->arena_len + o->bias_len) * sizeof(float));
        memcpy(W->opt.v, o->v, (o->arena_len + o->bias_len) * sizeof(float));
        W->opt.t = o->t;
    }
    qs_llm_train_state_set_calls(W->ts, from->calls);
    qs_llm_train_state_set_calls(W->ts0, from->calls0);
    return 0;
}

int qs_grpo_llm_run_from(qs_llm_model *m, const qs_llm_model *init, const qs_grpo_llm_cfg *c,
                         const qs_grpo_llm_state *from, qs_grpo_llm_cb cb, qs_grpo_llm_ckpt_cb ckpt, void *ctx,
                         const volatile sig_atomic_t *stop, int *steps_done, qs_err *e)
{
    *steps_done = 0;
    if (qs_grpo_llm_check(m, c, e)) return -1;
    work W;
    int rc = work_new(&W, m, init, c, e);
    if (!rc && from) rc = restore(&W, from, e);
    double lam = from ? from->lambda : 0;
    qs_grpo_llm_state s = {0, lam, 0, 0, &W.opt, 0};
    for (int st = from ? from->step : 0; !rc && st < c->steps && !(stop && *stop); st++) {
        qs_grpo_llm_step rec;
        size_t nrows = 0;
        rc = grpo_step(&W, m, c, st, &lam, &rec, &nrows, e);
        if (!rc && cb) rc = cb(ctx, &rec, W.rows, nrows, (const char(*)[QS_RL_TASK_PROMPT_MAX])W.S.prompt, e);
        if (!rc) (*steps_done)++;
        s = (qs_grpo_llm_state){st + 1, lam, qs_llm_train_state_calls(W.ts), qs_llm_train_state_calls(W.ts0), &W.opt, 0};
        if (!rc && ckpt) rc = ckpt(ctx, m, &s, e);
    }
    if (!rc && ckpt && *steps_done) {   /* after the loop: a stop that came after the last call is seen */
        s.final = 1;
        rc = ckpt(ctx, m, &s, e);
    }
    work_free(&W);
    return rc;
}
