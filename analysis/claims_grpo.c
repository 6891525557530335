/*
** The RL claims of issue 27 measured on a transformer (`qscope rl grpo` runs): the HiFloat4-RL mismatch
** claim, the underflow source, the Rollout-ResQ gap and AIS's C2/C4.  Every comparison is paired by
** seed: the per-seed difference of final rewards with a two-sided 95 % Student-t interval over seeds
** (>= 3 seeds, else "not enough runs").  Verdicts: reproduced (supported), differs (not supported),
** inconclusive (an interval straddles the threshold, or runs are missing).  See claims_grpo.h for
** where the runs come from and docs/claims.md, "RL on a transformer", for the rules.
*/
#include "claims_grpo.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sqlite3.h>

#include "grpo_llm.h"

#define APPEND(buf, ...) snprintf((buf) + strlen(buf), sizeof(buf) - strlen(buf), __VA_ARGS__)

#define MIN_SEEDS 3
#define MAX_SEEDS 16
#define MAX_CELLS 48
#define RUN_MIN 2     /* minutes per default run (600 steps of 32 x 8; docs/rl.md "The experiments": 31-236 s, mean ~100 s under load) */

static qs_db *g_db;

void qs_claims_grpo_bind(qs_db *db) { g_db = db; }

/* ---------------------------------------------------------------- the runs of a sweep */

/* Final reward and AIS-R lambda (first tenth of the steps, last K) per configuration and seed (NAN: no run). */
typedef struct cell {
    char key[64];                    /* "base", "full:hif4", "roll:hif4@bf16", "roll:mxfp4@fp32:tis" (run_key) */
    double r[MAX_SEEDS], lam0[MAX_SEEDS], lam1[MAX_SEEDS];
} cell;

typedef struct rtab {
    uint64_t seed[MAX_SEEDS];
    int nseed, ncell, runs, partial;  /* runs read; runs not completed (ignored) */
    cell c[MAX_CELLS];
} rtab;

static const char *fp4_of(const char *s)
{
    static const char *const f[] = {"hif4", "mxfp4", "nvfp4"};
    for (int i = 0; i < 3; i++)
        if (strstr(s, f[i])) return f[i];
    return NULL;
}

/* The configuration key of a run, or 0 when it is none of the claims' configurations:
**   "base"                 no FP4 anywhere, no ResQ, no correction;
**   "full:F"               FP4 rollout and the trainer preset of the same format F;
**   "roll:F@T"             FP4 rollout with the high-precision trainer T (bf16, fp32);
**   "resq-M:F@T"           the same with Rollout-ResQ mode M (dense, 24 for 2:4);
** then ":C" for a correction C other than none, by its canonical name (tis, mis, seq_mis, geo, ais). */
static int run_key(const char *roll, const char *trainer, const char *corr, char *key, size_t cap)
{
    const char *rf = fp4_of(roll), *tf = fp4_of(trainer);
    const char *rq = strstr(roll, "resq=");
    char mode[16] = "";
    if (rq && strncmp(rq + 5, "none", 4) && strncmp(rq + 5, "off", 3))
        snprintf(mode, sizeof mode, "%s", !strncmp(rq + 5, "2:4", 3) ? "24" : !strncmp(rq + 5, "dense", 5) ? "dense" : "?");
    qs_ais_method m;
    if (qs_ais_method_parse(corr, &m) || !strcmp(mode, "?")) return 0;
    if (!rf && !tf) {
        if (m != QS_CORR_NONE || mode[0]) return 0;
        snprintf(key, cap, "base");
    } else if (rf && tf && !strcmp(rf, tf) && !mode[0]) snprintf(key, cap, "full:%s", rf);
    else if (rf && !tf && (!strcmp(trainer, "bf16") || !strcmp(trainer, "fp32"))) {
        if (mode[0]) snprintf(key, cap, "resq-%s:%s@%s", mode, rf, trainer);
        else snprintf(key, cap, "roll:%s@%s", rf, trainer);
    } else return 0;
    if (m != QS_CORR_NONE) snprintf(key + strlen(key), cap - strlen(key), ":%s", qs_ais_method_name(m));
    return 1;
}

static int seed_slot(rtab *t, uint64_t seed)
{
    for (int i = 0; i < t->nseed; i++)
        if (t->seed[i] == seed) return i;
    if (t->nseed == MAX_SEEDS) return -1;
    for (int c = 0; c < MAX_CELLS; c++) t->c[c].r[t->nseed] = t->c[c].lam0[t->nseed] = t->c[c].lam1[t->nseed] = NAN;
    t->seed[t->nseed] = seed;
    return t->nseed++;
}

static cell *find_cell(rtab *t, const char *key, int add)
{
    for (int i = 0; i < t->ncell; i++)
        if (!strcmp(t->c[i].key, key)) return &t->c[i];
    if (!add || t->ncell == MAX_CELLS) return NULL;
    cell *c = &t->c[t->ncell++];
    snprintf(c->key, sizeof c->key, "%s", key);
    return c;
}

static void tab_init(rtab *t)
{
    memset(t, 0, sizeof *t);
    for (int c = 0; c < MAX_CELLS; c++)
        for (int i = 0; i < MAX_SEEDS; i++) t->c[c].r[i] = t->c[c].lam0[i] = t->c[c].lam1[i] = NAN;
}

/* Mean of x[a..b) skipping NaN (NaN when none). */
static double mean_of(const double *x, int a, int b)
{
    double s = 0;
    int n = 0;
    for (int i = a; i < b; i++)
        if (isfinite(x[i])) { s += x[i]; n++; }
    return n ? s / n : NAN;
}

/* Record a run's per-step rewards and lambdas (n steps) under key and seed. */
static void tab_put(rtab *t, const char *key, uint64_t seed, const double *rew, const double *lam, int n)
{
    cell *c = find_cell(t, key, 1);
    int k = seed_slot(t, seed);
    if (!c || k < 0 || n < 1) return;
    int K = n / 4 < 1 ? 1 : n / 4 > 50 ? 50 : n / 4, E = n / 10 < 1 ? 1 : n / 10;
    c->r[k] = mean_of(rew, n - K, n);
    c->lam0[k] = mean_of(lam, 0, E);
    c->lam1[k] = mean_of(lam, n - K, n);
    t->runs++;
}

static const char *jstr(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* One stored run: its configuration from the metadata, its steps from rl_step. */
static int read_run(qs_db *db, rtab *t, int64_t id, json_t *m, const char *only, qs_err *e)
{
    const char *roll = jstr(m, "rollout_format"), *tr = jstr(m, "trainer"), *corr = jstr(m, "correction");
    json_t *js = json_object_get(m, "seed"), *jn = json_object_get(m, "steps");
    char key[64];
    if (!roll || !tr || !corr || !json_is_integer(js) || !json_is_integer(jn) || !run_key(roll, tr, corr, key, sizeof key) ||
        (only && strcmp(key, only)))
        return 0;
    json_int_t steps = json_integer_value(jn);
    if (steps < 1 || steps > 1000000) return 0;
    double *rew = malloc((size_t)steps * sizeof *rew), *lam = malloc((size_t)steps * sizeof *lam);
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT step, reward, lambda FROM rl_step WHERE run_id = ? ORDER BY step", e);
    int rc = 0, n = 0;
    if (!st) { rc = -1; goto done; }
    if (!rew || !lam) { rc = qs_fail(e, "out of memory"); goto done; }
    sqlite3_bind_int64(st, 1, id);
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t s = sqlite3_column_int64(st, 0);
        if (s != n || n >= steps) { n = -1; break; }   /* a gap or an extra step: not a complete run */
        rew[n] = sqlite3_column_type(st, 1) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 1);
        lam[n] = sqlite3_column_type(st, 2) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 2);
        n++;
    }
    if (r != SQLITE_ROW && r != SQLITE_DONE) { rc = qs_db_fail(db, e, "reading rl_step"); goto done; }
    if (n == steps) tab_put(t, key, (uint64_t)json_integer_value(js), rew, lam, n);
    else t->partial++;
done:
    if (st) sqlite3_finalize(st);
    free(rew);
    free(lam);
    return rc;
}

/* Every run of the sweep (rl_run.metadata "sweep" = name), or only those of configuration only. */
static int read_sweep(qs_db *db, const char *name, const char *only, rtab *t, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT id, metadata FROM rl_run ORDER BY id", e);
    if (!st) return -1;
    int r, rc = 0;
    while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
        const char *txt = (const char *)sqlite3_column_text(st, 1);
        json_t *m = txt ? json_loads(txt, 0, NULL) : NULL;
        const char *sw = m ? jstr(m, "sweep") : NULL;
        if (sw && !strcmp(sw, name)) rc = read_run(db, t, sqlite3_column_int64(st, 0), m, only, e);
        json_decref(m);
    }
    if (!rc && r != SQLITE_DONE) rc = qs_db_fail(db, e, "reading rl_run");
    sqlite3_finalize(st);
    return rc;
}

/* ---------------------------------------------------------------- paired arithmetic */

typedef struct ci95 {
    int n;
    double mean, lo, hi;
} ci95;

/* Two-sided 95 % Student-t quantiles for n - 1 degrees of freedom, n = 2..16 (as claims_train.c). */
static double t95(int n)
{
    static const double t[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
                               2.160, 2.145, 2.131};
    return n >= 2 && n <= 16 ? t[n - 2] : 1.96;
}

/* a[i] - b[i] over the seeds where both are finite (b NULL: a[i] alone), mean and 95 % interval. */
static ci95 paired(const double *a, const double *b, int ns)
{
    double d[MAX_SEEDS], m = 0, v = 0;
    int n = 0;
    for (int i = 0; i < ns; i++)
        if (isfinite(a[i]) && (!b || isfinite(b[i]))) d[n++] = a[i] - (b ? b[i] : 0);
    for (int i = 0; i < n; i++) m += d[i];
    m = n ? m / n : NAN;
    for (int i = 0; i < n; i++) v += (d[i] - m) * (d[i] - m);
    double h = n > 1 ? t95(n) * sqrt(v / (n - 1) / n) : INFINITY;
    return (ci95){n, m, n > 1 ? m - h : -INFINITY, n > 1 ? m + h : INFINITY};
}

static const double *cell_r(rtab *t, const char *key)
{
    cell *c = find_cell(t, key, 0);
    return c ? c->r : NULL;
}

/* Paired difference of two configurations (n = 0 when either has no run). */
static ci95 diff(rtab *t, const char *ka, const char *kb)
{
    const double *a = cell_r(t, ka), *b = kb ? cell_r(t, kb) : NULL;
    if (!a || (kb && !b)) return (ci95){0, NAN, -INFINITY, INFINITY};
    return paired(a, b, t->nseed);
}

static void ci_text(char *buf, size_t cap, const char *what, ci95 c)
{
    if (c.n < 2) snprintf(buf, cap, "%s %s (%d seed%s, no interval)", what, c.n ? "" : "no runs", c.n, c.n == 1 ? "" : "s");
    else snprintf(buf, cap, "%s %+.3f [%+.3f, %+.3f] (%d seeds)", what, c.mean, c.lo, c.hi, c.n);
}

/* ---------------------------------------------------------------- quick: a tiny in-memory sweep */

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A random byte-level policy: 1 layer, dim 32 (the pipeline, not a task it can solve). */
static int tiny_model(qs_llm_model *m, qs_err *e)
{
    qs_llm_cfg c = {.n_layer = 1, .dim = 32, .n_head = 2, .n_kv_head = 2, .head_dim = 16, .ffn = 64, .vocab = 256,
                    .ctx = 48, .rope_base = 10000, .eps = 1e-5f};
    if (qs_llm_alloc(m, &c, 1, e)) return -1;
    uint64_t s = 7;
    for (size_t i = 0; i < m->arena_len; i++) m->arena[i] = (float)(((double)(mix(&s) >> 11) / 9007199254740992.0 - 0.5) * 0.2);
    for (int l = 0; l < c.n_layer; l++)
        for (int j = 0; j < c.dim; j++) m->L[l].attn_norm[j] = m->L[l].ffn_norm[j] = 1;
    for (int j = 0; j < c.dim; j++) m->out_norm[j] = 1;
    return 0;
}

/* Keep each step's record (ctx: the array). */
static int quick_cb(void *ctx, const qs_grpo_llm_step *rec, const qs_rl_row *rows, size_t n,
                    const char (*prompts)[QS_RL_TASK_PROMPT_MAX], qs_err *e)
{
    (void)rows, (void)n, (void)prompts, (void)e;
    ((qs_grpo_llm_step *)ctx)[rec->step] = *rec;
    return 0;
}

/* One quick run of the configuration key under seed: a fresh copy of the tiny policy, 6 steps of 2 x 4. */
static int quick_run(const qs_llm_model *m0, rtab *t, const char *key, uint64_t seed, qs_err *e)
{
    /* the key (run_key): KIND[:FMT[@TRAINER]][:CORRECTION] */
    char kind[16] = "", fmt[16] = "", trn[16] = "bf16", corr[16] = "none";
    const char *p = key + strcspn(key, ":");
    snprintf(kind, sizeof kind, "%.*s", (int)(p - key), key);
    if (*p && strcmp(kind, "base")) {
        size_t n = strcspn(++p, "@:");
        snprintf(fmt, sizeof fmt, "%.*s", (int)n, p);
        p += n;
        if (*p == '@') { n = strcspn(++p, ":"); snprintf(trn, sizeof trn, "%.*s", (int)n, p); p += n; }
    }
    if (*p == ':') snprintf(corr, sizeof corr, "%s", p + 1);
    int full = !strcmp(kind, "full");
    qs_grpo_llm_cfg c;
    qs_grpo_llm_cfg_default(&c);
    c.B = 2, c.G = 4, c.max_new = 4, c.steps = 6, c.lr = 1e-3, c.seed = seed;
    qs_llm_recipe tr, rr;
    if (qs_llm_recipe_preset(full ? fmt : trn, &tr, e)) return -1;
    if (qs_llm_recipe_preset(fmt[0] ? fmt : trn, &rr, e)) return -1;
    c.trainer = &tr;
    c.roll.w = rr.op[QS_OP_FWD_W].a, c.roll.has_w = rr.op[QS_OP_FWD_W].on;
    c.roll.a = rr.op[QS_OP_FWD_X].a, c.roll.has_a = rr.op[QS_OP_FWD_X].on;
    c.roll.resq = !strcmp(kind, "resq-dense") ? QS_RESQ_DENSE : !strcmp(kind, "resq-24") ? QS_RESQ_24 : QS_RESQ_NONE;
    if (qs_ais_method_parse(corr, &c.method)) return qs_fail(e, "unknown correction '%s'", corr);
    qs_llm_model m;
    if (qs_llm_clone(&m, m0, e)) return -1;
    qs_grpo_llm_step *rec = calloc((size_t)c.steps, sizeof *rec);
    double rew[8], lam[8];
    int done = 0, rc = rec ? 0 : qs_fail(e, "out of memory");
    if (!rc) rc = qs_grpo_llm_run(&m, &c, quick_cb, rec, NULL, &done, e);
    for (int i = 0; !rc && i < done; i++) rew[i] = rec[i].reward, lam[i] = rec[i].lambda;
    if (!rc) tab_put(t, key, seed, rew, lam, done);
    free(rec);
    qs_llm_free(&m);
    return rc;
}

/* The configurations of a claim: trained now (quick, seeds 1..3, not stored) or read from the sweep. */
static int load(int quick, const char *sweep, const char *const *keys, int nk, rtab *t, qs_claim_out *o, qs_err *e)
{
    tab_init(t);
    if (quick) {
        qs_llm_model m;
        if (tiny_model(&m, e)) return -1;
        int rc = 0;
        for (uint64_t s = 1; !rc && s <= MIN_SEEDS; s++)
            for (int k = 0; !rc && k < nk; k++) rc = quick_run(&m, t, keys[k], s, e);
        qs_llm_free(&m);
        APPEND(o->detail, "QUICK: a random 1-layer policy, 6 steps of 2 x 4 arith samples, seeds 1-3, in memory: "
                          "the pipeline, not the measurement. ");
        return rc;
    }
    if (g_db) {
        if (read_sweep(g_db, sweep, NULL, t, e)) return -1;
        APPEND(o->detail, "Runs: the stored sweep '%s' (%d complete run%s of its configurations", sweep, t->runs,
               t->runs == 1 ? "" : "s");
        if (t->partial) APPEND(o->detail, ", %d incomplete ignored", t->partial);
        APPEND(o->detail, "). ");
    } else
        APPEND(o->detail, "No database to read the stored sweep from. ");
    return 0;
}

/* Seeds with a run of every key; fewer than MIN_SEEDS: the verdict says what to run. */
/* per_seed: the runs the sweep makes per seed (docs/rl.md, "Sweeps"). */
static int enough(rtab *t, const char *sweep, int per_seed, const char *const *keys, int nk, qs_claim_out *o)
{
    int n = 0;
    for (int i = 0; i < t->nseed; i++) {
        int all = 1;
        for (int k = 0; k < nk; k++) {
            const double *r = cell_r(t, keys[k]);
            all &= r && isfinite(r[i]);
        }
        n += all;
    }
    if (n >= MIN_SEEDS) return 1;
    o->verdict = QS_VERDICT_INCONCLUSIVE;
    snprintf(o->measured, sizeof o->measured, "%s", t->runs ? "not enough runs" : "not measured");
    APPEND(o->detail, "Not enough runs: %d seed%s with every configuration (", n, n == 1 ? "" : "s");
    for (int k = 0; k < nk; k++) APPEND(o->detail, "%s%s", k ? ", " : "", keys[k]);
    APPEND(o->detail, "), the claim needs %d: run `qscope rl grpo --sweep %s` (about %d min on 2 cores at ~%d min per "
                      "default run). ", MIN_SEEDS, sweep, per_seed * MIN_SEEDS * RUN_MIN, RUN_MIN);
    return 0;
}

static void reward_line(qs_claim_out *o, rtab *t, const char *const *keys, int nk)
{
    APPEND(o->detail, "Final reward (last min(50, steps/4) steps):");
    for (int k = 0; k < nk; k++) {
        ci95 c = diff(t, keys[k], NULL);
        APPEND(o->detail, " %s %.3f", keys[k], c.mean);
    }
    APPEND(o->detail, ". ");
}

/* ---------------------------------------------------------------- the claims */

static const char *const kMis[] = {"base", "full:hif4", "roll:hif4@bf16", "full:mxfp4", "roll:mxfp4@bf16"};

static int rl_mismatch(int quick, qs_claim_out *o, qs_err *e)
{
    rtab *t = malloc(sizeof *t);
    if (!t) return qs_fail(e, "out of memory");
    APPEND(o->detail, "GRPO on the default policy (qscope rl grpo defaults): base = bf16 rollout and trainer, full = "
                      "FP4 rollout and FP4 trainer (recipe of the format), roll = FP4 rollout (w, a) with the bf16 "
                      "trainer (verdict; the fp32 trainer as context), no correction. Claim: roll - full < 0 (restoring the trainer's precision hurts). ");
    int rc = load(quick, "hif4-rl", kMis, 5, t, o, e);
    if (rc || !enough(t, "hif4-rl", 7, kMis, 5, o)) { free(t); return rc; }
    reward_line(o, t, kMis, 5);
    int below = 1, above = 0;
    o->measured[0] = 0;
    for (int f = 0; f < 2; f++) {
        const char *fmt = f ? "mxfp4" : "hif4";
        char kr[32], kf[32], k32[32], tx[160];
        snprintf(kr, sizeof kr, "roll:%s@bf16", fmt);
        snprintf(k32, sizeof k32, "roll:%s@fp32", fmt);
        snprintf(kf, sizeof kf, "full:%s", fmt);
        ci95 d = diff(t, kr, kf), g = diff(t, kf, "base"), d32 = diff(t, k32, kf);
        if (!f) o->value = d.mean;
        below &= d.n >= MIN_SEEDS && d.hi < 0;
        above |= d.n >= MIN_SEEDS && d.lo > 0;
        ci_text(tx, sizeof tx, fmt, d);
        APPEND(o->measured, "%s%s roll-full %+.3f", f ? "; " : "", fmt, d.mean);
        APPEND(o->detail, "%s: roll - full %s; ", fmt, tx + strlen(fmt) + 1);
        ci_text(tx, sizeof tx, "full - base", g);
        APPEND(o->detail, "%s", tx);
        if (d32.n) {   /* the fp32 trainer (the preset's second high-precision trainer): context */
            ci_text(tx, sizeof tx, "; with the fp32 trainer, roll - full", d32);
            APPEND(o->detail, "%s", tx);
        }
        APPEND(o->detail, ". ");
    }
    o->verdict = below ? QS_VERDICT_REPRODUCED : above ? QS_VERDICT_DIFFERS : QS_VERDICT_INCONCLUSIVE;
    APPEND(o->detail, "%s", below   ? "Supported: for both formats the FP4 trainer beats the bf16 one under an FP4 rollout."
                            : above ? "Not supported: for a format the bf16 trainer does better (interval above 0)."
                                    : "Inconclusive: an interval contains 0 (no effect resolved at this scale).");
    free(t);
    return 0;
}

/* ---------------------------------------------------------------- rl.underflow-source */

#define UF_MAX 1024          /* (format, layer, site) cells */
#define UF_NEGLIGIBLE 1e-3   /* below this everywhere, underflow cannot be the dominant error source */

/* Mean underflow fraction of one (FP4 format, layer, site): the per-run mean over steps, summed over runs. */
typedef struct ufcell { const char *fmt; int layer; char site[16]; double sum; int nrun; } ufcell;
typedef struct uftab { ufcell c[UF_MAX]; int n, runs; } uftab;

static void uf_add(uftab *t, const char *fmt, int layer, const char *site, double mean)
{
    int i = 0;
    while (i < t->n && !(t->c[i].fmt == fmt && t->c[i].layer == layer && !strcmp(t->c[i].site, site))) i++;
    if (i == t->n) {
        if (t->n == UF_MAX) return;
        t->c[t->n++] = (ufcell){fmt, layer, "", 0, 0};
        snprintf(t->c[i].site, sizeof t->c[i].site, "%s", site);
    }
    t->c[i].sum += mean;
    t->c[i].nrun++;
}

/* The rl_underflow rows of every FP4-rollout run of the sweep, per (format, layer, site). */
static int uf_read(qs_db *db, const char *sweep, uftab *t, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT id, metadata FROM rl_run ORDER BY id", e);
    sqlite3_stmt *q = st ? qs_db_prepare(db, "SELECT layer, site, AVG(underflow) FROM rl_underflow WHERE run_id = ? "
                                             "GROUP BY layer, site", e) : NULL;
    int r = SQLITE_DONE, rc = q ? 0 : -1;
    while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
        const char *txt = (const char *)sqlite3_column_text(st, 1);
        json_t *m = txt ? json_loads(txt, 0, NULL) : NULL;
        const char *sw = m ? jstr(m, "sweep") : NULL, *roll = m ? jstr(m, "rollout_format") : NULL;
        const char *fmt = roll ? fp4_of(roll) : NULL;
        if (sw && !strcmp(sw, sweep) && fmt) {
            sqlite3_reset(q);
            sqlite3_bind_int64(q, 1, sqlite3_column_int64(st, 0));
            int k, rows = 0;
            while ((k = sqlite3_step(q)) == SQLITE_ROW) {
                const char *site = (const char *)sqlite3_column_text(q, 1);
                uf_add(t, fmt, sqlite3_column_int(q, 0), site ? site : "?", sqlite3_column_double(q, 2));
                rows++;
            }
            if (k != SQLITE_DONE) rc = qs_db_fail(db, e, "reading rl_underflow");
            t->runs += rows > 0;
        }
        json_decref(m);
    }
    if (!rc && r != SQLITE_DONE) rc = qs_db_fail(db, e, "reading rl_run");
    if (q) sqlite3_finalize(q);
    if (st) sqlite3_finalize(st);
    return rc;
}

static double uf_mean(const ufcell *c) { return c->nrun ? c->sum / c->nrun : NAN; }

/* One format's line: its dominant (layer, site), the mean by site (over layers) and by layer (over sites). */
static double uf_format(const uftab *t, const char *fmt, qs_claim_out *o)
{
    const ufcell *best = NULL;
    int nl = 0;
    for (int i = 0; i < t->n; i++)
        if (t->c[i].fmt == fmt) {
            if (!best || uf_mean(&t->c[i]) > uf_mean(best)) best = &t->c[i];
            if (t->c[i].layer + 1 > nl) nl = t->c[i].layer + 1;
        }
    if (!best) return NAN;
    APPEND(o->measured, "%s%s %.2f %% at L%d %s", o->measured[0] ? "; " : "", fmt, 100 * uf_mean(best), best->layer,
           best->site);
    APPEND(o->detail, "%s: dominant L%d %s %.3f %%; by site", fmt, best->layer, best->site, 100 * uf_mean(best));
    static const char *const sites[] = {"attn_in", "attn_out", "ffn_in", "ffn_down_in", "kv", "head_in"};
    for (int s = 0; s < 6; s++) {
        double sum = 0;
        int n = 0;
        for (int i = 0; i < t->n; i++)
            if (t->c[i].fmt == fmt && !strcmp(t->c[i].site, sites[s])) sum += uf_mean(&t->c[i]), n++;
        if (n) APPEND(o->detail, " %s %.3f %%", sites[s], 100 * sum / n);
    }
    APPEND(o->detail, "; by layer");
    for (int l = 0; l < nl; l++) {
        double sum = 0;
        int n = 0;
        for (int i = 0; i < t->n; i++)
            if (t->c[i].fmt == fmt && t->c[i].layer == l) sum += uf_mean(&t->c[i]), n++;
        if (n) APPEND(o->detail, " L%d %.3f %%", l, 100 * sum / n);
    }
    APPEND(o->detail, ". ");
    return uf_mean(best);
}

static int rl_underflow(int quick, qs_claim_out *o, qs_err *e)
{
    o->verdict = QS_VERDICT_INCONCLUSIVE;
    o->value = NAN;
    APPEND(o->detail, "Underflow = the share of the non-zero activations the rollout rounded that became 0 "
                      "(rl_underflow: per step, layer and site; layer = layers is the output projection's input), "
                      "the mean over steps and FP4-rollout runs (seeds, trainers) of the sweep 'hif4-rl'. ");
    uftab *t = calloc(1, sizeof *t);
    if (!t) return qs_fail(e, "out of memory");
    if (!quick && g_db && uf_read(g_db, "hif4-rl", t, e)) { free(t); return -1; }
    if (!t->runs) {
        snprintf(o->measured, sizeof o->measured, "not measured");
        APPEND(o->detail, "%s: run `qscope rl grpo --sweep hif4-rl` (its FP4-rollout runs store the underflow).",
               quick ? "QUICK reads no runs" : g_db ? "No FP4-rollout run of the sweep with rl_underflow rows"
                                                    : "No database to read the stored sweep from");
        free(t);
        return 0;
    }
    APPEND(o->detail, "%d run%s. ", t->runs, t->runs == 1 ? "" : "s");
    double worst = 0;
    for (int f = 0; f < 3; f++) {
        static const char *const fmts[] = {"hif4", "mxfp4", "nvfp4"};
        const char *fmt = NULL;
        for (int i = 0; i < t->n && !fmt; i++)
            if (!strcmp(t->c[i].fmt, fmts[f])) fmt = t->c[i].fmt;
        double m = fmt ? uf_format(t, fmt, o) : NAN;
        if (isfinite(m) && !isfinite(o->value)) o->value = m;
        if (isfinite(m) && m > worst) worst = m;
    }
    if (worst < UF_NEGLIGIBLE) {
        o->verdict = QS_VERDICT_DIFFERS;
        APPEND(o->detail, "Not supported: below 0.1 %% underflow at every layer and site, too little to be the "
                          "dominant error source.");
    } else
        APPEND(o->detail, "Inconclusive: underflow is substantial (%.1f %% at the dominant site), but whether it is "
                          "the dominant error source needs the rounding error of the values that do not underflow, "
                          "which is not measured.", 100 * worst);
    free(t);
    return 0;
}

static const char *const kResq[] = {"base", "roll:hif4@fp32", "resq-24:hif4@fp32", "resq-dense:hif4@fp32",
                                    "roll:mxfp4@fp32", "resq-24:mxfp4@fp32", "resq-dense:mxfp4@fp32"};

#define NRESQ 7

static int rl_resq(int quick, qs_claim_out *o, qs_err *e)
{
    rtab *t = malloc(sizeof *t);
    if (!t) return qs_fail(e, "out of memory");
    APPEND(o->detail, "fp32 trainer; base = bf16 rollout; roll = FP4 rollout (w, a); resq-24 / resq-dense = the same "
                      "with Rollout-ResQ 2:4 (the paper's sparse residual: the verdict) / dense. Gap = base - roll, "
                      "gain = resq - roll, share closed = mean gain / mean gap. ");
    int rc = load(quick, "resq", kResq, NRESQ, t, o, e);
    if (rc || !enough(t, "resq", 7, kResq, NRESQ, o)) { free(t); return rc; }
    reward_line(o, t, kResq, NRESQ);
    int ok = 1, bad = 0;
    o->measured[0] = 0;
    for (int f = 0; f < 2; f++) {
        const char *fmt = f ? "mxfp4" : "hif4";
        char kr[32], kq[32], kd[32], tx[160];
        snprintf(kr, sizeof kr, "roll:%s@fp32", fmt);
        snprintf(kq, sizeof kq, "resq-24:%s@fp32", fmt);
        snprintf(kd, sizeof kd, "resq-dense:%s@fp32", fmt);
        ci95 gap = diff(t, "base", kr), gain = diff(t, kq, kr), dense = diff(t, kd, kr);
        double share = gap.mean != 0 ? gain.mean / gap.mean : NAN;
        if (!f) o->value = share;
        ok &= gap.lo > 0 && gain.lo > 0;
        bad |= gap.lo > 0 && gain.hi < 0;
        if (isfinite(share)) APPEND(o->measured, "%s%s %.0f %% closed", f ? "; " : "", fmt, 100 * share);
        else APPEND(o->measured, "%s%s no gap", f ? "; " : "", fmt);
        ci_text(tx, sizeof tx, "gap", gap);
        APPEND(o->detail, "%s: %s, ", fmt, tx);
        ci_text(tx, sizeof tx, "gain", gain);
        APPEND(o->detail, "%s, share closed ", tx);
        if (isfinite(share)) APPEND(o->detail, "%.0f %%", 100 * share);
        else APPEND(o->detail, "undefined");
        APPEND(o->detail, "%s", gap.lo > 0 ? "" : " (no resolved gap to close)");
        ci_text(tx, sizeof tx, "; dense gain", dense);
        APPEND(o->detail, "%s. ", tx);
    }
    o->verdict = ok ? QS_VERDICT_REPRODUCED : bad ? QS_VERDICT_DIFFERS : QS_VERDICT_INCONCLUSIVE;
    APPEND(o->detail, "%s", ok    ? "Supported: for both formats FP4 rollouts lose reward and ResQ wins part of it back."
                            : bad ? "Not supported: a resolved gap that ResQ makes worse."
                                  : "Inconclusive: a gap or a gain interval contains 0.");
    free(t);
    return 0;
}

#define ROLL "roll:mxfp4@fp32"   /* the `ais` preset's rollout and trainer */
static const char *const kAis[] = {"base", ROLL, ROLL ":tis", ROLL ":mis", ROLL ":seq_mis", ROLL ":geo", ROLL ":ais"};
#define CORR(k) (kAis[k] + strlen(ROLL) + 1)
#define NAIS 7
#define HARM 0.02   /* absolute reward: less harm than this is "no degradation" */

/* C2 and C4 share their runs; c4 selects the lambda claim. */
static int rl_ais(int quick, int c4, qs_claim_out *o, qs_err *e)
{
    rtab *t = malloc(sizeof *t);
    if (!t) return qs_fail(e, "out of memory");
    APPEND(o->detail, "roll = MXFP4 rollout (w, a) with the fp32 trainer, uncorrected or corrected (tis, mis = icepop, "
                      "seq_mis, geo = geo_rs, ais = ais_r); base = exact rollout (bf16), from the sweep 'ais' or else "
                      "'resq' (its base run: fp32 trainer, same seeds and defaults). ");
    int rc = load(quick, "ais", kAis, NAIS, t, o, e);
    if (!rc && !quick && g_db && !find_cell(t, "base", 0)) rc = read_sweep(g_db, "resq", "base", t, e);
    if (!rc && !find_cell(t, "base", 0)) APPEND(o->detail, "No base run (`qscope rl grpo --sweep resq` makes it). ");
    if (rc || !enough(t, "ais", 6, kAis, NAIS, o)) { free(t); return rc; }
    reward_line(o, t, kAis, NAIS);
    ci95 deg = diff(t, ROLL, "base");
    char tx[160];
    ci_text(tx, sizeof tx, "degradation (roll - base)", deg);
    APPEND(o->detail, "%s. ", tx);
    int harm = deg.hi < 0, noharm = deg.lo > -HARM;
    if (!c4) {
        int rec = 0, best = 1;
        for (int k = 2; k < NAIS; k++) {
            ci95 r = diff(t, kAis[k], ROLL);
            rec |= r.lo > 0;
            if (k == 2 || r.mean > diff(t, kAis[best], ROLL).mean) best = k;
            ci_text(tx, sizeof tx, CORR(k), r);
            APPEND(o->detail, "recovery %s; ", tx);
        }
        o->value = deg.mean;
        snprintf(o->measured, sizeof o->measured, "roll-base %+.3f; best %s %+.3f", deg.mean, CORR(best),
                 diff(t, kAis[best], ROLL).mean);
        o->verdict = harm && rec ? QS_VERDICT_REPRODUCED : noharm ? QS_VERDICT_DIFFERS : QS_VERDICT_INCONCLUSIVE;
        APPEND(o->detail, "%s", harm && rec ? "Supported: uncorrected FP4 rollouts lose reward and a correction recovers."
                                : noharm    ? "Not supported at this scale: uncorrected FP4 rollouts lose less than 0.02 "
                                              "reward (the whole interval), as in `sim grpo` (docs/rl.md)."
                                            : "Inconclusive: harm without a resolved recovery, or an undecided harm.");
    } else {
        cell *c = find_cell(t, ROLL ":ais", 0);
        ci95 dl = paired(c->lam1, c->lam0, t->nseed), l0 = paired(c->lam0, NULL, t->nseed);
        o->value = dl.mean;
        snprintf(o->measured, sizeof o->measured, "lambda early %.3f, late-early %+.3f; roll-base %+.3f", l0.mean, dl.mean, deg.mean);
        ci_text(tx, sizeof tx, "AIS-R lambda late - early (last K steps vs first tenth)", dl);
        APPEND(o->detail, "%s; early lambda %.3f. ", tx, l0.mean);
        o->verdict = dl.lo > 0 && harm ? QS_VERDICT_REPRODUCED : dl.hi < 0 ? QS_VERDICT_DIFFERS : QS_VERDICT_INCONCLUSIVE;
        APPEND(o->detail, "%s", dl.lo > 0 && harm ? "Supported: lambda rises and the uncorrected run is harmed."
                                : dl.hi < 0       ? "Not supported: lambda falls over the run."
                                : noharm          ? "Inconclusive: no harm for lambda to respond to (as in `sim grpo`)."
                                                  : "Inconclusive: an interval contains 0.");
    }
    free(t);
    return 0;
}

/* A random policy's rewards decide nothing: under --quick the verdict is inconclusive, the arithmetic's shown. */
static int quick_verdict(int quick, int rc, qs_claim_out *o)
{
    if (!rc && quick && o->verdict != QS_VERDICT_INCONCLUSIVE) {
        APPEND(o->detail, " QUICK: the arithmetic says %s; a random policy decides nothing.",
               qs_verdict_name(o->verdict));
        o->verdict = QS_VERDICT_INCONCLUSIVE;
    }
    return rc;
}

static int rl_c2(int quick, qs_claim_out *o, qs_err *e) { return quick_verdict(quick, rl_ais(quick, 0, o, e), o); }
static int rl_c4(int quick, qs_claim_out *o, qs_err *e) { return quick_verdict(quick, rl_ais(quick, 1, o, e), o); }
static int rl_mis(int quick, qs_claim_out *o, qs_err *e) { return quick_verdict(quick, rl_mismatch(quick, o, e), o); }
static int rl_gap(int quick, qs_claim_out *o, qs_err *e) { return quick_verdict(quick, rl_resq(quick, o, e), o); }

const qs_claim qs_claims_grpo[] = {
    {"hif4.rl-mismatch", "HiFloat4-RL (rollout/trainer mismatch)",
     "with FP4 rollouts, a high-precision trainer is worse than an FP4 one (the mismatch costs more than precision)",
     "FP4 trainer > BF16", "95 % CI over >= 3 seeds", 0, rl_mis},
    {"rl.underflow-source", "HiFloat4-RL (rollout/trainer mismatch)",
     "the dominant error source is underflow of small rollout activations under FP4, by layer",
     "underflow by layer", "measured fraction", 0, rl_underflow},
    {"resq.rl-gap", "Rollout-ResQ (HiFloat4-RL)", "ResQ on the FP4 rollout closes part of the BF16 - FP4 reward gap",
     "gap closed", "95 % CI over >= 3 seeds", 0, rl_gap},
    {"ais.llm-c2", "AIS (RL rollout mismatch)",
     "on a transformer, uncorrected quantized rollouts degrade or collapse; corrections recover (C2)",
     "C2", "95 % CI over >= 3 seeds", 0, rl_c2},
    {"ais.llm-c4", "AIS (RL rollout mismatch)", "AIS-R's lambda is low early and rises when harm starts (C4)", "C4",
     "95 % CI over >= 3 seeds", 0, rl_c4},
};
const size_t qs_claims_grpo_n = sizeof qs_claims_grpo / sizeof qs_claims_grpo[0];
