/*
** The cache key of a stored analysis (see analyze_key.h).
*/
#include "analyze_key.h"

#include <jansson.h>

char *qs_quant_opts_json(const qs_apply *a)
{
    json_t *o = json_pack("{s:s,s:s,s:i,s:s,s:i,s:b}", "format", a->f->name, "round",
                          qs_round_name(a->o.round == QS_RND_DEFAULT ? a->f->default_round : a->o.round),
                          "block", (int)qs_format_block(a->f, &a->o), "gran", qs_gran_name(a->gran), "axis", a->axis,
                          "sat", a->o.sat);
    if (a->f->has_scale_rule) {
        json_object_set_new(o, "scale_rule", json_string(qs_scale_rule_name(a->o.scale_rule)));
        if (a->o.scale_rule == QS_SCALE_UOS && a->o.uos_qmax > 0) json_object_set_new(o, "uos_qmax", json_real(a->o.uos_qmax));
    }
    if (a->o.round == QS_RND_SR) json_object_set_new(o, "seed", json_integer((json_int_t)a->o.seed));
    if (a->f->fopts & QS_FOPT_NVFP4_ORDER) json_object_set_new(o, "nvfp4", json_string(a->o.nvfp4 ? "torchao" : "te"));
    if (a->f->fopts & QS_FOPT_M2X_MODE) json_object_set_new(o, "m2x", json_string(a->o.m2x ? "es" : "em"));
    /* library variants: recorded only when set, so the default options' JSON never changes */
    if (a->o.floor_log2f) json_object_set_new(o, "floor_log2f", json_true());
    if (a->o.zero_positive) json_object_set_new(o, "zero_positive", json_true());
    if (a->o.flush_subnormal_blocks) json_object_set_new(o, "flush_subnormal_blocks", json_true());
    if (a->o.nan_block_te) json_object_set_new(o, "nonfinite_block", json_string("te"));
    if (a->o.zero_block_scale > 0) json_object_set_new(o, "zero_block_scale", json_integer(a->o.zero_block_scale - 1));
    if (a->cscale) json_object_set_new(o, "scale", json_string(qs_cscale_name(a->cscale)));
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

char *qs_analysis_options_json(const qs_apply *a, int blocks)
{
    (void)blocks;
    return qs_quant_opts_json(a);
}
