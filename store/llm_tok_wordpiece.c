/*
** The WordPiece model of Hugging Face `tokenizers` (models/wordpiece/mod.rs, WordPiece::tokenize): a
** piece of more than max_input_chars_per_word characters is unk_token; otherwise, from its start,
** the longest prefix that is a token (after the first sub-token spelled with
** continuing_subword_prefix, "##") is taken, shortening one character at a time; when no prefix of
** the rest is a token, the whole piece is unk_token.  And its decoder (decoders/wordpiece.rs).
**
** Invalid UTF-8 (tokenizers only takes valid strings): each invalid byte counts as one character.
** Search bound: a candidate longer than the longest token cannot be one, so each start tries at most
** that many bytes; the result is the same as trying the whole rest, and a long word costs its length
** times the longest token, not its length squared.
*/
#include "llm_tok_wordpiece.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

enum { STACK_SUBS = 128, STACK_BUF = 1024 };

struct qs_tok_wp {
    int unk;            /* id of unk_token, or -1 (then a word that needs it fails) */
    char *unk_s;        /* unk_token, for that message */
    char *prefix;       /* continuing_subword_prefix */
    size_t plen;
    size_t max_chars;   /* max_input_chars_per_word */
    size_t max_tok;     /* bytes of the longest token of the vocabulary */
};

void qs_tok_wp_free(qs_tok_wp *w)
{
    if (!w) return;
    free(w->unk_s); free(w->prefix);
    free(w);
}

int qs_tok_wp_build(const qs_llm_vocab *v, qs_tok_wp **out, qs_err *e)
{
    *out = NULL;
    json_error_t je;
    json_t *j = v->model_json ? json_loads(v->model_json, 0, &je) : json_object();
    if (!j || !json_is_object(j)) { json_decref(j); return qs_fail(e, "WordPiece \"model\" is not a JSON object"); }
    json_t *u = json_object_get(j, "unk_token"), *p = json_object_get(j, "continuing_subword_prefix"),
           *m = json_object_get(j, "max_input_chars_per_word");
    int bad = (u && !json_is_string(u)) || (p && !json_is_string(p)) ||
              (m && (!json_is_integer(m) || json_integer_value(m) < 0));
    if (bad) {
        json_decref(j);
        return qs_fail(e, "WordPiece model: unk_token and continuing_subword_prefix must be strings, "
                          "max_input_chars_per_word a count");
    }
    qs_tok_wp *w = calloc(1, sizeof *w);
    if (w) {
        w->unk_s = strdup(u ? json_string_value(u) : "[UNK]");
        w->prefix = strdup(p ? json_string_value(p) : "##");
    }
    if (!w || !w->unk_s || !w->prefix) { json_decref(j); qs_tok_wp_free(w); return qs_fail(e, "out of memory"); }
    w->plen = strlen(w->prefix);
    w->max_chars = m ? (size_t)json_integer_value(m) : 100;
    json_decref(j);
    w->unk = qs_llm_vocab_find(v, w->unk_s);
    for (int i = 0; i < v->n; i++) {
        size_t l = strlen(v->text + v->off[i]);
        if (l > w->max_tok) w->max_tok = l;
    }
    *out = w;
    return 0;
}

/* bytes of the UTF-8 character at s[i] (1 for an invalid byte: one character of its own) */
static size_t char_len(const unsigned char *s, size_t n, size_t i)
{
    if (s[i] < 0x80) return 1;
    if (s[i] < 0xC2) return 1;
    size_t k = s[i] < 0xE0 ? 2 : s[i] < 0xF0 ? 3 : s[i] < 0xF5 ? 4 : 1;
    if (i + k > n) return 1;
    for (size_t j = 1; j < k; j++)
        if ((s[i + j] & 0xC0) != 0x80) return 1;
    if (k == 3 && ((s[i] == 0xE0 && s[i + 1] < 0xA0) || (s[i] == 0xED && s[i + 1] >= 0xA0))) return 1;   /* overlong, surrogate */
    if (k == 4 && ((s[i] == 0xF0 && s[i + 1] < 0x90) || (s[i] == 0xF4 && s[i + 1] >= 0x90))) return 1;   /* overlong, > U+10FFFF */
    return k;
}

typedef struct { int id; uint32_t a, b; } sub;

static int whole_unk(const qs_tok_wp *w, const char *s, size_t n, qs_tok_emit_fn emit, void *ctx, qs_err *e)
{
    if (w->unk < 0)
        return qs_fail(e, "WordPiece: the unk_token '%.40s' is not in the vocabulary, and '%.*s%s' needs it", w->unk_s,
                       (int)(n > 40 ? 40 : n), s, n > 40 ? "..." : "");   /* s is not NUL-terminated */
    return emit(ctx, w->unk, 0, (uint32_t)n);
}

/* The longest token at s[start..): its end, or start when none; *id its id.  buf holds the prefix
** followed by room for max_tok bytes. */
static size_t longest(const qs_llm_vocab *v, const qs_tok_wp *w, const unsigned char *s, size_t n, size_t start,
                      char *buf, int *id)
{
    size_t lim = n - start < w->max_tok ? n : start + w->max_tok, end = start, ends[STACK_BUF];
    size_t *ev = ends, ne = 0, cap = STACK_BUF;
    /* character boundaries after start, up to lim: the candidates' ends, longest first below */
    for (size_t i = start; i < lim;) {
        size_t k = char_len(s, n, i);
        if (i + k > lim) break;
        i += k;
        if (ne == cap) {
            size_t *nv = malloc(2 * cap * sizeof *nv);
            if (!nv) { if (ev != ends) free(ev); *id = -2; return start; }
            memcpy(nv, ev, ne * sizeof *nv);
            if (ev != ends) free(ev);
            ev = nv; cap *= 2;
        }
        ev[ne++] = i;
    }
    size_t pl = start ? w->plen : 0;
    *id = -1;
    while (ne) {
        end = ev[--ne];
        memcpy(buf + w->plen, s + start, end - start);   /* after the prefix, which counts from the 2nd on */
        int k = qs_llm_hash_find(v->text, v->off, v->vhash, v->vhcap, buf + w->plen - pl, pl + end - start);
        if (k >= 0) { *id = k; break; }
    }
    if (ev != ends) free(ev);
    return *id >= 0 ? end : start;
}

int qs_tok_wp_piece(const qs_llm_vocab *v, const qs_tok_wp *w, const char *str, size_t n, qs_tok_emit_fn emit,
                    void *ctx, qs_err *e)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t chars = 0;
    for (size_t i = 0; i < n; i += char_len(s, n, i)) chars++;
    if (chars > w->max_chars) return whole_unk(w, str, n, emit, ctx, e);
    sub stack_subs[STACK_SUBS], *subs = stack_subs;
    char stack_buf[STACK_BUF], *buf = stack_buf;
    size_t need = w->plen + w->max_tok + 1;
    if (n > STACK_SUBS) subs = malloc(n * sizeof *subs);
    if (need > sizeof stack_buf) buf = malloc(need);
    int rc = -1;
    if (!subs || !buf) { qs_fail(e, "out of memory"); goto out; }
    memcpy(buf, w->prefix, w->plen);
    size_t ns = 0, start = 0;
    while (start < n) {
        int id;
        size_t end = longest(v, w, s, n, start, buf, &id);
        if (id == -2) { qs_fail(e, "out of memory"); goto out; }
        if (id < 0) { rc = whole_unk(w, str, n, emit, ctx, e); goto out; }
        subs[ns++] = (sub){id, (uint32_t)start, (uint32_t)end};
        start = end;
    }
    for (size_t i = 0; i < ns; i++)
        if (emit(ctx, subs[i].id, subs[i].a, subs[i].b)) goto out;
    rc = 0;
out:
    if (subs != stack_subs) free(subs);
    if (buf != stack_buf) free(buf);
    return rc;
}

/* ---------------------------------------------------------------- the decoder */

/* decoders/wordpiece.rs cleanup(), applied to one token's text in place (every pattern shrinks or
** keeps the length). */
static size_t cleanup(char *t, size_t n)
{
    static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " do not", " 's", " 've", " 're"};
    static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", " don't", "'s", "'ve", "'re"};
    for (size_t r = 0; r < sizeof from / sizeof *from; r++) {
        size_t fl = strlen(from[r]), tl = strlen(to[r]), o = 0;
        for (size_t i = 0; i < n;) {
            if (i + fl <= n && !memcmp(t + i, from[r], fl)) {
                memmove(t + o, to[r], tl);
                o += tl; i += fl;
            } else {
                t[o++] = t[i++];
            }
        }
        n = o;
    }
    return n;
}

size_t qs_tok_wp_detok(const qs_llm_vocab *v, const qs_tok_wp *w, int id, char *out, size_t cap)
{
    if (!cap) return 0;
    const char *pre = w ? w->prefix : "##", *t = v->text + v->off[id];
    size_t pl = strlen(pre), tl = strlen(t), o = 0;
    if (pl && !strncmp(t, pre, pl)) { t += pl; tl -= pl; }
    else if (cap > 1) out[o++] = ' ';
    if (tl > cap - 1 - o) tl = cap - 1 - o;
    memcpy(out + o, t, tl);
    o = cleanup(out, o + tl);
    out[o] = 0;
    return o;
}
