/*
** `qscope train --grad-out/--batch-out/--operand-out` (see train_grad.h).
*/
#include "train_grad.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../kernels/llm_train.h"
#include "../store/llm_save_hf.h"
#include "../store/npy_write.h"

/* The operands of layer 0's Q projection, copied as the tap sees them (first sight of each slot). */
typedef struct tap_ctx {
    const void *w, *gw;                /* the model's and the gradients' wq of layer 0 */
    float *src[QS_OP_COUNT], *q[QS_OP_COUNT];
    size_t rows[QS_OP_COUNT], cols[QS_OP_COUNT];
    int oom;
} tap_ctx;

static void tap(void *ctx, const void *key, int op, const float *src, const float *q, size_t rows, size_t cols)
{
    tap_ctx *t = ctx;
    int wgrad = op == QS_OP_WGRAD_DY || op == QS_OP_WGRAD_X;
    if (key != (wgrad ? t->gw : t->w) || op < 0 || op >= QS_OP_COUNT || t->src[op]) return;
    size_t n = rows * cols;
    t->src[op] = malloc(n * sizeof(float));
    t->q[op] = malloc(n * sizeof(float));
    if (!t->src[op] || !t->q[op]) { t->oom = 1; return; }
    memcpy(t->src[op], src, n * sizeof(float));
    memcpy(t->q[op], q, n * sizeof(float));
    t->rows[op] = rows;
    t->cols[op] = cols;
}

static void tap_free(tap_ctx *t)
{
    for (int i = 0; i < QS_OP_COUNT; i++) { free(t->src[i]); free(t->q[i]); }
}

typedef struct { const float *p; } arr;

static int fill(void *ctx, uint64_t start, size_t n, float *out)
{
    memcpy(out, ((const arr *)ctx)->p + start, n * sizeof(float));
    return 0;
}

/* DIR/OP.src.npy and DIR/OP.q.npy of every operand the tap saw. */
static int write_operands(const char *dir, const tap_ctx *t, qs_err *e)
{
    if (mkdir(dir, 0777) && errno != EEXIST) return qs_fail(e, "%s: cannot create: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) return qs_fail(e, "%s: not a directory", dir);
    int seen = 0;
    for (int op = 0; op < QS_OP_COUNT; op++) {
        if (!t->src[op]) continue;
        seen++;
        uint64_t shape[2] = {t->rows[op], t->cols[op]};
        for (int k = 0; k < 2; k++) {
            char p[4200];
            snprintf(p, sizeof p, "%.4000s/%s.%s.npy", dir, qs_llm_operand_name(op), k ? "q" : "src");
            arr a = {k ? t->q[op] : t->src[op]};
            if (qs_npy_write_f32(p, shape, 2, fill, &a, e)) return -1;
        }
    }
    return seen ? 0 : qs_fail(e, "%s: the recipe quantizes no GEMM of layer 0's wq", dir);
}

/* ids (rows x cols) as a format 1.0 .npy of '<i4': numpy's header for '<f4' of the same shape, whose
** length does not depend on the type, with the type changed. */
static int write_ids(const char *path, const int32_t *ids, size_t rows, size_t cols, qs_err *e)
{
    uint64_t shape[2] = {rows, cols};
    char h[256];
    size_t hl = qs_npy_header_f32(shape, 2, h, sizeof h);
    char *f = hl > 10 ? memmem(h + 10, hl - 10, "'<f4'", 5) : NULL;   /* the magic holds NUL bytes */
    if (!f) return qs_fail(e, "%s: cannot make the .npy header", path);
    f[2] = 'i';
    FILE *fp = fopen(path, "wb");
    if (!fp) return qs_fail(e, "%s: cannot create: %s", path, strerror(errno));
    int bad = fwrite(h, 1, hl, fp) != hl || fwrite(ids, sizeof *ids, rows * cols, fp) != rows * cols;
    if (fclose(fp) || bad) {
        remove(path);
        return qs_fail(e, "%s: write failed", path);
    }
    return 0;
}

int qs_train_grad_run(const qs_llm_model *m, const int32_t *train, size_t ntrain, const qs_train_opts *o,
                      const qs_train_grad_req *q, double *loss, qs_err *e)
{
    if (ntrain < (size_t)o->T + 1)
        return qs_fail(e, "training text has %zu tokens, fewer than ctx+1 = %d", ntrain, o->T + 1);
    if (q->operand_out && !o->recipe) return qs_fail(e, "--operand-out needs a recipe (--recipe or --op)");
    int rc = -1;
    qs_llm_grads g;
    memset(&g, 0, sizeof g);
    tap_ctx tc;
    memset(&tc, 0, sizeof tc);
    size_t n = (size_t)o->batch * ((size_t)o->T + 1);
    int32_t *ids = malloc(n * sizeof *ids);
    qs_llm_train_state *s = qs_llm_train_state_new(&m->c, o->batch, o->T, e);
    if (!s) goto out;
    if (!ids) { qs_fail(e, "out of memory"); goto out; }
    if (qs_llm_grads_new(&g, m, e) ||
        (o->recipe && (o->recipes ? qs_llm_train_state_set_recipes(s, o->recipes, o->nrecipes, e)
                                  : qs_llm_train_state_set_recipe(s, o->recipe, e))))
        goto out;
    if (q->operand_out) {
        tc.w = m->L[0].wq;
        tc.gw = g.L[0].wq;
        qs_llm_train_state_set_tap(s, tap, &tc);
    }
    qs_train_batch(train, ntrain, o, 0, ids);
    if (qs_llm_loss_grad(m, s, ids, o->batch, o->T, loss, &g, e)) goto out;
    if (tc.oom) { qs_fail(e, "out of memory for the operands of --operand-out"); goto out; }
    if (q->grad_out && qs_llm_save_safetensors(q->grad_out, &g, e)) goto out;
    if (q->batch_out && write_ids(q->batch_out, ids, (size_t)o->batch, (size_t)o->T + 1, e)) goto out;
    if (q->operand_out && write_operands(q->operand_out, &tc, e)) goto out;
    rc = 0;
out:
    tap_free(&tc);
    qs_llm_train_state_free(s);
    qs_llm_grads_free(&g);
    free(ids);
    return rc;
}
