/*
** Safe text for terminals and tables: names of files, tensors, runs and log fields come from
** outside and may hold control characters (ESC[2J, OSC titles, newlines that forge table rows) or
** invalid UTF-8.  Every human-readable output passes them through qs_escape, which keeps valid
** printable UTF-8 and writes everything else as a visible escape:
**   \n \r \t            for those three
**   \xNN                for other C0 bytes, DEL and each byte of invalid UTF-8
**   \u0080 .. \u009f    for C1 control characters encoded as (valid) UTF-8
** Backslash itself is kept as is.  Width calculations use the escaped text.
*/
#ifndef QS_TEXT_ESCAPE_H
#define QS_TEXT_ESCAPE_H

#include <stddef.h>

enum {
    QS_ESC_PIPE = 1,   /* also write '|' as "\|" (Markdown table cells) */
    QS_ESC_TEXT = 2,   /* running text (a model's output): keep newline and tab as they are */
};

/* Escape s[0..n) into out (cap bytes, always NUL-terminated when cap > 0, truncated at a whole
** escape).  Returns the length the full escaped text needs, without the NUL. */
size_t qs_escape_buf(const char *s, size_t n, int flags, char *out, size_t cap);
/* The escaped copy of the NUL-terminated s, malloc'd (NULL on out of memory); NULL s gives "". */
char *qs_escape_dup(const char *s, int flags);
/* 1 when s[0..n) is valid UTF-8 (no overlongs, surrogates or code points above U+10FFFF). */
int qs_utf8_valid(const char *s, size_t n);
/* The length of the longest prefix of s of at most max bytes that does not end inside a UTF-8
** character: for "%.*s" cuts of outside text, which must stay valid UTF-8 (JSON, titles). */
size_t qs_utf8_prefix(const char *s, size_t max);
/* 1 when s needs no escaping (valid UTF-8 without control characters). */
int qs_text_plain(const char *s, int flags);

/* Outside text (tensor, file and run names, log fields) made safe to print: control characters
** and invalid UTF-8 as visible escapes.  The result lives in one of 8 per-thread buffers reused in
** turn, so up to 8 may be used in one printf.  qs_esc_md also escapes '|' for Markdown table cells. */
const char *qs_esc(const char *s);
const char *qs_esc_md(const char *s);

#endif
