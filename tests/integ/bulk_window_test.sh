#!/bin/sh
# bulk_window_test.sh -- the path's bulk budget (bulk_window_test.c): under
# FH_REG_STRATEGY=firehose 64 KiB NBI gets are not held to FH_BULK_AHEAD in
# flight and a thread alone on its path is not bounded; under firehose,
# pin-everything and rendezvous, bulk in flight on a path two threads share
# never exceeds FH_BULK_BYTES; 2 ranks, every provider in FH_TEST_PROVIDERS
# (net shm), FH_SHM=off (the network path).
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_SHM=off FH_MAX_THREADS=1 FH_PATHS=independent
for s in firehose pin-everything rendezvous; do
    export FH_REG_STRATEGY=$s
    for p in $(providers); do
        export FH_OFI_PROVIDER=$p
        run_np bulk_window_test 2
    done
done
finish
