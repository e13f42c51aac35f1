#!/bin/sh
# lazy_conn_test.sh -- runs lazy_conn_test (a ring put + barriers) under tools/fhrun on 3 ranks
# for every provider in FH_TEST_PROVIDERS (net shm): a ring test here; its point is the 16-rank
# run over ibv in the rxe VM (tests/vm/lazy-conn-check.sh, make check-rxe), which checks that
# only the pairs that talked were connected.
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    run_np lazy_conn_test 3
done
finish
