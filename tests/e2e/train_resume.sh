#!/usr/bin/env bash
# qscope train --checkpoint-every / --resume (issue 26, "Bad input and faults"): a 20-step run killed
# after its step-10 checkpoint and resumed gives the uninterrupted run's losses and final weights bit
# for bit (FP32, nvfp4 with stochastic rounding, whose call counter must resume too, and a llama GGUF
# whose adjacent-pair RoPE rows the checkpoint stores in rotate_half order); a kill at
# each point of a checkpoint's write (QSCOPE_TEST_CKPT_KILL) and at random moments (kill -9) leaves a
# complete checkpoint that llm eval loads and --resume finishes, and so does Ctrl-C (the checkpoint of
# the step it stopped after); resume refusals; bad input exits 2
# with one line and creates no --out directory.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
P="The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun. \
A small model learns to spell the words of this little story, one byte at a time. "
for i in $(seq 200); do printf '%s' "$P"; done > "$T/train.txt"
for i in $(seq 20); do printf '%s' "$P"; done > "$T/val.txt"
RC=(--text "$T/train.txt" --val-text "$T/val.txt" --layers 1 --dim 32 --heads 2 --ctx 16 --batch 4 --steps 20
    --lr 3e-3 --warmup 3 --eval-every 5 --val-seqs 4 --seed 7 --checkpoint-every 5 --json)
SAME='import json,sys
f=lambda p,lo: [(r["step"], r["train_loss"], r.get("val_loss"), r["grad_norm"], r["lr"]) for r in json.load(open(p))["steps"] if r["step"] > lo]
a, b = f(sys.argv[1], int(sys.argv[3])), f(sys.argv[2], 0)
print(len(a), len(b)); sys.exit(not (len(b) > 0 and a == b))'
step_of() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$1/trainer_state.json" 2>/dev/null; }
same_files() { cmp -s "$1/model.safetensors" "$2/model.safetensors" && cmp -s "$1/optimizer.safetensors" "$2/optimizer.safetensors"; }
killed() {   # killed DESC CMD... : passes when CMD dies of SIGKILL (exit 137)
  _n=$((_n + 1))
  { "${@:2}" >"$T/out" 2>"$T/err"; } 2>/dev/null; local rc=$?
  if [ "$rc" -eq 137 ]; then echo "ok $_n - $1"; else echo "not ok $_n - $1 (exit $rc, wanted 137)"; sed 's/^/#   /' "$T/err" | head -5; fi
}

# --- the uninterrupted run, and one killed before its step-15 checkpoint is swapped in -------------
ok "a 20-step run with a checkpoint every 5 steps" $QS train "${RC[@]}" --out "$T/full"
cp "$T/out" "$T/full.json"
check "the checkpoint: model, tokenizer, optimizer moments and trainer state" \
  "for f in config.json model.safetensors tokenizer.json optimizer.safetensors trainer_state.json; do [ -s $T/full/\$f ] || exit 1; done"
check "trainer_state.json: step 20, AdamW's t 20, the options and the data hash" \
  "$PY -c 'import json,sys; s=json.load(open(sys.argv[1])); j=json.load(open(sys.argv[2])); sys.exit(not (s[\"step\"]==20 and s[\"adam_t\"]==20 and s[\"options\"][\"lr\"]==0.003 and s[\"options\"][\"seed\"]==\"7\" and s[\"data\"][\"hash\"]==j[\"data_hash\"] and \"run_name\" in s))' $T/full/trainer_state.json $T/full.json"
killed "killed before the step-15 checkpoint is swapped in" env QSCOPE_TEST_CKPT_KILL=swap@3 $QS train "${RC[@]}" --out "$T/part"
check "the checkpoint left is the one of step 10" "[ \"\$(step_of $T/part)\" = 10 ]"
ok "llm eval loads it" $QS llm eval --model "$T/part" --text "$T/val.txt" --ctx 16 --chunks 2 --json
check "the kill left the unfinished part.tmp-XXXXXX" "ls -d $T/part.tmp-?????? >/dev/null"
ok "--resume finishes the run" $QS train --resume "$T/part" --json
cp "$T/out" "$T/res.json"
check "the next checkpoint removed the stale part.tmp-XXXXXX" "! ls -d $T/part.* 2>/dev/null"
check "resumed: steps 11..20 have the uninterrupted run's losses, norms and lr, bit for bit" "$PY -c '$SAME' $T/full.json $T/res.json 10"
check "resumed: final weights and moments equal the uninterrupted run's, byte for byte" "same_files $T/full $T/part"
check "resumed: the JSON says where it resumed and keeps the initial validation loss" \
  "$PY -c 'import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); sys.exit(not (b[\"resumed_from\"]==10 and b[\"initial_val_loss\"]==a[\"initial_val_loss\"] and b[\"steps\"][0][\"step\"]==11))' $T/full.json $T/res.json"

# --- stochastic rounding: the recipe's call counter resumes too -----------------------------------
NV=(--recipe nvfp4 --op fwd.x=mxfp4:round=sr)
ok "nvfp4 + SR, uninterrupted" $QS train "${RC[@]}" "${NV[@]}" --out "$T/nfull"
cp "$T/out" "$T/nfull.json"
killed "nvfp4 + SR, killed while writing the step-10 checkpoint" env QSCOPE_TEST_CKPT_KILL=files@2 $QS train "${RC[@]}" "${NV[@]}" --out "$T/npart"
check "the checkpoint left is the one of step 5" "[ \"\$(step_of $T/npart)\" = 5 ]"
ok "--resume the nvfp4 run (its recipe from trainer_state.json)" $QS train --resume "$T/npart" --json
cp "$T/out" "$T/nres.json"
check "nvfp4 resumed: steps 6..20 bit for bit, final weights byte for byte" "$PY -c '$SAME' $T/nfull.json $T/nres.json 5 && same_files $T/nfull $T/npart"

# --- a llama GGUF (adjacent-pair RoPE): its checkpoint is rotate_half; the resumed run permutes back ---
GG=(--init "$FIX/llm/tiny.gguf" --text "$T/train.txt" --val-text "$T/val.txt" --ctx 16 --batch 2 --steps 6 --val-seqs 2
    --checkpoint-every 3 --json)
ok "--init tiny.gguf, uninterrupted" $QS train "${GG[@]}" --out "$T/gfull"
cp "$T/out" "$T/gfull.json"
killed "--init tiny.gguf, killed before the step-6 checkpoint is swapped in" env QSCOPE_TEST_CKPT_KILL=swap@2 $QS train "${GG[@]}" --out "$T/gpart"
ok "--resume it" $QS train --resume "$T/gpart" --json
cp "$T/out" "$T/gres.json"
check "GGUF resumed: steps 4..6 bit for bit, final weights and moments byte for byte" "$PY -c '$SAME' $T/gfull.json $T/gres.json 3 && same_files $T/gfull $T/gpart"

# --- a kill after the swap, before the old checkpoint is removed ----------------------------------
killed "killed right after the step-10 checkpoint is swapped in" env QSCOPE_TEST_CKPT_KILL=old@2 $QS train "${RC[@]}" --out "$T/opart"
check "the checkpoint is the new one, of step 10" "[ \"\$(step_of $T/opart)\" = 10 ]"
ok "--resume it" $QS train --resume "$T/opart" --json
check "resumed after the swap: final weights byte for byte" "same_files $T/full $T/opart"

# --- kill -9 at random moments of a run that checkpoints every step ---------------------------------
# (the killed and interrupted runs sleep 15 ms after each step, QSCOPE_TEST_STEP_DELAY_MS, so that a fast
# machine does not finish them before the signal)
LONG=(--text "$T/train.txt" --val-text "$T/val.txt" --layers 1 --dim 32 --heads 2 --ctx 16 --batch 4 --steps 80
      --lr 3e-3 --warmup 3 --eval-every 40 --val-seqs 4 --seed 3 --checkpoint-every 1)
ok "the 80-step run, uninterrupted" $QS train "${LONG[@]}" --out "$T/lfull"
for k in 2 7 13; do   # kill after k/10 s (a checkpoint takes some 30 ms, mostly its fsyncs)
  D="$T/kill$k"
  QSCOPE_TEST_STEP_DELAY_MS=15 $QS train "${LONG[@]}" --out "$D" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 400); do [ -e "$D/trainer_state.json" ] && break; sleep 0.025; done   # the first checkpoint
  sleep "$((k / 10)).$((k % 10))"
  kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  s=$(step_of "$D")
  check "kill -9 #$k (at step ${s:-none}): a complete checkpoint remains" "[ -n \"$s\" ] && [ -s $D/optimizer.safetensors ] && [ -s $D/model.safetensors ]"
  ok "kill -9 #$k: llm eval loads it" $QS llm eval --model "$D" --text "$T/val.txt" --ctx 16 --chunks 2 --json
  if [ "${s:-0}" -lt 80 ]; then
    ok "kill -9 #$k: --resume finishes the run" $QS train --resume "$D" --json
  else
    skip "kill -9 #$k: --resume finishes the run" "the run had finished"
  fi
  check "kill -9 #$k: final weights and moments equal the uninterrupted run's" "same_files $T/lfull $D"
done

# --- Ctrl-C: the run stops after the step in progress and writes that step's checkpoint -------------
# (no periodic checkpoint: the only one is the stop's; --csv prints each step as it completes)
D="$T/int"
QSCOPE_TEST_STEP_DELAY_MS=15 $QS train "${LONG[@]}" --checkpoint-every 0 --csv --out "$D" >"$T/int.csv" 2>"$T/int.err" &
pid=$!
for _ in $(seq 400); do grep -q '^2,' "$T/int.csv" && break; sleep 0.025; done
kill -INT "$pid"; wait "$pid"; rc=$?
s=$(step_of "$D")
check "SIGINT: exit 130 and the checkpoint of the step it stopped after (step ${s:-none})" \
  "[ $rc = 130 ] && [ -n \"$s\" ] && grep -q 'stopped by SIGINT after step $s' $T/int.err"
ok "SIGINT: --resume finishes the run" $QS train --resume "$D" --json
check "SIGINT: final weights and moments equal the uninterrupted run's" "same_files $T/lfull $D"

# --- --steps extends a finished run ----------------------------------------------------------------
cp -r "$T/full" "$T/ext"
ok "--resume a finished run with --steps 30" $QS train --resume "$T/ext" --steps 30 --json
check "steps 21..30 ran; the checkpoint is at step 30" \
  "$PY -c 'import json,sys; s=json.load(open(sys.argv[1]))[\"steps\"]; sys.exit(not ([r[\"step\"] for r in s]==list(range(21,31))))' $T/out && [ \"\$(step_of $T/ext)\" = 30 ]"

# --- resume refusals: exit 1 naming the file, or 2 for options; the checkpoint stays as it was ------
sum() { cat "$1"/* | sha256sum; }
before=$(sum "$T/full")
refuses "--resume of a directory without trainer_state.json" 1 "nothere/trainer_state.json" $QS train --resume "$T/nothere"
refuses "--resume with another --lr" 2 "--lr 0.002 .*0.003" $QS train --resume "$T/full" --lr 0.002 --steps 25
refuses "--resume with another shape" 2 "--dim 64" $QS train --resume "$T/full" --dim 64 --steps 25
refuses "--resume with another recipe" 2 "--recipe mxfp8" $QS train --resume "$T/full" --recipe mxfp8 --steps 25
refuses "--resume with --init" 2 "drop --init" $QS train --resume "$T/full" --init "$T/full" --steps 25
refuses "--resume without steps to go" 2 "at step 20; give --steps above" $QS train --resume "$T/full"
check "the refusals left the checkpoint as it was" "[ \"\$(sum $T/full)\" = \"$before\" ]"
ok "--resume with the same --dim and --lr it had is accepted" $QS train --resume "$T/ext" --dim 32 --lr 3e-3 --steps 31 --json
mk() { rm -rf "$T/bad"; cp -r "$T/full" "$T/bad"; }
mk; head -c 300 "$T/full/trainer_state.json" > "$T/bad/trainer_state.json"
refuses "a truncated trainer_state.json" 1 "bad/trainer_state.json" $QS train --resume "$T/bad" --steps 25
mk; sed -i 's/"adam_t": 20/"adam_t": "x"/' "$T/bad/trainer_state.json"
refuses "a trainer_state.json field of the wrong type, named" 1 "trainer_state.json: adam_t" $QS train --resume "$T/bad" --steps 25
mk; rm "$T/bad/optimizer.safetensors"
refuses "a missing optimizer.safetensors" 1 "bad/optimizer.safetensors" $QS train --resume "$T/bad" --steps 25
mk; truncate -s 2000 "$T/bad/optimizer.safetensors"
refuses "a truncated optimizer.safetensors" 1 "bad/optimizer.safetensors" $QS train --resume "$T/bad" --steps 25
mk; cp "$T/full/model.safetensors" "$T/bad/optimizer.safetensors"
refuses "an optimizer file without the moments" 1 "bad/optimizer.safetensors: .*tensors" $QS train --resume "$T/bad" --steps 25
mk; rm "$T/bad/model.safetensors"
refuses "a missing model.safetensors" 1 "model.safetensors" $QS train --resume "$T/bad" --steps 25
mk; cp "$T/train.txt" "$T/train.bak"; printf 'changed' >> "$T/train.txt"
refuses "a training text changed since the checkpoint" 1 "trainer_state.json: the texts' tokens .*a text changed" $QS train --resume "$T/bad" --steps 25
mv "$T/train.bak" "$T/train.txt"

# --- bad input: exit 2, one line, no --out directory -----------------------------------------------
printf 'too short' > "$T/short.txt"
NO="$T/never"
B=(--layers 1 --ctx 16 --batch 4 --steps 5 --val-seqs 4 --out "$NO")
G=(--text "$T/train.txt" --val-text "$T/val.txt")
refuses "--dim not a multiple of --heads" 2 "--dim 66 is not a multiple of --heads 4" $QS train "${B[@]}" "${G[@]}" --dim 66 --heads 4
refuses "--heads not a multiple of --kv-heads" 2 "--kv-heads 3: 4 query heads are not a multiple of 3 KV heads" $QS train "${B[@]}" "${G[@]}" --dim 32 --heads 4 --kv-heads 3
refuses "an odd head dimension" 2 "= 9 is odd \(RoPE" $QS train "${B[@]}" "${G[@]}" --dim 36 --heads 4
refuses "a training text shorter than one window" 2 "short.txt: training text has 9 tokens, fewer than ctx\+1 = 17 \(one window\)" \
  $QS train "${B[@]}" --dim 32 --heads 2 --text "$T/short.txt" --val-text "$T/val.txt"
refuses "a validation text shorter than one window" 2 "short.txt: validation text has 9 tokens" $QS train "${B[@]}" --dim 32 --heads 2 --text "$T/train.txt" --val-text "$T/short.txt"
refuses "a recipe naming an unknown format" 2 "unknown format 'fp5'" $QS train "${B[@]}" "${G[@]}" --dim 32 --heads 2 --op fwd.x=fp5
refuses "a recipe naming an unknown operand" 2 "unknown operand 'fwd.q'" $QS train "${B[@]}" "${G[@]}" --dim 32 --heads 2 --op fwd.q=mxfp4
refuses "an unknown recipe" 2 "unknown training recipe 'mxfp5'" $QS train "${B[@]}" "${G[@]}" --dim 32 --heads 2 --recipe mxfp5
refuses "--ctx beyond --init's context" 2 "--ctx 4000 exceeds the context 16" $QS train --init "$T/full" --text "$T/train.txt" --val-text "$T/val.txt" --ctx 4000 --out "$NO"
refuses "--checkpoint-every without --out" 2 "--checkpoint-every needs --out" $QS train --text "$T/train.txt" --val-text "$T/val.txt" --checkpoint-every 5
check "no refusal created the --out directory" "[ ! -e $NO ] && ! ls -d $NO.tmp-* 2>/dev/null"
mkdir "$T/mine"; printf 'keep me' > "$T/mine/notes.txt"
refuses "--out holding other files is refused before training" 1 "mine: holds notes.txt" $QS train "${B[@]}" "${G[@]}" --dim 32 --heads 2 --out "$T/mine"
check "and its files are untouched" "[ \"\$(cat $T/mine/notes.txt)\" = 'keep me' ] && [ \"\$(ls $T/mine)\" = notes.txt ]"
# --- the database: --resume continues the same stored run ------------------------------------------
# (a database of its own; every stored step's loss compared with an uninterrupted run's, exactly)
DBR="$T/resume.db"
rq() { sqlite3 "$DBR" "$@"; }
same_rows() {   # same_rows RUN REF [TO] : RUN's stored steps and operand statistics up to step TO equal REF's (SQL =, all bits)
  local a="(SELECT id FROM train_run WHERE name='$1')" b="(SELECT id FROM train_run WHERE name='$2')" to=${3:-1000000000}
  [ "$(rq "SELECT (SELECT count(*) FROM train_step WHERE run_id=$a AND step <= $to) = (SELECT count(*) FROM train_step WHERE run_id=$b AND step <= $to)
    AND (SELECT count(*) FROM train_step WHERE run_id=$b AND step <= $to) > 0
    AND (SELECT count(*) FROM train_opstat WHERE run_id=$a AND step <= $to) = (SELECT count(*) FROM train_opstat WHERE run_id=$b AND step <= $to)
    AND NOT EXISTS (SELECT 1 FROM train_step x WHERE x.run_id=$a AND x.step <= $to AND NOT EXISTS (SELECT 1 FROM train_step y
      WHERE y.run_id=$b AND y.step=x.step AND y.train_loss=x.train_loss AND y.val_loss IS x.val_loss AND y.grad_norm=x.grad_norm AND y.lr=x.lr))
    AND NOT EXISTS (SELECT 1 FROM train_opstat x WHERE x.run_id=$a AND x.step <= $to AND NOT EXISTS (SELECT 1 FROM train_opstat y
      WHERE y.run_id=$b AND y.step=x.step AND y.layer=x.layer AND y.operand=x.operand AND y.n=x.n AND y.underflow=x.underflow
      AND y.clipped=x.clipped AND y.nonfinite=x.nonfinite))")" = 1 ]
}
one_run() {   # one_run RUN STEPS : RUN is done, STEPS of STEPS stored, val_final its last step's, no error
  [ "$(rq "SELECT count(*), status, steps, steps_done, error IS NULL, finished_at IS NOT NULL,
          val_final = (SELECT val_loss FROM train_step WHERE run_id=r.id AND step=$2),
          (SELECT count(*) FROM train_step WHERE run_id=r.id), (SELECT max(step) FROM train_step WHERE run_id=r.id)
          FROM train_run r WHERE name='$1'")" = "1|done|$2|$2|1|1|1|$2|$2" ]
}
MX=("${RC[@]}" --recipe mxfp4 --db "$DBR")
ok "stored: an uninterrupted mxfp4 run" $QS train "${MX[@]}" --name dfull --out "$T/dfull"
killed "stored: the same run killed after step 15 is stored, before its checkpoint is swapped in" \
  env QSCOPE_TEST_CKPT_KILL=swap@3 $QS train "${MX[@]}" --name dpart --out "$T/dpart"
check "... the database has steps 1..15 and their operand statistics, the checkpoint is of step 10" \
  "[ \"\$(rq \"SELECT status, steps_done, (SELECT max(step) FROM train_opstat WHERE run_id=id) FROM train_run WHERE name='dpart'\")\" = 'running|15|15' ] && [ \"\$(step_of $T/dpart)\" = 10 ]"
ok "stored: --resume it" $QS train --resume "$T/dpart" --db "$DBR" --json
check "... continues run dpart: no new run, its JSON names it" \
  "[ \"\$(rq 'SELECT group_concat(name) FROM (SELECT name FROM train_run ORDER BY name)')\" = dfull,dpart ] && grep -q '\"run\": \"dpart\"' $T/out"
check "... one run, done, 20 of 20 steps, val_final of step 20" "one_run dpart 20"
check "... steps 11..15 recomputed: every step's losses, norm, lr and operand statistics equal the uninterrupted run's" \
  "same_rows dpart dfull"

LONG2=("${LONG[@]}" --steps 40 --db "$DBR")
ok "stored: an uninterrupted 40-step run" $QS train "${LONG2[@]}" --checkpoint-every 0 --name lref
QSCOPE_TEST_STEP_DELAY_MS=15 $QS train "${LONG2[@]}" --checkpoint-every 3 --name k9 --out "$T/k9" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 400); do [ "$(rq "SELECT steps_done > 13 FROM train_run WHERE name='k9'" 2>/dev/null)" = 1 ] && break; sleep 0.025; done
kill -9 "$pid" 2>/dev/null; { wait "$pid"; } 2>/dev/null
k9s=$(rq "SELECT steps_done FROM train_run WHERE name='k9'")
check "kill -9 mid-run (checkpoint every 3 steps): $k9s steps stored, the checkpoint of step $(step_of "$T/k9")" \
  "[ -n \"$k9s\" ] && [ \"$k9s\" -lt 40 ] && [ \"\$(step_of $T/k9)\" -le \"$k9s\" ]"
ok "kill -9: --resume" $QS train --resume "$T/k9" --db "$DBR"
check "... one run k9, done, 40 of 40, every step equal to the uninterrupted run's" "one_run k9 40 && same_rows k9 lref"

QSCOPE_TEST_STEP_DELAY_MS=15 $QS train "${LONG2[@]}" --checkpoint-every 0 --csv --name cc --out "$T/cc" >"$T/cc.csv" 2>/dev/null &
pid=$!
for _ in $(seq 400); do grep -q '^5,' "$T/cc.csv" && break; sleep 0.025; done
kill -INT "$pid"; wait "$pid"; rc=$?
check "Ctrl-C: exit 130, run cc stopped at the checkpoint's step" \
  "[ $rc = 130 ] && [ \"\$(rq \"SELECT status || steps_done FROM train_run WHERE name='cc'\")\" = stopped\$(step_of $T/cc) ]"
ok "Ctrl-C: --resume" $QS train --resume "$T/cc" --db "$DBR" --csv
check "... one run cc, done, 40 of 40, every step equal to the uninterrupted run's" "one_run cc 40 && same_rows cc lref"

cp -r "$T/dfull" "$T/dext"
ok "--resume a finished stored run with --steps 30" $QS train --resume "$T/dext" --db "$DBR" --steps 30
check "... extends the same run: dfull done with 30 of 30 steps (also in its options), no new run" \
  "one_run dfull 30 && [ \"\$(rq \"SELECT json_extract(options, '\$.steps') FROM train_run WHERE name='dfull'\")\" = 30 ] && [ \"\$(rq 'SELECT count(*) FROM train_run')\" = 5 ]"
check "... its steps 1..20 as they were" "same_rows dfull dpart 20"
check "... and the text output names the run" "grep -q 'run dfull\$' $T/out"

refuses "--resume with --name other than the checkpoint's run" 2 "--name x \(the checkpoint's run: dfull\)" \
  $QS train --resume "$T/dext" --db "$DBR" --steps 40 --name x
H=$(dbdump "$DBR")
cp -r "$T/dext" "$T/dnew"
ok "--resume into a database without the run" $QS train --resume "$T/dnew" --db "$T/fresh.db" --steps 32
check "... says so in one line on stdout and stores a new run of steps 31..32" \
  "[ \$(grep -c 'the checkpoint.s run dfull is not in .*fresh.db; the resumed steps are stored as the new run dfull\$' $T/out) = 1 ] && [ \"\$(sqlite3 $T/fresh.db \"SELECT name, status, steps, steps_done, (SELECT min(step) FROM train_step) FROM train_run\")\" = 'dfull|done|32|2|31' ]"
check "... the first database unchanged" "[ \"\$(dbdump $DBR)\" = '$H' ]"
ok "a --no-store run" $QS train "${RC[@]}" --no-store --steps 10 --out "$T/ns"
ok "--resume it with --name" $QS train --resume "$T/ns" --db "$DBR" --steps 12 --name nsrun --json
check "... a new run nsrun of steps 11..12, said on stderr with --json" \
  "grep -q 'not stored (--no-store); the resumed steps are stored as the new run nsrun\$' $T/err && [ \"\$(rq \"SELECT status, steps_done FROM train_run WHERE name='nsrun'\")\" = 'done|2' ]"
rq "UPDATE train_run SET data_hash='0' WHERE name='dpart'"
ok "--resume when the run of that name holds other tokens" $QS train --resume "$T/dpart" --db "$DBR" --steps 22
check "... leaves it alone and stores the new run dpart-2" \
  "grep -q 'the run dpart in .* is not the checkpoint.s .*stored as the new run dpart-2\$' $T/out && [ \"\$(rq \"SELECT steps_done FROM train_run WHERE name='dpart'\")\" = 20 ] && [ \"\$(rq \"SELECT steps_done FROM train_run WHERE name='dpart-2'\")\" = 2 ]"
done_testing
