/*
** One chunk of one `llm eval` variant in the store (kind "llm_eval_chunk", analysis/results.h): what
** a chunk computed, kept as soon as it is done, so an interrupted or killed evaluation continues
** where it stopped and a larger --chunks computes only the chunks it adds.  The per-token arrays are
** kept as computed (float64), so a variant assembled from stored chunks is bit for bit the one
** computed in one go.
*/
#ifndef QS_LLM_EVAL_CHUNK_H
#define QS_LLM_EVAL_CHUNK_H

#include <stddef.h>

#include <jansson.h>

#include "llm_eval_shard.h"
#include "../store/db.h"

#define QS_EVCHUNK_KIND "llm_eval_chunk"

/* The options of chunk c of a variant: its "llm_eval" key without "chunks", with "chunk": c
** (canonical JSON, malloc'd; NULL when out of memory). */
char *qs_evchunk_options(json_t *variant_key, int c);
/* Store chunk c (its tokens at k0 .. k0 + per of vo; kl, dp and same_top for a configuration). */
int qs_evchunk_put(qs_db *db, const char *model_hash, const char *label, const char *options, int is_cfg,
                   const qs_eval_var_out *vo, size_t k0, size_t per, const qs_eval_chunk_var *cv, qs_err *e);
/* Read it back into the same places; *found = 0 (nothing written) when it is not stored. */
int qs_evchunk_get(qs_db *db, const char *model_hash, const char *label, const char *options, int is_cfg,
                   qs_eval_var_out *vo, size_t k0, size_t per, qs_eval_chunk_var *cv, int *found, qs_err *e);

#endif
