#!/bin/sh
# forge_test.sh -- runs forge_test (a hostile member of the job forging
# other members' messages; see forge_test.c) on 3 ranks for every provider
# in FH_TEST_PROVIDERS (tcp shm).  Besides the program's own checks, the
# victim's (rank 1's) log must name the reason of every kind of forgery:
# a header claiming another sender, a barrier arrival out of turn, an
# atomic reply for a handle (from the wrong rank or not waiting) and, over
# ofi, a runt, a message without the job's token, an oversized message
# (dropped by us, or truncated by the provider) and a replayed sequence
# number.
. "$(dirname "$0")/../integ/common.sh"
need_fhrun
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    before=$fail
    run_np forge_test 3
    [ "$fail" -eq "$before" ] || continue
    for reason in "header claims rank 2" "barrier arrival for round 1" "atomic reply for a handle" \
                  "runt message" "without this job's token" \
                  "longer than an AM packet|truncated by the provider" "duplicate message"; do
        if ! grep -E "^firehose\[1\]: dropped a packet .*($reason)" "$log" >/dev/null; then
            echo "FAIL forge_test FH_OFI_PROVIDER=$p: the victim's log has no drop for '$reason'"
            fail=$((fail + 1))
        fi
    done
    grep '^\[1\] DROPPED' "$log"
done
finish
