#!/bin/bash
# A rank whose FH_BOOT_ADDR leads to a fake launcher (one that does not know
# the job key) refuses to run with it: it exits 1 within seconds, saying the
# launcher did not prove it knows the key, before fh_boot_open returns (so
# boot_test never prints its "via fhrun" line).  The fake listens on TCP
# loopback, as a launcher started with --listen would, and tries in turn:
#   accept   takes any hello (old or new protocol), says "accepted" with a
#            made-up proof, then serves the job's collectives
#   reflect  echoes the rank's nonce as its own and the rank's proof as its
#            proof (the labels differ by direction: must not verify)
#   close    says "accepted" and hangs up before any proof
#   garbage  answers the hello with random bytes
#   silent   never answers (FH_BOOT_TIMEOUT=2 bounds the wait)
. "$(dirname "$0")/lib.sh"
MODES="accept reflect close garbage silent"
python3 - "$TMP/fake.port" $MODES >"$TMP/fake.out" 2>&1 <<'PY' &
import os, socket, struct, sys, time
import fhwire
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.bind(("127.0.0.1", 0)); ls.listen(4); ls.settimeout(60)
open(sys.argv[1] + ".tmp", "w").write("%d\n" % ls.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
for mode in sys.argv[2:]:
    c, _ = ls.accept()
    c.settimeout(30)
    magic = fhwire.recv_exact(c, 4)
    ops = []
    if mode == "silent":
        time.sleep(5)
    elif mode == "garbage":
        c.sendall(os.urandom(4 + fhwire.NONCE))
        time.sleep(1)
    elif magic == fhwire.OLD_MAGIC:
        # The old protocol: the key came in clear; "accept" anyway.
        fhwire.recv_exact(c, fhwire.NONCE + 8)
        c.sendall(struct.pack("<I", 0))
        ops = fhwire.serve_one_rank(c)
    else:
        nonce_r = fhwire.recv_exact(c, fhwire.NONCE)
        nonce_l = nonce_r if mode == "reflect" else os.urandom(fhwire.NONCE)
        c.sendall(fhwire.MAGIC + nonce_l)
        proof = fhwire.recv_exact(c, 8 + fhwire.MACLEN)
        if mode == "close":
            c.sendall(struct.pack("<I", 0))
        else:
            fake = proof[8:] if mode == "reflect" else os.urandom(fhwire.MACLEN)
            c.sendall(struct.pack("<I", 0) + fake)
            ops = fhwire.serve_one_rank(c)
    print(mode, "hello", magic, "ops after the handshake", len(ops), flush=True)
    c.close()
PY
FAKE=$!
for i in $(seq 100); do [ -f "$TMP/fake.port" ] && break; sleep 0.1; done
PORT=$(cat "$TMP/fake.port")
ADDR=tcp:127.0.0.1:$PORT
KEY=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
for mode in $MODES; do
    LAST=$mode; run $mode timeout 30 env FH_BOOT_TIMEOUT=2 FH_BOOT_ADDR=$ADDR \
        FH_JOB_KEY=$KEY FH_RANK=0 FH_NRANKS=1 "$BOOT_TEST"
    expect_rc 1 "$mode: the rank refuses the fake launcher"
    expect_nogrep "$TMP/$mode.out" "via fhrun" "$mode: fh_boot_open did not succeed"
    if [ $mode = silent ]; then
        expect_lt "$ELAPSED" 25 "$mode: gave up (bounded)"
        expect_grep "$TMP/$mode.err" "^firehose\[0\]: bootstrap: timed out after 2 s \(FH_BOOT_TIMEOUT\) waiting for the launcher at $ADDR" "$mode: timeout message"
    else
        expect_lt "$ELAPSED" 25 "$mode: refused (bounded)"
        expect_nogrep "$TMP/$mode.err" "timed out" "$mode: refused, not timed out"
        expect_grep "$TMP/$mode.err" "^firehose\[0\]: bootstrap: the launcher at $ADDR did not prove it knows the job key" "$mode: says the launcher failed authentication"
    fi
done
wait $FAKE
for mode in accept reflect; do
    expect_grep "$TMP/fake.out" "^$mode hello .* ops after the handshake 0$" "$mode: the rank sent nothing after the handshake"
done
no_orphans "fake launcher"
finish
