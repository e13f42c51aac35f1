#!/bin/sh
# put_visible.sh -- runs put_visible (a completed put is visible at the target
# with nothing more from the initiator; fh_quiet completes NB handles) for
# every rank count in FH_TEST_NP (default here 2 3 4) and provider, and on 2
# ranks over tcp under every registration strategy besides the default.
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for n in ${FH_TEST_NP:-2 3 4}; do
        run_np put_visible "$n"
    done
done
export FH_OFI_PROVIDER=tcp
for s in ${FH_TEST_STRATEGIES:-pin-everything rendezvous rendezvous-cache bounce}; do
    FH_REG_STRATEGY=$s; export FH_REG_STRATEGY
    run_np put_visible 2
done
unset FH_REG_STRATEGY
finish
