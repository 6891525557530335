/*
** Unigram tokenization (llm_tok_spm.h): the segmentation of the piece with the best sum of piece
** scores, by Viterbi over character boundaries, as sentencepiece's unigram_model.cc EncodeOptimized
** and tokenizers' models/unigram encode_optimized (its port) do:
**   - at each character start, every candidate piece starting there (trie walk, shortest first)
**     offers best[start] + score to best[end], taken only when strictly better, so the first offer
**     (the earlier start, then the shorter piece) wins ties;
**   - when no piece covers exactly the one character, the unknown token offers min_score - 10;
**   - the best path is read back from the end; consecutive unknown characters become one unknown
**     token (tokenizers' fuse_unk, always on for Unigram; sentencepiece merges them as well), which
**     byte fallback spells as <0xXX> tokens.
** Path scores are summed in double, as tokenizers does and as sentencepiece 0.2 does too (a float
** sum, whose ulp reaches 0.06 after a novel's worth of tokens, picks other segmentations: checked
** on a whole Austen novel).
*/
#include "llm_tok_spm.h"

#include <stdlib.h>
#include <string.h>

enum { UNK_PENALTY = 10 };

typedef struct { double score; int32_t start, id; } node;   /* best path ending here: from start (relative) */

enum { BLOCK = 1 << 16 };   /* bytes of model text per Viterbi block, at least (see below) */

typedef struct {
    const qs_llm_vocab *v;
    const qs_tok_spm *m;
    const spm_text *x;
    spm_out *o;
    node *best;
    int32_t *path;
    size_t ua, ub;   /* a run of unknown characters not yet output (model-text bytes) */
} uni;

/* The best path over model-text bytes [a0, a1), starting from the score *acc of the path before a0
** (so the sums are those of one pass over the whole text), its tokens output; *acc its end score. */
static int block(uni *u, size_t a0, size_t a1, double *acc, qs_err *e)
{
    const qs_tok_spm *m = u->m;
    const unsigned char *t = (const unsigned char *)u->x->t;
    size_t n = a1 - a0;
    node *best = u->best;
    for (size_t i = 0; i <= n; i++) best[i] = (node){0, -1, -1};
    best[0] = (node){*acc, 0, -1};
    double unk_score = m->min_score - UNK_PENALTY;
    for (size_t at = 0; at < n;) {
        size_t mb = qs_tok_spm_charlen(u->x->t + a0, n, at);
        double till = best[at].score;
        int single = 0;
        uint32_t nd = 0;
        for (size_t j = at; j < n && (nd = qs_tok_spm_step(m, nd, t[a0 + j])); j++) {
            int id = m->term[nd];
            if (id < 0) continue;
            size_t end = j + 1;
            double c = u->v->score[id] + till;
            if (best[end].start < 0 || c > best[end].score) best[end] = (node){c, (int32_t)at, id};
            if (end - at == mb) single = 1;
        }
        if (!single) {
            double c = unk_score + till;
            if (best[at + mb].start < 0 || c > best[at + mb].score) best[at + mb] = (node){c, (int32_t)at, -1};
        }
        at += mb;
    }
    *acc = best[n].score;
    size_t k = 0;   /* the path, backwards: path[] holds the end of each token */
    for (size_t end = n; end > 0; end = (size_t)best[end].start) u->path[k++] = (int32_t)end;
    int rc = 0;
    for (size_t i = k; i-- > 0 && !rc;) {
        size_t end = a0 + (size_t)u->path[i], start = a0 + (size_t)best[end - a0].start;
        int id = best[end - a0].id;
        if (id < 0 || id == m->unk) {   /* unknown (the unknown piece itself is fused too, as tokenizers) */
            if (u->ub == start && u->ub > u->ua) u->ub = end;
            else {
                if (u->ub > u->ua) rc = qs_tok_spm_unknown(u->v, m, u->o, u->x, u->ua, u->ub, e);
                u->ua = start; u->ub = end;
            }
            continue;
        }
        if (u->ub > u->ua) { rc = qs_tok_spm_unknown(u->v, m, u->o, u->x, u->ua, u->ub, e); u->ua = u->ub = 0; }
        if (!rc) rc = qs_tok_spm_put(m, u->o, u->x, id, start, end, e);
    }
    return rc;
}

/* Every path passes through the start of a run of "▁" when every "▁" inside a piece follows another
** (seg_ok): the text is solved block by block there, with the running score carried over, which is
** the same computation as one pass in memory proportional to a block. */
int qs_tok_unigram_run(const qs_llm_vocab *v, const qs_tok_spm *m, const spm_text *x, spm_out *o, qs_err *e)
{
    size_t cap = m->seg_ok && x->n > 2 * BLOCK ? 2 * BLOCK : x->n;
    uni u = {v, m, x, o, malloc((cap + 1) * sizeof *u.best), malloc((cap + 1) * sizeof *u.path), 0, 0};
    int rc = u.best && u.path ? 0 : qs_fail(e, "out of memory");
    double acc = 0;
    for (size_t a0 = 0; a0 < x->n && !rc;) {
        size_t a1 = x->n;
        if (cap < x->n) {   /* the first run start past BLOCK, within 2 * BLOCK; else the blocks are bigger */
            for (size_t p = a0 + BLOCK; p + 3 <= x->n; p++)
                if (!memcmp(x->t + p, "\xE2\x96\x81", 3) && memcmp(x->t + p - 3, "\xE2\x96\x81", 3)) { a1 = p; break; }
            if (a1 - a0 > cap) {
                node *nb = realloc(u.best, (a1 - a0 + 1) * sizeof *nb);
                if (nb) u.best = nb;
                int32_t *np = nb ? realloc(u.path, (a1 - a0 + 1) * sizeof *np) : NULL;
                if (np) u.path = np;
                if (!nb || !np) { rc = qs_fail(e, "out of memory"); break; }
                cap = a1 - a0;
            }
        }
        rc = block(&u, a0, a1, &acc, e);
        a0 = a1;
    }
    if (!rc && u.ub > u.ua) rc = qs_tok_spm_unknown(v, m, o, x, u.ua, u.ub, e);
    free(u.best); free(u.path);
    return rc;
}
