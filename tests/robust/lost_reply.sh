#!/bin/sh
# lost_reply.sh -- issue 29 class 3, reconnection: an AM request whose
# connection is lost before its reply fails with FH_ERR_PEER_DEAD naming
# the peer (blocking and NB atomics), the pair is connected again and the
# job finishes (lost_reply_test.c).  2 ranks over tcp, FH_SHM=off (the
# network route), the default FH_PATHS (the worker thread has a thread
# path of its own, whose connection the test shuts down).  On main the
# atomic waited for ever: fhrun --timeout ended the run.
. "$(dirname "$0")/errors_lib.sh"
bin=$(prog lost_reply_test) || { echo "SKIP: lost_reply_test not built"; exit 77; }
[ -x "$FHRUN" ] || { echo "SKIP: fhrun not built"; exit 77; }
FH_PATHS=lazy FH_OFI_PROVIDER=tcp FH_SHM=off timeout 60 "$FHRUN" -n 2 --timeout 40 "$bin" >"$out" 2>&1
rc=$?
expect "a request whose reply was lost fails naming the peer (status $rc)" \
    $([ $rc -eq 0 ] && grep -q '^lost_reply_test: PASS' "$out" &&
      [ "$(grep -c 'returned FH_ERR_PEER_DEAD' "$out")" -eq 2 ]; echo $?)
# rendezvous: the key request travels on the service paths' connection,
# which is not made again (docs/reliability.md "Open"): the ranks exit
# without fh_finalize after the check, and fhrun's status is not ours.
FH_REG_STRATEGY=rendezvous FH_PATHS=lazy FH_OFI_PROVIDER=tcp FH_SHM=off timeout 60 \
    "$FHRUN" -n 2 --timeout 40 "$bin" rdv >"$out" 2>&1
expect "a rendezvous put whose key reply was lost fails naming the peer" \
    $(grep -q '^lost_reply_test rdv: PASS' "$out" &&
      grep -q 'rdv: the put .* returned FH_ERR_PEER_DEAD: .*rank 1' "$out"; echo $?)
finish
