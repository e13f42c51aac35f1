#!/bin/sh
# seg_release_test.sh -- fh_segment_destroy gives the memory back: runs
# seg_release_test (8 cycles of create / touch 64 MiB / put+get / destroy;
# the resident size must grow by less than two segments) under
# FH_REG_STRATEGY=firehose and pin-everything, on 2 and 3 ranks (FH_TEST_NP
# overrides) and every provider in FH_TEST_PROVIDERS (net shm).  Under
# firehose, rank 0's FH_STATS total row must show that the destroys revoked
# peers' firehoses (revokes > 0) and deregistered every region the cache
# registered (unregistrations = registrations) before fh_finalize.
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_STATS=1
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for s in firehose pin-everything; do
        FH_REG_STRATEGY=$s; export FH_REG_STRATEGY
        for n in ${FH_TEST_NP:-2 3}; do
            before=$fail
            run_np seg_release_test "$n"
            [ -f "$log" ] && grep 'seg_release:' "$log" | head -1
            if [ "$s" = firehose ] && [ "$fail" -eq "$before" ]; then
                expect_stat total revokes -gt 0
                expect_stat total unregistrations -eq "$(stats_field total registrations)"
            fi
        done
    done
done
finish
