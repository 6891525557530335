/*
** A BERT vocab.txt (see llm_tok_wordpiece.h) read into a vocabulary: the file is turned into the
** tokenizer.json that `transformers`' BertConverter writes for a BertTokenizer (WordPiece with its
** unk_token, BertNormalizer, BertPreTokenizer, WordPiece decoder, the special tokens as added tokens),
** and that goes through llm_tok_json.c, so both spellings of a BERT tokenizer load through one path.
** The settings are BertTokenizer's: do_lower_case, tokenize_chinese_chars, strip_accents and the
** special tokens' names from tokenizer_config.json when given, else its defaults.  A special token
** that the vocabulary lacks is left out (transformers would append it with a new id).
*/
#include "llm_tok_wordpiece.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_CONFIG = 16 << 20, MAX_TOKEN = 1024 };

/* BertTokenizer's settings, from tokenizer_config.json or its defaults */
typedef struct {
    int lower, chinese;
    json_t *accents;          /* null, true or false (owned) */
    char special[5][64];      /* [PAD] [UNK] [CLS] [SEP] [MASK] in that order */
} bert_cfg;

static const char *const kSpecialKeys[5] = {"pad_token", "unk_token", "cls_token", "sep_token", "mask_token"};
static const char *const kSpecialDefault[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

/* A boolean key: 1/0, the default when absent or null, -1 for another type. */
static int cfg_bool(json_t *c, const char *k, int dflt)
{
    json_t *j = json_object_get(c, k);
    if (!j || json_is_null(j)) return dflt;
    return json_is_boolean(j) ? json_is_true(j) : -1;
}

static int read_cfg(const char *buf, size_t n, bert_cfg *c, qs_err *e)
{
    c->lower = c->chinese = 1;
    c->accents = json_null();
    for (int i = 0; i < 5; i++) strcpy(c->special[i], kSpecialDefault[i]);
    if (!buf) return 0;
    if (n > MAX_CONFIG) return qs_fail(e, "tokenizer_config.json: larger than %d bytes", MAX_CONFIG);
    json_error_t je;
    json_t *j = json_loadb(buf, n, 0, &je);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        return qs_fail(e, "tokenizer_config.json: %s", j ? "not a JSON object" : je.text);
    }
    int rc = 0;
    c->lower = cfg_bool(j, "do_lower_case", 1);
    c->chinese = cfg_bool(j, "tokenize_chinese_chars", 1);
    json_t *sa = json_object_get(j, "strip_accents");
    if (c->lower < 0 || c->chinese < 0 || (sa && !json_is_null(sa) && !json_is_boolean(sa)))
        rc = qs_fail(e, "tokenizer_config.json: do_lower_case, tokenize_chinese_chars and strip_accents must be "
                        "true, false or null");
    else if (sa && json_is_boolean(sa)) c->accents = json_incref(sa);
    for (int i = 0; !rc && i < 5; i++) {   /* a string, or an AddedToken object with "content" */
        json_t *t = json_object_get(j, kSpecialKeys[i]);
        if (json_is_object(t)) t = json_object_get(t, "content");
        if (!t || json_is_null(t)) continue;
        const char *s = json_string_value(t);
        if (!s || !*s || strlen(s) >= sizeof c->special[i])
            rc = qs_fail(e, "tokenizer_config.json: %s is not a token name", kSpecialKeys[i]);
        else strcpy(c->special[i], s);
    }
    json_decref(j);
    return rc;
}

/* Is s[0..n) valid UTF-8 without NUL bytes? */
static int utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
        if (!c || !k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return 0;
        if (k == 3 && ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] >= 0xA0))) return 0;
        if (k == 4 && ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] >= 0x90))) return 0;
        i += k;
    }
    return 1;
}

/* The lines of buf -> vocab (token -> id). */
static int read_lines(const char *buf, size_t n, json_t *vocab, qs_err *e)
{
    size_t line = 0;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(buf + i, '\n', n - i);
        size_t end = nl ? (size_t)(nl - buf) : n, len = end - i;
        if (len && buf[i + len - 1] == '\r') len--;
        if (line >= (size_t)INT_MAX / 2) return qs_fail(e, "more than %d lines", INT_MAX / 2);
        line++;
        if (!len) return qs_fail(e, "line %zu is empty (one token per line)", line);
        if (len > MAX_TOKEN) return qs_fail(e, "line %zu is longer than %d bytes", line, MAX_TOKEN);
        if (!utf8_ok((const unsigned char *)buf + i, len))
            return qs_fail(e, "line %zu is not valid UTF-8 text (or holds a NUL byte)", line);
        char tok[MAX_TOKEN + 1];
        memcpy(tok, buf + i, len);
        tok[len] = 0;
        json_t *had = json_object_get(vocab, tok);
        if (had) return qs_fail(e, "line %zu repeats the token '%.40s' of line %lld", line, tok, json_integer_value(had) + 1);
        if (json_object_set_new(vocab, tok, json_integer((json_int_t)line - 1))) return qs_fail(e, "out of memory");
        i = end + 1;
    }
    if (!line) return qs_fail(e, "no tokens");
    return 0;
}

/* The tokenizer.json of a BertTokenizer with this vocabulary and settings. */
static json_t *tokenizer_json(json_t *vocab, const bert_cfg *c)
{
    json_t *added = json_array();
    for (int i = 0; added && i < 5; i++) {
        json_t *id = json_object_get(vocab, c->special[i]);
        if (!id) continue;
        json_array_append_new(added, json_pack("{s:O, s:s, s:b, s:b, s:b, s:b, s:b}", "id", id, "content", c->special[i],
                                               "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1));
    }
    return json_pack("{s:s, s:o*, s:{s:s, s:b, s:b, s:O, s:b}, s:{s:s}, s:{s:s, s:s, s:b},"
                     " s:{s:s, s:s, s:s, s:i, s:O}}",
                     "version", "1.0", "added_tokens", added,
                     "normalizer", "type", "BertNormalizer", "clean_text", 1, "handle_chinese_chars", c->chinese,
                     "strip_accents", c->accents, "lowercase", c->lower,
                     "pre_tokenizer", "type", "BertPreTokenizer",
                     "decoder", "type", "WordPiece", "prefix", "##", "cleanup", 1,
                     "model", "type", "WordPiece", "unk_token", c->special[1], "continuing_subword_prefix", "##",
                     "max_input_chars_per_word", 100, "vocab", vocab);
}

int qs_llm_vocab_txt_parse(const char *buf, size_t n, const char *config, size_t config_n, const char *source,
                           qs_llm_vocab *v, qs_err *e)
{
    bert_cfg c;
    memset(&c, 0, sizeof c);
    json_t *vocab = json_object(), *tj = NULL;
    char *s = NULL;
    int rc = -1;
    if (!vocab) { qs_fail(e, "out of memory"); goto out; }
    if (read_cfg(config, config_n, &c, e) || read_lines(buf, n, vocab, e)) goto out;
    if (!(tj = tokenizer_json(vocab, &c)) || !(s = json_dumps(tj, JSON_COMPACT))) { qs_fail(e, "out of memory"); goto out; }
    int pp_bos;
    rc = qs_llm_tok_json_parse(s, strlen(s), 0, source, v, &pp_bos, e);
out:
    free(s);
    json_decref(tj); json_decref(vocab); json_decref(c.accents);
    return rc;
}
