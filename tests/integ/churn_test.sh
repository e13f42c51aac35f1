#!/bin/sh
# churn_test.sh -- memory freed and reused at the same addresses, with
# FH_REG_STRATEGY=firehose FH_SEGMENT=everything FH_BUCKET_SIZE=4k, under
# tools/fhrun for every provider in FH_TEST_PROVIDERS (net shm), 2 ranks
# (FH_CHURN_NP overrides; FH_TEST_NP is ignored: pairs of ranks test the
# same thing at any size), FH_CHURN_CYCLES cycles (default 10000 on the first
# provider, 2000 on the others: each cycle is a free, a revocation round
# trip, a miss and two AMs, ~5-20 ms on a loaded 2-core machine):
#   1. FH_MEMMON=auto: 0 corrupted bytes and invalidations > 0 required;
#      also with 4k buffers (one bucket: the revoked firehoses are cached in
#      the lock-free hit layer, which must let go of them before the ack);
#   2. the negative control, FH_MEMMON=off: its job total of corrupted bytes
#      says what runs 1 prove on this provider.  > 0: the provider shows a
#      stale registration, so their 0 is evidence (coverage claimed).  0:
#      libfabric's tcp and shm write through the virtual address, a stale
#      registration does no harm, and the test SAYS that runs 1 claim no
#      coverage against stale registrations here (they still check the
#      monitor's mechanics: invalidations > 0, revocations acked).  The
#      claim is carried by a pinning NIC: tests/vm/churn-rxe.sh (ibv on
#      Soft-RoCE, make check-rxe), whose FH_MEMMON=off run must corrupt.
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
# negative_control N CYCLES: the FH_MEMMON=off run (see 2. above).
negative_control() {
    bin=$(fh_bin churn_test) || { echo "SKIP: churn_test not built"; return; }
    desc="churn_test -n $1 FH_OFI_PROVIDER=$p FH_MEMMON=off (negative control)"
    ran=$((ran + 1))
    FH_MEMMON=off timeout -k 10 $((TIMEOUT + 30)) "$FHRUN" -n "$1" \
        --timeout "$TIMEOUT" "$bin" --cycles "$2" >"$tmpd/neg.log" 2>&1
    rc=$?
    total=$(sed -n 's/.*churn: job total corrupted_bytes=\([0-9]*\).*/\1/p' \
        "$tmpd/neg.log" | head -1)
    if [ -z "$total" ] || { [ "$total" -eq 0 ] && [ $rc -ne 0 ]; }; then
        fail=$((fail + 1))
        echo "FAIL $desc: exit status $rc, no verdict; last lines:"
        tail -n 20 "$tmpd/neg.log"
    elif [ "$total" -gt 0 ]; then
        echo "ok   $desc: $total corrupted bytes with the monitor off: $p shows"
        echo "     stale registrations, so the 0 of the monitored runs is evidence"
    else
        echo "ok   $desc: 0 corrupted bytes with the monitor off"
        echo "NOTE provider $p cannot show a stale registration (it writes through"
        echo "     the virtual address): the monitored runs above claim NO coverage"
        echo "     against stale registrations on $p; tests/vm/churn-rxe.sh (ibv on"
        echo "     Soft-RoCE, make check-rxe) carries that claim"
    fi
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
        negative_control "$n" "$((cycles / 10))"
    done
done
finish
