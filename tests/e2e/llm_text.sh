#!/usr/bin/env bash
# qscope llm text: an R lazy-load database (the format of Debian's r-cran-janeaustenr) -> one .txt per
# character vector, lines joined into paragraphs.  The database is written by tests/llm/make_rdata.py;
# the real package is checked too when `make data` has fetched it (data/debs).
source "$(dirname "$0")/lib.sh"
MK="python3 $ROOT/tests/llm/make_rdata.py"
$MK "$T/ok"
ok "text from a generated Rdata.rdb (index found next to it)" "$QS" llm text --rdb "$T/ok/Rdata.rdb" -o "$T/txt"
check "one file per object, named by the index" '[ "$(ls "$T/txt" | tr "\n" " ")" = "firstbook.txt second_book.txt " ]'
printf 'FIRST BOOK\n\nby A. Writer\n\nChapter 1\n\nIt was a truth universally acknowledged, that a test needs text.\n\n"Quoted," she said.\n' > "$T/want1"
check "paragraphs: trimmed lines joined by a space, blank line between, NA = break" 'cmp -s "$T/txt/firstbook.txt" "$T/want1"'
printf 'Second\n\nOne line paragraph. Two lines.\n' > "$T/want2"
check "a text that does not end in an empty line" 'cmp -s "$T/txt/second_book.txt" "$T/want2"'
check "table lists lines and bytes" 'grep -q "^firstbook  *15  *$(wc -c < "$T/want1") " "$T/out"'
ok "--json" "$QS" llm text --rdb "$T/ok/Rdata.rdb" --rdx "$T/ok/Rdata.rdx" -o "$T/txt2" --json
check "--json lists the texts and the default" 'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert [t[\"name\"] for t in d[\"texts\"]]==[\"firstbook\",\"second_book\"] and d[\"default\"]==\"persuasion\" and d[\"texts\"][1][\"lines\"]==5" "$T/out"'
$MK "$T/lat" --variant latin1
ok "Latin-1 strings" "$QS" llm text --rdb "$T/lat/Rdata.rdb" -o "$T/lat/out"
check "Latin-1 converted to UTF-8" 'printf "Second\n\nOne line paragraph. Two lines. Caf\xc3\xa9\n" | cmp -s - "$T/lat/out/second_book.txt"'

# --- damaged input: one-line error naming the file, nothing written for the bad object
for v in badname overrun corrupt longer notstr; do $MK "$T/$v" --variant $v; done
fails "unsafe object name" 1 "$QS" llm text --rdb "$T/badname/Rdata.rdb" -o "$T/o1"
check "unsafe name: error names the index" 'grep -q "Rdata.rdx: index entry 2 has an unusable name" "$T/err" && [ ! -e "$T/evil.txt" ]'
fails "blob beyond the end of the file" 1 "$QS" llm text --rdb "$T/overrun/Rdata.rdb" -o "$T/o2"
check "overrun: error names the file and object" 'grep -q "Rdata.rdb: object .second_book.: blob at [0-9]* of [0-9]* bytes is outside the" "$T/err"'
fails "corrupt zlib stream" 1 "$QS" llm text --rdb "$T/corrupt/Rdata.rdb" -o "$T/o3"
check "corrupt: one line naming the file" '[ "$(wc -l < "$T/err")" = 1 ] && grep -q "Rdata.rdb: object .second_book.: blob at [0-9]*: corrupt" "$T/err"'
fails "stream longer than its header says" 1 "$QS" llm text --rdb "$T/longer/Rdata.rdb" -o "$T/o4"
check "longer: error says so" 'grep -q "its header says [0-9]*$" "$T/err"'
fails "object that is not a character vector" 1 "$QS" llm text --rdb "$T/notstr/Rdata.rdb" -o "$T/o5"
check "notstr: error says so" 'grep -q "not a character vector" "$T/err"'
head -c 100 "$T/ok/Rdata.rdx" > "$T/trunc.rdx"
fails "truncated index" 1 "$QS" llm text --rdb "$T/ok/Rdata.rdb" --rdx "$T/trunc.rdx" -o "$T/o6"
check "truncated index: error names it" 'grep -q "trunc.rdx: " "$T/err"'
fails "missing database" 1 "$QS" llm text --rdb "$T/none.rdb" -o "$T/o7"
fails "usage: no -o" 2 "$QS" llm text --rdb "$T/ok/Rdata.rdb"

# --- the real package, when make data fetched it
RDB=$(find "$ROOT/data/debs" -path '*janeaustenr/data/Rdata.rdb' 2>/dev/null | head -n 1)
if [ -n "$RDB" ]; then
  ok "janeaustenr: six novels" "$QS" llm text --rdb "$RDB" -o "$T/austen"
  check "janeaustenr: Persuasion opens with its title and chapter 1" \
    '[ "$(head -n 1 "$T/austen/persuasion.txt")" = Persuasion ] && grep -q "^Sir Walter Elliot, of Kellynch Hall, in Somersetshire, was a man who" "$T/austen/persuasion.txt"'
  check "janeaustenr: 6 books, 4.0 MB" '[ "$(ls "$T/austen" | wc -l)" = 6 ] && [ "$(cat "$T/austen"/*.txt | wc -c)" -gt 3900000 ]'
else
  skip "janeaustenr: the six novels" "data: data/debs has no janeaustenr package (make data)"
fi
done_testing
