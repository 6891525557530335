/* The one wording of a failed write (see io_err.h). */
#include "io_err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

const char *qs_io_reason(int err, char *buf, size_t cap)
{
    struct rlimit r;
    if (err == EFBIG && getrlimit(RLIMIT_FSIZE, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
        snprintf(buf, cap, "file size limit reached (ulimit -f is %llu KiB)", (unsigned long long)r.rlim_cur / 1024);
    else if (err == EFBIG)
        snprintf(buf, cap, "file too large (EFBIG)");
    else if (err == ENOSPC)
        snprintf(buf, cap, "no space left on device (ENOSPC)");
    else if (err == EDQUOT)
        snprintf(buf, cap, "disk quota exceeded (EDQUOT)");
    else
        snprintf(buf, cap, "%s", err ? strerror(err) : "unknown error");
    return buf;
}

int qs_write_fail(qs_err *e, const char *path, int err)
{
    char why[128];
    return qs_fail(e, "%s: cannot write: %s", path, qs_io_reason(err, why, sizeof why));
}
