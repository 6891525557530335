#!/usr/bin/python3
"""Write the tiny synthetic Llama GGUF models used by the LLM tests, and their reference logits.

  /usr/bin/python3 tests/llm/make_tiny_gguf.py tests/fixtures/llm

tiny.gguf:        2 layers, dim 64, 4 query heads / 2 KV heads of 16, FFN 96, vocab 320, tied
                  embeddings; token_embd Q8_0, linear weights Q4_1, norms F32 (the SmolLM2 mix).
tiny_untied.gguf: the same with a separate F16 output.weight and F16 linear weights.
micro.gguf (tests/fuzz/corpus/llm_gguf): 1 layer, dim 32, FFN 32, the same vocabulary (fuzz seed).
  make_tiny_gguf.py --bos OUT.gguf writes tiny.gguf's model with tokenizer.ggml.add_bos_token = true.
tiny_logits.npy / tiny_untied_logits.npy: float64 reference logits (stored as float32) of
                  TINY_IDS from tests/llm/torch_ref.py (PyTorch if available, else numpy).
The vocabulary is byte-level BPE (5 control tokens, the 256 GPT-2 byte spellings, 35 merges building
e.g. "Ġthe", "Ġquant", "assistant", "user", "system", padded to 320) with tokenizer.ggml.pre "smollm";
it contains the chat markers the default prompts look up; no eos_token_id, so sampling never stops
early.  Seeded: same bytes every run.  tests/llm/hf_tokenize.py writes tiny_tok.json from it.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as g  # noqa: E402
import torch_ref  # noqa: E402

TINY_IDS = [1, 5, 6, 40, 41, 42, 2, 7, 60, 61, 62, 63, 17, 30, 31, 32, 33, 90, 91, 3]


def byte_chars():
    """GPT-2 bytes_to_unicode: the character spelling each byte 0..255."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return [out[b] for b in range(256)]


MERGES = ["\u0120 t", "h e", "\u0120t he", "i n", "in g", "\u0120 a", "e r", "\u0120 q", "\u0120q u", "a n",
          "an t", "\u0120qu ant", "i z", "iz e", "a s", "as s", "ass i", "assi s", "assis t", "assist a",
          "assista n", "assistan t", "u s", "us e", "use r", "s y", "sy s", "sys t", "syst e", "syste m",
          "\u010a \u010a", "\u0120 \u0120", "' s", "\u0120 i", "\u0120i s"]


def vocab():
    toks = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>", "<pad>"]
    types = [3, 3, 3, 2, 3]
    toks += byte_chars()
    for m in MERGES:
        a, b = m.split(" ")
        if a + b not in toks:
            toks.append(a + b)
    while len(toks) < 320:
        toks.append("<extra_%d>" % len(toks))
    types += [1] * (len(toks) - len(types))
    return toks, types


def build(path, untied, seed, nl=2, dim=64, ffn=96, add_bos=False):
    rng = np.random.default_rng(seed)
    nh, nkv, V = 4, 2, 320
    hd = dim // nh
    w = g.Writer()
    w.add_kv("general.architecture", g.T_STR, "llama")
    w.add_kv("general.name", g.T_STR, "qscope tiny llama" + (" untied" if untied else ""))
    w.add_kv("llama.block_count", g.T_U32, nl)
    w.add_kv("llama.context_length", g.T_U32, 256)
    w.add_kv("llama.embedding_length", g.T_U32, dim)
    w.add_kv("llama.feed_forward_length", g.T_U32, ffn)
    w.add_kv("llama.attention.head_count", g.T_U32, nh)
    w.add_kv("llama.attention.head_count_kv", g.T_U32, nkv)
    w.add_kv("llama.rope.freq_base", g.T_F32, 10000.0)
    w.add_kv("llama.attention.layer_norm_rms_epsilon", g.T_F32, 1e-5)
    w.add_kv("llama.rope.dimension_count", g.T_U32, hd)
    w.add_kv("llama.vocab_size", g.T_U32, V)
    toks, types = vocab()
    w.add_kv("tokenizer.ggml.model", g.T_STR, "gpt2")
    w.add_kv("tokenizer.ggml.tokens", g.T_ARR, toks, g.T_STR)
    w.add_kv("tokenizer.ggml.token_type", g.T_ARR, types, g.T_I32)
    w.add_kv("tokenizer.ggml.merges", g.T_ARR, MERGES, g.T_STR)
    w.add_kv("tokenizer.ggml.pre", g.T_STR, "smollm")
    w.add_kv("tokenizer.ggml.bos_token_id", g.T_U32, 1)
    if add_bos:
        w.add_kv("tokenizer.ggml.add_bos_token", g.T_BOOL, True)
    lin = g.GGML_F16 if untied else g.GGML_Q4_1
    w.add_tensor("token_embd.weight", rng.normal(0, 1.0, (V, dim)), g.GGML_Q8_0)
    for l in range(nl):
        p = "blk.%d." % l
        w.add_tensor(p + "attn_norm.weight", 1 + 0.1 * rng.normal(size=dim), g.GGML_F32)
        w.add_tensor(p + "attn_q.weight", rng.normal(0, dim ** -0.5, (dim, dim)), lin)
        w.add_tensor(p + "attn_k.weight", rng.normal(0, dim ** -0.5, (nkv * hd, dim)), lin)
        w.add_tensor(p + "attn_v.weight", rng.normal(0, dim ** -0.5, (nkv * hd, dim)), lin)
        w.add_tensor(p + "attn_output.weight", rng.normal(0, dim ** -0.5, (dim, dim)), lin)
        fn = 1 + 0.1 * rng.normal(size=dim)
        fn[7] = 12.0  # one large norm gain: an outlier channel feeding the FFN
        w.add_tensor(p + "ffn_norm.weight", fn, g.GGML_F32)
        w.add_tensor(p + "ffn_gate.weight", rng.normal(0, dim ** -0.5, (ffn, dim)), lin)
        w.add_tensor(p + "ffn_up.weight", rng.normal(0, dim ** -0.5, (ffn, dim)), lin)
        w.add_tensor(p + "ffn_down.weight", rng.normal(0, ffn ** -0.5, (dim, ffn)), lin)
    w.add_tensor("output_norm.weight", 1 + 0.1 * rng.normal(size=dim), g.GGML_F32)
    if untied:
        w.add_tensor("output.weight", rng.normal(0, dim ** -0.5, (V, dim)), g.GGML_F16)
    w.write(path)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--bos":   # tiny.gguf's weights, vocabulary adding BOS (tests)
        build(sys.argv[2], False, 11, add_bos=True)
        return
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/llm"
    os.makedirs(out, exist_ok=True)
    for name, untied, seed in (("tiny", False, 11), ("tiny_untied", True, 12)):
        path = os.path.join(out, name + ".gguf")
        build(path, untied, seed)
        ref = torch_ref.forward(path, TINY_IDS)
        np.save(os.path.join(out, name + "_logits.npy"), ref.astype(np.float32))
        print("wrote %s (%d bytes) and %s_logits.npy %s, reference %s" % (
            path, os.path.getsize(path), name, ref.shape, "torch" if torch_ref.HAVE_TORCH else "numpy"))
    fuzz = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus", "llm_gguf", "micro.gguf")
    build(fuzz, False, 13, nl=1, dim=32, ffn=32)   # fuzz seed under libFuzzer's 64 KiB smoke limit
    print("wrote %s (%d bytes)" % (fuzz, os.path.getsize(fuzz)))
    with open(os.path.join(out, "tiny_ids.txt"), "w") as f:
        f.write(",".join(str(i) for i in TINY_IDS) + "\n")


if __name__ == "__main__":
    main()
