/*
** Importance matrices from the forward pass, and weights rounded with them (llm_imatrix.h).
*/
#include "llm_imatrix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/blas_threads.h"
#include "../kernels/format_imatrix.h"
#include "../kernels/qs_stop.h"
#include "../store/text_escape.h"

const char *const qs_llm_mat_names[QS_LLM_NMAT] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                                   "ffn_down"};

/* Per layer, the four linear inputs: sums of squares per column (double) and the rows seen. */
typedef struct im_acc {
    int nl;
    size_t cols[QS_SITE_LINEAR_COUNT];
    double *sum[QS_SITE_LINEAR_COUNT];   /* [nl][cols] */
    int64_t rows[QS_SITE_LINEAR_COUNT];  /* per layer the same: counted at layer 0 */
} im_acc;

static void add_sq(double *acc, const float *x, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;
        for (int j = 0; j < cols; j++) acc[j] += (double)xr[j] * xr[j];
    }
}

static void tap(void *ctx, int layer, qs_llm_site site, const float *x, int rows, int cols)
{
    im_acc *a = ctx;
    if ((int)site >= QS_SITE_LINEAR_COUNT || layer < 0 || layer >= a->nl) return;
    add_sq(a->sum[site] + (size_t)layer * a->cols[site], x, rows, cols);
    if (layer == 0) a->rows[site] += rows;
}

static int entry(qs_imatrix *out, const char *name, const double *s, size_t n, int64_t count, qs_err *e)
{
    qs_imat_entry *en = &out->e[out->n];
    en->name = strdup(name);
    en->sums = malloc(n * sizeof *en->sums);
    en->counts = malloc(sizeof *en->counts);
    out->n++;
    if (!en->name || !en->sums || !en->counts) return qs_fail(e, "out of memory");
    en->ne0 = (int64_t)n;
    en->nmat = 1;
    en->counts[0] = (double)count;
    for (size_t j = 0; j < n; j++) {
        en->sums[j] = (float)s[j];
        if (!isfinite(en->sums[j])) return qs_fail(e, "non-finite activation sum in %s (column %zu)", name, j);
    }
    return 0;
}

/* The collected sums as entries: per layer Q, K, V from attn_in, ..., ffn_down from ffn_down_in. */
static int build(const im_acc *a, const double *outsum, size_t dim, int64_t outrows, qs_imatrix *out, qs_err *e)
{
    static const int site_of[QS_LLM_NMAT] = {QS_SITE_ATTN_IN, QS_SITE_ATTN_IN, QS_SITE_ATTN_IN, QS_SITE_ATTN_OUT,
                                             QS_SITE_FFN_IN, QS_SITE_FFN_IN, QS_SITE_FFN_DOWN_IN};
    if (!(out->e = calloc((size_t)a->nl * QS_LLM_NMAT + 1, sizeof *out->e))) return qs_fail(e, "out of memory");
    char name[64];
    for (int l = 0; l < a->nl; l++)
        for (int k = 0; k < QS_LLM_NMAT; k++) {
            int s = site_of[k];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, qs_llm_mat_names[k]);
            if (entry(out, name, a->sum[s] + (size_t)l * a->cols[s], a->cols[s], a->rows[s], e)) return -1;
        }
    if (outsum && entry(out, "output.weight", outsum, dim, outrows, e)) return -1;
    qs_imatrix_sort(out);
    return 0;
}

int qs_llm_imatrix_compute(const qs_llm_model *m, const int32_t *ids, const qs_eval_setup *su, int process_output,
                           const char *dataset, qs_imat_progress prog, void *pctx, qs_imatrix *out, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    const int ctx = su->ctx;
    memset(out, 0, sizeof *out);
    if (c->n_expert)   /* llama.cpp keeps one entry per expert (ffn_*_exps): not written here */
        return qs_fail(e, "%s: importance matrices of mixture-of-experts layers are not supported", c->arch[0] ? c->arch : "model");
    im_acc a = {.nl = c->n_layer, .cols = {(size_t)c->dim, qs_llm_q_dim(c), (size_t)c->dim, (size_t)c->ffn}};
    int want_out = process_output && m->output != m->tok_embd;
    double *outsum = want_out ? calloc((size_t)c->dim, sizeof *outsum) : NULL;
    int32_t *in = malloc((size_t)ctx * sizeof *in);
    float *hidden = malloc((size_t)ctx * (size_t)c->dim * sizeof *hidden);
    qs_llm_state *st = qs_llm_state_new(c, 1, ctx, ctx, e);
    int rc = -1;
    for (int s = 0; s < QS_SITE_LINEAR_COUNT; s++)
        if (!(a.sum[s] = calloc((size_t)a.nl * a.cols[s], sizeof(double)))) goto done;
    if (!in || !hidden || (want_out && !outsum)) { qs_fail(e, "out of memory"); goto done; }
    if (!st) goto done;
    int64_t outrows = 0;
    for (int k = 0; k < su->nchunks; k++) {
        if (qs_stop_requested()) { qs_fail(e, "interrupted"); goto done; }
        qs_eval_chunk_input(su, ids, k, in);
        if (qs_llm_forward(m, NULL, st, in, 1, ctx, 0, hidden, tap, &a, e)) goto done;
        if (outsum) { add_sq(outsum, hidden, ctx, c->dim); outrows += ctx; }
        if (prog) prog(pctx, k + 1, su->nchunks);
    }
    if (build(&a, outsum, (size_t)c->dim, outrows, out, e)) goto done;
    out->chunk_count = su->nchunks;
    out->chunk_size = ctx;
    if (dataset) {
        if (!(out->datasets = malloc(sizeof *out->datasets)) || !(out->datasets[0] = strdup(dataset))) {
            qs_fail(e, "out of memory");
            goto done;
        }
        out->ndatasets = 1;
    }
    rc = 0;
done:
    if (rc && !e->msg[0]) qs_fail(e, "out of memory");
    if (rc) qs_imatrix_free(out);
    for (int s = 0; s < QS_SITE_LINEAR_COUNT; s++) free(a.sum[s]);
    qs_llm_state_free(st);
    free(outsum); free(in); free(hidden);
    return rc;
}

/* One matrix: its entry's importances, or none when the file lacks it. */
static int quant_one(float *p, size_t rows, size_t cols, const char *name, const qs_apply *w, const qs_imatrix *im,
                     qs_imat_use *u, qs_err *e)
{
    const qs_imat_entry *en = qs_imatrix_find(im, name);
    float *qw = NULL;
    if (en) {
        if ((size_t)(en->ne0 * en->nmat) != cols)
            return qs_fail(e, "imatrix size %lld is different from tensor size %zu for %s (llama-quantize refuses it too)",
                           (long long)(en->ne0 * en->nmat), cols, name);
        if (qs_imatrix_weights(im, en, &qw, e)) return -1;
        u->used++;
    } else if (!u->missing++) {
        snprintf(u->first_missing, sizeof u->first_missing, "%s", name);
    }
    int rc = qs_format_fakeq_imatrix(w, p, rows, cols, qw, qs_blas_threads(), e);
    if (rc) qs_err_prefix(e, name);
    free(qw);
    return rc;
}

int qs_llm_quantize_weights_imatrix(qs_llm_model *m, const qs_apply *w, const qs_imatrix *im, qs_imat_use *u, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    size_t d = (size_t)c->dim, kv = (size_t)c->n_kv_head * c->head_dim, f = (size_t)c->ffn, qd = qs_llm_q_dim(c);
    memset(u, 0, sizeof *u);
    if (c->n_expert)
        return qs_fail(e, "%s: importance matrices of mixture-of-experts layers are not supported", c->arch[0] ? c->arch : "model");
    if (!qs_format_takes_imatrix(w->f)) return qs_fail(e, "format %s takes no importance matrix", w->f->name);
    char name[64];
    for (int l = 0; l < c->n_layer; l++) {
        qs_llm_layer *L = &m->L[l];
        float *mat[QS_LLM_NMAT] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
        const size_t rows[QS_LLM_NMAT] = {qd, kv, kv, d, f, f, d}, cols[QS_LLM_NMAT] = {d, d, d, qd, d, d, f};
        for (int k = 0; k < QS_LLM_NMAT; k++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, qs_llm_mat_names[k]);
            if (quant_one(mat[k], rows[k], cols[k], name, w, im, u, e)) return -1;
        }
    }
    return quant_one(m->output, (size_t)c->vocab, d, m->output == m->tok_embd ? "token_embd.weight" : "output.weight", w,
                     im, u, e);
}
