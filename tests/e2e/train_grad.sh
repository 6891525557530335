#!/usr/bin/env bash
# The cross-checks of `qscope train` (issue 26, item 6; docs/train.md "Cross-checks"): --grad-out's
# gradient against committed float64 central differences of an independent numpy model
# (tests/fixtures/train/make_fd_vectors.py), --batch-out's ids against the committed batch, --steps 0
# leaving the model as it is, a recipe of identity formats giving the FP32 run bit for bit, and each
# quantized operand of --operand-out equal to `qscope quant` of its FP32 source along its axis.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
F="$FIX/train"
B=(--init "$F/model" --text "$F/text.txt" --val-text "$F/text.txt" --ctx 16 --batch 4 --seed 5 --steps 0 --val-seqs 1)
HAVE_NP=0; $PY -c "import numpy" 2>/dev/null && HAVE_NP=1
np_check() {   # np_check DESC PYTHON-CODE ARGS... : a numpy check, a (strict-mode) skip without numpy
  local d=$1 code=$2; shift 2
  if [ $HAVE_NP = 1 ]; then ok "$d" $PY -c "$code" "$@"; else skip "$d" "python3-numpy not installed"; fi
}
# A safetensors reader from the format description, and the comparison of the committed vectors
ST='import json, struct, sys, numpy as np
def st(p):
    b = open(p, "rb").read(); n, = struct.unpack_from("<Q", b, 0); h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + d["data_offsets"][0]:8 + n + d["data_offsets"][1]], "<f4").reshape(d["shape"])
            for k, d in h.items() if k != "__metadata__"}'
FD="$ST"'
g, v = st(sys.argv[1]), json.load(open(sys.argv[2]))
worst, kinds = (0.0, ""), set()
for x in v["vectors"]:
    t = g[x["tensor"]]; a = float(t[tuple(x["index"])])
    r = abs(a - x["fd"]) / max(abs(x["fd"]), 1e-3 * float(np.abs(t).max()))   # floored as test_llm_train.c
    kinds.add(x["tensor"]); worst = max(worst, (r, x["tensor"]))
print("worst relative error %.3g (%s) over %d coordinates of %d tensors" % (worst + (len(v["vectors"]), len(kinds))))
sys.exit(not (worst[0] <= 1e-2 and kinds == set(g)))'

# --- the gradient against float64 finite differences
ok "--steps 0 --grad-out --batch-out" $QS train "${B[@]}" --grad-out "$T/g.safetensors" --batch-out "$T/b.npy" --out "$T/ck"
check "the loss of the cross-check's micro-batch is printed: the vectors' float64 loss to 1e-6 relative" \
  "awk '/^cross-check micro-batch: loss /{ok = \$4 > 2.919796 && \$4 < 2.919802} END{exit !ok}' '$T/out'"
check "the batch is the committed one (int32, 4 x 17), byte for byte" "cmp -s '$T/b.npy' '$F/batch.npy'"
check "--steps 0 --out: the checkpoint is the input model, byte for byte" \
  "cmp -s '$T/ck/model.safetensors' '$F/model/model.safetensors' && cmp -s '$T/ck/config.json' '$F/model/config.json'"
np_check "the gradient matches the committed float64 central differences (<= 1e-2 relative, every tensor)" \
  "$FD" "$T/g.safetensors" "$F/fd_vectors.json"
[ $HAVE_NP = 1 ] && sed 's/^/# /' "$T/out"
np_check "the gradient file has the checkpoint's tensor names and shapes (tied embedding once)" "$ST
g, m = st(sys.argv[1]), st(sys.argv[2])
sys.exit(not ({k: v.shape for k, v in g.items()} == {k: v.shape for k, v in m.items()} and 'lm_head.weight' not in g))" \
  "$T/g.safetensors" "$F/model/model.safetensors"
# the comparison can fail: the gradient of another batch (another --seed) does not match the vectors
ok "the gradient of another batch" $QS train "${B[@]}" --seed 6 --grad-out "$T/g6.safetensors"
if [ $HAVE_NP = 1 ]; then
  fails "the comparison rejects the gradient of another batch" 1 $PY -c "$FD" "$T/g6.safetensors" "$F/fd_vectors.json"
else
  skip "the comparison rejects the gradient of another batch" "python3-numpy not installed"
fi
# the committed vectors are what the script makes, and the script's model is qscope's (its self-check:
# `llm logits` of the fixture gives its float64 logits and loss)
np_check "make_fd_vectors.py: self-check against llm logits, and the committed vectors again" "import subprocess, sys, json
subprocess.run([sys.argv[1], sys.argv[2] + '/make_fd_vectors.py', sys.argv[2] + '/model', sys.argv[2] + '/batch.npy',
                sys.argv[3], '--qscope', sys.argv[4]], check=True)
a, b = json.load(open(sys.argv[2] + '/fd_vectors.json')), json.load(open(sys.argv[3]))
# a float64 difference quotient carries ~1e-12 of rounding (another BLAS may sum in another order)
d = max(abs(x['fd'] - y['fd']) / (1e-6 * abs(x['fd']) + 1e-10) for x, y in zip(a['vectors'], b['vectors']))
print('loss', a['loss'], b['loss'], 'fd differences / (1e-6 |fd| + 1e-10):', d)
sys.exit(not (abs(a['loss'] - b['loss']) <= 1e-12 and [(x['tensor'], x['index']) for x in a['vectors']] ==
              [(x['tensor'], x['index']) for x in b['vectors']] and d <= 1))" "$PY" "$F" "$T/fd.json" "$QS"
ok "--steps 0 --json" $QS train "${B[@]}" --grad-out "$T/g2.safetensors" --json
cp "$T/out" "$T/s0.json"
np_check "--steps 0 --json: no steps, final = initial validation loss, the micro-batch's loss" "import json, sys
j = json.load(open(sys.argv[1])); print(j['grad_loss'])
sys.exit(not (j['steps'] == [] and j['final_val_loss'] == j['initial_val_loss'] and abs(j['grad_loss'] - 2.919798739) < 3e-6))" "$T/s0.json"
check "the gradient is reproducible, byte for byte" "cmp -s '$T/g.safetensors' '$T/g2.safetensors'"
# the micro-batch is step 1's: its loss is step 1's training loss, bit for bit (under an SR recipe too:
# the pass's SR call counter starts where the run's does)
S1='import json, sys; j = json.load(open(sys.argv[1])); print(j["grad_loss"], j["steps"][0]["train_loss"]); sys.exit(j["grad_loss"] != j["steps"][0]["train_loss"])'
ok "--steps 1 --grad-out --json" $QS train "${B[@]}" --steps 1 --grad-out "$T/g1.safetensors" --json
cp "$T/out" "$T/s1.json"
check "the cross-check's loss is step 1's training loss, bit for bit" "$PY -c '$S1' '$T/s1.json'"
ok "--recipe nvfp4 --steps 1 --grad-out --json" $QS train "${B[@]}" --recipe nvfp4 --steps 1 --grad-out "$T/g1n.safetensors" --json
cp "$T/out" "$T/s1n.json"
check "nvfp4: the cross-check's loss is step 1's, bit for bit" "$PY -c '$S1' '$T/s1n.json'"
NORM="$ST"'
g, j = st(sys.argv[1]), json.load(open(sys.argv[2]))
n = float(np.sqrt(sum(float((t.astype(np.float64) ** 2).sum()) for t in g.values()))); m = j["steps"][0]["grad_norm"]
print(n, m); sys.exit(not abs(n - m) <= 1e-9 * m)'
np_check "the gradient's norm is step 1's gradient norm (1e-9)" "$NORM" "$T/g1.safetensors" "$T/s1.json"
np_check "nvfp4 (SR on the gradients, RHT): the gradient's norm is step 1's (1e-9)" "$NORM" "$T/g1n.safetensors" "$T/s1n.json"

# --- a llama GGUF (adjacent-pair RoPE): the gradient's Q/K rows are permuted as the checkpoint's, so
# it equals the gradient of the checkpoint (rotate_half) on the same batch
TG="$FIX/llm/tiny.gguf"
G=(--text "$F/text.txt" --val-text "$F/text.txt" --ctx 12 --batch 2 --seed 3 --steps 0 --val-seqs 1)
ok "--grad-out of a GGUF model, with its checkpoint" $QS train --init "$TG" "${G[@]}" --grad-out "$T/gg.safetensors" --batch-out "$T/gb.npy" --out "$T/ckg"
ok "--grad-out of the checkpoint" $QS train --init "$T/ckg" --tokenizer "$TG" "${G[@]}" --grad-out "$T/gh.safetensors" --batch-out "$T/hb.npy"
check "the same batch" "cmp -s '$T/gb.npy' '$T/hb.npy'"
np_check "the GGUF model's gradient equals its checkpoint's (1e-4 of each tensor's largest)" "$ST
a, b = st(sys.argv[1]), st(sys.argv[2])
d = max(float(np.abs(a[k] - b[k]).max() / np.abs(a[k]).max()) for k in a)
q = [k for k in a if 'q_proj' in k][0]
print('worst', d, 'q_proj max', float(np.abs(a[q]).max()))
sys.exit(not (set(a) == set(b) and d <= 1e-4))" "$T/gg.safetensors" "$T/gh.safetensors"

# --- a recipe's gradient; identity formats give the FP32 run bit for bit
ok "--recipe mxfp4 --grad-out" $QS train "${B[@]}" --recipe mxfp4 --grad-out "$T/gm.safetensors"
check "--recipe mxfp4: the recipe's gradient, not FP32's" "! cmp -s '$T/g.safetensors' '$T/gm.safetensors'"
ok "--recipe fp32 --grad-out" $QS train "${B[@]}" --recipe fp32 --grad-out "$T/gf.safetensors"
check "--recipe fp32: FP32's gradient, byte for byte" "cmp -s '$T/g.safetensors' '$T/gf.safetensors'"
R=(--init "$F/model" --text "$F/text.txt" --val-text "$F/text.txt" --ctx 16 --batch 4 --seed 5 --steps 8 --lr 1e-2
   --warmup 2 --eval-every 4 --val-seqs 2 --json)
ID=(--op fwd.x=fp32 --op fwd.w=fp32 --op dgrad.dy=fp32 --op dgrad.w=fp32 --op wgrad.dy=fp32 --op wgrad.x=fp32)
NONE=(--recipe mxfp4 --op fwd.x=none --op fwd.w=none --op dgrad.dy=none --op dgrad.w=none --op wgrad.dy=none --op wgrad.x=none)
ok "8 steps in FP32" $QS train "${R[@]}" --out "$T/r0" --grad-out "$T/r0.safetensors"
cp "$T/out" "$T/r0.json"
ok "8 steps with every operand through the identity format fp32" $QS train "${R[@]}" "${ID[@]}" --out "$T/r1" --grad-out "$T/r1.safetensors"
cp "$T/out" "$T/r1.json"
ok "8 steps of mxfp4 with every operand's format none" $QS train "${R[@]}" "${NONE[@]}" --out "$T/r2"
cp "$T/out" "$T/r2.json"
LOSSES='import json,sys; f=lambda p: [(r["train_loss"], r.get("val_loss"), r["grad_norm"]) for r in json.load(open(p))["steps"]]'
check "identity formats: the FP32 losses, gradient and trained weights, bit for bit" \
  "$PY -c '$LOSSES; sys.exit(f(sys.argv[1]) != f(sys.argv[2]))' $T/r0.json $T/r1.json && cmp -s '$T/r0.safetensors' '$T/r1.safetensors' && cmp -s '$T/r0/model.safetensors' '$T/r1/model.safetensors'"
check "format none: the FP32 run bit for bit" \
  "$PY -c '$LOSSES; sys.exit(f(sys.argv[1]) != f(sys.argv[2]))' $T/r0.json $T/r2.json && cmp -s '$T/r0/model.safetensors' '$T/r2/model.safetensors'"
check "the identity recipe is recorded as fp32 operands" \
  "$PY -c 'import json,sys; r=json.load(open(sys.argv[1]))[\"recipe\"]; sys.exit(not (r[\"name\"]==\"fp32+op\" and set(r[\"operands\"].values())=={\"fp32\"}))' $T/r1.json"

# --- --operand-out: each quantized operand is `qscope quant` of its FP32 source along its axis
quant_same() {   # quant_same DIR OP AXIS FORMAT-OPTIONS... : OP.q.npy = quant of OP.src.npy, and not the other axis
  local d=$1 op=$2 ax=$3; shift 3
  $QS quant "$@" --axis "$ax" "$d/$op.src.npy" -o "$d/$op.chk.npy" 2>/dev/null && cmp -s "$d/$op.q.npy" "$d/$op.chk.npy" &&
    $QS quant "$@" --axis $((1 - ax)) "$d/$op.src.npy" -o "$d/$op.oth.npy" 2>/dev/null && ! cmp -s "$d/$op.q.npy" "$d/$op.oth.npy"
}
ok "--recipe mxfp4 --operand-out" $QS train "${B[@]}" --recipe mxfp4 --operand-out "$T/ops"
check "twelve files: the FP32 source and the quantized operand of each slot" "[ \$(ls '$T/ops' | grep -c '\.\(src\|q\)\.npy$') = 12 ]"
for oa in fwd.x:1 fwd.w:1 dgrad.dy:1 dgrad.w:0 wgrad.dy:0 wgrad.x:0; do
  check "mxfp4 ${oa%:*}: qscope quant --axis ${oa#*:} of the source, bit for bit (the other axis differs)" \
    "quant_same '$T/ops' ${oa%:*} ${oa#*:} -f mxfp4"
done
ok "--op with six formats and options --operand-out" $QS train "${B[@]}" --op fwd.x=nvfp4 --op fwd.w=hif4 \
  --op dgrad.dy=hif8:scale=tensor --op dgrad.w=mxfp6_e2m3:scale-rule=rceil --op wgrad.dy=fp8_e5m2:scale=tensor \
  --op wgrad.x=int8:gran=block:block=16 --operand-out "$T/ops2"
check "fwd.x nvfp4 = quant -f nvfp4 --axis 1" "quant_same '$T/ops2' fwd.x 1 -f nvfp4"
check "fwd.w hif4 = quant -f hif4 --axis 1" "quant_same '$T/ops2' fwd.w 1 -f hif4"
check "dgrad.dy hif8:scale=tensor = quant -f hif8 --scale tensor --axis 1" \
  "$QS quant -f hif8 --scale tensor '$T/ops2/dgrad.dy.src.npy' -o '$T/c.npy' 2>/dev/null && cmp -s '$T/ops2/dgrad.dy.q.npy' '$T/c.npy'"
check "dgrad.w mxfp6_e2m3:scale-rule=rceil = quant --scale-rule rceil --axis 0" \
  "quant_same '$T/ops2' dgrad.w 0 -f mxfp6_e2m3 --scale-rule rceil"
check "wgrad.dy fp8_e5m2:scale=tensor = quant -f fp8_e5m2 --scale tensor" \
  "$QS quant -f fp8_e5m2 --scale tensor '$T/ops2/wgrad.dy.src.npy' -o '$T/c.npy' 2>/dev/null && cmp -s '$T/ops2/wgrad.dy.q.npy' '$T/c.npy'"
check "wgrad.x int8 16-blocks = quant --gran block --block 16 --axis 0" \
  "quant_same '$T/ops2' wgrad.x 0 -f int8 --gran block --block 16"
np_check "the sources are the FP32 operands: fwd.w and dgrad.w are both the model's q_proj (as stored)" "$ST
w = st(sys.argv[1] + '/model/model.safetensors')['model.layers.0.self_attn.q_proj.weight']
a, b = np.load(sys.argv[2] + '/fwd.w.src.npy'), np.load(sys.argv[2] + '/dgrad.w.src.npy')
x, y = np.load(sys.argv[2] + '/fwd.x.src.npy'), np.load(sys.argv[2] + '/wgrad.x.src.npy')
sys.exit(not (np.array_equal(a, w) and np.array_equal(b, w) and np.array_equal(x, y) and x.shape == (64, 32)))" "$F" "$T/ops"

# --- refusals
refuses "--operand-out without a recipe" 2 "--operand-out needs a recipe" $QS train "${B[@]}" --operand-out "$T/o3"
refuses "--operand-out with a recipe that quantizes nothing" 1 "quantizes no GEMM of layer 0" $QS train "${B[@]}" --recipe fp32 --operand-out "$T/o4"
refuses "--steps -1" 2 "--steps" $QS train "${B[@]}" --steps -1
refuses "--grad-out into a missing directory" 1 "nodir/g.safetensors: cannot create" $QS train "${B[@]}" --grad-out "$T/nodir/g.safetensors"
refuses "--operand-out naming a file" 1 "not a directory" $QS train "${B[@]}" --recipe mxfp4 --operand-out "$F/text.txt"
refuses "--op with an unknown format" 2 "unknown format 'nothing'" $QS train "${B[@]}" --op fwd.x=nothing
done_testing
