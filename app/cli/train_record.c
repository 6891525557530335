/*
** `qscope train`'s recording (see train_record.h).
*/
#include "train_record.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "par.h"
#include "../../store/json_out.h"

volatile sig_atomic_t qs_trec_stop;

static void on_signal(int sig) { qs_trec_stop = sig; }

/* The first SIGINT/SIGTERM asks for a stop after the step in progress; the handler is then reset,
** so a second one ends the process at once (the run stays 'running' with its completed steps). */
static void install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void restore_handlers(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
}

static char *model_json(const qs_trec *t, const qs_train_data *d)
{
    const qs_llm_cfg *c = &d->m->c;
    json_t *j = json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:I,s:b,s:b}", "layers", c->n_layer, "dim", c->dim, "heads",
                          c->n_head, "kv_heads", c->n_kv_head, "head_dim", c->head_dim, "ffn", c->ffn, "vocab", c->vocab,
                          "ctx", c->ctx, "params", (json_int_t)(d->m->arena_len + d->m->bias_len), "tied",
                          d->m->output == d->m->tok_embd, "qkv_bias", d->m->bias_arena != NULL);
    if (!j) return NULL;
    qs_json_set_text(j, "tokenizer", d->bytes ? "bytes" : t->tokenizer);
    if (t->job->init) qs_json_set_text(j, "init", t->job->init);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

static char *options_json(const qs_trec *t, const qs_train_data *d)
{
    const qs_train_opts *o = &t->job->t;
    json_t *j = json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:I,s:I}", "batch", o->batch, "ctx", o->T, "steps", o->steps,
                          "accum", o->accum, "warmup", o->warmup, "eval_every", o->eval_every, "val_seqs", o->val_seqs,
                          "train_tokens", (json_int_t)d->ntrain, "val_tokens", (json_int_t)d->nval);
    if (!j) return NULL;
    qs_json_add_nums(j, "lr", o->lr, "min_lr", o->min_frac, "wd", o->adam.wd, "clip", o->clip, "beta1", o->adam.beta1,
                     "beta2", o->adam.beta2, "eps", o->adam.eps, (const char *)NULL);
    json_object_set_new(j, "seed", json_integer((json_int_t)o->seed));   /* as train --json has it */
    json_t *rj = json_object(), *ops = json_object(), *texts = json_array();
    json_object_set_new(rj, "name", json_string(t->recipe));
    for (int i = 0; i < QS_OP_COUNT; i++) json_object_set_new(ops, qs_llm_operand_name(i), json_string(t->op_label[i]));
    json_object_set_new(rj, "operands", ops);
    json_object_set_new(rj, "validation", json_string("fp32"));
    if (t->plan_hash) {   /* the run's key: the plan file's bytes */
        json_t *pj = json_pack("{s:s}", "hash", t->plan_hash);
        qs_json_set_text(pj, "file", t->plan_file);
        json_object_set_new(rj, "plan", pj);
    }
    json_object_set_new(j, "recipe", rj);
    for (int i = 0; i < t->job->ntext; i++) json_array_append_new(texts, qs_json_text(t->job->text[i]));
    json_object_set_new(j, "texts", texts);
    qs_json_set_text(j, "val_text", t->job->val_text);
    if (t->job->out) qs_json_set_text(j, "out", t->job->out);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

/* The run's row in memory (qs_trec.cap): what qs_train_run_begin would store. */
static int capture_ready(qs_trec *t, const qs_train_data *d, qs_err *e)
{
    qs_train_capture *c = t->cap;
    c->model_json = model_json(t, d);
    c->options_json = options_json(t, d);
    c->recipe = strdup(t->recipe);
    c->checkpoint = t->job->out ? strdup(t->job->out) : NULL;
    memcpy(c->data_hash, d->hash, sizeof c->data_hash);
    c->seed = t->job->t.seed;
    c->steps = t->job->t.steps;
    c->val0 = NAN;
    t->ops = calloc((size_t)(t->n_layer + 1) * QS_OP_COUNT, sizeof *t->ops);
    if (!c->model_json || !c->options_json || !c->recipe || !t->ops || (t->job->out && !c->checkpoint))
        return qs_fail(e, "out of memory");
    return 0;
}

/* --resume: continue the checkpoint's stored run.  1 continued (t->id, t->run set), 0 a new run is to
** be stored (why says why, for the line that tells the user), -1 error. */
static int reopen(qs_trec *t, const qs_train_data *d, char *why, size_t cap, qs_err *e)
{
    const qs_train_state *s = t->job->resume_state;
    if (!s) return 0;
    if (!s->run_name) { snprintf(why, cap, "the checkpoint's run was not stored (--no-store)"); return 0; }
    qs_train_reopen r = {s->run_name, d->hash, s->step, t->job->t.steps, t->job->out};
    int rc = qs_train_run_reopen(t->db, &r, &t->id, e);
    if (rc == 1) {
        snprintf(t->run, sizeof t->run, "%s", s->run_name);
        t->val0_stored = 1;   /* the run has it from its step 1 */
        return 1;
    }
    if (rc == 0) snprintf(why, cap, "the checkpoint's run %s is not in %s", qs_esc(s->run_name), qs_esc(t->cli->db_path));
    else if (rc == 2)
        snprintf(why, cap, "the run %s in %s is not the checkpoint's (other tokens, or steps 1..%d not all stored)",
                 qs_esc(s->run_name), qs_esc(t->cli->db_path), s->step);
    return rc == -1 ? -1 : 0;
}

int qs_trec_ready(qs_trec *t, const qs_train_data *d, qs_err *e)
{
    t->n_layer = d->m->c.n_layer;
    if (t->csv) qs_train_csv_header(stdout);
    /* under mpirun every rank would run the same training: rank 0 alone stores it (the ranks' own
    ** work, a sweep, is for the MPI layer to hand out) */
    /* before the row exists: no window where a Ctrl-C leaves it 'running' with nothing.  Not on the ranks of
    ** a data-parallel run: a rank that stopped alone would leave the others waiting in the gradients' sum,
    ** so there SIGTERM keeps the MPI layer's handler (one line, the job ends; completed steps stay) */
    if (qs_par_size() <= 1) install_handlers();
    if (t->cap) return capture_ready(t, d, e);
    if (!t->store || qs_par_rank() != 0) return 0;
    const qs_train_state *s = t->job->resume_state;
    char base[512], why[1200] = "";
    if (t->name) snprintf(base, sizeof base, "%s", t->name);
    else if (s && s->run_name) snprintf(base, sizeof base, "%s", s->run_name);
    else snprintf(base, sizeof base, "train/%s/s%llu", t->recipe, (unsigned long long)t->job->t.seed);
    char *mj = model_json(t, d), *oj = options_json(t, d);
    t->ops = calloc((size_t)(t->n_layer + 1) * QS_OP_COUNT, sizeof *t->ops);
    int rc = -1;
    if (!mj || !oj || !t->ops) { qs_fail(e, "out of memory"); goto out; }
    if (!(t->db = qs_db_open(t->cli->db_path, e))) goto out;
    if ((rc = reopen(t, d, why, sizeof why, e))) { rc = rc == 1 ? 0 : -1; goto out; }
    qs_train_run_meta m = {base, t->recipe, t->job->t.seed, t->sweep, t->job->t.steps, mj, oj, d->hash, t->job->out};
    /* --name is the user's: taken is an error; the default name takes the next free suffix */
    rc = t->name ? qs_train_run_begin(t->db, &m, &t->id, e)
                 : qs_train_run_begin_unique(t->db, &m, t->run, sizeof t->run, &t->id, e);
    if (!rc && t->name) snprintf(t->run, sizeof t->run, "%s", t->name);
    /* one line: on stdout, unless --json or --csv own it */
    if (!rc && *why)
        fprintf(t->json || t->csv ? stderr : stdout, "train: %s; the resumed steps are stored as the new run %s\n", why,
                qs_esc(t->run));
out:
    free(mj);
    free(oj);
    if (rc) { qs_db_close(t->db); t->db = NULL; return -1; }
    return 0;
}

/* The step's operand statistics as fractions, for the (layer, operand) pairs that quantized values. */
static size_t opstat_rows(const qs_trec *t, const qs_llm_opstat *s)
{
    size_t n = 0;
    for (int l = 0; s && l <= t->n_layer; l++)
        for (int op = 0; op < QS_OP_COUNT; op++) {
            const qs_llm_opstat *x = &s[(size_t)l * QS_OP_COUNT + op];
            if (!x->n) continue;
            double inv = 1.0 / (double)x->n;
            t->ops[n++] = (qs_train_opstat_row){l, op, (int64_t)x->n, (double)x->underflow * inv,
                                                (double)x->clipped * inv, (double)x->nonfinite * inv};
        }
    return n;
}

int qs_trec_step(qs_trec *t, const qs_train_rec *r)
{
    qs_train_step_row row = {r->step, r->train_loss, r->val_loss, r->grad_norm, r->lr, r->tok_s};
    if (t->csv) { qs_train_csv_row(stdout, &row); fflush(stdout); }
    if (t->cap) return qs_train_capture_step(t->cap, &row, t->ops, opstat_rows(t, r->opstat), t->e);
    if (!t->db) return 0;
    if (!t->val0_stored) {   /* the job measured it before the first step */
        if (qs_train_run_val0(t->db, t->id, t->res->val0, t->e)) return -1;
        t->val0_stored = 1;
    }
    return qs_train_run_step(t->db, t->id, &row, t->ops, opstat_rows(t, r->opstat), t->e);
}

int qs_trec_end(qs_trec *t, int ok, const qs_train_result *res, const qs_err *err)
{
    int code = ok ? QS_EXIT_OK : QS_EXIT_ERR, sig = qs_trec_stop;
    const char *status = !ok ? "failed" : res->stopped ? "stopped" : "done";
    char why[64] = "";
    if (ok && res->stopped) {
        snprintf(why, sizeof why, "stopped by %s after step %d", sig == SIGTERM ? "SIGTERM" : "SIGINT", res->steps_done);
        code = 128 + (sig ? sig : SIGINT);
    }
    if (t->db) {
        qs_err e = {{0}};
        if (!t->val0_stored && !isnan(res->val0) && qs_train_run_val0(t->db, t->id, res->val0, &e))
            code = qs_cli_err(QS_EXIT_ERR, &e);
        else if (qs_train_run_end(t->db, t->id, status, ok ? (*why ? why : NULL) : err->msg, &e))
            code = qs_cli_err(QS_EXIT_ERR, &e);
    }
    if (t->cap) {   /* the end as qs_train_run_end would store it */
        t->cap->val0 = res->val0;
        snprintf(t->cap->status, sizeof t->cap->status, "%s", status);
        const char *w = ok ? (*why ? why : NULL) : err->msg;
        if (w && !(t->cap->why = strdup(w))) code = qs_cli_error(QS_EXIT_ERR, "out of memory");
    }
    if (ok && res->stopped)
        fprintf(stderr, "qscope: train: %s; %d of %d steps kept%s%s%s%s\n", why, res->steps_done, t->job->t.steps,
                t->db ? " in run " : "", t->db ? qs_esc(t->run) : "", t->job->out ? ", checkpoint " : "",
                t->job->out ? qs_esc(t->job->out) : "");
    /* a failed run: its error is the one line on stderr; `qscope runs` shows it as failed, with the error */
    restore_handlers();
    qs_db_close(t->db);
    t->db = NULL;
    free(t->ops);
    t->ops = NULL;
    return code;
}

static void put_num(FILE *f, double v)
{
    if (!isnan(v)) fprintf(f, "%.17g", v);   /* NaN: not measured, an empty field */
}

void qs_train_csv_header(FILE *f) { fputs("step,train_loss,val_loss,grad_norm,lr,tok_s\n", f); }

void qs_train_csv_row(FILE *f, const qs_train_step_row *r)
{
    fprintf(f, "%d,", r->step);
    put_num(f, r->train_loss);
    fputc(',', f);
    put_num(f, r->val_loss);
    fputc(',', f);
    put_num(f, r->grad_norm);
    fputc(',', f);
    put_num(f, r->lr);
    fputc(',', f);
    put_num(f, r->tok_s);
    fputc('\n', f);
}
