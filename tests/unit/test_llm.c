/*
** The Llama forward pass (kernels/llm.c) and the GGUF model loader (store/llm_load_gguf.c) on the
** committed tiny synthetic models (tests/llm/make_tiny_gguf.py), whose reference logits come from
** an independent PyTorch float64 implementation (tests/llm/torch_ref.py).
*/
#include "test_util.h"
#include "test_llm_util.h"

#include <jansson.h>
#include <math.h>

#include "../../store/llm_load.h"
#include "../../kernels/cast_scale.h"
#include "../../kernels/format.h"
#include "../../kernels/llm.h"
#include "../../store/container.h"
#include "../../store/tensor.h"

static int read_ids(int32_t *ids, int cap)
{
    FILE *f = fopen("fixtures/llm/tiny_ids.txt", "r");
    assert_non_null(f);
    int n = 0, v;
    while (n < cap && fscanf(f, "%d,", &v) == 1) ids[n++] = v;
    fclose(f);
    return n;
}

static float *read_npy(const char *path, uint64_t *rows, uint64_t *cols)
{
    size_t len = 0;
    uint8_t *buf = tu_slurp(path, &len);
    assert_non_null(buf);
    qs_container c;
    qs_err e = {{0}};
    assert_int_equal(qs_parse_npy(buf, len, NULL, &c, &e), 0);
    assert_int_equal(c.t[0].ndim, 2);
    *rows = c.t[0].shape[0];
    *cols = c.t[0].shape[1];
    float *out = malloc(c.t[0].numel * sizeof(float));
    qs_treader *r = qs_treader_from_image(buf, len, &c.t[0], path, &e);
    assert_non_null(r);
    assert_int_equal(qs_treader_read_f32(r, 0, (size_t)c.t[0].numel, out, &e), 0);
    qs_treader_close(r);
    qs_container_free(&c);
    free(buf);
    return out;
}

/* Logits of ids (one sequence, one teacher-forced pass). */
static float *logits_of(const qs_llm_model *m, const qs_llm_numerics *nx, const int32_t *ids, int n)
{
    qs_err e = {{0}};
    qs_llm_state *s = qs_llm_state_new(&m->c, 1, n, n, &e);
    assert_non_null(s);
    float *h = malloc((size_t)n * m->c.dim * sizeof(float)), *scr = malloc((size_t)n * m->c.dim * sizeof(float));
    float *lg = malloc((size_t)n * m->c.vocab * sizeof(float));
    assert_int_equal(qs_llm_forward(m, nx, s, ids, 1, n, 0, h, NULL, NULL, &e), 0);
    assert_int_equal(qs_llm_logits(m, nx, h, n, scr, lg, &e), 0);
    qs_llm_state_free(s);
    free(h);
    free(scr);
    return lg;
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > md) md = d;
        if (fabs((double)b[i]) > mr) mr = fabs((double)b[i]);
    }
    return md / mr;
}

static void check_against_reference(const char *model, const char *ref)
{
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf(model, &f, &e), 0);
    int32_t ids[64];
    int n = read_ids(ids, 64);
    assert_true(n >= 10);
    uint64_t R, C;
    float *want = read_npy(ref, &R, &C);
    assert_int_equal(R, (uint64_t)n);
    assert_int_equal(C, (uint64_t)f.m.c.vocab);
    float *got = logits_of(&f.m, NULL, ids, n);
    double rel = rel_diff(got, want, (size_t)n * C);
    print_message("# %s: max|C - torch| / max|torch| = %.3g\n", model, rel);
    assert_true(rel <= 1e-4);
    free(got);
    free(want);
    qs_llm_file_free(&f);
}

static void test_reference_tied(void **st) { (void)st; check_against_reference("fixtures/llm/tiny.gguf", "fixtures/llm/tiny_logits.npy"); }
static void test_reference_untied(void **st) { (void)st; check_against_reference("fixtures/llm/tiny_untied.gguf", "fixtures/llm/tiny_untied_logits.npy"); }

static void test_loader_fields(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    assert_int_equal(f.m.c.n_layer, 2);
    assert_int_equal(f.m.c.dim, 64);
    assert_int_equal(f.m.c.n_head, 4);
    assert_int_equal(f.m.c.n_kv_head, 2);
    assert_int_equal(f.m.c.head_dim, 16);
    assert_int_equal(f.m.c.ffn, 96);
    assert_int_equal(f.m.c.vocab, 320);
    assert_ptr_equal(f.m.output, f.m.tok_embd);   /* tied */
    assert_int_equal(f.v.n, 320);
    assert_int_equal(f.v.nmerges, 35);
    assert_string_equal(f.v.pre, "smollm");
    assert_int_equal(f.v.nspecial, 4);   /* token_type 3: <|endoftext|> <|im_start|> <|im_end|> <pad> */
    assert_int_equal(f.v.bos, 1);
    assert_int_equal(f.v.eos, -1);
    assert_int_equal(qs_llm_vocab_find(&f.v, "<|im_start|>"), 1);
    assert_true(qs_llm_vocab_find(&f.v, "assistant") > 260);
    assert_int_equal(qs_llm_vocab_find(&f.v, "\xc4\x8a"), 5 + 10);   /* "Ċ" spells byte 10 */
    char buf[64];
    qs_llm_detok(&f.v, qs_llm_vocab_find(&f.v, "\xc4\xa0the"), buf, sizeof buf);  /* "Ġthe" */
    assert_string_equal(buf, " the");
    qs_llm_detok(&f.v, 15, buf, sizeof buf);                                       /* "Ċ" */
    assert_string_equal(buf, "\n");
    qs_llm_detok(&f.v, 1, buf, sizeof buf);                                        /* control token as is */
    assert_string_equal(buf, "<|im_start|>");
    qs_llm_detok(&f.v, 500, buf, sizeof buf);
    assert_string_equal(buf, "<500>");
    assert_non_null(strstr(f.wtypes, "q4_1 x14"));
    assert_non_null(strstr(f.wtypes, "q8_0 x1"));
    qs_llm_file_free(&f);
}

/* Incremental decoding over the KV cache, several sequences in lockstep, gives the logits of the
** one-shot teacher-forced pass. */
static void test_kv_cache_and_batch(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    int32_t ids[64];
    int n = read_ids(ids, 64);
    const int V = f.m.c.vocab, d = f.m.c.dim, B = 3;
    float *full = logits_of(&f.m, NULL, ids, n);
    /* batch: seq 0 = ids, seq 1 = ids reversed, seq 2 = ids; decode 1 token at a time after a 4-token prefill */
    int32_t toks[3 * 64];
    for (int t = 0; t < n; t++) { toks[t] = ids[t]; toks[n + t] = ids[n - 1 - t]; toks[2 * n + t] = ids[t]; }
    qs_llm_state *s = qs_llm_state_new(&f.m.c, B, n, B * 4, &e);
    assert_non_null(s);
    float *h = malloc((size_t)B * 4 * d * sizeof(float)), *lg = malloc((size_t)B * V * sizeof(float)), *scr = malloc((size_t)B * d * sizeof(float));
    int32_t in[3 * 4];
    for (int b = 0; b < B; b++) for (int t = 0; t < 4; t++) in[b * 4 + t] = toks[b * n + t];
    assert_int_equal(qs_llm_forward(&f.m, NULL, s, in, B, 4, 0, h, NULL, NULL, &e), 0);
    float *lg4 = malloc((size_t)4 * V * sizeof(float)), *scr4 = malloc((size_t)4 * d * sizeof(float));
    assert_int_equal(qs_llm_logits(&f.m, NULL, h, 4, scr4, lg4, &e), 0);   /* rows 0..3 = seq 0 */
    assert_true(rel_diff(lg4, full, (size_t)4 * V) < 1e-5);
    double worst = 0;
    for (int t = 4; t < n; t++) {
        for (int b = 0; b < B; b++) in[b] = toks[b * n + t];
        assert_int_equal(qs_llm_forward(&f.m, NULL, s, in, B, 1, t, h, NULL, NULL, &e), 0);
        assert_int_equal(qs_llm_logits(&f.m, NULL, h, B, scr, lg, &e), 0);
        double r0 = rel_diff(lg, full + (size_t)t * V, (size_t)V), r2 = rel_diff(lg + 2 * (size_t)V, full + (size_t)t * V, (size_t)V);
        if (r0 > worst) worst = r0;
        if (r2 > worst) worst = r2;
    }
    print_message("# incremental vs one-shot: %.3g\n", worst);
    assert_true(worst < 1e-5);
    /* positions out of the state are refused */
    assert_int_equal(qs_llm_forward(&f.m, NULL, s, in, B, 1, n, h, NULL, NULL, &e), -1);
    assert_int_equal(qs_llm_forward(&f.m, NULL, s, in, B + 1, 1, 0, h, NULL, NULL, &e), -1);
    in[0] = 320;
    assert_int_equal(qs_llm_forward(&f.m, NULL, s, in, 1, 1, 0, h, NULL, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "out of range"));
    qs_llm_state_free(s);
    free(h); free(lg); free(scr); free(lg4); free(scr4); free(full);
    qs_llm_file_free(&f);
}

/* Taps: the last layer's residual stream through the final RMSNorm is the hidden output; every
** linear-input site is seen once per layer with the right width. */
typedef struct { float *resid; int seen[8][QS_SITE_COUNT]; int cols[QS_SITE_COUNT]; } tapc;
static void tap_fn(void *ctx, int layer, qs_llm_site site, const float *x, int rows, int cols)
{
    tapc *t = ctx;
    t->seen[layer][site]++;
    t->cols[site] = cols;
    if (site == QS_SITE_RESID && layer == 1) memcpy(t->resid, x, (size_t)rows * cols * sizeof(float));
}

static void test_taps(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    int32_t ids[64];
    int n = read_ids(ids, 64);
    const int d = f.m.c.dim;
    tapc t;
    memset(&t, 0, sizeof t);
    t.resid = malloc((size_t)n * d * sizeof(float));
    float *h = malloc((size_t)n * d * sizeof(float));
    qs_llm_state *s = qs_llm_state_new(&f.m.c, 1, n, n, &e);
    assert_int_equal(qs_llm_forward(&f.m, NULL, s, ids, 1, n, 0, h, tap_fn, &t, &e), 0);
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < QS_SITE_COUNT; k++) assert_int_equal(t.seen[l][k], 1);
    assert_int_equal(t.cols[QS_SITE_FFN_DOWN_IN], 96);
    assert_int_equal(t.cols[QS_SITE_K], 32);
    assert_int_equal(t.cols[QS_SITE_RESID], 64);
    for (int r = 0; r < n; r++) {
        double ss = 0;
        for (int i = 0; i < d; i++) ss += (double)t.resid[r * d + i] * t.resid[r * d + i];
        float sc = (float)(1.0 / sqrt(ss / d + f.m.c.eps));
        for (int i = 0; i < d; i++) assert_float_equal(h[r * d + i], t.resid[r * d + i] * sc * f.m.out_norm[i], 1e-5);
    }
    assert_string_equal(qs_llm_site_name(QS_SITE_FFN_DOWN_IN), "ffn_down_in");
    assert_string_equal(qs_llm_site_name(QS_SITE_RESID), "resid");
    qs_llm_state_free(s);
    free(h);
    free(t.resid);
    qs_llm_file_free(&f);
}

/* Low-precision numerics: weights, activations, KV; errors ordered as expected; ResQ helps. */
static void test_numerics(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    int32_t ids[64];
    int n = read_ids(ids, 64);
    const size_t N = (size_t)n * f.m.c.vocab;
    float *ref = logits_of(&f.m, NULL, ids, n);

    /* weights in bf16 move logits a little, mxfp4 more */
    qs_apply bf = tu_apply("bf16"), mx = tu_apply("mxfp4"), f8 = tu_apply("fp8_e4m3");
    qs_llm_model w;
    assert_int_equal(qs_llm_clone(&w, &f.m, &e), 0);
    assert_ptr_equal(w.output, w.tok_embd);
    assert_int_equal(qs_llm_quantize_weights(&w, &bf, 1, &e), 0);
    float *lbf = logits_of(&w, NULL, ids, n);
    qs_llm_free(&w);
    assert_int_equal(qs_llm_clone(&w, &f.m, &e), 0);
    assert_int_equal(qs_llm_quantize_weights(&w, &mx, 1, &e), 0);
    float *lmx = logits_of(&w, NULL, ids, n);
    qs_llm_free(&w);
    double ebf = rel_diff(lbf, ref, N), emx = rel_diff(lmx, ref, N);
    print_message("# weights bf16 %.3g, mxfp4 %.3g\n", ebf, emx);
    assert_true(ebf > 0 && ebf < 0.02);
    assert_true(emx > 3 * ebf);

    /* activations in mxfp4, without and with the Rollout-ResQ correction */
    qs_llm_numerics a0 = {&mx, QS_RESQ_NONE, NULL, 1, NULL, NULL}, ad = {&mx, QS_RESQ_DENSE, NULL, 1, NULL, NULL}, a24 = {&mx, QS_RESQ_24, NULL, 1, NULL, NULL};
    float *la0 = logits_of(&f.m, &a0, ids, n), *lad = logits_of(&f.m, &ad, ids, n), *la24 = logits_of(&f.m, &a24, ids, n);
    double e0 = rel_diff(la0, ref, N), ed = rel_diff(lad, ref, N), e24 = rel_diff(la24, ref, N);
    print_message("# act mxfp4 %.3g, +resq dense %.3g, +resq 2:4 %.3g\n", e0, ed, e24);
    assert_true(e0 > 0.01);
    assert_true(ed < e0 / 3);
    assert_true(e24 < e0);

    /* KV cache in fp8 (per-row scaled) changes little, unscaled fp8 on the same rows too but differently */
    qs_llm_numerics kv = {NULL, QS_RESQ_NONE, &f8, 1, NULL, NULL};
    float *lkv = logits_of(&f.m, &kv, ids, n);
    double ekv = rel_diff(lkv, ref, N);
    print_message("# kv fp8_e4m3 %.3g\n", ekv);
    assert_true(ekv > 0 && ekv < 0.05);

    /* the scaled plain cast is the format applied to x * (max/amax) */
    float x[8] = {0.001f, -0.002f, 0.0005f, 0.003f, 0, 0.0001f, -0.0007f, 0.0025f}, y[8], z[8];
    assert_int_equal(qs_llm_fakeq_row(&f8, 1, x, 8, y, &e), 0);
    qs_qopts o;
    memset(&o, 0, sizeof o);
    float s = 448.0f / 0.003f;
    for (int i = 0; i < 8; i++) z[i] = x[i] * s;
    assert_int_equal(f8.f->fakeq(f8.f, &o, z, 8, z, &e), 0);
    for (int i = 0; i < 8; i++) assert_float_equal(y[i], z[i] * (0.003f / 448.0f), 1e-12);
    free(ref); free(lbf); free(lmx); free(la0); free(lad); free(la24); free(lkv);
    qs_llm_file_free(&f);
}

/* A per-format scale= is honoured, never only named: weights take scale=tensor (one scale for the
** matrix, not one per output row) and scale=row (the default, also without `scaled`); a row (an
** activation or KV-cache token) takes scale=row whatever `scaled` and refuses tensor and col. */
static void test_cast_scale_option(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_cfg c = {.n_layer = 1, .dim = 8, .n_head = 2, .n_kv_head = 1, .head_dim = 4, .ffn = 12, .vocab = 16,
                    .ctx = 8, .rope_base = 10000, .eps = 1e-5f, .rope_neox = 1};
    qs_llm_model m0, mrow, mtensor, mdef;
    assert_int_equal(qs_llm_alloc(&m0, &c, 0, &e), 0);
    for (size_t i = 0; i < m0.arena_len; i++) m0.arena[i] = sinf(0.37f * (float)i) * (float)(1 + (i / 8) % 5) * 1e-3f;
    assert_int_equal(qs_llm_clone(&mrow, &m0, &e), 0);
    assert_int_equal(qs_llm_clone(&mtensor, &m0, &e), 0);
    assert_int_equal(qs_llm_clone(&mdef, &m0, &e), 0);
    qs_apply f8 = tu_apply("fp8_e4m3"), row = f8, tensor = f8;
    row.cscale = QS_CSCALE_ROW;
    tensor.cscale = QS_CSCALE_TENSOR;
    assert_int_equal(qs_llm_quantize_weights(&mdef, &f8, 1, &e), 0);
    assert_int_equal(qs_llm_quantize_weights(&mrow, &row, 0, &e), 0);
    assert_int_equal(qs_llm_quantize_weights(&mtensor, &tensor, 1, &e), 0);
    assert_memory_equal(mrow.arena, mdef.arena, m0.arena_len * sizeof(float));
    /* scale=tensor: wq is the cast of the whole matrix under one scale */
    size_t n = qs_llm_q_dim(&c) * (size_t)c.dim;
    float *want = malloc(n * sizeof *want);
    assert_non_null(want);
    assert_int_equal(qs_cast_scaled(f8.f, &f8.o, m0.L[0].wq, n, want, &e), 0);
    assert_memory_equal(mtensor.L[0].wq, want, n * sizeof(float));
    assert_true(memcmp(mtensor.L[0].wq, mdef.L[0].wq, n * sizeof(float)) != 0);
    free(want);

    float x[8] = {0.001f, -0.002f, 0.0005f, 0.003f, 0, 0.0001f, -0.0007f, 0.0025f}, y[8], z[8];
    assert_int_equal(qs_llm_fakeq_row(&f8, 1, x, 8, y, &e), 0);
    assert_int_equal(qs_llm_fakeq_row(&row, 0, x, 8, z, &e), 0);
    assert_memory_equal(y, z, sizeof y);
    assert_int_equal(qs_llm_fakeq_row(&tensor, 1, x, 8, z, &e), -1);
    assert_non_null(strstr(e.msg, "scale=tensor"));
    qs_llm_free(&m0); qs_llm_free(&mrow); qs_llm_free(&mtensor); qs_llm_free(&mdef);
}

static void test_logprob(void **st)
{
    (void)st;
    float lg[4] = {1.0f, 2.0f, 3.0f, -1.0f};
    double z = exp(1.0) + exp(2.0) + exp(3.0) + exp(-1.0), ent;
    double lp = qs_llm_logprob(lg, 4, 2, &ent);
    assert_float_equal(lp, 3.0 - log(z), 1e-12);
    double h = 0;
    for (int i = 0; i < 4; i++) { double p = exp(lg[i]) / z; h -= p * log(p); }
    assert_float_equal(ent, h, 1e-12);
    float big[2] = {1000.0f, 1000.0f};
    assert_float_equal(qs_llm_logprob(big, 2, 0, &ent), -log(2.0), 1e-12);
    assert_float_equal(ent, log(2.0), 1e-12);
}

/* The BPE tokenizer reproduces Hugging Face `tokenizers` (vectors from tests/llm/hf_tokenize.py). */
static int check_tok_vectors(const char *model, const char *vectors)
{
    qs_llm_file f;
    qs_err e = {{0}};
    if (qs_llm_load_gguf(model, &f, &e)) return -1;
    json_error_t je;
    json_t *j = json_load_file(vectors, 0, &je);
    assert_non_null(j);
    json_t *cases = json_object_get(j, "cases");
    size_t i;
    json_t *c;
    int32_t ids[512];
    json_array_foreach(cases, i, c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        json_t *want = json_object_get(c, "ids");
        int n = qs_llm_tokenize(&f.v, text, strlen(text), ids, 512, &e);
        if (n != (int)json_array_size(want)) print_message("# %s: '%s' gives %d ids, want %zu (%s)\n", model, text, n, json_array_size(want), e.msg);
        assert_int_equal(n, (int)json_array_size(want));
        for (int k = 0; k < n; k++) assert_int_equal(ids[k], json_integer_value(json_array_get(want, (size_t)k)));
    }
    print_message("# %s: %zu tokenizer cases equal to HF tokenizers\n", model, json_array_size(cases));
    json_decref(j);
    qs_llm_file_free(&f);
    return 0;
}

static void test_tokenizer(void **st)
{
    (void)st;
    assert_int_equal(check_tok_vectors("fixtures/llm/tiny.gguf", "fixtures/llm/tiny_tok.json"), 0);
    /* the real vocabulary, when `make data` has fetched it */
    if (check_tok_vectors("../data/models/SmolLM2-135M-Instruct.Q4_1.gguf", "fixtures/llm/smollm2_tok.json"))
        print_message("# SmolLM2 not in data/models (make data): its tokenizer vectors are checked by the tiny model only\n");
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    int32_t ids[8];
    /* non-ASCII and invalid UTF-8: byte-level tokens that spell the bytes back */
    const char *raw[] = {"caf\xc3\xa9", "\xff\xfe a\xc3", "\xe2\x82"};
    for (int r = 0; r < 3; r++) {
        int n = qs_llm_tokenize(&f.v, raw[r], strlen(raw[r]), ids, 8, &e);
        assert_true(n > 0);
        char back[64] = "";
        for (int k = 0; k < n; k++) qs_llm_detok(&f.v, ids[k], back + strlen(back), sizeof back - strlen(back));
        assert_string_equal(back, raw[r]);
    }
    assert_int_equal(qs_llm_tokenize(&f.v, "abcdefghij", 10, ids, 8, &e), -1);    /* too many ids for cap */
    assert_non_null(strstr(e.msg, "more than 8"));
    assert_int_equal(qs_llm_tokenize(&f.v, "<|im_start|>", 12, ids, 8, &e), 1);
    assert_int_equal(ids[0], 1);
    qs_llm_file_free(&f);
}

/* Damaged files give one-line errors, never a crash, and nothing leaks. */
static void test_bad_models(void **st)
{
    (void)st;
    size_t len = 0;
    uint8_t *buf = tu_slurp("fixtures/llm/tiny.gguf", &len);
    assert_non_null(buf);
    qs_llm_file f;
    qs_err e = {{0}};
    /* every truncation is refused */
    for (size_t cut = 0; cut < len; cut += len / 97 + 1) {
        assert_int_equal(qs_llm_load_gguf_mem(buf, cut, "tiny", &f, &e), -1);
        assert_true(strncmp(e.msg, "tiny: ", 6) == 0);
    }
    /* another architecture */
    uint8_t *cp = malloc(len);
    memcpy(cp, buf, len);
    uint8_t *p = memmem(cp, len, "llama", 5);
    assert_non_null(p);
    memcpy(p, "gemma", 5);
    assert_int_equal(qs_llm_load_gguf_mem(cp, len, "x", &f, &e), -1);
    assert_non_null(strstr(e.msg, "not supported"));
    /* a head count that does not divide the embedding */
    memcpy(cp, buf, len);
    p = memmem(cp, len, "llama.attention.head_count", 26);
    assert_non_null(p);
    uint32_t seven = 7;
    memcpy(p + 26 + 4, &seven, 4);
    assert_int_equal(qs_llm_load_gguf_mem(cp, len, "x", &f, &e), -1);
    print_message("# %s\n", e.msg);
    assert_non_null(strstr(e.msg, "head"));
    free(cp);
    free(buf);
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/no-such.gguf", &f, &e), -1);
    assert_non_null(strstr(e.msg, "no-such.gguf: cannot open"));
}

/* A prefill from position 0 packs K and V for attention as it writes the cache (kernels/llm_prefill.h);
** a prefill from a later position reads the cache as it is.  Split at any position, the rows of the
** two calls are the bits of the one-shot pass (the same FMA chains either way). */
static void test_prefill_split_bits(void **st)
{
    (void)st;
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load_gguf("fixtures/llm/tiny.gguf", &f, &e), 0);
    int32_t ids[64];
    const int n0 = read_ids(ids, 64), n = 48, d = f.m.c.dim;   /* the text repeated: both calls on the pool's path (16+ rows) */
    assert_true(n0 > 0);
    for (int i = n0; i < n; i++) ids[i] = ids[i % n0];
    float *one = malloc((size_t)n * d * sizeof(float)), *two = malloc((size_t)n * d * sizeof(float));
    assert_non_null(one); assert_non_null(two);
    qs_llm_state *s = qs_llm_state_new(&f.m.c, 1, n, n, &e);
    assert_non_null(s);
    assert_int_equal(qs_llm_forward(&f.m, NULL, s, ids, 1, n, 0, one, NULL, NULL, &e), 0);
    for (int t1 = 16; t1 + 16 <= n; t1 += 7) {
        memset(two, 0, (size_t)n * d * sizeof(float));
        assert_int_equal(qs_llm_forward(&f.m, NULL, s, ids, 1, t1, 0, two, NULL, NULL, &e), 0);
        assert_int_equal(qs_llm_forward(&f.m, NULL, s, ids + t1, 1, n - t1, t1, two + (size_t)t1 * d, NULL, NULL, &e), 0);
        assert_memory_equal(two, one, (size_t)n * d * sizeof(float));
    }
    qs_llm_state_free(s);
    free(one); free(two);
    qs_llm_file_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_tied),
        cmocka_unit_test(test_reference_untied),
        cmocka_unit_test(test_loader_fields),
        cmocka_unit_test(test_kv_cache_and_batch),
        cmocka_unit_test(test_numerics),
        cmocka_unit_test(test_cast_scale_option),
        cmocka_unit_test(test_logprob),
        cmocka_unit_test(test_bad_models),
        cmocka_unit_test(test_tokenizer),
        cmocka_unit_test(test_taps),
        cmocka_unit_test(test_prefill_split_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
