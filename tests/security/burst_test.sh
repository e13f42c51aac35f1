#!/bin/sh
# burst_test.sh -- runs burst_test (a member that ignores flow control:
# 50,000 requests of up to 4000 bytes without credits at a rank that is
# not polling, which over the shm provider ended the target with "cannot
# repost receive buffer" (fi_recvmsg: ENOMEM) before; see
# burst_test.c) on 3 ranks, FH_SHM=off, for every provider in
# FH_TEST_PROVIDERS (net shm): the target survives, serves the honest
# peer, and (when anything was dropped) says why in its log.
#
# Then once more over shm with FH_AM_CREDITS=1: receive buffers of a few
# packets, so the burst's unexpected messages take every receive entry of
# the shm provider while both multi-recv buffers are out, and the provider
# refuses their repost (ENOMEM) until something takes those messages: the
# ofi conduit's one-packet drain receive (ofi_path.c, "Drain").  Without
# it the target stopped receiving for good and the job hung (4 of 6 runs
# under ASan; CI's asan stage hung so with the default credits under load).
. "$(dirname "$0")/../integ/common.sh"
need_fhrun
FH_SHM=off; export FH_SHM
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    run_np burst_test 3 --msgs 50000 --bytes 4000
    grep -E '^\[1\] TARGET|dropped a packet' "$log" | head -3
done
for p in $(FH_TEST_PROVIDERS=shm providers); do
    export FH_OFI_PROVIDER=$p FH_AM_CREDITS=1 FH_VERBOSE=1
    run_np burst_test 3 --msgs 50000 --bytes 4000
    grep -E '^\[1\] TARGET|draining them' "$log" | head -3
    unset FH_AM_CREDITS FH_VERBOSE
done
finish
