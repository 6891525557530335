#!/usr/bin/env bash
# Low memory: under `ulimit -v` from 64 MiB up, every kind of command (no command, ls, import,
# analyze, quant, llm eval, attn, msd) either works or says in one line that memory is short and
# exits 1 -- never a hang, never a signal.  OpenBLAS maps a 128 MiB buffer per computing thread and
# retried a failed mmap forever (even `qscope --version` hung at 100-190 MiB; lower, a failed
# pthread_create in OpenBLAS raised SIGINT).  app/cli/blas_limit.c caps its threads and guards the buffer.
source "$(dirname "$0")/lib.sh"
asan_build && skip_all "asan: AddressSanitizer cannot start under ulimit -v"
unset OPENBLAS_NUM_THREADS GOTO_NUM_THREADS OMP_NUM_THREADS QS_BLAS_THREADS_CAPPED
TINY="$FIX/llm/tiny.gguf"
python3 - "$T/text.txt" <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(8)).capitalize() + "." for _ in range(70)) + "\n")
PY
ok "a database with a generated tensor" "$QS" --db "$T/base.db" gen gaussian --n 4096 --name g

# lowmem LIMIT_KB DESC CMD...: exit 0, or exit 1 ending in a `qscope: ...` line (msd prints progress
# lines before); 124 (timeout) or >= 128 (signal) fail
lowmem() {
  local kb=$1 d=$2; shift 2
  _n=$((_n + 1))
  cp "$T/base.db" "$T/run.db"
  timeout 20 bash -c 'ulimit -v "$0" && exec "$@"' "$kb" "$QS" --db "$T/run.db" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ $rc -eq 127 ] && grep -q "error while loading shared libraries" "$T/err"; then
    echo "ok $_n - $d at $((kb / 1024)) MiB # SKIP the system's dynamic loader cannot map the libraries at this limit"
  elif [ $rc -eq 0 ] || { [ $rc -eq 1 ] && tail -n 1 "$T/err" | grep -q "^qscope: "; }; then
    echo "ok $_n - $d at $((kb / 1024)) MiB (exit $rc)"
  else
    echo "not ok $_n - $d at $((kb / 1024)) MiB (exit $rc$([ $rc -eq 124 ] && echo ': hung'))"
    echo "# cmd: ulimit -v $kb; $QS $*"; sed 's/^/#   /' "$T/err" | head -5
  fi
}

for mib in 64 80 100 128 150 190 240 300; do
  kb=$((mib * 1024))
  lowmem $kb "--version" --version
  lowmem $kb "ls" ls
  lowmem $kb "import" import "$FIX/npy/f4_2x3.npy"
  lowmem $kb "analyze" analyze g -f mxfp4,hif8
  lowmem $kb "quant of a stored tensor" quant g -f nvfp4 --name gq
  lowmem $kb "llm eval (tiny model)" llm eval --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 2
  lowmem $kb "attn" attn --L 128 --H 2 --threads 2
  lowmem $kb "msd" msd --M 8 --K 256 --N 64
done

# the message names the limit, and a limit that fits works.  llm eval's forward runs on qscope's own
# panel GEMM (kernels/llm_pgemm.c), so it needs no OpenBLAS work buffer and fits in 128 MiB; msd
# still multiplies through OpenBLAS
timeout 20 bash -c 'ulimit -v 131072 && exec "$0" msd --M 8 --K 256 --N 64' "$QS" >"$T/out" 2>"$T/err"
check "msd at 128 MiB: 'not enough memory ... ulimit -v (... MiB)'" \
  'grep -Eq "^qscope: not enough memory: OpenBLAS needs a 128 MiB work buffer and .ulimit -v. \([0-9]+ MiB\)" "$T/err"'
ok "llm eval at 128 MiB works (no OpenBLAS buffer)" bash -c 'ulimit -v 131072 && exec "$0" llm eval --model "$1" --text "$2" --ctx 64 --chunks 2' \
  "$QS" "$TINY" "$T/text.txt"
ok "llm eval at 512 MiB works" bash -c 'ulimit -v 524288 && exec "$0" llm eval --model "$1" --text "$2" --ctx 64 --chunks 2' \
  "$QS" "$TINY" "$T/text.txt"

# --text over the 1 GiB limit: refused from its size before a byte is read (a sparse file costs no
# disk), the file named; it used to read 2 GiB first (51 s here) and end in another error
truncate -s 1300M "$T/big.txt"
refuses "llm eval --text of 1.3 GiB: refused from its size, naming the file" 1 \
  "^qscope: .*big\.txt: 1363148800 bytes, larger than the 1 GiB limit for a text$" \
  timeout 10 "$QS" llm eval --model "$TINY" --text "$T/big.txt" --ctx 64
refuses "llm sensitivity too" 1 "big\.txt: 1363148800 bytes, larger than the 1 GiB limit" \
  timeout 10 "$QS" llm sensitivity --model "$TINY" --text "$T/big.txt" --ctx 64 --format mxfp4
refuses "a missing --text: named, with the reason" 1 "no-such\.txt: cannot open: No such file or directory" \
  "$QS" llm eval --model "$TINY" --text "$T/no-such.txt" --ctx 64
done_testing
