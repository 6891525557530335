/*
** The workbench's one key table (after tig's request list and htop's key maps): every binding is
** one row {action, views, keys, label, help, hints}.  Key dispatch, the help screen, each view's
** key-hint bar and the title's view strip are all generated from it, so they cannot disagree:
** adding a key is adding a row.
**
** A row whose views mask is 0 applies everywhere; view-specific rows are searched first, so a view
** can give a key its own meaning (in the Blocks grid the arrows move between blocks).  A row's
** hints say what the bar of each view shows for it ("Enter formats" in Tensors, "Enter blocks" in
** Formats) and where: the bar lists its hints by rank, most important first.  Rows of TA_VIEW
** open the view `to` and name it in the title's strip.  The help's paragraph on each view comes
** from the view's row in the view table (tui_view.c).
*/
#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui_view.h"

#define V(x) (1u << (x))
#define ALLV ((1u << TV_COUNT) - 1)
#define ESC 27
#define CTRL(c) ((c) & 0x1f)

static const tui_binding kKeys[] = {
    /* moving */
    {TA_DOWN, 0, {'j', KEY_DOWN, CTRL('n')}, "j Down", "move down",
     .hint = {{V(TV_HIST), 14, "j/k format"}, {V(TV_INSPECT), 5, "j/k element"}, {V(TV_RL) | V(TV_TRAIN), 5, "j/k run"},
              {V(TV_KERNELS), 5, "j/k result"}, {V(TV_MODEL), 5, "j/k config"}, {V(TV_OUTPUT) | V(TV_HELP), 5, "j/k scroll"}}},
    {TA_UP, 0, {'k', KEY_UP, CTRL('p')}, "k Up", "move up", .hint = {{0}}},
    {TA_PGDN, 0, {KEY_NPAGE, ' ', CTRL('f')}, "PgDn Space", "page down", .hint = {{0}}},
    {TA_PGUP, 0, {KEY_PPAGE, CTRL('b')}, "PgUp", "page up", .hint = {{0}}},
    {TA_HOME, 0, {'g', KEY_HOME}, "g Home", "first row", .hint = {{0}}},
    {TA_END, 0, {'G', KEY_END}, "G End", "last row", .hint = {{0}}},
    {TA_LEFT, V(TV_BLOCKS) | V(TV_INSPECT), {KEY_LEFT}, "Left", "Blocks, Inspector: previous block",
     .hint = {{V(TV_BLOCKS), 5, "arrows move"}, {V(TV_INSPECT), 20, "Left/Right block"}}},
    {TA_RIGHT, V(TV_BLOCKS) | V(TV_INSPECT), {KEY_RIGHT, 'l'}, "Right l", "Blocks, Inspector: next block", .hint = {{0}}},
    {TA_LEFT, V(TV_OUTPUT), {KEY_LEFT, 'h'}, "Left h", "Output: scroll a wide table left (at the left edge: back)",
     .hint = {{V(TV_OUTPUT), 15, "h/l scroll"}}},
    {TA_RIGHT, V(TV_OUTPUT), {KEY_RIGHT, 'l'}, "Right l", "Output: scroll a wide table right", .hint = {{0}}},
    {TA_ENTER, 0, {'\n', '\r', KEY_ENTER, KEY_RIGHT, 'l'}, "Enter Right l",
     "drill in (tensor -> formats -> blocks -> inspector; Model: the row's statistics)",
     .hint = {{V(TV_TENSORS), 10, "Enter formats"}, {V(TV_FORMATS), 10, "Enter blocks"}, {V(TV_BLOCKS), 10, "Enter inspect"},
              {V(TV_MODEL), 42, "Enter details"}}},
    {TA_BACK, V(TV_OUTPUT), {ESC, KEY_BACKSPACE}, "Esc", "Output: back to the previous view (h, Left scroll there)",
     .hint = {{V(TV_OUTPUT), 85, "Esc back"}}},
    {TA_BACK, 0, {'h', KEY_LEFT, ESC, KEY_BACKSPACE}, "h Left Esc", "back to the previous view (Esc also cancels a running job)",
     .hint = {{V(TV_FORMATS) | V(TV_HIST) | V(TV_BLOCKS) | V(TV_INSPECT) | V(TV_KERNELS), 85, "h back"}}},
    {TA_TAB, 0, {'\t'}, "Tab", "next pane / next view of the tensor (RL runs: runs <-> stored trajectories)",
     .hint = {{V(TV_FORMATS), 15, "Tab histogram"}, {V(TV_RL), 40, "Tab runs/stored"}}},
    /* finding */
    {TA_SEARCH, 0, {'/'}, "/", "search (tensor names, formats, runs, output text)",
     .hint = {{V(TV_TENSORS) | V(TV_OUTPUT), 20, "/ search"}}},
    {TA_NEXT, 0, {'n'}, "n", "next match", .hint = {{0}}},
    {TA_PREV, 0, {'N'}, "N", "previous match", .hint = {{0}}},
    {TA_FILTER, V(TV_TENSORS), {'F', '|'}, "F", "Tensors: filter by a substring of the name (empty clears)",
     .hint = {{V(TV_TENSORS), 30, "F filter"}}},
    {TA_SORT, V(TV_TENSORS) | V(TV_FORMATS) | V(TV_MODEL), {'s'}, "s", "sort by the next column",
     .hint = {{V(TV_TENSORS) | V(TV_FORMATS), 40, "s/S sort"}, {V(TV_MODEL), 40, "s/S sort KL/dPPL"}}},
    {TA_SORT_REV, V(TV_TENSORS) | V(TV_FORMATS) | V(TV_MODEL), {'S'}, "S", "reverse the sort order", .hint = {{0}}},
    /* formats and analysis */
    {TA_FORMATS, 0, {'f'}, "f", "choose the formats to compare", .hint = {{V(TV_TENSORS) | V(TV_FORMATS), 50, "f formats"}}},
    {TA_OPTIONS, 0, {'o'}, "o", "options of the selected format (rounding, scale rule, block size)",
     .hint = {{V(TV_FORMATS), 55, "o options"}}},
    {TA_RECOMPUTE, 0, {'r'}, "r", "recompute the selected tensor's results (RL runs: the diagnostics), in the background",
     .hint = {{V(TV_FORMATS), 60, "r recompute"}}},
    {TA_HIST_KIND, V(TV_HIST), {'v'}, "v", "Histogram: relative / absolute / ulp error, or values",
     .hint = {{V(TV_HIST), 10, "v error/value"}}},
    {TA_HIST_KIND, V(TV_MODEL), {'v'}, "v", "Model: KL distribution as a histogram or a CDF",
     .hint = {{V(TV_MODEL), 45, "v hist/CDF"}}},
    {TA_LOGY, V(TV_HIST), {'L'}, "L", "Histogram: log or linear counts", .hint = {{V(TV_HIST), 30, "L log/lin"}}},
    {TA_HIST_ALL, V(TV_HIST), {'a'}, "a", "Histogram: every format overlaid, or only the one under the cursor (j/k)",
     .hint = {{V(TV_HIST), 12, "a all/one"}}},
    {TA_HIST_ALL, V(TV_RL), {'a'}, "a", "RL runs: every run overlaid (methods compared), or only the selected one",
     .hint = {{V(TV_RL), 30, "a all/one run"}}},
    {TA_WORST, V(TV_BLOCKS) | V(TV_INSPECT), {'w'}, "w", "Blocks: jump to the block with the largest error",
     .hint = {{V(TV_BLOCKS) | V(TV_INSPECT), 45, "w worst"}}},
    {TA_SECOND, V(TV_INSPECT) | V(TV_BLOCKS), {'b'}, "b", "Inspector: next format for the side-by-side column",
     .hint = {{V(TV_INSPECT), 30, "b 2nd format"}}},
    {TA_METRIC, V(TV_RL), {'m'}, "m", "RL runs: next diagnostic to plot", .hint = {{V(TV_RL), 20, "m diagnostic"}}},
    {TA_HIST_ALL, V(TV_TRAIN), {'a'}, "a", "Training: every run's validation loss (seeds as a mean with its band), or the selected run's",
     .hint = {{V(TV_TRAIN), 30, "a all/one run"}}},
    {TA_METRIC, V(TV_TRAIN), {'m'}, "m", "Training: operand statistics of the next step that has them (then the run's mean)",
     .hint = {{V(TV_TRAIN), 20, "m step"}}},
    /* output */
    {TA_EXPORT, 0, {'e'}, "e", "export the current plot to PNG (path shown in the status line)",
     .hint = {{V(TV_HIST) | V(TV_MODEL), 65, "e export PNG"}, {V(TV_BLOCKS) | V(TV_RL) | V(TV_KERNELS) | V(TV_TRAIN), 65, "e export"}}},
    {TA_CMDLINE, 0, {':'}, ":", "run any qscope command, e.g. `:analyze demo:* -f mxfp4` (output in the Output view)",
     .hint = {{V(TV_TENSORS) | V(TV_MODEL), 70, ": command"}}},
    /* views */
    /* views: one row per keyed view of TUI_VIEW_LIST (tui.h) */
#define VIEW_KEY(id, name, key, tab_, tab_short, help_) \
    {TA_VIEW, 0, {'0' + (key)}, #key, help_, .to = TV_##id, .tab = {tab_, tab_short}, .hint = {{0}}},
#define VIEW_NO_KEY(id, name)
    TUI_VIEW_LIST(VIEW_KEY, VIEW_NO_KEY)
#undef VIEW_KEY
#undef VIEW_NO_KEY
    {TA_HELP, 0, {'?', KEY_F(1)}, "? F1", "this help", .hint = {{ALLV & ~V(TV_HELP), 90, "? help"}}},
    {TA_REDRAW, 0, {CTRL('l')}, "Ctrl-L", "redraw the screen", .hint = {{0}}},
    {TA_CLOSE, 0, {'q'}, "q", "close the view (quits from the first view)", .hint = {{V(TV_HELP), 95, "q close"}}},
    {TA_QUIT, 0, {'Q'}, "Q", "quit", .hint = {{V(TV_TENSORS), 95, "Q quit"}}},
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

const tui_binding *tui_key_binding(tui_view_id v, int ch)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (kKeys[i].views & V(v) && tui_binding_has(&kKeys[i], ch)) return &kKeys[i];
    for (size_t i = 0; i < NKEYS; i++)
        if (!kKeys[i].views && tui_binding_has(&kKeys[i], ch)) return &kKeys[i];
    return NULL;
}

tui_act tui_key_action(tui_view_id v, int ch)
{
    const tui_binding *b = tui_key_binding(v, ch);
    return b ? b->act : TA_NONE;
}


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
    for (int v = 0; v < TV_COUNT; v++) {   /* each view's paragraph, from its row in the view table */
        const tui_view_ops *V = tui_view_of((tui_view_id)v);
        for (int k = 0; k < TUI_ABOUT && V->about[k]; k++) ADD("  %-10s %s", k ? "" : V->name, V->about[k]);
    }
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

/* A view's bar: the hints of the rows that name it, by rank (ties in table order). */
const char *tui_hint_bar(tui_view_id v)
{
    static char bars[TV_COUNT][300];
    static int made[TV_COUNT];
    if ((unsigned)v >= TV_COUNT) return "";
    if (made[v]) return bars[v];
    size_t o = 0;
    for (int last = -1;;) {   /* the next rank above the last one taken */
        int rank = -1;
        for (size_t i = 0; i < NKEYS; i++)
            for (int h = 0; h < TUI_HINTS && kKeys[i].hint[h].text; h++)
                if (kKeys[i].hint[h].views & V(v) && kKeys[i].hint[h].rank > last && (rank < 0 || kKeys[i].hint[h].rank < rank))
                    rank = kKeys[i].hint[h].rank;
        if (rank < 0) break;
        for (size_t i = 0; i < NKEYS; i++)
            for (int h = 0; h < TUI_HINTS && kKeys[i].hint[h].text; h++)
                if (kKeys[i].hint[h].views & V(v) && kKeys[i].hint[h].rank == rank && o < sizeof bars[v])
                    o += (size_t)snprintf(bars[v] + o, sizeof bars[v] - o, "%s%s", o ? "  " : "", kKeys[i].hint[h].text);
        last = rank;
    }
    made[v] = 1;
    return bars[v];
}

/* "1 Tensors 2 Formats ... " from the rows that open a view, in table order. */
void tui_view_strip(int shorter, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < NKEYS && o < cap; i++)
        if (kKeys[i].act == TA_VIEW) o += (size_t)snprintf(out + o, cap - o, "%s %s ", kKeys[i].label, kKeys[i].tab[shorter != 0]);
}
