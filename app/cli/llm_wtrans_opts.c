/*
** `llm eval --config`'s calibration transforms (llm_wtrans_opts.h).
*/
#include "llm_wtrans_opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "llm_text_run.h"
#include "../../analysis/llm_eval_service.h"
#include "../../analysis/llm_text.h"

static int num(const char *s, double lo, double hi, double *v)
{
    char *end = NULL;
    errno = 0;
    double x = *s ? strtod(s, &end) : NAN;
    if (!end || *end || errno || !isfinite(x) || x < lo || x > hi) return -1;
    *v = x;
    return 0;
}

int qs_llm_wtrans_smooth(const char *cmd, const char *opt, const char *val, qs_wtrans *t, char *lab, size_t cap)
{
    char a[64];
    snprintf(a, sizeof a, "%s", val);
    char *c = strchr(a, ':');
    if (c) {
        if (strcmp(c, ":norm")) return qs_cli_usage(cmd, "%s: smooth=ALPHA[:norm], not '%s'", opt, val);
        *c = 0;
        t->smooth_norm = 1;
    }
    if (num(a, 0, 1, &t->alpha)) return qs_cli_usage(cmd, "%s: smooth: '%s' is not a migration strength in [0, 1]", opt, a);
    t->smooth = 1;
    snprintf(lab, cap, "%g%s", t->alpha, t->smooth_norm ? ":norm" : "");
    return 0;
}

/* One transform suffix of w=F:...: 0, the usage error's exit code, or -1 when tok is not one (a format
** option). */
static int suffix(const char *cmd, const char *opt, const char *tok, qs_wtrans *t, char *suf, size_t scap)
{
    double v;
    size_t k = strlen(suf);
    if (!strcmp(tok, "gptq") || !strcmp(tok, "awq")) {
        if (t->wround) return qs_cli_usage(cmd, "%s: one of :gptq and :awq per weight format", opt);
        t->wround = tok[0] == 'g' ? QS_WT_GPTQ : QS_WT_AWQ;
    } else if (!strcmp(tok, "act-order")) {
        if (t->wround != QS_WT_GPTQ) return qs_cli_usage(cmd, "%s: :act-order follows :gptq", opt);
        t->gptq.act_order = 1;
    } else if (!strncmp(tok, "damp=", 5)) {
        if (t->wround != QS_WT_GPTQ) return qs_cli_usage(cmd, "%s: :damp= follows :gptq", opt);
        if (num(tok + 5, 1e-6, 10, &v)) return qs_cli_usage(cmd, "%s: damp: '%s' is not in [1e-6, 10]", opt, tok + 5);
        t->gptq.damp = v;
    } else if (!strncmp(tok, "gblock=", 7)) {
        if (t->wround != QS_WT_GPTQ) return qs_cli_usage(cmd, "%s: :gblock= follows :gptq", opt);
        if (num(tok + 7, 1, 65536, &v) || v != floor(v)) return qs_cli_usage(cmd, "%s: gblock: '%s' is not a column count", opt, tok + 7);
        t->gptq.block = (int)v;
    } else if (!strncmp(tok, "grid=", 5)) {
        if (t->wround != QS_WT_AWQ) return qs_cli_usage(cmd, "%s: :grid= follows :awq", opt);
        if (num(tok + 5, 1, 1000, &v) || v != floor(v)) return qs_cli_usage(cmd, "%s: grid: '%s' is not a point count", opt, tok + 5);
        t->awq_grid = (int)v;
    } else {
        return -1;
    }
    if (k < scap) snprintf(suf + k, scap - k, ":%s", tok);
    return 0;
}

int qs_llm_wtrans_wspec(const char *cmd, const char *opt, const char *val, qs_wtrans *t, char *fmt, size_t fcap, char *suf,
                        size_t scap)
{
    const qs_gptq_opts gd = QS_GPTQ_DEFAULTS;
    t->gptq = gd;
    t->awq_grid = 20;
    suf[0] = fmt[0] = 0;
    char *dup = strdup(val), *save = NULL;
    if (!dup) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    size_t k = 0;
    int rc = 0, first = 1;
    for (char *tok = strtok_r(dup, ":", &save); tok && !rc; tok = strtok_r(NULL, ":", &save), first = 0) {
        int r = first ? -1 : suffix(cmd, opt, tok, t, suf, scap);
        if (r > 0) rc = r;
        else if (r < 0 && k < fcap) {
            if (suf[0]) rc = qs_cli_usage(cmd, "%s: '%s': format options come before :gptq/:awq", opt, val);
            else k += (size_t)snprintf(fmt + k, fcap - k, "%s%s", first ? "" : ":", tok);
        }
    }
    free(dup);
    return rc;
}

int qs_llm_calib_open(qs_llm_calib_text *c, const char *cmd, const char *path, int chunks, const qs_llm_text_run *t,
                      qs_eval_cfg *cfg, int ncfg)
{
    memset(c, 0, sizeof *c);
    int need = -1;
    for (int i = 0; i < ncfg && need < 0; i++)
        if (qs_wtrans_on(&cfg[i].wt)) need = i;
    if (!path && need < 0) return 0;
    if (!path) return qs_cli_usage(cmd, "--config %s needs a calibration text: --calib FILE (not the evaluation text)", cfg[need].label);
    if (need < 0) return qs_cli_usage(cmd, "--calib: no configuration uses it (smooth=, w=F:gptq, w=F:awq)");
    qs_err e = {{0}};
    if (qs_eval_read_text(path, &c->text, &c->len, c->src.hash, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    if (!strcmp(c->src.hash, t->thash))
        return qs_cli_error(QS_EXIT_USAGE, "%s: the calibration text is the evaluation text (same content): calibrate on another text",
                            path);
    if (qs_eval_text_ids(path, &t->f, c->text, c->len, &c->ids, &c->ntok, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    char h[33];
    memcpy(h, c->src.hash, sizeof h);
    c->src = (qs_calib_src){c->ids, (size_t)c->ntok, t->su.ctx, chunks, t->su.bos, "", 0};
    memcpy(c->src.hash, h, sizeof h);
    if (qs_calib_nchunks(&c->src) < 1)
        return qs_cli_error(QS_EXIT_USAGE, "%s: %d tokens is shorter than one calibration chunk of %d", path, c->ntok, t->su.ctx);
    for (int i = 0; i < ncfg; i++)
        if (qs_wtrans_on(&cfg[i].wt)) {
            size_t k = strlen(cfg[i].label);
            snprintf(cfg[i].label + k, sizeof cfg[i].label - k, ",calib=%.8s", c->src.hash);
        }
    return 0;
}

void qs_llm_calib_close(qs_llm_calib_text *c)
{
    free(c->text);
    free(c->ids);
    memset(c, 0, sizeof *c);
}

void qs_llm_calib_print(const qs_llm_calib_text *c, const char *path)
{
    if (!path || !c->ids) return;
    printf("calibration text %s: %d tokens, %d chunks of %d from the FP32 reference (xxh3 %.8s)\n", qs_esc(path), c->ntok,
           qs_calib_nchunks(&c->src), c->src.ctx, c->src.hash);
    fflush(stdout);
}
