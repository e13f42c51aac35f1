#!/bin/sh
# tests/vm/two-devices.sh -- guest side of the check-rxe test "two_devices":
# the integration programs with each rank on its own rxe device, so that
# every byte crosses the VM's veth pair (rxe0 on veth0 10.0.0.1, rxe1 on
# veth1 10.0.0.2; with both ranks on one device rxe loops the traffic back
# inside itself and the veth sees none).  Runs rma_integrity, am_test and
# atomic_test on 2 ranks with FH_IBV_DEVICE=DEVICES (default "rxe0,rxe1":
# rank r takes entry r mod 2) and FH_VERBOSE=1, then checks that each
# passed, that rank 0 opened rxe0 and rank 1 rxe1 (the conduit's
# "ibv: device NAME port" line), and that each veth end sent at least
# MIN_BYTES (default 1 MiB) while they ran (its tx_bytes counter).
# "two-devices.sh rxe0" (both ranks on rxe0) must fail that check.
#   usage (in /fh): tests/vm/two-devices.sh [DEVICES [MIN_BYTES]]
devs=${1:-rxe0,rxe1}
min=${2:-1048576}
tx() { cat "/sys/class/net/$1/statistics/tx_bytes"; }
a0=$(tx veth0) a1=$(tx veth1)
fail=0
for t in "rma_integrity" "am_test --flood 1000" "atomic_test --nb 64"; do
    name=${t%% *}
    FH_SHM=off FH_CONDUIT=ibv FH_IBV_DEVICE=$devs FH_VERBOSE=1 \
        tools/fhrun -n 2 --timeout 200 tests/integ/$t > tdlog 2>&1
    st=$?
    grep -v ": config FH_" tdlog | grep "ibv: device\|PASS\|FAIL\|rror" | tail -n 12
    if [ $st -ne 0 ] || ! grep -q "^PASS $name" tdlog; then
        echo "FAIL two_devices: $name exited $st"; fail=1
    fi
    for r in 0 1; do
        grep -q "^firehose\[$r\]: ibv: device rxe$r port" tdlog ||
            { echo "FAIL two_devices: $name: rank $r did not open rxe$r"; fail=1; }
    done
done
b0=$(tx veth0) b1=$(tx veth1)
echo "two_devices: veth0 sent $((b0 - a0)) bytes, veth1 $((b1 - a1))"
if [ $((b0 - a0)) -lt "$min" ] || [ $((b1 - a1)) -lt "$min" ]; then
    echo "FAIL two_devices: less than $min bytes crossed the veth pair each way"
    fail=1
fi
[ $fail -eq 0 ] && echo "PASS two_devices"
exit $fail
