/*
** Questions about stored RL runs that the CLI and the workbench ask: the run lists, whether a
** name is taken, and the token rows of one run read in order through a cursor (a run can hold
** millions of tokens, so they are never loaded whole).  Writing runs is store/rl_log.h.
*/
#ifndef QS_Q_RL_H
#define QS_Q_RL_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "rl_log.h"

typedef struct qs_run_item {
    int64_t id;
    char *name, *label, *source, *created_at;   /* label and source "" when absent */
    char *metadata;                             /* JSON text, "{}" when absent */
    /* counted from rl_token by qs_run_list (steps distinct; first/last 0 without tokens), -1 in
    ** the name lists */
    int64_t tokens, steps, first_step, last_step;
} qs_run_item;

/* The runs whose name matches the GLOB pattern, by name, with their token counts (reads every
** token of each run). */
int qs_run_list(qs_db *db, const char *glob, qs_run_item **out, size_t *n, qs_err *e);

typedef enum qs_run_order {
    QS_RUNS_BY_NAME,
    QS_RUNS_SIMS_LAST,                  /* imported runs first, then the simulations (sim/...) */
} qs_run_order;
/* Every run, without counts. */
int qs_run_names(qs_db *db, qs_run_order order, qs_run_item **out, size_t *n, qs_err *e);
void qs_run_items_free(qs_run_item *r, size_t n);

int qs_run_exists(qs_db *db, const char *name, int *exists, qs_err *e);

/* A cursor over token rows, in (step, seq, pos) order.  While it is open the connection is
** reading: close it before a write transaction (qs_db_begin refuses otherwise). */
typedef struct qs_rl_cursor qs_rl_cursor;
void qs_rl_cursor_close(qs_rl_cursor *c);

/* Every token of the run of that name with its sequence's and group's ids as in the log. */
typedef struct qs_rl_token {
    qs_rl_row row;
    const char *seq_id, *group_id;      /* NULL when absent; valid until the next row */
} qs_rl_token;
qs_rl_cursor *qs_rl_tokens_open(qs_db *db, const char *run, qs_err *e);
int qs_rl_tokens_next(qs_rl_cursor *c, qs_rl_token *t, qs_err *e);   /* 1 a row, 0 the end, -1 error */

/* Every token of run id: the log-ratio lp_train - lp_rollout and the mask. */
typedef struct qs_rl_delta {
    int64_t step, seq;
    double delta;
    int mask;
} qs_rl_delta;
qs_rl_cursor *qs_rl_deltas_open(qs_db *db, int64_t run_id, qs_err *e);
int qs_rl_deltas_next(qs_rl_cursor *c, qs_rl_delta *d, qs_err *e);   /* 1 a row, 0 the end, -1 error */

#endif
