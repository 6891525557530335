/*
** libFuzzer target for tokenizer_config.json (store/llm_tok_config.c) on arbitrary bytes, with the
** vocabulary of tests/fixtures/llm/tok_bpe.json (run from the project root, as tests/fuzz/run.sh
** does): any outcome but a crash or a leak is fine as long as the ids it gives are -1 or in the
** vocabulary, add_bos is -1, 0 or 1, and a refusal is one line.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/llm.h"
#include "../../store/llm_load.h"
#include "../../store/llm_tok.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

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
    qs_llm_tok_cfg c;
    qs_err e = {{0}};
    int rc = qs_llm_tok_config_parse((const char *)data, size, &g_f.v, &c, &e);
    CHECK(rc == 0 || rc == -1);
    if (rc) {
        CHECK(e.msg[0] && !strchr(e.msg, '\n'));
        CHECK(c.bos == -1 && c.eos == -1 && c.add_bos == -1);
        return 0;
    }
    CHECK(c.bos >= -1 && c.bos < g_f.v.n && c.eos >= -1 && c.eos < g_f.v.n);
    CHECK(c.add_bos >= -1 && c.add_bos <= 1);
    return 0;
}
