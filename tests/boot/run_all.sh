#!/bin/bash
# Builds and runs every bootstrap test, first with the plain binaries, then
# with the -fsanitize=address,undefined ones.  Exit 0 if all pass, 1 if one
# fails, 77 (automake SKIP) if none fails but one skipped (t_netns.sh needs
# root, t_pmix.sh mpirun and PMIx): a suite that did not all run is not
# reported as a pass.
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$HERE/build}
export BUILD
"$HERE/build.sh" >/dev/null 2>&1 || { echo "build failed; run $HERE/build.sh"; exit 1; }
fails=0 skips= failed=
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
for pass in plain asan; do
    if [ $pass = asan ]; then
        export FHRUN=$BUILD/fhrun.asan BOOT_TEST=$BUILD/boot_test.asan PMIX_TEST=$BUILD/boot_test.pmix.asan
    else
        export FHRUN=$BUILD/fhrun BOOT_TEST=$BUILD/boot_test PMIX_TEST=$BUILD/boot_test.pmix
    fi
    for t in "$HERE"/t_*.sh; do
        echo "=== $pass: $(basename "$t")"
        "$t" >"$log" 2>&1
        rc=$?
        cat "$log"
        case $rc in
        0) ;;
        77) skips="$skips $pass:$(basename "$t")" ;;
        *) fails=$((fails + 1))
           # The failing checks again at the end: CI shows a log's tail.
           failed="$failed=== FAILED $pass: $(basename "$t") (exit $rc)
$(grep -E -A6 '^(not ok|FAIL)' "$log" | head -40)
" ;;
        esac
    done
done
printf '%s' "$failed"
echo "=== $fails test script(s) failed"
[ $fails -eq 0 ] || exit 1
if [ -n "$skips" ]; then
    echo "=== skipped:$skips"
    exit 77
fi
exit 0
