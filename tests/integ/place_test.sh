#!/bin/sh
# place_test.sh -- where fh_init leaves the ranks (place.c, FH_BIND):
#   auto, 2 ranks on >= 2 CPUs, same starting mask   -> bound to disjoint slices
#   off                                              -> left alone
#   auto, ranks a launcher placed (taskset per rank) -> left alone
#   auto, more ranks than CPUs                       -> left alone
. "$(dirname "$0")/common.sh"
need_fhrun
cpus=$(nproc 2>/dev/null || echo 1)
if [ "$cpus" -ge 2 ]; then
    run_np place_test 2 --expect bound
    FH_BIND=off; export FH_BIND
    run_np place_test 2 --expect same
    unset FH_BIND
    ran=$((ran + 1))
    if "$FHRUN" -n 2 --timeout "$TIMEOUT" --prefix-cmd "taskset -c %r" \
           "$(fh_bin place_test)" --expect same >"$tmpd/taskset.log" 2>&1 &&
       grep -q '^PASS place_test (same)' "$tmpd/taskset.log"; then
        echo "ok   place_test -n 2, each rank placed by taskset: left there"
    else
        echo "FAIL place_test -n 2, each rank placed by taskset: expected it left there:"
        tail -5 "$tmpd/taskset.log"
        fail=$((fail + 1))
    fi
fi
run_np place_test $((cpus + 1)) --expect same
finish
