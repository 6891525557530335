/*
** tokenizer.model (SentencePiece's ModelProto, protobuf) -> qs_llm_vocab, with a bounded reader of
** the wire format rather than a protobuf library: every length is checked against the bytes that
** remain, varints are at most 10 bytes, groups are refused, and the pieces are counted before
** anything is allocated for them.  Read:
**   pieces (1): piece (1), score (2, float), type (3: NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4,
**               UNUSED 5, BYTE 6) -> v->text, v->score, v->type (the same codes as GGUF token_type);
**   trainer_spec (2): model_type (3: UNIGRAM 1, BPE 2), byte_fallback (35), unk_id (40), bos_id (41),
**               eos_id (42), treat_whitespace_as_suffix (24, refused when set);
**   normalizer_spec (3): name (1), precompiled_charsmap (2), add_dummy_prefix (3),
**               remove_extra_whitespaces (4), escape_whitespaces (5) (each true when absent).
** The model's options go to v->model_json as {"unk_id", "byte_fallback", "sentencepiece": {...}}
** (llm_tok_spm.c reads them); precompiled_charsmap becomes v->norm_json, a tokenizers "Precompiled"
** normalizer (base64), when llm_tok_norm.c can decode it, else tokenizing reports why.
*/
#include "llm_tok.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "llm_load_internal.h"
#include "llm_tok_norm.h"

enum { MAX_PIECES = 1 << 24 };

typedef struct { const uint8_t *p, *end; } pb;   /* a message's bytes */

static int varint(pb *r, uint64_t *v)
{
    *v = 0;
    for (int s = 0; s < 70; s += 7) {
        if (r->p >= r->end) return -1;
        uint8_t c = *r->p++;
        *v |= (uint64_t)(c & 0x7F) << s;
        if (c < 0x80) return 0;
    }
    return -1;
}

/* The next field: number, wire type, and its value (varint in *v; bytes in *sub for wire type 2,
** 4 or 8 bytes in *sub for wire types 5 and 1).  1: a field, 0: end, -1: malformed. */
static int field(pb *r, uint32_t *num, int *wt, uint64_t *v, pb *sub)
{
    if (r->p >= r->end) return 0;
    uint64_t key;
    if (varint(r, &key) || (key >> 3) == 0 || (key >> 3) > 0x1FFFFFFF) return -1;
    *num = (uint32_t)(key >> 3);
    *wt = (int)(key & 7);
    size_t len;
    switch (*wt) {
    case 0: return varint(r, v) ? -1 : 1;
    case 1: len = 8; break;
    case 5: len = 4; break;
    case 2:
        if (varint(r, v)) return -1;
        len = (size_t)*v;
        if (*v > (uint64_t)(r->end - r->p)) return -1;
        break;
    default: return -1;   /* groups (3, 4) and unknown types */
    }
    if (len > (size_t)(r->end - r->p)) return -1;
    *sub = (pb){r->p, r->p + len};
    r->p += len;
    return 1;
}

typedef struct {
    int model_type, byte_fallback, unk, bos, eos, suffix;
    int dummy, remove_ws, escape_ws;
    const uint8_t *cmap;
    size_t cmap_n;
    char name[32];
} spec;

static int trainer(pb r, spec *s)
{
    uint32_t num;
    int wt, rc;
    uint64_t v;
    pb sub;
    while ((rc = field(&r, &num, &wt, &v, &sub)) == 1) {
        if (wt != 0) continue;
        if (num == 3) s->model_type = (int)v;
        else if (num == 35) s->byte_fallback = v != 0;
        else if (num == 24) s->suffix = v != 0;
        else if (num == 40) s->unk = (int)(int32_t)v;
        else if (num == 41) s->bos = (int)(int32_t)v;
        else if (num == 42) s->eos = (int)(int32_t)v;
    }
    return rc;
}

static int normalizer(pb r, spec *s)
{
    uint32_t num;
    int wt, rc;
    uint64_t v;
    pb sub;
    while ((rc = field(&r, &num, &wt, &v, &sub)) == 1) {
        if (num == 1 && wt == 2) {
            size_t n = (size_t)(sub.end - sub.p) < sizeof s->name - 1 ? (size_t)(sub.end - sub.p) : sizeof s->name - 1;
            memcpy(s->name, sub.p, n);
            s->name[n] = 0;
        } else if (num == 2 && wt == 2) {
            s->cmap = sub.p;
            s->cmap_n = (size_t)(sub.end - sub.p);
        } else if (wt == 0 && num >= 3 && num <= 5) {
            *(num == 3 ? &s->dummy : num == 4 ? &s->remove_ws : &s->escape_ws) = v != 0;
        }
    }
    return rc;
}

/* One SentencePiece message: its piece (bytes), score and type. */
static int piece(pb r, pb *str, float *score, int *type)
{
    uint32_t num;
    int wt, rc;
    uint64_t v;
    pb sub;
    *str = (pb){NULL, NULL};
    *score = 0;
    *type = 1;
    while ((rc = field(&r, &num, &wt, &v, &sub)) == 1) {
        if (num == 1 && wt == 2) *str = sub;
        else if (num == 2 && wt == 5) memcpy(score, sub.p, 4);   /* little-endian, as the wire format */
        else if (num == 3 && wt == 0) *type = v >= 1 && v <= 6 ? (int)v : 0;
    }
    return rc;
}

static char *base64(const uint8_t *b, size_t n)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc((n + 2) / 3 * 4 + 1), *q = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t x = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
        *q++ = A[x >> 18]; *q++ = A[x >> 12 & 63];
        *q++ = i + 1 < n ? A[x >> 6 & 63] : '=';
        *q++ = i + 2 < n ? A[x & 63] : '=';
    }
    *q = 0;
    return o;
}

/* Options -> v->model_json; the charsmap -> v->norm_json (or the reason it cannot be used). */
static int options(const spec *s, qs_llm_vocab *v, qs_err *e)
{
    json_t *sp = json_pack("{s:b, s:b, s:b}", "add_dummy_prefix", s->dummy, "remove_extra_whitespaces", s->remove_ws,
                           "escape_whitespaces", s->escape_ws);
    json_t *m = json_pack("{s:i, s:b, s:o}", "unk_id", s->unk, "byte_fallback", s->byte_fallback, "sentencepiece", sp);
    if (!m) return qs_fail(e, "out of memory");
    int rc = 0;
    if (s->cmap_n) {
        qs_err ne = {{0}};
        qs_tok_norm *nm = qs_tok_norm_from_charsmap(s->cmap, s->cmap_n, &ne);
        if (nm) {
            qs_tok_norm_free(nm);
            char *b64 = base64(s->cmap, s->cmap_n);
            json_t *nj = b64 ? json_pack("{s:s, s:s}", "type", "Precompiled", "precompiled_charsmap", b64) : NULL;
            free(b64);
            if (!nj || !(v->norm_json = json_dumps(nj, JSON_COMPACT))) rc = qs_fail(e, "out of memory");
            json_decref(nj);
        } else {   /* the vocabulary stays usable with ids; tokenizing says why it cannot */
            json_object_set_new(sp, "unsupported", json_sprintf("normalizer '%s': %s", s->name, ne.msg));
        }
    }
    if (!rc && !(v->model_json = json_dumps(m, JSON_COMPACT))) rc = qs_fail(e, "out of memory");
    json_decref(m);
    return rc;
}

int qs_llm_tok_spm_parse(const uint8_t *buf, size_t n, const char *source, qs_llm_vocab *v, qs_err *e)
{
    spec s = {1, 0, 0, 1, 2, 0, 1, 1, 1, NULL, 0, ""};
    pb r = {buf, buf + n}, sub;
    uint32_t num;
    int wt, rc;
    uint64_t val;
    size_t np = 0, bytes = 0;
    while ((rc = field(&r, &num, &wt, &val, &sub)) == 1) {   /* count; read the specs */
        if (num == 1 && wt == 2) {
            pb str;
            float sc;
            int ty;
            if (piece(sub, &str, &sc, &ty)) return qs_fail(e, "piece %zu is malformed", np);
            if (!str.p || str.p == str.end) return qs_fail(e, "piece %zu is empty", np);
            if (memchr(str.p, 0, (size_t)(str.end - str.p))) return qs_fail(e, "piece %zu contains a NUL byte", np);
            if (!ty) return qs_fail(e, "piece %zu has an unknown type", np);
            if (++np > MAX_PIECES) return qs_fail(e, "more than %d pieces", MAX_PIECES);
            bytes += (size_t)(str.end - str.p) + 1;
        } else if (num == 2 && wt == 2) {
            if (trainer(sub, &s)) return qs_fail(e, "trainer_spec is malformed");
        } else if (num == 3 && wt == 2) {
            if (normalizer(sub, &s)) return qs_fail(e, "normalizer_spec is malformed");
        }
    }
    if (rc) return qs_fail(e, "not a SentencePiece model (malformed protobuf at byte %zu)", (size_t)(r.p - buf));
    if (!np) return qs_fail(e, "no pieces (not a SentencePiece model?)");
    if (s.model_type != 1 && s.model_type != 2)
        return qs_fail(e, "model_type %d is not supported (UNIGRAM 1, BPE 2)", s.model_type);
    if (s.suffix) return qs_fail(e, "treat_whitespace_as_suffix is not supported");
    if (s.unk < 0 || (size_t)s.unk >= np) return qs_fail(e, "unk_id %d is not a piece", s.unk);
    if (bytes >= UINT32_MAX) return qs_fail(e, "pieces too large");
    v->text = malloc(bytes + 1);
    v->off = malloc(np * sizeof *v->off);
    v->type = malloc(np * sizeof *v->type);
    v->score = malloc(np * sizeof *v->score);
    if (!v->text || !v->off || !v->type || !v->score) return qs_fail(e, "out of memory for the vocabulary");
    size_t o = 0, i = 0;
    r = (pb){buf, buf + n};
    while (field(&r, &num, &wt, &val, &sub) == 1) {
        if (num != 1 || wt != 2) continue;
        pb str;
        float sc;
        int ty;
        piece(sub, &str, &sc, &ty);
        v->off[i] = (uint32_t)o;
        memcpy(v->text + o, str.p, (size_t)(str.end - str.p));
        o += (size_t)(str.end - str.p);
        v->text[o++] = 0;
        v->score[i] = sc;
        v->type[i++] = ty;
    }
    v->n = (int)np;
    v->model = s.model_type == 1 ? QS_TOK_UNIGRAM : QS_TOK_BPE;
    v->bos = s.bos >= 0 && (size_t)s.bos < np ? s.bos : -1;
    v->eos = s.eos >= 0 && (size_t)s.eos < np ? s.eos : -1;
    v->add_bos = 0;   /* the file does not say (sentencepiece's encoders add none; Llama's and Gemma's users do) */
    snprintf(v->pre, sizeof v->pre, "sentencepiece");
    if (options(&s, v, e) || qs_llm__vocab_tables(v, e)) return -1;
    return qs_llm_tok_prepare(v, source, e);
}
