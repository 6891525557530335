/*
** Plans as per-linear training recipes (see train_plan.h).
*/
#include "train_plan.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "quant_opts.h"
#include "../../kernels/cast_scale.h"
#include "../../kernels/llm_train.h"

/* The site feeding each of a layer's linears (wq, wk, wv, wo, w_gate, w_up, w_down). */
static const int lin_site[QS_LLM_TRAIN_NLIN] = {QS_SITE_ATTN_IN, QS_SITE_ATTN_IN, QS_SITE_ATTN_IN, QS_SITE_ATTN_OUT,
                                                QS_SITE_FFN_IN, QS_SITE_FFN_IN, QS_SITE_FFN_DOWN_IN};

/* A forward slot from a plan cell (NULL: off); a scaled plan scales element casts per row, as `llm
** eval` does (per token row of X, per output row of W). */
static void slot_of(const qs_plan_file *p, int cell, int op, qs_llm_slot *sl)
{
    memset(sl, 0, sizeof *sl);
    if (p->cellfmt[cell] < 0) return;
    sl->on = 1;
    sl->a = p->fmt[p->cellfmt[cell]];
    sl->a.axis = qs_llm_operand_axis(op);
    if (sl->a.o.round == QS_RND_SR) { sl->sr = 1; sl->a.o.round = QS_RND_DEFAULT; }
    if (p->scaled && !sl->a.cscale && qs_cast_scale_target(sl->a.f) > 0) sl->a.cscale = QS_CSCALE_ROW;
}

int qs_train_plan_recipes(const qs_plan_file *p, const qs_llm_recipe *base, qs_llm_recipe **out, size_t *n)
{
    *n = (size_t)p->layers * QS_LLM_TRAIN_NLIN + 1;
    qs_llm_recipe *r = malloc(*n * sizeof *r);
    if (!(*out = r)) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    for (size_t i = 0; i < *n; i++) r[i] = *base;
    for (int l = 0; l < p->layers; l++)
        for (int k = 0; k < QS_LLM_TRAIN_NLIN; k++) {
            qs_llm_recipe *x = &r[(size_t)l * QS_LLM_TRAIN_NLIN + k];
            slot_of(p, l * QS_SENS_NSITE + lin_site[k], QS_OP_FWD_X, &x->op[QS_OP_FWD_X]);
            slot_of(p, l * QS_SENS_NSITE + QS_SENS_W, QS_OP_FWD_W, &x->op[QS_OP_FWD_W]);
            qs_err e = {{0}};
            if (qs_llm_recipe_check(x, &e)) {
                free(r);
                *out = NULL;
                return qs_cli_error(QS_EXIT_USAGE, "%s: layer %d: %s", qs_esc(p->path), l, e.msg);
            }
        }
    return 0;
}

int qs_train_plan_check(const qs_plan_file *p, const qs_llm_cfg *c, qs_err *e)
{
    const int have[5] = {c->dim, c->n_head, c->n_kv_head, c->head_dim, c->ffn};
    int same = p->layers == c->n_layer;
    for (int i = 0; i < 5; i++) same &= p->shape[i] == have[i];
    if (same) return 0;
    return qs_fail(e, "%s: a plan for another model shape (%s: %d layers, dim %d, %d/%d heads, head_dim %d, ffn %d), not "
                      "this one (%d layers, dim %d, %d/%d heads, head_dim %d, ffn %d)", p->path,
                   p->model_name[0] ? p->model_name : "unnamed", p->layers, p->shape[0], p->shape[1], p->shape[2],
                   p->shape[3], p->shape[4], c->n_layer, c->dim, c->n_head, c->n_kv_head, c->head_dim, c->ffn);
}

static const char *cell_label(const qs_plan_file *p, int l, int site, char *buf, size_t cap)
{
    int f = p->cellfmt[l * QS_SENS_NSITE + site];
    snprintf(buf, cap, "%s", f < 0 ? "fp32" : p->spec[f]);
    return buf;
}

void qs_train_plan_print(FILE *f, const qs_plan_file *p, const char *base, const qs_llm_recipe *r)
{
    fprintf(f, "train: plan %s (hash %s, %d layers, of %s): fwd.w = the layer's w, fwd.x = the site feeding each "
               "linear (attn_in: Q/K/V, attn_out: O, ffn_in: gate/up, ffn_down_in: down); kv not used (no KV cache "
               "in training); backward slots and head from %s (",
            p->path, p->hash, p->layers, p->model_name[0] ? p->model_name : "an unnamed model", base);
    for (int i = QS_OP_DGRAD_DY; i < QS_OP_COUNT; i++) {
        char lab[160] = "fp32";
        if (r->op[i].on) qs_quant_label(&r->op[i].a, r->op[i].a.f->name, lab, sizeof lab);
        fprintf(f, "%s%s=%s", i > QS_OP_DGRAD_DY ? " " : "", qs_llm_operand_name(i), lab);
    }
    fprintf(f, "; head %s)\n", r->head ? "quantized" : "fp32");
    for (int l = 0; l < p->layers; l++) {
        char a[5][96];
        fprintf(f, "train: plan layer %d: w=%s attn_in=%s attn_out=%s ffn_in=%s ffn_down_in=%s\n", l,
                cell_label(p, l, QS_SENS_W, a[0], 96), cell_label(p, l, QS_SITE_ATTN_IN, a[1], 96),
                cell_label(p, l, QS_SITE_ATTN_OUT, a[2], 96), cell_label(p, l, QS_SITE_FFN_IN, a[3], 96),
                cell_label(p, l, QS_SITE_FFN_DOWN_IN, a[4], 96));
    }
}
