/* Typed weights, widened where they are used (llm_wtype.h). */
#include "llm_wtype.h"
#include "dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void qs_wt_row(const qs_wt *t, int r, int k0, int n, float *out)
{
    const qs_dtype_traits *tr = qs_dtype_get((qs_dtype)t->dt);
    const unsigned B = tr->block_elems;
    const uint8_t *row = t->p + (size_t)r * t->row_bytes;
    if (k0 % (int)B == 0 && n % (int)B == 0) {   /* whole blocks: straight into out */
        tr->decode(row + (size_t)(k0 / B) * tr->block_bytes, out, (size_t)n / B);
        return;
    }
    float tmp[1024];   /* blocks of up to 256 elements, a few at a time */
    const size_t per = sizeof tmp / sizeof *tmp / B;
    for (int k = k0; k < k0 + n;) {
        const size_t b0 = (size_t)k / B, b1 = ((size_t)(k0 + n) + B - 1) / B;
        const size_t nb = b1 - b0 < per ? b1 - b0 : per;
        tr->decode(row + b0 * tr->block_bytes, tmp, nb);
        const int from = k - (int)(b0 * B), end = (int)((b0 + nb) * B) < k0 + n ? (int)((b0 + nb) * B) : k0 + n;
        memcpy(out + (k - k0), tmp + from, (size_t)(end - k) * sizeof(float));
        k = end;
    }
}

void qs_wt_rows(const qs_wt *t, int r0, int r1, float *out)
{
    for (int r = r0; r < r1; r++) qs_wt_row(t, r, 0, t->cols, out + (size_t)(r - r0) * t->cols);
}

float *qs_wt_widen(const qs_wt *t)
{
    float *w = malloc((size_t)t->rows * t->cols * sizeof(float) + 1);
    if (w) qs_wt_rows(t, 0, t->rows, w);
    return w;
}

float *qs_wt_widen_cat(const qs_wt *t, int n)
{
    size_t rows = 0;
    for (int i = 0; i < n; i++) rows += (size_t)t[i].rows;
    float *w = malloc(rows * (size_t)t[0].cols * sizeof(float) + 1), *p = w;
    for (int i = 0; w && i < n; i++) {
        qs_wt_rows(&t[i], 0, t[i].rows, p);
        p += (size_t)t[i].rows * t[i].cols;
    }
    return w;
}

void qs_wt_release(const qs_wt *t)
{
    if (!t || !t->mapped) return;
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    /* the pages wholly inside the matrix (its neighbours' first and last pages stay: they are the next
    ** product's, or small) */
    uintptr_t a = ((uintptr_t)t->p + pg - 1) / pg * pg, b = ((uintptr_t)t->p + qs_wt_bytes(t)) / pg * pg;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

uint64_t qs_peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

int qs_peak_rss_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int rc = fputs("5", f) < 0;
    return fclose(f) || rc ? -1 : 0;
}
