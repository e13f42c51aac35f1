#!/bin/sh
# fhsim-check.sh -- short fixed-seed runs of the registration cache simulator
# for `make check` (< 30 s): every access pattern at a comfortable budget and
# at a tight one (F = 1..2 frames, so victims, evictions and the budget queue
# are exercised), with reordered replies and failing registrations, and with
# memory freed and reused under the caches (--free-rate: invalidation and
# revocation); then each deliberately injected bug, which fhsim must detect
# (exit 1).
# FHSIM names the binary (default: $top_builddir/tests/sim/fhsim).
FHSIM=${FHSIM:-${top_builddir:-.}/tests/sim/fhsim}
if ! test -x "$FHSIM"; then
    echo "fhsim-check: $FHSIM not built"
    exit 99
fi
fails=0
run() {      # expect-status args...
    want=$1; shift
    out=$("$FHSIM" --quiet "$@" 2>&1)
    got=$?
    if test "$got" != "$want"; then
        echo "FAIL: fhsim $* exited $got, expected $want"
        echo "$out" | head -5
        fails=$((fails + 1))
    else
        echo "ok: fhsim $* -> $got: $(echo "$out" | grep -E 'PASS|FAIL' | head -1 | cut -c1-150)"
    fi
}
K=131072                     # R = 64 KiB with the default 4 KiB buckets
for p in random stencil hotspot; do
    run 0 --nodes 16 --steps 30000 --seed 1 --pattern $p
    run 0 --nodes 3 --steps 20000 --seed 2 --pattern $p --M $((2 * 65536)) --window 8 --rate 2
    run 0 --nodes 5 --steps 20000 --seed 3 --pattern $p --M $((4 * K)) --window 16 --rate 3 \
        --reorder-replies --pin-fail 20
done
run 0 --nodes 64 --steps 20000 --seed 4 --pattern hotspot --bucket 8192 --maxvictim 0
for p in random stencil hotspot; do
    run 0 --nodes 8 --steps 20000 --seed 5 --pattern $p --free-rate 50 --local-rate 100
    run 0 --nodes 5 --steps 20000 --seed 6 --pattern $p --M $((4 * K)) --window 16 --rate 3 \
        --reorder-replies --pin-fail 20 --free-rate 100
done
# Each injected bug must be caught.
for b in no-f-check evict-held forget-release stale-install skip-release; do
    run 1 --nodes 4 --steps 20000 --seed 1 --pattern hotspot --M $((3 * K)) \
        --window 8 --rate 2 --inject-bug $b
done
for b in early-ack ignore-revoke; do
    run 1 --nodes 4 --steps 20000 --seed 1 --pattern hotspot --M $((3 * K)) \
        --window 8 --rate 2 --free-rate 100 --inject-bug $b
done
test "$fails" = 0
