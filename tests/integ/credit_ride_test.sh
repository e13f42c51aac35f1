#!/bin/sh
# credit_ride_test.sh -- runs credit_ride_test (owed AM credits ride on the
# next request instead of messages of their own) on 2 ranks with
# FH_PATHS=lazy and FH_SHM=off over the tcp provider: the one whose message
# endpoints make lazy paths (with rdm endpoints, e.g. shm, every thread has
# a path of its own and credits return half a window at a time).
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_PATHS=lazy FH_SHM=off
for p in $(FH_TEST_PROVIDERS=tcp providers); do
    export FH_OFI_PROVIDER=$p
    run_np credit_ride_test 2
done
finish
