#!/usr/bin/env bash
# The tokenizer's defences (store/llm_tok.c, llm_pretok.c, llm_tok_json.c) through the CLI, on the
# micro Hugging Face model of the fuzz seed corpus (nothing downloaded): a bad pre-tokenizer is
# reported against tokenizer.json, not the text; a quadratic Split regex on 1 MB of text is refused
# with a readable message instead of spinning for minutes (timeout turns a spin into a failure).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

# tests/fuzz/corpus/llm_hf/micro-qwen2 = config.json, tokenizer.json, model.safetensors
mkhf() {   # mkhf DIR [PYTHON-EXPRESSION changing the tokenizer.json dict t]
  $PY - "$FIX/../fuzz/corpus/llm_hf/micro-qwen2" "$1" "${2:-None}" <<'PY'
import json, os, sys
parts = open(sys.argv[1], "rb").read().split(b"\n--8<--\n")
os.makedirs(sys.argv[2], exist_ok=True)
t = json.loads(parts[1])
exec(sys.argv[3])
parts[1] = json.dumps(t).encode()
for name, data in zip(["config.json", "tokenizer.json", "model.safetensors"], parts):
    open(os.path.join(sys.argv[2], name), "wb").write(data)
PY
}
mkhf "$T/good"
printf 'the quantize is naive\n' > "$T/short.txt"
ok "micro model: tokenizes" "$QS" llm tokenize --model "$T/good" --prompt "the quantize is"

# item 6: an invalid regex is the fault of tokenizer.json, found when it loads
mkhf "$T/badrx" 't["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(?i:unclosed"'
refuses "invalid pre-tokenizer regex: tokenizer.json named, not the text" 1 \
  "^qscope: [^ ]*badrx/tokenizer.json: pre-tokenizer pattern /\(\?i:unclosed/: missing closing parenthesis" \
  "$QS" llm eval --model "$T/badrx" --text "$T/short.txt" --ctx 8 --chunks 1
check "the text file is not blamed" '! grep -q short.txt "$T/err" && [ "$(wc -l < "$T/err")" = 1 ]'
refuses "same through --prompt (a prompt error: usage, exit 2)" 2 "badrx/tokenizer.json: pre-tokenizer pattern" \
  "$QS" llm tokenize --model "$T/badrx" --prompt "abc"

# item 5: a quadratic regex (the old code: ~30 s on 300 KB, minutes on 1 MB)
mkhf "$T/quad" 't["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "a(?=a*$)"'
head -c 1048576 /dev/zero | tr '\0' a > "$T/big.txt"
refuses "quadratic Split regex on 1 MB: refused within the timeout, naming the pattern, the text and where" 1 \
  "quad/tokenizer.json: pre-tokenizer regex /a\(\?=a\*\\$\)/ needs too much backtracking on [^ ]*big.txt \(byte offset [0-9]+\); refusing" \
  timeout 20 "$QS" llm eval --model "$T/quad" --text "$T/big.txt" --ctx 8 --chunks 1
done_testing
