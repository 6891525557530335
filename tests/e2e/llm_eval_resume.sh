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
        return {k: strip(v) for k, v in d.items() if k not in ("cached", "chunks_computed", "compute_seconds", "seconds")}
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

done_testing
