#!/bin/sh
# revoke_order_test.sh -- a publication after freeing memory never reaches
# the peer before the REVOKE (revoke_order_test.c, built with the runtime's
# test hooks to open the window), with FH_REG_STRATEGY=firehose
# FH_SEGMENT=everything FH_BUCKET_SIZE=4k, 2 ranks, for every provider in
# FH_TEST_PROVIDERS (net shm), FH_REVOKE_ORDER_CYCLES cycles (default 200);
# and with the publication made by an AM reply (--reply, default 100 cycles).
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_REG_STRATEGY=firehose FH_SEGMENT=everything FH_BUCKET_SIZE=4k
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    run_np revoke_order_test 2 --cycles "${FH_REVOKE_ORDER_CYCLES:-200}"
    [ -n "${log:-}" ] && [ -f "$log" ] && grep -E 'revoke_order:' "$log"
    # The publication as an AM reply, from a handler (no entry wait there).
    run_np revoke_order_test 2 --cycles "${FH_REVOKE_ORDER_CYCLES:-100}" --reply
    [ -n "${log:-}" ] && [ -f "$log" ] && grep -E 'revoke_order:' "$log"
done
finish
