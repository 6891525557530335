/*
** Tensors in the store: the record of one tensor, and a reader that gives its elements in
** logical C order, decoded to float32, whether the bytes live in a referenced file (read with
** pread in the caller's windows), in a deflated .npz member (inflated once into an unlinked
** temporary file, then read likewise) or in the database (chunked blobs).  Only column-major
** data, which every C-order window gathers from across the file, is mapped whole.
*/
#ifndef QS_TENSOR_H
#define QS_TENSOR_H

#include <stdint.h>

#include "container.h"
#include "db.h"

typedef struct qs_tensor_rec {
    int64_t  id;
    char    *name, *member, *hash, *metadata;  /* metadata may be NULL */
    qs_dtype dtype;
    int      ndim;
    uint64_t shape[QS_MAX_DIMS];
    uint64_t numel, nbytes;
    int      is_blob;               /* storage = 'blob' */
    int      fortran;
    qs_codec codec;
    uint64_t data_offset, comp_offset, comp_size;
    /* source */
    int64_t  source_id;
    char    *source_path, *source_kind;
    int64_t  source_size, source_mtime_ns;
    /* the rest of the file's identity at import; has_ident 0 for rows imported before schema 4 */
    int      has_ident;
    int64_t  source_ctime_ns, source_inode, source_dev;
} qs_tensor_rec;

/* Load one tensor's record by exact name.  Returns 0, or -1 with "no tensor named 'X'". */
int qs_tensor_get(qs_db *db, const char *name, qs_tensor_rec *t, qs_err *e);
void qs_tensor_rec_free(qs_tensor_rec *t);

/* Matrix view used by statistics and block analyses: rows = product of leading dims, cols = last
** dim (1-D tensors: 1 x n; scalars: 1 x 1). */
void qs_tensor_matrix_view(const uint64_t *shape, int ndim, uint64_t *rows, uint64_t *cols);

/* shape as a JSON array text "[2,3]" into buf */
void qs_shape_json(const uint64_t *shape, int ndim, char *buf, size_t cap);
/* shape as "2x3" (scalars: "scalar") */
void qs_shape_str(const uint64_t *shape, int ndim, char *buf, size_t cap);

/* Is the referenced file still the one imported?  Stale means: gone, or any of size, mtime (ns),
** ctime (ns), inode and device differs (ctime, inode and device only when recorded).  Returns 0,
** or -1 with "PATH: stale reference for tensor 'NAME': ...".  Embedded tensors always pass. */
int qs_tensor_ref_check(const qs_tensor_rec *t, qs_err *e);

typedef struct qs_treader qs_treader;

/* Reader over a stored tensor.  For references the file is checked first (qs_tensor_ref_check):
** a stale file is an error, never silently read, and a file that shrinks under a read is reported
** as stale instead of killing the process with SIGBUS.  Embedded tensors are read in one database
** snapshot, in which their hash is checked against t->hash; the reader holds that snapshot until
** it is closed, so close it before writing (qs_db_begin refuses otherwise).  The reader is safe to
** use from several threads at once. */
qs_treader *qs_treader_open(qs_db *db, const qs_tensor_rec *t, qs_err *e);

/* Call after the last read and before storing anything derived from it: fails (stale reference)
** if the referenced file changed while it was read, so no result is ever stored under a hash
** that does not belong to the bytes read. */
int qs_treader_verify(qs_treader *r, qs_err *e);

/* Reader over a tensor described by a parser, in a file image held in memory (used by import
** before the tensor is in the database).  `file_base`/`file_len` must outlive the reader. */
qs_treader *qs_treader_from_image(const uint8_t *file_base, size_t file_len, const qs_tdesc *d,
                                  const char *path, qs_err *e);

/* Reader over a tensor described by a parser, in the open file fd (duplicated: the caller keeps
** and closes its own), read like a reference; the caller checks the file's identity itself. */
qs_treader *qs_treader_from_fd(int fd, const qs_tdesc *d, const char *path, qs_err *e);

/* Elements [start, start+n) in C order, decoded to float32. */
int qs_treader_read_f32(qs_treader *r, uint64_t start, size_t n, float *out, qs_err *e);
/* Bytes [off, off+n) of the tensor's C-order storage bytes (block types: whole blocks in order). */
int qs_treader_read_bytes(qs_treader *r, uint64_t off, size_t n, uint8_t *out, qs_err *e);
uint64_t qs_treader_numel(const qs_treader *r);
uint64_t qs_treader_nbytes(const qs_treader *r);
void qs_treader_close(qs_treader *r);

/* Adapter with the signature of qs_read_fn (analysis/tensor_stats.h). */
int qs_treader_read_cb(void *reader, uint64_t start, size_t n, float *out, qs_err *e);

/* xxh3-128 content hash of dtype, shape and the C-order bytes, as 32 hex digits + NUL. */
int qs_treader_hash(qs_treader *r, qs_dtype dt, const uint64_t *shape, int ndim, char out[33], qs_err *e);

#endif
