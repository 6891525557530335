/*
** Shared by the store tests (test_store.c: the database; test_tensor_io.c: tensors through the
** writer and the reader): a fixture with an open database in a temporary directory (under $TMPDIR,
** else the system's P_tmpdir) that teardown removes, and helpers that put and read tensors.
*/
#ifndef QS_TEST_STORE_UTIL_H
#define QS_TEST_STORE_UTIL_H

#include "test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sqlite3.h>
#include <zlib.h>

#include "../../analysis/stats_store.h"
#include "../../store/db.h"
#include "../../store/tensor.h"
#include "../../store/tensor_write.h"

/* ---- fixture: a temporary directory with an open database ---------------------------------- */

typedef struct fixture {
    char dir[64];
    qs_db *db;
} fixture;

static inline int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static inline int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    snprintf(f->dir, sizeof f->dir, "%s/qs_test_store_XXXXXX", (getenv("TMPDIR") && strlen(getenv("TMPDIR")) <= 30) ? getenv("TMPDIR") : P_tmpdir);
    if (!mkdtemp(f->dir)) { free(f); return -1; }
    char path[128];
    snprintf(path, sizeof path, "%s/t.db", f->dir);
    qs_err e = {{0}};
    if (!(f->db = qs_db_open(path, &e))) {
        fprintf(stderr, "# %s\n", e.msg);
        nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static inline int teardown(void **state)
{
    fixture *f = *state;
    if (!f) return 0;
    qs_db_close(f->db);
    nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static inline uint64_t rnd(uint64_t *s)   /* splitmix64: reproducible runs */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void fpath(const fixture *f, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", f->dir, name);
}

static inline void write_file(const char *path, const void *buf, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(buf, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
}

static inline void stat_of(const char *path, int64_t *size, int64_t *mtime_ns)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    *size = (int64_t)st.st_size;
    *mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
}

/* One integer from a query on the raw handle. */
static inline int64_t q_int(qs_db *db, const char *sql, int64_t bind1)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db->h, sql, -1, &st, NULL), SQLITE_OK);
    if (sqlite3_bind_parameter_count(st) >= 1) sqlite3_bind_int64(st, 1, bind1);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static inline char *q_text(qs_db *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db->h, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    const unsigned char *t = sqlite3_column_text(st, 0);
    char *s = strdup(t ? (const char *)t : "");
    sqlite3_finalize(st);
    return s;
}

static inline void assert_msg(const qs_err *e, const char *phrase)
{
    if (!strstr(e->msg, phrase)) fail_msg("error '%s' lacks '%s'", e->msg, phrase);
}

/* Descriptor of an uncompressed tensor at `offset` of a file. */
static inline qs_tdesc desc_of(qs_dtype dt, int ndim, const uint64_t *shape, uint64_t offset)
{
    qs_tdesc d;
    memset(&d, 0, sizeof d);
    d.name = "";
    d.dtype = dt;
    d.ndim = ndim;
    if (ndim) memcpy(d.shape, shape, sizeof(uint64_t) * (size_t)ndim);   /* scalars pass NULL */
    assert_int_equal(qs_shape_numel(shape, ndim, &d.numel), 0);
    assert_int_equal(qs_dtype_nbytes(dt, d.numel, &d.nbytes), 0);
    d.offset = offset;
    return d;
}

/* Hash a tensor the way the importer does: a reader over the file image. */
static inline void hash_image(const uint8_t *buf, size_t len, const qs_tdesc *d, char hash[33])
{
    qs_err e = {{0}};
    qs_treader *r = qs_treader_from_image(buf, len, d, "image", &e);
    if (!r) fail_msg("from_image: %s", e.msg);
    if (qs_treader_hash(r, d->dtype, d->shape, d->ndim, hash, &e)) fail_msg("hash: %s", e.msg);
    qs_treader_close(r);
}

/* Import a tensor by reference (what analysis/importer.c does, without a parser). */
static inline int64_t put_ref(fixture *f, const char *path, const char *kind, const qs_tdesc *d,
                       const char *name, char hash[33])
{
    size_t len = 0;
    uint8_t *buf = tu_slurp(path, &len);
    assert_non_null(buf);
    hash_image(buf, len, d, hash);
    free(buf);
    int64_t size, mt, sid, id = 0;
    stat_of(path, &size, &mt);
    qs_err e = {{0}};
    if (qs_source_upsert(f->db, path, kind, size, mt, NULL, &sid, &e)) fail_msg("%s", e.msg);
    qs_tensor_row row = {
        .name = name, .member = d->name, .hash = hash, .source_id = sid, .dtype = d->dtype,
        .ndim = d->ndim, .shape = d->shape, .numel = d->numel, .nbytes = d->nbytes,
        .fortran = d->fortran, .codec = d->codec, .data_offset = d->offset,
        .comp_offset = d->comp_offset, .comp_size = d->comp_size, .inflated_size = d->inflated_size,
    };
    if (qs_tensor_put(f->db, &row, &id, &e)) fail_msg("%s", e.msg);
    assert_true(id > 0);
    return id;
}

/* Embed a tensor held in memory (C-order bytes) under source `sid`. */
static inline int64_t put_blob(fixture *f, int64_t sid, const char *name, const qs_tdesc *d, const uint8_t *bytes,
                        size_t len, char hash[33])
{
    qs_err e = {{0}};
    qs_treader *r = qs_treader_from_image(bytes, len, d, name, &e);
    if (!r) fail_msg("%s", e.msg);
    if (qs_treader_hash(r, d->dtype, d->shape, d->ndim, hash, &e)) fail_msg("%s", e.msg);
    qs_tensor_row row = {
        .name = name, .member = d->name, .hash = hash, .source_id = sid, .dtype = d->dtype,
        .ndim = d->ndim, .shape = d->shape, .numel = d->numel, .nbytes = d->nbytes, .is_blob = 1,
        .fortran = d->fortran,
    };
    int64_t id = 0;
    if (qs_tensor_put(f->db, &row, &id, &e)) fail_msg("%s", e.msg);
    if (qs_tensor_embed(f->db, id, r, &e)) fail_msg("%s", e.msg);
    qs_treader_close(r);
    return id;
}

static inline qs_treader *open_named(fixture *f, const char *name, qs_tensor_rec *t)
{
    qs_err e = {{0}};
    if (qs_tensor_get(f->db, name, t, &e)) fail_msg("get '%s': %s", name, e.msg);
    qs_treader *r = qs_treader_open(f->db, t, &e);
    if (!r) fail_msg("open '%s': %s", name, e.msg);
    return r;
}

/* Compare read_f32 / read_bytes over [start, start+n) against the expected arrays (bitwise). */
static inline void check_f32(qs_treader *r, const float *want, uint64_t start, size_t n)
{
    float *got = malloc((n ? n : 1) * sizeof *got);
    assert_non_null(got);
    qs_err e = {{0}};
    if (qs_treader_read_f32(r, start, n, got, &e)) fail_msg("read_f32(%llu, %zu): %s", (unsigned long long)start, n, e.msg);
    if (memcmp(got, want + start, n * sizeof *got)) {
        for (size_t i = 0; i < n; i++)
            if (memcmp(&got[i], &want[start + i], 4))
                fail_msg("read_f32(%llu, %zu): element %llu is %g, expected %g", (unsigned long long)start, n,
                         (unsigned long long)(start + i), got[i], want[start + i]);
    }
    free(got);
}

static inline void check_bytes(qs_treader *r, const uint8_t *want, uint64_t off, size_t n)
{
    uint8_t *got = malloc(n ? n : 1);
    assert_non_null(got);
    qs_err e = {{0}};
    if (qs_treader_read_bytes(r, off, n, got, &e)) fail_msg("read_bytes(%llu, %zu): %s", (unsigned long long)off, n, e.msg);
    if (memcmp(got, want + off, n)) fail_msg("read_bytes(%llu, %zu): wrong bytes", (unsigned long long)off, n);
    free(got);
}

/* Random ranges, plus reads past the end that must fail. */
static inline void check_random(qs_treader *r, const float *want, const uint8_t *bytes, uint64_t numel,
                         uint64_t nbytes, int iters, uint64_t *seed)
{
    assert_int_equal(qs_treader_numel(r), numel);
    assert_int_equal(qs_treader_nbytes(r), nbytes);
    for (int i = 0; i < iters; i++) {
        uint64_t s = rnd(seed) % (numel + 1);
        size_t n = (size_t)(rnd(seed) % (numel - s + 1));
        check_f32(r, want, s, n);
        uint64_t o = rnd(seed) % (nbytes + 1);
        size_t m = (size_t)(rnd(seed) % (nbytes - o + 1));
        check_bytes(r, bytes, o, m);
    }
    check_f32(r, want, 0, (size_t)numel);
    check_bytes(r, bytes, 0, (size_t)nbytes);
    float x[2];
    uint8_t b[2];
    qs_err e = {{0}};
    assert_int_equal(qs_treader_read_f32(r, numel, 1, x, &e), -1);
    assert_msg(&e, "past the end");
    assert_int_equal(qs_treader_read_f32(r, numel - 1, 2, x, &e), -1);
    assert_int_equal(qs_treader_read_bytes(r, nbytes - 1, 2, b, &e), -1);
    assert_int_equal(qs_treader_read_bytes(r, UINT64_MAX, 1, b, &e), -1);
}

/* Independent f16 reference (normal and subnormal only). */
static inline float ref_f16(uint16_t h)
{
    int ex = (h >> 10) & 31, m = h & 1023;
    float v = ex == 0 ? ldexpf((float)m, -24) : ldexpf((float)(1024 + m), ex - 25);
    return h & 0x8000 ? -v : v;
}

static inline uint16_t rnd_f16(uint64_t *s, int emin, int emax)   /* finite, exponent field in [emin, emax] */
{
    uint16_t ex = (uint16_t)(emin + (int)(rnd(s) % (uint64_t)(emax - emin + 1)));
    return (uint16_t)((rnd(s) & 0x8000) | (ex << 10) | (rnd(s) & 1023));
}

static inline void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

#endif
