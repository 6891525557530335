/*
** rot= / rht= specs and the run-time half of the transforms (llm_rot.h); the weights' half is
** llm_rot_fold.c.
*/
#include "llm_rot.h"
#include "llm_recipe.h"
#include "llm_rows.h"
#include "pool.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_u64(const char *v, uint64_t *out)
{
    if (!*v || *v == '-' || *v == '+') return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long u = strtoull(v, &end, 10);
    if (errno || *end) return -1;
    *out = u;
    return 0;
}

static int parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "0") || !strcmp(v, "1")) { *out = v[0] == '1'; return 0; }
    return -1;
}

/* The options after the name: seed=N, and for rot down=0|1, vo=0|1. */
static int parse_opts(qs_llm_xspec *x, int rot, char *p, const char *val, qs_err *e)
{
    for (char *o = p; o; o = p) {
        p = strchr(o, ':');
        if (p) *p++ = 0;
        char *eq = strchr(o, '=');
        int bad = !eq;
        if (eq) {
            *eq = 0;
            const char *v = eq + 1;
            if (!strcmp(o, "seed")) bad = parse_u64(v, rot ? &x->rot_seed : &x->rht_seed);
            else if (rot && !strcmp(o, "down")) bad = parse_bool(v, &x->down);
            else if (rot && !strcmp(o, "vo")) bad = parse_bool(v, &x->vo);
            else return qs_fail(e, "%s=%s: unknown option '%s' (%s)", rot ? "rot" : "rht", val, o,
                                rot ? "seed=N, down=0|1, vo=0|1" : "seed=N");
            if (bad) return qs_fail(e, "%s=%s: '%s' is not a valid value of %s", rot ? "rot" : "rht", val, v, o);
        }
        if (bad) return qs_fail(e, "%s=%s: option '%s' is not NAME=VALUE", rot ? "rot" : "rht", val, o);
    }
    return 0;
}

int qs_llm_xspec_parse(qs_llm_xspec *x, const char *key, const char *val, qs_err *e)
{
    const int rot = !strcmp(key, "rot");
    if (!rot && strcmp(key, "rht")) return qs_fail(e, "unknown transform key '%s' (rot, rht)", key);
    char buf[128];
    if (strlen(val) >= sizeof buf) return qs_fail(e, "%s=: value too long", key);
    strcpy(buf, val);
    char *p = strchr(buf, ':');
    if (p) *p++ = 0;
    if (rot) {
        x->rot_seed = 0;
        x->down = x->vo = 1;
        if (!strcmp(buf, "hadamard")) x->rot = QS_ROT_HADAMARD;
        else if (!strcmp(buf, "random")) x->rot = QS_ROT_RANDOM;
        else if (!strcmp(buf, "none") && !p) { x->rot = QS_ROT_NONE; return 0; }
        else return qs_fail(e, "rot=%s: not a rotation (hadamard, random or none, options :seed=N:down=0|1:vo=0|1)", val);
    } else {
        x->rht_seed = 0;
        if (!strcmp(buf, "16")) x->rht = 16;
        else if (!strcmp(buf, "none") && !p) { x->rht = 0; return 0; }
        else return qs_fail(e, "rht=%s: only the 16-point transform is supported (rht=16[:seed=N] or none)", val);
    }
    return p ? parse_opts(x, rot, p, val, e) : 0;
}

void qs_llm_xspec_text(const qs_llm_xspec *x, const char *key, char *buf, size_t n)
{
    buf[0] = 0;
    if (!strcmp(key, "rht")) {
        if (x->rht && x->rht_seed) snprintf(buf, n, "%d:seed=%llu", x->rht, (unsigned long long)x->rht_seed);
        else if (x->rht) snprintf(buf, n, "%d", x->rht);
        return;
    }
    if (x->rot == QS_ROT_NONE) return;
    int k = snprintf(buf, n, "%s", x->rot == QS_ROT_HADAMARD ? "hadamard" : "random");
    if ((x->rot == QS_ROT_RANDOM || x->rot_seed) && k >= 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ":seed=%llu", (unsigned long long)x->rot_seed);
    if (!x->down && k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, ":down=0");
    if (!x->vo && k >= 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, ":vo=0");
}

void qs_llm_online_free(qs_llm_online *on)
{
    if (!on) return;
    qs_hadamard_free(&on->down);
    free(on);
}

/* ---------------------------------------------------------------- run time */

#define ON_BLOCK 16   /* rows per pool task */

typedef struct on_job {
    const qs_llm_online *on;
    qs_llm_site s;
    float *x;
    int rows, cols;
    atomic_int fail;
} on_job;

static void on_task(void *ctx, size_t task, int slot)
{
    (void)slot;
    on_job *j = ctx;
    const int r0 = (int)task * ON_BLOCK, nr = j->rows - r0 < ON_BLOCK ? j->rows - r0 : ON_BLOCK;
    float *x = j->x + (size_t)r0 * j->cols;
    if (j->s == QS_SITE_FFN_DOWN_IN && j->on->down.n) {
        const int n = j->cols;
        double *v = malloc(2 * (size_t)n * sizeof(double));
        if (!v) { atomic_store(&j->fail, 1); return; }
        for (int r = 0; r < nr; r++) {
            float *row = x + (size_t)r * n;
            for (int i = 0; i < n; i++) v[i] = row[i];
            qs_hadamard_row(&j->on->down, v, v + n);
            for (int i = 0; i < n; i++) row[i] = (float)v[i];
        }
        free(v);
    }
    if (j->on->rht) qs_llm_rht16(x, (size_t)nr, (size_t)j->cols, 1, j->on->rht_seed, 0);
}

int qs_llm_online_rows(const qs_llm_online *on, qs_llm_site s, float *x, int rows, int cols, qs_err *e)
{
    if (!on || rows <= 0) return 0;
    if (s == QS_SITE_FFN_DOWN_IN && on->down.n && on->down.n != cols)
        return qs_fail(e, "online Hadamard of order %d on rows of %d", on->down.n, cols);
    on_job j = {on, s, x, rows, cols, 0};
    atomic_init(&j.fail, 0);
    const size_t ntask = (size_t)(rows + ON_BLOCK - 1) / ON_BLOCK;
    qs_pool_for(rows >= 4 * ON_BLOCK ? qs_llm_threads() : 1, ntask, on_task, &j);
    return atomic_load(&j.fail) ? qs_fail(e, "out of memory for the online Hadamard transform") : 0;
}
