/*
** Hugging Face checkpoint writer (see llm_save_hf.h).
*/
#include "llm_save_hf.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "llm_arch.h"

enum { MAXT = 3 + 12 * 4096 };

typedef qs_llm_hf_tensor wt;

int qs_llm_hf_tensors(const qs_llm_model *m, qs_llm_hf_tensor *t, int cap)
{
    const qs_llm_cfg *c = &m->c;
    size_t d = (size_t)c->dim, q = qs_llm_q_dim(c), kv = (size_t)c->n_kv_head * (size_t)c->head_dim,
           f = (size_t)c->ffn;
    int n = 0, P = !c->rope_neox;
#define ADD(T, L, ptr, r, cc, pm) do { if (n < cap) { qs_llm_tensor_name(QS_LLM_HF, T, L, t[n].name, sizeof t[n].name); \
        t[n].p = (ptr); t[n].rows = (r); t[n].cols = (cc); t[n].perm = (pm); n++; } } while (0)
    ADD(QS_T_EMB, 0, m->tok_embd, (size_t)c->vocab, d, 0);
    if (m->output != m->tok_embd) ADD(QS_T_OUT, 0, m->output, (size_t)c->vocab, d, 0);
    ADD(QS_T_OUT_NORM, 0, m->out_norm, 0, d, 0);
    for (int l = 0; l < c->n_layer; l++) {
        const qs_llm_layer *L = &m->L[l];
        ADD(QS_T_ATTN_NORM, l, L->attn_norm, 0, d, 0);
        ADD(QS_T_Q, l, L->wq, q, d, P ? c->n_head : 0);
        ADD(QS_T_K, l, L->wk, kv, d, P ? c->n_kv_head : 0);
        ADD(QS_T_V, l, L->wv, kv, d, 0);
        ADD(QS_T_O, l, L->wo, d, q, 0);
        ADD(QS_T_FFN_NORM, l, L->ffn_norm, 0, d, 0);
        ADD(QS_T_GATE, l, L->w_gate, f, d, 0);
        ADD(QS_T_UP, l, L->w_up, f, d, 0);
        ADD(QS_T_DOWN, l, L->w_down, d, f, 0);
        if (L->bq) {
            ADD(QS_T_BQ, l, L->bq, 0, q, P ? c->n_head : 0);
            ADD(QS_T_BK, l, L->bk, 0, kv, P ? c->n_kv_head : 0);
            ADD(QS_T_BV, l, L->bv, 0, kv, 0);
        }
    }
#undef ADD
    return n;
}

/* Write tensor t; perm > 0 heads: GGUF row h*hd + 2i + j becomes HF row h*hd + j*hd/2 + i.  A 1-D
** tensor (rows 0) is a row of `cols` values, permuted the same way along its length. */
static int write_tensor(FILE *fp, const wt *t, int head_dim)
{
    size_t rows = t->rows ? t->rows : t->cols, w = t->rows ? t->cols : 1;
    if (!t->perm) return fwrite(t->p, sizeof(float), rows * w, fp) == rows * w ? 0 : -1;
    size_t hd = (size_t)head_dim, half = hd / 2;
    for (size_t r = 0; r < rows; r++) {   /* r: HF row */
        size_t h = r / hd, k = r % hd, j = k / half, i = k % half, src = h * hd + 2 * i + j;
        if (fwrite(t->p + src * w, sizeof(float), w, fp) != w) return -1;
    }
    return 0;
}

int qs_llm_save_safetensors_n(const char *path, const qs_llm_model *const *ms, const char *const *suffix, int k,
                              qs_err *e)
{
    wt *t = k > 0 ? calloc((size_t)k * MAXT, sizeof *t) : NULL;
    json_t *h = json_object();
    char *hs = NULL;
    FILE *fp = NULL;
    int rc = -1, n = 0;
    if (!t || !h) { qs_fail(e, "out of memory"); goto out; }
    for (int i = 0; i < k; i++) {
        int n0 = n;
        n += qs_llm_hf_tensors(ms[i], t + n, MAXT);
        for (int j = n0; j < n; j++) {
            size_t l = strlen(t[j].name);
            snprintf(t[j].name + l, sizeof t[j].name - l, "%s", suffix[i]);
        }
    }
    size_t off = 0;
    json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "pt"));
    for (int i = 0; i < n; i++) {
        size_t cnt = (t[i].rows ? t[i].rows : 1) * t[i].cols;
        json_t *shape = t[i].rows ? json_pack("[I,I]", (json_int_t)t[i].rows, (json_int_t)t[i].cols)
                                  : json_pack("[I]", (json_int_t)t[i].cols);
        json_object_set_new(h, t[i].name, json_pack("{s:s,s:o,s:[I,I]}", "dtype", "F32", "shape", shape, "data_offsets",
                                                    (json_int_t)off, (json_int_t)(off + 4 * cnt)));
        off += 4 * cnt;
    }
    if (!(hs = json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS))) { qs_fail(e, "out of memory"); goto out; }
    size_t hl = strlen(hs), pad = (8 - hl % 8) % 8;
    uint64_t hlen = hl + pad;
    if (!(fp = fopen(path, "wb"))) { qs_fail(e, "%s: cannot create: %s", path, strerror(errno)); goto out; }
    int bad = fwrite(&hlen, 8, 1, fp) != 1 || fwrite(hs, 1, hl, fp) != hl || fwrite("        ", 1, pad, fp) != pad;
    for (int i = 0; i < n && !bad; i++) bad = write_tensor(fp, &t[i], ms[0]->c.head_dim);
    int cl = fclose(fp);
    fp = NULL;
    if (bad || cl) { qs_fail(e, "%s: write failed: %s", path, strerror(errno)); goto out; }
    rc = 0;
out:
    if (fp) fclose(fp);
    free(hs);
    json_decref(h);
    free(t);
    return rc;
}

int qs_llm_save_safetensors(const char *path, const qs_llm_model *m, qs_err *e)
{
    const char *none = "";
    return qs_llm_save_safetensors_n(path, &m, &none, 1, e);
}

static int write_config(const char *path, const qs_llm_model *m, const qs_llm_save_tok *tok, qs_err *e)
{
    const qs_llm_cfg *c = &m->c;
    json_t *j = json_pack("{s:[s],s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:b,s:s,s:s,s:b}",
                          "architectures", "LlamaForCausalLM", "model_type", "llama", "hidden_size", c->dim,
                          "intermediate_size", c->ffn, "num_hidden_layers", c->n_layer, "num_attention_heads",
                          c->n_head, "num_key_value_heads", c->n_kv_head, "head_dim", c->head_dim, "vocab_size",
                          c->vocab, "max_position_embeddings", c->ctx, "rope_theta", (double)c->rope_base,
                          "rms_norm_eps", (double)c->eps, "tie_word_embeddings", m->output == m->tok_embd,
                          "hidden_act", "silu", "torch_dtype", "float32", "attention_bias", m->bias_arena != NULL);
    if (!j) return qs_fail(e, "out of memory");
    if (tok && tok->bos >= 0) json_object_set_new(j, "bos_token_id", json_integer(tok->bos));
    if (tok && tok->eos >= 0) json_object_set_new(j, "eos_token_id", json_integer(tok->eos));
    int rc = json_dump_file(j, path, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(j);
    return rc ? qs_fail(e, "%s: cannot write", path) : 0;
}

/* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for 256 + k. */
static unsigned byte_char(unsigned b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
    unsigned k = 0;
    for (unsigned x = 0; x < b; x++) k += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174);
    return 256 + k;
}

/* A byte-level BPE tokenizer.json without merges: every byte is its own token, id = byte value. */
static int write_byte_tokenizer(const char *path, qs_err *e)
{
    json_t *vocab = json_object();
    for (unsigned b = 0; b < 256 && vocab; b++) {
        unsigned cp = byte_char(b);
        char s[4];
        if (cp < 0x80) { s[0] = (char)cp; s[1] = 0; }
        else { s[0] = (char)(0xC0 | cp >> 6); s[1] = (char)(0x80 | (cp & 0x3F)); s[2] = 0; }
        json_object_set_new(vocab, s, json_integer(b));
    }
    json_t *j = vocab ? json_pack("{s:{s:s,s:o,s:[]},s:{s:s,s:b,s:b,s:b},s:{s:s,s:b,s:b,s:b},s:[]}", "model", "type",
                                  "BPE", "vocab", vocab, "merges", "pre_tokenizer", "type", "ByteLevel",
                                  "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 0, "decoder", "type",
                                  "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 0,
                                  "added_tokens")
                      : NULL;
    if (!j) return qs_fail(e, "out of memory");
    int rc = json_dump_file(j, path, JSON_INDENT(1));
    json_decref(j);
    return rc ? qs_fail(e, "%s: cannot write", path) : 0;
}

static int copy_file(const char *src, const char *dst, int optional, qs_err *e)
{
    FILE *in = fopen(src, "rb");
    if (!in) return optional && errno == ENOENT ? 0 : qs_fail(e, "%s: cannot open: %s", src, strerror(errno));
    FILE *out = fopen(dst, "wb");
    if (!out) { fclose(in); return qs_fail(e, "%s: cannot create: %s", dst, strerror(errno)); }
    char buf[65536];
    size_t n;
    int bad = 0;
    while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0) bad = fwrite(buf, 1, n, out) != n;
    bad |= ferror(in);
    fclose(in);
    if (fclose(out) || bad) return qs_fail(e, "%s: copy from %s failed", dst, src);
    return 0;
}

int qs_llm_save_hf(const char *dir, const qs_llm_model *m, const qs_llm_save_tok *tok, qs_err *e)
{
    char p[4096], s[4096];
    if (strlen(dir) > 3800) return qs_fail(e, "%s: path too long", dir);
    if (qs_llm_cfg_core_only(&m->c, m->c.ctx, "the checkpoint writer (LlamaForCausalLM)", e)) return -1;
    if (mkdir(dir, 0777) && errno != EEXIST) return qs_fail(e, "%s: cannot create: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) return qs_fail(e, "%s: not a directory", dir);
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (write_config(p, m, tok, e)) return -1;
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (qs_llm_save_safetensors(p, m, e)) return -1;
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    if (tok && tok->byte_level) return write_byte_tokenizer(p, e);
    if (tok && tok->copy_dir) {
        snprintf(s, sizeof s, "%s/tokenizer.json", tok->copy_dir);
        if (copy_file(s, p, 0, e)) return -1;
        snprintf(s, sizeof s, "%s/tokenizer_config.json", tok->copy_dir);
        snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
        if (copy_file(s, p, 1, e)) return -1;
    }
    return 0;
}
