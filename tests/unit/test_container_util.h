/*
** Helpers shared by the safetensors and GGUF reader tests: load a fixture, and check a parsed
** container against the fixture script's NAME.expected.json (names, dtypes, shapes, sizes, ranges
** inside the file, and every decoded value).
*/
#ifndef QS_TEST_CONTAINER_UTIL_H
#define QS_TEST_CONTAINER_UTIL_H

#include "test_util.h"

#include <jansson.h>
#include <math.h>

#include "../../store/container.h"

static uint8_t *slurp(const char *path, size_t *len)
{
    uint8_t *b = tu_slurp(path, len);
    if (!b) fail_msg("cannot read %s", path);
    return b;
}

/* got == want (NaN: null, infinities: "inf"/"-inf"; the sign of zero counts), allowing one ulp for
** an FMA-contracted a*b+c. */
static int same_float(float got, const json_t *want)
{
    if (json_is_null(want)) return isnan(got);
    if (json_is_string(want)) return isinf(got) && (got > 0) == (strcmp(json_string_value(want), "inf") == 0);
    float w = (float)json_number_value(want);
    if (got == w) return signbit(got) == signbit(w);
    return nextafterf(w, got) == got;
}

/* The container matches the fixture script's expectations; data ranges lie inside the file. */
static void check_container(const qs_container *c, const uint8_t *buf, size_t len, const json_t *x)
{
    const json_t *tens = json_object_get(x, "tensors");
    assert_int_equal(c->n, json_array_size(tens));
    assert_int_equal(c->nwarn, json_integer_value(json_object_get(x, "warnings")));
    for (size_t i = 0; i < c->n; i++) {
        const qs_tdesc *t = &c->t[i];
        const json_t *w = json_array_get(tens, i);
        const json_t *shape = json_object_get(w, "shape"), *vals = json_object_get(w, "values");
        assert_string_equal(t->name, json_string_value(json_object_get(w, "name")));
        assert_string_equal(qs_dtype_get(t->dtype)->name, json_string_value(json_object_get(w, "dtype")));
        assert_int_equal(t->ndim, json_array_size(shape));
        for (int d = 0; d < t->ndim; d++) assert_int_equal(t->shape[d], json_integer_value(json_array_get(shape, (size_t)d)));
        assert_int_equal(t->numel, json_array_size(vals));
        assert_int_equal(t->nbytes, json_integer_value(json_object_get(w, "nbytes")));
        assert_int_equal(t->codec, QS_CODEC_NONE);
        assert_true(t->offset <= len && t->nbytes <= len - t->offset);

        const qs_dtype_traits *tr = qs_dtype_get(t->dtype);
        float *y = calloc(t->numel + 1, sizeof *y);
        assert_non_null(y);
        tr->decode(buf + t->offset, y, (size_t)(t->numel / tr->block_elems));
        for (size_t k = 0; k < t->numel; k++)
            if (!same_float(y[k], json_array_get(vals, k))) {
                char *s = json_dumps(json_array_get(vals, k), JSON_ENCODE_ANY);
                fail_msg("%s[%zu]: decoded %.9g, expected %s", t->name, k, (double)y[k], s);
            }
        free(y);
    }

    const json_t *meta = json_object_get(x, "meta");
    if (json_is_null(meta)) {
        assert_null(c->meta_json);
        return;
    }
    assert_non_null(c->meta_json);
    json_error_t je;
    json_t *got = json_loads(c->meta_json, 0, &je);
    assert_non_null(got);
    if (!json_equal(got, meta)) {
        const char *k;
        json_t *v;
        json_object_foreach(got, k, v)
            if (!json_equal(v, json_object_get(meta, k))) {
                char *a = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
                fail_msg("meta '%s' = %s differs from the expected value", k, a);
            }
        fail_msg("meta_json %s differs from the expected metadata", c->meta_json);
    }
    const json_t *order = json_object_get(x, "meta_order");   /* keys stay in file order */
    const char *k;
    json_t *v;
    size_t i = 0;
    json_object_foreach(got, k, v) assert_string_equal(k, json_string_value(json_array_get(order, i++)));
    assert_int_equal(i, json_array_size(order));
    json_decref(got);
}

typedef int (*tu_parse_fn)(const uint8_t *buf, size_t len, const qs_parse_opts *o, qs_container *c, qs_err *e);

/* The file is refused: -1, one line carrying phrase and a byte position, nothing left allocated. */
static void check_refused(tu_parse_fn parse, const char *path, const char *phrase)
{
    size_t len;
    uint8_t *buf = slurp(path, &len);
    qs_container c;
    qs_err e = {{0}};
    if (parse(buf, len, NULL, &c, &e) != -1) fail_msg("%s: parsed, expected an error", path);
    if (!strstr(e.msg, phrase) || !strstr(e.msg, "(at byte "))
        fail_msg("%s: message \"%s\" lacks \"%s\" or \"(at byte \"", path, e.msg, phrase);
    assert_null(strchr(e.msg, '\n'));
    assert_int_equal(c.n, 0);
    assert_null(c.t);
    assert_null(c.meta_json);
    assert_null(c.warnings);
    free(buf);
}

/* Overwrite each byte of each file with each of vals: the parser either succeeds with ranges inside
** the file or fails with a positioned message; never crashes (run under ASan/UBSan). */
static void check_mutations(tu_parse_fn parse, const char *const *files, size_t nfiles, const uint8_t *vals,
                            size_t nvals)
{
    for (size_t f = 0; f < nfiles; f++) {
        size_t len;
        uint8_t *buf = slurp(files[f], &len);
        uint8_t *p = malloc(len);
        for (size_t i = 0; i < len; i++)
            for (size_t v = 0; v < nvals; v++) {
                memcpy(p, buf, len);
                p[i] = vals[v];
                qs_container c;
                qs_err e = {{0}};
                if (parse(p, len, NULL, &c, &e) == 0) {
                    for (size_t t = 0; t < c.n; t++)
                        assert_true(c.t[t].offset <= len && c.t[t].nbytes <= len - c.t[t].offset);
                    qs_container_free(&c);
                } else if (!strstr(e.msg, "(at byte ")) {
                    fail_msg("%s byte %zu = 0x%02x: \"%s\"", files[f], i, vals[v], e.msg);
                }
            }
        free(p);
        free(buf);
    }
}

#endif
