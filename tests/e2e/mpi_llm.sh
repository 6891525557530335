#!/usr/bin/env bash
# llm eval (chunks x configurations), llm sensitivity (chunks x layer/site variants) and sim grpo
# (seeds x rollout formats) under `mpirun -np 1/2/3` store the single process's rows and blob bytes
# and print its output; a rank killed mid-run stops the job with an error and stores nothing.
# Only timings differ between two runs: "seconds" / "compute_seconds", the "computed in" line, and the
# measured peak resident set ("peak_rss_bytes").
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null 2>&1 || skip_all "mpirun is not installed (Debian: openmpi-bin)"
TINY="$FIX/llm/tiny.gguf"
MPI=(mpirun --oversubscribe)
# Open MPI's own allocations outlive MPI_Finalize (ompi_op_base_op_select, and MCA components that are
# dlclose'd, so their frames have no name to suppress): LeakSanitizer stays off inside mpirun's ranks
# of the sanitizer build (the plain runs here and the other scripts check qscope's own code for leaks).
asan_build && MPI+=(-x "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
[ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)

# every stored row by content: ids and creation times left out, REALs as 17 digits, timings masked
rows() {
  sqlite3 "$1" "
    SELECT tensor_hash, kind, format, options, tool_version, data FROM result ORDER BY kind, format, options, tensor_hash;
    SELECT r.kind, r.format, r.options, b.name, hex(b.data) FROM result_blob b JOIN result r ON r.id = b.result_id ORDER BY 1, 2, 3, 4;
    SELECT name, label, source, metadata FROM rl_run ORDER BY name;
    SELECT r.name, t.step, t.seq, t.pos, t.token_id, printf('%!.17g %!.17g %!.17g %!.17g %!.17g', t.lp_rollout, t.lp_train,
           t.advantage, t.reward, t.entropy), t.grp, t.mask FROM rl_token t JOIN rl_run r ON r.id = t.run_id ORDER BY 1, 2, 3, 4;" |
    sed -E 's/"(compute_)?seconds":[-+0-9.eE]+/"\1seconds":T/g' | sha256sum | cut -d' ' -f1
}
untimed() { sed -E -e 's/"(compute_)?seconds":[-+0-9.eE]+/"\1seconds":T/g' -e 's/"peak_rss_bytes":[0-9]+/"peak_rss_bytes":M/g' -e '/^computed in|^all results reused/d' "$1"; }
# run ARGS... once in one process (into $T/one.db) and under mpirun -np 1, 2, 3; compare
same_as_one() {
  local what=$1; shift
  rm -f "$T"/one.db*
  "$QS" --db "$T/one.db" "$@" > "$T/one.out" 2> "$T/one.err"
  check "$what: one process ran" '[ -s "$T/one.out" ] && [ -s "$T/one.db" ]'
  for np in 1 2 3; do
    rm -f "$T"/np$np.db*
    ok "$what: mpirun -np $np" "${MPI[@]}" -np $np "$QS" --db "$T/np$np.db" "$@"
    cp "$T/out" "$T/np$np.out"
    check "$what: -np $np stores the same rows and blob bytes" '[ "$(rows "$T/np'$np'.db")" = "$(rows "$T/one.db")" ]'
    check "$what: -np $np prints the same" 'diff <(untimed "$T/one.out") <(untimed "$T/np'$np'.out") >/dev/null'
  done
}

python3 - "$T/text.txt" 70 <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(int(sys.argv[2]))) + "\n")
PY

# --- llm eval: 3 chunks x 5 configurations (with 2 ranks the configurations split into groups)
E=(llm eval --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 3 --config a=mxfp4 --config kv=fp8_e4m3
   --config w=bf16,a=bf16 --config w=mxfp4 --config a=nvfp4,resq=dense)
same_as_one "llm eval" "${E[@]}"
check "llm eval: 6 results with per-token arrays" '[ "$(sqlite3 "$T/np2.db" "SELECT count(*) FROM result WHERE kind = '"'"'llm_eval'"'"'")" = 6 ] && [ "$(sqlite3 "$T/np2.db" "SELECT count(*) FROM result_blob b JOIN result r ON r.id = b.result_id WHERE r.kind = '"'"'llm_eval'"'"'")" = 16 ]'
# a stored run plus one new configuration: every rank sees the same cached results
"$QS" --db "$T/one.db" "${E[@]}" --config a=hif8 --json > "$T/one2.out"
ok "llm eval: the stored evaluation plus a new configuration, -np 2" "${MPI[@]}" -np 2 "$QS" --db "$T/np2.db" "${E[@]}" --config a=hif8 --json
check "llm eval: only the new configuration computed, the same numbers and rows" \
  'python3 -c "import json,sys; d=json.load(open(\"$T/out\")); sys.exit(not ([c[\"cached\"] for c in d[\"configs\"]] == [True]*5 + [False]))" &&
   diff <(untimed "$T/one2.out") <(untimed "$T/out") >/dev/null && [ "$(rows "$T/np2.db")" = "$(rows "$T/one.db")" ]'

# --- llm sensitivity: 2 chunks x (layers x 6 sites), with a verified plan
same_as_one "llm sensitivity" llm sensitivity --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 2 --format mxfp4 --kl-target 0.05 --json
check "llm sensitivity: a table and a plan stored" '[ "$(sqlite3 "$T/np3.db" "SELECT group_concat(kind) FROM (SELECT kind FROM result ORDER BY kind)")" = "llm_plan,llm_sensitivity" ]'

# --- sim grpo: 3 seeds x (exact, 2 formats with ais_r and its fixed-lambda ablation), tokens logged
same_as_one "sim grpo" sim grpo --formats mxfp4,nvfp4 --methods exact,none,ais_r,ais_r_fixed --seeds 3 --steps 8 --batch 8 --T 6 --log-every 2
check "sim grpo: 21 runs with their tokens" '[ "$(sqlite3 "$T/np3.db" "SELECT count(*) FROM rl_run")" = 21 ] && [ "$(sqlite3 "$T/np3.db" "SELECT count(DISTINCT run_id) FROM rl_token")" = 21 ]'

# --- a rank killed mid-run: an error, a non-zero exit, the database as it was
python3 - "$T/big.txt" 12000 <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(int(sys.argv[2]))) + "\n")
PY
before=$(dbdump "$T/np2.db")
"${MPI[@]}" -np 2 "$QS" --db "$T/np2.db" llm eval --model "$TINY" --text "$T/big.txt" --ctx 64 --config a=mxfp4 --config a=nvfp4 \
  --config kv=fp8_e4m3 --config w=mxfp4 > "$T/kill.out" 2> "$T/kill.err" &
mp=$!
victim=
for _ in $(seq 1 150); do   # rank 1 of this job: its command line names this test's database
  for d in /proc/[0-9]*; do
    tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -qF -- "--db $T/np2.db llm eval" &&
      grep -qxz OMPI_COMM_WORLD_RANK=1 "$d/environ" 2>/dev/null && victim=${d#/proc/}
  done
  [ -n "$victim" ] && break
  sleep 0.1
done
# mid-run = rank 1 has spent 0.4 s of CPU past start-up (a fixed sleep raced a quiet machine)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
for _ in $(seq 1 300); do
  [ -n "$victim" ] && [ "$(cpu_ticks "$victim")" -ge 40 ] && break
  sleep 0.05
done
[ -n "$victim" ] && kill -9 "$victim"
wait $mp; krc=$?
check "killed rank: found and killed mid-run" '[ -n "$victim" ]'
check "killed rank: non-zero exit" '[ "$krc" -ne 0 ]'
check "killed rank: qscope says the job stopped" 'grep -q "^qscope: .*stopped" "$T/kill.err"'
check "killed rank: no result printed (the header comes first), the database unchanged" \
  '! grep -q "^reference fp32" "$T/kill.out" && [ "$(dbdump "$T/np2.db")" = "$before" ]'
done_testing
