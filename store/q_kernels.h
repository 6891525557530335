/*
** The list of stored kernel experiments and RL trajectories (results of kind msd, attn, resq and
** trajectory) that the workbench's Kernels view shows.
*/
#ifndef QS_Q_KERNELS_H
#define QS_Q_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"

typedef struct qs_kernel_item {
    int64_t id;
    char kind[16];
    char *format, *tensor_hash, *created_at;
    /* what a row is about, each NULL when absent or when its JSON is malformed: the data's
    ** title and y-axis label, the options' run and set; options and data themselves only for
    ** kernel experiments (trajectories can be large and need none of them) */
    char *title, *ylabel, *run, *set, *options, *data;
} qs_kernel_item;

/* By kind, newest first. */
int qs_kernel_list(qs_db *db, qs_kernel_item **out, size_t *n, qs_err *e);
void qs_kernel_items_free(qs_kernel_item *k, size_t n);

#endif
