/*
** Kernel experiments (`qscope msd`, `qscope attn`, `qscope resq`): generate inputs, run the kernels of
** kernels/msd.h, kernels/attn.h, kernels/resq.h, measure errors, and return the result as JSON.
** Results are stored as `result` rows (analysis/results.h) of kind "msd" / "attn" / "resq", keyed by
** the xxh3-128 of the canonical input-spec JSON (generator, shape, seed) — or a stored tensor's content
** hash — with the canonical options JSON.  Every data JSON carries the plot layout of docs/plots.md:
** {"ylabel": .., "series": [{"name": .., "x": [..], "y": [..]}], ...}.
*/
#ifndef QS_KERNEL_EXP_H
#define QS_KERNEL_EXP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../datasets/gen.h"
#include "../kernels/attn.h"
#include "../kernels/format.h"
#include "../kernels/resq.h"
#include "../store/db.h"

typedef struct qs_kx_msd {
    size_t M, K, N;
    qs_gen_kind dist;        /* activations */
    uint64_t seed;
    int outliers;            /* extra outlier input channels (xoutlier_mag), 0 = none */
    double outlier_mag;
    size_t bits_samples;     /* values per distribution for the effective-bit table */
    const qs_format *mx;     /* MX format of the two-pass decomposition (mxfp4) */
    qs_qopts mx_o1, mx_ores, mx_w;
    int mx_shift;            /* -1: residual uses its own scale; else fixed X1/2^shift */
    const float *x_in;       /* optional stored activations (MxK); NULL = generated */
} qs_kx_msd;

typedef struct qs_kx_attn {
    qs_attn_shape s;
    size_t *Ls;              /* sequence lengths to sweep (Lk; Lq = Lk unless lq_fixed) */
    size_t nL;
    size_t lq_fixed;         /* decode: Lq (e.g. 1); 0 = Lq = Lk */
    int mla;                 /* V = the first dv columns of K */
    qs_attn_cfg cfg;
    qs_gen_kind dist;
    uint64_t seed;
    double qscale;           /* multiplies Q (sharper softmax) */
    const qs_format *kv;     /* KV cache format (NULL = none) */
    qs_qopts kv_o;
    const qs_format *mx;     /* MX attention format (mxfp4) */
    double uos_qmax;
    int msd_passes;
    const float *Qin, *Kin, *Vin;   /* stored inputs (one length); NULL = generated (Vin NULL with mla) */
} qs_kx_attn;

typedef struct qs_kx_resq {
    size_t m, d, n;
    uint64_t seed;
    int outliers;
    double outlier_min, outlier_max;
    const char *formats;     /* comma list */
    size_t bh, bw;
    const float *x_in;       /* optional stored activations (mxd); NULL = generated */
} qs_kx_resq;

/* Canonical JSON text (sorted keys, compact); caller frees. */
char *qs_kx_canon(json_t *j);
/* xxh3-128 of a text as 32 hex digits. */
void qs_kx_hash_text(const char *s, char out[33]);

json_t *qs_kx_msd_run(const qs_kx_msd *o, json_t *opts, qs_err *e);
json_t *qs_kx_attn_run(const qs_kx_attn *o, json_t *opts, qs_err *e);
json_t *qs_kx_resq_run(const qs_kx_resq *o, json_t *opts, qs_err *e);

/* Store one result in its own transaction (rolled back on failure). */
int qs_kx_store(qs_db *db, const char *hash, const char *kind, const char *format, json_t *opts, json_t *data,
                int64_t *id, qs_err *e);

/* What a stored kernel result is, from its kind, options and data JSON texts (either may be NULL or
** malformed): "msd: 5 recipes x 3 passes, GEMM 16x4096x4096 gaussian", "attn L=256..2048, KV fp8_e4m3,
** 15 kernels", "resq hif4,mxfp4,nvfp4, 256x2048 -> 1024" (analysis/kernel_label.c).  A stored result's
** `format` column names one format of the many an experiment covers; this names the experiment. */
void qs_kx_label(const char *kind, const char *options, const char *data, char *buf, size_t cap);

/* A stored tensor as a rows x cols float matrix for a kernel experiment (at most max_cols columns
** and 2^26 values, every element finite); hash = its content hash.  cmd names the command in
** messages. */
int qs_kx_load_tensor(qs_db *db, const char *cmd, const char *name, uint64_t max_cols, uint64_t *rows, uint64_t *cols,
                      char hash[33], float **x, qs_err *e);

#endif
