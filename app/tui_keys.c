/*
** The workbench's one key table (after tig's request list and htop's key maps): every binding is
** one row {action, views, keys, label, help}.  Key dispatch, the help screen and the key-hint bar
** are all generated from it, so they cannot disagree.
**
** A row whose views mask is 0 applies everywhere; view-specific rows are searched first, so a view
** can give a key its own meaning (in the Blocks grid the arrows move between blocks).
*/
#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui.h"

#define V(x) (1u << (x))
#define ESC 27
#define CTRL(c) ((c) & 0x1f)

static const tui_binding kKeys[] = {
    /* moving */
    {TA_DOWN, 0, {'j', KEY_DOWN, CTRL('n')}, "j Down", "move down"},
    {TA_UP, 0, {'k', KEY_UP, CTRL('p')}, "k Up", "move up"},
    {TA_PGDN, 0, {KEY_NPAGE, ' ', CTRL('f')}, "PgDn Space", "page down"},
    {TA_PGUP, 0, {KEY_PPAGE, CTRL('b')}, "PgUp", "page up"},
    {TA_HOME, 0, {'g', KEY_HOME}, "g Home", "first row"},
    {TA_END, 0, {'G', KEY_END}, "G End", "last row"},
    {TA_LEFT, V(TV_BLOCKS) | V(TV_INSPECT), {KEY_LEFT}, "Left", "Blocks, Inspector: previous block"},
    {TA_RIGHT, V(TV_BLOCKS) | V(TV_INSPECT), {KEY_RIGHT, 'l'}, "Right l", "Blocks, Inspector: next block"},
    {TA_ENTER, 0, {'\n', '\r', KEY_ENTER, KEY_RIGHT, 'l'}, "Enter Right l", "drill in (tensor -> formats -> blocks -> inspector)"},
    {TA_BACK, 0, {'h', KEY_LEFT, ESC, KEY_BACKSPACE}, "h Left Esc", "back to the previous view (Esc also cancels a running job)"},
    {TA_TAB, 0, {'\t'}, "Tab", "next pane / next view of the tensor (RL runs: runs <-> stored trajectories)"},
    /* finding */
    {TA_SEARCH, 0, {'/'}, "/", "search (tensor names, formats, runs, output text)"},
    {TA_NEXT, 0, {'n'}, "n", "next match"},
    {TA_PREV, 0, {'N'}, "N", "previous match"},
    {TA_FILTER, V(TV_TENSORS), {'F', '|'}, "F", "Tensors: filter by a substring of the name (empty clears)"},
    {TA_SORT, V(TV_TENSORS) | V(TV_FORMATS) | V(TV_MODEL), {'s'}, "s", "sort by the next column"},
    {TA_SORT_REV, V(TV_TENSORS) | V(TV_FORMATS) | V(TV_MODEL), {'S'}, "S", "reverse the sort order"},
    /* formats and analysis */
    {TA_FORMATS, 0, {'f'}, "f", "choose the formats to compare"},
    {TA_OPTIONS, 0, {'o'}, "o", "options of the selected format (rounding, scale rule, block size)"},
    {TA_RECOMPUTE, 0, {'r'}, "r", "recompute the selected tensor's results (RL runs: the diagnostics), in the background"},
    {TA_HIST_KIND, V(TV_HIST), {'v'}, "v", "Histogram: relative / absolute / ulp error, or values"},
    {TA_HIST_KIND, V(TV_MODEL), {'v'}, "v", "Model: KL distribution as a histogram or a CDF"},
    {TA_LOGY, V(TV_HIST), {'L'}, "L", "Histogram: log or linear counts"},
    {TA_HIST_ALL, V(TV_HIST), {'a'}, "a", "Histogram: every format overlaid, or only the one under the cursor (j/k)"},
    {TA_HIST_ALL, V(TV_RL), {'a'}, "a", "RL runs: every run overlaid (methods compared), or only the selected one"},
    {TA_WORST, V(TV_BLOCKS) | V(TV_INSPECT), {'w'}, "w", "Blocks: jump to the block with the largest error"},
    {TA_SECOND, V(TV_INSPECT) | V(TV_BLOCKS), {'b'}, "b", "Inspector: next format for the side-by-side column"},
    {TA_METRIC, V(TV_RL), {'m'}, "m", "RL runs: next diagnostic to plot"},
    /* output */
    {TA_EXPORT, 0, {'e'}, "e", "export the current plot to PNG (path shown in the status line)"},
    {TA_CMDLINE, 0, {':'}, ":", "run any qscope command, e.g. `:analyze demo:* -f mxfp4` (output in the Output view)"},
    /* views */
    {TA_V_TENSORS, 0, {'1'}, "1", "Tensors view"},
    {TA_V_FORMATS, 0, {'2'}, "2", "Formats view"},
    {TA_V_HIST, 0, {'3'}, "3", "Histogram view"},
    {TA_V_BLOCKS, 0, {'4'}, "4", "Blocks view"},
    {TA_V_RL, 0, {'5'}, "5", "RL runs view"},
    {TA_V_KERNELS, 0, {'6'}, "6", "Kernels view (MSD and attention results)"},
    {TA_V_OUTPUT, 0, {'7'}, "7", "Output of the last command"},
    {TA_V_MODEL, 0, {'8'}, "8", "Model view (stored llm eval results: perplexity, KL)"},
    {TA_HELP, 0, {'?', KEY_F(1)}, "? F1", "this help"},
    {TA_REDRAW, 0, {CTRL('l')}, "Ctrl-L", "redraw the screen"},
    {TA_CLOSE, 0, {'q'}, "q", "close the view (quits from the first view)"},
    {TA_QUIT, 0, {'Q'}, "Q", "quit"},
};
#define NKEYS (sizeof kKeys / sizeof *kKeys)

const tui_binding *tui_key_table(size_t *n)
{
    *n = NKEYS;
    return kKeys;
}

int tui_binding_has(const tui_binding *b, int ch)
{
    for (int i = 0; i < 5 && b->keys[i]; i++)
        if (b->keys[i] == ch) return 1;
    return 0;
}

tui_act tui_key_action(tui_view_id v, int ch)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (kKeys[i].views & V(v) && tui_binding_has(&kKeys[i], ch)) return kKeys[i].act;
    for (size_t i = 0; i < NKEYS; i++)
        if (!kKeys[i].views && tui_binding_has(&kKeys[i], ch)) return kKeys[i].act;
    return TA_NONE;
}

static const char *kViewHelp[] = {
    "Tensors    every tensor with shape, dtype, size, absmax, kurtosis (Gaussian = 3) and the",
    "           fraction of outliers (|x - mean| > 6 std).  Enter: its formats.",
    "Formats    the selected tensor under each chosen format: bits per element (with scales),",
    "           effective bits, SQNR, max relative error, underflow and clipped fractions; the",
    "           best value of each column is marked with *.  Missing results are computed in",
    "           the background (with per-block data, so Blocks works).  Enter: its blocks.",
    "Histogram  error (or value) histograms of the chosen formats, overlaid.",
    "Blocks     each block of the selected format as one cell, shaded by log10 of its RMSE",
    "           (rows of the tensor down, blocks along the row across).  Enter: the inspector.",
    "Inspector  every element of the block: input, code in binary with its fields (sign,",
    "           exponent or HiF8 dot, mantissa), decoded value and error; the block's scale",
    "           metadata; and the same elements in a second format side by side (b cycles).",
    "RL runs    imported RL logs: tokens, steps, sequences per run; per-step diagnostics of",
    "           the selected run (m cycles: mean/p95/max |dlogp|, k3 KL, ...) and stored",
    "           trajectory results (Tab).",
    "Kernels    stored MSD and attention experiment results, plotted.",
    "Model      stored `llm eval` runs: reference perplexity, then per config PPL, dPPL with",
    "           its 95% interval, KL mean/median/p99/max, same top token, RMS dp (s sorts",
    "           by KL or dPPL); the KL distribution of the selected config below (v: CDF).",
};

int tui_help_lines(char ***lines)
{
    size_t cap = NKEYS + 40, n = 0;
    char **L = calloc(cap, sizeof *L);
    if (!L) return -1;
#define ADD(...) do { if (n < cap && asprintf(&L[n], __VA_ARGS__) >= 0) n++; } while (0)
    ADD("qscope workbench — keys (generated from the key table)");
    ADD("%s", "");
    for (size_t i = 0; i < NKEYS; i++) ADD("  %-15s %s", kKeys[i].label, kKeys[i].help);
    ADD("%s", "");
    ADD("Views");
    for (size_t i = 0; i < sizeof kViewHelp / sizeof *kViewHelp; i++) ADD("  %s", kViewHelp[i]);
    ADD("%s", "");
    ADD("Mouse: wheel scrolls, a click selects a row (off with --no-mouse).  NO_COLOR or a");
    ADD("terminal without colours: selection in reverse video, fields separated by spaces.");
    ADD("More: docs/workbench.md.");
#undef ADD
    *lines = L;
    return (int)n;
}

int tui_help_lines_w(int w, char ***lines)
{
    char **L;
    int n = tui_help_lines(&L);
    if (n < 0 || w < 20) { *lines = L; return n; }
    /* when something must wrap, a paragraph's continuation lines (deeply indented) are joined
    ** first, so that it wraps as one text */
    int narrow = 0;
    for (int i = 0; i < n; i++) narrow |= (int)strlen(L[i]) > w;
    if (narrow) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            size_t sp = strspn(L[i], " ");
            if (k > 0 && sp >= 6 && L[i][sp] && L[k - 1][0]) {
                char *j = NULL;
                if (asprintf(&j, "%s %s", L[k - 1], L[i] + sp) >= 0) { free(L[k - 1]); L[k - 1] = j; }
                free(L[i]);
                continue;
            }
            L[k++] = L[i];
        }
        n = k;
    }
    size_t cap = (size_t)n * 2 + 8, m = 0;
    char **O = calloc(cap, sizeof *O);
    if (!O) { for (int i = 0; i < n; i++) free(L[i]); free(L); return -1; }
    for (int i = 0; i < n; i++) {
        const char *s = L[i];
        /* continuation lines start under the text: after the key column, or the leading spaces */
        size_t ind = strspn(s, " ");
        const char *gap = strstr(s + ind, "  ");   /* the key column, or a view name's */
        if (gap && (int)(gap - s) < w / 2) ind = (size_t)(gap - s) + strspn(gap, " ");
        if (ind > (size_t)w / 2) ind = 2;
        int first = 1;
        while (first || *s) {
            size_t pre = first ? 0 : ind, room = (size_t)w - pre, len = strlen(s);
            size_t cut = len;
            if (len > room) {
                cut = room;
                while (cut > 0 && s[cut] != ' ') cut--;
                if (cut == 0) cut = room;
            }
            if (m + 1 >= cap) {
                char **N = realloc(O, 2 * cap * sizeof *O);
                if (!N) break;
                O = N;
                cap *= 2;
            }
            if (asprintf(&O[m], "%*s%.*s", (int)pre, "", (int)cut, s) >= 0) m++;
            s += cut;
            while (*s == ' ') s++;
            first = 0;
        }
        free(L[i]);
    }
    free(L);
    *lines = O;
    return (int)m;
}

/* Entries go whole before any word is cut: a cut word ("f forma  o optio") reads as nonsense. The
** bar lists its entries most important first, so they go from the end; "? help" stays, and the ways
** out ("h back", "Q quit", "q close") go last. Only if "? help" alone is too wide is it cut. */
void tui_fit_hints(const char *bar, int w, char *out, size_t cap)
{
    enum { MAXE = 16 };
    const char *ent[MAXE];
    int len[MAXE], n = 0;
    for (const char *p = bar; *p && n < MAXE;) {
        const char *e = strstr(p, "  ");
        int l = e ? (int)(e - p) : (int)strlen(p);
        ent[n] = p; len[n] = l;
        n++;
        p += l;
        while (*p == ' ') p++;
    }
    int keep[MAXE];
    for (int i = 0; i < n; i++) keep[i] = 1;
    for (;;) {
        int total = 0, shown = 0;
        for (int i = 0; i < n; i++)
            if (keep[i]) total += (shown++ ? 2 : 0) + len[i];
        if (total <= w) break;
        int j = -1;
        for (int pass = 0; pass < 2 && j < 0; pass++)
            for (int i = n - 1; i >= 0 && j < 0; i--) {
                if (!keep[i] || !strncmp(ent[i], "? ", 2)) continue;
                int out_key = !strncmp(ent[i], "h back", 6) || !strncmp(ent[i], "Q ", 2) || !strncmp(ent[i], "q close", 7);
                if (pass || !out_key) j = i;
            }
        if (j < 0) break;   /* only "? help" left */
        keep[j] = 0;
    }
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < n && o + 1 < cap; i++) {
        if (!keep[i]) continue;
        o += (size_t)snprintf(out + o, cap - o, "%s%.*s", o ? "  " : "", len[i], ent[i]);
        if (o >= cap) { o = cap - 1; break; }
    }
    if (w >= 0 && o > (size_t)w) out[w] = 0;
}

const char *tui_hint_bar(tui_view_id v)
{
    switch (v) {
    case TV_TENSORS: return "Enter formats  / search  F filter  s/S sort  f formats  : command  ? help  Q quit";
    case TV_FORMATS: return "Enter blocks  Tab histogram  s/S sort  f formats  o options  r recompute  h back  ? help";
    case TV_HIST: return "v error/value  a all/one  j/k format  L log/lin  e export PNG  h back  ? help";
    case TV_BLOCKS: return "arrows move  Enter inspect  w worst  e export  h back  ? help";
    case TV_INSPECT: return "j/k element  Left/Right block  b 2nd format  w worst  h back  ? help";
    case TV_RL: return "j/k run  m diagnostic  a all/one run  Tab runs/stored  e export  ? help";
    case TV_KERNELS: return "j/k result  e export  h back  ? help";
    case TV_MODEL: return "j/k config  s/S sort KL/dPPL  v hist/CDF  e export PNG  : command  ? help";
    case TV_OUTPUT: return "j/k scroll  / search  h back  ? help";
    case TV_HELP: return "j/k scroll  q close";
    default: return "";
    }
}
