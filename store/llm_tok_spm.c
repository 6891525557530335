/*
** What the SentencePiece-style models share (llm_tok_spm.h): options, the candidate trie, the model
** text of a piece, and the output of unknown characters.
**
** Options come from v->model_json: tokenizer.json's model keys (Unigram unk_id / byte_fallback; BPE
** unk_token / fuse_unk / byte_fallback), or, for tokenizer.model and GGUF "llama" vocabularies, the
** object their loaders write there: {"unk_id", "byte_fallback", "sentencepiece": {"add_dummy_prefix",
** "remove_extra_whitespaces", "escape_whitespaces", "llama_cpp"}}.
*/
#include "llm_tok_spm.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static const char kMeta[] = "\xE2\x96\x81";   /* U+2581, SentencePiece's whitespace */

/* The Metaspace step of a pre-tokenizer (itself or in a Sequence), or NULL. */
static json_t *metaspace(json_t *j, int depth)
{
    if (depth > 8 || !json_is_object(j)) return NULL;
    const char *t = json_string_value(json_object_get(j, "type"));
    if (t && !strcmp(t, "Metaspace")) return j;
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(j, "pretokenizers"), i, s) {
        json_t *r = metaspace(s, depth + 1);
        if (r) return r;
    }
    return NULL;
}

static int jtrue(json_t *o, const char *k, int dflt)
{
    json_t *j = json_object_get(o, k);
    return json_is_boolean(j) ? json_is_true(j) : dflt;
}

/* Options from v->model_json and v->pre_json. */
static int options(const qs_llm_vocab *v, qs_tok_spm *m, qs_err *e)
{
    json_error_t je;
    json_t *mj = v->model_json ? json_loads(v->model_json, 0, &je) : json_object();
    if (!mj) return qs_fail(e, "model: %s", je.text);
    int rc = 0;
    json_t *sp = json_object_get(mj, "sentencepiece");
    m->byte_fallback = jtrue(mj, "byte_fallback", 0);
    m->unk = -1;
    json_t *u = json_object_get(mj, "unk_id");
    if (json_is_integer(u) && json_integer_value(u) >= 0 && json_integer_value(u) < v->n) m->unk = (int)json_integer_value(u);
    else if (u && !json_is_null(u)) rc = qs_fail(e, "model unk_id is not a token id");
    const char *ut = json_string_value(json_object_get(mj, "unk_token"));
    if (!rc && ut && (m->unk = qs_llm_vocab_find(v, ut)) < 0) rc = qs_fail(e, "model unk_token \"%.40s\" is not in the vocabulary", ut);
    m->fuse_unk = m->kind == QS_TOK_UNIGRAM || sp ? 1 : jtrue(mj, "fuse_unk", 0);
    json_t *dr = json_object_get(mj, "dropout");
    if (!rc && json_is_number(dr) && json_number_value(dr) > 0)
        rc = qs_fail(e, "BPE dropout (sampling) is not supported");
    const char *pre = json_string_value(json_object_get(mj, "continuing_subword_prefix"));
    const char *suf = json_string_value(json_object_get(mj, "end_of_word_suffix"));
    if (!rc && ((pre && *pre) || (suf && *suf)))
        rc = qs_fail(e, "BPE continuing_subword_prefix / end_of_word_suffix without byte-level spelling is not supported");
    const char *why = json_string_value(json_object_get(sp, "unsupported"));
    if (!rc && why) rc = qs_fail(e, "%s", why);
    if (sp) {
        m->src = jtrue(sp, "llama_cpp", 0) ? SPM_GGUF : SPM_PROTO;
        m->spm_norm = 1;
        m->dummy_prefix = jtrue(sp, "add_dummy_prefix", 1);
        m->remove_ws = jtrue(sp, "remove_extra_whitespaces", 1);
        m->escape_ws = jtrue(sp, "escape_whitespaces", 1);
        m->by_score = 1;
    }
    json_decref(mj);
    memcpy(m->rep, kMeta, sizeof kMeta);
    m->rep_len = 3;
    if (rc || !v->pre_json) return rc;
    json_t *pj = json_loads(v->pre_json, 0, &je), *ms = metaspace(pj, 0);
    if (ms) {
        const char *r = json_string_value(json_object_get(ms, "replacement"));
        m->meta = 1;
        if (r && (strlen(r) >= sizeof m->rep || !*r)) rc = qs_fail(e, "Metaspace replacement \"%.20s\" is not one character", r);
        else if (r) { snprintf(m->rep, sizeof m->rep, "%s", r); m->rep_len = strlen(r); }
    }
    json_decref(pj);
    return rc;
}

int qs_tok_spm_candidate(const qs_llm_vocab *v, const qs_tok_spm *m, int id)
{
    if (id < 0 || id >= v->n || !v->type) return id >= 0 && id < v->n;
    int t = v->type[id];
    if (m->src == SPM_GGUF) return 1;                     /* llama.cpp: any token */
    if (m->src == SPM_PROTO) return t == 1 || (m->kind == QS_TOK_BPE && (t == 4 || t == 5));   /* NORMAL (USER_DEFINED, UNUSED) */
    return t == 1;                                        /* tokenizer.json: the model's vocabulary */
}

static size_t edge_slot(const qs_tok_spm *m, uint32_t node, uint8_t b)
{
    size_t i = (size_t)XXH3_64bits_withSeed(&b, 1, node) & (m->ecap - 1);
    while (m->edges[i].child && (m->edges[i].node != node || m->edges[i].byte != b)) i = (i + 1) & (m->ecap - 1);
    return i;
}

/* The trie of candidate pieces (Unigram's lattice walks it from every character). */
static int trie(const qs_llm_vocab *v, qs_tok_spm *m, qs_err *e)
{
    size_t bytes = 0;
    for (int i = 0; i < v->n; i++)
        if (qs_tok_spm_candidate(v, m, i)) bytes += strlen(v->text + v->off[i]);
    if (bytes >= UINT32_MAX / 4) return qs_fail(e, "vocabulary too large");
    m->ecap = 16;
    while (m->ecap < 2 * bytes) m->ecap *= 2;
    m->edges = calloc(m->ecap, sizeof *m->edges);
    m->term = malloc((bytes + 1) * sizeof *m->term);
    if (!m->edges || !m->term) return qs_fail(e, "out of memory");
    m->nodes = 1;
    m->term[0] = -1;
    for (int i = 0; i < v->n; i++) {
        if (!qs_tok_spm_candidate(v, m, i)) continue;
        const unsigned char *w = (const unsigned char *)v->text + v->off[i];
        uint32_t node = 0;
        for (; *w; w++) {
            size_t j = edge_slot(m, node, *w);
            if (!m->edges[j].child) {
                m->term[m->nodes] = -1;
                m->edges[j] = (struct spm_edge){node, m->nodes++, *w};
            }
            node = m->edges[j].child;
        }
        if (node && m->term[node] < 0) m->term[node] = i;   /* the first id of a string, as the vocabulary's */
    }
    return 0;
}

uint32_t qs_tok_spm_step(const qs_tok_spm *m, uint32_t node, uint8_t b)
{
    return m->edges[edge_slot(m, node, b)].child;
}

int qs_tok_spm_build(const qs_llm_vocab *v, qs_tok_spm **out, qs_err *e)
{
    *out = NULL;
    qs_tok_spm *m = calloc(1, sizeof *m);
    if (!m) return qs_fail(e, "out of memory");
    m->kind = v->model;
    if (options(v, m, e)) { qs_tok_spm_free(m); return -1; }
    if ((m->kind == QS_TOK_UNIGRAM || m->by_score) && !v->score) {
        int uni = m->kind == QS_TOK_UNIGRAM;
        qs_tok_spm_free(m);
        return qs_fail(e, "%s model without piece scores", uni ? "Unigram" : "SentencePiece BPE");
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        m->byte_id[b] = qs_llm_vocab_find(v, name);
    }
    m->min_score = 1e300; m->max_score = -1e300;
    for (int i = 0; v->score && i < v->n; i++) {
        if (m->src != SPM_JSON && v->type && v->type[i] != 1) continue;   /* sentencepiece: NORMAL pieces */
        if (v->score[i] < m->min_score) m->min_score = v->score[i];
        if (v->score[i] > m->max_score) m->max_score = v->score[i];
    }
    if (m->min_score > m->max_score) m->min_score = m->max_score = 0;
    for (int i = 0; m->src == SPM_PROTO && m->kind == QS_TOK_BPE && v->type && i < v->n; i++)
        m->has_unused |= v->type[i] == 5;
    m->seg_ok = !m->has_unused;   /* UNUSED pieces are split again by the pairs offered anywhere in the text */
    /* every "▁" inside a piece follows another (Llama's "▁▁▁▁" is fine, "a▁" is not) */
    for (int i = 0; i < v->n && m->seg_ok; i++) {
        const char *t = v->text + v->off[i];
        for (const char *q = *t ? strstr(t + 1, kMeta) : NULL; q && m->seg_ok; q = strstr(q + 1, kMeta))
            if (q - t < 3 || memcmp(q - 3, kMeta, 3)) m->seg_ok = 0;
    }
    if (m->kind == QS_TOK_UNIGRAM && trie(v, m, e)) { qs_tok_spm_free(m); return -1; }
    *out = m;
    return 0;
}

void qs_tok_spm_free(qs_tok_spm *m)
{
    if (!m) return;
    free(m->edges); free(m->term);
    free(m);
}

size_t qs_tok_spm_charlen(const char *t, size_t n, size_t i)
{
    const unsigned char *p = (const unsigned char *)t + i;
    unsigned c = p[0];
    size_t k = c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
    if (k <= 1 || n - i < k) return 1;
    for (size_t j = 1; j < k; j++) if ((p[j] & 0xC0) != 0x80) return 1;
    if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F) || (c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F)) return 1;
    return k;
}

void qs_tok_spm_span(const spm_text *x, size_t a, size_t b, uint32_t *sa, uint32_t *sb)
{
    if (b > a) {
        *sa = x->map[2 * a];
        *sb = x->tile && b < x->n ? x->map[2 * b] : x->map[2 * (b - 1) + 1];
        if (*sb < *sa) *sb = *sa;
        return;
    }
    *sa = *sb = a < x->n ? x->map[2 * a] : x->n ? x->map[2 * x->n - 1] : 0;
}

int qs_tok_spm_flush(spm_out *o, qs_err *e)
{
    (void)e;
    if (!o->pend) return 0;
    o->pend = 0;
    return o->emit(o->ctx, o->unk, o->pa, o->pb);
}

int qs_tok_spm_put(const qs_tok_spm *m, spm_out *o, const spm_text *x, int id, size_t a, size_t b, qs_err *e)
{
    (void)m;
    if (qs_tok_spm_flush(o, e)) return -1;
    uint32_t sa, sb;
    qs_tok_spm_span(x, a, b, &sa, &sb);
    return o->emit(o->ctx, id, sa, sb);
}

int qs_tok_spm_unknown(const qs_llm_vocab *v, const qs_tok_spm *m, spm_out *o, const spm_text *x, size_t a, size_t b,
                       qs_err *e)
{
    uint32_t sa, sb;
    qs_tok_spm_span(x, a, b, &sa, &sb);
    int bytes = m->byte_fallback;
    for (size_t i = a; bytes && i < b; i++) bytes = m->byte_id[(uint8_t)x->t[i]] >= 0;
    if (bytes) {   /* each <0xXX> token spans its own byte (a "▁" escaping a space: that space) */
        if (qs_tok_spm_flush(o, e)) return -1;
        for (size_t i = a; i < b; i++) {
            qs_tok_spm_span(x, i, i + 1, &sa, &sb);
            if (o->emit(o->ctx, m->byte_id[(uint8_t)x->t[i]], sa, sb)) return -1;
        }
        return 0;
    }
    if (m->unk < 0) {
        if (m->kind == QS_TOK_BPE && m->src == SPM_JSON) return 0;   /* tokenizers' BPE drops the character */
        (void)v;
        return qs_fail(e, "the character '%.*s' is not in the vocabulary and the model has no unknown token",
                       (int)(b - a), x->t + a);
    }
    if (m->fuse_unk && o->pend) { o->pb = sb; return 0; }
    if (qs_tok_spm_flush(o, e)) return -1;
    o->pend = 1; o->pa = sa; o->pb = sb;
    return 0;
}

/* One output byte from source span [a, b) of the piece. */
static void out1(spm_text *x, char c, uint32_t a, uint32_t b)
{
    x->t[x->n] = c;
    x->map[2 * x->n] = a; x->map[2 * x->n + 1] = b;
    x->n++;
}

static void out_str(spm_text *x, const char *s, size_t k, uint32_t a, uint32_t b)
{
    for (size_t i = 0; i < k; i++) out1(x, s[i], a, b);
}

/* Bytes copied as they are: each from its own source byte (a byte-fallback token covers its byte). */
static void out_copy(spm_text *x, const char *s, size_t k, uint32_t a)
{
    for (size_t i = 0; i < k; i++) out1(x, s[i], a + (uint32_t)i, a + (uint32_t)i + 1);
}

/* The model text of piece s[0..n): SentencePiece's normalizer flags (strip and collapse spaces, the
** dummy prefix, spaces escaped) for its own files, the Metaspace spelling of spaces otherwise. */
static int prep(const qs_tok_spm *m, const char *s, size_t n, int cont, spm_text *x, qs_err *e)
{
    if (n > (UINT32_MAX - 16) / 8) return qs_fail(e, "a piece of %zu bytes is too long", n);
    size_t cap = n * m->rep_len + m->rep_len + 1;
    x->t = malloc(cap);
    x->map = malloc(2 * cap * sizeof *x->map);
    x->n = 0;
    if (!x->t || !x->map) return qs_fail(e, "out of memory");
    const char *ws = m->escape_ws || !m->spm_norm ? m->rep : " ";
    size_t wl = m->escape_ws || !m->spm_norm ? m->rep_len : 1;
    size_t i = 0;
    if (!m->spm_norm) {
        while (i < n) {
            size_t k = qs_tok_spm_charlen(s, n, i);
            if (m->meta && s[i] == ' ') out_str(x, m->rep, m->rep_len, (uint32_t)i, (uint32_t)i + 1);
            else out_copy(x, s + i, k, (uint32_t)i);
            i += k;
        }
        return 0;
    }
    x->tile = m->remove_ws;
    if (m->remove_ws && !cont) while (i < n && s[i] == ' ') i++;   /* a continued stretch starts after a character */
    if (i == n) return 0;   /* nothing but spaces: no tokens */
    if (m->dummy_prefix && !cont) out_str(x, ws, wl, (uint32_t)i, (uint32_t)i);
    int prev_space = m->remove_ws && !cont;
    while (i < n) {
        size_t k = qs_tok_spm_charlen(s, n, i);
        if (s[i] == ' ') {
            if (!(m->remove_ws && prev_space)) out_str(x, ws, wl, (uint32_t)i, (uint32_t)i + 1);
            prev_space = 1;
        } else {
            out_copy(x, s + i, k, (uint32_t)i);
            prev_space = 0;
        }
        i += k;
    }
    if (m->remove_ws)
        while (x->n >= wl && !memcmp(x->t + x->n - wl, ws, wl)) x->n -= wl;
    return 0;
}

int qs_tok_spm_piece(const qs_llm_vocab *v, const qs_tok_spm *m, const char *s, size_t n, int cont, qs_tok_emit_fn emit,
                     void *ctx, qs_err *e)
{
    spm_text x = {0};
    spm_out o = {emit, ctx, m->unk, 0, 0, 0};
    int rc = prep(m, s, n, cont, &x, e);
    if (!rc && x.n)
        rc = m->kind == QS_TOK_UNIGRAM ? qs_tok_unigram_run(v, m, &x, &o, e) : qs_tok_spm_bpe_run(v, m, &x, &o, e);
    if (!rc) rc = qs_tok_spm_flush(&o, e);
    free(x.t); free(x.map);
    return rc;
}

size_t qs_tok_spm_detok(const qs_llm_vocab *v, int id, char *out, size_t cap)
{
    const char *s = v->text + v->off[id];
    size_t o = 0, n = strlen(s);
    unsigned b;
    char tail;
    int control = v->type && v->type[id] == 3;
    if (!control && n == 6 && sscanf(s, "<0x%2X%c", &b, &tail) == 2 && tail == '>' && isxdigit((unsigned char)s[3]) &&
        isxdigit((unsigned char)s[4])) {
        if (cap > 1) out[o++] = (char)b;
        out[o] = 0;
        return o;
    }
    for (size_t i = 0; i < n && o + 1 < cap;) {
        if (!control && !strncmp(s + i, kMeta, 3)) { out[o++] = ' '; i += 3; }
        else out[o++] = s[i++];
    }
    out[o] = 0;
    return o;
}
