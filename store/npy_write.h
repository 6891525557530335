/*
** Streaming .npy writer: float32 arrays of any size, produced chunk by chunk by a callback.
**
** The file is a format 1.0 .npy with descr '<f4', C order, and a header padded exactly as
** numpy >= 1.24 pads it (room for the first axis to grow to 21 digits, data at a multiple of
** 64 bytes), so numpy.load reads it and numpy.save of the same array gives the same bytes.
** The data go to a temporary file in the target's directory that is renamed over the target only
** once complete, so a failure never leaves a partial file behind.
*/
#ifndef QS_NPY_WRITE_H
#define QS_NPY_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/qs_err.h"

/* Elements the writer asks `fill` for at a time (and so the size of its one buffer, x4 bytes). */
#define QS_NPY_WRITE_CHUNK ((size_t)1 << 20)

/* Write the array of shape[0..ndim) (0 <= ndim <= QS_MAX_DIMS; ndim 0 is a scalar) to `path`,
** or to standard output when path is "-" (written as it is produced: no temporary file; so is an
** existing path that is not a regular file, such as /dev/null or a FIFO, never replaced).
** `fill` is called with start = 0, n, 2n, ... in order and must write elements
** [start, start+n) in C order to out[0..n); it returns 0, or nonzero to abort the write.
** Returns 0, or -1 with e = "PATH: what is wrong" and no file created or changed at PATH.
** (When fill fails the message only says where; a caller with a better one can replace it.) */
int qs_npy_write_f32(const char *path, const uint64_t *shape, int ndim,
                     int (*fill)(void *ctx, uint64_t start, size_t n, float *out), void *ctx,
                     qs_err *e);

/* The same file written piece by piece, in order, by a producer that pushes its data (the
** parallel `quant`): open writes the header, put appends the next n elements, close checks that
** all were written then fsyncs and renames (or, failing, removes the temporary file, as abort does). */
typedef struct qs_npy_writer {
    int fd, to_stdout, direct;   /* direct: stdout, a device or a FIFO, written in place */
    const char *path, *name;
    uint64_t numel, written, flushed;   /* flushed: elements whose writeback was started */
    char tmp[4096];
} qs_npy_writer;
int qs_npy_writer_open(qs_npy_writer *w, const char *path, const uint64_t *shape, int ndim, qs_err *e);
int qs_npy_writer_put(qs_npy_writer *w, const float *y, size_t n, qs_err *e);
int qs_npy_writer_close(qs_npy_writer *w, qs_err *e);
void qs_npy_writer_abort(qs_npy_writer *w);

/* The complete header (magic to '\n') for such an array into buf[0..cap); returns its length (a
** multiple of 64), or 0 if it does not fit or ndim is out of range. */
size_t qs_npy_header_f32(const uint64_t *shape, int ndim, char *buf, size_t cap);

#endif
