/*
** Import orchestration (see importer.h).
**
** The file is parsed as a whole first (an .npy or .safetensors from its header alone, other kinds
** through a read-only mapping dropped after the parse), so a malformed file is rejected before anything is
** written.  Each tensor is then read in windows: hashed over its C-order bytes; an unchanged
** hash means the row, its statistics and any embedded data stay as they are.
*/
#include "importer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../store/text_escape.h"
#include "stats_store.h"
#include "tensor_stats.h"
#include "../store/container.h"
#include "../store/tensor.h"
#include "../store/npy_write.h"
#include "../store/json_out.h"
#include "../store/q_tensors.h"
#include "../store/tensor_write.h"

/* The file name without directory and tensor extension, whole (malloc'd; NULL on OOM). */
static char *file_stem(const char *path)
{
    const char *b = strrchr(path, '/');
    char *out = strdup(b ? b + 1 : path);
    if (!out) return NULL;
    static const char *ext[] = {".npy", ".npz", ".safetensors", ".gguf"};
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
        size_t n = strlen(out), m = strlen(ext[i]);
        if (n > m && strcmp(out + n - m, ext[i]) == 0) { out[n - m] = 0; break; }
    }
    return out;
}

static void report_add(json_t *report, const char *name, const char *status, const qs_tdesc *d,
                       int is_blob, const char *hash)
{
    if (!report) return;
    json_t *sh = json_array();
    for (int i = 0; i < d->ndim; i++) json_array_append_new(sh, json_integer((json_int_t)d->shape[i]));
    uint64_t nbytes = d->nbytes;
    json_t *o = json_pack("{s:s,s:s,s:o,s:I,s:I,s:s,s:s}", "status", status, "dtype", qs_dtype_get(d->dtype)->name,
                          "shape", sh, "numel", (json_int_t)d->numel, "nbytes", (json_int_t)nbytes, "storage",
                          is_blob ? "blob" : "ref", "hash", hash);
    qs_json_set_text(o, "name", name);
    json_array_append_new(report, o);
}

static int import_tensor(qs_db *db, int fd, const char *path, const qs_tdesc *d,
                         const char *name, int64_t source_id, const qs_import_opts *o, json_t *report,
                         int64_t *out_id, qs_err *e)
{
    int rc = -1;
    qs_treader *r = qs_treader_from_fd(fd, d, path, e);
    if (!r) return -1;
    char hash[33], old_hash[33] = "";
    int64_t id = 0, old_source = 0;
    int old_blob = 0;
    if (qs_treader_hash(r, d->dtype, d->shape, d->ndim, hash, e)) goto out;
    if (qs_tensor_find(db, name, &id, old_hash, &old_source, &old_blob, e)) goto out;
    if (id && old_source != source_id) {
        /* the name shortened whole-character, so the message keeps its end within qs_err */
        qs_fail(e, "%s: tensor name '%.*s%s' is already used by another file (choose another name with --prefix)",
                path, QS_CLIP(name, 200), strlen(name) > 200 ? "..." : "");
        goto out;
    }
    int same = id && strcmp(hash, old_hash) == 0;
    qs_tensor_row w = {
        .name = name, .member = d->name, .hash = hash, .source_id = source_id,
        /* computed tensors (gen, quant) carry their provenance on the tensor row too */
        .metadata = d->meta_json ? d->meta_json : o->source_meta,
        .dtype = d->dtype, .ndim = d->ndim, .shape = d->shape, .numel = d->numel, .nbytes = d->nbytes,
        .is_blob = o->copy, .fortran = d->fortran, .codec = d->codec, .data_offset = d->offset,
        .comp_offset = d->comp_offset, .comp_size = d->comp_size, .inflated_size = d->inflated_size,
    };
    int64_t had = id;
    if (qs_tensor_put(db, &w, &id, e)) goto out;
    const char *status = !had ? "added" : !same ? "updated" : (o->copy && !old_blob) ? "embedded" : "unchanged";
    if (o->copy && (!same || !old_blob)) {
        if (qs_tensor_embed(db, id, r, e)) goto out;
    } else if (!o->copy && old_blob) {
        if (qs_tensor_chunks_delete(db, id, e)) goto out;
    }
    int have_stats = 0;
    if (same) {
        qs_tensor_stats tmp;
        if (qs_stats_load(db, id, &tmp, &have_stats, e)) goto out;
    }
    if (!have_stats) {
        qs_tensor_stats s;
        uint64_t rows, cols;
        qs_tensor_matrix_view(d->shape, d->ndim, &rows, &cols);
        if (d->ndim < 2) rows = cols = 0;
        if (qs_tensor_stats_compute(qs_treader_read_cb, r, 1, d->numel, rows, cols, o->jobs > 0 ? o->jobs : 2, &s, e))
            goto out;
        if (qs_stats_save(db, id, &s, e)) goto out;
    }
    report_add(report, name, status, d, o->copy, hash);
    *out_id = id;
    rc = 0;
out:
    qs_treader_close(r);
    if (rc && strncmp(e->msg, path, strlen(path)) != 0) qs_err_prefix(e, path);
    return rc;
}

/* Remove the source row for spath, if any, with its tensors (file now holds none). */
static int drop_source(qs_db *db, const char *spath, json_t *report, qs_err *e)
{
    int64_t id;
    if (qs_source_id(db, spath, &id, e)) return -1;
    if (!id) return 0;
    int removed = 0;
    if (qs_source_prune(db, id, NULL, 0, &removed, e)) return -1;
    if (qs_source_delete(db, id, e)) return -1;
    if (removed && report)
        json_array_append_new(report, json_pack("{s:s,s:s,s:i}", "name", spath, "status", "removed", "count", removed));
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Two tensors of one file must never land in one row (the second would overwrite the first). */
static int distinct_ids(const int64_t *ids, size_t n, const char *path, qs_err *e)
{
    int64_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return qs_fail(e, "out of memory");
    memcpy(v, ids, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_i64);
    int dup = 0;
    for (size_t i = 1; i < n && !dup; i++) dup = v[i] == v[i - 1];
    free(v);
    return dup ? qs_fail(e, "%s: two tensors of the file map to the same name", path) : 0;
}

int qs_import_file(qs_db *db, const char *path, const qs_import_opts *o, json_t *report, qs_err *e)
{
    int rc = -1;
    int fd = qs_open_regular(path, e);   /* a FIFO would block a plain open */
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st)) { close(fd); return qs_fail(e, "%s: %s", path, strerror(errno)); }
    size_t len = (size_t)st.st_size;
    if (len == 0) { close(fd); return qs_fail(e, "%s: empty file (at byte 0)", path); }

    qs_container c = {0};
    qs_parse_opts po = {.reinterpret = o->reinterpret};
    int64_t *keep = NULL;
    char *stem = NULL;
    char real[PATH_MAX];
    if (qs_parse_fd(fd, len, path, &po, &c, e)) { qs_err_prefix(e, path); goto out; }
    if (o->exact_name && c.n != 1) { qs_fail(e, "%s: expected exactly one tensor", path); goto out; }

    const char *spath = o->source_path;
    if (!spath) {
        if (!realpath(path, real)) { qs_fail(e, "%s: %s", path, strerror(errno)); goto out; }
        spath = real;
    }
    if (c.n == 0) {
        /* Nothing to import leaves no source row (and drops one an earlier import left). */
        if (qs_container_warn(&c, "no tensor qscope can import; nothing stored") ||
            drop_source(db, spath, report, e)) goto out;
        rc = 0;
        goto out;
    }
    int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    int64_t source_id;
    if (qs_source_upsert(db, spath, o->source_kind ? o->source_kind : c.kind, (int64_t)len, mtime,
                         o->source_meta ? o->source_meta : c.meta_json, &source_id, e)) goto out;
    if (!o->source_path && qs_source_set_identity(db, source_id, (int64_t)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec,
                                                  (int64_t)st.st_ino, (int64_t)st.st_dev, e)) goto out;
    /* Generated data lives only in the database: references would point at a temporary file. */
    qs_import_opts eff = *o;
    if (o->source_path) eff.copy = 1;

    stem = file_stem(path);
    const char *prefix = o->prefix ? o->prefix : stem;
    keep = calloc(c.n ? c.n : 1, sizeof *keep);
    if (!keep || !stem) { qs_fail(e, "out of memory"); goto out; }
    for (size_t i = 0; i < c.n; i++) {
        const qs_tdesc *d = &c.t[i];
        /* Names are stored whole: a cut name could merge two tensors into one row. */
        char *name = NULL;
        if (o->exact_name) name = strdup(o->exact_name);
        else if (!d->name || !*d->name) name = strdup(prefix);
        else if (asprintf(&name, "%s:%s", prefix, d->name) < 0) name = NULL;
        if (!name) { qs_fail(e, "out of memory"); goto out; }
        int bad = import_tensor(db, fd, path, d, name, source_id, &eff, report, &keep[i], e);
        free(name);
        if (bad) goto out;
    }
    /* the hashes above are of the bytes read only if the file did not change meanwhile */
    struct stat now;
    if (fstat(fd, &now) || now.st_size != st.st_size || now.st_mtim.tv_sec != st.st_mtim.tv_sec ||
        now.st_mtim.tv_nsec != st.st_mtim.tv_nsec || now.st_ctim.tv_sec != st.st_ctim.tv_sec ||
        now.st_ctim.tv_nsec != st.st_ctim.tv_nsec) {
        qs_fail(e, "%s: the file changed while it was being imported", path);
        goto out;
    }
    if (distinct_ids(keep, c.n, path, e)) goto out;
    int removed = 0;
    if (qs_source_prune(db, source_id, keep, c.n, &removed, e)) goto out;
    if (removed && report)
    {
        json_t *ro = json_pack("{s:s,s:i}", "status", "removed", "count", removed);
        qs_json_set_text(ro, "name", spath);
        json_array_append_new(report, ro);
    }
    rc = 0;
out:
    if (rc == 0) {
        for (size_t i = 0; i < c.nwarn; i++) {
            if (o->warnings) json_array_append_new(o->warnings, json_sprintf("%s: warning: %s", qs_esc(path), qs_esc(c.warnings[i])));
            else fprintf(stderr, "qscope: %s: warning: %s\n", qs_esc(path), qs_esc(c.warnings[i]));
        }
    } else if (strncmp(e->msg, path, strlen(path)) != 0 || e->msg[strlen(path)] != ':') {
        qs_err_prefix(e, path);   /* database errors (disk full, file size limit) name the file too */
    }
    free(keep);
    free(stem);
    qs_container_free(&c);
    close(fd);
    return rc;
}

int qs_import_f32(qs_db *db, const char *name, const uint64_t *shape, int ndim, qs_fill_fn fill, void *ctx,
                  const char *source_path, const char *source_kind, const char *source_meta, json_t *report,
                  qs_err *e)
{
    const char *dir = getenv("TMPDIR");
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s/qscope-f32-%ld-XXXXXX.npy", dir && *dir ? dir : "/tmp", (long)getpid());
    int fd = mkstemps(tmp, 4);
    if (fd < 0) return qs_fail(e, "%s: %s", tmp, strerror(errno));
    close(fd);
    int rc = qs_npy_write_f32(tmp, shape, ndim, fill, ctx, e);
    if (rc == 0) {
        qs_import_opts o = {.copy = 1, .exact_name = name, .jobs = 2, .source_path = source_path,
                            .source_kind = source_kind, .source_meta = source_meta};
        rc = qs_import_file(db, tmp, &o, report, e);
    }
    unlink(tmp);
    return rc;
}
