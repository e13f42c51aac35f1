#!/bin/sh
# bulk_window_test.sh -- the path's bulk budget of FH_REG_STRATEGY=firehose
# (bulk_window_test.c): 64 KiB NBI gets are not held to FH_BULK_AHEAD in
# flight, a thread alone on its path is not bounded, and bulk in flight on
# a path two threads share never exceeds FH_BULK_BYTES; 2 ranks, every
# provider in FH_TEST_PROVIDERS (tcp shm), FH_SHM=off (the network path).
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_REG_STRATEGY=firehose FH_SHM=off FH_MAX_THREADS=1 FH_PATHS=independent
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    run_np bulk_window_test 2
done
finish
