#!/bin/sh
# netns.sh -- two ranks in two network namespaces joined by a veth pair
# (10.77.0.1/24 <-> 10.77.0.2/24, lo up in each), started by
# fhrun --prefix-cmd "ip netns exec <ns>%r", FH_OFI_PROVIDER=tcp with an
# empty FH_OFI_DOMAIN (the provider picks the interface); then again with
# FI_TCP_IFACE naming the veth.  Skips (77) unless root with `ip netns`.
. "$(dirname "$0")/common.sh"
need_fhrun
[ "$(id -u)" -eq 0 ] || { echo "SKIP: not root"; exit 77; }
command -v ip >/dev/null 2>&1 || { echo "SKIP: no ip"; exit 77; }
ns="fh$$ns"                    # namespaces fh<pid>ns0 and fh<pid>ns1
if ! ip netns add "${ns}0" 2>"$tmpd/e"; then
    echo "SKIP: ip netns add failed: $(cat "$tmpd/e")"; exit 77
fi
cleanup() {
    ip netns del "${ns}0" 2>/dev/null
    ip netns del "${ns}1" 2>/dev/null
    ip link del "fhv$$a" 2>/dev/null
    rm -rf "$tmpd"
}
trap cleanup EXIT
trap 'cleanup; exit 1' INT TERM HUP
set -e
ip netns add "${ns}1"
ip link add "fhv$$a" type veth peer name "fhv$$b"
ip link set "fhv$$a" netns "${ns}0"
ip link set "fhv$$b" netns "${ns}1"
# Same interface name on both sides, so one FI_TCP_IFACE fits both ranks.
ip -n "${ns}0" link set "fhv$$a" name fhveth
ip -n "${ns}1" link set "fhv$$b" name fhveth
ip -n "${ns}0" addr add 10.77.0.1/24 dev fhveth
ip -n "${ns}1" addr add 10.77.0.2/24 dev fhveth
for i in 0 1; do
    ip -n "$ns$i" link set lo up
    ip -n "$ns$i" link set fhveth up
done
set +e
if command -v ping >/dev/null 2>&1; then
    ip netns exec "${ns}0" ping -c 1 -W 2 10.77.0.2 >/dev/null 2>&1 ||
        echo "NOTE: ping 10.77.0.1 -> 10.77.0.2 failed"
fi

export FH_OFI_PROVIDER=tcp FH_OFI_DOMAIN=
# The test harness pins tcp to loopback (FI_TCP_IFACE=lo) for every other
# test; here each rank's loopback is private to its namespace, so it must go.
unset FI_TCP_IFACE FI_SOCKETS_IFACE
TIMEOUT=${FH_TEST_TIMEOUT:-120}
for iface in "" fhveth; do
    for prog in rma_integrity am_test; do
        bin=$(fh_bin $prog) || { echo "SKIP: $prog not built"; continue; }
        case $prog in rma_integrity) args="--iters 3";; *) args="--msgs 300";; esac
        if [ -n "$iface" ]; then
            run_case "$prog -n 2 in 2 netns, FI_TCP_IFACE=$iface" "$prog" \
                env FI_TCP_IFACE=$iface "$FHRUN" -n 2 --timeout "$TIMEOUT" \
                --prefix-cmd "ip netns exec $ns%r" "$bin" $args
        else
            run_case "$prog -n 2 in 2 netns, provider picks the interface" \
                "$prog" "$FHRUN" -n 2 --timeout "$TIMEOUT" \
                --prefix-cmd "ip netns exec $ns%r" "$bin" $args
        fi
    done
done
finish
