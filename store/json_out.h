/*
** How qscope writes numbers and outside text into JSON, the same in every --json output and in
** stored results.
**
** Numbers: a finite value is a JSON number; a non-finite one is null, and the object holding it
** gets "nonfinite_values": {"<field>": "inf" | "-inf" | "nan"} so a reader sees why (a field never
** mixes numbers and strings).  In arrays a non-finite element is null.
**
** Text from files, users or logs (tensor, file and run names, log fields): valid UTF-8 is written
** as is (JSON escapes control characters itself); invalid UTF-8 is written escaped as in
** text_escape.h, and the object gets "<field>_bytes_hex" with the exact bytes, so nothing is
** dropped and nothing is lost.
*/
#ifndef QS_JSON_OUT_H
#define QS_JSON_OUT_H

#include <jansson.h>

/* A finite v as a JSON real, anything else as null. */
json_t *qs_json_num(double v);
/* o[key] = v; a non-finite v is null with its reason in o["nonfinite_values"][key]. */
void qs_json_set_num(json_t *o, const char *key, double v);
/* qs_json_set_num for each (const char *key, double value) pair up to a NULL key; returns o. */
json_t *qs_json_add_nums(json_t *o, ...);
/* The inverse: o[key] as a double, non-finite values restored from "nonfinite_values" (and from
** the strings "inf"/"-inf" of results stored by earlier versions); NAN when absent or null. */
double qs_json_get_num(const json_t *o, const char *key);
/* Rewrite the strings "inf" / "-inf" / "nan" that results stored by earlier builds hold as
** numbers into the form above (null plus reason), in place. */
void qs_json_fix_legacy_nums(json_t *o);

/* s as a JSON string, escaped when it is not valid UTF-8; NULL s gives null. */
json_t *qs_json_text(const char *s);
/* o[key] = qs_json_text(s), plus o[key "_bytes_hex"] when s is not valid UTF-8. */
void qs_json_set_text(json_t *o, const char *key, const char *s);

#endif
