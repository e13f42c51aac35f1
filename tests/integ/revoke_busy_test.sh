#!/bin/sh
# revoke_busy_test.sh -- a REVOKE arriving while RDMA through the revoked
# firehose is in flight (revoke_busy_test.c), with FH_REG_STRATEGY=firehose
# FH_SEGMENT=everything FH_BUCKET_SIZE=4k, 2 ranks, for
# every provider in FH_TEST_PROVIDERS (net shm), FH_REVOKE_BUSY_CYCLES
# cycles at least (default 300; more, up to 20 times as many, until a busy
# revocation happened: the interleaving depends on scheduling).  Passes when
# no byte is corrupted, the initiator saw at least one busy revocation
# (reg_revoked_busy > 0) and took no hit on a firehose after its busy
# revocation (counted by the test hooks).
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_REG_STRATEGY=firehose FH_SEGMENT=everything FH_BUCKET_SIZE=4k FH_STATS=1
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    run_np revoke_busy_test 2 --cycles "${FH_REVOKE_BUSY_CYCLES:-300}"
    [ -n "${log:-}" ] && [ -f "$log" ] && grep -E 'revoke_busy: role' "$log"
done
finish
