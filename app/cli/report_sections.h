/*
** Sections of a report beyond the per-tensor format rankings: paper claims, RL runs, kernel
** experiments.  A section is JSON, so the JSON report carries it as is and the Markdown and HTML
** writers render any section the same way:
**   {"id", "title", "intro": text, "columns": [names], "rows": [[cells as strings]],
**    "notes": [text per row or null], "plots": [{"title", "file"}]}
** Each builder appends its section to `sections` only when it has something to show.
*/
#ifndef QS_REPORT_SECTIONS_H
#define QS_REPORT_SECTIONS_H

#include <stdio.h>

#include <jansson.h>

#include "cli.h"
#include "../../store/db.h"

/* The claims table (`qscope claims`), measured now: quick sizes unless full; PNGs into dir when
** plots (claim-ID.png). */
int qs_report_claims(qs_cli *cli, const char *dir, int plots, int full, json_t *sections, qs_err *e);

/* RL runs: one row per run (its diagnostics recomputed with the default AIS options; at most
** QS_REPORT_MAX_RUNS, logged runs before simulated ones) and the KL (k3) trajectories of up to six. */
#define QS_REPORT_MAX_RUNS 40
int qs_report_rl(qs_cli *cli, qs_db *db, const char *dir, int plots, json_t *sections, qs_err *e);

/* Kernel experiments: the newest stored msd, attn and resq results, each a section with its plot. */
int qs_report_kernels(qs_cli *cli, qs_db *db, const char *dir, int plots, json_t *sections, qs_err *e);

/* Model-level evaluation (report_llm.c): one section per stored `llm eval` run, newest first, then
** the sensitivity tables; the report puts them before the tensors ("before_tensors": true). */
#define QS_REPORT_MAX_EVALS 8
int qs_report_llm_eval(qs_cli *cli, qs_db *db, const char *dir, int plots, json_t *sections, qs_err *e);

/* Training runs (report_train.c): one row per recipe, model and options (seeds as a mean with its
** band, the gap to BF16 or FP32), and the validation-loss plots.  Nothing without training runs. */
int qs_report_train(qs_cli *cli, qs_db *db, const char *dir, int plots, json_t *sections, qs_err *e);

/* Renderers of the sections: those marked "before_tensors": true (the model-level evaluation,
** which opens a report) when lead, else the others (after the tensors). */
void qs_report_sections_md(FILE *f, json_t *sections, int lead);
int qs_report_sections_html(FILE *f, json_t *sections, const char *dir, int lead);

/* Shared with cmd_report.c: HTML escaping and a PNG as base64 (for self-contained HTML). */
void qs_html_esc(FILE *f, const char *s);
int qs_embed_png(FILE *out, const char *path);
int qs_html_figures(FILE *f, json_t *plots, const char *dir);

#endif
