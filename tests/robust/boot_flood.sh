#!/bin/sh
# boot_flood.sh -- issue 29 class 5 (lock-out): 300 idle connections to
# fhrun's own bootstrap socket (the default unix socket, no --listen),
# opened before any rank connects and reopened as fhrun closes them, do not
# keep a 2-rank job from starting and finishing: fhrun's handshakes have a
# deadline and a per-source cap (tools/launcher/handshake.c), the ranks
# retry with backoff (firehose/boot/boot_fhrun.c).  The --listen TCP case,
# from another user: tests/boot/t_listen_flood.sh.
# The flooder is the job's own user (the socket's directory admits no
# other); rank 0's --prefix-cmd starts it on FH_BOOT_ADDR, and every rank
# starts only once the flood is in place.
. "$(dirname "$0")/errors_lib.sh"
probe=$(prog config_probe) || { echo "SKIP: config_probe not built"; exit 77; }
[ -x "$FHRUN" ] || { echo "SKIP: fhrun not built"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }

cat >"$tmpd/flood.py" <<'PY'
import select, socket, sys, time
path, n, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
stats = {"opened": 0, "closed": 0}
def one():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(path)
    except (BlockingIOError, InterruptedError):
        pass
    except OSError:
        pass            # fhrun is gone: the job is over
    stats["opened"] += 1
    return s
socks = [one() for _ in range(n)]
time.sleep(0.3)
open(ready, "w").write("ready\n")
end = time.time() + 50
while time.time() < end:
    r, _, _ = select.select(socks, [], [], 0.05)
    for s in r:
        try:
            d = s.recv(4096)
        except OSError:
            d = b""
        if d == b"":
            stats["closed"] += 1
            socks[socks.index(s)] = one()
            s.close()
    sys.stdout.write("opened %(opened)d closed %(closed)d\n" % stats)
    sys.stdout.flush()
PY
cat >"$tmpd/prefix" <<EOF
#!/bin/sh
if [ "\$FH_RANK" = 0 ]; then
    python3 "$tmpd/flood.py" "\${FH_BOOT_ADDR#unix:}" 300 "$tmpd/ready" >"$tmpd/flood.out" 2>&1 &
    echo \$! >"$tmpd/flood.pid"
fi
for i in \$(seq 400); do [ -e "$tmpd/ready" ] && exec "\$@"; sleep 0.05; done
echo "prefix: the flood never got ready" >&2; exit 3
if [ "\$FH_RANK" = 0 ]; then
    python3 "$tmpd/flood.py" "\${FH_BOOT_ADDR#unix:}" 300 "$tmpd/ready" >"$tmpd/flood.out" 2>&1 &
    echo \$! >"$tmpd/flood.pid"
fi
for i in \$(seq 400); do [ -e "$tmpd/ready" ] && exec "\$@"; sleep 0.05; done
echo "prefix: the flood never got ready" >&2; exit 3
EOF
chmod +x "$tmpd/prefix"
timeout 90 "$FHRUN" -n 2 --timeout 80 --prefix-cmd "$tmpd/prefix" "$probe" >"$out" 2>&1
rc=$?
[ -f "$tmpd/flood.pid" ] && kill "$(cat "$tmpd/flood.pid")" 2>/dev/null
last=$(tail -n 1 "$tmpd/flood.out" 2>/dev/null)
expect "the flood was in place before the ranks started ($last)" \
    $([ -e "$tmpd/ready" ] && [ "$(echo "$last" | sed -n 's/^opened \([0-9]*\) .*/\1/p')" -ge 300 ]; echo $?)
expect "2 ranks start and finish under 300 idle connections to fhrun's socket (status $rc)" \
    $([ $rc -eq 0 ] && [ "$(grep -c '^fh_init: FH_OK' "$out")" -eq 2 ]; echo $?)
expect "fhrun closed the idle connections and said so in a few lines" \
    $(grep -q '^fhrun: closed [0-9]* unauthenticated connection' "$out" &&
      [ "$(grep -c '^fhrun:' "$out")" -lt 30 ]; echo $?)
finish
