#!/bin/bash
# qscope bench train: per-recipe step times against SGEMM in one run, on a tiny shape (docs/train.md, "Speed").
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
SHAPE=(--layers 1 --dim 32 --heads 2 --ctx 16 --batch 2 --steps 2)

ok "bench train runs fp32 and two recipes" sh -c "'$QS' bench train ${SHAPE[*]} --recipes fp32,mxfp4,nvfp4 --quick --json > '$T/b.json'"
cat > "$T/check.py" <<'PYEOF'
import json, math, sys
d = json.load(open(sys.argv[1]))
r = {x["recipe"]: x for x in d["recipes"]}
assert list(r) == ["fp32", "mxfp4", "nvfp4"], list(r)
assert d["shape"]["dim"] == 32 and d["batch"] == 2 and d["steps"] == 2 and d["threads"] >= 1
assert d["sgemm_square_gflops"] > 0 and d["sgemm_model_gflops"] > 0
assert r["fp32"]["rerun_identical"] is True and r["fp32"]["vs_fp32"] == 1.0 and r["fp32"]["cpu_vs_fp32"] == 1.0
for x in r.values():
    assert abs(x["cpu_vs_fp32"] - x["cpu_ms"] / r["fp32"]["cpu_ms"]) < 1e-9
assert r["mxfp4"]["parts_ms"]["quant"] > 0 and r["nvfp4"]["parts_ms"]["quant"] > 0
P = 256 * 32 + 32 + (2 * 32 + 4 * 32 * 32 + 3 * 128 * 32)   # tied embedding, one layer, ffn 4*dim
assert d["params"] == P, d["params"]
for x in r.values():
    assert math.isfinite(x["loss"]) and x["step_ms"] > 0 and x["best_ms"] <= x["step_ms"] and x["cpu_ms"] > 0
    flops = 6 * P * 2 * 16 / (x["step_ms"] / 1e3) / 1e9
    assert abs(x["model_gflops"] - flops) <= 1e-6 * flops, (x["model_gflops"], flops)
    assert abs(x["of_sgemm"] - x["model_gflops"] / d["sgemm_square_gflops"]) < 1e-9
    assert set(x["parts_ms"]) == {"fwd_gemm", "bwd_gemm", "quant", "attention", "rows", "head", "optimizer"}
PYEOF
ok "every recipe has a finite step, SGEMM fractions and the breakdown; fp32 reruns bit-identical" "$PY" "$T/check.py" "$T/b.json"
ok "the text form names the columns" sh -c "'$QS' bench train ${SHAPE[*]} --recipes fp32 --quick | grep -q 'GFLOP/s'"
ok "the text form states each recipe's step against fp32's" sh -c "'$QS' bench train ${SHAPE[*]} --recipes fp32,nvfp4 --quick | grep -Eq 'nvfp4 / fp32 step: [0-9.]+x \(median wall\), [0-9.]+x \(CPU\)'"
refuses "an unknown recipe" 2 "unknown training recipe" "$QS" bench train "${SHAPE[@]}" --recipes fp32,nope
refuses "a bad number" 2 "positive integer" "$QS" bench train --steps 0
refuses "an unknown option" 2 "unexpected argument" "$QS" bench train --frobnicate
refuses "a dim that heads do not divide" 2 "multiple of --heads" "$QS" bench train --dim 30 --heads 4
done_testing
