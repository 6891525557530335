#!/usr/bin/env bash
# Hostile files and odd trees: long and multi-byte names stay whole (never two tensors in one row),
# symlink loops end, npz CRC-32 is checked, a rejected import prints one line, the file-size limit
# is an error that names the file, and a file with nothing to import leaves no source row.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
rows() { sqlite3 "$QSCOPE_DB" "SELECT count(*) FROM $1"; }

# ---- long names: two members that differ only after byte 1100; a 3-byte character across byte 1023
$PY - "$T" <<'PY'
import sys, json, struct, numpy as np
d = sys.argv[1]
common = "w" * 1100
np.savez(f"{d}/long.npz", **{common + "_a": np.ones(3, np.float32), common + "_b": np.zeros(3, np.float32)})
euro = "x" * 1022 + "€" * 10          # the first '€' spans bytes 1022..1024 of the member name
hdr = {euro: {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
h = json.dumps(hdr, ensure_ascii=False).encode(); h += b" " * (-len(h) % 8)
open(f"{d}/utf.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + np.array([1, 2], np.float32).tobytes())
open(f"{d}/names.txt", "w").write(f"long:{common}_a\nlong:{common}_b\nutf:{euro}\n")
PY
ok "an npz whose member names differ only after byte 1100 imports" $QS import "$T/long.npz" "$T/utf.safetensors"
check "each tensor has its own row, names stored whole (also a name with '€' across byte 1023)" \
  "[ \"\$(sqlite3 $QSCOPE_DB 'SELECT name FROM tensor ORDER BY name')\" = \"\$(sort $T/names.txt)\" ]"
check "the two long-named tensors keep their own values" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT t.name LIKE '%_a', s.max FROM tensor t JOIN tensor_stats s ON s.tensor_id=t.id WHERE t.name LIKE 'long:%' ORDER BY 1\" | tr '\n' ' ')\" = '0|0.0 1|1.0 ' ]"
ok "re-importing them is a no-op" bash -c "$QS import $T/long.npz $T/utf.safetensors | grep -v '^unchanged' | wc -l | grep -qx 0"
longp=$(printf 'p%.0s' $(seq 1 1500))
ok "a 1500-byte --prefix is kept whole" bash -c "$QS import --prefix $longp $T/utf.safetensors && [ \"\$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM tensor WHERE length(CAST(name AS BLOB)) = 1500 + 1 + 1022 + 30\")\" = 1 ]"

# ---- directory walks: symlink loops end, every file once
mkdir -p "$T/tree/sub"
$PY -c "import numpy as np; np.save('$T/tree/a.npy', np.ones(4, np.float32)); np.save('$T/tree/sub/b.npy', np.zeros(4, np.float32))"
ln -s . "$T/tree/self"; ln -s .. "$T/tree/sub/up"; ln -s ../sub "$T/tree/sub/again"
ln -s a.npy "$T/tree/c.npy"; ln "$T/tree/sub/b.npy" "$T/tree/hard.npy"
ok "import DIR with symlink loops finishes (within 60 s)" timeout 60 $QS import "$T/tree"
check "each file was imported exactly once (a symlinked file once, a hard link as its own file)" \
  "[ \$(grep -c '^added' $T/out) = 3 ] && [ \$(wc -l < $T/out) = 3 ] && [ \"\$(sqlite3 $QSCOPE_DB \"SELECT group_concat(name) FROM (SELECT name FROM tensor WHERE name IN ('a','b','c','hard') ORDER BY name)\")\" = 'a,b,hard' ]"
ok "a loop given on the command line too" timeout 60 $QS import "$T/tree/self" "$T/tree"

# ---- npz CRC-32: a flipped byte in a stored member, a wrong CRC for a deflated member
$PY - "$T" <<'PY'
import sys, struct, zlib, numpy as np
d = sys.argv[1]
a = np.arange(64, dtype=np.float32)
np.savez(f"{d}/crc_ok.npz", a=a)
b = bytearray(open(f"{d}/crc_ok.npz", "rb").read())
i = bytes(b).index(a.tobytes()) + 17          # a byte inside the array data
b[i] ^= 0x40
open(f"{d}/crc_stored.npz", "wb").write(b)
np.savez_compressed(f"{d}/crc_defl.npz", a=a)
b = bytearray(open(f"{d}/crc_defl.npz", "rb").read())
cd = bytes(b).rindex(b"PK\x01\x02")
struct.pack_into("<I", b, cd + 16, struct.unpack_from("<I", b, cd + 16)[0] ^ 1)
open(f"{d}/crc_defl.npz", "wb").write(b)
PY
$QS gen gaussian --shape 4x4 --name seed >/dev/null 2>&1
dump0=$(dbdump)
for f in crc_stored crc_defl; do
  fails "$f.npz is rejected" 1 $QS import "$T/$f.npz"
  check "$f.npz: one line naming the file and the CRC-32 mismatch" \
    "[ \$(wc -l < $T/err) = 1 ] && grep -q \"^qscope: $T/$f.npz: CRC-32 mismatch (directory [0-9a-f]*, data [0-9a-f]*) in member 'a.npy' (at byte [0-9]*)\$\" $T/err"
done
check "database unchanged by the CRC rejections" "[ \"\$(dbdump)\" = '$dump0' ]"
ok "the intact archive imports" $QS import "$T/crc_ok.npz"

# ---- a rejected import prints exactly one line, even after a file that had warnings
printf '\x93NUMPY\x01\x00\x10\x00{junk}          \n' > "$T/bad.npy"
fails "a bad .npy is rejected" 1 $QS import "$T/bad.npy"
check "...with exactly one line" "[ \$(wc -l < $T/err) = 1 ] && grep -q '^qscope: $T/bad.npy: ' $T/err"
fails "a file with warnings, then a bad file" 1 $QS import "$FIX/npy/extra_member.npz" "$T/bad.npy"
check "...prints only the one error line (warnings of rolled-back files are dropped)" \
  "[ \$(wc -l < $T/err) = 1 ] && grep -q '^qscope: $T/bad.npy: ' $T/err"
ok "warnings of a kept file are still printed" $QS import "$FIX/npy/extra_member.npz"
check "...once per warning" "[ \$(grep -c 'warning: member .* skipped' $T/err) = 2 ]"

# ---- the file-size limit (ulimit -f): an error naming the file, not a SIGXFSZ kill
$PY -c "import numpy as np; np.save('$T/big.npy', np.random.default_rng(3).standard_normal((512, 1024)).astype(np.float32))"
$PY -c "import numpy as np; np.savez_compressed('$T/bigz.npz', x=np.zeros((512, 1024), np.float32))"
sqlite3 "$QSCOPE_DB" 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null
dump1=$(dbdump)
fails "import --copy past ulimit -f fails with status 1 (not killed)" 1 bash -c "ulimit -f 256; exec $QS import --copy $T/big.npy"
check "...one line naming the file and the limit" \
  "[ \$(wc -l < $T/err) = 1 ] && grep -q '^qscope: $T/big.npy: .*file size limit reached' $T/err"
check "...and the database is unchanged" "[ \"\$(dbdump)\" = '$dump1' ]"
fails "inflating a deflated member past ulimit -f fails with status 1" 1 bash -c "ulimit -f 256; exec $QS import $T/bigz.npz"
check "...one line naming the file" "[ \$(wc -l < $T/err) = 1 ] && grep -q '^qscope: $T/bigz.npz: .*file size limit reached (ulimit -f is 256 KiB)' $T/err"

# ---- nothing to import: no source row
$PY - "$T" <<'PY'
import sys, struct, numpy as np
d = sys.argv[1]
np.savez(f"{d}/empty.npz")
np.savez(f"{d}/shrinks.npz", a=np.ones(2, np.float32))
# GGUF v3 with one IQ2_XXS tensor (ggml type 16), which qscope does not decode
name = b"blk.0.iq2"
ti = struct.pack("<Q", len(name)) + name + struct.pack("<IQIQ", 1, 256, 16, 0)
h = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + ti
h += b"\0" * (-len(h) % 32)
open(f"{d}/iq2.gguf", "wb").write(h + b"\0" * 66)
PY
srcs=$(rows source)
ok "an empty .npz imports without error" $QS import "$T/empty.npz"
check "...with a warning" "grep -q 'empty.npz: warning: no tensor qscope can import; nothing stored' $T/err"
ok "a GGUF of unknown tensor types only imports without error" $QS import "$T/iq2.gguf"
check "...warning about the skipped tensor" "grep -q \"tensor 'blk.0.iq2' has ggml type 16 (IQ2_XXS)\" $T/err"
check "neither left a source row" "[ \$(rows source) = $srcs ] && no_match 'empty\.npz|iq2\.gguf' sqlite3 $QSCOPE_DB 'SELECT path FROM source'"
ok "an npz with a tensor imports" $QS import "$T/shrinks.npz"
$PY -c "import numpy as np; np.savez('$T/shrinks.npz')"
ok "...and re-imported once emptied" $QS import "$T/shrinks.npz"
check "...its tensor and source row are gone" "no_match shrinks sqlite3 $QSCOPE_DB 'SELECT path FROM source' && [ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM tensor WHERE name LIKE 'shrinks:%'\") = 0 ]"
check "...reported as removed" "grep -q '^removed *1 tensor' $T/out"

# ---- the same cut elsewhere: quant's default output name and source path stay whole
la=$(sed -n 1p "$T/names.txt"); lb=$(sed -n 2p "$T/names.txt")
ok "quantize the first long-named tensor" $QS quant -f int8 "$la"
ok "quantize the second" $QS quant -f int8 "$lb"
check "two distinct results with whole names" \
  "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT name FROM tensor WHERE name LIKE '%@int8' ORDER BY name\")\" = \"\$(printf '%s@int8\n%s@int8' \"$la\" \"$lb\")\" ]"

# ---- a full disk (ENOSPC), simulated by a preloaded write() that fails after QS_ENOSPC_AFTER bytes
cat > "$T/enospc.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
static long long budget = -1;
static int refuse(int fd, size_t n)
{
    struct stat st;
    if (budget < 0) { const char *s = getenv("QS_ENOSPC_AFTER"); budget = s ? atoll(s) : (1LL << 62); }
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) return 0;
    if ((long long)n > budget) { errno = ENOSPC; return 1; }
    budget -= (long long)n;
    return 0;
}
#define WRAP(name, sig, args)                                        \
    ssize_t name sig                                                 \
    {                                                                \
        static ssize_t (*real) sig;                                  \
        if (!real) real = (ssize_t (*) sig)dlsym(RTLD_NEXT, #name);  \
        if (refuse(fd, n)) return -1;                                \
        return real args;                                            \
    }
WRAP(write, (int fd, const void *b, size_t n), (fd, b, n))
WRAP(pwrite, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o))
WRAP(pwrite64, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o))
C
if cc -shared -fPIC -o "$T/enospc.so" "$T/enospc.c" -ldl 2>"$T/cc.err"; then
  dump2=$(dbdump)
  fails "import --copy onto a full disk fails with status 1" 1 env ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" LD_PRELOAD="$T/enospc.so" QS_ENOSPC_AFTER=300000 $QS import --copy "$T/big.npy"
  check "...one line naming the file and the full disk" \
    "[ \$(wc -l < $T/err) = 1 ] && grep -q '^qscope: $T/big.npy: .*database or disk is full' $T/err"
  check "...and the database is unchanged" "[ \"\$(dbdump)\" = '$dump2' ]"
  # 1 MiB fits SQLite's page cache, so here the write fails at COMMIT, after the file's savepoint
  $PY -c "import numpy as np; np.save('$T/mid.npy', np.ones((256, 512), np.float32))"
  fails "a full disk at COMMIT fails with status 1" 1 env ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" LD_PRELOAD="$T/enospc.so" QS_ENOSPC_AFTER=100000 $QS import --copy "$T/mid.npy"
  check "...and still names the file" "[ \$(wc -l < $T/err) = 1 ] && grep -q '^qscope: $T/mid.npy: .*database or disk is full' $T/err"
  cp "$T/mid.npy" "$T/mid2.npy"
  fails "two files, full disk at COMMIT" 1 env ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" LD_PRELOAD="$T/enospc.so" QS_ENOSPC_AFTER=100000 $QS import --copy "$T/mid.npy" "$T/mid2.npy"
  check "...names the files" "[ \$(wc -l < $T/err) = 1 ] && grep -q '^qscope: $T/mid.npy (and 1 more file): .*database or disk is full' $T/err"
  check "...and the database is unchanged" "[ \"\$(dbdump)\" = '$dump2' ]"
else
  check "the ENOSPC shim builds: $(head -1 "$T/cc.err")" false
fi

# ---- run names: whole (llm score), or refused when they cannot be (sim grpo's fixed-size names)
L=$(printf 'r%.0s' $(seq 1 300))
ok "llm score with a 302-byte --name" $QS llm score --model "$FIX/llm/tiny.gguf" --tokens 4 --seqs 1 --prompts 1 --name "${L}_1"
ok "...and another differing only at its end" $QS llm score --model "$FIX/llm/tiny.gguf" --tokens 4 --seqs 1 --prompts 1 --name "${L}_2"
check "two runs with whole names" "[ \"\$(sqlite3 $QSCOPE_DB \"SELECT name FROM rl_run WHERE name LIKE 'rrr%' ORDER BY name\")\" = \"\$(printf '%s_1\n%s_2' $L $L)\" ]"
fails "sim grpo refuses a --name too long for its run names" 2 $QS sim grpo --formats mxfp4 --methods none --seeds 1 --steps 2 --batch 2 --T 2 --no-store --name "$L"
check "...saying so" "grep -q 'is too long' $T/err"

# ---- a long multi-byte name in a message is shortened at a character boundary, never inside one
$PY - "$T" <<'PY'
import sys, json, struct
d = sys.argv[1]
name = ("€" * 40).encode()            # byte 80 falls inside the 27th '€'
ti = struct.pack("<Q", len(name)) + name + struct.pack("<IQIQ", 1, 4, 0, 0)
h = b"GGUF" + struct.pack("<IQQ", 3, 2, 0) + ti + ti
h += b"\0" * (-len(h) % 32)
open(f"{d}/dupname.gguf", "wb").write(h + b"\0" * 16)
hdr = json.dumps({"€" * 40: 5}, ensure_ascii=False).encode()
open(f"{d}/notobj.safetensors", "wb").write(struct.pack("<Q", len(hdr)) + hdr)
PY
for f in dupname.gguf notobj.safetensors; do
  fails "$f is rejected" 1 $QS import "$T/$f"
  check "...with a message that is valid UTF-8 and shows 26 whole '€'" \
    "iconv -f UTF-8 -t UTF-8 $T/err >/dev/null 2>&1 && grep -q \"'\$(printf '€%.0s' \$(seq 1 26))'\" $T/err"
done

# ---- a name collision with a long name still gives the whole advice, in valid UTF-8
$PY -c "import numpy as np; np.save('$T/c1.npy', np.ones(2, np.float32)); np.save('$T/c2.npy', np.ones(3, np.float32))"
cn=$(printf 'é%.0s' $(seq 1 400))
$QS import --prefix "$cn" "$T/c1.npy" >/dev/null 2>&1
fails "a second file under the same long name is refused" 1 $QS import --prefix "$cn" "$T/c2.npy"
check "...one valid UTF-8 line that ends with the advice" \
  "[ \$(wc -l < $T/err) = 1 ] && iconv -f UTF-8 -t UTF-8 $T/err >/dev/null 2>&1 && grep -q 'choose another name with --prefix)\$' $T/err"

# ---- plot titles shorten a long multi-byte tensor name at a character boundary (cairo refuses a cut one)
pn="x$(printf 'é%.0s' $(seq 1 120))"
$QS gen gaussian --shape 16x16 --name "$pn" >/dev/null 2>&1
for k in value-hist block-heatmap; do
  ok "plot $k of a tensor with a 241-byte name" $QS plot $k "$pn" -f int8 -o "$T/p-$k.png"
  check "...wrote a PNG" "[ \"\$(head -c 4 $T/p-$k.png | tail -c 3)\" = PNG ]"
done
lt=$(printf 'é%.0s' $(seq 1 150))
ok "plot with a 300-byte multi-byte --title (longer than the figure's title buffer)" $QS plot value-hist "$pn" --title "$lt" -o "$T/p-title.png"
check "...wrote a PNG" "[ \"\$(head -c 4 $T/p-title.png | tail -c 3)\" = PNG ]"

# ---- llm capture under a long --prefix: one whole-named tensor per layer and site
cp_=$(printf 'c%.0s' $(seq 1 300))
ok "llm capture with a 300-byte --prefix" $QS llm capture --model "$FIX/llm/tiny.gguf" --tokens 4 --prefix "$cp_"
check "every captured tensor has its own whole name" \
  "[ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM tensor WHERE name LIKE '$cp_:blk.%'\") -ge 2 ] && [ \$(sqlite3 $QSCOPE_DB \"SELECT count(*) FROM tensor WHERE name LIKE '$cp_:blk.%'\") = \$(grep -c \"^$cp_:blk\" $T/out) ]"
# ---- a FIFO (or one put in place of a referenced file) is refused at once, never waited on
mkfifo "$T/fifo.npy" "$T/fifo.csv"
h0=$(dbdump)
refuses "import of a FIFO is refused, not blocked on" 1 "fifo.npy: not a regular file" timeout 10 $QS import "$T/fifo.npy"
check "...in one line, database unchanged" "[ \$(wc -l < $T/err) -eq 1 ] && [ \"\$(dbdump)\" = \"$h0\" ]"
refuses "import-log of a FIFO is refused, not blocked on" 1 "fifo.csv: not a regular file" timeout 10 $QS import-log "$T/fifo.csv"
check "...in one line" "[ \$(wc -l < $T/err) -eq 1 ]"
$QS gen gaussian --n 64 -o "$T/refd.npy" >/dev/null 2>&1 && $QS import --prefix refd "$T/refd.npy" >/dev/null 2>&1
rm -f "$T/refd.npy" && mkfifo "$T/refd.npy"
refuses "a referenced file replaced by a FIFO is a stale reference, not a hang" 1 "refd.npy: stale reference" \
  timeout 10 $QS quant -f int8 refd --name refd-q
done_testing
