#!/bin/sh
# tests/vm/init.sh -- /init of the Soft-RoCE test VM (run by busybox ash as
# PID 1; installed into the initramfs by tests/vm/run-vm.sh).
#
# Sets up two Soft-RoCE devices on a veth pair:
#     rxe0 -- veth0 10.0.0.1   <==== veth ====>   veth1 10.0.0.2 -- rxe1
# with routing fixed so that traffic between the two local addresses really
# crosses the veth pair (not lo, which rxe cannot use), then runs every test
# of /fh/vm/suite and prints, on the serial console,
#     FH-VM-BEGIN: <name>
#     FH-VM-RESULT: PASS|FAIL <name> <exit status> <seconds>s
#     FH-VM-DONE passed=<n> failed=<n>
# and powers off.  A failing set-up step is reported as the test "vm-setup".
#
# Everything in the guest that is not busybox is called by full path:
# busybox-static runs its own applets (ip, modprobe, ...) before PATH.

export PATH=/fh/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/bb
export HOME=/root TMPDIR=/tmp
umask 022

/bb/mount -t proc proc /proc
/bb/mount -t sysfs sysfs /sys
/bb/mount -t devtmpfs devtmpfs /dev 2>/dev/null
/bb/mkdir -p /dev/pts /dev/shm /tmp /run /root
/bb/mount -t devpts devpts /dev/pts
/bb/mount -t tmpfs -o mode=1777 tmpfs /dev/shm
/bb/mount -t tmpfs tmpfs /run
# /tmp stays on the initramfs root (already a tmpfs): programs and libraries
# from a build tree under the host's /tmp are unpacked there.
/bb/chmod 1777 /tmp

# Seconds since boot with centiseconds, from the shell builtin (no fork).
now() { read -r _up _idle < /proc/uptime; echo "$_up"; }
# elapsed T0: seconds since uptime T0, two decimals.
elapsed() { /bb/awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

echo "FH-VM-INIT uptime=$(now)"

PASSED=0
FAILED=0
finish() {
    echo "FH-VM-DONE passed=$PASSED failed=$FAILED"
    /bb/sync
    /bb/poweroff -f
    sleep 5
    echo o > /proc/sysrq-trigger 2>/dev/null
}
setup_fail() {
    echo "FH-VM-SETUP-ERROR: $*"
    echo "FH-VM-RESULT: FAIL vm-setup 1 $(elapsed "$T_SETUP")s"
    FAILED=$((FAILED + 1))
    finish
}

# Written by run-vm.sh: KVER, FH_VM_TEST_TIMEOUT, FH_VM_SHELL_ON_FAIL,
# LD_LIBRARY_PATH and the exported test environment (FH_*, --env).
. /fh/vm/config.sh

T_SETUP=$(now)
IP=/usr/sbin/ip
RDMA=/usr/bin/rdma

# --- modules ---------------------------------------------------------
T=$(now)
/usr/sbin/modprobe -a crc32_generic veth rdma_rxe || setup_fail "modprobe crc32_generic veth rdma_rxe failed"
echo "FH-VM-TIME: modules $(elapsed "$T")s"

# --- network: veth pair, addresses, routing ----------------------------
T=$(now)
sysctl_w() { echo "$2" > "/proc/sys/$1" || setup_fail "cannot write $2 to /proc/sys/$1"; }
for c in all default; do
    sysctl_w "net/ipv4/conf/$c/accept_local" 1
    sysctl_w "net/ipv4/conf/$c/rp_filter" 0
done
# One ip process for all of it: every exec is slow under emulation.
$IP -batch - <<'EOT' || setup_fail "ip -batch (veth pair, addresses, routing rules)"
link set lo up
link add veth0 type veth peer name veth1
addr add 10.0.0.1/24 dev veth0
addr add 10.0.0.2/24 dev veth1
link set veth0 up
link set veth1 up
rule add pref 100 lookup local
rule del pref 0 lookup local
rule add pref 10 iif lo from 10.0.0.1 to 10.0.0.2 lookup 10
rule add pref 11 iif lo from 10.0.0.2 to 10.0.0.1 lookup 11
route add 10.0.0.2/32 dev veth0 src 10.0.0.1 table 10
route add 10.0.0.1/32 dev veth1 src 10.0.0.2 table 11
EOT
# Both addresses are local, so by default the kernel would route between them
# through lo, where rxe drops the packets ("Failed to modify QP to RTR").
# Above: locally generated traffic between them leaves through the veth ends
# (rules 10/11, iif lo = output path), the "local" rule moved below them;
# here: accept packets whose source is local, no reverse-path filter, and
# permanent neighbours (ARP between two local addresses is unreliable).
for c in veth0 veth1; do
    sysctl_w "net/ipv4/conf/$c/accept_local" 1
    sysctl_w "net/ipv4/conf/$c/rp_filter" 0
done
read -r MAC0 < /sys/class/net/veth0/address
read -r MAC1 < /sys/class/net/veth1/address
$IP -batch - <<EOT || setup_fail "ip neigh (permanent neighbours)"
neigh replace 10.0.0.2 lladdr $MAC1 dev veth0 nud permanent
neigh replace 10.0.0.1 lladdr $MAC0 dev veth1 nud permanent
EOT
echo "FH-VM-TIME: network $(elapsed "$T")s"

# --- Soft-RoCE devices -------------------------------------------------
T=$(now)
$RDMA link add rxe0 type rxe netdev veth0 || setup_fail "rdma link add rxe0"
$RDMA link add rxe1 type rxe netdev veth1 || setup_fail "rdma link add rxe1"
for d in rxe0 rxe1; do
    [ -d "/sys/class/infiniband/$d" ] || setup_fail "$d missing in /sys/class/infiniband"
    # GID 0: IPv6 link-local; GID 1: IPv4-mapped (RoCE v2).  Read only a few
    # entries with the builtin: reading all 1024 with cat takes ~47 s here.
    read -r g1 < "/sys/class/infiniband/$d/ports/1/gids/1"
    echo "FH-VM-RXE: $d gid[1]=$g1"
done
echo "FH-VM-TIME: rxe $(elapsed "$T")s"

# rxe pins registered memory: lift the locked-memory limit for the tests.
# shellcheck disable=SC3045  # busybox ash has ulimit -l
ulimit -l unlimited || setup_fail "ulimit -l unlimited"
echo "FH-VM-TIME: setup $(elapsed "$T_SETUP")s"

# --- tests ---------------------------------------------------------------
# Suite lines: "<name> <shell command>"; blank lines and #-comments skipped.
cd /fh || setup_fail "no /fh"
while read -r name cmd; do
    case "$name" in ''|'#'*) continue ;; esac
    echo "FH-VM-BEGIN: $name"
    T=$(now)
    # A fresh shell per test; stdin from /dev/null so a test cannot eat the
    # suite.  busybox timeout sends SIGTERM (status 143) after the limit.
    /bb/timeout "$FH_VM_TEST_TIMEOUT" /bin/sh -c "$cmd" < /dev/null
    st=$?
    cd /fh || setup_fail "no /fh"
    if [ "$st" -eq 0 ]; then
        r=PASS; PASSED=$((PASSED + 1))
    else
        r=FAIL; FAILED=$((FAILED + 1))
    fi
    echo "FH-VM-RESULT: $r $name $st $(elapsed "$T")s"
done < /fh/vm/suite

if [ "$FAILED" -ne 0 ] && [ "${FH_VM_SHELL_ON_FAIL:-0}" = 1 ]; then
    echo "FH-VM: a test failed; interactive shell (exit to power off)"
    /bin/sh < /dev/console > /dev/console 2>&1
fi
finish
