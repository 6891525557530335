/*
** Writing tensors into the store: sources, tensor rows and embedded chunks.
** All functions expect the caller to hold a transaction (the importer wraps each file in a
** SAVEPOINT so a bad file leaves the database exactly as it was).
*/
#ifndef QS_TENSOR_WRITE_H
#define QS_TENSOR_WRITE_H

#include "tensor.h"

/* Insert or update the source row for `path` and return its id. */
int qs_source_upsert(qs_db *db, const char *path, const char *kind, int64_t size, int64_t mtime_ns,
                     const char *meta_json, int64_t *id, qs_err *e);
/* Record the rest of a referenced file's identity (status-change time, inode, device; see
** qs_tensor_ref_check).  An upsert clears them, so a source without this call has none. */
int qs_source_set_identity(qs_db *db, int64_t id, int64_t ctime_ns, int64_t inode, int64_t dev, qs_err *e);

typedef struct qs_tensor_row {
    const char *name, *member, *hash, *metadata;
    int64_t source_id;
    qs_dtype dtype;
    int ndim;
    const uint64_t *shape;
    uint64_t numel, nbytes;
    int is_blob, fortran;
    qs_codec codec;
    uint64_t data_offset, comp_offset, comp_size, inflated_size;
} qs_tensor_row;

/* Existing tensor of that name, if any: *id = 0 when none.  hash/source_id/is_blob out. */
int qs_tensor_find(qs_db *db, const char *name, int64_t *id, char hash[33], int64_t *source_id,
                   int *is_blob, qs_err *e);

/* Insert (id == 0) or update the tensor row; returns the id in *id. */
int qs_tensor_put(qs_db *db, const qs_tensor_row *row, int64_t *id, qs_err *e);

/* Replace the embedded chunks of tensor `id` with the C-order bytes read from r. */
int qs_tensor_embed(qs_db *db, int64_t id, qs_treader *r, qs_err *e);

/* Remove the source's tensors whose ids are not in keep[0..nkeep); returns how many went. */
int qs_source_prune(qs_db *db, int64_t source_id, const int64_t *keep, size_t nkeep, int *removed, qs_err *e);

#endif
