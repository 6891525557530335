/*
** The Replace normalizer: every match of a pattern (a String is matched literally, a Regex as
** tokenizers' Oniguruma would, here in PCRE2 like llm_pretok.c) becomes `content`; matches are
** found left to right without overlap, and an empty match right after a match is skipped.  As in
** NormalizedString::replace, each character of the content takes the source span of the last byte of
** the match ((0, 0) for an empty match at the very start); text outside matches keeps its spans.
** Regex work is bounded by PCRE2's match, heap and depth limits: past them the run fails.
*/
#include "llm_tok_norm_int.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MATCH_LIMIT = 10000000, HEAP_LIMIT_KIB = 64 << 10, DEPTH_LIMIT = 1 << 20 };

/* Oniguruma's \s is the White_Space property; PCRE2's \s under UCP also takes U+180E. */
static char *white_space(const char *p)
{
    size_t n = strlen(p), o = 0;
    char *r = malloc(n * 8 + 1);
    if (!r) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\\' && (p[i + 1] == 's' || p[i + 1] == 'S')) {
            o += (size_t)sprintf(r + o, "\\%c{White_Space}", p[i + 1] == 's' ? 'p' : 'P');
            i++;
        } else if (p[i] == '\\' && p[i + 1]) {
            r[o++] = p[i++];
            r[o++] = p[i];
        } else {
            r[o++] = p[i];
        }
    }
    r[o] = 0;
    return r;
}

int qs_norm_replace_compile(qs_tok_norm *nm, const char *pattern, int literal, qs_err *e)
{
    char *rx = literal ? NULL : white_space(pattern);
    if (!literal && !rx) return qs_fail(e, "out of memory");
    int ec;
    PCRE2_SIZE eo;
    uint32_t opt = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(rx ? rx : pattern), PCRE2_ZERO_TERMINATED, opt, &ec, &eo, NULL);
    free(rx);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return qs_fail(e, "normalizer Replace pattern /%.60s/: %s", pattern, (char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);   /* optional: the interpreter gives the same matches */
    nm->re = re;
    return 0;
}

void qs_norm_replace_free(qs_tok_norm *nm)
{
    pcre2_code_free(nm->re);
    nm->re = NULL;
}

/* Append cur's bytes [a, b) with their spans to t. */
static int copy(qs_tok_norm_buf *t, const qs_tok_norm_buf *cur, size_t a, size_t b)
{
    if (qs_norm_reserve(t, t->n + (b - a) + 1)) return -1;
    memcpy(t->s + t->n, cur->s + a, b - a);
    memcpy(t->map + 2 * t->n, cur->map + 2 * a, 2 * (b - a) * sizeof *t->map);
    t->n += b - a;
    return 0;
}

static int put_content(qs_tok_norm_buf *t, const qs_tok_norm_buf *cur, const char *c, size_t me)
{
    size_t cn = strlen(c);
    uint32_t a = me ? cur->map[2 * (me - 1)] : 0, b = me ? cur->map[2 * (me - 1) + 1] : 0;
    if (qs_norm_reserve(t, t->n + cn + 1)) return -1;
    memcpy(t->s + t->n, c, cn);
    for (size_t i = 0; i < cn; i++) { t->map[2 * (t->n + i)] = a; t->map[2 * (t->n + i) + 1] = b; }
    t->n += cn;
    return 0;
}

static int scan(const qs_tok_norm *nm, const qs_tok_norm_buf *cur, qs_tok_norm_buf *t, pcre2_match_data *md,
                pcre2_match_context *mc, qs_err *e)
{
    size_t n = cur->n, prev = 0, last_end = 0, last_match_end = 0;
    int have_last = 0;
    t->n = 0;
    while (last_end <= n) {
        int rc = pcre2_match(nm->re, (PCRE2_SPTR)cur->s, n, last_end, 0, md, mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return qs_fail(e, "normalizer Replace: %s near byte %zu of the normalized text", (char *)msg, last_end);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me < ms) return qs_fail(e, "normalizer Replace: a match ending before its start");
        if (ms == me && have_last && last_match_end == me) {   /* no empty match right after a match */
            uint32_t cp;
            last_end += last_end < n ? qs_nchar(cur->s, n, last_end, &cp) : 1;
            continue;
        }
        last_end = me; last_match_end = me; have_last = 1;
        if (copy(t, cur, prev, ms) || put_content(t, cur, nm->str, me)) return qs_fail(e, "out of memory");
        prev = me;
    }
    if (copy(t, cur, prev, n)) return qs_fail(e, "out of memory");
    return 0;
}

int qs_norm_replace_run(const qs_tok_norm *nm, qs_tok_norm_buf *cur, qs_tok_norm_buf *tmp, qs_err *e)
{
    if (!cur->n) return 0;   /* find_matches on "" gives no match, even for a pattern matching "" */
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(nm->re, NULL);
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    int rc;
    if (!md || !mc) {
        rc = qs_fail(e, "out of memory");
    } else {
        pcre2_set_match_limit(mc, MATCH_LIMIT);
        pcre2_set_heap_limit(mc, HEAP_LIMIT_KIB);
        pcre2_set_depth_limit(mc, DEPTH_LIMIT);
        rc = scan(nm, cur, tmp, md, mc, e);
    }
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
    if (rc) return -1;
    qs_tok_norm_buf t = *cur;
    *cur = *tmp;
    *tmp = t;
    return 0;
}
