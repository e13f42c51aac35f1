#!/bin/sh
# wait_progress_test.sh -- no wait depends on another thread of the rank
# calling in (wait_progress_test.c), 2 ranks, for every provider in
# FH_TEST_PROVIDERS (net shm):
#   idle-budget     quiet and barrier while another thread holds the budget
#                   and is idle (FH_FIREHOSE_M=256k);
#   idle-revoke     a revoke meeting an idle thread's RDMA (FH_SEGMENT=
#                   everything FH_BUCKET_SIZE=4k): no deadlock across ranks;
#   stream-quiet    quiet under a streaming neighbour on a shared path
#                   (FH_MAX_THREADS=1, and FH_PATHS=shared);
#   exited-replies  AM replies to a thread that has exited are run, its
#                   handles freed (independent and shared paths).
. "$(dirname "$0")/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    FH_REG_STRATEGY=firehose FH_FIREHOSE_M=256k \
        run_np wait_progress_test 2 --mode idle-budget
    FH_REG_STRATEGY=firehose FH_SEGMENT=everything FH_BUCKET_SIZE=4k \
        run_np wait_progress_test 2 --mode idle-revoke
    # stream-quiet stops rank 1 with SIGSTOP: over shm the stopped process
    # may hold a lock of the shared queues that our sends spin on, so tcp only.
    if [ "$p" = tcp ]; then
        FH_MAX_THREADS=1 run_np wait_progress_test 2 --mode stream-quiet
        FH_PATHS=shared run_np wait_progress_test 2 --mode stream-quiet
    fi
    run_np wait_progress_test 2 --mode exited-replies
    FH_PATHS=shared run_np wait_progress_test 2 --mode exited-replies
done
finish
