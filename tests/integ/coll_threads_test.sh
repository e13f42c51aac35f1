#!/bin/sh
# coll_threads_test.sh -- collectives from several threads of every rank at
# once: runs coll_threads_test (3 threads per rank calling fh_segment_create,
# fh_barrier and fh_allgather concurrently; then disagreeing calls that must
# return FH_ERR_STATE) on 2 and 3 ranks (FH_TEST_NP overrides) for every
# provider in FH_TEST_PROVIDERS (net shm), FH_PATHS=independent and shared.
# Each run is bounded by FH_TEST_TIMEOUT (default here 60 s): a deadlock
# fails the run instead of hanging.
TIMEOUT_DEFAULT=60
FH_TEST_TIMEOUT=${FH_TEST_TIMEOUT:-$TIMEOUT_DEFAULT}
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for paths in independent shared; do
        export FH_PATHS=$paths
        for n in ${FH_TEST_NP:-2 3}; do
            run_np coll_threads_test "$n"
        done
    done
done
finish
