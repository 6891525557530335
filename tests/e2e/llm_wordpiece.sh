#!/usr/bin/env bash
# WordPiece through the CLI (store/llm_tok_wordpiece.c, llm_pretok_bert.c, llm_tok_vocabtxt.c):
# `llm tokenize --tokenizer` on the committed trained WordPiece tokenizer.json and the same vocabulary as
# a BERT vocab.txt (ids from HF tokenizers, tests/llm/make_wordpiece_vectors.py), a bad vocab.txt
# refused naming the file and line, and the real all-MiniLM-L6-v2 tokenizer when `make data` has
# unpacked it (ids and byte offsets from HF tokenizers).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
WP="$FIX/llm/wp_tok.json"
DATA=${QS_DATA_DIR:-$ROOT/data}
MINI="$DATA/models/minilm"

# the trained model (BertNormalizer: lowercase, accents stripped; BertPreTokenizer): [CLS] and [SEP] are
# added tokens, "Hello" is he ##l ##l ##o, CJK characters are words of their own
ok "wp_tok.json: tokenizes" "$QS" llm tokenize --tokenizer "$WP" --threads 1 --prompt "[CLS] Hello, the CAT sat! [SEP]"
check "wp_tok.json: ids of HF tokenizers" '[ "$(cat "$T/out")" = "2,203,72,72,69,10,186,383,344,5,3" ]'
ok "wp_tok.json: accents and CJK" "$QS" llm tokenize --tokenizer "$WP" --threads 1 --prompt "naïve Café 中文"
check "wp_tok.json: naive cafe 中 文" '[ "$(cat "$T/out")" = "521,478,52,54" ]'

# the same vocabulary as a BERT vocab.txt (line = id): BertTokenizer's defaults are wp_tok.json's settings
$PY - "$WP" "$T/bert/vocab.txt" <<'PY'
import json, os, sys
v = json.load(open(sys.argv[1], encoding="utf-8"))["model"]["vocab"]
os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)
with open(sys.argv[2], "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t, _ in sorted(v.items(), key=lambda kv: kv[1])))
PY
ok "vocab.txt: tokenizes" "$QS" llm tokenize --tokenizer "$T/bert/vocab.txt" --threads 1 --prompt "[CLS] Hello, the CAT sat! [SEP]"
check "vocab.txt: the ids of tokenizer.json" '[ "$(cat "$T/out")" = "2,203,72,72,69,10,186,383,344,5,3" ]'
echo '{"do_lower_case": false}' > "$T/bert/tokenizer_config.json"
ok "vocab.txt + tokenizer_config.json do_lower_case false" "$QS" llm tokenize --tokenizer "$T/bert/vocab.txt" --threads 1 --prompt "CAT"
check "vocab.txt cased: CAT is no longer 'cat' (383)" '[ "$(cat "$T/out")" != "383" ]'
printf '[UNK]\nthe\n\ncat\n' > "$T/bert/vocab.txt"
refuses "vocab.txt with an empty line: the file and the line named" 1 "vocab.txt: line 3 is empty" \
  "$QS" llm tokenize --tokenizer "$T/bert/vocab.txt" --prompt "the cat"

# the real all-MiniLM-L6-v2 tokenizer
if [ -s "$MINI/tokenizer.json" ] && [ -s "$MINI/vocab.txt" ]; then
  P="Hello, World! Café naïve 中文 unaffable [MASK]"
  IDS=7592,1010,2088,999,7668,15743,1746,1861,14477,20961,3468,103
  for f in tokenizer.json vocab.txt; do
    ok "MiniLM $f: tokenizes" "$QS" llm tokenize --tokenizer "$MINI/$f" --threads 1 --prompt "$P"
    check "MiniLM $f: ids of HF tokenizers" '[ "$(cat "$T/out")" = "$IDS" ]'
  done
  ok "MiniLM: --json" "$QS" llm tokenize --tokenizer "$MINI/tokenizer.json" --threads 1 --json --prompt "$P"
  check "MiniLM: byte offsets of HF tokenizers (Café is bytes 14-19, [MASK] 44-50)" \
    '$PY -c "import json,sys; t=json.load(open(sys.argv[1]))[\"tokens\"]; sys.exit(0 if [x[\"bytes\"] for x in t] == [[0,5],[5,6],[7,12],[12,13],[14,19],[20,26],[27,30],[30,33],[34,37],[37,40],[40,43],[44,50]] else 1)" "$T/out"'
else
  skip "the real MiniLM tokenizer" "data: ${MINI#$ROOT/}/tokenizer.json and vocab.txt not unpacked (make data)"
fi
done_testing
