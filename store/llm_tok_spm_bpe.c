/*
** SentencePiece-style BPE (llm_tok_spm.h): characters are the first symbols (not bytes), adjacent
** symbols merge best-first while their concatenation is a piece, and what is left is looked up:
**   - tokenizer.json: the merge list ranks the pairs (lowest rank first, leftmost among equals, as
**     tokenizers' Word::merge_all); a character that is not in the vocabulary becomes its <0xXX>
**     tokens (byte_fallback) or the unknown token (consecutive ones fused with fuse_unk), or is
**     dropped when the model has neither, as tokenizers' merge_word does;
**   - tokenizer.model and GGUF "llama": the merged piece's score ranks the pairs (highest first,
**     leftmost among equals, as sentencepiece's bpe_model.cc and llama.cpp's llm_tokenizer_spm); a
**     symbol that is not a piece is unknown, spelled with <0xXX> tokens under byte fallback.
** Pairs wait in a binary heap; an entry whose symbols changed since it was pushed is skipped.
** When every "▁" inside a piece follows another "▁" (trained SentencePiece vocabularies split by
** whitespace; runs like "▁▁▁▁" are allowed), no merge can cross the start of a run of "▁": the text
** is merged segment by segment, each segment's result cached for the call, with the same result
** (merges in one segment never touch another, and ties stay leftmost within each).
*/
#include "llm_tok_spm.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct { uint32_t a, len; int prev, next, id; } sym;   /* bytes [a, a+len) of the model text */
typedef struct { float prio; int left, right; uint32_t len; int id; } pair;   /* rank or -score: exact in float */

typedef struct { int id; uint32_t a, b; } item;                       /* a final symbol of a segment */
typedef struct { uint64_t h; uint32_t koff, klen, ioff, icnt; } centry;   /* segment -> items */

enum { CACHE_MAX = 256 };   /* longer segments are not cached */

typedef struct {
    const qs_llm_vocab *v;
    const qs_tok_spm *m;
    const spm_text *x;
    sym *s;
    pair *h;
    size_t hn, hcap;
    int oom;
    char *key;   /* "left right" for a merge-rank lookup */
    item *out;
    size_t on, ocap;
    centry *ct;
    size_t ccap, cn;
    int32_t *rev;        /* [v->n] UNUSED piece -> bytes of the left part of the last pair offered for it */
    uint32_t *stk;       /* resegmentation stack: (start, length) pairs */
} bpe;

static int before(const pair *p, const pair *q) { return p->prio < q->prio || (p->prio == q->prio && p->left < q->left); }

static void push(bpe *b, pair p)
{
    if (b->hn == b->hcap) {   /* grown as needed: the pairs that may merge are usually far fewer than the bytes */
        size_t nc = b->hcap ? 2 * b->hcap : 64;
        pair *nh = realloc(b->h, nc * sizeof *nh);
        if (!nh) { b->oom = 1; return; }
        b->h = nh; b->hcap = nc;
    }
    size_t i = b->hn++;
    b->h[i] = p;
    while (i && before(&b->h[i], &b->h[(i - 1) / 2])) {
        pair t = b->h[i]; b->h[i] = b->h[(i - 1) / 2]; b->h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static pair pop(bpe *b)
{
    pair top = b->h[0];
    b->h[0] = b->h[--b->hn];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, k = i;
        if (l < b->hn && before(&b->h[l], &b->h[k])) k = l;
        if (r < b->hn && before(&b->h[r], &b->h[k])) k = r;
        if (k == i) break;
        pair t = b->h[i]; b->h[i] = b->h[k]; b->h[k] = t;
        i = k;
    }
    return top;
}

static int lookup(const bpe *b, const char *s, size_t n)
{
    const qs_llm_vocab *v = b->v;
    return qs_llm_hash_find(v->text, v->off, v->vhash, v->vhcap, s, n);
}

/* The pair (l, l.next), if it may merge: onto the heap. */
static void offer(bpe *b, int l)
{
    if (l < 0) return;
    int r = b->s[l].next;
    if (r < 0 || b->s[l].id < 0 || b->s[r].id < 0) return;   /* unknown characters never merge */
    const char *t = b->x->t;
    sym *L = &b->s[l], *R = &b->s[r];
    int id = lookup(b, t + L->a, L->len + R->len);   /* adjacent in the model text: one string */
    if (id < 0) return;
    float prio;
    if (b->m->by_score) {
        if (!qs_tok_spm_candidate(b->v, b->m, id)) return;
        prio = (float)-b->v->score[id];
    } else {
        memcpy(b->key, t + L->a, L->len);
        b->key[L->len] = ' ';
        memcpy(b->key + L->len + 1, t + R->a, R->len);
        const qs_llm_vocab *v = b->v;
        int rank = v->mhash ? qs_llm_hash_find(v->mtext, v->moff, v->mhash, v->mhcap, b->key, L->len + 1 + R->len) : -1;
        if (rank < 0) return;
        prio = (float)rank;
    }
    push(b, (pair){prio, l, r, L->len + R->len, id});
    if (b->rev && b->v->type[id] == 5) b->rev[id] = (int32_t)L->len;   /* sentencepiece's rev_merge: the last offer */
}

static int add_item(bpe *b, int id, uint32_t a, uint32_t z, qs_err *e)
{
    if (b->on == b->ocap) {
        size_t nc = b->ocap ? 2 * b->ocap : 256;
        item *no = realloc(b->out, nc * sizeof *no);
        if (!no) return qs_fail(e, "out of memory");
        b->out = no; b->ocap = nc;
    }
    b->out[b->on++] = (item){id, a, z};
    return 0;
}

/* A final symbol (model-text bytes [a, a + len)) -> items, relative to a0; an UNUSED piece is split
** again into the pair last offered for it, recursively (sentencepiece's resegment), with a stack. */
static int final_symbol(bpe *b, uint32_t a, uint32_t len, int id, uint32_t a0, qs_err *e)
{
    if (!b->rev || id < 0 || b->v->type[id] != 5) return add_item(b, id, a - a0, a + len - a0, e);
    size_t sp = 0;
    b->stk[sp++] = a; b->stk[sp++] = len;
    while (sp) {
        uint32_t l = b->stk[--sp], s = b->stk[--sp];
        int k = lookup(b, b->x->t + s, l);
        int32_t cut = k >= 0 && b->v->type[k] == 5 ? b->rev[k] : -1;
        if (cut <= 0 || (uint32_t)cut >= l) {   /* an UNUSED piece never offered (a character): unknown */
            if (add_item(b, k >= 0 && b->v->type[k] == 5 ? -1 : k, s - a0, s + l - a0, e)) return -1;
            continue;
        }
        b->stk[sp++] = s + (uint32_t)cut; b->stk[sp++] = l - (uint32_t)cut;   /* right, then left on top */
        b->stk[sp++] = s; b->stk[sp++] = (uint32_t)cut;
    }
    return 0;
}

/* BPE on model-text bytes [a0, a1): the symbols left, in order, appended to b->out as (id or -1,
** start, end) relative to a0. */
static int merge_range(bpe *b, size_t a0, size_t a1, qs_err *e)
{
    const spm_text *x = b->x;
    int ns = 0;
    for (size_t i = a0; i < a1;) {   /* one symbol per character */
        size_t k = qs_tok_spm_charlen(x->t, a1, i);
        int id = lookup(b, x->t + i, k);
        if (b->m->src != SPM_JSON && !qs_tok_spm_candidate(b->v, b->m, id)) id = -1;
        b->s[ns] = (sym){(uint32_t)i, (uint32_t)k, ns - 1, -1, id};
        if (ns) b->s[ns - 1].next = ns;
        ns++;
        i += k;
    }
    b->hn = 0;
    for (int i = 0; i + 1 < ns; i++) offer(b, i);
    while (b->hn && !b->oom) {
        pair p = pop(b);
        sym *L = &b->s[p.left], *R = &b->s[p.right];
        if (!L->len || !R->len || L->next != p.right || L->len + R->len != p.len) continue;   /* stale */
        L->len += R->len;
        L->id = p.id;
        R->len = 0;
        L->next = R->next;
        if (L->next >= 0) b->s[L->next].prev = p.left;
        offer(b, L->prev);
        offer(b, p.left);
    }
    if (b->oom) return qs_fail(e, "out of memory");
    for (int i = 0; ns && i >= 0; i = b->s[i].next)
        if (final_symbol(b, b->s[i].a, b->s[i].len, b->s[i].id, (uint32_t)a0, e)) return -1;
    return 0;
}

/* A segment's results, cached for this call: key = its bytes (x->t[koff, koff + klen)). */
static int cached(bpe *b, size_t a0, size_t a1, size_t *i0, size_t *i1, qs_err *e)
{
    size_t n = a1 - a0;
    uint64_t h = XXH3_64bits(b->x->t + a0, n);
    size_t i = 0;
    if (n <= CACHE_MAX && b->ccap)
        for (i = h & (b->ccap - 1); b->ct[i].klen; i = (i + 1) & (b->ccap - 1)) {
            centry *c = &b->ct[i];
            if (c->h == h && c->klen == n && !memcmp(b->x->t + c->koff, b->x->t + a0, n)) {
                *i0 = c->ioff; *i1 = c->ioff + c->icnt;
                return 0;
            }
        }
    *i0 = b->on;
    if (merge_range(b, a0, a1, e)) return -1;
    *i1 = b->on;
    if (n > CACHE_MAX) return 0;
    if (2 * (b->cn + 1) > b->ccap) {   /* grow: rehash */
        size_t nc = b->ccap ? 2 * b->ccap : 1024;
        centry *nt = calloc(nc, sizeof *nt);
        if (!nt) return qs_fail(e, "out of memory");
        for (size_t k = 0; k < b->ccap; k++)
            if (b->ct[k].klen) {
                size_t j = b->ct[k].h & (nc - 1);
                while (nt[j].klen) j = (j + 1) & (nc - 1);
                nt[j] = b->ct[k];
            }
        free(b->ct);
        b->ct = nt; b->ccap = nc;
        for (i = h & (nc - 1); b->ct[i].klen; i = (i + 1) & (nc - 1)) {}
    }
    b->ct[i] = (centry){h, (uint32_t)a0, (uint32_t)n, (uint32_t)*i0, (uint32_t)(*i1 - *i0)};
    b->cn++;
    return 0;
}

int qs_tok_spm_bpe_run(const qs_llm_vocab *v, const qs_tok_spm *m, const spm_text *x, spm_out *o, qs_err *e)
{
    bpe b;
    memset(&b, 0, sizeof b);
    b.v = v; b.m = m; b.x = x;
    b.s = malloc(x->n * sizeof *b.s);
    b.key = malloc(x->n + 2);
    if (m->has_unused) {
        b.rev = malloc((size_t)v->n * sizeof *b.rev);
        b.stk = malloc((2 * x->n + 2) * sizeof *b.stk);   /* at most one pending part per byte */
        if (b.rev) for (int i = 0; i < v->n; i++) b.rev[i] = -1;
    }
    int rc = b.s && b.key && (!m->has_unused || (b.rev && b.stk)) ? 0 : qs_fail(e, "out of memory");
    /* no merge crosses the start of a run of "▁" when every "▁" inside a piece follows another:
    ** each segment alone, cached */
    for (size_t a0 = 0; a0 < x->n && !rc;) {
        size_t a1 = x->n;
        if (m->seg_ok)
            for (size_t p = a0 + 1; p + 3 <= x->n; p++)
                if (!memcmp(x->t + p, "\xE2\x96\x81", 3) && (p < 3 || memcmp(x->t + p - 3, "\xE2\x96\x81", 3))) {
                    a1 = p;
                    break;
                }
        size_t i0, i1;
        if ((rc = cached(&b, a0, a1, &i0, &i1, e))) break;
        for (size_t k = i0; k < i1 && !rc; k++) {
            const item *it = &b.out[k];
            rc = it->id >= 0 ? qs_tok_spm_put(m, o, x, it->id, a0 + it->a, a0 + it->b, e)
                             : qs_tok_spm_unknown(v, m, o, x, a0 + it->a, a0 + it->b, e);
        }
        if (a1 - a0 > CACHE_MAX) b.on = i0;   /* not cached: its items are spent */
        a0 = a1;
    }
    free(b.s); free(b.h); free(b.key); free(b.out); free(b.ct); free(b.rev); free(b.stk);
    return rc;
}
