#!/bin/sh
# threads_test.sh -- runs threads_test (4 threads per rank) with FH_PATHS=independent and shared under tools/fhrun for every rank count in FH_TEST_NP
# (default 2 3 4 8) and every provider in FH_TEST_PROVIDERS (net shm), and
# with FH_PATHS=lazy (thread paths made when each thread first calls in) on
# 2 and 4 ranks over tcp, the provider where paths are made that way.
# FH_TEST_THREAD_STRATEGIES (set by `make check-tsan`; empty otherwise, as
# strategies.sh covers them in `make check`) adds 2-rank runs under each of
# those FH_REG_STRATEGY values.
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for paths in independent shared; do
        export FH_PATHS=$paths
        for n in $NP_LIST; do
            run_np threads_test "$n"
        done
        for s in ${FH_TEST_THREAD_STRATEGIES:-}; do
            FH_REG_STRATEGY=$s; export FH_REG_STRATEGY
            run_np threads_test 2
            unset FH_REG_STRATEGY
        done
    done
done
unset FH_REG_STRATEGY
export FH_OFI_PROVIDER=tcp FH_PATHS=lazy
for n in 2 4; do
    run_np threads_test "$n"
done
finish
