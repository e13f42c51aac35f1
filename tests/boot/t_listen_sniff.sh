#!/bin/bash
# fhrun --listen tcp:...: someone who sees every byte of the bootstrap
# connections does not learn the job key.  A logging TCP relay on loopback
# sits between the ranks and the launcher (--prefix-cmd runs each rank
# through a wrapper that points FH_BOOT_ADDR at the relay and tells the
# relay where the launcher is); the job must still succeed, and neither the
# key's bytes, nor half of them, nor its hex form may appear in what the
# relay forwarded, in either direction.
. "$(dirname "$0")/lib.sh"
python3 - "$TMP" >"$TMP/relay.out" 2>&1 <<'PY' &
import os, socket, sys, threading
tmp = sys.argv[1]
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.bind(("127.0.0.1", 0)); ls.listen(16)
open(tmp + "/relay.port.tmp", "w").write("%d\n" % ls.getsockname()[1])
os.rename(tmp + "/relay.port.tmp", tmp + "/relay.port")

def pump(src, dst, path):
    # Log first, then forward: once a peer has read a byte, it is logged.
    with open(path, "wb") as log:
        while True:
            try:
                b = src.recv(65536)
            except OSError:
                b = b""
            if not b:
                break
            log.write(b); log.flush()
            try:
                dst.sendall(b)
            except OSError:
                break
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass

n = 0
while True:
    c, _ = ls.accept()
    up = open(tmp + "/upstream").read().strip()      # tcp:127.0.0.1:PORT
    host, port = up[4:].rsplit(":", 1)
    u = socket.create_connection((host, int(port)))
    print("connection", n, "to", up, flush=True)
    for src, dst, d in ((c, u, "r2l"), (u, c, "l2r")):
        threading.Thread(target=pump, args=(src, dst, "%s/cap.%d.%s" % (tmp, n, d)),
                         daemon=True).start()
    n += 1
PY
RELAY=$!
for i in $(seq 100); do [ -f "$TMP/relay.port" ] && break; sleep 0.1; done
cat >"$TMP/via-relay" <<EOF
#!/bin/sh
# Run by fhrun for each rank: tell the relay the launcher's address, hand
# the test the job key, and send the rank to the relay instead.
printf '%s\n' "\$FH_BOOT_ADDR" >"$TMP/upstream.\$FH_RANK" &&
    mv "$TMP/upstream.\$FH_RANK" "$TMP/upstream"
printf '%s\n' "\$FH_JOB_KEY" >"$TMP/key.\$FH_RANK"
FH_BOOT_ADDR=tcp:127.0.0.1:$(cat "$TMP/relay.port") exec "\$@"
EOF
chmod +x "$TMP/via-relay"

LAST=job; run job "$FHRUN" -n 2 --timeout 60 --listen tcp:127.0.0.1:0 \
    --prefix-cmd "$TMP/via-relay" "$BOOT_TEST"
kill "$RELAY" 2>/dev/null; wait "$RELAY" 2>/dev/null
expect_rc 0 "job over --listen through the relay"
expect_count "$TMP/job.out" "^boot_test: rank [01]: ok$" 2 "both ranks ok"
expect_count "$TMP/relay.out" "^connection [01] to tcp:127\.0\.0\.1:[0-9]+$" 2 "both ranks went through the relay"

python3 - "$TMP" >"$TMP/check.out" 2>&1 <<'PY'
import glob, sys
tmp = sys.argv[1]
keys = {open(f).read().strip() for f in glob.glob(tmp + "/key.*")}
assert len(keys) == 1, keys
khex = keys.pop()
key = bytes.fromhex(khex)
streams = {f: open(f, "rb").read() for f in sorted(glob.glob(tmp + "/cap.*"))}
print("streams", len(streams))
print("bytes", sum(len(s) for s in streams.values()))
print("handshakes", sum(1 for f, s in streams.items()
                        if f.endswith(".r2l") and s.startswith(b"FHB")))
needles = {"raw key": key, "first half": key[:16], "second half": key[16:],
           "hex key": khex.lower().encode(), "HEX key": khex.upper().encode()}
for what, needle in needles.items():
    where = [f.rsplit("/", 1)[1] for f, s in streams.items() if needle in s]
    print(what, "seen in", ",".join(where) if where else "nothing")
PY
echo "check exit $?" >>"$TMP/check.out"
expect_grep "$TMP/check.out" "^check exit 0$" "capture checked"
expect_grep "$TMP/check.out" "^streams 4$" "captured both directions of both connections"
expect_grep "$TMP/check.out" "^handshakes 2$" "each rank's stream starts with its hello"
expect_grep "$TMP/check.out" "^bytes [0-9]{6,}$" "the allgathers went through the relay too"
for what in "raw key" "first half" "second half" "hex key" "HEX key"; do
    expect_grep "$TMP/check.out" "^$what seen in nothing$" "$what not on the wire"
done
no_orphans "sniffed handshake"
finish
