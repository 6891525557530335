/*
** The per-token statistics of a block of scored rows on the task pool (one row per task).  Each row's
** arithmetic is the serial function's (qs_ref_row_make / qs_tok_stat_make), rows write disjoint
** outputs, so the results are bit-identical to the serial loop for any thread count.  Serial, these
** exponentials and log-sum-exps over the vocabulary were ~4% of an `llm eval`'s samples with the other
** core idle (BENCHMARKS.md).
*/
#include <cblas.h>

#include "attn_internal.h"
#include "llm_stats.h"

typedef struct {
    const float *l;          /* rows x V logits */
    int V;
    const int32_t *tok;      /* next token per row */
    float *p_out;            /* reference rows: probabilities written, rows x V */
    qs_ref_row *r_out;
    const float *p_ref;      /* configuration rows: the reference's, read */
    const qs_ref_row *r_ref;
    qs_tok_stat *t;          /* NULL: reference rows */
} rows_job;

static void rows_task(void *ctx, size_t i, void *scratch)
{
    (void)scratch;
    const rows_job *j = ctx;
    const float *l = j->l + i * (size_t)j->V;
    if (!j->t) qs_ref_row_make(l, j->V, j->tok[i], j->p_out + i * (size_t)j->V, &j->r_out[i]);
    else qs_tok_stat_make(l, j->V, j->tok[i], j->p_ref + i * (size_t)j->V, &j->r_ref[i], &j->t[i]);
}

static int run_rows(rows_job *j, int rows, qs_err *e)
{
    int th = openblas_get_num_threads();
    th = th < 1 ? 1 : th > 64 ? 64 : th;
    if (th < 2 || rows < 2) {
        for (int i = 0; i < rows; i++) rows_task(j, (size_t)i, NULL);
        return 0;
    }
    return qs_attn_pool(th, (size_t)rows, 0, rows_task, j, e);
}

int qs_ref_rows_make(const float *l, int rows, int V, const int32_t *tok, float *p, qs_ref_row *r, qs_err *e)
{
    rows_job j = {l, V, tok, p, r, NULL, NULL, NULL};
    return run_rows(&j, rows, e);
}

int qs_tok_stats_make(const float *lq, int rows, int V, const int32_t *tok, const float *p_ref, const qs_ref_row *r,
                      qs_tok_stat *t, qs_err *e)
{
    rows_job j = {lq, V, tok, NULL, NULL, p_ref, r, t};
    return run_rows(&j, rows, e);
}
