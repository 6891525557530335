/*
** The architecture, tensor-name and hyper-parameter tables of the LLM loaders (see llm_arch.h).
*/
#include "llm_arch.h"

#include <stdio.h>
#include <string.h>

/* Gemma's Hugging Face layer norms: input_layernorm (attention input), post_attention_layernorm (on the
** attention output: a sandwich norm), pre_feedforward_layernorm (FFN input), post_feedforward_layernorm. */
static const char *const kGemmaHF[QS_T_COUNT] = {
    [QS_T_FFN_NORM] = "model.layers.%d.pre_feedforward_layernorm.weight",
    [QS_T_POST_ATTN_NORM] = "model.layers.%d.post_attention_layernorm.weight",
    [QS_T_POST_FFN_NORM] = "model.layers.%d.post_feedforward_layernorm.weight",
};

/* Mixtral's Hugging Face spelling of the router and experts (w1 = gate, w3 = up, w2 = down). */
static const char *const kMixtral[QS_T_COUNT] = {
    [QS_T_ROUTER] = "model.layers.%d.block_sparse_moe.gate.weight",
    [QS_T_EXP_GATE] = "model.layers.%d.block_sparse_moe.experts.%d.w1.weight",
    [QS_T_EXP_UP] = "model.layers.%d.block_sparse_moe.experts.%d.w3.weight",
    [QS_T_EXP_DOWN] = "model.layers.%d.block_sparse_moe.experts.%d.w2.weight",
};

/* Supported architectures.  A new row needs only what the forward pass already runs: RMSNorm, SwiGLU,
** RoPE (either pairing, with frequency factors), GQA, optional Q/K/V biases, QK-norm, sliding windows,
** mixtures of experts, tied or untied output; the Gemma block (QS_ARCH_GEMMA: GeGLU, sandwich norms,
** soft-capping, sliding-window layers, QK-norm).  A GGUF "llama" may be Mistral (sliding window) or
** Mixtral (experts): llama.cpp writes both so. */
#define TB (QS_ARCH_TIED | QS_ARCH_QKV_BIAS)
static const qs_llm_arch kArch[] = {
    {"llama", "LlamaForCausalLM", "llama", TB | QS_ARCH_MOE | QS_ARCH_SWA, 0, NULL, {1, 1}},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", TB, 1, NULL, {0, 0}},
    {"gemma2", "Gemma2ForCausalLM", "gemma2", QS_ARCH_TIED | QS_ARCH_GEMMA, 1, kGemmaHF, {0, 0}},
    {"gemma3", "Gemma3ForCausalLM", "gemma3_text", QS_ARCH_TIED | QS_ARCH_GEMMA | QS_ARCH_QK_NORM, 1, kGemmaHF, {0, 0}},
    {"qwen3", "Qwen3ForCausalLM", "qwen3", TB | QS_ARCH_QK_NORM, 1, NULL, {0, 0}},
    {"mistral", "MistralForCausalLM", "mistral", TB | QS_ARCH_SWA | QS_ARCH_HF_ONLY, 0, NULL, {0, 0}},
    {"mixtral", "MixtralForCausalLM", "mixtral", TB | QS_ARCH_SWA | QS_ARCH_MOE | QS_ARCH_HF_ONLY, 0, kMixtral, {1, 1}},
    {"qwen2moe", "Qwen2MoeForCausalLM", "qwen2_moe", TB | QS_ARCH_MOE, 1, NULL, {0, 0}},
    {"qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe", TB | QS_ARCH_QK_NORM | QS_ARCH_MOE, 1, NULL, {1, 0}},
};
#define NARCH (sizeof kArch / sizeof kArch[0])

/* Tensor names per role: GGUF (llama.cpp LLM_TENSOR_NAMES) and Hugging Face (transformers) spellings.
** Every supported architecture spells them alike. */
static const char *const kTensor[QS_LLM_NSCHEME][QS_T_COUNT] = {
    [QS_LLM_GGUF] = {
        [QS_T_EMB] = "token_embd.weight", [QS_T_OUT] = "output.weight", [QS_T_OUT_NORM] = "output_norm.weight",
        [QS_T_ATTN_NORM] = "blk.%d.attn_norm.weight", [QS_T_Q] = "blk.%d.attn_q.weight",
        [QS_T_K] = "blk.%d.attn_k.weight", [QS_T_V] = "blk.%d.attn_v.weight",
        [QS_T_O] = "blk.%d.attn_output.weight", [QS_T_FFN_NORM] = "blk.%d.ffn_norm.weight",
        [QS_T_GATE] = "blk.%d.ffn_gate.weight", [QS_T_UP] = "blk.%d.ffn_up.weight",
        [QS_T_DOWN] = "blk.%d.ffn_down.weight", [QS_T_BQ] = "blk.%d.attn_q.bias", [QS_T_BK] = "blk.%d.attn_k.bias",
        [QS_T_BV] = "blk.%d.attn_v.bias", [QS_T_BO] = "blk.%d.attn_output.bias",
        [QS_T_BDOWN] = "blk.%d.ffn_down.bias", [QS_T_Q_NORM] = "blk.%d.attn_q_norm.weight",
        [QS_T_K_NORM] = "blk.%d.attn_k_norm.weight", [QS_T_POST_ATTN_NORM] = "blk.%d.post_attention_norm.weight",
        [QS_T_POST_FFN_NORM] = "blk.%d.post_ffw_norm.weight", [QS_T_ROPE_FREQS] = "rope_freqs.weight",
        [QS_T_ROUTER] = "blk.%d.ffn_gate_inp.weight", [QS_T_EXP_GATE] = "blk.%d.ffn_gate_exps.weight",
        [QS_T_EXP_UP] = "blk.%d.ffn_up_exps.weight", [QS_T_EXP_DOWN] = "blk.%d.ffn_down_exps.weight",
        [QS_T_SH_GATE] = "blk.%d.ffn_gate_shexp.weight", [QS_T_SH_UP] = "blk.%d.ffn_up_shexp.weight",
        [QS_T_SH_DOWN] = "blk.%d.ffn_down_shexp.weight", [QS_T_SH_INP] = "blk.%d.ffn_gate_inp_shexp.weight",
    },
    [QS_LLM_HF] = {
        [QS_T_EMB] = "model.embed_tokens.weight", [QS_T_OUT] = "lm_head.weight", [QS_T_OUT_NORM] = "model.norm.weight",
        [QS_T_ATTN_NORM] = "model.layers.%d.input_layernorm.weight",
        [QS_T_Q] = "model.layers.%d.self_attn.q_proj.weight", [QS_T_K] = "model.layers.%d.self_attn.k_proj.weight",
        [QS_T_V] = "model.layers.%d.self_attn.v_proj.weight", [QS_T_O] = "model.layers.%d.self_attn.o_proj.weight",
        [QS_T_FFN_NORM] = "model.layers.%d.post_attention_layernorm.weight",
        [QS_T_GATE] = "model.layers.%d.mlp.gate_proj.weight", [QS_T_UP] = "model.layers.%d.mlp.up_proj.weight",
        [QS_T_DOWN] = "model.layers.%d.mlp.down_proj.weight", [QS_T_BQ] = "model.layers.%d.self_attn.q_proj.bias",
        [QS_T_BK] = "model.layers.%d.self_attn.k_proj.bias", [QS_T_BV] = "model.layers.%d.self_attn.v_proj.bias",
        [QS_T_BO] = "model.layers.%d.self_attn.o_proj.bias", [QS_T_BDOWN] = "model.layers.%d.mlp.down_proj.bias",
        [QS_T_Q_NORM] = "model.layers.%d.self_attn.q_norm.weight",
        [QS_T_K_NORM] = "model.layers.%d.self_attn.k_norm.weight",
        /* no common spelling: the sandwich norms are Gemma's (kGemmaHF) */
        [QS_T_POST_ATTN_NORM] = "model.layers.%d.post_attention_norm.weight",
        [QS_T_POST_FFN_NORM] = "model.layers.%d.post_feedforward_layernorm.weight", [QS_T_ROPE_FREQS] = "",
        [QS_T_ROUTER] = "model.layers.%d.mlp.gate.weight",
        [QS_T_EXP_GATE] = "model.layers.%d.mlp.experts.%d.gate_proj.weight",
        [QS_T_EXP_UP] = "model.layers.%d.mlp.experts.%d.up_proj.weight",
        [QS_T_EXP_DOWN] = "model.layers.%d.mlp.experts.%d.down_proj.weight",
        [QS_T_SH_GATE] = "model.layers.%d.mlp.shared_expert.gate_proj.weight",
        [QS_T_SH_UP] = "model.layers.%d.mlp.shared_expert.up_proj.weight",
        [QS_T_SH_DOWN] = "model.layers.%d.mlp.shared_expert.down_proj.weight",
        [QS_T_SH_INP] = "model.layers.%d.mlp.shared_expert_gate.weight",
    },
};


/* Hyper-parameter keys: GGUF "ARCH.<key>" (llama.cpp LLM_KV_NAMES) and config.json.  A default of 0 is
** derived by the loader (n_kv_head = n_head, head_dim = dim / n_head, vocab = embedding rows,
** rope_dim = head_dim). */
static const qs_llm_hkey kHparam[QS_H_COUNT] = {
    [QS_H_N_LAYER] = {{"block_count", "num_hidden_layers"}, {1, 1}, {0, 0}, 0},
    [QS_H_DIM] = {{"embedding_length", "hidden_size"}, {1, 1}, {0, 0}, 0},
    [QS_H_FFN] = {{"feed_forward_length", "intermediate_size"}, {1, 1}, {0, 0}, 0},
    [QS_H_N_HEAD] = {{"attention.head_count", "num_attention_heads"}, {1, 1}, {0, 0}, 0},
    [QS_H_N_KV_HEAD] = {{"attention.head_count_kv", "num_key_value_heads"}, {0, 0}, {0, 0}, 0},
    [QS_H_HEAD_DIM] = {{"attention.key_length", "head_dim"}, {0, 0}, {0, 0}, 0},
    [QS_H_CTX] = {{"context_length", "max_position_embeddings"}, {0, 0}, {2048, 2048}, 0},
    [QS_H_VOCAB] = {{"vocab_size", "vocab_size"}, {0, 1}, {0, 0}, 0},
    [QS_H_ROPE_BASE] = {{"rope.freq_base", "rope_theta"}, {0, 0}, {10000.0, 10000.0}, 1},
    [QS_H_EPS] = {{"attention.layer_norm_rms_epsilon", "rms_norm_eps"}, {0, 0}, {1e-5, 1e-6}, 1},
    [QS_H_ROPE_DIM] = {{"rope.dimension_count", NULL}, {0, 0}, {0, 0}, 0},
    [QS_H_VALUE_DIM] = {{"attention.value_length", NULL}, {0, 0}, {0, 0}, 0},
    [QS_H_N_EXPERT] = {{"expert_count", "num_experts"}, {0, 0}, {0, 0}, 0},   /* Mixtral: num_local_experts */
    [QS_H_N_EXPERT_USED] = {{"expert_used_count", "num_experts_per_tok"}, {0, 0}, {0, 0}, 0},
    [QS_H_FFN_EXP] = {{"expert_feed_forward_length", "moe_intermediate_size"}, {0, 0}, {0, 0}, 0},
    [QS_H_FFN_SHEXP] = {{"expert_shared_feed_forward_length", "shared_expert_intermediate_size"}, {0, 0}, {0, 0}, 0},
    [QS_H_SWA] = {{"attention.sliding_window", "sliding_window"}, {0, 0}, {0, 0}, 0},
};

const qs_llm_arch *qs_llm_arch_gguf(const char *name)
{
    for (size_t i = 0; name && i < NARCH; i++)
        if (!strcmp(kArch[i].name, name) && !(kArch[i].flags & QS_ARCH_HF_ONLY)) return &kArch[i];
    return NULL;
}

const qs_llm_arch *qs_llm_arch_hf(const char *hf_class, const char *hf_type)
{
    for (size_t i = 0; i < NARCH; i++)
        if ((hf_type && !strcmp(kArch[i].hf_type, hf_type)) || (hf_class && !strcmp(kArch[i].hf_class, hf_class)))
            return &kArch[i];
    return NULL;
}

const char *qs_llm_arch_list(qs_llm_scheme s, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < NARCH && o < cap; i++)
        if (s != QS_LLM_GGUF || !(kArch[i].flags & QS_ARCH_HF_ONLY))
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? ", " : "", s == QS_LLM_GGUF ? kArch[i].name : kArch[i].hf_class);
    return buf;
}

const char *qs_llm_tensor_name(qs_llm_scheme s, qs_llm_tensor t, int layer, char *buf, size_t cap)
{
    snprintf(buf, cap, kTensor[s][t], layer);
    return buf;
}

const char *qs_llm_arch_tensor_name(const qs_llm_arch *A, qs_llm_scheme s, qs_llm_tensor t, int layer, char *buf, size_t cap)
{
    if (A && A->hf_names && s == QS_LLM_HF && A->hf_names[t]) {
        snprintf(buf, cap, A->hf_names[t], layer);
        return buf;
    }
    return qs_llm_tensor_name(s, t, layer, buf, cap);
}

const char *qs_llm_tensor_name_ax(const qs_llm_arch *A, qs_llm_scheme s, qs_llm_tensor t, int layer, int expert, char *buf,
                                  size_t cap)
{
    const char *f = s == QS_LLM_HF && A && A->hf_names && A->hf_names[t] ? A->hf_names[t] : kTensor[s][t];
    snprintf(buf, cap, f, layer, expert);
    return buf;
}

const qs_llm_hkey *qs_llm_hparam_key(qs_llm_hparam h) { return &kHparam[h]; }
