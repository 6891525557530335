/*
** qs_err: the one error-reporting convention of qscope.
**
** Every fallible function takes a `qs_err *` and returns 0 on success or -1 on failure, after
** writing a one-line message into it.  Parsers write "what is wrong (at byte N)"; the caller that
** knows the file name prefixes it, so the user sees `FILE: what is wrong (at byte N)`.
*/
#ifndef QS_ERR_H
#define QS_ERR_H

#include <stddef.h>

typedef struct qs_err {
    char msg[600];
} qs_err;

/* Set the message (printf-style).  Always returns -1 so callers can `return qs_fail(e, ...)`. */
int qs_fail(qs_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefix the existing message with "PREFIX: " (used to add the file name). */
void qs_err_prefix(qs_err *e, const char *prefix);

#endif
