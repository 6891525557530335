#!/usr/bin/env bash
# `qscope bench eval` (issue 28, speed): the reference and each configuration side by side with
# tokens/s, GFLOP/s, % of SGEMM timed on the model's own products in the same run, each
# configuration's time over the reference's, and (with a peer) llama-perplexity's rate; usage errors.
source "$(dirname "$0")/lib.sh"
TINY="$FIX/llm/tiny.gguf"
python3 - "$T/text.txt" <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(40)) + "\n")
PY
B=("$QS" bench eval --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 2 --reps 2)

ok "bench eval runs on the tiny model" "${B[@]}"
"${B[@]}" > "$T/out.txt" 2>&1
check "it names the SGEMM rate on the model's own products" "grep -q 'OpenBLAS SGEMM on the model.s products' '$T/out.txt'"
check "the reference-only run is compared with SGEMM (wall and CPU time)" "grep -q 'reference-only run.*% of SGEMM.*CPU time' '$T/out.txt'"
check "the default configurations are listed, each with its cost over the reference" \
  "grep -q '^w=mxfp4 ' '$T/out.txt' && grep -q '^a=mxfp4 ' '$T/out.txt' && grep -q '^kv=fp8_e4m3 ' '$T/out.txt' && grep -Eq '^a=int8.*kv=fp16 .*x$' '$T/out.txt'"
"${B[@]}" --config kv=fp16 > "$T/one.txt" 2>&1
check "--config replaces the default list" "grep -q '^kv=fp16 ' '$T/one.txt' && ! grep -q '^w=mxfp4 ' '$T/one.txt'"
printf '#!/bin/sh\necho "0.00.100.000 I perplexity: calculating perplexity over 2 chunks"\necho "0.00.600.000 I Final estimate: PPL = 1.0"\n' > "$T/peer.sh"
chmod +x "$T/peer.sh"
"${B[@]}" --config kv=fp16 --peer "$T/peer.sh" > "$T/peer.txt" 2>&1
check "a peer's evaluation rate is read from its log (128 tokens in 0.5 s) and compared" \
  "grep -q 'peer llama-perplexity.*256.0 tok/s evaluating.*reference / peer = ' '$T/peer.txt'"
refuses "--model is required" 2 'bench eval.*--model PATH is required' "$QS" bench eval --text "$T/text.txt"
refuses "an unknown option is refused" 2 "bench eval.*unknown option '--bogus'" "${B[@]}" --bogus 1
refuses "a bad --config is refused" 2 "bench eval.*unknown key 'q'" "${B[@]}" --config q=fp8
refuses "a missing text names the file" 1 'nonexistent' "$QS" bench eval --model "$TINY" --text "$T/nonexistent.txt"
done_testing
