/*
** libFuzzer target for the workbench's `:` command-line splitter (app/tui/tui_args.c).
**
** Any input: the words are NUL-terminated, non-empty unless quoted, no longer than the input, and
** the array is NULL-terminated with the returned count.  Round trip: the words quoted back with
** single quotes ('\'' for a quote) split into the same words.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../app/tui/tui.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    char **w = NULL;
    int n = tui_split_args(s, &w);
    if (n < 0) { free(s); return 0; }
    CHECK(w && w[n] == NULL);
    size_t len = strlen(s), total = 0;
    for (int i = 0; i < n; i++) {
        CHECK(strlen(w[i]) <= len);
        total += strlen(w[i]);
    }
    CHECK(total <= len);
    /* quote back and split again */
    char *q = malloc(4 * len + 3 * (size_t)n + 1), *o = q;
    if (q) {
        for (int i = 0; i < n; i++) {
            if (i) *o++ = ' ';
            *o++ = '\'';
            for (const char *c = w[i]; *c; c++) {
                if (*c == '\'') { memcpy(o, "'\\''", 4); o += 4; }
                else *o++ = *c;
            }
            *o++ = '\'';
        }
        *o = 0;
        char **w2 = NULL;
        int n2 = tui_split_args(q, &w2);
        if (n2 >= 0) {
            CHECK(n2 == n);
            for (int i = 0; i < n; i++) CHECK(strcmp(w[i], w2[i]) == 0);
            tui_free_args(w2);
        }
        free(q);
    }
    tui_free_args(w);
    free(s);
    return 0;
}
