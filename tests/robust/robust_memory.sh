#!/bin/sh
# robust_memory.sh -- issue 29, classes 1-3 (tests/robust/README.md):
#   everything_map_test  FH_SEGMENT=everything reaches any mapped byte, and
#                        the runtime's watching never breaks the
#                        application's mremap/munmap;
#   failed_put_test      a refused put or get changes nothing (per piece);
#   fault_target_test    a peer's PROT_NONE / read-only / unmapped memory
#                        (mprotect, pkey_mprotect, munmap after the
#                        segment was created), and the caller's own
#                        unmapped / PROT_NONE / read-only buffer (over the
#                        network and the node route, and to one's own
#                        rank), give an error naming rank and address, both
#                        ranks live on;
#   destroyed_seg_test   transfers from and into a piece its owner destroys
#                        meanwhile end with FH_OK or an error naming the
#                        peer, and the pair works afterwards;
#   prot_round_test      an mprotect of segment memory with a stopped peer
#                        returns after FH_SEG_PROT_WAIT, naming the peer,
#                        and at once when the peer's link is lost;
#   seg_churn_test       segment tables and hole lists replaced while the
#                        job runs are freed, not kept to fh_finalize.
# 2 ranks each (everything_map_test also on 3: copies), over tcp; the network route (FH_SHM=off) and, for the
# FH_SEGMENT=everything programs, the node route (FH_SHM=auto: cross-memory
# attach).  fault_target_test runs whole under every FH_REG_STRATEGY
# (FH_TEST_FAULT_STRATEGIES), pin-everything included, and its peer part
# under pin-everything also over the shm provider and through the node
# route (FH_SHM=auto: the initiator maps the peer's piece); under
# pin-everything also its "stall" part (a get from a page protected behind
# the runtime's back ends by FH_OFI_RMA_TIMEOUT, the pair is connected
# again and finishes) and its "compute" part (a computing target is waited
# for, from a thread path and from the service path); FH_SEGMENT=everything is firehose's only.  FH_TEST_LONG=1: more
# sizes and offsets.
. "$(dirname "$0")/../integ/common.sh"
need_fhrun
FH_TEST_BINDIR=${FH_TEST_BINDIR:-$(first_exe "${top_builddir:+$top_builddir/tests/robust/everything_map_test}" \
    ./tests/robust/everything_map_test "$here/everything_map_test" | sed 's|/everything_map_test$||')}
export FH_TEST_BINDIR FH_OFI_PROVIDER=${FH_OFI_PROVIDER:-tcp}
TIMEOUT=${FH_TEST_TIMEOUT:-60}
export FH_SEGMENT=everything
for shm in off auto; do
    export FH_SHM=$shm
    echo "---- FH_SEGMENT=everything FH_SHM=$shm"
    run_np everything_map_test 2
    run_np failed_put_test 2
done
# A third rank holding a region another run of whose bucket rank 0 wants:
# copies instead of a re-aim (firehose_copy.c).
export FH_SHM=off
run_np everything_map_test 3
export FH_SHM=off FH_SEGMENT=segments
echo "---- FH_SEGMENT=segments FH_SHM=off"
for s in ${FH_TEST_FAULT_STRATEGIES:-pin-everything firehose rendezvous rendezvous-cache bounce}; do
    export FH_REG_STRATEGY=$s
    run_np fault_target_test 2
done
export FH_REG_STRATEGY=pin-everything
if ! command -v fi_info >/dev/null 2>&1 || fi_info -p shm >/dev/null 2>&1; then
    export FH_OFI_PROVIDER=shm
    run_np fault_target_test 2 remote
    export FH_OFI_PROVIDER=tcp
fi
echo "---- FH_SEGMENT=segments FH_SHM=auto (the node route)"
export FH_SHM=auto
run_np fault_target_test 2 remote
# The caller's own unmapped / PROT_NONE / read-only buffer on the node
# route: refused naming the address (on main rank 0 died of SIGSEGV in
# fh_put's memcpy).  The strategy plays no part there.
run_np fault_target_test 2 own
export FH_SHM=off
# stall: the get ends by FH_OFI_RMA_TIMEOUT (after probing rank 1, which
# polls), the pair is connected again, and both ranks finish with a barrier
# and fh_finalize (exit 0).  compute: a get from a rank that computes 4 s
# waits for it (its probe is not answered) and succeeds -- also from the
# service path (every thread's under FH_PATHS=shared, the first thread's
# under lazy), which is never probed: there the get failed at the timeout
# and the pair was over.
export FH_OFI_RMA_TIMEOUT=1
run_np fault_target_test 2 stall
run_np fault_target_test 2 compute
for paths in shared lazy; do
    export FH_PATHS=$paths
    run_np fault_target_test 2 compute
done
unset FH_OFI_RMA_TIMEOUT FH_PATHS
echo "---- FH_SEGMENT=everything FH_SHM=off"
export FH_SEGMENT=everything FH_REG_STRATEGY=firehose
run_np fault_target_test 2
# prot_round_test: an mprotect of segment memory while the peer is stopped
# (SIGSTOP) returns after FH_SEG_PROT_WAIT naming it (on main it waited for
# ever); the peer applies the change once it runs again.  firehose (the
# peer holds a firehose there: its revocation is not waited for either)
# and pin-everything over tcp, and the node route.
echo "---- prot_round_test (a stopped peer)"
export FH_SEGMENT=segments FH_SEG_PROT_WAIT=1 FH_AM_CREDITS=1
for s in firehose pin-everything; do
    export FH_REG_STRATEGY=$s
    run_np prot_round_test 2
done
export FH_SHM=auto
run_np prot_round_test 2
export FH_SHM=off
# lost: no deadline (FH_SEG_PROT_WAIT=0), the stopped peer's service link
# is shut down under the round, which must then stop waiting for it
# (without the rule it waited until fhrun's --timeout).  That link is not
# made again, so rank 0 ends without fh_finalize and rank 1 is ended as
# its peer died: only rank 0's PASS line counts, not fhrun's status.
export FH_SEG_PROT_WAIT=0 FH_PATHS=lazy
if bin=$(fh_bin prot_round_test); then
    run_case "prot_round_test -n 2 FH_PATHS=lazy FH_SEG_PROT_WAIT=0 lost" prot_round_test \
        sh -c '"$1" -n 2 --timeout "$2" "$3" lost; exit 0' sh "$FHRUN" "$TIMEOUT" "$bin"
fi
unset FH_SEG_PROT_WAIT FH_PATHS FH_AM_CREDITS
# seg_churn_test: 3000 protection changes and 100 segment creations while
# worker threads read the tables: replaced tables and hole lists are freed
# (the heap grows by less than 64 bytes per change; keeping them to
# fh_finalize grew it by ~300), every transfer works.  The default
# strategy and pin-everything (which re-keys nothing but publishes the same).
echo "---- seg_churn_test (old segment tables freed)"
for s in firehose pin-everything; do
    export FH_REG_STRATEGY=$s
    run_np seg_churn_test 2
done
# destroyed_seg_test: a worker thread per rank keeps reading and writing
# the peer's piece while the main threads destroy the segment (a contract
# violation): every transfer ends with FH_OK or an error naming the peer,
# a successful get brought the piece's bytes, transfers after the destroy
# are refused, and a new segment works between the ranks afterwards.
# Every strategy over tcp and net; FH_OFI_RMA_TIMEOUT=1 bounds a transfer
# the provider stopped serving.  A connection lost there is made again
# without a word about credits: a request that waited for transmit room
# while its link was made again kept its credit out of the restored
# window (on main: "rank 1 returned more AM credits than it was given",
# pin-everything over tcp, 5 runs of 6).
echo "---- destroyed_seg_test (a segment destroyed under transfers)"
export FH_OFI_RMA_TIMEOUT=1
for p in tcp net; do
    export FH_OFI_PROVIDER=$p
    for s in ${FH_TEST_FAULT_STRATEGIES:-pin-everything firehose rendezvous rendezvous-cache bounce}; do
        export FH_REG_STRATEGY=$s
        run_np destroyed_seg_test 2
        if grep -q 'returned more AM credits' "$log"; then
            echo "FAIL destroyed_seg_test $p $s: $(grep -m1 'returned more AM credits' "$log")"
            fail=$((fail + 1))
        fi
    done
done
export FH_OFI_PROVIDER=tcp
unset FH_OFI_RMA_TIMEOUT FH_REG_STRATEGY
finish
