#!/bin/sh
# nb_nowait_test.sh -- runs nb_nowait_test (rank 1 stops polling until rank 0
# has issued fh_put_nb/fh_get_nb/fh_put_nbi/fh_get_nbi to it and released it
# through a file: every non-blocking call must return without rank 1's help)
# on 2 ranks under every registration strategy (FH_TEST_NB_STRATEGIES,
# default: firehose pin-everything rendezvous rendezvous-cache bounce) and
# every provider in FH_TEST_PROVIDERS (net shm), with FH_PATHS independent
# (a fresh thread has a fresh path: its first contact with rank 1) and
# shared.
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for s in ${FH_TEST_NB_STRATEGIES:-firehose pin-everything rendezvous rendezvous-cache bounce}; do
        export FH_REG_STRATEGY=$s
        for paths in independent shared; do
            export FH_PATHS=$paths
            run_np nb_nowait_test 2
        done
    done
done
finish
