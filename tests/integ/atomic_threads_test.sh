#!/bin/sh
# atomic_threads_test.sh -- runs atomic_threads_test (4 threads on every rank
# hammering the same words of rank 0; exact totals) with FH_PATHS=independent
# and shared for every rank count in FH_TEST_NP (default here 2 3 4) and
# provider.  A ThreadSanitizer test (TSAN_TESTS).
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for paths in independent shared; do
        export FH_PATHS=$paths
        for n in ${FH_TEST_NP:-2 3 4}; do
            run_np atomic_threads_test "$n"
        done
    done
done
finish
