#!/bin/sh
# peer_lost.sh -- a peer whose service paths' connection is lost for good
# (never made again) is released by the firehose cache (peer_lost_test.c:
# fhc_peer_dead through reg.h peer_lost).  Over tcp, FH_SHM=off (the network
# route), FH_REG_CHECK=1 (the cache's invariants after each call),
# FH_VERBOSE=1 (the release is logged).  The service paths' connection is
# not made again, so the ranks exit without fh_finalize: the script checks
# their output, not fhrun's status.  Each case fails without the call.
. "$(dirname "$0")/errors_lib.sh"
bin=$(prog peer_lost_test) || { echo "SKIP: peer_lost_test not built"; exit 77; }
[ -x "$FHRUN" ] || { echo "SKIP: fhrun not built"; exit 77; }
# 2 ranks: rank 1 holds firehoses on 4 frames of rank 0's segment; rank 0
# shuts down all its connections and its cache releases them.
FH_REG_STRATEGY=firehose FH_REG_CHECK=1 FH_VERBOSE=1 FH_PATHS=lazy FH_OFI_PROVIDER=tcp \
    FH_SHM=off timeout 60 "$FHRUN" -n 2 --timeout 40 "$bin" peer >"$out" 2>&1
expect "a peer whose service connection is lost has its firehoses released" \
    $(grep -q '^peer_lost_test peer: PASS' "$out" &&
      grep -q 'firehose cache: rank 1 is lost for good: its [1-9][0-9]* firehoses' "$out"
      echo $?)
# 3 ranks, adaptive budgets, FH_FIREHOSE_M = 2 F: rank 1 holds its floor F on
# rank 0, then shuts down its connections; rank 2's budget on rank 0, held
# at F beside rank 1, grows past F once rank 0 released rank 1 (rank 2's
# assertion; rank 0's line says rank 1's bytes went).
FH_REG_STRATEGY=firehose FH_REG_CHECK=1 FH_VERBOSE=1 FH_FIREHOSE_BUDGET=adaptive \
    FH_BUCKET_SIZE=4k FH_REGION_MAX=64k FH_FIREHOSE_M=512k FH_PATHS=lazy \
    FH_OFI_PROVIDER=tcp FH_SHM=off timeout 60 "$FHRUN" -n 3 --timeout 40 "$bin" budget \
    >"$out" 2>&1
expect "a lost peer's budget goes back to the others" \
    $(grep -q '^peer_lost_test budget: PASS' "$out" &&
      grep -q 'budget: rank 1 holds 0 bytes of our memory after its loss' "$out"
      echo $?)
finish
