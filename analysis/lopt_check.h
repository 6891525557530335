/*
** LoPT measured against the sequential tokenizer: what `qscope bench tokenize` and the LoPT claims
** (claims_lopt.c) share — the evaluation texts (Austen's six novels of `make data`), the adversarial
** texts, the sequential reference, the id comparison and a built-in tokenizer for when `make data`'s
** is absent.  LoPT itself is store/llm_lopt.h.
*/
#ifndef QS_LOPT_CHECK_H
#define QS_LOPT_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/qs_err.h"
#include "../store/llm_tok.h"

/* The six novels `make data` writes, in publication order, relative to the project root. */
#define QS_LOPT_AUSTEN_N 6
extern const char *const qs_lopt_austen[QS_LOPT_AUSTEN_N];

/* The files concatenated into *buf (malloc'ed, NUL-terminated after *len bytes).  -1 with e naming the
** file that cannot be read; texts of 2 GiB and more are refused (spans are 32-bit). */
int qs_lopt_read_texts(const char *const *paths, int n, char **buf, size_t *len, qs_err *e);

/* Whether every Austen novel is there (make data). */
int qs_lopt_have_austen(void);

/* The sequential reference: qs_llm_tokenize_named on the whole text, the output grown as needed. */
int qs_lopt_sequential(const qs_llm_vocab *v, const char *name, const char *text, size_t len, int32_t **ids, size_t *n,
                       qs_err *e);

/* The first index where two id sequences differ (a length difference counts), or -1 when equal. */
long qs_lopt_first_diff(const int32_t *a, size_t na, const int32_t *b, size_t nb);

/* FNV-1a 64 over the ids as little-endian int32 (tests/bench/tokenizers_peer.py computes the same). */
uint64_t qs_lopt_ids_hash(const int32_t *ids, size_t n);

/* Adversarial texts of about `size` bytes each (fixed seeds): no spaces, one repeated character, runs of
** spaces and newlines, CJK, emoji with ZWJ sequences, CRLF lines, long digit runs, invalid UTF-8,
** random bytes, and all of them mixed in short stretches into prose (where LoPT finds cut positions
** next to them rather than falling back to the sequential tokenizer). */
typedef struct qs_lopt_text { const char *name; char *text; size_t len; } qs_lopt_text;
#define QS_LOPT_NADV 10
int qs_lopt_adversarial(size_t size, qs_lopt_text out[QS_LOPT_NADV], qs_err *e);
void qs_lopt_texts_free(qs_lopt_text *t, int n);
/* Generated English-like prose (words, spaces, punctuation, paragraphs) of about `size` bytes (seed 1):
** the speed-up's text when the novels are absent. */
int qs_lopt_prose(size_t size, qs_lopt_text *out, qs_err *e);

/* A small byte-level BPE tokenizer built in (the 256 byte symbols, a few dozen English merges, the GPT-2
** pre-tokenizer after individual digits, as SmolLM2's): for the claims when `make data`'s model is absent. */
int qs_lopt_builtin_vocab(qs_llm_vocab *v, qs_err *e);

#endif
