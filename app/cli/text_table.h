/*
** A text table whose columns are as wide as their widest cell (issue 28: fixed widths let a wide
** interval push the rest of its row out of line).  Cells are collected first, measured in terminal
** columns (UTF-8 characters: "±" is one column, two bytes), then printed one space apart: by default the first
** column left-aligned, the others right-aligned.  A row may end in a free tail (a FAILED
** message) that is printed after its cells and widens no column.
*/
#ifndef QS_TEXT_TABLE_H
#define QS_TEXT_TABLE_H

#include <stdio.h>

typedef struct qs_ttab qs_ttab;

/* A table of ncol columns; NULL when out of memory. */
qs_ttab *qs_ttab_new(int ncol);
void qs_ttab_free(qs_ttab *t);
/* Start a new row; cells not set stay empty.  0, or -1 when out of memory. */
int qs_ttab_row(qs_ttab *t);
/* Set cell col of the last row (printf-style). */
void qs_ttab_set(qs_ttab *t, int col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The last row's tail: printed after its cells (from column col on, the others left empty). */
void qs_ttab_tail(qs_ttab *t, int col, const char *text);
/* Column col left-aligned (left 1; the first column is by default) or right-aligned (0; the others). */
void qs_ttab_align(qs_ttab *t, int col, int left);
/* Print every row; no trailing spaces. */
void qs_ttab_print(const qs_ttab *t, FILE *f);

#endif
