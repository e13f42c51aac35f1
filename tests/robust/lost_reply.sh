#!/bin/sh
# lost_reply.sh -- issue 29 class 3, reconnection: a request whose
# connection is lost before its reply fails with FH_ERR_PEER_DEAD naming
# the peer, the pair is connected again and the job finishes
# (lost_reply_test.c): blocking and NB atomics, bounce transfers
# (FH_REG_STRATEGY=bounce), a client's request waited for with fh_am_lost.
# Over the service paths' connection, which is not made again (the ranks
# then exit without fh_finalize, so fhrun's status is not ours and the
# output is checked): a rendezvous key request, a firehose move, and
# fh_barrier's round.  And a barrier notification lost with a thread
# path's connection, sent again (barrier_resend_test.c), from a barrier's
# wait and from a wait outside any barrier.  2 ranks over tcp, FH_SHM=off (the network route),
# FH_PATHS=lazy (the worker thread has a thread path of its own, whose
# connection the test shuts down).  On main each waited for ever: fhrun
# --timeout ended the run.
. "$(dirname "$0")/errors_lib.sh"
bin=$(prog lost_reply_test) || { echo "SKIP: lost_reply_test not built"; exit 77; }
[ -x "$FHRUN" ] || { echo "SKIP: fhrun not built"; exit 77; }
export FH_PATHS=lazy FH_OFI_PROVIDER=tcp FH_SHM=off
# run CASE [VAR=value ...]: the test's case (atomic: no argument) under
# fhrun, into $out; its status in $rc
run() {
    c=$1
    shift
    [ "$c" = atomic ] && c=
    env "$@" timeout 60 "$FHRUN" -n 2 --timeout 30 "$bin" $c >"$out" 2>&1
    rc=$?
}
# reconnected: the case passed and finished (fh_barrier, fh_finalize), its
# two lost requests each FH_ERR_PEER_DEAD
reconnected() {
    [ $rc -eq 0 ] && grep -q "^lost_reply_test$1: PASS" "$out" &&
        [ "$(grep -c 'returned FH_ERR_PEER_DEAD' "$out")" -eq 2 ]
}
run atomic
expect "atomics whose reply was lost fail naming the peer (status $rc)" \
    $(reconnected ""; echo $?)
run bounce FH_REG_STRATEGY=bounce
expect "bounce puts whose chunks' replies were lost fail naming the peer (status $rc)" \
    $(reconnected " bounce"; echo $?)
run client
expect "a client's wait for a lost reply ends, fh_am_lost naming the peer (status $rc)" \
    $(reconnected " client"; echo $?)
run rdv FH_REG_STRATEGY=rendezvous
expect "a rendezvous put whose key reply was lost fails naming the peer" \
    $(grep -q '^lost_reply_test rdv: PASS' "$out" &&
      grep -q 'rdv: the put .* returned FH_ERR_PEER_DEAD: .*rank 1' "$out"; echo $?)
run move
expect "a put whose firehose move was lost fails naming the peer" \
    $(grep -q '^lost_reply_test move: PASS' "$out" &&
      grep -q 'move: the put .* returned FH_ERR_PEER_DEAD: .*rank 1' "$out"; echo $?)
# A barrier notification lost with a thread path's connection (rank 1
# takes the unread bytes, then shuts its sockets down) is sent again once
# the connection is made again: both barriers complete, the job finishes.
bin_lost=$bin
bin=$(prog barrier_resend_test) || { echo "SKIP: barrier_resend_test not built"; exit 77; }
run atomic
expect "a barrier notification lost with its connection is sent again (status $rc)" \
    $([ $rc -eq 0 ] && grep -q '^barrier_resend_test: PASS' "$out" &&
      grep -q 'took [1-9][0-9]* unread bytes' "$out"; echo $?)
# ... by a sender that waits outside any barrier (fh_poll) for what the
# leader lacking it does only after its barrier.
run outside
expect "... and sent again from a wait outside any barrier (status $rc)" \
    $([ $rc -eq 0 ] && grep -q '^barrier_resend_test: PASS' "$out" &&
      grep -q 'took [1-9][0-9]* unread bytes' "$out" &&
      grep -q 'word came while the worker waited outside' "$out"; echo $?)
# Two workers' thread paths per rank lose their connections at once (rank
# 0 shuts down every socket made after start-up) while they keep putting:
# each pair is connected again, every worker completes puts afterwards,
# reads back what it wrote, and the last successful value of each is what
# its peer holds; over tcp and net (the default provider).  Under TSan:
# the thread paths close their lost connections at the same moment.
bin=$(prog redial_threads_test) || { echo "SKIP: redial_threads_test not built"; exit 77; }
for prov in tcp net; do
    run atomic FH_MAX_THREADS=3 FH_OFI_PROVIDER=$prov
    expect "thread paths that lose their connections at once are connected again ($prov, status $rc)" \
        $([ $rc -eq 0 ] && [ "$(grep -c '^redial_threads_test: PASS' "$out")" -eq 2 ] &&
          grep -q 'rank 0: shut down [0-9]* sockets' "$out"; echo $?)
done
bin=$bin_lost
run barrier
expect "a barrier whose peer's connection was lost fails naming it; the peer's returns" \
    $(grep -q '^lost_reply_test barrier: PASS' "$out" &&
      grep -q 'barrier: the barrier .* returned FH_ERR_PEER_DEAD: .*rank 0' "$out" &&
      grep -q "rank 0's barrier after the loss returned" "$out"; echo $?)
finish
