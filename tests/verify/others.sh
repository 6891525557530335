#!/usr/bin/env bash
# quant files/codes/stdin/stored, llm (eval, sensitivity, logits on every loader), attn, msd, resq,
# sim grpo, ais, runs export and terminal plots, base vs new.  Args: OUT
OUT=$1; DATA=${DATA:?}; ROOT=${ROOT:?}
source "$(dirname "$0")/lib.sh"
TINY=$ROOT/tests/fixtures/llm/tiny.gguf; IDS=$(cat "$ROOT/tests/fixtures/llm/tiny_ids.txt")
FORMATS=$("$NEW_BIN" formats | awk 'NR>1{print $1}')
for s in base new; do cp "$DATA"/*.npy "$OUT/$s/"; runq $s demo >/dev/null 2>&1
  runq $s gen llm-act --shape 64x256 --seed 4 --name act >/dev/null 2>&1; done
ST="0 -0 1 -1 0.1 1e-40 -3e-39 1e-45 3.4e38 inf -inf nan 5.9 6.1 0x1.8p+3 448 449 65504 1e9 -2.5e-3 0.75 1.25 1.75 -6.5 12 300 1e-5 2 3 4"
ST="$ST $(seq -f '%.3f' -4.1 0.37 7.3 | paste -sd' ')"
for f in $FORMATS; do
  for d in special odd1d subn1d; do cmp_cmd "quant-$f-$d" quant -f "$f" "@OUT@/$d.npy" -o "@OUT@/q-$f-$d.npy"; cmp_files "quantfile-$f-$d" "q-$f-$d.npy"; done
  for s in base new; do echo "$ST" > "$OUT/$s/stdin.txt"; done
  CMP_IN=stdin.txt cmp_cmd "quant-stdin-$f" quant -f "$f"
  CMP_IN=stdin.txt cmp_cmd "quant-codes-$f" quant -f "$f" --codes
  cmp_cmd "quant-db-$f" quant -f "$f" act --json
done
# variants through quant (quant takes the options as global options, not on the format entry)
while read -r f o; do l="$f${o// /}"
  cmp_cmd "quantv-$l" quant -f "$f" $o "@OUT@/special.npy" -o "@OUT@/qv-$l.npy"; cmp_files "quantvfile-$l" "qv-$l.npy"
  cmp_cmd "quantv1d-$l" quant -f "$f" $o "@OUT@/odd1d.npy" -o "@OUT@/qv1-$l.npy"; cmp_files "quantv1dfile-$l" "qv1-$l.npy"
  CMP_IN=stdin.txt cmp_cmd "quantv-codes-$l" quant -f "$f" $o --codes
  cmp_cmd "quantv-db-$l" quant -f "$f" $o act --json --name "act-$l"
done <<'VARS'
mxfp4 --scale-rule rceil
mxfp4 --scale-rule uos
mxfp4 --scale-rule ceil --block 16
mxfp4 --round sr --seed 3
mxfp4 --floor-log2f --zero-positive
mxfp8_e4m3 --nonfinite-block te
mxfp8_e4m3 --flush-subnormal-blocks
mxint8 --zero-block-scale 01
nvfp4 --nvfp4 torchao
m2xfp4 --m2x es
hif4 --round ta
hif8 --round hr
hif8 --scale row
fp8_e4m3 --sat
fp8_e4m3 --scale tensor
int8 --gran row
int4 --gran block --block 16
mxfp4 --axis 0
nvfp4 --axis 0
bf16 --round sr
VARS
cmp_cmd quant-glob quant -f int8 --gran block --block 32 "@OUT@/special.npy" -o "@OUT@/qg.npy"; cmp_files quant-glob-file qg.npy
cmp_cmd quant-glob2 quant -f mxfp4 --scale-rule ceil --round tz --zero-positive "@OUT@/odd1d.npy" -o "@OUT@/qg2.npy"; cmp_files quant-glob2-file qg2.npy
CMP_IN=stdin.txt cmp_cmd quant-scale-codes quant -f fp8_e4m3 --scale tensor --codes
# llm: eval, sensitivity, logits on every loader variant, score, capture, generate, tokenize
for s in base new; do cp "$DATA/text.txt" "$OUT/$s/"; done
E=(llm eval --model "$TINY" --text @OUT@/text.txt --ctx 64 --chunks 6)
cmp_cmd llm-eval1 "${E[@]}" --config a=mxfp4 --config kv=fp8_e4m3 --config w=bf16,a=bf16 --config a=fp32 --json --save-ids @OUT@/ids.txt
cmp_files llm-eval-ids ids.txt
cmp_cmd llm-eval2 "${E[@]}" --config a=mxfp4 --config a=hif8 --config a=nvfp4 --config w=mxfp4,kv=hif4 --config a=mxfp4,resq=dense --json
cmp_cmd llm-eval3 "${E[@]}" --config w=mxfp4 --config w=mxfp4,a=mxfp4 --config w=nvfp4 --config a=mxfp4:scale-rule=rceil --json --force
cmp_cmd llm-eval-all "${E[@]}" --score all --config a=int8 --json
cmp_cmd llm-eval-table "${E[@]}" --config a=mxfp4 --config w=hif4
cmp_cmd llm-eval-bos llm eval --model "$DATA/models/bos.gguf" --text @OUT@/text.txt --ctx 64 --chunks 6 --config a=mxfp4 --json
S=(llm sensitivity --model "$TINY" --text @OUT@/text.txt --ctx 32 --chunks 3)
cmp_cmd llm-sens1 "${S[@]}" --format mxfp4 --json
cmp_cmd llm-sens2 "${S[@]}" --format nvfp4 --sites attn_in,kv,w --kl-target 0.01 --json
cmp_cmd llm-sens3 "${S[@]}" --format mxfp4 --bits-budget 20
cmp_cmd llm-sens4 "${S[@]}" --format fp8_e4m3 --bits-budget 12 --json
for m in "$TINY" "$ROOT/tests/fixtures/llm/tiny_untied.gguf" "$DATA"/models/*.gguf "$DATA"/models/hf-*; do b=$(basename "$m")
  cmp_cmd "llm-logits-$b" llm logits --model "$m" --prompt-ids "$IDS" -o "@OUT@/l-$b.npy"; cmp_files "llm-logitsfile-$b" "l-$b.npy"
  cmp_cmd "llm-logits-q-$b" llm logits --model "$m" --prompt-ids "$IDS" --rollout-format mxfp4 --act-format nvfp4 --kv-format fp8_e4m3 -o "@OUT@/lq-$b.npy"; cmp_files "llm-logitsqfile-$b" "lq-$b.npy"
  cmp_cmd "llm-tokenize-$b" llm tokenize --model "$m" --prompt "the quantize is naïve"
done
cmp_cmd llm-score llm score --model "$TINY" --rollout-format mxfp4 --act-format mxfp4 --tokens 12 --seqs 3 --prompts 2 --seed 5 --name mx --json
cmp_cmd llm-score-resq llm score --model "$TINY" --rollout-format hif4 --act-format hif4 --resq dense --tokens 8 --seqs 2 --prompts 2 --seed 1 --name hr --task arith
cmp_cmd llm-capture llm capture --model "$TINY" --tokens 8 --seed 2 --sites all
cmp_cmd llm-generate llm generate --model "$TINY" --prompt-ids 1,40,41 --tokens 12 --seqs 2 --seed 3
cmp_cmd llm-generate-greedy llm generate --model "$TINY" --prompt "the quantize" --tokens 12 --greedy
# kernels and RL
cmp_cmd attn attn --L 64,128 --H 2 --d 32 --json
cmp_cmd attn-causal attn --L 96 --H 4 --Hkv 2 --d 64 --causal --kv mxfp4:scale-rule=rceil --json --threads 1
cmp_cmd attn-mla attn --mla --L 64 --H 2 --d 64 --dv 32 --json
cmp_cmd msd msd --M 8 --K 512 --N 256 --bits-samples 65536 --json
cmp_cmd msd-llmact msd --M 8 --K 256 --N 128 --dist llm-act --outliers 4 --bits-samples 4096 --mx-rule floor --passes 3 --model cpu,none --json
cmp_cmd msd-tensor msd --tensor act --N 64 --bits-samples 4096 --json
cmp_cmd resq resq --m 32 --d 256 --n 64 --json
cmp_cmd resq-tensor resq --tensor act --n 32 -f hif4,mxfp4 --json
cmp_cmd sim sim grpo --name v --formats mxfp4,fp8_e4m3 --methods exact,none,tis,ais_r,ais_r_fixed --seeds 2 --steps 20 --log-every 5 --json
cmp_cmd sim-j1 sim grpo --formats hif4 --methods icepop,seq_mis,geo_rs --seeds 2 --steps 15 -j 1 --name s1 --json
cmp_cmd runs runs
for r in sim/grpo/mxfp4/ais_r/seed0 sim/grpo/mxfp4/none/seed0 sim/grpo/exact/exact/seed0 mx; do rr=${r//\//_}
  cmp_cmd "ais-csv-$rr" ais "$r" --csv; cmp_cmd "ais-json-$rr" ais "$r" --json --no-store
  cmp_cmd "ais-table-$rr" ais "$r" --method tis; cmp_cmd "ais-w-$rr" ais "$r" --weights --step 5
  cmp_cmd "runs-export-$rr" runs --export "$r"; done
cmp_cmd ais-opts ais sim/grpo/mxfp4/ais_r/seed0 --csv --C 3 --kappa 0.2 --beta 0.5 --ais-is seq --amplification grad --veto 0.1 --no-store
# terminal plots
P=(--width 100 --height 30 --term ascii)
cmp_cmd plot-err plot err-hist demo:gaussian-w -o - "${P[@]}"
cmp_cmd plot-err-abs plot err-hist act -o - -f mxfp4,hif4,int8 --abs "${P[@]}"
cmp_cmd plot-vh plot value-hist demo:lognormal -o - -f mxfp4 "${P[@]}"
cmp_cmd plot-vh2 plot value-hist act -o - "${P[@]}" --term braille
cmp_cmd plot-pareto plot pareto demo:laplace-w -o - "${P[@]}"
cmp_cmd plot-heat plot block-heatmap demo:llm-act -o - -f nvfp4 "${P[@]}" --term block
cmp_cmd plot-transfer plot transfer -f hif4 --range -8,8 -o - "${P[@]}"
cmp_cmd plot-transfer2 plot transfer -f fp8_e4m3 --range 0.001,500 --logx -o - "${P[@]}"
cmp_cmd plot-sens plot sensitivity -o - "${P[@]}"
cmp_cmd plot-kl plot kl -o - "${P[@]}"
cmp_cmd plot-kl-cdf plot kl --cdf --ctx 64 -o - "${P[@]}"
cmp_cmd plot-traj plot trajectory -o - "${P[@]}"
cmp_cmd plot-msd plot msd -o - "${P[@]}"
cmp_cmd plot-attn plot attn -o - "${P[@]}"
cmp_cmd ais-plot ais sim/grpo/mxfp4/ais_r/seed0 --plot overview -o - --width 100 --height 30
cmp_cmd ais-plot2 ais sim/grpo/mxfp4/ais_r/seed0 --plot weights -o - --width 100 --height 30
cmp_cmd show show demo:llm-act
cmp_cmd info info
cmp_cmd check check
for f in $FORMATS; do cmp_cmd "explain-$f" explain -f "$f" 1.5 -0.3 1e-3; done
cmp_cmd claims claims
cmp_db db-others
renorm
