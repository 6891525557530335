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
    /* Messages are one line, and names copied from files may hold terminal escapes: fold every
    ** control byte to a space. */
    for (char *p = e->msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = ' ';
    return -1;
}

void qs_err_prefix(qs_err *e, const char *prefix)
{
    if (!e || !prefix) return;
    char tmp[sizeof e->msg];
    size_t n = strlen(prefix);
    if (n > sizeof tmp - 3) n = sizeof tmp - 3;
    memcpy(tmp, prefix, n);
    tmp[n] = ':';
    tmp[n + 1] = ' ';
    size_t room = sizeof tmp - n - 3, m = strlen(e->msg);
    if (m > room) m = room;
    memcpy(tmp + n + 2, e->msg, m);
    tmp[n + 2 + m] = 0;
    memcpy(e->msg, tmp, sizeof tmp);
}
