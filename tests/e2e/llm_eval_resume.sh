#!/usr/bin/env bash
# llm eval keeps every finished chunk (issue 28): each chunk of each variant is stored as it is done,
# so a killed or interrupted run continues where it stopped with the same command, a larger --chunks
# computes only the chunks it adds, and the results are bit for bit those of an uninterrupted run.
source "$(dirname "$0")/lib.sh"
TINY="$FIX/llm/tiny.gguf"
jq_() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }
q() { sqlite3 "${2:-$QSCOPE_DB}" "$1"; }
# same A B: two --json outputs equal but for timing and what this run computed
same() {
  python3 - "$1" "$2" <<'PY'
import json, sys
def strip(d):
    if isinstance(d, dict):
        return {k: strip(v) for k, v in d.items() if k not in ("cached", "chunks_computed", "compute_seconds", "seconds", "until_ci", "peak_rss_bytes")}
    return [strip(x) for x in d] if isinstance(d, list) else d
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sys.exit(0 if strip(a) == strip(b) else 1)
PY
}
python3 - "$T/text.txt" "$T/big.txt" <<'PY'
import random, sys
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
for path, n in zip(sys.argv[1:], (70, 3000)):
    random.seed(7)
    open(path, "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(n)) + "\n")
PY
OTHER="$T/other.db"
E=("$QS" llm eval --model "$TINY" --text "$T/text.txt" --ctx 64 --config a=mxfp4 --config kv=fp8_e4m3 --json)

# --- a larger --chunks computes only the chunks it adds
ok "uninterrupted: 9 chunks in another database" env QSCOPE_DB="$OTHER" "${E[@]}" --chunks 9
cp "$T/out" "$T/other9.json"
ok "8 chunks" "${E[@]}" --chunks 8
check "8 chunks: every variant computed its 8 chunks" \
  '[ "$(jq_ "$T/out" "[d[\"reference\"][\"chunks_computed\"]] + [c[\"chunks_computed\"] for c in d[\"configs\"]]")" = "[8, 8, 8]" ]'
ok "--chunks 9 after --chunks 8" "${E[@]}" --chunks 9
cp "$T/out" "$T/r9.json"
check "--chunks 9 computes one chunk per variant" \
  '[ "$(jq_ "$T/r9.json" "[d[\"reference\"][\"chunks_computed\"]] + [c[\"chunks_computed\"] for c in d[\"configs\"]]")" = "[1, 1, 1]" ]'
check "... and gives the uninterrupted run's results bit for bit" 'same "$T/r9.json" "$T/other9.json"'
check "stored: one llm_eval_chunk row per variant and chunk, blobs float64 as computed" \
  '[ "$(q "SELECT count(*) FROM result WHERE kind = '"'"'llm_eval_chunk'"'"'")" = 27 ] &&
   [ "$(q "SELECT count(*) FROM result_blob b JOIN result r ON r.id = b.result_id WHERE r.kind = '"'"'llm_eval_chunk'"'"' AND b.name = '"'"'kl'"'"' AND length(b.data) = 31 * 8")" = 18 ]'
ok "plot kl reads the stored runs (never the chunk rows)" "$QS" plot kl --config a=mxfp4 -o -
cp "$T/out" "$T/kl.txt"
ok "plot kl of the uninterrupted run" env QSCOPE_DB="$OTHER" "$QS" plot kl --config a=mxfp4 -o -
check "the same figure" 'cmp -s "$T/out" "$T/kl.txt" && grep -q "ctx 64" "$T/kl.txt"'
ok "--chunks 9 again: reused whole" "${E[@]}" --chunks 9
check "nothing computed" '[ "$(jq_ "$T/out" "[d[\"reference\"][\"cached\"]] + [c[\"cached\"] for c in d[\"configs\"]]")" = "[True, True, True]" ] && same "$T/out" "$T/other9.json"'
ok "a third configuration next to two stored ones" "${E[@]}" --chunks 9 --config w=mxfp4
check "only its chunks are computed; the reference's come from the store" \
  '[ "$(jq_ "$T/out" "[d[\"reference\"][\"chunks_computed\"]] + [c[\"chunks_computed\"] for c in d[\"configs\"]]")" = "[0, 0, 0, 9]" ]'

# --- kill -9 in the middle of a run: the finished chunks stay, the same command continues
B=("$QS" llm eval --model "$TINY" --text "$T/big.txt" --ctx 64 --chunks 300 --config a=mxfp4 --config kv=fp8_e4m3 --json)
ok "uninterrupted: 300 chunks in another database" env QSCOPE_DB="$OTHER" "${B[@]}"
cp "$T/out" "$T/other300.json"
nchunk() { q "SELECT count(*) FROM result WHERE kind = 'llm_eval_chunk' AND options LIKE '%\"ctx\":64%' AND options LIKE '%$(jq_ "$T/other300.json" "d[\"text\"][\"hash\"]" 2>/dev/null)%'"; }
"${B[@]}" >"$T/killed.out" 2>"$T/killed.err" &
pid=$!
for _ in $(seq 1 200); do [ "$(nchunk)" -ge 30 ] 2>/dev/null && break; sleep 0.05; done
kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
kept=$(nchunk)
check "killed mid-run: some chunks stored, not all ($kept of 900)" '[ "$kept" -ge 30 ] && [ "$kept" -lt 900 ]'
check "the database is consistent" '[ "$(q "PRAGMA integrity_check")" = ok ]'
ok "the same command continues" "${B[@]}"
cp "$T/out" "$T/resumed.json"
check "it computed only the missing chunks" \
  '[ "$(jq_ "$T/resumed.json" "sum([d[\"reference\"][\"chunks_computed\"]] + [c[\"chunks_computed\"] for c in d[\"configs\"]])")" = $((900 - kept)) ]'
check "resumed after kill -9: bit-identical to the uninterrupted run" 'same "$T/resumed.json" "$T/other300.json"'

# --- Ctrl-C (SIGINT) stops within a second, says what it kept and exits 130; the same command goes on.
# A reference-only run (the case that ran to its end) and a run with configurations; started in the
# background by a script, where SIGINT was ignored.
stop_run() {   # stop_run SIGNAL NAME CMD... : start CMD, send SIGNAL once 20 chunks are stored
  local sig=$1 name=$2; shift 2
  "$@" >"$T/$name.out" 2>"$T/$name.err" &
  local pid=$! t0 t1
  for _ in $(seq 1 200); do [ "$(q "SELECT count(*) FROM result WHERE kind = 'llm_eval_chunk'")" -ge $((base + 20)) ] && break; sleep 0.05; done
  t0=$(date +%s%N)
  kill -"$sig" "$pid"
  wait "$pid"; echo $? > "$T/$name.rc"
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000000 )) > "$T/$name.ms"
}
R=("$QS" llm eval --model "$TINY" --text "$T/big.txt" --ctx 64 --chunks 500 --json)
ok "reference only, uninterrupted, other database" env QSCOPE_DB="$OTHER" "${R[@]}"
cp "$T/out" "$T/other_ref.json"
base=$(q "SELECT count(*) FROM result WHERE kind = 'llm_eval_chunk'")
stop_run INT ref "${R[@]}"
check "SIGINT: a reference-only run stops within 1.5 s ($(cat "$T/ref.ms") ms)" '[ "$(cat "$T/ref.ms")" -lt 1500 ]'
check "SIGINT: exit 130 with one line saying what was kept, nothing on stdout"   '[ "$(cat "$T/ref.rc")" = 130 ] && grep -qE "^qscope: llm eval: stopped by SIGINT; [0-9]+ chunks computed and stored by this run .*continues" "$T/ref.err" && [ ! -s "$T/ref.out" ]'
check "SIGINT: the database is consistent, the chunks kept"   '[ "$(q "PRAGMA integrity_check")" = ok ] && [ "$(q "SELECT count(*) FROM result WHERE kind = '"'"'llm_eval_chunk'"'"'")" -ge $((base + 20)) ]'
ok "the same command continues" "${R[@]}"
check "resumed after SIGINT: bit-identical to the uninterrupted run" 'same "$T/out" "$T/other_ref.json"'
C=("$QS" llm eval --model "$TINY" --text "$T/big.txt" --ctx 64 --chunks 500 --config a=nvfp4 --config w=bf16 --json)
base=$(q "SELECT count(*) FROM result WHERE kind = 'llm_eval_chunk'")
stop_run TERM cfg "${C[@]}"
check "SIGTERM: a run with configurations stops within 1.5 s ($(cat "$T/cfg.ms") ms), exit 143"   '[ "$(cat "$T/cfg.ms")" -lt 1500 ] && [ "$(cat "$T/cfg.rc")" = 143 ] && grep -q "stopped by SIGTERM" "$T/cfg.err"'
ok "... and continues" "${C[@]}"
check "only the reference's chunks were reused" '[ "$(jq_ "$T/out" "d[\"reference\"][\"chunks_computed\"]")" = 0 ]'

# --- llm sensitivity stops too (nothing of an unfinished table is stored)
before=$(dbdump)
cat "$T/big.txt" "$T/big.txt" "$T/big.txt" >"$T/big3.txt"   # ~8 s of work even with a fast forward: still running at 3 s
"$QS" llm sensitivity --model "$TINY" --text "$T/big3.txt" --ctx 64 --format mxfp4 >"$T/sens.out" 2>"$T/sens.err" &
pid=$!
sleep 3
t0=$(date +%s%N); kill -INT "$pid"; wait "$pid"; src=$?; ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "llm sensitivity: SIGINT stops it within 1.5 s ($ms ms), exit 130, database unchanged" \
  '[ "$ms" -lt 1500 ] && [ "$src" = 130 ] && grep -q "^qscope: llm sensitivity: stopped by SIGINT; nothing" "$T/sens.err" && [ "$(dbdump)" = "$before" ]'

# --- --until-ci: the fewest chunks (at least 2) at which every config's 95% interval is narrower
U=("$QS" llm eval --model "$TINY" --text "$T/big.txt" --ctx 64 --config a=mxfp4 --config kv=fp8_e4m3 --json)
refuses "--until-ci 0 is refused" 2 "--until-ci: '0' is not a positive width" "${U[@]}" --until-ci 0
refuses "--until-ci kl:x is refused" 2 "--until-ci: 'kl:x' is not a positive width" "${U[@]}" --until-ci kl:x
refuses "--until-ci without a --config is refused" 2 "--until-ci measures the configurations' intervals" \
  "$QS" llm eval --model "$TINY" --text "$T/big.txt" --ctx 64 --until-ci 0.01
export QSCOPE_DB="$T/until.db"
ok "--until-ci kl:0.1 (up to the whole text)" "${U[@]}" --until-ci kl:0.1
cp "$T/out" "$T/u.json"
K=$(jq_ "$T/u.json" "d[\"chunks\"]") NT=$(jq_ "$T/u.json" "d[\"tokens\"] // 64")
check "stops early ($K of $NT chunks) with every KL interval narrower than 0.1 nats, computing only those chunks" \
  '[ "$K" -gt 2 ] && [ "$K" -lt "$NT" ] && [ "$(jq_ "$T/u.json" "all(2 * 1.959964 * c[\"kl_se\"] < 0.1 for c in d[\"configs\"]) and d[\"scored_tokens\"] == $K * 31")" = True ] &&
   [ "$(q "SELECT count(*) FROM result WHERE kind = '"'"'llm_eval_chunk'"'"'")" = $((3 * K)) ]'
ok "one chunk fewer, from the stored chunks" "${U[@]}" --chunks $((K - 1))
check "... is not narrow enough, and computed nothing" \
  '[ "$(jq_ "$T/out" "any(2 * 1.959964 * c[\"kl_se\"] >= 0.1 for c in d[\"configs\"]) and sum(c[\"chunks_computed\"] for c in d[\"configs\"]) == 0")" = True ]'
ok "--until-ci kl:0.1 again: every chunk reused" "${U[@]}" --until-ci kl:0.1
check "... the same answer, nothing computed" 'same "$T/out" "$T/u.json" && [ "$(jq_ "$T/out" "d[\"reference\"][\"chunks_computed\"]")" = 0 ]'
ok "the same chunk count without --until-ci in another database" env QSCOPE_DB="$OTHER" "${U[@]}" --chunks "$K"
check "... bit-identical" 'same "$T/out" "$T/u.json"'
ok "--until-ci 100 (dPPL): the minimum of 2 chunks" "${U[@]}" --until-ci 100
check "2 chunks; the JSON says what was asked and that it was met" \
  '[ "$(jq_ "$T/out" "d[\"chunks\"], d[\"until_ci\"]")" = "2 {'"'"'of'"'"': '"'"'dppl'"'"', '"'"'width'"'"': 100.0, '"'"'met'"'"': True}" ]'
ok "--until-ci 1e-9 with --chunks 5: never narrow enough, all 5 chunks" "${U[@]}" --until-ci 1e-9 --chunks 5 --config w=bf16
check "5 chunks; only the new config computed" \
  '[ "$(jq_ "$T/out" "d[\"chunks\"], [c[\"chunks_computed\"] for c in d[\"configs\"]]")" = "5 [0, 0, 5]" ]'
ok "the table says how many chunks and why" "${U[@]:0:13}" --until-ci kl:0.1
check "header first, then the chunk count" \
  'head -1 "$T/out" | grep -q "^model " && grep -qE "up to [0-9]+ chunks" "$T/out" && grep -q "^$K chunks evaluated (the intervals are narrow enough)" "$T/out"'

# --- on a terminal: the header first, then one progress line (chunks, tokens/s, time left) on stderr
python3 - "$T/pty.txt" "$QS" llm eval --model "$TINY" --text "$T/big.txt" --ctx 64 --chunks 300 --config a=nvfp4 --force <<'PY'
import os, pty, sys
out = open(sys.argv[1], "wb")
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
while True:
    try:
        d = os.read(fd, 65536)
    except OSError:
        break
    if not d:
        break
    out.write(d)
os.waitpid(pid, 0)
PY
check "terminal: the header, then 'llm eval: chunk i/300, N tokens/s, m:ss left', then the table" \
  'python3 -c "
import re, sys
t = open(sys.argv[1], \"rb\").read().decode(errors=\"replace\")
h, p, r = t.find(\"configs: reference fp32, a=nvfp4\"), re.search(r\"llm eval: chunk [0-9]+/300, [0-9]+ tokens/s, [0-9]+:[0-9][0-9] left\", t), t.find(\"\\nreference fp32 \")
sys.exit(not (0 <= h and p and h < p.start() < r))" "$T/pty.txt"'
ok "not on a terminal, a short run: nothing on stderr" "$QS" llm eval --model "$TINY" --text "$T/big.txt" --ctx 64 --chunks 30 --config a=nvfp4 --force --json
check "... stderr empty, stdout one JSON line" '[ ! -s "$T/err" ] && [ "$(wc -l < "$T/out")" = 1 ]'

done_testing
