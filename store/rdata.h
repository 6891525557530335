/*
** Reading text out of an R lazy-load database (the `data/Rdata.rdb` + `Rdata.rdx` pair of an R
** package), as Debian's r-cran-janeaustenr ships Jane Austen's novels.
**
** Layout (R's lazyLoadDBfetch / saveRDS, XDR serialization "X\n", version 2 or 3):
**   .rdx: an R serialization (gzip-, zlib- or un-compressed) of list(variables = list(NAME = c(offset,
**         length), ...), references, compressed);
**   .rdb: blobs at those offsets, each a 4-byte big-endian *uncompressed* length followed by a
**         zlib stream of an R serialization; a book is a character vector (STRSXP) of lines.
** Both files are untrusted: every length is checked against the bytes present, inflated output
** grows with what the stream really produces (never the size a header claims), nesting is bounded.
*/
#ifndef QS_RDATA_H
#define QS_RDATA_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/qs_err.h"

typedef struct qs_rdb_entry {
    char name[64];        /* the R object name (e.g. "persuasion") */
    uint64_t off, len;    /* the blob in the .rdb */
} qs_rdb_entry;

/* Parse an .rdx index image: the `variables` entries, in file order.  *out is malloc'd. */
int qs_rdx_parse(const uint8_t *buf, size_t len, qs_rdb_entry **out, size_t *n, qs_err *e);

/* The character vector in the blob [off, off+blen) of an .rdb image, as text: the lines joined
** into paragraphs (see qs_rtext_join).  *text is malloc'd, NUL-terminated, *tlen bytes. */
int qs_rdb_text(const uint8_t *rdb, size_t len, uint64_t off, uint64_t blen, char **text, size_t *tlen,
                size_t *nlines, qs_err *e);

/* Join lines into paragraphs: empty lines (or NA) separate paragraphs; the lines of a paragraph are
** trimmed of surrounding blanks and joined with one space; each paragraph ends with "\n" and
** paragraphs are separated by one blank line.  Latin-1 strings are converted to UTF-8. */
int qs_rtext_join(const char *const *line, const uint32_t *llen, const uint8_t *latin1, size_t n, char **text,
                  size_t *tlen, qs_err *e);

#endif
