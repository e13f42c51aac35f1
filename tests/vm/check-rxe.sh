#!/bin/bash
# tests/vm/check-rxe.sh -- run firehose's integration tests (tests/integ/*)
# under tools/fhrun inside the Soft-RoCE VM of tests/vm/run-vm.sh.  Meant for
# a `make check-rxe` target (run from the top build directory).
#
#   tests/vm/check-rxe.sh [--builddir DIR] [--np "2"] [--conduit ibv]
#                         [--fhrun-timeout SEC] [--strategies "S..."]
#                         [run-vm.sh options...] [-- TEST...]
#
# --strategies adds, for each FH_REG_STRATEGY value S, two VM tests on 2
# ranks: "rma_integrity-S" and "reg_security-S" (forged registration
# requests; F = R = 512k for firehose; not for pin-everything, which serves
# no registration requests), when those programs are built.
# TESTS default to every built tests/integ program of DEFAULT_TESTS below.
# Each test NAME with N ranks becomes one VM test "NAME-nN" that runs
#   FH_CONDUIT=<conduit> tools/fhrun -n N --timeout SEC tests/integ/NAME
# in the VM (cwd /fh = a copy of the needed build-tree files) and passes if
# it exits 0 and prints "PASS NAME" (the tests/integ convention).
#
# Device choice: the host's FH_* variables pass into the VM, e.g.
#   FH_IBV_DEVICE=rxe0 tests/vm/check-rxe.sh          (both ranks on rxe0)
# or one device per rank, FH_IBV_DEVICE=rxe0,rxe1 (rank r takes entry
# r mod 2; rxe0 is on veth0 10.0.0.1, rxe1 on veth1 10.0.0.2, so only then
# does the traffic cross the veth pair; GID index 1 is the IPv4 RoCE v2
# one).  Without FH_IBV_DEVICE, FH_IBV_DEVICE=rxe0 is set for --conduit ibv.
# Any run-vm.sh option (--timeout, --keep, --quiet, --env NAME=VALUE, ...)
# is passed on.  Exit status: that of run-vm.sh (0 = all passed).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEFAULT_TESTS="rma_integrity am_test atomic_test barrier_test bad_input threads_test"

builddir=.
np_list=2
conduit=ibv
fhrun_timeout=300
vm_opts=()
memory=4096     # a rank of rma_integrity peaks at ~1.2 GiB RSS (tcp provider)
tests=()
strategies=
while [ "$#" -gt 0 ]; do
    case "$1" in
        --builddir) builddir=$2; shift 2 ;;
        --strategies) strategies=$2; shift 2 ;;
        --np) np_list=$2; shift 2 ;;
        --conduit) conduit=$2; shift 2 ;;
        --fhrun-timeout) fhrun_timeout=$2; shift 2 ;;
        --memory) memory=$2; shift 2 ;;
        --timeout|--test-timeout|--workdir|--env|--bin|--file|--lib-path|--suite)
            vm_opts+=("$1" "$2"); shift 2 ;;
        --test) vm_opts+=("$1" "$2" "$3"); shift 3 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//; /^set -e/d'; exit 0 ;;
        --) shift; tests=("$@"); break ;;
        --*) vm_opts+=("$1"); shift ;;
        *) tests+=("$1"); shift ;;
    esac
done
builddir=$(cd "$builddir" && pwd)
[ -x "$builddir/tools/fhrun" ] || { echo "check-rxe: $builddir/tools/fhrun not built (run make)" >&2; exit 2; }

if [ "${#tests[@]}" -eq 0 ]; then
    for t in $DEFAULT_TESTS; do
        [ -x "$builddir/tests/integ/$t" ] && tests+=("$t")
    done
fi
[ "${#tests[@]}" -gt 0 ] || { echo "check-rxe: no integration test programs built in $builddir/tests/integ" >&2; exit 2; }

env_words="FH_SHM=off FH_CONDUIT=$conduit"   # the conduit, not the node path
if [ "$conduit" = ibv ] && [ -z "${FH_IBV_DEVICE:-}" ]; then
    env_words+=" FH_IBV_DEVICE=rxe0"
fi

args=(--bin "$builddir/tools/fhrun:tools/fhrun")
for t in "${tests[@]}"; do
    [ -x "$builddir/tests/integ/$t" ] || { echo "check-rxe: tests/integ/$t not built" >&2; exit 2; }
    args+=(--bin "$builddir/tests/integ/$t:tests/integ/$t")
    for n in $np_list; do
        args+=(--test "$t-n$n" "$env_words tools/fhrun -n $n --timeout $fhrun_timeout tests/integ/$t > /tmp/out.$t 2>&1; st=\$?; cat /tmp/out.$t; [ \$st -eq 0 ] && grep -q '^PASS $t' /tmp/out.$t")
    done
done
for s in $strategies; do
    for t in rma_integrity reg_security; do
        [ -x "$builddir/tests/integ/$t" ] || continue
        # pin-everything serves no registration requests to forge
        [ "$t" = reg_security ] && [ "$s" = pin-everything ] && continue
        args+=(--bin "$builddir/tests/integ/$t:tests/integ/$t")
        extra="FH_REG_STRATEGY=$s"
        [ "$t" = reg_security ] && extra+=" FH_FIREHOSE_M=512k FH_BUCKET_SIZE=64k FH_REGION_MAX=1m"
        args+=(--test "$t-$s" "$env_words $extra tools/fhrun -n 2 --timeout $fhrun_timeout tests/integ/$t > /tmp/out.$t 2>&1; st=\$?; cat /tmp/out.$t; [ \$st -eq 0 ] && grep -q '^PASS $t' /tmp/out.$t")
    done
done
exec "$HERE/run-vm.sh" --memory "$memory" "${args[@]}" "${vm_opts[@]}"
