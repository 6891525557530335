/*
** Mixture-of-experts FFN (see llm_moe.h): FP32 routing, then each expert's rows gathered into one
** product per matrix, so an expert's weights are read once per call whatever the number of its rows.
*/
#include "llm_moe.h"
#include "llm_gemm.h"
#include "llm_internal.h"
#include "llm_rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Top-k of one row of router logits: softmax in double over all experts, the k largest probabilities
** (the lower index first among equals), renormalised when asked. */
static void route_row(const float *logit, int E, int k, int norm, int *sel, float *wt)
{
    double mx = -INFINITY, z = 0;
    for (int i = 0; i < E; i++) if (logit[i] > mx) mx = logit[i];
    for (int i = 0; i < E; i++) z += exp((double)logit[i] - mx);
    double sum = 0, p[QS_LLM_MOE_MAX_USED];
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < E; i++) {
            int used = 0;
            for (int t = 0; t < j && !used; t++) used = sel[t] == i;
            if (!used && (best < 0 || logit[i] > logit[best])) best = i;
        }
        sel[j] = best;
        p[j] = exp((double)logit[best] - mx) / z;
        sum += p[j];
    }
    for (int j = 0; j < k; j++) wt[j] = (float)(norm ? p[j] / sum : p[j]);
}

/* One SwiGLU FFN over n rows: out[n][d] = down(round(silu(x G^T) * (x U^T))). h, u: [n][f]. */
static int swiglu_ffn(const float *x, int n, int d, int f, const float *G, const float *U, const float *D, float *h,
                      float *u, float *out, const qs_apply *a_fd, int scaled, qs_llm_resq resq, float *tmp, qs_err *e)
{
    const int th = qs_llm_threads();
    qs_llm_gemm_nt(h, x, G, n, d, f, th);
    qs_llm_gemm_nt(u, x, U, n, d, f, th);
    qs_swiglu_row(h, u, (size_t)n * f);
    if (a_fd && qs_llm_round_rows(a_fd, scaled, resq, h, n, f, tmp, e)) return -1;
    qs_llm_gemm_nt(out, h, D, n, f, d, th);
    return 0;
}

int qs_llm_moe_ffn(const qs_llm_cfg *c, const qs_llm_moe_w *w, float *x, int R, const qs_apply *a_fd, int scaled,
                   qs_llm_resq resq, qs_err *e)
{
    const int E = c->n_expert, K = c->n_expert_used, d = c->dim, F = c->ffn, S = c->ffn_shexp;
    const int wide = F > S ? F : S;
    const size_t Rs = (size_t)R;
    float *logit = malloc(Rs * E * sizeof(float)), *wt = malloc(Rs * K * sizeof(float));
    int *sel = malloc(Rs * K * sizeof(int)), *rows = malloc(Rs * sizeof(int));
    float *rw = malloc(Rs * sizeof(float)), *out = calloc(Rs * d, sizeof(float));
    float *xg = malloc(Rs * d * sizeof(float)), *y = malloc(Rs * d * sizeof(float));
    float *h = malloc(Rs * wide * sizeof(float)), *u = malloc(Rs * wide * sizeof(float));
    float *tmp = malloc(3 * (size_t)(wide > d ? wide : d) * sizeof(float));
    int rc = -1;
    if (!logit || !wt || !sel || !rows || !rw || !out || !xg || !y || !h || !u || !tmp) {
        qs_fail(e, "out of memory for the experts of %d rows", R);
        goto done;
    }
    qs_llm_gemm_nt(logit, x, w->router, R, d, E, qs_llm_threads());   /* FP32 router */
    for (int r = 0; r < R; r++)
        route_row(logit + (size_t)r * E, E, K, c->moe_norm_topk, sel + (size_t)r * K, wt + (size_t)r * K);
    for (int ex = 0; ex < E; ex++) {   /* the rows routed to expert ex, gathered */
        int n = 0;
        for (int r = 0; r < R; r++)
            for (int j = 0; j < K; j++)
                if (sel[(size_t)r * K + j] == ex) {
                    rows[n] = r;
                    rw[n] = wt[(size_t)r * K + j];
                    memcpy(xg + (size_t)n++ * d, x + (size_t)r * d, (size_t)d * sizeof(float));
                }
        if (!n) continue;
        const size_t fd = (size_t)F * d;
        if (swiglu_ffn(xg, n, d, F, w->gate + ex * fd, w->up + ex * fd, w->down + ex * fd, h, u, y, a_fd, scaled, resq,
                       tmp, e))
            goto done;
        for (int i = 0; i < n; i++) {
            float *o = out + (size_t)rows[i] * d;
            const float *yi = y + (size_t)i * d;
            for (int t = 0; t < d; t++) o[t] += rw[i] * yi[t];
        }
    }
    if (S) {   /* the shared expert, every row, gated by sigmoid(x . sh_inp) */
        if (swiglu_ffn(x, R, d, S, w->sh_gate, w->sh_up, w->sh_down, h, u, y, a_fd, scaled, resq, tmp, e)) goto done;
        for (int r = 0; r < R; r++) {
            const float *xr = x + (size_t)r * d, *yr = y + (size_t)r * d;
            double g = 0;
            for (int t = 0; t < d; t++) g += (double)xr[t] * w->sh_inp[t];
            float s = (float)(1.0 / (1.0 + exp(-g)));
            float *o = out + (size_t)r * d;
            for (int t = 0; t < d; t++) o[t] += s * yr[t];
        }
    }
    memcpy(x, out, Rs * d * sizeof(float));
    rc = 0;
done:
    free(logit); free(wt); free(sel); free(rows); free(rw); free(out); free(xg); free(y); free(h); free(u); free(tmp);
    return rc;
}

int qs_llm_moe_quantize(const qs_llm_cfg *c, qs_llm_moe_w *m, const qs_apply *w, int scaled, qs_err *e)
{
    const size_t d = (size_t)c->dim, f = (size_t)c->ffn, s = (size_t)c->ffn_shexp;
    for (int ex = 0; ex < c->n_expert; ex++)
        if (qs_llm_quant_matrix(w, scaled, m->gate + ex * f * d, f, d, e) ||
            qs_llm_quant_matrix(w, scaled, m->up + ex * f * d, f, d, e) ||
            qs_llm_quant_matrix(w, scaled, m->down + ex * f * d, d, f, e))
            return -1;
    if (s && (qs_llm_quant_matrix(w, scaled, m->sh_gate, s, d, e) || qs_llm_quant_matrix(w, scaled, m->sh_up, s, d, e) ||
              qs_llm_quant_matrix(w, scaled, m->sh_down, d, s, e)))
        return -1;
    return 0;
}
