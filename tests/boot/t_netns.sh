#!/bin/bash
# Two ranks in two network namespaces, bootstrapped over TCP through veth
# links to the launcher's namespace (--prefix-cmd "ip netns exec ...%r").
# Needs root and ip-netns; skipped (exit 77) otherwise.
. "$(dirname "$0")/lib.sh"
NS=fhbt$$
if [ "$(id -u)" != 0 ] || ! ip netns add ${NS}_0 2>/dev/null; then
    echo "SKIP [$NAME]: needs root and ip netns"; exit 77
fi
ip netns add ${NS}_1
cleanup_ns() {
    ip netns del ${NS}_0 2>/dev/null; ip netns del ${NS}_1 2>/dev/null
    ip link del fv${$}a0 2>/dev/null; ip link del fv${$}a1 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup_ns EXIT
# 10.231.<r>.1 on the host side, 10.231.<r>.2 in namespace r.
for r in 0 1; do
    ip link add fv${$}a$r type veth peer name fv${$}b$r
    ip link set fv${$}b$r netns ${NS}_$r
    ip addr add 10.231.$r.1/24 dev fv${$}a$r
    ip link set fv${$}a$r up
    ip -n ${NS}_$r addr add 10.231.$r.2/24 dev fv${$}b$r
    ip -n ${NS}_$r link set fv${$}b$r up
    ip -n ${NS}_$r link set lo up
    ip -n ${NS}_$r route add default via 10.231.$r.1
done
LAST=ns; run ns "$FHRUN" -n 2 --tag-output --listen tcp:10.231.0.1:0 --prefix-cmd "ip netns exec ${NS}_%r" "$BOOT_TEST"
expect_rc 0 "2 ranks in 2 network namespaces"
expect_count "$TMP/ns.out" "^\[[01]\] boot_test: rank [01]: ok$" 2 "both ranks ok"
# Check the ranks really ran in their namespaces.
LAST=ip; run ip "$FHRUN" -n 2 --tag-output --prefix-cmd "ip netns exec ${NS}_%r" ip -4 -o addr show
expect_grep "$TMP/ip.out" "^\[0\] .*inet 10\.231\.0\.2/" "rank 0 in namespace 0"
expect_grep "$TMP/ip.out" "^\[1\] .*inet 10\.231\.1\.2/" "rank 1 in namespace 1"
# Dead rank across namespaces.
LAST=nsd; run nsd "$FHRUN" -n 2 --listen tcp:10.231.0.1:0 --prefix-cmd "ip netns exec ${NS}_%r" "$BOOT_TEST" die 1
expect_rc 137 "dead rank across namespaces"
expect_grep "$TMP/nsd.err" "^firehose\[0\]: rank 1 \(pid [0-9]+\) died: killed by signal 9 \(Killed\); aborting$" "survivor names rank 1"
no_orphans "netns"
finish
