/*
** An evaluation's units on the ranks (see llm_par.h).
*/
#include "llm_par.h"

#include <stdlib.h>

#include "par.h"

#define MAX_GROUPS 16

static int unit_fn(size_t i, void *ctx, uint8_t **out, size_t *len, qs_err *e) { return qs_eval_shard_unit(ctx, i, out, len, e); }

static int collect_fn(size_t i, const uint8_t *b, size_t len, void *ctx, qs_err *e) { return qs_eval_shard_merge(ctx, i, b, len, e); }

/* The largest load of the schedule of sh's units on nranks. */
static double makespan(const qs_eval_shard *sh, int nranks, double *cost, int *owner, double *load)
{
    size_t n = qs_eval_shard_units(sh);
    qs_eval_shard_costs(sh, cost);
    qs_par_assign(n, cost, nranks, owner);
    for (int r = 0; r < nranks; r++) load[r] = 0;
    for (size_t i = 0; i < n; i++) load[owner[i]] += cost[i];
    double m = 0;
    for (int r = 0; r < nranks; r++) if (load[r] > m) m = load[r];
    return m;
}

int qs_llm_shard_run(qs_eval_shard *sh, const char *what, qs_err *e)
{
    const int nranks = qs_par_size();
    const size_t most = (size_t)(sh->nrun > 0 ? sh->nrun : 1) * MAX_GROUPS;
    double *cost = malloc(most * sizeof *cost), *load = malloc((size_t)nranks * sizeof *load);
    int *owner = malloc(most * sizeof *owner);
    int rc = -1;
    if (!cost || !owner || !load) { qs_fail(e, "out of memory"); goto out; }
    qs_eval_shard_groups(sh, 1);
    if (nranks > 1) {
        /* more groups balance few chunks over many ranks, at the price of a reference pass each */
        int best = 1;
        double bm = makespan(sh, nranks, cost, owner, load);
        for (int g = 2; g <= MAX_GROUPS && g <= sh->nwant; g++) {
            qs_eval_shard_groups(sh, g);
            double m = makespan(sh, nranks, cost, owner, load);
            if (m < 0.99 * bm) { bm = m; best = g; }
        }
        qs_eval_shard_groups(sh, best);
    }
    qs_eval_shard_costs(sh, cost);
    /* one rank: the caller's progress follows every merged chunk; on several, par.c's line shows the units */
    rc = qs_par_run(qs_eval_shard_units(sh), cost, unit_fn, collect_fn, sh, nranks > 1 ? what : NULL, e);
out:
    free(cost); free(owner); free(load);
    return rc;
}
