/*
** Models larger than memory (llm_load.h, qs_llm_load_mapped): a GGUF file stays mapped and the model's
** matrices are typed weights into it (kernels/llm_wtype.h), widened a panel at a time inside the
** products; only the norms and biases are FP32 copies.  Reading a whole file through a mapping would
** make every page resident, so the file's hash and the finite-values check run in pieces whose pages
** are released as they go (the forward pass releases each matrix after its product the same way).
** Also the choice between FP32 and mapped weights of `llm eval --weights`.
*/
#include "llm_load_internal.h"
#include "../kernels/llm_gemma.h"
#include "tensor.h"
#include "../kernels/llm_wtype.h"
#include "../kernels/pool.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define PIECE ((size_t)64 << 20)   /* bytes hashed or checked between releases */

static void release(const uint8_t *p, size_t n)
{
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p / pg * pg, b = ((uintptr_t)p + n + pg - 1) / pg * pg;
    madvise((void *)a, b - a, MADV_DONTNEED);
}

void qs_llm__hash_update(XXH3_state_t *hs, const uint8_t *buf, size_t len, int mapped)
{
    if (!mapped) { XXH3_128bits_update(hs, buf, len); return; }
    for (size_t o = 0; o < len; o += PIECE) {   /* (the streamed digest is the same value) */
        const size_t n = len - o < PIECE ? len - o : PIECE;
        XXH3_128bits_update(hs, buf + o, n);
        release(buf + o, n);
    }
}

void qs_llm__hash(const uint8_t *buf, size_t len, int mapped, char out[33])
{
    XXH128_hash_t h;
    XXH3_state_t *st = mapped ? XXH3_createState() : NULL;
    if (!st) h = XXH3_128bits(buf, len);
    else {
        XXH3_128bits_reset(st);
        qs_llm__hash_update(st, buf, len, 1);
        h = XXH3_128bits_digest(st);
        XXH3_freeState(st);
    }
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
}

void qs_llm__unmap(qs_llm_file *f)
{
    free(f->wts);
    for (int i = 0; i < f->nwmaps; i++) qs_file_map_close(&f->wmaps[i]);
    free(f->wmaps);
    f->wts = NULL;
    f->wmaps = NULL;
    f->nwmaps = 0;
}

/* ---------------------------------------------------------------- finite values, on the pool */

typedef struct fin_job { const qs_wt *t; int rows_per; _Atomic long long bad; atomic_int oom; } fin_job;

static void fin_task(void *ctx, size_t task, int slot)
{
    (void)slot;
    fin_job *j = ctx;
    const int r0 = (int)task * j->rows_per, r1 = r0 + j->rows_per < j->t->rows ? r0 + j->rows_per : j->t->rows;
    float *row = malloc((size_t)j->t->cols * sizeof(float));
    if (!row) { atomic_store(&j->oom, 1); return; }
    for (int r = r0; r < r1; r++) {
        qs_wt_row(j->t, r, 0, j->t->cols, row);
        for (int k = 0; k < j->t->cols; k++)
            if (!(row[k] - row[k] == 0)) {
                const long long at = (long long)r * j->t->cols + k;   /* the smallest of the tasks' firsts */
                long long cur = atomic_load(&j->bad);
                while ((cur < 0 || at < cur) && !atomic_compare_exchange_weak(&j->bad, &cur, at)) {}
                break;
            }
    }
    free(row);
    release(j->t->p + (size_t)r0 * j->t->row_bytes, (size_t)(r1 - r0) * j->t->row_bytes);
}

/* First element (row-major) of t that is NaN or Inf, -1 if none, -2 without memory. */
static long long first_nonfinite(const qs_wt *t)
{
    int per = (int)(PIECE / 4 / (t->row_bytes ? t->row_bytes : 1));
    if (per < 1) per = 1;
    fin_job j = {t, per, -1, 0};
    const size_t n = (size_t)(t->rows + per - 1) / per;
    qs_pool_for(qs_pool_cpus(), n, fin_task, &j);
    return atomic_load(&j.oom) ? -2 : atomic_load(&j.bad);
}

/* ---------------------------------------------------------------- the model */

/* Tensor `name` (in one of the sources) as a typed matrix [rows][cols] of a type with a decoder; its
** finite values checked. */
static int map_t(const qs_llm_src *srcs, int nsrc, const char *where, const char *name, int rows, int cols, qs_wt *t,
                 qs_err *e)
{
    int k = 0;
    const qs_tdesc *d = qs_llm__find(srcs, nsrc, name, &k);
    if (!d) return qs_fail(e, "%s: missing tensor %s", where, name);
    const qs_llm_src *src = &srcs[k];
    where = src->path;
    if (d->ndim != 2 || d->shape[0] != (uint64_t)rows || d->shape[1] != (uint64_t)cols) {
        char got[64];
        qs_shape_str(d->shape, d->ndim, got, sizeof got);
        return qs_fail(e, "%s: tensor %s has shape %s, expected %dx%d", where, name, got, rows, cols);
    }
    const qs_dtype_traits *tr = qs_dtype_get(d->dtype);
    if (!tr || !tr->decode || !tr->is_float || d->codec != QS_CODEC_NONE || cols % (int)tr->block_elems)
        return qs_fail(e, "%s: tensor %s of type %s cannot be read in place", where, name, tr ? tr->name : "?");
    const size_t rb = (size_t)cols / tr->block_elems * tr->block_bytes;
    if (d->offset > src->len || rb * (size_t)rows > src->len - d->offset || d->nbytes != rb * (size_t)rows)
        return qs_fail(e, "%s: tensor %s overruns the file", where, name);
    *t = (qs_wt){src->buf + d->offset, rb, (int)d->dtype, rows, cols, 1};
    long long bad = first_nonfinite(t);
    if (bad == -2) return qs_fail(e, "out of memory");
    if (bad >= 0) return qs_fail(e, "%s: tensor %s holds NaN or Inf at element %lld", where, name, bad);
    return 0;
}

/* Norms (and biases) only: the matrices are typed. */
static int alloc_small(qs_llm_model *m, const qs_llm_cfg *c, qs_err *e)
{
    memset(m, 0, sizeof *m);
    const size_t d = (size_t)c->dim, n = d * (2 * (size_t)c->n_layer + 1);
    m->c = *c;
    m->arena = malloc(n * sizeof(float));
    m->L = calloc((size_t)c->n_layer, sizeof *m->L);
    if (!m->arena || !m->L) return qs_fail(e, "out of memory");
    m->arena_len = n;
    float *p = m->arena;
    m->out_norm = p; p += d;
    for (int l = 0; l < c->n_layer; l++) {
        m->L[l].attn_norm = p; p += d;
        m->L[l].ffn_norm = p; p += d;
    }
    return 0;
}

int qs_llm__map_weights(qs_llm_file *f, const qs_llm_cfg *cfg, const qs_llm_arch *arch, const qs_llm_src *src,
                        int nsrc, const char *where, qs_llm_scheme scheme, int tie, qs_err *e)
{
    qs_llm_model *m = &f->m;
    char nm[96], on[96];
    /* the typed path runs the Llama block's products (kernels/llm.c); the Gemma block, experts and QK-norm
    ** read FP32 arrays */
    const char *beyond = qs_llm_gemma_block(cfg) ? "Gemma's block" : cfg->n_expert ? "mixture-of-experts FFNs"
                       : cfg->qk_norm ? "QK-norm" : cfg->rope_nff ? "RoPE frequency factors" : NULL;
    if (beyond)
        return qs_fail(e, "%s: --weights mapped runs the Llama/Qwen2/Mistral block only, not %s (use --weights f32)",
                       cfg->arch[0] ? cfg->arch : where, beyond);
    const int has_out = qs_llm__find(src, nsrc, qs_llm_tensor_name(scheme, QS_T_OUT, 0, on, sizeof on), NULL) != NULL;
    int tied = tie || !has_out;
    if (tied && !(arch->flags & QS_ARCH_TIED)) return qs_fail(e, "%s: missing tensor %s", where, on);
    int bias = (arch->flags & QS_ARCH_QKV_BIAS) && qs_llm__find(src, nsrc, qs_llm_tensor_name(scheme, QS_T_BQ, 0, nm, sizeof nm), NULL);
    if (qs_llm_cfg_check(cfg, e) || alloc_small(m, cfg, e) || (bias && qs_llm_alloc_bias(m, e))) return -1;
    const size_t nw = (size_t)cfg->n_layer * QS_WT_NROLE + 2;
    if (!(f->wts = calloc(nw, sizeof *f->wts))) return qs_fail(e, "out of memory");
    const int d = cfg->dim, kvd = cfg->n_kv_head * cfg->head_dim, F = cfg->ffn, qd = cfg->n_head * cfg->head_dim;
    size_t used = tied && has_out;   /* tensors placed (an output tied by config.json: read by neither loader) */
    qs_wt *te = &f->wts[nw - 2], *to = &f->wts[nw - 1];
    if (map_t(src, nsrc, where, qs_llm_tensor_name(scheme, QS_T_EMB, 0, nm, sizeof nm), cfg->vocab, d, te, e)) return -1;
    if (!tied && map_t(src, nsrc, where, on, cfg->vocab, d, to, e)) return -1;
    m->tw_embd = te;
    m->tw_out = tied ? te : to;
    used += 2 - tied;
    if (qs_llm__load_t(src, nsrc, where, qs_llm_tensor_name(scheme, QS_T_OUT_NORM, 0, nm, sizeof nm), 0, (uint64_t)d, m->out_norm, e))
        return -1;
    used++;
    static const qs_llm_tensor role[QS_WT_NROLE] = {QS_T_Q, QS_T_K, QS_T_V, QS_T_O, QS_T_GATE, QS_T_UP, QS_T_DOWN};
    const int rows[QS_WT_NROLE] = {qd, kvd, kvd, d, F, F, d}, cols[QS_WT_NROLE] = {d, d, d, qd, d, d, F};
    for (int l = 0; l < cfg->n_layer; l++) {
        qs_llm_layer *L = &m->L[l];
        qs_wt *tw = &f->wts[(size_t)l * QS_WT_NROLE];
        for (int r = 0; r < QS_WT_NROLE; r++)
            if (map_t(src, nsrc, where, qs_llm_tensor_name(scheme, role[r], l, nm, sizeof nm), rows[r], cols[r], &tw[r], e))
                return -1;
        L->tw = tw;
        struct { qs_llm_tensor role; int n; float *dst; } v[] = {
            {QS_T_ATTN_NORM, d, L->attn_norm}, {QS_T_FFN_NORM, d, L->ffn_norm}, {QS_T_BQ, qd, L->bq}, {QS_T_BK, kvd, L->bk},
            {QS_T_BV, kvd, L->bv}};
        for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
            if (!v[i].dst) continue;
            if (qs_llm__load_t(src, nsrc, where, qs_llm_tensor_name(scheme, v[i].role, l, nm, sizeof nm), 0, (uint64_t)v[i].n, v[i].dst, e))
                return -1;
            used++;
        }
        used += QS_WT_NROLE;
    }
    size_t all = 0;
    for (int k = 0; k < nsrc; k++) all += src[k].c.n;
    if (used != all)   /* a tensor this loader would ignore (QK-norm, other biases, ...): not evaluated wrong */
        return qs_fail(e, "%s: %zu of the %zu tensors are not weights mapped models support (--weights f32 loads them "
                          "as FP32)", where, all - used, all);
    return 0;
}

/* ---------------------------------------------------------------- the choice */

const char *qs_llm_weights_name(qs_llm_weights w)
{
    return w == QS_LLM_WEIGHTS_F32 ? "f32" : w == QS_LLM_WEIGHTS_MAPPED ? "mapped" : "auto";
}

/* Bytes of the FP32 copy of a file's tensors (their elements x 4; a GGUF's or a safetensors' header), 0 if
** unreadable. */
static uint64_t f32_bytes(const char *path)
{
    qs_err e = {{0}};
    int fd = qs_open_regular(path, &e);
    struct stat st;
    if (fd < 0) return 0;
    qs_container c;
    memset(&c, 0, sizeof c);
    uint64_t n = 0;
    if (fstat(fd, &st) == 0 && qs_parse_fd(fd, (uint64_t)st.st_size, path, NULL, &c, &e) == 0) {
        for (size_t i = 0; i < c.n; i++) n += c.t[i].numel * 4;
        qs_container_free(&c);
    }
    close(fd);
    return n;
}

/* The same over a directory's *.safetensors files. */
static uint64_t dir_f32_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    uint64_t n = 0;
    for (struct dirent *de; d && (de = readdir(d));) {
        const size_t l = strlen(de->d_name);
        if (l <= 12 || strcmp(de->d_name + l - 12, ".safetensors")) continue;
        char p[4096];
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) < (int)sizeof p) n += f32_bytes(p);
    }
    if (d) closedir(d);
    return n;
}

int qs_llm_load_mapped(const char *path, qs_llm_file *f, qs_err *e)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return qs_llm_load_hf_mapped(path, f, e);
    return qs_llm_load_gguf_mapped(path, f, e);
}

int qs_llm_load_weights_mode(const char *path, qs_llm_weights mode, qs_llm_file *f, char *why, size_t cap, qs_err *e)
{
    struct stat st;
    const int dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    const uint64_t mem = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    if (mode == QS_LLM_WEIGHTS_AUTO) {
        const uint64_t need = dir ? dir_f32_bytes(path) : f32_bytes(path);
        mode = need > mem / 2 ? QS_LLM_WEIGHTS_MAPPED : QS_LLM_WEIGHTS_F32;
        snprintf(why, cap, "%s (auto: the FP32 copy would take %.2f GiB, %s half of the %.1f GiB of memory)",
                 qs_llm_weights_name(mode), need / 1073741824.0, mode == QS_LLM_WEIGHTS_MAPPED ? "more than" : "at most",
                 mem / 1073741824.0);
    } else
        snprintf(why, cap, "%s (--weights)", qs_llm_weights_name(mode));
    return mode == QS_LLM_WEIGHTS_MAPPED ? qs_llm_load_mapped(path, f, e) : qs_llm_load(path, f, e);
}
