#!/usr/bin/python3
"""SentencePiece-style tokenizers and their expected tokens from the references (tests only, never a
runtime dependency): Google's `sentencepiece` for tokenizer.model files and Hugging Face `tokenizers`
for their tokenizer.json forms.

  pip install --no-deps --target build/pyref sentencepiece tokenizers==0.23.3 numpy
  PYTHONPATH=build/pyref /usr/bin/python3 tests/llm/make_spm_vectors.py

Writes, in tests/fixtures/llm/ (seeded: the same bytes every run for the same library versions):
  spm_{bpe,bpe_nofb,uni,uni_nofb}.model  tiny models trained by sentencepiece's trainer on generated
              text (BPE and Unigram, byte_fallback on and off, identity normalization, a user-defined
              symbol <sep>), small vocabularies so that rare characters are unknown;
  spm_bpe_unused.model  spm_bpe.model with 12 pieces and "z" marked UNUSED (merged into, then split
              again by sentencepiece);
  spm_uni_rules.model  the same Unigram with a few normalization rules (RULES, compiled by the
              trainer into a precompiled_charsmap: needs llm_tok_norm.c's charsmap decoder);
  spm_{bpe,uni}.json  their tokenizer.json conversions (Unigram [piece, score] vocabulary; BPE with
              merges ordered by the merged piece's score, byte_fallback, fuse_unk, unk_token),
              without normalizer or pre-tokenizer (the variants below add them);
  spm_bpe_cross.json  spm_bpe.json with pieces across spaces ("e▁", "e▁t", "▁the▁") merged early;
  spm_expected.json  "novels": for each novel of data/text (when `make data` has fetched them), the
              count and FNV-1a hash of the ids of a whole novel in one call under some forms;
              "cases" (adversarial texts, then 60 seeded random ones); "model": for each .model, sentencepiece's ids of
              every case; "json": for each variant (base file + pre_tokenizer + normalizer) the ids
              and byte spans `tokenizers` gives; "gguf": the ids of spm_llama.gguf's vocabulary
              (sentencepiece's, without the normalizer's whitespace removal: llama.cpp's rules);
  spm_llama.gguf  a 1-layer Llama GGUF whose vocabulary is spm_bpe.model's (tokenizer.ggml.model
              "llama": tokens, scores, token_type with BYTE tokens, add_space_prefix).
"""
import io
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sentencepiece as spm  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures", "llm")

CASES = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    " leading space",
    "   three leading spaces and two  inside   and trailing  ",
    "line one\nline two\n\nline four\r\n",
    "tabs\tand\tmore\t",
    "digits 1234567890 and 3.14159 and 2026-12-05",
    "東京タワーと大阪城",
    "emoji 😀 and a family 👨‍👩‍👧 and flags 🇫🇷",
    "rare chars: ∮ ⅋ ꙮ Ǆ ʬ",
    "Café déjà vu, naïve façade",
    "<sep> starts, middle <sep> here, end <sep>",
    "a<sep>b<sep><sep>c",
    "▁already▁escaped▁",
    "<0x41> looks like a byte token",
    "",
    " ",
    "x",
    "anonymous unanimous synonymous",
    "ZZZZZZZZZZZZZZZZZZZZZZZZZZZZ",
    "full-width ＡＢＣ１２３ and the ligature ﬁne, ㍿, zero\u200bwidth, cafe\u0301 and café",
]

WORDS = ("the of and to a in that is was he for it with as his on be at by had not are but from or have an "
         "they which one you were her all she there would their we him been has when who will more no if out "
         "so said what up its about into than them can only other new some could time these two may then do "
         "first any my now such like our over man me even most made after also did many before must through "
         "quantization precision mantissa exponent rounding tokenizer sentence piece unigram merge").split()


def random_cases(n):
    """Seeded texts from the training words with odd spacing, newlines, digits and rare characters."""
    rng = random.Random(4)
    extra = ["∮", "ʬ", "😀", "東京", "é", "\n", "\t", "  ", "   ", "▁", "123", "4.5", "ꙮꙮ", "<0x41>"]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            parts.append(rng.choice(WORDS) if rng.random() < 0.7 else rng.choice(extra))
            parts.append(rng.choice([" ", " ", " ", "", "  ", "\n"]))
        out.append("".join(parts))
    return out


def corpus():
    rng = random.Random(29)
    lines = []
    for _ in range(1500):
        n = rng.randint(3, 14)
        w = [rng.choice(WORDS) for _ in range(n)]
        if rng.random() < 0.2:
            w.insert(rng.randint(0, n), str(rng.randint(0, 99999)))
        if rng.random() < 0.1:
            w.insert(rng.randint(0, n), rng.choice(["Café", "déjà", "naïve", "東京", "大阪", "タワー"]))
        s = " ".join(w)
        lines.append(s[0].upper() + s[1:] + rng.choice([".", ",", "!", "?", ";"]))
    return lines


# a few normalization rules (source code points -> target), compiled by the trainer into a small
# precompiled_charsmap: tabs and newlines to spaces, full-width letters and digits, a ligature, a
# square word, a character deleted
RULES = [("9", "20"), ("A", "20"), ("D", "20"), ("FF21", "41"), ("FF22", "42"), ("FF23", "43"), ("FF11", "31"),
         ("FF12", "32"), ("FF13", "33"), ("FB01", "66 69"), ("337F", "682A 5F0F 4F1A 793E"), ("200B", ""),
         ("65 301", "E9")]


def train(name, model_type, vocab, byte_fallback, rule="identity"):
    buf = io.BytesIO()
    extra = {}
    if rule == "rules":
        tsv = os.path.join(FIX, "..", "..", "..", "build", "spm_rules.tsv")
        os.makedirs(os.path.dirname(tsv), exist_ok=True)
        with open(tsv, "w") as f:
            f.write("".join("%s\t%s\n" % r for r in RULES))
        extra = {"normalization_rule_tsv": os.path.relpath(tsv)}   # the model keeps this path: no machine path
        rule = "identity"
    spm.SentencePieceTrainer.train(**extra,
        sentence_iterator=iter(corpus()), model_writer=buf, model_type=model_type, vocab_size=vocab,
        byte_fallback=byte_fallback, normalization_rule_name=rule, user_defined_symbols=["<sep>"],
        character_coverage=0.9995, num_threads=1, seed_sentencepiece_size=100000, shuffle_input_sentence=False,
        hard_vocab_limit=False, minloglevel=2)
    data = buf.getvalue()
    with open(os.path.join(FIX, name + ".model"), "wb") as f:
        f.write(data)
    return data


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """Top-level fields of a protobuf message: (number, wire type, value bytes or int)."""
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        else:
            raise ValueError("wire type %d" % wt)
        out.append((f, wt, v))
    return out


def enc_varint(v):
    out = bytearray()
    while True:
        if v < 0x80:
            out.append(v)
            return bytes(out)
        out.append(v & 0x7F | 0x80)
        v >>= 7


def unfields(fs):
    out = bytearray()
    for f, wt, v in fs:
        out += enc_varint(f << 3 | wt)
        if wt == 0:
            out += enc_varint(v)
        elif wt == 2:
            out += enc_varint(len(v)) + v
        else:
            out += v
    return bytes(out)


def spm_encode(sp, text):
    """ids and byte spans (SentencePieceText pieces: id 2, begin 4, end 5) without protobuf."""
    ids, spans = [], []
    for f, wt, v in fields(sp.encode(text, return_type="serialized_proto")):
        if f != 2:
            continue
        d = {pf: pv for pf, _, pv in fields(v)}
        ids.append(d.get(2, 0))
        spans.append([d.get(4, 0), d.get(5, 0)])
    return ids, spans


def keep_whitespace(model):
    """The model with normalizer_spec (3).remove_extra_whitespaces (4) false."""
    out = []
    for f, wt, v in fields(model):
        if f == 3:
            v = unfields([x for x in fields(v) if x[0] != 4] + [(4, 0, 0)])
        out.append((f, wt, v))
    return unfields(out)


def with_unused(model, names):
    """The model with the pieces named marked UNUSED (type 5), as SetVocabulary leaves pieces outside
    a vocabulary: sentencepiece's BPE still merges into them, then splits them again."""
    out = []
    for f, wt, v in fields(model):
        if f == 1:
            d = fields(v)
            if any(pf == 1 and pv.decode() in names for pf, _, pv in d):
                v = unfields([x for x in d if x[0] != 3] + [(3, 0, 5)])
        out.append((f, wt, v))
    return unfields(out)


def pieces(sp):
    return [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]


def added(sp):
    out = []
    for i in range(sp.get_piece_size()):
        if sp.is_control(i) or sp.is_unknown(i):
            out.append({"id": i, "content": sp.id_to_piece(i), "single_word": False, "lstrip": False,
                        "rstrip": False, "normalized": False, "special": True})
        elif sp.id_to_piece(i) == "<sep>":
            out.append({"id": i, "content": "<sep>", "single_word": False, "lstrip": False, "rstrip": False,
                        "normalized": False, "special": False})
    return out


def merges_of(sp):
    """transformers' SentencePieceExtractor: every split of a piece into two pieces, ordered by the
    merged piece's score (highest first), ties in vocabulary order."""
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    out = []
    for i in range(sp.get_piece_size()):
        if sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i):
            continue
        m = sp.id_to_piece(i)
        local = [(m[:k], m[k:], sp.get_score(i)) for k in range(1, len(m)) if m[:k] in vocab and m[k:] in vocab]
        local.sort(key=lambda x: (vocab[x[0]], vocab[x[1]]))
        out.extend(local)
    out.sort(key=lambda x: x[2], reverse=True)
    return [[a, b] for a, b, _ in out]


def tok_json(sp, kind, byte_fallback):
    unk = sp.unk_id()
    if kind == "uni":
        model = {"type": "Unigram", "unk_id": unk, "vocab": [[p, s] for p, s in pieces(sp)],
                 "byte_fallback": byte_fallback}
    else:
        model = {"type": "BPE", "dropout": None, "unk_token": sp.id_to_piece(unk), "continuing_subword_prefix": None,
                 "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": byte_fallback, "ignore_merges": False,
                 "vocab": {p: i for i, (p, _) in enumerate(pieces(sp))}, "merges": merges_of(sp)}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added(sp), "normalizer": None,
            "pre_tokenizer": None, "post_processor": None,
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
                {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
            "model": model}


def meta(scheme, split=True):
    return {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}


LLAMA2_NORM = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                   {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}

# name, base, pre_tokenizer, normalizer (a normalizer: needs llm_tok_norm.c's Prepend/Replace)
VARIANTS = [
    ("uni-meta-always", "spm_uni.json", meta("always"), None),
    ("uni-meta-first", "spm_uni.json", meta("first"), None),
    ("uni-meta-never", "spm_uni.json", meta("never"), None),
    ("uni-meta-nosplit", "spm_uni.json", meta("always", False), None),
    ("uni-none", "spm_uni.json", None, None),
    ("bpe-meta-always", "spm_bpe.json", meta("always"), None),
    ("bpe-meta-first-nosplit", "spm_bpe.json", meta("first", False), None),
    ("bpe-meta-never", "spm_bpe.json", meta("never"), None),
    ("bpe-llama2", "spm_bpe.json", None, LLAMA2_NORM),
    ("uni-gemma", "spm_uni.json", None, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}),
    ("bpe-cross-llama2", "spm_bpe_cross.json", None, LLAMA2_NORM),
]


def byte_spans(text, offs):
    pos = [0]
    for ch in text:
        pos.append(pos[-1] + len(ch.encode("utf-8")))
    return [[pos[a], pos[b]] for a, b in offs]


def write_gguf(sp, path):
    import numpy as np
    import gguf_io as g
    import make_tiny_gguf as mt
    V = sp.get_piece_size()
    W = mt.weights(31, nl=1, dim=32, ffn=32, nh=4, nkv=2, V=V)
    w = g.Writer()
    arch = "llama"
    for k, t, val in ((".block_count", g.T_U32, 1), (".context_length", g.T_U32, 256),
                      (".embedding_length", g.T_U32, 32), (".feed_forward_length", g.T_U32, 32),
                      (".attention.head_count", g.T_U32, 4), (".attention.head_count_kv", g.T_U32, 2),
                      (".rope.freq_base", g.T_F32, 10000.0), (".attention.layer_norm_rms_epsilon", g.T_F32, 1e-5),
                      (".rope.dimension_count", g.T_U32, 8), (".vocab_size", g.T_U32, V)):
        w.add_kv(arch + k, t, val)
    w.add_kv("general.architecture", g.T_STR, arch)
    w.add_kv("general.name", g.T_STR, "qscope tiny llama spm vocabulary")
    types = []
    for i in range(V):
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i)
                     else 5 if sp.is_unused(i) else 4 if sp.id_to_piece(i) == "<sep>" else 1)
    w.add_kv("tokenizer.ggml.model", g.T_STR, "llama")
    w.add_kv("tokenizer.ggml.tokens", g.T_ARR, [p for p, _ in pieces(sp)], g.T_STR)
    w.add_kv("tokenizer.ggml.scores", g.T_ARR, [float(s) for _, s in pieces(sp)], g.T_F32)
    w.add_kv("tokenizer.ggml.token_type", g.T_ARR, types, g.T_I32)
    w.add_kv("tokenizer.ggml.bos_token_id", g.T_U32, sp.bos_id())
    w.add_kv("tokenizer.ggml.eos_token_id", g.T_U32, sp.eos_id())
    w.add_kv("tokenizer.ggml.unknown_token_id", g.T_U32, sp.unk_id())
    w.add_kv("tokenizer.ggml.add_bos_token", g.T_BOOL, True)
    w.add_kv("tokenizer.ggml.add_space_prefix", g.T_BOOL, True)
    for name, a in W.items():
        w.add_tensor(name, a, g.GGML_F32 if a.ndim == 1 else g.GGML_F16)
    w.write(path)
    del np


def fnv(ids):
    """FNV-1a 64 over the ids as decimal text, each followed by a comma (test_llm_tok_spm.c does the same)."""
    h = 0xcbf29ce484222325
    for b in "".join("%d," % i for i in ids).encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def novels(sps, gguf_sp):
    """Whole novels of data/text (`make data`), each in one call: count and hash of the ids."""
    d = os.path.join(HERE, "..", "..", "data", "text")
    if not os.path.isdir(d):
        print("data/text absent: no novel hashes")
        return {}
    forms = {}
    for vname, base, pre, norm in VARIANTS:
        if vname in ("bpe-llama2", "uni-gemma", "uni-meta-first", "bpe-cross-llama2"):
            with open(os.path.join(FIX, base), encoding="utf-8") as f:
                j = json.load(f)
            j["pre_tokenizer"], j["normalizer"] = pre, norm
            forms[vname] = lambda t, tk=Tokenizer.from_str(json.dumps(j)): tk.encode(t, add_special_tokens=False).ids
    for name in ("spm_bpe", "spm_uni", "spm_uni_rules", "spm_bpe_unused"):
        forms[name] = sps[name].encode
    forms["gguf"] = gguf_sp.encode
    res = {}
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".txt"):
            with open(os.path.join(d, fn), encoding="utf-8") as f:
                t = f.read()
            res[fn] = {k: [len(ids), fnv(ids)] for k, ids in ((k, g(t)) for k, g in forms.items())}
    return res


def main():
    os.makedirs(FIX, exist_ok=True)
    CASES.extend(random_cases(60))
    out = {"cases": CASES, "model": {}, "json": [], "gguf": {}}
    sps = {}
    for name, kind, vocab, fb, rule in (("spm_bpe", "bpe", 600, True, "identity"),
                                        ("spm_bpe_nofb", "bpe", 320, False, "identity"),
                                        ("spm_uni", "unigram", 600, True, "identity"),
                                        ("spm_uni_nofb", "unigram", 320, False, "identity"),
                                        ("spm_uni_rules", "unigram", 400, False, "rules")):
        sp = spm.SentencePieceProcessor(model_proto=train(name, kind, vocab, fb, rule))
        sps[name] = sp
        res = {"ids": [], "spans": []}
        for c in CASES:
            ids, spans = spm_encode(sp, c)
            assert ids == sp.encode(c), c
            res["ids"].append(ids)
            res["spans"].append(spans)
        out["model"][name] = res
    sp = sps["spm_bpe"]   # UNUSED pieces: the 12 best-scored longer ones, and a single character
    names = sorted((p for p in (sp.id_to_piece(i) for i in range(sp.get_piece_size()) if sp.is_unused(i) is False
                                and not sp.is_control(i) and not sp.is_unknown(i) and not sp.is_byte(i))
                    if len(p) > 2), key=lambda p: -sp.get_score(sp.piece_to_id(p)))[:12] + ["z"]
    data = with_unused(sp.serialized_model_proto(), set(names))
    with open(os.path.join(FIX, "spm_bpe_unused.model"), "wb") as f:
        f.write(data)
    spu = spm.SentencePieceProcessor(model_proto=data)
    sps["spm_bpe_unused"] = spu
    res = {"ids": [], "spans": []}
    for c in CASES:
        ids, spans = spm_encode(spu, c)
        res["ids"].append(ids)
        res["spans"].append(spans)
    out["model"]["spm_bpe_unused"] = res
    for name, kind, fb in (("spm_bpe", "bpe", True), ("spm_uni", "uni", True)):
        with open(os.path.join(FIX, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(tok_json(sps[name], kind, fb), f, ensure_ascii=False, separators=(",", ":"))
    cross = tok_json(sps["spm_bpe"], "bpe", True)   # pieces across spaces: BPE not cut at "▁"
    for k, (a, b) in enumerate([("e", "▁"), ("s", "▁"), ("e▁", "t"), ("▁the", "▁")]):
        cross["model"]["vocab"][a + b] = len(cross["model"]["vocab"])
        cross["model"]["merges"].insert(3 * k, [a, b])
    with open(os.path.join(FIX, "spm_bpe_cross.json"), "w", encoding="utf-8") as f:
        json.dump(cross, f, ensure_ascii=False, separators=(",", ":"))
    for vname, base, pre, norm in VARIANTS:
        with open(os.path.join(FIX, base), encoding="utf-8") as f:
            j = json.load(f)
        j["pre_tokenizer"] = pre
        j["normalizer"] = norm
        tk = Tokenizer.from_str(json.dumps(j))
        ids, spans = [], []
        for c in CASES:
            enc = tk.encode(c, add_special_tokens=False)
            ids.append(enc.ids)
            spans.append(byte_spans(c, enc.offsets))
        out["json"].append({"name": vname, "base": base, "pre_tokenizer": pre, "normalizer": norm,
                            "ids": ids, "spans": spans})
    write_gguf(sps["spm_bpe"], os.path.join(FIX, "spm_llama.gguf"))
    # llama.cpp's SPM tokenizer: a space before the text, spaces escaped, no whitespace removal; the same
    # as sentencepiece with remove_extra_whitespaces off
    sp = sps["spm_bpe"]
    sp2 = spm.SentencePieceProcessor(model_proto=keep_whitespace(sp.serialized_model_proto()))
    # llama.cpp matches the user-defined <sep> first and gives every stretch of text its space prefix
    sep = sp.piece_to_id("<sep>")
    out["gguf"]["ids"] = [[i for part in re.split("(<sep>)", c) if part
                           for i in ([sep] if part == "<sep>" else sp2.encode(part))] for c in CASES]
    out["novels"] = novels(sps, sp2)
    with open(os.path.join(FIX, "spm_expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
    print("wrote spm_*.model, spm_*.json, spm_expected.json, spm_llama.gguf (sentencepiece %s, tokenizers %s)"
          % (spm.__version__, __import__("tokenizers").__version__))


if __name__ == "__main__":
    main()
