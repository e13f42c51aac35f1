#!/bin/sh
# connect_storm.sh -- a job starts however many of its own connections reach
# a listener at once.  Over the ofi conduit's message endpoints (tcp) every
# thread path of every rank connects to every rank's service path at
# fh_init, and a listener holds at most 64 unproven connections (a bound
# against strangers, docs/security.md): with FH_MAX_THREADS=16 (17 paths)
# and FH_SHM=off, 4 ranks send 68 requests to each listener, 8 ranks 136.
# The listener refuses what exceeds its bound; the connector asks again
# after a backoff (conduits/ofi/ofi_cm.c), so the job must start and run
# barrier_test.  Before that fix every such job failed in fh_init ("cannot
# connect to rank N: Connection refused").
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_OFI_PROVIDER=tcp FH_OFI_ENDPOINT=msg FH_SHM=off FH_MAX_THREADS=16
for n in 4 8; do
    run_np barrier_test "$n"
done
finish
