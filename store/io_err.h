/*
** One wording for a failed write, whoever writes: SQLite, the .npy writer, PNG plots, reports, text
** outputs.  The OS reason is always said, and the two a user can act on are spelled out: the
** file-size limit (`ulimit -f`, EFBIG; SIGXFSZ is ignored in main) and a full disk (ENOSPC).
*/
#ifndef QS_IO_ERR_H
#define QS_IO_ERR_H

#include <stddef.h>

#include "../kernels/qs_err.h"

/* The reason for errno value err: "file size limit reached (ulimit -f is 16 KiB)", "no space left on
** device (ENOSPC)", else strerror(err).  Written into buf (cap bytes), which is returned. */
const char *qs_io_reason(int err, char *buf, size_t cap);

/* qs_fail(e, "PATH: cannot write: REASON"): the one message of every file writer. */
int qs_write_fail(qs_err *e, const char *path, int err);

#endif
