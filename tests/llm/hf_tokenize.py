#!/usr/bin/env python3
"""Reference tokenization with Hugging Face `tokenizers` for the GGUF BPE vocabulary (test vectors).

  PYTHONPATH=build/pyref python3 tests/llm/hf_tokenize.py MODEL.gguf OUT.json
      (pip install --no-deps --target build/pyref tokenizers)

Builds a byte-level BPE tokenizer from tokenizer.ggml.tokens / tokenizer.ggml.merges with the
pre-tokenizer of SmolLM2's tokenizer.json (Digits(individual_digits) then ByteLevel with the GPT-2
regex, no prefix space) and the control tokens (token_type 3) as special added tokens, and writes
{"model": ..., "cases": [{"text": ..., "ids": [...]}, ...]} for the strings in CASES.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, AddedToken  # noqa: E402

CASES = [
    "Hello world",
    "What is the capital of France?",
    "<|im_start|>user\nWhat is 12+345?<|im_end|>\n<|im_start|>assistant\n",
    "  leading spaces and trailing  ",
    "It's a dog's life, isn't it? We'll see; they'd've...",
    "tabs\tand\nnew\n\nlines\r\n",
    "x = 3.14159 * (r ** 2) # area",
    "CamelCase snake_case kebab-case ALLCAPS",
    "1234567890 0.5 -7e10",
    "quantization: FP8 (E4M3), MXFP4 & NVFP4!",
    "a  b   c    d",
    " ",
    "",
    "!!!???...,,,;;;",
    "The quick brown fox jumps over the lazy dog.",
    "<|endoftext|><|im_end|>",
    "'S 'T 'RE are not contractions but 's 't 're are",
]


def build(path):
    r = gguf_io.Reader(path)
    toks = r.kv["tokenizer.ggml.tokens"]
    types = r.kv.get("tokenizer.ggml.token_type", [1] * len(toks))
    merges = [tuple(m.split(" ", 1)) for m in r.kv["tokenizer.ggml.merges"]]
    vocab = {t: i for i, t in enumerate(toks)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(toks, types) if ty == 3])
    return tok


def main():
    tok = build(sys.argv[1])
    cases = [{"text": s, "ids": tok.encode(s, add_special_tokens=False).ids} for s in CASES]
    for c in cases:
        assert tok.decode(c["ids"], skip_special_tokens=False) == c["text"], c
    with open(sys.argv[2], "w") as f:
        json.dump({"model": os.path.basename(sys.argv[1]), "reference": "huggingface tokenizers",
                   "cases": cases}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote %d cases" % len(cases))


if __name__ == "__main__":
    main()
