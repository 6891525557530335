#!/usr/bin/env bash
# qscope train (issue 26, second part): a tiny byte-level model learns a text (validation loss down by
# >= 40%), reruns are bit-identical, the checkpoint loads in `llm eval/logits/generate` with the
# training pass's loss, --init of a llama GGUF round-trips through the checkpoint (RoPE rows permuted
# back), and bad options are refused with one line.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
P="The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun. \
A small model learns to spell the words of this little story, one byte at a time. "
for i in $(seq 300); do printf '%s' "$P"; done > "$T/train.txt"
for i in $(seq 20); do printf '%s' "$P"; done > "$T/val.txt"
TR=(--text "$T/train.txt" --val-text "$T/val.txt" --layers 2 --dim 64 --heads 4 --ctx 32 --batch 8 --steps 150
    --lr 3e-3 --warmup 10 --eval-every 50 --val-seqs 8 --seed 7)

ok "train: a byte-level model, 150 steps, --json" $QS train "${TR[@]}" --json --out "$T/ck"
cp "$T/out" "$T/run1.json"
check "the validation loss falls by at least 40%" \
  "$PY -c 'import json,sys; j=json.load(open(sys.argv[1])); a,b=j[\"initial_val_loss\"],j[\"final_val_loss\"]; print(a,b); sys.exit(not (b <= 0.6*a))' $T/run1.json"
check "one record per step, validation every 50 steps and at the end" \
  "$PY -c 'import json,sys; s=json.load(open(sys.argv[1]))[\"steps\"]; sys.exit(not (len(s)==150 and [r[\"step\"] for r in s if \"val_loss\" in r]==[50,100,150] and all(r[\"grad_norm\"]>0 and r[\"lr\"]>0 for r in s)))' $T/run1.json"
check "the schedule: peak lr at the end of warm-up, lr*0.1 at the last step" \
  "$PY -c 'import json,sys; s=json.load(open(sys.argv[1]))[\"steps\"]; sys.exit(not (abs(s[9][\"lr\"]-3e-3)<1e-12 and abs(s[-1][\"lr\"]-3e-4)<1e-12))' $T/run1.json"

ok "the same run again" $QS train "${TR[@]}" --json
cp "$T/out" "$T/run2.json"
LOSSES='import json,sys; f=lambda p: [(r["train_loss"], r.get("val_loss"), r["grad_norm"]) for r in json.load(open(p))["steps"]]'
check "same seed: bit-identical losses and gradient norms" "$PY -c '$LOSSES; sys.exit(f(sys.argv[1]) != f(sys.argv[2]))' $T/run1.json $T/run2.json"
ok "another seed" $QS train "${TR[@]}" --seed 8 --steps 5 --json
cp "$T/out" "$T/run3.json"
check "another seed: other losses" "$PY -c '$LOSSES; sys.exit(f(sys.argv[1])[:5] == f(sys.argv[2]))' $T/run1.json $T/run3.json"
ok "--accum 2 runs" $QS train "${TR[@]}" --accum 2 --steps 3 --json

check "the checkpoint: config.json, model.safetensors, tokenizer.json" "[ -s $T/ck/config.json ] && [ -s $T/ck/model.safetensors ] && [ -s $T/ck/tokenizer.json ]"
ok "llm tokenize with the checkpoint maps bytes 1:1" $QS llm tokenize --model "$T/ck" --prompt "Hi é"
check "ids are the bytes" "grep -qx '72,105,32,195,169' $T/out"
# --val-seqs 1: the validation window is the first 33 bytes of val.txt; the checkpoint's logits of its
# first 32 bytes must give the same mean loss
ok "one validation window, 3 steps" $QS train "${TR[@]}" --steps 3 --val-seqs 1 --json --out "$T/ck1"
cp "$T/out" "$T/run4.json"
IDS=$(head -c 32 "$T/val.txt" | od -An -tu1 | tr -s ' \n' ',' | sed 's/^,//; s/,$//')
ok "llm logits of the checkpoint" $QS llm logits --model "$T/ck1" --prompt-ids "$IDS" -o "$T/l.npy"
if $PY -c "import numpy" 2>/dev/null; then
  check "the checkpoint's loss equals the training pass's validation loss (1e-5)" "$PY -c '
import json, sys, numpy as np
l = np.load(sys.argv[1]).astype(np.float64).reshape(32, -1)
b = open(sys.argv[2], \"rb\").read()[:33]
lse = np.log(np.exp(l - l.max(1, keepdims=True)).sum(1)) + l.max(1)
nll = float(np.mean([lse[t] - l[t, b[t + 1]] for t in range(32)]))
v = json.load(open(sys.argv[3]))[\"final_val_loss\"]
print(nll, v); sys.exit(abs(nll - v) > 1e-5 * max(1, v))' $T/l.npy $T/val.txt $T/run4.json"
else
  skip "the checkpoint's loss equals the training pass's" "python3-numpy not installed"
fi
ok "llm eval loads the checkpoint" $QS llm eval --model "$T/ck" --text "$T/val.txt" --ctx 32 --chunks 2 --json
ok "llm generate loads the checkpoint" $QS llm generate --model "$T/ck" --prompt "The quick" --tokens 16 --greedy --seqs 1 --prompts 1
ok "--tokenizer a checkpoint directory, --init a checkpoint" $QS train "${TR[@]}" --steps 2 --tokenizer "$T/ck" --out "$T/ck2"
check "its tokenizer.json is copied" "cmp -s $T/ck/tokenizer.json $T/ck2/tokenizer.json"
ok "--init continues from the checkpoint (bytes)" $QS train --init "$T/ck" --text "$T/train.txt" --val-text "$T/val.txt" --ctx 32 --steps 2 --val-seqs 8 --json
check "--init starts from the trained model's validation loss" \
  "$PY -c 'import json,sys; a=json.load(open(sys.argv[1]))[\"final_val_loss\"]; b=json.load(open(sys.argv[2]))[\"initial_val_loss\"]; print(a,b); sys.exit(abs(a-b)>1e-9)' $T/run1.json $T/out"

# --init of a llama GGUF (adjacent-pair RoPE): a step at lr 1e-30 leaves the weights; the checkpoint
# (rotate_half rows) must give the GGUF's logits
TG="$FIX/llm/tiny.gguf"
ok "train --init a GGUF with its own tokenizer" $QS train --init "$TG" --text "$T/train.txt" --val-text "$T/val.txt" --ctx 16 --batch 2 --steps 1 --lr 1e-30 --wd 0 --val-seqs 1 --out "$T/ckg"
IDS2=$(tr '\n' ',' < "$FIX/llm/tiny_ids.txt" | sed 's/,$//' | cut -d, -f1-12)
ok "logits of the GGUF" $QS llm logits --model "$TG" --prompt-ids "$IDS2" -o "$T/g.npy"
ok "logits of its checkpoint" $QS llm logits --model "$T/ckg" --prompt-ids "$IDS2" -o "$T/h.npy"
if $PY -c "import numpy" 2>/dev/null; then
  check "the checkpoint of a GGUF model gives its logits (RoPE rows permuted back)" \
    "$PY -c 'import numpy as np,sys; a,b=np.load(sys.argv[1]),np.load(sys.argv[2]); d=np.abs(a-b).max(); print(d); sys.exit(not d<1e-4)' $T/g.npy $T/h.npy"
else
  skip "the checkpoint of a GGUF model gives its logits" "python3-numpy not installed"
fi

refuses "--layers 0 is a usage error" 2 "--layers" $QS train "${TR[@]}" --layers 0
refuses "a missing --text file is refused, naming it" 1 "nothere.txt" $QS train "${TR[@]}" --text "$T/nothere.txt"
refuses "a directory as --val-text is refused" 1 "$T" $QS train "${TR[@]}" --val-text "$T"
refuses "--dim not a multiple of --heads (bad input: exit 2)" 2 "multiple of --heads" $QS train "${TR[@]}" --dim 66
refuses "a text shorter than ctx+1 tokens (bad input: exit 2, naming it)" 2 "tiny_ids.txt: validation text has .* tokens, fewer than ctx\+1 = 4001 \(one window\)" $QS train "${TR[@]}" --val-text "$FIX/llm/tiny_ids.txt" --ctx 4000
refuses "--init with a shape option" 2 "--init takes the model's shape" $QS train --init "$TG" --layers 2 --text "$T/train.txt" --val-text "$T/val.txt"
refuses "no text and no make data" 2 "make data" bash -c "cd $T && $QS train"
refuses "a model larger than the machine's memory, before allocating it" 1 "needs .* GB, more than" $QS train "${TR[@]}" --layers 256 --dim 8192
refuses "--out naming a file, before training" 1 "passwd: not a directory" $QS train "${TR[@]}" --steps 100000 --out /etc/passwd
mkdir -p "$T/md/data/text"
cp "$T/train.txt" "$T/md/data/text/a.txt"; head -c 3000 "$T/train.txt" > "$T/md/data/text/b.txt"; cp "$T/val.txt" "$T/md/data/text/persuasion.txt"
ok "defaults: make data's texts, persuasion.txt held out" bash -c "cd $T/md && $QS train --ctx 16 --steps 1 --json"
check "training tokens: a.txt + b.txt; validation: persuasion.txt" \
  "$PY -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(not (j[\"train_tokens\"]==$(cat "$T/train.txt" | wc -c)+3000 and j[\"val_tokens\"]==$(cat "$T/val.txt" | wc -c)))' $T/out"
refuses "--lr 0" 2 "--lr" $QS train "${TR[@]}" --lr 0
# --recipe / --op (issue 26, item 3): a 1-layer dim-32 model, 20 steps; validation stays FP32
RC=(--text "$T/train.txt" --val-text "$T/val.txt" --layers 1 --dim 32 --heads 2 --ctx 16 --batch 4 --steps 20
    --lr 3e-3 --warmup 2 --eval-every 10 --val-seqs 4 --seed 7 --json)
ok "no recipe" $QS train "${RC[@]}"
cp "$T/out" "$T/r_none.json"
ok "--recipe fp32" $QS train "${RC[@]}" --recipe fp32
cp "$T/out" "$T/r_fp32.json"
check "--recipe fp32: the losses of no recipe, bit for bit" "$PY -c '$LOSSES; sys.exit(f(sys.argv[1]) != f(sys.argv[2]))' $T/r_none.json $T/r_fp32.json"
check "--recipe fp32 is recorded" "$PY -c 'import json,sys; r=json.load(open(sys.argv[1]))[\"recipe\"]; sys.exit(not (r[\"name\"]==\"fp32\" and set(r[\"operands\"].values())=={\"fp32\"} and r[\"validation\"]==\"fp32\"))' $T/r_fp32.json"
ok "--recipe mxfp8" $QS train "${RC[@]}" --recipe mxfp8
cp "$T/out" "$T/r_mx8.json"
FALLS='import json,sys,math; j=json.load(open(sys.argv[1])); a,b=j["initial_val_loss"],j["final_val_loss"]; print(a,b); sys.exit(not (math.isfinite(b) and b < 0.9*a and all(math.isfinite(r["train_loss"]) for r in j["steps"])))'
check "--recipe mxfp8: the validation loss falls and is finite" "$PY -c '$FALLS' $T/r_mx8.json"
check "--recipe mxfp8: other losses than fp32" "$PY -c '$LOSSES; sys.exit(f(sys.argv[1]) == f(sys.argv[2]))' $T/r_fp32.json $T/r_mx8.json"
check "validation stays FP32: the initial validation loss of mxfp8 is fp32's, bit for bit" "$PY -c 'import json,sys; a,b=(json.load(open(p))[\"initial_val_loss\"] for p in sys.argv[1:]); sys.exit(a != b)' $T/r_fp32.json $T/r_mx8.json"
check "--recipe mxfp8 is recorded with its formats" "$PY -c 'import json,sys; r=json.load(open(sys.argv[1]))[\"recipe\"]; sys.exit(not (r[\"name\"]==\"mxfp8\" and r[\"operands\"][\"dgrad.w\"].startswith(\"mxfp8_e4m3\")))' $T/r_mx8.json"
ok "--recipe nvfp4" $QS train "${RC[@]}" --recipe nvfp4
cp "$T/out" "$T/r_nv4.json"
check "--recipe nvfp4: finite, falls; SR, RHT and tiles recorded" "$PY -c '$FALLS' $T/r_nv4.json && $PY -c 'import json,sys; o=json.load(open(sys.argv[1]))[\"recipe\"][\"operands\"]; sys.exit(not (o[\"wgrad.dy\"]==\"nvfp4:sr:rht\" and o[\"fwd.w\"]==\"nvfp4:tile16\"))' $T/r_nv4.json"
ok "--op fwd.x=mxfp4" $QS train "${RC[@]}" --op fwd.x=mxfp4
cp "$T/out" "$T/r_op.json"
check "--op fwd.x=mxfp4: only fwd.x quantized, other losses than fp32" "$PY -c '$LOSSES; sys.exit(f(sys.argv[1]) == f(sys.argv[2]))' $T/r_fp32.json $T/r_op.json && $PY -c 'import json,sys; r=json.load(open(sys.argv[1]))[\"recipe\"]; o=r[\"operands\"]; sys.exit(not (r[\"name\"]==\"fp32+op\" and o[\"fwd.x\"]==\"mxfp4\" and o[\"fwd.w\"]==\"fp32\"))' $T/r_op.json"
ok "the text output names the recipe on its first line" bash -c "$QS train ${RC[*]/--json/} --recipe mxfp8 --op dgrad.dy=hif8:scale=tensor --steps 1 | head -1 | grep -q '^train: recipe mxfp8+op (.*dgrad.dy=hif8:scale=tensor'"
refuses "an unknown --recipe" 2 "unknown training recipe 'mxfp5'" $QS train "${RC[@]}" --recipe mxfp5
refuses "an unknown --op operand" 2 "unknown operand 'fwd.y'" $QS train "${RC[@]}" --op fwd.y=mxfp4
refuses "an --op without a format" 2 "--op 'fwd.x' is not OPERAND=FORMAT" $QS train "${RC[@]}" --op fwd.x
refuses "an --op with an unknown format" 2 "unknown format 'mxfp5'" $QS train "${RC[@]}" --op fwd.x=mxfp5
refuses "an --op with options its format refuses" 2 "bf16 takes no scale=" $QS train "${RC[@]}" --op wgrad.x=bf16:scale=tensor
done_testing
