/*
** SentencePiece-style models behind llm_tok_model.h: Unigram (llm_tok_unigram.c) and BPE over
** characters (llm_tok_spm_bpe.c), with what they share (llm_tok_spm.c): their options (from
** v->model_json), the trie of candidate pieces, the "model text" a piece becomes (spaces as the
** Metaspace replacement, SentencePiece's own whitespace rules for tokenizer.model and GGUF "llama"
** vocabularies) with each byte's source span, and the output of unknown characters (byte fallback to
** <0xXX> tokens, else the unknown token, consecutive ones fused).  Internal to store/.
*/
#ifndef QS_LLM_TOK_SPM_H
#define QS_LLM_TOK_SPM_H

#include <stddef.h>
#include <stdint.h>

#include "llm_tok_model.h"

/* How the pieces were made, which decides the reference to follow where they differ. */
enum { SPM_JSON = 0,   /* tokenizer.json: Hugging Face `tokenizers` (any vocabulary entry is a candidate) */
       SPM_PROTO = 1,  /* tokenizer.model: `sentencepiece` (NORMAL pieces only, float score sums) */
       SPM_GGUF = 2 }; /* GGUF tokenizer.ggml.model "llama": llama.cpp's llm_tokenizer_spm */

typedef struct qs_tok_spm {
    int kind;              /* QS_TOK_UNIGRAM or QS_TOK_BPE */
    int src;               /* SPM_JSON / SPM_PROTO / SPM_GGUF */
    int unk;               /* id of the unknown token, or -1 */
    int byte_fallback, fuse_unk;
    int by_score;          /* BPE: merge by the merged piece's score (no merge list) */
    int has_unused;        /* BPE from tokenizer.model with UNUSED pieces: merged into, then split again */
    int seg_ok;            /* every "▁" inside a piece follows another: no token starts inside a run's
                           ** first "▁" (BPE segments, Unigram blocks) */
    /* SentencePiece's normalizer flags (SPM_PROTO, SPM_GGUF), applied to each piece */
    int spm_norm, dummy_prefix, remove_ws, escape_ws;
    int meta;              /* a Metaspace pre-tokenizer: ' ' is spelled rep */
    char rep[8];           /* the whitespace replacement ("▁") */
    size_t rep_len;
    int byte_id[256];      /* id of <0xXX>, or -1 */
    double min_score, max_score;
    /* trie of the candidate pieces: node 0 the root, edges keyed by (node, byte) */
    struct spm_edge { uint32_t node, child; uint8_t byte; } *edges;
    size_t ecap;
    int32_t *term;         /* [nodes]: id ending at the node, or -1 */
    uint32_t nodes;
} qs_tok_spm;

/* A piece as the model sees it: t[0..n) with each byte's source span [map[2i], map[2i+1]) in the piece. */
typedef struct {
    char *t;
    uint32_t *map;
    size_t n;
    int tile;   /* SentencePiece's whitespace removal: a token ends where the next one starts, so
                ** the spaces removed after it are its own (sentencepiece's spans) */
} spm_text;

/* The tokens of a piece on their way out: a pending unknown token (fused with the next unknown). */
typedef struct {
    qs_tok_emit_fn emit;
    void *ctx;
    int unk;               /* the unknown token's id */
    int pend;              /* 1: an unknown token [pa, pb) waits */
    uint32_t pa, pb;
} spm_out;

int qs_tok_spm_build(const qs_llm_vocab *v, qs_tok_spm **out, qs_err *e);
void qs_tok_spm_free(qs_tok_spm *m);
/* cont: the piece continues a stretch (a LoPT chunk): no dummy prefix, no leading spaces removed. */
int qs_tok_spm_piece(const qs_llm_vocab *v, const qs_tok_spm *m, const char *s, size_t n, int cont, qs_tok_emit_fn emit,
                     void *ctx, qs_err *e);

/* Is id a candidate piece of the model (in the trie, or a merge result)? */
int qs_tok_spm_candidate(const qs_llm_vocab *v, const qs_tok_spm *m, int id);
/* Child of trie node `node` by byte b, or 0 (none). */
uint32_t qs_tok_spm_step(const qs_tok_spm *m, uint32_t node, uint8_t b);
/* Bytes of the UTF-8 character at t[i] (1 for an invalid byte). */
size_t qs_tok_spm_charlen(const char *t, size_t n, size_t i);
/* Source span of model-text bytes [a, b). */
void qs_tok_spm_span(const spm_text *x, size_t a, size_t b, uint32_t *sa, uint32_t *sb);
/* Output token id for model-text bytes [a, b). */
int qs_tok_spm_put(const qs_tok_spm *m, spm_out *o, const spm_text *x, int id, size_t a, size_t b, qs_err *e);
/* Model-text bytes [a, b) that are no piece: <0xXX> tokens (each spanning its byte) when byte_fallback
** has them all, else the unknown token (fused with a preceding one when fuse_unk). */
int qs_tok_spm_unknown(const qs_llm_vocab *v, const qs_tok_spm *m, spm_out *o, const spm_text *x, size_t a, size_t b,
                       qs_err *e);
int qs_tok_spm_flush(spm_out *o, qs_err *e);

/* qs_llm_detok for these vocabularies: "▁" is a space, a <0xXX> token its byte, control tokens as
** spelled.  id is in range; cap > 0. */
size_t qs_tok_spm_detok(const qs_llm_vocab *v, int id, char *out, size_t cap);

/* The two models on one prepared piece (llm_tok_unigram.c, llm_tok_spm_bpe.c). */
int qs_tok_unigram_run(const qs_llm_vocab *v, const qs_tok_spm *m, const spm_text *x, spm_out *o, qs_err *e);
int qs_tok_spm_bpe_run(const qs_llm_vocab *v, const qs_tok_spm *m, const spm_text *x, spm_out *o, qs_err *e);

#endif
