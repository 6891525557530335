#!/usr/bin/env bash
# `qscope claims`: the quick run's must-hold verdicts, JSON, selection, plots, stored results, errors.
source "$(dirname "$0")/lib.sh"

ok "claims --quick: every must-hold claim reproduces" $QS claims --quick
ok "claims --quick --json" bash -c "$QS claims --quick --json > $T/c.json"
check "JSON: every claim has a verdict, the paper's and the measured figure" \
  "python3 -c 'import json; d=json.load(open(\"$T/c.json\")); c=d[\"claims\"]; assert len(c)>=7; \
   assert all(x[\"verdict\"] in (\"reproduced\",\"differs\",\"not on CPU\",\"model\",\"inconclusive\") and x[\"paper_figure\"] and x[\"measured\"] for x in c); \
   m={x[\"id\"]:x for x in c}; assert m[\"hif8.binades\"][\"value\"]==38; \
   assert all(x[\"verdict\"]==\"reproduced\" for x in c if x[\"must_hold\"])'"
check "msd.kv-traffic compares two constants of our model: verdict model, not a must-hold reproduction" \
  "python3 -c 'import json; m={x[\"id\"]:x for x in json.load(open(\"$T/c.json\"))[\"claims\"]}; k=m[\"msd.kv-traffic\"]; assert k[\"verdict\"]==\"model\" and not k[\"must_hold\"], k'"
check "LoPT: lossless must hold and counts differing ids over its runs; the 2-thread speed-up is measured against 1.8x, not a must-hold" \
  "python3 -c 'import json; m={x[\"id\"]:x for x in json.load(open(\"$T/c.json\"))[\"claims\"]}; l=m[\"lopt.lossless\"]; s=m[\"lopt.speedup\"]; \
   assert l[\"must_hold\"] and l[\"measured\"].endswith(\" runs\") and l[\"value\"]==0 and \"cut into chunks\" in l[\"detail\"], l; \
   assert not s[\"must_hold\"] and s[\"value\"]>0 and \"1.8x\" in s[\"tolerance\"], s; \
   assert s[\"verdict\"]==\"reproduced\" if s[\"value\"]>=1.8 else (s[\"verdict\"]==\"differs\" or \
     s[\"verdict\"]==\"inconclusive\" and (\"was busy\" in s[\"detail\"] or \"One core\" in s[\"detail\"])), s'"
(cd / && $QS claims --quick --only 'lopt.lossless' --json > "$T/lopt.json" 2>/dev/null)
check "lopt.lossless without make data: the built-in tokenizer on the generated texts, said with data:" \
  "python3 -c 'import json; l=json.load(open(\"$T/lopt.json\"))[\"claims\"][0]; assert l[\"detail\"].startswith(\"data:\") and \"built-in\" in l[\"detail\"] and l[\"value\"]==0, l'"
check "amla.error: 1.10x is the project's target, the row says the paper gives no figure" \
  "python3 -c 'import json; m={x[\"id\"]:x for x in json.load(open(\"$T/c.json\"))[\"claims\"]}; a=m[\"amla.error\"]; assert \"project target\" in a[\"claim\"] and \"paper gives no figure\" in a[\"claim\"] and \"target\" in a[\"paper_figure\"] and \"project target\" in a[\"tolerance\"], a'"
check "HiF4 : NVFP4 : MXFP4 measured near 1 : 1.32 : 1.89" \
  "python3 -c 'import json; m={x[\"id\"]:x for x in json.load(open(\"$T/c.json\"))[\"claims\"]}; v=m[\"hif4.mse\"][\"value\"]; assert 1.25<v<1.40, v'"
check "the same seeds give the same figures" \
  "$QS claims --quick --only 'uos.*' --json | python3 -c 'import json,sys; a=json.load(sys.stdin)[\"claims\"]; b=[x for x in json.load(open(\"$T/c.json\"))[\"claims\"] if x[\"id\"].startswith(\"uos.\")]; assert len(a)==1 and [x[\"measured\"] for x in a]==[x[\"measured\"] for x in b]'"
ok "--only selects by glob" bash -c "$QS claims --quick --only 'hif8.*' > $T/only.txt"
check "--only: four HiF8 claims, nothing else" "[ \$(grep -c '^hif8\.' $T/only.txt) -eq 4 ] && ! grep -q '^uos' $T/only.txt"
refuses "--only matching nothing is an error" 1 "no claim matches .nope\.\*." $QS claims --only 'nope.*'
refuses "unknown option is a usage error" 2 "unknown argument .--frobnicate." $QS claims --frobnicate
ok "--plots writes PNGs" $QS claims --quick --only 'uos.*' --plots "$T/png"
check "the UOS plot decodes as a PNG with provenance" \
  "python3 -c 'import sys; b=open(\"$T/png/claim-uos.threshold.png\",\"rb\").read(); assert b[:8]==b\"\\x89PNG\\r\\n\\x1a\\n\"; assert b\"qscope claims\" in b'"
ok "--save stores the results" $QS claims --quick --only 'hif8.*' --save
check "stored as result rows of kind 'claim'" "[ \$(sqlite3 $QSCOPE_DB \"select count(*) from result where kind='claim'\") -eq 4 ]"
ok "--list" bash -c "$QS claims --list | grep -q 'pnq.rowsum'"
$QS gen gaussian --name g --shape 128x128 >/dev/null
ok "report carries the claims section" $QS report -o "$T/rep" --formats mxfp4 --format html
check "HTML: claims table with every claim, its plots embedded" \
  "grep -q '<h2 id=\"s-claims\">Paper claims</h2>' $T/rep/report.html && grep -q 'hif8.binades' $T/rep/report.html && \
   [ \$(grep -o 'data:image/png;base64' $T/rep/report.html | wc -l) -ge 4 ]"
ok "report --format json: claims in sections" bash -c "$QS report -o $T/repj --formats mxfp4 --format json >/dev/null && \
  python3 -c 'import json; d=json.load(open(\"$T/repj/report.json\")); s=d[\"sections\"][0]; assert s[\"id\"]==\"claims\" and len(s[\"rows\"])>=7'"
ok "report --claims none leaves it out" bash -c "$QS report -o $T/repn --formats mxfp4 --claims none >/dev/null && ! grep -q 'Paper claims' $T/repn/report.md"
refuses "report --claims with a bad mode" 2 "--claims is quick, full or none" $QS report -o "$T/repx" --claims sometimes
done_testing
