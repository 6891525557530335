#!/usr/bin/env bash
# Run every libFuzzer target.  `run.sh smoke`: each target over its committed seed corpus plus a
# few thousand mutations (TAP lines and plan for tests/run.sh).  `run.sh SECONDS`: each target for SECONDS,
# growing a scratch corpus under build/fuzz/corpus (the committed seeds are never modified).
set -u
cd "$(dirname "$0")/../.."
mode=${1:-smoke}
n=0
for f in build/fuzz/fuzz_*; do
  [ -x "$f" ] || continue
  name=$(basename "$f"); seeds="tests/fuzz/corpus/${name#fuzz_}"
  n=$((n + 1))
  mkdir -p "build/fuzz/corpus/$name" build/fuzz/artifacts
  if [ "$mode" = smoke ]; then
    args=(-runs=3000 -max_len=65536)
    work=$(mktemp -d)
    "$f" "${args[@]}" -artifact_prefix=build/fuzz/artifacts/ "$work" "$seeds" >"build/fuzz/$name.log" 2>&1
    rc=$?; rm -rf "$work"
  else
    "$f" -max_total_time="$mode" -max_len=1048576 -artifact_prefix=build/fuzz/artifacts/ \
      "build/fuzz/corpus/$name" "$seeds" >"build/fuzz/$name.log" 2>&1
    rc=$?
  fi
  if [ $rc -eq 0 ]; then echo "ok $n - $name"; else echo "not ok $n - $name (see build/fuzz/$name.log)"; tail -30 "build/fuzz/$name.log" | sed 's/^/# /'; fi
done
[ $n -gt 0 ] || { echo "not ok 1 - no fuzz targets built"; echo "1..1"; exit 1; }
if [ "$mode" = smoke ]; then echo "1..$n"; fi   # the plan, for tests/run.sh
