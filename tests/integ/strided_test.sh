#!/bin/sh
# strided_test.sh -- runs strided_test (strided put/get at scale, around the
# AM/RMA threshold, bad input) under tools/fhrun on 2 and 3 ranks for every
# provider in FH_TEST_PROVIDERS (net shm), with FH_SHM=off (common.sh): the
# net route.
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for n in 2 3; do
        run_np strided_test "$n"
    done
done
finish
