#!/bin/sh
# memmon_overflow_test.sh -- runs memmon_overflow_test (more unmap events
# than the memory monitor's ring holds: the runtime drops every
# registration, also those of memory never freed) on 2 ranks over every
# provider, with FH_SEGMENT=everything and FH_BUCKET_SIZE=4k (rank 1's
# ordinary pages are registered for rank 0's puts).  Skips where the
# monitor (userfaultfd) is unavailable.
. "$(dirname "$0")/common.sh"
need_fhrun
probe=$(fh_bin config_probe) || { echo "SKIP: config_probe not built"; exit 77; }
if ! env -u FH_BOOT_ADDR FH_MEMMON=uffd FH_OFI_PROVIDER=tcp "$probe" >/dev/null 2>&1; then
    echo "SKIP: no memory monitor (userfaultfd) here"
    exit 77
fi
export FH_REG_STRATEGY=firehose FH_SEGMENT=everything FH_BUCKET_SIZE=4k FH_MEMMON=uffd
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    run_np memmon_overflow_test 2
done
finish
