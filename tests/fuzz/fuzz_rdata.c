/*
** libFuzzer target for the R lazy-load database reader (store/rdata.c, `qscope llm text`).
** Input: a 4-byte little-endian length L, L bytes of .rdx image, the rest an .rdb image.  Every
** object the index names is read; the .rdb is also read as one blob from offset 0.  On failure the
** message must be one line; on success the text must be NUL-terminated, with no NUL inside.
*/
#include <stdlib.h>
#include <string.h>

#include "../../store/rdata.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

static void one(const uint8_t *rdb, size_t len, uint64_t off, uint64_t blen)
{
    qs_err e = {{0}};
    char *t = NULL;
    size_t tl = 0, nl = 0;
    if (qs_rdb_text(rdb, len, off, blen, &t, &tl, &nl, &e)) {
        CHECK(t == NULL && e.msg[0] && !strchr(e.msg, '\n'));
        return;
    }
    CHECK(t && t[tl] == 0 && strlen(t) == tl);
    free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    uint32_t L;
    memcpy(&L, data, 4);
    if (L > size - 4) L = (uint32_t)(size - 4);
    const uint8_t *rdx = data + 4, *rdb = data + 4 + L;
    size_t rlen = size - 4 - L;
    qs_err e = {{0}};
    qs_rdb_entry *ent;
    size_t n;
    if (qs_rdx_parse(rdx, L, &ent, &n, &e) == 0) {
        for (size_t i = 0; i < n; i++) {
            CHECK(ent[i].name[0] && ent[i].name[0] != '.' && !strchr(ent[i].name, '/'));
            one(rdb, rlen, ent[i].off, ent[i].len);
        }
        free(ent);
    } else {
        CHECK(ent == NULL && e.msg[0] && !strchr(e.msg, '\n'));
    }
    one(rdb, rlen, 0, rlen);
    return 0;
}
