#!/bin/sh
# node_stress.sh -- atomics and ordering where the node path and the
# network path meet on one memory (tests/integ/node_stress_test.c).
#
# Mixed jobs, FH_SHM=auto over tcp: 4 ranks in groups of 2 ({0,1} and
# {2,3} share their segments, the pairs talk through the network) and 6
# ranks in groups of 3.  Every word is hit at once by its owner (self),
# by its group peers (CPU atomics through the mapping) and by the other
# group (AMs the owner executes); data put over one route and flagged
# with an atomic or a put is read over another.  FH_TEST_SCALE scales the
# rounds; the default keeps the script well under a minute on 2 cores.
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_OFI_PROVIDER=tcp
FH_SHM=auto; export FH_SHM

FH_SHM_MAX_GROUP=2; export FH_SHM_MAX_GROUP
run_np node_stress_test 4 --group 2
FH_SHM_MAX_GROUP=3
run_np node_stress_test 6 --group 3 --rounds 12 --msg-rounds 4
unset FH_SHM_MAX_GROUP
finish
