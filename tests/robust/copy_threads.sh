#!/bin/sh
# copy_threads.sh -- everything_map_test (FH_SEGMENT=everything) over the
# network on 3 ranks: transfers into a file mapping and into a region
# another rank holds travel by copies (firehose/reg/firehose_copy.c), from
# 4 threads of rank 0 at once.  In `make check-tsan` (the copy list, its
# sender and the reply handler under ThreadSanitizer); robust_memory.sh
# runs the same program in the plain and ASan builds.
. "$(dirname "$0")/../integ/common.sh"
need_fhrun
FH_TEST_BINDIR=${FH_TEST_BINDIR:-$(first_exe "${top_builddir:+$top_builddir/tests/robust/everything_map_test}" \
    ./tests/robust/everything_map_test "$here/everything_map_test" | sed 's|/everything_map_test$||')}
export FH_TEST_BINDIR FH_OFI_PROVIDER=${FH_OFI_PROVIDER:-tcp}
TIMEOUT=${FH_TEST_TIMEOUT:-120}
export FH_SEGMENT=everything FH_SHM=off FH_MAX_THREADS=8
run_np everything_map_test 3
finish
