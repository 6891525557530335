/*
** Pre-tokenizers of Hugging Face `tokenizers` for byte-level BPE (used by llm_tok.c): the
** "pre_tokenizer" object of a tokenizer.json (Sequence, Split, Digits, ByteLevel) or, for a GGUF,
** the same object for the tokenizer.ggml.pre family (gpt2, smollm, qwen2, llama-bpe, ...).  Regexes
** run in PCRE2 (UTF + UCP), so Unicode classes (\p{L}, \p{N}, \s) are the library's, not ours.
*/
#ifndef QS_LLM_PRETOK_H
#define QS_LLM_PRETOK_H

#include <stddef.h>

#include "../kernels/qs_err.h"

typedef struct qs_pretok qs_pretok;             /* compiled; read-only once built */
typedef struct qs_pretok_scan qs_pretok_scan;   /* the scratch of one tokenization */

/* One piece of text the BPE model sees (raw UTF-8 bytes, before the byte-to-unicode mapping): its
** first `virt` bytes (0 or 1: ByteLevel's add_prefix_space) are not in the text, s[virt] is at offset
** `at` of qs_pretok_run's coordinates.  Returns 0, or -1 to stop (with e set). */
typedef int (*qs_pretok_cb)(void *ctx, const char *s, size_t n, size_t at, size_t virt);

/* qs_pretok_run's code for a regex that failed on the text (too much backtracking, too much memory):
** e names the pattern, the text and the byte offset. */
#define QS_PRETOK_REGEX (-2)

/* Compile a tokenizer.json "pre_tokenizer" (compact JSON).  Errors name the unsupported part. */
qs_pretok *qs_pretok_from_json(const char *json, qs_err *e);
/* The pre-tokenizer llama.cpp / tokenizers use for a tokenizer.ggml.pre family ("" = gpt2);
** *ignore_merges is set for the families whose BPE model has ignore_merges (Llama 3). */
qs_pretok *qs_pretok_from_family(const char *family, int *ignore_merges, qs_err *e);
void qs_pretok_free(qs_pretok *p);

/* Scratch for splitting one text (name: the text in messages, NULL for "the text"); reusable for
** further texts of the same pre-tokenizer, one at a time (qs_pretok_scan_name renames it). */
qs_pretok_scan *qs_pretok_scan_new(const qs_pretok *p, const char *name, qs_err *e);
void qs_pretok_scan_name(qs_pretok_scan *sc, const char *name);
void qs_pretok_scan_free(qs_pretok_scan *sc);
/* Where position 0 of the following runs is in the text (0 unless set): Metaspace's prepend_scheme
** "first" adds its space only to the piece at the start of the text. */
void qs_pretok_scan_origin(qs_pretok_scan *sc, size_t origin);
/* Split s[0..n) (one stretch of text between added tokens, at byte offset `at` of the text) and call
** cb on each piece, in order.  Regex work is bounded: a few hundred PCRE2 steps per byte, PCRE2's
** heap, depth and JIT stack limits; past them the split stops with QS_PRETOK_REGEX.  Returns 0, -1
** (cb's error, out of memory) or QS_PRETOK_REGEX. */
int qs_pretok_run(qs_pretok_scan *sc, const char *s, size_t n, size_t at, qs_pretok_cb cb, void *ctx, qs_err *e);

#endif
