/*
** qs_err: one-line error messages (see qs_err.h).
*/
#include "qs_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int qs_fail(qs_err *e, const char *fmt, ...)
{
    if (!e) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    /* Messages are one line: fold any newline a caller let through. */
    for (char *p = e->msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return -1;
}

void qs_err_prefix(qs_err *e, const char *prefix)
{
    if (!e || !prefix) return;
    char tmp[sizeof e->msg];
    snprintf(tmp, sizeof tmp, "%s: %s", prefix, e->msg);
    memcpy(e->msg, tmp, sizeof tmp);
}
