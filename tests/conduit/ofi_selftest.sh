#!/bin/sh
# ofi_selftest.sh -- the ofi conduit on its own (tests/conduit/ofi_selftest.c):
# AM order and integrity, receive floods, and puts checked at the target the
# moment the initiator's completion arrives, over every provider in
# FH_TEST_PROVIDERS (default net tcp shm: net is the default network
# provider, tcp its fallback) that fi_info offers; plus, over net and tcp,
# RMA to a dead peer failing instead of hanging.  (shm 1.17 reports a dead
# peer's failed RMA without its context, so "dead" runs on net and tcp
# only.)  tcp runs
# with authenticated message endpoints (the default) and once more over
# tcp;ofi_rxm's reliable datagrams.
here=$(cd "$(dirname "$0")" && pwd)
bin=./tests/conduit/ofi_selftest
[ -x "$bin" ] || bin=$here/ofi_selftest
if [ ! -x "$bin" ]; then
    echo "SKIP: ofi_selftest not built"
    exit 77
fi
fail=0 ran=0
run() {
    ran=$((ran + 1))
    if timeout -k 10 300 "$bin" "$@" > selftest.out 2>&1; then
        echo "ok   ofi_selftest $*: $(tail -n 1 selftest.out)"
    else
        fail=$((fail + 1))
        echo "FAIL ofi_selftest $*; its output:"
        tail -n 30 selftest.out
    fi
    rm -f selftest.out
}
for p in ${FH_TEST_PROVIDERS:-net tcp shm}; do
    if command -v fi_info >/dev/null 2>&1 && ! fi_info -p "$p" >/dev/null 2>&1; then
        echo "SKIP provider $p: fi_info -p $p finds nothing"
        continue
    fi
    run "$p" all
    case $p in net|tcp) run "$p" dead ;; esac
done
# tcp's reliable-datagram endpoints (tcp;ofi_rxm), still selectable with
# FH_OFI_ENDPOINT=rdm FH_OFI_TRUST_FABRIC=1 (the self-test trusts loopback).
case " ${FH_TEST_PROVIDERS:-net tcp shm} " in
    *" tcp "*) FH_OFI_ENDPOINT=rdm; export FH_OFI_ENDPOINT; run tcp all; unset FH_OFI_ENDPOINT ;;
esac
[ "$ran" -gt 0 ] || { echo "nothing ran"; exit 77; }
[ "$fail" -eq 0 ] || { echo "$fail of $ran runs FAILED"; exit 1; }
echo "all $ran runs passed"
