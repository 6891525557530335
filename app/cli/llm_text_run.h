/*
** The common start of `llm eval` and `llm sensitivity`: a model and a text read, the text tokenized
** as llama-perplexity does, and the chunking of the evaluation (analysis/llm_eval.h) checked against
** the model's context and the text's length.
*/
#ifndef QS_LLM_TEXT_RUN_H
#define QS_LLM_TEXT_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "../../analysis/llm_eval.h"
#include "../../store/llm_load.h"

typedef struct qs_llm_text_run {
    qs_llm_file f;
    char *text, thash[33];    /* the text and its XXH3-128 */
    size_t tlen;
    int32_t *ids;
    int ntok;
    qs_eval_setup su;
    char weights[200];        /* how the weights are held and why (qs_llm_load_weights_mode) */
} qs_llm_text_run;

/* Load model, read and tokenize text (ids also written to save_ids when given, on rank 0), set up
** ctx-token chunks (at most chunks when > 0; score_all as --score all).  0, or an exit code with the
** message printed (2 for a usage error: a --ctx past the model's, a text too short). */
int qs_llm_text_run_open(qs_llm_text_run *r, const char *cmd, const char *model, const char *text, int ctx, int chunks,
                         int score_all, const char *save_ids);
/* The same with the weights held as `weights` says (llm eval's --weights; the above: FP32). */
int qs_llm_text_run_open_w(qs_llm_text_run *r, const char *cmd, const char *model, const char *text, int ctx, int chunks,
                           int score_all, const char *save_ids, qs_llm_weights weights);
void qs_llm_text_run_free(qs_llm_text_run *r);

/* --score half|all of eval and sensitivity: 0 or the usage error's exit status (message printed). */
int qs_llm_parse_score(const char *cmd, const char *s, int *score_all);

#endif
