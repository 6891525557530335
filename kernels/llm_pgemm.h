/*
** The prefill's weight products on qscope's own thread pool: y[R][N] = x[R][K] . W[N][K]^T, cut into
** panels of 32 output columns.  A task packs its panel of W once ([k][32], zero-padded past N) and runs
** every input row against it: 12 rows x 32 columns of accumulators (AVX-512; AVX2: 6 x 16), each input
** value broadcast in turn.  Every element is one FMA chain over k = 0 .. K-1 from +0, so the result is
** the same bits whatever R, the other rows, the thread count or the SIMD level (the portable path is
** fmaf in the same order): a token's values never depend on the tokens beside it.
**
** A task takes a unit of two panels; with packed weights on AVX-512 both at once, 6 rows x 64 columns
** (each broadcast value feeds 4 FMAs: half the traffic of x through L1).  With weights packed once, a
** product whose x passes 1 MB is cut into blocks of rows as well (tasks block-major, every unit of a
** block), so that the block stays in L2 while the units pass over it.
**
** One pool, dynamic hand-out of panels: no second thread pool spinning beside qscope's (OpenBLAS's
** threads), and a core taken by another process slows the product by its share only.
*/
#ifndef QS_LLM_PGEMM_H
#define QS_LLM_PGEMM_H

#include <stddef.h>

#define QS_PGEMM_NR 32

/* One product: x rows of stride ldx, y rows of stride ldy; P: W packed by qs_pgemm_cache (or NULL:
** each task packs its panel as it goes).  W is [N][K] with rows of stride ldw (0: K), or, with wt,
** [K][N] with rows of stride ldw (0: N), i.e. y = x . W (attention's P V).  fill (qs_pgemm_cache_bind):
** P is still to be written, and each panel packs its part of W into P just before it uses it (the first
** product through a matrix packs it while it is in cache, with no pass of its own).  ldp: P's panels
** are ldp k's apart (0: K), so a product over the first K k's of a longer packed matrix reads it in place
** (attention's P V over the keys a tile sees). */
typedef struct qs_pgemm {
    float *y;
    const float *x, *W;
    int R, K, N, ldx, ldy;
    const float *P;
    int ldw, wt, fill, ldp;
    const struct qs_wt *tw;   /* typed weights (llm_wtype.h; W NULL, not wt): each panel widens its block of them
                              ** as it packs it (same values, same bits); never kept packed (bind: P = NULL) */
} qs_pgemm;

/* Panels of the product (ceil(N / 32)). */
size_t qs_pgemm_panels(const qs_pgemm *g);
/* Columns [32 p, 32 p + 32) of y; pack: QS_PGEMM_PACK floats, 64-byte aligned. */
void qs_pgemm_panel(const qs_pgemm *g, size_t p, float *pack);
/* The whole product on `threads` pool slots (<= 1: the calling thread). */
void qs_pgemm_run(const qs_pgemm *g, int threads);
/* Several products in one pool call (their panels in order). */
void qs_pgemm_run_n(const qs_pgemm *g, int n, int threads);
/* Blocks of rows a product with packed weights is cut into (1: none) so that a block of x stays in L2
** while every panel passes over it (K = 1536: 3 MB of x for 512 rows, reread from L3 by each panel). */
int qs_pgemm_row_blocks(const qs_pgemm *g);
/* Rows [r0, r1) of block b of nb (whole tiles of 12 rows but the last). */
void qs_pgemm_block_rows(int R, int nb, int b, int *r0, int *r1);
/* Units of a product: pairs of panels (64 columns; the last may be one panel). */
size_t qs_pgemm_units(const qs_pgemm *g);
/* Task t of the nb x units tasks of a product: block t / units of rows, unit t % units. */
void qs_pgemm_block(const qs_pgemm *g, int nb, size_t t, float *pack);
/* Floats of the packing buffer qs_pgemm_panel needs. */
#define QS_PGEMM_PACK (QS_PGEMM_NR * 256)

/* Weights packed once: [panel][k][32] copies of the matrices a caller multiplies again and again
** (model evaluation: every chunk through the same weights), keyed by the matrix's address, up to a
** budget of floats (past it, products pack as they go).  The matrices must not change or move while
** the cache lives. */
typedef struct qs_pgemm_cache qs_pgemm_cache;
qs_pgemm_cache *qs_pgemm_cache_new(size_t max_floats);
void qs_pgemm_cache_free(qs_pgemm_cache *c);
/* The packed copy of W[N][K] (packed on the pool on first use), or NULL (c NULL, over budget, no memory). */
const float *qs_pgemm_cache_get(qs_pgemm_cache *c, const float *W, int N, int K, int threads);
/* g->P = the packed copy of g->W (g: [N][K], rows of stride K), and g->fill = 1 when it is new: the
** product that follows packs it (run every panel of it before another product reads g->P).  c NULL,
** over budget or no memory: g->P = NULL (panels pack as they go). */
void qs_pgemm_cache_bind(qs_pgemm_cache *c, qs_pgemm *g);

#endif
