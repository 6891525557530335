/*
** LoPT, lossless parallel tokenization (arXiv 2511.04952; a documented reconstruction, docs/tokenize.md):
** a long text is cut into overlapping chunks, the chunks are tokenized in parallel on qscope's pool
** with each token's byte span, and neighbours are merged at an anchor (a run of tokens with identical
** ids and spans in both chunks' overlap, bounded by two cut positions the pre-tokenizer provably splits
** at); without one the overlap grows, then the chunk; a tokenizer the proof does not cover, a failed
** chunk or a differing anchor sends the text through the sequential tokenizer.  The ids and spans
** equal qs_llm_tokenize_offs's on the whole text, whatever the thread count.
*/
#ifndef QS_LLM_LOPT_H
#define QS_LLM_LOPT_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/qs_err.h"
#include "llm_tok.h"

#define QS_LOPT_CHUNK   65536   /* the default chunk (bytes) */
#define QS_LOPT_OVERLAP 64      /* default bytes of overlap */

typedef struct qs_lopt_opts {
    int threads;       /* <= 0: every core; 1: the sequential tokenizer, no chunks */
    size_t chunk;      /* bytes of text per chunk (0: QS_LOPT_CHUNK, whatever the thread count: the chunks
                       ** run on one tokenizer state per pool slot, whose piece cache stays warm) */
    size_t overlap;    /* bytes each chunk reads past its end (0: QS_LOPT_OVERLAP) */
} qs_lopt_opts;

typedef struct qs_lopt_stats {
    size_t chunks;     /* chunks tokenized */
    size_t anchors;    /* neighbours merged at an anchor */
    size_t regrown;    /* overlaps doubled, or boundaries dropped (the chunk grew), for want of an anchor */
    size_t fallback;   /* 1: the text went through the sequential tokenizer although threads != 1 and
                       ** it is longer than a chunk */
    const char *why;   /* why (a static string), or NULL */
} qs_lopt_stats;

/* Tokenize text[0..len) (name in messages, NULL: "the text") into *ids (malloc'ed, *n of them) and,
** when offs is not NULL, *offs (malloc'ed, 2 * *n: each token's byte span, as qs_llm_tokenize_offs).
** o NULL: defaults; st may be NULL.  Memory grows with the output, never with what a header claims.
** Returns 0, or -1 with e set (messages as qs_llm_tokenize_named's). */
int qs_lopt_tokenize(const qs_llm_vocab *v, const char *name, const char *text, size_t len, const qs_lopt_opts *o,
                     int32_t **ids, uint32_t **offs, size_t *n, qs_lopt_stats *st, qs_err *e);

#endif
