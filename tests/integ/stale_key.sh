#!/bin/sh
# stale_key.sh -- runs stale_key (a key a peer obtained for a segment, and
# never gave back, must not reach the target's memory once the segment is
# destroyed -- not even memory mapped again at the same address; see
# stale_key.c) on 2 ranks for FH_REG_STRATEGY rendezvous, rendezvous-cache
# and pin-everything (FH_TEST_KEY_STRATEGIES) and every provider in
# FH_TEST_PROVIDERS (net shm).
#
# A run prints "PASS stale_key", or "SKIP stale_key" when its provider
# cannot refuse a stale key at all (stale_key's probe: RMA with a key the
# conduit itself deregistered still works, as with a shared-memory
# provider's cross-process copies).  A skipped run is reported as SKIP
# with the program's reason, never as ok; the script exits 77 if every run
# was skipped, 1 if any failed.
. "$(dirname "$0")/common.sh"
need_fhrun
# stale_key sends each access that must be refused on a path of its own
# (a refused RDMA ends its connection): 1 + 4 paths.
export FH_PATHS=independent FH_MAX_THREADS=4
bin=$(fh_bin stale_key) || { echo "SKIP: stale_key not built"; exit 77; }
nskip=0
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for s in ${FH_TEST_KEY_STRATEGIES:-rendezvous rendezvous-cache pin-everything}; do
        export FH_REG_STRATEGY=$s
        desc="stale_key -n 2 FH_OFI_PROVIDER=$p FH_REG_STRATEGY=$s"
        log="$tmpd/run.log"
        ran=$((ran + 1))
        t0=$(date +%s)
        timeout -k 10 $((TIMEOUT + 30)) "$FHRUN" -n 2 --timeout "$TIMEOUT" "$bin" \
            >"$log" 2>&1
        rc=$?
        t1=$(date +%s)
        if [ $rc -eq 0 ] && grep -q '^PASS stale_key' "$log"; then
            echo "ok   $desc ($((t1 - t0)) s)"
            grep -E '^\[[0-9]+\] (NOTE|stale key|rank 0|[0-9]+ late)' "$log" | head -5
        elif [ $rc -eq 0 ] && grep -q '^SKIP stale_key' "$log"; then
            nskip=$((nskip + 1))
            echo "SKIP $desc ($((t1 - t0)) s):"
            grep -E '^\[[0-9]+\] (SKIP|probe)' "$log" | head -5
        else
            fail=$((fail + 1))
            echo "FAIL $desc: exit status $rc ($((t1 - t0)) s); command:" \
                 "$FHRUN -n 2 --timeout $TIMEOUT $bin"
            echo "---- last 40 lines of output ----"
            tail -n 40 "$log"
            echo "---------------------------------"
        fi
    done
done
if [ "$fail" -eq 0 ] && [ "$ran" -gt 0 ] && [ "$nskip" -eq "$ran" ]; then
    echo "all $ran runs skipped"
    exit 77
fi
if [ "$nskip" -ne 0 ]; then
    echo "$nskip of $ran runs SKIPPED (their provider cannot refuse stale keys)"
    ran=$((ran - nskip))
fi
finish
