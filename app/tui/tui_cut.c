/*
** Names cut to a width for the workbench's lists (see tui_cut_middle in tui.h): in the middle,
** where a name is the same as its neighbours, so that two cut rows never read alike.
*/
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "tui.h"
#include "../../store/text_escape.h"

static void cut_middle(const char *s, const char *const *peers, int npeers, int w, char *out, size_t cap)
{
    size_t len = strlen(s);
    if (w < 3 || (int)len <= w) { snprintf(out, cap, "%s", s); return; }
    size_t r = len - (size_t)w + 1;   /* characters to leave out, for one "~" */
    /* preferred head: a third of the width, or the first component ("model:", "sim/") when it
    ** takes at most half */
    size_t head = (size_t)(w - 1) / 3, comp = strcspn(s, ":/");
    if (s[comp] && comp + 1 > head && comp + 1 <= (size_t)(w - 1) / 2) head = comp + 1;
    if (head < 1) head = 1;
    /* against each peer: how far s equals it from the front (a) and from the back (b); a cut
    ** keeps them apart when its head shows the front difference or its tail the back one */
    enum { MAXP = 256 };
    size_t fa[MAXP], fb[MAXP];
    int n = 0;
    for (int i = 0; i < npeers && n < MAXP; i++) {
        const char *p = peers[i];
        if (!p || p == s || !strcmp(p, s)) continue;
        size_t a = 0, b = 0, lp = strlen(p);
        while (s[a] && s[a] == p[a]) a++;
        while (b < len && b < lp && s[len - 1 - b] == p[lp - 1 - b]) b++;
        fa[n] = a;
        fb[n++] = b;
    }
    /* the head nearest the preferred one that keeps every peer apart, one character kept at each end */
    for (size_t d = 0; d < len; d++)
        for (int sg = 0; sg < 2; sg++) {
            if ((sg && !d) || (!sg && d > head)) continue;
            size_t h = sg ? head + d : head - d;
            if (h < 1 || h + r > len - 1) continue;
            size_t tail = len - h - r;
            int k = 0;
            while (k < n && (fa[k] < h || fb[k] < tail)) k++;
            if (k == n) { snprintf(out, cap, "%.*s~%s", (int)h, s, s + h + r); return; }
        }
    if (head + r > len - 1) head = len - 1 - r;   /* no cut keeps them all apart: the preferred one */
    snprintf(out, cap, "%.*s~%s", (int)head, s, s + head + r);
}

/* What is cut is what is drawn: the escaped text (escaping is idempotent, so tui_addstr_clip leaves
** the result as it is and the widths hold). */
void tui_cut_middle(const char *s, const char *const *peers, int npeers, int w, char *out, size_t cap)
{
    enum { MAXP = 256 };
    char *es = qs_escape_dup(s, 0), *ep[MAXP];
    int n = 0;
    for (int i = 0; i < npeers && n < MAXP; i++) {
        if (!peers[i] || peers[i] == s) continue;
        if ((ep[n] = qs_escape_dup(peers[i], 0))) n++;
    }
    if (es) cut_middle(es, (const char *const *)ep, n, w, out, cap);
    else snprintf(out, cap, "%s", "?");
    for (int i = 0; i < n; i++) free(ep[i]);
    free(es);
}

/* Text wider than w is cut at its end, which then reads "..." (a cut with no mark misleads); like
** tui_cut_middle it cuts the escaped text, and never inside a UTF-8 character. */
void tui_cut_end(const char *s, int w, char *out, size_t cap)
{
    char *es = qs_escape_dup(s, 0);
    if (!es) { snprintf(out, cap, "?"); return; }
    if ((int)strlen(es) > w) {
        int k = w > 3 ? w - 3 : 0;
        while (k > 0 && ((unsigned char)es[k] & 0xC0) == 0x80) k--;   /* back to a character's first byte */
        snprintf(out, cap, "%.*s...", k, es);
    } else {
        snprintf(out, cap, "%s", es);
    }
    free(es);
}
