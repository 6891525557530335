/*
** The progress of `llm eval` and `llm sensitivity` on stderr (never stdout, so --json stays clean):
** chunks done of all, text tokens per second and the time left.  On a terminal one line rewritten in
** place; otherwise (a log, a pipe) one line at most every 30 s, so short runs print nothing.
*/
#ifndef QS_LLM_PROGRESS_H
#define QS_LLM_PROGRESS_H

#include "../../analysis/llm_eval_service.h"

typedef struct qs_llm_progress {
    const char *what;
    int tty, ctx, upto;       /* upto: the run may stop before all chunks (--until-ci) */
    double t0, last;
    int computed0, shown;
} qs_llm_progress;

/* ctx: text tokens per chunk. */
void qs_llm_progress_init(qs_llm_progress *p, const char *what, int ctx, int upto);
/* A qs_eval_tick_fn (ctx is the qs_llm_progress). */
void qs_llm_progress_tick(void *ctx, const qs_eval_tick *t);
/* Clears the terminal line. */
void qs_llm_progress_end(qs_llm_progress *p);

#endif
