#!/bin/sh
# finalize_test.sh -- runs finalize_test (fh_finalize completes the caller's
# NB/NBI gets, puts and atomics, and every rank's operations to us) on 2 and
# 3 ranks (FH_TEST_NP) over every provider: once with segments only (gets
# and atomics checked), once with FH_SEGMENT=everything (puts into memory
# that outlives fh_finalize checked as well).
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for n in ${FH_TEST_NP:-2 3}; do
        run_np finalize_test "$n"
        # 1 MiB per operation: enough in flight that a finalize that does
        # not complete them first is caught, not hidden by its own polling.
        FH_SEGMENT=everything run_np finalize_test "$n" --everything --piece 1048576
    done
done
export FH_OFI_PROVIDER=tcp
for s in ${FH_TEST_STRATEGIES:-pin-everything rendezvous rendezvous-cache bounce}; do
    FH_REG_STRATEGY=$s; export FH_REG_STRATEGY
    run_np finalize_test 2
done
unset FH_REG_STRATEGY
finish
