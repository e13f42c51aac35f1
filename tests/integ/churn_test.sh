#!/bin/sh
# churn_test.sh -- memory freed and reused at the same addresses, with
# FH_REG_STRATEGY=firehose FH_SEGMENT=everything FH_BUCKET_SIZE=4k, under
# tools/fhrun for every provider in FH_TEST_PROVIDERS (tcp shm), 2 ranks
# (FH_CHURN_NP overrides; FH_TEST_NP is ignored: pairs of ranks test the
# same thing at any size), FH_CHURN_CYCLES cycles (default 10000 on the first
# provider, 2000 on the others: each cycle is a free, a revocation round
# trip, a miss and two AMs, ~5-20 ms on a loaded 2-core machine):
#   1. FH_MEMMON=auto: 0 corrupted bytes and invalidations > 0 required;
#      also with 4k buffers (one bucket: the revoked firehoses are cached in
#      the lock-free hit layer, which must let go of them before the ack);
#   2. FH_MEMMON=off: must ALSO pass on ofi -- libfabric's tcp and shm write
#      through the virtual address, so a stale registration does no harm
#      there.  The negative control that must show corruption runs on a
#      pinning NIC: tests/vm/churn-rxe.sh (ibv on Soft-RoCE, make check-rxe).
# The corrupted-byte counts are printed for each run.
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_REG_STRATEGY=firehose FH_SEGMENT=everything FH_BUCKET_SIZE=4k FH_STATS=1
NP_LIST=${FH_CHURN_NP:-2}
TIMEOUT=${FH_TEST_TIMEOUT:-900}
first=1
show() {
    [ -n "${log:-}" ] && [ -f "$log" ] && grep -E 'churn: (role|job)' "$log"
}
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    if [ "$first" = 1 ]; then cycles=${FH_CHURN_CYCLES:-10000}; else cycles=${FH_CHURN_CYCLES:-2000}; fi
    first=0
    for n in $NP_LIST; do
        FH_MEMMON=auto run_np churn_test "$n" --cycles "$cycles" --monitor; show
        # One-bucket buffers: the second put and the get hit the per-thread
        # hit layer, so every REVOKE finds a cached reference to drop first.
        FH_MEMMON=auto run_np churn_test "$n" --cycles "$((cycles / 5))" --size 4096 \
            --monitor; show
        FH_MEMMON=off run_np churn_test "$n" --cycles "$((cycles / 10))"; show
    done
done
finish
