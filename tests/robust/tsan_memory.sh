#!/bin/sh
# tsan_memory.sh -- the memory programs whose threads race the runtime's
# own, for `make check-tsan` (robust_memory.sh runs them in the plain and
# ASan builds):
#   everything_map_test on 3 ranks over the network (FH_SEGMENT=everything):
#     transfers into a file mapping and into a region another rank holds
#     travel by copies (firehose/reg/firehose_copy.c), from 4 threads of
#     rank 0 at once -- the copy list, its sender and the reply handler;
#   seg_churn_test: segment tables and hole lists replaced and freed while
#     a worker thread per rank reads them (firehose/segment.c
#     "Reclaiming").
. "$(dirname "$0")/../integ/common.sh"
need_fhrun
FH_TEST_BINDIR=${FH_TEST_BINDIR:-$(first_exe "${top_builddir:+$top_builddir/tests/robust/everything_map_test}" \
    ./tests/robust/everything_map_test "$here/everything_map_test" | sed 's|/everything_map_test$||')}
export FH_TEST_BINDIR FH_OFI_PROVIDER=${FH_OFI_PROVIDER:-tcp}
TIMEOUT=${FH_TEST_TIMEOUT:-120}
export FH_SHM=off FH_MAX_THREADS=8
run_np seg_churn_test 2
export FH_SEGMENT=everything
run_np everything_map_test 3
finish
