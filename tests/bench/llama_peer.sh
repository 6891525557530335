#!/bin/sh
# Peer benchmark for `qscope llm eval`: llama.cpp's `llama-perplexity` on the same GGUF, text and
# context, side by side in one run (tokens/s of the whole command and perplexity, both tools).
#
#   tests/bench/llama_peer.sh LLAMA_SRC MODEL TEXT
#
# LLAMA_SRC is a llama.cpp source tree, an unpacked llama-cpp-python sdist (its vendor/llama.cpp)
# or such an sdist (.tar.gz, unpacked into the build directory).  This script downloads nothing
# and nothing of llama.cpp is ever committed; it is an optional part of `make bench`
# (LLAMA_SRC=... make bench).  Environment:
#   LLAMA_BUILD  build directory (default build/llama-peer, git-ignored); llama-perplexity is
#                built there (cmake Release, GGML_NATIVE=ON, LLAMA_CURL=OFF, only that target,
#                under nice) when it is missing
#   QS_BIN       qscope binary (default build/qscope)
#   CHUNKS       chunks of 512 tokens to evaluate (default 16; empty = the whole text)
#   CTX          context (default 512)   THREADS  threads for llama.cpp (default 2)
#   REPS         runs of each command, best (shortest) kept (default 3)
#   QS_CONFIGS   extra qscope runs, space-separated --config specs (default "a=mxfp4"); each
#                is timed as reference + that config, tokens/s counting both variants; the
#                perplexity printed is the config's.  a=int8:gran=block:block=32,kv=fp16 mimics
#                llama.cpp's CPU numerics (8-bit activations per 32-block, F16 KV cache)
#
# Both tools score llama.cpp's convention: non-overlapping chunks of CTX tokens, the second half
# of each chunk (positions CTX/2 .. CTX-2).  Times are wall-clock of the whole command (model
# load, tokenization, evaluation); tokens/s = variants x chunks x CTX / seconds.  llama.cpp's own
# "prompt eval" rate (decode only) is printed as well.
set -eu

src=${1:?usage: $0 LLAMA_SRC MODEL TEXT}
model=${2:?usage: $0 LLAMA_SRC MODEL TEXT}
text=${3:?usage: $0 LLAMA_SRC MODEL TEXT}
bld=${LLAMA_BUILD:-build/llama-peer}
qs=${QS_BIN:-build/qscope}
chunks=${CHUNKS-16}
ctx=${CTX:-512}
threads=${THREADS:-2}
reps=${REPS:-3}
configs=${QS_CONFIGS-a=mxfp4}

[ -x "$qs" ] || { echo "$qs: not built (run make first)" >&2; exit 2; }
[ -s "$model" ] || { echo "$model: no such model" >&2; exit 2; }
[ -s "$text" ] || { echo "$text: no such text" >&2; exit 2; }
mkdir -p "$bld"

# Find the llama.cpp tree: itself, an unpacked sdist, or an sdist to unpack.
if [ -f "$src" ]; then
    case "$src" in
    *.tar.gz | *.tgz) ;;
    *) echo "$src: not a directory or a .tar.gz sdist" >&2; exit 2 ;;
    esac
    mkdir -p "$bld/src"
    tar -xzf "$src" -C "$bld/src" || { echo "$src: cannot unpack" >&2; exit 2; }
    src=$(find "$bld/src" -maxdepth 3 -type d -path '*/vendor/llama.cpp' | head -1)
elif [ -d "$src/vendor/llama.cpp" ]; then
    src=$src/vendor/llama.cpp
fi
if [ -z "$src" ] || [ ! -f "$src/tools/perplexity/perplexity.cpp" ]; then
    echo "${1}: no llama.cpp sources (tools/perplexity/perplexity.cpp) found" >&2; exit 2
fi

bin=$(find "$bld" -name llama-perplexity -type f -perm -u+x 2>/dev/null | head -1)
if [ -z "$bin" ]; then
    echo "building llama-perplexity in $bld (a few minutes) ..." >&2
    nice -n 10 cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
        -DLLAMA_CURL=OFF -DFETCHCONTENT_FULLY_DISCONNECTED=ON >"$bld/cmake.log" 2>&1 \
        || { tail -20 "$bld/cmake.log" >&2; exit 1; }
    nice -n 10 cmake --build "$bld" --target llama-perplexity -j "$(nproc)" >"$bld/build.log" 2>&1 \
        || { tail -40 "$bld/build.log" >&2; exit 1; }
    bin=$(find "$bld" -name llama-perplexity -type f -perm -u+x | head -1)
fi

commit=$(git -C "$src" rev-parse --short=12 HEAD 2>/dev/null) \
    || commit="from llama-cpp-python $(sed -n 's/^Version: //p' "$src/../../PKG-INFO" 2>/dev/null || true)"
# wall seconds and CPU seconds (user + system, all threads) of one command, into $tmp/t
timer="/usr/bin/time -f %e_%U_%S -o"
ck=""; [ -n "$chunks" ] && ck="--chunks $chunks"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llama-peer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
[ -x /usr/bin/time ] || { echo "/usr/bin/time is needed (apt-get install time)" >&2; exit 2; }
timer="$timer $tmp/t.raw"
fix_t() { tr '_' ' ' <"$tmp/t.raw" | awk '{print $1, $2 + $3}' >"$tmp/t"; }

echo "machine: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "llama.cpp $commit ($bin); $("$qs" --version 2>/dev/null | head -1)"
echo "model $model; text $text; ctx $ctx; chunks ${chunks:-all}; best of $reps"

# qscope: a fresh database each run (results are cached otherwise).  Prints "seconds ppl tokens".
qs_run() {  # qs_run CONFIG-ARGS...
    best=""
    r=0
    while [ "$r" -lt "$reps" ]; do
        rm -f "$tmp/q.db"
        # shellcheck disable=SC2086
        OPENBLAS_VERBOSE=2 $timer "$qs" --db "$tmp/q.db" llm eval --model "$model" --text "$text" --ctx "$ctx" $ck "$@" \
            --json >"$tmp/q.json" 2>"$tmp/q.err" || { cat "$tmp/q.err" >&2; exit 1; }
        fix_t; read -r s cpu <"$tmp/t"
        if [ -z "$best" ] || [ "$(echo "$s < $best" | bc -l)" = 1 ]; then best=$s; bcpu=$cpu; fi
        r=$((r + 1))
    done
    # the reference's perplexity, or the config's when one is given
    ppl=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print((d["configs"] or [d["reference"]])[0]["ppl"])' "$tmp/q.json")
    nch=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["chunks"])' "$tmp/q.json")
    # OPENBLAS_VERBOSE=2 makes OpenBLAS print "Core: NAME" at load (twice when qscope re-executes
    # itself with OPENBLAS_CORETYPE set, app/cli/blas_core.c): the last one is the core that ran.
    core=$(sed -n 's/^Core: *//p' "$tmp/q.err" | tail -1)
    echo "$best $ppl $nch ${core:-unknown} $bcpu"
}

# llama-perplexity.  Prints "seconds ppl ppl_se chunks prompt_eval_tok_per_s".
ll_run() {
    best=""
    r=0
    while [ "$r" -lt "$reps" ]; do
        # shellcheck disable=SC2086
        $timer "$bin" -m "$model" -f "$text" -c "$ctx" -t "$threads" $ck >"$tmp/l.out" 2>&1 \
            || { tail -20 "$tmp/l.out" >&2; exit 1; }
        fix_t; read -r s cpu <"$tmp/t"
        if [ -z "$best" ] || [ "$(echo "$s < $best" | bc -l)" = 1 ]; then best=$s; bcpu=$cpu; cp "$tmp/l.out" "$tmp/l.best"; fi
        r=$((r + 1))
    done
    # its log lines may carry a time stamp prefix ("0.24.579.312 I Final estimate: ...")
    ppl=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 \2/p' "$tmp/l.best")
    nch=$(sed -n 's/.*calculating perplexity over \([0-9]*\) chunks.*/\1/p' "$tmp/l.best")
    nseq=$(sed -n 's/.*calculating perplexity over .*n_seq=\([0-9]*\).*/\1/p' "$tmp/l.best")
    # "S seconds per pass": the first batch of n_seq chunks, decode only (no load, no tokenizing)
    sp=$(sed -n 's/.* \([0-9.]*\) seconds per pass.*/\1/p' "$tmp/l.best")
    pe=$(echo "${nseq:-0} * $ctx / ${sp:-0}" | bc -l 2>/dev/null || echo "?")
    [ -n "$ppl" ] || { echo "llama-perplexity printed no final estimate:" >&2; tail -20 "$tmp/l.best" >&2; exit 1; }
    echo "$best $ppl $nch $bcpu $pe"
}

printf '\n%-32s %8s %8s %6s %8s %9s %11s  %s\n' run wall_s cpu_s chunks "tok/s" "tok/cpu_s" perplexity note
out=$(ll_run) || exit 1
# shellcheck disable=SC2086
set -- $out
ltoks=$(echo "$4 * $ctx / $1" | bc -l)
printf '%-32s %8.2f %8.2f %6d %8.1f %9.1f %11.4f  +/- %s; first pass %.1f tok/s (decode only)\n' \
    "llama-perplexity -t $threads" "$1" "$5" "$4" "$ltoks" "$(echo "$4 * $ctx / $5" | bc -l)" "$2" "$3" "$6"
lppl=$2
out=$(qs_run) || exit 1
# shellcheck disable=SC2086
set -- $out
qtoks=$(echo "$3 * $ctx / $1" | bc -l)
printf '%-32s %8.2f %8.2f %6d %8.1f %9.1f %11.4f  OpenBLAS core %s\n' "qscope llm eval (reference)" "$1" "$5" "$3" \
    "$qtoks" "$(echo "$3 * $ctx / $5" | bc -l)" "$2" "$4"
echo "qscope / llama.cpp: tokens/s x$(printf '%.2f' "$(echo "$qtoks / $ltoks" | bc -l)");" \
    "perplexity $(printf '%+.3f' "$(echo "($2 / $lppl - 1) * 100" | bc -l)")%"
for c in $configs; do
    out=$(qs_run --config "$c") || exit 1
    # shellcheck disable=SC2086
    set -- $out
    printf '%-32s %8.2f %8.2f %6d %8.1f %9.1f %11.4f  2 variants (reference + config); core %s\n' "qscope llm eval + $c" \
        "$1" "$5" "$3" "$(echo "2 * $3 * $ctx / $1" | bc -l)" "$(echo "2 * $3 * $ctx / $5" | bc -l)" "$2" "$4"
done
