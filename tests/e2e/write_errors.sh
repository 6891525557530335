#!/usr/bin/env bash
# Storage errors keep the OS reason, in one wording for every writer (store/io_err.c): past
# `ulimit -f` "file size limit reached (ulimit -f is N KiB)" -- SQLite alone said "disk I/O error",
# the PNG writer "Write Error" -- and on a full disk "no space left on device (ENOSPC)".  Exit 1,
# never SIGXFSZ; the database is unchanged.
source "$(dirname "$0")/lib.sh"
D="$T/w.db"
ok "a tensor" "$QS" --db "$D" gen gaussian --n 65536 --name g
ok "an input file" "$QS" gen gaussian --n 65536 -o "$T/in.npy"
ok "its analyses (so that plot and report write only their files below)" "$QS" --db "$D" plot err-hist g -f nvfp4 -o "$T/p0.png"
ok "...and the report's" "$QS" --db "$D" report -o "$T/r0" --formats mxfp4 --claims none
sqlite3 "$D" 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null
dump0=$(dbdump "$D")
FSZ="file size limit reached \\(ulimit -f is [0-9]+ KiB\\)"
fl() { local kb=$1; shift; bash -c 'ulimit -f "$0" && exec "$@"' "$kb" "$@"; }

refuses "quant -o past ulimit -f" 1 "^qscope: $T/q\\.npy: cannot write: $FSZ$" fl 16 "$QS" quant -f nvfp4 "$T/in.npy" -o "$T/q.npy"
refuses "gen -o past ulimit -f" 1 "^qscope: $T/g\\.npy: cannot write: $FSZ$" fl 16 "$QS" gen gaussian --n 65536 -o "$T/g.npy"
refuses "plot -o past ulimit -f (the PNG; libpng said 'Write Error')" 1 "^qscope: $T/p\\.png: cannot write: $FSZ$" \
  fl 8 "$QS" --db "$D" plot transfer -f mxfp4 -o "$T/p.png"
# (a database needs 32 KiB for its -shm file; the HTML report embeds its plots, over 40 KiB)
refuses "report past ulimit -f" 1 "^qscope: $T/r/report\\.html: cannot write: $FSZ$" \
  fl 40 "$QS" --db "$D" report -o "$T/r" --format html --formats mxfp4 --claims none
refuses "llm eval --save-ids past ulimit -f" 1 "^qscope: $T/ids\\.txt: cannot write: $FSZ$" \
  fl 2 "$QS" llm eval --model "$FIX/llm/tiny.gguf" --text "$ROOT/README.md" --ctx 64 --chunks 2 --save-ids "$T/ids.txt"
check "the database is unchanged by them" '[ "$(dbdump "$D")" = "$dump0" ]'
refuses "analyze storing past ulimit -f: SQLite's 'disk I/O error' with the reason" 1 \
  "^qscope: $D: database error: disk I/O error.*: $FSZ$" fl 100 "$QS" --db "$D" analyze g -f mxfp4,hif8,int8 --blocks
sqlite3 "$D" 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null
dump0=$(dbdump "$D")     # (analyze keeps the pairs it finished)
refuses "quant --name storing past ulimit -f" 1 "^qscope: .*: $FSZ$" fl 100 "$QS" --db "$D" quant g -f nvfp4 --name gq
check "...and the database is unchanged" '[ "$(dbdump "$D")" = "$dump0" ]'

# a full disk: a device that is always full for the file writers, a 1 MiB tmpfs for SQLite
NOSP="no space left on device \\(ENOSPC\\)"
refuses "quant -o /dev/full" 1 "^qscope: /dev/full: cannot write: $NOSP$" "$QS" quant -f nvfp4 "$T/in.npy" -o /dev/full
refuses "llm eval --save-ids /dev/full" 1 "^qscope: /dev/full: cannot write: $NOSP$" \
  "$QS" llm eval --model "$FIX/llm/tiny.gguf" --text "$ROOT/README.md" --ctx 64 --chunks 2 --save-ids /dev/full
mkdir -p "$T/small"
if mount -t tmpfs -o size=1m tmpfs "$T/small" 2>/dev/null; then
  at_exit 'umount "$T/small" 2>/dev/null' 
  refuses "a full disk under the database: 'database or disk is full' with ENOSPC" 1 \
    "^qscope: .*database or disk is full.*: $NOSP$" "$QS" --db "$T/small/f.db" gen gaussian --n 1000000 --name big
  refuses "a full disk under a PNG" 1 "^qscope: $T/small/p\\.png: cannot write: $NOSP$" \
    bash -c 'head -c 1000000 /dev/zero > "$0/fill"; exec "$@"' "$T/small" "$QS" --db "$D" plot err-hist g -f nvfp4 -o "$T/small/p.png"
else
  skip "a full disk under the database" "cannot mount a tmpfs here"
fi
done_testing
