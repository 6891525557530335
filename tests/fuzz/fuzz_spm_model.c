/*
** libFuzzer target for SentencePiece tokenizers: the tokenizer.model reader (store/llm_tok_spm_model.c,
** a bounded protobuf parser) and the models behind it (llm_tok_spm*.c, llm_tok_unigram.c,
** llm_pretok_meta.c).  Run from the project root, as tests/fuzz/run.sh does.
**
** Input: one mode byte, then the rest.
**   mode 0: the rest is a tokenizer.model image; a model that loads tokenizes a few fixed texts and
**           the image's own bytes; ids must be in range, refusals must say why.
**   mode 1: the rest is text for the GGUF "llama" vocabulary of tests/fixtures/llm/spm_llama.gguf;
**   mode 2: the rest is text for tests/fixtures/llm/spm_uni.json with Metaspace (always, split).
**           Both have byte fallback and keep every byte, so with '<' and U+2581 kept out of the text
**           (added tokens; a literal "▁" decodes as a space) the ids must spell " " + text (mode 2:
**           no space added when the text starts with one).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/llm_load.h"
#include "../../store/llm_tok.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

static qs_llm_file g_gguf, g_json;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    qs_err e = {{0}};
    CHECK(qs_llm_load_gguf("tests/fixtures/llm/spm_llama.gguf", &g_gguf, &e) == 0);
    FILE *f = fopen("tests/fixtures/llm/spm_uni.json", "rb");
    CHECK(f != NULL);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    const char *pre = "\"pre_tokenizer\":null";
    char *at = strstr(buf, pre);
    CHECK(at != NULL && n < sizeof buf - 128);
    static char doc[1 << 16];
    snprintf(doc, sizeof doc, "%.*s\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\","
             "\"prepend_scheme\":\"always\",\"split\":true}%.*s", (int)(at - buf), buf, (int)(n - (size_t)(at - buf) - strlen(pre)),
             at + strlen(pre));
    int pp;
    memset(&g_json, 0, sizeof g_json);
    g_json.v.bos = g_json.v.eos = -1;
    CHECK(qs_llm_tok_json_parse(doc, strlen(doc), 0, "spm_uni.json", &g_json.v, &pp, &e) == 0);
    return 0;
}

/* Tokenize; ids in range; with spell, the ids decode to spell[0..sl). */
static void run(const qs_llm_vocab *v, const char *text, size_t len, const char *spell, size_t sl)
{
    int cap = (int)(4 * len + 16);
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    uint32_t *off = malloc(2 * (size_t)cap * sizeof *off);
    CHECK(ids && off);
    qs_err e = {{0}};
    int n = qs_llm_tokenize_offs(v, NULL, text, len, ids, off, cap, &e);
    CHECK(n >= -1 && n <= cap);
    if (n < 0) CHECK(e.msg[0] != 0);
    for (int i = 0; i < n; i++) {
        CHECK(ids[i] >= 0 && ids[i] < v->n);
        CHECK(off[2 * i] <= off[2 * i + 1] && off[2 * i + 1] <= len);
        if (i) CHECK(off[2 * i] >= off[2 * i - 2]);
    }
    if (spell) {
        CHECK(n >= 0);
        char *back = malloc(sl + 64);
        CHECK(back != NULL);
        size_t o = 0;
        for (int i = 0; i < n; i++) {
            char tok[256];
            size_t k = qs_llm_detok(v, ids[i], tok, sizeof tok);
            CHECK(o + k <= sl);
            memcpy(back + o, tok, k);
            o += k;
        }
        CHECK(o == sl && memcmp(back, spell, sl) == 0);
        free(back);
    }
    free(ids); free(off);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    int mode = data[0] % 3;
    data++; size--;
    if (mode == 0) {
        qs_llm_vocab v;
        memset(&v, 0, sizeof v);
        qs_err e = {{0}};
        if (qs_llm_tok_spm_parse(data, size, "fuzz.model", &v, &e) == 0) {
            static const char *texts[] = {"Hello  world", " \xE2\x96\x81x\n\t<s> \xF0\x9F\x98\x80", ""};
            for (int i = 0; i < 3; i++) run(&v, texts[i], strlen(texts[i]), NULL, 0);
            run(&v, (const char *)data, size < 4096 ? size : 4096, NULL, 0);
            for (int i = 0; i < v.n && i < 64; i++) {
                char tok[64];
                CHECK(qs_llm_detok(&v, i, tok, sizeof tok) < sizeof tok);
            }
        } else {
            CHECK(e.msg[0] != 0);
        }
        qs_llm_vocab_free(&v);
        return 0;
    }
    char *t = malloc(size + 2);
    CHECK(t != NULL);
    t[0] = ' ';
    for (size_t i = 0; i < size; i++) t[i + 1] = data[i] == '<' ? '(' : data[i] == 0xE2 ? (char)0xE3 : (char)data[i];
    const char *text = t + 1;
    size_t pre = size && (mode == 1 || text[0] != ' ') ? 1 : 0;
    run(mode == 1 ? &g_gguf.v : &g_json.v, text, size, text - pre, size + pre);
    free(t);
    return 0;
}
