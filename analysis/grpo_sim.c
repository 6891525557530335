/*
** CPU GRPO simulation with quantized rollouts (see grpo_sim.h and docs/rl.md).
*/
#include "grpo_sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void qs_grpo_cfg_default(qs_grpo_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->P = 16; c->T = 8; c->V = 32; c->D = 64;
    c->B = 32; c->G = 8;
    c->steps = 500; c->epochs = 1;
    c->lr = 0.007;
    c->clip_eps = 0.2;
    c->init_scale = 0.02;
    c->feat_scale = 1;
    c->rollout_temp = 1;
    c->fmt.axis = 1;
    c->wscale = QS_WSCALE_NONE;
    c->method = QS_CORR_NONE;
    qs_ais_opts_default(&c->ais);
}

/* ---- counter-based random numbers ---------------------------------------------------------- */

static inline uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* stream s, index i -> uniform in (0, 1) */
static double unif(uint64_t seed, uint64_t s, uint64_t i)
{
    uint64_t h = mix64(mix64(mix64(seed) ^ (s * 0xD1B54A32D192ED03ull)) ^ i);
    return ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double gauss(uint64_t seed, uint64_t s, uint64_t i)
{
    double u1 = unif(seed, s, 2 * i), u2 = unif(seed, s, 2 * i + 1);
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

enum { S_PHI = 1, S_PSI, S_TGT, S_W, S_WB, S_PROMPT, S_TOKEN };

/* ---- state --------------------------------------------------------------------------------- */

typedef struct sim {
    const qs_grpo_cfg *c;
    int P, T, V, D;
    double *phi;      /* [P][T][D] */
    double *psi;      /* [T][V+1][D] (prev = V is the start) */
    int *tgt;         /* [P][T] */
    float *W, *Wb;    /* [V][D] trainer weights (FP32) */
    float *Wq, *Wbq;  /* rollout weights */
    double *mW, *vW, *mWb, *vWb;   /* Adam moments */
    double *A, *Bt;   /* logit tables of one policy: [P][T][V], [T][V+1][V] */
    double *Aq, *Btq; /* rollout tables */
    double *gA, *gB;  /* gradients w.r.t. the tables */
    long adam_t;
} sim;

static void tables(const sim *s, const float *W, const float *Wb, double *A, double *Bt)
{
    int P = s->P, T = s->T, V = s->V, D = s->D;
    for (int x = 0; x < P; x++)
        for (int t = 0; t < T; t++) {
            const double *f = &s->phi[((size_t)x * T + t) * D];
            double *a = &A[((size_t)x * T + t) * V];
            for (int v = 0; v < V; v++) {
                double z = 0;
                for (int j = 0; j < D; j++) z += (double)W[(size_t)v * D + j] * f[j];
                a[v] = z;
            }
        }
    for (int t = 0; t < T; t++)
        for (int p = 0; p <= V; p++) {
            const double *f = &s->psi[((size_t)t * (V + 1) + p) * D];
            double *b = &Bt[((size_t)t * (V + 1) + p) * V];
            for (int v = 0; v < V; v++) {
                double z = 0;
                for (int j = 0; j < D; j++) z += (double)Wb[(size_t)v * D + j] * f[j];
                b[v] = z;
            }
        }
}

/* log-probabilities of the context (x, t, prev) at temperature temp: lp[V] */
static void logprobs(const sim *s, const double *A, const double *Bt, int x, int t, int prev, double temp, double *lp)
{
    int T = s->T, V = s->V;
    const double *a = &A[((size_t)x * T + t) * V], *b = &Bt[((size_t)t * (V + 1) + prev) * V];
    double mx = -INFINITY;
    for (int v = 0; v < V; v++) {
        lp[v] = (a[v] + b[v]) / temp;
        if (lp[v] > mx) mx = lp[v];
    }
    double se = 0;
    for (int v = 0; v < V; v++) se += exp(lp[v] - mx);
    double lse = mx + log(se);
    for (int v = 0; v < V; v++) lp[v] -= lse;
}

typedef struct memio { const float *in; float *out; } memio;
static int rd(void *ctx, uint64_t start, size_t n, float *out, qs_err *e)
{
    (void)e;
    memcpy(out, ((memio *)ctx)->in + start, n * sizeof *out);
    return 0;
}
static int wr(void *ctx, uint64_t start, size_t n, const float *y, qs_err *e)
{
    (void)e;
    memcpy(((memio *)ctx)->out + start, y, n * sizeof *y);
    return 0;
}

/* fake-quantize a V x D weight matrix for the rollout; *err2 += Σ (q - w)^2 */
static int quantize(const sim *s, const float *w, float *q, double *err2, qs_err *e)
{
    const qs_grpo_cfg *c = s->c;
    int V = s->V, D = s->D;
    size_t n = (size_t)V * D;
    float *tmp = malloc(n * sizeof *tmp);
    double *sc = malloc((size_t)V * sizeof *sc);
    if (!tmp || !sc) { free(tmp); free(sc); return qs_fail(e, "out of memory"); }
    double target = c->fmt.f->max_finite;
    for (int r = 0; r < V; r++) sc[r] = 1;
    if (c->wscale != QS_WSCALE_NONE) {
        double tam = 0;
        for (int r = 0; r < V; r++) {
            double am = 0;
            for (int j = 0; j < D; j++) am = fmax(am, fabs(w[(size_t)r * D + j]));
            sc[r] = am > 0 ? target / am : 1;
            tam = fmax(tam, am);
        }
        if (c->wscale == QS_WSCALE_TENSOR)
            for (int r = 0; r < V; r++) sc[r] = tam > 0 ? target / tam : 1;
    }
    for (int r = 0; r < V; r++)
        for (int j = 0; j < D; j++) tmp[(size_t)r * D + j] = (float)(w[(size_t)r * D + j] * sc[r]);
    memio io = {tmp, q};
    if (qs_format_apply(&c->fmt, (uint64_t)V, (uint64_t)D, rd, &io, wr, &io, e)) { free(tmp); free(sc); return -1; }
    for (int r = 0; r < V; r++)
        for (int j = 0; j < D; j++) {
            size_t k = (size_t)r * D + j;
            q[k] = (float)(q[k] / sc[r]);
            if (!isfinite(q[k])) q[k] = 0;    /* a format without the range: flush, as a real engine would saturate */
            double d = (double)q[k] - w[k];
            *err2 += d * d;
        }
    free(tmp);
    free(sc);
    return 0;
}

static double greedy(const sim *s, const double *A, const double *Bt, double temp, double *lp)
{
    double tot = 0;
    for (int x = 0; x < s->P; x++) {
        int prev = s->V, ok = 1, len = 0;
        for (int t = 0; t < s->T; t++) {
            logprobs(s, A, Bt, x, t, prev, temp, lp);
            int best = 0;
            for (int v = 1; v < s->V; v++) if (lp[v] > lp[best]) best = v;
            if (ok && best == s->tgt[x * s->T + t]) len++; else ok = 0;
            prev = best;
        }
        tot += (double)len / s->T;
    }
    return tot / s->P;
}

static void adam(sim *s, float *w, double *m, double *v, const double *g, size_t n)
{
    const qs_grpo_cfg *c = s->c;
    if (c->sgd) {
        for (size_t k = 0; k < n; k++) w[k] = (float)(w[k] - c->lr * g[k]);
        return;
    }
    double b1 = 0.9, b2 = 0.999, c1 = 1 - pow(b1, (double)s->adam_t), c2 = 1 - pow(b2, (double)s->adam_t);
    for (size_t k = 0; k < n; k++) {
        m[k] = b1 * m[k] + (1 - b1) * g[k];
        v[k] = b2 * v[k] + (1 - b2) * g[k] * g[k];
        w[k] = (float)(w[k] - c->lr * (m[k] / c1) / (sqrt(v[k] / c2) + 1e-8));
    }
}

static void sim_free(sim *s)
{
    free(s->phi); free(s->psi); free(s->tgt); free(s->W); free(s->Wb); free(s->Wq); free(s->Wbq);
    free(s->mW); free(s->vW); free(s->mWb); free(s->vWb); free(s->A); free(s->Bt); free(s->Aq); free(s->Btq);
    free(s->gA); free(s->gB);
}

/* GRPO advantages: (r - mean_g) / (std_g + eps), std with n - 1, per token (with its sequence's
** reward); returns the sum of the rewards. */
static double advantages(const qs_grpo_cfg *c, int T, const double *r, double *adv, double *rew)
{
    double rsum = 0;
    for (int b = 0; b < c->B; b++) {
        double m = 0, ss = 0;
        for (int g = 0; g < c->G; g++) m += r[(size_t)b * c->G + g];
        m /= c->G;
        for (int g = 0; g < c->G; g++) ss += (r[(size_t)b * c->G + g] - m) * (r[(size_t)b * c->G + g] - m);
        double sdv = sqrt(ss / (c->G - 1));
        for (int g = 0; g < c->G; g++) {
            size_t i = (size_t)b * c->G + g;
            double a = (r[i] - m) / (sdv + c->ais.grpo_eps);
            rsum += r[i];
            for (int t = 0; t < T; t++) { adv[i * T + t] = a; rew[i * T + t] = r[i]; }
        }
    }
    return rsum;
}

/* One PPO epoch's gradient of the clipped objective with respect to the logit tables (s->gA, s->gB,
** zeroed by the caller); *nclip counts the clipped tokens. */
static void ppo_grads(sim *s, size_t nseq, size_t ntok, const int *prm, const int *tok, const double *adv,
                      const double *wt, const double *lpt, double *lp, double *nclip)
{
    const qs_grpo_cfg *c = s->c;
    int T = s->T, V = s->V;
    for (size_t i = 0; i < nseq; i++) {
        int x = prm[i], prev = V;
        for (int t = 0; t < T; t++) {
            size_t k = i * T + t;
            int y = tok[k];
            double a = adv[k];
            if (wt[k] != 0 && a != 0) {
                logprobs(s, s->A, s->Bt, x, t, prev, 1, lp);
                double ratio = exp(lp[y] - lpt[k]);
                int clipped = (a > 0 && ratio > 1 + c->clip_eps) || (a < 0 && ratio < 1 - c->clip_eps);
                if (clipped) (*nclip)++;
                else {
                    double coef = -wt[k] * a * ratio / (double)ntok;
                    double *ga = &s->gA[((size_t)x * T + t) * V], *gb = &s->gB[((size_t)t * (V + 1) + prev) * V];
                    for (int v = 0; v < V; v++) {
                        double d = coef * ((v == y) - exp(lp[v]));
                        ga[v] += d;
                        gb[v] += d;
                    }
                }
            }
            prev = y;
        }
    }
}

/* The chain rule from the logit tables' gradients to the weights' (gW, gWb). */
static void chain_rule(const sim *s, double *gW, double *gWb)
{
    int P = s->P, T = s->T, V = s->V, D = s->D;
    size_t nw = (size_t)V * D;
    memset(gW, 0, nw * sizeof *gW);
    memset(gWb, 0, nw * sizeof *gWb);
    for (int x = 0; x < P; x++)
        for (int t = 0; t < T; t++) {
            const double *f = &s->phi[((size_t)x * T + t) * D], *ga = &s->gA[((size_t)x * T + t) * V];
            for (int v = 0; v < V; v++) {
                if (ga[v] == 0) continue;
                for (int j = 0; j < D; j++) gW[(size_t)v * D + j] += ga[v] * f[j];
            }
        }
    for (int t = 0; t < T; t++)
        for (int p = 0; p <= V; p++) {
            const double *f = &s->psi[((size_t)t * (V + 1) + p) * D], *gb = &s->gB[((size_t)t * (V + 1) + p) * V];
            for (int v = 0; v < V; v++) {
                if (gb[v] == 0) continue;
                for (int j = 0; j < D; j++) gWb[(size_t)v * D + j] += gb[v] * f[j];
            }
        }
}

int qs_grpo_run(const qs_grpo_cfg *c, qs_grpo_step *steps, qs_grpo_log_fn log, void *ctx, qs_err *e)
{
    if (c->P < 1 || c->T < 1 || c->V < 2 || c->D < 1 || c->B < 1 || c->G < 2 || c->steps < 1 || c->epochs < 1 ||
        c->P > 4096 || c->T > 1024 || c->V > 4096 || c->D > 4096 || c->B > 4096 || c->G > 1024 || c->epochs > 64)
        return qs_fail(e, "simulation size out of range");
    if (!c->exact && !c->fmt.f) return qs_fail(e, "no rollout format");
    sim s;
    memset(&s, 0, sizeof s);
    s.c = c;
    int P = s.P = c->P, T = s.T = c->T, V = s.V = c->V, D = s.D = c->D;
    size_t nw = (size_t)V * D, nA = (size_t)P * T * V, nB = (size_t)T * (V + 1) * V;
    size_t nseq = (size_t)c->B * c->G, ntok = nseq * (size_t)T;
    s.phi = malloc((size_t)P * T * D * sizeof *s.phi);
    s.psi = malloc((size_t)T * (V + 1) * D * sizeof *s.psi);
    s.tgt = malloc((size_t)P * T * sizeof *s.tgt);
    s.W = malloc(nw * sizeof *s.W); s.Wb = malloc(nw * sizeof *s.Wb);
    s.Wq = malloc(nw * sizeof *s.Wq); s.Wbq = malloc(nw * sizeof *s.Wbq);
    s.mW = calloc(nw, sizeof *s.mW); s.vW = calloc(nw, sizeof *s.vW);
    s.mWb = calloc(nw, sizeof *s.mWb); s.vWb = calloc(nw, sizeof *s.vWb);
    s.A = malloc(nA * sizeof *s.A); s.Bt = malloc(nB * sizeof *s.Bt);
    s.Aq = malloc(nA * sizeof *s.Aq); s.Btq = malloc(nB * sizeof *s.Btq);
    s.gA = malloc(nA * sizeof *s.gA); s.gB = malloc(nB * sizeof *s.gB);
    /* batch */
    int64_t *seq = malloc(ntok * sizeof *seq), *grp = malloc(ntok * sizeof *grp);
    int *tok = malloc(ntok * sizeof *tok), *prm = malloc(nseq * sizeof *prm);
    double *lpr = malloc(ntok * sizeof *lpr), *lpt = malloc(ntok * sizeof *lpt), *adv = malloc(ntok * sizeof *adv),
           *rew = malloc(ntok * sizeof *rew), *ent = malloc(ntok * sizeof *ent), *wt = malloc(ntok * sizeof *wt),
           *lp = malloc((size_t)V * sizeof *lp), *lq = malloc((size_t)V * sizeof *lq), *r = malloc(nseq * sizeof *r),
           *gW = malloc(nw * sizeof *gW), *gWb = malloc(nw * sizeof *gWb);
    int rc = -1;
    if (!s.phi || !s.psi || !s.tgt || !s.W || !s.Wb || !s.Wq || !s.Wbq || !s.mW || !s.vW || !s.mWb || !s.vWb || !s.A ||
        !s.Bt || !s.Aq || !s.Btq || !s.gA || !s.gB || !seq || !grp || !tok || !prm || !lpr || !lpt || !adv || !rew ||
        !ent || !wt || !lp || !lq || !r || !gW || !gWb) {
        qs_fail(e, "out of memory");
        goto out;
    }
    uint64_t sd = c->seed;
    for (size_t k = 0; k < (size_t)P * T * D; k++) s.phi[k] = c->feat_scale * gauss(sd, S_PHI, k);
    for (size_t k = 0; k < (size_t)T * (V + 1) * D; k++) s.psi[k] = c->feat_scale * gauss(sd, S_PSI, k);
    for (size_t k = 0; k < (size_t)P * T; k++) s.tgt[k] = (int)(unif(sd, S_TGT, k) * V) % V;
    for (size_t k = 0; k < nw; k++) {
        s.W[k] = (float)(c->init_scale * gauss(sd, S_W, k));
        s.Wb[k] = (float)(c->init_scale * gauss(sd, S_WB, k));
    }
    double lam = 0;
    for (int st = 0; st < c->steps; st++) {
        qs_grpo_step *rec = &steps[st];
        memset(rec, 0, sizeof *rec);
        /* π_old and μ */
        tables(&s, s.W, s.Wb, s.A, s.Bt);
        const double *Am = s.A, *Bm = s.Bt;
        double temp = 1;
        if (!c->exact) {
            double e2 = 0, n2 = 0;
            if (quantize(&s, s.W, s.Wq, &e2, e) || quantize(&s, s.Wb, s.Wbq, &e2, e)) goto out;
            for (size_t k = 0; k < nw; k++) n2 += (double)s.W[k] * s.W[k] + (double)s.Wb[k] * s.Wb[k];
            rec->qerr = n2 > 0 ? sqrt(e2 / n2) : 0;
            tables(&s, s.Wq, s.Wbq, s.Aq, s.Btq);
            Am = s.Aq;
            Bm = s.Btq;
            temp = c->rollout_temp;
        }
        /* rollouts */
        double esum = 0;
        for (int b = 0; b < c->B; b++) {
            int x = (int)(unif(sd, S_PROMPT, (uint64_t)st * 1000003u + (uint64_t)b) * P) % P;
            for (int g = 0; g < c->G; g++) {
                size_t i = (size_t)b * c->G + g;
                prm[i] = x;
                int prev = V, ok = 1, len = 0;
                for (int t = 0; t < T; t++) {
                    size_t k = i * T + t;
                    logprobs(&s, Am, Bm, x, t, prev, temp, lq);
                    double u = unif(sd, S_TOKEN, ((uint64_t)st * nseq + i) * (uint64_t)T + (uint64_t)t), cum = 0;
                    int y = V - 1;
                    for (int v = 0; v < V; v++) { cum += exp(lq[v]); if (u < cum) { y = v; break; } }
                    logprobs(&s, s.A, s.Bt, x, t, prev, 1, lp);
                    double h = 0;
                    for (int v = 0; v < V; v++) h -= exp(lp[v]) * lp[v];
                    ent[k] = h;
                    esum += h;
                    tok[k] = y;
                    lpr[k] = lq[y];
                    lpt[k] = lp[y];
                    seq[k] = (int64_t)i;
                    grp[k] = b;
                    if (ok && y == s.tgt[x * T + t]) len++; else ok = 0;
                    prev = y;
                }
                r[i] = (double)len / T;
            }
        }
        double rsum = advantages(c, T, r, adv, rew);
        rec->reward = rsum / (double)nseq;
        rec->entropy = esum / (double)ntok;
        qs_ais_batch bt = {st, ntok, seq, lpr, lpt, NULL, adv, rew, ent, grp};
        if (qs_ais_step(&c->ais, &bt, &rec->diag, e)) goto out;
        lam = qs_ais_lambda_next(&c->ais, lam, rec->diag.v[QS_AIS_F_ais_lambda_raw], st == 0);
        qs_ais_apply_lambda(&rec->diag, lam);
        if (qs_ais_token_weights(&c->ais, c->method, &bt, lam, wt, e)) goto out;
        if (log && log(ctx, st, &bt, tok, e)) goto out;
        rec->greedy_pi = greedy(&s, s.A, s.Bt, 1, lp);
        rec->greedy_mu = c->exact ? rec->greedy_pi : greedy(&s, s.Aq, s.Btq, temp, lp);
        /* K epochs of PPO on the batch */
        double nclip = 0;
        for (int ep = 0; ep < c->epochs; ep++) {
            if (ep) tables(&s, s.W, s.Wb, s.A, s.Bt);      /* π_θ after the previous epoch */
            memset(s.gA, 0, nA * sizeof *s.gA);
            memset(s.gB, 0, nB * sizeof *s.gB);
            ppo_grads(&s, nseq, ntok, prm, tok, adv, wt, lpt, lp, &nclip);
            chain_rule(&s, gW, gWb);
            if (ep == 0) {
                double g2 = 0;
                for (size_t k = 0; k < nw; k++) g2 += gW[k] * gW[k] + gWb[k] * gWb[k];
                rec->gnorm = sqrt(g2);
            }
            s.adam_t++;
            adam(&s, s.W, s.mW, s.vW, gW, nw);
            adam(&s, s.Wb, s.mWb, s.vWb, gWb, nw);
        }
        rec->clipfrac = nclip / ((double)ntok * c->epochs);
        double w2 = 0;
        for (size_t k = 0; k < nw; k++) w2 += (double)s.W[k] * s.W[k] + (double)s.Wb[k] * s.Wb[k];
        rec->wnorm = sqrt(w2);
    }
    rc = 0;
out:
    sim_free(&s);
    free(seq); free(grp); free(tok); free(prm); free(lpr); free(lpt); free(adv); free(rew); free(ent); free(wt);
    free(lp); free(lq); free(r); free(gW); free(gWb);
    return rc;
}
