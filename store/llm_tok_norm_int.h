/*
** Inside the normalizers (llm_tok_norm*.c): the compiled tree, and the one primitive every normalizer
** of Hugging Face `tokenizers` is written in, NormalizedString::transform.  A normalizer turns the
** current string into a list of (character, change) operations: change 0 replaces the next source
** character, change 1 inserts after the previous one (taking its source span), change -k replaces the
** next character and drops the k after it.  transform() then gives each output byte the source span of
** the character it replaced (or followed), exactly as tokenizers does, so offsets agree with it.
**
** Invalid UTF-8: each invalid byte is a character of its own (QS_NRAW | byte) that no normalizer
** changes, joins or removes; it is written back as that byte.
*/
#ifndef QS_LLM_TOK_NORM_INT_H
#define QS_LLM_TOK_NORM_INT_H

#include <stddef.h>
#include <stdint.h>

#include "llm_tok_norm.h"

#define QS_NRAW 0x200000u   /* an invalid byte b is the "character" QS_NRAW | b */

enum {
    NT_SEQ, NT_NFC, NT_NFD, NT_NFKC, NT_NFKD, NT_LOWER, NT_STRIP_ACC, NT_STRIP, NT_BERT, NT_REPLACE,
    NT_PREPEND, NT_PRECOMPILED, NT_NMT
};

struct qs_tok_norm {
    int type;
    int left, right;                       /* Strip */
    int clean, chinese, accents, lower;    /* BertNormalizer (accents resolved: -1 null -> lower) */
    char *str;                             /* Prepend's prefix, Replace's content (NUL-terminated) */
    void *re;                              /* Replace: pcre2_code (a String pattern is compiled as a literal) */
    uint32_t *trie;                        /* Precompiled: the double array */
    size_t ntrie;
    char *pool;                            /* Precompiled: NUL-separated replacements */
    size_t npool;
    struct qs_tok_norm **kid;              /* Sequence */
    int nkid;
};

/* (character, change) operations.  A change of QS_NCOPY copies cp bytes of the source as they are (a
** run of ASCII the Unicode forms cannot touch). */
#define QS_NCOPY INT32_MIN
typedef struct { uint32_t *cp; int32_t *ch; size_t n, cap; } qs_nops;

int qs_nops_push(qs_nops *o, uint32_t cp, int32_t ch);
void qs_nops_free(qs_nops *o);

/* The character at s[i] (i < n): its length, *cp the code point or QS_NRAW | byte. */
size_t qs_nchar(const char *s, size_t n, size_t i, uint32_t *cp);
/* Encode cp (a code point or QS_NRAW | byte) into out (4 bytes); its length. */
size_t qs_nenc(uint32_t cp, char *out);

/* cur -> tmp by the operations, after dropping `skip` leading characters of cur; then cur and tmp are
** swapped (cur holds the result).  0, or -1 when out of memory. */
int qs_norm_transform(qs_tok_norm_buf *cur, qs_tok_norm_buf *tmp, const qs_nops *o, size_t skip);
/* Room for n bytes in b. */
int qs_norm_reserve(qs_tok_norm_buf *b, size_t n);

/* Operations of the Unicode normalizers on the string cur (llm_tok_norm_uni.c); 0 or -1 (memory). */
int qs_norm_ops_form(int type, const qs_tok_norm_buf *cur, qs_nops *o);        /* NT_NFC .. NT_NFKD */
/* Drop the characters `drop` says (tokenizers' NormalizedString::filter). */
int qs_norm_ops_filter(const qs_tok_norm_buf *cur, int (*drop)(uint32_t), size_t *skip, qs_nops *o);
/* A character-for-character map, cur -> tmp (swapped): each output character takes the span of the one
** it replaces (NormalizedString::map); map NULL: Lowercase (Rust's char::to_lowercase, where U+0130
** gives two characters, both with its span).  0 or -1 (memory). */
int qs_norm_map_run(qs_tok_norm_buf *cur, qs_tok_norm_buf *tmp, uint32_t (*map)(uint32_t));
int qs_norm_ops_chinese(const qs_tok_norm_buf *cur, qs_nops *o);
int qs_norm_is_chinese(uint32_t c);   /* BertNormalizer's CJK ideograph blocks */
int qs_norm_ops_strip(const qs_tok_norm_buf *cur, int left, int right, size_t *skip, qs_nops *o);
/* Prepend: cur -> tmp (swapped); 0 or -1 (memory). */
int qs_norm_prepend_run(qs_tok_norm_buf *cur, qs_tok_norm_buf *tmp, const char *pre);
/* Predicates and maps of the Bert, StripAccents and Nmt normalizers. */
int qs_norm_is_combining_mark(uint32_t c);
int qs_norm_is_nonspacing_mark(uint32_t c);
int qs_norm_bert_drop(uint32_t c);
uint32_t qs_norm_bert_space(uint32_t c);
int qs_norm_nmt_drop(uint32_t c);
uint32_t qs_norm_nmt_map(uint32_t c);
/* Rust's char::is_whitespace (the White_Space property). */
int qs_norm_is_space(uint32_t c);

/* Where tokenizers' Unicode data differs from utf8proc's (llm_tok_norm_compat.c): characters its
** normalization crate does not know, that its Bert categories do not count as Mn / as other, and the
** lowercase mappings of its newer Rust (0: none). */
int qs_norm_old_uni(uint32_t c);
int qs_norm_old_mn(uint32_t c);
int qs_norm_was_mark(uint32_t c);
int qs_norm_was_mn(uint32_t c);
int qs_norm_old_other(uint32_t c);
uint32_t qs_norm_new_lower(uint32_t c);

/* Precompiled (llm_tok_norm_spm.c): the operations of SentencePiece's rules on cur. */
int qs_norm_ops_precompiled(const struct qs_tok_norm *nm, const qs_tok_norm_buf *cur, qs_nops *o);
/* Replace (llm_tok_norm_replace.c): compile, and run cur -> tmp (swapped). */
int qs_norm_replace_compile(struct qs_tok_norm *nm, const char *pattern, int literal, qs_err *e);
void qs_norm_replace_free(struct qs_tok_norm *nm);
int qs_norm_replace_run(const struct qs_tok_norm *nm, qs_tok_norm_buf *cur, qs_tok_norm_buf *tmp, qs_err *e);

#endif
