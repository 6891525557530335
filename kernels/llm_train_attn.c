/* Training attention as per-(sequence, head) SGEMMs on the pool (see llm_train_attn.h). */
#include "llm_train_attn.h"
#include "attn_internal.h"
#include "blas_threads.h"
#include "llm_rows.h"
#include "pool.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

static void fwd_task(void *ctx, size_t task, int slot)
{
    (void)slot;
    const qs_lt_attn *a = ctx;
    const int T = a->T, hd = a->hd, qd = a->H * hd, kvd = a->KV * hd;
    const int b = (int)(task / (size_t)a->H), h = (int)(task % (size_t)a->H), kh = h / (a->H / a->KV);
    const size_t row0 = (size_t)b * T;
    const float *Q = a->q + row0 * qd + (size_t)h * hd, *K = a->k + row0 * kvd + (size_t)kh * hd;
    const float *V = a->v + row0 * kvd + (size_t)kh * hd;
    float *P = a->P + ((size_t)b * a->H + h) * T * T, *O = a->att + row0 * qd + (size_t)h * hd;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f / sqrtf((float)hd), Q, qd, K, kvd, 0.0f, P, T);
    for (int t = 0; t < T; t++) {
        float *p = P + (size_t)t * T;
        qs_softmax_row(p, (size_t)t + 1);
        memset(p + t + 1, 0, (size_t)(T - t - 1) * sizeof(float));
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1.0f, P, T, V, kvd, 0.0f, O, qd);
}

void qs_llm_train_attn_fwd(const qs_lt_attn *a, int threads)
{
    size_t n = (size_t)a->B * a->H;
    qs_blas_serial_begin();   /* each task calls BLAS: one BLAS thread per pool thread */
    qs_pool_for(qs_pool_width(threads, n), n, fwd_task, (void *)a);
    qs_blas_serial_end();
}

static void back_task(void *ctx, size_t task, void *scratch)
{
    const qs_lt_attn *a = ctx;
    const int T = a->T, hd = a->hd, qd = a->H * hd, kvd = a->KV * hd, grp = a->H / a->KV;
    const int b = (int)(task / (size_t)a->KV), kh = (int)(task % (size_t)a->KV);
    const float scale = 1.0f / sqrtf((float)hd);
    const size_t row0 = (size_t)b * T;
    const float *K = a->k + row0 * kvd + (size_t)kh * hd, *V = a->v + row0 * kvd + (size_t)kh * hd;
    float *dK = a->dk + row0 * kvd + (size_t)kh * hd, *dV = a->dv + row0 * kvd + (size_t)kh * hd, *dS = scratch;
    for (int g = 0; g < grp; g++) {
        const int h = kh * grp + g;
        const float beta = g ? 1.0f : 0.0f;   /* the group's first head sets dK, dV; the others add */
        const float *P = a->P + ((size_t)b * a->H + h) * T * T, *Q = a->q + row0 * qd + (size_t)h * hd;
        const float *dO = a->datt + row0 * qd + (size_t)h * hd;
        float *dQ = a->dq + row0 * qd + (size_t)h * hd;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f, dO, qd, V, kvd, 0.0f, dS, T);   /* dP */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, P, T, dO, qd, beta, dV, kvd);
        for (int t = 0; t < T; t++) {
            const float *p = P + (size_t)t * T;
            float *d = dS + (size_t)t * T;
            double pd = 0;
            for (int j = 0; j <= t; j++) pd += (double)p[j] * d[j];
            const float pdf = (float)pd;
            for (int j = 0; j <= t; j++) d[j] = p[j] * (d[j] - pdf) * scale;
            memset(d + t + 1, 0, (size_t)(T - t - 1) * sizeof(float));
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1.0f, dS, T, K, kvd, 0.0f, dQ, qd);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, dS, T, Q, qd, beta, dK, kvd);
    }
}

int qs_llm_train_attn_back(const qs_lt_attn *a, int threads, qs_err *e)
{
    return qs_attn_tasks(threads, (size_t)a->B * a->KV, (size_t)a->T * a->T * sizeof(float), back_task, (void *)a, e);
}
