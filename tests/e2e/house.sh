#!/usr/bin/env bash
# House rules of the source tree (docs/architecture.md, issue 25): the layering of the includes,
# no source file over 1,000 lines, no function over 150 lines outside the vectorised kernels, and
# no SQLite in app/.  Reads the sources only (needs no binary beyond lib.sh's setup).
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

MAX_FILE=1000
MAX_FUNC=150
# Vectorised kernels: one unrolled loop body per instruction set, long by nature.
FUNC_ALLOW=(
  analysis/metrics_kernel_avx512.c
)
LAYERS=(kernels analysis app store datasets)
SRC=$(find "${LAYERS[@]}" -name '*.[ch]' | LC_ALL=C sort)

# ---- (a) layering: every #include "..." resolved against the including file's directory
# prints FILE: includes TARGET for each include that reaches a layer the file's layer may not use
layering() {
  awk '
    function norm(p,   n, i, k, part, out) {
      n = split(p, part, "/"); k = 0
      for (i = 1; i <= n; i++) {
        if (part[i] == "" || part[i] == ".") continue
        if (part[i] == ".." && k > 0 && st[k] != "..") { k--; continue }
        st[++k] = part[i]
      }
      out = ""; for (i = 1; i <= k; i++) out = out (i > 1 ? "/" : "") st[i]
      return out
    }
    BEGIN {
      bad["kernels/analysis"] = bad["kernels/app"] = bad["kernels/store"] = bad["kernels/datasets"] = 1
      bad["store/analysis"] = bad["store/app"] = bad["store/datasets"] = 1
      bad["analysis/app"] = 1
      bad["datasets/kernels"] = bad["datasets/analysis"] = bad["datasets/app"] = bad["datasets/store"] = 1
    }
    /^[ \t]*#[ \t]*include[ \t]*"/ {
      inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
      dir = FILENAME; sub(/\/[^\/]*$/, "", dir)
      to = norm(dir "/" inc)
      from = FILENAME; sub(/\/.*/, "", from)
      tl = to; sub(/\/.*/, "", tl)
      if ((from "/" tl) in bad) printf "%s:%d: includes %s\n", FILENAME, FNR, to
    }' $SRC
}
layering > "$T/layering"
check "layering: every #include points down (docs/architecture.md)" \
  '[ ! -s "$T/layering" ] || { sed "s/^/# /" "$T/layering"; false; }'

# ---- (a') app/'s rooms: the renderers (app/render) use neither the commands nor the workbench
grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"\.\./(cli|tui)/' app/render/*.[ch] > "$T/rooms" || true
check "app/render includes nothing of app/cli or app/tui" '[ ! -s "$T/rooms" ] || { sed "s/^/# /" "$T/rooms"; false; }'

# ---- (b) no source file over MAX_FILE lines
find "${LAYERS[@]}" tests -name '*.[ch]' -print0 | LC_ALL=C sort -z | xargs -0 wc -l |
  awk -v max=$MAX_FILE '$2 != "total" && $1 > max { print $2 ": " $1 " lines" }' > "$T/files"
check "no source file over $MAX_FILE lines" '[ ! -s "$T/files" ] || { sed "s/^/# /" "$T/files"; false; }'

# ---- (c) no function over MAX_FUNC lines.  The code style puts a function body's "{" and "}" at
# column 0 (and nothing else there), so the body runs from one to the next; its name is the
# identifier before the first "(" of the declaration lines above (attributes taken out).
func_lengths() {   # func_lengths MAX FILE... : FILE:LINE NAME LENGTH for each longer function
  local max=$1; shift
  awk -v max="$max" '
    function strip_attr(s,   i, d, j, c) {
      while ((i = index(s, "__attribute__")) > 0) {
        d = 0
        for (j = i + 13; j <= length(s); j++) {
          c = substr(s, j, 1)
          if (c == "(") d++
          else if (c == ")" && --d == 0) break
        }
        s = substr(s, 1, i - 1) " " substr(s, j + 1)
      }
      return s
    }
    FNR == 1 { inb = 0; sig = "" }
    !inb && /^\{/ {
      name = strip_attr(sig); sub(/\(.*/, "", name)
      n = split(name, w, /[^A-Za-z0-9_]+/); name = w[n]; if (name == "") name = w[n - 1]
      inb = 1; start = FNR; next
    }
    inb && /^\}/ {
      inb = 0; sig = ""
      if (FNR - start + 1 > max) printf "%s:%d %s %d\n", FILENAME, start, name, FNR - start + 1
      next
    }
    inb { next }
    /^[ \t]*$/ || /;[ \t]*$/ || /\*\/[ \t]*$/ || /^#/ { sig = ""; next }
    { sig = sig " " $0 }' "$@"
}
func_lengths $MAX_FUNC $(find "${LAYERS[@]}" -name '*.c' | LC_ALL=C sort) > "$T/funcs.all"
: > "$T/funcs"
while read -r loc name len; do
  f=${loc%%:*} allowed=0
  for a in "${FUNC_ALLOW[@]}"; do [ "$f" = "$a" ] && allowed=1; done
  [ $allowed = 1 ] && continue
  echo "$loc: $name is $len lines (over $MAX_FUNC: split it into named steps)" >> "$T/funcs"
done < "$T/funcs.all"
check "no function over $MAX_FUNC lines outside the vectorised kernels" \
  '[ ! -s "$T/funcs" ] || { sed "s/^/# /" "$T/funcs"; false; }'
# the scan itself: it must see a long function (else the check above proves nothing)
{ printf 'static int f(int x)\n{\n'; for i in $(seq 1 $MAX_FUNC); do echo "    x++;"; done; printf '    return x;\n}\n'; } > "$T/long.c"
check "the scan finds a function over $MAX_FUNC lines, by name" \
  '[ "$(func_lengths $MAX_FUNC "$T/long.c" | cut -d" " -f2-)" = "f $((MAX_FUNC + 3))" ]'

# ---- (d) app/ reaches the database through store/ only
grep -rnE --include='*.[ch]' 'sqlite3_[A-Za-z0-9_]+|sqlite3\.h' app > "$T/sqlite" || true
check "app/ has no sqlite3 call or sqlite3.h include" '[ ! -s "$T/sqlite" ] || { sed "s/^/# /" "$T/sqlite"; false; }'
done_testing
