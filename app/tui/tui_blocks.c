/*
** The Blocks view and the Block inspector.
**
** Blocks: the per-block RMSE stored by `analyze --blocks` ("blocks" result, blob "rmse") drawn as a
** grid, one cell per block, shaded by log10 RMSE over the tensor's range (8 levels: ▁▂▃▄▅▆▇█, or
** .:-=+*#@ in ASCII; viridis colours when colour is on).  Rows of the tensor go down and the blocks
** of a row across (axis 1); with axis 0 the block-rows go down and the columns across; a 1-D
** tensor's blocks wrap as a strip.  A side panel shows the selected block's statistics.
**
** Inspector: the block's elements are read from the tensor and encoded again with the format
** (encode for the codes and metadata, fakeq for the values, exactly as the analysis does: the same
** runs, block boundaries, SR counters and NVFP4 tensor scale); the second format encodes the same
** elements inside its own blocks (which may be larger, smaller or along the other axis).
*/
#include <curses.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tui_view.h"
#include "../../store/tensor.h"

typedef struct blocks_view {
    int cur;                      /* the selected block */
    int top;                      /* first grid row shown */
    int second;                   /* the Inspector's side-by-side format (-1 none) */
} blocks_view;

typedef struct tui_insp tui_insp;
typedef struct insp_view { tui_insp *insp; } insp_view;   /* the block read and encoded, or NULL */

static blocks_view *bv(tui *T) { return tui_state(T, TV_BLOCKS); }
static insp_view *iv(tui *T) { return tui_state(T, TV_INSPECT); }
static void inspect_free(tui *T);
static int inspect_open(tui *T);

static int addstr_wrap(int y, int x, const char *s, int w, const char *sep);

/* ------------------------------------------------------------ Blocks view */

static const char *const kRampU[8] = {"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
static const char kRampA[8] = {'.', ':', '-', '=', '+', '*', '#', '@'};

static int heat_level(const tui_blocks *b, double v)
{
    if (!(v > 0) || !isfinite(v)) return -1;
    double t = b->hi > b->lo ? (log10(v) - b->lo) / (b->hi - b->lo) : 1;
    int k = (int)(t * 8);
    return k < 0 ? 0 : k > 7 ? 7 : k;
}

/* Display grid of the blocks: vr x vc cells; strip = 1-D blocks wrapped at vc. */
typedef struct vgrid { uint64_t vr, vc; int strip, swap; } vgrid;

static void vgrid_of(tui *T, const qs_block_geom *g, int gw, vgrid *v)
{
    (void)T;
    memset(v, 0, sizeof *v);
    uint64_t runs = g->whole ? 1 : g->col ? g->cols : g->rows;
    if (runs == 1 || g->per == 1) {   /* one run (1-D) or one block per run: a wrapped strip */
        v->strip = 1;
        v->vc = (uint64_t)(gw > 0 ? gw : 1);
        if (v->vc > g->nblocks) v->vc = g->nblocks ? g->nblocks : 1;
        v->vr = (g->nblocks + v->vc - 1) / v->vc;
        return;
    }
    if (g->col) { v->swap = 1; v->vr = g->per; v->vc = runs; }
    else { v->vr = runs; v->vc = g->per; }
}

static void vg_pos(const vgrid *v, const qs_block_geom *g, uint64_t b, uint64_t *r, uint64_t *c)
{
    if (v->strip) { *r = b / v->vc; *c = b % v->vc; return; }
    uint64_t run = b / g->per, k = b % g->per;
    if (v->swap) { *r = k; *c = run; }
    else { *r = run; *c = k; }
}

static int64_t vg_block(const vgrid *v, const qs_block_geom *g, uint64_t r, uint64_t c)
{
    uint64_t b;
    if (v->strip) b = r * v->vc + c;
    else if (v->swap) b = c * g->per + r;
    else b = r * g->per + c;
    return b < g->nblocks ? (int64_t)b : -1;
}

static int ensure_blocks(tui *T)
{
    int ti = tui_cur_tensor_index(T);
    int fi = T->forder && T->lf.cur < T->nfmts ? T->forder[T->lf.cur] : 0;
    if (T->view == TV_INSPECT && T->blk_fmt >= 0) fi = T->blk_fmt;
    if (T->blk_for != ti || T->blk_fmt != fi) {
        tui_load_blocks(T, ti, fi);
        bv(T)->cur = 0;
        bv(T)->top = 0;
        inspect_free(T);
    }
    return T->blk.have;
}

/* The side panel's lines about the selected block (the first is its heading); returns the count. */
enum { PANEL_LINES = 8, PANEL_LW = 96 };
static int panel_text(tui *T, const qs_block_geom *g, char s[PANEL_LINES][PANEL_LW])
{
    tui_blocks *B = &T->blk;
    uint64_t b = (uint64_t)bv(T)->cur;
    char v1[32], v2[32];
    int n = 0;
    snprintf(s[n++], PANEL_LW, "block %llu of %llu", (unsigned long long)b, (unsigned long long)B->nblocks);
    uint64_t idx[2], i0;
    if (qs_block_geom_elems(g, b, idx, 1, &i0)) {
        uint64_t r = idx[0] / g->cols, c = idx[0] % g->cols;
        size_t len = g->blk ? g->blk : (size_t)g->runlen;
        if (g->whole) snprintf(s[n++], PANEL_LW, "the whole tensor");
        else if (g->col) snprintf(s[n++], PANEL_LW, "column %llu, rows %llu-%llu", (unsigned long long)c, (unsigned long long)r,
                                  (unsigned long long)(r + len - 1 < g->rows ? r + len - 1 : g->rows - 1));
        else snprintf(s[n++], PANEL_LW, "row %llu, cols %llu-%llu", (unsigned long long)r, (unsigned long long)c,
                      (unsigned long long)(c + len - 1 < g->cols ? c + len - 1 : g->cols - 1));
    }
    tui_fmt_num(B->rmse[b], v1, sizeof v1);
    snprintf(s[n++], PANEL_LW, "RMSE      %s", v1);
    if (B->absmax) { tui_fmt_num(B->absmax[b], v1, sizeof v1); snprintf(s[n++], PANEL_LW, "absmax    %s", v1); }
    if (B->scale) {
        const qs_format *f = T->fmts[T->blk_fmt].a.f;
        tui_fmt_num(qs_format_scale_value(f, B->scale[b]), v2, sizeof v2);
        snprintf(s[n++], PANEL_LW, "scale     0x%02x = %s", B->scale[b], v2);
    }
    if (B->ratio) { tui_fmt_num(B->ratio[b], v1, sizeof v1); snprintf(s[n++], PANEL_LW, "amax/scale %s", v1); }
    /* rank of this block's error */
    uint64_t worse = 0;
    for (uint64_t i = 0; i < B->nblocks; i++) worse += B->rmse[i] > B->rmse[b];
    snprintf(s[n++], PANEL_LW, "err rank  %llu of %llu", (unsigned long long)(worse + 1), (unsigned long long)B->nblocks);
    return n;
}

/* The panel's columns: its longest line and the blank before it, at least 32 (so that it does not jump
** from block to block), at most half the screen. */
static int panel_width(tui *T, const qs_block_geom *g)
{
    char s[PANEL_LINES][PANEL_LW];
    int w = 32, cur = bv(T)->cur;
    for (int pass = 0; pass < 2; pass++) {   /* this block's lines and the last block's (the longest numbers) */
        if (pass) bv(T)->cur = (int)(T->blk.nblocks - 1);
        int n = panel_text(T, g, s);
        for (int i = 0; i < n; i++)
            if ((int)strlen(s[i]) + 1 > w) w = (int)strlen(s[i]) + 1;
    }
    bv(T)->cur = cur;
    int rank = snprintf(s[0], PANEL_LW, "err rank  %llu of %llu", (unsigned long long)T->blk.nblocks,
                        (unsigned long long)T->blk.nblocks);
    if (rank + 1 > w) w = rank + 1;
    return w < T->W / 2 ? w : T->W / 2;
}

static void side_panel(tui *T, const qs_block_geom *g, int y, int x, int w)
{
    tui_blocks *B = &T->blk;
    char s[200], v1[32], lines[PANEL_LINES][PANEL_LW];
    int n = panel_text(T, g, lines);
    for (int i = 0; i < n; i++) {
        if (!i) attron(A_BOLD);
        tui_addstr_clip(y++, x, lines[i], w);
        if (!i) attroff(A_BOLD);
    }
    y++;
    attron(A_BOLD);
    tui_addstr_clip(y++, x, "log10 RMSE scale", w);
    attroff(A_BOLD);
    for (int k = 7; k >= 0; k--) {
        double lo = B->lo + (B->hi - B->lo) * k / 8.0;
        if (T->color) attron(COLOR_PAIR(CP_HEAT0 + k));
        if (T->ascii) mvaddch(y, x, (chtype)kRampA[k]);
        else mvaddstr(y, x, kRampU[k]);
        if (T->color) attroff(COLOR_PAIR(CP_HEAT0 + k));
        tui_fmt_num(isfinite(lo) ? pow(10, lo) : NAN, v1, sizeof v1);
        snprintf(s, sizeof s, " >= %s", v1);
        tui_addstr_clip(y++, x + 1, s, w - 1);
    }
    tui_addstr_clip(y++, x, "  (blank: exact, ! NaN/Inf)", w);
}

static void blocks_draw(tui *T, int y0, int h)
{
    tui_tensor *t = tui_cur_tensor(T);
    if (!t) { tui_addstr_clip(y0 + 1, 2, "No tensor selected: go to the Tensors view (1) and pick one.", T->W - 4); return; }
    if (!ensure_blocks(T)) {
        const tui_fmt *F = T->blk_fmt >= 0 && T->blk_fmt < T->nfmts ? &T->fmts[T->blk_fmt] : NULL;
        attron(A_BOLD);
        tui_addstr_clip(y0 + 1, 2, "No per-block results for this tensor and format yet.", T->W - 4);
        attroff(A_BOLD);
        char s[300];
        if (F && F->a.f->block == 1)
            snprintf(s, sizeof s, "%s is an element cast: it has no blocks.  Pick a block format in the Formats view (2).", F->label);
        else snprintf(s, sizeof s, "%s", T->job.busy ? "They are being computed in the background (see the status line)."
                                          : "Press r to compute them, or pick another format in the Formats view (2).");
        addstr_wrap(y0 + 2, 2, s, T->W - 4, "  ");
        return;
    }
    tui_blocks *B = &T->blk;
    const tui_fmt *F = &T->fmts[T->blk_fmt];
    qs_block_geom g;
    qs_block_geom_of(&F->a, B->rows, B->cols, &g);
    if (g.nblocks != B->nblocks) {
        tui_addstr_clip(y0 + 1, 2, "The stored block layout does not match the format's options; press r to recompute.", T->W - 4);
        return;
    }
    int pw = panel_width(T, &g), gw = T->W - pw - 3, gh = h - 2;
    vgrid v;
    vgrid_of(T, &g, gw, &v);
    char s[300];
    snprintf(s, sizeof s, "%llu block%s of %llu (%s), grid %llu x %llu%s", (unsigned long long)B->nblocks, B->nblocks == 1 ? "" : "s",
             (unsigned long long)(g.whole ? g.rows * g.cols : g.blk ? g.blk : (g.col ? g.rows : g.cols)),
             g.whole ? "whole tensor" : g.col ? "down columns" : "along rows", (unsigned long long)v.vr, (unsigned long long)v.vc,
             v.strip ? " (wrapped strip)" : v.swap ? " (block-rows down, columns across)" : " (rows down, blocks across)");
    tui_addstr_clip(y0, 1, s, T->W - 2);
    uint64_t cr, cc;
    if (bv(T)->cur < 0) bv(T)->cur = 0;
    if ((uint64_t)bv(T)->cur >= B->nblocks) bv(T)->cur = (int)(B->nblocks - 1);
    vg_pos(&v, &g, (uint64_t)bv(T)->cur, &cr, &cc);
    /* viewport: keep the cursor inside */
    if ((int64_t)cr < bv(T)->top) bv(T)->top = (int)cr;
    if ((int64_t)cr >= bv(T)->top + gh) bv(T)->top = (int)cr - gh + 1;
    int cwid = !v.strip && v.vc * 2 <= (uint64_t)gw ? 2 : 1;   /* two cells per block when they fit */
    gw /= cwid;
    uint64_t left = cc >= (uint64_t)gw ? cc - (uint64_t)gw + 1 : 0;
    for (int r = 0; r < gh && (uint64_t)(bv(T)->top + r) < v.vr; r++) {
        for (int c = 0; c < gw && left + (uint64_t)c < v.vc; c++) {
            int64_t b = vg_block(&v, &g, (uint64_t)(bv(T)->top + r), left + (uint64_t)c);
            if (b < 0) break;
            double val = B->rmse[b];
            int k = heat_level(B, val);
            int cur = b == bv(T)->cur;
            if (cur) attron(A_REVERSE | A_BOLD);
            if (T->color && k >= 0) attron(COLOR_PAIR(CP_HEAT0 + k));
            int yy = y0 + 1 + r;
            for (int q = 0; q < cwid; q++) {
                int xx = 1 + c * cwid + q;
                if (k < 0) mvaddch(yy, xx, isnan(val) || isinf(val) ? '!' : (cur ? 'o' : ' '));
                else if (T->ascii) mvaddch(yy, xx, (chtype)kRampA[k]);
                else mvaddstr(yy, xx, kRampU[k]);
            }
            if (T->color && k >= 0) attroff(COLOR_PAIR(CP_HEAT0 + k));
            if (cur) attroff(A_REVERSE | A_BOLD);
        }
    }
    if (v.vr > (uint64_t)gh || v.vc > (uint64_t)gw) {
        snprintf(s, sizeof s, "showing grid rows %d-%llu of %llu, columns %llu-%llu of %llu", bv(T)->top,
                 (unsigned long long)((uint64_t)(bv(T)->top + gh) < v.vr ? (uint64_t)(bv(T)->top + gh - 1) : v.vr - 1),
                 (unsigned long long)v.vr, (unsigned long long)left,
                 (unsigned long long)(left + (uint64_t)gw < v.vc ? left + (uint64_t)gw - 1 : v.vc - 1), (unsigned long long)v.vc);
        if ((int)strlen(s) > gw)   /* under a narrow grid: the short form, then rows only */
            snprintf(s, sizeof s, "rows %d-%llu/%llu, cols %llu-%llu/%llu", bv(T)->top,
                     (unsigned long long)((uint64_t)(bv(T)->top + gh) < v.vr ? (uint64_t)(bv(T)->top + gh - 1) : v.vr - 1),
                     (unsigned long long)v.vr, (unsigned long long)left,
                     (unsigned long long)(left + (uint64_t)gw < v.vc ? left + (uint64_t)gw - 1 : v.vc - 1), (unsigned long long)v.vc);
        if ((int)strlen(s) > gw)
            snprintf(s, sizeof s, "rows %d-%llu of %llu", bv(T)->top,
                     (unsigned long long)((uint64_t)(bv(T)->top + gh) < v.vr ? (uint64_t)(bv(T)->top + gh - 1) : v.vr - 1),
                     (unsigned long long)v.vr);
        tui_addstr_clip(y0 + h - 1, 1, s, gw);
    }
    side_panel(T, &g, y0 + 1, T->W - pw, pw - 1);
    /* the heatmap as a figure for `e` (exported through the PNG renderer at full resolution) */
    if (!v.strip) {
        float *m = malloc(B->nblocks * sizeof *m);
        if (m) {
            for (uint64_t b = 0; b < B->nblocks; b++) {
                uint64_t r, c;
                vg_pos(&v, &g, b, &r, &c);
                m[r * v.vc + c] = B->rmse[b];
            }
            char title[300];
            snprintf(title, sizeof title, "%s under %s: block RMSE", tui_cur_tensor(T)->name, F->label);
            T->fig = qs_plot_block_heatmap(title, m, v.vr, v.vc, 1, "block RMSE", v.swap ? "column" : "block along the row",
                                           v.swap ? "block-row" : "row", 400);
            free(m);
        }
    } else {
        double *x = malloc(B->nblocks * sizeof *x), *yv = malloc(B->nblocks * sizeof *yv);
        if (x && yv) {
            for (uint64_t b = 0; b < B->nblocks; b++) { x[b] = (double)b; yv[b] = B->rmse[b]; }
            qs_line_data ld = {F->label, B->nblocks, x, yv};
            char title[300];
            snprintf(title, sizeof title, "%s under %s: block RMSE", tui_cur_tensor(T)->name, F->label);
            T->fig = qs_plot_lines(title, "block", QS_AX_LINEAR, "block RMSE", QS_AX_LOG10, &ld, 1);
        }
        free(x);
        free(yv);
    }
    snprintf(T->fig_what, sizeof T->fig_what, "blocks-%s-%s", tui_cur_tensor(T)->name, F->label);
}

static int blocks_key(tui *T, tui_act a, int list_page)
{
    (void)list_page;   /* a page of the grid: the screen's height */
    if (a == TA_ENTER) { if (ensure_blocks(T) && inspect_open(T) == 0) tui_push(T, TV_INSPECT); return 1; }
    if (a == TA_SECOND) {
        bv(T)->second = bv(T)->second + 1 >= T->nfmts ? -1 : bv(T)->second + 1;
        return 1;
    }
    if (!T->blk.have) return 0;
    tui_blocks *B = &T->blk;
    qs_block_geom g;
    qs_block_geom_of(&T->fmts[T->blk_fmt].a, B->rows, B->cols, &g);
    vgrid v;
    vgrid_of(T, &g, T->W - 32 - 3, &v);
    uint64_t r, c;
    vg_pos(&v, &g, (uint64_t)bv(T)->cur, &r, &c);
    int64_t page = T->H - 6;
    int64_t nr = (int64_t)r, nc = (int64_t)c;
    switch (a) {
    case TA_DOWN: nr++; break;
    case TA_UP: nr--; break;
    case TA_LEFT: nc--; break;
    case TA_RIGHT: nc++; break;
    case TA_PGDN: nr += page; break;
    case TA_PGUP: nr -= page; break;
    case TA_HOME: bv(T)->cur = 0; return 1;
    case TA_END: bv(T)->cur = (int)(B->nblocks - 1); return 1;
    case TA_WORST: {
        uint64_t w = 0;
        for (uint64_t i = 1; i < B->nblocks; i++)
            if (B->rmse[i] > B->rmse[w] || (isnan(B->rmse[i]) && !isnan(B->rmse[w]))) w = i;
        bv(T)->cur = (int)w;
        tui_set_msg(T, 0, "block %llu has the largest RMSE", (unsigned long long)w);
        return 1;
    }
    case TA_TAB: tui_pop(T); return 1;   /* Formats -> Histogram -> Blocks -> Formats */
    default: return 0;
    }
    if (nc < 0 && v.strip && nr > 0) { nr--; nc = (int64_t)v.vc - 1; }
    if (nc >= (int64_t)v.vc && v.strip) { nr++; nc = 0; }
    if (nr < 0) nr = 0;
    if (nc < 0) nc = 0;
    if (nr >= (int64_t)v.vr) nr = (int64_t)v.vr - 1;
    if (nc >= (int64_t)v.vc) nc = (int64_t)v.vc - 1;
    int64_t b = vg_block(&v, &g, (uint64_t)nr, (uint64_t)nc);
    if (b < 0) b = (int64_t)B->nblocks - 1;
    bv(T)->cur = (int)b;
    return 1;
}

/* ------------------------------------------------------------ Block inspector */

#define INSP_MAX 65536

typedef struct side {
    int fi;                        /* format entry */
    const qs_format *f;
    uint32_t *code;                /* per shown element */
    float *y, *S;                  /* value, element scale (value of one element step) */
    uint8_t *meta;                 /* per shown element: its block's metadata (meta_bytes each) */
    uint64_t *blk;                 /* per shown element: its block id in this format */
    float *top;                    /* per shown element: the largest finite |value| of its whole block */
    float ts;                      /* NVFP4 tensor scale */
    int ok;
    char err[700];
} side;

struct tui_insp {
    int ti, fi;
    uint64_t b;
    size_t n;
    uint64_t *idx;
    float *x;
    side s[2];
    int cur, top;
    double absmax;
};

static void side_free(side *s)
{
    free(s->code); free(s->y); free(s->S); free(s->meta); free(s->blk); free(s->top);
    memset(s, 0, sizeof *s);
}

static void inspect_free(tui *T)
{
    if (!iv(T)->insp) return;
    side_free(&iv(T)->insp->s[0]);
    side_free(&iv(T)->insp->s[1]);
    free(iv(T)->insp->idx);
    free(iv(T)->insp->x);
    free(iv(T)->insp);
    iv(T)->insp = NULL;
}

/* Encode the shown elements with format entry F, block by block of F's own geometry. */
static void side_fill(tui *T, tui_insp *I, side *S, int fi, qs_treader *rd)
{
    const tui_fmt *F = &T->fmts[fi];
    tui_tensor *t = &T->t[I->ti];
    S->fi = fi;
    S->f = F->a.f;
    size_t n = I->n, mb = (size_t)(S->f->meta_bytes > 0 ? S->f->meta_bytes : 1);
    S->code = calloc(n, sizeof *S->code);
    S->y = calloc(n, sizeof *S->y);
    S->S = calloc(n, sizeof *S->S);
    S->meta = calloc(n * mb, 1);
    S->blk = calloc(n, sizeof *S->blk);
    S->top = calloc(n, sizeof *S->top);
    if (!S->code || !S->y || !S->S || !S->meta || !S->blk || !S->top) { snprintf(S->err, sizeof S->err, "out of memory"); return; }
    qs_block_geom g;
    qs_block_geom_of(&F->a, t->rows, t->cols, &g);
    qs_qopts o = F->a.o;
    if (F->a.gran != QS_GRAN_BLOCK) o.block = 0;
    if (S->f->has_tensor_scale && !(o.tensor_scale > 0)) o.tensor_scale = I->absmax > 0 ? (float)I->absmax : 0;
    qs_err e = {{0}};
    if (qs_qopts_check(S->f, &o, &e)) { snprintf(S->err, sizeof S->err, "%s", e.msg); return; }
    size_t cap = g.blk ? g.blk : (size_t)g.runlen;
    if (cap > (16u << 20)) { snprintf(S->err, sizeof S->err, "a %s block here has %zu values: too large to re-encode", S->f->name, cap); return; }
    uint64_t *bi = malloc(cap * sizeof *bi);
    float *bx = malloc(cap * sizeof *bx), *by = malloc(cap * sizeof *by), *one = malloc(cap * sizeof *one);
    uint32_t *bc = malloc(cap * sizeof *bc);
    size_t nbm = qs_format_nblocks(S->f, &o, cap);
    uint8_t *bm = calloc((nbm ? nbm : 1) * mb, 1);
    if (!bi || !bx || !by || !bc || !bm || !one) { snprintf(S->err, sizeof S->err, "out of memory"); goto out; }
    for (size_t i = 0; i < n; i++) S->blk[i] = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        if (S->blk[i] != UINT64_MAX) continue;
        uint64_t b = qs_block_geom_block_of(&g, I->idx[i]), i0;
        size_t m = qs_block_geom_elems(&g, b, bi, cap, &i0);
        /* read the block (contiguous runs in one call) */
        for (size_t k = 0; k < m;) {
            size_t run = 1;
            while (k + run < m && bi[k + run] == bi[k] + run) run++;
            if (qs_treader_read_f32(rd, bi[k], run, bx + k, &e)) { snprintf(S->err, sizeof S->err, "%s", e.msg); goto out; }
            k += run;
        }
        qs_qopts oo = o;
        oo.index0 = o.index0 + i0;
        float ts = 1;
        memset(bm, 0, (nbm ? nbm : 1) * mb);
        if (S->f->encode(S->f, &oo, bx, m, bc, bm, &ts, &e) || S->f->fakeq(S->f, &oo, bx, m, by, &e)) {
            snprintf(S->err, sizeof S->err, "%s", e.msg);
            goto out;
        }
        S->ts = ts;
        /* element scale: the "one step" code in every position with this block's metadata */
        qs_format_elem_steps(S->f, &oo, bm, ts, m, one);
        /* hand out to every shown element of this block (bi is ascending: binary search) */
        size_t bs = qs_format_block(S->f, &oo);
        float top = 0;
        for (size_t k = 0; k < m; k++)
            if (isfinite(by[k]) && fabsf(by[k]) > top) top = fabsf(by[k]);
        for (size_t j = 0; j < n; j++) {
            if (S->blk[j] != UINT64_MAX || qs_block_geom_block_of(&g, I->idx[j]) != b) continue;
            size_t lo = 0, hi = m;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (bi[mid] < I->idx[j]) lo = mid + 1;
                else hi = mid;
            }
            if (lo >= m || bi[lo] != I->idx[j]) continue;
            size_t k = lo;
            S->code[j] = bc[k];
            S->y[j] = by[k];
            S->S[j] = one[k];
            S->blk[j] = b;
            S->top[j] = top;
            size_t sub = bs ? k / bs : 0;   /* metadata record of the element's (sub-)block */
            if (S->f->meta_bytes > 0) memcpy(S->meta + j * mb, bm + sub * mb, mb);
        }
    }
    S->ok = 1;
out:
    free(bi); free(bx); free(by); free(bc); free(bm); free(one);
}

static int inspect_open(tui *T)
{
    inspect_free(T);
    int ti = tui_cur_tensor_index(T);
    if (ti < 0 || !T->blk.have) return -1;
    tui_tensor *t = &T->t[ti];
    tui_insp *I = calloc(1, sizeof *I);
    if (!I) return -1;
    I->ti = ti;
    I->fi = T->blk_fmt;
    I->b = (uint64_t)bv(T)->cur;
    I->absmax = t->absmax;
    qs_block_geom g;
    qs_block_geom_of(&T->fmts[I->fi].a, t->rows, t->cols, &g);
    size_t cap = g.blk ? g.blk : (size_t)g.runlen;
    if (cap > INSP_MAX) cap = INSP_MAX;
    I->idx = malloc(cap * sizeof *I->idx);
    I->x = malloc(cap * sizeof *I->x);
    qs_err e = {{0}};
    qs_tensor_rec rec;
    memset(&rec, 0, sizeof rec);
    qs_treader *rd = NULL;
    if (!I->idx || !I->x || qs_tensor_get(T->db, t->name, &rec, &e) || !(rd = qs_treader_open(T->db, &rec, &e))) {
        tui_set_msg(T, 1, "cannot read %s: %s", t->name, e.msg[0] ? e.msg : "out of memory");
        qs_tensor_rec_free(&rec);
        iv(T)->insp = I;
        inspect_free(T);
        return -1;
    }
    uint64_t i0;
    I->n = qs_block_geom_elems(&g, I->b, I->idx, cap, &i0);
    for (size_t k = 0; k < I->n;) {   /* contiguous runs in one read each */
        size_t run = 1;
        while (k + run < I->n && I->idx[k + run] == I->idx[k] + run) run++;
        if (qs_treader_read_f32(rd, I->idx[k], run, I->x + k, &e)) { tui_set_msg(T, 1, "%s", e.msg); break; }
        k += run;
    }
    if (isnan(I->absmax)) {   /* no statistics: the NVFP4 tensor scale needs the absmax */
        float am = 0;
        if (!qs_format_absmax(qs_treader_read_cb, rd, t->numel, &am, &e)) I->absmax = am;
    }
    side_fill(T, I, &I->s[0], I->fi, rd);
    if (bv(T)->second < 0 || bv(T)->second == I->fi || bv(T)->second >= T->nfmts) {
        /* default partner: the next block format of the list, else the next format */
        bv(T)->second = -1;
        for (int k = 1; k < T->nfmts && bv(T)->second < 0; k++) {
            int c = (I->fi + k) % T->nfmts;
            if (T->fmts[c].a.f->block != 1) bv(T)->second = c;
        }
        if (bv(T)->second < 0 && T->nfmts > 1) bv(T)->second = (I->fi + 1) % T->nfmts;
    }
    if (bv(T)->second >= 0) side_fill(T, I, &I->s[1], bv(T)->second, rd);
    qs_treader_close(rd);
    qs_tensor_rec_free(&rec);
    iv(T)->insp = I;
    return 0;
}

/* ---- drawing ---- */

static int draw_segs(tui *T, int y, int x, const qs_format *f, uint32_t code, int sel)
{
    qs_code_field s[QS_MAX_FIELDS];
    int n = qs_format_code_fields(f, code, s);
    int cx = x;
    static const int pairs[4] = {CP_SIGN, CP_EXP, CP_MANT, 0};
    for (int i = 0; i < n; i++) {
        if (i) mvaddch(y, cx++, ' ');
        int p = pairs[s[i].kind];
        if (T->color && p && !sel) attron(COLOR_PAIR(p) | A_BOLD);
        mvaddstr(y, cx, s[i].bits);
        if (T->color && p && !sel) attroff(COLOR_PAIR(p) | A_BOLD);
        cx += (int)strlen(s[i].bits);
    }
    return cx - x;
}

/* Text at (y, x) in at most w columns, on a second line when it does not fit: broken after the last
** separator `sep` that fits.  Returns the lines used (1 or 2). */
static int addstr_wrap(int y, int x, const char *s, int w, const char *sep)
{
    int n = (int)strlen(s);   /* the texts here are ASCII */
    if (n <= w || w <= 0) { tui_addstr_clip(y, x, s, w); return 1; }
    int cut = -1;
    for (const char *p = strstr(s, sep); p && p - s + (int)strlen(sep) <= w; p = strstr(p + 1, sep)) cut = (int)(p - s);
    if (cut <= 0) { tui_addstr_clip(y, x, s, w); return 1; }
    mvaddnstr(y, x, s, cut + (sep[0] == ';'));
    const char *rest = s + cut + strlen(sep);
    tui_addstr_clip(y + 1, x + 2, rest, w - 2);
    return 2;
}

/* One line describing a block's metadata for a side. */
static void meta_text(tui *T, const side *S, size_t j, char *out, size_t cap)
{
    const uint8_t *m = S->meta + j * (size_t)(S->f->meta_bytes > 0 ? S->f->meta_bytes : 1);
    qs_format_meta_text(S->f, &T->fmts[S->fi].a.o, m, S->ts, S->S[j], tui_fmt_num, out, cap);
}

/* U: a non-zero input became zero; M: reduced to the largest magnitude of its block (clipped, or
** the block maximum rounded down; element casts: saturated at the largest finite value); N: a
** finite input became NaN or Inf. */
static char elem_flag(const tui_insp *I, const side *S, size_t i)
{
    double x = I->x[i], y = S->y[i];
    if (!isfinite(x)) return ' ';
    if (!isfinite(y)) return 'N';
    if (x != 0 && y == 0) return 'U';
    /* element casts have no block: their maximum is the format's largest finite value */
    double top = S->f->block == 1 ? S->f->max_finite : S->top[i];
    if (fabs(y) < fabs(x) && top > 0 && fabs(y) == top) return 'M';
    return ' ';
}

static void block_summary(tui_insp *I, const side *S, char *out, size_t cap)
{
    double se = 0, sx = 0, mx = 0;
    int clipped = 0, under = 0, nf = 0;
    for (size_t i = 0; i < I->n; i++) {
        double x = I->x[i], y = S->y[i], e = y - x;
        char fl = elem_flag(I, S, i);
        under += fl == 'U';
        clipped += fl == 'M';
        nf += fl == 'N';
        if (!isfinite(x) || !isfinite(y)) continue;
        se += e * e;
        sx += x * x;
        if (fabs(e) > mx) mx = fabs(e);
    }
    char a[32], b[32];
    tui_fmt_num(sqrt(se / (double)(I->n ? I->n : 1)), a, sizeof a);
    tui_fmt_num(mx, b, sizeof b);
    double sq = se > 0 ? 10 * log10(sx / se) : INFINITY;
    snprintf(out, cap, "RMSE %s  SQNR %.1f dB  max|err| %s  U underflow %d  M at block max %d%s", a, sq, b, under, clipped,
             nf ? "  N NaN/Inf!" : "");
}

/* The inspector's column layout: the index and input columns, then each format's side. */
enum { INSP_IW = 6, INSP_XW = 11, INSP_LEFT = 1 + INSP_IW + 1 + INSP_XW + 1 };

/* The title line: the tensor, the block, where it is and its RMSE. */
static void inspect_title(tui *T, tui_insp *I, const tui_tensor *t, const qs_block_geom *g, int y0)
{
    char s[600], a[32];
    uint64_t r0 = I->n ? I->idx[0] / t->cols : 0, c0 = I->n ? I->idx[0] % t->cols : 0;
    uint64_t r1 = I->n ? I->idx[I->n - 1] / t->cols : 0, c1 = I->n ? I->idx[I->n - 1] % t->cols : 0;
    tui_fmt_num(T->blk.have && I->b < T->blk.nblocks ? T->blk.rmse[I->b] : NAN, a, sizeof a);
    char where[120];
    if (r0 == r1) snprintf(where, sizeof where, "row %llu, cols %llu-%llu", (unsigned long long)r0, (unsigned long long)c0, (unsigned long long)c1);
    else if (c0 == c1) snprintf(where, sizeof where, "column %llu, rows %llu-%llu", (unsigned long long)c0, (unsigned long long)r0, (unsigned long long)r1);
    else snprintf(where, sizeof where, "rows %llu-%llu", (unsigned long long)r0, (unsigned long long)r1);
    snprintf(s, sizeof s, "%s  block %llu/%llu: %s, %zu values%s, RMSE %s", tui_cur_tensor(T) ? tui_cur_tensor(T)->name : "",
             (unsigned long long)I->b, (unsigned long long)g->nblocks, where, I->n, I->n == INSP_MAX ? " (first 65536 shown)" : "", a);
    attron(A_BOLD);
    tui_addstr_clip(y0, 1, s, T->W - 2);
    attroff(A_BOLD);
}

/* Each format: its label, the metadata of the selected element's block, and the block's error.
** Returns the next free row. */
static int inspect_formats(tui *T, tui_insp *I, int two, int y)
{
    char s[600];
    for (int k = 0; k < 1 + two; k++) {
        side *S = &I->s[k];
        attron(A_BOLD);
        snprintf(s, sizeof s, "%c %-12s", k ? 'B' : 'A', T->fmts[S->fi].label);
        tui_addstr_clip(y, 1, s, T->W - 2);
        attroff(A_BOLD);
        if (!S->ok) { y += addstr_wrap(y, 16, S->err, T->W - 17, " "); continue; }
        size_t cj = (size_t)(I->cur < (int)I->n ? I->cur : 0);
        meta_text(T, S, cj, s, sizeof s);
        y += addstr_wrap(y, 16, s, T->W - 17, "; ");
        block_summary(I, S, s, sizeof s);
        y += addstr_wrap(y, 16, s, T->W - 17, "  ");
    }
    return y;
}

/* Where each side's columns go: its x, its width, the width of its code fields (0: not shown) and
** whether its rel column shows.  Two equal halves when each side fits in its half (a side's rel
** when it fits too); else each side as wide as it needs, and when even that is too wide the second
** side's code fields, then the first's, give way (the detail lines under the table spell them out):
** a number is never cut. */
typedef struct insp_cols { int x[2], w[2], bw[2], rel[2]; } insp_cols;

static int code_width(const qs_format *f)
{
    int bw = qs_format_code_fields_width(f), lw = (int)strlen(qs_format_field_legend(f));
    return bw > lw ? bw : lw;
}

static void insp_layout(tui *T, tui_insp *I, int two, insp_cols *c)
{
    enum { NUMS = 1 + 10 + 1 + 10, REL = 7 };   /* " Q(x) error", " rel" */
    int avail = T->W - INSP_LEFT - 1, half = two ? avail / 2 : avail;
    memset(c, 0, sizeof *c);
    for (int k = 0; k < 1 + two; k++) c->bw[k] = I->s[k].f ? code_width(I->s[k].f) : 0;
    int fit = 1;
    for (int k = 0; k < 1 + two; k++) fit &= c->bw[k] + NUMS <= half;
    if (fit) {
        for (int k = 0; k < 1 + two; k++) {
            c->w[k] = half;
            c->x[k] = INSP_LEFT + k * half;
            c->rel[k] = c->bw[k] + NUMS + REL <= half;
        }
        return;
    }
    /* uneven: drop code fields from the last side until both fit side by side */
    for (int k = two; k >= -1; k--) {
        int need = c->bw[0] + NUMS + (two ? 1 + c->bw[1] + NUMS : 0);
        if (need <= avail || k < 0) break;
        c->bw[k] = 0;
    }
    int need = c->bw[0] + NUMS + (two ? 1 + c->bw[1] + NUMS : 0), gap = need < avail ? 1 : 0;   /* a blank before "|" when it fits */
    c->w[0] = c->bw[0] + NUMS + gap;
    c->x[0] = INSP_LEFT;
    c->w[1] = avail - c->w[0] - 1;
    c->x[1] = INSP_LEFT + c->w[0] + 1;
}

/* The column headings, the first side's label over the input column. */
static void inspect_heads(tui *T, tui_insp *I, const qs_block_geom *g, int two, const insp_cols *c, int y)
{
    char s[600];
    attron(A_BOLD | A_UNDERLINE);
    move(y, 0);
    for (int x = 0; x < T->W; x++) addch(' ');
    mvprintw(y, 1, "%*s %*s", INSP_IW, g->col ? "ROW" : "COL", INSP_XW, "INPUT x");
    for (int k = 0; k < 1 + two; k++) {
        side *S = &I->s[k];
        if (!S->f) continue;
        int bw = c->bw[k];
        snprintf(s, sizeof s, "%s%-*s %10s %10s%s", k ? "|" : "", bw, bw ? qs_format_field_legend(S->f) : "",
                 k ? "B: Q(x)" : "A: Q(x)", "error", c->rel[k] ? "    rel" : "");
        tui_addstr_clip(y, c->x[k] - (k ? 1 : 0), s, c->w[k] + (k ? 1 : 0));
    }
    attroff(A_BOLD | A_UNDERLINE);
}

/* Element i on row yy: its index, input, and in each format its code fields, Q(x) and error. */
static void inspect_row(tui *T, tui_insp *I, const tui_tensor *t, const qs_block_geom *g, int two, const insp_cols *c, int i, int yy)
{
    const int iw = INSP_IW, xw = INSP_XW;
    int sel = i == I->cur;
    char s[600], a[32], b[32];
    if (sel) { attron(A_REVERSE); move(yy, 0); for (int x = 0; x < T->W; x++) addch(' '); }
    uint64_t fl = I->idx[i];
    snprintf(s, sizeof s, "%*llu", iw, (unsigned long long)(g->col ? fl / t->cols : fl % t->cols));
    mvaddstr(yy, 1, s);
    tui_fmt_num(I->x[i], a, sizeof a);
    mvprintw(yy, 1 + iw + 1, "%*s", xw, a);
    for (int k = 0; k < 1 + two; k++) {
        side *S = &I->s[k];
        if (!S->ok) continue;
        int x = c->x[k], sw = c->w[k], bw = c->bw[k];
        if (k) mvaddch(yy, x - 1, '|');
        if (bw) draw_segs(T, yy, x, S->f, S->code[i], sel);
        double err = (double)S->y[i] - (double)I->x[i];
        double rel = I->x[i] != 0 ? err / fabs((double)I->x[i]) : (err == 0 ? 0 : INFINITY);
        tui_fmt_num(S->y[i], a, sizeof a);
        tui_fmt_num(err, b, sizeof b);
        char rl[24];
        if (!isfinite(rel)) snprintf(rl, sizeof rl, "-");
        else if (fabs(rel) >= 0.0995) snprintf(rl, sizeof rl, "%.0f%%", 100 * rel);
        else snprintf(rl, sizeof rl, "%.1f%%", 100 * rel);
        int big = isfinite(rel) && fabs(rel) > 0.25 && !sel;
        snprintf(s, sizeof s, " %10s ", a);
        tui_addstr_clip(yy, x + bw, s, sw - bw);
        if (big) attron(A_BOLD | (T->color ? COLOR_PAIR(CP_SIGN) : 0));
        if (c->rel[k]) snprintf(s, sizeof s, "%10s %6s", b, rl);
        else snprintf(s, sizeof s, "%10s", b);
        tui_addstr_clip(yy, x + bw + 12, s, sw - bw - 12);
        if (big) attroff(A_BOLD | (T->color ? COLOR_PAIR(CP_SIGN) : 0));
        char flag = elem_flag(I, S, (size_t)i);
        if (flag != ' ' && c->rel[k] && sw - (bw + 29) >= 2) mvaddch(yy, x + bw + 30, (chtype)flag);
    }
    if (sel) { mvaddch(yy, 0, '>'); attroff(A_REVERSE); }
}

/* The selected element's decoding spelled out, on the rows from yd. */
static void inspect_detail(tui *T, tui_insp *I, int two, int yd)
{
    char s[600], a[32];
    int i = I->cur;
    tui_fmt_num(I->x[i], a, sizeof a);
    snprintf(s, sizeof s, "element %d (flat index %llu): x = %.9g    value = element x scale (the step)", i,
             (unsigned long long)I->idx[i], (double)I->x[i]);
    if ((int)strlen(s) > T->W - 2)   /* narrow: the legend of the lines below goes first */
        snprintf(s, sizeof s, "element %d (flat index %llu): x = %.9g", i, (unsigned long long)I->idx[i], (double)I->x[i]);
    attron(A_BOLD);
    tui_addstr_clip(yd, 1, s, T->W - 2);
    attroff(A_BOLD);
    for (int k = 0; k < 1 + two; k++) {
        side *S = &I->s[k];
        if (!S->ok) continue;
        char d1[32], c2[32], c3[32];
        tui_fmt_num(S->S[i], d1, sizeof d1);
        double step = S->S[i];
        double el = step != 0 && isfinite(step) ? S->y[i] / step : NAN;
        tui_fmt_num(el, c2, sizeof c2);
        double err = (double)S->y[i] - (double)I->x[i];
        tui_fmt_num(err, c3, sizeof c3);
        qs_code_field sg[QS_MAX_FIELDS];
        int ns = qs_format_code_fields(S->f, S->code[i], sg);
        char bits[64] = "";
        for (int q = 0; q < ns; q++) { strcat(bits, q ? " " : ""); strcat(bits, sg[q].bits); }
        double ulp = qs_format_elem_ulp(S->f, I->x[i], step);
        char us[40] = "";
        if (isfinite(ulp) && ulp > 0) snprintf(us, sizeof us, ", %+.3f ulp", err / ulp);
        if (S->f->meta_bytes > 0)
            snprintf(s, sizeof s, "%c %-12s 0x%0*x [%s] = %s x %s = %.7g; error %s (%+.2f%%%s)", k ? 'B' : 'A',
                     T->fmts[S->fi].label, (S->f->elem_bits + 3) / 4, S->code[i], bits, c2, d1, (double)S->y[i], c3,
                     I->x[i] != 0 ? 100 * err / fabs((double)I->x[i]) : 0.0, us);
        else snprintf(s, sizeof s, "%c %-12s 0x%0*x [%s] = %.7g; error %s (%+.2f%%%s)", k ? 'B' : 'A', T->fmts[S->fi].label,
                      (S->f->elem_bits + 3) / 4, S->code[i], bits, (double)S->y[i], c3,
                      I->x[i] != 0 ? 100 * err / fabs((double)I->x[i]) : 0.0, us);
        for (int pass = 0; pass < 4 && (int)strlen(s) > T->W - 2; pass++) {
            /* narrow: the same line without padding, 4 digits and a shorter "error", then without
            ** the ulp, then without "element x step", then without the percentage, so that it
            ** ends whole */
            if (pass) us[0] = 0;
            char v4[32], pc[48] = "";
            snprintf(v4, sizeof v4, "%.4g", (double)S->y[i]);
            if (pass < 3) snprintf(pc, sizeof pc, " (%+.2f%%%s)", I->x[i] != 0 ? 100 * err / fabs((double)I->x[i]) : 0.0, us);
            if (S->f->meta_bytes > 0 && pass < 2)
                snprintf(s, sizeof s, "%c %s 0x%0*x [%s] = %s x %s = %s; err %s%s", k ? 'B' : 'A', T->fmts[S->fi].label,
                         (S->f->elem_bits + 3) / 4, S->code[i], bits, c2, d1, v4, c3, pc);
            else snprintf(s, sizeof s, "%c %s 0x%0*x [%s] = %s; err %s%s", k ? 'B' : 'A', T->fmts[S->fi].label,
                          (S->f->elem_bits + 3) / 4, S->code[i], bits, v4, c3, pc);
        }
        tui_addstr_clip(yd + 1 + k, 1, s, T->W - 2);
    }
}

static void inspect_draw(tui *T, int y0, int h)
{
    tui_insp *I = iv(T)->insp;
    if (!I) {
        if (ensure_blocks(T) && inspect_open(T) == 0) I = iv(T)->insp;
        if (!I) { tui_addstr_clip(y0 + 1, 2, "No block to inspect: choose one in the Blocks view (4).", T->W - 4); return; }
    }
    tui_tensor *t = &T->t[I->ti];
    qs_block_geom g;
    qs_block_geom_of(&T->fmts[I->fi].a, t->rows, t->cols, &g);
    inspect_title(T, I, t, &g, y0);
    int two = I->s[1].f != NULL;
    insp_cols cols;
    insp_layout(T, I, two, &cols);
    int y = inspect_formats(T, I, two, y0 + 1);
    inspect_heads(T, I, &g, two, &cols, y);
    y++;
    int detail = 3;
    int rows = y0 + h - y - detail;
    if (rows < 1) rows = 1;
    if (I->cur < I->top) I->top = I->cur;
    if (I->cur >= I->top + rows) I->top = I->cur - rows + 1;
    T->click_list = NULL;
    for (int r = 0; r < rows && I->top + r < (int)I->n; r++) inspect_row(T, I, t, &g, two, &cols, I->top + r, y + r);
    if (I->n && I->cur < (int)I->n) inspect_detail(T, I, two, y0 + h - detail);
}

static int inspect_key(tui *T, tui_act a, int page)
{
    tui_insp *I = iv(T)->insp;
    if (!I) return 0;
    page = T->H - 12 > 1 ? T->H - 12 : 1;   /* the element table's page */
    switch (a) {
    case TA_DOWN: I->cur++; break;
    case TA_UP: I->cur--; break;
    case TA_PGDN: I->cur += page; break;
    case TA_PGUP: I->cur -= page; break;
    case TA_HOME: I->cur = 0; break;
    case TA_END: I->cur = (int)I->n - 1; break;
    case TA_LEFT: case TA_RIGHT: case TA_WORST: {
        if (a == TA_WORST) blocks_key(T, TA_WORST, 0);
        else if (a == TA_LEFT && bv(T)->cur > 0) bv(T)->cur--;
        else if (a == TA_RIGHT && (uint64_t)bv(T)->cur + 1 < T->blk.nblocks) bv(T)->cur++;
        int cur = I->cur;
        inspect_open(T);
        if (iv(T)->insp && cur < (int)iv(T)->insp->n) iv(T)->insp->cur = cur;
        return 1;
    }
    case TA_SECOND: {
        int n = T->nfmts, s = bv(T)->second;
        for (int k = 0; k < n; k++) {
            s = (s + 1) % n;
            if (s != I->fi) break;
        }
        bv(T)->second = s;
        int cur = I->cur;
        inspect_open(T);
        if (iv(T)->insp) iv(T)->insp->cur = cur;
        if (iv(T)->insp && bv(T)->second >= 0) tui_set_msg(T, 0, "side by side: %s", T->fmts[bv(T)->second].label);
        return 1;
    }
    case TA_TAB: return 1;
    default: return 0;
    }
    if (I->cur >= (int)I->n) I->cur = (int)I->n - 1;
    if (I->cur < 0) I->cur = 0;
    return 1;
}

static void blocks_init(tui *T) { bv(T)->second = -1; }

static void blocks_changed(tui *T, int what)
{
    if (what == TUI_CH_FORMATS) bv(T)->second = -1;   /* indices into the new list */
}

static void inspect_changed(tui *T, int what)
{
    if (what != TUI_CH_DATA) inspect_free(T);   /* another process's results do not change the block */
}

const tui_view_ops tui_view_blocks = {
    .name = "Blocks", .flags = TVF_TENSOR | TVF_BLOCK | TVF_METRICS, .parent = TV_FORMATS,
    .about = {"each block of the selected format as one cell, shaded by log10 of its RMSE",
              "(rows of the tensor down, blocks along the row across).  Enter: the inspector."},
    .state_size = sizeof(blocks_view), .init = blocks_init,
    .draw = blocks_draw, .key = blocks_key, .changed = blocks_changed,
};

const tui_view_ops tui_view_inspect = {
    .name = "Inspector", .flags = TVF_TENSOR | TVF_BLOCK, .state_size = sizeof(insp_view),
    .about = {"every element of the block: input, code in binary with its fields (sign,",
              "exponent or HiF8 dot, mantissa), decoded value and error; the block's scale",
              "metadata; and the same elements in a second format side by side (b cycles)."},
    .draw = inspect_draw, .key = inspect_key, .close = inspect_free, .changed = inspect_changed, .done = inspect_free,
};
