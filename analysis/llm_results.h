/*
** The stored results of one kind (analysis/results.h) of this qscope version, row by row with their
** options and data parsed: the one loading loop of the `llm eval` and `llm sensitivity` readers
** (llm_eval_store.h, llm_sens_store.h).
*/
#ifndef QS_LLM_RESULTS_H
#define QS_LLM_RESULTS_H

#include <stdint.h>

#include <jansson.h>

#include "../store/db.h"

typedef struct qs_llm_result_row {
    int64_t id;
    const char *hash;         /* the model's */
    const char *format;       /* NULL when the row has none */
    const char *options;      /* the key's text (NULL when none) */
    json_t *opts, *data;      /* parsed (opts NULL when not JSON; data always an object or array) */
} qs_llm_result_row;

/* fn(ctx, row, e) for every row of kind, oldest first; rows without a model hash or whose data is not
** JSON are skipped (not ours to judge here).  fn returns -1 (e set) to stop: then so does this. */
int qs_llm_results_each(qs_db *db, const char *kind, int (*fn)(void *ctx, const qs_llm_result_row *row, qs_err *e), void *ctx,
                        qs_err *e);

#endif
