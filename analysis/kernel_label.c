/*
** What a stored kernel experiment is, in a few words (see kernel_exp.h, qs_kx_label): a result of
** `qscope msd` or `qscope attn` covers many recipes, kernels and lengths, so its one `format`
** column ("int8", "fp32") would misname it.
*/
#include "kernel_exp.h"
#include "plot.h"

#include <stdio.h>
#include <string.h>

#define ADD(...) do { if (k < cap) k += (size_t)snprintf(buf + k, cap - k, __VA_ARGS__); } while (0)

/* smallest and largest finite number of a JSON array; 0 when it has none */
static int arr_range(json_t *a, double *lo, double *hi)
{
    size_t i;
    json_t *v;
    int any = 0;
    json_array_foreach(a, i, v) {
        if (!json_is_number(v)) continue;
        double d = json_number_value(v);
        if (!any || d < *lo) *lo = d;
        if (!any || d > *hi) *hi = d;
        any = 1;
    }
    return any;
}

/* msd: the recipes are the series without their "(distribution, ...)" suffix */
static size_t msd_recipes(json_t *ser)
{
    char seen[64][96];
    size_t n = 0, i;
    json_t *s;
    json_array_foreach(ser, i, s) {
        const char *nm = json_string_value(json_object_get(s, "name"));
        if (!nm) continue;
        char b[96];
        snprintf(b, sizeof b, "%s", nm);
        char *p = strrchr(b, '(');
        if (p && p > b && p[-1] == ' ' && strchr(p, ')')) p[-1] = 0;
        size_t j;
        for (j = 0; j < n && strcmp(seen[j], b); j++) {}
        if (j == n && n < 64) snprintf(seen[n++], sizeof seen[0], "%s", b);
    }
    return n;
}

void qs_kx_label(const char *kind, const char *options, const char *data, char *buf, size_t cap)
{
    size_t k = 0;
    if (cap) buf[0] = 0;
    json_t *o = options ? json_loads(options, 0, NULL) : NULL, *d = data ? json_loads(data, 0, NULL) : NULL;
    json_t *ser = json_object_get(d, "series"), *in = json_object_get(o, "input");
    size_t ns = json_is_array(ser) ? json_array_size(ser) : 0;
    const char *tensor = json_string_value(json_object_get(in, "tensor"));
    double lo = 0, hi = 0;
    const char *why = qs_plot_lines_json_problem(data);
    if (why) ADD("%s, malformed: %s", kind, why);
    else if (!strcmp(kind, "msd")) {
        /* passes: the largest x of any curve */
        size_t i;
        json_t *s;
        int any = 0;
        json_array_foreach(ser, i, s) {
            double a, b;
            if (arr_range(json_object_get(s, "x"), &a, &b) && (!any || b > hi)) { hi = b; any = 1; }
        }
        size_t nr = msd_recipes(ser);
        ADD("msd: %zu recipe%s", nr, nr == 1 ? "" : "s");
        if (any) ADD(" x %g pass%s", hi, hi == 1 ? "" : "es");
        if (tensor) ADD(", tensor %s", tensor);
        else if (json_is_integer(json_object_get(in, "M")))
            ADD(", GEMM %lldx%lldx%lld %s", (long long)json_integer_value(json_object_get(in, "M")),
                (long long)json_integer_value(json_object_get(in, "K")), (long long)json_integer_value(json_object_get(in, "N")),
                json_string_value(json_object_get(in, "dist")) ? json_string_value(json_object_get(in, "dist")) : "");
    } else if (!strcmp(kind, "attn")) {
        const char *kv = json_string_value(json_object_get(o, "kv"));
        int have = arr_range(json_object_get(in, "L"), &lo, &hi);
        if (!have && ns) have = arr_range(json_object_get(json_array_get(ser, 0), "x"), &lo, &hi);
        ADD("attn%s", json_is_true(json_object_get(in, "mla")) ? " MLA" : "");
        if (have && lo == hi) ADD(" L=%g", lo);
        else if (have) ADD(" L=%g..%g", lo, hi);
        if (kv && *kv) ADD(", KV %s", kv);
        ADD(", %zu kernel%s", ns, ns == 1 ? "" : "s");
    } else if (!strcmp(kind, "resq")) {
        const char *fl = json_string_value(json_object_get(o, "formats"));
        ADD("resq");
        if (fl) ADD(" %s", fl);
        else ADD(": %zu series", ns);
        if (tensor) ADD(", tensor %s", tensor);
        else if (json_is_integer(json_object_get(in, "m")))
            ADD(", %lldx%lld -> %lld", (long long)json_integer_value(json_object_get(in, "m")),
                (long long)json_integer_value(json_object_get(in, "d")), (long long)json_integer_value(json_object_get(in, "n")));
    } else ADD("%s: %zu series", kind, ns);
    json_decref(o);
    json_decref(d);
}
