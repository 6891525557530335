/*
** The plan file of `llm sensitivity --formats` (docs/llm.md "Plans across formats": its fields) and
** the text output of the command.
*/
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm_plan_run.h"
#include "text_table.h"
#include "../../analysis/llm_eval_stats.h"
#include "../../analysis/llm_text.h"

/* Slack for "at the same bits": the FP32 per-run scales add a few hundredths of a bit to a format's
** nominal bits (NVFP4 activations: 32 bits per token row). */
#define SAME_BITS_SLACK 0.01

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *meas_json(const qs_plan_meas *m)
{
    return json_pack("{s:o,s:o,s:o,s:o,s:o}", "kl_mean", num(m->kl), "kl_se", num(m->kl_se), "dppl_rel", num(m->dppl), "ppl",
                     num(m->ppl), "top1_agree", num(m->top1));
}

/* Average bits of a choice: weights (per parameter), activations and KV (per element per token), all. */
static json_t *bits_split(const qs_plan_run *r, const int *choice)
{
    double ew = 0, bw = 0, ea = 0, ba = 0;
    for (int k = 0; k < r->C; k++) {
        double n = r->elems[k], b = r->bits[(size_t)k * r->F + choice[k]];
        if (r->o->sites[k % r->S] == QS_SENS_W) ew += n, bw += n * b;
        else ea += n, ba += n * b;
    }
    return json_pack("{s:o,s:o,s:o}", "weights", num(ew > 0 ? bw / ew : NAN), "activations", num(ea > 0 ? ba / ea : NAN), "all",
                     num(ew + ea > 0 ? (bw + ba) / (ew + ea) : NAN));
}

static json_t *layers_json(const qs_plan_run *r)
{
    json_t *a = json_array();
    for (int l = 0; l < r->L; l++) {
        json_t *x = json_pack("{s:i}", "layer", l);
        for (int j = 0; j < r->S; j++) {
            const int k = l * r->S + j, f = r->choice[k];
            json_t *by = json_object();
            for (int g = 0; g < r->F; g++) json_object_set_new(by, r->o->flabel[g], num(r->kl[(size_t)k * r->F + g]));
            json_object_set_new(x, qs_sens_site_name(r->o->sites[j]),
                                json_pack("{s:s,s:s,s:f,s:f,s:o,s:o}", "format", r->o->fspec[f], "label", r->o->flabel[f], "bits",
                                          r->bits[(size_t)k * r->F + f], "elements", r->elems[k], "kl",
                                          num(r->kl[(size_t)k * r->F + f]), "kl_by_format", by));
        }
        json_array_append_new(a, x);
    }
    return a;
}

/* The format alone with the least measured KL among those within the budget (-1: none). */
static int best_single(const qs_plan_run *r)
{
    int b = -1;
    for (int f = 0; f < r->F; f++)
        if (r->single[f].bits_avg <= r->o->bits_budget + SAME_BITS_SLACK && isfinite(r->single[f].kl) &&
            (b < 0 || r->single[f].kl < r->single[b].kl))
            b = f;
    return b;
}

json_t *qs_plan_json(const qs_plan_run *r)
{
    const sens_opts *o = r->o;
    const qs_llm_cfg *c = &r->t->f.m.c;
    json_t *j = json_object();
    json_object_set_new(j, "qscope_plan", json_integer(1));
    json_t *mj = qs_llm_model_json(o->model, &r->t->f);
    json_object_set_new(mj, "layers", json_integer(c->n_layer));
    json_object_set_new(mj, "shape", json_pack("{s:i,s:i,s:i,s:i,s:i,s:i}", "dim", c->dim, "n_head", c->n_head, "n_kv_head",
                                               c->n_kv_head, "head_dim", c->head_dim, "ffn", c->ffn, "vocab", c->vocab));
    json_object_set_new(j, "model", mj);
    json_object_set_new(j, "text", qs_llm_text_json(o->text, r->t->thash, r->t->tlen));
    json_object_set_new(j, "ctx", json_integer(o->ctx));
    json_object_set_new(j, "chunks", json_integer(r->t->su.nchunks));
    json_object_set_new(j, "score", json_string(o->score_all ? "all" : "half"));
    json_object_set_new(j, "scaled_casts", json_boolean(o->scaled));
    json_t *fa = json_array(), *sa = json_array(), *fr = json_array(), *rf = json_array(), *sg = json_array();
    for (int f = 0; f < r->F; f++)
        json_array_append_new(fa, json_pack("{s:s,s:s,s:b}", "spec", o->fspec[f], "label", o->flabel[f], "table_cached", !r->computed[f]));
    for (int s = 0; s < r->S; s++) json_array_append_new(sa, json_string(qs_sens_site_name(o->sites[s])));
    json_object_set_new(j, "formats", fa);
    json_object_set_new(j, "sites", sa);
    json_object_set_new(j, "budget_bits", json_real(o->bits_budget));
    json_object_set_new(j, "weighting", json_string("average over every planned cell of elements x bits: a layer's weights "
                                                    "count their parameters, an activation or KV-cache site its elements per token"));
    json_object_set_new(j, "bits_avg", bits_split(r, r->choice));
    json_object_set_new(j, "budget_unused_bits", json_real(o->bits_budget - r->plan.bits_avg));
    json_object_set_new(j, "predicted_kl", num(r->plan.predicted));
    json_object_set_new(j, "measured", meas_json(&r->plan));
    json_object_set_new(j, "prediction_met", json_boolean(!qs_plan_missed(&r->plan)));
    json_object_set_new(j, "solver", json_pack("{s:s,s:i,s:i}", "method", "lagrangian sweep + greedy fill", "lagrange_points",
                                               r->sol.lagrange_points, "greedy_changes", r->sol.filled));
    for (int i = 0; i < r->sol.nfront; i++)
        json_array_append_new(fr, json_pack("{s:o,s:o,s:f}", "lambda", num(r->sol.front[i].lambda), "predicted_kl",
                                            num(r->sol.front[i].kl), "bits_avg", r->sol.front[i].bits_avg));
    json_object_set_new(j, "front", fr);
    json_object_set_new(j, "layers", layers_json(r));
    for (int i = 0; i < r->nround; i++)
        json_array_append_new(rf, json_pack("{s:i,s:s,s:o,s:f,s:o}", "round", i, "note", r->round_note[i], "predicted_kl",
                                            num(r->round[i].predicted), "bits_avg", r->round[i].bits_avg, "measured",
                                            meas_json(&r->round[i])));
    json_object_set_new(j, "refine", rf);
    json_object_set_new(j, "remeasured", json_incref(r->remeasured));
    for (int f = 0; f < r->F; f++)
        json_array_append_new(sg, json_pack("{s:s,s:f,s:o,s:o}", "format", o->flabel[f], "bits_avg", r->single[f].bits_avg,
                                            "predicted_kl", num(r->single[f].predicted), "measured", meas_json(&r->single[f])));
    json_object_set_new(j, "single", sg);
    int b = best_single(r);
    json_object_set_new(j, "best_single_within_budget", b < 0 ? json_null() : json_string(o->flabel[b]));
    return j;
}

int qs_plan_write(const qs_plan_run *r, json_t *j)
{
    if (json_dump_file(j, r->plan_path, JSON_INDENT(1)))
        return qs_cli_error(QS_EXIT_ERR, "%s: cannot write the plan: %s", qs_esc(r->plan_path), strerror(errno));
    return 0;
}

/* The plan as a layers x sites table of format labels. */
static void print_cells(const qs_plan_run *r)
{
    qs_ttab *tb = qs_ttab_new(1 + r->S);
    if (!tb) return;
    qs_ttab_align(tb, 0, 0);
    qs_ttab_row(tb);
    qs_ttab_set(tb, 0, "layer");
    for (int j = 0; j < r->S; j++) qs_ttab_set(tb, 1 + j, "%s", qs_sens_site_name(r->o->sites[j]));
    for (int l = 0; l < r->L; l++) {
        qs_ttab_row(tb);
        qs_ttab_set(tb, 0, "%d", l);
        for (int j = 0; j < r->S; j++) qs_ttab_set(tb, 1 + j, "%s", r->o->flabel[r->choice[l * r->S + j]]);
    }
    qs_ttab_print(tb, stdout);
    qs_ttab_free(tb);
}

static void fmt_meas(const qs_plan_meas *m, char *buf, size_t cap)
{
    char a[40], b[40];
    qs_evnum(m->kl, 5, 0, a, sizeof a);
    qs_evnum(m->kl_se, 5, 0, b, sizeof b);
    snprintf(buf, cap, "%s±%s", a, b);
}

void qs_plan_print(const qs_plan_run *r, double secs)
{
    const sens_opts *o = r->o;
    char a[96], b[96];
    printf("model %s (%s; %s)\n", qs_esc(o->model), qs_llm_title(&r->t->f), r->t->f.wtypes);
    printf("text %s: %d tokens; ctx %d, %d chunks; scoring: %s\n", qs_esc(o->text), r->t->ntok, o->ctx, r->t->su.nchunks,
           o->score_all ? "all positions" : "second half of each chunk (llama.cpp)");
    printf("plan across %d formats for %g average bits per element (weights: per parameter; activations, KV: per element "
           "per token); one-format tables:", r->F, o->bits_budget);
    for (int f = 0; f < r->F; f++) printf(" %s (%s)", o->flabel[f], r->computed[f] ? "computed" : "reused");
    printf("\n");
    const qs_plan_point *fr = r->sol.front;
    printf("Lagrangian front: %d points from %.3f bits (predicted KL %.5g) to %.3f bits (%.5g); %d within the budget, then "
           "%d greedy changes\n", r->sol.nfront, fr[0].bits_avg, fr[0].kl, fr[r->sol.nfront - 1].bits_avg, fr[r->sol.nfront - 1].kl,
           r->sol.lagrange_points, r->sol.filled);
    print_cells(r);
    json_t *bs = bits_split(r, r->choice);
    char w[32] = "-", ac[32] = "-";   /* "-": the plan has no cell of that kind */
    if (json_is_number(json_object_get(bs, "weights"))) snprintf(w, sizeof w, "%.4f", json_number_value(json_object_get(bs, "weights")));
    if (json_is_number(json_object_get(bs, "activations")))
        snprintf(ac, sizeof ac, "%.4f", json_number_value(json_object_get(bs, "activations")));
    printf("average bits: weights %s, activations %s, all %.4f (budget %g)\n", w, ac, json_number_value(json_object_get(bs, "all")),
           o->bits_budget);
    json_decref(bs);
    qs_evnum(r->plan.predicted, 5, 0, a, sizeof a);
    fmt_meas(&r->plan, b, sizeof b);
    printf("plan verified by one evaluation: predicted KL %s (sum of isolated KLs), measured KL %s, dPPL %.2f%%, same top "
           "%.2f%%%s\n", a, b, 100 * r->plan.dppl, 100 * r->plan.top1,
           qs_plan_missed(&r->plan) ? " — above the prediction's tolerance" : "");
    for (int i = 1; i < r->nround; i++) {
        fmt_meas(&r->round[i], b, sizeof b);
        printf("refinement round %d: %s (measured KL %s)\n", i, r->round_note[i], b);
    }
    printf("each format alone on every planned site:\n%-24s %10s %14s %22s %9s\n", "format", "avg bits", "predicted KL",
           "measured KL", "dPPL");
    for (int f = 0; f < r->F; f++) {
        qs_evnum(r->single[f].predicted, 5, 0, a, sizeof a);
        fmt_meas(&r->single[f], b, sizeof b);
        printf("%-24s %10.4f %14s %23s %8.2f%%\n", o->flabel[f], r->single[f].bits_avg, a, b, 100 * r->single[f].dppl);
    }
    int bb = best_single(r);
    if (bb >= 0)
        printf("best single format within %g bits: %s, measured KL %.5g; the plan's %.5g is %s\n", o->bits_budget, o->flabel[bb],
               r->single[bb].kl, r->plan.kl, r->plan.kl <= r->single[bb].kl ? "lower or equal" : "HIGHER");
    else
        printf("no single format fits within %g bits\n", o->bits_budget);
    printf("plan written to %s (`qscope llm eval --plan %s` evaluates it)\n", qs_esc(r->plan_path), qs_esc(r->plan_path));
    printf("computed in %.1f s (%.1f s computing)\n", secs, r->compute);
}
