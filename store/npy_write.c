/*
** Streaming .npy writer (see npy_write.h).
**
** Output goes through write(2) in chunks of QS_NPY_WRITE_CHUNK elements, so memory stays bounded
** whatever the array size.  A file target is written as ".NAME.tmp-PID-N" in the same directory
** (same file system, so rename(2) is atomic), fsync'ed, then renamed over NAME; on any failure
** the temporary file is removed and NAME is left as it was.  A process killed mid-write can leave
** the hidden temporary file behind, never a truncated NAME.
*/
#include "npy_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "container.h"   /* QS_MAX_DIMS */

/* numpy's format.py constants: data aligned to ARRAY_ALIGN bytes; the header leaves room for the
** first axis to grow to GROWTH_AXIS_MAX_DIGITS digits. */
#define ARRAY_ALIGN 64
#define GROWTH_AXIS_MAX_DIGITS 21

size_t qs_npy_header_f32(const uint64_t *shape, int ndim, char *buf, size_t cap)
{
    if (ndim < 0 || ndim > QS_MAX_DIMS) return 0;
    /* The dict text, keys sorted, with Python's repr of the shape tuple: "()", "(3,)", "(2, 3)". */
    char dict[512];
    size_t len = (size_t)snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < ndim; i++)
        len += (size_t)snprintf(dict + len, sizeof dict - len, "%s%llu", i ? ", " : "",
                                (unsigned long long)shape[i]);
    len += (size_t)snprintf(dict + len, sizeof dict - len, "%s), }", ndim == 1 ? "," : "");
    if (ndim > 0) {
        int digits = snprintf(NULL, 0, "%llu", (unsigned long long)shape[0]);
        for (int i = digits; i < GROWTH_AXIS_MAX_DIGITS; i++) dict[len++] = ' ';
    }
    /* Like numpy's _wrap_header: padlen is in 1..64 (64, not 0, when already aligned). */
    size_t hlen = len + 1;
    size_t padlen = ARRAY_ALIGN - ((10 + hlen) % ARRAY_ALIGN);
    size_t total = 10 + hlen + padlen;
    if (total > cap || hlen + padlen > 0xffff) return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)((hlen + padlen) & 0xff);
    buf[9] = (char)((hlen + padlen) >> 8);
    memcpy(buf + 10, dict, len);
    memset(buf + 10 + len, ' ', padlen);
    buf[total - 1] = '\n';
    return total;
}

/* write(2) all of buf, retrying short writes and EINTR.  0 or -1 with errno set. */
static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Create the temporary file beside `path`; its name goes to tmp[0..cap). */
static int open_temp(const char *path, char *tmp, size_t cap)
{
    static atomic_uint counter;   /* distinct names for threads of one process */
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    const char *base = slash ? slash + 1 : path;
    for (int attempt = 0; attempt < 100; attempt++) {
        int n = snprintf(tmp, cap, "%.*s.%s.tmp-%ld-%u", dirlen, path, base, (long)getpid(),
                         atomic_fetch_add(&counter, 1u));
        if (n < 0 || (size_t)n >= cap) { errno = ENAMETOOLONG; return -1; }
        /* 0666 so the finished file gets the usual umask-derived mode, as fopen would give. */
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

int qs_npy_write_f32(const char *path, const uint64_t *shape, int ndim,
                     int (*fill)(void *ctx, uint64_t start, size_t n, float *out), void *ctx,
                     qs_err *e)
{
    int to_stdout = strcmp(path, "-") == 0;
    const char *name = to_stdout ? "<stdout>" : path;
    if (!*path) return qs_fail(e, "empty output file name");
    if (ndim < 0 || ndim > QS_MAX_DIMS)
        return qs_fail(e, "%s: cannot write a %d-dimensional array (at most %d dimensions)", name,
                       ndim, QS_MAX_DIMS);
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] != 0 && numel > UINT64_MAX / 4 / shape[i])
            return qs_fail(e, "%s: array too large to write", name);
        numel *= shape[i];
    }

    char header[1024];
    size_t hsize = qs_npy_header_f32(shape, ndim, header, sizeof header);
    if (hsize == 0) return qs_fail(e, "%s: cannot build the .npy header", name);

    size_t cap = numel < QS_NPY_WRITE_CHUNK ? (size_t)numel : QS_NPY_WRITE_CHUNK;
    float *buf = malloc((cap ? cap : 1) * sizeof *buf);
    if (!buf) return qs_fail(e, "%s: out of memory", name);

    char tmp[4096];
    int fd;
    if (to_stdout) {
        fflush(stdout);   /* anything printed through stdio must come before the array */
        fd = STDOUT_FILENO;
    } else {
        fd = open_temp(path, tmp, sizeof tmp);
        if (fd < 0) {
            int err = errno;
            free(buf);
            return qs_fail(e, "%s: cannot create a temporary file in its directory: %s", name, strerror(err));
        }
    }

    int rc = -1;
    if (write_all(fd, header, hsize) != 0) {
        qs_fail(e, "%s: write failed: %s", name, strerror(errno));
        goto done;
    }
    for (uint64_t start = 0; start < numel;) {
        size_t n = numel - start < cap ? (size_t)(numel - start) : cap;
        if (fill(ctx, start, n, buf) != 0) {
            qs_fail(e, "%s: producing the data failed (at element %llu)", name,
                    (unsigned long long)start);
            goto done;
        }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        for (size_t i = 0; i < n; i++) {   /* '<f4' is little-endian */
            uint32_t w;
            memcpy(&w, &buf[i], 4);
            w = __builtin_bswap32(w);
            memcpy(&buf[i], &w, 4);
        }
#endif
        if (write_all(fd, buf, n * sizeof *buf) != 0) {
            qs_fail(e, "%s: write failed: %s", name, strerror(errno));
            goto done;
        }
        start += n;
    }
    if (!to_stdout) {
        /* fsync before rename: otherwise a crash soon after could leave NAME renamed but empty. */
        if (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
            qs_fail(e, "%s: write failed: %s", name, strerror(errno));
            goto done;
        }
        int cfd = fd;
        fd = -1;
        if (close(cfd) != 0) {
            qs_fail(e, "%s: write failed: %s", name, strerror(errno));
            goto done;
        }
        if (rename(tmp, path) != 0) {
            qs_fail(e, "%s: cannot replace it: %s", name, strerror(errno));
            goto done;
        }
    }
    rc = 0;

done:
    if (!to_stdout) {
        if (fd >= 0) close(fd);
        if (rc != 0) unlink(tmp);
    }
    free(buf);
    return rc;
}
