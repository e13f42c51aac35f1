#!/bin/sh
# bigput_revoke_test.sh -- a large put over resident and cold buckets while
# the target invalidates one of them (bigput_revoke_test.c), with
# FH_REG_STRATEGY=firehose FH_SEGMENT=everything FH_BUCKET_SIZE=4k, 2 ranks,
# for every provider in FH_TEST_PROVIDERS (net shm), FH_BIGPUT_CYCLES cycles
# (default 20).  Passes when no byte is
# corrupted, no call failed and the initiator saw revocations.
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_REG_STRATEGY=firehose FH_SEGMENT=everything FH_BUCKET_SIZE=4k FH_STATS=1
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    run_np bigput_revoke_test 2 --cycles "${FH_BIGPUT_CYCLES:-20}"
    [ -n "${log:-}" ] && [ -f "$log" ] && grep -E 'bigput_revoke: role' "$log"
done
finish
