/*
** The tokenizer models other than byte-level BPE, as llm_tok.c calls them on each pre-tokenized piece
** (after the normalizer and the pre-tokenizer): WordPiece (llm_tok_wordpiece.c), Unigram
** (llm_tok_unigram.c) and SentencePiece-style BPE over characters with byte fallback.  A model
** answers each token of the piece with its id and the byte span it was made from, relative to the
** piece.  Internal to store/ (the public entry points are llm_tok.h's).
*/
#ifndef QS_LLM_TOK_MODEL_H
#define QS_LLM_TOK_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "llm_tok.h"

/* Called once per token of a piece, in order: id, and bytes [a, b) of the piece (a <= b <= n; spans
** never go backwards).  Returns 0, or -1 to stop (e set by the callee). */
typedef int (*qs_tok_emit_fn)(void *ctx, int id, uint32_t a, uint32_t b);

/* Compiled, read-only state of a model (built once in qs_llm_tok_prepare from v->model_json and the
** vocabulary; NULL when the model needs none). */
typedef struct qs_tok_model qs_tok_model;

/* Build the state of v->model (QS_TOK_WORDPIECE, QS_TOK_UNIGRAM, or QS_TOK_BPE without byte_level).
** An unsupported or inconsistent model: NULL with e set (the message does not name the file).
** *out is NULL and 0 returned for a model without state. */
int qs_tok_model_build(const qs_llm_vocab *v, qs_tok_model **out, qs_err *e);
void qs_tok_model_free(qs_tok_model *m);

/* Tokenize one piece s[0..n) with the model of v (not byte-level BPE, which llm_tok.c runs itself).
** cont: the piece continues a stretch (qs_llm_tok_state_continues): SentencePiece adds no dummy prefix
** and removes no leading spaces. */
int qs_tok_model_piece(const qs_llm_vocab *v, const qs_tok_model *m, const char *s, size_t n, int cont,
                       qs_tok_emit_fn emit, void *ctx, qs_err *e);

/* The text of token id (0 <= id < v->n) when it follows other tokens, as the model's decoder writes it
** (WordPiece: "##" joins, a space otherwise; m NULL: the decoder's defaults).  Appends at most cap-1
** bytes + NUL; returns the bytes written.  For v->model == QS_TOK_WORDPIECE. */
size_t qs_tok_model_detok(const qs_llm_vocab *v, const qs_tok_model *m, int id, char *out, size_t cap);

#endif
