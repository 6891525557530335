/*
** libFuzzer target for a BERT vocab.txt (store/llm_tok_vocabtxt.c) and WordPiece tokenization
** (llm_tok_wordpiece.c, llm_pretok_bert.c) on arbitrary bytes.  The input is VOCAB [SEP CONFIG [SEP
** TEXT]] with SEP = "\n--8<--\n": the vocabulary (with the tokenizer_config.json when given) must load
** or be refused in one line; when it loads, TEXT is tokenized.  The whole input is also tokenized by
** the WordPiece model of tests/fixtures/llm/wp_tok.json (run from the project root, as
** tests/fuzz/run.sh does).  Ids must be in the vocabulary, spans in order inside the text, every id
** must detokenize.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/llm.h"
#include "../../store/llm_load.h"
#include "../../store/llm_tok.h"
#include "../../store/llm_tok_wordpiece.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

static qs_llm_file g_f;
static int32_t ids[1 << 16];
static uint32_t offs[1 << 17];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    qs_err e = {{0}};
    CHECK(qs_llm_load_tokenizer("tests/fixtures/llm/wp_tok.json", &g_f, &e) == 0);
    return 0;
}

static void tokenize(const qs_llm_vocab *v, const char *s, size_t n)
{
    qs_err e = {{0}};
    int k = qs_llm_tokenize_offs(v, NULL, s, n, ids, offs, 1 << 16, &e);
    if (k < 0) { CHECK(e.msg[0] && !strchr(e.msg, '\n')); return; }
    uint32_t at = 0;
    for (int i = 0; i < k; i++) {
        CHECK(ids[i] >= 0 && ids[i] < v->n);
        CHECK(offs[2 * i] >= at && offs[2 * i] <= offs[2 * i + 1] && offs[2 * i + 1] <= n);
        at = offs[2 * i];
        char buf[256];
        CHECK(qs_llm_detok(v, ids[i], buf, sizeof buf) < sizeof buf);
    }
}

static const char *part(const char *s, size_t n, size_t *len, const char **rest, size_t *rlen)
{
    static const char sep[] = "\n--8<--\n";
    const char *p = memmem(s, n, sep, sizeof sep - 1);
    *len = p ? (size_t)(p - s) : n;
    *rest = p ? p + sizeof sep - 1 : NULL;
    *rlen = p ? n - *len - (sizeof sep - 1) : 0;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data, *cfg, *text;
    size_t vn, cn, tn, rest;
    part(s, size, &vn, &cfg, &rest);
    if (cfg) part(cfg, rest, &cn, &text, &tn);
    else { cn = 0; text = NULL; tn = 0; }
    qs_llm_vocab v;
    memset(&v, 0, sizeof v);
    v.bos = v.eos = -1;
    qs_err e = {{0}};
    int rc = qs_llm_vocab_txt_parse(s, vn, cfg, cn, "vocab.txt", &v, &e);
    CHECK(rc == 0 || rc == -1);
    if (rc) CHECK(e.msg[0] && !strchr(e.msg, '\n'));
    else {
        CHECK(v.model == QS_TOK_WORDPIECE && v.n > 0);
        if (text) tokenize(&v, text, tn);
    }
    qs_llm_vocab_free(&v);
    tokenize(&g_f.v, s, size);
    return 0;
}
