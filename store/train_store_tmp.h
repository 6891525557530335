/*
** Interim reads of training runs for `qscope runs`, until store/q_train.c (the read half of
** store/train_store.h) is on main: the same results under other names.  Remove this file and
** call qs_train_run_list / _items_free / _get / _steps instead once it is.
*/
#ifndef QS_TRAIN_STORE_TMP_H
#define QS_TRAIN_STORE_TMP_H

#include "train_store.h"

int qs_train_tmp_list(qs_db *db, const char *glob, qs_train_run_item **out, size_t *n, qs_err *e);
void qs_train_tmp_items_free(qs_train_run_item *r, size_t n);
int qs_train_tmp_get(qs_db *db, const char *name, qs_train_run_item *out, qs_err *e);
int qs_train_tmp_steps(qs_db *db, int64_t id, qs_train_step_row **out, size_t *n, qs_err *e);

#endif
