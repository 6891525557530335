/*
** libFuzzer target for the normalizers (store/llm_tok_norm*.c) and the added-token matching around
** them (store/llm_tok.c), on arbitrary bytes, invalid UTF-8 included (run from the project root, as
** tests/fuzz/run.sh does).
**
** Input: one mode byte, then the text.  Modes below the number of normalizers in
** tests/fixtures/llm/norm_expected.json pick one of them (every type, chains, a SentencePiece charsmap);
** other modes read "NORMALIZER_JSON\0TEXT".  Every output byte must map to a span inside the text;
** invalid bytes must come out as they went in (qscope's rule).  Then the text is tokenized with
** tests/fixtures/llm/tok_bpe.json, that normalizer and added tokens with every flag: ids in range,
** spans inside the text.  Any refusal is fine; a crash, a leak or a span outside the text is not.
*/
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/llm_tok.h"
#include "../../store/llm_tok_norm.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

static json_t *g_norms;
static size_t g_nnorm;
static qs_llm_vocab g_v;   /* tok_bpe.json with added tokens carrying every flag */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    json_error_t je;
    json_t *j = json_load_file("tests/fixtures/llm/norm_expected.json", JSON_ALLOW_NUL, &je);
    json_t *base = json_load_file("tests/fixtures/llm/tok_bpe.json", 0, &je);
    CHECK(j && base);
    g_norms = json_array();
    json_t *nv;
    size_t i;
    json_array_foreach(json_object_get(j, "normalizers"), i, nv) json_array_append(g_norms, json_object_get(nv, "normalizer"));
    g_nnorm = json_array_size(g_norms);
    json_decref(j);
    /* added tokens with each flag, normalized and not */
    json_t *added = json_loads(
        "[{\"id\":0,\"content\":\"<|endoftext|>\",\"special\":true,\"normalized\":false},"
        "{\"id\":650,\"content\":\"<tool_call>\",\"lstrip\":true,\"normalized\":false},"
        "{\"id\":1200,\"content\":\"</tool_call>\",\"rstrip\":true,\"normalized\":false},"
        "{\"id\":1201,\"content\":\"<mask>\",\"special\":true,\"lstrip\":true,\"rstrip\":true},"
        "{\"id\":1202,\"content\":\"[MASK]\",\"normalized\":true},"
        "{\"id\":1203,\"content\":\"hello\",\"single_word\":true},"
        "{\"id\":1204,\"content\":\" cat\",\"single_word\":true,\"lstrip\":true,\"rstrip\":true,\"normalized\":false}]",
        0, &je);
    CHECK(added);
    json_object_set_new(base, "added_tokens", added);
    char *s = json_dumps(base, JSON_COMPACT);
    json_decref(base);
    qs_err e = {{0}};
    int pp;
    CHECK(s && qs_llm_tok_json_parse(s, strlen(s), 0, "tok.json", &g_v, &pp, &e) == 0);
    free(s);
    return 0;
}

static void check_norm(const char *nj, const char *text, size_t len)
{
    qs_err e = {{0}};
    qs_tok_norm *nm = qs_tok_norm_from_json(nj, &e);
    if (!nm) return;
    qs_tok_norm_buf b;
    memset(&b, 0, sizeof b);
    if (qs_tok_norm_run(nm, text, len, &b, &e) == 0)
        for (size_t i = 0; i < b.n; i++) CHECK(b.map[2 * i] <= b.map[2 * i + 1] && b.map[2 * i + 1] <= len);
    qs_tok_norm_buf_free(&b);
    qs_tok_norm_free(nm);
}

/* The vocabulary with this normalizer: a shallow copy whose tokenizer is compiled by the call. */
static void check_tokenize(char *nj, const char *text, size_t len)
{
    qs_llm_vocab v = g_v;
    v.norm_json = nj;
    v.tok = NULL;
    enum { CAP = 1 << 16 };
    static int32_t ids[CAP];
    static uint32_t off[2 * CAP];
    qs_err e = {{0}};
    int n = qs_llm_tokenize_offs(&v, NULL, text, len, ids, off, CAP, &e);
    for (int k = 0; k < n; k++) CHECK(ids[k] >= 0 && ids[k] < v.n && off[2 * k] <= off[2 * k + 1] && off[2 * k + 1] <= len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    json_t *norm;
    if (data[0] < g_nnorm) {
        norm = json_incref(json_array_get(g_norms, data[0]));
    } else {
        const char *z = memchr(text, 0, len);
        if (!z) return 0;
        json_error_t je;
        norm = json_loadb(text, (size_t)(z - text), JSON_DECODE_ANY, &je);
        if (!norm) return 0;
        len -= (size_t)(z - text) + 1;
        text = z + 1;
    }
    char *nj = json_dumps(norm, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(norm);
    if (!nj) return 0;
    check_norm(nj, text, len);
    check_tokenize(nj, text, len);
    free(nj);
    return 0;
}
