#!/bin/bash
# providers.sh -- which libfabric provider carries the ofi conduit best
# (issue 30, "the fastest provider by measurement").  Every provider of
# this libfabric that can carry our RMA and AM traffic to another host is
# run under the conduit itself, in interleaved rounds, between two network
# namespaces joined by a veth pair (a second host as the kernel sees it:
# its own stack, no loopback shortcut), or on loopback when that cannot be
# set up (not root, no `ip netns`: said in the output):
#   tcp      msg endpoints, the conduit's authenticated connections
#   net      msg endpoints, the same connections over libfabric's net (the
#            default, FH_OFI_PROVIDER=net,tcp)
#   sockets  msg endpoints, the same connections over the sockets provider
#   tcp;ofi_rxm, net rdm: reliable-datagram endpoints whose sender is the
#            address it claims (refused unless FH_OFI_TRUST_FABRIC=1,
#            docs/security.md: measured for the record, never a default)
#   udp;ofi_rxd: tried; listed as failing when the conduit cannot run on it
# and the same loops on raw libfabric (`fhbench raw`, tcp;ofi_rxm).  Per
# provider and round: 8 B blocking put and get (median us), put flood
# bandwidth at 64 KiB and 1 MiB (MB/s), all from `fhbench latency`; for
# the conduit's sides also the AM short round trip (`fhbench node`, which
# runs over the network under FH_SHM=off), the 2-rank fh_barrier over the
# same pair (`fhbench barrier`), and an 8-rank fh_barrier on this machine's
# 2 cores (all ranks in one namespace, over loopback).
# Prints one table of medians over rounds [lowest-highest].
#
# Usage: bench/providers.sh [--rounds R] [--out DIR] [--only "W ..."]
#   (from a build dir; --only keeps the sides whose label's first word is
#   one of the Ws, e.g. --only "tcp net")
set -u
rounds=3
out=""
only=""
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds R] [--out DIR] [--only \"W ...\"]" >&2; exit 2 ;;
    esac
done
bld=$(pwd)
fhrun=$bld/tools/fhrun
fhbench=$bld/bench/fhbench
[ -x "$fhrun" ] && [ -x "$fhbench" ] || { echo "run from a build directory (tools/fhrun, bench/fhbench)" >&2; exit 2; }
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/fhprov.XXXXXX")}
mkdir -p "$out"

# Two namespaces and a veth pair when we may; else loopback.
ns="fhp$$ns"
where="loopback (not root or no ip netns: no second host)"
prefix=()
prefix8=()
cleanup() { ip netns del "${ns}0" 2>/dev/null; ip netns del "${ns}1" 2>/dev/null; }
if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && ip netns add "${ns}0" 2>/dev/null; then
    trap cleanup EXIT
    ip netns add "${ns}1" && ip link add "fhp$$a" type veth peer name "fhp$$b" &&
    ip link set "fhp$$a" netns "${ns}0" && ip link set "fhp$$b" netns "${ns}1" &&
    ip -n "${ns}0" link set "fhp$$a" name fhveth && ip -n "${ns}1" link set "fhp$$b" name fhveth &&
    ip -n "${ns}0" addr add 10.78.0.1/24 dev fhveth && ip -n "${ns}1" addr add 10.78.0.2/24 dev fhveth &&
    for i in 0 1; do ip -n "$ns$i" link set lo up && ip -n "$ns$i" link set fhveth up || exit 1; done ||
        { echo "cannot set up the namespaces" >&2; exit 1; }
    prefix=(--prefix-cmd "ip netns exec $ns%r")
    prefix8=(--prefix-cmd "ip netns exec ${ns}0")
    where="two network namespaces joined by a veth pair (10.78.0.1 <-> 10.78.0.2)"
    unset FI_TCP_IFACE FI_SOCKETS_IFACE
    export FI_TCP_IFACE=fhveth FI_SOCKETS_IFACE=fhveth
fi

# label|environment (word-split)|fhbench test
sides=(
    "tcp msg|FH_OFI_PROVIDER=tcp|latency"
    "net msg (default)|FH_OFI_PROVIDER=net|latency"
    "sockets msg|FH_OFI_PROVIDER=sockets|latency"
    "tcp;ofi_rxm rdm (trust)|FH_OFI_PROVIDER=tcp FH_OFI_ENDPOINT=rdm FH_OFI_TRUST_FABRIC=1|latency"
    "net rdm (trust)|FH_OFI_PROVIDER=net FH_OFI_ENDPOINT=rdm FH_OFI_TRUST_FABRIC=1|latency"
    "udp;ofi_rxd rdm (trust)|FH_OFI_PROVIDER=udp FH_OFI_ENDPOINT=rdm FH_OFI_TRUST_FABRIC=1|latency"
    "raw libfabric tcp;ofi_rxm|FH_OFI_PROVIDER=tcp|raw"
)
if [ -n "$only" ]; then
    kept=()
    for side in "${sides[@]}"; do
        case " $only " in *" ${side%% *} "*) kept+=("$side") ;; esac
    done
    sides=("${kept[@]}")
fi
load0=$(cut -d' ' -f1-3 /proc/loadavg)
git=$(cd "$(dirname "$0")" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
for ((r = 1; r <= rounds; r++)); do
    for i in "${!sides[@]}"; do
        IFS='|' read -r label envs test <<< "${sides[$i]}"
        log="$out/side$i.round$r.txt"
        # shellcheck disable=SC2086
        env FH_SHM=off $envs timeout 90 "$fhrun" -n 2 --timeout 80 "${prefix[@]}" \
            "$fhbench" "$test" --quick --max-size 1048576 >"$log" 2>&1 || echo "FAILED (exit $?)" >>"$log"
        [ "$test" = latency ] || continue
        # shellcheck disable=SC2086
        env FH_SHM=off $envs timeout 60 "$fhrun" -n 2 --timeout 50 "${prefix[@]}" \
            "$fhbench" node --quick >>"$log" 2>&1 || echo "FAILED node (exit $?)" >>"$log"
        # shellcheck disable=SC2086
        env FH_SHM=off $envs timeout 60 "$fhrun" -n 2 --timeout 50 "${prefix[@]}" \
            "$fhbench" barrier --quick >>"$log" 2>&1 || echo "FAILED barrier (exit $?)" >>"$log"
        # shellcheck disable=SC2086
        env -u FI_TCP_IFACE -u FI_SOCKETS_IFACE FH_SHM=off $envs timeout 90 "$fhrun" -n 8 --timeout 80 \
            "${prefix8[@]}" "$fhbench" barrier --quick >>"$log" 2>&1 || echo "FAILED barrier8 (exit $?)" >>"$log"
    done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

# median [lo-hi] over the rounds of a value read by an awk program
medians() {   # side awk-program [awk -v assignments...]
    local side=$1 prog=$2
    shift 2
    for ((r = 1; r <= rounds; r++)); do
        awk "$@" "$prog" "$out/side$side.round$r.txt"
    done | sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "-"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        if (v[1] == v[NR]) printf "%.4g\n", m; else printf "%.4g [%.4g-%.4g]\n", m, v[1], v[NR] }'
}
# ... of a column (by header name) at one size of `fhbench latency`'s table
stat() {   # side size column
    medians "$1" '$1 == "size" { for (i = 1; i <= NF; i++) if ($i == col) c = i }
                  c && $1 == size { print $c; exit }' -v size="$2" -v col="$3"
}
# ... of the median in a summary line that starts with a pattern
line_median() {   # side pattern
    medians "$1" 'index($0, pat) == 1 { for (i = 1; i < NF; i++) if ($i == "median") { print $(i + 1) + 0; exit } }' \
        -v pat="$2"
}
echo "providers.sh: $rounds round(s), git $git, $where; load $load0 -> $load1"
echo
echo "| provider (endpoints) | 8 B put, us | 8 B get, us | AM short round trip, us | barrier 2 ranks, us | barrier 8 ranks on 2 cores, us | 64 KiB put flood, MB/s | 1 MiB put flood, MB/s | runs |"
echo "|---|---|---|---|---|---|---|---|---|"
for i in "${!sides[@]}"; do
    IFS='|' read -r label envs test <<< "${sides[$i]}"
    bad=$(grep -l "FAILED" "$out"/side$i.round*.txt 2>/dev/null | wc -l)
    echo "| $label | $(stat "$i" 8 put_med) | $(stat "$i" 8 get_med) | $(line_median "$i" "AM short round trip") | $(line_median "$i" "fh_barrier over 2 ranks") | $(line_median "$i" "fh_barrier over 8 ranks") | $(stat "$i" 65536 putflood_MB/s) | $(stat "$i" 1048576 putflood_MB/s) | $((rounds - bad))/$rounds ran |"
done
echo
echo "logs: $out"
