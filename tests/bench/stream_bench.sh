#!/usr/bin/env bash
# Streaming benchmark (`make bench-stream`): quant and analyze of large tensors against `cp`.
#   1. quant FILE -o OUT of a 64 MiB .npy for fp8_e4m3, mxfp4, hif8, nvfp4, hif4, each beside a `cp`
#      of the same file in the same loop: median of REPS (default 3) wall times and the ratio
#      (targets: <= 2x cp for fp8_e4m3 and mxfp4, <= 3x for the others).
#   2. a BIG_ROWS x BIG_COLS float32 tensor (default 32768 x 32768 = 4 GiB): cp, quant (fp8_e4m3,
#      mxfp4), import by reference, analyze (mxfp4, int8): wall time and peak RSS (/usr/bin/time).
# Usage: QS_BIN=build/qscope [DIR=dir-with-room] [BIG_ROWS=.. BIG_COLS=..] [SKIP_BIG=1] tests/bench/stream_bench.sh
# Files go to DIR (default a fresh directory under $TMPDIR) and are removed at the end.
set -u
QS=${QS_BIN:-build/qscope}
REPS=${REPS:-3}
BIG_ROWS=${BIG_ROWS:-32768} BIG_COLS=${BIG_COLS:-32768}
D=$(mktemp -d "${DIR:-${TMPDIR:-/tmp}}/qs-stream-bench.XXXXXX")
trap 'rm -rf "$D"' EXIT

wall() {   # wall seconds of a command (stdout/stderr dropped)
  local t0 t1
  t0=$(date +%s.%N); "$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; exit 1; }; t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
timed() {  # label cmd...: wall time and peak RSS via /usr/bin/time, after flushing earlier writes
  local l=$1; shift
  sync
  /usr/bin/time -f "%e %M" -o "$D/t" "$@" >/dev/null 2>"$D/err" || { echo "FAILED: $*" >&2; cat "$D/err" >&2; exit 1; }
  read -r s kb < "$D/t"
  printf '| %s | %.2f | %.1f |\n' "$l" "$s" "$(echo "$kb / 1024" | bc -l)"
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs," \
     "$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) RAM, $(df -T "$D" | awk 'NR==2 {print $2}') disk;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')"

"$QS" gen llm-act --shape 4096x4096 --seed 1 -o "$D/a.npy" >/dev/null 2>&1
echo
echo "| quant of a 64 MiB .npy | quant median (s) | cp median (s) | ratio | target |"
echo "|---|---|---|---|---|"
for f in fp8_e4m3 mxfp4 hif8 nvfp4 hif4; do
  q=() c=()
  for r in $(seq "$REPS"); do
    rm -f "$D/c.npy" "$D/q.npy"   # both write a new file (replacing one costs its own unlinking)
    c+=("$(wall cp "$D/a.npy" "$D/c.npy")")
    q+=("$(wall "$QS" quant -f "$f" "$D/a.npy" -o "$D/q.npy")")
  done
  mq=$(median "${q[@]}") mc=$(median "${c[@]}")
  case $f in fp8_e4m3|mxfp4) tgt=2 ;; *) tgt=3 ;; esac
  printf '| %s | %.3f | %.3f | %.2f | %s |\n' "$f" "$mq" "$mc" "$(echo "$mq / $mc" | bc -l)" "<= ${tgt}x"
done
rm -f "$D/a.npy" "$D/c.npy" "$D/q.npy"

[ "${SKIP_BIG:-0}" = 1 ] && exit 0
echo
"$QS" gen uniform --shape "${BIG_ROWS}x${BIG_COLS}" --seed 2 -o "$D/big.npy" >/dev/null 2>&1
echo "big tensor: ${BIG_ROWS}x${BIG_COLS} float32, $(du -h "$D/big.npy" | cut -f1)"
echo
echo "| command | wall (s) | peak RSS (MiB) |"
echo "|---|---|---|"
timed "cp" cp "$D/big.npy" "$D/c.npy"; rm -f "$D/c.npy"
for f in fp8_e4m3 mxfp4; do timed "quant -f $f FILE -o OUT" "$QS" quant -f "$f" "$D/big.npy" -o "$D/q.npy"; rm -f "$D/q.npy"; done
timed "import (reference: hash + statistics)" "$QS" --db "$D/b.db" import "$D/big.npy"
for f in mxfp4 int8; do timed "analyze -f $f" "$QS" --db "$D/b.db" analyze big -f "$f"; done
