/*
** A figure as bytes and back, so one process can build it and another draw it (an MPI rank
** measures a claim, rank 0 writes its plot).  Both ends run the same qscope build: the structs
** travel as they are, their owned arrays after them.
*/
#ifndef QS_PLOT_PACK_H
#define QS_PLOT_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "plot.h"

/* Append f (NULL allowed) to the growing buffer (*b, *n, *cap); -1 when out of memory. */
int qs_fig_pack(const qs_figure *f, uint8_t **b, size_t *n, size_t *cap);
/* Read a figure packed at b[*at..len) (*f NULL when none was), advancing *at; -1 on short or
** malformed input or out of memory. */
int qs_fig_unpack(const uint8_t *b, size_t len, size_t *at, qs_figure **f);

#endif
