/*
** Tensor names by glob or exact name, for the commands that take TENSOR... patterns (`analyze`).
*/
#ifndef QS_TENSOR_NAMES_H
#define QS_TENSOR_NAMES_H

#include <stddef.h>

#include "db.h"

/* Append to (*names, *n) every tensor name matching the glob pat, in name order, each name once
** over successive calls (names are malloc'd C strings).  *found: whether pat matched any tensor. */
int qs_tensor_names_glob(qs_db *db, const char *pat, char ***names, size_t *n, int *found, qs_err *e);
/* The same for a TENSOR argument: the tensor of that exact name when there is one, else the names
** matching it as a glob (so a name holding *, ? or [ can always be given as it is). */
int qs_tensor_names_match(qs_db *db, const char *arg, char ***names, size_t *n, int *found, qs_err *e);
void qs_tensor_names_free(char **names, size_t n);

#endif
