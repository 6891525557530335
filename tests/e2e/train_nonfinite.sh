#!/usr/bin/env bash
# qscope train whose loss or gradient turns NaN/Inf (issue 26, "Bad input and faults"): the run stops
# with exit 1 and one line naming the step and the first site that produced a non-finite value (the
# step re-run with a check after every GEMM, docs/train.md "Non-finite values").
source "$(dirname "$0")/lib.sh"

P="The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun. "
for i in $(seq 100); do printf '%s' "$P"; done > "$T/train.txt"
for i in $(seq 10); do printf '%s' "$P"; done > "$T/val.txt"
TR=(--text "$T/train.txt" --val-text "$T/val.txt" --layers 2 --dim 32 --heads 2 --ctx 16 --batch 4 --val-seqs 2
    --seed 1 --warmup 0)

# lr 10 without clipping makes the attention values exceed E4M3's range within two steps; unscaled,
# non-saturating E4M3 forward inputs turn them into NaN at layer 0's output projection
refuses "--lr 10 under unscaled fp8 forward inputs stops, naming the first site" 1 \
  "^qscope: step 2: the loss is not finite: non-finite values first in layer 0 fwd wo GEMM: its fwd.x operand after quantization" \
  $QS train "${TR[@]}" --steps 20 --lr 10 --clip 0 --op fwd.x=fp8_e4m3
check "one line on stderr" "[ \$(wc -l < $T/err) -eq 1 ]"

# the same on the weight-gradient input only: the forward pass and the loss stay finite, the gradient
# does not; the site is in the backward pass, at layer 1's down projection (its input X, the SwiGLU
# output, is the first operand out of range, the head's being the final norm's output)
refuses "--lr 10 under unscaled fp8 wgrad.x stops at a backward site" 1 \
  "^qscope: step 2: the gradient is not finite: non-finite values first in layer 1 bwd wgrad w_down GEMM: its wgrad.x operand after quantization" \
  $QS train "${TR[@]}" --steps 20 --lr 10 --clip 0 --op wgrad.x=fp8_e4m3
ok "the same run under saturating fp8 trains on" $QS train "${TR[@]}" --steps 3 --lr 10 --clip 0 --op wgrad.x=fp8_e4m3:sat

done_testing
