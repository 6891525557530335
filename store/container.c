/*
** Container bookkeeping shared by the file parsers, and format sniffing (see container.h).
*/
#include "container.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

qs_tdesc *qs_container_add(qs_container *c, qs_err *e)
{
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 16;
        qs_tdesc *nt = realloc(c->t, ncap * sizeof *nt);
        if (!nt) { qs_fail(e, "out of memory"); return NULL; }
        c->t = nt;
        c->cap = ncap;
    }
    qs_tdesc *t = &c->t[c->n++];
    memset(t, 0, sizeof *t);
    return t;
}

int qs_container_warn(qs_container *c, const char *fmt, ...)
{
    char *buf = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&buf, fmt, ap);   /* whole: a fixed buffer could cut a name mid-character */
    va_end(ap);
    if (n < 0) return -1;
    char **nw = realloc(c->warnings, (c->nwarn + 1) * sizeof *nw);
    if (!nw) { free(buf); return -1; }
    c->warnings = nw;
    c->warnings[c->nwarn++] = buf;
    return 0;
}

void qs_container_free(qs_container *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->t[i].name);
        free(c->t[i].meta_json);
    }
    free(c->t);
    for (size_t i = 0; i < c->nwarn; i++) free(c->warnings[i]);
    free(c->warnings);
    free(c->meta_json);
    memset(c, 0, sizeof *c);
}

int qs_clip_utf8(const char *s, int max)
{
    size_t n = strnlen(s, (size_t)max);
    if (n < (size_t)max) return (int)n;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;   /* s[n] continues a cut character */
    return (int)n;
}

int qs_shape_numel(const uint64_t *shape, int ndim, uint64_t *numel)
{
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] != 0 && n > UINT64_MAX / shape[i]) return -1;
        n *= shape[i];
    }
    /* Keep every element index representable as a signed 64-bit value and as an SQLite integer. */
    if (n > (uint64_t)INT64_MAX / 8) return -1;
    *numel = n;
    return 0;
}

int qs_inflate_prefix(const uint8_t *src, size_t srclen, uint8_t *out, size_t cap, size_t *got, qs_err *e)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, -15) != Z_OK) return qs_fail(e, "zlib init failed");
    size_t done = 0;
    int rc = Z_OK;
    /* zlib counts in uInt: feed and drain in pieces so huge inputs never truncate the counters. */
    while (done < cap) {
        if (s.avail_in == 0) {
            size_t used = (size_t)(s.next_in ? (const uint8_t *)s.next_in - src : 0);
            size_t left = srclen - used;
            if (left == 0) break;
            s.next_in = (Bytef *)(src + used);
            s.avail_in = (uInt)(left > (1u << 30) ? (1u << 30) : left);
        }
        size_t room = cap - done;
        s.next_out = out + done;
        s.avail_out = (uInt)(room > (1u << 30) ? (1u << 30) : room);
        rc = inflate(&s, Z_NO_FLUSH);
        done = (size_t)(s.next_out - out);
        if (rc == Z_STREAM_END) break;
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            size_t at = (size_t)((const uint8_t *)s.next_in - src);
            inflateEnd(&s);
            return qs_fail(e, "corrupt deflate data (%s) (at byte %zu of the member)", s.msg ? s.msg : "error", at);
        }
        if (rc == Z_BUF_ERROR && s.avail_in == 0 && (size_t)((const uint8_t *)s.next_in - src) >= srclen) break;
    }
    inflateEnd(&s);
    *got = done;
    return 0;
}

int qs_inflate_crc(const uint8_t *src, size_t srclen, uint8_t *work, size_t cap, uint32_t *crc, uint64_t *got,
                   qs_err *e)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, -15) != Z_OK) return qs_fail(e, "zlib init failed");
    uLong c = crc32(0L, Z_NULL, 0);
    uint64_t total = 0;
    size_t used = 0;
    int rc = Z_OK;
    uInt room = (uInt)(cap > (1u << 30) ? (1u << 30) : cap);
    while (rc != Z_STREAM_END) {
        if (s.avail_in == 0 && used < srclen) {
            size_t take = srclen - used > (1u << 30) ? (1u << 30) : srclen - used;
            s.next_in = (Bytef *)(src + used);
            s.avail_in = (uInt)take;
            used += take;
        }
        s.next_out = work;
        s.avail_out = room;
        rc = inflate(&s, Z_NO_FLUSH);
        size_t n = room - s.avail_out;
        c = crc32(c, work, (uInt)n);
        total += n;
        if (rc == Z_STREAM_END) break;
        if ((rc == Z_BUF_ERROR || (rc == Z_OK && n == 0)) && s.avail_in == 0 && used >= srclen) {
            inflateEnd(&s);
            return qs_fail(e, "deflate stream is truncated (at byte %zu of the member)", srclen);
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            size_t at = (size_t)((const uint8_t *)s.next_in - src);
            inflateEnd(&s);
            return qs_fail(e, "corrupt deflate data (%s) (at byte %zu of the member)", s.msg ? s.msg : "error", at);
        }
    }
    inflateEnd(&s);
    *crc = (uint32_t)c;
    *got = total;
    return 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

int qs_parse_any(const uint8_t *buf, size_t len, const char *filename, const qs_parse_opts *o,
                 qs_container *c, qs_err *e)
{
    if (len >= 6 && memcmp(buf, "\x93NUMPY", 6) == 0) return qs_parse_npy(buf, len, o, c, e);
    if (len >= 4 && memcmp(buf, "PK\x03\x04", 4) == 0) return qs_parse_npz(buf, len, o, c, e);
    if (len >= 4 && memcmp(buf, "PK\x05\x06", 4) == 0) return qs_parse_npz(buf, len, o, c, e);
    if (len >= 4 && memcmp(buf, "GGUF", 4) == 0) return qs_parse_gguf(buf, len, o, c, e);
    if (filename && ends_with(filename, ".safetensors")) return qs_parse_safetensors(buf, len, o, c, e);
    /* safetensors has no magic: an 8-byte length followed by '{' is the tell. */
    if (len >= 9 && buf[8] == '{') return qs_parse_safetensors(buf, len, o, c, e);
    if (filename && (ends_with(filename, ".npy") || ends_with(filename, ".npz") || ends_with(filename, ".gguf")))
        return qs_fail(e, "wrong magic for a %s file (at byte 0)", strrchr(filename, '.'));
    return qs_fail(e, "not a recognised tensor file (.npy, .npz, .safetensors, .gguf) (at byte 0)");
}

int qs_parse_fd(int fd, uint64_t len, const char *filename, const qs_parse_opts *o, qs_container *c, qs_err *e)
{
    uint8_t magic[9];
    ssize_t k;
    do k = pread(fd, magic, sizeof magic, 0); while (k < 0 && errno == EINTR);
    /* qs_parse_any's sniffing, on the first bytes */
    if (k >= 6 && memcmp(magic, "\x93NUMPY", 6) == 0) return qs_parse_npy_fd(fd, len, o, c, e);
    int other = k >= 4 && (!memcmp(magic, "PK\x03\x04", 4) || !memcmp(magic, "PK\x05\x06", 4) || !memcmp(magic, "GGUF", 4));
    if (!other && ((filename && ends_with(filename, ".safetensors")) || (k >= 9 && magic[8] == '{')))
        return qs_parse_safetensors_fd(fd, len, o, c, e);
    if (len == 0) return qs_parse_any((const uint8_t *)"", 0, filename, o, c, e);
    void *map = mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) return qs_fail(e, "mmap: %s", strerror(errno));
    int rc = qs_parse_any(map, (size_t)len, filename, o, c, e);
    munmap(map, (size_t)len);
    return rc;
}

int qs_open_regular(const char *path, qs_err *e)
{
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return qs_fail(e, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return qs_fail(e, "%s: not a regular file", path);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int err = errno;
        close(fd);
        return qs_fail(e, "%s: cannot open: %s", path, strerror(err));
    }
    return fd;
}

int qs_file_map_open(const char *path, qs_file_map *m, qs_err *e)
{
    m->p = NULL;
    m->n = 0;
    int fd = qs_open_regular(path, e);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) || st.st_size <= 0) {
        close(fd);
        return qs_fail(e, "%s: not a regular non-empty file", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (p == MAP_FAILED) return qs_fail(e, "%s: cannot map: %s", path, strerror(err));
    m->p = p;
    m->n = (size_t)st.st_size;
    return 0;
}

void qs_file_map_close(qs_file_map *m)
{
    if (m->p) munmap((void *)m->p, m->n);
    m->p = NULL;
    m->n = 0;
}

size_t qs_pread_head(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, buf + got, n - got, (off_t)got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    return got;
}
