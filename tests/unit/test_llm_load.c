/*
** The model-loading foundation of `llm eval`: rotate_half RoPE and Q/K/V biases in the forward pass
** (kernels/llm.c), and the R lazy-load reader that yields the evaluation text (store/rdata.c).
** The loaders themselves are checked against an independent float64 forward on generated models by
** tests/e2e/llm_models.sh (Python generators, nothing committed).
*/
#include "test_util.h"

#include <math.h>
#include <zlib.h>

#include <sys/stat.h>
#include <unistd.h>

#include "../../store/llm_arch.h"
#include "../../store/llm_load.h"
#include "../../store/rdata.h"
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


/* ---------------------------------------------------------------- Hugging Face directory */

static void put_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* A one-layer Llama checkpoint (F32 safetensors) with a 6-token vocabulary of which the tokenizer
** uses 5; merges in the ["a", "b"] form; BOS/EOS only in tokenizer_config.json. */
static void write_hf(const char *dir, const char *pre)
{
    static const struct { const char *name; int r, c; } T[] = {
        {"model.embed_tokens.weight", 6, 8}, {"model.norm.weight", 0, 8},
        {"model.layers.0.input_layernorm.weight", 0, 8}, {"model.layers.0.self_attn.q_proj.weight", 8, 8},
        {"model.layers.0.self_attn.k_proj.weight", 4, 8}, {"model.layers.0.self_attn.v_proj.weight", 4, 8},
        {"model.layers.0.self_attn.o_proj.weight", 8, 8}, {"model.layers.0.post_attention_layernorm.weight", 0, 8},
        {"model.layers.0.mlp.gate_proj.weight", 8, 8}, {"model.layers.0.mlp.up_proj.weight", 8, 8},
        {"model.layers.0.mlp.down_proj.weight", 8, 8}};
    char hdr[4096];
    size_t o = 0, off = 0;
    o += (size_t)snprintf(hdr + o, sizeof hdr - o, "{");
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        size_t n = (size_t)(T[i].r ? T[i].r : 1) * T[i].c * 4;
        if (T[i].r) o += (size_t)snprintf(hdr + o, sizeof hdr - o, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}", i ? "," : "", T[i].name, T[i].r, T[i].c, off, off + n);
        else o += (size_t)snprintf(hdr + o, sizeof hdr - o, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}", i ? "," : "", T[i].name, T[i].c, off, off + n);
        off += n;
    }
    o += (size_t)snprintf(hdr + o, sizeof hdr - o, "}");
    while (o % 8) hdr[o++] = ' ';
    size_t total = 8 + o + off;
    uint8_t *b = calloc(1, total);
    uint64_t hl = o;
    memcpy(b, &hl, 8);
    memcpy(b + 8, hdr, o);
    float *w = (float *)(b + 8 + o);
    for (size_t i = 0; i < off / 4; i++) w[i] = 0.01f * (float)(i % 7);
    put_file(dir, "model.safetensors", b, total);
    free(b);
    const char *cfg = "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,\"intermediate_size\":8,"
                      "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"vocab_size\":6,"
                      "\"rms_norm_eps\":1e-5,\"rope_theta\":500000.0,\"tie_word_embeddings\":true}";
    put_file(dir, "config.json", cfg, strlen(cfg));
    char tok[1024];
    int n = snprintf(tok, sizeof tok,
                     "{\"added_tokens\":[{\"id\":0,\"content\":\"<s>\",\"special\":true},{\"id\":4,\"content\":\"<x>\",\"special\":false}],"
                     "\"pre_tokenizer\":%s,\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1,\"b\":2,\"ab\":3},"
                     "\"merges\":[[\"a\",\"b\"]]}}", pre);
    put_file(dir, "tokenizer.json", tok, (size_t)n);
    const char *tc = "{\"bos_token\":{\"content\":\"<s>\"},\"eos_token\":\"<x>\",\"add_bos_token\":true}";
    put_file(dir, "tokenizer_config.json", tc, strlen(tc));
}

static void test_hf_dir(void **st)
{
    (void)st;
    char dir[256];
    snprintf(dir, sizeof dir, "%.200s/qscope-test-hf-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : P_tmpdir);
    assert_non_null(mkdtemp(dir));
    write_hf(dir, "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{L}+| ?\\\\p{N}\"},\"behavior\":\"Isolated\"}");
    qs_llm_file f;
    qs_err e = {{0}};
    assert_int_equal(qs_llm_load(dir, &f, &e), 0);
    assert_string_equal(f.arch, "llama");
    assert_string_equal(f.format, "safetensors");
    assert_int_equal(f.m.c.rope_neox, 1);
    assert_true(f.m.output == f.m.tok_embd);
    assert_null(f.m.bias_arena);
    assert_true(fabsf(f.m.c.rope_base - 500000.0f) < 1);
    assert_true(f.m.L[0].wk[9] == 0.01f * (float)((6 * 8 + 8 + 8 + 64 + 9) % 7));   /* k_proj element 9 */
    assert_true(f.m.L[0].wk[9] != 0.0f);
    assert_int_equal(f.v.n, 6);
    assert_string_equal(f.v.text + f.v.off[3], "ab");
    assert_string_equal(f.v.text + f.v.off[5], "");          /* id unused by the tokenizer */
    assert_int_equal(f.v.type[0], 3);
    assert_int_equal(f.v.type[4], 4);
    assert_int_equal(f.v.nmerges, 1);
    assert_string_equal(f.v.mtext + f.v.moff[0], "a b");
    assert_int_equal(f.v.bos, 0);
    assert_int_equal(f.v.eos, 4);
    assert_int_equal(f.v.add_bos, 1);
    assert_string_equal(f.v.pre, "hf-regex");
    assert_string_equal(f.v.pre_regex, "\\p{L}+| ?\\p{N}");
    assert_non_null(strstr(f.v.pre_json, "\"Split\""));
    qs_llm_file_free(&f);
    /* vocabulary id beyond vocab_size: one line naming tokenizer.json */
    const char *bad = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":6},\"merges\":[]}}";
    put_file(dir, "tokenizer.json", bad, strlen(bad));
    assert_int_equal(qs_llm_load(dir, &f, &e), -1);
    assert_non_null(strstr(e.msg, "/tokenizer.json: vocabulary entry \"a\" has id outside 0..5"));
    const char *files[] = {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"};
    char path[512];
    for (int i = 0; i < 4; i++) { snprintf(path, sizeof path, "%s/%s", dir, files[i]); unlink(path); }
    rmdir(dir);
}

/* The architecture table: names in both spellings, flags, tensor names and keys (store/llm_arch.c). */
static void test_arch_table(void **st)
{
    (void)st;
    const qs_llm_arch *l = qs_llm_arch_gguf("llama"), *q = qs_llm_arch_gguf("qwen2");
    assert_non_null(l);
    assert_non_null(q);
    const qs_llm_arch *q3 = qs_llm_arch_gguf("qwen3");
    assert_non_null(q3);
    assert_true(q3->flags & QS_ARCH_QK_NORM);
    assert_int_equal(q3->gguf_rope_neox, 1);
    assert_null(qs_llm_arch_gguf("mistral"));   /* llama.cpp writes Mistral and Mixtral as llama */
    assert_null(qs_llm_arch_gguf("mixtral"));
    assert_true(l->flags & QS_ARCH_MOE);
    assert_non_null(qs_llm_arch_hf("MixtralForCausalLM", NULL)->hf_names);
    assert_ptr_equal(qs_llm_arch_hf(NULL, "qwen2_moe"), qs_llm_arch_gguf("qwen2moe"));
    assert_null(qs_llm_arch_gguf(NULL));
    assert_int_equal(l->gguf_rope_neox, 0);   /* llama.cpp's converter permuted the Q/K rows */
    assert_int_equal(q->gguf_rope_neox, 1);
    assert_true(q->flags & QS_ARCH_QKV_BIAS);
    assert_false(q->flags & QS_ARCH_QK_NORM);
    assert_ptr_equal(qs_llm_arch_hf("Qwen2ForCausalLM", NULL), q);
    assert_ptr_equal(qs_llm_arch_hf(NULL, "llama"), l);
    assert_null(qs_llm_arch_hf("GemmaForCausalLM", "gemma"));   /* Gemma 1: not supported */
    char b[96];
    assert_string_equal(qs_llm_arch_list(QS_LLM_GGUF, b, sizeof b), "llama, qwen2, gemma2, gemma3, qwen3, qwen2moe, qwen3moe");
    const qs_llm_arch *mx = qs_llm_arch_hf(NULL, "mixtral");
    assert_string_equal(qs_llm_tensor_name_ax(mx, QS_LLM_HF, QS_T_EXP_DOWN, 2, 5, b, sizeof b),
                        "model.layers.2.block_sparse_moe.experts.5.w2.weight");
    assert_string_equal(qs_llm_tensor_name_ax(q, QS_LLM_HF, QS_T_EXP_UP, 2, 5, b, sizeof b), "model.layers.2.mlp.experts.5.up_proj.weight");
    assert_string_equal(qs_llm_tensor_name_ax(mx, QS_LLM_GGUF, QS_T_EXP_UP, 2, 5, b, sizeof b), "blk.2.ffn_up_exps.weight");
    /* Gemma: rotate_half in GGUF, its own HF norm names, QK-norm on Gemma 3 only */
    const qs_llm_arch *g2 = qs_llm_arch_gguf("gemma2"), *g3 = qs_llm_arch_gguf("gemma3");
    assert_non_null(g2);
    assert_int_equal(g3->gguf_rope_neox, 1);
    assert_true((g3->flags & QS_ARCH_QK_NORM) && !(g2->flags & QS_ARCH_QK_NORM));
    assert_ptr_equal(qs_llm_arch_hf("Gemma3ForCausalLM", "gemma3_text"), g3);
    assert_null(qs_llm_arch_hf("Gemma3ForConditionalGeneration", "gemma3"));   /* multimodal: not supported */
    assert_string_equal(qs_llm_arch_tensor_name(g2, QS_LLM_HF, QS_T_FFN_NORM, 1, b, sizeof b),
                        "model.layers.1.pre_feedforward_layernorm.weight");
    assert_string_equal(qs_llm_arch_tensor_name(g2, QS_LLM_HF, QS_T_POST_ATTN_NORM, 1, b, sizeof b),
                        "model.layers.1.post_attention_layernorm.weight");
    assert_string_equal(qs_llm_arch_tensor_name(l, QS_LLM_HF, QS_T_FFN_NORM, 1, b, sizeof b),
                        "model.layers.1.post_attention_layernorm.weight");
    assert_string_equal(qs_llm_arch_tensor_name(g3, QS_LLM_GGUF, QS_T_POST_FFN_NORM, 0, b, sizeof b), "blk.0.post_ffw_norm.weight");
    assert_string_equal(qs_llm_tensor_name(QS_LLM_GGUF, QS_T_Q, 3, b, sizeof b), "blk.3.attn_q.weight");
    assert_string_equal(qs_llm_tensor_name(QS_LLM_HF, QS_T_Q, 3, b, sizeof b), "model.layers.3.self_attn.q_proj.weight");
    assert_string_equal(qs_llm_tensor_name(QS_LLM_HF, QS_T_OUT, 0, b, sizeof b), "lm_head.weight");
    assert_string_equal(qs_llm_hparam_key(QS_H_HEAD_DIM)->key[QS_LLM_GGUF], "attention.key_length");
    assert_string_equal(qs_llm_hparam_key(QS_H_HEAD_DIM)->key[QS_LLM_HF], "head_dim");
}

/* head_dim apart from dim / n_head (Qwen3, Gemma): the shape is accepted, Q and the attention output are
** n_head * head_dim wide, and a forward pass runs with finite output. */
static void test_head_dim_apart(void **st)
{
    (void)st;
    qs_llm_cfg c = {.n_layer = 1, .dim = 32, .n_head = 4, .n_kv_head = 2, .head_dim = 12, .ffn = 40, .vocab = 20,
                    .ctx = 16, .rope_base = 10000.0f, .eps = 1e-5f, .rope_neox = 1};
    qs_err e = {{0}};
    qs_llm_model m;
    assert_int_equal(qs_llm_cfg_check(&c, &e), 0);
    assert_int_equal(qs_llm_q_dim(&c), 48);
    assert_int_equal(qs_llm_alloc(&m, &c, 1, &e), 0);
    assert_int_equal(qs_llm_alloc_bias(&m, &e), 0);
    assert_true(m.L[0].wk == m.L[0].wq + 48 * 32);   /* wq is [48 x 32] */
    assert_true(m.L[0].wv == m.L[0].wk + 24 * 32);
    assert_true(m.L[0].bk == m.L[0].bq + 48);
    for (size_t i = 0; i < m.arena_len; i++) m.arena[i] = 0.3f * urand();
    for (size_t i = 0; i < m.bias_len; i++) m.bias_arena[i] = 0.1f * urand();
    int32_t tok[10] = {1, 5, 9, 3, 19, 0, 7, 7, 2, 11};
    float h1[10 * 32], h2[10 * 32];
    qs_llm_state *s = qs_llm_state_new(&c, 1, 10, 10, &e);
    assert_non_null(s);
    assert_int_equal(qs_llm_forward(&m, NULL, s, tok, 1, 10, 0, h1, NULL, NULL, &e), 0);   /* prefill: GEMM attention */
    for (int t = 0; t < 10; t++)   /* one token at a time: the scalar attention path agrees */
        assert_int_equal(qs_llm_forward(&m, NULL, s, tok + t, 1, 1, t, h2 + t * 32, NULL, NULL, &e), 0);
    for (int i = 0; i < 10 * 32; i++) {
        assert_true(isfinite(h1[i]));
        assert_true(fabsf(h1[i] - h2[i]) < 1e-4f * (1 + fabsf(h1[i])));
    }
    qs_llm_state_free(s);
    qs_llm_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_neox_equals_permuted),
        cmocka_unit_test(test_bias),
        cmocka_unit_test(test_rdb_text),
        cmocka_unit_test(test_rtext_join_latin1),
        cmocka_unit_test(test_hf_dir),
        cmocka_unit_test(test_arch_table),
        cmocka_unit_test(test_head_dim_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
