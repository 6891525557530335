#!/usr/bin/env bash
# Base-vs-new comparison helpers: every command runs once per binary, each with its own database,
# and stdout, stderr and the exit status are compared byte for byte.
# Usage: source this, set BASE_BIN, NEW_BIN, OUT (a scratch directory).
set -u
mkdir -p "$OUT/base" "$OUT/new"
export NO_COLOR=1
SUMMARY="$OUT/summary.txt"
: "${QS_VENV:=}"
# runq SIDE ARGS...: run one side's binary with its own database
runq() { local s=$1; shift; local b; [ "$s" = base ] && b=$BASE_BIN || b=$NEW_BIN
  (cd "$OUT/$s" && env QSCOPE_DB="$OUT/$s/db" $QS_VENV "$b" "$@"); }
# cmp_cmd LABEL ARGS...: both sides, compare stdout/stderr/rc; "@OUT@" in ARGS becomes the side's dir;
# stdin is the side's file $CMP_IN when set
cmp_cmd() { local label=$1; shift; local s a args
  for s in base new; do args=(); for a in "$@"; do args+=("${a//@OUT@/$OUT/$s}"); done
    local in=/dev/null; [ -n "${CMP_IN:-}" ] && in="$OUT/$s/$CMP_IN"
    runq "$s" "${args[@]}" < "$in" > "$OUT/$s/$label.out" 2> "$OUT/$s/$label.err"; echo $? > "$OUT/$s/$label.rc"; done
  local r=same
  cmp -s "$OUT/base/$label.out" "$OUT/new/$label.out" || r="DIFF-stdout"
  cmp -s "$OUT/base/$label.rc" "$OUT/new/$label.rc" || r="$r DIFF-rc"
  cmp -s "$OUT/base/$label.err" "$OUT/new/$label.err" || r="$r diff-stderr"
  echo "$label $r" >> "$SUMMARY"; }
# cmp_files LABEL RELPATH: compare a file written by each side
cmp_files() { if cmp -s "$OUT/base/$2" "$OUT/new/$2"; then echo "$1 same" >> "$SUMMARY"
  else echo "$1 DIFF-file $2" >> "$SUMMARY"; fi; }
# db_dump SIDE: the result-bearing tables without ids and timestamps, in a fixed order
db_dump() { sqlite3 "$OUT/$1/db" <<'SQL'
.mode list
SELECT 'R', tensor_hash, kind, format, options, tool_version, data FROM result ORDER BY 2,3,4,5,6;
SELECT 'B', r.tensor_hash, r.kind, r.format, r.options, b.name, hex(b.data) FROM result_blob b JOIN result r ON r.id = b.result_id ORDER BY 2,3,4,5,6;
SELECT 'T', name, member, dtype, shape, numel, nbytes, storage, codec, hash, metadata FROM tensor ORDER BY 2;
SELECT 'S', t.name, s.n_finite, s.n_nan, s.n_inf, s.n_zero, s.min, s.max, s.mean, s.std, s.absmax, s.kurtosis, s.zero_frac, s.outlier_frac, s.p0_1, s.p1, s.p5, s.p25, s.p50, s.p75, s.p95, s.p99, s.p99_9, s.rows, s.cols, s.row_absmax, s.col_absmax, s.top_channels FROM tensor_stats s JOIN tensor t ON t.id = s.tensor_id ORDER BY 2;
SELECT 'U', name, label, metadata FROM rl_run ORDER BY 2;
SELECT 'K', r.name, k.step, k.seq, k.pos, k.token_id, k.lp_rollout, k.lp_train, k.advantage, k.reward, k.grp, k.entropy, k.mask FROM rl_token k JOIN rl_run r ON r.id = k.run_id ORDER BY 2,3,4,5;
SELECT 'Q', r.name, q.step, q.seq, q.seq_id, q.group_id FROM rl_seq q JOIN rl_run r ON r.id = q.run_id ORDER BY 2,3,4;
SQL
}
cmp_db() { db_dump base > "$OUT/base/$1.dump"; db_dump new > "$OUT/new/$1.dump"
  if cmp -s "$OUT/base/$1.dump" "$OUT/new/$1.dump"; then echo "$1 same ($(wc -l < "$OUT/new/$1.dump") rows)" >> "$SUMMARY"
  else echo "$1 DIFF-db" >> "$SUMMARY"; fi; }
# renorm: re-judge every DIFF line of the summary on normalized outputs (norm.py); writes summary2.txt
renorm() { local d; d=$(dirname "${BASH_SOURCE[0]}"); : > "$OUT/summary2.txt"
  while read -r label rest; do
    case "$rest" in same|"same ("*) echo "$label $rest" >> "$OUT/summary2.txt"; continue;; esac
    local r="same-after-norm" ext
    for ext in out err rc dump; do [ -f "$OUT/base/$label.$ext" ] || continue
      cmp -s <(python3 "$d/norm.py" "$OUT/base" "$OUT/base/$label.$ext") <(python3 "$d/norm.py" "$OUT/new" "$OUT/new/$label.$ext") || r="STILL-DIFF($ext)"; done
    case "$rest" in DIFF-file*) r="$rest";; esac
    echo "$label $r" >> "$OUT/summary2.txt"; done < "$SUMMARY"; }
