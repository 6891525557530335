#!/usr/bin/python3
"""Expected WordPiece tokenizations from Hugging Face `tokenizers` (the test oracle, never a runtime
dependency), for tests/unit/test_llm_tok_wordpiece.c.

  pip install --no-deps --target build/pyref tokenizers   # any recent tokenizers
  PYTHONPATH=build/pyref /usr/bin/python3 tests/llm/make_wordpiece_vectors.py [--tables] [MINILM_DIR [TEXT]]

Writes, in tests/fixtures/llm/:
  wp_tok.json       a small WordPiece tokenizer.json trained by `tokenizers`' WordPieceTrainer on
                    generated text (syllable words, accents, CJK, digits, punctuation), with the special
                    tokens [PAD] [UNK] [CLS] [SEP] [MASK];
  wp_expected.json  the cases (tok_cases.txt's and WordPiece's own: accents, CJK, punctuation runs,
                    words over max_input_chars_per_word, unknown characters, every whitespace kind,
                    added tokens) and, per variant (normalizer, pre-tokenizer, model parameters), each
                    case's ids, byte offsets in the UTF-8 text (a0, b0, a1, b1, ...: token k is
                    [ak, bk)) and, for the bert* variants, decode() of the ids (null ids: tokenizers
                    refuses the case, as with an unk_token missing from the vocabulary);
  wp_minilm.json    (with MINILM_DIR, holding all-MiniLM-L6-v2's tokenizer.json) the same for the real
                    tokenizer, and a digest (FNV-1a 64 of the ids and byte offsets as little-endian
                    uint32) of the first 200 KB of TEXT (default data/text/persuasion.txt), so the C test
                    checks the whole stretch without tokenizers; the full ids and offsets go to
                    build/wp_minilm_austen.json for locating a difference.
With --tables: store/llm_pretok_bert_tab.h, the character classes of tokenizers' BertPreTokenizer,
Punctuation and Whitespace pre-tokenizers, read off the library itself (its punctuation class is the
unicode_categories crate's, an older Unicode than PCRE2's; its Whitespace regex runs in Oniguruma,
whose \\w is the Word property of a newer one).
"""
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizers  # noqa: E402
from tokenizers import Tokenizer, AddedToken, models, trainers, pre_tokenizers, normalizers, decoders  # noqa: E402
from make_tok_vectors import read_cases  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
FIX = os.path.join(HERE, "..", "fixtures", "llm")
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
AUSTEN_BYTES = 200 * 1024

WP_CASES = [
    "Café naïve résumé ÉCOLE Ångström façade",
    "e\u0301 a\u0308 composed é vs decomposed e\u0301",
    "ÀÉÎÕÜ àéîõü ÇçÑñ ŁłŒœ ǅ ﬁ ﬀ",
    "日本語のテキスト中文字符",
    "abc中文def 한국어mixed 漢字123",
    "!!!???...,,,;;--((]]{{}}",
    "don't won't it's a.b.c e.g. U.S.A.",
    "$5+3=8^2|~`<> #hash @at 100% & *star*",
    "a" * 99,
    "a" * 100,
    "a" * 101,
    "abc" * 40,
    "supercalifragilisticexpialidocious " * 3,
    "x" + "é" * 100,
    "emoji 😀 snowman \u2603 private \ue000 end",
    "\u2e43\u2e4f \u166d newer punctuation",
    "a\U000111c9b U+111C9",   # punctuation to tokenizers (Po in its Unicode), Mn today: its StripAccents keeps it
    "\t tab\nnewline\rreturn\u00a0nbsp\u2003em\u3000ideo\u2028ls\u2029ps\u0085nel",
    "\u180e mongolian \u200b zwsp \ufeff bom \x1c\x1d\x1e\x1f seps",
    "control\x02nul\x07bell\x7fdel\x01",
    "[CLS] the cat sat [SEP] on the [MASK] [SEP]",
    "hello[MASK]world[MASK][MASK]x",
    "[cls] lowercase is not [Sep] special",
    "[UNK] and [PAD] literally",
    "12345 3.14 ½ ² ① ١٢٣ １２３",
    "snake_case_identifier under_score __init__",
    "Mr. Darcy's ball; Elizabeth's reply -- \"No!\" she said.",
    "   ",
    "",
    "?",
    "##",
    "## ##a a##b",
]

ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def gen_text(n_lines=1500, seed=29):
    """Training text: syllable words (some capitalised, some accented), CJK runs, digits, punctuation."""
    rnd = random.Random(seed)
    syl = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"] + ["qu", "th", "sh", "ing", "ed", "er", "ly"]
    extra = ["é", "è", "ï", "ö", "ñ", "ç", "ß", "å", "中", "文", "日", "本", "語", "字"]
    lines = []
    for _ in range(n_lines):
        words = []
        for _ in range(rnd.randint(4, 14)):
            r = rnd.random()
            if r < 0.07:
                words.append(str(rnd.randint(0, 99999)))
            elif r < 0.12:
                words.append(rnd.choice([".", ",", "!", "?", ";", "--", "'", "\"", "(", ")"]))
            elif r < 0.16:
                words.append("".join(rnd.choice(extra) for _ in range(rnd.randint(1, 4))))
            else:
                w = "".join(rnd.choice(syl) for _ in range(rnd.randint(1, 4)))
                if rnd.random() < 0.15:
                    w = w.capitalize()
                if rnd.random() < 0.05:
                    w = w.replace("e", "é", 1)
                words.append(w)
        lines.append(" ".join(words))
    lines += ["the cat sat on the mat", "don't won't it's", "naïve café résumé", "the quick brown fox"] * 20
    return lines


def train():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tr = trainers.WordPieceTrainer(vocab_size=700, min_frequency=2, special_tokens=SPECIAL, show_progress=False,
                                   initial_alphabet=list(ALPHABET))
    tok.train_from_iterator(gen_text(), tr)
    return json.loads(tok.to_str())


def punct(behavior):
    return {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                                  {"type": "Punctuation", "behavior": behavior}]}


BERT_NORM = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
             "lowercase": True}
# name, normalizer, pre_tokenizer, model changes
VARIANTS = [
    ("bert-pre", None, {"type": "BertPreTokenizer"}, {}),
    ("whitespace", None, {"type": "Whitespace"}, {}),
    ("whitespace-split", None, {"type": "WhitespaceSplit"}, {}),
    ("punct-isolated", None, punct("Isolated"), {}),
    ("punct-removed", None, punct("Removed"), {}),
    ("punct-prev", None, punct("MergedWithPrevious"), {}),
    ("punct-next", None, punct("MergedWithNext"), {}),
    ("punct-contiguous", None, punct("Contiguous"), {}),
    ("max-chars-5", None, {"type": "BertPreTokenizer"}, {"max_input_chars_per_word": 5}),
    ("max-chars-0", None, {"type": "WhitespaceSplit"}, {"max_input_chars_per_word": 0}),
    ("prefix-at", None, {"type": "BertPreTokenizer"}, {"continuing_subword_prefix": "@@"}),
    ("prefix-empty", None, {"type": "BertPreTokenizer"}, {"continuing_subword_prefix": ""}),
    ("unk-missing", None, {"type": "BertPreTokenizer"}, {"unk_token": "[NOPE]"}),
    ("no-pre", None, None, {}),
    ("bert-full", BERT_NORM, {"type": "BertPreTokenizer"}, {}),
    ("bert-accents", dict(BERT_NORM, lowercase=False, strip_accents=True), {"type": "BertPreTokenizer"}, {}),
    ("bert-cased", dict(BERT_NORM, lowercase=False, handle_chinese_chars=False), {"type": "BertPreTokenizer"}, {}),
]


def byte_offsets(text, offsets):
    """tokenizers' offsets count characters of a str; the C side counts UTF-8 bytes."""
    pos = [0]
    for ch in text:
        pos.append(pos[-1] + len(ch.encode("utf-8")))
    return [[pos[a], pos[b]] for a, b in offsets]


def encode_all(tok, cases, decoded=True):
    res = []
    for c in cases:
        try:
            enc = tok.encode(c, add_special_tokens=False)
        except Exception:   # noqa: BLE001  (a refusal: unk_token missing)
            res.append({"ids": None})
            continue
        res.append({"ids": enc.ids, "offsets": [x for ab in byte_offsets(c, enc.offsets) for x in ab]})
        if decoded:
            res[-1]["decoded"] = tok.decode(enc.ids, skip_special_tokens=False)
    return res


def variant(base, norm, pre, mchanges):
    j = json.loads(json.dumps(base))
    j["normalizer"] = norm
    j["pre_tokenizer"] = pre
    j["model"].update(mchanges)
    return Tokenizer.from_str(json.dumps(j))


def fnv(ids, offs):
    h = 0xcbf29ce484222325
    for i, (a, b) in zip(ids, offs):
        for byte in struct.pack("<III", i, a, b):
            h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def minilm(dirname, text_path, cases):
    tok = Tokenizer.from_file(os.path.join(dirname, "tokenizer.json"))
    tok.no_truncation()   # the file asks for 128 tokens, padded
    tok.no_padding()
    out = {"reference": "huggingface tokenizers %s" % tokenizers.__version__, "cases": cases,
           "expected": encode_all(tok, cases)}
    raw = open(text_path, "rb").read()[:AUSTEN_BYTES]
    text = raw.decode("utf-8", errors="ignore")   # cut on a character boundary
    enc = tok.encode(text, add_special_tokens=False)
    offs = byte_offsets(text, enc.offsets)
    out["austen"] = {"file": os.path.basename(text_path), "bytes": len(text.encode("utf-8")), "tokens": len(enc.ids),
                     "fnv1a64": fnv(enc.ids, offs)}
    with open(os.path.join(FIX, "wp_minilm.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    os.makedirs(os.path.join(ROOT, "build"), exist_ok=True)
    with open(os.path.join(ROOT, "build", "wp_minilm_austen.json"), "w") as f:
        json.dump({"ids": enc.ids, "offsets": offs}, f, separators=(",", ":"))
    print("wp_minilm.json: %d cases; %s: %d bytes -> %d tokens" % (len(cases), out["austen"]["file"],
                                                                  out["austen"]["bytes"], len(enc.ids)))


def ranges(pred):
    out = []
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        if pred(chr(cp)):
            if out and out[-1][1] == cp - 1:
                out[-1][1] = cp
            else:
                out.append([cp, cp])
    return out


def tables():
    p = pre_tokenizers.Punctuation()
    w = pre_tokenizers.Whitespace()
    punct_r = ranges(lambda c: len(p.pre_tokenize_str("a" + c + "b")) == 3)
    word_r = ranges(lambda c: w.pre_tokenize_str("a" + c) == [("a" + c, (0, 2))])
    space_r = ranges(lambda c: w.pre_tokenize_str("a" + c) == [("a", (0, 1))])
    ws = pre_tokenizers.WhitespaceSplit()
    split_r = ranges(lambda c: len(ws.pre_tokenize_str("a" + c + "b")) == 2)
    assert split_r == space_r, "WhitespaceSplit's and Whitespace's spaces differ"

    def emit(f, name, rs):
        f.write("static const uint32_t %s[][2] = {\n" % name)
        for i in range(0, len(rs), 5):
            f.write("    " + " ".join("{0x%X, 0x%X}," % (a, b) for a, b in rs[i:i + 5]) + "\n")
        f.write("};\n")

    path = os.path.join(ROOT, "store", "llm_pretok_bert_tab.h")
    with open(path, "w") as f:
        f.write("/* Generated by tests/llm/make_wordpiece_vectors.py --tables from huggingface tokenizers %s: do not\n"
                "** edit.  Code point ranges [first, last] of its pre-tokenizers' character classes. */\n"
                "#include <stdint.h>\n\n" % tokenizers.__version__)
        f.write("/* Punctuation and BertPreTokenizer: char::is_ascii_punctuation or the unicode_categories crate's P* */\n")
        emit(f, "kPunct", punct_r)
        f.write("/* char::is_whitespace (WhitespaceSplit, BertPreTokenizer), Oniguruma's \\s (Whitespace) */\n")
        emit(f, "kSpace", space_r)
        f.write("/* Oniguruma's \\w (Whitespace's \\w+|[^\\w\\s]+) */\n")
        emit(f, "kWord", word_r)
    print("%s: %d punctuation, %d space, %d word ranges" % (path, len(punct_r), len(space_r), len(word_r)))


def main():
    args = sys.argv[1:]
    if args and args[0] == "--tables":
        tables()
        args = args[1:]
    cases = read_cases() + WP_CASES
    base = train()
    with open(os.path.join(FIX, "wp_tok.json"), "w", encoding="utf-8") as f:
        json.dump(base, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    out = {"reference": "huggingface tokenizers %s" % tokenizers.__version__, "cases": cases, "variants": []}
    for name, norm, pre, mch in VARIANTS:
        tok = variant(base, norm, pre, mch)
        out["variants"].append({"name": name, "normalizer": norm, "pre_tokenizer": pre, "model": mch,
                                "expected": encode_all(tok, cases, name.startswith("bert"))})
    with open(os.path.join(FIX, "wp_expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("wp_tok.json: %d tokens; wp_expected.json: %d cases x %d variants"
          % (len(base["model"]["vocab"]), len(cases), len(VARIANTS)))
    if args:
        minilm(args[0], args[1] if len(args) > 1 else os.path.join(ROOT, "data", "text", "persuasion.txt"), cases)


if __name__ == "__main__":
    main()
