#!/bin/sh
# segments_test.sh -- runs segments_test (per-rank sizes and size 0, a second
# live segment, a range across two touching segments, a destroyed segment)
# on 2 and 3 ranks (FH_TEST_NP) over every provider, and on 2 ranks over tcp
# under every registration strategy besides the default.
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for n in ${FH_TEST_NP:-2 3}; do
        run_np segments_test "$n"
    done
done
export FH_OFI_PROVIDER=tcp
for s in ${FH_TEST_STRATEGIES:-pin-everything rendezvous rendezvous-cache bounce}; do
    FH_REG_STRATEGY=$s; export FH_REG_STRATEGY
    # pin-everything maps pieces exactly: two of them must touch somewhere.
    if [ "$s" = pin-everything ]; then run_np segments_test 2 --require-seam
    else run_np segments_test 2; fi
done
unset FH_REG_STRATEGY
finish
