/*
** The workbench's `:` command line: splitting a line into words the way a shell would for the
** simple cases (blanks separate words; single quotes keep everything literal; a backslash outside
** single quotes takes the next character literally; double quotes group).  No expansion of any
** kind.  Fuzzed by tests/fuzz/fuzz_tui_args.c.
*/
#include <stdlib.h>
#include <string.h>

#include "tui.h"

int tui_split_args(const char *s, char ***out)
{
    *out = NULL;
    size_t cap = 8, n = 0;
    char **v = calloc(cap, sizeof *v);
    if (!v) return -1;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        char *w = malloc(strlen(p) + 1);
        if (!w) { tui_free_args(v); return -1; }
        size_t k = 0;
        char q = 0;
        for (; *p && (q || (*p != ' ' && *p != '\t')); p++) {
            if (q && *p == q) q = 0;
            else if (!q && (*p == '\'' || *p == '"')) q = *p;
            else if (*p == '\\' && p[1] && q != '\'') w[k++] = *++p;
            else w[k++] = *p;
        }
        w[k] = 0;
        if (n + 2 > cap) {
            char **nv = realloc(v, 2 * cap * sizeof *nv);
            if (!nv) { free(w); tui_free_args(v); return -1; }
            v = nv;
            cap *= 2;
        }
        v[n++] = w;
        v[n] = NULL;
    }
    *out = v;
    return (int)n;
}

void tui_free_args(char **v)
{
    if (!v) return;
    for (char **a = v; *a; a++) free(*a);
    free(v);
}
