/*
** LoPT (llm_lopt.h).  For now the sequential tokenizer with a growing output.
*/
#include "llm_lopt.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

int qs_lopt_tokenize(const qs_llm_vocab *v, const char *name, const char *text, size_t len, const qs_lopt_opts *o,
                     int32_t **ids, uint32_t **offs, size_t *n, qs_lopt_stats *st, qs_err *e)
{
    (void)o;
    *ids = NULL; *n = 0;
    if (offs) *offs = NULL;
    if (st) memset(st, 0, sizeof *st);
    size_t cap = len / 3 + 64;
    for (;;) {
        if (cap > INT_MAX) return qs_fail(e, "%s gives more than %d tokens", name ? name : "the text", INT_MAX);
        int32_t *ni = realloc(*ids, cap * sizeof *ni);
        if (ni) *ids = ni;
        uint32_t *no = offs ? realloc(*offs, 2 * cap * sizeof *no) : NULL;
        if (no) *offs = no;
        if (!ni || (offs && !no)) break;
        qs_err te = {{0}};
        int k = qs_llm_tokenize_offs(v, name, text, len, *ids, offs ? *offs : NULL, (int)cap, &te);
        if (k >= 0) { *n = (size_t)k; if (st) st->chunks = 1; return 0; }
        if (!strstr(te.msg, "gives more than")) { *e = te; goto fail; }
        cap *= 2;
    }
    qs_fail(e, "out of memory for the tokens of %s", name ? name : "the text");
fail:
    free(*ids); *ids = NULL;
    if (offs) { free(*offs); *offs = NULL; }
    return -1;
}
