#!/bin/bash
# N = 1, 2, 3, 4, 8 ranks: allgathers of 0, 8 and 100000 bytes, barrier,
# finalize; plus the singleton bootstrap (no launcher).
. "$(dirname "$0")/lib.sh"
for n in 1 2 3 4 8; do
    LAST=n$n; run n$n "$FHRUN" -n $n "$BOOT_TEST"
    expect_rc 0 "N=$n"
    expect_count "$TMP/n$n.out" "^boot_test: rank [0-9]+: ok$" $n "N=$n ranks ok"
    expect_count "$TMP/n$n.out" "^boot_test: rank [0-9]+/$n \(local [0-9]+/$n\) via fhrun$" $n "N=$n local ranks"
    [ -s "$TMP/n$n.err" ] && { fail "N=$n: unexpected stderr"; show n$n; }
done
LAST=single; run single env -u FH_BOOT_ADDR "$BOOT_TEST"
expect_rc 0 "singleton"
expect_grep "$TMP/single.out" "rank 0/1 \(local 0/1\) via singleton" "singleton bootstrap chosen"
# A non-firehose program: ranks never connect, all exit 0.
LAST=true; run true "$FHRUN" -n 3 true
expect_rc 0 "non-firehose program (true)"
[ -s "$TMP/true.err" ] && { fail "true: unexpected stderr"; show true; }
# --listen tcp
LAST=tcp; run tcp "$FHRUN" -n 3 --listen tcp:127.0.0.1:0 "$BOOT_TEST"
expect_rc 0 "--listen tcp:127.0.0.1:0"
expect_count "$TMP/tcp.out" "^boot_test: rank [0-9]+: ok$" 3 "tcp: ranks ok"
# The socket directory is removed.
d=$(mktemp -d); LAST=tmpd; run tmpd env TMPDIR=$d "$FHRUN" -n 2 "$BOOT_TEST"
expect_rc 0 "TMPDIR job"
if [ -z "$(ls -A "$d")" ]; then pass "socket directory removed"; else fail "left in TMPDIR: $(ls -A "$d")"; fi
rmdir "$d" 2>/dev/null
LAST=ver; run ver "$FHRUN" --version; expect_rc 0 "--version"
LAST=help; run help "$FHRUN" --help; expect_rc 0 "--help"
LAST=badn; run badn "$FHRUN" -n 4097 true; expect_rc 2 "-n 4097 rejected"
expect_grep "$TMP/badn.err" "1\.\.4096" "-n range message"
finish
