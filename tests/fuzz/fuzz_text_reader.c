/*
** libFuzzer target for the `--text` reader of `llm eval` and `llm sensitivity` (analysis/llm_text.c):
** qs_eval_read_text on a file holding the input, then qs_eval_text_ids with the vocabulary of
** tests/fixtures/llm/tok_bpe.json (run from the project root, as tests/fuzz/run.sh does) under the
** smollm pre-tokenizer, with and without BOS.
**
** Input: one flag byte (bit 0: the vocabulary adds BOS), then the text, any bytes.  The reader must
** return exactly the file's bytes and the same hash for the same bytes; the ids must be in the
** vocabulary, start with BOS when it is added, and spell the text back (invalid UTF-8 included:
** byte-level tokens of the raw bytes).
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../analysis/llm_text.h"
#include "../../store/llm_load.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

static qs_llm_file g_f;
static char g_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    qs_err e = {{0}};
    CHECK(qs_llm_load_tokenizer("tests/fixtures/llm/tok_bpe.json", &g_f, &e) == 0);
    const char *td = getenv("TMPDIR");   /* the system's temporary directory unless TMPDIR names one */
    snprintf(g_path, sizeof g_path, "%s/qscope-fuzz-text-XXXXXX", td && *td ? td : P_tmpdir);
    int fd = mkstemp(g_path);
    CHECK(fd >= 0);
    close(fd);
    char *t = NULL, h[33];
    size_t n = 0;
    CHECK(qs_eval_read_text("/nonexistent/qscope-fuzz.txt", &t, &n, h, &e) == -1 && t == NULL && e.msg[0]);
    return 0;
}

static void write_file(const uint8_t *d, size_t n)
{
    FILE *f = fopen(g_path, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(d, 1, n, f) == n);
    CHECK(fclose(f) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    const int add_bos = data[0] & 1;
    write_file(data + 1, size - 1);
    qs_err e = {{0}};
    char *text = NULL, hash[33], hash2[33];
    size_t len = 0;
    CHECK(qs_eval_read_text(g_path, &text, &len, hash, &e) == 0);
    CHECK(len == size - 1 && (len == 0 || memcmp(text, data + 1, len) == 0));
    CHECK(strlen(hash) == 32 && strspn(hash, "0123456789abcdef") == 32);
    char *again = NULL;
    size_t len2 = 0;
    CHECK(qs_eval_read_text(g_path, &again, &len2, hash2, &e) == 0 && len2 == len && !strcmp(hash, hash2));
    free(again);

    static qs_llm_file f;   /* shallow copy: only the tokenizer's flags differ */
    f = g_f;
    snprintf(f.v.pre, sizeof f.v.pre, "smollm");
    f.v.pre_json = NULL;
    f.v.pre_regex = NULL;
    f.v.ignore_merges = 0;
    f.v.add_bos = add_bos;
    f.v.bos = add_bos ? 1 : -1;
    int32_t *ids = NULL;
    int n = -1;
    CHECK(qs_eval_text_ids(g_path, &f, text, len, &ids, &n, &e) == 0);
    CHECK(n >= add_bos && (size_t)n <= len + 1);
    if (add_bos) CHECK(ids[0] == 1);
    char *back = malloc(len + 1);
    CHECK(back != NULL);
    size_t o = 0;
    for (int i = add_bos; i < n; i++) {
        CHECK(ids[i] >= 0 && ids[i] < f.v.n);
        char tok[256];
        size_t k = qs_llm_detok(&f.v, ids[i], tok, sizeof tok);
        CHECK(o + k <= len);
        memcpy(back + o, tok, k);
        o += k;
    }
    CHECK(o == len && (len == 0 || memcmp(back, text, len) == 0));
    free(back);
    free(ids);
    free(text);
    return 0;
}
