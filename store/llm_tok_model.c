/*
** Dispatch of the tokenizer models other than byte-level BPE (llm_tok_model.h) to their files:
** WordPiece (llm_tok_wordpiece.h), Unigram and SentencePiece-style BPE (llm_tok_spm.h).
*/
#include "llm_tok_model.h"

#include <stdlib.h>

#include "llm_tok_spm.h"
#include "llm_tok_wordpiece.h"

struct qs_tok_model {
    int model;          /* QS_TOK_* */
    qs_tok_wp *wp;      /* QS_TOK_WORDPIECE */
    qs_tok_spm *spm;    /* Unigram, BPE over characters */
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
    qs_tok_model *m = calloc(1, sizeof *m);
    if (!m) return qs_fail(e, "out of memory");
    m->model = v->model;
    if (v->model == QS_TOK_WORDPIECE) {
        if (qs_tok_wp_build(v, &m->wp, e)) { free(m); return -1; }
    } else if (v->model == QS_TOK_UNIGRAM || (v->model == QS_TOK_BPE && !v->byte_level)) {
        if (qs_tok_spm_build(v, &m->spm, e)) { free(m); return -1; }
    } else {
        free(m);
        return qs_fail(e, "the tokenizer model %s is not supported yet", model_name(v));
    }
    *out = m;
    return 0;
}

void qs_tok_model_free(qs_tok_model *m)
{
    if (!m) return;
    qs_tok_wp_free(m->wp);
    qs_tok_spm_free(m->spm);
    free(m);
}

int qs_tok_model_piece(const qs_llm_vocab *v, const qs_tok_model *m, const char *s, size_t n, int cont,
                       qs_tok_emit_fn emit, void *ctx, qs_err *e)
{
    if (v->model == QS_TOK_WORDPIECE && m && m->wp) return qs_tok_wp_piece(v, m->wp, s, n, emit, ctx, e);
    if (m && m->spm) return qs_tok_spm_piece(v, m->spm, s, n, cont, emit, ctx, e);
    return qs_fail(e, "the tokenizer model %s is not supported yet", model_name(v));
}

size_t qs_tok_model_detok(const qs_llm_vocab *v, const qs_tok_model *m, int id, char *out, size_t cap)
{
    return qs_tok_wp_detok(v, m ? m->wp : NULL, id, out, cap);
}
