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

/* The model to train: --init, or a new one of the job's shape (tied embeddings, rotate_half RoPE). */
static int make_model(const qs_train_job *j, int vocab, qs_llm_file *init, qs_llm_model *m, int *bad, qs_err *e)
{
    if (j->init) {
        if (qs_llm_load(j->init, init, e)) return -1;
        *m = init->m;
        memset(&init->m, 0, sizeof init->m);
        return 0;
    }
    int heads = j->heads ? j->heads : 4, dim = j->dim ? j->dim : 64;
    *bad = 1;   /* the shape's errors are the input's */
    if (dim % heads) return qs_fail(e, "--dim %d is not a multiple of --heads %d", dim, heads);
    qs_llm_cfg c = {.n_layer = j->layers ? j->layers : 2, .dim = dim, .n_head = heads,
                    .n_kv_head = j->kv_heads ? j->kv_heads : heads, .head_dim = dim / heads,
                    .ffn = j->ffn ? j->ffn : 4 * dim, .vocab = vocab, .ctx = j->t.T, .rope_base = 10000.0f,
                    .eps = 1e-5f, .rope_neox = 1};
    if (qs_llm_cfg_check(&c, e)) return -1;
    *bad = 0;
    if (check_memory(&c, 1, 0, &j->t, e) || qs_llm_alloc(m, &c, 1, e)) return -1;
    qs_train_init(m, j->t.seed);
    return 0;
}

/* tokenizer.json of the checkpoint: copied from a Hugging Face directory, written for bytes, else none. */
static int save(const qs_train_job *j, const qs_llm_model *m, const qs_llm_file *tok, qs_err *e)
{
    const char *src = j->tokenizer ? j->tokenizer : j->init;
    char tj[4200];
    snprintf(tj, sizeof tj, "%.4000s/tokenizer.json", src ? src : ".");
    qs_llm_save_tok st = {tok && access(tj, F_OK) == 0 ? src : NULL, !tok, tok ? tok->v.bos : -1, tok ? tok->v.eos : -1};
    return qs_llm_save_hf(j->out, m, &st, e);
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

/* The loop's step callback: the job's, then the count of completed steps and the stop flag. */
typedef struct step_ctx {
    const qs_train_job *j;
    qs_train_result *r;
    int stopping;
} step_ctx;

static int on_step(void *ctx, const qs_train_rec *rec)
{
    step_ctx *c = ctx;
    if (c->j->step && c->j->step(c->j->ctx, rec)) return 1;
    c->r->steps_done = rec->step;
    if (c->j->stop && *c->j->stop && rec->step < c->j->t.steps) { c->stopping = 1; return 1; }
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
    const qs_llm_file *tok = NULL;
    int rc = -1;
    if (j->tokenizer) {
        if (qs_llm_load(j->tokenizer, &tokf, e)) goto out;
        if (tokf.v.n <= 0) { qs_fail(e, "%s: the model has no vocabulary", j->tokenizer); goto out; }
        tok = &tokf;
    }
    if (make_model(j, tok ? tokf.m.c.vocab : 256, &initf, &r->m, &r->bad_input, e)) goto out;
    const qs_llm_cfg *c = &r->m.c;
    if (j->init && !tok && c->vocab != 256) {
        if (initf.v.n <= 0) { qs_fail(e, "%s: vocabulary of %d but no tokenizer (give --tokenizer)", j->init, c->vocab); goto out; }
        tok = &initf;
    }
    if (tok == &tokf && tokf.m.c.vocab != c->vocab) {
        qs_fail(e, "%s: vocabulary of %d tokens, the model has %d", j->tokenizer, tok->m.c.vocab, c->vocab);
        goto out;
    }
    r->bytes = !tok;
    if (j->t.T > c->ctx) {
        r->bad_input = 1;
        qs_fail(e, "--ctx %d exceeds the model's context %d", j->t.T, c->ctx);
        goto out;
    }
    if (j->init && check_memory(c, r->m.output == r->m.tok_embd, r->m.bias_arena != NULL, &j->t, e)) goto out;
    if (read_tokens(j->text, j->ntext, tok, &train, &r->ntrain, e) ||
        read_tokens(&j->val_text, 1, tok, &val, &r->nval, e))
        goto out;
    /* as the loop checks, but before the ready hook stores anything */
    r->bad_input = 1;
    if (r->ntrain < (size_t)j->t.T + 1) {
        qs_fail(e, "%s%s: training text has %zu tokens, fewer than ctx+1 = %d", j->text[0], j->ntext > 1 ? " ..." : "",
                r->ntrain, j->t.T + 1);
        goto out;
    }
    if (r->nval < (size_t)j->t.T + 1) {
        qs_fail(e, "%s: validation text has %zu tokens, fewer than ctx+1 = %d", j->val_text, r->nval, j->t.T + 1);
        goto out;
    }
    r->bad_input = 0;
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
        qs_train_data_hash(train, r->ntrain, val, r->nval, d.hash);
        if (j->ready(j->ctx, &d, e)) goto out;
    }
    step_ctx sc = {j, r, 0};
    if (qs_train_run(&r->m, train, r->ntrain, val, r->nval, &j->t, &r->val0, r->rec, on_step, &sc, e) && !sc.stopping)
        goto out;
    r->stopped = sc.stopping;
    if (j->out && save(j, &r->m, tok, e)) goto out;   /* a stopped run: the weights of its last completed step */
    rc = 0;
out:
    free(train);
    free(val);
    qs_llm_file_free(&tokf);
    qs_llm_file_free(&initf);
    if (rc) {   /* the caller still learns how far the run came */
        double v0 = r->val0;
        int done = r->steps_done, bad = r->bad_input;
        qs_train_result_free(r);
        r->val0 = v0;
        r->steps_done = done;
        r->bad_input = bad;
    }
    return rc;
}

void qs_train_result_free(qs_train_result *r)
{
    qs_llm_free(&r->m);
    free(r->rec);
    memset(r, 0, sizeof *r);
}
