/*
** Typed weights (kernels/llm_wtype.h): a row range decodes to the storage type's own decoder's values
** (unaligned ranges of block types included); the panel products over typed weights give the bits of
** the same products over the widened FP32 matrix at every SIMD level and thread count; and a forward
** pass plus logits of a model whose matrices, embedding and head are typed (BF16, F16, Q8_0, Q4_K) are
** the bits of the same model widened to FP32, through the panels (many rows) and the few-row kernels;
** what needs FP32 arrays (clone, rounding in place, views) refuses such a model.
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/dtype.h"
#include "../../kernels/format_ggml.h"
#include "../../kernels/llm.h"
#include "../../kernels/llm_pgemm.h"
#include "../../kernels/llm_wtype.h"
#include "../../kernels/simd.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float urand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 - 0.5);
}

/* rows x cols random values encoded as dt (a new allocation) into *t. */
static uint8_t *encode(qs_dtype dt, int rows, int cols, float scale, qs_wt *t)
{
    const qs_dtype_traits *tr = qs_dtype_get(dt);
    const size_t rb = (size_t)cols / tr->block_elems * tr->block_bytes;
    uint8_t *p = malloc(rb * rows);
    float *x = malloc((size_t)cols * sizeof(float));
    assert_non_null(p); assert_non_null(x);
    qs_err e = {{0}};
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < cols; k++) x[k] = scale * urand();
        uint8_t *o = p + (size_t)r * rb;
        if (dt == QS_DT_F32) memcpy(o, x, (size_t)cols * 4);
        else if (dt == QS_DT_BF16)
            for (int k = 0; k < cols; k++) qs_gg_wr16(o + 2 * k, (uint16_t)(qs_gg_bits(x[k]) >> 16));
        else if (dt == QS_DT_F16)
            for (int k = 0; k < cols; k++) qs_gg_wr16(o + 2 * k, qs_gg_f16(x[k]));
        else assert_int_equal(qs_ggml_quantize(qs_ggml_codec_find(tr->name), x, (size_t)cols, o, &e), 0);
    }
    free(x);
    *t = (qs_wt){p, rb, (int)dt, rows, cols, 0};
    return p;
}

static const qs_dtype kTypes[] = {QS_DT_BF16, QS_DT_F16, QS_DT_Q8_0, QS_DT_Q4_K, QS_DT_F32};

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof kTypes / sizeof *kTypes; i++) {
        qs_wt t;
        uint8_t *p = encode(kTypes[i], 3, 1024, 1.0f, &t);
        float *all = malloc(1024 * sizeof(float)), part[700];
        qs_dtype_get(kTypes[i])->decode(p + t.row_bytes, all, 1024 / qs_dtype_get(kTypes[i])->block_elems);
        const int ranges[][2] = {{0, 1024}, {37, 300}, {255, 2}, {256, 256}, {300, 700}};
        for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
            qs_wt_row(&t, 1, ranges[r][0], ranges[r][1], ranges[r][1] <= 700 ? part : all);
            if (ranges[r][1] <= 700) assert_memory_equal(part, all + ranges[r][0], (size_t)ranges[r][1] * sizeof(float));
        }
        free(all);
        free(p);
    }
}

/* y = x W^T over typed weights == over the widened matrix, every level, 1 and 2 threads. */
static void test_pgemm(void **state)
{
    (void)state;
    enum { R = 29, K = 768, N = 70 };
    float *x = malloc((size_t)R * K * sizeof(float)), *y0 = malloc((size_t)R * N * sizeof(float)), *y1 = malloc((size_t)R * N * sizeof(float));
    for (int i = 0; i < R * K; i++) x[i] = urand();
    for (size_t i = 0; i < sizeof kTypes / sizeof *kTypes; i++) {
        qs_wt t;
        uint8_t *p = encode(kTypes[i], N, K, 0.1f, &t);
        float *W = qs_wt_widen(&t);
        assert_non_null(W);
        const int levels[] = {QS_SIMD_SCALAR, QS_SIMD_AVX2, QS_SIMD_AVX512};
        for (int lv = 0; lv < 3; lv++)
            for (int th = 1; th <= 2; th++) {
                qs_simd_force(levels[lv]);
                qs_pgemm a = {y0, x, W, R, K, N, K, N, NULL, 0, 0, 0, 0, NULL}, b = {y1, x, NULL, R, K, N, K, N, NULL, 0, 0, 0, 0, &t};
                qs_pgemm_run(&a, th);
                qs_pgemm_run(&b, th);
                qs_simd_force(-1);
                assert_memory_equal(y0, y1, (size_t)R * N * sizeof(float));
            }
        free(W);
        free(p);
    }
    free(x); free(y0); free(y1);
}

/* ---------------------------------------------------------------- a whole model */

static void forward_logits(const qs_llm_model *m, int T, float *logits)
{
    qs_err e = {{0}};
    const int d = m->c.dim;
    qs_llm_state *s = qs_llm_state_new(&m->c, 1, T, T, &e);
    assert_non_null(s);
    int32_t tok[40];
    for (int i = 0; i < T; i++) tok[i] = (i * 37 + 5) % m->c.vocab;
    float *hid = malloc((size_t)T * d * sizeof(float)), *scr = malloc((size_t)T * d * sizeof(float));
    qs_llm_numerics nx = {.resq = QS_RESQ_NONE, .scaled = 1};
    assert_int_equal(qs_llm_forward(m, &nx, s, tok, 1, T, 0, hid, NULL, NULL, &e), 0);
    assert_int_equal(qs_llm_logits_st(m, &nx, s, hid, T, scr, logits, &e), 0);
    free(hid); free(scr);
    qs_llm_state_free(s);
}

static void test_forward(void **state)
{
    (void)state;
    const qs_llm_cfg c = {.n_layer = 2, .dim = 256, .n_head = 4, .n_kv_head = 2, .head_dim = 64, .ffn = 512, .vocab = 300,
                         .ctx = 64, .rope_base = 10000.0f, .eps = 1e-5f};
    for (size_t ti = 0; ti < 4; ti++) {
        qs_err e = {{0}};
        qs_llm_model f, m;
        assert_int_equal(qs_llm_alloc(&f, &c, 0, &e), 0);
        for (size_t i = 0; i < f.arena_len; i++) f.arena[i] = 1.0f + 0.1f * urand();   /* norms; matrices below */
        qs_wt tw[2 * QS_WT_NROLE + 2];
        uint8_t *own[2 * QS_WT_NROLE + 2];
        float **dst[2 * QS_WT_NROLE + 2];
        int n = 0;
        const int qd = 256, kvd = 128, rows[7] = {qd, kvd, kvd, 256, 512, 512, 256}, cols[7] = {256, 256, 256, qd, 256, 256, 512};
        for (int l = 0; l < 2; l++) {
            float **mat[7] = {&f.L[l].wq, &f.L[l].wk, &f.L[l].wv, &f.L[l].wo, &f.L[l].w_gate, &f.L[l].w_up, &f.L[l].w_down};
            for (int r = 0; r < 7; r++, n++) { own[n] = encode(kTypes[ti], rows[r], cols[r], 0.12f, &tw[n]); dst[n] = mat[r]; }
        }
        own[n] = encode(kTypes[ti], c.vocab, c.dim, 1.0f, &tw[n]); dst[n++] = &f.tok_embd;
        own[n] = encode(kTypes[ti], c.vocab, c.dim, 0.1f, &tw[n]); dst[n++] = &f.output;
        for (int i = 0; i < n; i++) {   /* the FP32 model: the typed values widened into its arena */
            float *w = qs_wt_widen(&tw[i]);
            memcpy(*dst[i], w, (size_t)tw[i].rows * tw[i].cols * sizeof(float));
            free(w);
        }
        m = f;   /* the typed model: same norms, matrices only typed */
        qs_llm_layer L[2] = {f.L[0], f.L[1]};
        m.L = L;
        for (int l = 0; l < 2; l++) {
            L[l].wq = L[l].wk = L[l].wv = L[l].wo = L[l].w_gate = L[l].w_up = L[l].w_down = NULL;
            L[l].tw = &tw[l * QS_WT_NROLE];
        }
        m.tok_embd = m.output = NULL;
        m.tw_embd = &tw[n - 2];
        m.tw_out = &tw[n - 1];
        const int Ts[] = {40, 3, 9};   /* panels; the few-row kernel; SGEMM */
        for (int k = 0; k < 3; k++) {
            float *a = malloc((size_t)Ts[k] * c.vocab * sizeof(float)), *b = malloc((size_t)Ts[k] * c.vocab * sizeof(float));
            forward_logits(&f, Ts[k], a);
            forward_logits(&m, Ts[k], b);
            if (memcmp(a, b, (size_t)Ts[k] * c.vocab * sizeof(float))) print_message("# type %s, %d rows differ\n", qs_dtype_get(kTypes[ti])->name, Ts[k]);
            assert_memory_equal(a, b, (size_t)Ts[k] * c.vocab * sizeof(float));
            int finite = 1;
            for (int i = 0; i < Ts[k] * c.vocab; i++) finite &= isfinite(a[i]) != 0;
            assert_true(finite);
            free(a); free(b);
        }
        for (int i = 0; i < n; i++) free(own[i]);
        qs_llm_free(&f);
    }
}

/* What needs FP32 arrays refuses a model with typed weights (one line), leaving dst empty. */
static void test_refuse(void **state)
{
    (void)state;
    const qs_llm_cfg c = {.n_layer = 1, .dim = 64, .n_head = 2, .n_kv_head = 1, .head_dim = 32, .ffn = 64, .vocab = 40,
                         .ctx = 16, .rope_base = 10000.0f, .eps = 1e-5f};
    qs_err e = {{0}};
    qs_llm_model f, d;
    assert_int_equal(qs_llm_alloc(&f, &c, 1, &e), 0);
    qs_wt t = {NULL, 0, QS_DT_BF16, 40, 64, 0};
    f.tw_embd = f.tw_out = &t;
    memset(&d, 0x5a, sizeof d);
    assert_int_equal(qs_llm_clone(&d, &f, &e), -1);
    assert_non_null(strstr(e.msg, "mapped"));
    assert_null(d.arena);
    memset(&d, 0x5a, sizeof d);
    const uint8_t layers[1] = {1};
    qs_apply w;
    memset(&w, 0, sizeof w);
    assert_int_equal(qs_llm_view_quantize_layers(&d, &f, layers, &w, 1, &e), -1);
    assert_null(d.L);
    assert_int_equal(qs_llm_quantize_weights(&f, &w, 1, &e), -1);
    f.tw_embd = f.tw_out = NULL;
    qs_llm_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_pgemm),
        cmocka_unit_test(test_forward),
        cmocka_unit_test(test_refuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
