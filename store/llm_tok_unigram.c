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

enum { UNK_PENALTY = 10 };

typedef struct { double score; int32_t start, id; } node;

int qs_tok_unigram_run(const qs_llm_vocab *v, const qs_tok_spm *m, const spm_text *x, spm_out *o, qs_err *e)
{
    size_t n = x->n;
    const unsigned char *t = (const unsigned char *)x->t;
    node *best = malloc((n + 1) * sizeof *best);
    int32_t *path = malloc((n + 1) * sizeof *path);
    if (!best || !path) { free(best); free(path); return qs_fail(e, "out of memory"); }
    for (size_t i = 0; i <= n; i++) best[i] = (node){0, -1, -1};
    best[0].start = 0;
    double unk_score = m->min_score - UNK_PENALTY;
    for (size_t at = 0; at < n;) {
        size_t mb = qs_tok_spm_charlen(x->t, n, at);
        double till = best[at].score;
        int single = 0;
        uint32_t nd = 0;
        for (size_t j = at; j < n && (nd = qs_tok_spm_step(m, nd, t[j])); j++) {
            int id = m->term[nd];
            if (id < 0) continue;
            size_t end = j + 1;
            double c = v->score[id] + till;
            if (best[end].start < 0 || c > best[end].score) best[end] = (node){c, (int32_t)at, id};
            if (end - at == mb) single = 1;
        }
        if (!single) {
            double c = unk_score + till;
            if (best[at + mb].start < 0 || c > best[at + mb].score) best[at + mb] = (node){c, (int32_t)at, -1};
        }
        at += mb;
    }
    size_t k = 0;   /* the path, backwards: path[] holds the end of each token */
    for (size_t end = n; end > 0; end = (size_t)best[end].start) path[k++] = (int32_t)end;
    int rc = 0;
    size_t ua = 0, ub = 0;   /* a run of unknown characters not yet output */
    for (size_t i = k; i-- > 0 && !rc;) {
        size_t end = (size_t)path[i], start = (size_t)best[end].start;
        int id = best[end].id;
        if (id < 0 || id == m->unk) {   /* unknown (the unknown piece itself is fused too, as tokenizers) */
            if (ub == start && ub > ua) ub = end;
            else { if (ub > ua) rc = qs_tok_spm_unknown(v, m, o, x, ua, ub, e); ua = start; ub = end; }
            continue;
        }
        if (ub > ua) { rc = qs_tok_spm_unknown(v, m, o, x, ua, ub, e); ua = ub = 0; }
        if (!rc) rc = qs_tok_spm_put(m, o, x, id, start, end, e);
    }
    if (!rc && ub > ua) rc = qs_tok_spm_unknown(v, m, o, x, ua, ub, e);
    free(best); free(path);
    return rc;
}
