#!/usr/bin/env bash
# `qscope bench tokenize`: sequential vs LoPT on a small generated text (JSON parsed: every LoPT run
# equal to the sequential ids, rates and speed-ups present), the peer's one-line absence, the peer
# itself when `tokenizers` is importable, the Austen default when `make data` has it, refusals.
source "$(dirname "$0")/lib.sh"

TOK="$FIX/llm/tok_bpe.json"
python3 - "$T/mix.txt" <<'EOF'
import random, sys
r = random.Random(29)
words = ["the", "quantization", "Elizabeth", "don't", "12345678901234", "naïve", "日本語の文章", "\U0001F468\u200D\U0001F469\u200D\U0001F467",
         "<|endoftext|>", "\r\n", "\n\n", "   ", "\t", "x=3.14;", "MXFP4"]
s = "".join(r.choice(words) + r.choice([" ", " ", "", ", ", ". "]) for _ in range(12000))
open(sys.argv[1] + ".ok", "wb").write(s.encode())   # valid UTF-8: the peer reads it as qscope does
open(sys.argv[1], "wb").write(s.encode() + b"\xff\xfe broken \xc0\xaf end\n")
EOF
SIZE=$(stat -c %s "$T/mix.txt")

ok "bench tokenize on a generated text, 1-3 threads, 256-byte chunks" \
  bash -c "$QS bench tokenize --text $T/mix.txt --tokenizer $TOK --threads 1-3 --reps 2 --lopt-chunk 256 --lopt-overlap 32 --json > $T/b.json"
check "JSON: sequential (without, with spans) then LoPT at 1, 2, 3 threads, each equal to the sequential ids, with rates and LoPT's statistics" \
  "python3 -c 'import json; d=json.load(open(\"$T/b.json\")); r=d[\"runs\"]; \
   assert [x[\"run\"] for x in r]==[\"sequential\",\"sequential+spans\",\"lopt\",\"lopt\",\"lopt\"] and [x[\"threads\"] for x in r]==[1,1,1,2,3], r; \
   assert d[\"bytes\"]==$SIZE and d[\"tokens\"]>1000 and d[\"chunk\"]==256 and d[\"overlap\"]==32 and d[\"reps\"]==2; \
   assert all(x[\"identical\"] is True and {\"chunks\",\"anchors\",\"regrown\",\"fallback\"}<=set(x[\"stats\"]) for x in r[2:]); \
   assert r[3][\"stats\"][\"chunks\"]>1 and not r[3][\"stats\"][\"fallback\"], r[3]; \
   assert all(x[\"mb_per_s_best\"]>0 and x[\"tokens_per_s_best\"]>0 and x[\"best_s\"]<=x[\"median_s\"] and x[\"speedup_best\"]>0 and x[\"cpu_over_sequential\"]>0 for x in r); \
   assert r[0][\"speedup_best\"]==1.0 and len(d[\"ids_hash\"])==16 and d[\"machine\"][\"cores\"]>=1; \
   m=d[\"model\"]; assert m is None if d[\"machine\"][\"cores\"]<2 else (m[\"from_threads\"]==2 and 0<=m[\"serial_fraction\"]<=1 and \
     m[\"work_over_sequential\"]>0 and m[\"fitted\"] in (True, False) and (m[\"speedup\"] is None if not m[\"fitted\"] else sorted(m[\"speedup\"],key=int)==[str(i) for i in range(1,17)] and m[\"speedup\"][\"1\"]==1)), m'"
ok "text output" bash -c "$QS bench tokenize --text $T/mix.txt --tokenizer $TOK --threads 2 --reps 1 > $T/b.txt"
check "text: a header, the sequential row, the LoPT row, the peer not asked" \
  "grep -q '^RUN .*THREADS' $T/b.txt && grep -qE '^sequential +1 ' $T/b.txt && grep -qE '^LoPT +2 .*equal' $T/b.txt && \
   grep -q 'peer tokenizers: not asked' $T/b.txt"
ok "a missing peer is one line, and the bench goes on" \
  bash -c "QS_TOKENIZERS_PEER=$T/nope.py $QS bench tokenize --text $T/mix.txt --tokenizer $TOK --threads 2 --reps 1 --peer tokenizers > $T/np.txt"
check "the line names the missing script" "grep -q '^peer tokenizers: .*nope.py not found' $T/np.txt && grep -qE '^LoPT +2 ' $T/np.txt"

export QS_TOKENIZERS_PEER="$ROOT/tests/bench/tokenizers_peer.py"
mkdir -p "$T/fake" && echo 'raise ImportError("no", name="tokenizers")' > "$T/fake/tokenizers.py"
ok "a peer whose tokenizers cannot be imported is one line, and the bench goes on" \
  bash -c "PYTHONPATH=$T/fake $QS bench tokenize --text $T/mix.txt --tokenizer $TOK --threads 2 --reps 1 --peer tokenizers > $T/ni.txt"
check "the line says what to install" "grep -q '^peer tokenizers: tokenizers is not importable (pip install' $T/ni.txt && grep -qE '^LoPT +2 ' $T/ni.txt"
if PYTHONPATH="${PYTHONPATH:-}:$ROOT/build/pyref" python3 -c 'import tokenizers' 2>/dev/null; then
  ok "--peer tokenizers on the same text and tokenizer.json" \
    bash -c "$QS bench tokenize --text $T/mix.txt.ok --tokenizer $TOK --threads 1 --reps 1 --peer tokenizers --json > $T/p.json"
  check "peer: encode, encode_batch at 1 and default threads; same ids as qscope's sequential tokenizer" \
    "python3 -c 'import json; p=json.load(open(\"$T/p.json\"))[\"peer\"]; assert p[\"same_ids\"] is True, p; \
     assert p[\"single\"][\"threads\"]==1 and p[\"batch_1\"][\"threads\"]==1 and p[\"batch\"][\"mb_per_s_best\"]>0; \
     assert p[\"single\"][\"sequential_over_peer_best\"]>0 and p[\"single\"][\"sequential_over_peer_cpu\"]>0 and p[\"version\"]'"
  check "peer: the invalid UTF-8 of the other text gives other ids, and the bench says so" \
    "$QS bench tokenize --text $T/mix.txt --tokenizer $TOK --threads 1 --reps 1 --peer tokenizers > $T/pd.txt && grep -q 'IDS DIFFER' $T/pd.txt && grep -q 'its ids differ from qscope' $T/pd.txt"
else   # tokenizers is a PyPI wheel, not a Debian package: `make test` machines may lack it
  echo "# tokenizers not importable (pip install --no-deps --target build/pyref tokenizers): its own run is not tested"
fi

if [ -r "$ROOT/data/models/SmolLM2-135M-Instruct.Q4_1.gguf" ] && [ -r "$ROOT/data/text/persuasion.txt" ]; then
  ok "the default: Austen's six novels with SmolLM2's tokenizer" \
    bash -c "cd $ROOT && $QS bench tokenize --quick --threads 2 --reps 1 --json > $T/a.json"
  check "4 MB of Austen, the LoPT run equal" \
    "python3 -c 'import json; d=json.load(open(\"$T/a.json\")); assert d[\"bytes\"]>4000000 and d[\"tokens\"]>900000, d; \
     assert d[\"runs\"][2][\"identical\"] is True'"
else
  skip "the default text" "data: no SmolLM2 GGUF or Austen novels (make data)"
  skip "4 MB of Austen" "data: absent"
fi

refuses "--threads 0" 2 "--threads: '0' is not a list of thread counts" $QS bench tokenize --text "$T/mix.txt" --tokenizer "$TOK" --threads 0
refuses "--threads with junk" 2 "--threads: '1,x' is not a list" $QS bench tokenize --text "$T/mix.txt" --tokenizer "$TOK" --threads 1,x
refuses "--threads with a backwards range" 2 "--threads: '3-1'" $QS bench tokenize --text "$T/mix.txt" --tokenizer "$TOK" --threads 3-1
refuses "--threads over 256" 2 "--threads: '300'" $QS bench tokenize --text "$T/mix.txt" --tokenizer "$TOK" --threads 300
refuses "--reps 0" 2 "--reps" $QS bench tokenize --text "$T/mix.txt" --tokenizer "$TOK" --reps 0
refuses "--lopt-chunk 0" 2 "--lopt-chunk: '0' is not a byte count" $QS bench tokenize --text "$T/mix.txt" --tokenizer "$TOK" --lopt-chunk 0
refuses "--lopt-overlap with junk" 2 "--lopt-overlap: 'many'" $QS bench tokenize --text "$T/mix.txt" --tokenizer "$TOK" --lopt-overlap many
refuses "an unknown peer" 2 "--peer: 'sglang' is not a known peer" $QS bench tokenize --text "$T/mix.txt" --tokenizer "$TOK" --peer sglang
refuses "--model with --tokenizer" 2 "exclude each other" $QS bench tokenize --text "$T/mix.txt" --tokenizer "$TOK" --model "$FIX/llm/tiny.gguf"
refuses "an unknown option" 2 "unknown option '--frobnicate'" $QS bench tokenize --frobnicate 1
refuses "an option without its value" 2 "unexpected argument '--text'" $QS bench tokenize --text
refuses "a missing text names the file" 1 "$T/none.txt: cannot read" $QS bench tokenize --text "$T/none.txt" --tokenizer "$TOK"
refuses "a missing tokenizer names the file" 1 "$T/none.json" $QS bench tokenize --text "$T/mix.txt" --tokenizer "$T/none.json"
done_testing
