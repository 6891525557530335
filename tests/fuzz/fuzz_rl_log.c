/*
** libFuzzer target for the mmlog v1 parser (CSV and JSONL): a successful parse yields only rows
** that obey the schema's rules; a failed one says "line N: ..." (or names an empty input).
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/rl_log.h"

typedef struct chk { uint64_t rows, seqs; int64_t last_step, last_seq, last_pos; } chk;

static int rows(void *ctx, const qs_rl_row *r, size_t n, qs_err *e)
{
    (void)e;
    chk *c = ctx;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(r[i].lp_rollout) || !isfinite(r[i].lp_train)) abort();
        if (r[i].lp_rollout > QS_RL_LP_TOL || r[i].lp_train > QS_RL_LP_TOL) abort();
        if (r[i].step < 0 || r[i].seq < 0 || r[i].pos < 0 || (r[i].mask != 0 && r[i].mask != 1)) abort();
        if (!isnan(r[i].entropy) && !(r[i].entropy >= 0)) abort();
        /* within a sequence, positions strictly increase */
        if (r[i].step == c->last_step && r[i].seq == c->last_seq && r[i].pos <= c->last_pos) abort();
        c->last_step = r[i].step;
        c->last_seq = r[i].seq;
        c->last_pos = r[i].pos;
        c->rows++;
    }
    return 0;
}

static int seqs(void *ctx, int64_t step, int64_t seq, const char *id, const char *gid, qs_err *e)
{
    (void)step; (void)seq; (void)gid; (void)e;
    if (!id || !*id) abort();
    ((chk *)ctx)->seqs++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    chk c = {0, 0, -1, -1, -1};
    qs_rl_sink s = {&c, rows, seqs};
    qs_rl_parse_info info;
    qs_err e;
    memset(&e, 0, sizeof e);
    if (qs_rl_parse((const char *)data, size, &s, &info, &e) == 0) {
        if (info.tokens != c.rows || info.seqs != c.seqs || !info.tokens) abort();
        qs_rl_parse_info_free(&info);
    } else {
        if (!strstr(e.msg, "line ") && !strstr(e.msg, "no tokens") && !strstr(e.msg, "out of memory")) abort();
        if (info.header_json) abort();
    }
    return 0;
}
