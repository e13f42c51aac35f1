#!/bin/sh
# list-skips.sh BUILD_DIR -- every skip of the last `make check` in BUILD_DIR,
# one line each, so that a stage that could not run is seen in CI's output
# rather than hidden in a passing total:
#   "skipped: tests/caf/caf_tests.sh: SKIP: gfortran not found"   (a whole test)
#   "skipped in tests/integ/stale_key.sh: SKIP stale_key over shm ..." (a case)
# The first kind comes from the automake .trs files (":test-result: SKIP")
# with the test's first SKIP line; the second from the logs of tests that
# passed but skipped some of their cases (a line starting with "SKIP").
# Exit status 0 always; prints "skips: none" when there are none.
# Used by tools/run-tests.sh (hence .ci/run's stage tests) and by .ci/run
# after the asan stage.
dir=${1:-.}
n=0
for trs in $(find "$dir" -name '*.trs' | LC_ALL=C sort); do
    log=${trs%.trs}.log
    t=${trs#"$dir"/}; t=${t%.trs}
    if grep -q '^:test-result: SKIP' "$trs"; then
        why=$(grep -m1 'SKIP' "$log" 2>/dev/null | cut -c1-160)
        echo "skipped: $t: ${why:-(no reason in the log)}"
        n=$((n + 1))
    elif [ -f "$log" ]; then
        grep '^SKIP' "$log" | cut -c1-160 | while IFS= read -r line; do
            echo "skipped in $t: $line"
        done
        n=$((n + $(grep -c '^SKIP' "$log")))
    fi
done
[ "$n" -eq 0 ] && echo "skips: none"
exit 0
