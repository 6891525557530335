/*
** The analysis' stored texts: the "metrics" and "hist" kinds of results.h (metrics.h describes them).
*/
#include "metrics.h"

#include <math.h>

#include <jansson.h>

#include "../store/json_out.h"

static json_t *metrics_obj(const qs_metrics *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "n", json_integer((json_int_t)m->n));
    json_object_set_new(o, "n_finite", json_integer((json_int_t)m->n_finite));
/* non-finite values: null plus the reason in "nonfinite_values" (store/json_out.h) */
#define R(k) qs_json_set_num(o, #k, m->k)
    R(mse); R(rmse); R(sqnr_db); R(eff_bits_energy); R(eff_bits_sqnr); R(max_abs_err); R(max_rel_err);
    R(mean_rel_err); R(rel_floor); R(mean_err); R(cosine); R(underflow_frac); R(clip_frac); R(nonfinite_frac);
    R(bits_per_elem); R(sum_x2); R(sum_e2);
#undef R
    /* shares of the finite error energy (metrics.h); null as a whole when there is no finite error */
    json_t *ee = json_null();
    if (isfinite(m->err_under) && isfinite(m->err_clip) && isfinite(m->err_round)) {
        ee = json_object();
        qs_json_set_num(ee, "underflow", m->err_under);
        qs_json_set_num(ee, "clip", m->err_clip);
        qs_json_set_num(ee, "rounding", m->err_round);
    }
    json_object_set_new(o, "err_energy", ee);
    return o;
}

char *qs_metrics_json(const qs_metrics *m)
{
    json_t *o = metrics_obj(m);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(o);
    return s;
}

static json_t *hist_obj(const qs_hist *h)
{
    if (h->nbins <= 0 || !h->counts) return json_null();
    static const char *const scale[] = {"log2", "linear", "code"};
    json_t *o = json_object(), *ed = json_array(), *ct = json_array();
    json_object_set_new(o, "scale", json_string(h->kind >= 0 && h->kind < 3 ? scale[h->kind] : "?"));
    for (int i = 0; i <= h->nbins; i++) {
        double v = h->lo + (h->hi - h->lo) * (double)i / (double)h->nbins;
        json_array_append_new(ed, h->kind == 2 ? json_integer((json_int_t)v) : json_real(v));
    }
    for (int i = 0; i < h->nbins; i++) json_array_append_new(ct, json_integer((json_int_t)h->counts[i]));
    json_object_set_new(o, "edges", ed);
    json_object_set_new(o, "counts", ct);
    json_object_set_new(o, "zero", json_integer((json_int_t)h->zero));
    json_object_set_new(o, "under", json_integer((json_int_t)h->under));
    json_object_set_new(o, "over", json_integer((json_int_t)h->over));
    json_object_set_new(o, "nonfinite", json_integer((json_int_t)h->nonfinite));
    return o;
}

char *qs_hists_json(const qs_analysis *an)
{
    json_t *o = json_object();
    json_object_set_new(o, "value", hist_obj(&an->value));
    json_object_set_new(o, "abs_err", hist_obj(&an->abs_err));
    json_object_set_new(o, "rel_err", hist_obj(&an->rel_err));
    json_object_set_new(o, "ulp_err", hist_obj(&an->ulp_err));
    json_object_set_new(o, "scale_code", hist_obj(&an->scale_code));
    json_object_set_new(o, "block_err", hist_obj(&an->block_err));
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}
