#!/bin/sh
# forge_test.sh -- runs forge_test (a hostile member of the job forging
# other members' messages; see forge_test.c) on 3 ranks for every provider
# in FH_TEST_PROVIDERS (net shm).  Besides the program's own checks, the
# victim's (rank 1's) log must name the reason of every kind of forgery:
# a header claiming another sender, a barrier arrival out of turn or
# more than one barrier ahead, an
# atomic reply for a handle (from the wrong rank or not waiting) and, over
# ofi, a runt, a message without the job's token, an oversized message
# (dropped by us, or truncated by the provider) and a replayed sequence
# number.
#
# The takeover phase (rank 2 tries to become rank 1 towards rank 0 over
# tcp, forge_takeover.c) needs tests/security/.libs/libsec_shim.so
# preloaded (sec_shim.c: it lets rank 2 announce rank 1's ports, and
# records the connection requests rank 2 sends, from which it takes the job
# id and a proof to replay); the shim does nothing until a program asks.
. "$(dirname "$0")/../integ/common.sh"
need_fhrun
shim=
for c in "${top_builddir:+$top_builddir/tests/security/.libs/libsec_shim.so}" \
         ./tests/security/.libs/libsec_shim.so "$here/.libs/libsec_shim.so"; do
    [ -n "$c" ] && [ -f "$c" ] && { shim=$(cd "$(dirname "$c")" && pwd)/libsec_shim.so; break; }
done
[ -n "$shim" ] || { echo "SKIP: tests/security/.libs/libsec_shim.so not built"; exit 77; }
LD_PRELOAD=$shim SEC_SHIM_CAPTURE=$tmpd/cap
# A preloaded shim comes before an ASan runtime in the library list.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
export LD_PRELOAD SEC_SHIM_CAPTURE ASAN_OPTIONS
# The oversized message goes out on a second thread path: two thread paths
# whatever the cores per rank (the default is cores / ranks on the host).
FH_MAX_THREADS=${FH_MAX_THREADS:-2}
export FH_MAX_THREADS
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    before=$fail
    run_np forge_test 3
    [ "$fail" -eq "$before" ] || continue
    for reason in "header claims rank 2" "barrier arrival for round 1" \
                  "barrier arrival for epoch [0-9]+, more than one barrier ahead" \
                  "atomic reply for a handle" \
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
