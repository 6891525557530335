#!/usr/bin/env bash
# llm eval's statistics and output (issue 28): aligned tables with significant digits, --ci bootstrap
# over chunks, --paired comparisons (checked against an independent computation from the stored
# per-token arrays), the note on what the intervals do not cover, --csv of llm eval and llm
# sensitivity (parsed by Python's csv module), and the refusals.
source "$(dirname "$0")/lib.sh"
TINY="$FIX/llm/tiny.gguf"
PY=/usr/bin/python3
jq_() { $PY -c "import json,sys; d=json.load(open('$1')); print($2)"; }

$PY - "$T/text.txt" <<'PY'
import random, sys
random.seed(7)
w = "the a of and to in is was it that he she for with as his her on be at by had not but from they this".split()
open(sys.argv[1], "w").write(" ".join(" ".join(random.choice(w) for _ in range(random.randint(5, 12))).capitalize() + "." for _ in range(70)) + "\n")
PY
E=(llm eval --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 6)
C=(--config a=mxfp4 --config w=bf16,a=bf16 --config kv=fp8_e4m3 --config a=fp32)

# --- the table: columns in line whatever the widths, no nonzero value printed as zeros
ok "table" "$QS" "${E[@]}" "${C[@]}"
cp "$T/out" "$T/table.txt"
cat > "$T/cols.py" <<'PY'
import sys
# the N rows under the header line starting with HEAD each have, for every NAME of NAMES (;-separated), a cell ending exactly where each
# header name ends (right-aligned), in terminal columns (str, not bytes: "±" is one column); after a
# cell comes a space, the end of the line, or one of the characters AFTER (default none)
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
start = next(i for i, l in enumerate(lines) if l.startswith(sys.argv[2]) and not l.startswith("configs:"))   # not the header's configs line
rows = lines[start + 1:start + 1 + int(sys.argv[4])]
after = " " + (sys.argv[5] if len(sys.argv) > 5 else "")
head = lines[start]
names = sys.argv[3].split(";")
ends, pos = [], 0
for n in names:
    p = head.index(n, pos); pos = p + len(n); ends.append(pos)
assert all(r.strip() for r in rows), rows
full = [r for r in rows if "FAILED" not in r and not r.startswith("reference")]
assert len(full) >= int(sys.argv[4]) - 1 and all(len(r) >= ends[-1] for r in full), rows
for r in full:
    for e in ends:
        assert r[e - 1] not in after and (e == len(r) or r[e] in after), (e, r)
print("columns in line:", len(full), "rows")
PY
check "table: every cell ends under its header (columns in line)" \
  "$PY '$T/cols.py' '$T/table.txt' config 'PPL;dPPL [95% CI];KL mean;median;p90;p99;max;same top;RMS dp;cor' 5"
check "table: no nonzero value as zeros (no ±0.0000, no 0.00000 cell)" \
  "! grep -E '±0\.0+( |$)| 0\.0000+( |$)' '$T/table.txt'"
check "table: the small values of bf16 with significant digits (e-0N)" "grep -E '^w=bf16,a=bf16 .*[0-9]\.[0-9]e-0[0-9]' '$T/table.txt' >/dev/null"
check "table: exact zeros of the fp32 config print as 0" "grep -E '^fp32 .* 0±0 ' '$T/table.txt' >/dev/null"
check "table: the default intervals are named (tokens independent; --ci bootstrap offered)" \
  "grep -q 'tokens treated as independent; --ci bootstrap resamples whole chunks' '$T/table.txt'"
check "note: the rounding draws the intervals do not cover, naming the configurations that round activations or KV" \
  "grep -q \"^note: rounding activations or the KV cache moves PPL by about 0.1-0.2% with the summation order .*no interval here covers such a 'draw'.*(configurations: a=mxfp4; w=bf16,a=bf16; kv=fp8_e4m3); --paired compares\" '$T/table.txt'"
ok "a weights-only configuration" "$QS" "${E[@]}" --config w=bf16
check "... has no note about rounding draws" "! grep -q 'rounding activations' '$T/out'"

# --- --ci bootstrap: deterministic, over whole chunks, named in the output and the JSON
ok "--ci bootstrap --json" "$QS" "${E[@]}" "${C[@]}" --ci bootstrap --json
cp "$T/out" "$T/b1.json"
check "JSON: ci names the method, unit, resamples and seed; not_covered says what is left out" \
  '[ "$(jq_ "$T/b1.json" "(d[\"ci\"][\"method\"], d[\"ci\"][\"unit\"], d[\"ci\"][\"resamples\"], d[\"ci\"][\"seed\"], \"draw\" in d[\"ci\"][\"not_covered\"])")" = "('"'"'bootstrap'"'"', '"'"'chunk'"'"', 1000, 1, True)" ]'
check "JSON: every interval brackets its estimate (PPL of every variant, dPPL and KL mean of every config)" \
  '[ "$(jq_ "$T/b1.json" "all(v[\"bootstrap\"][\"ppl_ci95\"][0] <= v[\"ppl\"] * (1 + 1e-6) and v[\"ppl\"] <= v[\"bootstrap\"][\"ppl_ci95\"][1] * (1 + 1e-6) for v in [d[\"reference\"]] + d[\"configs\"]) and all(c[\"bootstrap\"][\"dppl_rel_ci95\"][0] <= c[\"dppl_rel\"] + 1e-9 <= c[\"bootstrap\"][\"dppl_rel_ci95\"][1] + 2e-9 and c[\"bootstrap\"][\"kl_mean_ci95\"][0] <= c[\"kl_mean\"] + 1e-12 <= c[\"bootstrap\"][\"kl_mean_ci95\"][1] + 2e-12 for c in d[\"configs\"])")" = True ]'
# an independent check from the stored per-token arrays: a percentile interval of resampled chunk
# means lies between the smallest and the largest chunk mean, and is wider than nothing
cat > "$T/chunks.py" <<'PY'
import json, sqlite3, struct, sys, math
db, js, cfg = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
con = sqlite3.connect(db)
def arr(label, name):
    (b,) = con.execute("SELECT b.data FROM result_blob b JOIN result r ON r.id = b.result_id WHERE r.kind = 'llm_eval' AND r.format = ? "
                       "AND b.name = ? AND r.options LIKE '%\"chunks\":6,%'", (label, name)).fetchone()
    return struct.unpack("<%df" % (len(b) // 4), b)
per, C = 31, 6
kl = arr(cfg, "kl")
means = [sum(kl[c * per:(c + 1) * per]) / per for c in range(C)]
c = next(c for c in js["configs"] if c["label"] == cfg)
lo, hi = c["bootstrap"]["kl_mean_ci95"]
assert min(means) - 1e-9 <= lo < hi <= max(means) + 1e-9, (means, lo, hi)
print("ok")
PY
check "bootstrap KL interval of a=mxfp4 within its chunk means (from the stored arrays)" \
  "$PY '$T/chunks.py' '$QSCOPE_DB' '$T/b1.json' a=mxfp4 >/dev/null"
ok "again (reused results)" "$QS" "${E[@]}" "${C[@]}" --ci bootstrap --json
check "deterministic: the same intervals from reused results" \
  '[ "$(jq_ "$T/out" "[c[\"bootstrap\"] for c in d[\"configs\"]] == [c[\"bootstrap\"] for c in json.load(open(\"$T/b1.json\"))[\"configs\"]] and all(c[\"cached\"] for c in d[\"configs\"])")" = True ]'
ok "another seed and count" "$QS" "${E[@]}" "${C[@]}" --ci bootstrap:400:9 --json
check "... other resamples, other intervals, named" \
  '[ "$(jq_ "$T/out" "d[\"ci\"][\"resamples\"] == 400 and d[\"ci\"][\"seed\"] == 9 and d[\"configs\"][0][\"bootstrap\"] != json.load(open(\"$T/b1.json\"))[\"configs\"][0][\"bootstrap\"]")" = True ]'
ok "--ci bootstrap table" "$QS" "${E[@]}" "${C[@]}" --ci bootstrap
cp "$T/out" "$T/btable.txt"
check "bootstrap table: method, resamples and chunks named; interval columns in line" \
  "grep -q 'PPL, dPPL and KL mean: 95% intervals by a bootstrap over whole chunks (1000 resamples of 6 chunks, seed 1)' '$T/btable.txt' &&
   $PY '$T/cols.py' '$T/btable.txt' config 'PPL [95% CI];dPPL [95% CI];KL mean [95% CI];median;cor' 5"
ok "--ci delta --json" "$QS" "${E[@]}" --config a=mxfp4 --ci delta --json
check "delta: named, per token, no bootstrap fields" \
  '[ "$(jq_ "$T/out" "(d[\"ci\"][\"method\"], d[\"ci\"][\"unit\"], \"bootstrap\" in d[\"configs\"][0])")" = "('"'"'delta'"'"', '"'"'token'"'"', False)" ]'

# --- --paired: configuration B against A on the same tokens, from the per-chunk differences
ok "--paired --json" "$QS" "${E[@]}" "${C[@]}" --paired --json
cp "$T/out" "$T/p.json"
cat > "$T/paired.py" <<'PY'
import json, sqlite3, struct, sys, math
db, js = sys.argv[1], json.load(open(sys.argv[2]))
con = sqlite3.connect(db)
def arr(label, name):
    (b,) = con.execute("SELECT b.data FROM result_blob b JOIN result r ON r.id = b.result_id WHERE r.kind = 'llm_eval' AND r.format = ? "
                       "AND b.name = ? AND r.options LIKE '%\"chunks\":6,%'", (label, name)).fetchone()
    return struct.unpack("<%df" % (len(b) // 4), b)
per, C, t5 = 31, 6, 2.571   # Student t, 5 degrees of freedom
assert [p["config"] for p in js["paired"]] == ["w=bf16,a=bf16", "kv=fp8_e4m3", "fp32"], js["paired"]
for p in js["paired"]:
    assert p["against"] == "a=mxfp4" and p["tokens"] == 186 and p["chunks"] == 6
    for key, name in (("d_ln_ppl", "nll"), ("d_kl_mean", "kl")):
        a, b = arr("a=mxfp4", name), arr(p["config"], name)
        d = [b[k] - a[k] for k in range(C * per)]
        m = [sum(d[c * per:(c + 1) * per]) / per for c in range(C)]
        est = sum(m) / C
        se = math.sqrt(sum((x - est) ** 2 for x in m) / (C - 1) / C)   # equal chunks: SE of the chunk means
        lo, hi = p[key + "_ci95"]
        tol = 1e-6 * max(1, abs(est))
        assert abs(p[key] - est) < tol and abs(p[key + "_se"] - se) < 1e-6 * max(se, 1e-9), (key, p, est, se)
        assert abs(lo - (est - t5 * se)) < tol and abs(hi - (est + t5 * se)) < tol, (key, p, est, se)
        assert p[key.replace("d_ln_ppl", "ppl").replace("d_kl_mean", "kl") + "_differs"] == (lo > 0 or hi < 0)
    assert abs(p["ppl_ratio"] - math.exp(p["d_ln_ppl"])) < 1e-12
print("ok")
PY
check "paired: d ln PPL and d KL mean with the t interval over the 6 per-chunk differences (independent Python)" \
  "$PY '$T/paired.py' '$QSCOPE_DB' '$T/p.json' >/dev/null"
check "paired: KL of mxfp4 is clearly above bf16's (the interval excludes 0)" \
  '[ "$(jq_ "$T/p.json" "(d[\"paired\"][0][\"kl_differs\"], d[\"paired\"][0][\"d_kl_mean_ci95\"][1] < 0)")" = "(True, True)" ]'
ok "--paired table" "$QS" "${E[@]}" "${C[@]}" --paired
cp "$T/out" "$T/ptable.txt"
check "paired table: header, method, one row per configuration, columns in line" \
  "grep -q '^paired: each configuration against a=mxfp4 on the same tokens; 95% intervals from the per-chunk differences' '$T/ptable.txt' &&
   $PY '$T/cols.py' '$T/ptable.txt' 'config        against' 'tokens;d ln PPL [95% CI];PPL differs;d KL mean [95% CI];KL differs' 3 &&
   grep -Eq '^kv=fp8_e4m3 +a=mxfp4 +186 .* yes \(lower\)$' '$T/ptable.txt'"
ok "--paired --ci bootstrap --json" "$QS" "${E[@]}" "${C[@]}" --paired --ci bootstrap --json
check "paired bootstrap: named, same estimates, intervals within the chunk differences' range" \
  '[ "$(jq_ "$T/out" "d[\"ci\"][\"paired\"] == \"bootstrap over chunks\" and all(abs(p[\"d_ln_ppl\"] - q[\"d_ln_ppl\"]) < 1e-12 and \"d_ln_ppl_se\" not in p and p[\"d_ln_ppl_ci95\"][0] < p[\"d_ln_ppl\"] < p[\"d_ln_ppl_ci95\"][1] for p, q in zip(d[\"paired\"], json.load(open(\"$T/p.json\"))[\"paired\"]))")" = True ]'

# --- CSV
ok "--csv to stdout" "$QS" "${E[@]}" "${C[@]}" --paired --csv
cp "$T/out" "$T/e.csv"
check "CSV: parsed by Python's csv module, one row per variant, values = the JSON's" "$PY - '$T/e.csv' '$T/p.json' <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1], newline='')))
j = json.load(open(sys.argv[2]))
assert [r['config'] for r in rows] == ['reference', 'a=mxfp4', 'w=bf16,a=bf16', 'kv=fp8_e4m3', 'fp32'], rows   # a label with a comma
assert all(len(r) == len(rows[0]) and None not in r for r in rows)
assert rows[0]['kl_mean'] == '' and rows[0]['ci_method'] == 'delta' and rows[0]['paired_against'] == ''
for r, c in zip(rows[1:], j['configs']):
    for k in ('ppl', 'kl_mean', 'dppl_rel', 'kl_p99', 'top1_agree'):
        assert abs(float(r[k]) - c[k]) <= 1e-8 * max(1, abs(c[k])), (k, r[k], c[k])
    assert abs(float(r['dppl_ci95_lo']) - c['dppl_rel_ci95'][0]) <= 1e-8 * max(1, abs(c['dppl_rel_ci95'][0]))
    assert r['failed'] == '0' and int(r['scored']) == 186 and r['ctx'] == '64' and r['chunks'] == '6'
for r, p in zip(rows[2:], j['paired']):
    assert r['paired_against'] == 'a=mxfp4' and abs(float(r['d_kl_mean']) - p['d_kl_mean']) < 1e-9 and r['kl_differs'] == str(int(p['kl_differs']))
PY"
check "CSV to stdout replaces the table" "head -n 1 '$T/e.csv' | grep -q '^model,text,ctx,' && ! grep -q '^config ' '$T/e.csv'"
ok "--csv FILE (before other options) beside --json" "$QS" "${E[@]}" --csv "$T/f.csv" --config a=mxfp4 --ci bootstrap --json
check "... the JSON on stdout, the CSV in the file with bootstrap intervals" \
  "jq_ '$T/out' 'd[\"ci\"][\"method\"]' | grep -q bootstrap && $PY -c \"
import csv; r = list(csv.DictReader(open('$T/f.csv'))); assert len(r) == 2 and r[1]['ci_method'] == 'bootstrap' and float(r[1]['kl_mean_ci95_lo']) < float(r[1]['kl_mean']) < float(r[1]['kl_mean_ci95_hi'])\""
ok "--csv=FILE with the table" "$QS" "${E[@]}" --config a=mxfp4 --csv="$T/g.csv"
check "... table on stdout, CSV in the file" "grep -q '^a=mxfp4 ' '$T/out' && [ \$(wc -l < '$T/g.csv') = 3 ]"

# a failed configuration: its row has no statistics and failed=1
F=(llm eval --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 2)
ok "eval for a failed row" "$QS" "${F[@]}" --config a=fp8_e4m3
sqlite3 "$QSCOPE_DB" "UPDATE result SET data = json_set(data, '$.scored', 0, '$.nonfinite.logit_rows', 62) WHERE kind = 'llm_eval'
   AND format = 'a=fp8_e4m3' AND options LIKE '%\"chunks\":2,%'"
ok "failed, --csv" "$QS" "${F[@]}" --config a=fp8_e4m3 --csv
check "CSV: failed=1 with empty statistics" "$PY -c \"
import csv, sys; r = list(csv.DictReader(open('$T/out'))); c = r[1]
assert c['config'] == 'a=fp8_e4m3' and c['failed'] == '1' and c['ppl'] == c['kl_mean'] == c['dppl_rel'] == '' and c['nonfinite_logit_rows'] == '62', c\""

# --- llm sensitivity: the table in line, small values with digits, --csv
S=(llm sensitivity --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 2 --format fp8_e4m3)
ok "sensitivity table" "$QS" "${S[@]}" --kl-target 0.001
cp "$T/out" "$T/s.txt"
check "sensitivity: columns in line (the | in one column), no 0.00000 for a nonzero KL" \
  "$PY '$T/cols.py' '$T/s.txt' layer 'layer;attn_in;attn_out;ffn_in;ffn_down_in;kv;w;|;attn_in;attn_out;ffn_in;ffn_down_in;kv;w' 2 '*' &&
   ! grep -E ' 0\.00000[* ]' '$T/s.txt'"
ok "sensitivity --csv" "$QS" "${S[@]}" --kl-target 0.001 --csv
cp "$T/out" "$T/s.csv"
ok "sensitivity --json" "$QS" "${S[@]}" --kl-target 0.001 --json
check "sensitivity CSV: one row per layer x site, KL = the JSON's, ranks 1..12, the plan's BF16 cells" "$PY - '$T/s.csv' '$T/out' <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1], newline='')))
j = json.load(open(sys.argv[2]))
sites = j['sites']
assert len(rows) == j['layers'] * len(sites) == 12, len(rows)
for r in rows:
    l, s = int(r['layer']), sites.index(r['site'])
    assert abs(float(r['kl_mean']) - j['kl_mean'][l][s]) <= 1e-8 * max(1e-6, abs(j['kl_mean'][l][s])), r
    assert abs(float(r['dppl_rel']) - j['dppl'][l][s]) <= 1e-8 * max(1, abs(j['dppl'][l][s]))
    assert int(r['bf16']) == j['plan']['bf16'][l][s] and r['format'] == 'fp8_e4m3'
    o = j['plan']['order'][int(r['rank']) - 1]
    assert (o['layer'], o['site']) == (l, r['site'])
assert sorted(int(r['rank']) for r in rows) == list(range(1, 13))
PY"

# --- refusals: one line, exit 2, nothing stored
before=$(dbdump)
refuses "--paired with one configuration" 2 'paired compares configurations with the first: give at least two --config' \
  "$QS" "${E[@]}" --config a=mxfp4 --paired
refuses "--ci bootstrap over one chunk" 2 "bootstrap's intervals over chunks need at least 2 chunks \(this run has 1: see --chunks, --ctx\)" \
  "$QS" llm eval --model "$TINY" --text "$T/text.txt" --ctx 64 --chunks 1 --config a=nvfp4 --ci bootstrap
refuses "--ci with a bad method" 2 "--ci is delta or bootstrap\[:N\[:SEED\]\]" "$QS" "${E[@]}" --ci jackknife
refuses "--ci bootstrap:3 (too few resamples)" 2 "--ci is delta or bootstrap" "$QS" "${E[@]}" --ci bootstrap:3
refuses "--csv to stdout with --json" 2 "--csv to stdout and --json are exclusive" "$QS" "${E[@]}" --csv --json
refuses "sensitivity: --csv to stdout with --json" 2 "--csv to stdout and --json are exclusive" "$QS" "${S[@]}" --csv --json
check "database unchanged by the refusals" '[ "$(dbdump)" = "$before" ]'
refuses "--csv into a missing directory: the file and the reason" 1 "nodir/x\.csv: cannot write: No such file or directory" \
  "$QS" "${E[@]}" --config a=mxfp4 --csv "$T/nodir/x.csv"

# --- the help says which casts are scaled by default, and names the options
ok "help analyze" "$QS" help analyze
check "help analyze: raw casts by default (NaN past the range), llm scales per row, and the option" \
  "tr '\\n' ' ' < '$T/out' | grep -q 'cast raw by default (scale=none): values past the format.s largest finite become NaN/Inf.*llm eval. and .llm sensitivity. scale per row by default.*(or --scale row|tensor|col)'"
ok "help llm eval" "$QS" help llm eval
cp "$T/out" "$T/help_eval"
ok "help llm sensitivity" "$QS" help llm sensitivity
cat "$T/help_eval" >> "$T/out"
check "help llm eval/sensitivity: --ci, --paired, --csv, the draws, and analyze's raw default" \
  "grep -q -- '--ci delta|bootstrap\\[:N\\[:SEED\\]\\]' '$T/out' && grep -q -- '--paired  *every config' '$T/out' && grep -q -- '--csv \\[FILE\\]  *one row per variant' '$T/out' &&
   grep -q -- '--csv \\[FILE\\]  *one row per layer x site' '$T/out' && grep -q \"raw casts are\" '$T/out' && grep -q \"analyze.'s default: FP8 E4M3 overflows\" '$T/out' && grep -q \"0.1-0.2% PPL 'draws'\" '$T/out'"
done_testing
