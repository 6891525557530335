#!/usr/bin/env bash
# `qscope report` sections beyond the tensors: RL runs and kernel experiments, when the database has them.
source "$(dirname "$0")/lib.sh"

$QS gen gaussian --name g --shape 64x64 >/dev/null
ok "report without RL runs or kernel results" $QS report -o "$T/r0" --formats mxfp4 --claims none
check "no RL or kernel section then" "! grep -q 'RL runs' $T/r0/report.md && ! grep -q 'Kernel experiments' $T/r0/report.md"
# the main error source is the one carrying most of the error energy: on Gaussian data MXFP4 flushes
# more values than it clips, but rounding carries most of sum e^2
check "main error source of mxfp4 on Gaussian data: rounding with its share, not underflow" \
  "grep '^| 1 | mxfp4 |' $T/r0/report.md | grep -Eq '\| rounding [0-9]+%' && ! grep '^| 1 | mxfp4 |' $T/r0/report.md | grep -q '| underflow |'"
ok "report with per-format options" $QS report -o "$T/rl" --formats 'fp8_e4m3:sat,mxfp4:scale-rule=rceil,fp32' --claims none
check "the plots' qscope:formats chunk carries the canonical labels" "grep -qa 'fp8_e4m3:sat,mxfp4:rceil,fp32' $T/rl/t000_pareto.png"
ok "a small simulation stores RL runs" $QS sim grpo --formats mxfp4 --methods exact,none --seeds 1 --steps 30 --log-every 10
ok "msd, attn and resq store kernel results" bash -c "$QS msd >/dev/null && $QS attn --L 128,256 >/dev/null && $QS resq >/dev/null"
ok "report with them" $QS report -o "$T/r1" --formats mxfp4 --claims none
check "RL section: a row per run, the k3 plot" \
  "grep -q '^## RL runs' $T/r1/report.md && grep -q '^| sim/grpo/mxfp4/none/seed0 ' $T/r1/report.md && [ -s $T/r1/rl_k3.png ]"
check "RL table: the logged steps with their range (the plot's x axis), as \`qscope runs\` says" \
  "grep '^| sim/grpo/mxfp4/none/seed0 ' $T/r1/report.md | grep -Eq '\| [0-9]+ / 4 \(0\.\.29\) \|' && grep -q 'tokens / steps (range)' $T/r1/report.md"
check "the k3 figure says which runs it draws: exact rollouts (k3 = 0) cannot be drawn on its log axis" \
  "grep -qF '![Rollout-trainer mismatch per step (KL estimator k3): 1 of 2 runs](rl_k3.png)' $T/r1/report.md"
check "mismatch is zero for exact rollouts and not for MXFP4" \
  "grep '^| sim/grpo/exact/exact/seed0 ' $T/r1/report.md | grep -q '| 0 | 0 | 1.000 |' && ! grep '^| sim/grpo/mxfp4/none/seed0 ' $T/r1/report.md | grep -q '| 0 | 0 | 1.000 |'"
check "kernel sections with their plots" \
  "grep -q '^## Kernel experiments: Multi-Scale Dequant' $T/r1/report.md && grep -q '^## Kernel experiments: attention' $T/r1/report.md && \
   grep -q '^## Kernel experiments: Rollout-ResQ' $T/r1/report.md && [ -s $T/r1/kernel_msd.png ] && [ -s $T/r1/kernel_attn.png ] && [ -s $T/r1/kernel_resq.png ]"
check "MSD table: 15.98 max-error bits for two INT8 passes on Gaussian data" \
  "grep -q '^| int8 | gaussian | 2 | [0-9.]* | 15.98 |' $T/r1/report.md"
check "MSD table: the two single-pass MXFP8 rows say their scale rule (they read alike)" \
  "[ \$(grep -c '^| mxfp8_e4m3, scale [a-z]' $T/r1/report.md) -eq \$(grep -c '^| mxfp8_e4m3' $T/r1/report.md) ] && \
   [ \$(grep '^| mxfp8_e4m3' $T/r1/report.md | cut -d'|' -f2-4 | sort | uniq -d | wc -l) -eq 0 ] && grep -q '^| mxfp8_e4m3' $T/r1/report.md"
check "MSD table: the single-pass MXFP8 rows say why they have no max-error bits (no bare '-')" \
  "n=\$(grep -c '^| mxfp8_e4m3, scale' $T/r1/report.md) && [ \$n -gt 0 ] && [ \$(grep '^| mxfp8_e4m3, scale' $T/r1/report.md | grep -c '| n/a (RMS only) |\$') -eq \$n ] && \
   grep -q 'MXFP8 rows compare its two scale rules by RMS bits only' $T/r1/report.md && ! grep '^| [a-z0-9]' $T/r1/report.md | grep -q '| - |'"
check "the markdown tables escape pipes in headers" "grep -q '\\\\|δ\\\\|' $T/r1/report.md"
ok "HTML report embeds every plot" bash -c "$QS report -o $T/r2 --format html --formats mxfp4 --claims none >/dev/null && \
  [ \$(grep -o 'data:image/png;base64,' $T/r2/report.html | wc -l) -eq \$(ls $T/r2/*.png | wc -l) ]"
ok "JSON report carries the sections" bash -c "$QS report -o $T/r3 --format json --formats mxfp4 --claims none >/dev/null && \
  python3 -c 'import json; d=json.load(open(\"$T/r3/report.json\")); assert [s[\"id\"] for s in d[\"sections\"]]==[\"rl\",\"msd\",\"attn\",\"resq\"]'"
check "HTML and JSON reports name the same main error source as the markdown one" \
  "src=\$(grep '^| 1 | mxfp4 |' $T/r0/report.md | cut -d'|' -f10 | sed 's/^ *//; s/ *\$//') && echo \"\$src\" | grep -q '^rounding [0-9]' && grep -qF \"<td>\$src</td>\" $T/r2/report.html &&
   python3 -c 'import json,sys; d=json.load(open(\"$T/r3/report.json\")); r=d[\"tensors\"][0][\"results\"][0]; assert r[\"main_error_source\"]==sys.argv[1], r' \"\$src\""
check "plot PNG provenance names the result" "grep -q 'qscope report (newest msd result)' $T/r1/kernel_msd.png"

# the HTML opens with a summary: contents linking every tensor and section, and per tensor the format
# to use at each bit budget, before the first detail table
$QS gen laplace --name h --shape 64x64 >/dev/null
ok "HTML report with two tensors" bash -c "$QS report -o $T/r4 --format html --formats mxfp4,mxfp6_e2m3,fp8_e4m3 --claims none --no-plots \
  > /dev/null 2> $T/r4.err"
check "contents list every tensor and section, linked to their headings" \
  "python3 - $T/r4/report.html <<'PY'
import re, sys
h = open(sys.argv[1]).read()
toc = h.index('<nav class=\"toc\">'); first = h.index('<table><tr><th>rank')
assert toc < first
links = re.findall(r'<li><a href=\"#([^\"]+)\">', h[toc:h.index('</nav>')])
assert links[:2] == ['t1', 't2'] and 's-rl' in links and 's-resq' in links, links
for a in links: assert 'id=\"%s\"' % a in h, a
PY"
check "per tensor the answer at <= 4.5 / 6.25 / 8.25 bits comes before the first detail table" \
  "python3 - $T/r4/report.html <<'PY'
import sys
h = open(sys.argv[1]).read()
first = h.index('<table><tr><th>rank')
s = h[h.index('<table class=\"summary\">'):first]
s = s[:s.index('</table>')]
rows = s.split('<tr><td>')[1:]
assert len(rows) == 2 and all(r.count('eff. bits') == 3 for r in rows), rows
assert '<b>mxfp4</b>' in rows[0] and '<b>mxfp6_e2m3</b>' in rows[0], rows[0]
a = h.index('<p class=\"answer\"><b>Which format:</b> at ≤ 4.5 bits/element <b>mxfp4</b>')
assert a < first
PY"
ok "the same report in Markdown" bash -c "$QS report -o $T/r4m --formats mxfp4,mxfp6_e2m3,fp8_e4m3,bf16 --claims none --no-plots >/dev/null 2>&1 && \
  $QS report -o $T/r4h --format html --formats mxfp4,mxfp6_e2m3,fp8_e4m3,bf16 --claims none --no-plots >/dev/null 2>&1"
check "the 'which format' answer reads the same in Markdown and HTML (budgets, formats, words)" \
  "python3 - $T/r4m/report.md $T/r4h/report.html <<'PY'
import re, sys
md = [re.sub(r'\*\*', '', l) for l in open(sys.argv[1]).read().splitlines() if l.startswith('**Which format:**')]
ht = [re.sub(r'<[^>]+>', '', l) for l in re.findall(r'<p class=\"answer\">(.*?)</p>', open(sys.argv[2]).read())]
assert len(md) == 2 and md == ht, (md, ht)
assert all('≤ 16 bits/element bf16' in l for l in md), md
PY"
check "no progress lines when stderr is not a terminal" "! grep -q 'qscope report: tensor' $T/r4.err"
if command -v script >/dev/null; then
  ok "on a terminal the report shows which tensor it is on" bash -c "script -qec \"$QS report -o $T/r5 --formats mxfp4 --claims none --no-plots\" /dev/null > $T/r5.tty"
  check "... tensor 1 of 2, then 2 of 2" "grep -q 'qscope report: tensor 1 of 2: g' $T/r5.tty && grep -q 'qscope report: tensor 2 of 2: h' $T/r5.tty"
else
  skip "on a terminal the report shows which tensor it is on" "script (util-linux) not installed"
fi
# issue 28: `llm score` runs (one "step" per prompt, no training) and GRPO runs (training steps)
# were drawn on one "step" axis; now each kind has its own figure, named for its x
R2="env QSCOPE_DB=$T/rl2.db $QS"
ok "a tensor, an llm score run and a GRPO simulation" bash -c "$R2 gen gaussian --name g --shape 16x16 >/dev/null && \
  $R2 llm score --model '$FIX/llm/tiny.gguf' --rollout-format mxfp4 --prompts 4 --seqs 2 --tokens 6 >/dev/null && \
  $R2 sim grpo --formats mxfp4 --methods none --seeds 1 --steps 30 --log-every 10 >/dev/null"
ok "report on them" $R2 report -o "$T/r6" --formats mxfp4 --claims none
check "two k3 figures: training steps, and llm score's prompts apart" \
  "grep -qF '![Rollout-trainer mismatch per step (KL estimator k3)](rl_k3.png)' $T/r6/report.md && \
   grep -qF '![Rollout-reference mismatch per prompt (llm score, KL estimator k3)](rl_k3_prompts.png)' $T/r6/report.md && \
   [ -s $T/r6/rl_k3.png ] && [ -s $T/r6/rl_k3_prompts.png ]"
ok "ais on the llm score run stores its trajectories" bash -c "$R2 ais \$($R2 runs | awk '/^llm:tiny:/ {print \$1}') >/dev/null"
ok "plot trajectory of it in the terminal" $R2 plot trajectory -o - --width 80 --height 20
check "its x axis is the prompt, not a step" "tail -n 3 $T/out | grep -q 'prompt (llm score: no training)' && ! tail -n 3 $T/out | grep -qw step"
check "the table counts an llm score run's prompts as prompts" \
  "grep '^| llm:tiny:' $T/r6/report.md | grep -qE '\| [0-9]+ / 4 prompts \(0\.\.3\) \|' && grep '^| sim/grpo/' $T/r6/report.md | grep -qE '\| [0-9]+ / 4 \(0\.\.29\) \|'"
done_testing
