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
*/
#include "llm_tok_spm.h"

#include <stdlib.h>
#include <string.h>

typedef struct { uint32_t a, len; int prev, next, id; } sym;   /* bytes [a, a+len) of the model text */
typedef struct { float prio; int left, right; uint32_t len; int id; } pair;   /* rank or -score: exact in float */

typedef struct {
    const qs_llm_vocab *v;
    const qs_tok_spm *m;
    const spm_text *x;
    sym *s;
    pair *h;
    size_t hn, hcap;
    int oom;
    char *key;   /* "left right" for a merge-rank lookup */
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
}

int qs_tok_spm_bpe_run(const qs_llm_vocab *v, const qs_tok_spm *m, const spm_text *x, spm_out *o, qs_err *e)
{
    bpe b = {v, m, x, malloc(x->n * sizeof *b.s), NULL, 0, 0, 0, malloc(x->n + 2)};
    if (!b.s || !b.key) { free(b.s); free(b.key); return qs_fail(e, "out of memory"); }
    int ns = 0;
    for (size_t i = 0; i < x->n;) {   /* one symbol per character */
        size_t k = qs_tok_spm_charlen(x->t, x->n, i);
        int id = lookup(&b, x->t + i, k);
        if (m->src != SPM_JSON && !qs_tok_spm_candidate(v, m, id)) id = -1;
        b.s[ns] = (sym){(uint32_t)i, (uint32_t)k, ns - 1, -1, id};
        if (ns) b.s[ns - 1].next = ns;
        ns++;
        i += k;
    }
    for (int i = 0; i + 1 < ns; i++) offer(&b, i);
    while (b.hn && !b.oom) {
        pair p = pop(&b);
        sym *L = &b.s[p.left], *R = &b.s[p.right];
        if (!L->len || !R->len || L->next != p.right || L->len + R->len != p.len) continue;   /* stale */
        L->len += R->len;
        L->id = p.id;
        R->len = 0;
        L->next = R->next;
        if (L->next >= 0) b.s[L->next].prev = p.left;
        offer(&b, L->prev);
        offer(&b, p.left);
    }
    int rc = b.oom ? qs_fail(e, "out of memory") : 0;
    for (int i = 0; i >= 0 && !rc; i = b.s[i].next) {
        sym *s = &b.s[i];
        if (s->id >= 0) rc = qs_tok_spm_put(m, o, x, s->id, s->a, s->a + s->len, e);
        else rc = qs_tok_spm_unknown(v, m, o, x, s->a, s->a + s->len, e);
    }
    free(b.s); free(b.h); free(b.key);
    return rc;
}
