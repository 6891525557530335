#!/usr/bin/env bash
# Importing real files: every format, names, references vs --copy, idempotence, updates,
# statistics against numpy, stale references.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
mkdir -p "$T/d/sub"
$PY - "$T/d" <<'PY'
import sys, numpy as np, json, struct
d = sys.argv[1]
rng = np.random.default_rng(7)
w = rng.standard_normal((64, 96)).astype(np.float32)
np.save(f"{d}/w.npy", w)
np.save(f"{d}/wf.npy", np.asfortranarray(w))
np.save(f"{d}/sub/h.npy", w.astype(np.float16))
np.save(f"{d}/bf.npy", (w.view(np.uint32) >> 16).astype(np.uint16))
np.savez_compressed(f"{d}/z.npz", a=w, b=np.arange(10, dtype=np.int8))
# safetensors written by hand (spec: u64 header length, JSON header, data)
hdr = {"__metadata__": {"format": "pt"}, "x": {"dtype": "F32", "shape": [64, 96], "data_offsets": [0, w.nbytes]}}
h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
open(f"{d}/m.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + w.tobytes())
np.save(f"{d}/expect.npy", np.array([w.min(), w.max(), w.mean(), w.std(), np.abs(w).max(),
        np.percentile(w, 1), np.percentile(w, 50), np.percentile(w, 99.9)], dtype=np.float64))
PY
ok "import a directory recursively" $QS import "$T/d"
check "all tensors imported with file:tensor names" \
  "[ \"\$($QS ls --json | python3 -c 'import json,sys; print(\" \".join(sorted(t[\"name\"] for t in json.load(sys.stdin))))')\" = 'bf expect h m:x w wf z:a z:b' ]"
check "npy, fortran npy, npz deflate and safetensors of the same data share one hash" \
  "[ \$($QS ls --json | python3 -c 'import json,sys; print(len({t[\"hash\"] for t in json.load(sys.stdin) if t[\"name\"] in (\"w\",\"wf\",\"z:a\",\"m:x\")}))') = 1 ]"
ok "statistics match numpy" $PY - "$QS" "$T/d/expect.npy" <<'PY'
import sys, json, subprocess, numpy as np
qs, exp = sys.argv[1], np.load(sys.argv[2])
for name in ("w", "wf", "z:a", "m:x"):
    s = json.loads(subprocess.check_output([qs, "show", name, "--json"]))["stats"]
    got = [s["min"], s["max"], s["mean"], s["std"], s["absmax"], s["percentiles"]["p1"], s["percentiles"]["p50"], s["percentiles"]["p99.9"]]
    assert np.allclose(got, exp, rtol=1e-6, atol=1e-7), (name, got, exp)
PY
ok "safetensors metadata is kept" bash -c "sqlite3 $QSCOPE_DB \"SELECT metadata FROM source WHERE kind='safetensors'\" | grep -q '\"format\"'"
ok "re-import of unchanged files is a no-op" bash -c "$QS import $T/d | grep -v '^unchanged' | wc -l | grep -qx 0"
before=$(sqlite3 "$QSCOPE_DB" "SELECT group_concat(hash||updated_at) FROM tensor")
sleep 1.1   # updated_at has one-second resolution: a rewritten row would show
$QS import "$T/d" >/dev/null 2>&1
check "no-op import leaves rows untouched" "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT group_concat(hash||updated_at) FROM tensor\")\" = \"$before\" ]"

ok "--as bf16 reads raw 16-bit words as bfloat16" $QS import --as bf16 --prefix bfr "$T/d/bf.npy"
ok "bf16 statistics are close to the f32 ones" bash -c "$QS show bfr --json | python3 -c '
import json,sys; s=json.load(sys.stdin); assert s[\"dtype\"]==\"bf16\" and abs(s[\"stats\"][\"std\"]-1)<0.1, s'"

# a changed file updates; a vanished member is removed
$PY -c "import numpy as np; np.savez_compressed('$T/d/z.npz', a=np.ones((3,3),np.float32))"
ok "changed npz re-imports" $QS import "$T/d/z.npz"
check "changed tensor is reported as updated" "grep -q '^updated *z:a' $T/out"
check "vanished member is removed" "grep -q '^removed' $T/out && no_match name $QS ls 'z:b' --json"

# references: stale when the file changes or goes away; --copy embeds
ok "--copy embeds the data" $QS import --copy --prefix wc "$T/d/w.npy"
check "embedded tensor has chunks in the database" "[ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM tensor_chunk c JOIN tensor t ON t.id=c.tensor_id WHERE t.name='wc'\") -ge 1 ]"
cp "$T/d/w.npy" "$T/w2.npy"
$QS import "$T/w2.npy" >/dev/null 2>&1
touch -d '2001-01-01' "$T/w2.npy"
fails "check reports a stale reference after the file changed" 1 $QS check
check "stale message names the file" "grep -q 'w2.npy: stale reference' $T/out"
ok "ls --stale marks it" bash -c "$QS ls --stale | grep 'w2 ' | grep -q STALE"
rm "$T/w2.npy"
fails "check reports a vanished file" 1 $QS check
ok "embedded copy survives its file going away" bash -c "rm $T/d/w.npy && $QS ls wc --stale | grep -vq STALE"
ok "rm removes tensors" $QS rm w2
ok "check is clean again (after removing the broken refs)" bash -c "$QS rm w wf >/dev/null; $QS check"

# rm takes the exact name first, a glob only when no tensor has that name
QR=("$QS" --db "$T/rm.db")
for n in 'w[0]' w0 w1; do "${QR[@]}" gen gaussian --n 64 --name "$n" >/dev/null 2>&1; done
rmnames() { "${QR[@]}" ls --json | python3 -c 'import json,sys; print(" ".join(t["name"] for t in json.load(sys.stdin)))'; }
ok "rm 'w[0]' succeeds" "${QR[@]}" rm 'w[0]'
check "...and removes w[0] alone (not the w0 its glob would match)" '[ "$(rmnames)" = "w0 w1" ]'
ok "rm of a name no tensor has is a glob" "${QR[@]}" rm 'w[01]'
check "...removing what it matches" '[ -z "$(rmnames)" ]'
for n in w0 w1; do "${QR[@]}" gen gaussian --n 64 --name "$n" >/dev/null 2>&1; done
ok "rm of a glob and a name it covers: each resolved first, each removed once" "${QR[@]}" rm 'w*' w0
check "...counted once" "grep -qx 'removed 2 tensor(s)' $T/out && [ -z \"\$(rmnames)\" ]"

# names are data, not SQL
cp "$T/d/sub/h.npy" "$T/evil.npy"
ok "a tensor named like an SQL injection is just a name" $QS import --prefix "x'); DROP TABLE tensor;--" "$T/evil.npy"
ok "...and is listed" bash -c "$QS ls --json | grep -q 'DROP TABLE'"
ok "the tensor table still exists" sqlite3 "$QSCOPE_DB" "SELECT count(*) FROM tensor"
refuses "name collision with another file needs --prefix" 1 "evil.npy: tensor name .h. is already used by another file" $QS import --prefix h "$T/evil.npy"

# the committed GGUF and safetensors fixtures, end to end: every tensor's statistics match the
# values the fixture script computed with its own (numpy) dequantizers
ok "import the GGUF and safetensors fixtures (embedded)" $QS import --copy "$FIX/gguf" "$FIX/st"
ok "GGUF/safetensors tensors: dtype, shape and mean/absmax agree with the fixture's values" /usr/bin/python3 - "$QS" "$FIX" <<'PY'
import sys, json, glob, os, subprocess, math
qs, fix = sys.argv[1], sys.argv[2]
listed = {t["name"]: t for t in json.loads(subprocess.check_output([qs, "ls", "--json"]))}
n = 0
for exp in sorted(glob.glob(f"{fix}/gguf/*.expected.json") + glob.glob(f"{fix}/st/*.expected.json")):
    stem = os.path.basename(exp)[:-len(".expected.json")]
    for t in json.load(open(exp)).get("tensors", []):
        name = f"{stem}:{t['name']}"
        assert name in listed, name
        s = json.loads(subprocess.check_output([qs, "show", name, "--json"]))
        assert s["dtype"] == t["dtype"] and s["shape"] == t["shape"], (name, s["dtype"], t["dtype"])
        vals = [v for v in t.get("values", []) if isinstance(v, (int, float)) and math.isfinite(v)]
        if not vals or len(vals) != s["numel"]:
            continue
        st = s["stats"]
        assert math.isclose(st["absmax"], max(abs(v) for v in vals), rel_tol=1e-6), name
        assert math.isclose(st["mean"], sum(vals) / len(vals), rel_tol=1e-5, abs_tol=1e-7), name
        n += 1
assert n >= 5, n
PY
done_testing
