/*
** Numbers and outside text written to JSON (see json_out.h).
*/
#include "json_out.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text_escape.h"

#define NONFINITE_KEY "nonfinite_values"

json_t *qs_json_num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

void qs_json_set_num(json_t *o, const char *key, double v)
{
    json_object_set_new(o, key, qs_json_num(v));
    json_t *nf = json_object_get(o, NONFINITE_KEY);
    if (isfinite(v)) {
        if (json_is_object(nf)) json_object_del(nf, key);
        return;
    }
    if (!json_is_object(nf)) {
        nf = json_object();
        json_object_set_new(o, NONFINITE_KEY, nf);
    }
    json_object_set_new(nf, key, json_string(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"));
}

json_t *qs_json_add_nums(json_t *o, ...)
{
    va_list ap;
    va_start(ap, o);
    for (const char *k; (k = va_arg(ap, const char *)) != NULL;) {
        double v = va_arg(ap, double);
        if (o) qs_json_set_num(o, k, v);
    }
    va_end(ap);
    return o;
}

static double parse_word(const char *s)
{
    return !strcmp(s, "inf") ? INFINITY : !strcmp(s, "-inf") ? -INFINITY : NAN;
}

double qs_json_get_num(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (json_is_number(v)) return json_number_value(v);
    if (json_is_string(v)) return parse_word(json_string_value(v));
    json_t *why = json_object_get(json_object_get(o, NONFINITE_KEY), key);
    return json_is_string(why) ? parse_word(json_string_value(why)) : NAN;
}

void qs_json_fix_legacy_nums(json_t *o)
{
    const char *keys[64];
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        const char *w = json_string_value(v);
        if (w && n < 64 && (!strcmp(w, "inf") || !strcmp(w, "-inf") || !strcmp(w, "nan"))) keys[n++] = k;
    }
    for (size_t i = 0; i < n; i++) {
        char key[128];
        snprintf(key, sizeof key, "%s", keys[i]);   /* the key's storage goes with the old value's slot */
        qs_json_set_num(o, key, qs_json_get_num(o, key));
    }
}

json_t *qs_json_text(const char *s)
{
    if (!s) return json_null();
    if (qs_utf8_valid(s, strlen(s))) {
        json_t *j = json_string(s);
        if (j) return j;
    }
    char *esc = qs_escape_dup(s, 0);
    json_t *j = json_string(esc ? esc : "");
    free(esc);
    return j;
}

void qs_json_set_text(json_t *o, const char *key, const char *s)
{
    json_object_set_new(o, key, qs_json_text(s));
    if (!s) return;
    size_t n = strlen(s);
    if (qs_utf8_valid(s, n)) return;
    char k2[128];
    snprintf(k2, sizeof k2, "%s_bytes_hex", key);
    char *hex = malloc(2 * n + 1);
    if (!hex) return;
    for (size_t i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02x", (unsigned char)s[i]);
    json_object_set_new(o, k2, json_string(hex));
    free(hex);
}
