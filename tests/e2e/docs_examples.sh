#!/usr/bin/env bash
# The README's and docs' examples of `llm eval` and `llm sensitivity` finish in minutes as written:
# every such command line (in a code block, backslash continuations joined, comments dropped; or an
# inline `qscope ...`/`mpirun ...` span with options) bounds its work with --chunks K (K <= 16 for
# eval, <= 4 for sensitivity, whose cost is layers x sites forward passes per chunk).  Without a bound
# they run over the whole default text: half an hour for eval, hours for sensitivity (issue 28).
source "$(dirname "$0")/lib.sh"

scan() {   # scan ROOT : one line per unbounded example in ROOT/README.md and ROOT/docs/*.md
python3 - "$1" <<'PY'
import glob, os, re, sys
root = sys.argv[1]
files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
cmd = re.compile(r"(^|\s)(qscope|mpirun)\b.*\bllm (eval|sensitivity)\b")
LIMIT = {"eval": 16, "sensitivity": 4}

def check(where, line):
    m = cmd.search(line)
    if not m or "--" not in line[m.end():]:
        return
    sub = m.group(3)
    k = re.search(r"--chunks[ =](\S+)", line)
    if not k:
        print(f"{where}: llm {sub} without --chunks: {line.strip()}")
    elif k.group(1).isdigit() and int(k.group(1)) > LIMIT[sub]:
        print(f"{where}: llm {sub} --chunks {k.group(1)} (more than {LIMIT[sub]}): {line.strip()}")

for path in files:
    rel = os.path.relpath(path, root)
    fenced, pending, start = False, "", 0
    for n, raw in enumerate(open(path, encoding="utf-8"), 1):
        line = raw.rstrip("\n")
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            code = re.sub(r"\s#\s.*$", "", line)          # a trailing comment is not the command
            if not pending:
                start = n
            if code.rstrip().endswith("\\"):
                pending += code.rstrip()[:-1] + " "
                continue
            check(f"{rel}:{start}", pending + code)
            pending = ""
        else:
            for span in re.findall(r"`([^`]+)`", line):
                if re.match(r"\s*(qscope|mpirun)\b", span):
                    check(f"{rel}:{n}", span)
PY
}
scan "$ROOT" > "$T/unbounded"
check "every llm eval / llm sensitivity example in README.md and docs/*.md has a --chunks bound" '[ ! -s "$T/unbounded" ] || { sed "s/^/# /" "$T/unbounded"; false; }'

# the checker itself: it catches an unbounded example, in a block and inline, and accepts bounded ones
mkdir -p "$T/fake/docs"
printf '```\nqscope llm eval --model m --config a=mxfp4 \\\n   --config kv=fp8_e4m3   # slow\n```\n' > "$T/fake/README.md"
printf 'Run `qscope llm sensitivity --format mxfp4 --kl-target 0.05` now.\n' > "$T/fake/docs/x.md"
check "the check finds the unbounded examples of a fake tree" \
  'scan "$T/fake" > "$T/fake.out" && [ "$(wc -l < "$T/fake.out")" = 2 ] && grep -q "README.md:2: llm eval without --chunks" "$T/fake.out" && grep -q "docs/x.md:1: llm sensitivity" "$T/fake.out"'
printf '```\nqscope llm eval --chunks 8 --config a=mxfp4 \\\n   --config kv=fp8_e4m3\nqscope plot kl -o x.png   # of a stored `llm eval`\n```\n' > "$T/fake/README.md"
printf 'Run `qscope llm sensitivity --format mxfp4 --ctx 256 --chunks 2`; see `llm eval`.\n' > "$T/fake/docs/x.md"
check "... and passes them once bounded" 'scan "$T/fake" > "$T/fake.out" && [ ! -s "$T/fake.out" ]'
done_testing
