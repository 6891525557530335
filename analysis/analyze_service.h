/*
** The "compute or reuse one analysis" service: tensor x format -> the stored "metrics", "hist" and
** (with blocks) "blocks" results of analysis/results.h, keyed by analyze_key.h.
**
** A computation is a value (qs_an_result) between reading and storing, so it can be made on one
** process and stored by another (an MPI rank computes, rank 0 stores: app/cli/par.h); packed, it is the
** bytes that travel.  Storing it writes exactly what computing and storing in one step writes.
*/
#ifndef QS_ANALYZE_SERVICE_H
#define QS_ANALYZE_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "analyze_key.h"
#include "metrics.h"
#include "../store/tensor.h"

/* One computed analysis as it is stored: the JSON texts and the per-block arrays, in storing order. */
typedef struct qs_an_result {
    char *metrics, *hist, *blocks;   /* blocks NULL without per-block arrays */
    int nblobs;
    struct { const char *name; void *data; size_t nbytes; } blob[6];
} qs_an_result;

/* The stored metrics JSON text of t under a (*metrics malloc'd; NULL when absent, or when blocks is
** asked and the stored result has no per-block arrays). */
int qs_analysis_lookup(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, char **metrics, qs_err *e);
/* Compute t under a (reading through db: embedded data, stored statistics; a read-only connection
** does).  vcache as in qs_analyze_one_cb.  prog may cancel (nothing is then returned). */
int qs_analysis_compute(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int threads,
                        int (*prog)(void *, uint64_t, uint64_t), void *prog_ctx, qs_hist *vcache, qs_an_result *r,
                        qs_err *e);
/* The stored form of a finished analysis of a rows x cols tensor (per-block arrays taken from an
** when blocks, else left there). */
int qs_an_result_of(qs_analysis *an, const qs_apply *a, int blocks, uint64_t rows, uint64_t cols, qs_an_result *r,
                    qs_err *e);
/* One tensor's analysis in parts, for a tensor too large for one process of a job: its bands
** (metrics.h, qs_analyze_part), the part of bands [b0, b1) as bytes (qs_an_part_save). */
int qs_analysis_nbands(const qs_tensor_rec *t, const qs_apply *a, uint64_t *nbands, qs_err *e);
int qs_analysis_compute_part(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int threads, uint64_t b0,
                             uint64_t b1, uint8_t **bytes, size_t *len, qs_err *e);
/* Store r as t's result under a, in one transaction (nothing of it on failure); _write inside the
** caller's transaction. */
int qs_analysis_write(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, const qs_an_result *r, qs_err *e);
int qs_analysis_store(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, const qs_an_result *r, qs_err *e);
void qs_an_result_free(qs_an_result *r);
/* r as bytes (malloc'd) and back; unpack checks every length against the buffer. */
int qs_an_result_pack(const qs_an_result *r, uint8_t **out, size_t *len, qs_err *e);
int qs_an_result_unpack(const uint8_t *b, size_t len, qs_an_result *r, qs_err *e);

/* Analyze tensor t under a, or reuse the stored result unless force: lookup, compute, store.
** *metrics_out (may be NULL) is the metrics JSON object (caller decrefs); *cached tells which.
** vcache (may be NULL) carries the tensor's value histogram from one format to the next of a sweep:
** empty (counts NULL) it is filled by the first analysis computed, then reused; the caller clears it
** (qs_value_cache_clear) between tensors.  prog: the engine's progress callback (may cancel:
** nothing is then stored). */
int qs_analyze_one_cb(qs_db *db, const qs_tensor_rec *t, const qs_apply *a, int blocks, int force, int threads,
                      int (*prog)(void *, uint64_t, uint64_t), void *prog_ctx, qs_hist *vcache, json_t **metrics_out,
                      int *cached, qs_err *e);
void qs_value_cache_clear(qs_hist *vcache);

#endif
