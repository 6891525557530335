#!/usr/bin/env bash
# Every subcommand has its own help (`qscope help CMD SUB`, `qscope CMD SUB --help`): its usage line,
# what it does and the options it takes, different from the command's overview; and every option
# a subcommand's parser accepts (read from its `struct option` table in the source) is in that help.
source "$(dirname "$0")/lib.sh"
SRC="$ROOT/app/cli"

# The commands with subcommands: their overview ends in "subcommands: a, b, ... (`qscope help CMD SUB` ...)".
cmds=()
for c in $("$QS" --help | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p'); do
  "$QS" help "$c" > "$T/h.$c" 2>/dev/null || continue
  grep -q '^subcommands: ' "$T/h.$c" && cmds+=("$c")
done
check "llm, rl and sim list their subcommands and point to \`qscope help CMD SUB\`" \
  '[ "${cmds[*]}" = "rl sim llm" ] || [ "$(printf "%s\n" "${cmds[@]}" | sort | tr "\n" " ")" = "llm rl sim " ]'

subs_of() { sed -n 's/^subcommands: \(.*\) (`qscope help .*/\1/p' "$T/h.$1" | tr -d ','; }
for c in "${cmds[@]}"; do
  for s in $(subs_of "$c"); do
    ok "help $c $s" "$QS" help "$c" "$s"
    cp "$T/out" "$T/h.$c.$s"
    check "help $c $s: its own usage line and options, not the overview of $c" \
      "head -n 1 '$T/h.$c.$s' | grep -q '^usage: qscope \[--db PATH\] $c $s ' && ! cmp -s '$T/h.$c.$s' '$T/h.$c' && ! grep -q '^subcommands: ' '$T/h.$c.$s'"
    ok "$c $s --help" "$QS" "$c" "$s" --help
    check "$c $s --help is help $c $s" "cmp -s '$T/out' '$T/h.$c.$s'"
  done
done

check "help llm eval: --chunks, --config, --ctx; no sampling options (--seqs, --temp, --prompts)" \
  "grep -q -- '--chunks' '$T/h.llm.eval' && grep -q -- '--config' '$T/h.llm.eval' && grep -q -- '--ctx' '$T/h.llm.eval' && ! grep -qE -- '--(seqs|temp|prompts|top-k)' '$T/h.llm.eval'"
check "help llm generate: the sampling filters, not eval's --chunks" \
  "grep -q -- '--top-p' '$T/h.llm.generate' && ! grep -q -- '--chunks' '$T/h.llm.generate'"
check "help llm sensitivity: --kl-target, --bits-budget, --sites; no --config" \
  "grep -q -- '--kl-target' '$T/h.llm.sensitivity' && grep -q -- '--bits-budget' '$T/h.llm.sensitivity' && grep -q -- '--sites' '$T/h.llm.sensitivity' && ! grep -q -- '--config' '$T/h.llm.sensitivity'"

# The long options of the K-th (1-based) `struct option` table in FILE (AIS_LONGOPTS expanded from
# cmd_rl.h): the options that subcommand's parser accepts.
accepted() {
  python3 - "$SRC/$1" "$2" "$SRC/cmd_rl.h" <<'PY'
import re, sys
src, k, hdr = open(sys.argv[1]).read(), int(sys.argv[2]), open(sys.argv[3]).read()
ais = re.search(r'#define AIS_LONGOPTS(.*?)\n\n', hdr, re.S).group(1)
tabs = re.findall(r'struct option lo\[\] = \{(.*?)\{0, 0, 0, 0\}\}', src, re.S)
t = tabs[k - 1].replace('AIS_LONGOPTS', ais)
print(" ".join(re.findall(r'\{"([a-zA-Z0-9-]+)",', t)))
PY
}
undocumented() {   # undocumented HELPFILE OPT... : the options not named in the help
  local h=$1 o; shift
  for o in "$@"; do grep -qE -- "--$o([^a-z0-9-]|$)" "$h" || printf '%s ' "--$o"; done
}
# subcommand -> its parser's table (file, index); llm's first six share one parser (below)
for row in "llm eval cmd_llm_eval.c 1" "llm sensitivity cmd_llm_sens.c 1" "llm text cmd_llm_text.c 1" "llm tokenize cmd_llm_tok.c 1" \
           "rl grpo cmd_rl_grpo.c 1" "rl text cmd_rl_grpo.c 2" "sim grpo cmd_rl_sim.c 1"; do
  set -- $row
  opts=$(accepted "$3" "$4")
  check "$1 $2: its parser's options were found in $3" "[ -n '$opts' ]"
  miss=$(undocumented "$T/h.$1.$2" $opts)
  check "every option $1 $2's parser accepts is in help $1 $2${miss:+ (missing: $miss)}" "[ -z '$miss' ]"
done
# score, capture, generate, logits, bench and tokenize share parse_opts (cmd_llm.c): every option it
# accepts is documented by at least one of them, and each documents --model.
shared=$(accepted cmd_llm.c 1)
cat "$T"/h.llm.{score,capture,generate,logits,bench,tokenize} > "$T/h.shared"
miss=$(undocumented "$T/h.shared" $shared)
check "every option of llm's shared parser is in a subcommand's help${miss:+ (missing: $miss)}" "[ -n '$shared' ] && [ -z '$miss' ]"
check "score, capture, generate, logits, bench, tokenize: each documents --model" \
  '(for s in score capture generate logits bench tokenize; do grep -q -- "--model PATH" "$T/h.llm.$s" || exit 1; done)'

refuses "help of an unknown subcommand: one line, exit 2" 2 "llm has no subcommand 'nope'" "$QS" help llm nope
check "... one line on stderr, nothing on stdout" "[ \"\$(wc -l < '$T/err')\" = 1 ] && [ ! -s '$T/out' ]"
refuses "help of a subcommand of a command without subcommands" 2 "bench has no subcommands: no separate help for 'formats'" "$QS" help bench formats
check "... one line" "[ \"\$(wc -l < '$T/err')\" = 1 ]"
refuses "help with three words" 2 "help takes a command and a subcommand" "$QS" help llm eval more
ok "llm --help is the overview" "$QS" llm --help
check "... the same as help llm" "cmp -s '$T/out' '$T/h.llm'"
done_testing
