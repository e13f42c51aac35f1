#!/bin/sh
# single_rank.sh -- a job of one rank runs the full runtime (include/
# firehose.h: "none = a single rank"): the integration programs that make
# sense alone (every transfer, AM and atomic then targets the rank itself)
# run with `fhrun -n 1` over every provider, and started directly, without
# any launcher (the singleton bootstrap).
. "$(dirname "$0")/common.sh"
need_fhrun
progs="rma_integrity am_test atomic_test barrier_test threads_test segments_test \
finalize_test bad_input api_misc_test atomic_threads_test"
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for t in $progs; do
        run_np "$t" 1
    done
done
export FH_OFI_PROVIDER=tcp
for t in $progs; do
    bin=$(fh_bin "$t") || { echo "SKIP: $t not built"; skipped=1; continue; }
    run_case "$t without a launcher" "$t" \
        env -u FH_BOOT_ADDR -u FH_JOB_KEY -u FH_RANK -u FH_NRANKS "$bin"
done
finish
