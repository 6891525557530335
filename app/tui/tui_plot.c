/*
** Plots in the workbench: a plot-model figure (analysis/plot.h) is drawn by the terminal renderer
** (app/render/plot_term.c, braille on a UTF-8 terminal, ASCII otherwise) into a region of the screen, and
** `e` exports the same figure through the PNG renderer with provenance (app/render/plot_png.c).
**
** The renderer writes lines of text; they are captured with open_memstream and copied into the
** region cell by cell (UTF-8 through ncursesw).  The picture never depends on colour.
*/
#include <curses.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../render/plot_render.h"
#include "tui.h"

/* Colour pair of an xterm-256 colour, allocated on first use after the fixed pairs (0: none left). */
static short pair_of(int c256)
{
    static short map[256];
    static short next = CP_HEAT0 + TUI_NHEAT;
    if (c256 < 0 || c256 > 255) return 0;
    if (!map[c256]) {
        if (next >= COLOR_PAIRS || next >= 32767) return 0;
        init_pair(next, (short)c256, -1);
        map[c256] = next++;
    }
    return map[c256];
}

/* Copy one rendered line to the screen, turning the renderer's SGR codes (0, 1, 38;5;N) into
** curses attributes. */
static void put_line(int y, int x0, const char *line, int color)
{
    move(y, x0);
    attr_t at = A_NORMAL;
    short pair = 0;
    const char *p = line;
    while (*p) {
        if (*p == '\033' && p[1] == '[') {
            const char *q = p + 2;
            while (*q && *q != 'm') q++;
            if (!*q) break;
            if (!strncmp(p + 2, "0m", 2)) { at = A_NORMAL; pair = 0; }
            else if (!strncmp(p + 2, "1m", 2)) at |= A_BOLD;
            else if (!strncmp(p + 2, "38;5;", 5)) pair = pair_of(atoi(p + 7));
            p = q + 1;
            continue;
        }
        const char *e = p;
        while (*e && *e != '\033') e++;
        if (color) attr_set(at, pair, NULL);
        addnstr(p, (int)(e - p));
        p = e;
    }
    if (color) attr_set(A_NORMAL, 0, NULL);
}

void tui_draw_figure(tui *T, qs_figure *f, int y0, int x0, int h, int w)
{
    if (!f) return;
    if (w < 30 || h < 10) {
        tui_addstr_clip(y0, x0, "(the plot needs at least 30 x 10 cells: enlarge the terminal)", w);
        return;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return;
    /* colours only where the terminal has 256 of them (the renderer speaks xterm-256) */
    int color = T->color && COLORS >= 256 && COLOR_PAIRS >= 64;
    qs_term_opts o = {w, h, T->ascii ? QS_TERM_ASCII : QS_TERM_BRAILLE, color};
    qs_err e = {{0}};
    int rc = qs_plot_term(f, &o, m, &e);
    fclose(m);
    if (rc) {
        tui_addstr_clip(y0, x0, e.msg, w);
        free(buf);
        return;
    }
    int y = y0;
    for (char *line = buf; line && *line && y < y0 + h; y++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        size_t n = strlen(line);
        while (n && line[n - 1] == ' ') line[--n] = 0;
        put_line(y, x0, line, color);
        if (!nl) break;
        line = nl + 1;
    }
    free(buf);
}

void tui_draw_figure_short(tui *T, qs_figure *f, int y0, int x0, int h, int w)
{
    if (!f) return;
    char title[sizeof f->title];
    memcpy(title, f->title, sizeof title);
    if (h < 16) f->title[0] = 0;
    tui_draw_figure(T, f, y0, x0, h, w);
    memcpy(f->title, title, sizeof title);   /* `e` exports it with its title */
}

/* The export directory: $QSCOPE_EXPORT_DIR, else the current directory. */
int tui_export_png(tui *T, char *path, size_t cap)
{
    if (!T->fig) { tui_set_msg(T, 1, "nothing to export: this view has no plot"); return -1; }
    const char *dir = getenv("QSCOPE_EXPORT_DIR");
    if (!dir || !*dir) dir = ".";
    char base[160];
    size_t k = 0;
    for (const char *s = T->fig_what; *s && k + 1 < sizeof base; s++)
        base[k++] = (char)((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '.' ? *s : '_');
    base[k] = 0;
    if (!k) snprintf(base, sizeof base, "plot");
    struct stat sb;
    for (int i = 0; i < 1000; i++) {
        if (i) snprintf(path, cap, "%s/qscope-%s-%d.png", dir, base, i);
        else snprintf(path, cap, "%s/qscope-%s.png", dir, base);
        if (stat(path, &sb) != 0) break;
    }
    char absdb[PATH_MAX];
    if (!realpath(T->db_path, absdb)) snprintf(absdb, sizeof absdb, "%s", T->db_path);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "qscope tui (export of %s)", T->fig_what);
    tui_tensor *t = tui_cur_tensor(T);
    char hashes[400] = "";
    if (T->fig_hash[0]) snprintf(hashes, sizeof hashes, "%s", T->fig_hash);
    else if (t) snprintf(hashes, sizeof hashes, "%s=%s", t->name, t->hash);
    qs_provenance pv = {cmd, absdb, hashes[0] ? hashes : NULL, NULL, NULL};
    qs_png_opts po = {0, 0, 100};
    qs_err e = {{0}};
    if (qs_plot_font_ok(&e) || qs_plot_png(T->fig, &po, &pv, path, &e)) {
        tui_set_msg(T, 1, "export failed: %s", e.msg);
        return -1;
    }
    tui_set_msg(T, 0, "exported %s", path);
    return 0;
}
