#!/bin/sh
# am_test.sh -- runs am_test under tools/fhrun for every rank count in FH_TEST_NP
# (default 2 3 4 8) and every provider in FH_TEST_PROVIDERS (net shm).
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for n in $NP_LIST; do
        run_np am_test "$n"
    done
done
finish
