/*
** Byte-level BPE tokenization for GGUF vocabularies of the GPT-2 family (see qs_llm_tokenize in
** llm_load.h).  Checked against Hugging Face `tokenizers` on SmolLM2's vocabulary and merges
** (tests/llm/hf_tokenize.py writes the vectors in tests/fixtures/llm).
*/
#include <stdlib.h>
#include <string.h>

#include "llm_load.h"

static int is_ws(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static int is_letter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_other(unsigned char c) { return !is_ws(c) && !is_letter(c) && !is_digit(c); }

/* GPT-2 bytes_to_unicode: the code point that spells byte b */
static unsigned byte_cp(unsigned b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
    return 256 + n;
}

typedef struct { int32_t *out; int cap, n; const qs_llm_vocab *v; qs_err *e; size_t at; } tk;

static int emit(tk *t, int id)
{
    if (t->n == t->cap) return qs_fail(t->e, "text gives more than %d tokens", t->cap);
    t->out[t->n++] = id;
    return 0;
}

/* BPE over one pre-tokenized piece p[0..n) (raw bytes). */
static int bpe_piece(tk *t, const unsigned char *p, size_t n)
{
    const qs_llm_vocab *v = t->v;
    /* byte-level spelling: every byte becomes a 1- or 2-byte UTF-8 code point */
    char *s = malloc(n * 2 + 1);
    size_t *st = malloc((n + 1) * sizeof *st);   /* symbol starts; symbol i = s[st[i] .. st[i+1]) */
    char *key = malloc(n * 2 + 2);
    if (!s || !st || !key) { free(s); free(st); free(key); return qs_fail(t->e, "out of memory"); }
    size_t len = 0, ns = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned cp = byte_cp(p[i]);
        st[ns++] = len;
        if (cp < 0x80) s[len++] = (char)cp;
        else { s[len++] = (char)(0xC0 | (cp >> 6)); s[len++] = (char)(0x80 | (cp & 0x3F)); }
    }
    st[ns] = len;
    while (ns > 1 && v->mhash) {   /* merge the adjacent pair of lowest rank, leftmost first */
        int best = -1;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < ns; i++) {
            size_t la = st[i + 1] - st[i], lb = st[i + 2] - st[i + 1];
            memcpy(key, s + st[i], la);
            key[la] = ' ';
            memcpy(key + la + 1, s + st[i + 1], lb);
            int r = qs_llm_hash_find(v->mtext, v->moff, v->mhash, v->mhcap, key, la + 1 + lb);
            if (r >= 0 && (best < 0 || r < best)) { best = r; bi = i; }
        }
        if (best < 0) break;
        memmove(st + bi + 1, st + bi + 2, (ns - bi - 1) * sizeof *st);   /* drop the boundary */
        ns--;
    }
    int rc = 0;
    for (size_t i = 0; i < ns && !rc; i++) {
        int id = qs_llm_hash_find(v->text, v->off, v->vhash, v->vhcap, s + st[i], st[i + 1] - st[i]);
        if (id < 0) rc = qs_fail(t->e, "no vocabulary entry for a BPE symbol of the text near byte %zu", t->at);
        else rc = emit(t, id);
    }
    free(s); free(st); free(key);
    return rc;
}

/* GPT-2 regex over a digit-free ASCII run r[0..n) */
static int gpt2_split(tk *t, const unsigned char *r, size_t n)
{
    size_t p = 0;
    while (p < n) {
        size_t q = p;
        unsigned char c = r[p];
        if (c == '\'' && p + 1 < n && (r[p + 1] == 's' || r[p + 1] == 't' || r[p + 1] == 'm' || r[p + 1] == 'd')) q = p + 2;
        else if (c == '\'' && p + 2 < n && ((r[p + 1] == 'r' && r[p + 2] == 'e') || (r[p + 1] == 'v' && r[p + 2] == 'e') ||
                                            (r[p + 1] == 'l' && r[p + 2] == 'l'))) q = p + 3;
        else if (is_letter(c) || (c == ' ' && p + 1 < n && is_letter(r[p + 1]))) {
            q = c == ' ' ? p + 1 : p;
            while (q < n && is_letter(r[q])) q++;
        } else if (is_other(c) || (c == ' ' && p + 1 < n && is_other(r[p + 1]))) {
            q = c == ' ' ? p + 1 : p;
            while (q < n && is_other(r[q])) q++;
        } else {   /* whitespace: \s+(?!\S) keeps the last one for the next token, else \s+ */
            while (q < n && is_ws(r[q])) q++;
            if (q < n && q - p > 1) q--;
        }
        t->at += q - p;
        if (bpe_piece(t, r + p, q - p)) return -1;
        p = q;
    }
    return 0;
}

/* Digits alone, then the GPT-2 regex on the runs between them. */
static int pretok(tk *t, const unsigned char *s, size_t n)
{
    size_t p = 0;
    while (p < n) {
        if (is_digit(s[p])) {
            t->at++;
            if (bpe_piece(t, s + p, 1)) return -1;
            p++;
            continue;
        }
        size_t q = p;
        while (q < n && !is_digit(s[q])) q++;
        if (gpt2_split(t, s + p, q - p)) return -1;
        p = q;
    }
    return 0;
}

int qs_llm_tokenize(const qs_llm_vocab *v, const char *text, size_t len, int32_t *out, int cap, qs_err *e)
{
    if (!v->n || !v->byte_level || !v->vhash)
        return qs_fail(e, "the model has no byte-level BPE vocabulary (tokenizer.ggml.model gpt2); give token ids");
    if (v->pre[0] && strcmp(v->pre, "smollm") && strcmp(v->pre, "gpt2") && strcmp(v->pre, "starcoder") &&
        strcmp(v->pre, "refact") && strcmp(v->pre, "default"))
        return qs_fail(e, "pre-tokenizer '%s' is not implemented (smollm, gpt2); give token ids", v->pre);
    int digits_alone = strcmp(v->pre, "gpt2") != 0 && strcmp(v->pre, "default") != 0;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len; i++)
        if (s[i] >= 0x80) return qs_fail(e, "byte %zu of the text is not ASCII: only ASCII text is tokenized; give token ids", i);
    tk t = {out, cap, 0, v, e, 0};
    size_t seg = 0, i = 0;
    while (i <= len) {
        int sp = -1;
        size_t sl = 0;
        for (int k = 0; i < len && k < v->nspecial; k++) {   /* longest first */
            const char *w = v->text + v->off[v->special[k]];
            size_t wl = strlen(w);
            if (wl <= len - i && !memcmp(s + i, w, wl)) { sp = v->special[k]; sl = wl; break; }
        }
        if (sp < 0 && i < len) { i++; continue; }
        t.at = seg;
        if (i > seg && (digits_alone ? pretok(&t, s + seg, i - seg) : gpt2_split(&t, s + seg, i - seg))) return -1;
        if (sp < 0) break;
        if (emit(&t, sp)) return -1;
        i += sl;
        seg = i;
    }
    return t.n;
}
