/*
** Normalizers of tokenizer.json (llm_tok_norm.h).  Not applied yet: every normalizer compiles to
** "none", as before this interface existed (a documented gap: docs/tokenize.md).
*/
#include "llm_tok_norm.h"

#include <stdlib.h>

qs_tok_norm *qs_tok_norm_from_json(const char *json, qs_err *e)
{
    (void)json; (void)e;
    return NULL;
}

qs_tok_norm *qs_tok_norm_from_charsmap(const uint8_t *blob, size_t n, qs_err *e)
{
    (void)blob; (void)n;
    qs_fail(e, "precompiled normalization rules are not supported yet");
    return NULL;
}

qs_tok_norm *qs_tok_norm_chain(qs_tok_norm *first, qs_tok_norm *second, qs_err *e)
{
    free(first); free(second);
    qs_fail(e, "normalizers are not supported yet");
    return NULL;
}

void qs_tok_norm_free(qs_tok_norm *nm)
{
    free(nm);
}

int qs_tok_norm_run(const qs_tok_norm *nm, const char *s, size_t n, qs_tok_norm_buf *b, qs_err *e)
{
    (void)nm; (void)s; (void)n; (void)b;
    return qs_fail(e, "normalizers are not supported yet");
}

void qs_tok_norm_buf_free(qs_tok_norm_buf *b)
{
    free(b->s); free(b->map);
    b->s = NULL; b->map = NULL; b->n = b->cap = 0;
}
