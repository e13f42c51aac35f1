#!/bin/sh
# rank_names.sh -- messages name ranks through FH_RANK_NAME (firehose/util/log.h),
# never with a raw "rank %d": under caf a coarray user reads "image 2",
# never "rank 1" (issues 28 and 29).
#
# Scans the string literals of the runtime, the conduits and fhrun (adjacent
# literals joined, so "... rank " "%u" is found too) for "rank" followed by
# an integer conversion.  The few that print a number that is not a peer's
# name -- an argument or a claim outside the job -- are listed below with
# the text they keep; a listed text that is gone fails too, so the list
# only shrinks.
#
# Run by `make check`; standalone: top_srcdir=.. sh ../tests/docs/rank_names.sh
set -u

top_srcdir=${top_srcdir:-.}
cd "$top_srcdir" || exit 1
if ! command -v perl >/dev/null 2>&1; then
    echo "SKIP: no perl"
    exit 77
fi

# file<TAB>text: a raw rank number that stays: the default names (log.c,
# and the cache's when the runtime gives it none), an argument out of range
# and claims from outside the job.
allowed='firehose/util/log.c	rank %d
firehose/cache/fhc_core.c	rank %u
firehose/thread.c	rank %d is out of range [0, %d)
firehose/peer.c	fh_am_lost: rank %d out of [-1, %d) or NULL mark
firehose/am_wire.c	source rank %u outside the job of %u
firehose/cache/fhc_core.c	message from invalid rank %u dropped
tools/launcher/handshake.c	rank %u out of range (job has %d ranks)'

found=$(for f in $(find conduits firehose tools/launcher -name '*.[ch]' | LC_ALL=C sort); do
    perl -0777 -ne '
        s{/\*.*?\*/}{}gs;                       # comments
        s{"\s*\n\s*"}{}g;                       # adjacent literals
        while (/"((?:[^"\\\n]|\\.)*)"/g) {
            my $lit = $1;
            print "$ARGV\t$lit\n"
                if $lit =~ /\brank %[-+ #0-9.]*(?:hh|h|ll|l|z|j|t)?[diu]/;
        }' "$f"
done)

# allowed FILE LITERAL: the literal holds a text listed for its file.
allowed() {
    echo "$allowed" | while IFS='	' read -r af at; do
        if [ "$af" = "$1" ]; then
            case "$2" in *"$at"*) exit 3 ;; esac
        fi
    done
    [ $? -eq 3 ]
}

fail=0
bad=$(echo "$found" | while IFS='	' read -r file lit; do
    [ -n "$file" ] || continue
    allowed "$file" "$lit" ||
        echo "FAIL: $file: \"$lit\": name the rank with FH_RANK_NAME (\"%s\"), as log.h says"
done)
if [ -n "$bad" ]; then
    echo "$bad"
    fail=1
fi
# Every allowed text must still be there.
gone=$(echo "$allowed" | while IFS='	' read -r af at; do
    echo "$found" | grep -F "$af	" | grep -F "$at" >/dev/null 2>&1 ||
        echo "FAIL: the allowed \"$at\" is gone from $af: take it off this list"
done)
if [ -n "$gone" ]; then
    echo "$gone"
    fail=1
fi
if [ $fail -ne 0 ]; then
    exit 1
fi
echo "PASS: no message in conduits/, firehose/ or tools/launcher/ prints a raw rank number but the $(echo "$allowed" | wc -l) listed"
