#!/usr/bin/env bash
# CLI conventions: help, version, exit codes, stdout/stderr split, database path resolution,
# colour only on a terminal and never with NO_COLOR.
source "$(dirname "$0")/lib.sh"

ok "--help lists commands" bash -c "$QS --help | grep -q '^  import '"
ok "--version prints the version" bash -c "$QS --version | grep -Eq '^qscope [0-9]+\.[0-9]+\.[0-9]+'"
ok "help import shows the options" bash -c "$QS help import | grep -q -- '--copy'"
for c in import ls show rm gen info demo check schema bench; do
  ok "help $c exists" bash -c "$QS help $c | grep -q 'usage: qscope'"
  ok "$c --help is the same as help $c" bash -c "diff <($QS $c --help) <($QS help $c)"
done
refuses "unknown command is a usage error" 2 "unknown command .frobnicate." $QS frobnicate
check "usage error message goes to stderr, not stdout" "[ ! -s $T/out ] && grep -q 'unknown command' $T/err"
refuses "a mistyped command is a usage error" 2 "unknown command .anlyze." $QS anlyze
check "... one line naming the nearest command, no usage dump" \
  "[ \$(wc -l < $T/err) -eq 1 ] && grep -qx \"qscope: unknown command 'anlyze' (did you mean 'analyze'?)\" $T/err && [ ! -s $T/out ]"
refuses "a global option that does not exist" 2 "unknown option .--frob." $QS --frob ls
check "... is one line too" "[ \$(wc -l < $T/err) -eq 1 ] && grep -q \"unknown option '--frob'\" $T/err"
refuses "help of a mistyped command" 2 "shw" $QS help shw
check "... suggests the command" "grep -q \"did you mean 'show'\" $T/err"
refuses "a usage error whose message points somewhere" 2 "unknown kind .cauchy." $QS gen cauchy --name x
check "... carries one hint, not two" "[ \$(grep -o '(see ' $T/err | wc -l) -eq 1 ]"
refuses "unknown format" 2 "unknown format .nosuchfmt." $QS analyze 'x*' -f nosuchfmt
check "... carries one hint, not two" "[ \$(grep -o '(see ' $T/err | wc -l) -eq 1 ]"
mkdir -p "$T/bare"
ok "bare qscope outside a terminal prints the help" bash -c "cd $T/bare && env -u QSCOPE_DB $QS </dev/null > $T/bare.out 2>&1"
check "... the command list, and creates no database" "grep -q '^  import ' $T/bare.out && [ -z \"\$(ls -A $T/bare)\" ]"
refuses "unknown option is a usage error" 2 "unknown option .--bogus." $QS ls --bogus
refuses "help for unknown command" 2 "no such command .nope." $QS help nope
refuses "show without a name" 2 "give exactly one tensor name" $QS show
refuses "gen with unknown kind" 2 "unknown kind .cauchy." $QS gen cauchy --name x
refuses "gen needs --name or -o" 2 "give either --name NAME" $QS gen gaussian
refuses "gen bad shape" 2 "bad --shape .3y4." $QS gen gaussian --shape 3y4 --name x
refuses "import with no files" 2 "no files given" $QS import
refuses "import --as rejects non-reinterpretable types" 2 "not .q4_0." $QS import --as q4_0 x.npy
refuses "show of a missing tensor is a runtime error" 1 "no tensor named .nosuch." $QS show nosuch
check "missing-tensor error is one line on stderr" "[ \$(wc -l < $T/err) -eq 1 ] && grep -q \"no tensor named 'nosuch'\" $T/err"

# database path: --db, then $QSCOPE_DB, then ./qscope.db
(cd "$T" && env -u QSCOPE_DB "$QS" info >/dev/null 2>&1)
check "default database is ./qscope.db" "[ -f $T/qscope.db ]"
QSCOPE_DB="$T/env.db" $QS info >/dev/null
check "\$QSCOPE_DB is used" "[ -f $T/env.db ]"
QSCOPE_DB="$T/env.db" $QS --db "$T/flag.db" info >/dev/null
check "--db wins over \$QSCOPE_DB" "[ -f $T/flag.db ]"
ok "database created with the current schema" bash -c "[ \$(sqlite3 $T/flag.db 'PRAGMA user_version') = \$($QS schema | grep -c '^-- migration') ]"
ok "database is in WAL mode" bash -c "[ \$(sqlite3 $T/flag.db 'PRAGMA journal_mode') = wal ]"
cp "$ROOT/Makefile" "$T/notdb.txt"
refuses "a non-database file is refused" 1 "notdb.txt: .*not a database" $QS --db "$T/notdb.txt" info
check "refusal names the file and leaves it alone" "grep -q notdb.txt $T/err && cmp -s $ROOT/Makefile $T/notdb.txt"
ok "schema prints CREATE TABLE" bash -c "$QS schema | grep -q 'CREATE TABLE tensor('"

# colour: never when NO_COLOR is set or stdout is not a terminal
$QS gen gaussian --n 1000 --name c1 >/dev/null 2>&1
check "no escape codes when piped" "no_match \$'\\033' $QS ls"
if command -v script >/dev/null; then
  check "colour on a terminal" "env -u NO_COLOR script -qec '$QS ls' /dev/null >$T/tty1 && grep -q \$'\\033\\[' $T/tty1"
  check "NO_COLOR disables colour on a terminal" "NO_COLOR=1 script -qec '$QS ls' /dev/null >$T/tty2 && grep -q NAME $T/tty2 && ! grep -q \$'\\033\\[' $T/tty2"
else
  skip "colour on a terminal" "script (util-linux) not installed"
fi

# ls: a name longer than the NAME column widens it, so SHAPE stays under its header in every row
$QS gen gaussian --shape 4x8 --name minilm-sample:encoder.layer.0.attention.self.query.weight >/dev/null 2>&1
check "ls keeps its columns aligned past long names" "$QS ls | awk 'NR == 1 { c = index(\$0, \"SHAPE\") } NR > 1 { if (substr(\$0, c - 1, 1) != \" \" || substr(\$0, c, 1) == \" \") bad = 1 } END { exit bad }'"
check "and info's list of the largest tensors" "$QS info | awk '/LARGEST TENSORS/ { c = index(\$0, \"DTYPE\"); on = 1; next } on && c { if (substr(\$0, c - 1, 1) != \" \" || substr(\$0, c, 3) != \"f32\") bad = 1 } END { exit bad || !c }'"
check "so does the analyze table" "$QS analyze c1 minilm-sample:encoder.layer.0.attention.self.query.weight -f mxfp4 | awk 'NR == 1 { c = index(\$0, \"FORMAT\") } NR > 1 { if (substr(\$0, c - 1, 1) != \" \" || substr(\$0, c, 5) != \"mxfp4\") bad = 1 } END { exit bad || NR != 3 }'"

# --json on listing commands parses
for c in "ls" "info" "show c1" "check"; do
  ok "$c --json is valid JSON" bash -c "$QS $c --json | python3 -c 'import json,sys; json.load(sys.stdin)'"
done
done_testing
