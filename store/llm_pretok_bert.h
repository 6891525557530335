/*
** The pre-tokenizers of BERT-style (WordPiece) tokenizers in Hugging Face `tokenizers`:
** BertPreTokenizer, Whitespace, WhitespaceSplit and Punctuation, turned into the Split steps
** llm_pretok.c runs, with tokenizers' own character classes (llm_pretok_bert_tab.h).  Internal to
** llm_pretok.c.
*/
#ifndef QS_LLM_PRETOK_BERT_H
#define QS_LLM_PRETOK_BERT_H

#include <jansson.h>

#include "../kernels/qs_err.h"

/* The equivalent of the pre-tokenizer j (of type `type`) as Split steps: *out a new JSON object (a
** Split or a Sequence of them, for the caller to decref), or NULL when j is none of these four (or a
** Punctuation whose behavior is not a known name: the caller reports it).  -1 when out of memory. */
int qs_pretok_bert_expand(json_t *j, const char *type, json_t **out, qs_err *e);

#endif
