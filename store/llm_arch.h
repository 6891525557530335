/*
** The architectures the LLM path loads, as data: one row per architecture (its GGUF and Hugging Face
** names and its flags), the tensor names of every weight role in both spellings, and the hyper-parameter
** keys with their defaults.  The loaders (llm_load_gguf.c, llm_load_hf.c) look everything up here, so
** adding an architecture the forward pass (kernels/llm.c) can already run is one row of kArch
** (llm_arch.c); see docs/llm.md.  Modelled on llama.cpp's LLM_ARCH_NAMES / LLM_TENSOR_NAMES /
** LLM_KV_NAMES tables (src/llama-arch.cpp).
*/
#ifndef QS_LLM_ARCH_H
#define QS_LLM_ARCH_H

#include <stddef.h>

/* How tensors and keys are spelled. */
typedef enum { QS_LLM_GGUF, QS_LLM_HF, QS_LLM_NSCHEME } qs_llm_scheme;

/* Weight roles; %d in a name is the layer. */
typedef enum {
    QS_T_EMB, QS_T_OUT, QS_T_OUT_NORM,
    QS_T_ATTN_NORM, QS_T_Q, QS_T_K, QS_T_V, QS_T_O, QS_T_FFN_NORM, QS_T_GATE, QS_T_UP, QS_T_DOWN,
    QS_T_BQ, QS_T_BK, QS_T_BV,
    QS_T_BO, QS_T_BDOWN,         /* refused when present: the forward pass has none */
    QS_T_Q_NORM, QS_T_K_NORM,    /* QK-norm gains [head_dim]: loaded by QS_ARCH_QK_NORM rows, refused elsewhere */
    QS_T_POST_ATTN_NORM, QS_T_POST_FFN_NORM,   /* Gemma's sandwich norms (QS_ARCH_GEMMA rows) */
    QS_T_ROPE_FREQS,             /* GGUF rope_freqs [head_dim/2] (Llama 3: divisors of the RoPE frequencies) */
    QS_T_ROUTER, QS_T_EXP_GATE, QS_T_EXP_UP, QS_T_EXP_DOWN,   /* experts: GGUF [n_expert][..] stacked, HF one per expert */
    QS_T_SH_GATE, QS_T_SH_UP, QS_T_SH_DOWN, QS_T_SH_INP,      /* Qwen2-MoE's shared expert and its gate */
    QS_T_COUNT
} qs_llm_tensor;

/* Hyper-parameters (qs_llm_cfg fields and a few checks). */
typedef enum {
    QS_H_N_LAYER, QS_H_DIM, QS_H_FFN, QS_H_N_HEAD, QS_H_N_KV_HEAD, QS_H_HEAD_DIM, QS_H_CTX, QS_H_VOCAB,
    QS_H_ROPE_BASE, QS_H_EPS, QS_H_ROPE_DIM, QS_H_VALUE_DIM,
    QS_H_N_EXPERT, QS_H_N_EXPERT_USED, QS_H_FFN_EXP, QS_H_FFN_SHEXP, QS_H_SWA,   /* optional, 0 = none */
    QS_H_COUNT
} qs_llm_hparam;

typedef struct qs_llm_hkey {
    const char *key[QS_LLM_NSCHEME];   /* GGUF: after "ARCH." (llama.cpp LLM_KV_NAMES); HF: config.json key;
                                       ** NULL: not read in that scheme */
    int required[QS_LLM_NSCHEME];      /* 1: missing is an error */
    double dflt[QS_LLM_NSCHEME];       /* default when absent (0: derived, see the loaders) */
    int real;                          /* a float (else a positive integer) */
} qs_llm_hkey;

/* Architecture flags. */
enum {
    QS_ARCH_QKV_BIAS = 1 << 0,   /* Q/K/V projection biases may be present (all layers or none, by layer 0) */
    QS_ARCH_QK_NORM = 1 << 1,    /* per-head RMSNorm of Q and K before RoPE (Qwen3; Gemma 3 in the Gemma block) */
    QS_ARCH_TIED = 1 << 2,       /* the output matrix may be absent (tied to the token embedding) */
    QS_ARCH_GEMMA = 1 << 3,      /* the Gemma block (kernels/llm_gemma.h): keys read by llm_arch_gemma.c */
    QS_ARCH_MOE = 1 << 4,        /* mixture-of-experts FFNs when the expert count says so */
    QS_ARCH_SWA = 1 << 5,        /* a sliding window (GGUF ARCH.attention.sliding_window, config sliding_window)
                                 ** applies to every layer */
    QS_ARCH_HF_ONLY = 1 << 6,    /* no GGUF files of this name (llama.cpp writes Mistral and Mixtral as llama) */
};

typedef struct qs_llm_arch {
    const char *name;            /* GGUF general.architecture and qs_llm_file.arch (llama.cpp LLM_ARCH_NAMES) */
    const char *hf_class;        /* config.json architectures[0] */
    const char *hf_type;         /* config.json model_type */
    unsigned flags;              /* QS_ARCH_* */
    int gguf_rope_neox;          /* RoPE pairing of its GGUF files: 0 adjacent pairs (llama.cpp's converter
                                 ** permutes the Q/K rows), 1 rotate_half (rows kept as trained); Hugging
                                 ** Face checkpoints are always rotate_half */
    const char *const *hf_names; /* Hugging Face tensor names that differ from the common spelling, by role
                                 ** (NULL entries: the common one; Mixtral's experts); NULL: none differ */
    signed char moe_norm[QS_LLM_NSCHEME];   /* top-k renormalised when no key says (GGUF expert_weights_norm,
                                            ** config norm_topk_prob) */
} qs_llm_arch;

/* The row named by GGUF general.architecture, or NULL. */
const qs_llm_arch *qs_llm_arch_gguf(const char *name);
/* The row of a config.json (architectures[0] or model_type, either may be NULL), or NULL. */
const qs_llm_arch *qs_llm_arch_hf(const char *hf_class, const char *hf_type);
/* "llama, qwen2" (scheme GGUF) or "LlamaForCausalLM, Qwen2ForCausalLM" (HF) into buf: for messages. */
const char *qs_llm_arch_list(qs_llm_scheme s, char *buf, size_t cap);

/* The name of tensor role t of layer `layer` in scheme s, written to buf. */
const char *qs_llm_tensor_name(qs_llm_scheme s, qs_llm_tensor t, int layer, char *buf, size_t cap);
/* The same in architecture A's own spelling (A may be NULL). */
const char *qs_llm_arch_tensor_name(const qs_llm_arch *A, qs_llm_scheme s, qs_llm_tensor t, int layer, char *buf, size_t cap);
/* The same for expert `expert` of a per-expert HF tensor (GGUF stacks the experts in one tensor). */
const char *qs_llm_tensor_name_ax(const qs_llm_arch *A, qs_llm_scheme s, qs_llm_tensor t, int layer, int expert, char *buf,
                                  size_t cap);
/* The key of hyper-parameter h. */
const qs_llm_hkey *qs_llm_hparam_key(qs_llm_hparam h);

#endif
