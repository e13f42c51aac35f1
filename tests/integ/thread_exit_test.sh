#!/bin/sh
# thread_exit_test.sh -- runs thread_exit_test (4 threads per rank whose
# pthread-key destructors call firehose after the thread-exit hook) with
# FH_PATHS=independent and shared under tools/fhrun for every rank count in
# FH_TEST_NP (default 2 3 4 8) and every provider in FH_TEST_PROVIDERS
# (net shm).
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for paths in independent shared; do
        export FH_PATHS=$paths
        for n in $NP_LIST; do
            run_np thread_exit_test "$n"
        done
    done
done
finish
