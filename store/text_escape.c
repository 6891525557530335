/*
** Visible escapes for control characters and invalid UTF-8 (see text_escape.h).
*/
#include "text_escape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (n bytes left) and its code point, or 0 when invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n, unsigned *cp)
{
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    size_t len;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; min = 0x80; c &= 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; min = 0x800; c &= 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; min = 0x10000; c &= 0x07; }
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

int qs_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned cp;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(p + i, n - i, &cp);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

size_t qs_utf8_prefix(const char *s, size_t max)
{
    size_t n = strnlen(s, max + 1);
    if (n <= max) return n;
    size_t i = max;   /* s[max] exists: back off over at most 3 continuation bytes to the character's start */
    while (i > 0 && max - i < 3 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    return ((unsigned char)s[max] & 0xC0) == 0x80 && ((unsigned char)s[i] & 0xC0) == 0xC0 ? i : max;
}

size_t qs_escape_buf(const char *s, size_t n, int flags, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t need = 0, w = 0;
    int full = cap == 0;
    for (size_t i = 0; i < n;) {
        char tmp[8];
        const char *piece = tmp;
        size_t plen;
        unsigned cp;
        size_t k = utf8_seq(p + i, n - i, &cp);
        if (!k) { plen = (size_t)snprintf(tmp, sizeof tmp, "\\x%02x", p[i]); k = 1; }
        else if ((cp == '\n' || cp == '\t') && (flags & QS_ESC_TEXT)) { piece = s + i; plen = 1; }
        else if (cp == '\n') { piece = "\\n"; plen = 2; }
        else if (cp == '\r') { piece = "\\r"; plen = 2; }
        else if (cp == '\t') { piece = "\\t"; plen = 2; }
        else if (cp < 0x20 || cp == 0x7F) plen = (size_t)snprintf(tmp, sizeof tmp, "\\x%02x", cp);
        else if (cp >= 0x80 && cp <= 0x9F) plen = (size_t)snprintf(tmp, sizeof tmp, "\\u%04x", cp);
        else if (cp == '|' && (flags & QS_ESC_PIPE)) { piece = "\\|"; plen = 2; }
        else { piece = s + i; plen = k; }
        i += k;
        need += plen;
        if (!full && w + plen < cap) { memcpy(out + w, piece, plen); w += plen; }
        else full = 1;
    }
    if (cap) out[w] = '\0';
    return need;
}

char *qs_escape_dup(const char *s, int flags)
{
    if (!s) s = "";
    size_t n = strlen(s), need = qs_escape_buf(s, n, flags, NULL, 0);
    char *out = malloc(need + 1);
    if (out) qs_escape_buf(s, n, flags, out, need + 1);
    return out;
}

int qs_text_plain(const char *s, int flags)
{
    if (!s) return 1;
    size_t n = strlen(s);
    return qs_escape_buf(s, n, flags, NULL, 0) == n;   /* every escape is longer than its input */
}

/* qs_esc and qs_esc_md: escaped copies in 8 per-thread buffers used in turn. */
static const char *esc_ring(const char *s, int flags)
{
    static _Thread_local char *buf[8];
    static _Thread_local size_t cap[8];
    static _Thread_local unsigned next;
    if (!s) return "";
    if (qs_text_plain(s, flags)) return s;
    unsigned k = next++ % 8;
    size_t n = strlen(s), need = qs_escape_buf(s, n, flags, NULL, 0) + 1;
    if (need > cap[k]) {
        char *p = realloc(buf[k], need);
        if (!p) return "?";
        buf[k] = p;
        cap[k] = need;
    }
    qs_escape_buf(s, n, flags, buf[k], cap[k]);
    return buf[k];
}

const char *qs_esc(const char *s) { return esc_ring(s, 0); }
const char *qs_esc_md(const char *s) { return esc_ring(s, QS_ESC_PIPE); }
