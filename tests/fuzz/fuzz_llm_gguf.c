/*
** libFuzzer target for the LLM model loader (store/llm_load_gguf.c): hyper-parameters from the GGUF
** metadata, the bounded walk for the vocabulary, tensor shape checks and dequantization; and the
** vocabulary-only loader on the same input.
**
** On success the model must be self-consistent and a one-token forward pass must run
** (finite hidden state is not required: weights are arbitrary); on failure the message must name
** the input and nothing may leak.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_llm.h"

/* The vocabulary-only loader on the same input: a named error, or a vocabulary that tokenizes. */
static void vocab_only(const uint8_t *data, size_t size)
{
    qs_llm_file f;
    qs_err e = {{0}};
    if (qs_llm_load_gguf_vocab_mem(data, size, "fuzz", &f, &e) != 0) {
        CHECK(strncmp(e.msg, "fuzz: ", 6) == 0);
        CHECK(f.v.text == NULL && f.v.off == NULL && f.v.type == NULL);
        return;
    }
    CHECK(f.v.n > 0 && f.m.arena == NULL);
    int32_t ids[128];
    size_t tl = size < 96 ? size : 96;
    int n = qs_llm_tokenize(&f.v, (const char *)data + size - tl, tl, ids, 128, &e);
    CHECK(n >= -1 && n <= 128);
    for (int i = 0; i < n; i++) CHECK(ids[i] >= 0 && ids[i] < f.v.n);
    qs_llm_file_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    qs_llm_file f;
    qs_err e = {{0}};
    vocab_only(data, size);
    if (qs_llm_load_gguf_mem(data, size, "fuzz", &f, &e) != 0) {
        CHECK(strncmp(e.msg, "fuzz: ", 6) == 0);
        CHECK(f.m.arena == NULL && f.v.text == NULL && f.v.off == NULL && f.v.type == NULL);
        return 0;
    }
    CHECK(qs_llm_cfg_check(&f.m.c, &e) == 0);
    CHECK(f.v.n == 0 || f.v.n == f.m.c.vocab);
    char buf[64];
    for (int i = 0; i < f.v.n && i < 64; i++) CHECK(qs_llm_detok(&f.v, i, buf, sizeof buf) < sizeof buf);
    {   /* the tokenizer over the input's last bytes as text, with the file's own vocabulary and merges */
        int32_t ids[128];
        size_t tl = size < 96 ? size : 96;
        int n = qs_llm_tokenize(&f.v, (const char *)data + size - tl, tl, ids, 128, &e);
        CHECK(n >= -1 && n <= 128);
        for (int i = 0; i < n; i++) CHECK(ids[i] >= 0 && ids[i] < f.v.n);
    }
    check_forward(&f.m);
    qs_llm_file_free(&f);
    return 0;
}
