#!/bin/sh
# idle_sleep.sh -- a rank that waits long for nothing sleeps instead of
# spinning or yielding (idle_sleep_test.c):
#   through the network (FH_SHM=off: path.c's net_sleep on the conduit's fds)
#   through the node path (node_am.c's futex sleep)
. "$(dirname "$0")/common.sh"
need_fhrun
FH_SHM=off; export FH_SHM
run_np idle_sleep_test 2 --expect-sleep
unset FH_SHM
run_np idle_sleep_test 2 --expect-sleep
finish
