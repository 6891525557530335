/*
** Parsing of format options on the command line (see quant_opts.h).
*/
#include "quant_opts.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"

int qs_quant_opt(const char *cmd, int ch, const char *arg, qs_apply *a)
{
    unsigned long long u;
    switch (ch) {
    case 'f':
        if (!(a->f = qs_format_find(arg))) {
            qs_cli_usage(cmd, "unknown format '%s' (see `qscope formats`)", arg);
            return -1;
        }
        return 1;
    case 0x1001:
        if (qs_round_parse(arg, &a->o.round)) { qs_cli_usage(cmd, "unknown rounding '%s'", arg); return -1; }
        return 1;
    case 0x1002:
        if (qs_scale_rule_parse(arg, &a->o.scale_rule, &a->o.uos_qmax)) {
            qs_cli_usage(cmd, "unknown scale rule '%s' (floor, ceil, even, rceil, uos[=QMAX])", arg);
            return -1;
        }
        return 1;
    case 0x1003:
        if (qs_parse_u64(arg, &u) || u == 0 || u > (1u << 30)) { qs_cli_usage(cmd, "bad --block '%s'", arg); return -1; }
        a->o.block = (int)u;
        if (a->gran == QS_GRAN_TENSOR) a->gran = QS_GRAN_BLOCK;
        return 1;
    case 0x1004:
        if (strcmp(arg, "0") && strcmp(arg, "1")) { qs_cli_usage(cmd, "--axis is 0 or 1"); return -1; }
        a->axis = arg[0] - '0';
        return 1;
    case 0x1005:
        if (qs_gran_parse(arg, &a->gran)) { qs_cli_usage(cmd, "--gran is tensor, row, col or block"); return -1; }
        return 1;
    case 0x1006: a->o.sat = 1; return 1;
    case 0x1007:
        if (qs_parse_u64(arg, &u)) { qs_cli_usage(cmd, "bad --seed '%s'", arg); return -1; }
        a->o.seed = u;
        return 1;
    case 0x1008:
        if (!strcmp(arg, "te")) a->o.nvfp4 = QS_NVFP4_TE;
        else if (!strcmp(arg, "torchao")) a->o.nvfp4 = QS_NVFP4_TORCHAO;
        else { qs_cli_usage(cmd, "--nvfp4 is te or torchao"); return -1; }
        return 1;
    case 0x1009:
        if (!strcmp(arg, "em")) a->o.m2x = QS_M2X_EM;
        else if (!strcmp(arg, "es")) a->o.m2x = QS_M2X_ES;
        else { qs_cli_usage(cmd, "--m2x is em or es"); return -1; }
        return 1;
    case 0x100A: a->o.floor_log2f = 1; return 1;
    case 0x100B: a->o.zero_positive = 1; return 1;
    case 0x100C: a->o.flush_subnormal_blocks = 1; return 1;
    case 0x100D:
        if (!strcmp(arg, "nan")) a->o.nan_block_te = 0;
        else if (!strcmp(arg, "te")) a->o.nan_block_te = 1;
        else { qs_cli_usage(cmd, "--nonfinite-block is nan or te"); return -1; }
        return 1;
    case 0x100E: {
        char *end;
        unsigned long c = strtoul(arg, &end, 16);
        if (!arg[0] || arg[0] == '-' || arg[0] == '+' || *end || c > 0xFE) {
            qs_cli_usage(cmd, "--zero-block-scale takes an E8M0 code in hex, 00..fe (not '%s')", arg);
            return -1;
        }
        a->o.zero_block_scale = QS_ZERO_BLOCK_SCALE(c);
        return 1;
    }
    case 0x100F:
        if (qs_cscale_parse(arg, &a->cscale)) { qs_cli_usage(cmd, "--scale is none, tensor, row or col (not '%s')", arg); return -1; }
        return 1;
    }
    return 0;
}

int qs_quant_opts_done(const char *cmd, qs_apply *a)
{
    if (!a->f) return qs_cli_usage(cmd, "choose a format with -f (see `qscope formats`)");
    /* int formats default to one scale per tensor; block formats to their blocks */
    if (a->f->block == 0 && a->gran == QS_GRAN_BLOCK && a->o.block == 0) a->gran = QS_GRAN_TENSOR;
    qs_err e = {{0}};
    if (qs_qopts_check(a->f, &a->o, &e)) return qs_cli_usage(cmd, "%s", e.msg);
    if (a->cscale && !(qs_cast_scale_target(a->f) > 0))
        return qs_cli_usage(cmd, "format %s takes no scale=%s: only element casts with a scale target (fp8_*, fp6_*, "
                            "fp4_e2m1, fp16, hif8) are scaled", a->f->name, qs_cscale_name(a->cscale));
    return 0;
}

int qs_quant_parse_list(const char *cmd, const char *list, const qs_apply *base, qs_apply *apps, int cap)
{
    static const struct option lo[] = {QS_QUANT_LONGOPTS, {0, 0, 0, 0}};
    char *dup = strdup(list), *save = NULL;
    int n = 0;
    if (!dup) return -1;
    for (char *item = strtok_r(dup, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (n == cap) { qs_cli_usage(cmd, "too many formats (at most %d)", cap); free(dup); return -1; }
        qs_apply a = *base;
        char *save2 = NULL, *name = strtok_r(item, ":", &save2);
        if (qs_quant_opt(cmd, 'f', name, &a) < 0) { free(dup); return -1; }
        for (char *kv = strtok_r(NULL, ":", &save2); kv; kv = strtok_r(NULL, ":", &save2)) {
            char *eq = strchr(kv, '=');
            if (eq) *eq = 0;
            const struct option *op = NULL;
            for (const struct option *p = lo; p->name; p++)
                if (!strcmp(p->name, kv)) op = p;
            if (!op || op->val == 'f' || (op->has_arg == required_argument) != (eq != NULL)) {
                qs_cli_usage(cmd, "bad per-format option '%s' in '%s'", kv, name);
                free(dup);
                return -1;
            }
            if (qs_quant_opt(cmd, op->val, eq ? eq + 1 : NULL, &a) < 0) { free(dup); return -1; }
        }
        if (qs_quant_opts_done(cmd, &a)) { free(dup); return -1; }
        apps[n++] = a;
    }
    free(dup);
    if (n == 0) { qs_cli_usage(cmd, "no formats given"); return -1; }
    return n;
}

void qs_quant_label(const qs_apply *a, const char *spec, char *buf, size_t cap)
{
    (void)spec;
    const qs_format *f = a->f;
    const qs_qopts *o = &a->o;
    size_t k = 0;
    /* every option whose canonical value (qs_quant_opts_json) differs from the format's default */
#define ADD(...) do { if (k < cap) k += (size_t)snprintf(buf + k, cap - k, __VA_ARGS__); } while (0)
    ADD("%s", f->name);
    if (o->round != QS_RND_DEFAULT && o->round != f->default_round) ADD(":%s", qs_round_name(o->round));
    if (o->round == QS_RND_SR && o->seed) ADD(":seed=%llu", (unsigned long long)o->seed);
    if (f->has_scale_rule && o->scale_rule != QS_SCALE_FLOOR) {
        ADD(":%s", qs_scale_rule_name(o->scale_rule));
        if (o->scale_rule == QS_SCALE_UOS && o->uos_qmax > 0) ADD("=%g", o->uos_qmax);
    }
    if (o->block && (f->block <= 1 || o->block != f->block)) ADD(":b%d", o->block);
    if (a->gran != QS_GRAN_BLOCK && a->gran != QS_GRAN_TENSOR) ADD(":%s", qs_gran_name(a->gran));
    if (a->axis == 0) ADD(":axis0");
    if (o->sat) ADD(":sat");
    if (o->nvfp4 == QS_NVFP4_TORCHAO && (f->fopts & QS_FOPT_NVFP4_ORDER)) ADD(":torchao");
    if (o->m2x == QS_M2X_ES && (f->fopts & QS_FOPT_M2X_MODE)) ADD(":es");
    if (o->floor_log2f) ADD(":floor-log2f");
    if (o->zero_positive) ADD(":zero-positive");
    if (o->flush_subnormal_blocks) ADD(":flush-subnormal-blocks");
    if (o->nan_block_te) ADD(":nonfinite-block=te");
    if (o->zero_block_scale > 0) ADD(":zero-block-scale=%02x", o->zero_block_scale - 1);
    if (a->cscale) ADD(":scale=%s", qs_cscale_name(a->cscale));
#undef ADD
}
