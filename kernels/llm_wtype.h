/*
** Typed weights: a weight matrix left in its file's storage type (BF16, F16, F32 or a ggml block type:
** kernels/dtype.h), read where it lies (usually a file mapping), and widened to FP32 only a panel at a
** time inside the products (kernels/llm_pgemm.h packs a panel from it).  The widening is the storage
** type's own decoder (the one the FP32 loader uses), so a product over typed weights gives the same
** bits as over the FP32 copy: same values, same summation order.  This is how `llm eval --weights
** mapped` evaluates models larger than memory (docs/llm.md, "Models larger than memory").
**
** A layer's seven matrices are qs_llm_layer.tw[QS_WT_Q .. QS_WT_DOWN] (kernels/llm.h); the embedding
** and the output head are qs_llm_model.tw_embd / tw_out.  A matrix of a file mapping (`mapped`) has its
** pages dropped from the process after each product (madvise(MADV_DONTNEED): the page cache keeps
** them), so the resident set holds about one matrix of the file at a time, not the whole model.
*/
#ifndef QS_LLM_WTYPE_H
#define QS_LLM_WTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum qs_wt_role { QS_WT_Q = 0, QS_WT_K, QS_WT_V, QS_WT_O, QS_WT_GATE, QS_WT_UP, QS_WT_DOWN, QS_WT_NROLE } qs_wt_role;

typedef struct qs_wt {
    const uint8_t *p;         /* row r at p + r * row_bytes */
    size_t row_bytes;
    int dt;                   /* qs_dtype (kernels/dtype.h); cols a whole number of its blocks */
    int rows, cols;
    int mapped;               /* pages of a file mapping: released after each product */
} qs_wt;

/* Elements [k0, k0 + n) of row r as FP32 (the storage type's decoder; a block type decodes the blocks
** covering the range). */
void qs_wt_row(const qs_wt *t, int r, int k0, int n, float *out);
/* Rows [r0, r1), whole, into out[(r - r0) * cols]. */
void qs_wt_rows(const qs_wt *t, int r0, int r1, float *out);
/* The whole matrix widened into a new allocation (malloc), or NULL without memory. */
float *qs_wt_widen(const qs_wt *t);
/* n matrices of the same width, t[0] .. t[n-1], widened one below the other (malloc), or NULL. */
float *qs_wt_widen_cat(const qs_wt *t, int n);
/* Drop a mapped matrix's pages from the process (no-op for other memory). */
void qs_wt_release(const qs_wt *t);
/* Bytes of the matrix. */
static inline size_t qs_wt_bytes(const qs_wt *t) { return t->row_bytes * (size_t)t->rows; }

/* Peak resident set of this process in bytes (VmHWM of /proc/self/status), 0 if unknown; reset: start
** a new peak from the current resident set (/proc/self/clear_refs), 0 or -1. */
uint64_t qs_peak_rss(void);
int qs_peak_rss_reset(void);

#endif
