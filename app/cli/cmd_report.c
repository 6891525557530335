/*
** `qscope report`: a batch report answering "which format, and why".
**
** The model-level evaluation first (stored `llm eval` and `llm sensitivity` results), then for the
** tensors chosen by --tensors (default: the first QS_REPORT_DEFAULT_TENSORS, none beside a model
** evaluation): the formats ranked by effective bits, the Pareto front of bits per element against
** effective bits, where the error comes from (underflow, clipping, rounding), and the plots as PNG
** files; then the other sections (report_sections.h).  Results come from the store (`analyze` is
** run for the missing ones), so the numbers are exactly those of `qscope analyze --json`.
** Markdown (linking the PNG files in its directory), one self-contained HTML file (images inlined
** as data: URIs), JSON or CSV.
*/
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "analyze_run.h"
#include "par.h"
#include "cli.h"
#include "../../store/io_err.h"
#include "quant_opts.h"
#include "report_plots.h"
#include "report_sections.h"
#include "../../store/train_store.h"
#include "../../analysis/err_source.h"
#include "../../analysis/llm_eval_store.h"
#include "../../analysis/llm_sens_store.h"
#include "../../kernels/qs_version.h"
#include "../../store/q_results.h"
#include "../../store/q_rl.h"
#include "../../store/q_tensors.h"
#include "../../store/tensor.h"
#include "../../store/json_out.h"

#define DEFAULT_FORMATS QS_DEFAULT_FORMATS
/* the tensors of a report without --tensors (and no model-level evaluation): enough for a demo
** database or a small model, not the hundreds of a real one */
#define QS_REPORT_DEFAULT_TENSORS 16

static double jnum(json_t *o, const char *k) { return qs_json_get_num(o, k); }

static int by_effbits(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    double ex = jnum(json_object_get(x, "metrics"), "eff_bits_energy"), ey = jnum(json_object_get(y, "metrics"), "eff_bits_energy");
    if (isnan(ex)) ex = -INFINITY;
    if (isnan(ey)) ey = -INFINITY;
    return (ex < ey) - (ex > ey);
}

/* Mark the Pareto front: no other format has fewer-or-equal bits and more effective bits. */
static void mark_pareto(json_t *rows)
{
    size_t i, j;
    json_t *a, *b;
    json_array_foreach(rows, i, a) {
        double ba = jnum(json_object_get(a, "metrics"), "bits_per_elem"), ea = jnum(json_object_get(a, "metrics"), "eff_bits_energy");
        int dominated = 0;
        json_array_foreach(rows, j, b) {
            if (i == j) continue;
            double bb = jnum(json_object_get(b, "metrics"), "bits_per_elem"), eb = jnum(json_object_get(b, "metrics"), "eff_bits_energy");
            if (bb <= ba && eb >= ea && (bb < ba || eb > ea)) dominated = 1;
        }
        json_object_set_new(a, "pareto", json_boolean(!dominated));
    }
}

/* The source carrying the largest share of the finite error energy, with the shares (counts would
** name underflow for every 4-bit format on Gaussian data, whose flushed values carry a few per cent
** of the error); NaN/Inf values, whose error is infinite, by their count (err_source.h). */
static const char *error_source(json_t *m, char *buf, size_t cap)
{
    qs_err_src s = qs_err_src_of(m);
    return qs_err_src_long(&s, buf, cap);
}

static void fmt_eff(double v, char *buf, size_t cap)
{
    if (isinf(v) && v > 0) snprintf(buf, cap, "exact");
    else if (!isfinite(v)) snprintf(buf, cap, "none (NaN/Inf)");
    else snprintf(buf, cap, "%.2f", v);
}

/* The most accurate format of rows within a bit budget (NULL: none keeps the values finite). */
static json_t *best_within(json_t *rows, double budget)
{
    json_t *best = NULL, *r;
    size_t k;
    json_array_foreach(rows, k, r) {
        json_t *m = json_object_get(r, "metrics");
        double eb = jnum(m, "eff_bits_energy");
        /* tolerance: per-tensor scales add a few millionths of a bit */
        if (jnum(m, "bits_per_elem") > budget + 0.01 || isnan(eb) || eb == -INFINITY) continue;
        if (!best || eb > jnum(json_object_get(best, "metrics"), "eff_bits_energy")) best = r;
    }
    return best;
}

/* The answer per bit budget, one for both writers: the most accurate format within each budget, a
** bigger budget only when it buys more effective bits. Returns the number of answers. */
typedef struct { double budget; json_t *best; } which_pick;
static const double kWhichBudgets[] = {4.5, 6.25, 8.25, 16, 32};
enum { kWhichMax = sizeof kWhichBudgets / sizeof *kWhichBudgets };

static int which_format(json_t *rows, which_pick *out)
{
    int n = 0;
    double prev = -INFINITY;
    for (int bi = 0; bi < kWhichMax; bi++) {
        json_t *best = best_within(rows, kWhichBudgets[bi]);
        if (!best) continue;
        double eb = jnum(json_object_get(best, "metrics"), "eff_bits_energy");
        if (eb <= prev) continue;     /* a bigger budget that buys nothing is not worth a line */
        prev = eb;
        out[n].budget = kWhichBudgets[bi], out[n].best = best, n++;
    }
    return n;
}

/* "Which format: at ≤ 4.5 bits/element X (3.21 effective bits); ..." the same words in Markdown and HTML */
static void which_format_line(FILE *f, json_t *rows, int html)
{
    which_pick p[kWhichMax];
    int n = which_format(rows, p);
    fprintf(f, html ? "<b>Which format:</b>" : "**Which format:**");
    for (int i = 0; i < n; i++) {
        char e1[24];
        fmt_eff(jnum(json_object_get(p[i].best, "metrics"), "eff_bits_energy"), e1, sizeof e1);
        const char *lab = json_string_value(json_object_get(p[i].best, "label"));
        fprintf(f, "%s at ≤ %g bits/element ", i ? ";" : "", p[i].budget);
        if (html) {
            fprintf(f, "<b>");
            qs_html_esc(f, lab);
            fprintf(f, "</b>");
        } else
            fprintf(f, "**%s**", lab);
        fprintf(f, " (%s effective bits)", e1);
    }
    fprintf(f, "%s%s", n ? "." : " no format kept the values finite.", html ? "" : "\n\n");
}

static const double kSummaryBudgets[3] = {4.5, 6.25, 8.25};

/* One HTML cell per summary budget: the format and its effective bits, or a dash. */
static void html_budget_cells(FILE *f, json_t *rows, const char *tag)
{
    for (int b = 0; b < 3; b++) {
        json_t *best = best_within(rows, kSummaryBudgets[b]);
        fprintf(f, "<%s>", tag);
        if (best) {
            char e1[24];
            fmt_eff(jnum(json_object_get(best, "metrics"), "eff_bits_energy"), e1, sizeof e1);
            fprintf(f, "<b>");
            qs_html_esc(f, json_string_value(json_object_get(best, "label")));
            fprintf(f, "</b> (%s eff. bits)", e1);
        } else
            fprintf(f, "&ndash;");
        fprintf(f, "</%s>", tag);
    }
}

static int write_md(FILE *f, json_t *doc, int html_links)
{
    (void)html_links;
    fprintf(f, "# qscope report\n\n%s, database `%s`, %s.\n\n", json_string_value(json_object_get(doc, "tool")),
            qs_esc(json_string_value(json_object_get(doc, "database"))), json_string_value(json_object_get(doc, "created")));
    qs_report_sections_md(f, json_object_get(doc, "sections"), 1);   /* the model-level evaluation first */
    const char *scope = json_string_value(json_object_get(doc, "tensor_note"));
    if (json_array_size(json_object_get(doc, "tensors")) || (scope && *scope))
        fprintf(f, "## Tensors: which format, and why\n\n");
    if (scope && *scope) fprintf(f, "%s\n\n", qs_esc(scope));
    if (json_array_size(json_object_get(doc, "tensors")))
        fprintf(f, "Effective bits are `-1/2 log2(sum e^2 / sum x^2)`; bits per element include block metadata. "
                   "A format is on the Pareto front when no other format has at most its bits and more effective bits.\n\n");
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(doc, "tensors"), i, t) {
        json_t *rows = json_object_get(t, "results");
        fprintf(f, "### %s\n\n`%s`, shape %s, %s, hash `%s`\n\n", qs_esc_md(json_string_value(json_object_get(t, "name"))),
                json_string_value(json_object_get(t, "dtype")), json_string_value(json_object_get(t, "shape_str")),
                json_string_value(json_object_get(t, "stats_line")), json_string_value(json_object_get(t, "hash")));
        which_format_line(f, rows, 0);
        size_t k;
        json_t *r;
        fprintf(f, "| rank | format | bits/elem | eff. bits | SQNR dB | max rel err | underflow | clipped | main error source | Pareto |\n");
        fprintf(f, "|---:|---|---:|---:|---:|---:|---:|---:|---|:-:|\n");
        json_array_foreach(rows, k, r) {
            json_t *m = json_object_get(r, "metrics");
            char e1[16], src[256];
            fmt_eff(jnum(m, "eff_bits_energy"), e1, sizeof e1);
            fprintf(f, "| %zu | %s | %.3g | %s | %.2f | %.3g | %.3f%% | %.4f%% | %s | %s |\n", k + 1,
                    json_string_value(json_object_get(r, "label")), jnum(m, "bits_per_elem"), e1, jnum(m, "sqnr_db"),
                    jnum(m, "max_rel_err"), 100 * jnum(m, "underflow_frac"), 100 * jnum(m, "clip_frac"),
                    error_source(m, src, sizeof src),
                    json_is_true(json_object_get(r, "pareto")) ? "●" : "");
        }
        fprintf(f, "\n");
        json_t *imgs = json_object_get(t, "plots");
        json_t *img;
        json_array_foreach(imgs, k, img)
            fprintf(f, "![%s](%s)\n\n", qs_esc_md(json_string_value(json_object_get(img, "title"))),
                    qs_esc(json_string_value(json_object_get(img, "file"))));
    }
    qs_report_sections_md(f, json_object_get(doc, "sections"), 0);
    return ferror(f) ? -1 : 0;
}

/* One entry of the contents per section (lead: those before the tensors, else the others). */
static void html_toc_sections(FILE *f, json_t *sections, int lead)
{
    size_t i;
    json_t *t;
    json_array_foreach(sections, i, t) {
        if (json_is_true(json_object_get(t, "before_tensors")) != lead) continue;
        fprintf(f, "<li><a href=\"#s-");
        qs_html_esc(f, json_string_value(json_object_get(t, "id")));
        fprintf(f, "\">");
        qs_html_esc(f, json_string_value(json_object_get(t, "title")));
        fprintf(f, "</a></li>\n");
    }
}

/* The tensors' part: which tensors (and which left out), the summary per bit budget, each tensor. */
static int html_tensors(FILE *f, json_t *doc, const char *dir)
{
    size_t i, k;
    json_t *t, *r, *tensors = json_object_get(doc, "tensors");
    const char *scope = json_string_value(json_object_get(doc, "tensor_note"));
    if (!json_array_size(tensors) && !(scope && *scope)) return 0;
    fprintf(f, "<h2 id=\"tensors\">Tensors: which format, and why</h2>\n");
    if (scope && *scope) {
        fprintf(f, "<p class=\"scope\">");
        qs_html_esc(f, scope);
        fprintf(f, "</p>\n");
    }
    if (!json_array_size(tensors)) return 0;
    fprintf(f, "<p>Effective bits are <code>-1/2 log2(&Sigma;e&sup2; / &Sigma;x&sup2;)</code>; bits per element include block "
               "metadata; highlighted rows are on the Pareto front (no other format has at most their bits and more effective "
               "bits). Which format, per tensor: the most effective bits within each budget of bits per element.</p>\n"
               "<table class=\"summary\"><tr><th>tensor</th><th>&le; 4.5 bits</th><th>&le; 6.25 bits</th>"
               "<th>&le; 8.25 bits</th></tr>\n");
    json_array_foreach(tensors, i, t) {
        fprintf(f, "<tr><td><a href=\"#t%zu\">", i + 1);
        qs_html_esc(f, json_string_value(json_object_get(t, "name")));
        fprintf(f, "</a></td>");
        html_budget_cells(f, json_object_get(t, "results"), "td");
        fprintf(f, "</tr>\n");
    }
    fprintf(f, "</table>\n");
    json_array_foreach(tensors, i, t) {
        fprintf(f, "<h3 id=\"t%zu\">", i + 1);
        qs_html_esc(f, json_string_value(json_object_get(t, "name")));
        fprintf(f, "</h3>\n<p><code>%s</code>, shape %s, ", json_string_value(json_object_get(t, "dtype")),
                json_string_value(json_object_get(t, "shape_str")));
        qs_html_esc(f, json_string_value(json_object_get(t, "stats_line")));
        fprintf(f, "</p>\n<p class=\"answer\">");
        which_format_line(f, json_object_get(t, "results"), 1);
        fprintf(f, "</p>\n<table><tr><th>rank</th><th>format</th><th>bits/elem</th><th>eff. bits</th><th>SQNR dB</th>"
                   "<th>max rel err</th><th>underflow</th><th>clipped</th><th>main error source</th></tr>\n");
        json_array_foreach(json_object_get(t, "results"), k, r) {
            json_t *m = json_object_get(r, "metrics");
            char e1[16], src[256];
            fmt_eff(jnum(m, "eff_bits_energy"), e1, sizeof e1);
            fprintf(f, "<tr%s><td>%zu</td><td>", json_is_true(json_object_get(r, "pareto")) ? " class=\"front\"" : "", k + 1);
            qs_html_esc(f, json_string_value(json_object_get(r, "label")));
            fprintf(f, "</td><td>%.3g</td><td>%s</td><td>%.2f</td><td>%.3g</td><td>%.3f%%</td><td>%.4f%%</td><td>",
                    jnum(m, "bits_per_elem"), e1, jnum(m, "sqnr_db"), jnum(m, "max_rel_err"), 100 * jnum(m, "underflow_frac"),
                    100 * jnum(m, "clip_frac"));
            qs_html_esc(f, error_source(m, src, sizeof src));
            fprintf(f, "</td></tr>\n");
        }
        fprintf(f, "</table>\n");
        if (qs_html_figures(f, json_object_get(t, "plots"), dir)) return -1;
    }
    return 0;
}

/* One file: every image inlined as a data: URI (report_sections.c), no reference outside it. */
static int write_html(FILE *f, json_t *doc, const char *dir)
{
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>qscope report</title>\n"
               "<style>body{font-family:DejaVu Sans,Helvetica,sans-serif;max-width:1100px;margin:2em auto;color:#222}"
               "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
               "td:nth-child(2),th:nth-child(2){text-align:left}tr.front{background:#eef6ee}img{max-width:100%%}"
               "code{background:#f4f4f4}table.section td{text-align:left;vertical-align:top}"
               "tr.note td{color:#555;font-size:90%%;border-top:none}</style></head><body>\n<h1>qscope report</h1>\n<p>");
    qs_html_esc(f, json_string_value(json_object_get(doc, "tool")));
    fprintf(f, ", database <code>");
    qs_html_esc(f, json_string_value(json_object_get(doc, "database")));
    fprintf(f, "</code>, %s.</p>\n", json_string_value(json_object_get(doc, "created")));
    size_t i;
    json_t *t, *sections = json_object_get(doc, "sections");
    /* the contents first, in the order of the report: the model-level evaluation, the tensors, the rest */
    fprintf(f, "<h2 id=\"summary\">Summary</h2>\n<nav class=\"toc\"><p>Contents:</p><ol>\n");
    html_toc_sections(f, sections, 1);
    json_array_foreach(json_object_get(doc, "tensors"), i, t) {
        fprintf(f, "<li><a href=\"#t%zu\">", i + 1);
        qs_html_esc(f, json_string_value(json_object_get(t, "name")));
        fprintf(f, "</a></li>\n");
    }
    html_toc_sections(f, sections, 0);
    fprintf(f, "</ol></nav>\n");
    if (qs_report_sections_html(f, sections, dir, 1) || html_tensors(f, doc, dir) || qs_report_sections_html(f, sections, dir, 0))
        return -1;
    fprintf(f, "</body></html>\n");
    return ferror(f) ? -1 : 0;
}

static int write_csv(FILE *f, json_t *doc)
{
    fprintf(f, "tensor,hash,format,label,bits_per_elem,eff_bits_energy,eff_bits_sqnr,sqnr_db,mse,max_abs_err,max_rel_err,"
               "underflow_frac,clip_frac,nonfinite_frac,pareto,rank,err_underflow,err_clip,err_rounding,main_error_source\n");
    size_t i, k;
    json_t *t, *r;
    json_array_foreach(json_object_get(doc, "tensors"), i, t)
        json_array_foreach(json_object_get(t, "results"), k, r) {
            json_t *m = json_object_get(r, "metrics");
            qs_err_src es = qs_err_src_of(m);
            char src[256];
            qs_csv_field(f, json_string_value(json_object_get(t, "name")));
            fprintf(f, ",%s,%s,", json_string_value(json_object_get(t, "hash")), json_string_value(json_object_get(r, "format")));
            qs_csv_field(f, json_string_value(json_object_get(r, "label")));
            fprintf(f, ",%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%d,%zu,%.9g,%.9g,%.9g,\"%s\"\n",
                    jnum(m, "bits_per_elem"), jnum(m, "eff_bits_energy"), jnum(m, "eff_bits_sqnr"), jnum(m, "sqnr_db"),
                    jnum(m, "mse"), jnum(m, "max_abs_err"), jnum(m, "max_rel_err"), jnum(m, "underflow_frac"),
                    jnum(m, "clip_frac"), jnum(m, "nonfinite_frac"), json_is_true(json_object_get(r, "pareto")), k + 1,
                    es.under, es.clip, es.round, qs_err_src_long(&es, src, sizeof src));
        }
    return ferror(f) ? -1 : 0;
}

/* Where a long report is, on a terminal only (stderr; a redirected run stays quiet): one line,
** rewritten in place, cleared before the final message. */
static void report_progress(int tty, const char *fmt, ...)
{
    if (!tty) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("\r\033[Kqscope report: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\r', stderr);   /* the cursor back at the start: an error message overwrites the line */
    fflush(stderr);
}

/* The tensors to report on, copied out of the list (names and their statistics line) so that no
** SELECT is still reading when the analyses write.  QS_EXIT_OK, or the exit code after the message
** (the names copied so far stay in the arrays, *n counting them). */
static int tensor_todo(const qs_tensor_item *tl, size_t ntl, char ***tnames_out, char ***tlines_out, size_t *n)
{
    char **tnames = NULL, **tlines = NULL;
    size_t ntodo = 0, captodo = 0;
    int rc = QS_EXIT_OK;
    for (size_t li = 0; li < ntl; li++) {
        char line[256];
        const qs_tensor_item *x = &tl[li];
        /* no statistics prints as 0 */
        snprintf(line, sizeof line, "mean %.3g, std %.3g, absmax %.4g, kurtosis %.3g, outliers (6σ) %.3g%%",
                 isnan(x->mean) ? 0 : x->mean, isnan(x->std) ? 0 : x->std, isnan(x->absmax) ? 0 : x->absmax,
                 isnan(x->kurtosis) ? 0 : x->kurtosis, 100 * (isnan(x->outlier_frac) ? 0 : x->outlier_frac));
        if (ntodo == captodo) {
            captodo = captodo ? 2 * captodo : 64;
            char **a = realloc(tnames, captodo * sizeof *a), **b = a ? realloc(tlines, captodo * sizeof *b) : NULL;
            if (a) tnames = a;
            if (b) tlines = b;
            if (!a || !b) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); break; }
        }
        tnames[ntodo] = strdup(x->name);
        tlines[ntodo] = strdup(line);
        if (!tnames[ntodo] || !tlines[ntodo]) { free(tnames[ntodo]); free(tlines[ntodo]); rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); break; }
        ntodo++;
    }
    *tnames_out = tnames;
    *tlines_out = tlines;
    *n = ntodo;
    return rc;
}

/* One tensor's rows ranked by effective bits, the Pareto front marked and each row's main error
** source named (takes rows). */
static json_t *ranked(json_t *rows)
{
    size_t nr = json_array_size(rows);
    json_t **v = calloc(nr ? nr : 1, sizeof *v);
    for (size_t k = 0; k < nr; k++) v[k] = json_incref(json_array_get(rows, k));
    qsort(v, nr, sizeof *v, by_effbits);
    json_t *sorted = json_array();
    for (size_t k = 0; k < nr; k++) json_array_append_new(sorted, v[k]);
    free(v);
    json_decref(rows);
    mark_pareto(sorted);
    size_t ri;
    json_t *rr;
    json_array_foreach(sorted, ri, rr) {
        char src[256];
        json_object_set_new(rr, "main_error_source", json_string(error_source(json_object_get(rr, "metrics"), src, sizeof src)));
    }
    return sorted;
}

/* The report document written to path in its kind (md, html, csv, json); errors in the writers'
** one wording. */
static int write_report(const char *path, const char *kind, const char *dir, json_t *doc, qs_err *e)
{
    FILE *f = fopen(path, "w");
    if (!f) return qs_write_fail(e, path, errno);
    int wrc;
    if (!strcmp(kind, "md")) wrc = write_md(f, doc, 0);
    else if (!strcmp(kind, "html")) wrc = write_html(f, doc, dir);
    else if (!strcmp(kind, "csv")) wrc = write_csv(f, doc);
    else wrc = json_dumpf(doc, f, JSON_INDENT(2));   /* full precision: same numbers as analyze --json */
    int werr = ferror(f) ? errno : 0;   /* the reason of a failed fwrite, before fclose may change it */
    if (fclose(f) || wrc) return qs_write_fail(e, path, werr ? werr : errno);
    return 0;
}

/* What keeps a --tensors pattern from being a glob (SQLite GLOB: *, ?, [...]), NULL when nothing. */
static const char *glob_problem(const char *p)
{
    if (!*p) return "an empty pattern matches no tensor";
    for (const char *c = p; *c; c++) {
        if (*c != '[') continue;
        const char *q = c + 1;
        if (*q == '^') q++;
        if (*q == ']') q++;   /* a leading ']' is a member of the set */
        q = strchr(q, ']');
        if (!q) return "'[' opens a set that no ']' closes";
        c = q;
    }
    return NULL;
}

/* The stored model-level results the report shows (llm eval runs and sensitivity tables of this
** qscope version, as report_llm.c reads them); unreadable: none.  Every MPI rank gets the same
** answer (the tensor list they share depends on it). */
static int64_t model_results(qs_db *db)
{
    qs_err e = {{0}};
    qs_evrun *R = NULL;
    qs_sensrun *S = NULL;
    size_t n = 0, ns = 0;
    int64_t k = 0;
    if (!qs_evruns_load(db, &R, &n, &e))
        for (size_t i = 0; i < n; i++) k += R[i].ncfg || R[i].have_ref;
    qs_evruns_free(R, n);
    if (!qs_sensruns_load(db, &S, &ns, &e)) k += (int64_t)ns;
    qs_sensruns_free(S, ns);
    return k;
}

/* Whether the database has anything but tensors to report on: model evaluations, RL runs, kernel
** results, training runs (unreadable: none). */
static int other_results(qs_db *db)
{
    static const char *const kernel_kinds[] = {"msd", "attn", "resq"};
    qs_err e = {{0}};
    int64_t n = model_results(db), nk = 0;
    qs_train_run_item *tr = NULL;
    qs_run_item *rr = NULL;
    size_t ntr = 0, nrr = 0;
    if (!qs_train_run_list(db, NULL, &tr, &ntr, &e)) n += (int64_t)ntr;
    qs_train_run_items_free(tr, ntr);
    if (!qs_run_names(db, QS_RUNS_BY_NAME, &rr, &nrr, &e)) n += (int64_t)nrr;
    qs_run_items_free(rr, nrr);
    if (!qs_result_count(db, kernel_kinds, 3, &nk, &e)) n += nk;
    return n > 0;
}

/* Which of the nmatch tensors (name order) the report covers, into *nsel, and the sentence saying so
** (doc "tensor_note", with "tensor_scope").  --tensors GLOB: every match, none an error.  Without it:
** none when the database holds a model-level evaluation (it answers for the model; a per-tensor
** ranking of hundreds of tensors would bury it), else the first QS_REPORT_DEFAULT_TENSORS. */
static int tensor_scope(qs_db *db, const char *pat, size_t nmatch, json_t *doc, size_t *nsel, qs_err *e)
{
    int64_t total = (int64_t)nmatch;
    char note[600] = "";
    if (pat) {
        if (qs_tensor_count(db, "*", &total, e)) return qs_cli_err(QS_EXIT_ERR, e);
        if (!nmatch)
            return qs_cli_error(QS_EXIT_ERR, "no tensor matches --tensors '%s' (%lld tensor%s in the database; `qscope ls` lists them)",
                                qs_esc(pat), (long long)total, total == 1 ? "" : "s");
        *nsel = nmatch;
        if ((int64_t)nmatch < total)
            snprintf(note, sizeof note, "%zu of the %lld tensors in the database match --tensors '%s'.", nmatch, (long long)total,
                     qs_esc(pat));
    } else if (nmatch && model_results(db)) {
        *nsel = 0;
        snprintf(note, sizeof note, "The per-tensor format rankings of the %zu tensor%s in the database are left out: "
                 "with a model-level evaluation stored, a report shows none by default. `--tensors GLOB` includes the matching "
                 "tensors, `--tensors '*'` all of them.", nmatch, nmatch == 1 ? "" : "s");
    } else {
        *nsel = nmatch < QS_REPORT_DEFAULT_TENSORS ? nmatch : QS_REPORT_DEFAULT_TENSORS;
        if (*nsel < nmatch)
            snprintf(note, sizeof note, "The first %zu of %zu tensors (by name) are shown, the default without --tensors; %zu "
                     "left out. `--tensors GLOB` chooses the tensors, `--tensors '*'` includes all.", *nsel, nmatch, nmatch - *nsel);
    }
    json_object_set_new(doc, "tensor_scope",
                        json_pack("{s:s?,s:I,s:I,s:I}", "glob", pat, "in_database", (json_int_t)total, "shown", (json_int_t)*nsel,
                                  "left_out", (json_int_t)(total - (int64_t)*nsel)));
    json_object_set_new(doc, "tensor_note", json_string(note));
    return QS_EXIT_OK;
}

/* The closing message: what was written and whether it stands alone (HTML: one file with its
** images inlined) or needs its directory (Markdown links the PNG files beside it). */
static void report_done(json_t *doc, int nt, int na, const char *kind, const char *dir, const char *path)
{
    size_t nimg = 0, i;
    json_t *t;
    json_array_foreach(json_object_get(doc, "tensors"), i, t) nimg += json_array_size(json_object_get(t, "plots"));
    json_array_foreach(json_object_get(doc, "sections"), i, t) nimg += json_array_size(json_object_get(t, "plots"));
    json_int_t left = json_integer_value(json_object_get(json_object_get(doc, "tensor_scope"), "left_out"));
    fprintf(stderr, "qscope: report on %d tensor(s) x %d format(s) written to %s", nt, na, qs_esc(path));
    if (!strcmp(kind, "html"))
        fprintf(stderr, ": one self-contained file, its %zu image(s) inlined (the PNG files in %s/ are copies)", nimg, qs_esc(dir));
    else if (!strcmp(kind, "md") && nimg)
        fprintf(stderr, " with its %zu PNG image(s) beside it in %s/: keep the directory together", nimg, qs_esc(dir));
    fprintf(stderr, "\n");
    if (left > 0 && !json_is_string(json_object_get(json_object_get(doc, "tensor_scope"), "glob")))   /* a glob chose them */
        fprintf(stderr, "qscope: %lld tensor(s) left out (--tensors GLOB chooses, --tensors '*' includes all)\n", (long long)left);
}

int qs_cmd_report(qs_cli *cli, int argc, char **argv)
{
    static const struct option lo[] = {QS_QUANT_LONGOPTS, {"output", required_argument, 0, 'o'},
                                       {"format-out", required_argument, 0, 'O'}, {"tensors", required_argument, 0, 'T'},
                                       {"formats", required_argument, 0, 'L'}, {"no-plots", no_argument, 0, 'P'},
                                       {"claims", required_argument, 0, 'C'},
                                       {0, 0, 0, 0}};
    qs_apply base;
    memset(&base, 0, sizeof base);
    base.axis = 1;
    const char *dir = "report", *kind = "md", *pat = NULL, *flist = DEFAULT_FORMATS;
    const char *claims = "quick";
    int plots = 1, ch;
    optind = 1;
    opterr = 0;
    /* `--format` is the output format here (the spelling); formats to compare are --formats */
    for (int i = 1; i < argc; i++) if (!strcmp(argv[i], "--format")) argv[i] = "--format-out";
    while ((ch = getopt_long(argc, argv, "o:", lo, NULL)) != -1) {
        if (ch == 'f') return qs_cli_usage("report", "use --formats LIST to choose the formats to compare");
        int k = qs_quant_opt("report", ch, optarg, &base);
        if (k < 0) return QS_EXIT_USAGE;
        if (k) continue;
        switch (ch) {
        case 'o': dir = optarg; break;
        case 'O': kind = optarg; break;
        case 'T': pat = optarg; break;
        case 'L': flist = optarg; break;
        case 'P': plots = 0; break;
        case 'C': claims = optarg; break;
        default: return qs_cli_usage("report", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc) return qs_cli_usage("report", "unexpected argument '%s'", argv[optind]);
    if (strcmp(claims, "quick") && strcmp(claims, "full") && strcmp(claims, "none"))
        return qs_cli_usage("report", "--claims is quick, full or none");
    if (strcmp(kind, "md") && strcmp(kind, "html") && strcmp(kind, "json") && strcmp(kind, "csv"))
        return qs_cli_usage("report", "--format is md, html, json or csv");
    const char *gp = pat ? glob_problem(pat) : NULL;
    if (gp) return qs_cli_usage("report", "--tensors '%s': %s", qs_esc(pat), gp);
    qs_apply apps[64];
    int na = qs_quant_parse_list("report", flist, &base, apps, 64);
    if (na < 0) return QS_EXIT_USAGE;
    if (qs_par_rank() == 0 && mkdir(dir, 0777) && errno != EEXIST) return qs_cli_error(QS_EXIT_ERR, "%s: %s", dir, strerror(errno));
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    qs_err e = {{0}};
    int rc = QS_EXIT_OK;
    char created[64];
    time_t now = time(NULL);
    strftime(created, sizeof created, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    json_t *doc = json_pack("{s:s,s:s,s:[],s:[]}", "tool", "qscope " QS_VERSION, "created", created, "tensors", "sections");
    qs_json_set_text(doc, "database", db->path);
    qs_tensor_item *tl;
    size_t ntl;
    if (qs_tensor_list_stats(db, pat ? pat : "*", &tl, &ntl, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    size_t nsel = 0;
    if ((rc = tensor_scope(db, pat, ntl, doc, &nsel, &e)) != QS_EXIT_OK) { qs_tensor_items_free(tl, ntl); goto out; }
    int nt = 0, tty = qs_par_isatty(STDERR_FILENO);
    /* the list first: analyses below write, and a write cannot start while this SELECT still reads
    ** (its snapshot would be stale once another process commits; see qs_db_begin).  Names are kept
    ** as bytes: a name that is not UTF-8 must not drop out of the report. */
    char **tnames = NULL, **tlines = NULL;
    size_t ntodo = 0;
    rc = tensor_todo(tl, nsel, &tnames, &tlines, &ntodo);
    qs_tensor_items_free(tl, ntl);
    /* under mpirun the analyses are spread over the ranks first (rank 0 stores them all), and the
    ** report below finds every one stored; the other ranks' part ends there */
    int worker = qs_par_rank() > 0;
    if (rc == QS_EXIT_OK && qs_par_size() > 1) {
        qs_sweep sw = {db, tnames, ntodo, apps, na, 0, 0, 2, tty, NULL, NULL, NULL};
        if (qs_analyze_sweep(&sw, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
    }
    const double t_todo = qs_now_s();
    for (size_t ti = 0; ti < ntodo; ti++) {
        if (rc != QS_EXIT_OK || worker) break;
        qs_tensor_rec t;
        const char *name = tnames[ti], *line = tlines[ti];
        char left[48] = "";   /* the time left, from the tensors done so far */
        if (ti) snprintf(left, sizeof left, " (about %.0f s left)", (qs_now_s() - t_todo) / (double)ti * (double)(ntodo - ti));
        report_progress(tty, "tensor %zu of %zu: %s%s", ti + 1, ntodo, qs_esc(name), left);
        if (qs_tensor_get(db, name, &t, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); break; }
        char shs[160];
        qs_shape_str(t.shape, t.ndim, shs, sizeof shs);
        json_t *rows = json_array();
        qs_hist vcache;
        memset(&vcache, 0, sizeof vcache);
        for (int k = 0; k < na; k++) {
            json_t *m = NULL;
            int cached;
            if (qs_analyze_one(db, &t, &apps[k], 0, 0, 2, tty, &vcache, &m, &cached, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); break; }
            char label[128];
            qs_quant_label(&apps[k], NULL, label, sizeof label);
            char *opts = qs_quant_opts_json(&apps[k]);
            json_array_append_new(rows, json_pack("{s:s,s:s,s:o,s:o}", "format", apps[k].f->name, "label", label, "options",
                                                  json_loads(opts, 0, NULL), "metrics", m));
            free(opts);
        }
        qs_value_cache_clear(&vcache);
        if (rc != QS_EXIT_OK) { json_decref(rows); qs_tensor_rec_free(&t); break; }
        json_t *sorted = ranked(rows);
        json_t *tj = json_pack("{s:s,s:s,s:s,s:s,s:o,s:[]}", "hash", t.hash, "dtype", qs_dtype_get(t.dtype)->name,
                               "shape_str", shs, "stats_line", line, "results", sorted, "plots");
        qs_json_set_text(tj, "name", t.name);
        if (plots && strcmp(kind, "json") && strcmp(kind, "csv") &&
            qs_report_plots(cli, db, &t, apps, na, sorted, dir, nt, json_object_get(tj, "plots"), &e)) {
            rc = qs_cli_err(QS_EXIT_ERR, &e);
        }
        json_array_append_new(json_object_get(doc, "tensors"), tj);
        qs_tensor_rec_free(&t);
        nt++;
    }
    for (size_t ti = 0; ti < ntodo; ti++) { free(tnames[ti]); free(tlines[ti]); }
    free(tnames);
    free(tlines);
    if (rc != QS_EXIT_OK || worker) goto out;
    /* a database of evaluations, RL, kernel or training runs only still has a report: their sections */
    if (nt == 0 && ntl == 0 && !other_results(db)) {
        rc = qs_cli_error(QS_EXIT_ERR, "%s: nothing to report: no tensors, model evaluations, RL runs, kernel results or "
                          "training runs", qs_esc(db->path));
        goto out;
    }
    int want_plots = plots && strcmp(kind, "json") && strcmp(kind, "csv");
    json_t *sections = json_object_get(doc, "sections");
    /* the model-level evaluation opens the report: it answers for the whole model */
    if (qs_report_llm_eval(cli, db, dir, want_plots, sections, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    for (size_t si = 0; si < json_array_size(sections); si++)
        json_object_set_new(json_array_get(sections, si), "before_tensors", json_true());
    report_progress(tty, "RL runs and kernel results");
    if (qs_report_rl(cli, db, dir, want_plots, sections, &e) || qs_report_kernels(cli, db, dir, want_plots, sections, &e) ||
        qs_report_train(cli, db, dir, want_plots, sections, &e)) {
        rc = qs_cli_err(QS_EXIT_ERR, &e);
        goto out;
    }
    if (strcmp(claims, "none")) report_progress(tty, "paper claims (%s)", claims);
    if (strcmp(claims, "none") &&
        qs_report_claims(cli, dir, plots && strcmp(kind, "json") && strcmp(kind, "csv"), !strcmp(claims, "full"),
                         json_object_get(doc, "sections"), &e)) {
        rc = qs_cli_err(QS_EXIT_ERR, &e);
        goto out;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/report.%s", dir, kind);
    if (tty) fputs("\r\033[K", stderr);
    if (write_report(path, kind, dir, doc, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    printf("%s\n", qs_esc(path));
    report_done(doc, nt, na, kind, dir, path);
out:
    json_decref(doc);
    qs_db_close(db);
    return rc;
}
