#!/bin/sh
# connect_storm.sh -- a job starts however many of its own connections reach
# a listener at once.  On main (332cc26), over the ofi conduit's message
# endpoints (tcp), every thread path of every rank connected to every
# rank's service path in fh_init, and a listener holds at most 64 unproven
# connections (a bound against strangers, docs/security.md): with
# FH_MAX_THREADS=16 (17 paths) and FH_SHM=off, 4 ranks sent 68 requests
# to each listener, 8 ranks 136, and every such job failed in fh_init
# ("cannot connect to rank N: Connection refused").  Now a refused
# connector asks again after a backoff, and thread paths are made when a
# thread first calls in (conduits/ofi/ofi_cm.c), so these jobs must start
# and run barrier_test (single-threaded: service paths only).  The
# backoff alone is what lets jobs of more than 64 ranks start (72 ranks on
# 2 cores: 15 s; too heavy for make check).
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_OFI_PROVIDER=tcp FH_OFI_ENDPOINT=msg FH_SHM=off FH_MAX_THREADS=16
for n in 4 8; do
    run_np barrier_test "$n"
done
finish
