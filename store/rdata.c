/*
** R lazy-load database -> text (see rdata.h).  A small reader of R's XDR serialization: the types a
** data package's index and character vectors use (NULL, symbols and references to them, pairlists,
** CHARSXP, logical/integer/double/character vectors, lists); anything else is an error.
*/
#include "rdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---------------------------------------------------------------- inflate */

/* Inflate a zlib or gzip stream.  The output buffer grows with what the stream produces, bounded by
** `expect` (when > 0: more is an error), by zlib's largest ratio (1032:1) and by 1 GiB. */
static int inflate_all(const uint8_t *in, size_t inlen, size_t expect, uint8_t **out, size_t *outlen, qs_err *e)
{
    size_t lim = inlen > ((size_t)1 << 30) / 1032 ? (size_t)1 << 30 : inlen * 1032 + 1024;
    if (expect && expect < lim) lim = expect;
    lim += 1;   /* one byte of room to see that a stream is longer than allowed */
    size_t cap = inlen * 4 + 4096;
    if (cap > lim) cap = lim;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf) return qs_fail(e, "out of memory inflating %zu bytes", inlen);
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK) { free(buf); return qs_fail(e, "zlib: cannot initialise"); }
    z.next_in = (Bytef *)in;
    size_t fed = 0, got = 0;
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        if (got == cap) {
            if (cap >= lim) {
                inflateEnd(&z); free(buf);
                return expect ? qs_fail(e, "compressed stream inflates to more than the %zu bytes its header says", expect)
                              : qs_fail(e, "compressed stream inflates to more than %zu bytes", lim - 1);
            }
            size_t nc = cap * 2 > lim ? lim : cap * 2;
            uint8_t *nb = realloc(buf, nc);
            if (!nb) { inflateEnd(&z); free(buf); return qs_fail(e, "out of memory inflating"); }
            buf = nb; cap = nc;
        }
        size_t chunk_in = inlen - fed > (1u << 30) ? (1u << 30) : inlen - fed;
        z.avail_in = (uInt)chunk_in;
        size_t chunk_out = cap - got > (1u << 30) ? (1u << 30) : cap - got;
        z.next_out = buf + got;
        z.avail_out = (uInt)chunk_out;
        rc = inflate(&z, Z_NO_FLUSH);
        fed += chunk_in - z.avail_in;
        got += chunk_out - z.avail_out;
        if (rc == Z_BUF_ERROR && fed == inlen && got < cap) rc = Z_DATA_ERROR;   /* input ended early */
        if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
            inflateEnd(&z); free(buf);
            return qs_fail(e, "corrupt or truncated compressed stream (zlib: %s, after %zu input bytes)",
                           z.msg ? z.msg : "error", fed);
        }
    }
    inflateEnd(&z);
    if (expect && got != expect) {
        free(buf);
        return qs_fail(e, "compressed stream holds %zu bytes, its header says %zu", got, expect);
    }
    *out = buf;
    *outlen = got;
    return 0;
}

/* ---------------------------------------------------------------- R serialization */

enum { NILSXP = 0, SYMSXP = 1, LISTSXP = 2, CHARSXP = 9, LGLSXP = 10, INTSXP = 13, REALSXP = 14,
       STRSXP = 16, VECSXP = 19, REFSXP = 255, NILVALUE = 254 };
#define MAX_DEPTH 64

typedef struct rnode {
    int type;
    size_t n;
    double *num;                 /* LGLSXP, INTSXP, REALSXP (NA -> NaN) */
    const char **s;              /* STRSXP, CHARSXP (n = 1): pointers into the inflated image; NULL = NA */
    uint32_t *sl;
    uint8_t *latin1;             /* per string: declared Latin-1 */
    struct rnode **kid;          /* VECSXP elements; LISTSXP: kid[0] = CAR, kid[1] = CDR */
    struct rnode *attr, *tag;
} rnode;

typedef struct {
    const uint8_t *b;
    size_t n, p;
    qs_err *e;
    void **mem;                  /* every allocation, freed together */
    size_t nmem, capmem;
    rnode **sym;                 /* reference table (symbols only) */
    size_t nsym, capsym;
} rr;

static void *ralloc(rr *r, size_t n)
{
    if (r->nmem == r->capmem) {
        size_t nc = r->capmem ? r->capmem * 2 : 64;
        void **nm = realloc(r->mem, nc * sizeof *nm);
        if (!nm) return NULL;
        r->mem = nm; r->capmem = nc;
    }
    void *p = calloc(1, n ? n : 1);
    if (p) r->mem[r->nmem++] = p;
    return p;
}

static void rfree(rr *r)
{
    for (size_t i = 0; i < r->nmem; i++) free(r->mem[i]);
    free(r->mem);
    free(r->sym);
}

static int r_int(rr *r, int32_t *v)
{
    if (r->n - r->p < 4) return qs_fail(r->e, "truncated R serialization (at byte %zu)", r->p);
    const uint8_t *q = r->b + r->p;
    *v = (int32_t)((uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]);
    r->p += 4;
    return 0;
}

static int r_len(rr *r, size_t elem_min, size_t *n)
{
    int32_t v;
    size_t at = r->p;
    if (r_int(r, &v)) return -1;
    if (v == -1) return qs_fail(r->e, "long vectors are not supported (at byte %zu)", at);
    if (v < 0) return qs_fail(r->e, "negative vector length %d (at byte %zu)", v, at);
    if ((size_t)v > (r->n - r->p) / elem_min)
        return qs_fail(r->e, "vector of %d elements overruns the data (at byte %zu)", v, at);
    *n = (size_t)v;
    return 0;
}

static int r_item(rr *r, int depth, rnode **out);

/* A CHARSXP after its flags: length (-1 = NA) and bytes. */
static int r_charsxp(rr *r, int32_t flags, const char **s, uint32_t *sl, uint8_t *latin1)
{
    int32_t len;
    size_t at = r->p;
    if (r_int(r, &len)) return -1;
    if (len == -1) { *s = NULL; *sl = 0; *latin1 = 0; return 0; }
    if (len < 0 || (size_t)len > r->n - r->p) return qs_fail(r->e, "string of %d bytes overruns the data (at byte %zu)", len, at);
    *s = (const char *)r->b + r->p;
    *sl = (uint32_t)len;
    *latin1 = ((uint32_t)flags >> 12 & (1u << 2)) != 0;
    r->p += (size_t)len;
    return 0;
}

static int r_item(rr *r, int depth, rnode **out)
{
    if (depth > MAX_DEPTH) return qs_fail(r->e, "R objects nested deeper than %d (at byte %zu)", MAX_DEPTH, r->p);
    size_t at = r->p;
    int32_t flags;
    if (r_int(r, &flags)) return -1;
    int type = flags & 0xFF, has_attr = flags >> 9 & 1, has_tag = flags >> 10 & 1;
    if (type == REFSXP) {
        int32_t idx = (int32_t)((uint32_t)flags >> 8);
        if (idx == 0 && r_int(r, &idx)) return -1;
        if (idx < 1 || (size_t)idx > r->nsym) return qs_fail(r->e, "reference %d to an unknown object (at byte %zu)", idx, at);
        *out = r->sym[idx - 1];
        return 0;
    }
    rnode *x = ralloc(r, sizeof *x);
    if (!x) return qs_fail(r->e, "out of memory");
    *out = x;
    x->type = type;
    switch (type) {
    case NILVALUE: case 241: case 242: case 247: case 251: case 252: case 253:   /* singletons */
        x->type = NILSXP;
        return 0;
    case SYMSXP: {
        rnode *pn;
        if (r_item(r, depth + 1, &pn)) return -1;
        if (pn->type != CHARSXP) return qs_fail(r->e, "symbol without a name (at byte %zu)", at);
        x->n = 1; x->s = pn->s; x->sl = pn->sl; x->latin1 = pn->latin1;
        if (r->nsym == r->capsym) {
            size_t nc = r->capsym ? r->capsym * 2 : 16;
            rnode **ns = realloc(r->sym, nc * sizeof *ns);
            if (!ns) return qs_fail(r->e, "out of memory");
            r->sym = ns; r->capsym = nc;
        }
        r->sym[r->nsym++] = x;
        return 0;
    }
    case LISTSXP:
        if (has_attr && r_item(r, depth + 1, &x->attr)) return -1;
        if (has_tag && r_item(r, depth + 1, &x->tag)) return -1;
        x->kid = ralloc(r, 2 * sizeof *x->kid);
        if (!x->kid) return qs_fail(r->e, "out of memory");
        x->n = 2;
        return r_item(r, depth + 1, &x->kid[0]) || r_item(r, depth + 1, &x->kid[1]) ? -1 : 0;
    case CHARSXP:
        x->n = 1;
        x->s = ralloc(r, sizeof *x->s); x->sl = ralloc(r, sizeof *x->sl); x->latin1 = ralloc(r, 1);
        if (!x->s || !x->sl || !x->latin1) return qs_fail(r->e, "out of memory");
        return r_charsxp(r, flags, x->s, x->sl, x->latin1);
    case LGLSXP: case INTSXP: case REALSXP: {
        size_t w = type == REALSXP ? 8 : 4;
        if (r_len(r, w, &x->n)) return -1;
        x->num = ralloc(r, x->n * sizeof *x->num);
        if (!x->num) return qs_fail(r->e, "out of memory");
        for (size_t i = 0; i < x->n; i++) {
            const uint8_t *q = r->b + r->p;
            if (w == 4) {
                int32_t v = (int32_t)((uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]);
                x->num[i] = v == INT32_MIN ? __builtin_nan("") : v;
            } else {
                uint64_t u = 0;
                for (int k = 0; k < 8; k++) u = u << 8 | q[k];
                memcpy(&x->num[i], &u, 8);
            }
            r->p += w;
        }
        break;
    }
    case STRSXP: {
        if (r_len(r, 8, &x->n)) return -1;
        x->s = ralloc(r, x->n * sizeof *x->s);
        x->sl = ralloc(r, x->n * sizeof *x->sl);
        x->latin1 = ralloc(r, x->n);
        if (!x->s || !x->sl || !x->latin1) return qs_fail(r->e, "out of memory");
        for (size_t i = 0; i < x->n; i++) {
            int32_t cf;
            size_t cat = r->p;
            if (r_int(r, &cf)) return -1;
            if ((cf & 0xFF) != CHARSXP) return qs_fail(r->e, "string vector element of type %d (at byte %zu)", cf & 0xFF, cat);
            if (r_charsxp(r, cf, &x->s[i], &x->sl[i], &x->latin1[i])) return -1;
        }
        break;
    }
    case VECSXP:
        if (r_len(r, 4, &x->n)) return -1;
        x->kid = ralloc(r, x->n * sizeof *x->kid);
        if (!x->kid) return qs_fail(r->e, "out of memory");
        for (size_t i = 0; i < x->n; i++)
            if (r_item(r, depth + 1, &x->kid[i])) return -1;
        break;
    default:
        return qs_fail(r->e, "unsupported R object type %d (at byte %zu)", type, at);
    }
    if (has_attr && r_item(r, depth + 1, &x->attr)) return -1;
    return 0;
}

/* Header "X\n", version 2 or 3 (3: native encoding name), then one object. */
static int r_unserialize(rr *r, rnode **root)
{
    if (r->n < 2 || memcmp(r->b, "X\n", 2)) return qs_fail(r->e, "not an R XDR serialization (no \"X\\n\" header)");
    r->p = 2;
    int32_t ver, wv, mv;
    if (r_int(r, &ver) || r_int(r, &wv) || r_int(r, &mv)) return -1;
    if (ver != 2 && ver != 3) return qs_fail(r->e, "R serialization version %d is not supported (2 or 3)", ver);
    if (ver == 3) {
        int32_t nl;
        if (r_int(r, &nl)) return -1;
        if (nl < 0 || (size_t)nl > r->n - r->p) return qs_fail(r->e, "bad native-encoding length %d (at byte %zu)", nl, r->p - 4);
        r->p += (size_t)nl;
    }
    return r_item(r, 0, root);
}

/* The "names" attribute of x (a STRSXP with x->n entries), or NULL. */
static const rnode *names_of(const rnode *x)
{
    for (const rnode *a = x->attr; a && a->type == LISTSXP; a = a->kid[1])
        if (a->tag && a->tag->type == SYMSXP && a->tag->s[0] && a->tag->sl[0] == 5 && !memcmp(a->tag->s[0], "names", 5)) {
            const rnode *v = a->kid[0];
            return v->type == STRSXP && v->n == x->n ? v : NULL;
        }
    return NULL;
}

static int name_ok(const char *s, uint32_t n)
{
    if (!s || n == 0 || n >= sizeof(((qs_rdb_entry *)0)->name) || s[0] == '.') return 0;
    for (uint32_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

int qs_rdx_parse(const uint8_t *buf, size_t len, qs_rdb_entry **out, size_t *n, qs_err *e)
{
    *out = NULL;
    *n = 0;
    uint8_t *img;
    size_t ilen;
    if (len >= 2 && !memcmp(buf, "X\n", 2)) {   /* an uncompressed index (saveRDS(compress = FALSE)) */
        img = malloc(len);
        if (!img) return qs_fail(e, "out of memory");
        memcpy(img, buf, len);
        ilen = len;
    } else if (inflate_all(buf, len, 0, &img, &ilen, e)) {
        return -1;
    }
    rr r = {img, ilen, 0, e, NULL, 0, 0, NULL, 0, 0};
    rnode *root;
    int rc = -1;
    if (r_unserialize(&r, &root)) goto done;
    const rnode *nm = root->type == VECSXP ? names_of(root) : NULL;
    const rnode *vars = NULL;
    for (size_t i = 0; nm && i < nm->n; i++)
        if (nm->s[i] && nm->sl[i] == 9 && !memcmp(nm->s[i], "variables", 9)) vars = root->kid[i];
    if (!vars) { qs_fail(e, "index is not a list with a 'variables' element"); goto done; }
    const rnode *vn = vars->type == VECSXP ? names_of(vars) : NULL;
    if (!vn) { qs_fail(e, "index 'variables' is not a named list"); goto done; }
    *out = calloc(vars->n ? vars->n : 1, sizeof **out);
    if (!*out) { qs_fail(e, "out of memory"); goto done; }
    for (size_t i = 0; i < vars->n; i++) {
        const rnode *v = vars->kid[i];
        if (!name_ok(vn->s[i], vn->sl[i])) { qs_fail(e, "index entry %zu has an unusable name", i + 1); goto done; }
        qs_rdb_entry *en = &(*out)[i];
        memcpy(en->name, vn->s[i], vn->sl[i]);
        if ((v->type != INTSXP && v->type != REALSXP) || v->n != 2 || !(v->num[0] >= 0) || !(v->num[1] >= 0) ||
            v->num[0] > 9e15 || v->num[1] > 9e15) {
            qs_fail(e, "index entry '%s' is not c(offset, length)", en->name);
            goto done;
        }
        en->off = (uint64_t)v->num[0];
        en->len = (uint64_t)v->num[1];
    }
    *n = vars->n;
    rc = 0;
done:
    if (rc) { free(*out); *out = NULL; }
    rfree(&r);
    free(img);
    return rc;
}

int qs_rdb_text(const uint8_t *rdb, size_t len, uint64_t off, uint64_t blen, char **text, size_t *tlen,
                size_t *nlines, qs_err *e)
{
    *text = NULL;
    *tlen = 0;
    if (off > len || blen > len - off || blen < 4)
        return qs_fail(e, "blob at %llu of %llu bytes is outside the %zu-byte file", (unsigned long long)off,
                       (unsigned long long)blen, len);
    const uint8_t *q = rdb + off;
    size_t expect = (size_t)q[0] << 24 | (size_t)q[1] << 16 | (size_t)q[2] << 8 | q[3];
    if (!expect) return qs_fail(e, "blob at %llu is empty", (unsigned long long)off);
    uint8_t *img;
    size_t ilen;
    if (inflate_all(q + 4, (size_t)blen - 4, expect, &img, &ilen, e)) {
        char m[sizeof e->msg];
        snprintf(m, sizeof m, "blob at %llu", (unsigned long long)off);
        qs_err_prefix(e, m);
        return -1;
    }
    rr r = {img, ilen, 0, e, NULL, 0, 0, NULL, 0, 0};
    rnode *root;
    int rc = -1;
    if (r_unserialize(&r, &root)) goto done;
    if (root->type != STRSXP) { qs_fail(e, "blob at %llu is an R object of type %d, not a character vector", (unsigned long long)off, root->type); goto done; }
    rc = qs_rtext_join(root->s, root->sl, root->latin1, root->n, text, tlen, e);
    if (nlines) *nlines = root->n;
done:
    rfree(&r);
    free(img);
    return rc;
}

int qs_rtext_join(const char *const *line, const uint32_t *llen, const uint8_t *latin1, size_t n, char **text,
                  size_t *tlen, qs_err *e)
{
    size_t cap = 2;
    for (size_t i = 0; i < n; i++) cap += (size_t)llen[i] * 2 + 2;   /* Latin-1 bytes at most double */
    char *t = malloc(cap);
    if (!t) return qs_fail(e, "out of memory for %zu bytes of text", cap);
    size_t o = 0;
    int in_par = 0, any = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = line[i];
        uint32_t a = 0, b = s ? llen[i] : 0;
        while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r')) a++;
        while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r')) b--;
        if (a == b) {   /* empty (or NA) line: end of paragraph */
            if (in_par) t[o++] = '\n';
            in_par = 0;
            continue;
        }
        if (in_par) t[o++] = ' ';
        else if (any) t[o++] = '\n';   /* blank line between paragraphs */
        for (uint32_t k = a; k < b; k++) {
            uint8_t c = (uint8_t)s[k];
            if (c == 0 || c == '\n') c = ' ';
            if (latin1 && latin1[i] && c >= 0x80) { t[o++] = (char)(0xC0 | c >> 6); t[o++] = (char)(0x80 | (c & 0x3F)); }
            else t[o++] = (char)c;
        }
        in_par = any = 1;
    }
    if (in_par) t[o++] = '\n';
    t[o] = 0;
    *text = t;
    *tlen = o;
    return 0;
}
