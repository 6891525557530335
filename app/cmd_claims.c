/*
** `qscope claims`: re-measure the papers' reproducible headline numbers (analysis/claims.h) and
** print claim, paper, the paper's figure, the measured figure and a verdict.
*/
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "plot_render.h"
#include "../analysis/claims.h"
#include "../analysis/results.h"
#include "../kernels/qs_version.h"
#include "../store/json_out.h"

/* Stored claims are result rows keyed by this pseudo-hash, the claim id and the mode. */
#define CLAIMS_KEY "claims"

/* Print text wrapped at `width` columns, every line indented by four spaces. */
static void print_wrapped(const char *t, int width)
{
    while (*t) {
        while (*t == ' ') t++;
        const char *end = t, *brk = NULL;
        while (*end && end - t < width) {
            if (*end == ' ') brk = end;
            end++;
        }
        if (*end && brk) end = brk;
        printf("    %.*s\n", (int)(end - t), t);
        t = end;
    }
}

static json_t *claim_json(const qs_claim *c, const qs_claim_out *o, int quick)
{
    json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:b,s:s,s:s,s:s,s:b}", "id", c->id, "paper", c->paper, "claim", c->claim,
                          "paper_figure", c->figure, "tolerance", c->tolerance, "must_hold", c->must_hold, "measured",
                          o->measured, "verdict", qs_verdict_name(o->verdict), "detail", o->detail, "quick", quick);
    qs_json_set_num(j, "value", o->value);
    return j;
}

int qs_cmd_claims(qs_cli *cli, int argc, char **argv)
{
    int json = 0, quick = 0, save = 0, verbose = 0;
    const char *only = NULL, *plots = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--save")) save = 1;
        else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) verbose = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--plots") && i + 1 < argc) plots = argv[++i];
        else if (!strcmp(argv[i], "--list")) {
            for (size_t k = 0; k < qs_claim_count(); k++) {
                const qs_claim *c = qs_claim_at(k);
                printf("%-18s %s%s\n", c->id, c->claim, c->must_hold ? "  [must hold]" : "");
            }
            return QS_EXIT_OK;
        } else return qs_cli_usage("claims", "unknown argument '%s'", argv[i]);
    }
    if (plots && mkdir(plots, 0777) && access(plots, W_OK))
        return qs_cli_error(QS_EXIT_ERR, "%s: cannot create the plot directory", plots);
    qs_db *db = NULL;
    if (save && !(db = qs_cli_open_db(cli))) return QS_EXIT_ERR;
    json_t *rows = json_array();
    int failed_must = 0, matched = 0, rc = QS_EXIT_OK;
    if (!json)
        printf("%s%-15s %-20s %-11s %-21s %s%s\n", qs_c_head(cli), "CLAIM", "PAPER", "VERDICT", "PAPER'S FIGURE",
               "MEASURED", qs_c_off(cli));
    for (size_t k = 0; k < qs_claim_count(); k++) {
        const qs_claim *c = qs_claim_at(k);
        if (only && fnmatch(only, c->id, 0)) continue;
        matched++;
        qs_claim_out o;
        memset(&o, 0, sizeof o);
        o.value = NAN;
        qs_err e = {{0}};
        if (c->measure(quick, &o, &e)) {
            qs_fig_free(o.fig);
            rc = qs_cli_error(QS_EXIT_ERR, "claim %s: %s", c->id, e.msg);
            break;
        }
        if (c->must_hold && o.verdict != QS_VERDICT_REPRODUCED) failed_must++;
        json_t *row = claim_json(c, &o, quick);
        if (plots && o.fig) {
            char path[4096];
            snprintf(path, sizeof path, "%s/claim-%s.png", plots, c->id);
            qs_provenance pv = {quick ? "qscope claims --quick" : "qscope claims", NULL, "none: generated data with fixed seeds",
                                c->id, o.detail};
            qs_png_opts po = {0, 0, 0};
            if (qs_plot_png(o.fig, &po, &pv, path, &e)) {
                qs_fig_free(o.fig);
                json_decref(row);
                rc = qs_cli_err(QS_EXIT_ERR, &e);
                break;
            }
            qs_json_set_text(row, "plot", path);
        }
        qs_fig_free(o.fig);
        if (db) {
            char *s = json_dumps(row, JSON_COMPACT | JSON_SORT_KEYS);
            int64_t id;
            int bad = !s || qs_result_put(db, CLAIMS_KEY, "claim", c->id, quick ? "{\"quick\":true}" : "{\"quick\":false}", s,
                                          &id, &e);
            free(s);
            if (bad) { json_decref(row); rc = qs_cli_err(QS_EXIT_ERR, &e); break; }
        }
        if (!json) {
            const char *col = o.verdict == QS_VERDICT_REPRODUCED ? "" : qs_c_warn(cli);
            char paper[21];   /* the paper's name without its reference */
            snprintf(paper, sizeof paper, "%s", c->paper);
            char *sp = strstr(paper, " (");
            if (sp) *sp = 0;
            printf("%-15s %-20s %s%-11s%s %-21s %s\n", c->id, paper, col, qs_verdict_name(o.verdict),
                   o.verdict == QS_VERDICT_REPRODUCED ? "" : qs_c_off(cli), c->figure, o.measured);
            if (verbose || o.verdict != QS_VERDICT_REPRODUCED) {
                fputs(qs_c_dim(cli), stdout);
                print_wrapped(o.detail, 96);
                fputs(qs_c_off(cli), stdout);
            }
            fflush(stdout);
        }
        json_array_append_new(rows, row);
    }
    if (rc == QS_EXIT_OK && !matched) rc = qs_cli_error(QS_EXIT_ERR, "no claim matches '%s' (see `qscope claims --list`)", only);
    if (rc == QS_EXIT_OK) {
        if (json) {
            json_t *out = json_pack("{s:s,s:b,s:O}", "tool_version", QS_VERSION, "quick", quick, "claims", rows);
            char *s = json_dumps(out, JSON_INDENT(2));
            puts(s);
            free(s);
            json_decref(out);
        }
        if (failed_must) {
            fprintf(stderr, "qscope: %d claim%s that must hold did not reproduce\n", failed_must, failed_must == 1 ? "" : "s");
            rc = QS_EXIT_ERR;
        }
    }
    json_decref(rows);
    if (db) qs_db_close(db);
    return rc;
}
