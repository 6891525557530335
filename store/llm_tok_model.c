/*
** Dispatch of the tokenizer models other than byte-level BPE (llm_tok_model.h) to their files.
*/
#include "llm_tok_model.h"

#include <stdlib.h>

static const char *model_name(const qs_llm_vocab *v)
{
    switch (v->model) {
    case QS_TOK_WORDPIECE: return "WordPiece";
    case QS_TOK_UNIGRAM: return "Unigram";
    default: return "BPE without byte-level spelling (SentencePiece style)";
    }
}

int qs_tok_model_build(const qs_llm_vocab *v, qs_tok_model **out, qs_err *e)
{
    *out = NULL;
    return qs_fail(e, "the tokenizer model %s is not supported yet", model_name(v));
}

void qs_tok_model_free(qs_tok_model *m)
{
    free(m);
}

int qs_tok_model_piece(const qs_llm_vocab *v, const qs_tok_model *m, const char *s, size_t n, qs_tok_emit_fn emit,
                       void *ctx, qs_err *e)
{
    (void)m; (void)s; (void)n; (void)emit; (void)ctx;
    return qs_fail(e, "the tokenizer model %s is not supported yet", model_name(v));
}
