/*
** The GGUF importance matrix (imatrix.h): read with the store's bounds-checked GGUF cursor
** (gguf_kv.h), written as llama-imatrix's save_imatrix writes it (GGUF v3, alignment 32, keys
** general.type, imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size, then per entry in name order
** NAME.in_sum2 and NAME.counts, F32).
*/
#include "imatrix.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_kv.h"
#include "io_err.h"
#include "text_escape.h"

#define GG_ALIGN 32
#define GG_F32 0
#define GG_MIN_TINFO 29   /* name length 8 + 1 byte, n_dims 4, one ne 8, type 4, offset 8 */

typedef struct ginfo { char *name; uint64_t ne, ne1, off; uint32_t type; size_t at; } ginfo;

typedef struct gmeta { qs_imatrix *m; int has_ds, has_cc, has_cs; uint32_t align; } gmeta;

static int meta_kv(void *ctx, const char *key, uint32_t type, qs_gguf_rd *r, const char *what)
{
    gmeta *g = ctx;
    uint32_t v;
    if ((!strcmp(key, "imatrix.chunk_count") || !strcmp(key, "imatrix.chunk_size") || !strcmp(key, "general.alignment"))
        && type == QS_GGUF_U32) {
        if (qs_gguf_u32(r, &v, what)) return -1;
        if (!strcmp(key, "imatrix.chunk_count")) { g->m->chunk_count = v; g->has_cc = 1; }
        else if (!strcmp(key, "imatrix.chunk_size")) { g->m->chunk_size = v; g->has_cs = 1; }
        else if (v == 0 || (v & (v - 1)) || v > 65536) return qs_fail(r->e, "%s: alignment %u is not a power of two", what, v);
        else g->align = v;
        return 1;
    }
    if (strcmp(key, "imatrix.datasets") || type != QS_GGUF_ARRAY) return 0;
    uint32_t et;
    uint64_t n;
    if (qs_gguf_u32(r, &et, what) || qs_gguf_u64(r, &n, what)) return -1;
    if (et != QS_GGUF_STRING) return 0;
    if (n > (r->len - r->pos) / 8) return qs_fail(r->e, "%s: %llu strings do not fit the file", what, (unsigned long long)n);
    qs_imatrix *m = g->m;
    if (n && !(m->datasets = calloc((size_t)n, sizeof *m->datasets))) return qs_fail(r->e, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        if (qs_gguf_name(r, what, &m->datasets[i])) return -1;
        m->ndatasets = (int)i + 1;
    }
    g->has_ds = 1;
    return 1;
}

static int tinfo(qs_gguf_rd *r, ginfo *t)
{
    uint32_t nd;
    t->at = r->pos;
    if (qs_gguf_name(r, "tensor name", &t->name) || qs_gguf_u32(r, &nd, "tensor info")) return -1;
    if (nd < 1 || nd > 4) return qs_fail(r->e, "tensor '%s': %u dimensions (at byte %zu)", qs_esc(t->name), nd, t->at);
    t->ne = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t x;
        if (qs_gguf_u64(r, &x, "tensor info")) return -1;
        if (x == 0 || x > (1ull << 40) || t->ne > (1ull << 40) / x)
            return qs_fail(r->e, "tensor '%s': dimension %llu out of range (at byte %zu)", qs_esc(t->name), (unsigned long long)x, t->at);
        t->ne *= x;
        if (d == 1) t->ne1 = x;
    }
    if (nd == 1) t->ne1 = 1;
    if (qs_gguf_u32(r, &t->type, "tensor info") || qs_gguf_u64(r, &t->off, "tensor info")) return -1;
    return 0;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n > k && !strcmp(s + n - k, suf);
}

static int by_tname(const void *a, const void *b) { return strcmp(((const ginfo *)a)->name, ((const ginfo *)b)->name); }

/* The tensor named base + suf among the sorted t, or NULL. */
static const ginfo *find(const ginfo *t, uint64_t nt, const char *base, size_t n, const char *suf)
{
    char nm[1100];
    if (n > 1000) return NULL;
    snprintf(nm, sizeof nm, "%.*s%s", (int)n, base, suf);
    ginfo key = {.name = nm};
    return nt ? bsearch(&key, t, (size_t)nt, sizeof *t, by_tname) : NULL;
}

static int entry_of(const uint8_t *b, uint64_t data, const ginfo *s, const ginfo *c, size_t base, qs_imatrix *m, qs_err *e)
{
    if (s->ne % c->ne) return qs_fail(e, "'%s': %llu sums are not a multiple of %llu counts", qs_esc(s->name),
                                      (unsigned long long)s->ne, (unsigned long long)c->ne);
    qs_imat_entry *en = &m->e[m->n];
    if (!(en->name = strndup(s->name, base))) return qs_fail(e, "out of memory");
    m->n++;
    en->nmat = (int64_t)c->ne;
    en->ne0 = (int64_t)(s->ne / c->ne);
    en->sums = malloc(s->ne * 4);
    en->counts = malloc(c->ne * sizeof *en->counts);
    if (!en->sums || !en->counts) return qs_fail(e, "out of memory");
    memcpy(en->sums, b + data + s->off, s->ne * 4);
    for (uint64_t j = 0; j < c->ne; j++) {
        float v;
        memcpy(&v, b + data + c->off + 4 * j, 4);
        if (!isfinite(v) || v < 0 || v > 9e18f) return qs_fail(e, "'%s': count %g is not a token count", qs_esc(c->name), v);
        en->counts[j] = (double)llroundf(v);
    }
    return 0;
}

/* The tensors' data inside the file, F32, and each in_sum2 paired with its counts (t sorted by name). */
static int pair_up(const uint8_t *b, size_t len, uint64_t data, const ginfo *t, uint64_t nt, qs_imatrix *m, qs_err *e)
{
    for (uint64_t i = 0; i < nt; i++) {
        if (i && !strcmp(t[i - 1].name, t[i].name)) return qs_fail(e, "tensor '%s' appears twice", qs_esc(t[i].name));
        int sums = has_suffix(t[i].name, ".in_sum2");
        if (!sums && !has_suffix(t[i].name, ".counts")) continue;   /* llama.cpp ignores other tensors */
        if (t[i].type != GG_F32) return qs_fail(e, "tensor '%s' must be F32 (type %u) (at byte %zu)", qs_esc(t[i].name), t[i].type, t[i].at);
        if (data > len || t[i].off > len - data || t[i].ne * 4 > len - data - t[i].off)
            return qs_fail(e, "tensor '%s': data runs past the end of the file (at byte %zu)", qs_esc(t[i].name), t[i].at);
    }
    for (uint64_t i = 0; i < nt; i++) {
        int sums = has_suffix(t[i].name, ".in_sum2");
        if (!sums && !has_suffix(t[i].name, ".counts")) continue;
        size_t base = strlen(t[i].name) - (sums ? 8 : 7);
        const ginfo *o = find(t, nt, t[i].name, base, sums ? ".counts" : ".in_sum2");
        if (!o) return qs_fail(e, "mismatched sums and counts for '%.*s'", (int)base, qs_esc(t[i].name));
        if (sums && entry_of(b, data, &t[i], o, base, m, e)) return -1;
    }
    return 0;
}

int qs_imatrix_parse_gguf(const uint8_t *b, size_t len, qs_imatrix *m, qs_err *e)
{
    qs_gguf_rd r = {b, len, 4, e};
    uint32_t ver;
    uint64_t nt, nkv;
    if (qs_gguf_u32(&r, &ver, "header") || qs_gguf_u64(&r, &nt, "header") || qs_gguf_u64(&r, &nkv, "header")) return -1;
    if (ver != 2 && ver != 3) return qs_fail(e, "unsupported GGUF version %u (at byte 4)", ver);
    if (nt > (len - r.pos) / GG_MIN_TINFO || nkv > (len - r.pos) / 13)
        return qs_fail(e, "tensor count %llu or key count %llu does not fit the file (at byte 8)", (unsigned long long)nt,
                       (unsigned long long)nkv);
    gmeta g = {m, 0, 0, 0, GG_ALIGN};
    if (qs_gguf_kv_walk(&r, nkv, meta_kv, &g)) return -1;
    m->has_meta = g.has_ds && g.has_cc && g.has_cs;
    ginfo *t = calloc(nt ? (size_t)nt : 1, sizeof *t);
    m->e = calloc(nt ? (size_t)nt : 1, sizeof *m->e);
    int rc = -1;
    if (!t || !m->e) { qs_fail(e, "out of memory"); goto done; }
    for (uint64_t i = 0; i < nt; i++)
        if (tinfo(&r, &t[i])) goto done;
    if (nt > 1) qsort(t, (size_t)nt, sizeof *t, by_tname);
    uint64_t data = (r.pos + g.align - 1) / g.align * g.align;
    if (pair_up(b, len, data, t, nt, m, e)) goto done;
    if (!m->n) { qs_fail(e, "no in_sum2/counts entries"); goto done; }
    qs_imatrix_sort(m);   /* unique: the tensor names are */
    rc = 0;
done:
    for (uint64_t i = 0; t && i < nt; i++) free(t[i].name);
    free(t);
    return rc;
}

/* ---- writing ---------------------------------------------------------------------------------- */

static int w32(FILE *f, uint32_t v) { return fwrite(&v, 4, 1, f) == 1 ? 0 : -1; }
static int w64(FILE *f, uint64_t v) { return fwrite(&v, 8, 1, f) == 1 ? 0 : -1; }
static int wstr(FILE *f, const char *s) { size_t n = strlen(s); return w64(f, n) | (fwrite(s, 1, n, f) == n ? 0 : -1); }
static int wpad(FILE *f, uint64_t n) { int bad = 0; for (; n % GG_ALIGN; n++) bad |= fputc(0, f) == EOF; return bad ? -1 : 0; }

static int winfo(FILE *f, const char *name, const char *suf, uint64_t ne0, uint64_t nmat, uint64_t off)
{
    char nm[1100];
    snprintf(nm, sizeof nm, "%s%s", name, suf);
    int bad = wstr(f, nm) | w32(f, nmat > 1 ? 2 : 1) | w64(f, ne0);   /* ggml_n_dims: a trailing 1 is not written */
    if (nmat > 1) bad |= w64(f, nmat);
    return bad | w32(f, GG_F32) | w64(f, off);
}

int qs_imatrix_write_gguf(const char *path, const qs_imatrix *m, qs_err *e)
{
    if (m->legacy) return qs_fail(e, "%s: only computed sums can be written", qs_esc(path));
    for (int i = 0; i < m->n; i++)
        if (strlen(m->e[i].name) > 1000) return qs_fail(e, "%s: tensor name too long", qs_esc(path));
    FILE *f = fopen(path, "wb");
    if (!f) return qs_write_fail(e, path, errno);
    int bad = fwrite("GGUF", 1, 4, f) != 4;
    bad |= w32(f, 3) | w64(f, 2 * (uint64_t)m->n) | w64(f, 4);
    bad |= wstr(f, "general.type") | w32(f, QS_GGUF_STRING) | wstr(f, "imatrix");
    bad |= wstr(f, "imatrix.datasets") | w32(f, QS_GGUF_ARRAY) | w32(f, QS_GGUF_STRING) | w64(f, (uint64_t)m->ndatasets);
    for (int i = 0; i < m->ndatasets; i++) bad |= wstr(f, m->datasets[i]);
    bad |= wstr(f, "imatrix.chunk_count") | w32(f, QS_GGUF_U32) | w32(f, (uint32_t)m->chunk_count);
    bad |= wstr(f, "imatrix.chunk_size") | w32(f, QS_GGUF_U32) | w32(f, (uint32_t)m->chunk_size);
    uint64_t off = 0;
    for (int i = 0; i < m->n; i++) {
        const qs_imat_entry *en = &m->e[i];
        uint64_t sb = (uint64_t)en->ne0 * (uint64_t)en->nmat * 4, cb = (uint64_t)en->nmat * 4;
        bad |= winfo(f, en->name, ".in_sum2", (uint64_t)en->ne0, (uint64_t)en->nmat, off);
        off += (sb + GG_ALIGN - 1) / GG_ALIGN * GG_ALIGN;
        bad |= winfo(f, en->name, ".counts", 1, (uint64_t)en->nmat, off);
        off += (cb + GG_ALIGN - 1) / GG_ALIGN * GG_ALIGN;
    }
    long at = ftell(f);
    bad |= at < 0 || wpad(f, (uint64_t)at);
    for (int i = 0; i < m->n && !bad; i++) {
        const qs_imat_entry *en = &m->e[i];
        size_t nv = (size_t)en->ne0 * (size_t)en->nmat;
        bad |= fwrite(en->sums, 4, nv, f) != nv;
        bad |= wpad(f, nv * 4);
        for (int64_t j = 0; j < en->nmat; j++) {
            float c = (float)en->counts[j];
            bad |= fwrite(&c, 4, 1, f) != 1;
        }
        bad |= wpad(f, (uint64_t)en->nmat * 4);
    }
    int werr = bad ? errno : 0;
    if (fclose(f) || bad) return qs_write_fail(e, path, werr ? werr : errno);
    return 0;
}
