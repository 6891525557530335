/*
** libFuzzer target for a sharded Hugging Face directory (store/llm_load_hf.c): config.json,
** model.safetensors.index.json and two shards, model-00001-of-00002.safetensors and
** model-00002-of-00002.safetensors.  The input is the four files joined by the line "\n--8<--\n"
** (missing parts: no such file); they are written to a private directory, then loaded.  On failure
** the message must be one line naming a path in that directory; on success every tensor must lie in
** one shard only, the one the index maps it to, and a two-token forward pass must run.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "fuzz_llm.h"
#include "../../store/container.h"

static char dir[64];
static const char *const names[4] = {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                                     "model-00002-of-00002.safetensors"};

static void cleanup(void)
{
    char path[160];
    for (int i = 0; i < 4; i++) { snprintf(path, sizeof path, "%s/%s", dir, names[i]); unlink(path); }
    rmdir(dir);
}

static void put(const char *name, const uint8_t *p, size_t n, int present)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
    if (!present) return;
    FILE *f = fopen(path, "wb");
    CHECK(f);
    if (n) CHECK(fwrite(p, 1, n, f) == n);
    CHECK(fclose(f) == 0);
}

/* Which of the two shards hold tensor `name` (bit 0: shard 1, bit 1: shard 2). */
static int holders(const qs_container *c, const char *name)
{
    int m = 0;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < c[k].n; i++)
            if (!strcmp(c[k].t[i].name, name)) m |= 1 << k;
    return m;
}

/* After a successful load: the index maps only to the two shards, each mapped tensor is in its shard
** alone, and no tensor is in both. */
static void check_index(const uint8_t *idx, size_t n, const uint8_t *s[2], const size_t sl[2])
{
    json_t *j = json_loadb((const char *)idx, n, JSON_REJECT_DUPLICATES, NULL);
    CHECK(j);
    qs_container c[2];
    memset(c, 0, sizeof c);
    qs_err e = {{0}};
    const char *key;
    json_t *val;
    int used[2] = {0, 0};   /* the loader reads only the shards the index names */
    json_object_foreach(json_object_get(j, "weight_map"), key, val)
        for (int k = 0; k < 2; k++) used[k] |= !strcmp(json_string_value(val), names[2 + k]);
    for (int k = 0; k < 2; k++)
        if (used[k]) CHECK(s[k] && qs_parse_safetensors(s[k], sl[k], NULL, &c[k], &e) == 0);
    json_object_foreach(json_object_get(j, "weight_map"), key, val) {
        const char *sh = json_string_value(val);
        int want = !strcmp(sh, names[2]) ? 1 : !strcmp(sh, names[3]) ? 2 : 0;
        CHECK(want && holders(c, key) == want);
    }
    for (size_t i = 0; i < c[0].n; i++) CHECK(holders(c, c[0].t[i].name) == 1);
    for (int k = 0; k < 2; k++) qs_container_free(&c[k]);
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/qscope-fuzz-sh-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : P_tmpdir);   /* $TMPDIR, else the system's */
        CHECK(mkdtemp(dir));
        atexit(cleanup);
    }
    static const char sep[] = "\n--8<--\n";
    const uint8_t *p = data, *end = data + size, *part[4];
    size_t plen[4];
    for (int i = 0; i < 4; i++) {
        const uint8_t *q = p ? memmem(p, (size_t)(end - p), sep, sizeof sep - 1) : NULL;
        plen[i] = p ? (size_t)((q ? q : end) - p) : 0;
        part[i] = p;
        put(names[i], p, plen[i], p != NULL);
        p = q ? q + sizeof sep - 1 : NULL;
    }
    qs_llm_file f;
    qs_err e = {{0}};
    if (qs_llm_load_hf(dir, &f, &e) != 0) {
        CHECK(strncmp(e.msg, dir, strlen(dir)) == 0 && !strchr(e.msg, '\n'));
        CHECK(f.m.arena == NULL && f.v.text == NULL);
        return 0;
    }
    CHECK(qs_llm_cfg_check(&f.m.c, &e) == 0);
    CHECK(part[1]);   /* loaded with the index's two shards */
    const uint8_t *s[2] = {part[2], part[3]};
    const size_t sl[2] = {plen[2], plen[3]};
    check_index(part[1], plen[1], s, sl);
    check_forward(&f.m);
    qs_llm_file_free(&f);
    return 0;
}
