#!/bin/sh
# finalize_quiet.sh -- issue 29 class 10: fh_finalize completes the
# caller's NBI operations before its barrier (finalize_quiet_test.c): every
# rank's puts have landed at the target when the barrier is over.  The
# default configuration (tcp, FH_REG_STRATEGY=firehose) on 2 and 3 ranks,
# the shm provider, and the other strategies on 2 ranks.
. "$(dirname "$0")/errors_lib.sh"
bin=$(prog finalize_quiet_test) || { echo "SKIP: finalize_quiet_test not built"; exit 77; }
[ -x "$FHRUN" ] || { echo "SKIP: fhrun not built"; exit 77; }

run() {
    desc=$1; np=$2
    timeout 120 "$FHRUN" -n "$np" --timeout 100 "$bin" >"$out" 2>&1
    rc=$?
    expect "$desc (status $rc)" \
        $([ $rc -eq 0 ] && [ "$(grep -c '^\[[0-9]*\] ok:' "$out")" -eq "$np" ] &&
          grep -q '^PASS finalize_quiet_test' "$out"; echo $?)
}

for np in 2 3; do
    run "default configuration, $np ranks: NBI puts complete inside fh_finalize" "$np"
done
if ! command -v fi_info >/dev/null 2>&1 || fi_info -p shm >/dev/null 2>&1; then
    FH_OFI_PROVIDER=shm run "shm provider, 2 ranks" 2
fi
for s in pin-everything rendezvous bounce; do
    FH_REG_STRATEGY=$s run "FH_REG_STRATEGY=$s, 2 ranks" 2
done
finish
