/*
** libFuzzer target for the tokenizer (store/llm_tok.c, llm_pretok.c) on arbitrary bytes,
** invalid UTF-8 included, with the vocabulary of tests/fixtures/llm/tok_bpe.json (run from the
** project root, as tests/fuzz/run.sh does).
**
** Input: one mode byte, then the text.  Modes 0..NFIXED-1 pick a known pre-tokenizer (GGUF families
** and tokenizer.json objects with every Split behaviour); for those that keep every byte the ids
** must spell the text back exactly (the documented invalid-UTF-8 behaviour: byte-level tokens of the
** raw bytes).  Other modes: the text is "PRE_TOKENIZER_JSON\0TEXT", and any outcome but a crash, a
** leak or an id out of range is fine.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/llm.h"
#include "../../store/llm_load.h"
#include "../../store/llm_tok.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

static const struct { const char *family, *json; int lossless; } kModes[] = {
    {"smollm", NULL, 1},
    {"gpt2", NULL, 1},
    {"qwen2", NULL, 1},
    {"llama-bpe", NULL, 1},
    {NULL, "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"},"
           "\"behavior\":\"MergedWithPrevious\",\"invert\":false},{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{N}*\"},"
           "\"behavior\":\"MergedWithNext\",\"invert\":true},{\"type\":\"Digits\",\"individual_digits\":false},"
           "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}]}", 1},
    {NULL, "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"String\":\"e\"},"
           "\"behavior\":\"Contiguous\",\"invert\":false},{\"type\":\"Split\",\"pattern\":{\"Regex\":\"x*\"},"
           "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}", 1},
    {NULL, "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"WhitespaceSplit\"},{\"type\":\"Punctuation\",\"behavior\":\"Removed\"},"
           "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true}]}", 0},
};
#define NFIXED ((int)(sizeof kModes / sizeof *kModes))

static qs_llm_file g_f;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    qs_err e = {{0}};
    CHECK(qs_llm_load_tokenizer("tests/fixtures/llm/tok_bpe.json", &g_f, &e) == 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    qs_llm_vocab v = g_f.v;   /* shallow copy: only the pre-tokenizer fields change */
    v.tok = NULL;             /* so the tokenizer compiles this input's pre-tokenizer */
    int mode = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char *json = NULL;
    if (mode < NFIXED) {
        v.pre_json = (char *)kModes[mode].json;
        if (kModes[mode].family) snprintf(v.pre, sizeof v.pre, "%s", kModes[mode].family);
        v.ignore_merges = 0;
    } else {
        const char *z = memchr(text, 0, len);
        if (!z) return 0;
        json = strndup(text, (size_t)(z - text));
        CHECK(json != NULL);
        v.pre_json = json;
        v.ignore_merges = mode & 1;
        len -= (size_t)(z - text) + 1;
        text = z + 1;
    }
    int cap = (int)(2 * len + 16);
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    CHECK(ids != NULL);
    qs_err e = {{0}};
    int n = qs_llm_tokenize(&v, text, len, ids, cap, &e);
    CHECK(n >= -1 && n <= cap);
    if (n < 0) CHECK(e.msg[0] != 0);
    for (int i = 0; i < n; i++) CHECK(ids[i] >= 0 && ids[i] < v.n);
    if (mode < NFIXED && kModes[mode].lossless) {   /* every byte is kept: the ids spell the text */
        CHECK(n >= 0);
        char *back = malloc(len + 64);
        CHECK(back != NULL);
        size_t o = 0;
        for (int i = 0; i < n; i++) {
            char tok[256];
            size_t k = qs_llm_detok(&v, ids[i], tok, sizeof tok);
            CHECK(o + k <= len);
            memcpy(back + o, tok, k);
            o += k;
        }
        CHECK(o == len && memcmp(back, text, len) == 0);
        free(back);
    }
    free(ids);
    free(json);
    return 0;
}
