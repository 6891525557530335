/*
** LoPT (llm_lopt.h), as reconstructed in docs/tokenize.md: the text is cut into overlapping chunks at
** fixed nominal offsets, the chunks are tokenized on qscope's pool with byte spans, and neighbours are
** merged at an anchor in their overlap.  What makes the merge provably lossless here is where an
** anchor may lie: between two *cut positions* p1 < p2 (safe_at below: an ASCII letter or . , ; : ! ?,
** then one space, then an ASCII letter), which split the tokenization of every window that contains
** their neighbours, for the tokenizers eligible() admits.  The anchor is the run of tokens between
** p1 and p2; both chunks must give it identically (ids and spans) and no token of either may cross
** p1 or p2.  Under the proof that always holds: the comparison is a run-time check of the analysis,
** and a difference sends the whole text through the sequential tokenizer.
**
** Dynamic chunk length: an overlap without two cut positions is doubled until it has them (at most
** to the chunk length); a boundary still without them is dropped, so the chunk grows into its
** neighbour.  Everything is decided from the bytes before any tokenization, so the chunks, and the
** result, never depend on the number of threads.
*/
#include "llm_lopt.h"

#include <jansson.h>
#include <limits.h>
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

/* ---------------------------------------------------------------- which tokenizers the proof covers */

/* One pre-tokenizer step: NULL when proved (*split set when it splits at every cut position), else why not. */
static const char *step_why(json_t *j, int depth, int *split)
{
    const char *t = json_string_value(json_object_get(j, "type"));
    if (!t || depth > 16) return "its pre-tokenizer is not one LoPT's cut rule is proved for";
    if (!strcmp(t, "Sequence")) {
        json_t *a = json_object_get(j, "pretokenizers"), *s;
        size_t i;
        json_array_foreach(a, i, s) {
            const char *w = step_why(s, depth + 1, split);
            if (w) return w;
        }
        return NULL;
    }
    if (!strcmp(t, "Digits")) return NULL;   /* splits around each \p{N} only: commutes with cutting */
    if (!strcmp(t, "ByteLevel")) {           /* GPT-2's pattern; a prefix space never goes before a cut */
        json_t *u = json_object_get(j, "use_regex");
        if (!u || json_is_true(u)) *split = 1;
        return NULL;
    }
    if (!strcmp(t, "Split")) {
        const char *rx = json_string_value(json_object_get(json_object_get(j, "pattern"), "Regex"));
        const char *b = json_string_value(json_object_get(j, "behavior"));
        for (size_t i = 0; rx && b && !strcmp(b, "Isolated") && !json_is_true(json_object_get(j, "invert")) &&
                           i < sizeof kProved / sizeof *kProved; i++)
            if (!strcmp(rx, kProved[i])) { *split = 1; return NULL; }
        return "its pre-tokenizer has a Split pattern LoPT's cut rule is not proved for";
    }
    return "its pre-tokenizer has a step LoPT's cut rule is not proved for";
}

/* NULL when the cut rule is proved for this tokenizer (docs/tokenize.md), else why the text goes
** through the sequential tokenizer. */
static const char *eligible(const qs_llm_vocab *v)
{
    if (v->model != QS_TOK_BPE || !v->byte_level) return "only byte-level BPE is covered by LoPT's proof";
    if (v->norm_json && strcmp(v->norm_json, "null")) return "the tokenizer has a normalizer";
    for (int i = 0; i < v->n; i++) {
        int added = (v->type && (v->type[i] == 3 || v->type[i] == 4)) || (v->aflags && (v->aflags[i] & QS_TOK_ADDED));
        if (!added) continue;
        if (v->aflags && (v->aflags[i] & (QS_TOK_LSTRIP | QS_TOK_RSTRIP | QS_TOK_SINGLE_WORD)))
            return "an added token strips whitespace or matches single words only";
        if (strchr(v->text + v->off[i], ' ')) return "an added token contains a space";
    }
    if (!v->pre_json) {
        for (size_t i = 0; i < sizeof kFamilies / sizeof *kFamilies; i++)
            if (!strcmp(v->pre, kFamilies[i])) return NULL;
        return "its pre-tokenizer family is not one LoPT's cut rule is proved for";
    }
    json_t *j = json_loads(v->pre_json, 0, NULL);
    int split = 0;
    const char *why = j ? step_why(j, 0, &split) : "its pre-tokenizer is not valid JSON";
    json_decref(j);
    if (!why && !split) why = "its pre-tokenizer has no pattern that splits at LoPT's cut positions";
    return why;
}

/* ---------------------------------------------------------------- cut positions and the plan */

static int ascii_letter(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }

/* p is a cut position: s[p-1] an ASCII letter or . , ; : ! ?, s[p] a space, s[p+1] an ASCII letter. */
static int safe_at(const unsigned char *s, size_t n, size_t p)
{
    if (p < 1 || p + 1 >= n || s[p] != ' ' || !ascii_letter(s[p + 1])) return 0;
    unsigned char c = s[p - 1];
    return ascii_letter(c) || c == '.' || c == ',' || c == ';' || c == ':' || c == '!' || c == '?';
}

/* The first cut position in [from, to), or to. */
static size_t next_safe(const unsigned char *s, size_t n, size_t from, size_t to)
{
    for (size_t p = from; p < to; p++) {
        const unsigned char *q = memchr(s + p, ' ', to - p);
        if (!q) return to;
        p = (size_t)(q - s);
        if (safe_at(s, n, p)) return p;
    }
    return to;
}

/* A boundary between two chunks: the right one starts at m, the left one ends at end; the anchor is the
** run of tokens in [p1, p2). */
typedef struct { size_t m, end, p1, p2; } bound;

/* Boundaries at the nominal offsets k * chunk (k >= 1), each with the overlap widened (doubled) until it
** holds two cut positions p1 < p2 with m < p1 and p2 + 2 <= end; at most chunk - 1 bytes of overlap.
** Returns the number of boundaries in b (room for len / chunk). */
static size_t plan(const unsigned char *s, size_t n, size_t chunk, size_t overlap, bound *b, size_t *regrown)
{
    size_t nb = 0;
    for (size_t m = chunk; m < n; m += chunk) {
        size_t lim = m + chunk - 1 < n ? m + chunk - 1 : n;   /* the widest overlap's end */
        size_t p1 = next_safe(s, n, m + 1, lim);
        size_t p2 = p1 < lim ? next_safe(s, n, p1 + 1, lim) : lim;
        if (p2 + 2 > lim) { ++*regrown; continue; }   /* no anchor possible: the left chunk grows */
        size_t ov = overlap;
        while (m + ov < p2 + 2) { ov *= 2; ++*regrown; }
        if (m + ov > lim) ov = lim - m;
        b[nb++] = (bound){m, m + ov, p1, p2};
    }
    return nb;
}

/* ---------------------------------------------------------------- the sequential tokenizer */

static int sequential(const qs_llm_vocab *v, const char *name, const char *text, size_t len, int32_t **ids,
                      uint32_t **offs, size_t *n, qs_err *e)
{
    size_t cap = len / 3 + 64;
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

/* One chunk's tokens with start in [lo, hi) (lo = its anchor with the left neighbour, hi = the end of
** the anchor with the right one; the segment it gives is [lo, cut)), absolute spans. */
typedef struct {
    size_t a, b;          /* the window tokenized */
    size_t lo, cut, hi;
    int32_t *ids;
    uint32_t *off;
    size_t n, ncut;       /* tokens kept, those before cut */
    int bad;              /* 1: tokenizing failed or a token crosses lo, cut or hi */
} lchunk;

typedef struct {
    const qs_llm_vocab *v;
    const char *text;
    lchunk *c;
    struct { int32_t *ids; uint32_t *off; size_t cap; } slot[QS_POOL_MAX];
} job;

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

static void chunk_task(void *ctx, size_t task, int slot)
{
    job *J = ctx;
    lchunk *c = &J->c[task];
    size_t w = c->b - c->a, need = 2 * w + 16;   /* a token has >= 1 byte of its piece (+1 prefix space) */
    if (need > INT_MAX) { c->bad = 1; return; }
    if (J->slot[slot].cap < need) {
        free(J->slot[slot].ids); free(J->slot[slot].off);
        J->slot[slot].ids = malloc(need * sizeof(int32_t));
        J->slot[slot].off = malloc(2 * need * sizeof(uint32_t));
        J->slot[slot].cap = J->slot[slot].ids && J->slot[slot].off ? need : 0;
        if (!J->slot[slot].cap) { c->bad = 1; return; }
    }
    int32_t *ids = J->slot[slot].ids;
    uint32_t *off = J->slot[slot].off;
    qs_err e = {{0}};
    int k = qs_llm_tokenize_offs(J->v, NULL, J->text + c->a, w, ids, off, (int)need, &e);
    if (k < 0) { c->bad = 1; return; }
    for (int i = 0; i < 2 * k; i++) off[i] += (uint32_t)c->a;
    size_t i0 = split_at(off, (size_t)k, c->lo, &c->bad), i1 = split_at(off, (size_t)k, c->cut, &c->bad);
    size_t i2 = split_at(off, (size_t)k, c->hi, &c->bad);
    c->n = i2 - i0;
    c->ncut = i1 - i0;
    c->ids = malloc((c->n ? c->n : 1) * sizeof *c->ids);
    c->off = malloc((c->n ? 2 * c->n : 1) * sizeof *c->off);
    if (!c->ids || !c->off) { c->bad = 1; return; }
    memcpy(c->ids, ids + i0, c->n * sizeof *c->ids);
    memcpy(c->off, off + 2 * i0, 2 * c->n * sizeof *c->off);
}

/* The anchor check of the boundary between chunks L and R: the same tokens in [cut, hi) of L and at
** the start of R (R's segment starts at L's cut). */
static int anchor_ok(const lchunk *L, const lchunk *R)
{
    size_t k = L->n - L->ncut, rk = 0;
    while (rk < R->n && R->off[2 * rk] < L->hi) rk++;
    if (!k || k != rk) return 0;
    return !memcmp(L->ids + L->ncut, R->ids, k * sizeof *L->ids) && !memcmp(L->off + 2 * L->ncut, R->off, 2 * k * sizeof *L->off);
}

/* Tokenize the planned chunks in parallel and concatenate their segments.  Returns 0, 1 when the
** result cannot be trusted (a chunk failed, an anchor differs: the caller goes sequential), -1 out
** of memory. */
static int parallel(const qs_llm_vocab *v, const char *text, size_t len, const bound *b, size_t nb, int threads,
                    int32_t **ids, uint32_t **offs, size_t *n, qs_lopt_stats *st)
{
    lchunk *c = calloc(nb + 1, sizeof *c);
    job *J = calloc(1, sizeof *J);
    int rc = -1;
    if (!c || !J) goto out;
    for (size_t i = 0; i <= nb; i++) {
        c[i].a = i ? b[i - 1].m : 0;
        c[i].b = i < nb ? b[i].end : len;
        c[i].lo = i ? b[i - 1].p1 : 0;
        c[i].cut = i < nb ? b[i].p1 : len;
        c[i].hi = i < nb ? b[i].p2 : len;
    }
    J->v = v; J->text = text; J->c = c;
    qs_pool_for(threads, nb + 1, chunk_task, J);
    rc = 1;
    size_t total = 0;
    for (size_t i = 0; i <= nb; i++) {
        if (c[i].bad || (i < nb && !c[i + 1].bad && !anchor_ok(&c[i], &c[i + 1]))) goto out;
        total += c[i].ncut;
    }
    rc = -1;
    if (!(*ids = malloc((total ? total : 1) * sizeof **ids)) || (offs && !(*offs = malloc((total ? 2 * total : 1) * sizeof **offs))))
        goto out;
    size_t o = 0;
    for (size_t i = 0; i <= nb; i++) {
        memcpy(*ids + o, c[i].ids, c[i].ncut * sizeof **ids);
        if (offs) memcpy(*offs + 2 * o, c[i].off, 2 * c[i].ncut * sizeof **offs);
        o += c[i].ncut;
    }
    *n = total;
    if (st) { st->chunks = nb + 1; st->anchors = nb; }
    rc = 0;
out:
    for (size_t i = 0; c && i <= nb; i++) { free(c[i].ids); free(c[i].off); }
    for (int s = 0; J && s < QS_POOL_MAX; s++) { free(J->slot[s].ids); free(J->slot[s].off); }
    free(c); free(J);
    return rc;
}

int qs_lopt_tokenize(const qs_llm_vocab *v, const char *name, const char *text, size_t len, const qs_lopt_opts *o,
                     int32_t **ids, uint32_t **offs, size_t *n, qs_lopt_stats *st, qs_err *e)
{
    *ids = NULL; *n = 0;
    if (offs) *offs = NULL;
    if (st) memset(st, 0, sizeof *st);
    int threads = o ? o->threads : 0;
    size_t chunk = o && o->chunk ? o->chunk : QS_LOPT_CHUNK, overlap = o && o->overlap ? o->overlap : QS_LOPT_OVERLAP;
    if (chunk < 8) chunk = 8;
    if (overlap >= chunk) overlap = chunk - 1;
    const char *why = NULL;
    if (threads != 1 && len > chunk && len < UINT32_MAX && !(why = eligible(v))) {
        size_t regrown = 0;
        bound *b = malloc((len / chunk + 1) * sizeof *b);
        if (!b) return qs_fail(e, "out of memory for the chunks of %s", name ? name : "the text");
        size_t nb = plan((const unsigned char *)text, len, chunk, overlap, b, &regrown);
        int rc = nb ? parallel(v, text, len, b, nb, threads, ids, offs, n, st) : 1;
        free(b);
        if (st) st->regrown = regrown;
        if (rc == 0) return 0;
        free(*ids); *ids = NULL;
        if (offs) { free(*offs); *offs = NULL; }
        if (rc < 0) return qs_fail(e, "out of memory for the tokens of %s", name ? name : "the text");
        why = nb ? "a chunk failed or an anchor differed" : "no two cut positions in any overlap";
    }
    if (st && threads != 1 && len > chunk) { st->fallback = 1; st->why = why; }
    if (st) st->chunks = 1;
    if (sequential(v, name, text, len, ids, offs, n, e) == 0) return 0;
    free(*ids); *ids = NULL;
    if (offs) { free(*offs); *offs = NULL; }
    return -1;
}
