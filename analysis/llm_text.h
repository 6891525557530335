/*
** The evaluation text of `llm eval` / `llm sensitivity` (read, hashed and tokenized as
** llama-perplexity does), and what llm commands record of their model and text in JSON output,
** stored results and runs.
*/
#ifndef QS_LLM_TEXT_H
#define QS_LLM_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../kernels/qs_err.h"
#include "../store/llm_load.h"

/* The whole file at path (a regular file of at most 1 GiB, refused from its size before anything is
** read; a FIFO is refused before it is opened for reading), and its xxh3-128 hex hash.  Errors name
** the file. */
int qs_eval_read_text(const char *path, char **text, size_t *tlen, char hash[33], qs_err *e);
/* The same from standard input (named "stdin"), read up to the same limit. */
int qs_eval_read_stdin(char **text, size_t *tlen, char hash[33], qs_err *e);
/* The text's token ids under f's tokenizer (through LoPT on every core: store/llm_lopt.h, the same ids
** as the sequential tokenizer), with BOS first when the tokenizer adds it (as
** llama-perplexity's add_special); *ids malloc'ed.  Errors name the text or the tokenizer's file. */
int qs_eval_text_ids(const char *path, const qs_llm_file *f, const char *text, size_t tlen, int32_t **ids, int *ntok,
                     qs_err *e);
/* Model: path, name (the file's own, e.g. general.name), hash, tensor types; text: path, hash,
** bytes.  A path or name that is not valid UTF-8 is kept escaped with its "*_bytes_hex"
** (store/json_out.h). */
json_t *qs_llm_model_json(const char *path, const qs_llm_file *f);
json_t *qs_llm_text_json(const char *path, const char *hash, size_t bytes);

#endif
