#!/bin/sh
# memlock_test.sh -- the rank count is not capped by `ulimit -l` where
# nothing is pinned, and a firehose budget too small for the job is either
# worked around or named (issue 19, item 5).  Over tcp (FH_TEST_PROVIDERS
# overrides), FH_REG_STRATEGY=firehose, with seg_release_test as a small
# program whose puts and gets go through the cache:
#   1. under `ulimit -l 512` (in a subshell) 8 ranks start and pass: tcp
#      registration pins nothing, so RLIMIT_MEMLOCK must not size M (it
#      did: 3/4 of 512 KiB < 64 KiB x 7 peers, and fh_init aborted with
#      only "fh_init failed");
#   2. FH_FIREHOSE_M=64k on 3 ranks (32 KiB per peer, less than the 64 KiB
#      bucket) starts with smaller buckets, and rank 0 says so;
#   3. FH_FIREHOSE_M=4k on 3 ranks (less than a page per peer) cannot start:
#      the job fails, and its output names FH_FIREHOSE_M.
. "$(dirname "$0")/common.sh"
need_fhrun
bin=$(fh_bin seg_release_test) || { echo "SKIP: seg_release_test not built"; exit 77; }
small="--cycles 2 --size 1048576 --slots 2"
export FH_REG_STRATEGY=firehose
unset FH_FIREHOSE_M FH_BUCKET_SIZE
for p in ${FH_TEST_PROVIDERS:-tcp}; do
    export FH_OFI_PROVIDER=$p
    # shellcheck disable=SC2086
    run_case "8 ranks under ulimit -l 512 ($p)" seg_release_test \
        sh -c 'ulimit -l 512 && exec "$@"' sh \
        "$FHRUN" -n 8 --timeout "$TIMEOUT" "$bin" $small

    before=$fail
    # shellcheck disable=SC2086
    run_case "FH_FIREHOSE_M=64k on 3 ranks ($p)" seg_release_test \
        env FH_FIREHOSE_M=64k "$FHRUN" -n 3 --timeout "$TIMEOUT" "$bin" $small
    if [ "$fail" -eq "$before" ] && ! grep -q 'FH_BUCKET_SIZE lowered from 65536 to 32768' "$log"; then
        echo "FAIL FH_FIREHOSE_M=64k on 3 ranks: expected rank 0's note" \
             "'FH_BUCKET_SIZE lowered from 65536 to 32768', saw:"
        tail -n 5 "$log"
        fail=$((fail + 1))
    fi

    ran=$((ran + 1))
    log="$tmpd/run.log"
    # shellcheck disable=SC2086
    timeout -k 10 $((TIMEOUT + 30)) env FH_FIREHOSE_M=4k \
        "$FHRUN" -n 3 --timeout "$TIMEOUT" "$bin" $small >"$log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] &&
       grep -q '^firehose\[[0-9]*\]: fh_init: .*FH_FIREHOSE_M' "$log"; then
        echo "ok   FH_FIREHOSE_M=4k on 3 ranks ($p) fails naming the setting:"
        grep -m1 '^firehose\[[0-9]*\]: fh_init: ' "$log"
    else
        echo "FAIL FH_FIREHOSE_M=4k on 3 ranks ($p): expected a failed job (exit" \
             "status not 0, no timeout) whose output names FH_FIREHOSE_M in an" \
             "fh_init line; saw exit status $rc and:"
        tail -n 10 "$log"
        fail=$((fail + 1))
    fi
done
finish
