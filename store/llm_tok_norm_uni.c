/*
** The Unicode normalizers of `tokenizers` as (character, change) operations (llm_tok_norm_int.h):
** NFD/NFKD as its unicode-normalization-alignments crate yields them (the first character of each
** decomposition replaces its source, the others are inserted after it, then every run of non-starters
** is stably sorted by combining class), NFC/NFKC by that crate's recomposition state machine over
** the decomposed stream (a composition's change is the sum of its parts' minus one), Lowercase as
** Rust's char::to_lowercase, and the character filters and maps of StripAccents, Strip, Bert and Nmt.
** Character data (decompositions, compositions, classes, case, categories) come from utf8proc.
*/
#include "llm_tok_norm_int.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static int ccc(uint32_t c)
{
    if (c < 0x300 || (c & QS_NRAW) || qs_norm_old_uni(c)) return 0;
    return utf8proc_get_property((utf8proc_int32_t)c)->combining_class;
}

static int cat(uint32_t c)
{
    if (c & QS_NRAW) return -1;
    return utf8proc_category((utf8proc_int32_t)c);
}

/* Stable sort of the operations [a, b) by combining class (Decompositions::sort_pending). */
static int sort_run(qs_nops *o, size_t a, size_t b)
{
    size_t n = b - a;
    if (n < 2) return 0;
    if (n <= 32) {   /* insertion sort: the usual run is a mark or two */
        for (size_t i = a + 1; i < b; i++) {
            uint32_t cp = o->cp[i];
            int32_t ch = o->ch[i];
            int k = ccc(cp);
            size_t j = i;
            while (j > a && ccc(o->cp[j - 1]) > k) { o->cp[j] = o->cp[j - 1]; o->ch[j] = o->ch[j - 1]; j--; }
            o->cp[j] = cp; o->ch[j] = ch;
        }
        return 0;
    }
    /* long runs (thousands of stacked marks): a stable counting sort */
    uint32_t *cp = malloc(n * sizeof *cp);
    int32_t *ch = malloc(n * sizeof *ch);
    size_t cnt[257] = {0};
    if (!cp || !ch) { free(cp); free(ch); return -1; }
    for (size_t i = a; i < b; i++) cnt[ccc(o->cp[i]) + 1]++;
    for (int k = 1; k < 257; k++) cnt[k] += cnt[k - 1];
    for (size_t i = a; i < b; i++) {
        size_t d = cnt[ccc(o->cp[i])]++;
        cp[d] = o->cp[i]; ch[d] = o->ch[i];
    }
    memcpy(o->cp + a, cp, n * sizeof *cp);
    memcpy(o->ch + a, ch, n * sizeof *ch);
    free(cp); free(ch);
    return 0;
}

static int decompose(const qs_tok_norm_buf *cur, int compat, qs_nops *o)
{
    utf8proc_option_t opt = UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0);
    size_t pend = 0;   /* start of the pending run of non-starters */
    for (size_t i = 0; i < cur->n;) {
        uint32_t c;
        if ((unsigned char)cur->s[i] < 0x80) {   /* ASCII: starters without decomposition */
            size_t j = i + 1;
            while (j < cur->n && (unsigned char)cur->s[j] < 0x80) j++;
            /* all but the last before a non-ASCII byte (a mark may compose with it) are copied */
            size_t copy = j - i - (j < cur->n);
            if (sort_run(o, pend, o->n) || (copy && qs_nops_push(o, (uint32_t)copy, QS_NCOPY)) ||
                (i + copy < j && qs_nops_push(o, (unsigned char)cur->s[j - 1], 0)))
                return -1;
            pend = o->n;
            i = j;
            continue;
        }
        i += qs_nchar(cur->s, cur->n, i, &c);
        utf8proc_int32_t d[32];
        utf8proc_ssize_t nd = 1;
        d[0] = (utf8proc_int32_t)c;
        if (!(c & QS_NRAW) && c >= 0xA0 && !qs_norm_old_uni(c)) {
            int bound = 0;
            nd = utf8proc_decompose_char((utf8proc_int32_t)c, d, 32, opt, &bound);
            if (nd < 1 || nd > 32) { nd = 1; d[0] = (utf8proc_int32_t)c; }
        }
        for (utf8proc_ssize_t k = 0; k < nd; k++) {
            if (!ccc((uint32_t)d[k])) {
                if (sort_run(o, pend, o->n)) return -1;
                pend = o->n;
            }
            if (qs_nops_push(o, (uint32_t)d[k], k > 0)) return -1;
        }
    }
    return sort_run(o, pend, o->n);
}

/* The primary composite of a and b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (b < 0x300 || ((a | b) & QS_NRAW)) return 0;   /* every second character of a composition is >= U+0300 */
    utf8proc_int32_t buf[2] = {(utf8proc_int32_t)a, (utf8proc_int32_t)b};
    if (utf8proc_normalize_utf32(buf, 2, UTF8PROC_COMPOSE) != 1) return 0;
    /* utf8proc composes exclusions (U+2ADC, U+1D15E, ...) unless asked for STABLE: they are not primary */
    return utf8proc_get_property(buf[0])->comp_exclusion ? 0 : (uint32_t)buf[0];
}

/* Recompositions::next over the decomposed operations d. */
static int recompose(const qs_nops *d, qs_nops *o)
{
    int have = 0, last = -1;   /* composee held; class of the last blocked mark, -1 none */
    uint32_t kc = 0;
    int32_t kch = 0;
    size_t nbuf = 0;   /* held (blocked) marks: their indices in d */
    size_t *held = NULL, hcap = 0;
    int rc = 0;
    for (size_t i = 0; i < d->n && !rc; i++) {
        uint32_t c = d->cp[i];
        int32_t ch = d->ch[i];
        if (ch == QS_NCOPY) {   /* ASCII: flushes like any starter that composes with nothing */
            if (have) rc = qs_nops_push(o, kc, kch);
            for (size_t k = 0; k < nbuf && !rc; k++) rc = qs_nops_push(o, d->cp[held[k]], d->ch[held[k]]);
            if (!rc) rc = qs_nops_push(o, c, ch);
            nbuf = 0; have = 0; last = -1;
            continue;
        }
        int cls = ccc(c);
        if (!have) {
            if (cls) rc = qs_nops_push(o, c, ch);
            else { kc = c; kch = ch; have = 1; }
            continue;
        }
        if (last < 0 || last < cls) {
            uint32_t r = compose(kc, c);
            if (r) { kc = r; kch = kch + ch - 1; continue; }
        }
        if (cls == 0 && (last < 0 || last >= cls)) {   /* a new starter: flush the composee and held marks */
            rc = qs_nops_push(o, kc, kch);
            for (size_t k = 0; k < nbuf && !rc; k++) rc = qs_nops_push(o, d->cp[held[k]], d->ch[held[k]]);
            nbuf = 0;
            kc = c; kch = ch; last = -1;
            continue;
        }
        if (nbuf == hcap) {
            size_t nc = hcap ? 2 * hcap : 16;
            size_t *h = realloc(held, nc * sizeof *h);
            if (!h) { rc = -1; break; }
            held = h; hcap = nc;
        }
        held[nbuf++] = i;
        last = cls;
    }
    if (!rc && have) rc = qs_nops_push(o, kc, kch);
    for (size_t k = 0; k < nbuf && !rc; k++) rc = qs_nops_push(o, d->cp[held[k]], d->ch[held[k]]);
    free(held);
    return rc;
}

int qs_norm_ops_form(int type, const qs_tok_norm_buf *cur, qs_nops *o)
{
    int compat = type == NT_NFKC || type == NT_NFKD;
    if (type == NT_NFD || type == NT_NFKD) return decompose(cur, compat, o);
    qs_nops d;
    memset(&d, 0, sizeof d);
    int rc = decompose(cur, compat, &d);
    if (!rc) rc = recompose(&d, o);
    qs_nops_free(&d);
    return rc;
}

static uint32_t lower(uint32_t c)
{
    if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
    if (c & QS_NRAW) return c;
    uint32_t l = qs_norm_new_lower(c);
    return l ? l : (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
}

int qs_norm_map_run(qs_tok_norm_buf *cur, qs_tok_norm_buf *tmp, uint32_t (*map)(uint32_t))
{
    if (qs_norm_reserve(tmp, 2 * cur->n + 4)) return -1;   /* a character at most 1.5 times longer */
    size_t o = 0;
    for (size_t i = 0; i < cur->n;) {
        uint32_t c, a = cur->map[2 * i], b = cur->map[2 * i + 1];
        size_t len = qs_nchar(cur->s, cur->n, i, &c), w;
        if (!map && c == 0x130) {   /* the one unconditional multi-character lowercase mapping (SpecialCasing) */
            memcpy(tmp->s + o, "i\xcc\x87", 3);
            w = 3;
        } else {
            w = qs_nenc(map ? map(c) : lower(c), tmp->s + o);
        }
        for (size_t k = 0; k < w; k++) { tmp->map[2 * (o + k)] = a; tmp->map[2 * (o + k) + 1] = b; }
        o += w;
        i += len;
    }
    tmp->n = o;
    qs_tok_norm_buf t = *cur;
    *cur = *tmp;
    *tmp = t;
    return 0;
}

int qs_norm_ops_filter(const qs_tok_norm_buf *cur, int (*drop)(uint32_t), size_t *skip, qs_nops *o)
{
    int32_t removed = 0;
    int have = 0;
    uint32_t last = 0;
    *skip = 0;
    for (size_t i = 0; i < cur->n;) {
        uint32_t c;
        i += qs_nchar(cur->s, cur->n, i, &c);
        if (drop(c)) { removed++; continue; }
        if (have) { if (qs_nops_push(o, last, -removed)) return -1; }
        else *skip = (size_t)removed;
        last = c; have = 1; removed = 0;
    }
    if (have && qs_nops_push(o, last, -removed)) return -1;
    if (!have) *skip = (size_t)removed;
    return 0;
}

int qs_norm_is_chinese(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

int qs_norm_ops_chinese(const qs_tok_norm_buf *cur, qs_nops *o)
{
    for (size_t i = 0; i < cur->n;) {
        uint32_t c;
        i += qs_nchar(cur->s, cur->n, i, &c);
        int rc = qs_norm_is_chinese(c) ? qs_nops_push(o, ' ', 0) || qs_nops_push(o, c, 1) || qs_nops_push(o, ' ', 1)
                               : qs_nops_push(o, c, 0);
        if (rc) return -1;
    }
    return 0;
}

int qs_norm_ops_strip(const qs_tok_norm_buf *cur, int left, int right, size_t *skip, qs_nops *o)
{
    size_t count = 0, lead = 0, trail = 0, i;
    int in_lead = 1;
    for (i = 0; i < cur->n; count++) {
        uint32_t c;
        i += qs_nchar(cur->s, cur->n, i, &c);
        int sp = qs_norm_is_space(c);
        if (in_lead && sp && left) lead++;
        else in_lead = 0;
        trail = sp ? trail + 1 : 0;
    }
    if (!right) trail = 0;
    if (lead == count) trail = 0;   /* all spaces: the left strip already takes them */
    *skip = lead;
    size_t k = 0;
    for (i = 0; i < cur->n; k++) {   /* the trailing spaces are simply not replaced */
        uint32_t c;
        i += qs_nchar(cur->s, cur->n, i, &c);
        if (k >= lead && k < count - trail && qs_nops_push(o, c, 0)) return -1;
    }
    return 0;
}

/* NormalizedString::prepend: a transform of the first character's range only.  The prefix's first
** character replaces it (its span), the rest of the prefix and the character itself follow it (the span
** of its last byte); with an empty prefix the character is re-inserted at the start: span (0, 0). */
int qs_norm_prepend_run(qs_tok_norm_buf *cur, qs_tok_norm_buf *tmp, const char *pre)
{
    if (!cur->n) return 0;
    uint32_t c;
    size_t pn = strlen(pre), fl = qs_nchar(cur->s, cur->n, 0, &c);
    if (qs_norm_reserve(tmp, cur->n + pn + 1)) return -1;
    uint32_t f0 = cur->map[0], f1 = cur->map[1], l0 = cur->map[2 * (fl - 1)], l1 = cur->map[2 * (fl - 1) + 1];
    if (!pn) l0 = l1 = 0;
    size_t p1 = pn ? qs_nchar(pre, pn, 0, &c) : 0;
    memcpy(tmp->s, pre, pn);
    memcpy(tmp->s + pn, cur->s, cur->n);
    for (size_t i = 0; i < pn + fl; i++) {
        tmp->map[2 * i] = i < p1 ? f0 : l0;
        tmp->map[2 * i + 1] = i < p1 ? f1 : l1;
    }
    memcpy(tmp->map + 2 * (pn + fl), cur->map + 2 * fl, 2 * (cur->n - fl) * sizeof *tmp->map);
    tmp->n = cur->n + pn;
    qs_tok_norm_buf t = *cur;
    *cur = *tmp;
    *tmp = t;
    return 0;
}

/* ---------------------------------------------------------------- predicates and maps */

int qs_norm_is_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

int qs_norm_is_combining_mark(uint32_t c)
{
    if (qs_norm_old_uni(c)) return 0;
    if (qs_norm_was_mark(c)) return 1;
    int k = cat(c);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME;
}

int qs_norm_is_nonspacing_mark(uint32_t c)
{
    return (cat(c) == UTF8PROC_CATEGORY_MN && !qs_norm_old_mn(c)) || qs_norm_was_mn(c);
}

/* Bert clean_text: NUL, U+FFFD and "other" characters (Cc but \t \n \r, Cf, Co, Cs) go. */
int qs_norm_bert_drop(uint32_t c)
{
    if (c == 0 || c == 0xFFFD) return 1;
    if (c == '\t' || c == '\n' || c == '\r') return 0;
    int k = cat(c);
    if (k == UTF8PROC_CATEGORY_CF && qs_norm_old_other(c)) return 0;
    return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CO || k == UTF8PROC_CATEGORY_CS;
}

uint32_t qs_norm_bert_space(uint32_t c)
{
    return qs_norm_is_space(c) ? ' ' : c;
}

int qs_norm_nmt_drop(uint32_t c)
{
    return (c >= 1 && c <= 8) || c == 0xB || (c >= 0xE && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F;
}

uint32_t qs_norm_nmt_map(uint32_t c)
{
    if (c == 9 || c == 0xA || c == 0xC || c == 0xD || c == 0x1680 || (c >= 0x200B && c <= 0x200F) || c == 0x2028 ||
        c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD)
        return ' ';
    return c;
}
