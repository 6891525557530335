/*
** The model-loading foundation of `llm eval`: rotate_half RoPE and Q/K/V biases in the forward pass
** (kernels/llm.c), and the R lazy-load reader that yields the evaluation text (datasets/rdata.c).
** The loaders themselves are checked against an independent float64 forward on generated models by
** tests/e2e/llm_models.sh (Python generators, nothing committed).
*/
#include "test_util.h"

#include <math.h>
#include <zlib.h>

#include "../../datasets/rdata.h"
#include "../../kernels/llm.h"

static uint64_t rs = 88172645463325252ull;
static float urand(void)
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (float)((rs >> 40) / (double)(1u << 24)) * 2.0f - 1.0f;
}

static void random_model(qs_llm_model *m, int neox)
{
    qs_llm_cfg c = {.n_layer = 2, .dim = 32, .n_head = 4, .n_kv_head = 2, .head_dim = 8, .ffn = 48, .vocab = 40,
                    .ctx = 16, .rope_base = 10000.0f, .eps = 1e-5f, .rope_neox = neox};
    qs_err e = {{0}};
    assert_int_equal(qs_llm_alloc(m, &c, 1, &e), 0);
    for (size_t i = 0; i < m->arena_len; i++) m->arena[i] = 0.3f * urand();
    for (int l = 0; l < c.n_layer; l++)
        for (int i = 0; i < c.dim; i++) m->L[l].attn_norm[i] = m->L[l].ffn_norm[i] = 1.0f;
}

/* llama.cpp's permutation of Hugging Face Q/K rows: within each head, row 2i <- i, 2i+1 <- i + hd/2. */
static void permute_rows(float *w, int heads, int hd, int cols)
{
    size_t n = (size_t)hd * cols;
    float *tmp = malloc(n * sizeof *tmp);
    for (int h = 0; h < heads; h++) {
        float *p = w + (size_t)h * n;
        memcpy(tmp, p, n * sizeof *tmp);
        for (int i = 0; i < hd / 2; i++) {
            memcpy(p + (size_t)(2 * i) * cols, tmp + (size_t)i * cols, (size_t)cols * sizeof *tmp);
            memcpy(p + (size_t)(2 * i + 1) * cols, tmp + (size_t)(i + hd / 2) * cols, (size_t)cols * sizeof *tmp);
        }
    }
    free(tmp);
}

static void hidden(const qs_llm_model *m, float *out)
{
    qs_err e = {{0}};
    int32_t tok[6] = {3, 17, 5, 39, 0, 22};
    qs_llm_state *s = qs_llm_state_new(&m->c, 1, 8, 8, &e);
    assert_non_null(s);
    assert_int_equal(qs_llm_forward(m, NULL, s, tok, 1, 6, 0, out, NULL, NULL, &e), 0);
    qs_llm_state_free(s);
}

/* rotate_half on stored rows == adjacent pairs on permuted rows (and permuted Q/K biases) */
static void test_rope_neox_equals_permuted(void **st)
{
    (void)st;
    qs_llm_model a, b;
    qs_err e = {{0}};
    random_model(&a, 1);
    assert_int_equal(qs_llm_alloc_bias(&a, &e), 0);
    for (size_t i = 0; i < a.bias_len; i++) a.bias_arena[i] = urand();
    assert_int_equal(qs_llm_clone(&b, &a, &e), 0);
    assert_non_null(b.bias_arena);
    assert_memory_equal(b.bias_arena, a.bias_arena, a.bias_len * sizeof(float));
    b.c.rope_neox = 0;
    for (int l = 0; l < a.c.n_layer; l++) {
        permute_rows(b.L[l].wq, a.c.n_head, a.c.head_dim, a.c.dim);
        permute_rows(b.L[l].wk, a.c.n_kv_head, a.c.head_dim, a.c.dim);
        permute_rows(b.L[l].bq, a.c.n_head, a.c.head_dim, 1);
        permute_rows(b.L[l].bk, a.c.n_kv_head, a.c.head_dim, 1);
    }
    float ha[6 * 32], hb[6 * 32];
    hidden(&a, ha);
    hidden(&b, hb);
    double md = 0;
    for (int i = 0; i < 6 * 32; i++) md = fmax(md, fabs(ha[i] - hb[i]));
    assert_true(md < 1e-5);
    /* and the two conventions really differ on the same rows */
    b.c.rope_neox = 1;
    hidden(&b, hb);
    md = 0;
    for (int i = 0; i < 6 * 32; i++) md = fmax(md, fabs(ha[i] - hb[i]));
    assert_true(md > 1e-3);
    qs_llm_free(&a);
    qs_llm_free(&b);
}

/* zero biases change nothing (bit for bit); a Q/K/V bias changes the output */
static void test_bias(void **st)
{
    (void)st;
    qs_llm_model a, b;
    qs_err e = {{0}};
    random_model(&a, 0);
    assert_int_equal(qs_llm_clone(&b, &a, &e), 0);
    assert_null(b.bias_arena);
    assert_int_equal(qs_llm_alloc_bias(&b, &e), 0);
    memset(b.bias_arena, 0, b.bias_len * sizeof(float));
    float ha[6 * 32], hb[6 * 32];
    hidden(&a, ha);
    hidden(&b, hb);
    assert_memory_equal(ha, hb, sizeof ha);
    float *which[3] = {b.L[1].bq, b.L[1].bk, b.L[1].bv};
    for (int k = 0; k < 3; k++) {
        which[k][2] = 0.5f;
        hidden(&b, hb);
        assert_memory_not_equal(ha, hb, sizeof ha);
        which[k][2] = 0.0f;
    }
    qs_llm_free(&a);
    qs_llm_free(&b);
}

/* ---------------------------------------------------------------- R data */

static size_t be32(uint8_t *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)(u >> 24); p[1] = (uint8_t)(u >> 16); p[2] = (uint8_t)(u >> 8); p[3] = (uint8_t)u;
    return 4;
}

/* serialize(c(lines...)) in R's XDR format, version 3 */
static size_t serialize_strs(uint8_t *o, const char *const *lines, int n)
{
    size_t p = 0;
    memcpy(o, "X\n", 2); p = 2;
    p += be32(o + p, 3); p += be32(o + p, 0x040201); p += be32(o + p, 0x030500);
    p += be32(o + p, 5); memcpy(o + p, "UTF-8", 5); p += 5;
    p += be32(o + p, 16); p += be32(o + p, n);
    for (int i = 0; i < n; i++) {
        p += be32(o + p, 9 | (64 << 12));
        if (!lines[i]) { p += be32(o + p, -1); continue; }
        size_t l = strlen(lines[i]);
        p += be32(o + p, (int32_t)l);
        memcpy(o + p, lines[i], l);
        p += l;
    }
    return p;
}

/* blob = 4-byte big-endian declared length + zlib(raw) */
static size_t make_blob(uint8_t *o, const uint8_t *raw, size_t n, uint32_t declared)
{
    uLongf cl = compressBound(n);
    be32(o, (int32_t)declared);
    assert_int_equal(compress2(o + 4, &cl, raw, n, 9), Z_OK);
    return 4 + cl;
}

static void test_rdb_text(void **st)
{
    (void)st;
    const char *lines[] = {"TITLE", "", "  first line of", "the paragraph  ", "", "", NULL, "last"};
    uint8_t raw[512], blob[1024];
    size_t n = serialize_strs(raw, lines, 8);
    size_t bl = make_blob(blob, raw, n, (uint32_t)n);
    char *t;
    size_t tl, nl;
    qs_err e = {{0}};
    assert_int_equal(qs_rdb_text(blob, bl, 0, bl, &t, &tl, &nl, &e), 0);
    assert_string_equal(t, "TITLE\n\nfirst line of the paragraph\n\nlast\n");
    assert_int_equal(tl, strlen(t));
    assert_int_equal(nl, 8);
    free(t);
    /* header claims less or more than the stream holds */
    bl = make_blob(blob, raw, n, (uint32_t)n - 1);
    assert_int_equal(qs_rdb_text(blob, bl, 0, bl, &t, &tl, &nl, &e), -1);
    assert_non_null(strstr(e.msg, "its header says"));
    bl = make_blob(blob, raw, n, 0x7FFFFFFF);   /* never allocated: the buffer grows with the stream */
    assert_int_equal(qs_rdb_text(blob, bl, 0, bl, &t, &tl, &nl, &e), -1);
    assert_non_null(strstr(e.msg, "holds"));
    /* truncated stream, blob outside the file, garbage */
    bl = make_blob(blob, raw, n, (uint32_t)n);
    assert_int_equal(qs_rdb_text(blob, bl - 6, 0, bl - 6, &t, &tl, &nl, &e), -1);
    assert_null(strchr(e.msg, '\n'));
    assert_int_equal(qs_rdb_text(blob, bl, 4, bl, &t, &tl, &nl, &e), -1);
    assert_non_null(strstr(e.msg, "outside"));
    /* a vector length beyond the data: refused before allocating */
    be32(raw + 2 + 12 + 4 + 5 + 4, 0x7FFFFFF0);
    bl = make_blob(blob, raw, n, (uint32_t)n);
    assert_int_equal(qs_rdb_text(blob, bl, 0, bl, &t, &tl, &nl, &e), -1);
    assert_non_null(strstr(e.msg, "overruns"));
}

static void test_rtext_join_latin1(void **st)
{
    (void)st;
    const char *l[] = {"Caf\xe9", "ok"};
    uint32_t len[] = {4, 2};
    uint8_t lat[] = {1, 0};
    char *t;
    size_t tl;
    qs_err e = {{0}};
    assert_int_equal(qs_rtext_join(l, len, lat, 2, &t, &tl, &e), 0);
    assert_string_equal(t, "Caf\xc3\xa9 ok\n");
    free(t);
    assert_int_equal(qs_rtext_join(l, len, lat, 0, &t, &tl, &e), 0);   /* empty vector: empty text */
    assert_int_equal(tl, 0);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_neox_equals_permuted),
        cmocka_unit_test(test_bias),
        cmocka_unit_test(test_rdb_text),
        cmocka_unit_test(test_rtext_join_latin1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
