/*
** Shared includes for the cmocka unit tests.  Each tests/unit/test_*.c is one executable that the
** runner executes from the tests/ directory (so fixtures are at "fixtures/...").
*/
#ifndef QS_TEST_UTIL_H
#define QS_TEST_UTIL_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Skip the running test for REASON, printed as a "# SKIP REASON" comment just before cmocka's own
** "not ok N # SKIP test" line: tests/run.sh reads it there.  Start REASON with a tag from tests/run.sh
** ("cpu: ...") when it holds on every machine, or `make test` counts the skip as a failure. */
#define tu_skip(reason) do { print_message("# SKIP %s\n", reason); skip(); } while (0)

/* Read a whole file into memory (tests only). */
static inline uint8_t *tu_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    *len = (size_t)(n > 0 ? n : 0);
    return b;
}
/* A mkstemp/mkdtemp template $TMPDIR/NAME-XXXXXX (/tmp without TMPDIR) in buf. */
static inline char *tu_tmp_template(char *buf, size_t cap, const char *name)
{
    const char *d = getenv("TMPDIR");
    snprintf(buf, cap, "%.200s/%s-XXXXXX", d && *d ? d : "/tmp", name);
    return buf;
}
#endif
