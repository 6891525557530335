/*
** The FP32 training loop (see train_loop.h).
*/
#include "train_loop.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/llm_train.h"
#include "../kernels/qs_clock.h"

/* splitmix64 finaliser: a counter-based generator, so every draw depends on (seed, counter) only. */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t draw(uint64_t seed, uint64_t stream, uint64_t i) { return mix(mix(seed ^ mix(stream)) + i); }

static double unit(uint64_t r) { return ((double)(r >> 11) + 0.5) / 9007199254740992.0; }   /* (0, 1) */

static void fill_normal(float *p, size_t n, double sd, uint64_t seed, uint64_t stream)
{
    for (size_t i = 0; i < n; i++) {
        double u1 = unit(draw(seed, stream, 2 * i)), u2 = unit(draw(seed, stream, 2 * i + 1));
        p[i] = (float)(sd * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
    }
}

static void fill_ones(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = 1.0f;
}

void qs_train_init(qs_llm_model *m, uint64_t seed)
{
    const qs_llm_cfg *c = &m->c;
    size_t d = (size_t)c->dim, q = qs_llm_q_dim(c), kv = (size_t)c->n_kv_head * (size_t)c->head_dim,
           f = (size_t)c->ffn, V = (size_t)c->vocab;
    double sd = 0.02, sdo = 0.02 / sqrt(2.0 * c->n_layer);
    uint64_t s = 1;   /* one stream per tensor */
    fill_normal(m->tok_embd, V * d, sd, seed, s++);
    if (m->output != m->tok_embd) fill_normal(m->output, V * d, sd, seed, s++);
    fill_ones(m->out_norm, d);
    for (int l = 0; l < c->n_layer; l++) {
        qs_llm_layer *L = &m->L[l];
        fill_ones(L->attn_norm, d);
        fill_ones(L->ffn_norm, d);
        fill_normal(L->wq, q * d, sd, seed, s++);
        fill_normal(L->wk, kv * d, sd, seed, s++);
        fill_normal(L->wv, kv * d, sd, seed, s++);
        fill_normal(L->wo, d * q, sdo, seed, s++);
        fill_normal(L->w_gate, f * d, sd, seed, s++);
        fill_normal(L->w_up, f * d, sd, seed, s++);
        fill_normal(L->w_down, d * f, sdo, seed, s++);
        if (L->bq) { memset(L->bq, 0, q * sizeof(float)); memset(L->bk, 0, kv * sizeof(float)); memset(L->bv, 0, kv * sizeof(float)); }
    }
}

static int check_opts(const qs_train_opts *o, size_t ntrain, size_t nval, qs_err *e)
{
    if (o->batch < 1 || o->T < 1 || o->steps < 0 || o->accum < 1 || o->warmup < 0 || o->eval_every < 0 || o->val_seqs < 1 ||
        o->start_step < 0 || o->start_step > o->steps)
        return qs_fail(e, "training options out of range (batch %d, ctx %d, steps %d, accum %d, warmup %d, start %d)",
                       o->batch, o->T, o->steps, o->accum, o->warmup, o->start_step);
    if (!(o->lr > 0) || !(o->min_frac >= 0 && o->min_frac <= 1) || !(o->adam.wd >= 0) || isnan(o->clip))
        return qs_fail(e, "learning rate %g, min fraction %g or weight decay %g out of range", o->lr, o->min_frac, o->adam.wd);
    if (ntrain < (size_t)o->T + 1) return qs_fail(e, "training text has %zu tokens, fewer than ctx+1 = %d", ntrain, o->T + 1);
    if (nval < (size_t)o->T + 1) return qs_fail(e, "validation text has %zu tokens, fewer than ctx+1 = %d", nval, o->T + 1);
    return 0;
}

/* Copy window k of the validation windows (evenly spaced over val) into dst. */
static void val_window(const int32_t *val, size_t nval, int T, int nw, int k, int32_t *dst)
{
    size_t span = nval - (size_t)T - 1, off = nw > 1 ? span * (size_t)k / (size_t)(nw - 1) : 0;
    memcpy(dst, val + off, ((size_t)T + 1) * sizeof *dst);
}

static int val_loss(const qs_llm_model *m, qs_llm_train_state *s, int32_t *buf, const int32_t *val, size_t nval,
                    const qs_train_opts *o, double *loss, qs_err *e)
{
    /* batch g's summed loss in slot g (zero on the ranks that did not compute it), added in batch order */
    const qs_train_par *p = o->par;
    int nb = (o->val_seqs + o->batch - 1) / o->batch, rank = p ? p->rank : 0, size = p ? p->size : 1;
    double *part = calloc((size_t)nb, sizeof *part), sum = 0;
    if (!part) return qs_fail(e, "out of memory");
    for (int g = rank; g < nb; g += size) {
        int k0 = g * o->batch, B = o->val_seqs - k0 < o->batch ? o->val_seqs - k0 : o->batch;
        for (int b = 0; b < B; b++) val_window(val, nval, o->T, o->val_seqs, k0 + b, buf + (size_t)b * (o->T + 1));
        double l;
        if (qs_llm_loss_grad(m, s, buf, B, o->T, &l, NULL, e)) { free(part); return -1; }
        part[g] = l * B;
    }
    if (p && p->size > 1 && p->sum_f64(p->ctx, part, (size_t)nb, e)) { free(part); return -1; }
    for (int g = 0; g < nb; g++) sum += part[g];
    free(part);
    *loss = sum / o->val_seqs;
    return 0;
}

int qs_train_val_loss(const qs_llm_model *m, const int32_t *val, size_t nval, const qs_train_opts *o, double *loss,
                      qs_err *e)
{
    if (check_opts(o, nval, nval, e)) return -1;
    qs_llm_train_state *s = qs_llm_train_state_new(&m->c, o->batch, o->T, e);
    int32_t *buf = malloc((size_t)o->batch * ((size_t)o->T + 1) * sizeof *buf);
    int rc = !s || !buf ? (s ? qs_fail(e, "out of memory") : -1) : val_loss(m, s, buf, val, nval, o, loss, e);
    free(buf);
    qs_llm_train_state_free(s);
    return rc;
}

/* n windows of ctx+1 tokens from window w of the run on: random offsets in 0 .. ntrain-T-1, each a
** function of (seed, w) only, so micro-batch mb of the serial loop is windows mb*batch .. +batch-1. */
static void train_windows(const int32_t *train, size_t ntrain, const qs_train_opts *o, uint64_t w, int n, int32_t *dst)
{
    uint64_t span = ntrain - (uint64_t)o->T;
    for (int b = 0; b < n; b++) {
        uint64_t off = draw(o->seed, 0, w + (uint64_t)b) % span;
        memcpy(dst + (size_t)b * (o->T + 1), train + off, ((size_t)o->T + 1) * sizeof *dst);
    }
}

void qs_train_batch(const int32_t *train, size_t ntrain, const qs_train_opts *o, uint64_t mb, int32_t *dst)
{
    train_windows(train, ntrain, o, mb * (uint64_t)o->batch, o->batch, dst);
}

/* A step's accum*batch windows as size*k chunks of cw <= batch windows, k the fewest (see qs_train_par;
** one rank: k = accum, cw = batch, the micro-batches). */
static int split(const qs_train_opts *o, int size, int *k, int *cw, qs_err *e)
{
    long w = (long)o->accum * o->batch;
    if (size < 1 || w % size)
        return qs_fail(e, "--batch x --accum (%ld windows a step) is not a multiple of the %d ranks", w, size);
    for (long kk = 1;; kk++)
        if ((w / size) % kk == 0 && w / size / kk <= o->batch) { *k = (int)kk; *cw = (int)(w / size / kk); return 0; }
}

/* The step's micro-batches again, from the first, with per-site checks, until one names the site where
** values first became non-finite (kernels/llm_train.h, qs_llm_nonfinite_site); fails the run with it. */
static int nonfinite_stop(const qs_llm_model *m, qs_llm_train_state *ts, const int32_t *train, size_t ntrain,
                          const qs_train_opts *o, int st, int upto, const uint64_t *calls, int32_t *buf,
                          const char *what, qs_err *e)
{
    char site[200] = "";
    for (int a = 0; a <= upto; a++) {
        qs_train_batch(train, ntrain, o, (uint64_t)st * (uint64_t)o->accum + (uint64_t)a, buf);
        int f = qs_llm_nonfinite_site(m, ts, buf, o->batch, o->T, calls[a], site, sizeof site, e);
        if (f < 0) return -1;
        if (f) break;
    }
    if (!site[0]) snprintf(site, sizeof site, "no single site (a re-run of the step stayed finite)");
    return qs_fail(e, "step %d: %s is not finite: non-finite values first in %s (lower --lr?)", st + 1, what, site);
}

/* The ranks' operand statistics (counts) summed into out, through doubles (exact below 2^53). */
static int sum_opstats(const qs_train_par *p, const qs_llm_opstat *mine, qs_llm_opstat *out, double *d, size_t n,
                       qs_err *e)
{
    for (size_t i = 0; i < n; i++) {
        d[4 * i] = mine ? (double)mine[i].n : 0;
        d[4 * i + 1] = mine ? (double)mine[i].underflow : 0;
        d[4 * i + 2] = mine ? (double)mine[i].clipped : 0;
        d[4 * i + 3] = mine ? (double)mine[i].nonfinite : 0;
    }
    if (p->sum_f64(p->ctx, d, 4 * n, e)) return -1;
    for (size_t i = 0; i < n; i++)
        out[i] = (qs_llm_opstat){(uint64_t)d[4 * i], (uint64_t)d[4 * i + 1], (uint64_t)d[4 * i + 2],
                                 (uint64_t)d[4 * i + 3]};
    return 0;
}

int qs_train_run(qs_llm_model *m, const int32_t *train, size_t ntrain, const int32_t *val, size_t nval,
                 const qs_train_opts *o, double *val0, qs_train_rec *rec, qs_train_cb cb, void *ctx, qs_err *e)
{
    if (check_opts(o, ntrain, nval, e)) return -1;
    if (o->T > m->c.ctx) return qs_fail(e, "ctx %d exceeds the model's context %d", o->T, m->c.ctx);
    int rc = -1, size = o->par ? o->par->size : 1, rank = o->par ? o->par->rank : 0, k = 1, cw = 1;
    if (split(o, size, &k, &cw, e)) return -1;
    qs_llm_grads g;
    memset(&g, 0, sizeof g);
    qs_adamw own, *opt = o->opt ? o->opt : &own;
    memset(&own, 0, sizeof own);
    qs_llm_train_state *s = qs_llm_train_state_new(&m->c, o->batch, o->T, e), *ts = s;
    int32_t *buf = malloc((size_t)o->batch * ((size_t)o->T + 1) * sizeof *buf);
    double *cl = calloc((size_t)size * (size_t)k, sizeof *cl);   /* the step's chunk losses, in chunk order */
    uint64_t *calls = malloc((size_t)size * (size_t)k * sizeof *calls);   /* each chunk's first GEMM call */
    qs_llm_opstat *ops = NULL;   /* the ranks' operand statistics summed (data-parallel under a recipe) */
    double *opd = NULL;
    size_t nops = o->recipe && size > 1 ? ((size_t)m->c.n_layer + 1) * QS_OP_COUNT : 0;
    if (!s) goto out;
    if (!buf || !cl || !calls) { qs_fail(e, "out of memory"); goto out; }
    if (nops && (!(ops = calloc(nops, sizeof *ops)) || !(opd = calloc(nops * 4, sizeof *opd)))) {
        qs_fail(e, "out of memory");
        goto out;
    }
    if (o->recipe) {   /* s (FP32) measures validation, ts runs the recipe */
        if (!(ts = qs_llm_train_state_new(&m->c, o->batch, o->T, e))) goto out;
        if (o->recipes ? qs_llm_train_state_set_recipes(ts, o->recipes, o->nrecipes, e)
                       : qs_llm_train_state_set_recipe(ts, o->recipe, e))
            goto out;
        qs_llm_train_state_set_calls(ts, o->sr_calls);
    }
    if (qs_llm_grads_new(&g, m, e) || (!o->opt && qs_adamw_new(&own, m, e))) goto out;
    if (!o->start_step && val_loss(m, s, buf, val, nval, o, val0, e)) goto out;   /* resuming: *val0 untouched */
    for (int st = o->start_step; st < o->steps; st++) {
        double t0 = qs_now_s(), lsum = 0;
        qs_llm_grads_zero(&g);
        qs_llm_train_state_opstats_reset(ts);
        memset(cl, 0, (size_t)size * (size_t)k * sizeof *cl);
        for (int c = rank * k; c < (rank + 1) * k; c++) {
            uint64_t w0 = (uint64_t)st * (uint64_t)o->accum * (uint64_t)o->batch + (uint64_t)c * (uint64_t)cw;
            train_windows(train, ntrain, o, w0, cw, buf);
            calls[c] = qs_llm_train_state_calls(ts);
            if (qs_llm_loss_grad(m, ts, buf, cw, o->T, &cl[c], &g, e)) goto out;
            /* alone, a non-finite loss stops here (the chunks are the micro-batches); under MPI every
            ** rank must reach the sum first */
            if (size == 1 && !isfinite(cl[c])) {
                nonfinite_stop(m, ts, train, ntrain, o, st, c, calls, buf, "the loss", e);
                goto out;
            }
        }
        if (size > 1 && (o->par->sum_f32(o->par->ctx, g.arena, g.arena_len, e) ||
                         (g.bias_arena && o->par->sum_f32(o->par->ctx, g.bias_arena, g.bias_len, e)) ||
                         o->par->sum_f64(o->par->ctx, cl, (size_t)size * (size_t)k, e) ||
                         (nops && sum_opstats(o->par, qs_llm_train_state_opstats(ts), ops, opd, nops, e))))
            goto out;
        for (int c = 0; c < size * k; c++) lsum += cl[c];
        /* the gradient of the mean loss over the step's size*k equal chunks is g / (size*k) */
        double norm = qs_llm_grads_norm(&g) / (size * k), scale = 1.0 / (size * k);
        if (size > 1 && !(isfinite(lsum) && isfinite(norm))) {   /* the same on every rank */
            qs_fail(e, "step %d: the %s is not finite (lower --lr?; run it without mpirun to find where values first "
                       "became non-finite)", st + 1, isfinite(lsum) ? "gradient" : "loss");
            goto out;
        }
        if (!isfinite(norm)) {
            nonfinite_stop(m, ts, train, ntrain, o, st, o->accum - 1, calls, buf, "the gradient", e);
            goto out;
        }
        if (o->clip > 0 && norm > o->clip) scale *= o->clip / norm;
        double lr = qs_lr_schedule(st, o->steps, o->warmup, o->lr, o->min_frac);
        if (qs_adamw_step(opt, m, &g, scale, lr, &o->adam, e)) goto out;
        double dt = qs_now_s() - t0;
        qs_train_rec *r = &rec[st];
        *r = (qs_train_rec){st + 1, lsum / (size * k), NAN, norm, lr,
                            dt > 0 ? (double)o->accum * o->batch * o->T / dt : 0,
                            nops ? ops : qs_llm_train_state_opstats(ts)};
        if (o->sr_calls_out) *o->sr_calls_out = o->recipe ? qs_llm_train_state_calls(ts) : 0;
        if ((o->eval_every > 0 && (st + 1) % o->eval_every == 0) || st + 1 == o->steps)
            if (val_loss(m, s, buf, val, nval, o, &r->val_loss, e)) goto out;
        if (cb && cb(ctx, r)) goto out;
    }
    rc = 0;
out:
    qs_adamw_free(&own);
    qs_llm_grads_free(&g);
    if (ts != s) qs_llm_train_state_free(ts);
    qs_llm_train_state_free(s);
    free(buf);
    free(cl);
    free(calls);
    free(ops);
    free(opd);
    return rc;
}
