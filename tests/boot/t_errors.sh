#!/bin/bash
# Program not found, connect timeout, lost launcher, bad usage.
. "$(dirname "$0")/lib.sh"
LAST=nf; run nf "$FHRUN" -n 2 ./no-such-program-here
expect_rc 127 "program not found (path)"
expect_grep "$TMP/nf.err" "^fhrun: cannot run './no-such-program-here': No such file or directory$" "not-found message"
LAST=nf2; run nf2 "$FHRUN" -n 2 no-such-command-xyz arg
expect_rc 127 "program not found (PATH)"
expect_grep "$TMP/nf2.err" "^fhrun: cannot run 'no-such-command-xyz': command not found in PATH$" "PATH message"
LAST=nf3; run nf3 "$FHRUN" -n 2 --prefix-cmd "env" no-such-command-xyz
expect_rc 127 "program not found behind --prefix-cmd"
touch "$TMP/noexec"; chmod 644 "$TMP/noexec"
LAST=nx; run nx "$FHRUN" -n 1 "$TMP/noexec"
expect_rc 126 "not executable"
LAST=us; run us "$FHRUN" "$BOOT_TEST"
expect_rc 2 "missing -n"

# A rank that never connects: the job is aborted naming it.
# (It sleeps 100 s: a job that ended before is ended by the timeout, not by
# rank 1 finally connecting; the message below says which.)
LAST=ct; run ct env FH_BOOT_TIMEOUT=2 "$FHRUN" -n 3 "$BOOT_TEST" sleep 1 100
expect_rc 1 "rank 1 never connects"
expect_lt "$ELAPSED" 90 "connect timeout ended the job"
expect_grep "$TMP/ct.err" "^fhrun: rank 1 never connected within 2 s \(FH_BOOT_TIMEOUT\); aborting the job$" "names the missing rank"
expect_count "$TMP/ct.err" "^firehose\[[02]\]: the launcher aborted the job: rank 1 never connected" 2 "connected ranks told"
no_orphans "connect timeout"

# No launcher listening: a clear error naming the address.
LAST=nl; run nl env FH_BOOT_TIMEOUT=1 FH_BOOT_ADDR=unix:$TMP/none.sock FH_JOB_KEY=$(printf '%064d' 0) FH_RANK=0 FH_NRANKS=1 "$BOOT_TEST"
expect_rc 1 "no launcher"
expect_grep "$TMP/nl.err" "^firehose\[0\]: bootstrap: cannot connect to the launcher at unix:$TMP/none.sock within 1 s \(FH_BOOT_TIMEOUT\): No such file or directory$" "connect error names the address"
LAST=part; run part env FH_BOOT_ADDR=unix:/x "$BOOT_TEST"
expect_rc 1 "partial fhrun environment"
expect_grep "$TMP/part.err" "FH_JOB_KEY is not set" "names the missing variable"
LAST=pmixenv; run pmixenv env PMIX_NAMESPACE=x PMIX_RANK=0 "$BOOT_TEST"
expect_rc 1 "PMIx env without PMIx support"
expect_grep "$TMP/pmixenv.err" "built without PMIx support" "clear PMIx message"

# The launcher disappears (fake launcher that closes after the handshake;
# it knows the job key, all zeros, so the rank accepts it).
python3 - "$TMP/fake.sock" "$TMP/fake.ready" >"$TMP/fake.out" 2>&1 <<'PY' &
import os, socket, struct, sys
import fhwire
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1)
open(sys.argv[2], "w").close()
c, _ = s.accept()
hello = fhwire.recv_exact(c, 4 + fhwire.NONCE)
nonce_l = os.urandom(fhwire.NONCE)
c.sendall(fhwire.MAGIC + nonce_l)
rank, pid = struct.unpack("<II", fhwire.recv_exact(c, 8))
fhwire.recv_exact(c, fhwire.MACLEN)
c.sendall(struct.pack("<I", 0) + fhwire.mac(bytes(32), fhwire.LABEL_LAUNCHER,
                                            hello[4:], nonce_l, rank, pid))
# serve the host-name exchange (1 rank: echo), then vanish mid-job
hdr = b""
while len(hdr) < 8: hdr += c.recv(8 - len(hdr))
op, n = struct.unpack("<II", hdr)
data = b""
while len(data) < n: data += c.recv(n - len(data))
c.sendall(struct.pack("<I", 0x101) + data)
hdr = c.recv(8)
print("next op", struct.unpack("<II", hdr))
c.close()
PY
for i in $(seq 50); do [ -f "$TMP/fake.ready" ] && break; sleep 0.1; done
LAST=lost; run lost env FH_BOOT_ADDR=unix:$TMP/fake.sock FH_JOB_KEY=$(printf '%064d' 0) FH_RANK=0 FH_NRANKS=1 "$BOOT_TEST"
wait
expect_rc 70 "launcher vanished"
expect_grep "$TMP/lost.err" "^firehose\[0\]: lost the launcher; aborting$" "lost-launcher message"
expect_grep "$TMP/fake.out" "next op \(1, 0\)" "fake launcher saw the 0-byte allgather"
finish
