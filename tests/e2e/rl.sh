#!/usr/bin/env bash
# RL logs: import (CSV, JSONL, bad logs with line numbers, nothing stored on error), AIS diagnostics
# against the numpy reference (every field of every step, two option sets), corrections token by
# token, on-policy invariants, stored trajectories and plots, runs listing/removal, and the GRPO
# simulation (determinism per seed, tool metrics = simulator metrics).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
R="$FIX/rl"
CHK="$PY $R/check_rl.py"
ALT="--C 3 --tau-s 0.02 --kappa 0.8 --beta 0.5 --lambda0 zero --amplification grad --ais-is seq --veto 0.3 --seq-band 0.25,4 --geo-band 0.9,1.1"

# ---- import ------------------------------------------------------------------------------------
ok "import a CSV log" $QS import-log "$R/small.csv"
check "CSV: counts reported" "grep -q '275 tokens, 60 sequences, 5 steps' $T/out"
check "the |delta| > 20 token is warned about with its line" "grep -q 'line 192' $T/err"
ok "import the same log as JSONL" $QS import-log "$R/small.jsonl" --run smallj --label 'same log, JSONL'
fails "a second run of the same name is refused" 1 $QS import-log "$R/small.csv"
check "the refusal suggests --run or --replace" "grep -q -- '--replace' $T/err"
ok "--replace replaces the run" $QS import-log "$R/small.csv" --replace --json
check "--json reports the import" "$PY -c 'import json,sys; d=json.load(open(\"$T/out\")); assert d[0][\"tokens\"]==275 and d[0][\"encoding\"]==\"csv\"'"
check "rl_token holds 275 rows per run, rl_seq 60" \
  "[ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM rl_token t JOIN rl_run r ON r.id=t.run_id WHERE r.name='small'\") = 275 ] && [ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM rl_seq s JOIN rl_run r ON r.id=s.run_id WHERE r.name='smallj'\") = 60 ]"
check "masked tokens and group ordinals are stored" \
  "[ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM rl_token t JOIN rl_run r ON r.id=t.run_id WHERE r.name='small' AND mask=0\") -gt 10 ] && [ \$(sqlite3 $QSCOPE_DB \"SELECT count(DISTINCT grp) FROM rl_token t JOIN rl_run r ON r.id=t.run_id WHERE r.name='small'\") = 15 ]"
ok "runs lists both" $QS runs
check "runs shows tokens and step range" "grep -q '^small .* 275 .* 5 0..4' $T/out && grep -q 'same log, JSONL' $T/out"
ok "runs --json carries the header metadata" bash -c "$QS runs smallj --json | grep -q '\"framework\": \"fixture\"'"

before=$(dbdump)
for f in "$R"/bad/*; do
  b=$(basename "$f")
  fails "bad log $b is refused" 1 $QS import-log "$f" --run "bad-$b"
  check "$b: one line naming the file and the line" "[ \$(wc -l < $T/err) = 1 ] && grep -q \"$b: line [0-9]\" $T/err"
done
check "nothing of the bad logs was stored" "[ \"\$(dbdump)\" = \"$before\" ]"
{ printf 'step,seq_id,tok_idx,lp_rollout,lp_train\n0,a,0,-1,-1\n'; head -c 100000000 /dev/zero | tr '\0' '7'; printf '\n'; } > "$T/huge.csv"
fails "a 100 MB line is refused" 1 $QS import-log "$T/huge.csv"
check "the huge line is named" "grep -q 'huge.csv: line 3: line longer than 32 MiB' $T/err"
rm -f "$T/huge.csv"
# an error after many good rows: nothing partial stored
$PY - "$T/late.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("step,seq_id,tok_idx,lp_rollout,lp_train\n")
    for i in range(300000):
        f.write(f"{i // 1000},s{i // 100},{i % 100},-0.5,-0.45\n")
    f.write("299,s2999,100,-0.5,0.7\n")
PY
fails "an error on the last of 300001 rows is refused" 1 $QS import-log "$T/late.csv"
check "the late error names line 300002" "grep -q 'late.csv: line 300002: lp_train = 0.7 is positive' $T/err"
check "still nothing stored" "[ \"\$(dbdump)\" = \"$before\" ]"

# ---- diagnostics against numpy --------------------------------------------------------------------
ok "ais --json" $QS ais small --json
cp "$T/out" "$T/a.json"
ok "every field of every step matches numpy (default options)" $CHK steps "$R/expected.json" default "$T/a.json"
ok "ais --json with the alternative options" $QS ais small --json $ALT
cp "$T/out" "$T/b.json"
ok "every field matches numpy (C=3, gradient Vamp, sequence IS branch, veto, lambda0 zero)" $CHK steps "$R/expected.json" alt "$T/b.json"
ok "the JSONL import gives the same diagnostics" bash -c "$QS ais smallj --json > $T/c.json && $CHK steps $R/expected.json default $T/c.json"
check "CSV and JSONL imports share one token hash" \
  "[ \"\$($PY -c 'import json; print(json.load(open(\"$T/a.json\"))[\"token_hash\"])')\" = \"\$($PY -c 'import json; print(json.load(open(\"$T/c.json\"))[\"token_hash\"])')\" ]"
check "the output says AIS-R is the project's reconstruction" "grep -q 'reconstruction' $T/a.json"
ok "ais --weights (default options)" $QS ais small --weights
cp "$T/out" "$T/w.csv"
ok "corrections token by token match numpy" $CHK weights "$R/expected_weights_default.csv" "$T/w.csv"
ok "ais --weights with the alternative options" bash -c "$QS ais small --weights $ALT > $T/wb.csv"
ok "alternative corrections token by token match numpy" $CHK weights "$R/expected_weights_alt.csv" "$T/wb.csv"
ok "--weights --step 3 gives that step only" bash -c "$QS ais small --weights --step 3 | tail -n +2 | cut -d, -f1 | sort -u | grep -qx 3"
ok "ais --csv" $QS ais small --csv
check "CSV has a header and 5 rows with every field" "[ \$(wc -l < $T/out) = 6 ] && head -1 $T/out | grep -q '^step,n_tok,n_seq,n_masked,mean_abs_dlogp' && head -1 $T/out | grep -q 'ais_lambda,'"
check "CSV says on stderr that ais_* is a reconstruction" "grep -q reconstruction $T/err"
ok "ais table" $QS ais small --method tis
check "table labels AIS-R as the project's reconstruction" "grep -q \"project's reconstruction\" $T/out"
ok "--lambda-fixed holds lambda; a narrow --mis-band zeroes tokens" bash -c "$QS ais small --json --no-store --lambda-fixed 0.3 --mis-band 0.99,1.01 > $T/lf.json"
ok "lambda is 0.3 on every step, the AIS mean weight is 0.7 + 0.3 mean(min(w, 2))" $PY - "$T/lf.json" <<'PY'
import json, sys
steps = json.load(open(sys.argv[1]))["steps"]
assert all(s["ais_lambda"] == 0.3 for s in steps)
assert any(s["mis_frac_zero"] > 0.2 for s in steps)
for s in steps:
    assert abs(s["ais_mean"] - (0.7 + 0.3 * s["tis_mean"])) < 1e-12, s
PY
fails "a band with LO > HI is a usage error" 2 $QS ais small --seq-band 2,1
fails "--step needs --weights" 2 $QS ais small --step 1
fails "unknown method" 2 $QS ais small --method bogus
fails "unknown run" 1 $QS ais nosuchrun
fails "bad option value" 2 $QS ais small --C 0.5

# on-policy invariants
ok "import an on-policy log" $QS import-log "$R/onpolicy.csv"
ok "ais on-policy --json" bash -c "$QS ais onpolicy --json > $T/on.json"
ok "on-policy: weights 1, KL 0, ESS 1, lambda 0, every correction weight 1 (geo aside: all kept)" $PY - "$T/on.json" <<'PY'
import json, sys
for s in json.load(open(sys.argv[1]))["steps"]:
    for k in ("kl_k1", "kl_k2", "kl_k3", "chi2_tok", "chi2_seq", "mean_abs_dlogp", "ais_S", "ais_vamp", "ais_lambda_raw", "ais_lambda"):
        assert s[k] == 0, (k, s[k])
    for k in ("ess_tok", "ess_seq", "w_min", "w_max", "ais_R", "ppl_ratio"):
        assert s[k] == 1, (k, s[k])
    for m in ("none", "tis", "seq_tis", "mis", "seq_mis", "geo", "ais"):
        assert s[m + "_min"] == 1 and s[m + "_max"] == 1 and s[m + "_frac_zero"] == 0, m
PY

# stored results and plots
check "rl_ais and six trajectory sets stored per analysed option set" \
  "[ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM result WHERE kind='rl_ais'\") -ge 3 ] && [ \$(sqlite3 $QSCOPE_DB \"SELECT count(DISTINCT json_extract(options,'\$.set')) FROM result WHERE kind='trajectory'\") = 6 ]"
check "stored rows carry the rollout format of the header and the options" \
  "[ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM result WHERE kind='rl_ais' AND format='fp8_e4m3' AND json_extract(options,'\$.tau_s')=0.05\") -ge 1 ]"
ok "plot trajectory draws the stored overview in the terminal" $QS plot trajectory -o - --width 80 --height 20
check "the overview names k3 KL and lambda" "grep -q 'k3 KL' $T/out && grep -q 'lambda' $T/out"
ok "plot trajectory as PNG" $QS plot trajectory -o "$T/t.png"
check "PNG written" "[ -s $T/t.png ]"

ok "ais --plot ais draws R, S, Vamp and lambda in the terminal" $QS ais small --plot ais -o - --width 90 --height 24
check "the terminal plot names the reconstruction and lambda" "grep -q 'project reconstruction' $T/out && grep -q 'lambda' $T/out"
ok "ais --plot ess writes a PNG" $QS ais small --plot ess -o "$T/ess.png"
check "the PNG records the run's token hash and the AIS options" "grep -aq 'small=4920899c81463b2e038c26245bbd1926' $T/ess.png && grep -aq 'tau_s' $T/ess.png"
fails "an unknown plot set" 1 $QS ais small --plot bogus -o -
fails "--plot without -o" 2 $QS ais small --plot ess
ok "runs --export writes the run as mmlog CSV" $QS runs --export smallj -o "$T/exp.csv"
ok "the export imports again" $QS import-log "$T/exp.csv" --run roundtrip
check "the round trip keeps every token exactly (same token hash)" \
  "[ \"\$($QS ais roundtrip --json --no-store | $PY -c 'import json,sys; print(json.load(sys.stdin)[\"token_hash\"])')\" = \"\$($PY -c 'import json; print(json.load(open(\"$T/c.json\"))[\"token_hash\"])')\" ]"
check "the export keeps the original sequence ids" "grep -q '^3,s3-2,g3-0,0,-30,' $T/exp.csv"
fails "export of an unknown run" 1 $QS runs --export nosuchrun
ok "runs --rm removes runs and their tokens" $QS runs --rm roundtrip
ok "runs --rm removes a run and its tokens" $QS runs --rm smallj
check "no tokens or sequences of it remain" "[ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM rl_seq\") = 78 ] && [ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM rl_token\") = 365 ] && no_match smallj $QS runs"
fails "runs --rm of an unknown run" 1 $QS runs --rm nosuchrun

# ---- simulation ------------------------------------------------------------------------------
SIM="sim grpo --formats mxfp4 --methods exact,none,tis,ais_r,ais_r_fixed --seeds 2 --steps 12 --batch 8 --T 6 --log-every 1"
ok "sim grpo (small)" $QS $SIM --json
cp "$T/out" "$T/s1.json"
ok "sim grpo again with one thread and no store" bash -c "$QS $SIM --json --no-store -j 1 > $T/s2.json"
check "the simulation is deterministic per seed (same summary, 1 or 2 threads)" "cmp -s $T/s1.json $T/s2.json"
ok "sim with another seed differs" bash -c "$QS $SIM --json --no-store --seed0 5 > $T/s3.json && ! cmp -s $T/s1.json $T/s3.json"
fails "the same run names are refused without --replace" 1 $QS $SIM
check "every run stored" "[ \$($QS runs 'sim/grpo/*' --json | $PY -c 'import json,sys; print(len(json.load(sys.stdin)[\"rl_runs\"]))') = 10 ]"
check "exact runs have lp_train == lp_rollout on every token" \
  "[ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM rl_token t JOIN rl_run r ON r.id=t.run_id WHERE r.name LIKE 'sim/grpo/exact/%' AND lp_train<>lp_rollout\") = 0 ]"
check "quantized runs do differ" \
  "[ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM rl_token t JOIN rl_run r ON r.id=t.run_id WHERE r.name LIKE 'sim/grpo/mxfp4/none/%' AND lp_train<>lp_rollout\") -gt 100 ]"
ok "ais of a simulated run" bash -c "$QS ais sim/grpo/mxfp4/ais_r/seed1 --json > $T/sa.json"
sqlite3 "$QSCOPE_DB" "SELECT data FROM result r WHERE kind='rl_sim' AND json_extract(data,'\$.run')='sim/grpo/mxfp4/ais_r/seed1'" > "$T/sim.json"
ok "the tool's metrics equal the simulator's own (1e-9)" $CHK sim "$T/sim.json" "$T/sa.json"
check "reward trajectory of mxfp4 stored with exact, none, tis, ais_r, ais_r_fixed" \
  "sqlite3 $QSCOPE_DB \"SELECT data FROM result WHERE kind='trajectory' AND format='mxfp4' AND json_extract(options,'\$.set') IS NULL\" | $PY -c 'import json,sys; d=json.loads(sys.stdin.read()); assert [s[\"name\"] for s in d[\"series\"]]==[\"exact\",\"none\",\"tis\",\"ais_r\",\"ais_r_fixed\"], d'"
ok "the same simulation under another name" $QS sim grpo --formats mxfp4 --methods none --seeds 1 --steps 12 --batch 8 --T 6 --log-every 0 --name again
check "keeps its own rl_sim row with the same rewards" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT json_extract(data,'\$.reward') FROM result WHERE kind='rl_sim' AND json_extract(data,'\$.run')='again/grpo/mxfp4/none/seed0'\")\" = \"\$(sqlite3 $QSCOPE_DB \"SELECT json_extract(data,'\$.reward') FROM result WHERE kind='rl_sim' AND json_extract(data,'\$.run')='sim/grpo/mxfp4/none/seed0'\")\" ] && [ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM result WHERE kind='rl_sim'\") = 11 ]"
fails "ais_r_fixed without ais_r is refused" 2 $QS sim grpo --methods ais_r_fixed --no-store
fails "unknown format" 2 $QS sim grpo --formats nosuch --no-store
fails "sim needs the grpo kind" 2 $QS sim ppo
done_testing
