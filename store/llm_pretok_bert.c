/*
** BertPreTokenizer, Whitespace, WhitespaceSplit and Punctuation as `tokenizers` defines them
** (pre_tokenizers/bert.rs, whitespace.rs, punctuation.rs), each rewritten as Split steps:
**   WhitespaceSplit   split on char::is_whitespace, Removed;
**   Punctuation       split on is_ascii_punctuation || unicode_categories' is_punctuation, with its
**                     behavior (default Isolated), one match per character;
**   BertPreTokenizer  WhitespaceSplit, then Punctuation Isolated;
**   Whitespace        the regex \w+|[^\w\s]+ (Oniguruma), inverted, Removed.
** The classes are tokenizers' own, as code-point ranges read off the library (llm_pretok_bert_tab.h,
** tests/llm/make_wordpiece_vectors.py --tables), not PCRE2's \p{P} or \w: its punctuation comes from
** a crate with an older Unicode (U+2E43 is not punctuation there, U+166D is) and Oniguruma's \w is
** the Word property (Alphabetic, marks, decimal digits, connectors; not ½ or ²) of a newer one.
*/
#include "llm_pretok_bert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_pretok_bert_tab.h"

#define NR(t) (sizeof t / sizeof *t)

/* Append the ranges as PCRE2 class items (\x{A}-\x{B}) to b; returns the new length. */
static size_t items(char *b, size_t o, const uint32_t (*r)[2], size_t n)
{
    for (size_t i = 0; i < n; i++)
        o += (size_t)(r[i][0] == r[i][1] ? sprintf(b + o, "\\x{%X}", r[i][0])
                                         : sprintf(b + o, "\\x{%X}-\\x{%X}", r[i][0], r[i][1]));
    return o;
}

/* "[class]" of one table (or "[^a b]" of two, negated), malloc'd; NULL when out of memory. */
static char *klass(const uint32_t (*a)[2], size_t na, const uint32_t (*b)[2], size_t nb, int neg)
{
    char *s = malloc((na + nb) * 24 + 8);
    if (!s) return NULL;
    size_t o = (size_t)sprintf(s, neg ? "[^" : "[");
    o = items(s, o, a, na);
    if (b) o = items(s, o, b, nb);
    s[o++] = ']';
    s[o] = 0;
    return s;
}

static json_t *split(const char *rx, const char *behavior, int invert)
{
    return json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex", rx, "behavior", behavior,
                     "invert", invert);
}

static json_t *space_split(void)
{
    char *k = klass(kSpace, NR(kSpace), NULL, 0, 0);
    json_t *j = k ? split(k, "Removed", 0) : NULL;
    free(k);
    return j;
}

static json_t *punct_split(const char *behavior)
{
    char *k = klass(kPunct, NR(kPunct), NULL, 0, 0);
    json_t *j = k ? split(k, behavior, 0) : NULL;
    free(k);
    return j;
}

static json_t *whitespace(void)
{
    char *w = klass(kWord, NR(kWord), NULL, 0, 0), *o = klass(kWord, NR(kWord), kSpace, NR(kSpace), 1);
    char *rx = w && o ? malloc(strlen(w) + strlen(o) + 4) : NULL;
    json_t *j = NULL;
    if (rx) {
        sprintf(rx, "%s+|%s+", w, o);
        j = split(rx, "Removed", 1);
    }
    free(w); free(o); free(rx);
    return j;
}

int qs_pretok_bert_expand(json_t *j, const char *type, json_t **out, qs_err *e)
{
    static const char *behaviors[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    *out = NULL;
    if (!strcmp(type, "WhitespaceSplit")) {
        *out = space_split();
    } else if (!strcmp(type, "Punctuation")) {
        json_t *bj = json_object_get(j, "behavior");
        const char *b = bj ? json_string_value(bj) : "Isolated";
        int known = 0;
        for (size_t i = 0; b && i < NR(behaviors); i++) known |= !strcmp(b, behaviors[i]);
        if (!known) return 0;
        *out = punct_split(b);
    } else if (!strcmp(type, "BertPreTokenizer")) {
        json_t *a = space_split(), *b = punct_split("Isolated");
        if (a && b) *out = json_pack("{s:s, s:[o, o]}", "type", "Sequence", "pretokenizers", a, b);
        else { json_decref(a); json_decref(b); }
    } else if (!strcmp(type, "Whitespace")) {
        *out = whitespace();
    } else {
        return 0;
    }
    return *out ? 0 : qs_fail(e, "out of memory");
}
