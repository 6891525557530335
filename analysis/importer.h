/*
** Import one tensor file into the store: parse, hash, compute statistics, and write the rows
** (reference or embedded) — the orchestration behind `qscope import`, `gen --name` and `demo`.
*/
#ifndef QS_IMPORTER_H
#define QS_IMPORTER_H

#include <jansson.h>

#include "../store/db.h"
#include "../kernels/dtype.h"

typedef struct qs_import_opts {
    int copy;                    /* embed data as blobs */
    const char *prefix;          /* name prefix instead of the file stem */
    const char *exact_name;      /* single-tensor files: the full tensor name */
    qs_dtype reinterpret;        /* raw npy words read as this dtype */
    int jobs;                    /* threads for statistics */
    /* for generated data: what the source row records instead of the file */
    const char *source_path, *source_kind, *source_meta;
    /* if set, warnings ("PATH: warning: ...") are appended here as strings, for the caller to
    ** print once the import is kept; otherwise they go to stderr at once */
    json_t *warnings;
} qs_import_opts;

/* Import the file at `path`.  Appends one object per tensor to `report` (name, status =
** added|updated|unchanged|embedded|removed, dtype, shape, numel, nbytes, storage, hash).
** A file with no importable tensor (an empty .npz, a GGUF of unknown types only) stores nothing:
** no source row, and one left by an earlier import is removed with its tensors.
** The caller holds the transaction.  Errors: "PATH: what is wrong (at byte N)". */
int qs_import_file(qs_db *db, const char *path, const qs_import_opts *o, json_t *report, qs_err *e);

/* Store n generated or computed float32 values (shape[0..ndim)) as an embedded tensor `name`:
** written through a temporary .npy and imported like a file (same hashing and statistics).
** source_path/kind/meta describe where the values came from (e.g. "gen:NAME", "generated"). */
typedef int (*qs_fill_fn)(void *ctx, uint64_t start, size_t n, float *out);
int qs_import_f32(qs_db *db, const char *name, const uint64_t *shape, int ndim, qs_fill_fn fill, void *ctx,
                  const char *source_path, const char *source_kind, const char *source_meta, json_t *report,
                  qs_err *e);

#endif
