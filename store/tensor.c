/*
** Stored tensors: records and the element reader (see tensor.h).
*/
#include "tensor.h"
#include "io_err.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zlib.h>

#include <jansson.h>

struct qs_treader {
    qs_dtype dt;
    const qs_dtype_traits *tr;
    int ndim;
    uint64_t shape[QS_MAX_DIMS];
    uint64_t numel, nbytes;
    int fortran;
    char path[512];                 /* for messages */
    char name[256];                 /* tensor name, for stale-reference messages ("" from an image) */
    /* reference: the open file and its identity when opened, re-checked by qs_treader_verify */
    int fd;
    struct stat ident;
    /* file source: C-order bytes at [dbase, dbase+nbytes) of dfd (the file, or an inflated temporary),
    ** read with pread in the caller's windows, so nothing is mapped whatever the tensor size */
    int dfd;
    uint64_t dbase;
    /* memory source: mem points at the first data byte (storage order); column-major data and images */
    const uint8_t *mem;
    void *map;                      /* owned mapping, if any */
    size_t maplen;
    /* blob source */
    qs_db *db;
    int64_t tensor_id;
    sqlite3_blob *blob;
    int64_t blob_seq;
    sqlite3_stmt *find;
    pthread_mutex_t mu;
    int has_mu;
};

/* ------------------------------------------------------------------------------------------ */

void qs_tensor_matrix_view(const uint64_t *shape, int ndim, uint64_t *rows, uint64_t *cols)
{
    if (ndim == 0) { *rows = 1; *cols = 1; return; }
    uint64_t r = 1;
    for (int i = 0; i < ndim - 1; i++) r *= shape[i];
    *rows = r;
    *cols = shape[ndim - 1];
}

void qs_shape_json(const uint64_t *shape, int ndim, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%llu", i ? "," : "", (unsigned long long)shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

void qs_shape_str(const uint64_t *shape, int ndim, char *buf, size_t cap)
{
    if (ndim == 0) { snprintf(buf, cap, "scalar"); return; }
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%llu", i ? "x" : "", (unsigned long long)shape[i]);
}

static char *dupcol(sqlite3_stmt *st, int i)
{
    const unsigned char *s = sqlite3_column_text(st, i);
    return s ? strdup((const char *)s) : NULL;
}

static int parse_shape(const char *txt, qs_tensor_rec *t, qs_err *e)
{
    json_error_t je;
    json_t *a = json_loads(txt ? txt : "", 0, &je);
    if (!json_is_array(a) || json_array_size(a) > QS_MAX_DIMS) {
        json_decref(a);
        return qs_fail(e, "tensor '%s': corrupt shape in database", t->name);
    }
    t->ndim = (int)json_array_size(a);
    for (int i = 0; i < t->ndim; i++) t->shape[i] = (uint64_t)json_integer_value(json_array_get(a, (size_t)i));
    json_decref(a);
    return 0;
}

int qs_tensor_get(qs_db *db, const char *name, qs_tensor_rec *t, qs_err *e)
{
    memset(t, 0, sizeof *t);
    sqlite3_stmt *st = qs_db_prepare(db,
        "SELECT t.id, t.name, t.member, t.hash, t.metadata, t.dtype, t.shape, t.numel, t.nbytes,"
        " t.storage, t.fortran, t.codec, t.data_offset, t.comp_offset, t.comp_size,"
        " s.id, s.path, s.kind, s.size, s.mtime_ns, s.ctime_ns, s.inode, s.dev"
        " FROM tensor t JOIN source s ON s.id = t.source_id WHERE t.name = ?", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(st);
        if (rc == SQLITE_DONE) return qs_fail(e, "no tensor named '%s' (see `qscope ls`)", name);
        return qs_db_fail(db, e, "tensor lookup");
    }
    t->id = sqlite3_column_int64(st, 0);
    t->name = dupcol(st, 1);
    t->member = dupcol(st, 2);
    t->hash = dupcol(st, 3);
    t->metadata = dupcol(st, 4);
    t->dtype = qs_dtype_from_name((const char *)sqlite3_column_text(st, 5));
    int bad = t->dtype == QS_DT_INVALID || parse_shape((const char *)sqlite3_column_text(st, 6), t, e);
    t->numel = (uint64_t)sqlite3_column_int64(st, 7);
    t->nbytes = (uint64_t)sqlite3_column_int64(st, 8);
    t->is_blob = strcmp((const char *)sqlite3_column_text(st, 9), "blob") == 0;
    t->fortran = sqlite3_column_int(st, 10);
    t->codec = strcmp((const char *)sqlite3_column_text(st, 11), "deflate") == 0 ? QS_CODEC_DEFLATE : QS_CODEC_NONE;
    t->data_offset = (uint64_t)sqlite3_column_int64(st, 12);
    t->comp_offset = (uint64_t)sqlite3_column_int64(st, 13);
    t->comp_size = (uint64_t)sqlite3_column_int64(st, 14);
    t->source_id = sqlite3_column_int64(st, 15);
    t->source_path = dupcol(st, 16);
    t->source_kind = dupcol(st, 17);
    t->source_size = sqlite3_column_int64(st, 18);
    t->source_mtime_ns = sqlite3_column_int64(st, 19);
    t->has_ident = sqlite3_column_type(st, 20) != SQLITE_NULL && sqlite3_column_type(st, 21) != SQLITE_NULL &&
                   sqlite3_column_type(st, 22) != SQLITE_NULL;
    t->source_ctime_ns = sqlite3_column_int64(st, 20);
    t->source_inode = sqlite3_column_int64(st, 21);
    t->source_dev = sqlite3_column_int64(st, 22);
    sqlite3_finalize(st);
    if (bad) {
        if (t->dtype == QS_DT_INVALID) qs_fail(e, "tensor '%s': unknown dtype in database", name);
        qs_tensor_rec_free(t);
        return -1;
    }
    return 0;
}

void qs_tensor_rec_free(qs_tensor_rec *t)
{
    if (!t) return;
    free(t->name); free(t->member); free(t->hash); free(t->metadata);
    free(t->source_path); free(t->source_kind);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------------------------------ */

static qs_treader *reader_new(qs_dtype dt, const uint64_t *shape, int ndim, int fortran, const char *path, qs_err *e)
{
    qs_treader *r = calloc(1, sizeof *r);
    if (!r) { qs_fail(e, "out of memory"); return NULL; }
    r->dt = dt;
    r->tr = qs_dtype_get(dt);
    r->ndim = ndim;
    memcpy(r->shape, shape, sizeof(uint64_t) * (size_t)ndim);
    r->fortran = fortran && ndim > 1;
    snprintf(r->path, sizeof r->path, "%s", path ? path : "?");
    r->fd = -1;
    r->dfd = -1;
    if (!r->tr || qs_shape_numel(shape, ndim, &r->numel) || qs_dtype_nbytes(dt, r->numel, &r->nbytes)) {
        qs_fail(e, "%s: inconsistent dtype and shape", r->path);
        free(r);
        return NULL;
    }
    if (r->fortran && r->tr->block_elems != 1) {
        qs_fail(e, "%s: column-major data of a block dtype is not supported", r->path);
        free(r);
        return NULL;
    }
    return r;
}

/* ---- reads from mapped files -------------------------------------------------------------
** A mapped file that shrinks under us raises SIGBUS at the next access past its new end.  Every
** read of a mapping runs under a per-thread recovery point: the handler jumps back to it and the
** read fails as a stale reference.  A SIGBUS anywhere else keeps its previous disposition. */
static _Thread_local sigjmp_buf *t_guard;
static struct sigaction g_prev_bus;
static pthread_once_t g_bus_once = PTHREAD_ONCE_INIT;
/* Test hook (tests/e2e/stale.sh), so that a file changes mid-read deterministically:
** QSCOPE_TEST_FILE_HOOK=shrink@N truncates the mapped file to 0 bytes before the N-th mapped read
** of the process, touch@N sets its times to now (same bytes, new identity). */
static atomic_long g_hook_left;
static int g_hook_touch;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (t_guard) siglongjmp(*t_guard, 1);
    /* not a mapped read of ours: back to the previous disposition, which the faulting access (run
    ** again on return) or a re-raised signal then meets */
    sigaction(sig, &g_prev_bus, NULL);
    if (si->si_code <= 0) raise(sig);
}

static void bus_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;   /* NODEFER: jumping out leaves no blocked SIGBUS behind */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_prev_bus);
    const char *h = getenv("QSCOPE_TEST_FILE_HOOK"), *at = h ? strchr(h, '@') : NULL;
    if (at && (!strncmp(h, "shrink@", 7) || !strncmp(h, "touch@", 6))) {
        g_hook_touch = h[0] == 't';
        atomic_store(&g_hook_left, atol(at + 1));
    }
}

static int shrunk(const qs_treader *r, qs_err *e)
{
    if (r->name[0])
        return qs_fail(e, "%s: stale reference for tensor '%s': the file shrank while it was being read (re-import it)",
                       r->path, r->name);
    return qs_fail(e, "%s: the file shrank while it was being read", r->path);
}

static void file_hook(const qs_treader *r)
{
    if (atomic_load(&g_hook_left) > 0 && atomic_fetch_sub(&g_hook_left, 1) == 1 &&
        (g_hook_touch ? utimensat(AT_FDCWD, r->path, NULL, 0) : truncate(r->path, 0)))
        perror("QSCOPE_TEST_FILE_HOOK");
}

static void fortran_gather(const qs_treader *r, uint64_t first, size_t count, uint8_t *out);

/* Bytes [off, off+n) of the mapped data, in C order. */
static int mapped_read(const qs_treader *r, uint64_t off, size_t n, uint8_t *out, qs_err *e)
{
    file_hook(r);
    sigjmp_buf jb;
    if (sigsetjmp(jb, 0)) { t_guard = NULL; return shrunk(r, e); }
    t_guard = &jb;
    if (!r->fortran) memcpy(out, r->mem + off, n);
    else fortran_gather(r, off / r->tr->block_bytes, n / r->tr->block_bytes, out);
    t_guard = NULL;
    return 0;
}

/* Bytes [off, off+n) of the C-order data in dfd.  A short read means the file shrank. */
static int fd_read(const qs_treader *r, uint64_t off, size_t n, uint8_t *out, qs_err *e)
{
    file_hook(r);
    off += r->dbase;
    while (n) {
        ssize_t k = pread(r->dfd, out, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return qs_fail(e, "%s: read: %s", r->path, strerror(errno));
        if (k == 0) return shrunk(r, e);
        out += k; off += (uint64_t)k; n -= (size_t)k;
    }
    return 0;
}

/* Column-major data is gathered across the whole file: map it (address space, not memory). */
static int map_data(qs_treader *r, qs_err *e)
{
    size_t len = (size_t)(r->dbase + r->nbytes);
    if (len == 0) return 0;
    void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, r->dfd, 0);
    if (m == MAP_FAILED) return qs_fail(e, "%s: mmap: %s", r->path, strerror(errno));
    r->map = m;
    r->maplen = len;
    r->mem = (const uint8_t *)m + r->dbase;
    return 0;
}

/* inflate() over a mapped source: 1 if the mapping faulted */
static int guarded_inflate(const qs_treader *r, z_stream *s, int *zrc)
{
    file_hook(r);
    sigjmp_buf jb;
    if (sigsetjmp(jb, 0)) { t_guard = NULL; return 1; }
    t_guard = &jb;
    *zrc = inflate(s, Z_NO_FLUSH);
    t_guard = NULL;
    return 0;
}

/* Inflate a raw deflate stream into an unlinked temporary file, which becomes dfd.  The compressed
** bytes are src[0..srclen) in memory, or (src NULL) [soff, soff+srclen) of sfd read in pieces.  The
** output must be exactly `want` bytes; nothing is allocated from the claimed size. */
static int inflate_to_tmp(qs_treader *r, const uint8_t *src, int sfd, uint64_t soff, uint64_t srclen, uint64_t want,
                          qs_err *e)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    int fd = open(dir, O_TMPFILE | O_RDWR, 0600);
    if (fd < 0) {
        char tmpl[600];
        snprintf(tmpl, sizeof tmpl, "%s/qscope-inflate-XXXXXX", dir);
        fd = mkstemp(tmpl);
        if (fd >= 0) unlink(tmpl);
    }
    if (fd < 0) return qs_fail(e, "%s: cannot create a temporary file in %s: %s", r->path, dir, strerror(errno));
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, -15) != Z_OK) { close(fd); return qs_fail(e, "%s: zlib init failed", r->path); }
    enum { OUT = 1 << 18, IN = 1 << 16 };
    uint8_t *out = malloc(OUT), *in = src ? NULL : malloc(IN);
    uint64_t total = 0;
    int rc = Z_OK, ok = out != NULL && (src || in);
    if (!ok) qs_fail(e, "out of memory");
    uint64_t used = 0;
    while (ok && rc != Z_STREAM_END) {
        if (s.avail_in == 0 && used < srclen) {
            if (src) {
                uint64_t take = srclen - used > (1u << 30) ? (1u << 30) : srclen - used;
                s.next_in = (Bytef *)(src + used);
                s.avail_in = (uInt)take;
                used += take;
            } else {
                size_t take = srclen - used > IN ? IN : (size_t)(srclen - used);
                file_hook(r);
                ssize_t k;
                do k = pread(sfd, in, take, (off_t)(soff + used)); while (k < 0 && errno == EINTR);
                if (k < 0) { qs_fail(e, "%s: read: %s", r->path, strerror(errno)); ok = 0; break; }
                if (k == 0) { shrunk(r, e); ok = 0; break; }
                s.next_in = in;
                s.avail_in = (uInt)k;
                used += (uint64_t)k;
            }
        }
        s.next_out = out;
        s.avail_out = OUT;
        if (src ? guarded_inflate(r, &s, &rc) : (rc = inflate(&s, Z_NO_FLUSH), 0)) { shrunk(r, e); ok = 0; break; }
        if (rc != Z_OK && rc != Z_STREAM_END) {
            qs_fail(e, "%s: corrupt deflate data in member (%s)", r->path, s.msg ? s.msg : "truncated");
            ok = 0;
            break;
        }
        size_t got = OUT - s.avail_out;
        total += got;
        if (total > want) { qs_fail(e, "%s: deflated member is larger than declared", r->path); ok = 0; break; }
        for (size_t w = 0; w < got;) {
            ssize_t k = write(fd, out + w, got - w);
            if (k <= 0) {
                char why[128];
                qs_fail(e, "%s: cannot write its inflated copy (a temporary file): %s", r->path,
                        qs_io_reason(k < 0 ? errno : ENOSPC, why, sizeof why));
                ok = 0;
                break;
            }
            w += (size_t)k;
        }
        if (rc == Z_OK && got == 0 && s.avail_in == 0 && used >= srclen) {
            qs_fail(e, "%s: deflated member is truncated", r->path);
            ok = 0;
        }
    }
    inflateEnd(&s);
    free(out);
    free(in);
    if (ok && total != want) ok = 0, qs_fail(e, "%s: deflated member has %llu bytes, expected %llu", r->path,
                                             (unsigned long long)total, (unsigned long long)want);
    if (!ok) { close(fd); return -1; }
    r->dfd = fd;
    return 0;
}

/* Data from file fd (not taken over): [off, off+nbytes) of the file, or of its deflate stream at
** [comp_off, comp_off+comp_size) inflated to exactly `inflated` bytes. */
static int attach_fd(qs_treader *r, int fd, int deflate, uint64_t off, uint64_t comp_off, uint64_t comp_size,
                     uint64_t inflated, qs_err *e)
{
    if (deflate) {
        if (inflate_to_tmp(r, NULL, fd, comp_off, comp_size, inflated, e)) return -1;
    } else if ((r->dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        return qs_fail(e, "%s: %s", r->path, strerror(errno));
    }
    r->dbase = off;
    if (r->fortran) return map_data(r, e);
    posix_fadvise(r->dfd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return 0;
}

qs_treader *qs_treader_from_image(const uint8_t *base, size_t len, const qs_tdesc *d, const char *path, qs_err *e)
{
    qs_treader *r = reader_new(d->dtype, d->shape, d->ndim, d->fortran, path, e);
    if (!r) return NULL;
    pthread_once(&g_bus_once, bus_install);
    if (r->nbytes != d->nbytes) { qs_fail(e, "%s: tensor '%s' size mismatch", path, d->name); goto fail; }
    if (d->codec == QS_CODEC_DEFLATE) {
        if (d->comp_offset > len || d->comp_size > len - d->comp_offset ||
            d->offset > d->inflated_size || d->nbytes > d->inflated_size - d->offset) {
            qs_fail(e, "%s: member '%s' lies outside the file", path, d->name);
            goto fail;
        }
        if (inflate_to_tmp(r, base + d->comp_offset, -1, 0, d->comp_size, d->inflated_size, e)) goto fail;
        r->dbase = d->offset;
        if (r->fortran && map_data(r, e)) goto fail;
    } else {
        if (d->offset > len || d->nbytes > len - d->offset) {
            qs_fail(e, "%s: tensor '%s' data lies outside the file (at byte %llu)", path, d->name,
                    (unsigned long long)d->offset);
            goto fail;
        }
        r->mem = base + d->offset;
    }
    return r;
fail:
    qs_treader_close(r);
    return NULL;
}

qs_treader *qs_treader_from_fd(int fd, const qs_tdesc *d, const char *path, qs_err *e)
{
    qs_treader *r = reader_new(d->dtype, d->shape, d->ndim, d->fortran, path, e);
    if (!r) return NULL;
    pthread_once(&g_bus_once, bus_install);
    struct stat st;
    if (fstat(fd, &st)) { qs_fail(e, "%s: %s", path, strerror(errno)); goto fail; }
    uint64_t len = (uint64_t)st.st_size;
    if (r->nbytes != d->nbytes) { qs_fail(e, "%s: tensor '%s' size mismatch", path, d->name); goto fail; }
    if (d->codec == QS_CODEC_DEFLATE) {
        if (d->comp_offset > len || d->comp_size > len - d->comp_offset ||
            d->offset > d->inflated_size || d->nbytes > d->inflated_size - d->offset) {
            qs_fail(e, "%s: member '%s' lies outside the file", path, d->name);
            goto fail;
        }
    } else if (d->offset > len || d->nbytes > len - d->offset) {
        qs_fail(e, "%s: tensor '%s' data lies outside the file (at byte %llu)", path, d->name, (unsigned long long)d->offset);
        goto fail;
    }
    if (attach_fd(r, fd, d->codec == QS_CODEC_DEFLATE, d->offset, d->comp_offset, d->comp_size, d->inflated_size, e))
        goto fail;
    return r;
fail:
    qs_treader_close(r);
    return NULL;
}

static int64_t ts_ns(struct timespec ts) { return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec; }

/* What differs between the file now and its record, as "size, mtime" ("" when nothing does). */
static void ident_diff(const qs_tensor_rec *t, const struct stat *st, char *out, size_t cap)
{
    const char *what[5];
    int n = 0;
    if ((int64_t)st->st_size != t->source_size) what[n++] = "size";
    if (ts_ns(st->st_mtim) != t->source_mtime_ns) what[n++] = "modification time";
    if (t->has_ident && ts_ns(st->st_ctim) != t->source_ctime_ns) what[n++] = "status-change time";
    if (t->has_ident && (int64_t)st->st_ino != t->source_inode) what[n++] = "inode";
    if (t->has_ident && (int64_t)st->st_dev != t->source_dev) what[n++] = "device";
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < n && k < cap; i++) k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? ", " : "", what[i]);
}

static int stale_changed(const qs_tensor_rec *t, const char *diff, const char *when, qs_err *e)
{
    return qs_fail(e, "%s: stale reference for tensor '%s': the file changed %s (%s differ%s; re-import it)",
                   t->source_path, t->name, when, diff, strchr(diff, ',') ? "" : "s");
}

static int stale_gone(const qs_tensor_rec *t, int err, qs_err *e)
{
    return qs_fail(e, "%s: stale reference for tensor '%s': %s (re-import the file, or import with --copy)",
                   t->source_path, t->name, strerror(err));
}

int qs_tensor_ref_check(const qs_tensor_rec *t, qs_err *e)
{
    if (t->is_blob) return 0;
    struct stat st;
    if (stat(t->source_path, &st)) return stale_gone(t, errno, e);
    char diff[128];
    ident_diff(t, &st, diff, sizeof diff);
    return diff[0] ? stale_changed(t, diff, "since it was imported", e) : 0;
}

/* Open the blob handle on chunk 0 and, in the read snapshot it starts (and holds until the reader
** closes), make sure the tensor still has the content the caller looked up. */
static int blob_pin(qs_treader *r, const qs_tensor_rec *t, qs_err *e)
{
    if (t->nbytes == 0) return 0;
    sqlite3_bind_int64(r->find, 1, t->id);
    sqlite3_bind_int64(r->find, 2, 0);
    int rc = sqlite3_step(r->find);
    int64_t rowid = rc == SQLITE_ROW ? sqlite3_column_int64(r->find, 0) : 0;
    sqlite3_reset(r->find);
    if (rc != SQLITE_ROW) return qs_fail(e, "tensor '%s': embedded data chunk 0 is missing", t->name);
    if (sqlite3_blob_open(r->db->h, "main", "tensor_chunk", "data", rowid, 0, &r->blob) != SQLITE_OK) {
        r->blob = NULL;
        return qs_db_fail(r->db, e, "embedded data");
    }
    /* blob_seq stays -1: the first read looks chunk 0 up again and checks its length */
    sqlite3_stmt *st = qs_db_prepare(r->db, "SELECT hash FROM tensor WHERE id=?", e);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, t->id);
    rc = sqlite3_step(st);
    int same = rc == SQLITE_ROW && sqlite3_column_text(st, 0) && !strcmp((const char *)sqlite3_column_text(st, 0), t->hash);
    sqlite3_finalize(st);
    if (!same) return qs_fail(e, "tensor '%s' was changed or removed by another process since it was looked up (run the command again)",
                              t->name);
    return 0;
}

qs_treader *qs_treader_open(qs_db *db, const qs_tensor_rec *t, qs_err *e)
{
    qs_treader *r = reader_new(t->dtype, t->shape, t->ndim, t->is_blob ? 0 : t->fortran,
                               t->is_blob ? t->name : t->source_path, e);
    if (!r) return NULL;
    if (r->nbytes != t->nbytes) { qs_fail(e, "tensor '%s': corrupt size in database", t->name); goto fail; }
    snprintf(r->name, sizeof r->name, "%s", t->name);
    if (t->is_blob) {
        r->db = db;
        r->tensor_id = t->id;
        r->blob_seq = -1;
        pthread_mutex_init(&r->mu, NULL);
        r->has_mu = 1;
        r->find = qs_db_prepare(db, "SELECT rowid, length(data) FROM tensor_chunk WHERE tensor_id=? AND seq=?", e);
        if (!r->find || blob_pin(r, t, e)) goto fail;
        return r;
    }
    pthread_once(&g_bus_once, bus_install);
    /* O_NONBLOCK: a FIFO put in the file's place would otherwise block the open (it fails as changed) */
    int fd = open(t->source_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) { stale_gone(t, errno, e); goto fail; }
    r->fd = fd;
    struct stat st;
    char diff[128];
    if (fstat(fd, &st)) { stale_gone(t, errno, e); goto fail; }
    if (!S_ISREG(st.st_mode)) { stale_changed(t, "file type", "since it was imported", e); goto fail; }
    ident_diff(t, &st, diff, sizeof diff);
    if (diff[0]) { stale_changed(t, diff, "since it was imported", e); goto fail; }
    r->ident = st;
    uint64_t len = (uint64_t)st.st_size;
    int deflate = t->codec == QS_CODEC_DEFLATE;
    if (deflate ? t->comp_offset > len || t->comp_size > len - t->comp_offset
                : t->data_offset > len || t->nbytes > len - t->data_offset) {
        qs_fail(e, "%s: stale reference for tensor '%s': %s outside the file", t->source_path, t->name,
                deflate ? "member" : "data");
        goto fail;
    }
    if (attach_fd(r, fd, deflate, t->data_offset, t->comp_offset, t->comp_size, t->data_offset + t->nbytes, e)) goto fail;
    return r;
fail:
    qs_treader_close(r);
    return NULL;
}

int qs_treader_verify(qs_treader *r, qs_err *e)
{
    if (r->fd < 0) return 0;   /* embedded (one snapshot) or an image the importer checks itself */
    struct stat st;
    if (fstat(r->fd, &st))
        return qs_fail(e, "%s: stale reference for tensor '%s': %s", r->path, r->name, strerror(errno));
    if (st.st_size != r->ident.st_size || ts_ns(st.st_mtim) != ts_ns(r->ident.st_mtim) ||
        ts_ns(st.st_ctim) != ts_ns(r->ident.st_ctim))
        return qs_fail(e, "%s: stale reference for tensor '%s': the file changed while it was being read "
                       "(nothing was stored; re-import it)", r->path, r->name);
    return 0;
}

void qs_treader_close(qs_treader *r)
{
    if (!r) return;
    if (r->map && r->maplen) munmap(r->map, r->maplen);
    if (r->fd >= 0) close(r->fd);
    if (r->dfd >= 0) close(r->dfd);
    if (r->blob) sqlite3_blob_close(r->blob);
    if (r->find) sqlite3_finalize(r->find);
    if (r->has_mu) pthread_mutex_destroy(&r->mu);
    free(r);
}

uint64_t qs_treader_numel(const qs_treader *r) { return r->numel; }
uint64_t qs_treader_nbytes(const qs_treader *r) { return r->nbytes; }

/* ------------------------------------------------------------------------------------------ */

/* A blob handle whose row was changed through this connection (say, the tensor re-embedded)
** is expired for good, and so is one whose reopen failed: drop it so the next read looks the
** chunk up again instead of failing forever. */
static void blob_drop(qs_treader *r)
{
    if (r->blob) sqlite3_blob_close(r->blob);
    r->blob = NULL;
    r->blob_seq = -1;
}

/* Blob chunks: C-order bytes, QS_CHUNK_BYTES per row.  Called with r->mu held. */
static int blob_read(qs_treader *r, uint64_t off, size_t n, uint8_t *out, qs_err *e)
{
    while (n) {
        int64_t seq = (int64_t)(off / QS_CHUNK_BYTES);
        size_t within = (size_t)(off % QS_CHUNK_BYTES);
        uint64_t chunk_len = r->nbytes - (uint64_t)seq * QS_CHUNK_BYTES;
        if (chunk_len > QS_CHUNK_BYTES) chunk_len = QS_CHUNK_BYTES;
        if (seq != r->blob_seq) {
            sqlite3_reset(r->find);
            sqlite3_bind_int64(r->find, 1, r->tensor_id);
            sqlite3_bind_int64(r->find, 2, seq);
            if (sqlite3_step(r->find) != SQLITE_ROW)
                return qs_fail(e, "tensor '%s': embedded data chunk %lld is missing", r->path, (long long)seq);
            int64_t rowid = sqlite3_column_int64(r->find, 0);
            if ((uint64_t)sqlite3_column_int64(r->find, 1) != chunk_len)
                return qs_fail(e, "tensor '%s': embedded data chunk %lld has the wrong size", r->path, (long long)seq);
            sqlite3_reset(r->find);
            int rc = r->blob ? sqlite3_blob_reopen(r->blob, rowid)
                             : sqlite3_blob_open(r->db->h, "main", "tensor_chunk", "data", rowid, 0, &r->blob);
            if (rc != SQLITE_OK) {
                qs_fail(e, "tensor '%s': embedded data chunk %lld cannot be opened: %s", r->path, (long long)seq,
                        rc == SQLITE_ABORT ? "it changed while the reader was open" : sqlite3_errmsg(r->db->h));
                blob_drop(r);
                return -1;
            }
            r->blob_seq = seq;
        }
        size_t take = (size_t)chunk_len - within;
        if (take > n) take = n;
        int rc = sqlite3_blob_read(r->blob, out, (int)take, (int)within);
        if (rc != SQLITE_OK) {
            qs_fail(e, "tensor '%s': embedded data chunk %lld cannot be read: %s", r->path, (long long)seq,
                    rc == SQLITE_ABORT ? "it changed while the reader was open" : sqlite3_errstr(rc));
            blob_drop(r);
            return -1;
        }
        out += take; off += take; n -= take;
    }
    return 0;
}

/* Column-major source: gather elements in C order (element dtypes only). */
static void fortran_gather(const qs_treader *r, uint64_t first, size_t count, uint8_t *out)
{
    size_t es = r->tr->block_bytes;
    uint64_t idx[QS_MAX_DIMS], fstride[QS_MAX_DIMS];
    uint64_t rem = first;
    for (int k = r->ndim - 1; k >= 0; k--) { idx[k] = rem % r->shape[k]; rem /= r->shape[k]; }
    fstride[0] = 1;
    for (int k = 1; k < r->ndim; k++) fstride[k] = fstride[k - 1] * r->shape[k - 1];
    uint64_t foff = 0;
    for (int k = 0; k < r->ndim; k++) foff += idx[k] * fstride[k];
    int last = r->ndim - 1;
    for (size_t i = 0; i < count; i++) {
        memcpy(out + i * es, r->mem + foff * es, es);
        /* advance the C-order multi-index, keeping the column-major offset in step */
        for (int k = last; k >= 0; k--) {
            if (++idx[k] < r->shape[k]) { foff += fstride[k]; break; }
            foff -= (r->shape[k] - 1) * fstride[k];
            idx[k] = 0;
        }
    }
}

int qs_treader_read_bytes(qs_treader *r, uint64_t off, size_t n, uint8_t *out, qs_err *e)
{
    if (off > r->nbytes || n > r->nbytes - off) return qs_fail(e, "%s: read past the end of the tensor", r->path);
    if (n == 0) return 0;
    if (r->mem) {
        size_t es = r->tr->block_bytes;
        if (r->fortran && (off % es || n % es)) return qs_fail(e, "%s: unaligned read of column-major data", r->path);
        return mapped_read(r, off, n, out, e);
    }
    if (r->dfd >= 0) return fd_read(r, off, n, out, e);
    pthread_mutex_lock(&r->mu);
    int rc = blob_read(r, off, n, out, e);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int qs_treader_read_f32(qs_treader *r, uint64_t start, size_t n, float *out, qs_err *e)
{
    if (start > r->numel || n > r->numel - start) return qs_fail(e, "%s: read past the end of the tensor", r->path);
    const unsigned be = r->tr->block_elems, bb = r->tr->block_bytes;
    if (r->dt == QS_DT_F32 && !r->fortran && (r->mem || r->dfd >= 0))
        return qs_treader_read_bytes(r, start * 4, n * 4, (uint8_t *)out, e);
    enum { PIECE_BLOCKS = 4096 };
    uint8_t *raw = malloc((size_t)PIECE_BLOCKS * bb);
    float *dec = be > 1 ? malloc((size_t)PIECE_BLOCKS * be * sizeof(float)) : NULL;
    if (!raw || (be > 1 && !dec)) { free(raw); free(dec); return qs_fail(e, "out of memory"); }
    int rc = 0;
    while (n) {
        uint64_t b0 = start / be;
        size_t skip = (size_t)(start % be);
        uint64_t nblk = (skip + n + be - 1) / be;
        if (nblk > PIECE_BLOCKS) nblk = PIECE_BLOCKS;
        if ((rc = qs_treader_read_bytes(r, b0 * bb, (size_t)nblk * bb, raw, e))) break;
        size_t take = (size_t)nblk * be - skip;
        if (take > n) take = n;
        if (be == 1) r->tr->decode(raw, out, (size_t)nblk);
        else { r->tr->decode(raw, dec, (size_t)nblk); memcpy(out, dec + skip, take * sizeof(float)); }
        out += take; start += take; n -= take;
    }
    free(raw);
    free(dec);
    return rc;
}

int qs_treader_read_cb(void *reader, uint64_t start, size_t n, float *out, qs_err *e)
{
    return qs_treader_read_f32(reader, start, n, out, e);
}

int qs_treader_hash(qs_treader *r, qs_dtype dt, const uint64_t *shape, int ndim, char out[33], qs_err *e)
{
    XXH3_state_t *s = XXH3_createState();
    enum { PIECE = 1 << 22 };
    uint8_t *buf = malloc(PIECE);
    if (!s || !buf) { XXH3_freeState(s); free(buf); return qs_fail(e, "out of memory"); }
    char desc[400];
    char sh[300];
    qs_shape_json(shape, ndim, sh, sizeof sh);
    int dl = snprintf(desc, sizeof desc, "qscope-tensor-v1 %s %s", qs_dtype_get(dt)->name, sh);
    XXH3_128bits_reset(s);
    XXH3_128bits_update(s, desc, (size_t)dl + 1);
    int rc = 0;
    for (uint64_t off = 0; off < r->nbytes;) {
        size_t n = r->nbytes - off > PIECE ? PIECE : (size_t)(r->nbytes - off);
        /* column-major gathers must stay element aligned */
        n -= n % r->tr->block_bytes ? n % r->tr->block_bytes : 0;
        if ((rc = qs_treader_read_bytes(r, off, n, buf, e))) break;
        XXH3_128bits_update(s, buf, n);
        off += n;
    }
    if (!rc) {
        XXH128_hash_t h = XXH3_128bits_digest(s);
        snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
    }
    XXH3_freeState(s);
    free(buf);
    return rc;
}
