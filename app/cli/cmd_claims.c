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
#include "par.h"
#include "train_cli.h"
#include "../render/plot_render.h"
#include "../../analysis/claims.h"
#include "../../analysis/claims_grpo.h"
#include "../../analysis/claims_train.h"
#include "../../analysis/plot_pack.h"
#include "../../analysis/results.h"
#include "../../kernels/qs_version.h"
#include "../../store/json_out.h"

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

/* One claim's measurement as bytes: the verdict, value, texts, then its figure (plot_pack.h). */
static int out_pack(const qs_claim_out *o, uint8_t **b, size_t *n)
{
    size_t cap = 0;
    *b = NULL;
    *n = 0;
    qs_claim_out flat = *o;
    flat.fig = NULL;
    size_t k = sizeof flat;
    uint8_t *p = malloc(k);
    if (!p) return -1;
    memcpy(p, &flat, k);
    *b = p;
    *n = cap = k;
    if (qs_fig_pack(o->fig, b, n, &cap)) { free(*b); *b = NULL; return -1; }
    return 0;
}

static int out_unpack(const uint8_t *b, size_t len, qs_claim_out *o)
{
    size_t at = sizeof *o;
    if (len < at) return -1;
    memcpy(o, b, sizeof *o);
    o->fig = NULL;
    o->measured[sizeof o->measured - 1] = 0;
    o->detail[sizeof o->detail - 1] = 0;
    return qs_fig_unpack(b, len, &at, &o->fig) || at != len ? -1 : 0;
}

/* The pre-training claim's missing runs: the default sweep, stored (progress on stderr: stdout may be JSON). */
static int run_default_sweep(void *ctx, qs_err *e)
{
    fprintf(stderr, "qscope: claims: running the default training sweep (`qscope train --sweep default`; stored, "
                    "so the next call reuses it)\n");
    return qs_train_sweep_default(ctx, stderr, e);
}

typedef struct {
    qs_cli *cli;
    int json, quick, verbose, failed_must;
    const char *plots;
    qs_db *db;
    json_t *rows;
    const qs_claim **list;
} claims_run;

static int measure_unit(size_t i, void *ctx, uint8_t **out, size_t *out_len, qs_err *e)
{
    claims_run *R = ctx;
    const qs_claim *c = R->list[i];
    qs_claim_out o;
    memset(&o, 0, sizeof o);
    o.value = NAN;
    qs_err me = {{0}};
    if (c->measure(R->quick, &o, &me)) {
        qs_fig_free(o.fig);
        return qs_fail(e, "claim %s: %s", c->id, me.msg);
    }
    int rc = out_pack(&o, out, out_len) ? qs_fail(e, "out of memory") : 0;
    qs_fig_free(o.fig);
    return rc;
}

/* Rank 0, in table order: the plot, the stored row, the table line. */
static int claim_done(size_t i, const uint8_t *b, size_t len, void *ctx, qs_err *e)
{
    claims_run *R = ctx;
    qs_cli *cli = R->cli;
    const qs_claim *c = R->list[i];
    qs_claim_out o;
    if (out_unpack(b, len, &o)) return qs_fail(e, "claim %s: its measurement came back malformed", c->id);
    if (c->must_hold && o.verdict != QS_VERDICT_REPRODUCED) R->failed_must++;
    json_t *row = claim_json(c, &o, R->quick);
    if (R->plots && o.fig) {
        char path[4096];
        snprintf(path, sizeof path, "%s/claim-%s.png", R->plots, c->id);
        qs_provenance pv = {R->quick ? "qscope claims --quick" : "qscope claims", NULL, "none: generated data with fixed seeds",
                            c->id, o.detail};
        qs_png_opts po = {0, 0, 0};
        if (qs_plot_png(o.fig, &po, &pv, path, e)) {
            qs_fig_free(o.fig);
            json_decref(row);
            return -1;
        }
        qs_json_set_text(row, "plot", path);
    }
    qs_fig_free(o.fig);
    if (R->db) {
        char *s = json_dumps(row, JSON_COMPACT | JSON_SORT_KEYS);
        int64_t id;
        int bad = !s || qs_result_put(R->db, CLAIMS_KEY, "claim", c->id, R->quick ? "{\"quick\":true}" : "{\"quick\":false}",
                                      s, &id, e);
        free(s);
        if (bad) {
            json_decref(row);
            return e->msg[0] ? -1 : qs_fail(e, "out of memory");
        }
    }
    if (!R->json) {
        const char *col = o.verdict == QS_VERDICT_REPRODUCED ? "" : qs_c_warn(cli);
        char paper[21];   /* the paper's name without its reference */
        snprintf(paper, sizeof paper, "%s", c->paper);
        char *sp = strstr(paper, " (");
        if (sp) *sp = 0;
        printf("%-15s %-20s %s%-12s%s %-21s %s\n", c->id, paper, col, qs_verdict_name(o.verdict),
               o.verdict == QS_VERDICT_REPRODUCED ? "" : qs_c_off(cli), c->figure, o.measured);
        if (R->verbose || o.verdict != QS_VERDICT_REPRODUCED) {
            fputs(qs_c_dim(cli), stdout);
            print_wrapped(o.detail, 96);
            fputs(qs_c_off(cli), stdout);
        }
        fflush(stdout);
    }
    json_array_append_new(R->rows, row);
    return 0;
}

static int is_grpo_claim(const qs_claim *c)
{
    for (size_t i = 0; i < qs_claims_grpo_n; i++)
        if (c == &qs_claims_grpo[i]) return 1;
    return 0;
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
    if (plots && qs_par_rank() == 0 && mkdir(plots, 0777) && access(plots, W_OK))
        return qs_cli_error(QS_EXIT_ERR, "%s: cannot create the plot directory", plots);
    qs_db *db = NULL;
    if (save && !(db = qs_cli_open_db(cli))) return QS_EXIT_ERR;
    const qs_claim **list = malloc((qs_claim_count() + 1) * sizeof *list);
    if (!list) { if (db) qs_db_close(db); return qs_cli_error(QS_EXIT_ERR, "out of memory"); }
    size_t matched = 0;
    for (size_t k = 0; k < qs_claim_count(); k++)
        if (!only || !fnmatch(only, qs_claim_at(k)->id, 0)) list[matched++] = qs_claim_at(k);
    /* the pre-training claim reads (and, on one process, makes) the stored default sweep */
    qs_db *tdb = NULL;
    for (size_t k = 0; k < matched && !quick; k++)
        if (!strcmp(list[k]->id, "hif4.pretrain")) {
            if (!db && !(tdb = qs_cli_open_db(cli))) { free(list); return QS_EXIT_ERR; }
            qs_claims_train_env env = {db ? db : tdb, qs_par_size() == 1 ? run_default_sweep : NULL, cli};
            qs_claims_train_bind(&env);
        }
    /* the RL claims on a transformer read the stored `rl grpo` sweeps (they never train them) */
    for (size_t k = 0; k < matched && !quick; k++)
        if (is_grpo_claim(list[k])) {
            if (!db && !tdb && !(tdb = qs_cli_open_db(cli))) { free(list); qs_claims_train_bind(NULL); return QS_EXIT_ERR; }
            qs_claims_grpo_bind(db ? db : tdb);
            break;
        }
    claims_run R = {cli, json, quick, verbose, 0, plots, db, json_array(), list};
    int rc = QS_EXIT_OK;
    if (!json)
        printf("%s%-15s %-20s %-12s %-21s %s%s\n", qs_c_head(cli), "CLAIM", "PAPER", "VERDICT", "PAPER'S FIGURE",
               "MEASURED", qs_c_off(cli));
    /* under mpirun the claims are spread over the ranks (the measurements have no size: one each) */
    qs_err e = {{0}};
    if (qs_par_run(matched, NULL, measure_unit, claim_done, &R, qs_par_size() > 1 ? "claims" : NULL, &e))
        rc = qs_cli_err(QS_EXIT_ERR, &e);
    if (rc == QS_EXIT_OK && !matched) rc = qs_cli_error(QS_EXIT_ERR, "no claim matches '%s' (see `qscope claims --list`)", only);
    if (rc == QS_EXIT_OK) {
        if (json) {
            json_t *out = json_pack("{s:s,s:b,s:O}", "tool_version", QS_VERSION, "quick", quick, "claims", R.rows);
            char *s = json_dumps(out, JSON_INDENT(2));
            puts(s);
            free(s);
            json_decref(out);
        }
        if (R.failed_must) {
            fprintf(stderr, "qscope: %d claim%s that must hold did not reproduce\n", R.failed_must, R.failed_must == 1 ? "" : "s");
            rc = QS_EXIT_ERR;
        }
    }
    json_decref(R.rows);
    free(list);
    qs_claims_train_bind(NULL);
    qs_claims_grpo_bind(NULL);
    if (tdb) qs_db_close(tdb);
    if (db) qs_db_close(db);
    return rc;
}
