#!/bin/sh
# ofi_flood.sh -- issue 29 class 5 (lock-out), the ofi listener: strangers
# hold 300 idle TCP connections, plus 8 that send a garbage byte every
# 0.2 s and 8 that send a libfabric-tcp-sized garbage header at once, to
# each rank's own ofi listening port (the tcp provider's passive endpoint
# the conduit accepts its connections on, conduits/ofi/ofi_cm.c), while a
# 2-rank job with FH_PATHS=lazy makes its thread paths: a second thread's
# first call connects to every rank's listener through the flood.  Then
# the same with the ranks out of descriptors (see exhausted_svc below).  That
# thread and the main thread then put, get and send AMs to the next rank,
# and the ranks meet in a barrier (ofi_flood_test.c).  Expected: the job
# finishes (bounded: fhrun --timeout 40, timeout 60), every rank ok, the
# flood was in place and stayed open (no listener gave up), and the
# garbage connections were closed by the listener.
# The flooder runs as user nobody when we are root (setpriv or runuser),
# else as the job's user; it finds the ranks' listening ports as anyone
# can (/proc/net/tcp; we give it the ranks' pids to pick theirs).
long=${FH_TEST_LONG:-0}        # errors_lib.sh unsets every FH_*
. "$(dirname "$0")/errors_lib.sh"
# Under ASan: the tcp provider's leaks for the strangers' connection
# requests (see the file) are not ours.
LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/ofi_flood.lsan.supp"
export LSAN_OPTIONS
probe=$(prog ofi_flood_test) || { echo "SKIP: ofi_flood_test not built"; exit 77; }
[ -x "$FHRUN" ] || { echo "SKIP: fhrun not built"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
NSILENT=${FLOOD_SILENT:-300}

. "$here/../stranger.sh"
PY=$(stranger_python) || { echo "SKIP: no python3 that $as_desc can run"; exit 77; }
echo "flooder runs as $as_desc ($PY)"

# The listening TCP ports of a process (its socket inodes in /proc/net/tcp*).
cat >"$tmpd/ports.py" <<'PY'
import os, sys
pid = sys.argv[1]
inodes = set()
for fd in os.listdir("/proc/%s/fd" % pid):
    try:
        t = os.readlink("/proc/%s/fd/%s" % (pid, fd))
    except OSError:
        continue
    if t.startswith("socket:["):
        inodes.add(t[8:-1])
ports = set()
for f in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        lines = open(f).read().splitlines()[1:]
    except OSError:
        continue
    for l in lines:
        c = l.split()
        if c[3] == "0A" and c[9] in inodes:      # LISTEN
            ports.add(int(c[1].rsplit(":", 1)[1], 16))
print(" ".join(str(p) for p in sorted(ports)))
PY

# The flooder: stdin is the script (nobody cannot read $tmpd).  Arguments:
# the number of silent connections per port, how long to hold them (s),
# then the ports.  Prints
# "ready" once every connection is open, then, every 0.2 s, its counts.
cat >"$tmpd/flood.py" <<'PY'
import os, select, signal, socket, sys, time
nsilent, secs = int(sys.argv[1]), int(sys.argv[2])
ports = [int(p) for p in sys.argv[3:]]
st = {"opened": 0, "open_failed": 0, "closed_silent": 0, "closed_slow": 0,
      "closed_junk": 0}
def one(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.connect(("127.0.0.1", port))
    except OSError:
        st["open_failed"] += 1
        s.close()
        return None
    s.setblocking(False)
    st["opened"] += 1
    return s
kind = {}
for p in ports:
    for _ in range(nsilent):
        s = one(p)
        if s: kind[s] = "silent"
    for _ in range(8):
        s = one(p)
        if s: kind[s] = "slow"
    for _ in range(8):
        s = one(p)
        if s:
            kind[s] = "junk"
            try: s.send(os.urandom(64))
            except OSError: pass
print("ready", flush=True)
def report(*_):
    print("uid %d %s" % (os.getuid(), " ".join("%s %d" % kv for kv in st.items())),
          flush=True)
signal.signal(signal.SIGTERM, lambda *_: (report(), os._exit(0)))
nxt = time.time()
end = time.time() + secs
while time.time() < end:
    socks = list(kind)
    r, _, _ = select.select(socks, [], [], 0.05) if socks else ([], [], [])
    for s in r:
        try:
            d = s.recv(4096)
        except BlockingIOError:
            continue
        except OSError:
            d = b""
        if d == b"":
            st["closed_" + kind.pop(s)] += 1
            s.close()
    if time.time() >= nxt:
        nxt += 0.2
        for s, k in list(kind.items()):
            if k == "slow":
                try: s.send(os.urandom(1))
                except OSError: pass
        report()
PY

export FH_VERBOSE=${FLOOD_VERBOSE:-0} FH_PATHS=lazy FH_CONDUIT=ofi FH_OFI_PROVIDER=tcp FH_SHM=off
chmod 755 "$tmpd"

# run_case NAME FDS LIMIT [THREADS HOLD_MS]: one job under the flood; FDS:
# the ranks' descriptor limit (ulimit -n; "" = as we have it), LIMIT: fhrun
# --timeout; THREADS, HOLD_MS: ofi_flood_test.c's FLOOD_THREADS (2) and
# FLOOD_HOLD_MS (0).
run_case() {
    name=$1 fds=$2 limit=$3 threads=${4:-2} hold=${5:-0}
    FLOOD_DIR=$tmpd/$name
    export FLOOD_DIR
    mkdir -p "$FLOOD_DIR" && chmod 755 "$FLOOD_DIR"
    sh -c 'if [ -n "$1" ]; then ulimit -n "$1" || exit 99; fi; shift; exec "$@"' sh "$fds" \
        env FLOOD_THREADS="$threads" FLOOD_HOLD_MS="$hold" \
        timeout -k 5 $((limit + 10)) "$FHRUN" -n 2 --timeout "$limit" "$probe" >"$out" 2>&1 &
    job=$!
    ports=
    for i in $(seq 300); do
        if [ -s "$FLOOD_DIR/rank0.pid" ] && [ -s "$FLOOD_DIR/rank1.pid" ]; then
            ports="$(python3 "$tmpd/ports.py" "$(cat "$FLOOD_DIR/rank0.pid")") $(python3 "$tmpd/ports.py" "$(cat "$FLOOD_DIR/rank1.pid")")"
            break
        fi
        kill -0 $job 2>/dev/null || break
        sleep 0.05
    done
    nports=$(echo $ports | wc -w)
    flood=
    : >"$FLOOD_DIR/flood.out"
    if [ "$nports" -ge 2 ]; then
        # shellcheck disable=SC2086  # $as and $ports are word lists
        $as "$PY" - "$NSILENT" $((limit + 10)) $ports <"$tmpd/flood.py" >"$FLOOD_DIR/flood.out" 2>&1 &
        flood=$!
        for i in $(seq 300); do
            grep -q '^ready' "$FLOOD_DIR/flood.out" && break
            kill -0 $flood 2>/dev/null || break
            sleep 0.05
        done
    fi
    touch "$FLOOD_DIR/ready"    # the ranks go on, flood or not (checked below)
    wait $job
    rc=$?
    sleep 0.3                   # one more report with the job gone
    [ -n "$flood" ] && { kill $flood 2>/dev/null; wait $flood 2>/dev/null; }
    last=$(grep '^uid' "$FLOOD_DIR/flood.out" | tail -n 1)
    echo "$name: ranks' listening ports: $ports; flood: ${last:-none}"
    expect "$name: found both ranks' listening ports ($nports)" $([ "$nports" -ge 2 ]; echo $?)
    expect "$name: the flood was in place before the ranks went on: $((nports * (NSILENT + 16))) connections opened ($(num opened))" \
        $([ "$(num opened)" = $((nports * (NSILENT + 16))) ] && [ "$(num open_failed)" = 0 ]; echo $?)
    if [ -n "$as" ]; then
        expect "$name: the flood came from $as_desc" $(echo "$last" | grep -q "^uid $nuid "; echo $?)
    fi
    expect "$name: 2 ranks (FH_PATHS=lazy) put, get, send AMs from $threads thread(s) and meet in a barrier under the flood (status $rc)" \
        $([ $rc -eq 0 ] && [ "$(grep -c '^ofi_flood_test: rank [01]: ok$' "$out")" -eq 2 ]; echo $?)
    expect "$name: no rank took the flood for a dead peer" \
        $(! grep -Eq 'died: its (process is gone|pid now belongs|process has exited)' "$out"; echo $?)
    expect "$name: the listener closed the garbage-sending connections ($(num closed_junk) of $((nports * 8)) headers, $(num closed_slow) slow)" \
        $([ "$(num closed_junk)" -ge 1 ] 2>/dev/null; echo $?)
}
num() { echo "$last" | sed -n "s/.* $1 \([0-9]*\).*/\1/p"; }

# 300 idle connections (and 16 garbage ones) to each rank's listener.
run_case idle "" 40
# The same flood against ranks at ulimit -n 256: it takes every descriptor
# they have left.  Only the main thread talks (over the service path, made
# before the flood), after 3 s of polling under the flood, during which
# each rank checks its peer's process once a second (firehose/peer.c): out
# of descriptors, it must not take its peer for dead.
run_case exhausted_svc 256 40 1 3000
# FH_TEST_LONG=1: more connections than the ranks have descriptors (ulimit
# -n 256): the listener cannot accept, so a lazy thread path cannot be made;
# after its connect deadline (60 s) the threads share the service path and
# the job completes (before the fix in peer.c, a rank whose descriptors ran
# out took its peer for dead: "rank 1 died: its process is gone").
if [ "$long" = 1 ]; then
    run_case exhausted 256 100
    expect "exhausted: the rank that could not make its thread path said so and shared" \
        $(grep -q 'threads from now on share' "$out"; echo $?)
fi
finish
