#!/usr/bin/env bash
# `mpirun -np N qscope ...`: analyze, report and claims sharded over 1-3 ranks give the rows, blob
# bytes and output of a single process; a failing or killed rank leaves the database unchanged and
# the job ends with a clear error, without hanging; a plain run never loads libmpi.
source "$(dirname "$0")/lib.sh"

command -v mpirun >/dev/null 2>&1 || skip_all "mpirun is not installed (Debian: openmpi-bin)"
# containers often forbid the cross-process memory copy Open MPI's shared-memory transport tries first
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPI=(timeout 120 mpirun --oversubscribe)
# Open MPI's own allocations outlive MPI_Finalize (ompi_op_base_op_select, and MCA components that are
# dlclose'd, so their frames have no name to suppress): LeakSanitizer stays off inside mpirun's ranks
# of the sanitizer build (the plain runs here and the other scripts check qscope's own code for leaks).
asan_build && MPI+=(-x "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
[ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)
# a plain run's libraries: libmpi only ever comes from dlopen under a launcher
check "a plain run does not load libmpi" \
  "LD_DEBUG=libs '$QS' --version >$T/ld.txt 2>&1 && grep -q 'qscope' $T/ld.txt && ! grep -q 'libmpi' $T/ld.txt"

cd "$T"
# tensors of different sizes (the schedule balances by size) and one repeated content
for s in 1 2 3 4; do "$QS" gen gaussian --shape $((64 * s))x$((96 * (5 - s))) --seed $s -o g$s.npy >/dev/null 2>&1; done
"$QS" gen llm-act --shape 96x256 -o act.npy >/dev/null 2>&1
cp g2.npy same.npy
# and small ones: a rank takes all formats of such a tensor as one unit
for s in 1 2 3 4 5 6; do "$QS" gen laplace --shape 16x$((32 * s)) --seed $s -o s$s.npy >/dev/null 2>&1; done
"$QS" --db base.db import g1.npy g2.npy g3.npy g4.npy act.npy same.npy s?.npy >/dev/null 2>&1
fresh() { rm -f "$1" "$1-wal" "$1-shm"; sqlite3 base.db ".backup '$1'"; }
rows() {   # every stored result and array, ids included, without the creation time
  sqlite3 "$1" "SELECT id, tensor_hash, kind, format, options, tool_version, data FROM result ORDER BY id" | sha256sum
  sqlite3 "$1" "SELECT result_id, name, hex(data) FROM result_blob ORDER BY result_id, name" | sha256sum
}
same_pngs() {   # every PNG of $1, and at least one, has a byte-equal twin in $2
  local f n=0
  for f in "$1"/*.png; do [ -f "$f" ] && cmp -s "$f" "$2/$(basename "$f")" || return 1; n=$((n + 1)); done
  [ $n -gt 0 ]
}
F=mxfp4,nvfp4:nvfp4=torchao,fp8_e4m3,int8:gran=row,hif4

fresh single.db
ok "single process: analyze --blocks" "$QS" --db single.db analyze --all -f $F --blocks -j 1
cp "$T/out" single.txt
"$QS" --db single.db analyze --all -f $F --blocks -j 1 >single2.txt 2>single2.err
for n in 1 2 3; do
  fresh np$n.db
  ok "-np $n: analyze --blocks" "${MPI[@]}" -np $n "$QS" --db np$n.db analyze --all -f $F --blocks -j 1
  check "-np $n: the table of the single process, printed once" "cmp -s '$T/out' single.txt"
  check "-np $n: the same rows and blob bytes" "[ \"\$(rows np$n.db)\" = \"\$(rows single.db)\" ]"
done
ok "-np 2: the sweep again" "${MPI[@]}" -np 2 "$QS" --db np2.db analyze --all -f $F --blocks -j 1
check "-np 2: every result reused, as a single process reuses them" "cmp -s '$T/out' single2.txt"
check "-np 2: analyze's overflow note (fp8_e4m3 unscaled) once, as a single process prints it" \
  "[ \"\$(grep -c 'note: fp8_e4m3 overflowed' '$T/err')\" = \"\$(grep -c 'note: fp8_e4m3 overflowed' single2.err)\" ] && grep -q 'note: fp8_e4m3 overflowed' single2.err"
check "-np 2: nothing written by the reuse" "[ \"\$(rows np2.db)\" = \"\$(rows single.db)\" ]"
"$QS" --db single.db analyze 'g*' -f $F --json >single.json
ok "-np 3: --json" "${MPI[@]}" -np 3 "$QS" --db np3.db analyze 'g*' -f $F --json
check "-np 3: the JSON of the single process" "cmp -s '$T/out' single.json"

# report: its analyses are spread over the ranks, the report is rank 0's (run in twin directories:
# the database path and plot paths are part of the output)
mkdir rs rm cs cm
fresh rs/q.db; fresh rm/q.db
ok "single process: report" sh -c "cd rs && '$QS' --db q.db report -o out --claims none --formats mxfp4,fp8_e4m3,nvfp4"
ok "-np 2: report" sh -c "cd rm && ${MPI[*]} -np 2 '$QS' --db q.db report -o out --claims none --formats mxfp4,fp8_e4m3,nvfp4"
check "-np 2: report rows equal the single process's" "[ \"\$(rows rm/q.db)\" = \"\$(rows rs/q.db)\" ]"
# the report's "created" minute differs when the two runs straddle a minute
nostamp() { sed -E 's/[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2} UTC/DATE/' "$1"; }
check "-np 2: the same report (but for its creation minute)" "cmp -s <(nostamp rs/out/report.md) <(nostamp rm/out/report.md)"
check "-np 2: the same plots" "same_pngs rs/out rm/out"

# claims: one claim per unit, rank 0 prints, plots and stores
ok "single process: claims" sh -c "cd cs && '$QS' --db q.db claims --quick --only '[hu]*' --plots out --save"
cp "$T/out" claims1.txt
ok "-np 3: claims" sh -c "cd cm && ${MPI[*]} -np 3 '$QS' --db q.db claims --quick --only '[hu]*' --plots out --save"
check "-np 3: the claims table of the single process" "cmp -s '$T/out' claims1.txt"
check "-np 3: the same plots" "same_pngs cs/out cm/out"
check "-np 3: the same stored claims" \
  "[ \"\$(sqlite3 cm/q.db 'SELECT format, data FROM result ORDER BY id' | sha256sum)\" = \"\$(sqlite3 cs/q.db 'SELECT format, data FROM result ORDER BY id' | sha256sum)\" ]"

# a unit that fails (a file changed since import) stops every rank; nothing is stored
fresh bad.db
touch -d '2001-01-01' g3.npy
fails "-np 2: a stale reference is an error" 1 "${MPI[@]}" -np 2 "$QS" --db bad.db analyze --all -f $F
check "-np 2: the error names the file" "grep -q '^qscope: .*g3.npy: stale reference' '$T/err'"
check "-np 2: nothing stored, not even the units that succeeded" "[ \"\$(dbdump bad.db)\" = \"\$(dbdump base.db)\" ]"

# kill -9 one rank in the middle of a long sweep: a clear error, no hang, the database unchanged
"$QS" gen gaussian --shape 2048x1024 --seed 9 -o long.npy >/dev/null 2>&1
"$QS" --db long.db import long.npy >/dev/null 2>&1
# one tensor, more ranks than pairs: each pair is cut into parts of bands, merged on rank 0
fresh1() { rm -f "$2" "$2-wal" "$2-shm"; sqlite3 "$1" ".backup '$2'"; }
fresh1 long.db bs.db; fresh1 long.db bm.db
ok "single process: one tensor, --blocks" "$QS" --db bs.db analyze long -f mxfp4,nvfp4,int8:gran=row --blocks
cp "$T/out" bands.txt
ok "-np 3: one tensor cut by bands" "${MPI[@]}" -np 3 "$QS" --db bm.db analyze long -f mxfp4,nvfp4,int8:gran=row --blocks
check "-np 3, bands: the table of the single process" "cmp -s '$T/out' bands.txt"
check "-np 3, bands: the same rows and blob bytes" "[ \"\$(rows bm.db)\" = \"\$(rows bs.db)\" ]"

LONG=$(for k in $(seq 1 60); do printf 'mxfp4:round=sr:seed=%d,' $k; done)
before=$(dbdump long.db)
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
start=$(date +%s)
"${MPI[@]}" -np 2 "$QS" --db "$T/long.db" analyze --all -f "${LONG%,}" -j 1 >kill.out 2>kill.err &
job=$!
victim=
for i in $(seq 400); do
  for c in $(descendants $job); do
    grep -qxz 'OMPI_COMM_WORLD_RANK=1' "/proc/$c/environ" 2>/dev/null && victim=$c
  done
  [ -n "$victim" ] && break
  sleep 0.05
done
sleep 0.5
[ -n "$victim" ] && kill -9 "$victim"
wait $job; krc=$?
check "kill -9 of rank 1: found and killed" "[ -n '$victim' ]"
check "kill -9 of rank 1: non-zero exit, no hang (exit $krc)" "[ $krc -ne 0 ] && [ $krc -ne 124 ] && [ \$((\$(date +%s) - $start)) -lt 60 ]"
check "kill -9 of rank 1: one clear line from qscope" "[ \$(grep -c '^qscope: the MPI job was stopped' kill.err) = 1 ]"
check "kill -9 of rank 1: no row printed" "! grep -q mxfp4 kill.out"
check "kill -9 of rank 1: the database unchanged" "[ \"\$(dbdump long.db)\" = '$before' ]"
done_testing
