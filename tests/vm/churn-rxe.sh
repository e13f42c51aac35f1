#!/bin/bash
# tests/vm/churn-rxe.sh -- tests/integ/churn_test over the ibv conduit on
# Soft-RoCE (rxe, which really pins pages) inside the VM of run-vm.sh: the
# test of freed-and-reused memory that only a pinning NIC can fail.
#
#   tests/vm/churn-rxe.sh [--builddir DIR] [--cycles N] [--off-cycles N]
#                         [run-vm.sh options...]
#
# Two runs, 2 ranks, FH_REG_STRATEGY=firehose FH_SEGMENT=everything
# FH_BUCKET_SIZE=4k, both ranks on rxe0:
#   churn_monitor           FH_MEMMON=auto: 0 corrupted bytes, invalidations
#                           > 0 (the memory monitor and revocation work);
#   churn_negative_control  FH_MEMMON=off --expect-corruption: corrupted
#                           bytes > 0 -- with no monitor the cache keeps
#                           registrations of the OLD pages and rxe writes
#                           there, so the check must see the damage (proof
#                           that the first run tests something).
# Cycle counts are small (emulated guest, ~100x slower than the host; a
# registration costs milliseconds); the 10,000-cycle run is on the host
# (tests/integ/churn_test.sh).  Called by `make check-rxe`.  Exit status:
# that of run-vm.sh (0 = both passed).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
builddir=.
cycles=${FH_CHURN_RXE_CYCLES:-1000}
off_cycles=${FH_CHURN_RXE_OFF_CYCLES:-200}
vm_opts=()
while [ "$#" -gt 0 ]; do
    case "$1" in
        --builddir) builddir=$2; shift 2 ;;
        --cycles) cycles=$2; shift 2 ;;
        --off-cycles) off_cycles=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//; /^set -e/d'; exit 0 ;;
        *) vm_opts+=("$1"); shift ;;
    esac
done
builddir=$(cd "$builddir" && pwd)
for f in tools/fhrun tests/integ/churn_test; do
    [ -x "$builddir/$f" ] || { echo "churn-rxe: $builddir/$f not built (run make check-rxe or make $f)" >&2; exit 2; }
done

env_words="FH_SHM=off FH_CONDUIT=ibv FH_IBV_DEVICE=rxe0 FH_REG_STRATEGY=firehose FH_SEGMENT=everything FH_BUCKET_SIZE=4k FH_STATS=1"
run() {  # run NAME FH_MEMMON ARGS -> one run-vm.sh --test command line
    echo "$env_words FH_MEMMON=$2 tools/fhrun -n 2 --timeout 1500 tests/integ/churn_test $3 > /tmp/out.$1 2>&1; st=\$?; grep -E 'churn:|PASS|FAIL|stats total' /tmp/out.$1; tail -5 /tmp/out.$1; [ \$st -eq 0 ] && grep -q '^PASS churn_test' /tmp/out.$1"
}
exec "$HERE/run-vm.sh" --memory 2048 --timeout 1800 \
    --bin "$builddir/tools/fhrun:tools/fhrun" \
    --bin "$builddir/tests/integ/churn_test:tests/integ/churn_test" \
    --test churn_monitor "$(run churn_monitor auto "--cycles $cycles --monitor")" \
    --test churn_negative_control "$(run churn_negative_control off "--cycles $off_cycles --expect-corruption")" \
    "${vm_opts[@]}"
