/*
** LoPT against the sequential tokenizer (lopt_check.h): texts, the reference, the comparison.
*/
#include "lopt_check.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const qs_lopt_austen[QS_LOPT_AUSTEN_N] = {
    "data/text/sensesensibility.txt", "data/text/prideprejudice.txt", "data/text/mansfieldpark.txt",
    "data/text/emma.txt", "data/text/northangerabbey.txt", "data/text/persuasion.txt",
};

int qs_lopt_have_austen(void)
{
    for (int i = 0; i < QS_LOPT_AUSTEN_N; i++)
        if (access(qs_lopt_austen[i], R_OK)) return 0;
    return 1;
}

int qs_lopt_read_texts(const char *const *paths, int n, char **buf, size_t *len, qs_err *e)
{
    *buf = NULL; *len = 0;
    size_t cap = 0;
    for (int i = 0; i < n; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (!f) { free(*buf); *buf = NULL; return qs_fail(e, "%s: cannot read (make data, or --text FILE)", paths[i]); }
        char tmp[65536];
        size_t k;
        while ((k = fread(tmp, 1, sizeof tmp, f)) > 0) {
            if (*len + k >= (size_t)INT_MAX) {
                fclose(f); free(*buf); *buf = NULL;
                return qs_fail(e, "%s: the text reaches 2 GiB (token spans are 32-bit)", paths[i]);
            }
            if (*len + k + 1 > cap) {
                size_t nc = cap ? cap : 1 << 20;
                while (nc < *len + k + 1) nc *= 2;
                char *nb = realloc(*buf, nc);
                if (!nb) { fclose(f); free(*buf); *buf = NULL; return qs_fail(e, "out of memory reading %s", paths[i]); }
                *buf = nb; cap = nc;
            }
            memcpy(*buf + *len, tmp, k);
            *len += k;
        }
        int bad = ferror(f);
        fclose(f);
        if (bad) { free(*buf); *buf = NULL; return qs_fail(e, "%s: read error", paths[i]); }
    }
    if (!*buf && !(*buf = malloc(1))) return qs_fail(e, "out of memory");
    (*buf)[*len] = 0;
    return 0;
}

int qs_lopt_sequential(const qs_llm_vocab *v, const char *name, const char *text, size_t len, int32_t **ids, size_t *n,
                       qs_err *e)
{
    size_t cap = len / 3 + 64;
    *ids = NULL; *n = 0;
    for (;;) {
        if (cap > INT_MAX) cap = INT_MAX;
        int32_t *ni = realloc(*ids, cap * sizeof *ni);
        if (!ni) { free(*ids); *ids = NULL; return qs_fail(e, "out of memory for the tokens of %s", name); }
        *ids = ni;
        qs_err te = {{0}};
        int k = qs_llm_tokenize_named(v, name, text, len, *ids, (int)cap, &te);
        if (k >= 0) { *n = (size_t)k; return 0; }
        if (!strstr(te.msg, "gives more than") || cap == INT_MAX) { free(*ids); *ids = NULL; *e = te; return -1; }
        cap *= 2;
    }
}

long qs_lopt_first_diff(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    size_t m = na < nb ? na : nb;
    for (size_t i = 0; i < m; i++)
        if (a[i] != b[i]) return (long)i;
    return na == nb ? -1 : (long)m;
}

uint64_t qs_lopt_ids_hash(const int32_t *ids, size_t n)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)ids[i];
        for (int b = 0; b < 4; b++) { h ^= (u >> (8 * b)) & 0xff; h *= 1099511628211ull; }
    }
    return h;
}

/* ---- adversarial texts ---- */

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct { char *p; size_t n, cap; } sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
    if (b->n + n > b->cap) return;   /* the buffer has room for the target size plus one item */
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void puts0(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static void put_cp(sbuf *b, uint32_t c)   /* one code point as UTF-8 (c < 0x110000, no surrogates) */
{
    char u[4];
    size_t k;
    if (c < 0x80) { u[0] = (char)c; k = 1; }
    else if (c < 0x800) { u[0] = (char)(0xC0 | c >> 6); u[1] = (char)(0x80 | (c & 63)); k = 2; }
    else if (c < 0x10000) { u[0] = (char)(0xE0 | c >> 12); u[1] = (char)(0x80 | (c >> 6 & 63)); u[2] = (char)(0x80 | (c & 63)); k = 3; }
    else {
        u[0] = (char)(0xF0 | c >> 18); u[1] = (char)(0x80 | (c >> 12 & 63));
        u[2] = (char)(0x80 | (c >> 6 & 63)); u[3] = (char)(0x80 | (c & 63)); k = 4;
    }
    put(b, u, k);
}

static const char *const kWords[] = {"the", "of", "and", "Elizabeth", "Darcy's", "quantization", "it's", "we'll",
                                     "MXFP4", "x", "I", "don't", "Mr.", "Bennet", "they're", "a", "ZWJ", "über", "naïve"};
#define NWORDS (sizeof kWords / sizeof *kWords)

static void gen(int kind, size_t size, sbuf *b, uint64_t seed)
{
    static const char *const emo[] = {"\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7\xE2\x80\x8D\xF0\x9F\x91\xA6",
                                      "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "\xF0\x9F\x87\xAC\xF0\x9F\x87\xA7",
                                      "\xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88", "\xE2\x9D\xA4\xEF\xB8\x8F", " ", "ok", "\n"};
    static const char *const bad[] = {"\x80", "\xC0\xAF", "\xED\xA0\x80", "\xF8\x88\x80\x80\x80", "\xE2\x82", "\xFF\xFE",
                                      "\xF4\x90\x80\x80", "caf\xE9", " ", "\n", "abc"};
    while (b->n < size) {
        uint64_t r = next(&seed);
        switch (kind) {
        case 0: puts0(b, kWords[r % NWORDS]); if (r >> 40 & 1) puts0(b, (r >> 41 & 1) ? "," : "."); break;   /* no spaces */
        case 1: put(b, "a", 1); break;                                                                    /* one character */
        case 2: puts0(b, (r & 3) ? " " : (r & 4) ? "\n" : "\t"); if (!(r >> 8 & 63)) puts0(b, "x"); break;    /* whitespace runs */
        case 3: put_cp(b, 0x4E00 + (uint32_t)(r % 0x5000)); if (!(r >> 20 & 15)) put_cp(b, (r >> 24 & 1) ? 0x3002 : 0xFF0C); break;
        case 4: puts0(b, emo[r % 8]); break;                                                               /* emoji, ZWJ */
        case 5:                                                                                            /* CRLF lines */
            puts0(b, kWords[r % NWORDS]);
            puts0(b, (r >> 16 & 3) == 0 ? "\r\n" : (r >> 16 & 3) == 1 ? " \r\n\r\n" : (r >> 18 & 15) == 0 ? "<|endoftext|>" : " ");
            break;
        case 6: {                                                                                          /* digit runs */
            size_t run = 1 + (size_t)(r % 5000);
            for (size_t i = 0; i < run && b->n < size; i++) { char d = (char)('0' + next(&seed) % 10); put(b, &d, 1); }
            puts0(b, (r >> 32 & 1) ? " " : (r >> 33 & 1) ? "." : ",");
            break;
        }
        case 7: puts0(b, bad[r % 11]); break;                                                             /* invalid UTF-8 */
        case 8: { char c = (char)(r & 0xff); put(b, &c, 1); break; }                                     /* random bytes */
        case 9: {   /* mixed: prose with short stretches of each kind above, so cut positions lie near them */
            sbuf m = {b->p + b->n, 0, b->cap - b->n};   /* > 8 KiB of room: both stretches fit */
            gen(99, 20 + r % 200, &m, r);
            gen((int)((r >> 40) % 9), m.n + 1 + (r >> 20) % 100, &m, r >> 8);
            b->n += m.n;
            break;
        }
        default:                                                                                           /* prose */
            puts0(b, kWords[r % NWORDS]);
            puts0(b, (r >> 20 & 15) == 0 ? ".\n\n" : (r >> 20 & 15) == 1 ? ", " : (r >> 20 & 15) == 2 ? ". " : " ");
        }
    }
}

int qs_lopt_adversarial(size_t size, qs_lopt_text out[QS_LOPT_NADV], qs_err *e)
{
    static const char *const names[QS_LOPT_NADV] = {"no spaces", "one repeated character", "whitespace runs", "CJK",
                                                    "emoji ZWJ", "CRLF", "digit runs", "invalid UTF-8", "random bytes",
                                                    "mixed"};
    memset(out, 0, QS_LOPT_NADV * sizeof *out);
    for (int k = 0; k < QS_LOPT_NADV; k++) {
        sbuf b = {malloc(size + 8192), 0, size + 8191};
        if (!b.p) { qs_lopt_texts_free(out, k); return qs_fail(e, "out of memory"); }
        gen(k, size, &b, 29 + (uint64_t)k);
        b.p[b.n] = 0;
        out[k] = (qs_lopt_text){names[k], b.p, b.n};
    }
    return 0;
}

int qs_lopt_prose(size_t size, qs_lopt_text *out, qs_err *e)
{
    sbuf b = {malloc(size + 8192), 0, size + 8191};
    if (!b.p) return qs_fail(e, "out of memory");
    gen(99, size, &b, 1);
    b.p[b.n] = 0;
    *out = (qs_lopt_text){"generated prose", b.p, b.n};
    return 0;
}

void qs_lopt_texts_free(qs_lopt_text *t, int n)
{
    for (int i = 0; i < n; i++) { free(t[i].text); t[i].text = NULL; }
}

/* ---- the built-in tokenizer ---- */

/* Merges in GPT-2's byte-to-unicode spelling (Ġ = space, Ċ = newline); every part is a byte symbol or an
** earlier merge's result. */
static const char *const kMerges[][2] = {
    {"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"e", "r"}, {"a", "n"}, {"Ġ", "a"}, {"o", "u"}, {"r", "e"},
    {"o", "n"}, {"Ġ", "s"}, {"e", "d"}, {"n", "d"}, {"Ġ", "w"}, {"in", "g"}, {"Ġ", "h"}, {"Ġ", "o"}, {"Ġ", "b"},
    {"Ġ", "f"}, {"Ġ", "m"}, {"Ġ", "c"}, {"h", "a"}, {"a", "t"}, {"e", "n"}, {"i", "s"}, {"Ġ", "p"}, {"l", "l"},
    {"Ġa", "nd"}, {"Ġ", "i"}, {"Ġo", "f"}, {"Ġt", "o"}, {"Ġ", "Ġ"}, {"ĠĠ", "ĠĠ"}, {"Ċ", "Ċ"}, {"o", "r"},
    {"a", "s"}, {"e", "s"}, {"Ġw", "h"}, {"i", "t"}, {"Ġ", "d"}, {"Ġ", "l"}, {"Ġ", "y"}, {"Ġy", "ou"}, {"Ġ", "n"},
    {"'", "s"}, {"Ġh", "er"}, {"Ġs", "he"}, {"Ġw", "as"}, {"Ġb", "e"}, {"Ġ", "I"}, {"Ġ", "M"}, {"M", "r"},
    {"Ġ", "E"}, {"Ċ", "Ġ"}, {"ĠĠ", "Ġ"}, {"Ġ", "ä"}, {"Ã", "¼"}, {"Ã", "¯"},
};
#define NMERGES (sizeof kMerges / sizeof *kMerges)

typedef struct { char *p; size_t n, cap; int oom; } jbuf;

static void jput(jbuf *j, const char *s, size_t n)
{
    if (j->oom) return;
    if (j->n + n + 1 > j->cap) {
        size_t nc = j->cap ? 2 * j->cap : 65536;
        while (nc < j->n + n + 1) nc *= 2;
        char *np = realloc(j->p, nc);
        if (!np) { j->oom = 1; return; }
        j->p = np; j->cap = nc;
    }
    memcpy(j->p + j->n, s, n);
    j->n += n;
    j->p[j->n] = 0;
}
static void jputs(jbuf *j, const char *s) { jput(j, s, strlen(s)); }
static void jstr(jbuf *j, const char *s)   /* a JSON string of UTF-8 text with '"' and '\' escaped */
{
    jputs(j, "\"");
    for (; *s; s++) jput(j, *s == '"' ? "\\\"" : *s == '\\' ? "\\\\" : s, *s == '"' || *s == '\\' ? 2 : 1);
    jputs(j, "\"");
}

/* GPT-2's byte -> unicode map, as UTF-8 in sym[b]. */
static void byte_symbols(char sym[256][4])
{
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        unsigned c = keep ? (unsigned)b : 256u + (unsigned)extra++;
        if (c < 0x80) { sym[b][0] = (char)c; sym[b][1] = 0; }
        else { sym[b][0] = (char)(0xC0 | c >> 6); sym[b][1] = (char)(0x80 | (c & 63)); sym[b][2] = 0; }
    }
}

int qs_lopt_builtin_vocab(qs_llm_vocab *v, qs_err *e)
{
    char sym[256][4];
    byte_symbols(sym);
    char tok[256 + NMERGES][16];
    int nt = 0;
    for (int b = 0; b < 256; b++) memcpy(tok[nt++], sym[b], 4);
    for (size_t m = 0; m < NMERGES; m++) {
        char s[16] = {0};
        size_t a = strlen(kMerges[m][0]), c = strlen(kMerges[m][1]);
        if (a + c >= sizeof s) return qs_fail(e, "the built-in tokenizer: merge %zu too long", m);
        memcpy(s, kMerges[m][0], a);
        memcpy(s + a, kMerges[m][1], c);
        int seen = 0;
        for (int i = 0; i < nt; i++) seen |= !strcmp(tok[i], s);
        if (!seen) memcpy(tok[nt++], s, sizeof s);
    }
    jbuf j = {0};
    jputs(&j, "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":");
    char num[32];
    snprintf(num, sizeof num, "%d", nt);
    jputs(&j, num);
    jputs(&j, ",\"content\":\"<|endoftext|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
              "\"normalized\":false,\"special\":true}],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Sequence\","
              "\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":true},{\"type\":\"ByteLevel\","
              "\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}]},\"post_processor\":null,"
              "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},"
              "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":null,"
              "\"end_of_word_suffix\":null,\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,\"vocab\":{");
    for (int i = 0; i < nt; i++) {
        if (i) jputs(&j, ",");
        jstr(&j, tok[i]);
        snprintf(num, sizeof num, ":%d", i);
        jputs(&j, num);
    }
    jputs(&j, ",\"<|endoftext|>\":");
    snprintf(num, sizeof num, "%d", nt);
    jputs(&j, num);
    jputs(&j, "},\"merges\":[");
    for (size_t m = 0; m < NMERGES; m++) {
        jputs(&j, m ? ",[" : "[");
        jstr(&j, kMerges[m][0]);
        jputs(&j, ",");
        jstr(&j, kMerges[m][1]);
        jputs(&j, "]");
    }
    jputs(&j, "]}}");
    if (j.oom) { free(j.p); return qs_fail(e, "out of memory"); }
    memset(v, 0, sizeof *v);
    v->bos = v->eos = -1;
    int pp_bos = 0;
    int rc = qs_llm_tok_json_parse(j.p, j.n, 0, "the built-in tokenizer", v, &pp_bos, e);
    free(j.p);
    if (rc) { qs_err_prefix(e, "the built-in tokenizer"); qs_llm_vocab_free(v); }
    return rc;
}
