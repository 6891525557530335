#!/usr/bin/env python3
"""Reference token ids of the six Austen novels (`make data`) under SmolLM2's tokenizer, by Hugging Face
`tokenizers` (an independent implementation), for tests/e2e/llm_tok_austen.sh.

  PYTHONPATH=build/pyref python3 tests/llm/make_austen_tok.py data/models/SmolLM2-135M-Instruct.Q4_1.gguf \
      data/text tests/fixtures/llm/austen_smollm2_tok.json
      (pip install --no-deps --target build/pyref tokenizers numpy)

The tokenizer is rebuilt from the GGUF as tests/llm/hf_tokenize.py does.  For each novel it writes
the text's SHA-256, the number of ids and the SHA-256 of the ids written as decimal numbers, one per
line (each followed by a newline): ~1M ids are too many to commit, their hash is not.
"""
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_tokenize  # noqa: E402


def main():
    gguf, textdir, out = sys.argv[1:4]
    tok = hf_tokenize.build(gguf)
    res = {}
    for name in sorted(os.listdir(textdir)):
        if not name.endswith(".txt"):
            continue
        raw = open(os.path.join(textdir, name), "rb").read()
        ids = tok.encode(raw.decode("utf-8"), add_special_tokens=False).ids
        res[name] = {"bytes": len(raw), "text_sha256": hashlib.sha256(raw).hexdigest(), "ids": len(ids),
                     "ids_sha256": hashlib.sha256("".join("%d\n" % i for i in ids).encode()).hexdigest()}
        print(name, len(raw), "bytes", len(ids), "ids")
    with open(out, "w") as f:
        json.dump({"model": os.path.basename(gguf), "reference": "huggingface tokenizers", "novels": res}, f,
                  indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
