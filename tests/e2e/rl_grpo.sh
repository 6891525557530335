#!/usr/bin/env bash
# qscope rl grpo (issue 27): GRPO on a tiny byte-level model trained here on the arith task's text; the
# run is stored as an rl_run with rl_step rows, `qscope ais` and `plot trajectory` work on it, rewards
# are in [0,1], the trainer's (and the FP32 rollout's) log-prob of a logged token equals `llm logits`
# of the same checkpoint to 1e-5, reruns are bit-identical, quantized rollouts disagree with the
# trainer, Ctrl-C keeps the completed steps, and bad options are refused with nothing stored.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
ok "rl text: the task's solved examples" $QS rl text --lines 6000 --seed 5
cp "$T/out" "$T/train.txt"
check "6000 lines A+B=C, all correct" \
  "[ \$(wc -l < $T/train.txt) = 6000 ] && awk -F'[+=]' '{ if (\$1 + \$2 != \$3 || \$1 < 1 || \$1 > 9 || \$2 < 1 || \$2 > 9) bad = 1 } END { exit bad }' $T/train.txt"
$QS rl text --lines 300 --seed 6 > "$T/val.txt"
ok "rl text --task add: 2-digit operands" $QS rl text --task add --lines 500
check "add: operands in 10..99, sums right" "awk -F'[+=]' '{ if (\$1 + \$2 != \$3 || \$1 < 10 || \$1 > 99 || \$2 < 10 || \$2 > 99) bad = 1 } END { exit bad || NR != 500 }' $T/out"
ok "a 1-layer byte-level model of the task's text" $QS train --text "$T/train.txt" --val-text "$T/val.txt" --layers 1 \
  --dim 32 --heads 2 --ctx 32 --batch 8 --steps 60 --eval-every 0 --no-store --out "$T/m0"
G=(--model "$T/m0" --prompts 4 --group 4 --max-new 6 --steps 3 --seed 3)
RUN=rl/grpo/arith/fp32/fp32/none/s3

ok "rl grpo: 3 steps, --out the policy" $QS rl grpo "${G[@]}" --out "$T/pol" --json
cp "$T/out" "$T/g1.json"
check "the JSON has 3 step records with rewards in [0,1]" \
  "$PY -c 'import json,sys; j=json.load(open(sys.argv[1])); s=j[\"step_records\"]; sys.exit(not (len(s)==3 and j[\"run\"]==\"$RUN\" and all(0<=r[\"reward\"]<=1 for r in s)))' $T/g1.json"
check "stored: tokens of steps 0-2, one rl_step row per step" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT COUNT(DISTINCT t.step) || ',' || (SELECT COUNT(*) FROM rl_step s JOIN rl_run r ON r.id=s.run_id WHERE r.name='$RUN') FROM rl_token t JOIN rl_run r ON r.id=t.run_id WHERE r.name='$RUN'\")\" = 3,3 ]"
check "rewards in [0,1], masks 1, advantages and entropies finite, log-probs <= 0" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT COUNT(*) FROM rl_token t JOIN rl_run r ON r.id=t.run_id WHERE r.name='$RUN' AND NOT (reward BETWEEN 0 AND 1 AND mask=1 AND advantage IS NOT NULL AND entropy >= 0 AND lp_rollout <= 0 AND lp_train <= 0)\")\" = 0 ]"
check "a sequence per prompt sample: 16 per step, group ids name the prompt" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT COUNT(*) FROM rl_seq s JOIN rl_run r ON r.id=s.run_id WHERE r.name='$RUN' AND s.step=1 AND s.group_id GLOB '1:[0-3]:[1-9]+[1-9]='\")\" = 16 ]"
ok "qscope ais works on the run" $QS ais "$RUN"
check "ais: one row per step" "[ \$(grep -cE '^ +[0-2] ' $T/out) -ge 3 ]"
ok "plot trajectory draws it" $QS plot trajectory -o "$T/traj.png"
ok "runs lists it" $QS runs 'rl/*'
check "runs: 3 steps" "grep -q 'rl/grpo/arith/fp32/fp32/none/s3' $T/out"

ok "runs --rm removes a run" $QS runs --rm "$RUN"
check "an FP32 rollout rounds nothing: no rl_underflow rows" \
  "[ \"\$(sqlite3 $QSCOPE_DB 'SELECT COUNT(*) FROM rl_underflow')\" = 0 ]"
check "with its rl_step and rl_seq rows" \
  "[ \"\$(sqlite3 $QSCOPE_DB 'SELECT (SELECT COUNT(*) FROM rl_step) + (SELECT COUNT(*) FROM rl_seq)')\" = 0 ]"
ok "the same run again" $QS rl grpo "${G[@]}" --quiet
ok "the same run again under another name" $QS rl grpo "${G[@]}" --name again --quiet
TOK="SELECT t.step, seq, pos, token_id, lp_rollout, lp_train, advantage, reward, grp, entropy FROM rl_token t JOIN rl_run r ON r.id=t.run_id WHERE r.name"
check "reruns are bit-identical" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"$TOK='$RUN' ORDER BY 1,2,3\" | sha256sum)\" = \"\$(sqlite3 $QSCOPE_DB \"$TOK='again/arith/fp32/fp32/none/s3' ORDER BY 1,2,3\" | sha256sum)\" ]"
ok "another seed" $QS rl grpo "${G[@]}" --seed 4 --steps 1 --quiet
check "another seed samples other tokens" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"$TOK='$RUN' AND t.step=0 ORDER BY 1,2,3\" | sha256sum)\" != \"\$(sqlite3 $QSCOPE_DB \"$TOK='rl/grpo/arith/fp32/fp32/none/s4' ORDER BY 1,2,3\" | sha256sum)\" ]"

# the trainer's log-prob of a logged token = llm logits of the checkpoint on the same sequence (fp32)
ok "one step of the written policy" $QS rl grpo --model "$T/pol" --prompts 2 --group 2 --max-new 6 --steps 1 --name lp --quiet
sqlite3 $QSCOPE_DB "SELECT s.group_id FROM rl_seq s JOIN rl_run r ON r.id=s.run_id WHERE r.name='lp/arith/fp32/fp32/none/s0' AND s.seq=0" > "$T/prompt.txt"
sqlite3 -separator ' ' $QSCOPE_DB "SELECT token_id, lp_train, lp_rollout FROM rl_token t JOIN rl_run r ON r.id=t.run_id WHERE r.name='lp/arith/fp32/fp32/none/s0' AND seq=0 ORDER BY pos" > "$T/lp.txt"
IDS=$($PY -c "
import sys
p = open('$T/prompt.txt').read().rstrip('\n').split(':', 2)[2]
ids = [10] + [ord(c) for c in p] + [int(l.split()[0]) for l in open('$T/lp.txt')]
print(','.join(map(str, ids)))")
ok "llm logits of the policy on prompt + response" $QS llm logits --model "$T/pol" --prompt-ids "$IDS" -o "$T/l.npy"
if $PY -c "import numpy" 2>/dev/null; then
  check "lp_train (and the FP32 rollout's lp) = log-softmax of llm logits, to 1e-5" "$PY -c '
import sys, numpy as np
ids = [int(x) for x in sys.argv[3].split(\",\")]
rows = [l.split() for l in open(sys.argv[2])]
l = np.load(sys.argv[1]).astype(np.float64).reshape(len(ids), -1)
plen = len(ids) - len(rows)
worst = 0
for k, (tok, lt, lr) in enumerate(rows):
    z = l[plen - 1 + k]
    lp = z[int(tok)] - (np.log(np.exp(z - z.max()).sum()) + z.max())
    worst = max(worst, abs(lp - float(lt)), abs(lp - float(lr)))
print(\"worst\", worst)
sys.exit(not worst < 1e-5)' $T/l.npy $T/lp.txt $IDS"
else
  skip "lp_train = log-softmax of llm logits" "python3-numpy not installed"
fi

ok "quantized rollouts, bf16 trainer, TIS" $QS rl grpo "${G[@]}" --steps 2 --rollout w=mxfp4,a=mxfp4 --trainer bf16 --correction tis --quiet
Q=rl/grpo/arith/w=mxfp4,a=mxfp4/bf16/tis/s3
check "the rollout and the trainer disagree (mean |delta| > 1e-4)" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT AVG(ABS(lp_train - lp_rollout)) > 1e-4 FROM rl_token t JOIN rl_run r ON r.id=t.run_id WHERE r.name='$Q'\")\" = 1 ]"
check "TIS weights recorded: mean weight in (0, 2]" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT MIN(weight_mean) > 0 AND MAX(weight_mean) <= 2 AND MIN(mismatch_k3) > 0 FROM rl_step s JOIN rl_run r ON r.id=s.run_id WHERE r.name='$Q'\")\" = 1 ]"
UF="SELECT COUNT(*) || ',' || COUNT(DISTINCT step) || ',' || COUNT(DISTINCT layer || site) || ',' || SUM(n > 0 AND underflow BETWEEN 0 AND 1) || ',' || SUM(layer = 1 AND site = 'head_in') FROM rl_underflow u JOIN rl_run r ON r.id=u.run_id WHERE r.name"
check "rl_underflow: 2 steps x 5 (layer, site)s (4 linear inputs, the head's), fractions in 0..1, n > 0" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"$UF='$Q'\")\" = 10,2,5,10,2 ]"
check "some activations of the mxfp4 rollout underflow" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT MAX(underflow) > 0 FROM rl_underflow u JOIN rl_run r ON r.id=u.run_id WHERE r.name='$Q'\")\" = 1 ]"
ok "a kv format adds the K/V rows' site" $QS rl grpo "${G[@]}" --steps 1 --rollout a=mxfp4,kv=fp8_e4m3 --name kvuf --quiet
check "rl_underflow: site kv of layer 0" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT COUNT(*) FROM rl_underflow u JOIN rl_run r ON r.id=u.run_id WHERE r.name GLOB 'kvuf/*' AND layer=0 AND site='kv' AND n > 0\")\" = 1 ]"
ok "--replace reruns the quantized run" $QS rl grpo "${G[@]}" --steps 2 --rollout w=mxfp4,a=mxfp4 --trainer bf16 --correction tis --replace --quiet
check "its rl_underflow rows replaced, not added" "[ \"\$(sqlite3 $QSCOPE_DB \"$UF='$Q'\")\" = 10,2,5,10,2 ]"
ok "qscope ais on the quantized run" $QS ais "$Q" --json
sqlite3 -separator ' ' $QSCOPE_DB "SELECT mismatch_k3, lambda FROM rl_step s JOIN rl_run r ON r.id=s.run_id WHERE r.name='$Q' ORDER BY step" > "$T/steps.txt"
check "ais's k3 and AIS-R lambda of each step equal the run's own (1e-9)" "$PY -c '
import json, sys
a = json.load(open(sys.argv[1]))[\"steps\"]
s = [list(map(float, l.split())) for l in open(sys.argv[2])]
sys.exit(not (len(a) == len(s) == 2 and all(abs(x[\"kl_k3\"] - k) <= 1e-9 * (1 + k) and abs(x[\"ais_lambda\"] - l) <= 1e-9 for x, (k, l) in zip(a, s))))' $T/out $T/steps.txt"
ok "the default rollout of a bf16 trainer is its forward precision" $QS rl grpo "${G[@]}" --steps 1 --trainer bf16 --json --no-store
check "rollout label" "grep -q '\"rollout\": \"bf16\"' $T/out"
ok "runs --rm the quantized runs" $QS runs --rm "$Q" "$(sqlite3 $QSCOPE_DB "SELECT name FROM rl_run WHERE name GLOB 'kvuf/*'")"
check "their rl_underflow rows go with them" "[ \"\$(sqlite3 $QSCOPE_DB 'SELECT COUNT(*) FROM rl_underflow')\" = 0 ]"

# Ctrl-C after a completed step: the run keeps its completed steps (tokens and rl_step rows agree)
$QS rl grpo "${G[@]}" --steps 100000 --name int --quiet > /dev/null 2>"$T/int.err" &
PID=$!
for i in $(seq 200); do
  n=$(sqlite3 $QSCOPE_DB "SELECT COUNT(*) FROM rl_step s JOIN rl_run r ON r.id=s.run_id WHERE r.name='int/arith/fp32/fp32/none/s3'" 2>/dev/null || echo 0)
  [ "${n:-0}" -ge 2 ] && break
  sleep 0.1
done
kill -INT $PID
wait $PID; rc=$?
check "Ctrl-C: exit 130" "[ $rc = 130 ]"
check "Ctrl-C: completed steps kept, tokens and step rows agree" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT COUNT(*) >= 2 AND COUNT(*) = (SELECT COUNT(DISTINCT step) FROM rl_token t JOIN rl_run r ON r.id=t.run_id WHERE r.name='int/arith/fp32/fp32/none/s3') FROM rl_step s JOIN rl_run r ON r.id=s.run_id WHERE r.name='int/arith/fp32/fp32/none/s3'\")\" = 1 ]"

# the default policy: pre-trained once into the cache, then reused
export QSCOPE_CACHE="$T/cache"
ok "no --model: the default arith policy is pre-trained" $QS rl grpo --steps 2 --name def
check "it said so and wrote the checkpoint" "grep -q 'pre-training the default arith policy' $T/err && ls $T/cache/policies/arith-*/config.json >/dev/null"
ok "a second run reuses it" $QS rl grpo --steps 1 --name def2
check "no pre-training the second time, one policy in the cache" \
  "! grep -q 'pre-training' $T/err && [ \$(ls -d $T/cache/policies/*/ | wc -l) = 1 ]"
check "the default policy's metadata names its pre-training" \
  "sqlite3 $QSCOPE_DB \"SELECT metadata FROM rl_run WHERE name='def2/arith/fp32/fp32/none/s0'\" | grep -q 'default_policy.*steps=300'"
# two first runs at once: both pre-train, one checkpoint wins the rename, nothing else is left behind
QSCOPE_CACHE="$T/race" $QS rl grpo --steps 1 --no-store --quiet > /dev/null 2>&1 & P1=$!
QSCOPE_CACHE="$T/race" $QS rl grpo --steps 1 --no-store --quiet > /dev/null 2>&1 & P2=$!
wait $P1; r1=$?; wait $P2; r2=$?
check "two concurrent first runs both succeed and leave one policy" "[ $r1 = 0 ] && [ $r2 = 0 ] && [ \"\$(ls $T/race/policies | wc -l)\" = 1 ]"
ok "a default run of 100 steps (32 x 8 samples)" $QS rl grpo --steps 100 --no-store --json
check "it raises the mean reward: last 30 steps >= first 30 + 0.04" \
  "$PY -c 'import json,sys; r=[s[\"reward\"] for s in json.load(open(sys.argv[1]))[\"step_records\"]]; a,b=sum(r[:30])/30,sum(r[-30:])/30; print(a,b); sys.exit(not b>=a+0.04)' $T/out"

H=$(dbdump)
refuses "unknown task" 2 "--task: unknown task 'sort'" $QS rl grpo "${G[@]}" --task sort
refuses "unknown correction" 2 "--correction: unknown method" $QS rl grpo "${G[@]}" --correction bogus
refuses "unknown rollout format" 2 "bogus" $QS rl grpo "${G[@]}" --rollout w=bogus
refuses "a rollout key that does not exist" 2 "--rollout: unknown key 'x'" $QS rl grpo "${G[@]}" --rollout x=mxfp4
refuses "unknown trainer recipe" 2 "--trainer" $QS rl grpo "${G[@]}" --trainer fp5
refuses "a group of one" 2 "--group" $QS rl grpo "${G[@]}" --group 1
refuses "a run of that name exists" 1 "exists" $QS rl grpo "${G[@]}"
refuses "a missing model" 1 "nope" $QS rl grpo "${G[@]}" --model "$T/nope" --name other
refuses "a context too short for prompt + --max-new" 1 "context" $QS rl grpo "${G[@]}" --max-new 40 --name ctx
check "refusals stored nothing" "[ \"\$(dbdump)\" = \"$H\" ]"
refuses "rl text: unknown task" 2 "unknown task" $QS rl text --task sort
refuses "no subcommand" 2 "choose a subcommand" $QS rl
done_testing
