/*
** Questions about tensors and their sources that the CLI and the workbench ask: the lists they
** show, the counts, and the removals.  Each answer is a plain array the caller frees.
**
** Statistics come from tensor_stats; a value the tensor has none for is NaN (SQLite stores NaN as
** NULL, so NaN is never a stored statistic).
*/
#ifndef QS_Q_TENSORS_H
#define QS_Q_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"

typedef struct qs_tensor_item {
    int64_t id;
    char *name, *dtype, *storage, *hash;
    char *shape;                        /* JSON array, outermost dimension first */
    char *source;                       /* the source's path; NULL unless the list asks for it */
    int64_t numel, nbytes;
    double mean, std, absmax, kurtosis, outlier_frac;   /* NaN: none */
} qs_tensor_item;

typedef enum qs_tensor_order {
    QS_TENSORS_BY_NAME,
    QS_TENSORS_BY_SIZE,                 /* the rest: largest first, then by name */
    QS_TENSORS_BY_ABSMAX,
    QS_TENSORS_BY_KURTOSIS,
    QS_TENSORS_BY_OUTLIERS,
} qs_tensor_order;

/* The tensors whose name matches the GLOB pattern, with their source's path, in that order. */
int qs_tensor_list(qs_db *db, const char *glob, qs_tensor_order order, qs_tensor_item **out, size_t *n, qs_err *e);
/* The tensors whose name matches the GLOB pattern, by name, without the source (the workbench's
** list and the report's). */
int qs_tensor_list_stats(qs_db *db, const char *glob, qs_tensor_item **out, size_t *n, qs_err *e);
/* The `limit` largest tensors (by bytes, then name), without the source. */
int qs_tensor_largest(qs_db *db, int limit, qs_tensor_item **out, size_t *n, qs_err *e);
void qs_tensor_items_free(qs_tensor_item *t, size_t n);

/* (Tensor names by glob: tensor_names.h.) */

/* How many tensors have a name matching the GLOB pattern. */
int qs_tensor_count(qs_db *db, const char *glob, int64_t *n, qs_err *e);

/* Writes; the caller holds the transaction. */
/* Delete the tensors matching the GLOB pattern; *removed = how many. */
int qs_tensor_delete_glob(qs_db *db, const char *glob, int *removed, qs_err *e);
/* Delete the tensor of exactly that name (`rm` resolves its arguments with tensor_names.h first). */
int qs_tensor_delete_name(qs_db *db, const char *name, int *removed, qs_err *e);
/* Delete a tensor's embedded chunks (it becomes a reference again). */
int qs_tensor_chunks_delete(qs_db *db, int64_t tensor_id, qs_err *e);
/* The id of the source row of that path, 0 when there is none. */
int qs_source_id(qs_db *db, const char *path, int64_t *id, qs_err *e);
int qs_source_delete(qs_db *db, int64_t id, qs_err *e);
/* Delete the sources left without tensors. */
int qs_source_delete_empty(qs_db *db, qs_err *e);

#endif
