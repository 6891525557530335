/*
** The Metaspace pre-tokenizer of Hugging Face `tokenizers` (SentencePiece-style tokenizer.json files),
** as llm_pretok.c runs it: spaces stay ' ' in the pieces (the model spells them "▁", llm_tok_spm.c),
** a virtual space is prepended by prepend_scheme, and split = true cuts before every space.
*/
#ifndef QS_LLM_PRETOK_META_H
#define QS_LLM_PRETOK_META_H

#include <jansson.h>
#include <stddef.h>

#include "../kernels/qs_err.h"

/* prepend modes of a step (step.prefix_space): ByteLevel's add_prefix_space, Metaspace's schemes */
enum { QS_PREPEND_NONE = 0, QS_PREPEND_BYTELEVEL = 1, QS_PREPEND_ALWAYS = 2, QS_PREPEND_FIRST = 3 };

/* A Metaspace object -> the split pattern (NULL: split = false) and the prepend mode.  Errors name
** the unsupported part (a replacement other than "▁", an unknown prepend_scheme). */
int qs_pretok_meta_parse(json_t *j, const char **pattern, int *prepend, qs_err *e);
/* Does a step with this prepend mode put a space before the piece s[0..n) at offset `at` (virt: bytes
** of the piece already not in the text)? */
int qs_pretok_meta_prepend(int mode, const char *s, size_t n, size_t at, size_t virt);

#endif
