#!/bin/bash
# Connections with a bad key, an out-of-range rank or a duplicate rank are
# refused and logged; the job goes on and completes.  The clients speak the
# challenge-response handshake (fhwire.py); a client of the old protocol,
# which sent the key itself, and a replayed proof are refused too.
. "$(dirname "$0")/lib.sh"
"$FHRUN" -n 2 "$BOOT_TEST" wait "$TMP/addr" >"$TMP/w.out" 2>"$TMP/w.err" &
FP=$!
for i in $(seq 100); do [ -f "$TMP/addr" ] && break; sleep 0.1; done
python3 - "$TMP/addr" >"$TMP/client.out" 2>&1 <<'PY'
import os, socket, struct, sys
import fhwire
addr, key = open(sys.argv[1]).read().split()
assert addr.startswith("unix:"), addr
path = addr[5:]
def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    return s
def attempt(what, keybytes, rank, magic=fhwire.MAGIC, proof=None):
    s = connect()
    status, ok, sent = fhwire.rank_handshake(s, keybytes, rank, magic=magic,
                                             proof=proof)
    rest = s.recv(1)   # then the launcher closes
    print(what, "status", status, "closed", rest == b"")
    s.close()
    return sent
good = bytes.fromhex(key)
bad = bytes(b ^ 0x5a for b in good)
attempt("badkey", bad, 0)
attempt("badmagic", good, 0, magic=b"XXXX")
# A rank of the old protocol: magic "FHB1", then the key itself.
s = connect()
s.sendall(fhwire.OLD_MAGIC + good + struct.pack("<II", 0, os.getpid()))
st = s.recv(4)
print("oldproto status", fhwire.u32(st), "closed", s.recv(1) == b"")
s.close()
sent = attempt("range", good, 7)
# The same proof again: the launcher's fresh nonce makes it worthless.
attempt("replay", good, 7, proof=sent)
attempt("dup", good, 1)
s = connect()
s.sendall((fhwire.MAGIC + os.urandom(fhwire.NONCE))[:10]); s.close()
print("partial closed early")
PY
echo "client exit $?" >>"$TMP/client.out"
touch "$TMP/addr.go"
wait $FP; RC=$?
LAST=w; expect_rc 0 "job completes despite refused connections"
expect_count "$TMP/w.out" "^boot_test: rank [01]: ok$" 2 "both ranks finished"
expect_grep "$TMP/client.out" "^badkey status 1 closed True$" "bad key: status 1, closed"
expect_grep "$TMP/client.out" "^badmagic status 1 closed True$" "bad magic: status 1, closed"
expect_grep "$TMP/client.out" "^oldproto status 1 closed True$" "old protocol (key in clear): status 1, closed"
expect_grep "$TMP/client.out" "^replay status 1 closed True$" "replayed proof: status 1, closed"
expect_grep "$TMP/client.out" "^range status 2 closed True$" "rank 7: status 2, closed"
expect_grep "$TMP/client.out" "^dup status 3 closed True$" "duplicate rank 1: status 3, closed"
expect_grep "$TMP/client.out" "^client exit 0$" "client ran"
expect_count "$TMP/w.err" "^fhrun: refused a connection: bad job key$" 4 "bad key logged"
expect_grep "$TMP/w.err" "^fhrun: refused a connection: rank 7 out of range \(job has 2 ranks\)$" "out-of-range logged"
expect_grep "$TMP/w.err" "^fhrun: refused a connection: rank 1 is already connected \(duplicate rank\)$" "duplicate logged"

# A rank started with a wrong FH_JOB_KEY reports it clearly.
"$FHRUN" -n 2 "$BOOT_TEST" wait "$TMP/addr2" >"$TMP/w2.out" 2>"$TMP/w2.err" &
FP=$!
for i in $(seq 100); do [ -f "$TMP/addr2" ] && break; sleep 0.1; done
{ read -r a; read -r k; } <"$TMP/addr2"
LAST=rogue; run rogue env FH_BOOT_ADDR="$a" FH_JOB_KEY="$(echo "$k" | tr 0-9a-f 1-9a-f0)" FH_RANK=0 FH_NRANKS=2 "$BOOT_TEST"
expect_rc 1 "rogue rank with a wrong key fails"
expect_grep "$TMP/rogue.err" "^firehose\[0\]: bootstrap: FH_JOB_KEY rejected by the launcher at unix:" "rogue rank told its key was rejected"
touch "$TMP/addr2.go"
wait $FP; RC=$?
LAST=w2; expect_rc 0 "job completes after the rogue rank"
no_orphans "wrong key"
finish
