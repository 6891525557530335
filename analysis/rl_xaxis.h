/*
** What the step column of a stored RL run counts, for every plot of runs against it: training
** steps (rl grpo, sim grpo, imported logs) or prompts (`qscope llm score` stores one "step" per
** prompt, with no training in between; docs/llm.md).  The two never share an x axis.
*/
#ifndef QS_RL_XAXIS_H
#define QS_RL_XAXIS_H

#include <stddef.h>

#include "plot.h"

typedef enum qs_rl_xkind { QS_RL_X_STEP = 0, QS_RL_X_PROMPT } qs_rl_xkind;

/* From the run's metadata JSON (rl_run.metadata): prompts when its generator is "qscope llm score"
** (the label alone proves nothing: an imported log may carry any label), else training steps. */
qs_rl_xkind qs_rl_run_xkind(const char *metadata);

/* The x-axis title: "training step" or "prompt (llm score: no training)". */
const char *qs_rl_xkind_title(qs_rl_xkind k);

/* Runs' per-step lines on one figure, only those of kind want (kind[i] per series): the x axis
** named for it, the runs of the other kind left out and counted in the note (never drawn on an
** axis that means something else for them).  ys: the y scale.  NULL when out of memory. */
qs_figure *qs_plot_rl_runs(const char *title, const char *ytitle, qs_ax_scale ys, const qs_line_data *s,
                           const qs_rl_xkind *kind, size_t n, qs_rl_xkind want);

#endif
