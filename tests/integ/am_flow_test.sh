#!/bin/sh
# am_flow_test.sh -- runs am_flow_test (senders that outrun their AM credits
# block; nothing is lost or dropped) with FH_AM_CREDITS=2 on 2 and 3 ranks
# (FH_TEST_NP) and the default window on 3, FH_PATHS=independent and shared,
# over every provider.  A ThreadSanitizer test (TSAN_TESTS).
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for paths in independent shared; do
        export FH_PATHS=$paths
        FH_AM_CREDITS=2; export FH_AM_CREDITS
        for n in ${FH_TEST_NP:-2 3}; do
            run_np am_flow_test "$n"
        done
        unset FH_AM_CREDITS   # the default window, on 3 ranks
        run_np am_flow_test 3
    done
done
finish
