#!/usr/bin/env bash
# `qscope bench rl --sample` end to end: the batched sampler's throughput on a given model and the
# small synthetic one, as JSON with every config; a missing model is refused in one line.
source "$(dirname "$0")/lib.sh"

TINY="$FIX/llm/tiny.gguf"
ok "bench rl --sample --quick on the tiny model" $QS bench rl --sample --quick --json --model "$TINY"
check "... two models, five configs each" "jq -e '.bench == \"rl-sample\" and (.models | length) == 2 and ([.models[].configs | length] == [5, 5])' $T/out >/dev/null"
check "... 64 sequences x 16 tokens generated per config" "jq -e '[.models[].configs[].tokens] | all(. == 1024)' $T/out >/dev/null"
check "... tokens/s and the SGEMM fraction positive" "jq -e '[.models[].configs[] | .tokens_per_s > 0 and .fraction_of_sgemm > 0] | all' $T/out >/dev/null"
check "... the square SGEMM per model, CPU seconds, load average, the fractions of the square SGEMM and per CPU second per config" \
  "jq -e '([.models[].square_sgemm_gflops > 0] | all) and ([.models[].configs[] | .cpu_seconds > 0 and .fraction_of_square_sgemm > 0 and .fraction_of_sgemm_cpu > 0 and has(\"load_average\")] | all)' $T/out >/dev/null"
check "... underflow: none in fp32, rare in the fp8 KV cache, frequent in mxfp4 activations" \
  "jq -e '[.models[].configs[] | select(.config == \"fp32\") | .max_underflow] | all(. == 0)' $T/out >/dev/null && jq -e '[.models[].configs[] | select(.config == \"kv=fp8_e4m3\") | .max_underflow] | all(. < 0.001)' $T/out >/dev/null && jq -e '[.models[].configs[] | select(.config == \"w=mxfp4,a=mxfp4\") | .max_underflow] | all(. > 0.1)' $T/out >/dev/null"
refuses "a missing model" 1 "no-such\.gguf" $QS bench rl --sample --quick --model "$T/no-such.gguf"
refuses "--model without --sample's kind" 2 "unexpected argument" $QS bench --model "$TINY"
done_testing
