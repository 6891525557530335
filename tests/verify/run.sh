#!/usr/bin/env bash
# Base-vs-new bit-identity check (issue 25): builds nothing; compares two built qscope binaries.
#   BASE_BIN=$BASE/build/qscope NEW_BIN=$PWD/build/qscope bash tests/verify/run.sh OUTDIR
# (the base built in a scratch directory BASE: `git archive REV | tar -x -C $BASE && make -C $BASE all`).
# Writes OUT/{data,an-j1,an-j2,an-scalar,others,others-scalar}/summary2.txt: one line per
# comparison, "same", "same-after-norm" (only paths and timings differ, norm.py) or a difference.
set -u
OUT=${1:?usage: run.sh OUTDIR}; export BASE_BIN NEW_BIN
D=$(cd "$(dirname "$0")" && pwd); export ROOT=$(cd "$D/../.." && pwd)
PY=/usr/bin/python3; export DATA=$OUT/data
mkdir -p "$DATA/models"
$PY - "$DATA" <<'PYEOF'
import numpy as np, random, sys
d = sys.argv[1]; rng = np.random.default_rng(3)
a = rng.standard_normal((48, 80)).astype(np.float32)   # NaN, Inf, zeros, -0, subnormals, huge
a[0, 0] = np.nan; a[1, 5] = np.inf; a[2, 7] = -np.inf; a[3, :32] = 0; a[4, :16] = -0.0
a[5, :40] = (rng.standard_normal(40) * 1e-40).astype(np.float32); a[6, :] = np.float32(1e-45)
a[7, 3] = np.float32(3e38); a[8, :] = rng.standard_normal(80).astype(np.float32) * 1e6
np.save(d + "/special.npy", a)
b = (rng.standard_normal(1001) * 0.3).astype(np.float32); b[500] = 7.0; b[17] = 0   # 1-D, odd length
np.save(d + "/odd1d.npy", b)
np.save(d + "/subn1d.npy", rng.standard_normal(4097).astype(np.float32) * np.float32(1e-39))
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(d + "/text.txt", "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(70)) + "\n")
PYEOF
for v in f32 f16 bf16 qwen2 qwen2-f32 qwen2-hd24; do $PY "$ROOT/tests/llm/make_tiny_gguf.py" --variant $v "$DATA/models/$v.gguf" >/dev/null; done
$PY "$ROOT/tests/llm/make_tiny_gguf.py" --bos "$DATA/models/bos.gguf" >/dev/null
for v in llama llama-sh qwen2 llama-hd; do $PY "$ROOT/tests/llm/make_tiny_hf.py" $v "$DATA/models/hf-$v" >/dev/null; done
bash "$D/analyze.sh" "$OUT/an-j1" 1 2>/dev/null
bash "$D/analyze.sh" "$OUT/an-j2" 2 2>/dev/null
bash "$D/analyze.sh" "$OUT/an-scalar" 2 scalar 2>/dev/null
bash "$D/others.sh" "$OUT/others" >/dev/null 2>&1
QS_VENV="QS_SIMD=scalar" bash "$D/others.sh" "$OUT/others-scalar" >/dev/null 2>&1
for r in an-j1 an-j2 an-scalar others others-scalar; do
  echo "$r: $(grep -c ' same$' "$OUT/$r/summary2.txt") same, $(grep -c 'same-after-norm' "$OUT/$r/summary2.txt") same after normalizing, differing:"
  grep -v ' same' "$OUT/$r/summary2.txt" | sed 's/^/  /'; done
