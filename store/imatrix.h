/*
** llama.cpp's importance matrix (tools/imatrix): per weight tensor, by its GGUF name, the sum over
** tokens of the squared input activation of each input column, with the token count.  Two files:
**   - the GGUF format (llama-imatrix's default): general.type "imatrix", imatrix.datasets (strings),
**     imatrix.chunk_count and imatrix.chunk_size (u32), and per entry two F32 tensors NAME.in_sum2
**     [ne0, nmat] (the raw sums) and NAME.counts [1, nmat] (tokens per matrix);
**   - the legacy .dat: int32 n_entries, per entry int32 name length, the name, int32 ncall, int32 nval,
**     nval floats (sum / count * ncall); then optionally int32 chunk count, int32 length and the dataset.
** A hostile file is refused with one line naming it; nothing is allocated beyond what the file holds.
** Reading (imatrix.c: the legacy format, lookups; imatrix_gguf.c: the GGUF format) follows llama.cpp's
** common/imatrix-loader.cpp, and the importances a quantizer uses follow llama-quantize's load_imatrix.
*/
#ifndef QS_IMATRIX_H
#define QS_IMATRIX_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/qs_err.h"

typedef struct qs_imat_entry {
    char *name;               /* the weight's GGUF name, "blk.0.attn_q.weight" */
    int64_t ne0, nmat;        /* columns (input channels) and matrices (experts; 1 for a dense weight) */
    float *sums;              /* [nmat][ne0]: raw sums of squares (GGUF), or sum / count * ncall (.dat) */
    double *counts;           /* [nmat]: tokens (GGUF), or {ncall} (.dat, nmat 1) */
} qs_imat_entry;

typedef struct qs_imatrix {
    int legacy;               /* 1: values as a .dat stores them */
    int n;
    qs_imat_entry *e;         /* sorted by name */
    int ndatasets;
    char **datasets;
    int64_t chunk_count, chunk_size;   /* chunk_size 0 when unknown (.dat) */
    int has_meta;             /* GGUF: the datasets, chunk_count and chunk_size keys are all there */
} qs_imatrix;

/* A file image: GGUF when it starts with "GGUF", else the legacy layout.  -1 with "what (at byte N)". */
int qs_imatrix_parse(const uint8_t *b, size_t len, qs_imatrix *m, qs_err *e);
int qs_imatrix_parse_gguf(const uint8_t *b, size_t len, qs_imatrix *m, qs_err *e);
/* The file at path; errors name it.  hash (optional, 33 bytes): the file's xxh3-128, hex. */
int qs_imatrix_read(const char *path, qs_imatrix *m, char *hash, qs_err *e);
void qs_imatrix_free(qs_imatrix *m);

/* The entry of a weight, or NULL. */
const qs_imat_entry *qs_imatrix_find(const qs_imatrix *m, const char *name);
/* The importances llama-quantize gives the quantizer for this entry (nmat * ne0 values): GGUF sums /
** count (1 where a count is 0); .dat sums / ncall (the sums as stored when ncall <= 0).  -1 when out
** of memory or a value is not finite (llama-quantize refuses such a file). */
int qs_imatrix_weights(const qs_imatrix *m, const qs_imat_entry *en, float **w, qs_err *e);

/* Sort the entries by name (what the writers and qs_imatrix_find expect; the readers sort). */
void qs_imatrix_sort(qs_imatrix *m);
/* Write raw sums and counts (legacy 0, as computed) as llama-imatrix does: the GGUF format, or the
** legacy .dat (ncall = ceil(max count / chunk_size), values sum / count * ncall, then the chunk count
** and the first dataset).  Errors name the file. */
int qs_imatrix_write_gguf(const char *path, const qs_imatrix *m, qs_err *e);
int qs_imatrix_write_dat(const char *path, const qs_imatrix *m, qs_err *e);

#endif
