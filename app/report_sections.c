/*
** Report sections (report_sections.h): builders and the Markdown / HTML renderers.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot_render.h"
#include "report_sections.h"
#include "../analysis/claims.h"

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int qs_embed_png(FILE *out, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    unsigned char in[3];
    size_t n;
    while ((n = fread(in, 1, 3, f)) > 0) {
        char o[4];
        o[0] = b64chars[in[0] >> 2];
        o[1] = b64chars[((in[0] & 3) << 4) | (n > 1 ? in[1] >> 4 : 0)];
        o[2] = n > 1 ? b64chars[((in[1] & 15) << 2) | (n > 2 ? in[2] >> 6 : 0)] : '=';
        o[3] = n > 2 ? b64chars[in[2] & 63] : '=';
        fwrite(o, 1, 4, out);
        if (n < 3) break;
    }
    fclose(f);
    return 0;
}

void qs_html_esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

int qs_report_claims(qs_cli *cli, const char *dir, int plots, int full, json_t *sections, qs_err *e)
{
    (void)cli;
    json_t *rows = json_array(), *notes = json_array(), *pl = json_array();
    for (size_t k = 0; k < qs_claim_count(); k++) {
        const qs_claim *c = qs_claim_at(k);
        qs_claim_out o;
        memset(&o, 0, sizeof o);
        o.value = NAN;
        if (c->measure(!full, &o, e)) {
            qs_fig_free(o.fig);
            json_decref(rows); json_decref(notes); json_decref(pl);
            return qs_fail(e, "claim %s: %s", c->id, e->msg);
        }
        json_array_append_new(rows, json_pack("[s,s,s,s,s,s]", c->id, c->paper, c->claim, c->figure, o.measured,
                                              qs_verdict_name(o.verdict)));
        json_array_append_new(notes, json_string(o.detail));
        if (plots && o.fig) {
            char file[256], path[4096];
            snprintf(file, sizeof file, "claim-%s.png", c->id);
            snprintf(path, sizeof path, "%s/%s", dir, file);
            qs_provenance pv = {full ? "qscope report --claims full" : "qscope report --claims quick", NULL,
                                 "none: generated data with fixed seeds", c->id, o.detail};
            qs_png_opts po = {0, 0, 0};
            int bad = qs_plot_png(o.fig, &po, &pv, path, e);
            if (!bad) json_array_append_new(pl, json_pack("{s:s,s:s}", "title", o.fig->title, "file", file));
            qs_fig_free(o.fig);
            if (bad) { json_decref(rows); json_decref(notes); json_decref(pl); return -1; }
        } else
            qs_fig_free(o.fig);
    }
    json_array_append_new(sections,
        json_pack("{s:s,s:s,s:s,s:[s,s,s,s,s,s],s:o,s:o,s:o}", "id", "claims", "title", "Paper claims",
                  "intro", full ? "Every reproducible headline number of the source papers, re-measured with fixed seeds "
                                  "(`qscope claims`; settings under each row)."
                                : "Every reproducible headline number of the source papers, re-measured with fixed seeds "
                                  "at the reduced sizes of `qscope claims --quick` (settings under each row; "
                                  "`report --claims full` uses the full sizes).",
                  "columns", "claim", "paper", "what the paper says", "paper's figure", "measured", "verdict",
                  "rows", rows, "notes", notes, "plots", pl));
    return 0;
}

static const char *cell(json_t *row, size_t i)
{
    const char *s = json_string_value(json_array_get(row, i));
    return s ? s : "";
}

void qs_report_sections_md(FILE *f, json_t *sections)
{
    size_t i, k, c;
    json_t *s, *row, *p;
    json_array_foreach(sections, i, s) {
        json_t *cols = json_object_get(s, "columns"), *notes = json_object_get(s, "notes");
        fprintf(f, "## %s\n\n%s\n\n", json_string_value(json_object_get(s, "title")),
                json_string_value(json_object_get(s, "intro")));
        size_t nc = json_array_size(cols);
        fprintf(f, "|");
        for (c = 0; c < nc; c++) fprintf(f, " %s |", cell(cols, c));
        fprintf(f, "\n|");
        for (c = 0; c < nc; c++) fprintf(f, "---|");
        fprintf(f, "\n");
        json_array_foreach(json_object_get(s, "rows"), k, row) {
            fprintf(f, "|");
            for (c = 0; c < nc; c++) {
                fputc(' ', f);
                for (const char *t = cell(row, c); *t; t++) {
                    if (*t == '|') fputc('\\', f);
                    fputc(*t, f);
                }
                fputs(" |", f);
            }
            fprintf(f, "\n");
        }
        fprintf(f, "\n");
        if (json_array_size(notes)) {
            json_array_foreach(json_object_get(s, "rows"), k, row) {
                const char *n = json_string_value(json_array_get(notes, k));
                if (n && *n) fprintf(f, "- **%s**: %s\n", cell(row, 0), n);
            }
            fprintf(f, "\n");
        }
        json_array_foreach(json_object_get(s, "plots"), k, p)
            fprintf(f, "![%s](%s)\n\n", json_string_value(json_object_get(p, "title")), json_string_value(json_object_get(p, "file")));
    }
}

int qs_report_sections_html(FILE *f, json_t *sections, const char *dir)
{
    size_t i, k, c;
    json_t *s, *row, *p;
    json_array_foreach(sections, i, s) {
        json_t *cols = json_object_get(s, "columns"), *notes = json_object_get(s, "notes");
        fprintf(f, "<h2>");
        qs_html_esc(f, json_string_value(json_object_get(s, "title")));
        fprintf(f, "</h2>\n<p>");
        qs_html_esc(f, json_string_value(json_object_get(s, "intro")));
        fprintf(f, "</p>\n<table class=\"section\"><tr>");
        size_t nc = json_array_size(cols);
        for (c = 0; c < nc; c++) { fprintf(f, "<th>"); qs_html_esc(f, cell(cols, c)); fprintf(f, "</th>"); }
        fprintf(f, "</tr>\n");
        json_array_foreach(json_object_get(s, "rows"), k, row) {
            const char *n = json_string_value(json_array_get(notes, k));
            fprintf(f, "<tr>");
            for (c = 0; c < nc; c++) { fprintf(f, "<td>"); qs_html_esc(f, cell(row, c)); fprintf(f, "</td>"); }
            fprintf(f, "</tr>\n");
            if (n && *n) {
                fprintf(f, "<tr class=\"note\"><td colspan=\"%zu\">", nc);
                qs_html_esc(f, n);
                fprintf(f, "</td></tr>\n");
            }
        }
        fprintf(f, "</table>\n");
        json_array_foreach(json_object_get(s, "plots"), k, p) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, json_string_value(json_object_get(p, "file")));
            fprintf(f, "<figure><img alt=\"");
            qs_html_esc(f, json_string_value(json_object_get(p, "title")));
            fprintf(f, "\" src=\"data:image/png;base64,");
            if (qs_embed_png(f, path)) return -1;
            fprintf(f, "\"><figcaption>");
            qs_html_esc(f, json_string_value(json_object_get(p, "title")));
            fprintf(f, "</figcaption></figure>\n");
        }
    }
    return ferror(f) ? -1 : 0;
}
