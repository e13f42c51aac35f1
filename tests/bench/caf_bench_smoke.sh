#!/bin/sh
# caf_bench_smoke.sh -- bench/caf/run-caf-bench.sh --smoke runs every coarray
# benchmark (tiny sizes, 1 round, 2 images) with our caf -- and with
# OpenCoarrays when it is installed -- and bench/caf/report.sh turns its
# results.csv into the tables of docs/performance.md (the one-node table,
# the SYNC ALL, strided, events and image-cost tables included).  No timing
# is checked.
# Exit 0 pass, 1 fail, 77 skip (no caf wrapper built: gfortran missing).
set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top_builddir=${top_builddir:-.}
if [ ! -x "$top_builddir/caf/caf" ] || ! command -v gfortran > /dev/null 2>&1; then
    echo "SKIP caf_bench_smoke: caf/caf not built or gfortran missing"
    exit 77
fi
# caf programs leak by design at exit (tokens; docs/caf.md), as in tests/caf
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0; export ASAN_OPTIONS
d=$(mktemp -d "${TMPDIR:-/tmp}/cafbsmoke.XXXXXX")
trap 'rm -rf "$d"' EXIT
bash "$top_srcdir/bench/caf/run-caf-bench.sh" --builddir "$top_builddir" --smoke --out "$d" \
    > "$d/out.log" 2>&1
rc=$?
case $rc in
    0) ;;
    77) echo "caf_bench_smoke: OpenCoarrays not installed: our side only" ;;
    *) echo "FAIL caf_bench_smoke: run-caf-bench.sh --smoke exited $rc"; tail -n 20 "$d/out.log"; exit 1 ;;
esac
sh "$top_srcdir/bench/caf/report.sh" "$d" > "$d/report.md" 2> "$d/report.err" ||
    { echo "FAIL caf_bench_smoke: report.sh failed: $(cat "$d/report.err")"; exit 1; }
fail=0
for want in '^| 8 B | tcp | [0-9.]* / ' '^| 8 B | shm | [0-9.]* / ' '^| 2 | 8 B | tcp | ' \
            '^| caf_cannon | 2 | ' '^| caf_bitonic | 2 | ' '^| 2 | tcp | [0-9.]* / ' \
            '^| SYNC ALL, 2 images, us | shm | ' '^| 8 B put latency, us | shm | [0-9.]* / ' \
            '^| 1 Ki | tcp | [0-9.]* / ' '^| 1 Ki | shm | [0-9.]* / ' \
            '^| event ping-pong, round trip | tcp | [0-9.]* / ' '^| atomic_add | shm | [0-9.]* / '; do
    grep -q "$want" "$d/report.md" || { echo "FAIL caf_bench_smoke: no line '$want' in report.md"; fail=1; }
done
# the SYNC IMAGES table has a row under its header (its rows look like SYNC ALL's)
grep -A2 '^\*\*SYNC IMAGES\*\*' "$d/report.md" | tail -n 1 | grep -q '^| images |' &&
    grep -A4 '^\*\*SYNC IMAGES\*\*' "$d/report.md" | tail -n 1 | grep -q '^| 2 | [a-z]* | [0-9.]* / ' ||
    { echo "FAIL caf_bench_smoke: no row in the SYNC IMAGES table of report.md"; fail=1; }
# the image-cost table has a row under its header (its rows look like SYNC ALL's)
grep -A2 '^| images | transport | RSS/image MiB' "$d/report.md" | tail -n 1 |
    grep -q '^| 2 | [a-z]* | [0-9.]* / ' ||
    { echo "FAIL caf_bench_smoke: no row in the image-cost table of report.md"; fail=1; }
[ -s "$d/report.err" ] && { echo "FAIL caf_bench_smoke: report.sh wrote errors: $(cat "$d/report.err")"; fail=1; }
[ $fail -eq 0 ] || { cat "$d/report.md"; exit 1; }
echo "PASS caf_bench_smoke"
exit 0
