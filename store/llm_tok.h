/*
** The byte-level BPE tokenizer of the LLM loaders (llm_tok.c; pre-tokenizers in llm_pretok.c): the
** vocabulary both loaders fill (GGUF tokenizer.ggml.*, Hugging Face tokenizer.json), tokenization
** equal to Hugging Face `tokenizers`, and detokenization.
*/
#ifndef QS_LLM_TOK_H
#define QS_LLM_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/qs_err.h"

typedef struct qs_llm_tok qs_llm_tok;

/* The tokenizer model (tokenizer.json model.type; GGUF tokenizer.ggml.model). */
enum { QS_TOK_BPE = 0, QS_TOK_WORDPIECE = 1, QS_TOK_UNIGRAM = 2 };

/* Flags of an added token (tokenizer.json added_tokens[]; aflags[id]). */
enum { QS_TOK_ADDED = 1, QS_TOK_LSTRIP = 2, QS_TOK_RSTRIP = 4, QS_TOK_NORMALIZED = 8, QS_TOK_SINGLE_WORD = 16,
       QS_TOK_SPECIAL = 32 };

typedef struct qs_llm_vocab {
    int n;               /* number of tokens (0: the file has no vocabulary) */
    char *text;          /* all token strings, NUL-separated */
    uint32_t *off;       /* [n] offset of token i in text */
    int32_t *type;       /* [n] tokenizer.ggml.token_type, or NULL (1 normal, 3 control, ...) */
    int bos, eos;        /* -1 when absent */
    int add_bos;         /* 1: the model's tokenizer prepends BOS (GGUF tokenizer.ggml.add_bos_token; HF
                         ** tokenizer_config add_bos_token, else a TemplateProcessing post-processor that
                         ** starts with a special token); 0 otherwise */
    int byte_level;      /* tokenizer.ggml.model == "gpt2": GPT-2 byte-to-unicode token spelling */
    char pre[32];        /* tokenizer.ggml.pre, or "" */
    /* BPE merges (tokenizer.ggml.merges, "left right" per rank) and lookup tables */
    int nmerges;
    char *mtext;         /* NUL-separated */
    uint32_t *moff;
    uint32_t *vhash, *mhash;   /* open addressing, value+1 (0 = empty); capacities are powers of two */
    size_t vhcap, mhcap;
    int *special;        /* ids of control tokens (token_type 3), longest first */
    int nspecial;
    /* Hugging Face tokenizer.json only (NULL for GGUF): the "pre_tokenizer" object as compact JSON,
    ** and the pattern of its first Split/Regex step (or NULL); for the full pre-tokenizer. */
    char *pre_json;
    char *pre_regex;
    int ignore_merges;   /* tokenizer.json model.ignore_merges: a piece that is a token is not merged */
    int model;           /* QS_TOK_BPE (byte-level when byte_level), QS_TOK_WORDPIECE, QS_TOK_UNIGRAM */
    char *model_json;    /* tokenizer.json "model" without vocab and merges (unk_token, byte_fallback,
                         ** continuing_subword_prefix, ...), compact JSON, or NULL */
    char *norm_json;     /* tokenizer.json "normalizer" as compact JSON, or NULL (none) */
    uint8_t *aflags;     /* [n] QS_TOK_ADDED|... for added tokens (tokenizer.json), or NULL */
    qs_llm_tok *tok;     /* compiled pre-tokenizer and added-token trie (qs_llm_tok_prepare), or NULL */
    double *score;       /* [n] piece scores (Unigram; SentencePiece BPE from tokenizer.model or a GGUF
                         ** "llama" vocabulary, which merges by score), or NULL */
} qs_llm_vocab;

/* Compile what tokenizing needs once, when the vocabulary is loaded: the pre-tokenizer (pre_json,
** else the pre family) and the trie of added tokens.  `source` (tokenizer.json, the .gguf) names the
** file in messages.  A pre-tokenizer that cannot be compiled does not fail here (the weights stay
** usable with token ids): its message, naming `source`, is what qs_llm_tokenize then reports.
** Returns -1 only when out of memory.  Call again after changing pre_json or pre. */
int qs_llm_tok_prepare(qs_llm_vocab *v, const char *source, qs_err *e);
/* Free everything the vocabulary holds (tables, strings, compiled tokenizer); v is zeroed. */
void qs_llm_vocab_free(qs_llm_vocab *v);

/* Index of the string s[0..n) in a hashed string table (text/off/tab/cap as in qs_llm_vocab), or -1
** (llm_load.c, which builds the tables). */
int qs_llm_hash_find(const char *text, const uint32_t *off, const uint32_t *tab, size_t cap, const char *s, size_t n);
/* Token id of an exact token string, or -1. */
int qs_llm_vocab_find(const qs_llm_vocab *v, const char *s);

/* Byte-level BPE tokenization of `text` (len bytes) equal to Hugging Face `tokenizers`: added tokens
** (token_type 3 control and 4 user-defined: tokenizer.json added_tokens) are matched literally first
** (leftmost, longest, through a trie; those with `normalized` after the normalizer, on its output,
** with lstrip/rstrip/single_word as tokenizers), each stretch between them goes through the normalizer
** (tokenizer.json's, llm_tok_norm.h) and the pre-tokenizer
** (tokenizer.json's pre_tokenizer, else the one of the GGUF tokenizer.ggml.pre family; regexes in
** PCRE2 with Unicode classes, llm_pretok.h), each piece is mapped byte -> unicode and merged by rank.
** No BOS is added.  Invalid UTF-8 is accepted: invalid bytes are never
** matched by a pattern and end up as byte-level tokens.  Regex work is bounded (llm_pretok.h): a
** pattern that backtracks too much on this text is refused.  `name` names the text in messages
** (NULL: "the text"); messages are complete ("tokenizer.json: ..." or "NAME: ..."), callers add no
** prefix.  Returns the number of ids (<= cap), or -1 with e set (more than cap ids, an unsupported
** pre-tokenizer, a symbol missing from the vocabulary, too much regex work). */
int qs_llm_tokenize_named(const qs_llm_vocab *v, const char *name, const char *text, size_t len, int32_t *out,
                          int cap, qs_err *e);
/* The same, and each token's byte span [off[2i], off[2i+1]) in text when off (2 * cap entries) is not
** NULL: the bytes the token was made from (a normalizer's output maps back to the bytes it came from;
** a space a pre-tokenizer adds has no bytes of its own).  Spans never go backwards.  len must be below
** 4 GiB when off is given. */
int qs_llm_tokenize_offs(const qs_llm_vocab *v, const char *name, const char *text, size_t len, int32_t *out,
                         uint32_t *off, int cap, qs_err *e);
/* A caller-owned tokenizer state: the scratch (the pre-tokenizer's match data and JIT stack, the
** normalizer's buffers) and the piece cache (ids and spans per pre-tokenized piece) kept from one call
** to the next, so that many calls on pieces of one long text (LoPT's chunks) do not each start cold.
** One state serves one thread at a time; used with another vocabulary (or after qs_llm_tok_prepare)
** it starts over.  States made with a shared cache (sh not NULL) look there after their own cache
** (copying what they find into it) and publish there the pieces they compute, so that threads
** tokenizing one text compute each piece once (lock-free lookups; a fixed table, beyond half full
** nothing more is published); the shared cache belongs to the first vocabulary a state uses it with,
** and must outlive its states.
** The _new functions return NULL when out of memory. */
typedef struct qs_llm_tok_state qs_llm_tok_state;
typedef struct qs_llm_tok_shared qs_llm_tok_shared;
/* bytes: about how much text the states will tokenize (sizes the table; 0: the smallest) */
qs_llm_tok_shared *qs_llm_tok_shared_new(size_t bytes);
void qs_llm_tok_shared_free(qs_llm_tok_shared *sh);
qs_llm_tok_state *qs_llm_tok_state_new(qs_llm_tok_shared *sh);
void qs_llm_tok_state_free(qs_llm_tok_state *s);
/* qs_llm_tokenize_offs through state s (NULL: a fresh one for this call).  The ids never depend on
** what s saw before. */
int qs_llm_tokenize_state(qs_llm_tok_state *s, const qs_llm_vocab *v, const char *name, const char *text, size_t len,
                          int32_t *out, uint32_t *off, int cap, qs_err *e);
/* The following calls through s tokenize text that continues a stretch (cont != 0; LoPT's chunks and
** windows that do not start the text): when the text starts with a stretch, a Prepend normalizer adds
** nothing to it, and a SentencePiece model without a pre-tokenizer (tokenizer.model, GGUF llama) adds
** no dummy prefix and removes no leading spaces.  0 (the default): each call's text is a text of its
** own. */
void qs_llm_tok_state_continues(qs_llm_tok_state *s, int cont);
/* qs_llm_tokenize_named with name NULL. */
int qs_llm_tokenize(const qs_llm_vocab *v, const char *text, size_t len, int32_t *out, int cap, qs_err *e);

/* A tokenizer.json image (llm_tok_json.c) -> v: ids 0..vocab-1 (vocab 0: as many as its ids need, at
** most twice the tokens it defines), merges, added tokens (type 3 special, 4 other), the pre-tokenizer
** (kept as JSON, compiled by qs_llm_tok_prepare naming source), the tables; *pp_bos: its
** post-processor's template starts with a special token.  The file is scanned, not turned into a
** JSON tree, and counted before anything is allocated: memory is a small multiple of its size.
** Errors do not name the file (the caller adds it); v is then for qs_llm_vocab_free. */
int qs_llm_tok_json_parse(const char *buf, size_t n, int vocab, const char *source, qs_llm_vocab *v, int *pp_bos,
                          qs_err *e);

/* A SentencePiece tokenizer.model image (llm_tok_spm_model.c) -> v: pieces, scores and types (the
** GGUF token_type codes), the model (Unigram or BPE by score) and its normalizer options, prepared
** naming source.  A bounded reader of the protobuf wire format; errors do not name the file. */
int qs_llm_tok_spm_parse(const uint8_t *buf, size_t n, const char *source, qs_llm_vocab *v, qs_err *e);

/* What tokenizer_config.json says (llm_tok_config.c): the ids of its bos_token and eos_token (by
** content; -1 when absent or not in v) and add_bos_token (1, 0, or -1 when absent). */
typedef struct { int bos, eos, add_bos; } qs_llm_tok_cfg;
/* Parse a tokenizer_config.json image (at most 16 MB); errors (invalid JSON, not an object) leave c
** all -1.  The _read form maps the file and names it in messages. */
int qs_llm_tok_config_parse(const char *buf, size_t n, const qs_llm_vocab *v, qs_llm_tok_cfg *c, qs_err *e);
int qs_llm_tok_config_read(const char *path, const qs_llm_vocab *v, qs_llm_tok_cfg *c, qs_err *e);

/* Append the detokenized bytes of token id to out (at most cap-1 bytes, NUL-terminated); returns the
** number of bytes written.  Byte-level (GPT-2) spellings are mapped back to raw bytes; WordPiece
** tokens as its decoder writes a token after others ("##" stripped, else a space before it); ids out
** of range give "<id>". */
size_t qs_llm_detok(const qs_llm_vocab *v, int id, char *out, size_t cap);

#endif
