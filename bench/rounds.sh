#!/bin/sh
# rounds.sh -- the tables of docs/performance.md: R rounds of run-all.sh at
# one commit, merged into one report whose cells show the spread.
#
#   bench/rounds.sh [--rounds R] [--rxe] [--caf] [--full] [--builddir DIR]
#                   [--out DIR] [--update FILE] [--no-run]
#
# Runs `bench/run-all.sh --quick` (--full: without --quick) R times (default
# 3) into DIR/round-1..R (default DIR: ./rounds), --rxe adding the Soft-RoCE
# VM's series to every round.  Then bench/report.sh on each round and
# bench/merge-reports.awk over them: DIR/report.md, every number
# "median [min-max]" over the rounds, every verdict "met k/R".  --update
# FILE replaces the text between FILE's "<!-- report:begin" and
# "<!-- report:end -->" lines with DIR/report.md.  --caf then runs
# bench/caf/run-caf-bench.sh --rounds R (the coarray benchmarks against
# OpenCoarrays, interleaved in each round) into DIR/caf, and
# bench/caf/report.sh makes DIR/caf-report.md, which --update puts between
# "<!-- caf-report:begin" and "<!-- caf-report:end -->".  --no-run runs
# nothing: it remakes the reports from the rounds already in DIR (after a
# change to the report scripts) and updates FILE.  Refuses to run on a
# working tree with uncommitted changes to the code (the page names one
# commit; FHB_ALLOW_DIRTY=1 overrides for trying the script).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
rounds=3
rxe=
caf=0
norun=0
quick=--quick
builddir=
out=rounds
update=
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=$2; shift ;;
        --rxe) rxe=--rxe ;;
        --caf) caf=1 ;;
        --no-run) norun=1 ;;
        --full) quick= ;;
        --builddir) builddir=$2; shift ;;
        --out) out=$2; shift ;;
        --update) update=$2; shift ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "usage: $0 [--rounds R] [--rxe] [--caf] [--full] [--builddir DIR] [--out DIR] [--update FILE] [--no-run]" >&2
           exit 2 ;;
    esac
    shift
done
case $rounds in ''|*[!0-9]*|0) echo "rounds.sh: --rounds needs a positive integer" >&2; exit 2 ;; esac
if [ "$norun" = 0 ] && [ -z "${FHB_ALLOW_DIRTY:-}" ] && [ -n "$(git -C "$top" status --porcelain --untracked-files=no -- . ':!docs' 2>/dev/null)" ]; then
    echo "rounds.sh: uncommitted changes outside docs/: commit first (the tables name one commit)" >&2
    exit 1
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
bargs=
[ -n "$builddir" ] && bargs="--builddir $builddir"
status=0
k=1
while [ "$k" -le "$rounds" ]; do
    if [ "$norun" = 0 ]; then
        echo "rounds: round $k of $rounds"
        rm -rf "$out/round-$k"
        # shellcheck disable=SC2086
        "$here/run-all.sh" $quick $rxe $bargs --out "$out/round-$k" > "$out/round-$k.log" 2>&1 \
            || { echo "rounds: round $k: run-all.sh failed (see $out/round-$k.log)" >&2; status=1; }
    fi
    [ -d "$out/round-$k" ] || { echo "rounds: no $out/round-$k" >&2; exit 1; }
    "$here/report.sh" "$out/round-$k" > "$out/round-$k.md"
    FHB_NO_INSTALL=1; export FHB_NO_INSTALL   # installed once is enough
    k=$((k + 1))
done
cafflag=
[ "$caf" = 1 ] && cafflag=" --caf"
set --
k=1
while [ "$k" -le "$rounds" ]; do set -- "$@" "$out/round-$k.md"; k=$((k + 1)); done
{
    echo "Every number is the median over $rounds rounds of \`bench/run-all.sh $quick $rxe\`" \
         "at one commit, [lowest-highest] when the rounds differ; a verdict is" \
         "how many rounds met it.  Regenerate: \`bench/rounds.sh --rounds $rounds $rxe$cafflag --update docs/performance.md\`."
    echo
    awk -v R="$rounds" -f "$here/merge-reports.awk" "$@"
} > "$out/report.md" || { echo "rounds: merging the rounds failed" >&2; exit 1; }
if [ "$caf" = 1 ] && [ "$norun" = 0 ]; then
    echo "rounds: the coarray benchmarks, $rounds rounds"
    cq=
    [ -n "$quick" ] && cq=--quick
    # shellcheck disable=SC2086
    bash "$here/caf/run-caf-bench.sh" $cq --rounds "$rounds" $bargs --out "$out/caf" \
        > "$out/caf.log" 2>&1 || { echo "rounds: run-caf-bench.sh failed (see $out/caf.log)" >&2; status=1; }
fi
if [ "$caf" = 1 ]; then
    "$here/caf/report.sh" "$out/caf" > "$out/caf-report.md" || status=1
fi

# replace FILE MARKER CONTENT: the lines between "<!-- MARKER:begin" and
# "<!-- MARKER:end -->" of FILE become CONTENT's.
replace() {
    grep -q "^<!-- $2:begin" "$1" || { echo "rounds: $1 has no <!-- $2:begin line" >&2; return 1; }
    awk -v rep="$3" -v b="^<!-- $2:begin" -v e="^<!-- $2:end -->" '
        $0 ~ b { print; while ((getline l < rep) > 0) print l; skip = 1; next }
        $0 ~ e { skip = 0 }
        !skip' "$1" > "$1.tmp" && mv "$1.tmp" "$1"
}
if [ -n "$update" ]; then
    replace "$update" report "$out/report.md" || status=1
    [ "$caf" = 1 ] && { replace "$update" caf-report "$out/caf-report.md" || status=1; }
    echo "rounds: $update updated"
fi
echo "rounds: $out/report.md"
exit $status
