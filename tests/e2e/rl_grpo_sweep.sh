#!/usr/bin/env bash
# `qscope rl grpo --sweep SPEC` (issue 27, item 5): a sweep of GRPO runs, serially or under mpirun with
# whole runs on the ranks, stored by rank 0 with the rows of the same runs alone (rl_run, rl_token,
# rl_seq, rl_step, rl_underflow bit for bit but for ids, creation times and wall times); the sweep's name in each
# run's metadata; runs stored whole are skipped on a re-run; a killed rank ends the job with one line
# and stores nothing more; bad specs are refused with nothing stored.  See docs/rl.md, "Sweeps".
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
cd "$T"
"$QS" rl text --lines 3000 --seed 5 > train.txt
"$QS" rl text --lines 200 --seed 6 > val.txt
ok "a 1-layer byte-level model of the task's text" "$QS" train --text train.txt --val-text val.txt --layers 1 \
  --dim 32 --heads 2 --ctx 32 --batch 8 --steps 40 --eval-every 0 --no-store --out "$T/m0"
G=(--model "$T/m0" --prompts 2 --group 4 --max-new 5 --steps 2)
SPEC='rollouts=default|w=mxfp4,a=mxfp4;corrections=none,tis;seeds=1,2'
# the stored rows of every run, by name (ids, created_at, sample_s and train_s left out)
ROWS='import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
pre = sys.argv[2] if len(sys.argv) > 2 else ""
q = lambda s: db.execute(s, (pre + "%",))
for r in q("SELECT name, label, source, metadata FROM rl_run WHERE name LIKE ? ORDER BY name"): print(r)
for r in q("SELECT name, t.step, seq, pos, token_id, lp_rollout, lp_train, advantage, reward, grp, entropy, mask FROM rl_token t JOIN rl_run r ON r.id = t.run_id WHERE name LIKE ? ORDER BY name, t.step, seq, pos"): print(r)
for r in q("SELECT name, s.step, seq, seq_id, group_id FROM rl_seq s JOIN rl_run r ON r.id = s.run_id WHERE name LIKE ? ORDER BY name, s.step, seq"): print(r)
for r in q("SELECT name, s.step, reward, reward_std, resp_len, entropy, kl_init, mismatch_k3, weight_mean, weight_zero, lambda, loss, grad_norm FROM rl_step s JOIN rl_run r ON r.id = s.run_id WHERE name LIKE ? ORDER BY name, s.step"): print(r)
for r in q("SELECT name, u.step, layer, site, n, underflow FROM rl_underflow u JOIN rl_run r ON r.id = u.run_id WHERE name LIKE ? ORDER BY name, u.step, layer, site"): print(r)'
rows() { $PY -c "$ROWS" "$@"; }

ok "serial sweep: 2 rollouts x 2 corrections x 2 seeds" "$QS" --db s1.db rl grpo "${G[@]}" --sweep "$SPEC"
cp "$T/out" s1.out
SW=$(sed -n 's/^rl grpo --sweep \(sweep-[0-9a-f]*\):.*runs stored as.*/\1/p' s1.out)
check "the sweep is named sweep-XXXXXXXX" "[ -n '$SW' ]"
check "8 runs stored under rl/SWEEP, 2 rl_step rows each, metadata sweep = the name" \
  "[ \"\$(sqlite3 s1.db \"SELECT count(*), sum((SELECT count(*) FROM rl_step WHERE run_id = id) = 2), sum(json_extract(metadata, '\$.sweep') = '$SW') FROM rl_run WHERE name LIKE 'rl/$SW/arith/%'\")\" = '8|8|8' ]"
check "the 4 mxfp4-rollout runs store rl_underflow rows (2 steps x 5 sites), the fp32 ones none" \
  "[ \"\$(sqlite3 s1.db \"SELECT count(*), count(DISTINCT run_id), sum(run_id IN (SELECT id FROM rl_run WHERE name GLOB '*mxfp4*')) FROM rl_underflow\")\" = '40|4|40' ]"
check "runs in order seed-major: the first is the default rollout, none, seed 1" \
  "sed -n 2p s1.out | grep -q '^rl/$SW/arith/fp32/fp32/none/s1 '"

# a run of the sweep equals the same run alone (but for its metadata's "sweep")
ok "the same run alone" "$QS" --db s1.db rl grpo "${G[@]}" --rollout w=mxfp4,a=mxfp4 --correction tis --seed 2 --name alone --quiet
check "the sweep's run: tokens, sequences and steps of the run alone bit for bit" \
  "rows s1.db 'rl/$SW/arith/w=mxfp4,a=mxfp4/fp32/tis/s2' | grep -v \"^('rl/$SW/arith/w=mxfp4,a=mxfp4/fp32/tis/s2', 'qscope\" | sed \"s|^('rl/$SW/|('|\" > a.rows && \
   rows s1.db alone/ | grep -v \"^('alone/arith/w=mxfp4,a=mxfp4/fp32/tis/s2', 'qscope\" | sed \"s|^('alone/|('|\" > b.rows && \
   [ \$(wc -l < a.rows) -gt 20 ] && cmp -s a.rows b.rows"

before=$(dbdump "$T/s1.db")
ok "the sweep again: every run stored whole, skipped" "$QS" --db s1.db rl grpo "${G[@]}" --sweep "$SPEC"
check "... 8 'stored, skipped' lines, 0 runs run, the database unchanged" \
  "[ \$(grep -c 'stored, skipped' '$T/out') = 8 ] && grep -q '0 runs run, 8 stored before' '$T/out' && [ \"\$(dbdump '$T/s1.db')\" = '$before' ]"
R1="rl/$SW/arith/fp32/fp32/tis/s2"
rows s1.db rl/ > s1a.rows
sqlite3 s1.db "DELETE FROM rl_step WHERE step = 1 AND run_id = (SELECT id FROM rl_run WHERE name = '$R1')"
sqlite3 s1.db "DELETE FROM rl_run WHERE name = 'rl/$SW/arith/fp32/fp32/none/s1'"
ok "the sweep again after a run was cut short and one removed" "$QS" --db s1.db rl grpo "${G[@]}" --sweep "$SPEC"
check "... those two run again, the others skipped, the rows the first sweep's" \
  "grep -q '2 runs run, 6 stored before' '$T/out' && rows s1.db rl/ | cmp -s - s1a.rows && \
   [ \"\$(sqlite3 s1.db \"SELECT count(*) FROM rl_step s JOIN rl_run r ON r.id = s.run_id WHERE r.name = '$R1'\")\" = 2 ]"
rows s1.db rl/ | grep -v "^('rl/[^']*', 'qscope rl grpo'" > s1.tok

refuses "an unknown preset" 2 "unknown preset 'nope'" "$QS" --db s1.db rl grpo "${G[@]}" --sweep nope
refuses "an unknown key" 2 "unknown key 'formats'" "$QS" --db s1.db rl grpo "${G[@]}" --sweep 'formats=a'
refuses "a duplicate item" 2 "'tis' twice in corrections" "$QS" --db s1.db rl grpo "${G[@]}" --sweep 'corrections=tis,tis'
refuses "a bad rollout spec, before any run" 2 "unknown format 'nofmt'" "$QS" --db s1.db rl grpo "${G[@]}" --sweep 'rollouts=w=nofmt'
refuses "an unknown trainer, before any run" 2 "trainer" "$QS" --db s1.db rl grpo "${G[@]}" --sweep 'trainers=fp7'
refuses "--sweep with --rollout" 2 "drop --rollout" "$QS" --db s1.db rl grpo "${G[@]}" --sweep ais --rollout w=mxfp4
refuses "--sweep with --seed (the spec sets the seeds)" 2 "drop .*--seed" "$QS" --db s1.db rl grpo "${G[@]}" --sweep ais --seed 4
check "the refusals stored nothing" "rows s1.db rl/ | grep -v \"^('rl/[^']*', 'qscope rl grpo'\" | cmp -s - s1.tok"

command -v mpirun >/dev/null 2>&1 || { skip "-np 2" "mpirun is not installed"; done_testing; }
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPI=(timeout 120 mpirun --oversubscribe)
asan_build && MPI+=(-x "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
[ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)

ok "-np 2 sweep" "${MPI[@]}" -np 2 "$QS" --db "$T/p2.db" rl grpo "${G[@]}" --sweep "$SPEC"
cp "$T/out" p2.out
check "-np 2: the rows of the serial sweep bit for bit (runs, tokens, sequences, steps)" \
  "rows s1.db rl/ > a.rows && rows p2.db rl/ > b.rows && [ \$(wc -l < a.rows) -gt 100 ] && cmp -s a.rows b.rows"
check "-np 2: runs r, r+2, ... on rank r, printed by rank 0 in run order" \
  "[ \"\$(grep -o 'on rank [01]' p2.out | tr -d '\n')\" = 'on rank 0on rank 1on rank 0on rank 1on rank 0on rank 1on rank 0on rank 1' ] && \
   [ \"\$(grep ' on rank ' p2.out | cut -d' ' -f1)\" = \"\$(grep ' on rank ' s1.out | cut -d' ' -f1)\" ]"
before=$(dbdump "$T/p2.db")
ok "-np 2 sweep again: nothing run" "${MPI[@]}" -np 2 "$QS" --db "$T/p2.db" rl grpo "${G[@]}" --sweep "$SPEC"
check "... 8 skipped, the database unchanged" "[ \$(grep -c 'stored, skipped' '$T/out') = 8 ] && [ \"\$(dbdump '$T/p2.db')\" = '$before' ]"

# a rank killed during a sweep: one line from qscope, nothing more stored
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
rank_pid() {
  local c i
  for i in $(seq 400); do
    for c in $(descendants "$1"); do
      tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$c"; return; }
    done
    sleep 0.05
  done
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
cp p2.db k.db
before=$(dbdump "$T/k.db")
timeout 60 "${MPI[@]:2}" -np 2 "$QS" --db "$T/k.db" --rank-timeout 3 rl grpo "${G[@]}" --steps 100000 \
  --sweep 'corrections=none,tis;seeds=1' >k.out 2>k.err &
job=$!
v=$(rank_pid $job 1)
for _ in $(seq 200); do [ -n "$v" ] && [ "$(cpu_ticks "$v")" -ge 30 ] && break; sleep 0.05; done
[ -n "$v" ] && kill -9 "$v"
wait $job; krc=$?
check "kill -9 of rank 1 in a sweep: non-zero (exit $krc), one line from qscope" \
  "[ -n '$v' ] && [ $krc -ne 0 ] && [ $krc -ne 124 ] && [ \$(grep -c '^qscope:' k.err) = 1 ] && grep -q '^qscope: the MPI job was stopped' k.err"
check "kill -9 of rank 1 in a sweep: nothing more stored" "[ \"\$(dbdump '$T/k.db')\" = '$before' ]"
done_testing
