#!/bin/sh
# atomic_stats_test.sh -- runs atomic_stats_test (4 threads per rank, each
# doing K atomics to the next rank; the per-peer counters must be exact) with
# FH_PATHS=shared and independent under tools/fhrun for every rank count in
# FH_TEST_NP (default 2 3 4 8) and every provider in FH_TEST_PROVIDERS
# (net shm).
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for paths in shared independent; do
        export FH_PATHS=$paths
        for n in $NP_LIST; do
            run_np atomic_stats_test "$n"
        done
    done
done
finish
