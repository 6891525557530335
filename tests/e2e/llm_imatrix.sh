#!/usr/bin/env bash
# `llm imatrix` (llama.cpp's importance matrix from qscope's forward pass) and `w=F:imatrix=FILE`.
#   - against the committed files llama-imatrix wrote (tests/fixtures/imatrix/make_imatrix.sh) for the
#     same generated F32 model and text: every column's sum within 1% (median 1e-3) of llama.cpp's,
#     counts, names, metadata and the GGUF header equal (the forward passes sum in other orders);
#   - the option: results keyed by the file's hash, refusals in one line;
#   - where llama.cpp is built ($LLAMA_BUILD, default build/llama-peer; llama-imatrix), a live run of
#     llama-imatrix on the same model and text, and on $QS_GGML_F32 (an F32 GGUF such as SmolLM2's)
#     when set.  llama-quantize's blocks with qscope's files: tests/e2e/ggml_quant.sh.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
IM=$FIX/imatrix

ok "generate the F32 model of the committed files" $PY -c "
import sys; sys.path.insert(0, '$ROOT/tests/llm')
import make_tiny_gguf as m, gguf_io as g
m.build('$T/f32.gguf', True, 23, lin=g.GGML_F32, emb=g.GGML_F32)"
# the dataset name in the files is the --text path as given: run where text.txt is
run_im() { (cd "$IM" && "$QS" llm imatrix --model "$T/f32.gguf" --text text.txt --ctx 32 --chunks 3 --process-output "$@"); }
ok "llm imatrix: GGUF" bash -c "$(declare -f run_im); IM=$IM QS=$QS T=$T; run_im -o $T/ours.gguf > $T/im.out && grep -q 'wrote .*GGUF, 15 entries, 3 chunks of 32 tokens' $T/im.out"
ok "llm imatrix: legacy .dat (by the name, and by --format)" bash -c "$(declare -f run_im); IM=$IM QS=$QS T=$T; run_im -o $T/ours.dat >/dev/null && run_im -o $T/ours.bin --format dat >/dev/null && cmp $T/ours.dat $T/ours.bin"

cmp_py='
import sys, struct; sys.path.insert(0, sys.argv[1] + "/tests/llm")
import gguf_io as g, numpy as np
def load(p):
    b = open(p, "rb").read()
    if b[:4] == b"GGUF":
        r = g.Reader(p)
        return {n[:-8]: (r.tensor(n).astype(np.float64), r.tensor(n[:-8] + ".counts")) for n, *_ in r.infos if n.endswith(".in_sum2")}, r.kv
    n, = struct.unpack_from("<i", b); p = 4; d = {}
    for _ in range(n):
        l, = struct.unpack_from("<i", b, p); name = b[p + 4:p + 4 + l].decode(); p += 4 + l
        nc, nv = struct.unpack_from("<ii", b, p); p += 8
        d[name] = (np.frombuffer(b, np.float32, nv, p).astype(np.float64), nc); p += 4 * nv
    return d, {"tail": b[p:]}
a, ka = load(sys.argv[2]); b, kb = load(sys.argv[3])
assert sorted(a) == sorted(b), set(a) ^ set(b)
assert ka == kb, (ka, kb)
rel = []
for n in a:
    assert np.all(np.asarray(a[n][1]) == np.asarray(b[n][1])), (n, a[n][1], b[n][1])
    rel.append(np.abs(a[n][0] - b[n][0]) / np.abs(b[n][0]).clip(1e-30))
rel = np.concatenate(rel)
print("# %d columns: relative difference median %.2g, max %.2g" % (len(rel), np.median(rel), rel.max()))
assert rel.max() < 1e-2 and np.median(rel) < 1e-3, (rel.max(), np.median(rel))
'
ok "GGUF: equals llama-imatrix's (columns within 1%, counts, names and metadata equal)" $PY -c "$cmp_py" "$ROOT" "$T/ours.gguf" "$IM/peer.gguf"
ok ".dat: equals llama-imatrix's (the same, ncall and trailer equal)" $PY -c "$cmp_py" "$ROOT" "$T/ours.dat" "$IM/peer.dat"
ok "GGUF: byte for byte llama-imatrix's up to the data" bash -c "n=\$(grep -oba 'blk.1.ffn_up.weight.counts' $IM/peer.gguf | tail -1 | cut -d: -f1); cmp -n \$((n + 60)) $T/ours.gguf $IM/peer.gguf"
ok "--show reads both formats" bash -c "$QS llm imatrix --show $IM/peer.dat | grep -q 'legacy .dat, 15 entries, 3 chunks, dataset text.txt' && $QS llm imatrix --show $T/ours.gguf | grep -Eq '^output.weight +64 +1 +96 '"
refuses "--show: a file that is not an imatrix" 1 "not an importance matrix: .*entry count" "$QS" llm imatrix --show "$IM/text.txt"
refuses "--show: a missing file" 1 "nope.dat" "$QS" llm imatrix --show "$T/nope.dat"
refuses "--ctx below 16" 2 "--ctx" "$QS" llm imatrix --model "$T/f32.gguf" --text "$IM/text.txt" --ctx 8 -o "$T/x.gguf"
refuses "--format" 2 "gguf or dat" "$QS" llm imatrix --model "$T/f32.gguf" --text "$IM/text.txt" --format npy -o "$T/x.gguf"
head -c 200 "$IM/text.txt" > "$T/short.txt"
refuses "a text shorter than two chunks" 2 "too short" "$QS" llm imatrix --model "$T/f32.gguf" --text "$T/short.txt" --ctx 128 -o "$T/x.gguf"
refuses "no -o" 2 "-o FILE" "$QS" llm imatrix --model "$T/f32.gguf" --text "$IM/text.txt"
refuses "an unwritable -o" 1 "cannot write" "$QS" llm imatrix --model "$T/f32.gguf" --text "$IM/text.txt" --ctx 32 --chunks 2 -o "$T/no/such/dir.gguf"

# ---- w=F:imatrix=FILE ---------------------------------------------------------------------------
TXT=$IM/text.txt
ev() { "$QS" llm eval --model "$T/f32.gguf" --text "$TXT" --ctx 32 --chunks 2 --json "$@"; }
ok "llm eval: w=q4_0:imatrix= differs from w=q4_0, keyed by the file's hash" bash -c "$(declare -f ev); QS=$QS T=$T TXT=$TXT; ev --config w=q4_0:imatrix=$T/ours.gguf --config w=q4_0 --config w=iq4_nl:imatrix=$IM/peer.dat > $T/ev.json 2>$T/ev.err && $PY -c '
import json; d = json.load(open(\"$T/ev.json\")); c = d[\"configs\"]
assert c[0][\"label\"].startswith(\"w=q4_0:imatrix=ours.gguf@\"), c[0][\"label\"]
assert c[0][\"numerics\"][\"imatrix\"][:8] == c[0][\"label\"][-8:], c[0][\"numerics\"]
assert \"imatrix\" not in c[1][\"numerics\"]
assert c[0][\"kl_mean\"] != c[1][\"kl_mean\"] and c[0][\"kl_mean\"] > 0
'"
ok "the same configuration again is reused; another file is not" bash -c "$(declare -f ev); QS=$QS T=$T TXT=$TXT; ev --config w=q4_0:imatrix=$T/ours.gguf --config w=q4_0:imatrix=$T/ours.dat > $T/ev2.json 2>/dev/null && $PY -c '
import json; a = json.load(open(\"$T/ev.json\"))[\"configs\"][0]; c = json.load(open(\"$T/ev2.json\"))[\"configs\"]
assert c[0][\"cached\"] and c[0][\"kl_mean\"] == a[\"kl_mean\"], c[0]
assert not c[1][\"cached\"] and c[1][\"numerics\"][\"imatrix\"] != c[0][\"numerics\"][\"imatrix\"]
'"
ok "a weight the file lacks is rounded without importances, with a note (llama-quantize's rule)" bash -c "$QS llm eval --model $FIX/llm/tiny.gguf --text $TXT --ctx 32 --chunks 2 --config w=q4_0:imatrix=$T/ours.gguf > /dev/null 2>$T/note.err && grep -q 'no entry for 1 weight (token_embd.weight): rounded without importances, as llama-quantize does' $T/note.err"
refuses "q8_0 takes no importance matrix" 2 "q8_0 takes no importance matrix" "$QS" llm eval --model "$T/f32.gguf" --text "$TXT" --config "w=q8_0:imatrix=$T/ours.gguf"
refuses "imatrix= with rot=" 2 "imatrix= cannot be combined with rot= or rht=" "$QS" llm eval --model "$T/f32.gguf" --text "$TXT" --config "rot=hadamard,w=q4_0:imatrix=$T/ours.gguf"
refuses "mxfp4 takes no importance matrix" 2 "mxfp4 takes no importance matrix" "$QS" llm eval --model "$T/f32.gguf" --text "$TXT" --config "w=mxfp4:imatrix=$T/ours.gguf"
refuses "fp32 takes none" 2 "w=fp32 takes no importance matrix" "$QS" llm eval --model "$T/f32.gguf" --text "$TXT" --config "w=fp32:imatrix=$T/ours.gguf"
refuses "activations take none" 2 "imatrix" "$QS" llm eval --model "$T/f32.gguf" --text "$TXT" --config "a=q4_k:imatrix=$T/ours.gguf"
refuses "a missing file is named" 1 "nope.gguf" "$QS" llm eval --model "$T/f32.gguf" --text "$TXT" --config "w=q4_k:imatrix=$T/nope.gguf"
refuses "a hostile file in one line" 1 "not an importance matrix" "$QS" llm eval --model "$T/f32.gguf" --text "$TXT" --config "w=q4_k:imatrix=$IM/text.txt"
ok "generate a wider model (dim 128)" $PY -c "
import sys; sys.path.insert(0, '$ROOT/tests/llm')
import make_tiny_gguf as m, gguf_io as g
m.build('$T/wide.gguf', True, 5, dim=128, ffn=256, lin=g.GGML_F32, emb=g.GGML_F32)"
refuses "an entry of another size (llama-quantize refuses it too)" 1 "imatrix size 64 is different from tensor size 128 for blk.0.attn_q.weight" "$QS" llm eval --model "$T/wide.gguf" --text "$TXT" --ctx 32 --chunks 2 --config "w=q4_0:imatrix=$T/ours.gguf"
refuses "q4_k on rows of 64: no whole block for the importances" 1 "blk.0.attn_q.weight: q4_k: rows of 64 values hold no whole block of 256" "$QS" llm eval --model "$T/f32.gguf" --text "$TXT" --ctx 32 --chunks 2 --config "w=q4_k:imatrix=$T/ours.gguf"
refuses "rl grpo's rollout takes none" 2 "imatrix= is not supported here" "$QS" rl grpo --model "$T/f32.gguf" --rollout "w=q4_k:imatrix=$T/ours.gguf"

ok "bench quantize without a peer: qscope's MB/s per type" bash -c "$QS bench quantize --model $T/f32.gguf --types q4_0,q4_k,iq4_nl --imatrix $T/ours.gguf > $T/bq.txt && grep -Eq '^q4_0 +[0-9.]+ +[0-9.]+\$' $T/bq.txt && grep -q '^q4_k .*no F32 matrix has rows of whole blocks of 256' $T/bq.txt"
refuses "bench quantize: a type that is not llama.cpp's" 2 "not one of llama.cpp's weight types" "$QS" bench quantize --model "$T/f32.gguf" --types q4_0,mxfp4
refuses "bench quantize: --model" 2 "--model F32.gguf is required" "$QS" bench quantize --types q4_0
refuses "bench quantize: not a GGUF" 1 "not a GGUF file" "$QS" bench quantize --model "$IM/text.txt"

# ---- quant -f F:imatrix=FILE on a stored tensor ---------------------------------------------------------
ok "import the model" bash -c "$QS import $T/f32.gguf > /dev/null"
ok "quant -f q4_0:imatrix= stores a tensor keyed by the file's hash, other than plain q4_0" bash -c "$QS quant -f q4_0:imatrix=$T/ours.gguf f32:blk.0.attn_q.weight > $T/q1.txt && $QS quant -f q4_0 f32:blk.0.attn_q.weight > /dev/null && grep -q 'f32:blk.0.attn_q.weight@q4_0:imatrix@.*\"imatrix\":\"[0-9a-f]\{32\}\"' $T/q1.txt && a=\$($QS show 'f32:blk.0.attn_q.weight@q4_0' --json | $PY -c 'import json,sys; print(json.load(sys.stdin)[\"hash\"])') && b=\$($QS show \$(grep -o 'f32:blk.0.attn_q.weight@q4_0:imatrix@[0-9a-f]*' $T/q1.txt) --json | $PY -c 'import json,sys; print(json.load(sys.stdin)[\"hash\"])') && [ \"\$a\" != \"\$b\" ]"
ok "quant: a tensor without an entry: rounded without importances, with a note" bash -c "$QS quant -f q4_0:imatrix=$T/ours.gguf f32:blk.0.attn_norm.weight 2>&1 >/dev/null | grep -q 'has no entry for f32:blk.0.attn_norm.weight: rounded without importances, as llama-quantize does'"
refuses "quant: imatrix= on stdin" 2 "needs a stored tensor" bash -c "echo 1 | $QS quant -f q4_0:imatrix=$T/ours.gguf"
refuses "quant: imatrix= on a file" 2 "needs a stored tensor" "$QS" quant -f "q4_0:imatrix=$T/ours.gguf" "$T/ours.gguf" -o "$T/x.npy"
refuses "quant: q8_0 takes none" 2 "q8_0 takes no importance matrix" "$QS" quant -f "q8_0:imatrix=$T/ours.gguf" f32:blk.0.attn_q.weight

# ---- the peer, live ------------------------------------------------------------------------------
LI=$(find "${LLAMA_BUILD:-$ROOT/build/llama-peer}" -name llama-imatrix -type f -perm -u+x 2>/dev/null | head -1)
if [ -z "$LI" ]; then
  skip "llama-imatrix on the same model and text" "data: llama-imatrix not built (LLAMA_BUILD; cmake --build BUILD --target llama-imatrix)"
else
  export LD_LIBRARY_PATH="$(dirname "$LI")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  ok "llama-imatrix now (GGUF) equals llm imatrix" bash -c "cd $IM && $LI -m $T/f32.gguf -f text.txt -c 32 --chunks 3 --process-output --no-ppl -t 1 -o $T/live.gguf > $T/live.log 2>&1 && $PY -c '$cmp_py' $ROOT $T/ours.gguf $T/live.gguf"
  if [ -n "${QS_GGML_F32:-}" ]; then
    head -c 60000 "$ROOT/data/text/persuasion.txt" > "$T/p.txt" 2>/dev/null || cp "$TXT" "$T/p.txt"
    ok "$QS_GGML_F32: llama-imatrix equals llm imatrix (4 chunks of 128)" bash -c "$LI -m $QS_GGML_F32 -f $T/p.txt -c 128 --chunks 4 --no-ppl -o $T/big-peer.gguf > $T/big.log 2>&1 && $QS llm imatrix --model $QS_GGML_F32 --text $T/p.txt --ctx 128 --chunks 4 -o $T/big.gguf > /dev/null && $PY -c '$cmp_py' $ROOT $T/big.gguf $T/big-peer.gguf"
  fi
fi
done_testing
