#!/bin/bash
# tests/vm/cma-yama.sh -- the node path's cross-memory attach under Yama,
# inside the VM of run-vm.sh (the host and CI machines have no Yama; the
# guest's Debian kernel has it).  Each test runs tests/vm/cma-yama-guest.sh
# (read it for the checks): an unprivileged user, all ranks in one node
# group, FH_SEGMENT=everything.
#
#   tests/vm/cma-yama.sh [--builddir DIR] [run-vm.sh options...]
#
#   cma_yama1     ptrace_scope 1 (Debian's and Ubuntu's default), 3 ranks:
#                 single copy to every member -- each rank declared its
#                 launcher with PR_SET_PTRACER (firehose/node/node_cma.c);
#                 without that declaration the kernel refuses (EPERM) and
#                 the test fails.
#   cma_yama2     ptrace_scope 2 (admin only), 2 ranks: nothing tried, the
#                 network carries such memory, the test's transfers still
#                 complete.
#   cma_yama0     ptrace_scope 0, 2 ranks: single copy.
# Called by `make check-rxe`.  Exit status: that of run-vm.sh (0 = all passed).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
builddir=.
vm_opts=()
while [ "$#" -gt 0 ]; do
    case "$1" in
        --builddir) builddir=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//; /^set -e/d'; exit 0 ;;
        *) vm_opts+=("$1"); shift ;;
    esac
done
builddir=$(cd "$builddir" && pwd)
for f in tools/fhrun tools/fhinfo tests/integ/node_cma_test; do
    [ -x "$builddir/$f" ] || { echo "cma-yama: $builddir/$f not built (run make check-rxe or make $f)" >&2; exit 2; }
done

env_words="FH_CONDUIT=ibv FH_IBV_DEVICE=rxe0"
exec "$HERE/run-vm.sh" --memory 2048 --timeout 900 \
    --bin "$builddir/tools/fhrun:tools/fhrun" \
    --bin "$builddir/tools/fhinfo:tools/fhinfo" \
    --bin "$builddir/tests/integ/node_cma_test:tests/integ/node_cma_test" \
    --file "$HERE/cma-yama-guest.sh:tests/vm/cma-yama-guest.sh" \
    --test cma_yama1 "$env_words sh tests/vm/cma-yama-guest.sh 1 cma 3" \
    --test cma_yama2 "$env_words sh tests/vm/cma-yama-guest.sh 2 net 2" \
    --test cma_yama0 "$env_words sh tests/vm/cma-yama-guest.sh 0 cma 2" \
    "${vm_opts[@]}"
