/*
** Metaspace (llm_pretok_meta.h), after tokenizers' pre_tokenizers/metaspace.rs: replace ' ' by the
** replacement, prepend one when the piece does not start with it (prepend_scheme "always"; "first":
** only for the piece at the start of the text; "never"), then, with split, cut before each
** replacement (MergedWithNext).  Here the pieces keep their spaces as ' ' (one byte each, so spans stay
** byte-exact) and the prepended space is virtual; the model spells both as "▁".  A "▁" already in the
** text splits and counts as a leading one, as in tokenizers.  Older files say add_prefix_space
** instead of prepend_scheme.
*/
#include "llm_pretok_meta.h"

#include <string.h>

static const char kMeta[] = "\xE2\x96\x81";

int qs_pretok_meta_parse(json_t *j, const char **pattern, int *prepend, qs_err *e)
{
    const char *rep = json_string_value(json_object_get(j, "replacement"));
    if (rep && strcmp(rep, kMeta)) return qs_fail(e, "pre-tokenizer Metaspace with replacement \"%.20s\" is not supported (\"\xE2\x96\x81\")", rep);
    const char *sch = json_string_value(json_object_get(j, "prepend_scheme"));
    json_t *aps = json_object_get(j, "add_prefix_space");
    if (!sch) *prepend = json_is_false(aps) ? QS_PREPEND_NONE : QS_PREPEND_ALWAYS;
    else if (!strcmp(sch, "always")) *prepend = QS_PREPEND_ALWAYS;
    else if (!strcmp(sch, "first")) *prepend = QS_PREPEND_FIRST;
    else if (!strcmp(sch, "never")) *prepend = QS_PREPEND_NONE;
    else return qs_fail(e, "pre-tokenizer Metaspace prepend_scheme '%.20s' is not known (always, first, never)", sch);
    json_t *sp = json_object_get(j, "split");
    *pattern = json_is_false(sp) ? NULL : "[ \\x{2581}]";
    return 0;
}

int qs_pretok_meta_prepend(int mode, const char *s, size_t n, size_t at, size_t virt)
{
    if (mode == QS_PREPEND_NONE || !n) return 0;
    if (mode == QS_PREPEND_BYTELEVEL) return s[0] != ' ';
    if (s[0] == ' ' || (n >= 3 && !memcmp(s, kMeta, 3))) return 0;
    return mode == QS_PREPEND_ALWAYS || (at == 0 && virt == 0);
}
