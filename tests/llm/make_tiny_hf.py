#!/usr/bin/python3
"""Write a tiny Hugging Face checkpoint directory (config.json, safetensors, tokenizer.json) for the
loader tests; generated at test time, never committed.

  /usr/bin/python3 tests/llm/make_tiny_hf.py VARIANT OUTDIR

VARIANT  architecture  weights                    files                          other
llama    llama         BF16, untied (lm_head)     model.safetensors              merges as "a b" strings, pre-tokenizer Digits + ByteLevel
llama-sh llama         F16, tied                  2 shards + index.json          merges as ["a", "b"], BOS/EOS from tokenizer_config.json
qwen2    qwen2         F32, tied, Q/K/V biases    3 shards + index.json          vocab_size 336 > 320 tokens, Split regex pre-tokenizer
llama-hd llama         F32, untied                model.safetensors              head_dim 24 != hidden_size / heads (16)
gemma2   gemma2        F32, tied                  model.safetensors              sandwich norms stored as w - 1 ((1 + w) form),
                                                                                 soft-caps 2.5 / 5, window 5, query_pre_attn_scalar 32
gemma3   gemma3_text   BF16, tied                 model.safetensors              QK-norm, 7 layers in layer_types, window 5,
                                                                                 local base 10000, global 1e6 with linear scaling 4
qwen3    qwen3         F32, tied                  2 shards + index.json          QK-norm, head_dim 24
llama3   llama         BF16, tied                 model.safetensors              rope_scaling llama3 (factor 8, 1, 4, 64)
mistral  mistral       F16, untied                model.safetensors              sliding_window 5
mixtral  mixtral       F32, untied                model.safetensors              4 experts (w1/w3/w2), 2 per token
qwen2moe qwen2_moe     F32, tied                  2 shards + index.json          4 experts of 32, 2 per token, shared expert 64
qwen3moe qwen3_moe     BF16, tied                 model.safetensors              QK-norm, 4 experts, norm_topk_prob

micro-llama, micro-qwen2, micro-qwen2moe (one shard) and micro-sh (two shards) are small fuzz seeds:
  /usr/bin/python3 tests/llm/make_tiny_hf.py --fuzz-seed micro-llama tests/fuzz/corpus/llm_hf/micro-llama
  /usr/bin/python3 tests/llm/make_tiny_hf.py --fuzz-index-seed micro-sh tests/fuzz/corpus/shard_index/micro-sh

Same random weights as make_tiny_gguf.weights(), renamed to the Hugging Face spelling.  The safetensors
files are written from the format description (8-byte little-endian header length, JSON header,
data), not with the safetensors package.
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as g  # noqa: E402
import make_tiny_gguf as t  # noqa: E402

QWEN2_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
               "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def hf_names(n, a, arch):
    """(Hugging Face name, array) pairs of one GGUF-named tensor: stacked experts become one tensor per
    expert (Mixtral: block_sparse_moe.experts.E.w1/w3/w2), the shared expert's gate a [1][dim] Linear."""
    _, l, rest = n.split(".", 2) if n.startswith("blk.") else (None, None, n)
    exps = {"ffn_gate_exps.weight": ("gate_proj", "w1"), "ffn_up_exps.weight": ("up_proj", "w3"),
            "ffn_down_exps.weight": ("down_proj", "w2")}
    if rest in exps:
        mix = arch == "mixtral"
        fmt = "model.layers.%s.block_sparse_moe.experts.%d.%s.weight" if mix else "model.layers.%s.mlp.experts.%d.%s.weight"
        return [(fmt % (l, e, exps[rest][1 if mix else 0]), a[e]) for e in range(a.shape[0])]
    if rest == "ffn_gate_inp.weight" and arch == "mixtral":
        return [("model.layers.%s.block_sparse_moe.gate.weight" % l, a)]
    if rest == "ffn_gate_inp_shexp.weight":
        return [(hf_name(n), a.reshape(1, -1))]
    return [(hf_name(n, arch.startswith("gemma")), a)]


GEMMA = {"ffn_norm.weight": "pre_feedforward_layernorm.weight",
         "post_attention_norm.weight": "post_attention_layernorm.weight",
         "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
         "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight"}


def hf_name(n, gemma=False):
    if gemma and n.startswith("blk.") and n.split(".", 2)[2] in GEMMA:
        _, l, rest = n.split(".", 2)
        return "model.layers.%s.%s" % (l, GEMMA[rest])
    if n == "token_embd.weight":
        return "model.embed_tokens.weight"
    if n == "output.weight":
        return "lm_head.weight"
    if n == "output_norm.weight":
        return "model.norm.weight"
    _, l, rest = n.split(".", 2)
    m = {"attn_norm.weight": "input_layernorm.weight", "attn_q.weight": "self_attn.q_proj.weight",
         "attn_k.weight": "self_attn.k_proj.weight", "attn_v.weight": "self_attn.v_proj.weight",
         "attn_output.weight": "self_attn.o_proj.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
         "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
         "ffn_down.weight": "mlp.down_proj.weight", "attn_q.bias": "self_attn.q_proj.bias",
         "attn_k.bias": "self_attn.k_proj.bias", "attn_v.bias": "self_attn.v_proj.bias",
         "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
         "ffn_gate_inp.weight": "mlp.gate.weight", "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
         "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
         "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
         "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight"}[rest]
    return "model.layers.%s.%s" % (l, m)


def encode(a, dtype):
    if dtype == "F32":
        return a.astype("<f4").tobytes()
    if dtype == "F16":
        return a.astype("<f2").tobytes()
    if dtype == "BF16":
        return g.bf16_bits(a).astype("<u2").tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors, dtype):
    header, body = {"__metadata__": {"format": "pt"}}, bytearray()
    for name, a in tensors:
        data = encode(a, dtype)
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + bytes(body))


VARIANTS = {
    "llama": dict(arch="llama", dtype="BF16", untied=True, shards=1, seed=31, merges="str", vocab_size=320),
    "llama-sh": dict(arch="llama", dtype="F16", untied=False, shards=2, seed=32, merges="arr", vocab_size=320),
    "qwen2": dict(arch="qwen2", dtype="F32", untied=False, shards=3, seed=33, merges="arr", vocab_size=336),
    # fuzz seeds (tests/fuzz/corpus/llm_hf): 1 layer, dim 32, BF16, under libFuzzer's 64 KiB smoke limit
    "micro-llama": dict(arch="llama", dtype="BF16", untied=False, shards=1, seed=34, merges="str", vocab_size=320,
                        nl=1, dim=32, ffn=32),
    "micro-qwen2": dict(arch="qwen2", dtype="BF16", untied=False, shards=1, seed=35, merges="arr", vocab_size=320,
                        nl=1, dim=32, ffn=32),
    # fuzz seed for tests/fuzz/fuzz_shard_index.c: two shards and an index
    # head_dim 24 with 4 heads over dim 64 (Q and attention output 96 wide), as Qwen3 / Gemma do
    "llama-hd": dict(arch="llama", dtype="F32", untied=True, shards=1, seed=37, merges="str", vocab_size=320, hd=24),
    "micro-sh": dict(arch="qwen2", dtype="BF16", untied=False, shards=2, seed=36, merges="arr", vocab_size=320,
                     nl=1, dim=32, ffn=32),
    "gemma2": dict(arch="gemma2", dtype="F32", untied=False, shards=1, seed=38, merges="str", vocab_size=320, hd=24, nl=3),
    "gemma3": dict(arch="gemma3", dtype="BF16", untied=False, shards=1, seed=39, merges="str", vocab_size=320, hd=24, nl=7),
    # model families (docs/llm.md)
    "qwen3": dict(arch="qwen3", dtype="F32", untied=False, shards=2, seed=51, merges="arr", vocab_size=320, hd=24, qk=True),
    "llama3": dict(arch="llama", dtype="BF16", untied=False, shards=1, seed=52, merges="str", vocab_size=320, rope3=True),
    "mistral": dict(arch="mistral", dtype="F16", untied=True, shards=1, seed=53, merges="str", vocab_size=320, swa=5),
    "mixtral": dict(arch="mixtral", dtype="F32", untied=True, shards=1, seed=54, merges="str", vocab_size=320, ffn=48,
                    moe=dict(E=4, K=2, F=48)),
    "qwen2moe": dict(arch="qwen2_moe", dtype="F32", untied=False, shards=2, seed=55, merges="arr", vocab_size=320,
                     moe=dict(E=4, K=2, F=32, S=64)),
    # fuzz seed (tests/fuzz/corpus/llm_hf): Qwen2-MoE, 1 layer, dim 32, 4 experts of 16 + a shared expert
    "micro-qwen2moe": dict(arch="qwen2_moe", dtype="BF16", untied=False, shards=1, seed=57, merges="arr", vocab_size=320,
                           nl=1, dim=32, ffn=32, moe=dict(E=4, K=2, F=16, S=32)),
    "qwen3moe": dict(arch="qwen3_moe", dtype="BF16", untied=False, shards=1, seed=56, merges="arr", vocab_size=320, hd=24,
                     qk=True, moe=dict(E=4, K=2, F=32), norm=True),
}
HF_CLASS = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
            "mistral": "MistralForCausalLM", "mixtral": "MixtralForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM",
            "qwen3_moe": "Qwen3MoeForCausalLM", "gemma2": "Gemma2ForCausalLM", "gemma3": "Gemma3ForCausalLM"}


def tokenizer(v, arch):
    toks, types = t.vocab()
    vocab = {s: i for i, s in enumerate(toks) if types[i] != 3}
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, s in enumerate(toks) if types[i] == 3]
    merges = [m if v["merges"] == "str" else m.split(" ") for m in t.MERGES]
    if arch.startswith("qwen"):
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    else:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": pre, "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                      "merges": merges}}


def build(variant, out):
    v = VARIANTS[variant]
    arch = v["arch"]
    nl, dim, ffn, nh, nkv = v.get("nl", 2), v.get("dim", 64), v.get("ffn", 96), 4, 2
    gemma = {"gemma2": 2, "gemma3": 3}.get(arch, 0)
    W = t.weights(v["seed"], nl, dim, ffn, nh, nkv, 320, v["untied"], bias=arch in ("qwen2", "qwen2_moe"), hd=v.get("hd"),
                  gemma=gemma, qk=v.get("qk", False), moe=v.get("moe"))
    if gemma:  # Gemma's RMSNorm multiplies by (1 + w): the checkpoint stores w - 1 of GGUF's weight
        W = {n: (a - 1 if n.endswith("norm.weight") else a) for n, a in W.items()}
    if v["vocab_size"] > 320:  # padded embedding rows, as Qwen2 checkpoints have
        rng = np.random.default_rng(v["seed"] + 100)
        extra = rng.normal(0, 1.0, (v["vocab_size"] - 320, dim)).astype(np.float32)
        W["token_embd.weight"] = np.concatenate([W["token_embd.weight"], extra])
        if "output.weight" in W:
            W["output.weight"] = np.concatenate([W["output.weight"], extra])
    os.makedirs(out, exist_ok=True)
    cfg = {"architectures": [HF_CLASS[arch]], "model_type": arch,
           "hidden_size": dim, "intermediate_size": ffn, "num_hidden_layers": nl, "num_attention_heads": nh,
           "num_key_value_heads": nkv, "vocab_size": v["vocab_size"], "max_position_embeddings": 256,
           "rms_norm_eps": 1e-5 if arch == "llama" else 1e-6, "rope_theta": 10000.0 if arch in ("llama", "mistral") else 1e6,
           "hidden_act": "silu", "tie_word_embeddings": not v["untied"], "rope_scaling": None,
           "torch_dtype": {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[v["dtype"]]}
    if variant == "llama":
        cfg.update(bos_token_id=1, eos_token_id=2)
    if v.get("hd"):
        cfg.update(head_dim=v["hd"])
    if v.get("rope3"):
        cfg.update(rope_scaling=dict(rope_type="llama3", factor=t.LLAMA3["factor"], low_freq_factor=t.LLAMA3["lo"],
                                     high_freq_factor=t.LLAMA3["hi"], original_max_position_embeddings=t.LLAMA3["orig"]))
    if v.get("swa"):
        cfg.update(sliding_window=v["swa"])
    if arch == "qwen3":
        cfg.update(attention_bias=False, use_sliding_window=False, sliding_window=None)
    moe = v.get("moe")
    if moe and arch == "mixtral":
        cfg.update(num_local_experts=moe["E"], num_experts_per_tok=moe["K"], sliding_window=None)
    elif moe:
        cfg.update(num_experts=moe["E"], num_experts_per_tok=moe["K"], moe_intermediate_size=moe["F"],
                   norm_topk_prob=v.get("norm", False), decoder_sparse_step=1, mlp_only_layers=[])
        if moe.get("S"):
            cfg.update(shared_expert_intermediate_size=moe["S"])
    if arch == "gemma2":
        cfg.update(architectures=["Gemma2ForCausalLM"], hidden_act="gelu_pytorch_tanh",
                   hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=32, attn_logit_softcapping=2.5,
                   final_logit_softcapping=5.0, sliding_window=5, rms_norm_eps=1e-6, rope_theta=10000.0)
    if arch == "gemma3":
        cfg.update(architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", hidden_act="gelu_pytorch_tanh",
                   hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=24, attn_logit_softcapping=None,
                   final_logit_softcapping=None, sliding_window=5, rope_theta=1e6, rope_local_base_freq=10000.0,
                   rope_scaling={"rope_type": "linear", "factor": 4.0}, rms_norm_eps=1e-6,
                   layer_types=["full_attention" if (l + 1) % 6 == 0 else "sliding_attention" for l in range(nl)])
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    items = [it for n, a in W.items() for it in hf_names(n, a, arch)]
    if v["shards"] == 1:
        write_safetensors(os.path.join(out, "model.safetensors"), items, v["dtype"])
    else:
        k = v["shards"]
        names = ["model-%05d-of-%05d.safetensors" % (i + 1, k) for i in range(k)]
        parts = [items[i::k] for i in range(k)]
        wmap = {}
        for nm, part in zip(names, parts):
            write_safetensors(os.path.join(out, nm), part, v["dtype"])
            wmap.update({n: nm for n, _ in part})
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": wmap}, f, indent=2)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tokenizer(v, arch), f, ensure_ascii=False)
    if variant == "llama-sh":
        with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
            json.dump({"bos_token": {"content": "<|im_start|>"}, "eos_token": "<|im_end|>"}, f)


def fuzz_seed(variant, path):
    """One fuzz input for tests/fuzz/fuzz_llm_hf.c: config.json, tokenizer.json and model.safetensors
    joined by the separator line "\\n--8<--\\n"."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        build(variant, d)
        parts = [open(os.path.join(d, n), "rb").read() for n in ("config.json", "tokenizer.json", "model.safetensors")]
    with open(path, "wb") as f:
        f.write(b"\n--8<--\n".join(parts))


def fuzz_index_seed(variant, path):
    """One fuzz input for tests/fuzz/fuzz_shard_index.c: config.json, model.safetensors.index.json and
    two shards joined by the separator line "\n--8<--\n"."""
    import tempfile
    names = ("config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
             "model-00002-of-00002.safetensors")
    with tempfile.TemporaryDirectory() as d:
        build(variant, d)
        parts = [open(os.path.join(d, n), "rb").read() for n in names]
    with open(path, "wb") as f:
        f.write(b"\n--8<--\n".join(parts))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--fuzz-seed":
        fuzz_seed(sys.argv[2], sys.argv[3])
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == "--fuzz-index-seed":
        fuzz_index_seed(sys.argv[2], sys.argv[3])
        sys.exit(0)
    if len(sys.argv) != 3 or sys.argv[1] not in VARIANTS:
        print(__doc__)
        sys.exit(2)
    build(sys.argv[1], sys.argv[2])
