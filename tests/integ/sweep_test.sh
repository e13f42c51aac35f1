#!/bin/sh
# sweep_test.sh -- runs sweep_test with FH_REG_STRATEGY=firehose and a small
# budget (FH_FIREHOSE_M=1m, FH_FIREHOSE_MAXVICTIM=256k, FH_BUCKET_SIZE=64k,
# 4 MiB per segment: 4 x M) under tools/fhrun for every rank count in
# FH_TEST_NP (default 2 3 4 8) and every provider in FH_TEST_PROVIDERS (tcp
# shm), and checks that rank 0's FH_STATS total line shows misses, moves and
# evictions, and its row for rank n-1 (who sweeps rank 0) evictions and
# registrations.
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_REG_STRATEGY=firehose FH_FIREHOSE_M=1m FH_FIREHOSE_MAXVICTIM=256k
export FH_BUCKET_SIZE=64k FH_STATS=1
# the stats "total" line of rank 0 must show field > 0
stat_pos() {
    line=$(grep '^firehose\[0\]: stats total' "$log" | head -1)
    v=$(echo "$line" | sed -n "s/.* $1=\([0-9]*\).*/\1/p")
    if [ -z "$v" ] || [ "$v" -eq 0 ]; then
        echo "FAIL sweep_test: $1 is '${v}' in: $line"
        fail=$((fail + 1))
    fi
}
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for n in $NP_LIST; do
        before=$fail
        run_np sweep_test "$n" --ops 3000 --mib 4
        if [ "$fail" -eq "$before" ] && [ -n "${log:-}" ] && [ -f "$log" ]; then
            stat_pos reg_misses
            stat_pos moves
            stat_pos evictions
            # per peer: rank 0's memory is swept by rank n-1, whose
            # firehoses were the last holders of the evicted regions
            expect_stat "->$((n - 1))" evictions -gt 0
            expect_stat "->$((n - 1))" registrations -gt 0
            grep '^firehose\[0\]: stats total' "$log" | head -1
        fi
    done
done
finish
