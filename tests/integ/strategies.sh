#!/bin/sh
# strategies.sh -- the integrity tests under every registration strategy
# other than the default: for each FH_REG_STRATEGY in FH_TEST_STRATEGIES
# (default: pin-everything rendezvous rendezvous-cache bounce) and each provider
# in FH_TEST_PROVIDERS (net shm), on FH_TEST_STRATEGY_NP ranks (default 2):
# rma_integrity (and its 64 MiB --big run), am_test, atomic_test,
# threads_test (FH_PATHS independent and shared), sweep_test, bad_input.
# The default strategy (firehose) gets the full rank matrix from the
# per-test scripts; this keeps the added CI time small (a few minutes).
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for s in ${FH_TEST_STRATEGIES:-pin-everything rendezvous rendezvous-cache bounce}; do
        export FH_REG_STRATEGY=$s
        for n in ${FH_TEST_STRATEGY_NP:-2}; do
            run_np rma_integrity "$n"
            run_np am_test "$n"
            run_np atomic_test "$n"
            for paths in independent shared; do
                export FH_PATHS=$paths
                run_np threads_test "$n"
            done
            unset FH_PATHS
            # the strategy's own counters (FH_STATS rows, fh_stats_peer)
            before=$fail
            FH_STATS=1; export FH_STATS
            run_np sweep_test "$n" --ops 2000 --mib 4
            unset FH_STATS
            if [ "$fail" -eq "$before" ]; then
                last=$((n - 1))   # rank 0's memory is swept by rank n-1
                # rendezvous forms: hits/misses are counted by the target,
                # in the row of the peer that asked; every chunk is a
                # request (moves) from the initiator
                case $s in
                firehose)
                    expect_stat total moves -gt 0
                    expect_stat "->$last" registrations -gt 0 ;;
                rendezvous)
                    expect_stat total moves -gt 0
                    expect_stat "->$last" reg_misses -gt 0
                    expect_stat "->$last" reg_hits -eq 0
                    expect_stat "->$last" reg_misses -eq \
                        "$(stats_field "->$last" registrations)"
                    expect_stat "->$last" registrations -gt 0
                    expect_stat "->$last" unregistrations -gt 0
                    expect_stat "->$last" pinned_remote -eq 0 ;;
                rendezvous-cache)
                    expect_stat total moves -gt 0
                    expect_stat "->$last" reg_hits -gt 0
                    expect_stat "->$last" reg_misses -gt 0
                    expect_stat "->$last" reg_misses -eq \
                        "$(stats_field "->$last" registrations)"
                    expect_stat "->$last" registrations -gt 0
                    # frames stay until the segment is destroyed (before
                    # the stats are printed)
                    expect_stat "->$last" unregistrations -gt 0
                    expect_stat "->$last" pinned_remote -eq 0 ;;
                bounce)
                    expect_stat total moves -gt 0
                    expect_stat total registrations -eq 0 ;;
                esac
                grep '^firehose\[0\]: stats total' "$log" | head -1
            fi
            run_np bad_input "$n"
        done
        run_np rma_integrity 2 --big --iters 2
    done
done
finish
