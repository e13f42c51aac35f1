#!/bin/bash
# --tag-output prefixes each line with "[rank] " on stdout and stderr;
# without it the ranks write to fhrun's stdout/stderr directly.
. "$(dirname "$0")/lib.sh"
LAST=tag; run tag "$FHRUN" -n 3 --tag-output "$BOOT_TEST" print
expect_rc 0 "--tag-output job"
for r in 0 1 2; do
    expect_grep "$TMP/tag.out" "^\[$r\] out line 1 from rank $r$" "rank $r stdout line 1 tagged"
    expect_grep "$TMP/tag.out" "^\[$r\] out line 2 from rank $r$" "rank $r stdout line 2 tagged"
    expect_grep "$TMP/tag.err" "^\[$r\] err line from rank $r$" "rank $r stderr tagged"
done
expect_nogrep "$TMP/tag.out" "^[^[]" "every stdout line tagged"
expect_nogrep "$TMP/tag.err" "^[^[]" "every stderr line tagged"
# Partial last line, long line, many lines.
LAST=part; run part "$FHRUN" -n 2 --tag-output sh -c 'printf "a\nno newline"; head -c 200000 /dev/zero | tr "\0" x; echo; seq 1000'
expect_rc 0 "partial lines"
expect_grep "$TMP/part.out" "^\[1\] no newline" "unterminated line flushed"
expect_count "$TMP/part.out" "^\[0\] [0-9]+$" 1000 "all 1000 lines of rank 0"
LAST=plain; run plain "$FHRUN" -n 2 "$BOOT_TEST" print
expect_rc 0 "untagged job"
expect_grep "$TMP/plain.out" "^out line 1 from rank 1$" "untagged stdout"
expect_grep "$TMP/plain.err" "^err line from rank 0$" "untagged stderr"
# stdin reaches rank 0 only.
LAST=stdin; run stdin sh -c "echo hello | '$FHRUN' -n 2 --tag-output sh -c 'cat'"
expect_rc 0 "stdin job"
expect_grep "$TMP/stdin.out" "^\[0\] hello$" "rank 0 reads stdin"
expect_count "$TMP/stdin.out" "hello" 1 "only rank 0 reads stdin"
finish
