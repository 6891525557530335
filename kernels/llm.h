/*
** A Llama-architecture causal LM forward pass in FP32 (SmolLM2-135M and any model of the same
** shape): token embedding, per layer RMSNorm -> Q/K/V -> RoPE -> grouped-query causal attention
** over a KV cache -> output projection -> residual, RMSNorm -> SwiGLU FFN -> residual; final
** RMSNorm and the (possibly tied) output projection.  Matrix products go through OpenBLAS
** (cblas_sgemm); everything else is plain C.
**
** Conventions (those of a llama.cpp GGUF file, which is where the weights come from):
**   - every weight matrix is row-major [out][in] (PyTorch's nn.Linear layout; GGUF ne = {in, out});
**   - RoPE rotates adjacent pairs (2i, 2i+1) of each head with angle pos * base^(-2i/head_dim)
**     (llama.cpp's converter permutes the Q/K rows of Hugging Face llama checkpoints so that this is
**     right), or with cfg.rope_neox the pairs (i, i + head_dim/2) at the same angle (rotate_half);
**   - attention scores are scaled by 1/sqrt(head_dim); query head h reads KV head h / (n_head/n_kv_head).
**
** Low precision ("numerics"), all optional and all simulated by fake-quantization in FP32:
**   - weights: qs_llm_quantize_weights() rounds every linear weight (including the output projection)
**     once, blocks along the input dimension (rows of W; NVFP4's FP32 scale is per matrix);
**   - activations: the input of every linear layer is rounded row by row (one token = one run, blocks
**     along the channels) just before the product;  optionally with the Rollout-ResQ correction
**     X' = Q(X) + S(Q(X - Q(X))), S = identity (dense) or 2:4 magnitude sparsity;
**   - KV cache: K (after RoPE) and V rows are rounded when they are written to the cache.
** Row-wise rounding keeps every sequence of a batch independent of the others (an NVFP4 per-tensor
** scale becomes a per-token scale for activations).
*/
#ifndef QS_LLM_H
#define QS_LLM_H

#include <stddef.h>
#include <stdint.h>

#include "format_apply.h"
#include "qs_err.h"

#define QS_LLM_ROPE_FF_MAX 256   /* RoPE frequency factors: head_dim <= 512 */
#define QS_LLM_MOE_MAX_USED 64   /* experts used per token */

typedef struct qs_llm_cfg {
    int n_layer, dim, n_head, n_kv_head, head_dim, ffn, vocab, ctx;
    float rope_base, eps;
    int rope_neox;            /* 0: RoPE on adjacent pairs (2i, 2i+1) (llama GGUF); 1: on (i, i + head_dim/2),
                              ** Hugging Face's rotate_half (safetensors checkpoints, GGUF qwen2) */
    /* Gemma 2 / Gemma 3 blocks (kernels/llm_gemma.h); all 0 for the Llama block, which also runs qk_norm (Qwen3)
    ** and sliding_window on every layer (Mistral) */
    int ffn_gelu;             /* GeGLU: gelu_tanh(gate) * up instead of SwiGLU */
    int sandwich;             /* post-attention and post-FFN RMSNorms (layer post_attn_norm, post_ffn_norm) */
    int qk_norm;              /* per-head RMSNorm of Q and K before RoPE (layer q_norm, k_norm) */
    float emb_scale;          /* token embeddings times this (Gemma: sqrt(dim)); 0 = 1 */
    float attn_scale;         /* attention score scale; 0 = 1/sqrt(head_dim) (Gemma: query_pre_attn_scalar^-1/2) */
    float attn_softcap;       /* scores -> cap * tanh(score / cap) before the mask (Gemma 2); 0 = none */
    float final_softcap;      /* logits -> cap * tanh(logit / cap) (Gemma 2); 0 = none */
    int sliding_window;       /* local layers (qs_llm_layer.sliding) see the last sliding_window positions; 0 = none */
    int swa_pattern;          /* layer l is local iff l % swa_pattern < swa_pattern - 1 (Gemma 2: 2, Gemma 3: 6);
                              ** 0 with a window: every layer */
    float rope_base_swa;      /* RoPE base of the local layers; 0 = rope_base (Gemma 3: 10000) */
    float rope_linear;        /* linear RoPE scaling of the global layers: positions / rope_linear; 0 = none */
    /* Beyond the Llama core, run by the Llama block (all 0: off; docs/llm.md, *Model families*; experts in
    ** kernels/llm_ext.h); qk_norm and sliding_window above serve both blocks */
    int rope_nff;             /* > 0 (= head_dim/2): RoPE frequency i divided by rope_ff[i] (Llama 3 rope_freqs) */
    float rope_ff[QS_LLM_ROPE_FF_MAX];
    int n_expert, n_expert_used;   /* > 0: every layer's FFN is a mixture of experts of width ffn (kernels/llm_moe.h) */
    int moe_norm_topk;        /* renormalise the top-k routing weights to sum 1 (Mixtral, Qwen3-MoE) */
    int ffn_shexp;            /* > 0: a shared expert of this width with a sigmoid gate (Qwen2-MoE) */
    char arch[16];            /* the architecture's name for messages ("qwen3"); "" when unknown */
} qs_llm_cfg;

typedef struct qs_llm_layer {
    float *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w_gate, *w_up, *w_down;   /* wq [q_dim][dim], wo [dim][q_dim] */
    float *bq, *bk, *bv;      /* Q/K/V projection biases (Qwen2), added after the products; NULL = none */
    float *post_attn_norm, *post_ffn_norm;   /* [dim] sandwich norms (cfg.sandwich), else NULL */
    float *q_norm, *k_norm;   /* [head_dim] QK-norm (cfg.qk_norm), else NULL */
    int sliding;              /* 1: a local (sliding-window) layer */
    struct qs_llm_moe_w {     /* mixture-of-experts FFN (cfg.n_expert), in ext_arena; router NULL = dense FFN,
                              ** and then w_gate/w_up/w_down are NULL when it is set */
        float *router;        /* [n_expert][dim], FP32 (never rounded: routing runs in FP32) */
        float *gate, *up;     /* [n_expert][ffn][dim] */
        float *down;          /* [n_expert][dim][ffn] */
        float *sh_gate, *sh_up, *sh_down;   /* shared expert [ffn_shexp][dim], [dim][ffn_shexp]; NULL = none */
        float *sh_inp;        /* [dim]: the shared expert's sigmoid gate (Qwen2-MoE) */
    } moe;
    const struct qs_wt *tw;   /* typed weights (llm_wtype.h): the seven matrices left in their file's type,
                              ** tw[QS_WT_Q .. QS_WT_DOWN], wq .. w_down NULL; or NULL: the FP32 arrays */
} qs_llm_layer;
typedef struct qs_llm_moe_w qs_llm_moe_w;

typedef struct qs_llm_model {
    qs_llm_cfg c;
    float *tok_embd;          /* [vocab][dim] */
    float *output;            /* [vocab][dim]; == tok_embd when the embeddings are tied */
    float *out_norm;          /* [dim] */
    qs_llm_layer *L;          /* [n_layer] */
    float *arena;             /* one allocation holding every array above */
    size_t arena_len;         /* floats */
    float *bias_arena;        /* the Q/K/V biases of every layer (qs_llm_alloc_bias), or NULL */
    size_t bias_len;          /* floats */
    float *ext_arena;         /* the experts' weights (kernels/llm_ext.c), or NULL */
    size_t ext_len;           /* floats */
    /* Typed weights (llm_wtype.h: `llm eval --weights mapped`), or NULL: the embedding and the output head
    ** (== tw_embd when tied) left in their file's type, tok_embd / output NULL.  Only the forward pass and
    ** the logits read a model with typed weights; everything else needs the FP32 arrays. */
    const struct qs_wt *tw_embd, *tw_out;
    /* Weights rounded on the fly layer by layer (llm_wfly.h: a weight format over typed weights), or NULL */
    const struct qs_llm_wfly *wfly;
} qs_llm_model;

/* Check a configuration (positive sizes, head_dim even, n_head a multiple of n_kv_head, sizes small
** enough that every product fits in size_t and int).  head_dim is free: n_head * head_dim (the width of
** Q and of the attention output, qs_llm_q_dim) need not equal dim (Qwen3, Gemma). */
int qs_llm_cfg_check(const qs_llm_cfg *c, qs_err *e);
/* n_head * head_dim: rows of wq, columns of wo, width of the attention output. */
static inline size_t qs_llm_q_dim(const qs_llm_cfg *c) { return (size_t)c->n_head * (size_t)c->head_dim; }

/* Allocate an uninitialised model of this shape (one arena; QK-norm gains and experts in ext_arena, see
** kernels/llm_ext.c); tied: output aliases tok_embd. */
int qs_llm_alloc(qs_llm_model *m, const qs_llm_cfg *c, int tied, qs_err *e);
void qs_llm_free(qs_llm_model *m);
/* Give every layer Q/K/V bias arrays (uninitialised; biases stay FP32 under weight formats). */
int qs_llm_alloc_bias(qs_llm_model *m, qs_err *e);
/* Angular frequency of RoPE pair i: rope_base^(-2i/head_dim), divided by rope_ff[i] when cfg has them. */
double qs_llm_rope_freq(const qs_llm_cfg *c, int i);
/* A path that runs only the Llama core (training, the batched decoder) refuses a model beyond it, one
** line naming the architecture and what is missing: "qwen3: training does not run QK-norm".  max_pos:
** the positions the path needs (a sliding window no shorter changes nothing).  0 when it can run. */
int qs_llm_cfg_core_only(const qs_llm_cfg *c, int max_pos, const char *who, qs_err *e);
/* Deep copy (the copy is tied iff the source is). */
int qs_llm_clone(qs_llm_model *dst, const qs_llm_model *src, qs_err *e);

/* Fake-quantize every linear weight matrix in place (Q, K, V, O, gate, up, down and the output
** projection; norms stay FP32).  With tied embeddings the rounded matrix also serves the lookup.
** An element cast's scale=tensor|row|col (w->cscale) overrides `scaled` (one scale per output row). */
int qs_llm_quantize_weights(qs_llm_model *m, const qs_apply *w, int scaled, qs_err *e);
/* One matrix [rows][cols] rounded in place as qs_llm_quantize_weights rounds each (llm_wfly.c). */
int qs_llm_quantize_matrix(const qs_apply *w, int scaled, float *p, size_t rows, size_t cols, qs_err *e);

/* One run (a token's channels, a weight row) through a format into y (may equal x).  Row or tensor
** granularity makes the run one block; `scaled` gives element casts (fp8_*, fp6_*, fp4_e2m1, fp16,
** hif8) one FP32 scale per run, absmax -> the format's scale target (kernels/cast_scale.h: max_finite,
** 15 for hif8; bf16 unscaled), as FP8 recipes do (per-token activations, per-output-channel weights);
** block formats ignore it.  a->cscale = row scales the run whatever `scaled`; tensor or col fail (a run
** is one row: the callers refuse them for activations and the KV cache). */
int qs_llm_fakeq_row(const qs_apply *a, int scaled, const float *x, int n, float *y, qs_err *e);

typedef enum qs_llm_resq { QS_RESQ_NONE = 0, QS_RESQ_DENSE, QS_RESQ_24 } qs_llm_resq;
typedef struct qs_llm_online qs_llm_online;   /* run-time transforms of linear inputs (kernels/llm_rot.h) */

typedef struct qs_llm_numerics {
    const qs_apply *act;      /* NULL: FP32 linear inputs */
    qs_llm_resq resq;         /* Rollout-ResQ correction of the activation rounding (needs act) */
    const qs_apply *kv;       /* NULL: FP32 KV cache */
    int scaled;               /* plain casts get a per-row FP32 scale (qs_llm_fakeq_row) */
    /* Per-layer numerics (sensitivity, mixed-precision plans): when non-NULL, site s of layer l
    ** (the linear inputs QS_SITE_ATTN_IN .. QS_SITE_FFN_DOWN_IN, then QS_LLM_LSITE_KV for the K/V
    ** cache rows) is rounded with layer_fmt[l * QS_LLM_NLSITE + s] (NULL = FP32) instead of act / kv;
    ** `act` still rounds the final hidden state (the output projection's input). */
    const qs_apply *const *layer_fmt;
    /* rot=, rht= (kernels/llm_rot.h): the transforms of every linear layer's input rows, run before
    ** their rounding, matching weights transformed by qs_llm_transform.  NULL: none.  The decoder
    ** (llm_decode.h) refuses them. */
    const qs_llm_online *online;
} qs_llm_numerics;
#define QS_LLM_LSITE_KV 4     /* == QS_SITE_LINEAR_COUNT */
#define QS_LLM_NLSITE 5

/* Where activations are tapped (capture): the inputs of the linear layers, the KV-cache entries
** and the residual stream. */
typedef enum qs_llm_site {
    QS_SITE_ATTN_IN = 0,      /* RMSNorm output feeding Q/K/V          [rows][dim] */
    QS_SITE_ATTN_OUT,         /* attention output feeding o_proj        [rows][dim] */
    QS_SITE_FFN_IN,           /* RMSNorm output feeding gate/up         [rows][dim] */
    QS_SITE_FFN_DOWN_IN,      /* SwiGLU product feeding ffn_down        [rows][ffn] */
    QS_SITE_LINEAR_COUNT,     /* the sites above are the linear-layer inputs */
    QS_SITE_K = QS_SITE_LINEAR_COUNT, /* K after RoPE, as it enters the cache [rows][kv_dim] */
    QS_SITE_V,                /* V as it enters the cache               [rows][kv_dim] */
    QS_SITE_RESID,            /* residual stream after the block        [rows][dim] */
    QS_SITE_COUNT
} qs_llm_site;
const char *qs_llm_site_name(qs_llm_site s);

/* Called with the FP32 value of a tapped site before any activation rounding. rows = B*T, row
** r = sequence r / T, position pos0 + r % T. */
typedef void (*qs_llm_tap_fn)(void *ctx, int layer, qs_llm_site site, const float *x, int rows, int cols);

typedef struct qs_llm_state qs_llm_state;

/* Working state for `batch` sequences of at most `max_pos` positions each, forwarding at most
** `max_rows` = batch * T rows per call. */
qs_llm_state *qs_llm_state_new(const qs_llm_cfg *c, int batch, int max_pos, int max_rows, qs_err *e);
void qs_llm_state_free(qs_llm_state *s);
/* Keep packed copies of the weight matrices this state multiplies many rows with (up to max_bytes;
** kernels/llm_pgemm.h): for callers that run the same, unchanging weights again and again (model
** evaluation).  The models must outlive the state and not change.  -1 (e set) without memory. */
int qs_llm_state_pack_weights(qs_llm_state *s, size_t max_bytes, qs_err *e);

/* Forward T new positions pos0 .. pos0+T-1 of B sequences (B <= batch), tokens tok[b*T + t],
** appending their K/V to the cache (positions < pos0 must already be there).  Writes the final
** RMSNorm output (the input of the output projection) to hidden[(b*T + t)*dim].  tap may be NULL. */
int qs_llm_forward(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_state *s, const int32_t *tok,
                   int B, int T, int pos0, float *hidden, qs_llm_tap_fn tap, void *tap_ctx, qs_err *e);

/* The same from layer l0 on: x0 [B*T][dim] is the residual stream entering layer l0 (what a full
** forward pass of the same tokens computes there; NULL when l0 = 0).  The KV cache of layers < l0 is
** not written.  Bit-identical to qs_llm_forward when x0 is that pass's residual stream and layers
** < l0 have the same weights and numerics. */
int qs_llm_forward_from(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_state *s, const int32_t *tok,
                        int B, int T, int pos0, int l0, const float *x0, float *hidden, qs_llm_tap_fn tap,
                        void *tap_ctx, qs_err *e);

/* A view of src whose layers with layers[l] != 0 own a copy of their seven linear matrices rounded
** with w (as qs_llm_quantize_weights rounds them); everything else, the output projection included,
** aliases src.  Free with qs_llm_view_free (never qs_llm_free). */
int qs_llm_view_quantize_layers(qs_llm_model *dst, const qs_llm_model *src, const uint8_t *layers, const qs_apply *w,
                                int scaled, qs_err *e);
void qs_llm_view_free(qs_llm_model *v);
/* The same with one format per layer: w[l] rounds layer l's seven matrices, w[l] NULL leaves the layer
** aliasing src (w NULL in qs_llm_view_quantize_layers: the selected layers are copied unrounded). */
int qs_llm_view_quantize_per_layer(qs_llm_model *dst, const qs_llm_model *src, const qs_apply *const *w, int scaled,
                                   qs_err *e);

/* Logits of `rows` hidden rows: out[r*vocab + v] (the act format, if any, rounds the hidden rows
** first, since the output projection is a linear layer).  `scratch` holds rows*dim floats. */
int qs_llm_logits(const qs_llm_model *m, const qs_llm_numerics *nx, const float *hidden, int rows,
                  float *scratch, float *out, qs_err *e);
/* The same with s's packed weights (qs_llm_state_pack_weights), if any: the same values. */
int qs_llm_logits_st(const qs_llm_model *m, const qs_llm_numerics *nx, qs_llm_state *s, const float *hidden, int rows,
                     float *scratch, float *out, qs_err *e);

/* Natural-log softmax helpers over one row of logits (double accumulation, max-shifted):
** log p(tok), and the entropy -sum p log p. */
double qs_llm_logprob(const float *logits, int vocab, int tok, double *entropy);

/* Floating-point operations of one token through the model at context length ctx (2 per MAC). */
double qs_llm_flops_per_token(const qs_llm_cfg *c, int ctx);

#endif
