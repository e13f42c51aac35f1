#!/bin/sh
# reg_security.sh -- runs reg_security (forged registration requests; see
# reg_security.c) on 2 ranks for every FH_REG_STRATEGY that registers on
# demand (FH_TEST_STRATEGIES, default: firehose rendezvous rendezvous-cache
# bounce) and every provider in FH_TEST_PROVIDERS (net shm).  Besides the
# program's own checks, the target's log must hold at least as many
# "refused" lines as it says requests were forged.  The firehose run uses
# FH_FIREHOSE_M=512k, FH_BUCKET_SIZE=64k so that F = R = 512k (the "beyond
# F" case needs one frame to fill the budget).
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_FIREHOSE_M=512k FH_BUCKET_SIZE=64k FH_REGION_MAX=1m
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for s in ${FH_TEST_STRATEGIES:-firehose rendezvous rendezvous-cache bounce}; do
        export FH_REG_STRATEGY=$s
        before=$fail
        run_np reg_security 2
        [ "$fail" -eq "$before" ] || continue
        want=$(sed -n 's/^\[1\] EXPECT_REFUSAL_LOGS \([0-9]*\)$/\1/p' "$log")
        have=$(grep -c '^firehose\[1\]: .*refused' "$log")
        if [ -z "$want" ] || [ "$have" -lt "$want" ]; then
            echo "FAIL reg_security FH_REG_STRATEGY=$s: expected at least '$want' log lines" \
                 "with 'refused' from the target, saw $have"
            fail=$((fail + 1))
        else
            echo "     FH_REG_STRATEGY=$s: $want forged requests, $have 'refused' lines"
        fi
    done
done
finish
