/*
** `qscope train`'s service (see train_service.h).
*/
#include "train_service.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "llm_text.h"
#include "../kernels/llm_train.h"
#include "../store/llm_load.h"
#include "../store/llm_save_hf.h"

/* Append the tokens of each file to *ids (bytes when tok is NULL). */
static int read_tokens(const char *const *paths, int n, const qs_llm_file *tok, int32_t **ids, size_t *nids, qs_err *e)
{
    for (int i = 0; i < n; i++) {
        char *text = NULL, hash[33];
        size_t tlen = 0;
        int32_t *t = NULL;
        int nt = 0;
        if (qs_eval_read_text(paths[i], &text, &tlen, hash, e)) return -1;
        if (tok) {
            if (qs_eval_text_ids(paths[i], tok, text, tlen, &t, &nt, e)) { free(text); return -1; }
        } else {
            t = malloc((tlen ? tlen : 1) * sizeof *t);
            for (size_t k = 0; t && k < tlen; k++) t[k] = (unsigned char)text[k];
            nt = (int)tlen;
        }
        free(text);
        int32_t *grown = t ? realloc(*ids, (*nids + (size_t)nt + 1) * sizeof **ids) : NULL;
        if (!grown) { free(t); return qs_fail(e, "out of memory for the tokens of %s", paths[i]); }
        memcpy(grown + *nids, t, (size_t)nt * sizeof *t);
        *ids = grown;
        *nids += (size_t)nt;
        free(t);
    }
    return 0;
}

/* Bytes a run needs: weights, gradients and two AdamW moments (4 P floats) plus the training state.
** Refused beyond the machine's physical memory, before anything that large is allocated. */
static int check_memory(const qs_llm_cfg *c, int tied, int bias, const qs_train_opts *t, qs_err *e)
{
    double d = c->dim, q = (double)c->n_head * c->head_dim, kv = (double)c->n_kv_head * c->head_dim;
    double P = (double)c->vocab * d * (tied ? 1 : 2) + d +
               c->n_layer * (2 * d + 2 * q * d + 2 * kv * d + 3.0 * c->ffn * d + (bias ? q + 2 * kv : 0));
    /* a recipe: a second state for the training micro-batches, plus its two quantized operands */
    double R = (double)t->batch * t->T, big = fmax(fmax(c->vocab, d), fmax(q, c->ffn));
    double need = 4.0 * (4 * P + (double)qs_llm_train_state_floats(c, t->batch, t->T) * (t->recipe ? 2 : 1) +
                         (t->recipe ? 2 * fmax(R, d) * big : 0));
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (have > 0 && need > have)
        return qs_fail(e, "training this model (%.3g parameters, batch %d, ctx %d) needs %.3g GB, more than the "
                          "machine's %.3g GB", P, t->batch, t->T, need / 1e9, have / 1e9);
    return 0;
}

static void job_cfg(const qs_train_job *j, int vocab, qs_llm_cfg *c)
{
    int heads = j->heads ? j->heads : 4, dim = j->dim ? j->dim : 64;
    *c = (qs_llm_cfg){.n_layer = j->layers ? j->layers : 2, .dim = dim, .n_head = heads,
                      .n_kv_head = j->kv_heads ? j->kv_heads : heads, .head_dim = dim / heads,
                      .ffn = j->ffn ? j->ffn : 4 * dim, .vocab = vocab, .ctx = j->t.T, .rope_base = 10000.0f,
                      .eps = 1e-5f, .rope_neox = 1};
}

int qs_train_shape_check(const qs_train_job *j, qs_err *e)
{
    if (j->init || j->resume) return 0;   /* the model's own shape */
    qs_llm_cfg c;
    job_cfg(j, 256, &c);
    if (c.dim % c.n_head) return qs_fail(e, "--dim %d is not a multiple of --heads %d", c.dim, c.n_head);
    if (c.n_head % c.n_kv_head)
        return qs_fail(e, "--heads %d, --kv-heads %d: %d query heads are not a multiple of %d KV heads", c.n_head,
                       c.n_kv_head, c.n_head, c.n_kv_head);
    if (c.head_dim % 2)
        return qs_fail(e, "head dimension --dim/--heads = %d is odd (RoPE rotates pairs)", c.head_dim);
    return qs_llm_cfg_check(&c, e);
}

/* The model to train: --init, the checkpoint of --resume, or a new one of the job's shape (tied
** embeddings, rotate_half RoPE). */
static int make_model(const qs_train_job *j, int vocab, qs_llm_file *init, qs_llm_model *m, int *bad, qs_err *e)
{
    if (j->init || j->resume) {
        if (qs_llm_load(j->resume ? j->resume : j->init, init, e)) return -1;
        *m = init->m;
        memset(&init->m, 0, sizeof init->m);
        const qs_train_state *s = j->resume_state;
        const qs_llm_cfg *c = &m->c;
        if (s && (c->n_layer != s->layers || c->dim != s->dim || c->n_head != s->heads || c->n_kv_head != s->kv_heads ||
                  c->head_dim != s->head_dim || c->ffn != s->ffn || c->vocab != s->vocab ||
                  (m->output == m->tok_embd) != s->tied || (m->bias_arena != NULL) != s->bias))
            return qs_fail(e, "%s/config.json: the model's shape is not the one of its %s", j->resume, QS_TRAIN_STATE_FILE);
        return 0;
    }
    qs_llm_cfg c;
    job_cfg(j, vocab, &c);
    *bad = 1;   /* the shape's errors are the input's */
    if (qs_train_shape_check(j, e)) return -1;
    *bad = 0;
    if (check_memory(&c, 1, 0, &j->t, e) || qs_llm_alloc(m, &c, 1, e)) return -1;
    qs_train_init(m, j->t.seed);
    return 0;
}

void qs_train_data_hash(const int32_t *train, size_t ntrain, const int32_t *val, size_t nval, char hex[33])
{
    XXH3_state_t *h = XXH3_createState();
    XXH128_hash_t d = {0, 0};
    if (h) {
        uint64_t n[2] = {ntrain, nval};
        XXH3_128bits_reset(h);
        XXH3_128bits_update(h, &n[0], sizeof n[0]);
        XXH3_128bits_update(h, train, ntrain * sizeof *train);
        XXH3_128bits_update(h, &n[1], sizeof n[1]);
        XXH3_128bits_update(h, val, nval * sizeof *val);
        d = XXH3_128bits_digest(h);
        XXH3_freeState(h);
    }
    snprintf(hex, 33, "%016llx%016llx", (unsigned long long)d.high64, (unsigned long long)d.low64);
}

/* What a checkpoint of this run records (strings borrowed from the job, or realpath's in abs[]). */
typedef struct run_ctx {
    const qs_train_job *j;
    qs_train_result *r;
    const qs_llm_file *tok;
    qs_adamw opt;
    qs_train_state st;
    char *abs[QS_TRAIN_MAX_TEXTS + 3];
    int nabs, filled, stopping;
    uint64_t calls;               /* the recipe's call counter after the last step */
    qs_err *e;
} run_ctx;

/* An absolute path for trainer_state.json, so --resume works from any directory (p when it does not resolve). */
static char *abs_path(run_ctx *x, const char *p)
{
    if (!p) return NULL;
    char *a = realpath(p, NULL);
    if (!a) return (char *)p;
    x->abs[x->nabs++] = a;
    return a;
}

static void fill_state(run_ctx *x)
{
    const qs_train_job *j = x->j;
    const qs_llm_model *m = &x->r->m;
    const qs_train_opts *t = &j->t;
    const qs_train_state *old = j->resume_state;
    qs_train_state *s = &x->st;
    *s = (qs_train_state){.steps = t->steps, .layers = m->c.n_layer, .dim = m->c.dim, .heads = m->c.n_head,
                          .kv_heads = m->c.n_kv_head, .head_dim = m->c.head_dim, .ffn = m->c.ffn, .vocab = m->c.vocab,
                          .tied = m->output == m->tok_embd, .bias = m->bias_arena != NULL,
                          .rope_adjacent = !m->c.rope_neox, .batch = t->batch,
                          .ctx = t->T, .accum = t->accum, .warmup = t->warmup, .eval_every = t->eval_every,
                          .val_seqs = t->val_seqs, .ckpt_every = j->ckpt_every, .lr = t->lr, .min_frac = t->min_frac,
                          .clip = t->clip, .beta1 = t->adam.beta1, .beta2 = t->adam.beta2, .eps = t->adam.eps,
                          .wd = t->adam.wd, .seed = t->seed, .recipe = (char *)j->recipe_preset,
                          .nops = j->nops, .ntext = j->ntext, .ntrain = x->r->ntrain, .nval = x->r->nval,
                          .val0 = old ? old->val0 : x->r->val0,
                          .run_name = j->run_name && *j->run_name ? (char *)j->run_name : NULL};
    for (int i = 0; i < j->nops; i++) s->op[i] = (char *)j->ops[i];
    for (int i = 0; i < j->ntext; i++) s->text[i] = abs_path(x, j->text[i]);
    s->val_text = abs_path(x, j->val_text);
    s->tokenizer = x->r->bytes ? NULL : abs_path(x, j->tokenizer ? j->tokenizer : j->init);
    s->init = old ? old->init : abs_path(x, j->init);
    memcpy(s->data_hash, x->r->data_hash, sizeof s->data_hash);
}

/* The checkpoint of the model as it is after `step` steps. */
static int checkpoint(run_ctx *x, int step)
{
    const qs_train_job *j = x->j;
    const char *src = j->tokenizer ? j->tokenizer : j->init;
    char tj[4200];
    snprintf(tj, sizeof tj, "%.4000s/tokenizer.json", src ? src : ".");
    const qs_llm_file *tok = x->tok;
    qs_llm_save_tok st = {tok && access(tj, F_OK) == 0 ? src : NULL, !tok, tok ? tok->v.bos : -1, tok ? tok->v.eos : -1};
    if (!x->filled) fill_state(x);   /* at the first checkpoint: val0 is measured and the run named by then */
    x->filled = 1;
    x->st.step = step;
    x->st.adam_t = x->opt.t;
    x->st.sr_calls = x->calls;
    return qs_train_ckpt_write(j->out, &x->r->m, &st, &x->opt, &x->st, x->e);
}

/* After every step: the job's callback (which stores the step), the count of completed steps, the
** checkpoint when one is due (so a checkpoint's step is never beyond the stored steps), and the stop
** flag (a stopped run's last step gets its checkpoint too). */
static int on_step(void *ctx, const qs_train_rec *rec)
{
    run_ctx *x = ctx;
    const qs_train_job *j = x->j;
    int stop = j->stop && *j->stop && rec->step < j->t.steps;
    if (j->step && j->step(j->ctx, rec)) return 1;
    x->r->steps_done = rec->step;
    if (j->out && (rec->step == j->t.steps || stop || (j->ckpt_every > 0 && rec->step % j->ckpt_every == 0)) &&
        checkpoint(x, rec->step))
        return 1;
    if (stop) { x->stopping = 1; return 1; }
    return 0;
}

/* Texts too short for one window of ctx+1 tokens are bad input (exit 2), named. */
static int check_lengths(const qs_train_job *j, qs_train_result *r, qs_err *e)
{
    size_t need = (size_t)j->t.T + 1;
    r->bad_input = 1;
    if (r->ntrain < need)
        return qs_fail(e, "%s%s: training text has %zu tokens, fewer than ctx+1 = %zu (one window)", j->text[0],
                       j->ntext > 1 ? " (and the other --text files)" : "", r->ntrain, need);
    if (r->nval < need)
        return qs_fail(e, "%s: validation text has %zu tokens, fewer than ctx+1 = %zu (one window)", j->val_text,
                       r->nval, need);
    r->bad_input = 0;
    return 0;
}

/* The optimizer: zeroed moments, or the checkpoint's; the options of the run from where it stands. */
static int prepare(run_ctx *x, qs_train_opts *t, qs_err *e)
{
    const qs_train_job *j = x->j;
    const qs_train_state *s = j->resume_state;
    if (qs_adamw_new(&x->opt, &x->r->m, e)) return -1;
    *t = j->t;
    t->opt = &x->opt;
    t->sr_calls_out = &x->calls;
    if (!s) return 0;
    if (strcmp(s->data_hash, x->r->data_hash))
        return qs_fail(e, "%s/%s: the texts' tokens are not the checkpoint's (data hash %s, now %s): a text changed",
                       j->resume, QS_TRAIN_STATE_FILE, s->data_hash, x->r->data_hash);
    if (qs_train_ckpt_read_opt(j->resume, &x->r->m, &x->opt, e)) return -1;
    if (s->rope_adjacent && qs_train_ckpt_adjacent(&x->r->m, &x->opt, e)) return -1;
    x->opt.t = s->adam_t;
    t->start_step = s->step;
    t->sr_calls = s->sr_calls;
    x->r->start_step = s->step;
    return 0;
}

int qs_train_job_run(const qs_train_job *j, qs_train_result *r, qs_err *e)
{
    memset(r, 0, sizeof *r);
    r->val0 = NAN;
    r->grad_loss = NAN;
    qs_llm_file tokf, initf;
    memset(&tokf, 0, sizeof tokf);
    memset(&initf, 0, sizeof initf);
    int32_t *train = NULL, *val = NULL;
    run_ctx x = {.j = j, .r = r, .e = e};
    int rc = -1;
    if (j->ntext < 1 || j->ntext > QS_TRAIN_MAX_TEXTS) { qs_fail(e, "1 to %d training texts, not %d", QS_TRAIN_MAX_TEXTS, j->ntext); goto out; }
    if (j->tokenizer) {
        size_t tl = strlen(j->tokenizer);   /* a .gguf: its vocabulary alone (no weights read) */
        int gg = tl > 5 && !strcmp(j->tokenizer + tl - 5, ".gguf");
        if (gg ? qs_llm_load_gguf_vocab(j->tokenizer, &tokf, e) : qs_llm_load(j->tokenizer, &tokf, e)) goto out;
        if (tokf.v.n <= 0) { qs_fail(e, "%s: the model has no vocabulary", j->tokenizer); goto out; }
        if (gg) tokf.m.c.vocab = tokf.v.n;   /* a GGUF's vocabulary has as many tokens as token_embd rows */
        x.tok = &tokf;
    }
    if (make_model(j, x.tok ? tokf.m.c.vocab : 256, &initf, &r->m, &r->bad_input, e)) goto out;
    const qs_llm_cfg *c = &r->m.c;
    if (j->init && !x.tok && c->vocab != 256) {
        if (initf.v.n <= 0) { qs_fail(e, "%s: vocabulary of %d but no tokenizer (give --tokenizer)", j->init, c->vocab); goto out; }
        x.tok = &initf;
    }
    if (x.tok == &tokf && tokf.m.c.vocab != c->vocab) {
        qs_fail(e, "%s: vocabulary of %d tokens, the model has %d", j->tokenizer, tokf.m.c.vocab, c->vocab);
        goto out;
    }
    r->bytes = !x.tok;
    if (j->t.T > c->ctx) {
        r->bad_input = 1;
        qs_fail(e, "--ctx %d exceeds the context %d of %s", j->t.T, c->ctx, j->resume ? j->resume : j->init);
        goto out;
    }
    if (j->model_check && j->model_check(j->ctx, c, e)) goto out;
    if ((j->init || j->resume) && check_memory(c, r->m.output == r->m.tok_embd, r->m.bias_arena != NULL, &j->t, e)) goto out;
    /* the lengths as the loop checks them, but before the ready hook stores anything */
    if (read_tokens(j->text, j->ntext, x.tok, &train, &r->ntrain, e) ||
        read_tokens(&j->val_text, 1, x.tok, &val, &r->nval, e) || check_lengths(j, r, e))
        goto out;
    qs_train_data_hash(train, r->ntrain, val, r->nval, r->data_hash);
    qs_train_opts t;
    if (prepare(&x, &t, e)) goto out;
    if ((j->grad.grad_out || j->grad.batch_out || j->grad.operand_out) &&
        qs_train_grad_run(&r->m, train, r->ntrain, &j->t, &j->grad, &r->grad_loss, e))
        goto out;
    if (!(r->rec = calloc(j->t.steps ? (size_t)j->t.steps : 1, sizeof *r->rec))) {   /* --steps 0: no records */
        qs_fail(e, "out of memory");
        goto out;
    }
    if (j->start) j->start(j->ctx, c, r->ntrain, r->nval);
    if (j->ready) {
        qs_train_data d = {&r->m, r->ntrain, r->nval, r->bytes, {0}};
        memcpy(d.hash, r->data_hash, sizeof d.hash);
        if (j->ready(j->ctx, &d, e)) goto out;
    }
    r->steps_done = t.start_step;
    if (j->resume_state) r->val0 = j->resume_state->val0;   /* the run's, measured before its step 1 */
    if (qs_train_run(&r->m, train, r->ntrain, val, r->nval, &t, &r->val0, r->rec, on_step, &x, e) && !x.stopping)
        goto out;
    r->stopped = x.stopping;
    if (j->out && !j->t.steps && checkpoint(&x, 0)) goto out;   /* --steps 0: the model as it is */
    rc = 0;
out:
    for (int i = 0; i < x.nabs; i++) free(x.abs[i]);
    qs_adamw_free(&x.opt);
    free(train);
    free(val);
    qs_llm_file_free(&tokf);
    qs_llm_file_free(&initf);
    if (rc) {   /* the caller still learns how far the run came */
        double v0 = r->val0;
        int done = r->steps_done, bad = r->bad_input, start = r->start_step;
        qs_train_result_free(r);
        r->val0 = v0;
        r->steps_done = done;
        r->bad_input = bad;
        r->start_step = start;
    }
    return rc;
}

void qs_train_result_free(qs_train_result *r)
{
    qs_llm_free(&r->m);
    free(r->rec);
    memset(r, 0, sizeof *r);
}
