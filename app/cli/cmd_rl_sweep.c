/*
** `qscope rl grpo --sweep SPEC`: many GRPO runs (analysis/grpo_llm_sweep.h), serially or under mpirun
** with whole runs on the ranks (qs_par_run: rank r takes runs r, r+N, ...).  Each run is recorded in
** memory where it runs and stored by rank 0, in run order, once every rank has finished, with the same
** rl_run, rl_token, rl_seq and rl_step rows as the run alone (only wall times and ids differ).  Runs
** already stored whole (as many rl_step rows as --steps) are skipped, so a sweep re-run fills in.
*/
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "par.h"
#include "rl_grpo_cli.h"
#include "../../analysis/grpo_llm_sweep.h"
#include "../../analysis/grpo_policy.h"
#include "../../kernels/blas_threads.h"
#include "../../kernels/qs_clock.h"
#include "../../store/rl_log.h"
#include "../../kernels/llm_decode.h"
#include "../../store/rl_step.h"

#define CMD "rl grpo"

typedef struct sweep {
    qs_cli *cli;
    const gopts *base;
    const qs_rl_sweep *sw;
    size_t *todo;
    const char *model, *polset;
    char prefix[256];
    qs_db *db;
} sweep;

/* The settings of run i of the sweep (o->c.trainer points into o itself). */
static int settle(const sweep *x, size_t i, gopts *o, char *run, size_t cap)
{
    const qs_rl_sweep_run *r = &x->sw->run[i];
    *o = *x->base;
    o->rollout_spec = r->rollout[0] ? r->rollout : NULL;
    o->trainer_name = r->trainer;
    o->correction = r->correction;
    o->c.seed = r->seed;
    o->name = x->prefix;
    o->sweep = NULL;
    int rc = qs_rl_grpo_settle(o);
    if (!rc && qs_rl_grpo_run_name(o, run, cap)) rc = qs_cli_usage(CMD, "--name: the run name is too long");
    return rc;
}

/* ---- a run's record: host-order bytes (the ranks run the same binary) ---- */

typedef struct { uint8_t *b; size_t len, cap; int oom; } wbuf;

static void put(wbuf *w, const void *p, size_t n)
{
    if (w->oom || !n) return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n) cap *= 2;
        uint8_t *b = realloc(w->b, cap);
        if (!b) { w->oom = 1; return; }
        w->b = b;
        w->cap = cap;
    }
    memcpy(w->b + w->len, p, n);
    w->len += n;
}

static int on_step(void *p, const qs_grpo_llm_step *r, const qs_rl_row *rows, size_t n,
                   const char (*prompts)[QS_RL_TASK_PROMPT_MAX], qs_err *e)
{
    wbuf *w = p;
    uint64_t nn = n, nu = r->uf ? QS_LLM_UF_LEN(r->uf_layers) : 0;
    put(w, r, sizeof *r);   /* its uf pointer is meaningless elsewhere: the counters follow */
    put(w, &nu, sizeof nu);
    put(w, r->uf, nu * sizeof *r->uf);
    put(w, &nn, sizeof nn);
    put(w, rows, n * sizeof *rows);
    put(w, prompts, (size_t)((const int *)w->b)[0] * QS_RL_TASK_PROMPT_MAX);   /* B, the record's first int */
    return w->oom ? qs_fail(e, "out of memory for a run's record") : 0;
}

/* On any rank: run todo[k] whole into bytes: B, the metadata, then per step its record, rows and prompts. */
static int unit(size_t k, void *ctx, uint8_t **out, size_t *len, qs_err *e)
{
    sweep *x = ctx;
    gopts o;
    char run[512];
    if (settle(x, x->todo[k], &o, run, sizeof run)) return qs_fail(e, "sweep run %zu: bad settings", x->todo[k]);
    qs_llm_file f;
    if (qs_llm_load(x->model, &f, e)) return -1;
    o.c.vocab = &f.v;
    wbuf w = {0};
    char *meta = NULL;
    int rc = qs_grpo_llm_check(&f.m, &o.c, e);
    if (!rc) rc = (meta = qs_rl_grpo_metadata(&o, &f, x->model, x->polset, x->sw->name)) ? 0 : qs_fail(e, "out of memory");
    if (!rc) {
        uint64_t ml = strlen(meta) + 1;
        int32_t B = o.c.B, rank = qs_par_rank();
        double t0 = qs_now_s();
        put(&w, &B, sizeof B);
        put(&w, &rank, sizeof rank);
        put(&w, &t0, sizeof t0);
        put(&w, &ml, sizeof ml);
        put(&w, meta, ml);
        static const volatile sig_atomic_t never = 0;
        int done = 0;
        rc = w.oom ? qs_fail(e, "out of memory") : qs_grpo_llm_run(&f.m, &o.c, on_step, &w, &never, &done, e);
        if (!rc && !w.oom) {
            double dt = qs_now_s() - t0;
            memcpy(w.b + 2 * sizeof(int32_t), &dt, sizeof dt);   /* the run's seconds in place of its start */
        }
        if (rc) qs_err_prefix(e, run);
    }
    free(meta);
    qs_llm_file_free(&f);
    if (rc) { free(w.b); return -1; }
    *out = w.b;
    *len = w.len;
    return 0;
}

typedef struct { const uint8_t *b; size_t len, off; int bad; } rbuf;

static const void *take(rbuf *r, size_t n)
{
    if (r->bad || n > r->len - r->off) { r->bad = 1; return NULL; }
    const void *p = r->b + r->off;
    r->off += n;
    return p;
}

/* On rank 0, in run order: store run todo[k] in one transaction and print its line. */
static int collect(size_t k, const uint8_t *b, size_t len, void *ctx, qs_err *e)
{
    sweep *x = ctx;
    gopts o;
    char run[512];
    if (settle(x, x->todo[k], &o, run, sizeof run)) return qs_fail(e, "sweep run %zu: bad settings", x->todo[k]);
    rbuf r = {b, len, 0, 0};
    int32_t B = 0, rank = 0;
    double secs = 0;
    uint64_t ml = 0;
    const void *p;
    if ((p = take(&r, sizeof B))) memcpy(&B, p, sizeof B);
    if ((p = take(&r, sizeof rank))) memcpy(&rank, p, sizeof rank);
    if ((p = take(&r, sizeof secs))) memcpy(&secs, p, sizeof secs);
    if ((p = take(&r, sizeof ml))) memcpy(&ml, p, sizeof ml);
    const char *meta = take(&r, ml);
    if (r.bad || B != o.c.B || !ml || meta[ml - 1]) return qs_fail(e, "a rank sent a run's record qscope cannot read");
    if (!x->db && !(x->db = qs_db_open(x->cli->db_path, e))) return -1;
    int64_t id;
    if (qs_db_begin(x->db, e)) return -1;
    int rc = qs_rl_run_create(x->db, run, "qscope rl grpo", x->model, meta, 1, &id, e), nstep = 0;
    double r0 = 0, r1 = 0;
    while (!rc && r.off < r.len) {
        qs_grpo_llm_step st;
        uint64_t n = 0, nu = 0;
        if ((p = take(&r, sizeof st))) memcpy(&st, p, sizeof st);
        if ((p = take(&r, sizeof nu))) memcpy(&nu, p, sizeof nu);
        if (!r.bad && nu && (st.uf_layers < 0 || st.uf_layers > 1 << 16 || nu != QS_LLM_UF_LEN(st.uf_layers))) r.bad = 1;
        const void *ufp = take(&r, r.bad ? 0 : nu * sizeof(uint64_t));
        if ((p = take(&r, sizeof n))) memcpy(&n, p, sizeof n);
        if (!r.bad && n > (r.len - r.off) / sizeof(qs_rl_row)) r.bad = 1;
        const void *rows = take(&r, r.bad ? 0 : n * sizeof(qs_rl_row));
        const void *pr = take(&r, (size_t)B * QS_RL_TASK_PROMPT_MAX);
        if (r.bad) { rc = qs_fail(e, "a rank sent a run's record qscope cannot read"); break; }
        /* copies: the bytes need not be aligned for the rows */
        qs_rl_row *rw = malloc(n ? n * sizeof *rw : 1);
        char (*pp)[QS_RL_TASK_PROMPT_MAX] = malloc((size_t)B * QS_RL_TASK_PROMPT_MAX);
        uint64_t *uf = malloc(nu ? nu * sizeof *uf : 1);
        if (!rw || !pp || !uf) rc = qs_fail(e, "out of memory");
        else {
            memcpy(rw, rows, n * sizeof *rw);
            memcpy(pp, pr, (size_t)B * QS_RL_TASK_PROMPT_MAX);
            if (nu) memcpy(uf, ufp, nu * sizeof *uf);
            st.uf = nu ? uf : NULL;
            rc = qs_rl_grpo_put_step(x->db, id, &o, &st, rw, n, (const char (*)[QS_RL_TASK_PROMPT_MAX])pp, e);
        }
        free(rw);
        free(pp);
        free(uf);
        if (nstep++ == 0) r0 = st.reward;
        r1 = st.reward;
    }
    if (!rc) rc = qs_db_commit(x->db, e);
    if (rc) { qs_db_rollback(x->db); return -1; }
    if (!o.quiet)
        printf("%-56s reward %.4f -> %.4f  %d steps, %.0f s on rank %d\n", qs_esc(run), r0, r1, nstep, secs, (int)rank);
    fflush(stdout);
    return 0;
}

/* Rank 0 marks the runs stored whole (1; -1 on a database error); every rank learns them by the ranks' sum. */
static int stored(sweep *x, size_t n, double *flag, qs_err *e)
{
    qs_db *db = qs_par_rank() == 0 ? qs_db_open(x->cli->db_path, e) : NULL;
    int rc = qs_par_rank() == 0 && !db ? -1 : 0;
    for (size_t i = 0; i < n && db && !rc; i++) {
        gopts o;
        char run[512];
        int64_t have;
        if (settle(x, i, &o, run, sizeof run)) { rc = -1; break; }
        if (qs_rl_step_count(db, run, &have, e)) { rc = -1; break; }
        flag[i] = have == o.c.steps;
        if (flag[i] && !o.quiet) printf("%-56s stored, skipped\n", qs_esc(run));
    }
    qs_db_close(db);
    if (rc) flag[0] = -1e9;
    qs_err se = {{0}};
    if (qs_par_sum_f64(flag, n, &se)) { *e = se; return -1; }
    for (size_t i = 0; i < n; i++)
        if (flag[i] < 0) return qs_par_rank() == 0 ? -1 : qs_fail(e, "the database could not be read");
    return 0;
}

int qs_rl_grpo_sweep(qs_cli *cli, gopts *base)
{
    static qs_rl_sweep sw;   /* large: not on the stack */
    qs_err e = {{0}};
    if (qs_rl_sweep_parse(base->sweep, &sw, &e)) return qs_cli_usage(CMD, "%s", e.msg);
    sweep x = {cli, base, &sw, NULL, base->model, NULL, "", NULL};
    if (base->name_set) snprintf(x.prefix, sizeof x.prefix, "%s", base->name);
    else snprintf(x.prefix, sizeof x.prefix, "rl/%s", sw.name);
    for (size_t i = 0; i < sw.n; i++) {   /* every run's names checked before any runs */
        gopts o;
        char run[512];
        int rc = settle(&x, i, &o, run, sizeof run);
        if (rc) return rc;
    }
    qs_grpo_policy pol;
    char polset[512] = "";
    if (!x.model) {   /* the default policy: pre-trained (once) by rank 0, then found by the others */
        int rc = 0;
        for (int pass = 0; pass < 2 && !rc; pass++) {
            if ((pass == 0) == (qs_par_rank() == 0)) rc = qs_grpo_policy_get(base->c.task, base->quiet, &pol, &e);
            if (pass == 0) qs_par_barrier();
        }
        if (rc) return qs_cli_err(QS_EXIT_ERR, &e);
        x.model = pol.dir;
        x.polset = qs_grpo_policy_settings(base->c.task, polset, sizeof polset);
    }
    double *flag = calloc(sw.n, sizeof *flag);
    x.todo = malloc(sw.n * sizeof *x.todo);
    if (!flag || !x.todo) { free(flag); free(x.todo); return qs_cli_error(QS_EXIT_ERR, "out of memory"); }
    if (!base->quiet && qs_par_rank() == 0)
        printf("rl grpo --sweep %s: %zu runs stored as %s/... (metadata \"sweep\": \"%s\"), %d rank%s\n", sw.name, sw.n,
               qs_esc(x.prefix), sw.name, qs_par_size(), qs_par_size() == 1 ? "" : "s");
    int rc = stored(&x, sw.n, flag, &e);
    size_t nt = 0;
    for (size_t i = 0; !rc && i < sw.n; i++)
        if (flag[i] == 0) x.todo[nt++] = i;
    fflush(stdout);
    if (!rc) {
        const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        int serial = qs_par_size() > 1 && local && atoi(local) > 1 && !getenv("OPENBLAS_NUM_THREADS");
        if (serial) qs_blas_serial_begin();   /* ranks sharing the cores: one BLAS thread each */
        rc = qs_par_run(nt, NULL, unit, collect, &x, "rl grpo --sweep", &e);
        if (serial) qs_blas_serial_end();
    }
    qs_db_close(x.db);
    free(flag);
    free(x.todo);
    if (rc) return qs_cli_err(QS_EXIT_ERR, &e);
    if (!base->quiet && qs_par_rank() == 0) printf("rl grpo --sweep %s: %zu run%s run, %zu stored before\n", sw.name, nt,
                                                   nt == 1 ? "" : "s", sw.n - nt);
    return 0;
}
