/*
** Shared by the .npy and .npz reader tests: a fixture read and parsed in one step, and the check
** of a refusal (one line with the phrase and a byte position, nothing left behind).
*/
#ifndef QS_TEST_LOADED_UTIL_H
#define QS_TEST_LOADED_UTIL_H

#include "test_util.h"

#include "../../store/container.h"

typedef struct loaded {
    uint8_t     *buf;
    size_t       len;
    qs_container c;
    qs_err       e;
    int          rc;
} loaded;

static inline void load_with(loaded *l, const char *path, qs_dtype re,
                             int (*parse)(const uint8_t *, size_t, const qs_parse_opts *, qs_container *, qs_err *))
{
    memset(l, 0, sizeof *l);
    l->buf = tu_slurp(path, &l->len);
    assert_non_null(l->buf);
    qs_parse_opts o = {re};
    l->rc = parse(l->buf, l->len, &o, &l->c, &l->e);
}

static inline void unload(loaded *l)
{
    qs_container_free(&l->c);
    free(l->buf);
}

static inline void assert_err(const qs_err *e, const qs_container *c, const char *phrase)
{
    if (!strstr(e->msg, phrase)) fail_msg("error '%s' lacks '%s'", e->msg, phrase);
    if (!strstr(e->msg, "(at byte ")) fail_msg("error '%s' lacks '(at byte '", e->msg);
    assert_null(strchr(e->msg, '\n'));
    /* a failed parse leaves nothing behind */
    assert_int_equal(c->n, 0);
    assert_null(c->t);
    assert_int_equal(c->nwarn, 0);
    assert_null(c->warnings);
    assert_string_equal(c->kind, "");
}

/* fixtures/bad/FILE is refused with phrase, at byte `at` when at >= 0. */
static inline void check_bad_file(const char *file, const char *phrase, long at,
                                  int (*parse)(const uint8_t *, size_t, const qs_parse_opts *, qs_container *, qs_err *))
{
    char path[256], pos[64];
    snprintf(path, sizeof path, "fixtures/bad/%s", file);
    loaded l;
    load_with(&l, path, QS_DT_INVALID, parse);
    if (l.rc == 0) fail_msg("%s parsed", path);
    assert_err(&l.e, &l.c, phrase);
    if (at >= 0) {
        snprintf(pos, sizeof pos, "(at byte %ld)", at);
        if (!strstr(l.e.msg, pos)) fail_msg("%s: '%s' lacks '%s'", file, l.e.msg, pos);
    }
    unload(&l);
}

#endif
