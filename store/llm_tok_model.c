/*
** Dispatch of the tokenizer models other than byte-level BPE (llm_tok_model.h) to their files:
** Unigram and SentencePiece-style BPE (llm_tok_spm.h).
*/
#include "llm_tok_model.h"

#include <stdlib.h>

#include "llm_tok_spm.h"

struct qs_tok_model {
    qs_tok_spm *spm;   /* Unigram, BPE over characters */
};

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
    if (v->model == QS_TOK_UNIGRAM || (v->model == QS_TOK_BPE && !v->byte_level)) {
        qs_tok_model *m = calloc(1, sizeof *m);
        if (!m) return qs_fail(e, "out of memory");
        if (qs_tok_spm_build(v, &m->spm, e)) { free(m); return -1; }
        *out = m;
        return 0;
    }
    return qs_fail(e, "the tokenizer model %s is not supported yet", model_name(v));
}

void qs_tok_model_free(qs_tok_model *m)
{
    if (!m) return;
    qs_tok_spm_free(m->spm);
    free(m);
}

int qs_tok_model_piece(const qs_llm_vocab *v, const qs_tok_model *m, const char *s, size_t n, qs_tok_emit_fn emit,
                       void *ctx, qs_err *e)
{
    if (m && m->spm) return qs_tok_spm_piece(v, m->spm, s, n, emit, ctx, e);
    return qs_fail(e, "the tokenizer model %s is not supported yet", model_name(v));
}
