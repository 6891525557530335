/*
** The RL runs view: imported RL logs (tokens, steps, sequences per run) with the per-step mismatch
** diagnostics of the runs plotted below (computed once by the worker: they read every token), and
** under Tab the stored trajectory results.
*/
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../analysis/rl_xaxis.h"
#include "../cli/cli.h"
#include "tui_view.h"
#include "../../analysis/plot.h"

typedef struct rl_view {
    tui_list runs, traj;          /* the runs pane and the stored trajectories pane */
    int metric;                   /* diagnostic plotted */
    int pane;                     /* 0 runs, 1 stored trajectories */
    int one;                      /* plot only the selected run */
} rl_view;

/* The runs table's columns: run and label as wide as their longest entry, within the screen;
** the steps' range goes first on a narrow one, then SEQUENCES, then the label and the names are
** cut (names in the middle). */
typedef struct rl_cols { int rnw, rlw, showseq, sw; } rl_cols;

static rl_cols rl_columns(const tui *T)
{
    rl_cols c = {3, 14, 1, 13};
    for (size_t i = 0; i < T->nruns; i++) {
        if ((int)strlen(T->runs[i].name) > c.rnw) c.rnw = (int)strlen(T->runs[i].name);
        if ((int)strlen(T->runs[i].label) > c.rlw) c.rlw = (int)strlen(T->runs[i].label);
    }
    int avail = T->W - (1 + 1 + 1 + 10 + 1 + c.sw + 1 + 9 + 1);
    if (avail < c.rnw + c.rlw) { c.sw = 7; avail += 6; }
    if (avail < c.rnw + 14) { c.showseq = 0; avail += 10; }
    if (c.rnw > avail - 14) c.rnw = avail - 14 > 8 ? avail - 14 : 8;
    if (c.rlw > avail - c.rnw) c.rlw = avail - c.rnw > 8 ? avail - c.rnw : 8;
    return c;
}

/* The heading of the pane shown: the runs' columns, or the stored trajectories'. */
static void rl_heading(tui *T, const rl_view *S, const rl_cols *c, int ntraj, int y0)
{
    char line[600];
    tui_head_on(T);
    tui_fill_line(T, y0);
    if (S->pane == 0) {
        snprintf(line, sizeof line, " %-*s %-*s %10s %*s %s", c->rnw, "RUN", c->rlw, "LABEL / SOURCE", "TOKENS", c->sw,
                 c->sw > 7 ? "STEPS (RANGE)" : "STEPS", c->showseq ? "SEQUENCES" : "");
        char tab[64];
        snprintf(tab, sizeof tab, "   [Tab: stored trajectories (%d)]", ntraj);
        if (strlen(line) + strlen(tab) <= (size_t)T->W) strcat(line, tab);
    } else
        snprintf(line, sizeof line, " %-8s %-*s %-16s %-20s   [Tab: runs (%zu)]", "RESULT", T->W - 50 > 20 ? T->W - 50 : 20, "WHAT",
                 "FORMAT", "CREATED", T->nruns);
    tui_addstr_clip(y0, 0, line, T->W);
    tui_head_off(T);
}

/* The runs' rows, from the list's top. */
static void rl_runs_rows(tui *T, rl_view *S, const rl_cols *c, int y0, int rows)
{
    char line[600];
    const char *peers[256];
    int np = 0;
    for (int r = 0; r < rows && r < 256 && S->runs.top + r < (int)T->nruns; r++) peers[np++] = T->runs[S->runs.top + r].name;
    for (int r = 0; r < rows && S->runs.top + r < (int)T->nruns; r++) {
        int i = S->runs.top + r;
        tui_run *R = &T->runs[i];
        char nm[300], sq[24] = "";
        tui_cut_middle(R->name, peers, np, c->rnw, nm, sizeof nm);
        if (R->tokens < 0) snprintf(line, sizeof line, " %-*.*s %-*.*s %10s %*s %9s", c->rnw, c->rnw, nm, c->rlw, c->rlw, qs_esc(R->label), "...", c->sw, "...",
                                    c->showseq ? "..." : "");
        else {
            /* the logged steps and their range: 7 steps of a 60-step run logged every 10 */
            char stp[48];
            if (c->sw > 7 && R->steps > 1 && isfinite(R->first) && isfinite(R->last))
                snprintf(stp, sizeof stp, "%lld (%.0f..%.0f)", (long long)R->steps, R->first, R->last);
            else snprintf(stp, sizeof stp, "%lld", (long long)R->steps);
            if (c->showseq) snprintf(sq, sizeof sq, "%9lld", (long long)R->seqs);
            snprintf(line, sizeof line, " %-*.*s %-*.*s %10lld %*s %s", c->rnw, c->rnw, nm, c->rlw, c->rlw, qs_esc(R->label), (long long)R->tokens,
                     c->sw, stp, sq);
        }
        if (i == S->runs.cur) { tui_sel_on(T); tui_fill_line(T, y0 + 1 + r); }
        tui_addstr_clip(y0 + 1 + r, 0, line, T->W);
        if (i == S->runs.cur) { mvaddch(y0 + 1 + r, 0, '>'); tui_sel_off(T); }
    }
}

/* Every run's per-step diagnostic overlaid (methods compared), or only the selected one ('a');
** the diagnostics are computed by the worker the first time (they read every token). */
static void rl_runs_plot(tui *T, rl_view *S, int y0, int h, int list_h)
{
    qs_err e = {{0}};
    tui_run *R = &T->runs[S->runs.cur];
    int64_t missing[64];
    int nmiss = 0;
    for (size_t i = 0; i < T->nruns && nmiss < 64; i++)
        if (!tui_rl_get(T, T->runs[i].id)) missing[nmiss++] = T->runs[i].id;
    if (nmiss && !T->job.busy && !T->bench_rl_sync && !T->rl_stopped) tui_job_rl(&T->job, missing, nmiss);
    if (nmiss && T->bench_rl_sync) {   /* headless benchmark: compute here */
        for (int i = 0; i < nmiss; i++) {
            tui_rlc *c = calloc(1, sizeof *c);
            if (c && !tui_rl_compute(T->db, missing[i], c, &e)) tui_rl_cache_take(T, c, 1);
            else free(c);
        }
    }
    qs_line_data ld[8];
    qs_rl_xkind kind[8];          /* training steps or llm score's prompts: never one axis for both */
    size_t nl = 0;
    int first = S->one ? S->runs.cur : 0, last = S->one ? S->runs.cur + 1 : (int)T->nruns;
    int pending = 0;
    for (int i = first; i < last && nl < 8; i++) {
        const tui_rlc *c = tui_rl_get(T, T->runs[i].id);
        if (!c) { pending++; continue; }
        if (c->n) {
            kind[nl] = T->runs[i].per_prompt ? QS_RL_X_PROMPT : QS_RL_X_STEP;
            ld[nl++] = (qs_line_data){T->runs[i].name, c->n, c->x, c->y[S->metric]};
        }
    }
    if (pending && !nl) {
        tui_addstr_clip(y0 + list_h + 1, 2, T->rl_stopped ? "The diagnostics were not computed (cancelled or failed): press r to compute them."
                                                          : "Computing the per-step diagnostics from the tokens in the background...", T->W - 4);
    } else if (!nl) {
        tui_addstr_clip(y0 + list_h + 1, 2, "No unmasked tokens in this run.", T->W - 4);
    } else {
        /* the axis of the selected run's kind when it is drawn, else of the first drawn run's */
        qs_rl_xkind want = kind[0];
        for (size_t k = 0; k < nl; k++)
            if (!strcmp(ld[k].name, R->name)) want = kind[k];
        const char *per = want == QS_RL_X_PROMPT ? "per prompt" : "per step";
        char title[300];
        if (S->one) snprintf(title, sizeof title, "%s: %s %s", R->name, tui_rl_metric_name(S->metric), per);
        else if (nl < T->nruns)   /* say what is left out: runs past the eighth, still computing, empty */
            snprintf(title, sizeof title, "%s %s, %zu of %zu runs (%s; a: the selected one)",
                     tui_rl_metric_name(S->metric), per, nl, T->nruns, pending ? "others still computing" : "the first by name");
        else snprintf(title, sizeof title, "%s %s, %zu run%s", tui_rl_metric_name(S->metric), per, nl, nl == 1 ? "" : "s");
        T->fig = qs_plot_rl_runs(title, tui_rl_metric_name(S->metric), QS_AX_SYMLOG, ld, kind, nl, want);
        snprintf(T->fig_what, sizeof T->fig_what, "rl-%s-m%d", S->one ? R->name : "runs", S->metric);
        tui_draw_figure(T, T->fig, y0 + list_h, 0, h - list_h, T->W);
    }
}

/* The stored trajectory results, and the selected one's plot. */
static void rl_traj_pane(tui *T, rl_view *S, int y0, int h, int list_h, int rows)
{
    char line[600];
    qs_err e = {{0}};
    int idx[4096], n = 0;
    for (size_t i = 0; i < T->nkres && n < 4096; i++)
        if (!strcmp(T->kres[i].kind, "trajectory")) idx[n++] = (int)i;
    if (!n) {
        tui_addstr_clip(y0 + 1, 2, "No stored trajectories yet: press : and run `ais RUN` or `sim grpo --seeds 1`.", T->W - 4);
        return;
    }
    tui_scroll_into(&S->traj, n, rows);
    T->click_list = &S->traj;
    T->click_y0 = y0 + 1;
    T->click_n = n;
    for (int r = 0; r < rows && S->traj.top + r < n; r++) {
        tui_kres *K = &T->kres[idx[S->traj.top + r]];
        int ww = T->W - 50 > 20 ? T->W - 50 : 20;
        char what[300];
        tui_cut_end(K->what, ww, what, sizeof what);
        snprintf(line, sizeof line, " %-8lld %-*.*s %-16.16s %-20.20s", (long long)K->id, ww, ww, what, K->format, K->created);
        if (S->traj.top + r == S->traj.cur) { tui_sel_on(T); tui_fill_line(T, y0 + 1 + r); }
        tui_addstr_clip(y0 + 1 + r, 0, line, T->W);
        if (S->traj.top + r == S->traj.cur) { mvaddch(y0 + 1 + r, 0, '>'); tui_sel_off(T); }
    }
    tui_kres *K = &T->kres[idx[S->traj.cur]];
    T->fig = tui_kres_figure(T, K->id, &e);
    if (!T->fig) { tui_addstr_clip(y0 + list_h + 1, 2, e.msg, T->W - 4); return; }
    snprintf(T->fig_what, sizeof T->fig_what, "trajectory-%lld", (long long)K->id);
    tui_draw_figure(T, T->fig, y0 + list_h, 0, h - list_h, T->W);
}

static void rl_draw(tui *T, int y0, int h)
{
    rl_view *S = tui_state(T, TV_RL);
    if (!T->runs_loaded) {
        qs_err le = {{0}};
        if (tui_load_runs(T, &le)) tui_set_msg(T, 1, "%s", le.msg);
    }
    int ntraj = 0;
    for (size_t i = 0; i < T->nkres; i++) ntraj += !strcmp(T->kres[i].kind, "trajectory");
    if (!T->nruns && !ntraj) {
        tui_empty_msg(T, y0 + 1, "No RL runs yet.",
                  "Press : and run `sim grpo --seeds 1 --steps 60` for a short simulated run, or `import-log FILE` "
                  "for a log of your own.  Each run is listed with its tokens, steps and sequences; the per-step "
                  "mismatch diagnostics of the selected run (mean/p95/max |dlogp|, KL k3, IS weights; m cycles) are "
                  "plotted below it, and stored trajectory results (methods compared) are listed under Tab.");
        return;
    }
    int list_h = h / 3, nlist = S->pane == 0 ? (int)T->nruns : ntraj;
    if (list_h > nlist + 2) list_h = nlist + 2;
    if (list_h < 3) list_h = 3;
    rl_cols c = rl_columns(T);
    rl_heading(T, S, &c, ntraj, y0);
    int rows = list_h - 1;
    if (S->pane != 0) { rl_traj_pane(T, S, y0, h, list_h, rows); return; }
    if (!T->nruns) {
        tui_addstr_clip(y0 + 1, 2, "No RL runs yet: press : and run `sim grpo --seeds 1` or `import-log FILE`.", T->W - 4);
        return;
    }
    tui_scroll_into(&S->runs, (int)T->nruns, rows);
    T->click_list = &S->runs;
    T->click_y0 = y0 + 1;
    T->click_n = (int)T->nruns;
    rl_runs_rows(T, S, &c, y0, rows);
    rl_runs_plot(T, S, y0, h, list_h);
}

static int rl_key(tui *T, tui_act a, int page)
{
    rl_view *S = tui_state(T, TV_RL);
    if (a == TA_RECOMPUTE) {   /* the diagnostics again, from the tokens */
        tui_rl_cache_clear(T);
        T->rl_stopped = 0;
        return 1;
    }
    if (a == TA_TAB) { S->pane = !S->pane; return 1; }
    if (a == TA_METRIC) { S->metric = (S->metric + 1) % tui_rl_nmetrics(); return 1; }
    if (a == TA_HIST_ALL) { S->one = !S->one; return 1; }
    if (S->pane == 0) return tui_list_key(&S->runs, (int)T->nruns, page, a);
    int nt = 0;
    for (size_t i = 0; i < T->nkres; i++) nt += !strcmp(T->kres[i].kind, "trajectory");
    return tui_list_key(&S->traj, nt, page, a);
}

static int rl_rows(tui *T) { return (int)T->nruns; }
static const char *rl_row_text(tui *T, int i, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s %s", T->runs[i].name, T->runs[i].label);
    return buf;
}
static tui_list *rl_cursor(tui *T) { return &((rl_view *)tui_state(T, TV_RL))->runs; }

const tui_view_ops tui_view_rl = {
    .name = "RL runs", .state_size = sizeof(rl_view),
    .about = {"imported RL logs: tokens, steps, sequences per run; per-step diagnostics of",
              "the selected run (m cycles: mean/p95/max |dlogp|, k3 KL, ...) and stored",
              "trajectory results (Tab)."},
    .draw = rl_draw, .key = rl_key, .rows = rl_rows, .row_text = rl_row_text, .cursor = rl_cursor,
};
