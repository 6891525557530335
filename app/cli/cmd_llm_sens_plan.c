/*
** `qscope llm sensitivity --formats F1,F2,... --bits B`: a mixed-precision plan across formats
** (docs/llm.md "Plans across formats").  The one-format table of every format (the stored
** "llm_sensitivity" results, computed where missing) gives the predicted KL of each (layer, site) at
** each format; analysis/llm_plan.c chooses per cell the format minimising the summed KL within B
** average bits; one evaluation verifies the plan and, when the measured KL misses the prediction,
** the cells at stake are re-measured in the plan's context and the plan solved again; every format
** alone is evaluated too, for the comparison at the same bits.  The plan is written as a file
** (`llm eval --plan FILE` evaluates it).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm_plan_run.h"
#include "par.h"
#include "quant_opts.h"
#include "../../analysis/llm_plan_model.h"

int qs_sens_formats_opts(sens_opts *o)
{
    if (!o->formats) return qs_cli_usage(CMD, "--plan-out writes the plan of --formats F1,F2,... --bits B");
    if (o->fmt_spec) return qs_cli_usage(CMD, "--format F and --formats F1,F2,...: give one");
    if (o->kl_target >= 0) return qs_cli_usage(CMD, "--formats plans for a bits budget (--bits B); --kl-target is --format's");
    if (o->bits_budget < 0) return qs_cli_usage(CMD, "--formats needs --bits B (the average bits per element of the plan)");
    if (o->out.csv) return qs_cli_usage(CMD, "--csv is --format's (the plan file holds every cell of a --formats plan)");
    int rows = 0;   /* a format reaches an activation or KV-cache site */
    for (int i = 0; i < o->nsite; i++) rows |= o->sites[i] != QS_SENS_W;
    const char *p = o->formats;
    o->nfmt = 0;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (!n) return qs_cli_usage(CMD, "--formats '%s': an empty format", o->formats);
        if (o->nfmt == QS_SENS_MAX_FMT) return qs_cli_usage(CMD, "--formats: at most %d formats", QS_SENS_MAX_FMT);
        if (n >= sizeof o->fspec[0]) return qs_cli_usage(CMD, "--formats: '%.*s' is too long", (int)n, p);
        char *spec = o->fspec[o->nfmt];
        memcpy(spec, p, n);
        spec[n] = 0;
        qs_apply *a = &o->fmts[o->nfmt];
        if (qs_llm_parse_fmt(CMD, spec, a)) return QS_EXIT_USAGE;
        int rc = qs_llm_fmt_site_check(CMD, "--formats ", spec, a, rows ? "activations and the KV cache" : NULL);
        if (rc) return rc;
        qs_quant_label(a, spec, o->flabel[o->nfmt], sizeof o->flabel[0]);
        for (int i = 0; i < o->nfmt; i++)
            if (!strcmp(o->flabel[i], o->flabel[o->nfmt])) return qs_cli_usage(CMD, "--formats: %s given twice", spec);
        o->nfmt++;
        p += n;
        if (*p == ',') p++;
    }
    if (!o->nfmt) return qs_cli_usage(CMD, "--formats: no format given");
    return 0;
}

int qs_plan_missed(const qs_plan_meas *m)
{
    /* QSCOPE_TEST_PLAN_EXACT=1: no tolerance, so that the tests reach the refinement on a tiny model */
    const char *x = getenv("QSCOPE_TEST_PLAN_EXACT");
    double tol = x && !strcmp(x, "1") ? 0 : fmax(2 * m->kl_se, 0.1 * m->predicted);
    return m->kl > m->predicted + tol;
}

/* The cells of a choice as formats ([layer * QS_SENS_NSITE + site], the sites not planned FP32). */
static void cells_of(const qs_plan_run *r, const int *choice, const qs_apply **cell)
{
    memset(cell, 0, (size_t)r->L * QS_SENS_NSITE * sizeof *cell);
    for (int l = 0; l < r->L; l++)
        for (int j = 0; j < r->S; j++)
            cell[l * QS_SENS_NSITE + r->o->sites[j]] = &r->o->fmts[choice[l * r->S + j]];
}

/* Evaluate a choice: its predicted KL under the table kl, its bits, its measured KL. */
static int measure(qs_plan_run *r, const int *choice, const double *kl, qs_plan_meas *m)
{
    const qs_apply **cell = calloc((size_t)r->L * QS_SENS_NSITE, sizeof *cell);
    if (!cell) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    cells_of(r, choice, cell);
    qs_plan_problem p = {r->C, r->F, kl, r->bits, r->elems};
    qs_plan_eval_choice(&p, choice, &m->predicted, &m->bits_avg);
    qs_eval_summary s;
    qs_err e = {{0}};
    double t0 = qs_now_s();
    int bad = qs_plan_verify(&r->t->f.m, cell, r->o->scaled, r->t->ids, (size_t)r->t->ntok, &r->t->su, &s, &e);
    r->compute += qs_now_s() - t0;
    free(cell);
    if (bad) return qs_cli_err(QS_EXIT_ERR, &e);
    m->kl = s.kl_mean;
    m->kl_se = s.kl_se;
    m->dppl = s.dppl_rel;
    m->ppl = s.ppl;
    m->top1 = s.top1;
    return 0;
}

/* The problem: every format's table, the bits of each cell at each format, the elements of each cell. */
static int load_tables(qs_cli *cli, qs_plan_run *r)
{
    sens_opts *o = r->o;
    const qs_llm_cfg *c = &r->t->f.m.c;
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    int rc = 0;
    for (int f = 0; f < r->F && !rc; f++) {
        qs_sens_table tab;
        memset(&tab, 0, sizeof tab);
        if (qs_par_rank() == 0)
            fprintf(stderr, "qscope: %s: format %d of %d, %s: one-format table\n", CMD, f + 1, r->F, o->flabel[f]);
        rc = qs_sens_format_table(db, r->t, o, &o->fmts[f], o->flabel[f], &tab, &r->computed[f], &r->compute);
        if (!rc && qs_par_rank() == 0)
            for (int k = 0; k < r->C; k++) r->kl[(size_t)k * r->F + f] = tab.kl[k];
        qs_sens_table_free(&tab);
    }
    qs_db_close(db);
    for (int k = 0; k < r->C; k++) {
        int site = o->sites[k % r->S];
        r->elems[k] = qs_sens_site_elems(c, site);
        for (int f = 0; f < r->F; f++) r->bits[(size_t)k * r->F + f] = qs_plan_site_bits(c, site, &o->fmts[f], o->scaled);
    }
    return rc;
}

/* The format of cell k with the least finite KL in table kl (-1: none). */
static int best_format(const qs_plan_run *r, const double *kl, int k)
{
    int b = -1;
    for (int f = 0; f < r->F; f++)
        if (isfinite(kl[(size_t)k * r->F + f]) && (b < 0 || kl[(size_t)k * r->F + f] < kl[(size_t)k * r->F + b])) b = f;
    return b;
}

#define QS_PLAN_REMEASURE 4

/* One refinement round: the QS_PLAN_REMEASURE cells with the most predicted KL at stake (their chosen
** format's isolated KL above their best format's) are each moved to their best format within the plan
** and the plan evaluated again; the KL this saves in context over the KL it saves in isolation rescales
** that cell's whole column of the working table (clamped to 1/4 .. 8), and the budget is solved again.
** Returns 1 when the new plan differs (to verify), 0 when not, or an exit code + 2. */
static int remeasure(qs_plan_run *r, const qs_plan_meas *cur, int *next)
{
    int pick[QS_PLAN_REMEASURE], np = 0, *tmp = malloc((size_t)r->C * sizeof *tmp);
    if (!tmp) return QS_EXIT_ERR + 2;
    for (;;) {   /* the cells with the most at stake, largest first */
        int bk = -1;
        double bs = 0;
        for (int k = 0; k < r->C; k++) {
            int b = best_format(r, r->klw, k), skip = 0;
            for (int i = 0; i < np; i++) skip |= pick[i] == k;
            double stake = b < 0 || skip ? 0 : r->klw[(size_t)k * r->F + r->choice[k]] - r->klw[(size_t)k * r->F + b];
            if (stake > bs) { bs = stake; bk = k; }
        }
        if (bk < 0 || np == QS_PLAN_REMEASURE) break;
        pick[np++] = bk;
    }
    for (int i = 0; i < np; i++) {
        const int k = pick[i], b = best_format(r, r->klw, k);
        memcpy(tmp, r->choice, (size_t)r->C * sizeof *tmp);
        tmp[k] = b;
        qs_plan_meas m;
        int rc = measure(r, tmp, r->klw, &m);
        if (rc) { free(tmp); return rc + 2; }
        double *col = r->klw + (size_t)k * r->F;
        double iso = col[r->choice[k]] - col[b], ctx = cur->kl - m.kl, fac = iso > 0 ? ctx / iso : 1;
        fac = fmin(fmax(fac, 0.25), 8);
        json_array_append_new(r->remeasured, json_pack("{s:i,s:i,s:s,s:s,s:s,s:f,s:f,s:f}", "round", r->nround, "layer", k / r->S,
                                                       "site", qs_sens_site_name(r->o->sites[k % r->S]), "format",
                                                       r->o->flabel[r->choice[k]], "best", r->o->flabel[b], "kl_saved_isolated",
                                                       iso, "kl_saved_in_context", ctx, "factor", fac));
        for (int f = 0; f < r->F; f++)
            if (isfinite(col[f])) col[f] = col[b] + fac * (col[f] - col[b]);
    }
    free(tmp);
    qs_plan_problem p = {r->C, r->F, r->klw, r->bits, r->elems};
    qs_plan_solution s;
    if (qs_plan_solve(&p, r->o->bits_budget, &s)) return QS_EXIT_ERR + 2;
    int differs = memcmp(s.choice, r->choice, (size_t)r->C * sizeof *s.choice) != 0;
    memcpy(next, s.choice, (size_t)r->C * sizeof *next);
    qs_plan_solution_free(&s);
    return differs;
}

/* Verify the plan, and refine while it misses its prediction (at most QS_PLAN_MAX_ROUNDS - 1 times). */
static int verify_refine(qs_plan_run *r)
{
    int *next = malloc((size_t)r->C * sizeof *next);
    if (!next) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    int rc = measure(r, r->choice, r->klw, &r->round[0]);
    r->nround = 1;
    r->plan = r->round[0];
    snprintf(r->round_note[0], sizeof r->round_note[0], "first plan");
    while (!rc && qs_plan_missed(&r->plan) && r->nround < QS_PLAN_MAX_ROUNDS) {
        fprintf(stderr, "qscope: %s: measured KL %.5g misses the predicted %.5g: re-measuring the %d cells with the most "
                "at stake in the plan's context\n", CMD, r->plan.kl, r->plan.predicted, QS_PLAN_REMEASURE);
        int d = remeasure(r, &r->plan, next);
        if (d >= 2) { rc = d - 2; break; }
        char *note = r->round_note[r->nround];
        if (!d) {
            snprintf(note, sizeof r->round_note[0], "re-measured cells rescaled the table; the budget's plan is unchanged");
            r->round[r->nround] = r->plan;
            r->round[r->nround].predicted = NAN;
            r->nround++;
            break;
        }
        qs_plan_meas m;
        if ((rc = measure(r, next, r->klw, &m))) break;
        r->round[r->nround] = m;
        if (m.kl < r->plan.kl) {
            snprintf(note, sizeof r->round_note[0], "re-measured cells rescaled the table; the new plan measures lower: taken");
            memcpy(r->choice, next, (size_t)r->C * sizeof *next);
            r->plan = m;
            r->nround++;
        } else {
            snprintf(note, sizeof r->round_note[0], "re-measured cells rescaled the table; the new plan measures no lower: "
                     "the previous plan is kept");
            r->nround++;
            break;
        }
    }
    free(next);
    return rc;
}

/* Every format alone on every planned site, verified as the plan is (the comparison at the same bits). */
static int singles(qs_plan_run *r)
{
    int *ch = malloc((size_t)r->C * sizeof *ch), rc = 0;
    if (!ch) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    for (int f = 0; f < r->F && !rc; f++) {
        for (int k = 0; k < r->C; k++) ch[k] = f;
        fprintf(stderr, "qscope: %s: evaluating %s alone for the comparison\n", CMD, r->o->flabel[f]);
        rc = measure(r, ch, r->kl, &r->single[f]);
    }
    free(ch);
    return rc;
}

static void run_free(qs_plan_run *r)
{
    free(r->kl); free(r->bits); free(r->elems); free(r->klw); free(r->choice);
    qs_plan_solution_free(&r->sol);
    json_decref(r->remeasured);
}

int qs_sens_formats_run(qs_cli *cli, sens_opts *o, qs_llm_text_run *t)
{
    const double t0 = qs_now_s();
    qs_plan_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.t = t;
    r.L = t->f.m.c.n_layer;
    r.S = o->nsite;
    r.C = r.L * r.S;
    r.F = o->nfmt;
    r.kl = calloc((size_t)r.C * r.F, sizeof *r.kl);
    r.klw = calloc((size_t)r.C * r.F, sizeof *r.klw);
    r.bits = calloc((size_t)r.C * r.F, sizeof *r.bits);
    r.elems = calloc((size_t)r.C, sizeof *r.elems);
    r.choice = calloc((size_t)r.C, sizeof *r.choice);
    r.remeasured = json_array();
    int rc;
    if (!r.kl || !r.klw || !r.bits || !r.elems || !r.choice || !r.remeasured) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
    if ((rc = load_tables(cli, &r)) || qs_par_rank() > 0) goto done;   /* rank 0 alone plans and verifies */
    memcpy(r.klw, r.kl, (size_t)r.C * r.F * sizeof *r.kl);
    qs_plan_problem p = {r.C, r.F, r.kl, r.bits, r.elems};
    if (qs_plan_solve(&p, o->bits_budget, &r.sol)) {
        rc = qs_cli_error(QS_EXIT_ERR, "a (layer, site) has no finite KL under any of --formats: nothing to plan");
        goto done;
    }
    if (!r.sol.feasible) {
        rc = qs_cli_error(QS_EXIT_USAGE, "--bits %g is below the cheapest plan of these formats (%.4f bits per element)",
                          o->bits_budget, r.sol.front[0].bits_avg);
        goto done;
    }
    memcpy(r.choice, r.sol.choice, (size_t)r.C * sizeof *r.choice);
    if ((rc = verify_refine(&r)) || (rc = singles(&r))) goto done;
    if (o->plan_out) snprintf(r.plan_path, sizeof r.plan_path, "%s", o->plan_out);
    else snprintf(r.plan_path, sizeof r.plan_path, "plan-%.8s-%gb.json", t->f.hash, o->bits_budget);
    json_t *j = qs_plan_json(&r);
    if (!j) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
    if (!(rc = qs_plan_write(&r, j))) {
        if (o->json) {
            json_object_set_new(j, "plan_file", json_string(r.plan_path));
            json_object_set_new(j, "seconds", json_real(qs_now_s() - t0));
            json_object_set_new(j, "compute_seconds", json_real(r.compute));
            char *s = json_dumps(j, JSON_COMPACT);
            if (s) printf("%s\n", s);
            free(s);
        } else
            qs_plan_print(&r, qs_now_s() - t0);
    }
    json_decref(j);
done:
    run_free(&r);
    return rc;
}
