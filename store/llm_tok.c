/*
** Byte-level BPE tokenization the way Hugging Face `tokenizers` does it (see qs_llm_tokenize in
** llm_load.h): added tokens first (leftmost-longest, like its Aho-Corasick matcher), then the
** pre-tokenizer of llm_pretok.c on each stretch between them, then per piece: bytes -> GPT-2
** byte-to-unicode spelling, ranked merges (lowest rank first, leftmost among equals, with a heap as
** tokenizers' Word::merge_all), vocabulary ids.  Results are cached per piece.  Checked against
** `tokenizers` by tests/llm/make_tok_vectors.py (tests/fixtures/llm/tok_*.json).
**
** What does not depend on the text is built once, when the vocabulary is loaded (qs_llm_tok_prepare):
** the compiled pre-tokenizer, so that a bad one is reported against tokenizer.json or the GGUF, and a
** trie of the added tokens, so that matching them costs the length of the match, not the number of
** added tokens.
*/
#include "llm_tok.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include <xxhash.h>

#include "llm_pretok.h"
#include "llm_tok_model.h"
#include "llm_tok_norm_int.h"
#include "llm_tok_spm.h"

enum { CACHE_MAX_PIECE = 256 };

/* GPT-2 bytes_to_unicode: the code point that spells byte b */
static unsigned byte_cp(unsigned b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
    return 256 + n;
}

typedef struct { uint64_t h; uint32_t koff, klen, ioff, icnt; } centry;

typedef struct {
    const qs_llm_vocab *v;
    const qs_tok_model *model;  /* the model's state (not byte-level BPE), or NULL */
    int ignore_merges;
    int32_t *out;
    uint32_t *off;             /* token spans in the text (2 per token), or NULL */
    int cap, n;
    /* where the pre-tokenizer's coordinates are: text offset seg + position, or through the normalized
    ** stretch's map (nmap[2i], nmap[2i+1]: source span of normalized byte i, relative to seg) */
    size_t seg;
    const uint32_t *nmap;
    size_t nlen, nsrc;         /* normalized bytes, and the bytes of the stretch they came from */
    qs_err *e;
    const char *name, *source; /* the text and the tokenizer's file, for messages */
    size_t at;                 /* offset of the current stretch, for messages */
    char spell[256][3];        /* byte -> its UTF-8 spelling (1 or 2 bytes) + NUL */
    int byte_id[256];          /* byte -> id of that spelling, or -1 */
    /* piece cache: raw bytes -> ids, with each id's span in the piece (rsp[2k], rsp[2k+1]) */
    centry *ct;
    size_t ccap, cn;
    char *keys; size_t klen, kcap;
    int32_t *ids; size_t ilen, icap;
    uint32_t *rsp; size_t rspcap;
    /* BPE scratch */
    char *s; size_t scap;
    struct sym { uint32_t a, len, ra, rb; int prev, next; } *sym; size_t symcap;   /* ra, rb: raw bytes */
    struct hent { int rank, pos; } *heap; size_t hn, hcap;
    char *key; size_t keycap;
    struct qs_llm_tok_shared *sh;   /* a piece cache shared with other states (LoPT's slots), or NULL */
    struct sblock *blk;        /* the block of sh this state publishes into, or NULL */
    /* tokenize()'s scratch, kept with the state: a pre-tokenizer scan reserves a JIT stack (an mmap
    ** of megabytes), and unmapping it on every call of LoPT's chunks and anchor windows interrupted
    ** the other core (a TLB shootdown) each time */
    qs_pretok_scan *scan;      /* for the prepared tokenizer the state is bound to, or NULL */
    int cont;                  /* the text continues a stretch (qs_llm_tok_state_continues) */
    int cont_piece;            /* the next piece starts such a stretch (a model without a pre-tokenizer) */
    qs_tok_norm_buf nb;
    struct splits { struct split { int id; size_t a, b; } *v; size_t n, cap; } raw, sub;   /* id -1: text between added tokens */
} tk;

/* ---------------------------------------------------------------- the shared piece cache */

/* One piece's ids and spans, immutable once published: key bytes, then (4-aligned) ids and spans. */
typedef struct { uint64_t h; uint32_t n, cnt; } sent;

/* A fixed open-addressing table of published entries: a slot goes from NULL to an entry once (a
** compare-and-swap) and never changes again, so lookups need no lock.  At half full nothing more is
** published (the states' own caches take the rest).  About one slot per 64 bytes of text (English
** prose has one distinct piece per ~240 bytes over megabytes): a small table stays in cache.
** Entries are carved from blocks, each block filled by one state (no malloc per piece, and a piece's
** entry next to the ones published before it); the blocks are freed with the table. */
enum { SHARED_MIN = 1 << 10, SHARED_MAX = 1 << 18, SHARED_BYTES_PER_SLOT = 64, BLOCK = 64 << 10 };

typedef struct sblock { struct sblock *next; size_t used, cap; } sblock;   /* cap bytes follow */

struct qs_llm_tok_shared {
    pthread_mutex_t mu;        /* for the binding below */
    const qs_llm_vocab *v;     /* the vocabulary and build it belongs to (first user) */
    unsigned long long gen;
    sent *_Atomic *tab;        /* [cap] */
    size_t cap;                /* a power of two */
    _Atomic size_t cn;
    sblock *_Atomic blocks;    /* every state's blocks */
};

static size_t sent_ids(uint32_t n) { return sizeof(sent) + ((n + 3u) & ~3u); }

qs_llm_tok_shared *qs_llm_tok_shared_new(size_t bytes)
{
    qs_llm_tok_shared *sh = calloc(1, sizeof *sh);
    if (!sh) return NULL;
    for (sh->cap = SHARED_MIN; sh->cap < SHARED_MAX && sh->cap < bytes / SHARED_BYTES_PER_SLOT; sh->cap *= 2) {}
    if (!(sh->tab = calloc(sh->cap, sizeof *sh->tab))) { free(sh); return NULL; }
    if (sh && pthread_mutex_init(&sh->mu, NULL)) { free(sh->tab); free(sh); return NULL; }
    return sh;
}

void qs_llm_tok_shared_free(qs_llm_tok_shared *sh)
{
    if (!sh) return;
    for (sblock *b = atomic_load_explicit(&sh->blocks, memory_order_relaxed), *nb; b; b = nb) {
        nb = b->next;
        free(b);
    }
    free(sh->tab);
    pthread_mutex_destroy(&sh->mu);
    free(sh);
}

static int sent_is(const sent *x, uint64_t h, const char *s, size_t n)
{
    return x->h == h && x->n == n && !memcmp(x + 1, s, n);
}

/* The published entry for piece s[0..n) (hash h), or NULL. */
static const sent *shared_find(qs_llm_tok_shared *sh, uint64_t h, const char *s, size_t n)
{
    for (size_t i = h & (sh->cap - 1);; i = (i + 1) & (sh->cap - 1)) {
        const sent *x = atomic_load_explicit(&sh->tab[i], memory_order_acquire);
        if (!x) return NULL;
        if (sent_is(x, h, s, n)) return x;
    }
}

/* size bytes (a multiple of 8) in t's current block of sh, or a new block; NULL when out of memory. */
static sent *sent_alloc(qs_llm_tok_shared *sh, sblock **cur, size_t size)
{
    sblock *b = *cur;
    if (!b || b->cap - b->used < size) {
        size_t cap = BLOCK - sizeof *b > size ? BLOCK - sizeof *b : size;
        if (!(b = malloc(sizeof *b + cap))) return NULL;
        b->used = 0; b->cap = cap;
        b->next = atomic_load_explicit(&sh->blocks, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&sh->blocks, &b->next, b, memory_order_release, memory_order_relaxed)) {}
        *cur = b;
    }
    sent *x = (sent *)((char *)(b + 1) + b->used);
    b->used += size;
    return x;
}

/* Publish a piece's ids and spans (a copy in the state's block).  Returns 0 when the table has it, -1
** when full or out of memory (the caller keeps the piece in its own cache). */
static int shared_put(qs_llm_tok_shared *sh, sblock **blk, uint64_t h, const char *s, size_t n, const int32_t *ids,
                      const uint32_t *sp, size_t cnt)
{
    if (atomic_load_explicit(&sh->cn, memory_order_relaxed) >= sh->cap / 2) return -1;
    size_t at = sent_ids((uint32_t)n), size = (at + cnt * 3 * sizeof(uint32_t) + 7) & ~(size_t)7;
    sent *x = sent_alloc(sh, blk, size);
    if (!x) return -1;
    *x = (sent){h, (uint32_t)n, (uint32_t)cnt};
    memcpy(x + 1, s, n);
    if (cnt) {   /* a piece with no ids (every byte unknown) has no buffers to copy from */
        memcpy((char *)x + at, ids, cnt * sizeof *ids);
        memcpy((char *)x + at + cnt * sizeof *ids, sp, 2 * cnt * sizeof *sp);
    }
    for (size_t i = h & (sh->cap - 1);; i = (i + 1) & (sh->cap - 1)) {
        sent *cur = NULL;
        if (atomic_compare_exchange_strong_explicit(&sh->tab[i], &cur, x, memory_order_acq_rel, memory_order_acquire)) {
            atomic_fetch_add_explicit(&sh->cn, 1, memory_order_relaxed);
            return 0;
        }
        if (sent_is(cur, h, s, n)) { (*blk)->used -= size; return 0; }   /* another state was first: x unused */
    }
}

static int reserve(void **p, size_t *cap, size_t need, size_t el)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *n = realloc(*p, c * el);
    if (!n) return -1;
    *p = n; *cap = c;
    return 0;
}

/* Text span of positions [pa, pb) in the pre-tokenizer's coordinates. */
static void span_of(const tk *t, size_t pa, size_t pb, uint32_t *a, uint32_t *b)
{
    if (!t->nmap) { *a = (uint32_t)(t->seg + pa); *b = (uint32_t)(t->seg + pb); return; }
    if (pb > pa) {
        *a = (uint32_t)(t->seg + t->nmap[2 * pa]);
        *b = (uint32_t)(t->seg + t->nmap[2 * (pb - 1) + 1]);
        if (*b < *a) *b = *a;
        return;
    }
    *a = *b = (uint32_t)(t->seg + (pa < t->nlen ? t->nmap[2 * pa] : t->nsrc));   /* an empty span */
}

static int emit(tk *t, int id, uint32_t a, uint32_t b)
{
    if (t->n == t->cap) return qs_fail(t->e, "%s gives more than %d tokens", t->name ? t->name : "text", t->cap);
    if (t->off) { t->off[2 * t->n] = a; t->off[2 * t->n + 1] = b; }
    t->out[t->n++] = id;
    return 0;
}

/* One more id of the current piece into the scratch, with its span [ra, rb) in the piece. */
static int put_id(tk *t, int id, uint32_t ra, uint32_t rb)
{
    if (reserve((void **)&t->ids, &t->icap, t->ilen + 1, sizeof *t->ids) ||
        reserve((void **)&t->rsp, &t->rspcap, 2 * (t->ilen + 1), sizeof *t->rsp))
        return qs_fail(t->e, "out of memory");
    t->rsp[2 * t->ilen] = ra; t->rsp[2 * t->ilen + 1] = rb;
    t->ids[t->ilen++] = id;
    return 0;
}

static int model_emit(void *ctx, int id, uint32_t a, uint32_t b) { return put_id(ctx, id, a, b); }

/* rank of the merge "a b", or -1 */
static int merge_rank(tk *t, const char *a, size_t la, const char *b, size_t lb)
{
    if (!t->v->mhash) return -1;
    if (reserve((void **)&t->key, &t->keycap, la + lb + 1, 1)) return -1;
    memcpy(t->key, a, la);
    t->key[la] = ' ';
    memcpy(t->key + la + 1, b, lb);
    return qs_llm_hash_find(t->v->mtext, t->v->moff, t->v->mhash, t->v->mhcap, t->key, la + 1 + lb);
}

static int hless(const struct hent *x, const struct hent *y) { return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos); }

static int hpush(tk *t, int rank, int pos)
{
    if (reserve((void **)&t->heap, &t->hcap, t->hn + 1, sizeof *t->heap)) return -1;
    size_t i = t->hn++;
    t->heap[i] = (struct hent){rank, pos};
    while (i && hless(&t->heap[i], &t->heap[(i - 1) / 2])) {
        struct hent x = t->heap[i]; t->heap[i] = t->heap[(i - 1) / 2]; t->heap[(i - 1) / 2] = x;
        i = (i - 1) / 2;
    }
    return 0;
}

static struct hent hpop(tk *t)
{
    struct hent top = t->heap[0];
    t->heap[0] = t->heap[--t->hn];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < t->hn && hless(&t->heap[l], &t->heap[m])) m = l;
        if (r < t->hn && hless(&t->heap[r], &t->heap[m])) m = r;
        if (m == i) break;
        struct hent x = t->heap[i]; t->heap[i] = t->heap[m]; t->heap[m] = x;
        i = m;
    }
    return top;
}

static int pair_push(tk *t, int i)
{
    int j = t->sym[i].next;
    if (j < 0) return 0;
    int r = merge_rank(t, t->s + t->sym[i].a, t->sym[i].len, t->s + t->sym[j].a, t->sym[j].len);
    return r >= 0 ? hpush(t, r, i) : 0;
}

/* BPE over one piece p[0..n) (raw bytes); appends its ids to t->ids[t->ilen..]. */
static int bpe(tk *t, const unsigned char *p, size_t n)
{
    const qs_llm_vocab *v = t->v;
    if (n > (size_t)INT_MAX / 2) return qs_fail(t->e, "a pre-tokenized piece of %zu bytes is too long", n);
    if (reserve((void **)&t->s, &t->scap, 2 * n + 1, 1) || reserve((void **)&t->sym, &t->symcap, n, sizeof *t->sym))
        return qs_fail(t->e, "out of memory");
    size_t len = 0;
    if (t->ignore_merges) {   /* BPE ignore_merges: a piece that is a token is that token */
        for (size_t i = 0; i < n; i++) {
            size_t cl = t->spell[p[i]][1] ? 2 : 1;
            memcpy(t->s + len, t->spell[p[i]], cl);
            len += cl;
        }
        int whole = qs_llm_hash_find(v->text, v->off, v->vhash, v->vhcap, t->s, len);
        if (whole >= 0) return put_id(t, whole, 0, (uint32_t)n);
        len = 0;
    }
    /* one symbol per byte; a byte whose character is not in the vocabulary is skipped, as tokenizers'
    ** merge_word does without unk_token or byte_fallback (its neighbours become adjacent) */
    size_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        if (t->byte_id[p[i]] < 0) continue;
        const char *c = t->spell[p[i]];
        size_t cl = c[1] ? 2 : 1;
        t->sym[ns] = (struct sym){(uint32_t)len, (uint32_t)cl, (uint32_t)i, (uint32_t)i + 1, (int)ns - 1, -1};
        if (ns) t->sym[ns - 1].next = (int)ns;
        ns++;
        memcpy(t->s + len, c, cl);
        len += cl;
    }
    if (!ns) return 0;
    n = ns;
    t->hn = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (pair_push(t, (int)i)) return qs_fail(t->e, "out of memory");
    while (t->hn) {
        struct hent top = hpop(t);
        struct sym *a = &t->sym[top.pos];
        if (!a->len || a->next < 0) continue;
        struct sym *b = &t->sym[a->next];
        if (merge_rank(t, t->s + a->a, a->len, t->s + b->a, b->len) != top.rank) continue;   /* stale entry */
        a->len += b->len;
        a->rb = b->rb;
        b->len = 0;
        a->next = b->next;
        if (a->next >= 0) t->sym[a->next].prev = top.pos;
        if ((a->prev >= 0 && pair_push(t, a->prev)) || pair_push(t, top.pos)) return qs_fail(t->e, "out of memory");
    }
    for (int i = 0; i >= 0; i = t->sym[i].next) {
        int id = qs_llm_hash_find(v->text, v->off, v->vhash, v->vhcap, t->s + t->sym[i].a, t->sym[i].len);
        if (id < 0)   /* a merge whose result is not a token: tokenizers refuses such a file */
            return qs_fail(t->e, "%s%sno vocabulary entry for the BPE symbol '%.*s' of %s near byte %zu",
                           t->source ? t->source : "", t->source ? ": " : "", (int)t->sym[i].len, t->s + t->sym[i].a,
                           t->name ? t->name : "the text", t->at);
        if (put_id(t, id, t->sym[i].ra, t->sym[i].rb)) return -1;
    }
    return 0;
}

/* Ids k0..k1 of the scratch out, each span moved from the piece (whose first virt bytes are not in the
** text, byte virt at position at) to the text. */
static int emit_list(tk *t, const int32_t *ids, const uint32_t *rsp, size_t k0, size_t k1, size_t at, size_t virt)
{
    for (size_t k = k0; k < k1; k++) {
        size_t ra = rsp[2 * k], rb = rsp[2 * k + 1];
        ra = ra > virt ? ra - virt : 0;
        rb = rb > virt ? rb - virt : 0;
        uint32_t a = 0, b = 0;
        if (t->off) span_of(t, at + ra, at + rb, &a, &b);
        if (emit(t, ids[k], a, b)) return -1;
    }
    return 0;
}

static int emit_ids(tk *t, size_t k0, size_t k1, size_t at, size_t virt)
{
    return emit_list(t, t->ids, t->rsp, k0, k1, at, virt);
}

/* One pre-tokenized piece: ids from the state's own cache, else from the shared one (copied into the
** own cache: later lookups cost what the sequential tokenizer's do), else from the model (BPE here,
** others in llm_tok_model.h), then published and cached. */
static int piece(void *ctx, const char *s, size_t n, size_t at, size_t virt)
{
    tk *t = ctx;
    const int cont = t->cont_piece, cache = !cont && n <= CACHE_MAX_PIECE;   /* cont: ids depend on more than the bytes */
    t->cont_piece = 0;
    uint64_t h = XXH3_64bits(s, n);   /* ids and their spans in the piece depend on its bytes only */
    size_t i = 0;
    if (t->ccap && cache)
        for (i = h & (t->ccap - 1); t->ct[i].klen; i = (i + 1) & (t->ccap - 1)) {
            centry *c = &t->ct[i];
            if (c->h == h && c->klen == n + 1 && !memcmp(t->keys + c->koff, s, n))
                return emit_ids(t, c->ioff, c->ioff + c->icnt, at, virt);
        }
    size_t i0 = t->ilen;
    const sent *x = t->sh && cache ? shared_find(t->sh, h, s, n) : NULL;
    if (x) {   /* computed once, by whichever state met the piece first */
        const int32_t *xi = (const int32_t *)((const char *)x + sent_ids(x->n));
        const uint32_t *xs = (const uint32_t *)(xi + x->cnt);
        for (uint32_t k = 0; k < x->cnt; k++)
            if (put_id(t, xi[k], xs[2 * k], xs[2 * k + 1])) return -1;
    } else if (t->v->model == QS_TOK_BPE && t->v->byte_level) {
        if (bpe(t, (const unsigned char *)s, n)) return -1;
    } else if (qs_tok_model_piece(t->v, t->model, s, n, cont, model_emit, t, t->e)) {
        return -1;
    }
    if (emit_ids(t, i0, t->ilen, at, virt)) return -1;
    if (!x && t->sh && cache)   /* full or out of memory: the own cache still has it */
        shared_put(t->sh, &t->blk, h, s, n, t->ids ? t->ids + i0 : NULL, t->rsp ? t->rsp + 2 * i0 : NULL, t->ilen - i0);
    if (!cache || t->klen + n > UINT32_MAX || t->ilen > UINT32_MAX) { t->ilen = i0; return 0; }
    if (2 * (t->cn + 1) > t->ccap) {   /* grow: rehash every entry */
        size_t nc = t->ccap ? 2 * t->ccap : 4096;
        centry *nt = calloc(nc, sizeof *nt);
        if (!nt) return qs_fail(t->e, "out of memory");
        for (size_t k = 0; k < t->ccap; k++)
            if (t->ct[k].klen) {
                size_t j = t->ct[k].h & (nc - 1);
                while (nt[j].klen) j = (j + 1) & (nc - 1);
                nt[j] = t->ct[k];
            }
        free(t->ct);
        t->ct = nt; t->ccap = nc;
        for (i = h & (nc - 1); t->ct[i].klen; i = (i + 1) & (nc - 1)) {}
    }
    if (reserve((void **)&t->keys, &t->kcap, t->klen + n, 1)) return qs_fail(t->e, "out of memory");
    memcpy(t->keys + t->klen, s, n);
    t->ct[i] = (centry){h, (uint32_t)t->klen, (uint32_t)n + 1, (uint32_t)i0, (uint32_t)(t->ilen - i0)};   /* klen = n+1: 0 is empty */
    t->klen += n;
    t->cn++;
    return 0;
}

/* ---------------------------------------------------------------- the prepared tokenizer */

/* Added tokens (control and user-defined) in tries: node 0 is the root, edges in one open-addressing
** table keyed by (node, byte).  A node's id is the token ending there (the smallest id among equal
** strings), or -1.  Two tries, as tokenizers' AddedVocabulary has: the tokens matched on the raw text
** (normalized: false, and every added token of a GGUF), and the others, spelled as the normalizer
** writes them, matched on each normalized stretch. */
typedef struct { uint32_t node, child; uint8_t byte; } edge;

typedef struct {
    int32_t *term;             /* [nodes] */
    uint32_t nodes;
    edge *edges;               /* [ecap], child 0 = empty */
    size_t ecap;
    uint8_t first[256];        /* 1: some token starts with this byte */
} trie;

struct qs_llm_tok {
    char *source;              /* tokenizer.json, the .gguf, or NULL */
    char *err;                 /* why this vocabulary cannot tokenize (names source), or NULL */
    qs_pretok *pt;             /* NULL: each stretch is one piece (a model without a pre-tokenizer) */
    qs_tok_norm *norm;         /* NULL: none */
    qs_tok_model *model;       /* state of a model other than byte-level BPE, or NULL */
    int ignore_merges;
    trie raw, normed;          /* added tokens matched before / after normalization */
    unsigned long long gen;    /* unique per build: a state's cache belongs to one (addresses are reused) */
};

static _Atomic unsigned long long tok_gen;

static size_t edge_slot(const trie *k, uint32_t node, uint8_t b)
{
    size_t i = (size_t)XXH3_64bits_withSeed(&b, 1, node) & (k->ecap - 1);
    while (k->edges[i].child && (k->edges[i].node != node || k->edges[i].byte != b)) i = (i + 1) & (k->ecap - 1);
    return i;
}

static int trie_alloc(trie *k, size_t bytes, qs_err *e)
{
    if (bytes >= UINT32_MAX / 2) return qs_fail(e, "added tokens too long");
    k->ecap = 16;
    while (k->ecap < 2 * bytes) k->ecap *= 2;
    k->edges = calloc(k->ecap, sizeof *k->edges);
    k->term = malloc((bytes + 1) * sizeof *k->term);
    if (!k->edges || !k->term) return qs_fail(e, "out of memory");
    k->nodes = 1;
    k->term[0] = -1;
    return 0;
}

static void trie_add(trie *k, const unsigned char *w, size_t n, int id)
{
    if (!n) return;
    k->first[w[0]] = 1;
    uint32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = edge_slot(k, node, w[i]);
        if (!k->edges[j].child) {
            k->term[k->nodes] = -1;
            k->edges[j] = (edge){node, k->nodes++, w[i]};
        }
        node = k->edges[j].child;
    }
    if (k->term[node] < 0) k->term[node] = id;
}

static int is_added(const qs_llm_vocab *v, int i) { return v->type && (v->type[i] == 3 || v->type[i] == 4); }
static int normalized(const qs_llm_vocab *v, int i) { return v->aflags && (v->aflags[i] & QS_TOK_NORMALIZED); }

/* Both tries; -1 only when out of memory (e).  A normalizer that fails on a token's content (regex
** work) leaves that token unnormalized and its message in pe, unless pe holds one already. */
static int tries_build(const qs_llm_vocab *v, qs_llm_tok *k, qs_err *pe, qs_err *e)
{
    size_t rb = 0;
    for (int i = 0; i < v->n; i++)
        if (is_added(v, i) && !normalized(v, i)) rb += strlen(v->text + v->off[i]);
    if (trie_alloc(&k->raw, rb, e)) return -1;
    for (int i = 0; i < v->n; i++)
        if (is_added(v, i) && !normalized(v, i))
            trie_add(&k->raw, (const unsigned char *)v->text + v->off[i], strlen(v->text + v->off[i]), i);
    /* the normalized ones: each content through the normalizer, as AddedVocabulary caches them */
    qs_tok_norm_buf nb;
    memset(&nb, 0, sizeof nb);
    char *all = NULL;
    size_t nall = 0, call = 0;
    int rc = 0;
    for (int i = 0; i < v->n && !rc; i++) {
        if (!is_added(v, i) || !normalized(v, i)) continue;
        const char *w = v->text + v->off[i], *nw = w;
        size_t wn = strlen(w);
        qs_err ne = {{0}};
        if (qs_tok_norm_run(k->norm, w, wn, &nb, &ne) == 0) nw = nb.s, wn = nb.n;
        else if (!pe->msg[0]) *pe = ne;
        if (reserve((void **)&all, &call, nall + wn + 1, 1)) { rc = qs_fail(e, "out of memory"); break; }
        memcpy(all + nall, nw, wn);
        all[nall + wn] = 0;
        nall += wn + 1;
    }
    if (!rc) rc = trie_alloc(&k->normed, nall, e);
    for (int i = 0, o = 0; i < v->n && !rc; i++) {
        if (!is_added(v, i) || !normalized(v, i)) continue;
        size_t n = strlen(all + o);
        trie_add(&k->normed, (const unsigned char *)all + o, n, i);
        o += (int)n + 1;
    }
    free(all);
    qs_tok_norm_buf_free(&nb);
    return rc;
}

/* The longest token of k at s[0..n), or -1; *len its length. */
static int added_at(const trie *k, const unsigned char *s, size_t n, size_t *len)
{
    if (!k->first[s[0]]) return -1;
    int best = -1;
    uint32_t node = 0;
    for (size_t j = 0; j < n; j++) {
        size_t i = edge_slot(k, node, s[j]);
        if (!k->edges[i].child) break;
        node = k->edges[i].child;
        if (k->term[node] >= 0) { best = k->term[node]; *len = j + 1; }
    }
    return best;
}

static void trie_free(trie *k)
{
    free(k->term); free(k->edges);
}

static void tok_free(qs_llm_tok *k)
{
    if (!k) return;
    qs_pretok_free(k->pt);
    qs_tok_norm_free(k->norm);
    qs_tok_model_free(k->model);
    free(k->source); free(k->err);
    trie_free(&k->raw); trie_free(&k->normed);
    free(k);
}

static int tok_build(const qs_llm_vocab *v, const char *source, qs_llm_tok **out, qs_err *e)
{
    qs_llm_tok *k = calloc(1, sizeof *k);
    if (!k || (source && !(k->source = strdup(source)))) { tok_free(k); return qs_fail(e, "out of memory"); }
    k->gen = ++tok_gen;
    if (v->n && v->vhash && (v->byte_level || v->model != QS_TOK_BPE || v->pre_json || v->norm_json || v->model_json)) {
        qs_err pe = {{0}};
        k->ignore_merges = v->ignore_merges;
        if (v->byte_level || v->pre_json)   /* without either: no pre-tokenizer (SentencePiece-style files) */
            k->pt = v->pre_json ? qs_pretok_from_json(v->pre_json, &pe) : qs_pretok_from_family(v->pre, &k->ignore_merges, &pe);
        if (v->pre_json) k->ignore_merges = v->ignore_merges;
        if (!pe.msg[0] && v->norm_json) k->norm = qs_tok_norm_from_json(v->norm_json, &pe);
        if (!pe.msg[0] && !(v->model == QS_TOK_BPE && v->byte_level)) qs_tok_model_build(v, &k->model, &pe);
        if (tries_build(v, k, &pe, e)) { tok_free(k); return -1; }
        if (pe.msg[0]) {
            size_t n = strlen(pe.msg) + (source ? strlen(source) : 0) + 3;
            if (!(k->err = malloc(n))) { tok_free(k); return qs_fail(e, "out of memory"); }
            snprintf(k->err, n, "%s%s%s", source ? source : "", source ? ": " : "", pe.msg);
        }
    }
    *out = k;
    return 0;
}

int qs_llm_tok_prepare(qs_llm_vocab *v, const char *source, qs_err *e)
{
    tok_free(v->tok);
    v->tok = NULL;
    return tok_build(v, source, &v->tok, e);
}

void qs_llm_vocab_free(qs_llm_vocab *v)
{
    free(v->text); free(v->off); free(v->type); free(v->mtext); free(v->moff);
    free(v->vhash); free(v->mhash); free(v->special); free(v->pre_json); free(v->pre_regex);
    free(v->model_json); free(v->norm_json); free(v->aflags); free(v->score);
    tok_free(v->tok);
    memset(v, 0, sizeof *v);
}

static void tk_free(tk *t)
{
    free(t->ct); free(t->keys); free(t->ids); free(t->rsp); free(t->s); free(t->sym); free(t->heap); free(t->key);
    qs_pretok_scan_free(t->scan);
    qs_tok_norm_buf_free(&t->nb);
    free(t->raw.v); free(t->sub.v);
}

/* ---------------------------------------------------------------- added tokens in a text */

/* Rust regex's \w (single_word's boundaries): Alphabetic, marks, decimal digits, connector
** punctuation, the joiners.  An invalid byte is not a word character. */
static int word_char(uint32_t c)
{
    if (c & QS_NRAW) return 0;
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    if (c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
        (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189))   /* joiners; Other_Alphabetic symbols */
        return 1;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}

/* The character ending at s[i] (i > 0): *cp, and its start. */
static size_t char_before(const char *s, size_t i, uint32_t *cp)
{
    for (size_t k = 2; k <= 4 && k <= i; k++) {
        size_t st = i - k;
        if (((unsigned char)s[st] & 0xC0) == 0x80) continue;
        if (qs_nchar(s, i, st, cp) == k) return st;
        break;
    }
    qs_nchar(s, i, i - 1, cp);
    return i - 1;
}

typedef struct split split;
typedef struct splits splits;

static int split_add(splits *sp, int id, size_t a, size_t b)
{
    if (reserve((void **)&sp->v, &sp->cap, sp->n + 1, sizeof *sp->v)) return -1;
    sp->v[sp->n++] = (split){id, a, b};
    return 0;
}

/* AddedVocabulary::find_matches: leftmost-longest matches of tr in s[0..n) (a match that fails
** single_word still moves the search past it); lstrip takes the spaces before a token (not past the
** previous one), rstrip those after it, and either belongs to the token's span.  tokenizers resumes
** the search where the match ended even after rstrip took more; a token found inside those spaces
** (one starting with a space) would overlap the previous one there: its span is clamped instead. */
static int find_added(const trie *tr, const uint8_t *af, const char *s, size_t n, splits *sp)
{
    size_t from = 0, i = 0;
    uint32_t cp;
    sp->n = 0;
    while (i < n) {
        size_t len = 0;
        int id = added_at(tr, (const unsigned char *)s + i, n - i, &len);
        if (id < 0) { i++; continue; }
        size_t a = i, b = i + len;
        int f = af ? af[id] : 0;
        i = b;
        if (f & QS_TOK_SINGLE_WORD) {
            int before = a > 0 && (char_before(s, a, &cp), word_char(cp));
            int after = b < n && (qs_nchar(s, n, b, &cp), word_char(cp));
            if (before || after) continue;
        }
        if (f & QS_TOK_LSTRIP) {
            size_t st;
            while (a > 0 && (st = char_before(s, a, &cp), qs_norm_is_space(cp))) a = st;
        }
        if (f & QS_TOK_RSTRIP) {
            size_t l;
            while (b < n && (l = qs_nchar(s, n, b, &cp), qs_norm_is_space(cp))) b += l;
        }
        if (a < from) a = from;
        if (b < a) b = a;
        if ((from < a && split_add(sp, -1, from, a)) || split_add(sp, id, a, b)) return -1;
        from = b;
    }
    if (from < n && split_add(sp, -1, from, n)) return -1;
    return 0;
}

/* One stretch of text between raw-matched added tokens, text[seg, seg + n): normalized, then the
** normalized added tokens matched in it, each stretch between them pre-tokenized and each piece through
** the model.  Positions are offsets in the (normalized) stretch; t->nmap maps them back. */
static int stretch(const qs_llm_tok *k, tk *t, qs_pretok_scan *sc, qs_tok_norm_buf *nb, splits *sp, const char *text,
                   size_t seg, size_t n, int cont, qs_err *e)
{
    const char *s = text + seg;
    t->seg = seg; t->at = seg; t->nmap = NULL;
    if (k->norm) {
        if (qs_tok_norm_run_cont(k->norm, s, n, cont, nb, e)) return -1;
        s = nb->s; t->nmap = nb->map; t->nlen = nb->n; t->nsrc = n;
        n = nb->n;
    }
    if (find_added(&k->normed, t->v->aflags, s, n, sp)) return qs_fail(e, "out of memory");
    for (size_t i = 0; i < sp->n; i++) {
        size_t a = sp->v[i].a, b = sp->v[i].b;
        int rc;
        if (sp->v[i].id >= 0) {
            uint32_t x, y;
            span_of(t, a, b, &x, &y);
            rc = emit(t, sp->v[i].id, x, y);
        } else if (!k->pt) {
            t->cont_piece = cont && a == 0;   /* the model sees the stretch: SentencePiece's dummy prefix */
            rc = piece(t, s + a, b - a, a, 0);
        } else {
            qs_pretok_scan_origin(sc, seg);   /* Metaspace "first" (llm_pretok_meta.c) */
            rc = qs_pretok_run(sc, s + a, b - a, a, piece, t, e);
            if (rc == QS_PRETOK_REGEX && k->source) qs_err_prefix(e, k->source);
        }
        if (rc) return rc;
    }
    return 0;
}

/* Added tokens that are not normalized, on the raw text; then stretch() on the text between them. */
static int tokenize(const qs_llm_tok *k, tk *t, const char *text, size_t len, qs_err *e)
{
    if (k->pt && !t->scan && !(t->scan = qs_pretok_scan_new(k->pt, t->name, e))) return -1;
    if (t->scan) qs_pretok_scan_name(t->scan, t->name);
    int rc = find_added(&k->raw, t->v->aflags, text, len, &t->raw) ? qs_fail(e, "out of memory") : 0;
    for (size_t i = 0; i < t->raw.n && !rc; i++) {
        const split *p = &t->raw.v[i];
        rc = p->id >= 0 ? emit(t, p->id, (uint32_t)p->a, (uint32_t)p->b)
                        : stretch(k, t, t->scan, &t->nb, &t->sub, text, p->a, p->b - p->a, t->cont && p->a == 0, e);
    }
    return rc ? -1 : 0;
}

/* A caller's tokenizer state (llm_tok.h): the scratch and piece cache of the last vocabulary used. */
struct qs_llm_tok_state {
    tk t;
    int cont;                  /* qs_llm_tok_state_continues */
    qs_llm_tok_shared *sh;     /* the caller's shared cache, or NULL */
    const qs_llm_vocab *v;     /* the vocabulary t's cache and byte table belong to, or NULL */
    unsigned long long gen;    /* and the build of its prepared tokenizer (0: none) */
};

qs_llm_tok_state *qs_llm_tok_state_new(qs_llm_tok_shared *sh)
{
    qs_llm_tok_state *s = calloc(1, sizeof *s);
    if (s) s->sh = sh;
    return s;
}

void qs_llm_tok_state_continues(qs_llm_tok_state *s, int cont)
{
    s->cont = cont != 0;
}

void qs_llm_tok_state_free(qs_llm_tok_state *s)
{
    if (!s) return;
    tk_free(&s->t);
    free(s);
}

/* t ready for v (cache emptied when t was used for another vocabulary or tokenizer). */
static void tk_bind(tk *t, const qs_llm_vocab *v)
{
    tk_free(t);
    memset(t, 0, sizeof *t);
    t->v = v;
    for (unsigned b = 0; b < 256; b++) {
        unsigned cp = byte_cp(b);
        if (cp < 0x80) t->spell[b][0] = (char)cp;
        else { t->spell[b][0] = (char)(0xC0 | (cp >> 6)); t->spell[b][1] = (char)(0x80 | (cp & 0x3F)); }
        t->byte_id[b] = qs_llm_hash_find(v->text, v->off, v->vhash, v->vhcap, t->spell[b], strlen(t->spell[b]));
    }
}

int qs_llm_tokenize_state(qs_llm_tok_state *st, const qs_llm_vocab *v, const char *name, const char *text, size_t len,
                          int32_t *out, uint32_t *off, int cap, qs_err *e)
{
    const qs_llm_tok *k0 = v->tok;
    const char *src = k0 ? k0->source : NULL;
    if (!v->n || !v->vhash || (v->model == QS_TOK_BPE && !v->byte_level && !v->pre_json && !v->norm_json && !v->model_json))
        return qs_fail(e, "%s%sthe model has no tokenizer qscope can run (byte-level BPE, WordPiece, Unigram or "
                       "SentencePiece BPE); give token ids", src ? src : "", src ? ": " : "");
    if (off && len >= UINT32_MAX) return qs_fail(e, "%s is too long for token offsets (4 GiB)", name ? name : "the text");
    qs_llm_tok *own = NULL;
    const qs_llm_tok *k = v->tok;
    if (!k && tok_build(v, NULL, &own, e)) return -1;   /* a vocabulary nobody prepared */
    if (!k) k = own;
    if (k->err) { qs_fail(e, "%s", k->err); tok_free(own); return -1; }
    tk local, *t = st ? &st->t : &local;
    if (!st || own || st->v != v || st->gen != k->gen) {   /* a new vocabulary, or one prepared again: a cold cache */
        if (!st) memset(&local, 0, sizeof local);
        tk_bind(t, v);
        if (st) { st->v = own ? NULL : v; st->gen = own ? 0 : k->gen; }
        if (st && !own && st->sh) {   /* the shared cache belongs to its first vocabulary */
            pthread_mutex_lock(&st->sh->mu);
            if (!st->sh->v) { st->sh->v = v; st->sh->gen = k->gen; }
            if (st->sh->v == v && st->sh->gen == k->gen) t->sh = st->sh;
            pthread_mutex_unlock(&st->sh->mu);
        }
    }
    t->model = k->model; t->ignore_merges = k->ignore_merges; t->out = out; t->off = off; t->cap = cap; t->n = 0;
    t->e = e; t->name = name; t->source = k->source; t->cont = st ? st->cont : 0;
    int rc = tokenize(k, t, text, len, e);
    int n = t->n;
    if (!st) tk_free(t);
    tok_free(own);
    return rc ? -1 : n;
}

int qs_llm_tokenize_offs(const qs_llm_vocab *v, const char *name, const char *text, size_t len, int32_t *out,
                         uint32_t *off, int cap, qs_err *e)
{
    return qs_llm_tokenize_state(NULL, v, name, text, len, out, off, cap, e);
}

int qs_llm_tokenize_named(const qs_llm_vocab *v, const char *name, const char *text, size_t len, int32_t *out,
                          int cap, qs_err *e)
{
    return qs_llm_tokenize_offs(v, name, text, len, out, NULL, cap, e);
}

int qs_llm_tokenize(const qs_llm_vocab *v, const char *text, size_t len, int32_t *out, int cap, qs_err *e)
{
    return qs_llm_tokenize_named(v, NULL, text, len, out, cap, e);
}

/* ---------------------------------------------------------------- lookups and detokenization */

int qs_llm_vocab_find(const qs_llm_vocab *v, const char *s)
{
    if (v->vhash) return qs_llm_hash_find(v->text, v->off, v->vhash, v->vhcap, s, strlen(s));
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->text + v->off[i], s) == 0) return i;
    return -1;
}

/* GPT-2 bytes_to_unicode inverse: code point -> byte, -1 if the code point is not a byte spelling. */
static int gpt2_byte(uint32_t cp)
{
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255)) return (int)cp;
    if (cp >= 256 && cp < 256 + 68) {
        int k = (int)cp - 256, n = 0;
        for (int b = 0; b < 256; b++) {
            if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) continue;
            if (n++ == k) return b;
        }
    }
    return -1;
}

size_t qs_llm_detok(const qs_llm_vocab *v, int id, char *out, size_t cap)
{
    if (!cap) return 0;
    size_t o = 0;
    if (id < 0 || id >= v->n) return (size_t)snprintf(out, cap, "<%d>", id) < cap ? strlen(out) : cap - 1;
    if (v->model == QS_TOK_WORDPIECE) return qs_tok_model_detok(v, v->tok ? v->tok->model : NULL, id, out, cap);
    if (v->model == QS_TOK_UNIGRAM || (v->model == QS_TOK_BPE && !v->byte_level && v->model_json))
        return qs_tok_spm_detok(v, id, out, cap);   /* "▁" and <0xXX> (llm_tok_spm.c) */
    const unsigned char *s = (const unsigned char *)v->text + v->off[id];
    int control = v->type && v->type[id] == 3;
    if (!v->byte_level || control) {
        size_t n = strlen((const char *)s);
        if (n > cap - 1) n = cap - 1;
        memcpy(out, s, n);
        out[n] = 0;
        return n;
    }
    while (*s && o + 1 < cap) {   /* decode UTF-8 code points, map each back to its byte */
        uint32_t cp;
        int k;
        if (*s < 0x80) { cp = *s; k = 1; }
        else if ((*s & 0xE0) == 0xC0 && (s[1] & 0xC0) == 0x80) { cp = (uint32_t)(*s & 0x1F) << 6 | (s[1] & 0x3F); k = 2; }
        else { out[o++] = (char)*s++; continue; }   /* not a byte spelling: copy as is */
        int b = gpt2_byte(cp);
        if (b < 0) { for (int i = 0; i < k && o + 1 < cap; i++) out[o++] = (char)s[i]; }
        else out[o++] = (char)b;
        s += k;
    }
    out[o] = 0;
    return o;
}
