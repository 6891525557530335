/*
** Tensor containers: what a parser finds in one file (.npy, .npz, .safetensors, .gguf).
**
** Parsers work on an in-memory view of the whole file (usually an mmap) and never trust a size
** that the file merely claims: every offset and length is checked against the view before use,
** every product of dimensions is checked for overflow, and nothing is allocated in proportion to
** a header count until the bytes backing it have been seen.  A parser either fills a complete
** qs_container and returns 0, or returns -1 with a qs_err message "what is wrong (at byte N)"
** and leaves nothing allocated.  Parsers treat *c as uninitialised and overwrite it.
**
** `--as` (qs_parse_opts.reinterpret) applies only to raw words (u1/i1/u2/i2/V1/V2/f1 in .npy);
** typed floats and type-name descrs keep their own dtype.
*/
#ifndef QS_CONTAINER_H
#define QS_CONTAINER_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/dtype.h"
#include "../kernels/qs_err.h"

#define QS_MAX_DIMS 8

typedef enum qs_codec {
    QS_CODEC_NONE = 0,    /* bytes lie at [offset, offset+nbytes) of the file */
    QS_CODEC_DEFLATE = 1, /* raw deflate stream at [comp_offset, comp_offset+comp_size); the
                          ** tensor bytes are [offset, offset+nbytes) of the *inflated* stream */
} qs_codec;

typedef struct qs_tdesc {
    char     *name;               /* name inside the container ("" for a bare .npy) */
    qs_dtype  dtype;
    int       ndim;               /* 0 = scalar */
    uint64_t  shape[QS_MAX_DIMS]; /* logical shape, outermost first (C order), as the user knows it */
    uint64_t  numel;
    int       fortran;            /* 1: bytes are column-major (npy fortran_order) */
    uint64_t  offset;             /* see qs_codec */
    uint64_t  nbytes;             /* exact data size, checked against dtype and shape */
    qs_codec  codec;
    uint64_t  comp_offset, comp_size, inflated_size;  /* DEFLATE only */
    char     *meta_json;          /* per-tensor metadata as a JSON object text, or NULL */
} qs_tdesc;

typedef struct qs_container {
    char      kind[16];           /* "npy", "npz", "safetensors", "gguf" */
    qs_tdesc *t;
    size_t    n, cap;
    char     *meta_json;          /* container metadata as a JSON object text, or NULL */
    char    **warnings;           /* non-fatal notes (e.g. a GGUF tensor of an unsupported type skipped) */
    size_t    nwarn;
} qs_container;

/* Options that change how raw words are read. */
typedef struct qs_parse_opts {
    /* For .npy/.npz members holding raw 8- or 16-bit words (u1/i1/V1/u2/i2/V2): reinterpret them as
    ** this dtype (QS_DT_BF16, QS_DT_F16, QS_DT_F8_E4M3, QS_DT_F8_E5M2, QS_DT_F8_E8M0), or
    ** QS_DT_INVALID to keep integers.  Must match the word width, else the parse fails. */
    qs_dtype reinterpret;
} qs_parse_opts;

/* Parse one file held in buf[0..len).  `kind` selects the parser; qs_parse_any sniffs the magic
** (and falls back to the file-name extension for .safetensors, which has no magic). */
int qs_parse_npy(const uint8_t *buf, size_t len, const qs_parse_opts *o, qs_container *c, qs_err *e);
int qs_parse_npz(const uint8_t *buf, size_t len, const qs_parse_opts *o, qs_container *c, qs_err *e);
int qs_parse_safetensors(const uint8_t *buf, size_t len, const qs_parse_opts *o, qs_container *c, qs_err *e);
int qs_parse_gguf(const uint8_t *buf, size_t len, const qs_parse_opts *o, qs_container *c, qs_err *e);
int qs_parse_any(const uint8_t *buf, size_t len, const char *filename, const qs_parse_opts *o,
                 qs_container *c, qs_err *e);

/* Parse the open file fd of len bytes: an .npy or a .safetensors reads only its header (so a file of
** any size is parsed without mapping it); the other kinds are mapped for the parse and unmapped again.
** The container never points into the file's bytes. */
int qs_parse_npy_fd(int fd, uint64_t len, const qs_parse_opts *o, qs_container *c, qs_err *e);
int qs_parse_safetensors_fd(int fd, uint64_t len, const qs_parse_opts *o, qs_container *c, qs_err *e);
/* The first n bytes of fd (fewer at end of file or on an error, errno then set): for the parsers
** that read a header through a descriptor instead of mapping the whole file. */
size_t qs_pread_head(int fd, uint8_t *buf, size_t n);
int qs_parse_fd(int fd, uint64_t len, const char *filename, const qs_parse_opts *o, qs_container *c, qs_err *e);

/* Parse an .npy header that starts at buf (used by the npz parser on an inflated prefix).
** On success sets *data_off to the offset of the array bytes relative to buf, and fills the
** dtype/shape/fortran/numel/nbytes fields of *t (name untouched).  avail = bytes present. */
int qs_npy_header(const uint8_t *buf, size_t avail, const qs_parse_opts *o, qs_tdesc *t,
                  uint64_t *data_off, qs_err *e);

/* Container helpers shared by the parsers. */
qs_tdesc *qs_container_add(qs_container *c, qs_err *e);   /* zeroed slot, or NULL on OOM */
int qs_container_warn(qs_container *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void qs_container_free(qs_container *c);

/* Open path read-only, refusing anything but a regular file before a read could block (a FIFO, a
** device): the descriptor (blocking again), or -1 with "PATH: ..." in e. */
int qs_open_regular(const char *path, qs_err *e);

/* A whole regular, non-empty file mapped read-only (the model loaders and `llm text`); errors name the file. */
typedef struct qs_file_map { const uint8_t *p; size_t n; } qs_file_map;
int qs_file_map_open(const char *path, qs_file_map *m, qs_err *e);
void qs_file_map_close(qs_file_map *m);

/* How many bytes of s a message shows when it keeps at most max: never ends inside a UTF-8
** character.  QS_CLIP(s, max) gives the two arguments of a "%.*s". */
int qs_clip_utf8(const char *s, int max);
#define QS_CLIP(s, max) qs_clip_utf8((s), (max)), (s)

/* shape product with overflow check: 0 ok, -1 overflow */
int qs_shape_numel(const uint64_t *shape, int ndim, uint64_t *numel);

/* Inflate a raw deflate stream; writes at most `cap` bytes of output into out, returns the number
** written in *got.  Stops early without error once `cap` bytes are produced. */
int qs_inflate_prefix(const uint8_t *src, size_t srclen, uint8_t *out, size_t cap, size_t *got, qs_err *e);

/* Inflate a whole raw deflate stream through the scratch buffer work[0..cap), giving the CRC-32
** of the output and its length in *got.  A stream that does not end is "truncated". */
int qs_inflate_crc(const uint8_t *src, size_t srclen, uint8_t *work, size_t cap, uint32_t *crc, uint64_t *got,
                   qs_err *e);

#endif
