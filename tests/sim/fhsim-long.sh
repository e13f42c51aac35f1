#!/bin/sh
# fhsim-long.sh -- randomized soak of the registration cache simulator: random
# seeds, rank counts, patterns, budgets and victim FIFO modes until
# FHSIM_LONG_SECONDS (default 600) have passed, then one 1024-rank run of 1M
# steps.  Prints the command
# line of the first failure (re-run it to reproduce: everything is derived
# from --seed).  Not part of `make check`.
FHSIM=${FHSIM:-${top_builddir:-.}/tests/sim/fhsim}
SECONDS_MAX=${FHSIM_LONG_SECONDS:-600}
test -x "$FHSIM" || { echo "fhsim-long: $FHSIM not built"; exit 99; }
start=$(date +%s)
runs=0
seed=${FHSIM_LONG_SEED:-$(date +%s)}
while test $(($(date +%s) - start)) -lt "$SECONDS_MAX"; do
    seed=$((seed + 1))
    r=$((seed * 1103515245 + 12345))
    nodes=$((2 + (r / 7) % 62))
    frames=$((1 + (r / 11) % 6))
    window=$((1 + (r / 13) % 24))
    rate=$((1 + (r / 17) % 4))
    set -- random stencil hotspot
    shift $(((r / 19) % 3)); pattern=$1
    extra=""
    test $(((r / 23) % 2)) = 1 && extra="$extra --reorder-replies"
    test $(((r / 29) % 3)) = 1 && extra="$extra --pin-fail 30"
    test $(((r / 31) % 4)) = 1 && extra="$extra --maxvictim 0"
    test $(((r / 37) % 2)) = 1 && extra="$extra --victim adaptive --local-rate 100"
    args="--nodes $nodes --steps 100000 --seed $seed --pattern $pattern \
--M $(((nodes - 1) * frames * 65536)) --window $window --rate $rate$extra"
    # shellcheck disable=SC2086
    if ! "$FHSIM" --quiet $args > /dev/null 2>fhsim-long.err; then
        echo "FAIL: fhsim $args"
        head -20 fhsim-long.err
        exit 1
    fi
    runs=$((runs + 1))
done
echo "fhsim-long: $runs randomized runs passed"
"$FHSIM" --nodes 1024 --steps 1000000 --seed "$seed" --quiet || exit 1
rm -f fhsim-long.err
