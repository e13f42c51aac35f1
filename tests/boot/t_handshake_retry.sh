#!/bin/bash
# A rank whose handshake stalls is closed by fhrun after its handshake
# deadline (3 s), and the rank then retries on a new connection instead of
# failing: the job completes.  Each rank reaches fhrun (--listen on TCP
# loopback) through a relay (--prefix-cmd points FH_BOOT_ADDR at it) that
# holds the first NR connections (the ranks start together: one from each)
# silent for 5 s before it forwards anything, and forwards later ones at
# once.  Expected: exit 0, each rank
# says (FH_VERBOSE=1) that the launcher closed its handshake and it
# retried, fhrun counts one closed handshake per rank, and the job took at
# least the deadline.
. "$(dirname "$0")/lib.sh"
NR=2
python3 - "$TMP" $NR >"$TMP/relay.out" 2>&1 <<'PY' &
import os, socket, sys, threading, time
tmp = sys.argv[1]
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.bind(("127.0.0.1", 0)); ls.listen(16)
open(tmp + "/relay.port.tmp", "w").write("%d\n" % ls.getsockname()[1])
os.rename(tmp + "/relay.port.tmp", tmp + "/relay.port")

def pump(src, dst, delay):
    time.sleep(delay)
    while True:
        try:
            b = src.recv(65536)
        except OSError:
            b = b""
        if not b:
            break
        try:
            dst.sendall(b)
        except OSError:
            break
    for s in (dst, src):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

nstall, n = int(sys.argv[2]), 0
while True:
    c, _ = ls.accept()
    up = open(tmp + "/upstream").read().strip()      # tcp:127.0.0.1:PORT
    host, port = up[4:].rsplit(":", 1)
    u = socket.create_connection((host, int(port)))
    stall = 5.0 if n < nstall else 0.0
    print("connection", n, "stalled" if stall else "forwarded", flush=True)
    n += 1
    threading.Thread(target=pump, args=(c, u, stall), daemon=True).start()
    threading.Thread(target=pump, args=(u, c, 0.0), daemon=True).start()
PY
RELAY=$!
for i in $(seq 100); do [ -f "$TMP/relay.port" ] && break; sleep 0.1; done
RPORT=$(cat "$TMP/relay.port")
cat >"$TMP/via-relay" <<EOF
#!/bin/sh
printf '%s\n' "\$FH_BOOT_ADDR" >"$TMP/upstream.\$FH_RANK" &&
    mv "$TMP/upstream.\$FH_RANK" "$TMP/upstream"
FH_BOOT_ADDR=tcp:127.0.0.1:$RPORT exec "\$@"
EOF
chmod +x "$TMP/via-relay"
LAST=job; run job env FH_VERBOSE=1 "$FHRUN" -n $NR --listen tcp:127.0.0.1:0 \
    --prefix-cmd "$TMP/via-relay" "$BOOT_TEST"
kill $RELAY 2>/dev/null; wait $RELAY 2>/dev/null
expect_rc 0 "job whose ranks' first handshakes stall"
expect_count "$TMP/job.out" "^boot_test: rank [0-9]+: ok$" $NR "every rank ok"
expect_count "$TMP/relay.out" "stalled$" $NR "the relay stalled each rank's first connection"
expect_count "$TMP/job.err" "^firehose\[[0-9]+\]: bootstrap: the launcher at tcp:127\.0\.0\.1:$RPORT closed the handshake without an answer \(attempt 1\); retrying$" $NR "each rank retried once"
expect_grep "$TMP/job.err" "^fhrun: closed $NR unauthenticated connection\(s\): .*, $NR without a handshake within 3 s$" "fhrun closed the stalled handshakes at their deadline"
expect_lt 3 "$ELAPSED" "the job waited for the handshake deadline (3 s)"
expect_lt "$ELAPSED" 40 "the job completed (bounded)"
no_orphans "handshake retry"
finish
