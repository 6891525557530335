#!/usr/bin/env bash
# qscope rl grpo --out DIR / --resume DIR (issue 27, "killed or interrupted runs keep completed steps;
# --resume continues"): a run killed (SIGKILL) mid-way or stopped by Ctrl-C and resumed stores rl_step,
# rl_token and rl_seq rows identical to an uninterrupted run's (compared with SQL; times excepted); rows
# of steps after the checkpoint are recomputed; damaged states (exit 1) and conflicting options (exit 2)
# are refused with the database unchanged.
source "$(dirname "$0")/lib.sh"

$QS rl text --lines 6000 --seed 5 > "$T/train.txt"
$QS rl text --lines 200 --seed 6 > "$T/val.txt"
ok "a 1-layer byte-level model of the task's text" $QS train --text "$T/train.txt" --val-text "$T/val.txt" --layers 1 \
  --dim 32 --heads 2 --ctx 32 --batch 8 --steps 400 --eval-every 0 --no-store --out "$T/m0"
# an SR trainer (nvfp4: stochastic rounding of the gradients) and AIS weights: the recipe's call counter, AdamW's moments and lambda all carry state
G=(--model "$T/m0" --prompts 4 --group 4 --max-new 6 --steps 8 --seed 2 --trainer nvfp4 --correction ais_r --lr 1e-3)
RUN=/arith/nvfp4/nvfp4/ais/s2
ok "the uninterrupted run" $QS rl grpo "${G[@]}" --name ref --quiet
check "it learns after step 3 (rewards vary, the policy moves), so the resumed state matters" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT SUM(reward_std > 0) >= 1 AND MAX(kl_init) > 1e-3 FROM rl_step s JOIN rl_run r ON r.id=s.run_id WHERE r.name='ref$RUN' AND s.step > 3\")\" = 1 ]"
STEP="SELECT s.step, reward, reward_std, resp_len, entropy, kl_init, mismatch_k3, weight_mean, weight_zero, lambda, loss, grad_norm FROM rl_step s JOIN rl_run r ON r.id=s.run_id WHERE r.name"
TOK="SELECT t.step, seq, pos, token_id, lp_rollout, lp_train, advantage, reward, grp, entropy, mask FROM rl_token t JOIN rl_run r ON r.id=t.run_id WHERE r.name"
SEQ="SELECT s.step, seq, seq_id, group_id FROM rl_seq s JOIN rl_run r ON r.id=s.run_id WHERE r.name"
UF="SELECT u.step, layer, site, n, underflow FROM rl_underflow u JOIN rl_run r ON r.id=u.run_id WHERE r.name"
same() {   # same PREFIX: the run's rows equal the reference run's
  for q in "$STEP" "$TOK" "$SEQ" "$UF"; do
    [ "$(sqlite3 $QSCOPE_DB "$q='$1$RUN' ORDER BY 1,2,3" | sha256sum)" = "$(sqlite3 $QSCOPE_DB "$q='ref$RUN' ORDER BY 1,2,3" | sha256sum)" ] || return 1
  done
  [ "$(sqlite3 $QSCOPE_DB "$STEP='$1$RUN'" | wc -l)" = 8 ] && [ "$(sqlite3 $QSCOPE_DB "$UF='$1$RUN'" | wc -l)" -gt 0 ]
}
nsteps() { sqlite3 $QSCOPE_DB "SELECT COUNT(*) FROM rl_step s JOIN rl_run r ON r.id=s.run_id WHERE r.name='$1$RUN'" 2>/dev/null || echo 0; }
waitsteps() { for i in $(seq 300); do [ "$(nsteps $1)" -ge $2 ] && return; sleep 0.1; done; }

# killed: checkpoints every 3 steps, SIGKILL after step 4 or 5, so steps beyond the checkpoint are stored
QSCOPE_TEST_STEP_DELAY_MS=400 $QS rl grpo "${G[@]}" --name kill --out "$T/ck" --checkpoint-every 3 --quiet >/dev/null 2>&1 &
PID=$!
waitsteps kill 5
kill -KILL $PID; wait $PID 2>/dev/null
k=$(nsteps kill)
check "killed mid-run: steps beyond the checkpoint of step 3 are stored ($k)" "[ $k -ge 4 ] && [ $k -lt 8 ] && grep -q '\"step\": 3' $T/ck/grpo_state.json"
check "the checkpoint is a policy llm logits loads, with its moments and state" \
  "[ -f $T/ck/model.safetensors ] && [ -f $T/ck/optimizer.safetensors ] && [ -f $T/ck/grpo_state.json ]"
ok "--resume continues the killed run" $QS rl grpo --resume "$T/ck" --quiet
check "resumed after a kill: rl_step, rl_token and rl_seq rows identical to the uninterrupted run's" "same kill"
check "the final checkpoint is at step 8" "grep -q '\"step\": 8' $T/ck/grpo_state.json"
ok "resuming a finished run does nothing" $QS rl grpo --resume "$T/ck" --quiet
check "still identical" "same kill"

# Ctrl-C: exit 130 after the step in progress, a checkpoint there; resume with the options repeated
QSCOPE_TEST_STEP_DELAY_MS=400 $QS rl grpo "${G[@]}" --name int --out "$T/ci" --quiet >/dev/null 2>"$T/int.err" &
PID=$!
waitsteps int 2
kill -INT $PID
wait $PID; rc=$?
check "Ctrl-C: exit 130, told how to continue" "[ $rc = 130 ] && grep -q -- '--resume' $T/int.err"
check "Ctrl-C: the checkpoint is at the last stored step" \
  "grep -q \"\\\"step\\\": \$(sqlite3 $QSCOPE_DB \"SELECT COUNT(*) FROM rl_step s JOIN rl_run r ON r.id=s.run_id WHERE r.name='int$RUN'\"),\" $T/ci/grpo_state.json"
ok "--resume with the same options given again" $QS rl grpo "${G[@]}" --name int --resume "$T/ci" --quiet
check "resumed after Ctrl-C: identical to the uninterrupted run" "same int"

# refusals, the database unchanged
cp -r "$T/ci" "$T/bad"
H=$(dbdump)
refuses "a conflicting option" 2 "conflict with the run in" $QS rl grpo --resume "$T/ci" --lr 0.5
refuses "another seed" 2 "conflict with the run in" $QS rl grpo --resume "$T/ci" --seed 9
refuses "another model" 2 "is not the model of the run" $QS rl grpo --resume "$T/ci" --model "$T/ci"
refuses "--replace with --resume" 2 "no --replace" $QS rl grpo --resume "$T/ci" --replace
refuses "another --out" 2 "no other --out" $QS rl grpo --resume "$T/ci" --out "$T/x"
refuses "--resume with --sweep" 2 "no --resume" $QS rl grpo --sweep ais --resume "$T/ci"
echo '{"format": "qscope grpo_state", "version": 1, "step": 2' > "$T/bad/grpo_state.json"
refuses "a truncated state file" 1 "bad/grpo_state.json" $QS rl grpo --resume "$T/bad"
sed 's/"step": 8/"step": 99/' "$T/ci/grpo_state.json" > "$T/bad/grpo_state.json"
refuses "a state whose step is beyond its steps" 1 "bad/grpo_state.json: step 99" $QS rl grpo --resume "$T/bad"
sed 's/"sr_calls": "[0-9]*"/"sr_calls": 12/' "$T/ci/grpo_state.json" > "$T/bad/grpo_state.json"
refuses "a call counter that is no decimal string" 1 "bad/grpo_state.json: sr_calls" $QS rl grpo --resume "$T/bad"
rm "$T/bad/grpo_state.json"
refuses "no state file" 1 "bad/grpo_state.json" $QS rl grpo --resume "$T/bad"
refuses "--out into a directory of other files" 1 "not a checkpoint file" $QS rl grpo "${G[@]}" --name o --out "$T"
check "refusals left the database unchanged" "[ \"\$(dbdump)\" = \"$H\" ]"
ok "runs --rm removes the resumed run" $QS runs --rm "int$RUN"
refuses "a checkpoint whose run is no longer stored" 1 "not in the database" $QS rl grpo --resume "$T/ci"
done_testing
