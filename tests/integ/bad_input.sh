#!/bin/sh
# bad_input.sh -- runs bad_input under tools/fhrun for every rank count in FH_TEST_NP
# (default 2 3 4 8) and every provider in FH_TEST_PROVIDERS (net shm).
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for n in $NP_LIST; do
        run_np bad_input "$n"
    done
done
finish
