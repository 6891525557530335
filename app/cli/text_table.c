/*
** Text tables with columns sized by their cells (text_table.h).
*/
#include "text_table.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct qs_ttab {
    int ncol, nrow, cap;
    char **cell;        /* nrow x ncol, NULL = empty */
    char **tail;        /* per row */
    int *tail_col;
    unsigned char *left;
};

qs_ttab *qs_ttab_new(int ncol)
{
    qs_ttab *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ncol = ncol > 0 ? ncol : 1;
    if (!(t->left = calloc((size_t)t->ncol, 1))) { free(t); return NULL; }
    t->left[0] = 1;
    return t;
}

void qs_ttab_free(qs_ttab *t)
{
    if (!t) return;
    for (int i = 0; i < t->nrow * t->ncol; i++) free(t->cell[i]);
    for (int r = 0; r < t->nrow; r++) free(t->tail[r]);
    free(t->cell);
    free(t->tail);
    free(t->tail_col);
    free(t->left);
    free(t);
}

int qs_ttab_row(qs_ttab *t)
{
    if (t->nrow == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        char **c = realloc(t->cell, (size_t)cap * t->ncol * sizeof *c);
        if (!c) return -1;
        t->cell = c;
        char **tl = realloc(t->tail, (size_t)cap * sizeof *tl);
        if (!tl) return -1;
        t->tail = tl;
        int *tc = realloc(t->tail_col, (size_t)cap * sizeof *tc);
        if (!tc) return -1;
        t->tail_col = tc;
        t->cap = cap;
    }
    memset(t->cell + (size_t)t->nrow * t->ncol, 0, (size_t)t->ncol * sizeof *t->cell);
    t->tail[t->nrow] = NULL;
    t->tail_col[t->nrow] = t->ncol;
    t->nrow++;
    return 0;
}

void qs_ttab_set(qs_ttab *t, int col, const char *fmt, ...)
{
    if (!t->nrow || col < 0 || col >= t->ncol) return;
    char **c = &t->cell[(size_t)(t->nrow - 1) * t->ncol + col];
    va_list ap;
    va_start(ap, fmt);
    free(*c);
    if (vasprintf(c, fmt, ap) < 0) *c = NULL;
    va_end(ap);
}

void qs_ttab_tail(qs_ttab *t, int col, const char *text)
{
    if (!t->nrow) return;
    free(t->tail[t->nrow - 1]);
    t->tail[t->nrow - 1] = strdup(text);
    t->tail_col[t->nrow - 1] = col < t->ncol ? col : t->ncol;
}

void qs_ttab_align(qs_ttab *t, int col, int left)
{
    if (col >= 0 && col < t->ncol) t->left[col] = left != 0;
}

void qs_ttab_print(const qs_ttab *t, FILE *f)
{
    int *w = calloc((size_t)t->ncol, sizeof *w);
    if (!w) return;
    for (int r = 0; r < t->nrow; r++)
        for (int c = 0; c < t->tail_col[r]; c++) {
            const char *s = t->cell[(size_t)r * t->ncol + c];
            int n = s ? qs_text_cols(s) : 0;
            if (n > w[c]) w[c] = n;
        }
    for (int r = 0; r < t->nrow; r++) {
        int last = -1;   /* the last cell with text: a row ends without spaces */
        for (int c = 0; c < t->tail_col[r]; c++) {
            const char *s = t->cell[(size_t)r * t->ncol + c];
            if (s && *s) last = c;
        }
        for (int c = 0; c <= last; c++) {
            const char *s = t->cell[(size_t)r * t->ncol + c];
            if (!s) s = "";
            const int pad = w[c] - qs_text_cols(s);
            if (c) fputc(' ', f);
            if (t->left[c]) fprintf(f, "%s%*s", s, c < last ? pad : 0, "");
            else fprintf(f, "%*s%s", pad, "", s);
        }
        if (t->tail[r]) fprintf(f, "%s%s", last >= 0 ? " " : "", t->tail[r]);
        fputc('\n', f);
    }
    free(w);
}
