/*
** Normalizers of Hugging Face `tokenizers` (tokenizer.json "normalizer"): the text between added
** tokens is normalized before the pre-tokenizer sees it, and every output byte remembers the input
** byte it came from, so that token spans point into the original text (llm_tok.h, qs_llm_tokenize_offs).
*/
#ifndef QS_LLM_TOK_NORM_H
#define QS_LLM_TOK_NORM_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/qs_err.h"

typedef struct qs_tok_norm qs_tok_norm;   /* compiled; read-only once built */

/* The output of one normalization; reused between calls (grown as needed), freed by qs_tok_norm_buf_free. */
typedef struct qs_tok_norm_buf {
    char *s;          /* normalized bytes [0, n) */
    uint32_t *map;    /* [2n]: output byte i came from input bytes [map[2i], map[2i+1]) (the whole
                      ** character it was made from, as tokenizers' alignments; a character written
                      ** back unchanged maps byte to byte), offsets relative to the input */
    size_t n, cap;
} qs_tok_norm_buf;

/* Compile a "normalizer" object (compact JSON).  NULL with e set for an unsupported one (the message
** names the part); a JSON null gives NULL with e clear (no normalizer). */
qs_tok_norm *qs_tok_norm_from_json(const char *json, qs_err *e);
/* SentencePiece's precompiled normalization rules (tokenizer.json "Precompiled" normalizer's
** precompiled_charsmap, decoded from base64; tokenizer.model's normalizer_spec.precompiled_charsmap):
** a double-array trie of replacements.  NULL with e set when the blob is malformed. */
qs_tok_norm *qs_tok_norm_from_charsmap(const uint8_t *blob, size_t n, qs_err *e);
/* A sequence of two normalizers (either may be NULL); takes ownership of both.  NULL with e set when out
** of memory (both are freed). */
qs_tok_norm *qs_tok_norm_chain(qs_tok_norm *first, qs_tok_norm *second, qs_err *e);
void qs_tok_norm_free(qs_tok_norm *nm);

/* Normalize s[0..n) into b.  Returns 0, or -1 (out of memory) with e set. */
int qs_tok_norm_run(const qs_tok_norm *nm, const char *s, size_t n, qs_tok_norm_buf *b, qs_err *e);
/* The same for text that continues a stretch (cont != 0: a LoPT chunk that does not start one):
** Prepend adds nothing. */
int qs_tok_norm_run_cont(const qs_tok_norm *nm, const char *s, size_t n, int cont, qs_tok_norm_buf *b, qs_err *e);
void qs_tok_norm_buf_free(qs_tok_norm_buf *b);

#endif
