/*
** WordPiece (BERT, all-MiniLM), as Hugging Face `tokenizers` defines it: the model (models/wordpiece),
** its decoder, and a BERT vocab.txt read into the same vocabulary a tokenizer.json gives.  Internal to
** store/ (llm_tok_model.c dispatches to the model; llm_load_hf.c reads vocab.txt).
*/
#ifndef QS_LLM_TOK_WORDPIECE_H
#define QS_LLM_TOK_WORDPIECE_H

#include <stddef.h>

#include "llm_tok_model.h"

typedef struct qs_tok_wp qs_tok_wp;   /* compiled from v->model_json; read-only */

/* unk_token (default "[UNK]"), continuing_subword_prefix ("##") and max_input_chars_per_word (100)
** from v->model_json.  An unk_token missing from the vocabulary is not an error here: like
** `tokenizers`, only a word that needs it fails. */
int qs_tok_wp_build(const qs_llm_vocab *v, qs_tok_wp **out, qs_err *e);
void qs_tok_wp_free(qs_tok_wp *w);
/* Greedy longest-match-first over one piece (see llm_tok_model.h for emit). */
int qs_tok_wp_piece(const qs_llm_vocab *v, const qs_tok_wp *w, const char *s, size_t n, qs_tok_emit_fn emit,
                    void *ctx, qs_err *e);
/* The WordPiece decoder's text for token id when it is not the first of the text: the prefix
** stripped from a continuation, a space before anything else, then the decoder's cleanup (" ." ->
** ".", " n't" -> "n't", ...).  w NULL: prefix "##".  Appends at most cap-1 bytes + NUL to out. */
size_t qs_tok_wp_detok(const qs_llm_vocab *v, const qs_tok_wp *w, int id, char *out, size_t cap);

/* A BERT vocab.txt image (one token per line, id = line number; "\r\n" accepted) -> v as the
** tokenizer.json that `transformers`' BertConverter writes for it: WordPiece with unk_token,
** BertNormalizer (lowercase = do_lower_case, handle_chinese_chars = tokenize_chinese_chars,
** strip_accents), BertPreTokenizer, the special tokens as added tokens.  These settings come from
** config (a tokenizer_config.json image, or NULL for BertTokenizer's defaults: lowercase, [UNK],
** [SEP], [PAD], [CLS], [MASK]).  Errors (an empty or repeated token, invalid UTF-8, a bad config)
** name the line and not the file (the caller adds it).  source: for the tokenizer's messages. */
int qs_llm_vocab_txt_parse(const char *buf, size_t n, const char *config, size_t config_n, const char *source,
                           qs_llm_vocab *v, qs_err *e);

#endif
