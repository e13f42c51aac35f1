#!/bin/sh
# bulk_window_test.sh -- the path's bulk budget of FH_REG_STRATEGY=firehose
# (bulk_window_test.c): 64 KiB NBI gets are not held to FH_BULK_AHEAD in
# flight, and bulk in flight never exceeds FH_BULK_BYTES; 2 ranks, every
# provider in FH_TEST_PROVIDERS (tcp shm), FH_SHM=off (the network path).
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_REG_STRATEGY=firehose FH_SHM=off
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    run_np bulk_window_test 2
done
finish
