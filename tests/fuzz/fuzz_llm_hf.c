/*
** libFuzzer target for the Hugging Face directory loader (store/llm_load_hf.c): config.json,
** tokenizer.json and model.safetensors.  The input is the three files joined by the line
** "\n--8<--\n" (missing parts: no such file); they are written to a private directory, then loaded.
** On failure the message must be one line naming a path in that directory; on success the model must
** be self-consistent and a two-token forward pass must run.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_llm.h"

static char dir[64];

static void cleanup(void)
{
    const char *names[3] = {"config.json", "tokenizer.json", "model.safetensors"};
    char path[128];
    for (int i = 0; i < 3; i++) { snprintf(path, sizeof path, "%s/%s", dir, names[i]); unlink(path); }
    rmdir(dir);
}

static void put(const char *name, const uint8_t *p, size_t n, int present)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
    if (!present) return;
    FILE *f = fopen(path, "wb");
    CHECK(f);
    if (n) CHECK(fwrite(p, 1, n, f) == n);
    CHECK(fclose(f) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/qscope-fuzz-hf-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : P_tmpdir);   /* $TMPDIR, else the system's */
        CHECK(mkdtemp(dir));
        atexit(cleanup);
    }
    static const char sep[] = "\n--8<--\n";
    const char *names[3] = {"config.json", "tokenizer.json", "model.safetensors"};
    const uint8_t *p = data, *end = data + size;
    for (int i = 0; i < 3; i++) {
        const uint8_t *q = p ? memmem(p, (size_t)(end - p), sep, sizeof sep - 1) : NULL;
        size_t n = p ? (size_t)((q ? q : end) - p) : 0;
        put(names[i], p, n, p != NULL);
        p = q ? q + sizeof sep - 1 : NULL;
    }
    qs_llm_file f;
    qs_err e = {{0}};
    if (qs_llm_load_hf(dir, &f, &e) != 0) {
        CHECK(strncmp(e.msg, dir, strlen(dir)) == 0 && !strchr(e.msg, '\n'));
        CHECK(f.m.arena == NULL && f.v.text == NULL && f.v.pre_json == NULL);
        return 0;
    }
    CHECK(qs_llm_cfg_check(&f.m.c, &e) == 0);
    CHECK(f.v.n == 0 || f.v.n == f.m.c.vocab);
    for (int i = 0; i < f.v.nmerges && i < 64; i++) CHECK(f.v.mtext[f.v.moff[i]] || 1);
    check_forward(&f.m);
    qs_llm_file_free(&f);
    return 0;
}
