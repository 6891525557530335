#!/usr/bin/python3
"""Expected token ids from Hugging Face `tokenizers` (the test oracle, never a runtime dependency)
for the cases of tests/fixtures/llm/tok_cases.txt.

  pip install --no-deps --target build/pyref/tok tokenizers==0.21.1
  PYTHONPATH=build/pyref/tok /usr/bin/python3 tests/llm/make_tok_vectors.py [data/models/SmolLM2-135M-Instruct.Q4_1.gguf]

Writes, in tests/fixtures/llm/:
  tok_bpe.json       a small byte-level BPE tokenizer.json trained by `tokenizers` on the cases with NO
                     pre-tokenization (so its merges cross every boundary a pre-tokenizer could draw:
                     spaces, digits, punctuation, scripts, newlines), with special added tokens
                     <|endoftext|> <|im_start|> <|im_end|> and non-special ones <tool_call> </tool_call>;
  tok_expected.json  for each pre-tokenizer variant (SmolLM2, GPT-2, Qwen2, Llama 3 + ignore_merges,
                     prefix space, every Split behaviour, invert, Digits, Punctuation, WhitespaceSplit)
                     the ids of every case with tok_bpe.json's model and that pre_tokenizer;
  tok_smollm2.json   (with the GGUF argument) the ids of every case with SmolLM2's real vocabulary,
                     merges and pre-tokenizer, built as tests/llm/hf_tokenize.py does.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizers  # noqa: E402
from tokenizers import Tokenizer, AddedToken, models, trainers, pre_tokenizers, decoders  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures", "llm")

QWEN2 = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
         "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
LLAMA3 = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
          "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def bl(prefix=False, regex=True):
    return {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True, "use_regex": regex}


def split(pattern, behavior, invert=False, literal=False):
    return {"type": "Split", "pattern": {"String" if literal else "Regex": pattern}, "behavior": behavior,
            "invert": invert}


def seq(*steps):
    return {"type": "Sequence", "pretokenizers": list(steps)}


# name, pre_tokenizer, ignore_merges, GGUF tokenizer.ggml.pre that must give the same ids (or None)
VARIANTS = [
    ("smollm", seq({"type": "Digits", "individual_digits": True}, bl()), False, "smollm"),
    ("gpt2", bl(), False, "gpt2"),
    ("gpt2-prefix-space", bl(prefix=True), False, None),
    ("qwen2", seq(split(QWEN2, "Isolated"), bl(regex=False)), False, "qwen2"),
    ("llama3-ignore-merges", seq(split(LLAMA3, "Isolated"), bl(regex=False)), True, "llama-bpe"),
    ("llama3-merges", seq(split(LLAMA3, "Isolated"), bl(regex=False)), False, None),
    ("split-removed", seq(split(" ", "Removed", literal=True), bl(regex=False)), False, None),
    ("split-prev", seq(split("\\s+", "MergedWithPrevious"), bl(regex=False)), False, None),
    ("split-next", seq(split("[\\p{P}\\s]", "MergedWithNext"), bl(regex=False)), False, None),
    ("split-contiguous", seq(split("\\p{N}|\\s", "Contiguous"), bl(regex=False)), False, None),
    ("split-invert", seq(split("\\p{L}+", "Isolated", invert=True), bl(regex=False)), False, None),
    ("split-invert-removed", seq(split("\\p{L}+|\\p{N}+", "Removed", invert=True), bl(regex=False)), False, None),
    ("split-empty-matches", seq(split("x*", "MergedWithNext"), bl(regex=False)), False, None),
    ("digits-contiguous", seq({"type": "Digits", "individual_digits": False}, bl()), False, None),
    ("punct-ws", seq({"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "Isolated"}, bl(regex=False)),
     False, None),
]

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = ["<tool_call>", "</tool_call>"]


def read_cases():
    out = []
    with open(os.path.join(FIX, "tok_cases.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            esc = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
            pat = r"\\u\{([0-9a-fA-F]+)\}|\\([ntr\\])"
            assert "\\" not in re.sub(pat, "", line), "unknown escape in: " + line
            line = re.sub(pat, lambda m: chr(int(m.group(1), 16)) if m.group(1) else esc[m.group(2)], line)
            out.append(line)
    return out


def train(cases):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=1200, min_frequency=2, special_tokens=SPECIAL, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(cases * 2, tr)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED])
    j = json.loads(tok.to_str())
    j["pre_tokenizer"] = VARIANTS[0][1]
    return j


def variant(base, pre, ignore):
    j = json.loads(json.dumps(base))
    j["pre_tokenizer"] = pre
    j["model"]["ignore_merges"] = ignore
    return Tokenizer.from_str(json.dumps(j))


def main():
    cases = read_cases()
    base = train(cases)
    with open(os.path.join(FIX, "tok_bpe.json"), "w", encoding="utf-8") as f:
        json.dump(base, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    out = {"reference": "huggingface tokenizers %s" % tokenizers.__version__, "cases": cases, "variants": []}
    for name, pre, ignore, family in VARIANTS:
        tok = variant(base, pre, ignore)
        ids = [tok.encode(c, add_special_tokens=False).ids for c in cases]
        if name in ("smollm", "gpt2", "qwen2"):
            for c, i in zip(cases, ids):
                assert tok.decode(i, skip_special_tokens=False) == c, (name, c)
        out["variants"].append({"name": name, "pre_tokenizer": pre, "ignore_merges": ignore, "gguf_pre": family,
                                "ids": ids})
    with open(os.path.join(FIX, "tok_expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("tok_bpe.json: %d tokens, %d merges; tok_expected.json: %d cases x %d variants"
          % (len(base["model"]["vocab"]), len(base["model"]["merges"]), len(cases), len(VARIANTS)))
    if len(sys.argv) > 1:
        import hf_tokenize
        tok = hf_tokenize.build(sys.argv[1])
        res = {"model": os.path.basename(sys.argv[1]), "reference": out["reference"],
               "cases": [{"text": c, "ids": tok.encode(c, add_special_tokens=False).ids} for c in cases]}
        with open(os.path.join(FIX, "tok_smollm2.json"), "w", encoding="utf-8") as f:
            json.dump(res, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print("tok_smollm2.json: %d cases" % len(cases))


if __name__ == "__main__":
    main()
