/*
** The PNG plots of `qscope report` (see report_plots.h): per tensor, the Pareto scatter of bits
** per element against effective bits, and the relative-error histograms of its formats overlaid.
** Each PNG carries the provenance text chunks of plot_render.h.
*/
#include "report_plots.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze_run.h"
#include "../render/plot_render.h"
#include "../../analysis/hist_json.h"
#include "../../analysis/plot.h"
#include "../../analysis/results.h"
#include "../../store/json_out.h"

static double jnum(json_t *o, const char *k) { return qs_json_get_num(o, k); }

/* the formats as their canonical labels (docs/plots.md, qscope:formats) */
static char *join_formats(const qs_apply *apps, int n)
{
    char *s = malloc(96 * (size_t)(n > 0 ? n : 1) + 1);
    if (!s) return NULL;
    s[0] = 0;
    for (int i = 0; i < n; i++) {
        char label[96];
        qs_quant_label(&apps[i], NULL, label, sizeof label);
        if (i) strcat(s, ",");
        strcat(s, label);
    }
    return s;
}

int qs_report_plots(qs_cli *cli, qs_db *db, const qs_tensor_rec *t, const qs_apply *apps, int napps, json_t *ranked,
                    const char *dir, int index, json_t *out, qs_err *e)
{
    int rc = -1;
    char *formats = join_formats(apps, napps), *opts = napps ? qs_quant_opts_json(&apps[0]) : NULL;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "qscope report (tensor %s)", t->name);
    qs_provenance pv = {cmd, db->path, t->hash, formats, opts};
    qs_png_opts po = {1000, 600, 100};
    char file[512], path[4096], title[512];

    /* 1. Pareto: bits per element vs effective bits */
    size_t n = json_array_size(ranked), k;
    qs_pareto_pt *pts = calloc(n ? n : 1, sizeof *pts);
    json_t *r;
    size_t np = 0;
    json_array_foreach(ranked, k, r) {
        json_t *m = json_object_get(r, "metrics");
        double eb = jnum(m, "eff_bits_energy");   /* exact (inf) and NaN/Inf ones: named in the plot's note */
        const qs_format *f = qs_format_find(json_string_value(json_object_get(r, "format")));
        pts[np++] = (qs_pareto_pt){json_string_value(json_object_get(r, "label")), f ? qs_family_name(f->family) : "", jnum(m, "bits_per_elem"), eb};
    }
    snprintf(title, sizeof title, "%s: effective bits vs bits per element", t->name);
    qs_figure *fig = qs_plot_pareto(title, pts, np);
    snprintf(file, sizeof file, "t%03d_pareto.png", index);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int prc = fig ? qs_plot_png(fig, &po, &pv, path, e) : qs_fail(e, "out of memory");
    qs_fig_free(fig);
    free(pts);
    if (prc) goto out;
    json_array_append_new(out, json_pack("{s:o,s:s}", "title", qs_json_text(title), "file", file));

    /* 2. relative-error histograms of every format, overlaid */
    qs_hist *hs = calloc((size_t)napps, sizeof *hs);
    const qs_hist **hp = calloc((size_t)napps, sizeof *hp);
    const char **names = calloc((size_t)napps, sizeof *names);
    char (*labels)[96] = calloc((size_t)napps, sizeof *labels);
    int nh = 0;
    for (int i = 0; hs && hp && names && labels && i < napps; i++) {
        char *o = qs_analysis_options_json(&apps[i], 0), *data = NULL;
        int64_t id;
        if (o && qs_result_get(db, t->hash, "hist", apps[i].f->name, o, &data, &id, e) == 0 && data) {
            json_t *j = json_loads(data, 0, NULL);
            if (j && qs_hist_from_json(json_object_get(j, "rel_err"), &hs[nh]) == 0) {
                qs_quant_label(&apps[i], NULL, labels[nh], sizeof labels[nh]);
                names[nh] = labels[nh];
                hp[nh] = &hs[nh];
                nh++;
            }
            json_decref(j);
        }
        free(o);
        free(data);
    }
    if (nh > 0) {
        snprintf(title, sizeof title, "%s: relative error by format", t->name);
        fig = qs_plot_err_hist(title, "relative error |Q(x)-x| / |x|", (size_t)nh, names, hp);
        snprintf(file, sizeof file, "t%03d_relerr.png", index);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        prc = fig ? qs_plot_png(fig, &po, &pv, path, e) : qs_fail(e, "out of memory");
        qs_fig_free(fig);
        if (!prc) json_array_append_new(out, json_pack("{s:o,s:s}", "title", qs_json_text(title), "file", file));
    } else prc = 0;
    for (int i = 0; i < nh; i++) free(hs[i].counts);
    free(hs); free(hp); free(names); free(labels);
    if (prc) goto out;
    rc = 0;
out:
    (void)cli;
    free(formats);
    free(opts);
    return rc;
}
