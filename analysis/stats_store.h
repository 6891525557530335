/*
** Persisting tensor statistics in the tensor_stats table.
*/
#ifndef QS_STATS_STORE_H
#define QS_STATS_STORE_H

#include "../store/db.h"
#include "tensor_stats.h"

int qs_stats_save(qs_db *db, int64_t tensor_id, const qs_tensor_stats *s, qs_err *e);
/* 0 and *found = 1 when a row exists. */
int qs_stats_load(qs_db *db, int64_t tensor_id, qs_tensor_stats *s, int *found, qs_err *e);

#endif
