#!/usr/bin/env bash
# llama.cpp's quantization types as formats (kernels/format_ggml*.c): listed, quantizing on stdin,
# explain, analyze, llm eval with w= and a=, options refused; and, where llama.cpp's llama-quantize is
# built, every block it writes compared with qscope's encoding of the same F32 weights, without and
# with an importance matrix (--imatrix): a generated one, and qscope's own (`llm imatrix`, both formats,
# and the model llama-quantize makes with it evaluated against w=F:imatrix=FILE).
#   peer: $LLAMA_QUANTIZE, or llama-quantize found under $LLAMA_BUILD (default build/llama-peer, as
#   tests/bench/llama_peer.sh builds it); a generated F32 model (2 layers, dim 256, FFN 512) is
#   quantized to each type with --pure, plus $QS_GGML_F32 (an F32 GGUF such as SmolLM2's) when set.
source "$(dirname "$0")/lib.sh"
TYPES="q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs"

ok "formats --json lists llama.cpp's types with their bits per weight" bash -c "$QS formats --json | python3 -c '
import json, sys
f = {x[\"name\"]: x for x in json.load(sys.stdin)}
want = dict(q4_0=4.5, q4_1=5, q5_0=5.5, q5_1=6, q8_0=8.5, q2_k=2.625, q3_k=3.4375, q4_k=4.5, q5_k=5.5, q6_k=6.5625,
            iq4_nl=4.5, iq4_xs=4.25, q8_1=9, q8_k=9.125)
for n, b in want.items():
    assert n in f and f[n][\"family\"] == \"ggml\" and abs(f[n][\"bits_per_element\"] - b) < 1e-9, n
'"
# min 0, max 15 over 32 values: d = 1, m = 0, every value exact
ok "q4_1 of 0..15 twice is exact" bash -c "(seq 0 15; seq 0 15) | $QS quant -f q4_1 | paste -sd' ' | grep -qx '$(echo $(seq 0 15) $(seq 0 15))'"
# q8_0 of k/127, k = -127..-96: amax 1, d = fp16(1/127), codes k
ok "q8_0 codes are round(x / d)" bash -c "for k in \$(seq -127 -96); do python3 -c \"print(\$k/127)\"; done | $QS quant -f q8_0 --codes | head -2 | grep -qx '0x81 0x0820'"
ok "every type answers on stdin (a partial block padded with zeros)" bash -c "for f in $TYPES q8_1 q8_k; do printf '0.1 -2 3.5 1e-3 7\n' | $QS quant -f \$f | wc -l | grep -qx 5 || { echo \$f; exit 1; }; done"
ok "explain shows a q4_k block header" bash -c "$QS explain -f q4_k 0.5 -1.25 3 | grep -q 'dmin FP16'"
refuses "q4_k's block is fixed" 1 "fixed blocks of 256" bash -c "echo 1 | $QS quant -f q4_k --block 32"
refuses "llama.cpp's types take no rounding option" 2 "does not support rounding 'rne' \(supported: ggml\)" bash -c "echo 1 | $QS quant -f q4_k --round rne"
ok "gen a tensor" "$QS" gen llm-act --shape 32x512 --seed 4 --name act
ok "analyze under q4_k, iq4_xs, q8_1" bash -c "$QS analyze act -f q4_k,iq4_xs,q8_1 --json > $T/an.json && python3 -c '
import json; r = json.load(open(\"$T/an.json\"))
assert [x[\"format\"] for x in r] == [\"q4_k\", \"iq4_xs\", \"q8_1\"], r
assert all(0 < x[\"metrics\"][\"sqnr_db\"] < 200 for x in r)
'"
TINY=$FIX/llm/tiny.gguf
printf 'the quantize is a test of the model and the text. ' > "$T/text.txt"; for i in $(seq 6); do cat "$T/text.txt" "$T/text.txt" > "$T/t2" && mv "$T/t2" "$T/text.txt"; done
ok "llm eval: w=q4_k, w=q4_1,a=q8_1, a=q8_k" bash -c "$QS llm eval --model $TINY --text $T/text.txt --ctx 32 --chunks 2 --config w=q4_k --config w=q4_1,a=q8_1 --config a=q8_k --json > $T/ev.json && python3 -c '
import json; d = json.load(open(\"$T/ev.json\"))
assert [c[\"label\"] for c in d[\"configs\"]] == [\"w=q4_k\", \"w=q4_1,a=q8_1\", \"a=q8_k\"]
assert all(c[\"kl_mean\"] > 0 for c in d[\"configs\"])
'"
ok "train: GEMM operands in llama.cpp's types" bash -c "$QS train --text $T/text.txt --val-text $T/text.txt --layers 1 --dim 64 --heads 2 --kv-heads 2 --ffn 128 --ctx 32 --steps 2 --op fwd.w=q4_k --op fwd.x=q8_k --op dgrad.w=q4_0 --op wgrad.x=q8_0 --no-store > $T/tr.txt 2>&1 && grep -q 'fwd.x=q8_k fwd.w=q4_k' $T/tr.txt"

# ---- the peer: llama-quantize's blocks ------------------------------------------------------------
LQ=${LLAMA_QUANTIZE:-}
[ -n "$LQ" ] || LQ=$(find "${LLAMA_BUILD:-$ROOT/build/llama-peer}" -name llama-quantize -type f -perm -u+x 2>/dev/null | head -1)
UNIT=$(dirname "$QS")/tests/test_format_ggml
if [ -z "$LQ" ] || [ ! -x "$LQ" ]; then
  skip "llama-quantize's blocks equal qscope's" "data: llama-quantize not built (LLAMA_QUANTIZE, or LLAMA_BUILD; tests/bench/llama_peer.sh builds llama.cpp)"
elif [ ! -x "$UNIT" ]; then
  skip "llama-quantize's blocks equal qscope's" "data: $UNIT not built (make build/tests/test_format_ggml)"
else
  export LD_LIBRARY_PATH="$(dirname "$LQ")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  P=$T/peer; mkdir -p "$P"
  ok "generate an F32 model (dim 256, FFN 512)" /usr/bin/python3 -c "
import sys; sys.path.insert(0, '$ROOT/tests/llm')
import make_tiny_gguf as m, gguf_io as g
m.build('$P/f32.gguf', True, 31, nl=2, dim=256, ffn=512, lin=g.GGML_F32, emb=g.GGML_F32)"
  files=""
  for t in $TYPES; do
    "$LQ" --pure "$P/f32.gguf" "$P/$t.gguf" "$(echo "$t" | tr a-z A-Z)" 1 >"$P/$t.log" 2>&1 || { echo "# llama-quantize $t failed"; tail -3 "$P/$t.log" | sed 's/^/#   /'; }
    files="$files $t.gguf"
  done
  ok "llama-quantize's blocks equal qscope's, every type (0 differing)" bash -c "cd $ROOT/tests && QS_GGML_PEER_DIR=$P QS_GGML_PEER_FILES='$files' $UNIT > $P/unit.txt 2>&1; rc=\$?; grep '^# peer' $P/unit.txt >&2; grep -q 'peer total: .* 0 differing' $P/unit.txt && [ \$rc = 0 ]"
  sed -n 's/^# peer /# peer /p' "$P/unit.txt"
  # with an importance matrix: a legacy .dat (ncall 1, so the importances are its sums) over every
  # 2-D weight but the token embedding, a few columns 0, as llama-imatrix writes them
  mkimat() {   # mkimat F32.gguf OUT.dat
    /usr/bin/python3 -c "
import struct, sys, numpy as np
sys.path.insert(0, '$ROOT/tests/llm')
import gguf_io as g
r = g.Reader('$1'); rng = np.random.default_rng(5)
ents = [(n, ne) for n, ne, t, o in r.infos if len(ne) == 2 and n != 'token_embd.weight']
out = open('$2', 'wb'); out.write(struct.pack('<i', len(ents)))
for n, ne in ents:
    v = (rng.random(ne[0]) ** 2 * 3).astype(np.float32); v[::97] = 0
    out.write(struct.pack('<i', len(n)) + n.encode() + struct.pack('<ii', 1, ne[0]) + v.tobytes())
"
  }
  mkimat "$P/f32.gguf" "$P/imatrix.dat"
  files=""
  for t in $TYPES; do
    "$LQ" --pure --imatrix "$P/imatrix.dat" "$P/f32.gguf" "$P/imat-$t.gguf" "$(echo "$t" | tr a-z A-Z)" 1 >"$P/imat-$t.log" 2>&1 || { echo "# llama-quantize --imatrix $t failed"; tail -3 "$P/imat-$t.log" | sed 's/^/#   /'; }
    files="$files imat-$t.gguf"
  done
  ok "with an imatrix: llama-quantize's blocks equal qscope's, every type (0 differing)" bash -c "cd $ROOT/tests && QS_GGML_PEER_DIR=$P QS_GGML_PEER_FILES='$files' QS_GGML_PEER_IMATRIX=$P/imatrix.dat $UNIT > $P/unit-imat.txt 2>&1; rc=\$?; grep -q 'peer total: [0-9]* blocks ([1-9][0-9]* with an imatrix), 0 differing' $P/unit-imat.txt && [ \$rc = 0 ]"
  sed -n 's/^# peer /# peer (imatrix) /p' "$P/unit-imat.txt"
  # qscope's own importance matrix (llm imatrix) in both formats given to llama-quantize, and the same
  # file as w=F:imatrix=FILE: llama-quantize's blocks are qscope's, and its model evaluates exactly as
  # qscope's rounding (the same perplexity to the last bit, for the types the model loader decodes)
  ok "llm imatrix on the generated model (gguf and dat)" bash -c "$QS llm imatrix --model $P/f32.gguf --text $T/text.txt --ctx 32 --chunks 4 -o $P/ours.gguf >/dev/null && $QS llm imatrix --model $P/f32.gguf --text $T/text.txt --ctx 32 --chunks 4 -o $P/ours.dat >/dev/null"
  for fmt in gguf dat; do
    files=""
    for t in $TYPES; do
      "$LQ" --pure --imatrix "$P/ours.$fmt" "$P/f32.gguf" "$P/ours-$fmt-$t.gguf" "$(echo "$t" | tr a-z A-Z)" 1 >"$P/ours-$fmt-$t.log" 2>&1 || { echo "# llama-quantize --imatrix ours.$fmt $t failed"; tail -3 "$P/ours-$fmt-$t.log" | sed 's/^/#   /'; }
      files="$files ours-$fmt-$t.gguf"
    done
    ok "llama-quantize --imatrix (qscope's .$fmt): blocks equal qscope's, every type (0 differing)" bash -c "cd $ROOT/tests && QS_GGML_PEER_DIR=$P QS_GGML_PEER_FILES='$files' QS_GGML_PEER_IMATRIX=$P/ours.$fmt $UNIT > $P/unit-ours-$fmt.txt 2>&1; rc=\$?; grep -q 'peer total: [0-9]* blocks ([1-9][0-9]* with an imatrix), 0 differing' $P/unit-ours-$fmt.txt && [ \$rc = 0 ]"
    sed -n "s/^# peer /# peer (qscope's .$fmt) /p" "$P/unit-ours-$fmt.txt" | tail -1
  done
  ok "bench quantize --peer: every type side by side, 0 differing blocks (with qscope's imatrix)" bash -c "$QS bench quantize --model $P/f32.gguf --peer $LQ --imatrix $P/ours.gguf --threads 2 > $P/bq.txt && [ \$(grep -cE '^(q|iq)[0-9a-z_]+ .* [1-9][0-9]* +0\$' $P/bq.txt) = 12 ]"
  sed 's/^/# /' "$P/bq.txt"
  for t in q4_0 q4_k; do   # the token embedding kept F32, as w= keeps an untied one
    "$LQ" --pure --token-embedding-type f32 --imatrix "$P/ours.gguf" "$P/f32.gguf" "$P/ev-$t.gguf" "$(echo "$t" | tr a-z A-Z)" 1 >"$P/ev-$t.log" 2>&1
    ok "llama-quantize --imatrix's $t model evaluates as w=$t:imatrix= (same perplexity)" bash -c "$QS llm eval --model $P/ev-$t.gguf --text $T/text.txt --ctx 32 --chunks 2 --json > $P/ev-lq-$t.json && $QS llm eval --model $P/f32.gguf --text $T/text.txt --ctx 32 --chunks 2 --config w=$t:imatrix=$P/ours.gguf --config w=$t --json > $P/ev-qs-$t.json 2>$P/ev-qs-$t.err && python3 -c '
import json; a = json.load(open(\"$P/ev-lq-$t.json\")); b = json.load(open(\"$P/ev-qs-$t.json\"))
c = b[\"configs\"]
assert c[0][\"ppl\"] == a[\"reference\"][\"ppl\"], (c[0][\"ppl\"], a[\"reference\"][\"ppl\"])
assert c[1][\"ppl\"] != c[0][\"ppl\"]
'"
  done
  ok "quant -f q4_k:imatrix= of a stored tensor: llama-quantize's decoded values (same statistics)" bash -c "$QS import $P/f32.gguf >/dev/null && $QS import $P/ev-q4_k.gguf >/dev/null && $QS quant -f q4_k:imatrix=$P/ours.gguf f32:blk.1.ffn_down.weight --name mine >/dev/null && $QS show mine --json > $P/mine.json && $QS show ev-q4_k:blk.1.ffn_down.weight --json > $P/lq.json && python3 -c '
import json; a = json.load(open(\"$P/mine.json\"))[\"stats\"]; b = json.load(open(\"$P/lq.json\"))[\"stats\"]
for k in (\"min\", \"max\", \"mean\", \"std\", \"n_zero\", \"percentiles\", \"row_absmax\", \"col_absmax\"): assert a[k] == b[k], (k, a[k], b[k])
'"
  if [ -n "${QS_GGML_F32:-}" ]; then
    B=$T/big; mkdir -p "$B"; ln -s "$(cd "$(dirname "$QS_GGML_F32")" && pwd)/$(basename "$QS_GGML_F32")" "$B/f32.gguf"; files=""
    for t in $TYPES; do "$LQ" --pure "$B/f32.gguf" "$B/$t.gguf" "$(echo "$t" | tr a-z A-Z)" 2 >"$B/$t.log" 2>&1; files="$files $t.gguf"; done
    ok "$QS_GGML_F32: llama-quantize's blocks equal qscope's (0 differing)" bash -c "cd $ROOT/tests && QS_GGML_PEER_DIR=$B QS_GGML_PEER_FILES='$files' $UNIT > $B/unit.txt 2>&1; grep -q 'peer total: .* 0 differing' $B/unit.txt"
    sed -n 's/^# peer /# peer /p' "$B/unit.txt"
  fi
fi
done_testing
