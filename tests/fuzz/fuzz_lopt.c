/*
** libFuzzer target for LoPT (store/llm_lopt.c): on arbitrary bytes, invalid UTF-8 included, LoPT's
** ids and spans must equal the sequential tokenizer's (the same error when it fails), with the
** byte-level BPE of tests/fixtures/llm/tok_bpe.json (pre-tokenizers, normalizers), the WordPiece
** fixture, a SentencePiece Unigram with and without Metaspace and a SentencePiece BPE without a
** pre-tokenizer under Llama 2's normalizer (Prepend and Replace of "▁"; run from the project root, as
** tests/fuzz/run.sh does).
** For the pre-tokenizers LoPT's proof covers, no anchor check may fail (a failure would mean the
** cut-position analysis of docs/tokenize.md is wrong, even though the fallback hides it).
**
** Input: a mode byte (pre-tokenizer), a chunk byte, an overlap byte, a threads byte, then the text.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/llm_load.h"
#include "../../store/llm_lopt.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

/* The tokenizer files (run from the project root) */
static const char *const kFiles[] = {"tests/fixtures/llm/tok_bpe.json", "tests/fixtures/llm/wp_tok.json",
                                     "tests/fixtures/llm/spm_uni.json", "tests/fixtures/llm/spm_bpe.json"};
#define NFILES (sizeof kFiles / sizeof *kFiles)

/* file: index in kFiles; json "" keeps the file's pre-tokenizer; norm NULL keeps its normalizer */
static const struct { int file; const char *family, *json, *norm; int proved; } kModes[] = {
    {0, "smollm", NULL, NULL, 1},
    {0, "gpt2", NULL, NULL, 1},
    {0, "qwen2", NULL, NULL, 1},
    {0, "llama-bpe", NULL, NULL, 1},
    {0, NULL, "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true}", NULL, 1},
    {0, NULL, "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":false},"
              "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true}]}", NULL, 1},
    {0, NULL, "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"},"
              "\"behavior\":\"MergedWithPrevious\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
              "\"use_regex\":false}]}", NULL, 0},
    {0, "qwen2", NULL, "{\"type\":\"NFC\"}", 1},   /* Qwen2 */
    {0, NULL, "", "{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,\"strip_accents\":true,"
                  "\"lowercase\":true}", 1},
    {0, NULL, "", "{\"type\":\"Prepend\",\"prepend\":\"x\"}", 0},
    {1, NULL, "", NULL, 1},                                           /* WordPiece, BertNormalizer */
    {1, NULL, "{\"type\":\"Whitespace\"}", "{\"type\":\"NFKD\"}", 1},
    {2, NULL, "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"first\",\"split\":true}", NULL, 1},
    {2, NULL, "", NULL, 0},                                           /* Unigram without a pre-tokenizer */
    {3, NULL, "", "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"},"
                  "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}]}", 1},   /* Llama 2 */
};
#define NMODES (sizeof kModes / sizeof *kModes)

static qs_llm_file g_f[NFILES];
static qs_llm_vocab g_v[NMODES];   /* shallow copies of a g_f[].v, each with its own compiled tokenizer */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    qs_err e = {{0}};
    for (size_t k = 0; k < NFILES; k++) CHECK(qs_llm_load_tokenizer(kFiles[k], &g_f[k], &e) == 0);
    for (size_t m = 0; m < NMODES; m++) {
        g_v[m] = g_f[kModes[m].file].v;
        g_v[m].tok = NULL;
        if (!kModes[m].json || kModes[m].json[0]) g_v[m].pre_json = (char *)kModes[m].json;
        if (kModes[m].norm) g_v[m].norm_json = (char *)kModes[m].norm;
        if (kModes[m].family) snprintf(g_v[m].pre, sizeof g_v[m].pre, "%s", kModes[m].family);
        if (kModes[m].file == 0) g_v[m].ignore_merges = 0;
        CHECK(qs_llm_tok_prepare(&g_v[m], NULL, &e) == 0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    static const size_t chunks[] = {8, 16, 33, 64, 100, 256, 1024, 4096};
    static const size_t overlaps[] = {1, 2, 5, 16, 64, 200};
    size_t m = data[0] % NMODES;
    const qs_llm_vocab *v = &g_v[m];
    qs_lopt_opts o = {2 + data[3] % 7, chunks[data[1] % 8], overlaps[data[2] % 6]};
    qs_lopt_opts seq = {1, 0, 0};
    const char *text = (const char *)data + 4;
    size_t len = size - 4;
    int32_t *a = NULL, *b = NULL;
    uint32_t *ao = NULL, *bo = NULL;
    size_t na = 0, nb = 0;
    qs_lopt_stats st;
    qs_err e1 = {{0}}, e2 = {{0}};
    int ra = qs_lopt_tokenize(v, "t", text, len, &seq, &a, &ao, &na, NULL, &e1);
    int rb = qs_lopt_tokenize(v, "t", text, len, &o, &b, &bo, &nb, &st, &e2);
    CHECK(ra == rb);
    if (ra == 0) {
        CHECK(na == nb && !memcmp(a, b, na * sizeof *a) && !memcmp(ao, bo, 2 * na * sizeof *ao));
    } else {
        CHECK(!strcmp(e1.msg, e2.msg));
    }
    if (kModes[m].proved) CHECK(!st.why || !strstr(st.why, "anchor check"));
    else CHECK(st.anchors == 0);
    free(a); free(b); free(ao); free(bo);
    return 0;
}
