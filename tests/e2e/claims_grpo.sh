#!/usr/bin/env bash
# `qscope claims` for the RL claims on a transformer: --quick gives each a verdict (a tiny in-memory
# run), the full run on a database without the sweeps says "not measured" and names the sweep to run,
# and a stored sweep is read (runs inserted by SQL, the arithmetic is tests/unit/test_claims_grpo.c),
# rl_underflow rows included.
source "$(dirname "$0")/lib.sh"

for id in hif4.rl-mismatch rl.underflow-source resq.rl-gap ais.llm-c2 ais.llm-c4; do
  check "claims --quick --only $id gives a verdict" \
    "$QS claims --quick --only $id --json | python3 -c 'import json,sys; c=json.load(sys.stdin)[\"claims\"]; \
     assert len(c)==1 and c[0][\"id\"]==\"$id\" and c[0][\"verdict\"] in (\"reproduced\",\"differs\",\"inconclusive\") and c[0][\"measured\"]; \
     assert \"$id\"==\"rl.underflow-source\" or \"QUICK\" in c[0][\"detail\"]'"
done
ok "claims: the RL claims without their sweeps" bash -c "$QS claims --only 'ais.llm-*' -v > $T/none.txt"
check "no stored sweep: not measured, with the command that runs it" \
  "grep -q 'not measured' $T/none.txt && grep -q 'qscope rl grpo --sweep ais' $T/none.txt"

# a stored sweep 'hif4-rl' of 3 seeds, 4 steps each (K = 1: the last step's reward is the final one)
python3 - "$QSCOPE_DB" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
cfg = [("bf16", "bf16", 0.5), ("hif4", "hif4", 0.4), ("w=hif4,a=hif4", "bf16", 0.3),
       ("mxfp4", "mxfp4", 0.4), ("w=mxfp4,a=mxfp4", "bf16", 0.3)]
i = 0
for seed in (1, 2, 3):
    for roll, tr, r in cfg:
        i += 1
        m = dict(sweep="hif4-rl", rollout_format=roll, trainer=tr, correction="none", seed=seed, steps=4)
        db.execute("INSERT INTO rl_run(id, name, metadata) VALUES(?,?,?)", (i, "run%d" % i, json.dumps(m)))
        for s in range(4):
            db.execute("INSERT INTO rl_step(run_id, step, reward) VALUES(?,?,?)", (i, s, r + 0.01 * seed if s == 3 else 0))
db.commit()
PY
check "a stored sweep is read: roll - full = -0.1 for both formats, supported" \
  "$QS claims --only hif4.rl-mismatch --json | python3 -c 'import json,sys; c=json.load(sys.stdin)[\"claims\"][0]; \
   assert c[\"verdict\"]==\"reproduced\" and abs(c[\"value\"]+0.1)<1e-9, c'"
ok "the underflow claim without rl_underflow rows" $QS claims --only rl.underflow-source --json
check "not measured, names the sweep" "grep -q 'not measured' $T/out && grep -q 'rl grpo --sweep hif4-rl' $T/out"
sqlite3 "$QSCOPE_DB" "INSERT INTO rl_underflow(run_id, step, layer, site, n, underflow) SELECT id, 0, 1, 'ffn_down_in', 50, 0.3 FROM rl_run WHERE metadata LIKE '%w=hif4,a=hif4%'; INSERT INTO rl_underflow(run_id, step, layer, site, n, underflow) SELECT id, 0, 0, 'attn_in', 50, 0.01 FROM rl_run WHERE metadata LIKE '%w=hif4,a=hif4%'"
check "stored rl_underflow rows are read: hif4 30 % at layer 1 ffn_down_in, inconclusive" \
  "$QS claims --only rl.underflow-source --json | python3 -c 'import json,sys; c=json.load(sys.stdin)[\"claims\"][0]; \
   assert c[\"verdict\"]==\"inconclusive\" and c[\"measured\"]==\"hif4 30.00 % at L1 ffn_down_in\" and abs(c[\"value\"]-0.3)<1e-12, c'"
done_testing
