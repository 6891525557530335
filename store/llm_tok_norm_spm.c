/*
** SentencePiece's precompiled normalization rules (precompiled_charsmap), read and applied the way
** `tokenizers` does (its spm_precompiled crate, which mirrors sentencepiece's normalizer.cc):
**
**   blob = u32 trie_size (little-endian) | trie_size / 4 little-endian u32 units | replacements
**
** The units are a Darts double array over UTF-8 bytes; a leaf's value is the offset of a NUL-terminated
** replacement.  tokenizers splits the text into extended grapheme clusters; a cluster shorter than 6
** bytes is looked up whole, otherwise (or when that finds nothing) each character is.  A lookup takes
** the FIRST leaf on the key's path (the shortest prefix that is a rule) and replaces the whole
** cluster or character with it -- sentencepiece's own normalizer takes the longest, but offsets and ids
** here must equal tokenizers'.  Where the crate would panic on a malformed blob (a walk off the array,
** a replacement outside the strings or inside a character) the lookup finds nothing.
*/
#include "llm_tok_norm_int.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

qs_tok_norm *qs_tok_norm_from_charsmap(const uint8_t *blob, size_t n, qs_err *e)
{
    if (n < 4) { qs_fail(e, "precompiled_charsmap of %zu bytes has no trie size", n); return NULL; }
    size_t units = le32(blob) / 4;
    if (units > (n - 4) / 4) {
        qs_fail(e, "precompiled_charsmap says its trie has %zu units but holds %zu", units, (n - 4) / 4);
        return NULL;
    }
    if (!units) { qs_fail(e, "precompiled_charsmap has an empty trie"); return NULL; }
    const char *pool = (const char *)blob + 4 + 4 * units;
    size_t np = n - 4 - 4 * units;
    for (size_t i = 0; i < np;) {   /* the replacements must be UTF-8 (a Rust String) */
        uint32_t cp;
        i += qs_nchar(pool, np, i, &cp);
        if (cp & QS_NRAW) { qs_fail(e, "precompiled_charsmap's replacements are not UTF-8 (byte %zu)", i - 1); return NULL; }
    }
    qs_tok_norm *nm = calloc(1, sizeof *nm);
    if (!nm || !(nm->trie = malloc(units * sizeof *nm->trie)) || !(nm->pool = malloc(np + 1))) {
        qs_tok_norm_free(nm);
        qs_fail(e, "out of memory");
        return NULL;
    }
    nm->type = NT_PRECOMPILED;
    for (size_t i = 0; i < units; i++) nm->trie[i] = le32(blob + 4 + 4 * i);
    nm->ntrie = units;
    memcpy(nm->pool, pool, np);
    nm->pool[np] = 0;
    nm->npool = np;
    return nm;
}

/* The replacement of key k[0..n) (Precompiled::transform), or NULL; *rn its length. */
static const char *lookup(const qs_tok_norm *nm, const unsigned char *k, size_t n, size_t *rn)
{
    size_t pos = 0;
    uint32_t unit = nm->trie[0];
    pos ^= (size_t)(unit >> 10) << ((unit & (1u << 9)) >> 6);
    for (size_t i = 0; i < n && k[i]; i++) {
        pos ^= k[i];
        if (pos >= nm->ntrie) return NULL;
        unit = nm->trie[pos];
        if ((unit & ((1u << 31) | 0xFF)) != k[i]) return NULL;
        pos ^= (size_t)(unit >> 10) << ((unit & (1u << 9)) >> 6);
        if ((unit >> 8) & 1) {
            if (pos >= nm->ntrie) return NULL;
            size_t v = nm->trie[pos] & 0x7FFFFFFFu;
            if (v > nm->npool || (v < nm->npool && (nm->pool[v] & 0xC0) == 0x80)) return NULL;
            *rn = strlen(nm->pool + v);
            return nm->pool + v;
        }
    }
    return NULL;
}

static size_t count_chars(const char *s, size_t n)
{
    size_t c = 0;
    uint32_t cp;
    for (size_t i = 0; i < n; c++) i += qs_nchar(s, n, i, &cp);
    return c;
}

/* tokenizers' precompiled.rs replace(): the new characters replace the old ones; extra ones are
** inserted, missing ones are dropped after the last operation so far. */
static int replace(qs_nops *o, size_t old_chars, const char *r, size_t rn)
{
    size_t nc = 0;
    for (size_t i = 0; i < rn; nc++) {
        uint32_t cp;
        i += qs_nchar(r, rn, i, &cp);
        if (qs_nops_push(o, cp, 0)) return -1;
    }
    if (nc > old_chars) {
        for (size_t k = o->n - (nc - old_chars); k < o->n; k++) o->ch[k] = 1;
    } else if (nc < old_chars && o->n) {
        o->ch[o->n - 1] -= (int32_t)(old_chars - nc);
    }
    return 0;
}

/* One grapheme cluster s[a, b). */
static int cluster(const qs_tok_norm *nm, const char *s, size_t a, size_t b, qs_nops *o)
{
    const unsigned char *u = (const unsigned char *)s;
    const char *r;
    size_t rn;
    uint32_t cp;
    if (b - a < 6 && (r = lookup(nm, u + a, b - a, &rn))) return replace(o, count_chars(s + a, b - a), r, rn);
    for (size_t i = a; i < b;) {
        size_t len = qs_nchar(s, b, i, &cp);
        if (!(cp & QS_NRAW) && (r = lookup(nm, u + i, len, &rn))) {
            if (replace(o, 1, r, rn)) return -1;
        } else if (qs_nops_push(o, cp, 0)) {
            return -1;
        }
        i += len;
    }
    return 0;
}

int qs_norm_ops_precompiled(const qs_tok_norm *nm, const qs_tok_norm_buf *cur, qs_nops *o)
{
    size_t start = 0;
    uint32_t prev = 0;
    utf8proc_int32_t state = 0;
    for (size_t i = 0; i < cur->n;) {
        uint32_t cp;
        size_t len = qs_nchar(cur->s, cur->n, i, &cp);
        /* an invalid byte is a cluster of its own */
        int brk = i > 0 && ((cp | prev) & QS_NRAW ? 1
                            : utf8proc_grapheme_break_stateful((utf8proc_int32_t)prev, (utf8proc_int32_t)cp, &state));
        if ((cp | prev) & QS_NRAW) state = 0;
        if (brk) {
            if (cluster(nm, cur->s, start, i, o)) return -1;
            start = i;
        }
        prev = cp;
        i += len;
    }
    if (cur->n && cluster(nm, cur->s, start, cur->n, o)) return -1;
    return 0;
}
