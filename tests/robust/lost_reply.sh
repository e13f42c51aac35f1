#!/bin/sh
# lost_reply.sh -- issue 29 class 3, reconnection: an AM request whose
# connection is lost before its reply fails with FH_ERR_PEER_DEAD naming
# the peer (blocking and NB atomics), the pair is connected again and the
# job finishes (lost_reply_test.c); a peer lost for good has its firehoses
# on our memory released ("peer").  2 ranks over tcp, FH_SHM=off (the
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
# firehose: rank 0 loses every connection, the service paths' one included
# (never made again): its cache releases rank 1's firehoses on its memory
# (fhc_peer_dead through reg.h peer_lost; FH_REG_CHECK=1 checks the cache's
# invariants after each call).  The ranks exit without fh_finalize, as above.
FH_REG_STRATEGY=firehose FH_REG_CHECK=1 FH_VERBOSE=1 FH_PATHS=lazy FH_OFI_PROVIDER=tcp \
    FH_SHM=off timeout 60 "$FHRUN" -n 2 --timeout 40 "$bin" peer >"$out" 2>&1
expect "a peer whose service connection is lost has its firehoses released" \
    $(grep -q '^lost_reply_test peer: PASS' "$out" &&
      grep -q 'firehose cache: rank 1 is lost for good: its [1-9][0-9]* firehoses' "$out"
      echo $?)
# 3 ranks, adaptive budgets, FH_FIREHOSE_M = 2 F: rank 1 holds its floor F on
# rank 0, then shuts down its connections; rank 2's budget on rank 0, held
# at F beside rank 1, grows past F once rank 0 released rank 1 (its
# assertion; rank 0's line says rank 1's bytes went).
FH_REG_STRATEGY=firehose FH_REG_CHECK=1 FH_VERBOSE=1 FH_FIREHOSE_BUDGET=adaptive \
    FH_BUCKET_SIZE=4k FH_REGION_MAX=64k FH_FIREHOSE_M=512k FH_PATHS=lazy \
    FH_OFI_PROVIDER=tcp FH_SHM=off timeout 60 "$FHRUN" -n 3 --timeout 40 "$bin" budget \
    >"$out" 2>&1
expect "a lost peer's budget goes back to the others" \
    $(grep -q '^lost_reply_test budget: PASS' "$out" &&
      grep -q 'budget: rank 1 holds 0 bytes of our memory after its loss' "$out"
      echo $?)
finish
