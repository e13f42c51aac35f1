#!/bin/sh
# tests/vm/cma-yama-guest.sh -- run inside the Soft-RoCE VM (as root, by
# tests/vm/cma-yama.sh): cross-memory attach between the ranks of one node
# under Yama, as an unprivileged user (root's CAP_SYS_PTRACE would pass any
# scope, so only a non-root run tests the runtime's PR_SET_PTRACER path).
#
#   cma-yama-guest.sh SCOPE EXPECT NP
#
# Sets /proc/sys/kernel/yama/ptrace_scope to SCOPE, then as user "fh"
# (uid 1000) runs `fhinfo --node` and tests/integ/node_cma_test --expect
# EXPECT (cma: single-copy to every member; net: the network) on NP ranks,
# all in one node group, FH_SEGMENT=everything.  Passes when the test
# passes, every rank logs the cross-memory attach count EXPECT implies, and
# fhinfo --node agrees.
set -u
scope=$1 expect=$2 np=$3
y=/proc/sys/kernel/yama/ptrace_scope
[ -w "$y" ] || { echo "cma-yama: this kernel has no Yama ($y)"; exit 1; }
echo "$scope" > "$y" || { echo "cma-yama: cannot set ptrace_scope $scope"; exit 1; }
grep -q '^fh:' /etc/passwd 2>/dev/null || {
    grep -q '^root:' /etc/passwd 2>/dev/null || echo 'root:x:0:0:root:/root:/bin/sh' >> /etc/passwd
    echo 'fh:x:1000:1000:fh:/tmp:/bin/sh' >> /etc/passwd
    echo 'fh:x:1000:' >> /etc/group
}
# The conduit (ibv on rxe0) must open the verbs device as that user; rxe
# pins memory, and root lifted RLIMIT_MEMLOCK before (inherited).
chmod 0666 /dev/infiniband/* 2>/dev/null
log=/tmp/cma-yama.$scope.$expect.$np
as_fh() { su -p -s /bin/sh fh -c "$*"; }

if [ "$expect" = cma ]; then
    pat="cross-memory attach to $((np - 1)) of $((np - 1)) node member"
else
    pat="cross-memory attach to 0 of $((np - 1)) node member"
fi
as_fh "FH_SHM=auto FH_SEGMENT=everything FH_REG_STRATEGY=firehose FH_VERBOSE=1 FH_STATS=0 \
    tools/fhrun -n $np --timeout 300 tests/integ/node_cma_test --expect $expect --group $np" \
    > "$log" 2>&1
st=$?
grep -E 'cross-memory|PASS|FAIL|error|ptrace' "$log"
[ "$st" -eq 0 ] || { echo "cma-yama: node_cma_test exited $st"; tail -n 20 "$log"; exit 1; }
grep -q "^PASS node_cma_test ($expect)" "$log" || { echo "cma-yama: no PASS line"; exit 1; }
n=$(grep -c "$pat" "$log")
[ "$n" -eq "$np" ] || { echo "cma-yama: $n of $np ranks logged '$pat'"; exit 1; }
as_fh "id -u; tools/fhinfo --node" > "$log.info" 2>&1
cat "$log.info"
[ "$(head -n 1 "$log.info")" = 1000 ] || { echo "cma-yama: not running as uid 1000"; exit 1; }
grep -q "Yama ptrace_scope $scope" "$log.info" || { echo "cma-yama: fhinfo did not see scope $scope"; exit 1; }
if [ "$expect" = cma ]; then
    grep -q '^        usable' "$log.info" || { echo "cma-yama: fhinfo --node: CMA not usable"; exit 1; }
else
    grep -q '^        NOT usable' "$log.info" || { echo "cma-yama: fhinfo --node: CMA usable"; exit 1; }
fi
echo "cma-yama: scope $scope, uid 1000, $np ranks: $expect as expected"
