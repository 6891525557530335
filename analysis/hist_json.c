/*
** Reading a stored histogram back (see hist_json.h).  Log2 histograms are stored with their edges
** as exponents; older or foreign files may hold the edges as magnitudes, which is detected from
** their spacing.
*/
#include "hist_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int qs_hist_from_json(json_t *H, qs_hist *h)
{
    memset(h, 0, sizeof *h);
    json_t *edges = json_object_get(H, "edges"), *counts = json_object_get(H, "counts");
    const char *scale = json_string_value(json_object_get(H, "scale"));
    size_t n = json_array_size(counts);
    if (!json_is_array(edges) || !json_is_array(counts) || n == 0 || json_array_size(edges) != n + 1 || !scale) return -1;
    double e0 = json_number_value(json_array_get(edges, 0)), e1 = json_number_value(json_array_get(edges, 1));
    double en = json_number_value(json_array_get(edges, n));
    h->nbins = (int)n;
    if (!strcmp(scale, "log2")) {
        h->kind = 0;
        double e2 = n >= 2 ? json_number_value(json_array_get(edges, 2)) : e1 + (e1 - e0);
        int arithmetic = fabs((e2 - e1) - (e1 - e0)) <= 1e-9 * fmax(1, fabs(e1 - e0));
        if (arithmetic || e0 <= 0) { h->lo = e0; h->hi = en; }
        else { h->lo = log2(e0); h->hi = log2(en); }
    } else if (!strcmp(scale, "code")) {
        h->kind = 2; h->lo = e0; h->hi = en;
    } else {
        h->kind = 1; h->lo = e0; h->hi = en;
    }
    h->counts = calloc(n, sizeof *h->counts);
    if (!h->counts) return -1;
    for (size_t i = 0; i < n; i++) h->counts[i] = (uint64_t)json_number_value(json_array_get(counts, i));
    h->zero = (uint64_t)json_number_value(json_object_get(H, "zero"));
    h->under = (uint64_t)json_number_value(json_object_get(H, "under"));
    h->over = (uint64_t)json_number_value(json_object_get(H, "over"));
    h->nonfinite = (uint64_t)json_number_value(json_object_get(H, "nonfinite"));
    return 0;
}
