/*
** NumPy .npz reader: a ZIP central-directory walker over the in-memory file (spec/data.md §1.2).
**
** An .npz is a ZIP archive whose members are complete .npy files.  We find the end-of-central-
** directory record (following a ZIP64 locator when present), walk the central directory, check
** each member's local header, and parse each member's npy header: in place for stored members,
** from a bounded inflated prefix for deflated ones.  Sizes and offsets come from the central
** directory (so data descriptors need no special care) and are checked against the file before
** use.  Nothing is allocated in proportion to a claimed count or size.
*/
#include "container.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define EOCD_LEN      22
#define EOCD_SCAN     (EOCD_LEN + 65535)      /* record + longest comment */
#define CDIR_LEN      46
#define LOCAL_LEN     30
#define Z64_LOC_LEN   20
#define Z64_EOCD_LEN  56
#define PREFIX_CAP    ((64u << 10) + 16)     /* first inflated prefix: holds any v1 header */
#define NPY_HDR_MAX   (64u << 20)
#define DEFLATE_RATIO 1032u                   /* deflate cannot expand more than this */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* Printable, bounded rendering of a member name for messages. */
static void show(char *out, size_t cap, const uint8_t *s, size_t n)
{
    size_t o = 0, i = 0;
    for (; i < n && o + 8 < cap; i++) {
        if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\' && s[i] != '\'') out[o++] = (char)s[i];
        else o += (size_t)snprintf(out + o, cap - o, "\\x%02x", s[i]);
    }
    if (i < n) { memcpy(out + o, "...", 3); o += 3; }
    out[o] = 0;
}

/* Re-anchor a message "what ... (at byte N...)" from a member's npy or deflate data to the file:
** stored data (`inflated` = 0) becomes "... in member 'x' (at byte base+N)"; inflated data, which
** has no file offset, becomes "... in member 'x' (inflated offset N) (at byte base)". */
static int member_fail(qs_err *e, const uint8_t *name, size_t nlen, uint64_t base, int inflated)
{
    char what[sizeof e->msg], nm[96];
    unsigned long long n = 0;
    memcpy(what, e->msg, sizeof what);
    char *at = NULL;
    for (char *p = strstr(what, "(at byte "); p; p = strstr(p + 1, "(at byte ")) at = p;
    if (at) {
        n = strtoull(at + 9, NULL, 10);
        while (at > what && at[-1] == ' ') at--;
        *at = 0;
    }
    show(nm, sizeof nm, name, nlen);
    if (inflated)
        return qs_fail(e, "%s in member '%s' (inflated offset %llu) (at byte %llu)", what, nm, n, (unsigned long long)base);
    return qs_fail(e, "%s in member '%s' (at byte %llu)", what, nm, (unsigned long long)base + n);
}

/* Returns a reason if a member name could escape an extraction directory or is not clean text. */
static const char *bad_name(const uint8_t *s, size_t n, size_t *bad_at)
{
    *bad_at = 0;
    if (n == 0) return "empty member name";
    for (size_t i = 0; i < n; i++) {
        if (s[i] == 0) { *bad_at = i; return "NUL byte in member name"; }
        if (s[i] < 0x20 || s[i] == 0x7f) { *bad_at = i; return "control character in member name"; }
        if (s[i] == '\\') { *bad_at = i; return "backslash in member name"; }
    }
    if (s[0] == '/') return "absolute member path";
    if (n >= 2 && s[1] == ':' && ((s[0] | 0x20) >= 'a' && (s[0] | 0x20) <= 'z')) return "absolute member path (drive letter)";
    for (size_t i = 0; i < n;) {              /* '..' as a whole path component */
        size_t j = i;
        while (j < n && s[j] != '/') j++;
        if (j - i == 2 && s[i] == '.' && s[i + 1] == '.') { *bad_at = i; return "'..' component in member name"; }
        i = j + 1;
    }
    /* Names end up in the database and on the terminal: require UTF-8 (zip's CP437 names are
    ** never non-ASCII in numpy's output). */
    for (size_t i = 0; i < n;) {
        uint8_t ch = s[i];
        size_t k = ch < 0x80 ? 0 : (ch & 0xE0) == 0xC0 ? 1 : (ch & 0xF0) == 0xE0 ? 2 : (ch & 0xF8) == 0xF0 ? 3 : 9;
        if (k == 9 || n - i <= k) { *bad_at = i; return "member name is not valid UTF-8"; }
        uint32_t cp = k == 0 ? ch : k == 1 ? (ch & 0x1Fu) : k == 2 ? (ch & 0x0Fu) : (ch & 0x07u);
        for (size_t m = 1; m <= k; m++) {
            if ((s[i + m] & 0xC0) != 0x80) { *bad_at = i; return "member name is not valid UTF-8"; }
            cp = cp << 6 | (s[i + m] & 0x3Fu);
        }
        static const uint32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < kMin[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) { *bad_at = i; return "member name is not valid UTF-8"; }
        i += k + 1;
    }
    return NULL;
}

/* Where the archive's central directory is. */
typedef struct zdir { uint64_t off, size, count, eocd; } zdir;

static int find_directory(const uint8_t *buf, size_t len, qs_container *c, zdir *d, qs_err *e)
{
    if (len < EOCD_LEN)
        return qs_fail(e, "not a zip archive: %zu bytes is too short for an end-of-central-directory record (at byte %zu)", len, len);
    size_t lo = len > EOCD_SCAN ? len - EOCD_SCAN : 0, eocd = SIZE_MAX;
    /* Last signature whose comment fits the file: a comment may itself contain "PK\5\6". */
    for (size_t p = len - EOCD_LEN + 1; p-- > lo;) {
        if (memcmp(buf + p, "PK\x05\x06", 4) == 0 && rd16(buf + p + 20) <= len - p - EOCD_LEN) { eocd = p; break; }
    }
    if (eocd == SIZE_MAX)
        return qs_fail(e, "not a zip archive: no end-of-central-directory record in the last %zu bytes (at byte %zu)", len - lo, lo);
    const uint8_t *r = buf + eocd;
    uint64_t disk = rd16(r + 4), cddisk = rd16(r + 6), nthis = rd16(r + 8);
    d->count = rd16(r + 10);
    d->size = rd32(r + 12);
    d->off = rd32(r + 16);
    d->eocd = eocd;
    uint64_t limit = eocd, tail = len - eocd - EOCD_LEN - rd16(r + 20);
    if (tail && qs_container_warn(c, "%llu bytes after the end of the zip archive ignored (at byte %zu)",
                                  (unsigned long long)tail, len - (size_t)tail))
        return qs_fail(e, "out of memory (at byte 0)");

    if (eocd >= Z64_LOC_LEN && memcmp(buf + eocd - Z64_LOC_LEN, "PK\x06\x07", 4) == 0) {
        size_t loc = eocd - Z64_LOC_LEN;
        uint64_t z64 = rd64(buf + loc + 8);
        if (rd32(buf + loc + 4) != 0 || rd32(buf + loc + 16) > 1)
            return qs_fail(e, "multi-disk zip archives are not supported (at byte %zu)", loc + 4);
        if (z64 > loc || loc - z64 < Z64_EOCD_LEN)
            return qs_fail(e, "ZIP64 end-of-central-directory offset %llu lies outside the archive (at byte %zu)",
                           (unsigned long long)z64, loc + 8);
        r = buf + z64;
        if (memcmp(r, "PK\x06\x06", 4) != 0)
            return qs_fail(e, "bad ZIP64 end-of-central-directory signature (at byte %llu)", (unsigned long long)z64);
        disk = rd32(r + 16);
        cddisk = rd32(r + 20);
        nthis = rd64(r + 24);
        d->count = rd64(r + 32);
        d->size = rd64(r + 40);
        d->off = rd64(r + 48);
        d->eocd = z64;
        limit = z64;
    }
    if (disk != 0 || cddisk != 0 || nthis != d->count)
        return qs_fail(e, "multi-disk zip archives are not supported (at byte %llu)", (unsigned long long)d->eocd + 4);
    if (d->off > limit || d->size > limit - d->off)
        return qs_fail(e, "central directory (%llu bytes at byte %llu) lies outside the archive (at byte %llu)",
                       (unsigned long long)d->size, (unsigned long long)d->off, (unsigned long long)d->eocd);
    if (d->count > d->size / CDIR_LEN)
        return qs_fail(e, "central directory claims %llu entries but %llu bytes hold at most %llu (at byte %llu)",
                       (unsigned long long)d->count, (unsigned long long)d->size,
                       (unsigned long long)(d->size / CDIR_LEN), (unsigned long long)d->eocd);
    return 0;
}

/* One central-directory entry, with ZIP64 values substituted. */
typedef struct zentry {
    uint64_t at;                /* offset of the entry */
    unsigned flags, method;
    uint64_t comp, uncomp, lho;
    uint32_t crc;
    const uint8_t *name;
    size_t nlen, total;         /* total = bytes the entry occupies in the directory */
} zentry;

static int read_entry(const uint8_t *buf, uint64_t p, uint64_t end, zentry *z, qs_err *e)
{
    if (end - p < CDIR_LEN)
        return qs_fail(e, "central directory entry runs past the end of the directory (at byte %llu)", (unsigned long long)p);
    const uint8_t *r = buf + p;
    if (memcmp(r, "PK\x01\x02", 4) != 0)
        return qs_fail(e, "bad central directory entry signature (at byte %llu)", (unsigned long long)p);
    size_t nl = rd16(r + 28), xl = rd16(r + 30), cl = rd16(r + 32);
    if (CDIR_LEN + nl + xl + cl > end - p)
        return qs_fail(e, "central directory entry runs past the end of the directory (at byte %llu)", (unsigned long long)p + 28);
    z->at = p;
    z->flags = rd16(r + 8);
    z->method = rd16(r + 10);
    z->crc = rd32(r + 16);
    z->comp = rd32(r + 20);
    z->uncomp = rd32(r + 24);
    z->lho = rd32(r + 42);
    z->name = r + CDIR_LEN;
    z->nlen = nl;
    z->total = CDIR_LEN + nl + xl + cl;
    uint64_t disk = rd16(r + 34);

    /* ZIP64 extra (id 1) holds, in this order, only the fields whose 32-bit slot is saturated. */
    const uint8_t *x = r + CDIR_LEN + nl, *xend = x + xl;
    while (xend - x >= 4) {
        unsigned id = rd16(x), sz = rd16(x + 2);
        if (sz > (size_t)(xend - x) - 4)
            return qs_fail(e, "extra field runs past the end of its entry (at byte %llu)", (unsigned long long)(x - buf));
        if (id == 1) {
            const uint8_t *f = x + 4, *fend = f + sz;
            uint64_t *want[3] = {z->uncomp == 0xFFFFFFFFu ? &z->uncomp : NULL, z->comp == 0xFFFFFFFFu ? &z->comp : NULL,
                                 z->lho == 0xFFFFFFFFu ? &z->lho : NULL};
            for (int i = 0; i < 3; i++) {
                if (!want[i]) continue;
                if (fend - f < 8) return qs_fail(e, "ZIP64 extra field too short (at byte %llu)", (unsigned long long)(x - buf));
                *want[i] = rd64(f);
                f += 8;
            }
            if (disk == 0xFFFF) {
                if (fend - f < 4) return qs_fail(e, "ZIP64 extra field too short (at byte %llu)", (unsigned long long)(x - buf));
                disk = rd32(f);
            }
        }
        x += 4 + sz;
    }
    if (disk != 0) return qs_fail(e, "multi-disk zip archives are not supported (at byte %llu)", (unsigned long long)p + 34);
    return 0;
}

/* An .npy member that passed the directory and local-header checks. */
typedef struct zmember {
    zentry   z;
    uint64_t data;              /* file offset of the member's (compressed) bytes */
} zmember;

static int cmp_name(const void *a, const void *b)
{
    const zmember *x = *(const zmember *const *)a, *y = *(const zmember *const *)b;
    size_t n = x->z.nlen < y->z.nlen ? x->z.nlen : y->z.nlen;
    int r = memcmp(x->z.name, y->z.name, n);
    if (r) return r;
    if (x->z.nlen != y->z.nlen) return x->z.nlen < y->z.nlen ? -1 : 1;
    return x->z.at < y->z.at ? -1 : x->z.at > y->z.at;
}

static int cmp_lho(const void *a, const void *b)
{
    const zmember *x = *(const zmember *const *)a, *y = *(const zmember *const *)b;
    return x->z.lho < y->z.lho ? -1 : x->z.lho > y->z.lho;
}

/* Duplicate names would make one tensor shadow another; overlapping members are the zip-bomb trick
** of inflating the same bytes many times.  Both are refused before any member is inflated. */
static int check_members(zmember *m, size_t n, qs_err *e)
{
    if (n < 2) return 0;
    int rc = -1;
    zmember **v = malloc(n * sizeof *v);
    if (!v) return qs_fail(e, "out of memory (at byte 0)");
    for (size_t i = 0; i < n; i++) v[i] = &m[i];
    qsort(v, n, sizeof *v, cmp_name);
    for (size_t i = 1; i < n; i++) {
        if (v[i - 1]->z.nlen == v[i]->z.nlen && memcmp(v[i - 1]->z.name, v[i]->z.name, v[i]->z.nlen) == 0) {
            char nm[96];
            show(nm, sizeof nm, v[i]->z.name, v[i]->z.nlen);
            qs_fail(e, "duplicate member '%s' (at byte %llu)", nm, (unsigned long long)v[i]->z.at);
            goto done;
        }
    }
    qsort(v, n, sizeof *v, cmp_lho);
    for (size_t i = 1; i < n; i++) {
        if (v[i]->z.lho < v[i - 1]->data + v[i - 1]->z.comp) {
            char a[96], b[96];
            show(a, sizeof a, v[i]->z.name, v[i]->z.nlen);
            show(b, sizeof b, v[i - 1]->z.name, v[i - 1]->z.nlen);
            qs_fail(e, "member '%s' overlaps member '%s' (at byte %llu)", a, b, (unsigned long long)v[i]->z.lho);
            goto done;
        }
    }
    rc = 0;
done:
    free(v);
    return rc;
}

/* Parse a stored member's npy header in place. */
static int member_stored(const uint8_t *buf, const zentry *z, uint64_t data, const qs_parse_opts *o,
                         qs_container *c, qs_tdesc *t, qs_err *e)
{
    uint64_t doff;
    if (z->comp != z->uncomp)
        return qs_fail(e, "stored member has compressed size %llu but uncompressed size %llu (at byte %llu)",
                       (unsigned long long)z->comp, (unsigned long long)z->uncomp, (unsigned long long)z->at + 20);
    if (qs_npy_header(buf + data, (size_t)z->comp, o, t, &doff, e)) return member_fail(e, z->name, z->nlen, data, 0);
    if (t->nbytes > z->comp - doff) {
        qs_fail(e, "array data truncated: %llu bytes expected, member holds %llu after the header (at byte %llu)",
                (unsigned long long)t->nbytes, (unsigned long long)(z->comp - doff), (unsigned long long)z->comp);
        return member_fail(e, z->name, z->nlen, data, 0);
    }
    if (doff + t->nbytes < z->comp) {
        char nm[96];
        show(nm, sizeof nm, z->name, z->nlen);
        if (qs_container_warn(c, "%llu trailing bytes after the array data in member '%s' ignored (at byte %llu)",
                              (unsigned long long)(z->comp - doff - t->nbytes), nm,
                              (unsigned long long)(data + doff + t->nbytes)))
            return qs_fail(e, "out of memory (at byte 0)");
    }
    t->codec = QS_CODEC_NONE;
    t->offset = data + doff;
    return 0;
}

/* Parse a deflated member's npy header from an inflated prefix (grown once if the header is
** longer than the first prefix, never beyond what the member could hold). */
static int member_deflated(const uint8_t *buf, const zentry *z, uint64_t data, const qs_parse_opts *o,
                           qs_tdesc *t, uint8_t **pre, qs_err *e)
{
    if (z->uncomp / DEFLATE_RATIO > z->comp + 64)
        return qs_fail(e, "inflated size %llu is impossible for %llu deflated bytes (at byte %llu)",
                       (unsigned long long)z->uncomp, (unsigned long long)z->comp, (unsigned long long)z->at + 24);
    size_t cap = z->uncomp < PREFIX_CAP ? (size_t)z->uncomp : PREFIX_CAP, got = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint8_t *nb = realloc(*pre, cap ? cap : 1);
        if (!nb) return qs_fail(e, "out of memory (at byte %llu)", (unsigned long long)data);
        *pre = nb;
        if (qs_inflate_prefix(buf + data, (size_t)z->comp, *pre, cap, &got, e))
            return member_fail(e, z->name, z->nlen, data, 0);
        if (got < cap) {
            qs_fail(e, "deflate stream ends after %zu bytes but the directory says %llu (at byte %llu)",
                    got, (unsigned long long)z->uncomp, (unsigned long long)data);
            return member_fail(e, z->name, z->nlen, data, 0);
        }
        /* A v2/v3 header may be longer than the first prefix. */
        if (pass == 0 && got >= 12 && memcmp(*pre, "\x93NUMPY", 6) == 0 && ((*pre)[6] == 2 || (*pre)[6] == 3)) {
            uint64_t need = 12 + (uint64_t)rd32(*pre + 8);
            if (need > got && need <= z->uncomp && need <= 12 + (uint64_t)NPY_HDR_MAX) { cap = (size_t)need; continue; }
        }
        break;
    }
    uint64_t doff;
    if (qs_npy_header(*pre, got, o, t, &doff, e)) return member_fail(e, z->name, z->nlen, data, 1);
    if (doff + t->nbytes != z->uncomp) {
        qs_fail(e, "member size mismatch: header and array data make %llu bytes, the directory says %llu (at byte %llu)",
                (unsigned long long)(doff + t->nbytes), (unsigned long long)z->uncomp, (unsigned long long)z->at + 24);
        return member_fail(e, z->name, z->nlen, 0, 0);
    }
    t->codec = QS_CODEC_DEFLATE;
    t->comp_offset = data;
    t->comp_size = z->comp;
    t->inflated_size = z->uncomp;
    t->offset = doff;
    return 0;
}

/* Check a member's CRC-32 against the directory (numpy refuses a mismatch too).  Done last, after
** the member's header checks, over the whole member: stored bytes straight from the mapped file
** in pieces, deflated ones inflated through a small fixed buffer, so nothing the size of the
** tensor is allocated.  Later reads of a reference trust the file identity check instead. */
static int member_crc(const uint8_t *buf, const zentry *z, uint64_t data, uint8_t **pre, qs_err *e)
{
    uint32_t crc;
    if (z->method == 0) {
        uLong c = crc32(0L, Z_NULL, 0);
        for (uint64_t off = 0; off < z->comp;) {
            uInt n = (uInt)(z->comp - off > (1u << 30) ? (1u << 30) : z->comp - off);
            c = crc32(c, buf + data + off, n);
            off += n;
        }
        crc = (uint32_t)c;
    } else {
        uint8_t *nb = realloc(*pre, PREFIX_CAP);
        if (!nb) return qs_fail(e, "out of memory (at byte %llu)", (unsigned long long)data);
        *pre = nb;
        uint64_t got = 0;
        if (qs_inflate_crc(buf + data, (size_t)z->comp, *pre, PREFIX_CAP, &crc, &got, e))
            return member_fail(e, z->name, z->nlen, data, 0);
        if (got != z->uncomp) {
            qs_fail(e, "deflate stream holds %llu bytes but the directory says %llu (at byte %llu)",
                    (unsigned long long)got, (unsigned long long)z->uncomp, (unsigned long long)z->at + 24);
            return member_fail(e, z->name, z->nlen, 0, 0);
        }
    }
    if (crc != z->crc) {
        qs_fail(e, "CRC-32 mismatch (directory %08x, data %08x) (at byte %llu)",
                (unsigned)z->crc, (unsigned)crc, (unsigned long long)z->at + 16);
        return member_fail(e, z->name, z->nlen, 0, 0);
    }
    return 0;
}

int qs_parse_npz(const uint8_t *buf, size_t len, const qs_parse_opts *o, qs_container *c, qs_err *e)
{
    memset(c, 0, sizeof *c);
    snprintf(c->kind, sizeof c->kind, "npz");
    uint8_t *pre = NULL;            /* inflated prefix, reused across members */
    zmember *m = NULL;              /* .npy members; each is backed by >= 46 directory bytes */
    size_t nmem = 0, cap = 0;
    zdir d;
    memset(&d, 0, sizeof d);
    if (find_directory(buf, len, c, &d, e)) goto fail;

    /* Pass 1: walk the directory and check every member's name, method and local header. */
    uint64_t p = d.off, end = d.off + d.size;
    for (uint64_t i = 0; i < d.count; i++) {
        zentry z;
        size_t bad_at;
        char nm[96];
        if (read_entry(buf, p, end, &z, e)) goto fail;
        p += z.total;
        const char *why = bad_name(z.name, z.nlen, &bad_at);
        if (why) {
            qs_fail(e, "%s (at byte %llu)", why, (unsigned long long)(z.at + CDIR_LEN + bad_at));
            goto fail;
        }
        show(nm, sizeof nm, z.name, z.nlen);
        if (z.nlen < 4 || memcmp(z.name + z.nlen - 4, ".npy", 4) != 0) {
            if (qs_container_warn(c, "member '%s' is not an .npy file; skipped (at byte %llu)", nm, (unsigned long long)z.at)) {
                qs_fail(e, "out of memory (at byte 0)");
                goto fail;
            }
            continue;
        }
        if (z.flags & 0x41) {
            qs_fail(e, "encrypted member '%s' is not supported (at byte %llu)", nm, (unsigned long long)z.at + 8);
            goto fail;
        }
        if (z.method != 0 && z.method != 8) {
            qs_fail(e, "compression method %u of member '%s' is not supported (only stored and deflate) (at byte %llu)",
                    z.method, nm, (unsigned long long)z.at + 10);
            goto fail;
        }

        /* Local header: must agree with the directory; its extra field length sets the data start. */
        if (z.lho > len || len - z.lho < LOCAL_LEN) {
            qs_fail(e, "local header offset %llu of member '%s' lies outside the file (at byte %llu)",
                    (unsigned long long)z.lho, nm, (unsigned long long)z.at + 42);
            goto fail;
        }
        const uint8_t *lh = buf + z.lho;
        if (memcmp(lh, "PK\x03\x04", 4) != 0) {
            qs_fail(e, "bad local header signature for member '%s' (at byte %llu)", nm, (unsigned long long)z.lho);
            goto fail;
        }
        if (rd16(lh + 8) != z.method) {
            qs_fail(e, "local header of member '%s' gives a different compression method (at byte %llu)", nm, (unsigned long long)z.lho + 8);
            goto fail;
        }
        uint64_t data = z.lho + LOCAL_LEN + (uint64_t)rd16(lh + 26) + rd16(lh + 28);
        if (data > len) {
            qs_fail(e, "local header of member '%s' runs past the end of the file (at byte %llu)", nm, (unsigned long long)z.lho + 26);
            goto fail;
        }
        if (rd16(lh + 26) != z.nlen || memcmp(lh + LOCAL_LEN, z.name, z.nlen) != 0) {
            qs_fail(e, "local header name of member '%s' differs from the central directory (at byte %llu)",
                    nm, (unsigned long long)z.lho + 26);
            goto fail;
        }
        if (z.comp > len - data) {
            qs_fail(e, "data of member '%s' (%llu bytes at byte %llu) runs past the end of the file (at byte %zu)",
                    nm, (unsigned long long)z.comp, (unsigned long long)data, len);
            goto fail;
        }
        if (nmem == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            zmember *nmb = realloc(m, ncap * sizeof *nmb);
            if (!nmb) { qs_fail(e, "out of memory (at byte %llu)", (unsigned long long)z.at); goto fail; }
            m = nmb;
            cap = ncap;
        }
        m[nmem++] = (zmember){z, data};
    }
    if (check_members(m, nmem, e)) goto fail;

    /* Pass 2: each member's npy header, in directory order. */
    for (size_t i = 0; i < nmem; i++) {
        const zentry *z = &m[i].z;
        qs_tdesc *t = qs_container_add(c, e);
        if (!t) goto fail;
        if (!(t->name = strndup((const char *)z->name, z->nlen - 4))) {
            qs_fail(e, "out of memory (at byte %llu)", (unsigned long long)z->at);
            goto fail;
        }
        if (z->method == 0 ? member_stored(buf, z, m[i].data, o, c, t, e)
                           : member_deflated(buf, z, m[i].data, o, t, &pre, e))
            goto fail;
        if (member_crc(buf, z, m[i].data, &pre, e)) goto fail;
    }
    free(pre);
    free(m);
    return 0;
fail:
    free(pre);
    free(m);
    qs_container_free(c);
    return -1;
}
