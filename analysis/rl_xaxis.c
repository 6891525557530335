/*
** Training steps or prompts on the x axis of RL run plots (rl_xaxis.h).
*/
#include "rl_xaxis.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLM_SCORE_GENERATOR "qscope llm score"

qs_rl_xkind qs_rl_run_xkind(const char *metadata)
{
    json_t *m = metadata ? json_loads(metadata, 0, NULL) : NULL;
    const char *g = json_string_value(json_object_get(m, "generator"));
    qs_rl_xkind k = g && !strcmp(g, LLM_SCORE_GENERATOR) ? QS_RL_X_PROMPT : QS_RL_X_STEP;
    json_decref(m);
    return k;
}

const char *qs_rl_xkind_title(qs_rl_xkind k)
{
    return k == QS_RL_X_PROMPT ? "prompt (llm score: no training)" : "training step";
}

qs_figure *qs_plot_rl_runs(const char *title, const char *ytitle, qs_ax_scale ys, const qs_line_data *s,
                           const qs_rl_xkind *kind, size_t n, qs_rl_xkind want)
{
    qs_line_data *d = malloc((n ? n : 1) * sizeof *d);
    if (!d) return NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (kind[i] == want) d[m++] = s[i];
    qs_figure *f = qs_plot_lines(title, qs_rl_xkind_title(want), QS_AX_LINEAR, ytitle, ys, d, m);
    free(d);
    if (!f) return NULL;
    f->x.integer = 1;   /* steps and prompts are whole numbers */
    if (m < n)
        snprintf(f->note, sizeof f->note, "%zu %s run%s not drawn: %s", n - m, want == QS_RL_X_PROMPT ? "training" : "llm score",
                 n - m == 1 ? "" : "s",
                 want == QS_RL_X_PROMPT ? "their x is the training step, not the prompt"
                                        : "their x is the prompt, not a training step");
    return f;
}
