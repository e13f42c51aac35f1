#!/bin/sh
# fhsim-check.sh -- short fixed-seed runs of the registration cache simulator
# for `make check` (< 30 s): every access pattern (random, stencil, hotspot;
# neighbors, master-worker, skewed, phase), under static budgets and under
# adaptive ones (--budget adaptive), at a comfortable budget and
# at a tight one (F = 1..2 frames, so victims, evictions and the budget queue
# are exercised), with reordered replies and failing registrations, and with
# memory freed and reused under the caches (--free-rate: invalidation and
# revocation); then each deliberately injected bug, which fhsim must detect
# (exit 1) with the detector meant for it (its FAIL line must match; any
# other failure is a failure of this script: a bug caught by accident says
# nothing about the detector that should have caught it).  The adaptive
# victim FIFO (--victim adaptive) runs beside them, with its bug.
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
    elif test -n "${detector:-}" &&
         ! echo "$out" | grep '^fhsim: FAIL' | head -1 | grep -Eq "$detector"; then
        echo "FAIL: fhsim $* was caught, but not by the detector for its bug:"
        echo "      expected a FAIL line matching: $detector"
        echo "      saw: $(echo "$out" | grep '^fhsim: FAIL' | head -1)"
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
# The hot-peer patterns (fhsim.h), each at its defaults and tight (F = 1
# frame, working set between F and M/k, freed memory, reordered replies),
# and the oracle against its hand-computed case.
run 0 --oracle-selftest
for p in neighbors master-worker skewed phase; do
    run 0 --nodes 16 --steps 20000 --seed 8 --pattern $p --period 3000
    run 0 --nodes 7 --steps 20000 --seed 9 --pattern $p --k 3 --period 2000 --M $((6 * 65536)) \
        --ws $((2 * 65536)) --window 8 --rate 2 --reorder-replies --pin-fail 20 --free-rate 50
done
for p in random stencil hotspot; do
    run 0 --nodes 8 --steps 20000 --seed 5 --pattern $p --free-rate 50 --local-rate 100
    run 0 --nodes 5 --steps 20000 --seed 6 --pattern $p --M $((4 * K)) --window 16 --rate 3 \
        --reorder-replies --pin-fail 20 --free-rate 100
done
# The adaptive victim FIFO (fhc_ghost.h): MAXVICTIM moves between
# --maxvictim and 4 x it under local pins, failing pins, freed memory.
for p in random hotspot master-worker; do
    run 0 --nodes 5 --steps 20000 --seed 3 --pattern $p --M $((4 * K)) --window 16 --rate 3 \
        --reorder-replies --pin-fail 20 --free-rate 50 --local-rate 100 --victim adaptive
done
# Adaptive budgets (docs/firehose-cache.md, "Budgets"): every pattern at a
# tight pool shared by few ranks (grants, deferred moves, RECLAIMs, decay),
# with reordered replies, failing registrations and freed memory, and at
# the defaults.
for p in random stencil hotspot neighbors master-worker skewed phase; do
    run 0 --budget adaptive --nodes 5 --steps 20000 --seed 3 --pattern $p --M $((4 * K)) \
        --window 16 --rate 3 --reorder-replies --pin-fail 20 --free-rate 50 --k 3
    run 0 --budget adaptive --nodes 16 --steps 20000 --seed 1 --pattern $p --period 3000
done
# Each injected bug must be caught, by its own detector (tests/sim/fhsim_bugs.c,
# --inject-bug): the first FAIL line must match the pattern.
rdma='RDMA on \[[^]]*\) but its registration is deregistered'
for b in no-f-check evict-held forget-release stale-install skip-release; do
    case $b in
    no-f-check)     detector='I2: held [0-9]+ \+ reserved [0-9]+ > F ' ;;
    evict-held)     detector=$rdma ;;
    forget-release) detector='failed: -11$' ;;           # FHC_ERR_LIMIT
    stale-install)  detector="target does not record a hold|$rdma|failed: -1\$" ;;
    skip-release)   detector='deadlock: [0-9]+ ops in flight, none completed' ;;
    esac
    run 1 --nodes 4 --steps 20000 --seed 1 --pattern hotspot --M $((3 * K)) \
        --window 8 --rate 2 --inject-bug $b
done
for b in early-ack ignore-revoke; do
    seed=1
    case $b in
    # seed 7: since chunks merge the firehoses they alone use (absorb,
    # fhc_initiator_step.c), seed 1 no longer meets the early ack in 20000 steps
    early-ack)      detector=$rdma; seed=7 ;;
    # The initiator keeps the firehose the target revoked and later releases
    # it; the target, which dropped it on the ack, refuses the release
    # (FHC_ERR_INVALID) -- or the stale firehose is used for RDMA first.
    ignore-revoke)  detector="failed: -1\$|$rdma" ;;
    esac
    run 1 --nodes 4 --steps 20000 --seed $seed --pattern hotspot --M $((3 * K)) \
        --window 8 --rate 2 --free-rate 100 --inject-bug $b
done
# MAXVICTIM grown past its bound: the cache's own check (or the sim's
# pinned-bytes check, should a pin come first).
detector='MAXVICTIM now [0-9]+ outside|I1: rank [0-9]+ pins'
run 1 --nodes 4 --steps 20000 --seed 1 --pattern hotspot --M $((3 * K)) --window 8 --rate 2 \
    --local-rate 100 --victim adaptive --inject-bug victim-past-max
# The adaptive policy's own mistakes: a raise past the pool (A1), a RECLAIM
# answered with firehoses an RDMA still uses (the target drops the hold:
# the RDMA check, or the real release later refused), a reclaim below the
# floor (A2).
for b in grant-past-M reclaim-busy no-floor; do
    case $b in
    grant-past-M)   detector='A1: commitments [0-9]+ > M ' ;;
    reclaim-busy)   detector="target does not record a hold|$rdma|failed: -1\$" ;;
    no-floor)       detector="A2: rank [0-9]+'s budget [0-9]+ \(announced [0-9]+\) below floor" ;;
    esac
    run 1 --budget adaptive --nodes 4 --steps 20000 --seed 1 --pattern hotspot \
        --M $((3 * K)) --window 8 --rate 2 --inject-bug $b
done
detector=
test "$fails" = 0
