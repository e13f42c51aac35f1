#!/bin/sh
# burst_test.sh -- runs burst_test (a member that ignores flow control:
# 50,000 requests of up to 4000 bytes without credits at a rank that is
# not polling, which over the shm provider ended the target with "cannot
# repost receive buffer" (fi_recvmsg: ENOMEM) before; see
# burst_test.c) on 3 ranks, FH_SHM=off, for every provider in
# FH_TEST_PROVIDERS (tcp shm): the target survives, serves the honest
# peer, and (when anything was dropped) says why in its log.
. "$(dirname "$0")/../integ/common.sh"
need_fhrun
FH_SHM=off; export FH_SHM
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    run_np burst_test 3 --msgs 50000 --bytes 4000
    grep -E '^\[1\] TARGET|dropped a packet' "$log" | head -3
done
finish
