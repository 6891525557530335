/*
** Importance matrices (imatrix.h): the legacy .dat reader and writer, lookups, and the importances
** llama-quantize derives from an entry.  The GGUF format is imatrix_gguf.c.
*/
#include "imatrix.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "container.h"
#include "io_err.h"
#include "text_escape.h"

void qs_imatrix_free(qs_imatrix *m)
{
    if (!m) return;
    for (int i = 0; i < m->n; i++) { free(m->e[i].name); free(m->e[i].sums); free(m->e[i].counts); }
    for (int i = 0; i < m->ndatasets; i++) free(m->datasets[i]);
    free(m->e);
    free(m->datasets);
    memset(m, 0, sizeof *m);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const qs_imat_entry *)a)->name, ((const qs_imat_entry *)b)->name);
}

void qs_imatrix_sort(qs_imatrix *m)
{
    if (m->n > 1) qsort(m->e, (size_t)m->n, sizeof *m->e, by_name);
}

const qs_imat_entry *qs_imatrix_find(const qs_imatrix *m, const char *name)
{
    qs_imat_entry key = {.name = (char *)name};
    return m->n ? bsearch(&key, m->e, (size_t)m->n, sizeof *m->e, by_name) : NULL;
}

int qs_imatrix_weights(const qs_imatrix *m, const qs_imat_entry *en, float **w, qs_err *e)
{
    size_t n = (size_t)en->ne0 * (size_t)en->nmat;
    float *v = malloc(n * sizeof *v);
    if (!v) return qs_fail(e, "out of memory");
    for (int64_t j = 0; j < en->nmat; j++) {
        const float *s = en->sums + (size_t)j * (size_t)en->ne0;
        float *o = v + (size_t)j * (size_t)en->ne0;
        /* llama-quantize: (float) count, and the legacy ncall as an int64 */
        float c = m->legacy ? (float)en->counts[0] : (float)en->counts[j];
        for (int64_t i = 0; i < en->ne0; i++) {
            if (m->legacy) o[i] = en->counts[0] > 0 ? s[i] / c : s[i];
            else o[i] = c > 0.0f ? s[i] / c : 1.0f;
            if (!isfinite(o[i])) {
                free(v);
                return qs_fail(e, "entry '%s' has a non-finite importance at column %lld (llama-quantize refuses it)",
                               qs_esc(en->name), (long long)i);
            }
        }
    }
    *w = v;
    return 0;
}

static int32_t rd32(const uint8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }

/* A name: 1..4096 bytes without NUL (llama.cpp would cut it at the first NUL). */
static int take_name(const uint8_t *b, size_t len, size_t *p, char **out, qs_err *e)
{
    if (len - *p < 4) return qs_fail(e, "truncated name length (at byte %zu)", *p);
    int32_t n = rd32(b + *p);
    if (n < 1 || n > 4096) return qs_fail(e, "name length %d out of range 1..4096 (at byte %zu)", n, *p);
    *p += 4;
    if (len - *p < (size_t)n) return qs_fail(e, "truncated name of %d bytes (at byte %zu)", n, *p);
    if (memchr(b + *p, 0, (size_t)n)) return qs_fail(e, "name holds a NUL byte (at byte %zu)", *p);
    if (!(*out = malloc((size_t)n + 1))) return qs_fail(e, "out of memory");
    memcpy(*out, b + *p, (size_t)n);
    (*out)[n] = 0;
    *p += (size_t)n;
    return 0;
}

static int check_unique(const qs_imatrix *m, qs_err *e)
{
    for (int i = 1; i < m->n; i++)
        if (!strcmp(m->e[i - 1].name, m->e[i].name)) return qs_fail(e, "entry '%s' appears twice", qs_esc(m->e[i].name));
    return 0;
}

static int parse_dat(const uint8_t *b, size_t len, qs_imatrix *m, qs_err *e)
{
    size_t p = 4;
    if (len < 4) return qs_fail(e, "too short for an imatrix (%zu bytes)", len);
    int32_t n = rd32(b);
    /* each entry takes at least 4 + 1 + 8 + 4 bytes: the count is checked before anything is allocated */
    if (n < 1 || (uint64_t)n > (len - 4) / 17) return qs_fail(e, "entry count %d does not fit the file (at byte 0)", n);
    if (!(m->e = calloc((size_t)n, sizeof *m->e))) return qs_fail(e, "out of memory");
    m->legacy = 1;
    for (int i = 0; i < n; i++) {
        qs_imat_entry *en = &m->e[i];
        if (take_name(b, len, &p, &en->name, e)) return -1;
        m->n = i + 1;
        if (len - p < 8) return qs_fail(e, "entry '%s': truncated ncall/nval (at byte %zu)", qs_esc(en->name), p);
        int32_t ncall = rd32(b + p), nval = rd32(b + p + 4);
        if (nval < 1 || (size_t)nval > (len - p - 8) / 4)
            return qs_fail(e, "entry '%s': %d values do not fit the file (at byte %zu)", qs_esc(en->name), nval, p + 4);
        p += 8;
        en->ne0 = nval;
        en->nmat = 1;
        en->sums = malloc((size_t)nval * 4);
        en->counts = malloc(sizeof *en->counts);
        if (!en->sums || !en->counts) return qs_fail(e, "out of memory");
        memcpy(en->sums, b + p, (size_t)nval * 4);
        en->counts[0] = ncall;
        p += (size_t)nval * 4;
    }
    /* the optional trailer: the chunk count, then the dataset's name */
    if (len - p >= 4) {
        m->chunk_count = rd32(b + p);
        p += 4;
        if (len - p >= 4 && rd32(b + p) > 0) {
            char *ds = NULL;
            if (take_name(b, len, &p, &ds, e)) { qs_err_prefix(e, "dataset"); return -1; }
            if (!(m->datasets = malloc(sizeof *m->datasets))) { free(ds); return qs_fail(e, "out of memory"); }
            m->datasets[0] = ds;
            m->ndatasets = 1;
        }
    }
    qs_imatrix_sort(m);
    return check_unique(m, e);
}

int qs_imatrix_parse(const uint8_t *b, size_t len, qs_imatrix *m, qs_err *e)
{
    memset(m, 0, sizeof *m);
    int rc = len >= 4 && !memcmp(b, "GGUF", 4) ? qs_imatrix_parse_gguf(b, len, m, e) : parse_dat(b, len, m, e);
    if (rc) qs_imatrix_free(m);
    return rc;
}

int qs_imatrix_read(const char *path, qs_imatrix *m, char *hash, qs_err *e)
{
    qs_file_map fm;
    memset(m, 0, sizeof *m);
    if (qs_file_map_open(path, &fm, e)) return -1;
    int rc = qs_imatrix_parse(fm.p, fm.n, m, e);
    if (rc) {
        char pre[300];
        snprintf(pre, sizeof pre, "%s: not an importance matrix", qs_esc(path));
        qs_err_prefix(e, pre);
    } else if (hash) {
        XXH128_hash_t h = XXH3_128bits(fm.p, fm.n);
        snprintf(hash, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
    }
    qs_file_map_close(&fm);
    return rc;
}

static int put(FILE *fo, const void *p, size_t n) { return fwrite(p, 1, n, fo) == n ? 0 : -1; }

int qs_imatrix_write_dat(const char *path, const qs_imatrix *m, qs_err *e)
{
    if (m->legacy || m->chunk_size < 1) return qs_fail(e, "%s: only computed sums can be written", qs_esc(path));
    FILE *fo = fopen(path, "wb");
    if (!fo) return qs_write_fail(e, path, errno);
    int32_t n = 0, bad = 0;
    for (int i = 0; i < m->n; i++) {   /* entries without any token are left out, as llama-imatrix does */
        int any = 0;
        for (int64_t j = 0; j < m->e[i].nmat; j++) any |= m->e[i].counts[j] > 0;
        n += any;
    }
    bad |= put(fo, &n, 4);
    for (int i = 0; i < m->n && !bad; i++) {
        const qs_imat_entry *en = &m->e[i];
        double mx = 0;
        for (int64_t j = 0; j < en->nmat; j++) mx = en->counts[j] > mx ? en->counts[j] : mx;
        if (mx <= 0) continue;
        int32_t len = (int32_t)strlen(en->name), nval = (int32_t)(en->ne0 * en->nmat);
        int32_t ncall = (int32_t)(((int64_t)mx + (m->chunk_size - 1)) / m->chunk_size);
        bad |= put(fo, &len, 4) | put(fo, en->name, (size_t)len) | put(fo, &ncall, 4) | put(fo, &nval, 4);
        for (int64_t j = 0; j < en->nmat && !bad; j++)
            for (int64_t k = 0; k < en->ne0 && !bad; k++) {
                float c = (float)en->counts[j], v = en->sums[j * en->ne0 + k];
                if (c == 0.0f) v = c = 1.0f;   /* partial data: 1, as llama-imatrix stores it */
                float t = (v / c) * (float)ncall;
                bad |= put(fo, &t, 4);
            }
    }
    int32_t chunks = (int32_t)m->chunk_count, dl = m->ndatasets ? (int32_t)strlen(m->datasets[0]) : 0;
    bad |= put(fo, &chunks, 4) | put(fo, &dl, 4);
    if (dl) bad |= put(fo, m->datasets[0], (size_t)dl);
    int werr = bad ? errno : 0;
    if (fclose(fo) || bad) return qs_write_fail(e, path, werr ? werr : errno);
    return 0;
}
