/*
** Streaming .npy writer (see npy_write.h).
**
** Output goes through write(2) in chunks of QS_NPY_WRITE_CHUNK elements, so memory stays bounded
** whatever the array size.  A regular-file target is written as ".NAME.tmp-PID-N" in the same directory
** (same file system, so rename(2) is atomic), fsync'ed, then renamed over NAME; on any failure
** the temporary file is removed and NAME is left as it was.  A process killed mid-write can leave
** the hidden temporary file behind, never a truncated NAME.
*/
#include "npy_write.h"
#include "io_err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "container.h"   /* QS_MAX_DIMS */

/* numpy's format.py constants: data aligned to ARRAY_ALIGN bytes; the header leaves room for the
** first axis to grow to GROWTH_AXIS_MAX_DIGITS digits. */
#define ARRAY_ALIGN 64
#define NPY_WRITEBACK ((uint64_t)8 << 20)   /* bytes between writeback starts */
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

int qs_npy_writer_open(qs_npy_writer *w, const char *path, const uint64_t *shape, int ndim, qs_err *e)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->to_stdout = strcmp(path, "-") == 0;
    w->path = path;
    w->name = w->to_stdout ? "<stdout>" : path;
    if (!*path) return qs_fail(e, "empty output file name");
    if (ndim < 0 || ndim > QS_MAX_DIMS)
        return qs_fail(e, "%s: cannot write a %d-dimensional array (at most %d dimensions)", w->name,
                       ndim, QS_MAX_DIMS);
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] != 0 && numel > UINT64_MAX / 4 / shape[i])
            return qs_fail(e, "%s: array too large to write", w->name);
        numel *= shape[i];
    }
    w->numel = numel;
    char header[1024];
    size_t hsize = qs_npy_header_f32(shape, ndim, header, sizeof header);
    if (hsize == 0) return qs_fail(e, "%s: cannot build the .npy header", w->name);
    struct stat st;
    if (w->to_stdout) {
        fflush(stdout);   /* anything printed through stdio must come before the array */
        w->fd = STDOUT_FILENO;
        w->direct = 1;
    } else if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        /* a device or FIFO (/dev/null, a pipe) is written in place: renaming over it would replace it */
        if ((w->fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
            return qs_fail(e, "%s: cannot open: %s", w->name, strerror(errno));
        w->direct = 1;
    } else if ((w->fd = open_temp(path, w->tmp, sizeof w->tmp)) < 0) {
        return qs_fail(e, "%s: cannot create a temporary file in its directory: %s", w->name, strerror(errno));
    }
    if (write_all(w->fd, header, hsize) != 0) {
        qs_write_fail(e, w->name, errno);
        qs_npy_writer_abort(w);
        return -1;
    }
    return 0;
}

int qs_npy_writer_put(qs_npy_writer *w, const float *y, size_t n, qs_err *e)
{
    if (n > w->numel - w->written) return qs_fail(e, "%s: more data than the array holds", w->name);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    uint32_t le[1024];   /* '<f4' is little-endian */
    for (size_t i = 0; i < n;) {
        size_t k = n - i < 1024 ? n - i : 1024;
        for (size_t j = 0; j < k; j++) { memcpy(&le[j], &y[i + j], 4); le[j] = __builtin_bswap32(le[j]); }
        if (write_all(w->fd, le, k * 4) != 0) return qs_write_fail(e, w->name, errno);
        i += k;
    }
#else
    if (write_all(w->fd, y, n * sizeof *y) != 0) return qs_write_fail(e, w->name, errno);
#endif
    w->written += n;
    /* start the disk writes behind us, so the fsync at close has little left to wait for */
    if (!w->direct && (w->written - w->flushed) * 4 >= NPY_WRITEBACK) {
        sync_file_range(w->fd, (off_t)(w->flushed * 4), (off_t)((w->written - w->flushed) * 4), SYNC_FILE_RANGE_WRITE);
        w->flushed = w->written;
    }
    return 0;
}

int qs_npy_writer_close(qs_npy_writer *w, qs_err *e)
{
    int rc = -1;
    if (w->written != w->numel) {
        qs_fail(e, "%s: %llu of %llu elements written", w->name, (unsigned long long)w->written,
                (unsigned long long)w->numel);
    } else if (w->direct) {
        rc = 0;
        if (!w->to_stdout) {
            int cfd = w->fd;
            w->fd = -1;
            if (close(cfd) != 0) rc = qs_write_fail(e, w->name, errno);
        }
    } else if (fsync(w->fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
        /* fsync before rename: otherwise a crash soon after could leave NAME renamed but empty. */
        qs_write_fail(e, w->name, errno);
    } else {
        int cfd = w->fd;
        w->fd = -1;
        if (close(cfd) != 0) qs_write_fail(e, w->name, errno);
        else if (rename(w->tmp, w->path) != 0) qs_fail(e, "%s: cannot replace it: %s", w->name, strerror(errno));
        else rc = 0;
    }
    if (rc) qs_npy_writer_abort(w);
    return rc;
}

void qs_npy_writer_abort(qs_npy_writer *w)
{
    if (w->to_stdout) return;
    if (w->direct) {
        if (w->fd >= 0) close(w->fd);
        w->fd = -1;
        return;
    }
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    if (w->tmp[0]) unlink(w->tmp);
    w->tmp[0] = 0;
}

int qs_npy_write_f32(const char *path, const uint64_t *shape, int ndim,
                     int (*fill)(void *ctx, uint64_t start, size_t n, float *out), void *ctx,
                     qs_err *e)
{
    qs_npy_writer w;
    if (qs_npy_writer_open(&w, path, shape, ndim, e)) return -1;
    size_t cap = w.numel < QS_NPY_WRITE_CHUNK ? (size_t)w.numel : QS_NPY_WRITE_CHUNK;
    float *buf = malloc((cap ? cap : 1) * sizeof *buf);
    if (!buf) { qs_npy_writer_abort(&w); return qs_fail(e, "%s: out of memory", w.name); }
    for (uint64_t start = 0; start < w.numel;) {
        size_t n = w.numel - start < cap ? (size_t)(w.numel - start) : cap;
        if (fill(ctx, start, n, buf) != 0) {
            qs_fail(e, "%s: producing the data failed (at element %llu)", w.name, (unsigned long long)start);
            goto fail;
        }
        if (qs_npy_writer_put(&w, buf, n, e)) goto fail;
        start += n;
    }
    free(buf);
    return qs_npy_writer_close(&w, e);
fail:
    free(buf);
    qs_npy_writer_abort(&w);
    return -1;
}
