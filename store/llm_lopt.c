/*
** LoPT (llm_lopt.h), as reconstructed in docs/tokenize.md.  Boundaries sit at nominal offsets
** k * chunk; each boundary's overlap window must hold two *cut positions* p1 < p2 (safe_at), which
** split the tokenization of every window that contains their neighbours, for the tokenizers eligible()
** admits: byte-level BPE with a proved pattern (a word character, one space, an ASCII letter; or a
** newline after a non-space, before a letter), pre-tokenizers that remove whitespace (WordPiece's
** BertPreTokenizer, Whitespace: ASCII whitespace after a solid character), Metaspace with split (a
** space after a solid character), each under a normalizer that is character-local at those positions,
** and SentencePiece BPE without a pre-tokenizer whose merges cannot cross a space (a space after an
** ASCII graphic character; a chunk continues a stretch: no Prepend, no dummy prefix).
** So the chunks are the segments between consecutive p1s, tokenized once each on qscope's pool (one
** tokenizer state per slot, all sharing one piece cache), and their ids are concatenated.  LoPT's
** merge condition stays as a run-time check of that proof: the overlap window, tokenized from its
** arbitrary first byte with spans, must give between p1 and p2 exactly the tokens (ids and spans) of
** [p1, p2) alone, and those must start the next segment; a failed check or a failed chunk sends the
** whole text through the sequential tokenizer.
**
** Dynamic overlap and chunk length: an overlap without two cut positions is doubled until it has them
** (at most to the chunk length); a boundary still without them is dropped, so the chunk grows into
** its neighbour.  The last four chunk lengths are cut in quarter chunks, so the threads finish
** together.  Everything is decided from the bytes before any tokenization; neither the ids nor
** the chunks depend on the number of threads.
*/
#include "llm_lopt.h"

#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/pool.h"

/* The Split patterns the cut rule is proved for (llm_pretok.c's GPT-2, Qwen2 and Llama 3 patterns;
** the same strings tokenizer.json files spell). */
static const char *const kProved[] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* The GGUF tokenizer.ggml.pre families whose pre-tokenizer is made of the proved parts (llm_pretok.c). */
static const char *const kFamilies[] = {"", "default", "gpt2", "gpt-2", "mpt", "olmo", "jais", "smollm", "starcoder",
                                        "refact", "command-r", "codeshell", "exaone", "minerva-7b", "qwen2",
                                        "deepseek-r1-qwen", "llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx",
                                        "smaug-bpe"};

static int ascii_letter(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
static int ascii_alnum(unsigned char c) { return ascii_letter(c) || (c >= '0' && c <= '9'); }

/* ---------------------------------------------------------------- which tokenizers the proof covers */

/* Which cut rule a tokenizer gets (safe_at): */
enum { R_BYTE = 1,   /* byte-level BPE with a proved pattern: the space rule (+ the newline rule if nl) */
       R_WS = 2,     /* a pre-tokenizer that removes whitespace (BertPreTokenizer, Whitespace(Split)): a
                     ** space, tab, CR or newline after a solid character */
       R_META = 3,   /* Metaspace with split: a space after a solid character */
       R_SPM = 4 };  /* SentencePiece BPE without a pre-tokenizer (Llama 2's tokenizer.json, tokenizer.model,
                     ** GGUF llama; spm_why): a space after an ASCII graphic character, not after an
                     ** added token */

typedef struct {
    int kind, nl;              /* R_*, and whether the newline rule holds (R_BYTE) */
    int ascii_before;          /* R_WS/R_META: only an ASCII graphic character before the cut (a normalizer
                               ** could pad a CJK letter with a space a normalized lstrip token would take) */
    const qs_llm_vocab *v;
    int *after;                /* added tokens no cut may follow (malloc'ed): those with rstrip (they would
                               ** take the cut's whitespace); under R_SPM every one (a stretch starts after
                               ** it, and gets a Prepend or a dummy prefix there) */
    int nafter;
} rule;

/* One pre-tokenizer step: NULL when proved (*kind: the cut rule of the step that splits at its cut
** positions, steps of two rules do not mix; *prefix: a ByteLevel that adds a prefix space), else why not. */
static const char *step_why(json_t *j, int depth, int *kind, int *prefix)
{
    const char *t = json_string_value(json_object_get(j, "type"));
    if (!t || depth > 16) return "its pre-tokenizer is not one LoPT's cut rule is proved for";
    if (!strcmp(t, "Sequence")) {
        json_t *a = json_object_get(j, "pretokenizers"), *s;
        size_t i;
        json_array_foreach(a, i, s) {
            const char *w = step_why(s, depth + 1, kind, prefix);
            if (w) return w;
        }
        return NULL;
    }
    /* steps that only split further, each decision local to neighbouring characters: they commute
    ** with cutting wherever another step splits */
    if (!strcmp(t, "Digits") || !strcmp(t, "Punctuation")) return NULL;
    if (!strcmp(t, "BertPreTokenizer") || !strcmp(t, "Whitespace") || !strcmp(t, "WhitespaceSplit")) {
        if (*kind && *kind != R_WS) return "its pre-tokenizer mixes steps of different cut rules";
        *kind = R_WS;
        return NULL;
    }
    if (!strcmp(t, "Metaspace")) {   /* split (default true): a piece per "▁word"; prepend needs a space */
        if (json_is_false(json_object_get(j, "split"))) return "its Metaspace pre-tokenizer does not split (split: false)";
        if (*kind && *kind != R_META) return "its pre-tokenizer mixes steps of different cut rules";
        *kind = R_META;
        return NULL;
    }
    if (!strcmp(t, "ByteLevel")) {           /* GPT-2's pattern; a prefix space never goes before a cut */
        json_t *u = json_object_get(j, "use_regex"), *a = json_object_get(j, "add_prefix_space");
        if (*kind && *kind != R_BYTE) return "its pre-tokenizer mixes steps of different cut rules";
        if (!u || json_is_true(u)) *kind = R_BYTE;
        if (!a || json_is_true(a)) *prefix = 1;   /* tokenizers' default: true */
        return NULL;
    }
    if (!strcmp(t, "Split")) {
        const char *rx = json_string_value(json_object_get(json_object_get(j, "pattern"), "Regex"));
        const char *b = json_string_value(json_object_get(j, "behavior"));
        for (size_t i = 0; rx && b && !strcmp(b, "Isolated") && !json_is_true(json_object_get(j, "invert")) &&
                           i < sizeof kProved / sizeof *kProved; i++)
            if (!strcmp(rx, kProved[i])) {
                if (*kind && *kind != R_BYTE) return "its pre-tokenizer mixes steps of different cut rules";
                *kind = R_BYTE;
                return NULL;
            }
        return "its pre-tokenizer has a Split pattern LoPT's cut rule is not proved for";
    }
    return "its pre-tokenizer has a step LoPT's cut rule is not proved for";
}

/* Bytes a Replace pattern or content must not hold: whitespace (a match could straddle a cut, or make
** one), and what the cut rules look at next to the cut (ASCII letters, digits and . , ; : ! ?). */
static int replace_ok(const char *x)
{
    for (const unsigned char *c = (const unsigned char *)x; c && *c; c++)
        if (*c <= ' ' || *c == 0x7F || ascii_alnum(*c) || strchr(".,;:!?", *c)) return 0;
    return x != NULL;
}

/* NULL when the normalizer is character-local at every cut position (docs/tokenize.md, "LoPT and
** normalizers"): normalize(text) = normalize(left) + normalize(right) and the cut's characters keep
** their classes; else why not.  *no_nl: the newline rule does not hold (a Replace, Strip). */
static const char *norm_why(json_t *j, int depth, int kind, int *no_nl)
{
    const char *t = json_string_value(json_object_get(j, "type"));
    if (!j || json_is_null(j)) return NULL;
    if (!t || depth > 16) return "its normalizer is not one LoPT's cut rule is proved for";
    if (!strcmp(t, "Sequence")) {
        json_t *a = json_object_get(j, "normalizers"), *s;
        size_t i;
        json_array_foreach(a, i, s) {
            const char *w = norm_why(s, depth + 1, kind, no_nl);
            if (w) return w;
        }
        return NULL;
    }
    /* Unicode forms: the cut's characters are ASCII (or a newline then a CJK letter): starters that
    ** compose with nothing on the other side; case mapping and accent stripping act per character */
    static const char *const local[] = {"NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents", "BertNormalizer", "Nmt"};
    for (size_t i = 0; i < sizeof local / sizeof *local; i++)
        if (!strcmp(t, local[i])) {
            if (i >= 6) *no_nl = 1;   /* they turn a newline into a space, pad CJK with spaces */
            return NULL;
        }
    if (!strcmp(t, "Replace")) {
        json_t *pat = json_object_get(j, "pattern");
        const char *lit = json_string_value(json_object_get(pat, "String"));
        if (!lit) return "its normalizer has a Replace with a regex (a match could cross a cut)";
        if (!replace_ok(lit) || !replace_ok(json_string_value(json_object_get(j, "content"))))
            return "its normalizer has a Replace of whitespace or of the characters next to a cut";
        *no_nl = 1;
        return NULL;
    }
    if (!strcmp(t, "Strip")) {   /* at a chunk's ends it would strip what the whole text keeps */
        if (kind != R_WS) return "its normalizer strips whitespace, which its pre-tokenizer keeps";
        return NULL;
    }
    if (!strcmp(t, "Prepend")) return "its normalizer prepends to every stretch (it would prepend at every chunk start)";
    if (!strcmp(t, "Precompiled")) return "its normalizer is a SentencePiece charsmap (its matches can cross a cut)";
    return "its normalizer has a step LoPT's cut rule is not proved for";
}

/* ASCII whitespace every whitespace-removing pre-tokenizer splits at and BertNormalizer keeps (it
** drops \v and \f as control characters) */
static int ascii_ws(unsigned char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* A normalizer step of Llama 2's tokenizer.json: Prepend("▁") (*pre) or Replace(" ", "▁") (*rep). */
static int llama2_step(json_t *j, int *pre, int *rep)
{
    const char *t = json_string_value(json_object_get(j, "type"));
    const char *x = json_string_value(json_object_get(j, "prepend"));
    if (t && x && !strcmp(t, "Prepend") && !strcmp(x, "\xe2\x96\x81")) return *pre = 1;
    const char *a = json_string_value(json_object_get(json_object_get(j, "pattern"), "String"));
    const char *c = json_string_value(json_object_get(j, "content"));
    if (t && a && c && !strcmp(t, "Replace") && !strcmp(a, " ") && !strcmp(c, "\xe2\x96\x81")) return *rep = 1;
    return 0;
}

/* NULL when a SentencePiece BPE model without a pre-tokenizer splits at every space after an ASCII
** graphic character (docs/tokenize.md, "LoPT beyond byte-level BPE"): spaces become "▁" (Llama 2's
** tokenizer.json: Replace; a tokenizer.model or GGUF "llama" vocabulary: escape_whitespaces), what is
** added once per stretch (a Prepend "▁", the model's dummy prefix) or removed at its start (leading
** spaces) is left out where a chunk continues a stretch (qs_llm_tok_state_continues), and no
** vocabulary entry has "▁" after another character, so no merge joins the character before the cut
** with the "▁" at it; else why not. */
static const char *spm_why(const qs_llm_vocab *v)
{
    static const char meta[] = "\xe2\x96\x81";
    if (v->model != QS_TOK_BPE || v->ignore_merges || !v->model_json)
        return "a SentencePiece model without a pre-tokenizer: its pieces may span spaces";
    json_t *j = json_loads(v->model_json, 0, NULL), *sp = json_object_get(j, "sentencepiece");
    int own = sp != NULL, esc = !own || !json_is_false(json_object_get(sp, "escape_whitespaces"));
    json_decref(j);
    if (own) {   /* tokenizer.model, GGUF: the model's own flags; a charsmap could match across a space */
        if (!esc) return "a SentencePiece model that keeps spaces as spaces (escape_whitespaces false)";
        if (v->norm_json && strcmp(v->norm_json, "null"))
            return "a SentencePiece model without a pre-tokenizer whose normalization rules could match across a space";
    } else {
        json_t *x, *n = v->norm_json ? json_loads(v->norm_json, 0, NULL) : NULL;
        int pre = 0, rep = 0, ok = n != NULL;
        const char *t = json_string_value(json_object_get(n, "type"));
        if (t && !strcmp(t, "Sequence")) {
            size_t i;
            json_array_foreach(json_object_get(n, "normalizers"), i, x) ok = ok && llama2_step(x, &pre, &rep);
        } else {
            ok = ok && llama2_step(n, &pre, &rep);
        }
        json_decref(n);
        if (!ok || !rep) return "a SentencePiece model without a pre-tokenizer under a normalizer other than Llama 2's";
    }
    int id = qs_llm_vocab_find(v, meta);
    if (id < 0 || (v->type && v->type[id] != 1))
        return "a SentencePiece model without a pre-tokenizer whose vocabulary lacks \"\xe2\x96\x81\"";
    for (int i = 0; i < v->n; i++) {
        const char *w = v->text + v->off[i], *m = w;
        while (*m && (m = strstr(m + 1, meta)))
            if (m - w < 3 || memcmp(m - 3, meta, 3))
                return "a SentencePiece model without a pre-tokenizer whose vocabulary has \"\xe2\x96\x81\" after another character";
        if (v->aflags && (v->aflags[i] & (QS_TOK_LSTRIP | QS_TOK_RSTRIP)))
            return "a SentencePiece model without a pre-tokenizer with an added token that strips whitespace";
    }
    return NULL;
}

static int is_added(const qs_llm_vocab *v, int i)
{
    return (v->type && (v->type[i] == 3 || v->type[i] == 4)) || (v->aflags && (v->aflags[i] & QS_TOK_ADDED));
}

/* NULL when a cut rule is proved for this tokenizer (docs/tokenize.md), r set; else why the text goes
** through the sequential tokenizer.  r->after is malloc'ed (the caller frees it). */
static const char *eligible(const qs_llm_vocab *v, rule *r)
{
    memset(r, 0, sizeof *r);
    r->v = v;
    int nl_added = 0, ws_added = 0, lstrip = 0, nrs = 0, normed = 0, lstrip_normed = 0, nadded = 0;
    if (v->model == QS_TOK_BPE && !v->byte_level && !v->pre_json) {
        const char *w = spm_why(v);
        if (w) return w;
        r->kind = R_SPM;
    }
    if (v->model == QS_TOK_UNIGRAM && !v->pre_json)
        return "a Unigram model without a pre-tokenizer: its pieces may span spaces";
    for (int i = 0; i < v->n; i++) {
        if (!is_added(v, i)) continue;
        nadded++;
        int f = v->aflags ? v->aflags[i] : 0;
        const unsigned char *c = (const unsigned char *)v->text + v->off[i];
        for (const unsigned char *q = c; *q; q++) {
            if (*q == '\n') nl_added = 1;   /* it could cover a newline cut */
            else if (ascii_ws(*q)) ws_added = 1;
            if (*q >= 0x80 && (f & QS_TOK_NORMALIZED)) normed = 1;   /* could normalize to whitespace */
        }
        if (f & QS_TOK_LSTRIP) lstrip = 1;
        if ((f & QS_TOK_LSTRIP) && (f & QS_TOK_NORMALIZED)) lstrip_normed = 1;
        if (f & QS_TOK_RSTRIP) {
            if ((f & QS_TOK_NORMALIZED) && v->norm_json && strcmp(v->norm_json, "null"))
                return "an added token with rstrip is matched after the normalizer";
            nrs++;
        }
    }
    if (ws_added) return "an added token contains whitespace";
    if (normed && v->norm_json && strcmp(v->norm_json, "null"))
        return "a normalized added token is not ASCII (its normalized form could hold whitespace)";
    int prefix = 0, no_nl = 0;
    const char *why = NULL;
    if (r->kind == R_SPM) {
        /* no pre-tokenizer, and spm_why checked the normalizer */
    } else if (!v->pre_json) {   /* a GGUF family: byte-level only, no normalizer */
        size_t i = 0;
        while (i < sizeof kFamilies / sizeof *kFamilies && strcmp(v->pre, kFamilies[i])) i++;
        if (!v->byte_level || i == sizeof kFamilies / sizeof *kFamilies)
            return "its pre-tokenizer family is not one LoPT's cut rule is proved for";
        r->kind = R_BYTE;
    } else {
        json_t *j = json_loads(v->pre_json, 0, NULL);
        why = j ? step_why(j, 0, &r->kind, &prefix) : "its pre-tokenizer is not valid JSON";
        json_decref(j);
        if (why) return why;
        if (!r->kind) return "its pre-tokenizer has no step that splits at LoPT's cut positions";
        if (r->kind != R_BYTE && prefix) return "its pre-tokenizer adds a ByteLevel prefix space to another cut rule's pieces";
        if (r->kind == R_BYTE && (v->model != QS_TOK_BPE || !v->byte_level))
            return "a byte-level pre-tokenizer with a model that is not byte-level BPE";
    }
    if (v->norm_json && r->kind != R_SPM) {
        json_t *j = json_loads(v->norm_json, JSON_DECODE_ANY, NULL);
        why = j ? norm_why(j, 0, r->kind, &no_nl) : "its normalizer is not valid JSON";
        json_decref(j);
        if (why) return why;
    }
    r->nl = r->kind == R_BYTE && !prefix && !nl_added && !no_nl && !lstrip;
    r->ascii_before = lstrip_normed && v->norm_json && strcmp(v->norm_json, "null");
    if (nrs || (r->kind == R_SPM && nadded)) {
        int *rs = malloc((size_t)(r->kind == R_SPM ? nadded : nrs) * sizeof *rs);
        if (!rs) return "out of memory";
        nrs = 0;
        for (int i = 0; i < v->n; i++)
            if (*(v->text + v->off[i]) && (r->kind == R_SPM ? is_added(v, i) : v->aflags && (v->aflags[i] & QS_TOK_RSTRIP)))
                rs[nrs++] = i;
        r->after = rs; r->nafter = nrs;
    }
    return NULL;
}

/* ---------------------------------------------------------------- cut positions and the plan */

/* The code point of the 3-byte UTF-8 character at s[i] (i + 3 <= n), or 0. */
static unsigned cp3(const unsigned char *s, size_t n, size_t i)
{
    if (i + 3 > n || (s[i] & 0xF0) != 0xE0 || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
    return (s[i] & 0x0Fu) << 12 | (s[i + 1] & 0x3Fu) << 6 | (s[i + 2] & 0x3Fu);
}

/* CJK ideographs of Unicode 1.1, kana, Hangul syllables: letters (\p{L}) in every Unicode version. */
static int cjk_letter(unsigned c)
{
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3041 && c <= 0x3096) || (c >= 0x30A1 && c <= 0x30FA) ||
           (c >= 0xAC00 && c <= 0xD7A3);
}

/* The character ending at s[p-1] is an ASCII graphic character or a CJK letter (not White_Space,
** not a control character, not a combining mark). */
static int solid_before(const unsigned char *s, size_t n, size_t p)
{
    if (s[p - 1] > 0x20 && s[p - 1] < 0x7F) return 1;
    return p >= 3 && cjk_letter(cp3(s, n, p - 3));
}

/* None of r->after ends at p (its text is not a suffix of s[0..p)). */
static int no_added_at(const rule *r, const unsigned char *s, size_t p)
{
    for (int i = 0; i < r->nafter; i++) {
        const char *c = r->v->text + r->v->off[r->after[i]];
        size_t l = strlen(c);
        if (l <= p && !memcmp(s + p - l, c, l)) return 0;
    }
    return 1;
}

/* p is a cut position (docs/tokenize.md):
**   R_BYTE, space rule: s[p-1] an ASCII letter or . , ; : ! ?, s[p] a space, s[p+1] an ASCII letter;
**   R_BYTE, newline rule (nl): s[p-1] a newline after a character that is not White_Space (ASCII
**   graphic, a CJK letter, CJK or fullwidth punctuation), s[p] an ASCII or CJK letter;
**   R_WS: s[p] ASCII whitespace after an ASCII graphic character or a CJK letter;
**   R_META: s[p] a space after an ASCII graphic character or a CJK letter;
**   R_SPM: s[p] a space after an ASCII graphic character;
** and no added token of r->after ends right before s[p]. */
static int safe_at(const rule *r, const unsigned char *s, size_t n, size_t p)
{
    if (p < 1 || p + 1 >= n) return 0;
    if (r->kind == R_SPM) return s[p] == ' ' && s[p - 1] > 0x20 && s[p - 1] < 0x7F && no_added_at(r, s, p);
    if (r->kind == R_WS || r->kind == R_META) {
        if (r->kind == R_WS ? !ascii_ws(s[p]) : s[p] != ' ') return 0;
        return (r->ascii_before ? s[p - 1] > 0x20 && s[p - 1] < 0x7F : solid_before(s, n, p)) && no_added_at(r, s, p);
    }
    if (s[p] == ' ') {
        unsigned char c = s[p - 1];
        return ascii_letter(s[p + 1]) &&
               (ascii_letter(c) || c == '.' || c == ',' || c == ';' || c == ':' || c == '!' || c == '?') &&
               no_added_at(r, s, p);
    }
    if (!r->nl || s[p - 1] != '\n' || p < 2 || !(ascii_letter(s[p]) || cjk_letter(cp3(s, n, p)))) return 0;
    if (s[p - 2] > 0x20 && s[p - 2] < 0x7F) return 1;
    unsigned c = p >= 4 ? cp3(s, n, p - 4) : 0;
    return cjk_letter(c) || (c >= 0x3001 && c <= 0x303F) || (c >= 0xFF01 && c <= 0xFF5E);
}

/* The first cut position in [from, to), or to. */
static size_t next_safe(const rule *r, const unsigned char *s, size_t n, size_t from, size_t to)
{
    for (size_t p = from; p < to; p++)
        if ((s[p] <= ' ' || (r->nl && p && s[p - 1] == '\n')) && safe_at(r, s, n, p)) return p;
    return to;
}

/* A boundary between two chunks: the right one starts at m, the left one ends at end; the anchor is the
** run of tokens in [p1, p2). */
typedef struct { size_t m, end, p1, p2; } bound;

/* Within the last TAIL chunk lengths of the text, boundaries are a quarter chunk apart: the pool hands
** out chunks in order, and a thread that finds none left waits for the others' last ones, so short
** last chunks let the threads finish together.  Not when a quarter chunk is too short for its overlap
** to double (TAIL_MIN, 2 * overlap). */
enum { TAIL = 4, TAIL_MIN = 256 };

/* Boundaries at the nominal offsets m = chunk, 2 chunk, ... (a quarter chunk apart in the tail), each
** with the overlap widened (doubled) until it holds two cut positions p1 < p2 with m < p1 and
** p2 + 4 <= end (a whole character after p2); at most step - 1 bytes of overlap, step being the
** distance to the next nominal offset.
** Returns the number of boundaries in b (room for len / chunk + 3 * TAIL + 1). */
static size_t plan(const rule *r, const unsigned char *s, size_t n, size_t chunk, size_t overlap, bound *b,
                   size_t *regrown)
{
    size_t nb = 0, q = chunk / 4;
    const int tail = q >= TAIL_MIN && q > 2 * overlap;
    for (size_t m = chunk, step; m < n; m += step) {
        step = tail && n - m <= TAIL * chunk ? q : chunk;
        size_t lim = m + step - 1 < n ? m + step - 1 : n;   /* the widest overlap's end */
        size_t p1 = next_safe(r, s, n, m + 1, lim);
        size_t p2 = p1 < lim ? next_safe(r, s, n, p1 + 1, lim) : lim;
        if (p2 + 4 > lim) { ++*regrown; continue; }   /* no anchor possible: the left chunk grows */
        size_t ov = overlap;
        while (m + ov < p2 + 4) { ov *= 2; ++*regrown; }
        if (m + ov > lim) ov = lim - m;
        b[nb++] = (bound){m, m + ov, p1, p2};
    }
    return nb;
}

/* ---------------------------------------------------------------- the sequential tokenizer */

static int sequential(const qs_llm_vocab *v, const char *name, const char *text, size_t len, int32_t **ids,
                      uint32_t **offs, size_t *n, qs_err *e)
{
    /* room for a token per byte (as llm eval always had): one pass for nearly any text; with spans,
    ** 12 bytes a token, half that first */
    size_t cap = offs ? len / 2 + 64 : len + 16;
    for (;;) {
        if (cap > INT_MAX) return qs_fail(e, "%s gives more than %d tokens", name ? name : "the text", INT_MAX);
        int32_t *ni = realloc(*ids, cap * sizeof *ni);
        if (ni) *ids = ni;
        uint32_t *no = offs ? realloc(*offs, 2 * cap * sizeof *no) : NULL;
        if (no) *offs = no;
        if (!ni || (offs && !no)) return qs_fail(e, "out of memory for the tokens of %s", name ? name : "the text");
        qs_err te = {{0}};
        int k = qs_llm_tokenize_offs(v, name, text, len, *ids, offs ? *offs : NULL, (int)cap, &te);
        if (k >= 0) { *n = (size_t)k; return 0; }
        if (!strstr(te.msg, "gives more than")) { *e = te; return -1; }
        cap *= 2;
    }
}

/* ---------------------------------------------------------------- the chunks */

/* One chunk: the segment [lo, hi) between its anchors, tokenized on its own (the cut positions split
** every window), and the check of its left boundary's anchor. */
typedef struct {
    size_t lo, hi;
    const bound *left;    /* the boundary at lo, or NULL for the first chunk */
    int32_t *ids;         /* the segment's ids and, when wanted, spans (malloc'ed) */
    uint32_t *off;
    size_t n, at;         /* its tokens, and where they go in the output */
    int bad;              /* 1: tokenizing failed, 2: the anchor check did not hold */
} lchunk;

typedef struct {
    const qs_llm_vocab *v;
    const char *text;
    lchunk *c;
    int spans;            /* the caller wants spans */
    qs_llm_tok_state **st;   /* one per pool slot: its piece cache stays warm from chunk to chunk */
    struct scratch { int32_t *ids; uint32_t *off; size_t cap; } *sc;   /* one per slot, grown, reused */
} job;

/* Tokenize text[a, a + w) into malloc'ed buffers of exactly its tokens (spans absolute, when off is not
** NULL).  The tokenizer writes into the slot's scratch (room for a token per byte first, then for the
** most a byte-level BPE can give: a token has >= 1 byte of its piece, + 1 prefix space per piece),
** reused from chunk to chunk: fresh pages for every chunk cost page faults, and on two threads each
** fault's TLB flush interrupts the other core.  Returns the count, or -1. */
static int tok_range(const job *J, int slot, size_t a, size_t w, int32_t **ids, uint32_t **off)
{
    struct scratch *sc = &J->sc[slot];
    for (size_t cap = w + 16;; cap = 2 * w + 16) {
        if (cap > INT_MAX) return -1;
        if (cap > sc->cap) {
            free(sc->ids); free(sc->off);
            sc->ids = malloc(cap * sizeof *sc->ids);
            sc->off = malloc(2 * cap * sizeof *sc->off);
            sc->cap = sc->ids && sc->off ? cap : 0;
            if (!sc->cap) return -1;
        }
        qs_err e = {{0}};
        qs_llm_tok_state_continues(J->st[slot], a > 0);   /* a Prepend normalizer adds nothing mid-stretch */
        int k = qs_llm_tokenize_state(J->st[slot], J->v, NULL, J->text + a, w, sc->ids, off ? sc->off : NULL, (int)cap,
                                      &e);
        if (k >= 0) {
            free(*ids);
            *ids = malloc((k ? (size_t)k : 1) * sizeof **ids);
            if (off) { free(*off); *off = malloc((k ? 2 * (size_t)k : 1) * sizeof **off); }
            if (!*ids || (off && !*off)) return -1;
            memcpy(*ids, sc->ids, (size_t)k * sizeof **ids);
            for (int i = 0; off && i < 2 * k; i++) (*off)[i] = sc->off[i] + (uint32_t)a;
            return k;
        }
        if (cap == 2 * w + 16 || !strstr(e.msg, "gives more than")) return -1;
    }
}

/* First token with start >= p; bad when the token before it ends after p. */
static size_t split_at(const uint32_t *off, size_t n, size_t p, int *bad)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (off[2 * mid] < p) lo = mid + 1; else hi = mid;
    }
    if (lo && off[2 * lo - 1] > p) *bad = 1;
    return lo;
}

/* LoPT's anchor check of boundary b: the overlap window [m, end), which starts at an arbitrary byte as
** a LoPT chunk does, splits at p1 and p2 and has there the very tokens (ids and spans) of [p1, p2)
** tokenized alone; and those start the segment that begins at p1 (c's ids, and spans when kept). */
static int anchor_ok(const job *J, int slot, const bound *b, const lchunk *c)
{
    int32_t *wi = NULL, *ai = NULL;
    uint32_t *wo = NULL, *ao = NULL;
    int ok = 0, bad = 0;
    int nw = tok_range(J, slot, b->m, b->end - b->m, &wi, &wo);
    int na = nw < 0 ? -1 : tok_range(J, slot, b->p1, b->p2 - b->p1, &ai, &ao);
    if (na > 0 && (size_t)na <= c->n) {
        size_t i1 = split_at(wo, (size_t)nw, b->p1, &bad), i2 = split_at(wo, (size_t)nw, b->p2, &bad);
        ok = !bad && i2 - i1 == (size_t)na && !memcmp(wi + i1, ai, (size_t)na * sizeof *ai) &&
             !memcmp(wo + 2 * i1, ao, 2 * (size_t)na * sizeof *ao) && !memcmp(c->ids, ai, (size_t)na * sizeof *ai) &&
             (!c->off || !memcmp(c->off, ao, 2 * (size_t)na * sizeof *ao));
    }
    free(wi); free(wo); free(ai); free(ao);
    return ok;
}

static void chunk_task(void *ctx, size_t task, int slot)
{
    const job *J = ctx;
    lchunk *c = &J->c[task];
    int k = tok_range(J, slot, c->lo, c->hi - c->lo, &c->ids, J->spans ? &c->off : NULL);
    if (k < 0) { c->bad = 1; return; }
    c->n = (size_t)k;
    if (c->left && !anchor_ok(J, slot, c->left, c)) c->bad = 2;
}

/* The merge: each chunk's segment copied to its place in the output, in parallel (both threads fault
** in the output's fresh pages), and its buffers freed. */
typedef struct { lchunk *c; int32_t *oi; uint32_t *oo; } mjob;

static void merge_task(void *ctx, size_t task, int slot)
{
    const mjob *M = ctx;
    lchunk *c = &M->c[task];
    memcpy(M->oi + c->at, c->ids, c->n * sizeof *M->oi);
    if (M->oo) memcpy(M->oo + 2 * c->at, c->off, 2 * c->n * sizeof *M->oo);
    free(c->ids); free(c->off);
    c->ids = NULL; c->off = NULL;
}

/* Tokenize the planned chunks in parallel and concatenate their segments.  Returns 0; 1 when a chunk
** failed, 2 when an anchor check did not hold (the caller goes sequential); -1 out of memory. */
static int parallel(const qs_llm_vocab *v, const char *text, size_t len, const bound *b, size_t nb, int threads,
                    int32_t **ids, uint32_t **offs, size_t *n, qs_lopt_stats *st)
{
    int width = qs_pool_width(threads, nb + 1);
    lchunk *c = calloc(nb + 1, sizeof *c);
    qs_llm_tok_state **ts = calloc((size_t)width, sizeof *ts);
    qs_llm_tok_shared *sh = qs_llm_tok_shared_new(len);   /* each piece computed once, by one slot */
    struct scratch *sc = calloc((size_t)width, sizeof *sc);
    int rc = -1;
    for (int i = 0; ts && sh && i < width; i++)
        if (!(ts[i] = qs_llm_tok_state_new(sh))) goto out;
    if (!c || !ts || !sh || !sc) goto out;
    for (size_t i = 0; i <= nb; i++) {
        c[i].lo = i ? b[i - 1].p1 : 0;
        c[i].hi = i < nb ? b[i].p1 : len;
        c[i].left = i ? &b[i - 1] : NULL;
    }
    job J = {v, text, c, offs != NULL, ts, sc};
    qs_pool_for(threads, nb + 1, chunk_task, &J);
    rc = 0;
    size_t total = 0;
    for (size_t i = 0; i <= nb; i++) {
        if (c[i].bad > rc) rc = c[i].bad;
        c[i].at = total;
        total += c[i].n;
    }
    if (rc) goto out;
    rc = -1;   /* the segments into one output of exactly their tokens */
    int32_t *oi = malloc((total ? total : 1) * sizeof *oi);
    uint32_t *oo = offs ? malloc((total ? 2 * total : 1) * sizeof *oo) : NULL;
    if (!oi || (offs && !oo)) { free(oi); free(oo); goto out; }
    mjob M = {c, oi, oo};
    qs_pool_for(threads, nb + 1, merge_task, &M);
    *ids = oi;
    if (offs) *offs = oo;
    *n = total;
    if (st) { st->chunks = nb + 1; st->anchors = nb; }
    rc = 0;
out:
    for (size_t i = 0; c && i <= nb; i++) { free(c[i].ids); free(c[i].off); }
    for (int i = 0; ts && i < width; i++) qs_llm_tok_state_free(ts[i]);
    for (int i = 0; sc && i < width; i++) { free(sc[i].ids); free(sc[i].off); }
    free(c); free(ts); free(sc);
    qs_llm_tok_shared_free(sh);
    return rc;
}

int qs_lopt_tokenize(const qs_llm_vocab *v, const char *name, const char *text, size_t len, const qs_lopt_opts *o,
                     int32_t **ids, uint32_t **offs, size_t *n, qs_lopt_stats *st, qs_err *e)
{
    *ids = NULL; *n = 0;
    if (offs) *offs = NULL;
    if (st) memset(st, 0, sizeof *st);
    int threads = o ? o->threads : 0;
    size_t chunk = o && o->chunk ? o->chunk : 0, overlap = o && o->overlap ? o->overlap : QS_LOPT_OVERLAP;
    if (!chunk) chunk = QS_LOPT_CHUNK;   /* each pool slot's tokenizer state stays warm across chunks */
    if (chunk < 8) chunk = 8;
    if (overlap >= chunk) overlap = chunk - 1;
    const char *why = NULL;
    rule r;
    memset(&r, 0, sizeof r);
    if (threads != 1 && len > chunk && len < UINT32_MAX && !(why = eligible(v, &r))) {
        size_t regrown = 0;
        bound *b = malloc((len / chunk + 3 * TAIL + 1) * sizeof *b);
        if (!b) { free(r.after); return qs_fail(e, "out of memory for the chunks of %s", name ? name : "the text"); }
        size_t nb = plan(&r, (const unsigned char *)text, len, chunk, overlap, b, &regrown);
        int rc = nb ? parallel(v, text, len, b, nb, threads, ids, offs, n, st) : 1;
        free(b);
        free(r.after);
        r.after = NULL;
        if (st) st->regrown = regrown;
        if (rc == 0) return 0;
        free(*ids); *ids = NULL;
        if (offs) { free(*offs); *offs = NULL; }
        if (rc < 0) return qs_fail(e, "out of memory for the tokens of %s", name ? name : "the text");
        why = !nb ? "no two cut positions in any overlap"
              : rc == 2 ? "an anchor check did not hold (the cut-position analysis is wrong for this tokenizer)"
                        : "a chunk failed (regex work bound, memory)";
    }
    if (st && threads != 1 && len > chunk) { st->fallback = 1; st->why = why; }
    if (st) st->chunks = 1;
    if (sequential(v, name, text, len, ids, offs, n, e) == 0) return 0;
    free(*ids); *ids = NULL;
    if (offs) { free(*offs); *offs = NULL; }
    return -1;
}
