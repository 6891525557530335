#!/usr/bin/env bash
# `llm tokenize`: LoPT (--threads N) gives the ids of the sequential tokenizer (--threads 1) for
# N = 2, 3, 8, 16 and chunks of 64 B .. 1 MiB, on generated adversarial texts (the fixture BPE) and
# on the six Austen novels (SmolLM2, when `make data` has run); other families (WordPiece, MiniLM,
# a normalizer, Metaspace) and the ones LoPT leaves sequential; --json offsets; stdin; refusals.
source "$(dirname "$0")/lib.sh"
TJ="$FIX/llm/tok_bpe.json"
GGUF="$ROOT/data/models/SmolLM2-135M-Instruct.Q4_1.gguf"
NOVELS="$ROOT/data/text"

# ids of FILE under tokenizer TOK with extra options, to OUT
ids() { local tok=$1 file=$2 out=$3; shift 3; "$QS" llm tokenize --tokenizer "$tok" --text "$file" "$@" > "$out" 2>> "$T/stderr"; }

# Adversarial texts: no spaces at all, one repeated character, CJK, emoji with ZWJ, CRLF, long digit
# runs, invalid UTF-8 bytes, and a random mix of all with words (so that some anchors exist).
python3 - "$T" <<'PY'
import random, sys
d = sys.argv[1]
r = random.Random(29)
words = ["the", "word", "Hello", "it's", "we'll", "end.", "yes,", "no;", "so:", "ah!", "why?"]
def prose(n): return " ".join(r.choice(words) for _ in range(n))
texts = {
    "nospace": "".join(r.choice("abcdefghijklmnopqrstuvwxyz.,;") for _ in range(150000)),
    "repeat": "a" * 200000,
    "cjk": "".join(r.choice(["中文字符", "日本語の文章", "。", "、", " word word "]) for _ in range(20000)),
    "cjklines": "".join(r.choice(["中文字符", "日本語の文章", "한국어", "。", "、", "。\n", "\n", "\n\n", "\u3000\n"]) for _ in range(40000)),
    "emoji": " ".join(r.choice(["👩\u200d👩\u200d👧", "👍🏽", "🏳️\u200d🌈", "word", "the", "x\u0301"]) for _ in range(30000)),
    "crlf": "".join(prose(r.randint(0, 12)) + r.choice(["\r\n", "\r\n\r\n", " \r\n", "\n", "\r"]) for _ in range(15000)),
    "digits": " ".join(str(r.randint(0, 10 ** r.randint(1, 60))) + r.choice(["", " word", ".5"]) for _ in range(20000)),
}
for k, v in texts.items():
    open(f"{d}/{k}.txt", "wb").write(v.encode())
alpha = [b" ", b"  ", b"\n", b"\r\n", b"\t", b"7", b"12345", b".", b",", b"'s", b"\xff", b"\xc3", b"\x80", b"\xe4\xb8",
         "中".encode(), "👩\u200d👧".encode(), "e\u0301".encode(), "\u00a0".encode(), b"<|im_start|>", b"<tool_call>", b"<tool_"]
out = bytearray()
while len(out) < 300000:
    out += r.choice(alpha) if r.random() < 0.4 else (r.choice(words).encode() + b" ")
open(f"{d}/invalid.txt", "wb").write(bytes(out))
PY
ADV="nospace repeat cjk cjklines emoji crlf digits invalid"

# every adversarial text x every thread count x every chunk size, with the fixture tokenizer.json
for a in $ADV; do
  ids "$TJ" "$T/$a.txt" "$T/$a.ref" --threads 1
  bad=""
  for n in 2 3 8 16; do
    for c in 64 256 4096 65536 1048576; do
      ids "$TJ" "$T/$a.txt" "$T/$a.got" --threads $n --lopt-chunk $c || bad="$bad $n/$c(exit)"
      cmp -s "$T/$a.ref" "$T/$a.got" || bad="$bad $n/$c"
    done
  done
  check "$a: --threads 2,3,8,16 x --lopt-chunk 64..1M give the --threads 1 ids${bad:+ (differ: $bad)}" "[ -s '$T/$a.ref' ] && [ -z '$bad' ]"
done
ids "$TJ" "$T/invalid.txt" "$T/inv.got" --threads 2 --lopt-chunk 64 --lopt-overlap 1
check "invalid: the smallest overlap (1 byte, doubled where needed) gives the same ids" "cmp -s '$T/invalid.ref' '$T/inv.got'"
check "invalid: LoPT merged chunks at anchors (not a sequential fallback)" \
  "tail -n 1 '$T/stderr' | grep -qE ' [1-9][0-9]* chunks, [1-9][0-9]* anchors\)'"
ids "$TJ" "$T/cjklines.txt" "$T/cjk.got" --threads 2 --lopt-chunk 4096
check "CJK lines without spaces: anchors after newlines (the newline rule)" \
  "cmp -s '$T/cjklines.ref' '$T/cjk.got' && tail -n 1 '$T/stderr' | grep -qE ' [1-9][0-9]* anchors\)'"
ids "$TJ" "$T/repeat.txt" "$T/rep.got" --threads 2 --lopt-chunk 64
check "one repeated character: no cut position, one chunk (the sequential tokenizer)" \
  "tail -n 1 '$T/stderr' | grep -q '(1 thread, 1 chunk, 0 anchors; sequential: no two cut positions'"
"$QS" llm tokenize --tokenizer "$TJ" --text "$T/crlf.txt" --threads 1 > /dev/null 2> "$T/one.err"
check "the summary line counts in the singular where it is one (1 thread, 1 chunk)" \
  "grep -qE '^qscope: [0-9]+ tokens from [0-9]+ bytes in [0-9.]+ s \(1 thread, 1 chunk, 0 anchors\)$' '$T/one.err'"

# Other families (docs/tokenize.md, "LoPT beyond byte-level BPE"): WordPiece with BertNormalizer, the
# fixture BPE under Qwen2's NFC, Metaspace SentencePiece, SentencePiece BPE without a pre-tokenizer
# (Llama 2's tokenizer.json normalizer, a tokenizer.model, a GGUF "llama" vocabulary); then those LoPT
# leaves sequential, saying why.
python3 - "$FIX/llm" "$T" <<'PY'
import json, sys
fix, d = sys.argv[1:3]
j = json.load(open(fix + '/tok_bpe.json'))
j['normalizer'] = {'type': 'NFC'}
json.dump(j, open(d + '/bpe_nfc.json', 'w'))
j['normalizer'] = {'type': 'Prepend', 'prepend': 'x'}
json.dump(j, open(d + '/bpe_prepend.json', 'w'))
u = json.load(open(fix + '/spm_uni.json'))
u['pre_tokenizer'] = {'type': 'Metaspace', 'replacement': '\u2581', 'prepend_scheme': 'always', 'split': True}
json.dump(u, open(d + '/uni_meta.json', 'w'))
s = json.load(open(fix + '/spm_bpe.json'))
s['normalizer'] = {'type': 'Sequence', 'normalizers': [{'type': 'Prepend', 'prepend': '\u2581'},
                   {'type': 'Replace', 'pattern': {'String': ' '}, 'content': '\u2581'}]}
json.dump(s, open(d + '/spm_llama2.json', 'w'))
PY
cat "$T"/{crlf,cjklines,emoji,invalid}.txt > "$T/mix.txt"
printf 'caf\xc3\xa9 \xc3\x89COLE na\xcc\x88ive \x01ctrl\x7f \xe4\xb8\xad\xe6\x96\x87 [MASK] word\tword\r\n' >> "$T/mix.txt"
for tok in "$FIX/llm/wp_tok.json" "$T/bpe_nfc.json" "$T/uni_meta.json" "$T/spm_llama2.json" "$FIX/llm/spm_bpe.model" \
           "$FIX/llm/spm_llama.gguf"; do
  b=$(basename "$tok" .json)
  ids "$tok" "$T/mix.txt" "$T/$b.ref" --threads 1
  bad=""
  for nc in 2:64 3:4096 8:65536 16:1048576; do
    ids "$tok" "$T/mix.txt" "$T/$b.got" --threads ${nc%%:*} --lopt-chunk ${nc##*:} || bad="$bad $nc(exit)"
    cmp -s "$T/$b.ref" "$T/$b.got" || bad="$bad $nc"
  done
  check "$b on the adversarial mix: --threads 2..16 x chunks 64..1M give the --threads 1 ids${bad:+ (differ: $bad)}" \
    "[ -s '$T/$b.ref' ] && [ -z '$bad' ]"
  ids "$tok" "$T/mix.txt" "$T/$b.got" --threads 2 --lopt-chunk 4096
  check "$b: LoPT merged chunks at anchors (not a sequential fallback)" \
    "tail -n 1 '$T/stderr' | grep -qE ' [1-9][0-9]* anchors\)$'"
done
for tw in "$FIX/llm/spm_bpe.json:a SentencePiece model without a pre-tokenizer" "$T/bpe_prepend.json:prepends to every stretch"; do
  ids "${tw%%:*}" "$T/mix.txt" "$T/seq.got" --threads 2 --lopt-chunk 4096
  check "$(basename "${tw%%:*}"): sequential, and the summary says why ('${tw#*:}')" \
    "tail -n 1 '$T/stderr' | grep -q '1 chunk, 0 anchors; sequential: .*${tw#*:}'"
done

# --tokenizer x.gguf reads the vocabulary alone: the ids of --model x.gguf, also from a GGUF whose
# architecture no loader supports (its weights are never looked at), and a GGUF without tokens refused
for g in tiny spm_llama; do
  "$QS" llm tokenize --model "$FIX/llm/$g.gguf" --prompt "Hello world, it's 42." > "$T/$g.m" 2>/dev/null
  "$QS" llm tokenize --tokenizer "$FIX/llm/$g.gguf" --prompt "Hello world, it's 42." > "$T/$g.t" 2>/dev/null
  check "$g.gguf: --tokenizer (vocabulary only) gives the ids of --model" "[ -s '$T/$g.m' ] && cmp -s '$T/$g.m' '$T/$g.t'"
done
python3 - "$FIX/llm/spm_llama.gguf" "$T" <<'PY'
import sys
b = open(sys.argv[1], 'rb').read()
i = b.index(b'general.architecture') + len(b'general.architecture') + 12
assert b[i:i + 5] == b'llama'
open(sys.argv[2] + '/arch.gguf', 'wb').write(b[:i] + b'llamX' + b[i + 5:])
j = b.index(b'tokenizer.ggml.tokens')
open(sys.argv[2] + '/notok.gguf', 'wb').write(b[:j] + b'tokenizer.ggml.tokenZ' + b[j + 21:])
PY
"$QS" llm tokenize --tokenizer "$T/arch.gguf" --prompt "Hello world, it's 42." > "$T/arch.t" 2>/dev/null
check "a GGUF of an unsupported architecture: --tokenizer still reads its vocabulary" "cmp -s '$T/spm_llama.m' '$T/arch.t'"
refuses "... which --model refuses" 1 "arch\.gguf: architecture 'llamX' is not supported" \
  "$QS" llm tokenize --model "$T/arch.gguf" --prompt hi
refuses "a GGUF without tokenizer.ggml.tokens" 1 "notok\.gguf: no tokenizer\.ggml\.tokens" \
  "$QS" llm tokenize --tokenizer "$T/notok.gguf" --prompt hi

# stdin is the same text
"$QS" llm tokenize --tokenizer "$TJ" --text - --threads 3 --lopt-chunk 100 < "$T/crlf.txt" > "$T/stdin.got" 2>/dev/null
check "--text - (stdin) gives the ids of the file" "cmp -s '$T/crlf.ref' '$T/stdin.got'"

# --json: ids as the text output; byte spans never go backwards; character offsets are Python's
printf 'Hello w\xc3\xb6rld, \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 it'"'"'s 42.\r\nend' > "$T/small.txt"
for n in 1 2; do
  "$QS" llm tokenize --tokenizer "$TJ" --text "$T/small.txt" --json --threads $n --lopt-chunk 16 --lopt-overlap 8 > "$T/j$n.json" 2>/dev/null
done
ids "$TJ" "$T/small.txt" "$T/small.ids" --threads 1
check "--json: the same ids as the text output, and the same document for --threads 1 and 2" "python3 - '$T' <<'PY'
import json, sys
d = sys.argv[1]
j1, j2 = json.load(open(d + '/j1.json')), json.load(open(d + '/j2.json'))
ids = [int(x) for x in open(d + '/small.ids').read().strip().split(',')]
assert [t['id'] for t in j1['tokens']] == ids and j1['count'] == len(ids)
assert j1['tokens'] == j2['tokens'], 'threads 2 differs'
PY"
check "--json: byte spans cover the text in order; chars are the code points before each boundary" "python3 - '$T' <<'PY'
import json, sys
d = sys.argv[1]
b = open(d + '/small.txt', 'rb').read()
j = json.load(open(d + '/j1.json'))
assert j['bytes'] == len(b)
end = 0
for t in j['tokens']:
    s, e = t['bytes']; cs, ce = t['chars']
    assert s == end and e >= s, t          # the fixture BPE keeps every byte
    end = e
    for pos, c in ((s, cs), (e, ce)):
        try: want = len(b[:pos].decode('utf-8'))
        except UnicodeDecodeError: continue   # inside a character
        assert c == want, (t, want)
assert end == len(b)
PY"

# refusals: one line naming the file or the option
refuses "a missing --text file" 1 "nope\.txt" "$QS" llm tokenize --tokenizer "$TJ" --text "$T/nope.txt"
refuses "a missing --tokenizer" 1 "nope\.json" "$QS" llm tokenize --tokenizer "$T/nope.json" --prompt hi
refuses "--lopt-chunk 0" 2 "--lopt-chunk wants bytes in 16\.\." "$QS" llm tokenize --tokenizer "$TJ" --prompt hi --lopt-chunk 0
refuses "--lopt-chunk abc" 2 "--lopt-chunk wants bytes" "$QS" llm tokenize --tokenizer "$TJ" --prompt hi --lopt-chunk abc
refuses "--lopt-overlap not below the chunk" 2 "--lopt-overlap 64 must be below the chunk length 64" \
  "$QS" llm tokenize --tokenizer "$TJ" --prompt hi --lopt-chunk 64 --lopt-overlap 64
refuses "--threads 0" 2 "--threads wants an integer" "$QS" llm tokenize --tokenizer "$TJ" --prompt hi --threads 0
refuses "--prompt and --text together" 2 "one of --prompt TEXT and --text FILE" \
  "$QS" llm tokenize --tokenizer "$TJ" --prompt hi --text "$T/small.txt"
refuses "neither --model nor --tokenizer" 2 "one of --model PATH and --tokenizer PATH" "$QS" llm tokenize --prompt hi
refuses "--npy into a missing directory" 1 "nodir/x\.npy" "$QS" llm tokenize --tokenizer "$TJ" --prompt hi --npy "$T/nodir/x.npy"
ok "--npy writes the ids" "$QS" llm tokenize --tokenizer "$TJ" --text "$T/small.txt" --npy "$T/small.npy"
check "... as int32, equal to the text output" "python3 -c \"
import sys; b = open('$T/small.npy','rb').read(); h = b[10:10 + int.from_bytes(b[8:10],'little')].decode()
assert \\\"'<i4'\\\" in h, h; import array; a = array.array('i'); a.frombytes(b[10 + len(h):])
assert list(a) == [int(x) for x in open('$T/small.ids').read().strip().split(',')]\""

# SmolLM2 on the six Austen novels: a few settings per novel, every chunk size on one
if [ ! -r "$GGUF" ] || [ ! -d "$NOVELS" ]; then
  skip "Austen novels with SmolLM2" "data: no $GGUF or $NOVELS (make data)"
else
  set -- 2:64 3:4096 8:65536 16:1048576
  for f in "$NOVELS"/*.txt; do
    b=$(basename "$f" .txt)
    ids "$GGUF" "$f" "$T/$b.ref" --threads 1
    bad=""
    for nc in "$@"; do
      ids "$GGUF" "$f" "$T/$b.got" --threads ${nc%%:*} --lopt-chunk ${nc##*:} || bad="$bad $nc(exit)"
      cmp -s "$T/$b.ref" "$T/$b.got" || bad="$bad $nc"
    done
    check "$b: --threads/--lopt-chunk $* give the --threads 1 ids${bad:+ (differ: $bad)}" "[ -s '$T/$b.ref' ] && [ -z '$bad' ]"
  done
  bad=""
  for nc in 2:128 3:1024 8:16384 16:262144 2:0; do
    c=${nc##*:}
    ids "$GGUF" "$NOVELS/persuasion.txt" "$T/p.got" --threads ${nc%%:*} $([ "$c" != 0 ] && echo --lopt-chunk $c) || bad="$bad $nc(exit)"
    cmp -s "$T/persuasion.ref" "$T/p.got" || bad="$bad $nc"
  done
  check "persuasion: more chunk sizes (128 B .. 256 KiB, the default) give the same ids${bad:+ (differ: $bad)}" "[ -z '$bad' ]"
  check "persuasion: the default merged at anchors" "tail -n 1 '$T/stderr' | grep -qE ' [1-9][0-9]* anchors\)'"
  cat "$T"/{nospace,cjk,cjklines,emoji,crlf,digits,invalid}.txt > "$T/adv.txt"
  ids "$GGUF" "$T/adv.txt" "$T/adv.ref" --threads 1
  ids "$GGUF" "$T/adv.txt" "$T/adv.got" --threads 3 --lopt-chunk 64
  check "SmolLM2 on the adversarial texts: --threads 3 --lopt-chunk 64 gives the --threads 1 ids" \
    "[ -s '$T/adv.ref' ] && cmp -s '$T/adv.ref' '$T/adv.got'"
  # an independent tokenizer: Hugging Face tokenizers' ids of each novel (their hash and count, written by
  # tests/llm/make_austen_tok.py) equal the sequential ids, so LoPT's are right, not only self-consistent
  check "the six novels' ids equal Hugging Face tokenizers' (tests/fixtures/llm/austen_smollm2_tok.json)" "python3 - '$T' '$NOVELS' '$FIX/llm/austen_smollm2_tok.json' <<'PY'
import hashlib, json, sys
t, novels, fix = sys.argv[1:4]
ref = json.load(open(fix))['novels']
assert len(ref) == 6, ref.keys()
for name, r in ref.items():
    raw = open(novels + '/' + name, 'rb').read()
    assert hashlib.sha256(raw).hexdigest() == r['text_sha256'], name + ': not the text the reference was made from'
    ids = open(t + '/' + name[:-4] + '.ref').read().strip().split(',')
    h = hashlib.sha256(''.join(i + chr(10) for i in ids).encode()).hexdigest()
    assert (len(ids), h) == (r['ids'], r['ids_sha256']), (name, len(ids), r['ids'])
PY"
fi
# MiniLM (WordPiece, BertNormalizer) on the six novels, from tokenizer.json and from vocab.txt
MINILM="$ROOT/data/models/minilm"
if [ ! -r "$MINILM/tokenizer.json" ] || [ ! -r "$MINILM/vocab.txt" ] || [ ! -d "$NOVELS" ]; then
  skip "Austen novels with MiniLM" "data: no $MINILM/tokenizer.json, vocab.txt or $NOVELS (make data)"
else
  cat "$NOVELS"/*.txt > "$T/austen.txt"
  for tok in "$MINILM/tokenizer.json" "$MINILM/vocab.txt"; do
    ids "$tok" "$T/austen.txt" "$T/mini.ref" --threads 1
    bad=""
    for nc in 2:64 3:4096 8:0 16:1048576; do
      c=${nc##*:}
      ids "$tok" "$T/austen.txt" "$T/mini.got" --threads ${nc%%:*} $([ "$c" != 0 ] && echo --lopt-chunk $c) || bad="$bad $nc(exit)"
      cmp -s "$T/mini.ref" "$T/mini.got" || bad="$bad $nc"
    done
    check "MiniLM $(basename "$tok"), six novels: --threads 2..16 give the --threads 1 ids${bad:+ (differ: $bad)}" \
      "[ -s '$T/mini.ref' ] && [ -z '$bad' ] && tail -n 1 '$T/stderr' | grep -qE ' [1-9][0-9]* anchors\)$'"
  done
  check "MiniLM: tokenizer.json and vocab.txt give the same ids" "cmp -s '$T/mini.ref' '$T/mini.got'"
fi

# Gemma 3's vocabulary (SentencePiece BPE, GGUF) has "▁" after other characters: sequential, saying so
GEMMA="$ROOT/data/models/gemma-3-270m-q4_k_m.gguf"
if [ ! -r "$GEMMA" ] || [ ! -d "$NOVELS" ]; then
  skip "Emma with Gemma 3's tokenizer" "data: no $GEMMA or $NOVELS (make data)"
else
  ids "$GEMMA" "$NOVELS/emma.txt" "$T/gemma.got" --threads 2
  check "Gemma 3 (GGUF llama vocabulary with \"▁\" inside pieces): sequential, and the summary says why" \
    "[ -s '$T/gemma.got' ] && tail -n 1 '$T/stderr' | grep -q '1 chunk, 0 anchors; sequential: .*after another character'"
fi
done_testing
