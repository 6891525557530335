/*
** libFuzzer target for the importance-matrix reader (store/imatrix.h: llama.cpp's GGUF and legacy .dat
** formats).  Any input: 0 with sorted, unique entries whose sizes fit the input and whose importances
** can be asked for, or -1 with one line and nothing left allocated.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/imatrix.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    qs_imatrix m;
    qs_err e = {{0}};
    if (qs_imatrix_parse(data, size, &m, &e)) {
        CHECK(e.msg[0] && !strchr(e.msg, '\n'));
        CHECK(!m.n && !m.e && !m.datasets);
        return 0;
    }
    CHECK(m.n > 0);
    uint64_t total = 0;
    for (int i = 0; i < m.n; i++) {
        const qs_imat_entry *en = &m.e[i];
        CHECK(en->ne0 > 0 && en->nmat > 0 && en->name && en->name[0]);
        CHECK(!i || strcmp(m.e[i - 1].name, en->name) < 0);
        CHECK(qs_imatrix_find(&m, en->name) == en);
        total += (uint64_t)en->ne0 * (uint64_t)en->nmat * 4;
        float *w = NULL;
        if (qs_imatrix_weights(&m, en, &w, &e) == 0) free(w);
    }
    CHECK(total <= size);
    qs_imatrix_free(&m);
    return 0;
}
