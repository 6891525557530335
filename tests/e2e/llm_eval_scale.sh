#!/usr/bin/env bash
# A per-format scale= inside `llm eval --config` (and `llm sensitivity --format`, `llm score`'s
# --*-format) is honoured or refused, never only named in the label
# (issue 28): weights take tensor, row and col; activations and the KV cache (rounded a token at a
# time) only row and no gran=tensor; scale=none is refused (--unscaled-casts says it for every site).
source "$(dirname "$0")/lib.sh"
TINY="$FIX/llm/tiny.gguf"
jq_() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }
python3 - "$T/text.txt" <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(40)) + "\n")
PY
E=("$QS" llm eval --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 2 --json)

# --- refusals: one line naming the item, exit 2, nothing stored
before=$(dbdump)
refuses "kv=fp16:scale=tensor is refused" 2 'kv=fp16:scale=tensor: scale=tensor is not supported for the KV cache' \
  "${E[@]}" --config kv=fp16:scale=tensor
refuses "a=fp8_e4m3:scale=col is refused" 2 'a=fp8_e4m3:scale=col: scale=col is not supported for activations' \
  "${E[@]}" --config a=fp8_e4m3:scale=col
refuses "scale=none is refused" 2 'w=fp8_e4m3:scale=none: scale=none is not supported here' \
  "${E[@]}" --config w=fp8_e4m3:scale=none
refuses "a=int8:gran=tensor is refused (activations are rounded per token)" 2 \
  'a=int8:gran=tensor: gran=tensor is not supported for activations' "${E[@]}" --config a=int8:gran=tensor
refuses "llm sensitivity --format fp8_e4m3:scale=tensor is refused (it reaches the activation sites)" 2 \
  '--format fp8_e4m3:scale=tensor: scale=tensor is not supported for activations and the KV cache' \
  "$QS" llm sensitivity --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 1 --format fp8_e4m3:scale=tensor
refuses "llm score --kv-format fp16:scale=tensor is refused" 2 \
  '--kv-format fp16:scale=tensor: scale=tensor is not supported for the KV cache' \
  "$QS" llm score --model "$TINY" --kv-format fp16:scale=tensor --tokens 4 --seqs 1 --prompts 1 --seed 5 --name s
check "database unchanged by the refusals" '[ "$(dbdump)" = "$before" ]'

# --- weights: scale=tensor is one scale per matrix, not the default one per output row
ok "w=fp8_e4m3 with the default, scale=row and scale=tensor" \
  "${E[@]}" --config w=fp8_e4m3 --config w=fp8_e4m3:scale=row --config w=fp8_e4m3:scale=tensor
cp "$T/out" "$T/w.json"
check "labels say what was done" \
  '[ "$(jq_ "$T/w.json" "\",\".join(c[\"label\"] for c in d[\"configs\"])")" = "w=fp8_e4m3,w=fp8_e4m3:scale=row,w=fp8_e4m3:scale=tensor" ]'
check "scale=row is the default per-row scaling: same KL" \
  '[ "$(jq_ "$T/w.json" "d[\"configs\"][0][\"kl_mean\"] == d[\"configs\"][1][\"kl_mean\"]")" = True ]'
check "scale=tensor differs from the per-row default" \
  '[ "$(jq_ "$T/w.json" "d[\"configs\"][0][\"kl_mean\"] != d[\"configs\"][2][\"kl_mean\"]")" = True ]'

ok "llm sensitivity --sites w takes scale=tensor (weights only)" \
  "$QS" llm sensitivity --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 1 --sites w --format fp8_e4m3:scale=tensor

# --- the KV cache: scale=row scales per token even under --unscaled-casts
ok "kv=fp8_e4m3 scaled (default)" "${E[@]}" --config kv=fp8_e4m3
cp "$T/out" "$T/kvs.json"
ok "kv=fp8_e4m3 and kv=fp8_e4m3:scale=row under --unscaled-casts" \
  "${E[@]}" --unscaled-casts --config kv=fp8_e4m3 --config kv=fp8_e4m3:scale=row
cp "$T/out" "$T/kvu.json"
check "unscaled fp8 KV differs from the scaled default" \
  '[ "$(jq_ "$T/kvu.json" "d[\"configs\"][0][\"kl_mean\"] != json.load(open(\"$T/kvs.json\"))[\"configs\"][0][\"kl_mean\"]")" = True ]'
check "kv=...:scale=row under --unscaled-casts is the per-token scaling" \
  '[ "$(jq_ "$T/kvu.json" "d[\"configs\"][1][\"kl_mean\"] == json.load(open(\"$T/kvs.json\"))[\"configs\"][0][\"kl_mean\"]")" = True ]'
done_testing
