/*
** Line plots from stored results: the layout of docs/plots.md that the trajectory, msd and attn
** kinds share, {"xlabel": .., "ylabel": .., "title"?: .., "series": [{"name", "x": [..], "y": [..]}]}.
*/
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "plot.h"

const char *qs_plot_lines_json_problem(const char *text)
{
    json_t *j = text ? json_loads(text, 0, NULL) : NULL, *ser = json_object_get(j, "series");
    const char *why = !j ? "not JSON" : !ser ? "no \"series\" list" : !json_is_array(ser) ? "\"series\" is not a list"
                    : !json_array_size(ser) ? "\"series\" is empty" : NULL;
    json_decref(j);
    return why;
}

qs_figure *qs_plot_lines_json(const char *kind, const char *text, const char *title, qs_err *e)
{
    const char *why = qs_plot_lines_json_problem(text);
    if (why) {
        qs_fail(e, "stored %s data is not in the documented layout (docs/plots.md): %s", kind, why);
        return NULL;
    }
    json_t *j = json_loads(text, 0, NULL), *ser = json_object_get(j, "series");
    size_t ns = json_array_size(ser);
    if (!j || ns == 0) {   /* checked above */
        json_decref(j);
        qs_fail(e, "out of memory");
        return NULL;
    }
    qs_line_data *ld = calloc(ns, sizeof *ld);
    double **bufs = calloc(2 * ns, sizeof *bufs);
    qs_figure *fig = NULL;
    if (!ld || !bufs) goto out;
    for (size_t i = 0; i < ns; i++) {
        json_t *s = json_array_get(ser, i), *xs = json_object_get(s, "x"), *ys = json_object_get(s, "y");
        size_t m = json_array_size(ys);
        if (json_array_size(xs) != m) m = 0;   /* malformed series: drawn as nothing */
        bufs[2 * i] = malloc((m ? m : 1) * sizeof(double));
        bufs[2 * i + 1] = malloc((m ? m : 1) * sizeof(double));
        if (!bufs[2 * i] || !bufs[2 * i + 1]) goto out;
        for (size_t k = 0; k < m; k++) {
            json_t *xv = json_array_get(xs, k), *yv = json_array_get(ys, k);
            bufs[2 * i][k] = json_is_number(xv) ? json_number_value(xv) : NAN;
            bufs[2 * i + 1][k] = json_is_number(yv) ? json_number_value(yv) : NAN;
        }
        ld[i] = (qs_line_data){json_string_value(json_object_get(s, "name")), m, bufs[2 * i], bufs[2 * i + 1]};
    }
    const char *yl = json_string_value(json_object_get(j, "ylabel"));
    const char *st = json_string_value(json_object_get(j, "title"));
    if (st && *st) title = st;
    const char *xl = json_string_value(json_object_get(j, "xlabel"));
    if (!strcmp(kind, "trajectory")) fig = qs_plot_trajectory(title, yl, ld, ns);
    else if (!strcmp(kind, "msd")) fig = qs_plot_msd(title, ld, ns);
    else if (!strcmp(kind, "attn")) fig = qs_plot_attn(title, yl, ld, ns);
    else {   /* any other kind with this layout (resq, ...): its stored axis titles, linear axes */
        char t[96];
        snprintf(t, sizeof t, "%s", !strcmp(kind, "resq") ? "Rollout-ResQ: layer error by correction" : kind);
        fig = qs_plot_lines(title ? title : t, xl ? xl : "", QS_AX_LINEAR, yl ? yl : "", QS_AX_LINEAR, ld, ns);
    }
    /* the stored x-axis title wins over the builder's default (one name in every reader) */
    if (fig && xl && *xl) snprintf(fig->x.title, sizeof fig->x.title, "%s", xl);
    /* a stored "yscale" wins; a reward is read on a linear axis whatever its range */
    const char *ys = json_string_value(json_object_get(j, "yscale"));
    if (fig && ys) {
        if (!strcmp(ys, "linear")) fig->y.scale = QS_AX_LINEAR;
        else if (!strcmp(ys, "log10")) fig->y.scale = QS_AX_LOG10;
        else if (!strcmp(ys, "log2")) fig->y.scale = QS_AX_LOG2;
        else if (!strcmp(ys, "symlog")) fig->y.scale = QS_AX_SYMLOG;
    } else if (fig && yl && strcasestr(yl, "reward")) fig->y.scale = QS_AX_LINEAR;
out:
    if (!fig) qs_fail(e, "out of memory");
    if (bufs)
        for (size_t i = 0; i < 2 * ns; i++) free(bufs[i]);
    free(bufs);
    free(ld);
    json_decref(j);
    return fig;
}
