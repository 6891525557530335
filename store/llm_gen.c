/*
** A random Llama model as a GGUF file, written a block of rows at a time (llm_gen.h).  The layout is
** GGUF v3 (ggml docs/gguf.md): header, key/value pairs, tensor infos (ne[0] the row length), padding to
** 32 bytes, the tensors' data, each aligned to 32.
*/
#include "llm_gen.h"
#include "io_err.h"
#include "../kernels/format_ggml.h"
#include "../kernels/pool.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 32
#define BLOCK_BYTES ((size_t)16 << 20)   /* encoded rows per write */

int qs_llm_gen_preset(const char *name, qs_llm_cfg *c, qs_err *e)
{
    static const struct { const char *name; qs_llm_cfg c; } kP[] = {
        {"tiny", {.n_layer = 2, .dim = 256, .n_head = 4, .n_kv_head = 2, .head_dim = 64, .ffn = 512, .vocab = 32000,
                 .ctx = 2048, .rope_base = 10000.0f, .eps = 1e-5f}},
        {"1B", {.n_layer = 16, .dim = 2048, .n_head = 32, .n_kv_head = 8, .head_dim = 64, .ffn = 8192, .vocab = 32000,
                 .ctx = 2048, .rope_base = 500000.0f, .eps = 1e-5f}},
        {"3B", {.n_layer = 28, .dim = 3072, .n_head = 24, .n_kv_head = 8, .head_dim = 128, .ffn = 8192, .vocab = 32000,
                 .ctx = 2048, .rope_base = 500000.0f, .eps = 1e-5f}},
        {"8B", {.n_layer = 32, .dim = 4096, .n_head = 32, .n_kv_head = 8, .head_dim = 128, .ffn = 14336, .vocab = 32000,
                 .ctx = 2048, .rope_base = 500000.0f, .eps = 1e-5f}}};
    for (size_t i = 0; i < sizeof kP / sizeof *kP; i++)
        if (!strcmp(name, kP[i].name)) { *c = kP[i].c; return 0; }
    return qs_fail(e, "unknown model size '%s' (tiny, 1B, 3B, 8B)", name);
}

qs_dtype qs_llm_gen_dtype(const char *name)
{
    static const qs_dtype ok[] = {QS_DT_F32, QS_DT_F16, QS_DT_BF16, QS_DT_Q8_0, QS_DT_Q4_0, QS_DT_Q4_1, QS_DT_Q5_0,
                                  QS_DT_Q5_1, QS_DT_Q4_K, QS_DT_Q6_K};
    qs_dtype t = qs_dtype_from_name(name);
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (ok[i] == t) return t;
    return QS_DT_INVALID;
}

static uint32_t ggml_type(qs_dtype t)
{
    switch (t) {
    case QS_DT_F16: return 1;
    case QS_DT_Q4_0: return 2;
    case QS_DT_Q4_1: return 3;
    case QS_DT_Q5_0: return 6;
    case QS_DT_Q5_1: return 7;
    case QS_DT_Q8_0: return 8;
    case QS_DT_Q4_K: return 12;
    case QS_DT_Q6_K: return 14;
    case QS_DT_BF16: return 30;
    default: return 0;   /* F32 */
    }
}

/* ---------------------------------------------------------------- the tensors */

typedef struct gtensor {
    char name[48];
    int rows, cols;           /* rows 0: a vector */
    qs_dtype dt;
    float mean, std;
    uint64_t offset, bytes;
} gtensor;

static uint64_t row_bytes(qs_dtype dt, int cols)
{
    const qs_dtype_traits *tr = qs_dtype_get(dt);
    return (uint64_t)cols / tr->block_elems * tr->block_bytes;
}

/* Every tensor in file order; n of them. */
static gtensor *tensors(const qs_llm_gen *g, size_t *n)
{
    const qs_llm_cfg *c = &g->c;
    const int d = c->dim, qd = c->n_head * c->head_dim, kvd = c->n_kv_head * c->head_dim, F = c->ffn;
    gtensor *t = calloc((size_t)c->n_layer * 9 + 3, sizeof *t);
    if (!t) return NULL;
    size_t k = 0;
    const struct { const char *nm; int r, cl; int norm; } L[9] = {
        {"attn_norm", 0, d, 1}, {"attn_q", qd, d, 0}, {"attn_k", kvd, d, 0}, {"attn_v", kvd, d, 0},
        {"attn_output", d, qd, 0}, {"ffn_norm", 0, d, 1}, {"ffn_gate", F, d, 0}, {"ffn_up", F, d, 0}, {"ffn_down", d, F, 0}};
    gtensor *x = &t[k++];
    *x = (gtensor){.rows = c->vocab, .cols = d, .dt = g->dt, .mean = 0, .std = 0.02f};
    snprintf(x->name, sizeof x->name, "token_embd.weight");
    x = &t[k++];
    *x = (gtensor){.rows = 0, .cols = d, .dt = QS_DT_F32, .mean = 1, .std = 0.1f};
    snprintf(x->name, sizeof x->name, "output_norm.weight");
    if (!g->tied) {
        x = &t[k++];
        *x = (gtensor){.rows = c->vocab, .cols = d, .dt = g->dt, .mean = 0, .std = 0.02f};
        snprintf(x->name, sizeof x->name, "output.weight");
    }
    for (int l = 0; l < c->n_layer; l++)
        for (int i = 0; i < 9; i++) {
            x = &t[k++];
            *x = (gtensor){.rows = L[i].r, .cols = L[i].cl, .dt = L[i].norm ? QS_DT_F32 : g->dt, .mean = L[i].norm ? 1.0f : 0.0f,
                           .std = L[i].norm ? 0.1f : 0.02f};
            snprintf(x->name, sizeof x->name, "blk.%d.%s.weight", l, L[i].nm);
        }
    uint64_t off = 0;
    for (size_t i = 0; i < k; i++) {
        t[i].offset = off;
        t[i].bytes = row_bytes(t[i].dt, t[i].cols) * (uint64_t)(t[i].rows ? t[i].rows : 1);
        off = (off + t[i].bytes + ALIGN - 1) / ALIGN * ALIGN;
    }
    *n = k;
    return t;
}

uint64_t qs_llm_gen_bytes(const qs_llm_gen *g)
{
    size_t n;
    gtensor *t = tensors(g, &n);
    uint64_t b = t ? t[n - 1].offset + t[n - 1].bytes : 0;
    free(t);
    return b;
}

/* ---------------------------------------------------------------- values */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Row r of tensor ti: mean + std * (sum of four uniforms, standardised), from its own stream. */
static void gen_row(uint64_t seed, size_t ti, int r, const gtensor *t, float *x)
{
    uint64_t s = mix(seed ^ mix((uint64_t)ti * 0x100000001b3ull ^ ((uint64_t)r << 20)));
    const float k = 1.0f / 65536.0f, inv = 1.7320508f;   /* 1 / std of the sum of four U(0,1) = sqrt(3) */
    for (int i = 0; i < t->cols; i++) {
        s = mix(s);
        const float u = (float)(s & 0xffff) + (float)((s >> 16) & 0xffff) + (float)((s >> 32) & 0xffff) + (float)(s >> 48);
        x[i] = t->mean + t->std * (u * k - 2.0f) * inv;
    }
}

static int encode_row(qs_dtype dt, const float *x, int n, uint8_t *out, qs_err *e)
{
    if (dt == QS_DT_F32) { memcpy(out, x, (size_t)n * 4); return 0; }
    if (dt == QS_DT_F16 || dt == QS_DT_BF16) {
        for (int i = 0; i < n; i++) {
            uint16_t h;
            if (dt == QS_DT_F16) h = qs_gg_f16(x[i]);
            else { uint32_t u = qs_gg_bits(x[i]); h = (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16); }   /* RNE */
            qs_gg_wr16(out + 2 * i, h);
        }
        return 0;
    }
    const qs_ggml_codec *c = qs_ggml_codec_find(qs_dtype_get(dt)->name);
    if (!c) return qs_fail(e, "no encoder for %s", qs_dtype_get(dt)->name);
    return qs_ggml_quantize(c, x, (size_t)n, out, e);
}

typedef struct enc_job {
    const gtensor *t;
    size_t ti;
    uint64_t seed;
    int r0, nrows;
    uint8_t *out;
    atomic_int fail;
    qs_err err;
} enc_job;

static void enc_task(void *ctx, size_t task, int slot)
{
    (void)slot;
    enc_job *j = ctx;
    const int r = j->r0 + (int)task;
    float *x = malloc((size_t)j->t->cols * sizeof(float));
    qs_err e = {{0}};
    int rc = x ? 0 : qs_fail(&e, "out of memory");
    if (!rc) {
        gen_row(j->seed, j->ti, r, j->t, x);
        rc = encode_row(j->t->dt, x, j->t->cols, j->out + (size_t)task * row_bytes(j->t->dt, j->t->cols), &e);
    }
    free(x);
    if (rc && atomic_exchange(&j->fail, 1) == 0) j->err = e;
}

/* ---------------------------------------------------------------- the file */

static void w_u32(FILE *f, uint32_t v) { fwrite(&v, 4, 1, f); }
static void w_u64(FILE *f, uint64_t v) { fwrite(&v, 8, 1, f); }
static void w_str(FILE *f, const char *s) { w_u64(f, strlen(s)); fwrite(s, 1, strlen(s), f); }
static void kv_u32(FILE *f, const char *k, uint32_t v) { w_str(f, k); w_u32(f, 4); w_u32(f, v); }
static void kv_f32(FILE *f, const char *k, float v) { w_str(f, k); w_u32(f, 6); fwrite(&v, 4, 1, f); }
static void kv_str(FILE *f, const char *k, const char *v) { w_str(f, k); w_u32(f, 8); w_str(f, v); }

/* GPT-2's bytes_to_unicode spelling of byte b, UTF-8. */
static void byte_token(int b, char out[4])
{
    int cp = b, n = 0;
    if (!((b >= 33 && b < 127) || (b >= 161 && b < 173) || (b >= 174 && b < 256))) {
        for (int i = 0; i < b; i++) n += !((i >= 33 && i < 127) || (i >= 161 && i < 173) || (i >= 174 && i < 256));
        cp = 256 + n;
    }
    if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; }
    else { out[0] = (char)(0xc0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3f)); out[2] = 0; }
}

static void vocab_kv(FILE *f, int V)
{
    static const char *const ctl[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>", "<pad>"};
    kv_str(f, "tokenizer.ggml.model", "gpt2");
    kv_str(f, "tokenizer.ggml.pre", "smollm");
    w_str(f, "tokenizer.ggml.tokens"); w_u32(f, 9); w_u32(f, 8); w_u64(f, (uint64_t)V);
    char b[32];
    for (int i = 0; i < V; i++) {
        if (i < 5) w_str(f, ctl[i]);
        else if (i < 5 + 256) { byte_token(i - 5, b); w_str(f, b); }
        else { snprintf(b, sizeof b, "<extra_%d>", i); w_str(f, b); }
    }
    w_str(f, "tokenizer.ggml.token_type"); w_u32(f, 9); w_u32(f, 5); w_u64(f, (uint64_t)V);
    for (int i = 0; i < V; i++) w_u32(f, i == 3 ? 2 : i < 5 ? 3 : 1);
    w_str(f, "tokenizer.ggml.merges"); w_u32(f, 9); w_u32(f, 8); w_u64(f, 0);
    kv_u32(f, "tokenizer.ggml.bos_token_id", 1);
}

static void header(FILE *f, const qs_llm_gen *g, const gtensor *t, size_t nt)
{
    const qs_llm_cfg *c = &g->c;
    fwrite("GGUF", 1, 4, f);
    w_u32(f, 3);
    w_u64(f, nt);
    w_u64(f, 20);   /* key/value pairs below (14 + the vocabulary's 6) */
    kv_str(f, "general.architecture", "llama");
    char nm[96];
    snprintf(nm, sizeof nm, "qscope random llama %dx%d %s", c->n_layer, c->dim, qs_dtype_get(g->dt)->name);
    kv_str(f, "general.name", nm);
    kv_u32(f, "general.alignment", ALIGN);
    kv_u32(f, "llama.block_count", (uint32_t)c->n_layer);
    kv_u32(f, "llama.context_length", (uint32_t)c->ctx);
    kv_u32(f, "llama.embedding_length", (uint32_t)c->dim);
    kv_u32(f, "llama.feed_forward_length", (uint32_t)c->ffn);
    kv_u32(f, "llama.attention.head_count", (uint32_t)c->n_head);
    kv_u32(f, "llama.attention.head_count_kv", (uint32_t)c->n_kv_head);
    kv_f32(f, "llama.rope.freq_base", c->rope_base);
    kv_f32(f, "llama.attention.layer_norm_rms_epsilon", c->eps);
    kv_u32(f, "llama.rope.dimension_count", (uint32_t)c->head_dim);
    kv_u32(f, "llama.attention.key_length", (uint32_t)c->head_dim);
    kv_u32(f, "llama.vocab_size", (uint32_t)c->vocab);
    vocab_kv(f, c->vocab);
    for (size_t i = 0; i < nt; i++) {
        w_str(f, t[i].name);
        w_u32(f, t[i].rows ? 2 : 1);
        w_u64(f, (uint64_t)t[i].cols);
        if (t[i].rows) w_u64(f, (uint64_t)t[i].rows);
        w_u32(f, ggml_type(t[i].dt));
        w_u64(f, t[i].offset);
    }
}

static void pad(FILE *f)
{
    static const uint8_t z[ALIGN];
    long p = ftell(f);
    if (p > 0 && p % ALIGN) fwrite(z, 1, (size_t)(ALIGN - p % ALIGN), f);
}

int qs_llm_gen_write(const qs_llm_gen *g, const char *path, uint64_t *params, qs_err *e)
{
    if (qs_llm_cfg_check(&g->c, e)) return -1;
    const qs_dtype_traits *tr = qs_dtype_get(g->dt);
    if ((g->c.dim | g->c.ffn | (g->c.n_head * g->c.head_dim)) % (int)tr->block_elems)
        return qs_fail(e, "%s needs rows of whole %u-element blocks: dim %d, ffn %d, heads x head_dim %d", tr->name,
                       tr->block_elems, g->c.dim, g->c.ffn, g->c.n_head * g->c.head_dim);
    size_t nt;
    gtensor *t = tensors(g, &nt);
    uint8_t *buf = malloc(BLOCK_BYTES);
    FILE *f = fopen(path, "wb");
    int rc = -1;
    if (!t || !buf) { qs_fail(e, "out of memory"); goto out; }
    if (!f) { qs_write_fail(e, path, errno); goto out; }
    header(f, g, t, nt);
    pad(f);
    uint64_t np = 0;
    for (size_t i = 0; i < nt; i++) {
        const int rows = t[i].rows ? t[i].rows : 1;
        const uint64_t rb = row_bytes(t[i].dt, t[i].cols);
        const int per = (int)(BLOCK_BYTES / rb) > 0 ? (int)(BLOCK_BYTES / rb) : 1;
        for (int r0 = 0; r0 < rows; r0 += per) {
            enc_job j = {&t[i], i, g->seed, r0, rows - r0 < per ? rows - r0 : per, buf, 0, {{0}}};
            qs_pool_for(qs_pool_cpus(), (size_t)j.nrows, enc_task, &j);
            if (atomic_load(&j.fail)) { *e = j.err; goto out; }
            fwrite(buf, 1, (size_t)(rb * (uint64_t)j.nrows), f);
        }
        np += (uint64_t)rows * (uint64_t)t[i].cols;
        pad(f);
        if (ferror(f)) break;
    }
    if (ferror(f)) { qs_write_fail(e, path, errno); goto out; }
    if (params) *params = np;
    rc = 0;
out:
    if (f && fclose(f) && !rc) rc = qs_write_fail(e, path, errno);
    free(buf);
    free(t);
    return rc;
}
