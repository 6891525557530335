/*
** The Model view: stored `llm eval` runs (one per model, text, ctx, chunks and scoring), each a
** line with the reference perplexity then one row per configuration (PPL, dPPL with its 95%
** interval, KL mean/median/p99/max, same top token, RMS dp), sortable by KL or dPPL; below, the
** KL distribution of the selected configuration (of every configuration of a run on its line) from
** the stored log-spaced histogram, as a histogram or a CDF (v).  Stored `llm sensitivity` tables
** follow, one line each; on one, the layers x sites heatmap of mean KL with the plan's BF16 cells.
** Enter (Right, l) on a row shows every statistic of it in place of the plot, h closes.  The
** cursor keeps its row (by identity) when the configs are sorted and when the results are read again.
*/
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui_view.h"
#include "../../analysis/llm_eval_store.h"
#include "../../analysis/llm_sens_store.h"

typedef struct model_view {
    struct qs_evrun *ev;          /* stored llm evaluations (read when shown; again after a command) */
    size_t nev;
    struct qs_sensrun *sens;      /* stored llm sensitivity tables (with their plans) */
    size_t nsens;
    int loaded;
    tui_list l;
    int sort, sort_desc;          /* 0 as run, else a sort key of llm_eval_stats.h (KL mean, dPPL) */
    int cdf;                      /* KL plot: CDF instead of the histogram */
    int detail;                   /* the selected row's statistics in place of the plot */
    char cur_key[400];            /* the row under the cursor (row_key), kept across reloads */
} model_view;

#define MV(T) ((model_view *)tui_state((T), TV_MODEL))

typedef struct mrow { int run, cfg; } mrow;   /* cfg -1: the run's line; cfg -2: sensitivity table `run` */

/* What a row is, as text that survives a reload and a sort: a config by its result row, a run by
** its model, text and options, a sensitivity table by its own. */
static void row_key(const model_view *M, const mrow *q, char *b, size_t cap)
{
    if (q->cfg >= 0) snprintf(b, cap, "c%lld", (long long)M->ev[q->run].cfg[q->cfg].id);
    else if (q->cfg == -1) {
        const qs_evrun *r = &M->ev[q->run];
        snprintf(b, cap, "r%s|%s|%d|%d|%s", r->model_hash, r->text, r->ctx, r->chunks, r->score);
    } else {
        const qs_sensrun *r = &M->sens[q->run];
        snprintf(b, cap, "s%s|%s|%s|%d|%d|%s", r->model_hash, r->text, r->format, r->ctx, r->chunks, r->score);
    }
}

static void model_done(tui *T)
{
    model_view *M = MV(T);
    qs_evruns_free(M->ev, M->nev);
    qs_sensruns_free(M->sens, M->nsens);
    M->ev = NULL;
    M->nev = 0;
    M->sens = NULL;
    M->nsens = 0;
    M->loaded = 0;
}

static int rows_of(tui *T, mrow **out);
static void find_key(tui *T, const char *key);

static void load(tui *T)
{
    model_view *M = MV(T);
    if (M->loaded) return;
    model_done(T);
    qs_err e = {{0}};
    if (qs_evruns_load(T->db, &M->ev, &M->nev, &e) || qs_sensruns_load(T->db, &M->sens, &M->nsens, &e)) tui_set_msg(T, 1, "%s", e.msg);
    M->loaded = 1;
    find_key(T, M->cur_key);   /* read again: the cursor stays on its row */
}

/* the value of sort key `key` (the table's sort rows of llm_eval_stats.h) */
static double sort_val(const qs_evcfg *c, int key) { return c->v[qs_evstat_sort_key(key)]; }

/* The rows in display order (runs as stored; configs sorted within each run).  *out malloc'd. */
static int rows_of(tui *T, mrow **out)
{
    model_view *M = MV(T);
    int n = (int)M->nsens;
    for (size_t r = 0; r < M->nev; r++) n += 1 + M->ev[r].ncfg;
    mrow *m = malloc((size_t)(n ? n : 1) * sizeof *m);
    if (!m) return -1;
    int k = 0;
    for (size_t r = 0; r < M->nev; r++) {
        m[k++] = (mrow){(int)r, -1};
        int first = k;
        for (int c = 0; c < M->ev[r].ncfg; c++) {
            /* insertion sort (stable); NaN last */
            int j = k++;
            m[j] = (mrow){(int)r, c};
            if (!M->sort) continue;
            double v = sort_val(&M->ev[r].cfg[c], M->sort);
            while (j > first) {
                double u = sort_val(&M->ev[r].cfg[m[j - 1].cfg], M->sort);
                int before = isnan(u) ? 0 : isnan(v) ? 1 : M->sort_desc ? u >= v : u <= v;
                if (before) break;
                m[j] = m[j - 1];
                m[--j] = (mrow){(int)r, c};
            }
        }
    }
    for (size_t r = 0; r < M->nsens; r++) m[k++] = (mrow){(int)r, -2};
    *out = m;
    return n;
}

/* Put the cursor on the row whose key is `key` (none: the cursor stays where it is). */
static void find_key(tui *T, const char *key)
{
    model_view *M = MV(T);
    mrow *m;
    int n = rows_of(T, &m);
    if (n < 0 || !key[0]) { if (n >= 0) free(m); return; }
    char k[sizeof M->cur_key];
    for (int i = 0; i < n; i++) {
        row_key(M, &m[i], k, sizeof k);
        if (!strcmp(k, key)) { M->l.cur = i; break; }
    }
    free(m);
}

static void sens_line(const qs_sensrun *r, char *b, size_t cap)
{
    char plan[160] = "no plan stored";
    if (r->have_plan)
        snprintf(plan, sizeof plan, "plan (%s): %d in BF16, measured KL %.3g", r->target, r->npromoted, r->plan_kl);
    snprintf(b, cap, " sensitivity to %s  %s  %s  ctx %d: %d layers x %d sites; %s", r->format, r->model, r->text, r->ctx, r->layers,
             r->nsites, plan);
}

static void run_line(tui *T, const qs_evrun *r, char *b, size_t cap)
{
    char ppl[64];
    if (r->have_ref && isfinite(r->ref[QS_EVS_PPL]))
        snprintf(ppl, sizeof ppl, "reference PPL %.4g %s %.2g", r->ref[QS_EVS_PPL], T->ascii ? "+-" : "±", r->ref[QS_EVS_PPL_SE]);
    else snprintf(ppl, sizeof ppl, "reference not stored");
    snprintf(b, cap, " %s  %s  %s  ctx %d, %d chunk%s, %zu tokens scored (%s)", ppl, qs_evrun_model(r), r->text, r->ctx,
             r->chunks, r->chunks == 1 ? "" : "s", r->scored, strcmp(r->score, "all") ? "second half" : "all positions");
}

/* Columns a UTF-8 string takes (one per code point: "±" is one column, two bytes). */
static int u8cols(const char *s)
{
    int n = 0;
    for (; *s; s++) n += (*s & 0xC0) != 0x80;
    return n;
}

/* A number in at most 2 decimals, a small one (that would read 0.00) in 1 significant digit. */
static void num2(double v, int sign, char *b, size_t cap)
{
    double a = fabs(v);
    if (v != 0 && a < 0.005) snprintf(b, cap, sign ? "%+.1g" : "%.1g", v);
    else snprintf(b, cap, sign ? "%+.*f" : "%.*f", a < 10 ? 2 : 1, v);
}

/* One significant digit in exponent form without the exponent's leading zeros: 3e-3, -2e+1. */
static void sig1(double v, int sign, char *b, size_t cap)
{
    char t[32];
    snprintf(t, sizeof t, sign ? "%+.0e" : "%.0e", v);
    char *e = strchr(t, 'e');
    if (e && (e[1] == '-' || e[1] == '+')) {
        char *z = e + 2;
        while (z[0] == '0' && z[1]) memmove(z, z + 1, strlen(z));
        if (e[1] == '+') memmove(e + 1, e + 2, strlen(e + 1));   /* 2e1 */
    }
    snprintf(b, cap, "%.23s", t);
}

/* The Model view's cell of statistic id: the table's (llm_eval_stats.h), except that the dPPL
** interval keeps a digit for a small half-width and a value that is not zero never reads as zero
** (0.0000 becomes 3e-05); then right-aligned in the column by display width, so that "±" (two
** bytes) and "-" rows stay in line. */
static void model_cell(tui *T, int id, const double *v, char *out, size_t cap)
{
    const qs_evstat *r = &qs_evstats[id];
    const qs_evcol *c = &r->view[QS_EVV_TUI];
    char b[64];
    const double sc = r->scale ? r->scale : 1;
    if (c->kind == QS_EVF_INTERVAL && isfinite(v[id]) && isfinite(v[r->lo]) && isfinite(v[r->hi])) {
        char d[24], hw[24];
        num2(sc * v[id], 1, d, sizeof d);
        num2(0.5 * sc * (v[r->hi] - v[r->lo]), 0, hw, sizeof hw);
        const char *pm = T->ascii ? "+-" : "±";
        snprintf(b, sizeof b, "%s%s%s", d, pm, hw);
        double dv = fabs(sc * v[id]), hv = fabs(0.5 * sc * (v[r->hi] - v[r->lo]));
        if (u8cols(b) > c->width && ((dv < 0.005 && dv > 0) || (hv < 0.005 && hv > 0))) {   /* small: "+3e-3±2e-3" */
            sig1(sc * v[id], 1, d, sizeof d);
            sig1(0.5 * sc * (v[r->hi] - v[r->lo]), 0, hw, sizeof hw);
            snprintf(b, sizeof b, "%s%s%s", d, pm, hw);
        }
        if (u8cols(b) > c->width) snprintf(b, sizeof b, "%+.0f%s%.0f", sc * v[id], pm, 0.5 * sc * (v[r->hi] - v[r->lo]));
    } else {
        qs_evstat_cell(QS_EVV_TUI, id, v, T->ascii, b, sizeof b);
        int nonzero_digit = 0, digit = 0;
        for (const char *p = b; *p && *p != 'e'; p++) nonzero_digit |= *p >= '1' && *p <= '9', digit |= *p == '0';
        double x = sc * v[id];
        if (isfinite(x) && x != 0 && digit && !nonzero_digit) {   /* "0.0000" of 3e-05 */
            int prec = c->width - 6 - (x < 0);
            snprintf(b, sizeof b, "%.*e", prec > 0 ? prec : 0, x);
            if (prec <= 0) {   /* "3e-05": drop the exponent's leading zero when it is still too wide */
                char *e = strstr(b, "e-0");
                if (e && u8cols(b) > c->width) memmove(e + 2, e + 3, strlen(e + 3) + 1);
            }
        }
    }
    int pad = c->width - u8cols(b);
    if (pad < 0 || pad > 40) pad = 0;
    snprintf(out, cap, "%*s%.63s", pad, "", b);
}

/* "v ± se" in significant digits (never "±0.00000"), "-" when v is not finite. */
static void pm_sig(tui *T, double v, double se, char *b, size_t cap)
{
    if (!isfinite(v)) snprintf(b, cap, "-");
    else if (isfinite(se)) snprintf(b, cap, "%.5g %s %.2g", v, T->ascii ? "+-" : "±", se);
    else snprintf(b, cap, "%.5g", v);
}

/* The selected row's statistics in the rows [y, y + h): a config's every stored statistic with its
** standard error, a run's reference, a sensitivity table's plan. */
static void model_detail(tui *T, const mrow *q, int y, int h)
{
    model_view *M = MV(T);
    char b[600], a1[64], a2[64];
    int y1 = y + h;
#define LINE(...) do { if (y < y1) { snprintf(b, sizeof b, __VA_ARGS__); tui_addstr_clip(y++, 2, b, T->W - 3); } } while (0)
    if (q->cfg == -2) {
        sens_line(&M->sens[q->run], b, sizeof b);
        tui_addstr_wrapped(y, 2, b + 1, T->W - 4);
        return;
    }
    const qs_evrun *r = &M->ev[q->run];
    attron(A_BOLD);
    if (q->cfg == -1) LINE("reference (FP32): %zu tokens scored  (h: the plot)", r->scored);
    else LINE("%s: %zu tokens scored  (h: the plot)", r->cfg[q->cfg].label, r->cfg[q->cfg].scored);
    attroff(A_BOLD);
    const double *v = q->cfg >= 0 ? r->cfg[q->cfg].v : r->ref;
    pm_sig(T, v[QS_EVS_PPL], v[QS_EVS_PPL_SE], a1, sizeof a1);
    pm_sig(T, r->ref[QS_EVS_PPL], r->ref[QS_EVS_PPL_SE], a2, sizeof a2);
    if (q->cfg == -1) {
        LINE("PPL           %s", a1);
        pm_sig(T, v[QS_EVS_NLL_MEAN], v[QS_EVS_NLL_SE], a1, sizeof a1);
        LINE("mean NLL      %s nats", a1);
        return;
    }
    const qs_evcfg *c = &r->cfg[q->cfg];
    if (c->failed) { LINE("FAILED: %lld of %zu rows non-finite, no statistics", c->nonfinite_rows, r->scored); return; }
    LINE("PPL           %s   (reference %s)", a1, a2);
    num2(100 * v[QS_EVS_DPPL], 1, a1, sizeof a1);
    snprintf(a2, sizeof a2, "[%+.3g, %+.3g]", 100 * v[QS_EVS_DPPL_LO], 100 * v[QS_EVS_DPPL_HI]);
    LINE("dPPL          %s%%, 95%% interval %s %%", a1, a2);
    pm_sig(T, v[QS_EVS_PPL_RATIO], v[QS_EVS_PPL_RATIO_SE], a1, sizeof a1);
    pm_sig(T, v[QS_EVS_LNRATIO], v[QS_EVS_LNRATIO_SE], a2, sizeof a2);
    LINE("PPL ratio     %s   ln ratio %s", a1, a2);
    pm_sig(T, v[QS_EVS_KL_MEAN], v[QS_EVS_KL_SE], a1, sizeof a1);
    LINE("KL mean       %s nats", a1);
    static const char *const qn[] = {"min", "p0.1", "p1", "p5", "p10", "median", "p90", "p95", "p99", "p99.9", "max"};
    for (int pass = 0; pass < 2; pass++) {   /* the KL, then the dp quantiles */
        size_t k = (size_t)snprintf(b, sizeof b, "%s", pass ? "dp quantiles " : "KL quantiles ");
        int base = pass ? QS_EVS_DP_MIN : QS_EVS_KL_MIN;
        for (int i = 0; i < 11 && k < sizeof b; i++) {
            char t[64];
            snprintf(t, sizeof t, " %s %.3g", qn[i], v[base + i]);
            if (k + strlen(t) > (size_t)(T->W - 4) && y < y1) { tui_addstr_clip(y++, 2, b, T->W - 3); k = (size_t)snprintf(b, sizeof b, "%13s", ""); }
            k += (size_t)snprintf(b + k, sizeof b - k, "%s", t);
        }
        if (y < y1) tui_addstr_clip(y++, 2, b, T->W - 3);
        if (!pass) {
            pm_sig(T, 100 * v[QS_EVS_TOP1], 100 * v[QS_EVS_TOP1_SE], a1, sizeof a1);
            LINE("same top      %s %%", a1);
            pm_sig(T, v[QS_EVS_DP_RMS], v[QS_EVS_DP_RMS_SE], a1, sizeof a1);
            pm_sig(T, v[QS_EVS_DP_MEAN], v[QS_EVS_DP_MEAN_SE], a2, sizeof a2);
            LINE("dp RMS        %s   mean %s", a1, a2);
        }
    }
    LINE("Cor(ln p_config, ln p_ref)  %.5g", v[QS_EVS_COR]);
#undef LINE
}

static void model_draw(tui *T, int y0, int h)
{
    model_view *M = MV(T);
    load(T);
    if (!M->nev && !M->nsens) {
        attron(A_BOLD);
        tui_addstr_clip(y0 + 1, 2, "No stored model evaluations yet.", T->W - 4);
        attroff(A_BOLD);
        const char *b = "Press : and run `llm eval --model M --config a=mxfp4 --config kv=fp8_e4m3` (perplexity and KL "
                        "divergence of a model on a text under each format, against its FP32 reference); every run is "
                        "listed here with the KL distribution of each configuration.";
        /* wrapped at spaces */
        int y = y0 + 2, w = T->W - 4;
        while (*b && w > 0 && y < y0 + h) {
            int len = (int)strlen(b), cut = len;
            if (len > w) { cut = w; while (cut > 0 && b[cut] != ' ') cut--; if (!cut) cut = w; }
            mvaddnstr(y++, 2, b, cut);
            b += cut;
            while (*b == ' ') b++;
        }
        return;
    }
    mrow *m;
    int n = rows_of(T, &m);
    if (n < 0) return;
    int wide = T->W >= 100;
    /* list: at most half the height, the rest for the plot; on a short terminal a third (the plot
    ** needs its rows more than the list, which scrolls) */
    int list_h = h < 30 ? h / 3 : h / 2 - 1;
    if (list_h > n + 1) list_h = n + 1;
    if (list_h < 3) list_h = 3;
    int rows = list_h - 1;
    tui_list *l = &M->l;
    if (l->cur >= n) l->cur = n - 1;
    if (l->cur < 0) l->cur = 0;
    if (l->cur < l->top) l->top = l->cur;
    if (l->cur >= l->top + rows) l->top = l->cur - rows + 1;
    if (l->top > n - rows) l->top = n - rows;
    if (l->top < 0) l->top = 0;
    row_key(M, &m[l->cur], M->cur_key, sizeof M->cur_key);
    int lw = T->W - (wide ? 70 : 62);
    if (lw < 8) lw = 8;
    char line[800];
    attron(A_BOLD | A_UNDERLINE);
    size_t k = (size_t)snprintf(line, sizeof line, "   %-*s", lw, "CONFIG");
    for (int col = 1, id; (id = qs_evstat_column(QS_EVV_TUI, col)) && k < sizeof line; col++)
        if (wide || !qs_evstats[id].view[QS_EVV_TUI].wide_only)
            k += (size_t)snprintf(line + k, sizeof line - k, " %*s", qs_evstats[id].view[QS_EVV_TUI].width,
                                  qs_evstats[id].view[QS_EVV_TUI].head);
    move(y0, 0);
    for (int x = 0; x < T->W; x++) addch(' ');
    tui_addstr_clip(y0, 0, line, T->W);
    attroff(A_BOLD | A_UNDERLINE);
    T->click_list = l;
    T->click_y0 = y0 + 1;
    T->click_n = n;
    for (int i = 0; i < rows && l->top + i < n; i++) {
        const mrow *q = &m[l->top + i];
        const qs_evrun *r = q->cfg == -2 ? NULL : &M->ev[q->run];
        if (q->cfg < 0) {   /* a run's or a sensitivity table's summary: a long one says it was cut */
            char full[sizeof line];
            if (q->cfg == -2) sens_line(&M->sens[q->run], full, sizeof full);
            else run_line(T, r, full, sizeof full);
            tui_cut_end(full, T->W, line, sizeof line);
        }
        else {
            const qs_evcfg *c = &r->cfg[q->cfg];
            /* a long label is cut in its middle ("~"), where it differs from its run's others */
            const char *peers[64];
            int np = 0;
            for (int j = 0; j < r->ncfg && np < 64; j++) peers[np++] = r->cfg[j].label;
            char lab[128];
            tui_cut_middle(c->label, peers, np, lw - 1, lab, sizeof lab);
            size_t at = (size_t)snprintf(line, sizeof line, "   %s%*s%s", lab, lw - 1 - u8cols(lab), "",
                                        c->has_w && qs_evrun_quantized_origin(r) ? "*" : " ");
            if (c->failed)   /* not one finite row: no numbers to show */
                snprintf(line + at, sizeof line - at, " FAILED (%lld of %zu rows non-finite): no statistics",
                         c->nonfinite_rows, r->scored);
            for (int col = 1, id; !c->failed && (id = qs_evstat_column(QS_EVV_TUI, col)) && at < sizeof line; col++) {
                if (!wide && qs_evstats[id].view[QS_EVV_TUI].wide_only) continue;
                char cell[128];
                model_cell(T, id, c->v, cell, sizeof cell);
                at += (size_t)snprintf(line + at, sizeof line - at, " %s", cell);
            }
        }
        int y = y0 + 1 + i, sel = l->top + i == l->cur;
        if (sel) { attron(T->color ? COLOR_PAIR(CP_SEL) : A_REVERSE); move(y, 0); for (int x = 0; x < T->W; x++) addch(' '); }
        else if (q->cfg < 0) attron(A_BOLD);
        tui_addstr_clip(y, 0, line, T->W);
        if (sel) { mvaddch(y, 0, '>'); attroff(T->color ? COLOR_PAIR(CP_SEL) : A_REVERSE); }
        else if (q->cfg < 0) attroff(A_BOLD);
    }
    /* the selected run's caveat, then its KL plot; or a sensitivity table's heatmap */
    const mrow *q = &m[l->cur];
    int py = y0 + list_h;
    if (M->detail) {
        model_detail(T, q, py, y0 + h - py);
        free(m);
        return;
    }
    if (q->cfg == -2) {
        const qs_sensrun *S = &M->sens[q->run];
        free(m);
        T->fig = qs_plot_sensitivity(S);
        if (!T->fig) return;
        snprintf(T->fig_hash, sizeof T->fig_hash, "%s", S->model_hash);
        snprintf(T->fig_what, sizeof T->fig_what, "sensitivity-%s", S->format);
        tui_draw_figure_short(T, T->fig, py, 0, y0 + h - py, T->W);
        return;
    }
    const qs_evrun *r = &M->ev[q->run];
    char cav[300];
    qs_evrun_caveat(r, cav, sizeof cav);
    if (cav[0]) {
        snprintf(line, sizeof line, "* %s", cav);
        attron(T->color ? COLOR_PAIR(CP_DIM) : A_DIM);
        tui_addstr_clip(py++, 1, line, T->W - 2);
        attroff(T->color ? COLOR_PAIR(CP_DIM) : A_DIM);
    }
    int sel[64], ns = 0;
    if (q->cfg >= 0) sel[ns++] = q->cfg;
    else
        for (int i = l->cur + 1; i < n && m[i].cfg >= 0 && m[i].run == q->run && ns < 64; i++) sel[ns++] = m[i].cfg;
    free(m);
    if (!ns) { tui_addstr_clip(py + 1, 2, "This run has no configurations stored: only its reference.", T->W - 4); return; }
    T->fig = qs_plot_kl(r, sel, ns, M->cdf);
    if (!T->fig) return;
    snprintf(T->fig_hash, sizeof T->fig_hash, "%s", r->model_hash);
    if (ns == 1) snprintf(T->fig_what, sizeof T->fig_what, "kl-%s", r->cfg[sel[0]].label);
    else snprintf(T->fig_what, sizeof T->fig_what, "kl-%s", qs_evrun_model(r));
    tui_draw_figure_short(T, T->fig, py, 0, y0 + h - py, T->W);
}

static int model_key(tui *T, tui_act a, int page)
{
    model_view *M = MV(T);
    load(T);   /* keys typed with the view's key arrive before its first frame */
    mrow *m;
    int n = rows_of(T, &m);
    if (n < 0) return 0;
    free(m);
    tui_list *l = &M->l;
    switch (a) {
    case TA_DOWN: if (l->cur < n - 1) l->cur++; return 1;
    case TA_UP: if (l->cur > 0) l->cur--; return 1;
    case TA_PGDN: l->cur = l->cur + page < n ? l->cur + page : n - 1; return 1;
    case TA_PGUP: l->cur = l->cur > page ? l->cur - page : 0; return 1;
    case TA_HOME: l->cur = 0; return 1;
    case TA_END: l->cur = n ? n - 1 : 0; return 1;
    case TA_HIST_KIND: M->cdf = !M->cdf; return 1;
    case TA_SORT:
    case TA_SORT_REV: {
        char key[sizeof M->cur_key] = "";   /* the cursor stays on its config */
        if (l->cur >= 0 && l->cur < n && rows_of(T, &m) == n) { row_key(M, &m[l->cur], key, sizeof key); free(m); }
        if (a == TA_SORT) { M->sort = qs_evstat_sort_key(M->sort + 1) ? M->sort + 1 : 0; M->sort_desc = 0; }
        else M->sort_desc = !M->sort_desc;
        find_key(T, key);
        tui_set_msg(T, 0, "configs sorted by %s%s", M->sort ? qs_evstats[qs_evstat_sort_key(M->sort)].label : "as evaluated",
                    M->sort && M->sort_desc ? ", descending" : "");
        return 1;
    }
    case TA_ENTER: M->detail = !M->detail; return 1;   /* the row's statistics, or the plot again */
    case TA_BACK:
        if (!M->detail) return 0;
        M->detail = 0;
        return 1;
    default: return 0;
    }
}

static void model_changed(tui *T, int what)
{
    if (what == TUI_CH_DB || what == TUI_CH_DATA) MV(T)->loaded = 0;   /* read again at the next frame, cursor kept */
}

const tui_view_ops tui_view_model = {
    .name = "Model", .state_size = sizeof(model_view),
    .about = {"stored `llm eval` runs: reference perplexity, then per config PPL, dPPL with",
              "its 95% interval, KL mean/median/p99/max, same top token, RMS dp (s sorts",
              "by KL or dPPL); the KL distribution of the selected config below (v: CDF);",
              "Enter: every statistic of the selected row (its SEs, quantiles), h: the plot."},
    .draw = model_draw, .key = model_key, .changed = model_changed, .done = model_done,
};
