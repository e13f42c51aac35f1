#!/bin/bash
# fhrun --listen tcp:127.0.0.1:PORT while someone else floods the port: a
# 4-rank job must still start and finish, well within FH_BOOT_TIMEOUT.
#
# The flooder runs as another user (nobody, via setpriv or runuser) when
# the test runs as root, else as the job's user without the job key.  From
# 127.0.0.1, the ranks' own source address, it holds FLOOD_SILENT
# connections that never send a byte, reopening each one the launcher
# closes (so the pressure lasts the whole job), plus FLOOD_SLOW that send a
# random byte every 0.7 s.  The ranks start (--prefix-cmd waits for it)
# only once the flood is in place, so they always meet it, and only
# HOLD_S later, so the launcher has served the flood past its handshake
# deadline (3 s) before the ranks connect: a fast job (0.7 s) used to end
# before any slow connection was due to be closed.  Expected: exit
# 0, every rank ok, the flood's connections closed by the launcher (the
# slow ones too) and reported in a few lines, not one per connection.
. "$(dirname "$0")/lib.sh"
FLOOD_SILENT=${FLOOD_SILENT:-320}
FLOOD_SLOW=${FLOOD_SLOW:-8}
NR=4
LIMIT=30          # s, for the whole job; FH_BOOT_TIMEOUT is 60 (default)
HOLD_S=4          # s between the flood's ready and the ranks' start (> 3)

. "$HERE/../stranger.sh"
PY=$(stranger_python) ||
    { echo "SKIP [$NAME]: no python3 that $as_desc can run"; exit 77; }
echo "flooder runs as $as_desc ($PY)"

cat >"$TMP/after-flood" <<EOF
#!/bin/sh
# Run by fhrun for each rank: start the rank once the flood is in place.
for i in \$(seq 300); do
    grep -q '^ready' "$TMP/flood.out" 2>/dev/null && sleep $HOLD_S && exec "\$@"
    [ -e "$TMP/flood.failed" ] && break
    sleep 0.1
done
echo "after-flood: the flood never got ready" >&2; exit 3
EOF
chmod +x "$TMP/after-flood"
: >"$TMP/flood.out"

t0=$(date +%s.%N)
timeout -k 5 "$RUN_LIMIT" env -u FH_BOOT_TIMEOUT "$FHRUN" -v -n $NR \
    --listen tcp:127.0.0.1:0 --prefix-cmd "$TMP/after-flood" "$BOOT_TEST" \
    >"$TMP/job.out" 2>"$TMP/job.err" &
JOB=$!
PORT=
for i in $(seq 100); do
    PORT=$(sed -n 's/^fhrun: .*bootstrap at tcp:127\.0\.0\.1:\([0-9]*\)$/\1/p' "$TMP/job.err")
    [ -n "$PORT" ] && break
    sleep 0.1
done
[ -n "$PORT" ] || { fail "fhrun never said where it listens"; show job; }

# The flooder: stdin is the script (nobody may not be able to read $TMP).
$as "$PY" - "${PORT:-1}" "$FLOOD_SILENT" "$FLOOD_SLOW" >"$TMP/flood.out" 2>&1 <<'PY' &
import os, select, signal, socket, sys, time
port, nsilent, nslow = (int(a) for a in sys.argv[1:4])
addr = ("127.0.0.1", port)
stats = {"opened": 0, "closed_silent": 0, "closed_slow": 0}

def report(*_):
    print("uid", os.getuid(), " ".join("%s %d" % kv for kv in stats.items()),
          flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, report)

def open_one():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(addr)
    except BlockingIOError:
        pass
    stats["opened"] += 1
    return s

def closed(s):
    """True if the launcher closed s (EOF or reset); drains what it sent."""
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True

silent = [open_one() for _ in range(nsilent)]
slow = [open_one() for _ in range(nslow)]
time.sleep(0.5)
print("ready", flush=True)
next_byte = time.time()
end = time.time() + 100
while time.time() < end:
    r, _, _ = select.select(silent + slow, [], [], 0.05)
    for s in r:
        if closed(s):
            which = "slow" if s in slow else "silent"
            stats["closed_" + which] += 1
            lst = slow if which == "slow" else silent
            lst[lst.index(s)] = open_one()
            s.close()
    if time.time() >= next_byte:
        next_byte += 0.7
        for s in slow:
            try:
                s.send(os.urandom(1))
            except OSError:
                pass
report()
PY
FLOOD=$!
for i in $(seq 300); do
    grep -q '^ready' "$TMP/flood.out" && break
    kill -0 $FLOOD 2>/dev/null || break
    sleep 0.1
done
grep -q '^ready' "$TMP/flood.out" || touch "$TMP/flood.failed"
wait $JOB; RC=$?
t1=$(date +%s.%N)
ELAPSED=$(echo "$t1 - $t0" | bc)
kill $FLOOD 2>/dev/null; wait $FLOOD 2>/dev/null

# What the job said, without the refusals (there may be thousands of them).
grep -v "^fhrun: refused a connection" "$TMP/job.err" >"$TMP/said.err"
cp "$TMP/job.out" "$TMP/said.out"
LAST=said
expect_grep "$TMP/flood.out" "^ready$" "the flood was in place before the ranks started"
expect_rc 0 "$NR-rank job under a flood of $FLOOD_SILENT silent + $FLOOD_SLOW slow connections"
expect_count "$TMP/job.out" "^boot_test: rank [0-9]+: ok$" $NR "every rank ok"
expect_lt "$ELAPSED" $LIMIT "the job started and finished well within FH_BOOT_TIMEOUT"
if [ -n "$as" ]; then
    expect_grep "$TMP/flood.out" "^uid $nuid " "the flood came from user nobody"
fi
expect_grep "$TMP/flood.out" " closed_silent ([5-9][0-9]|[1-9][0-9]{2,}) " \
    "the launcher closed the silent connections (at least 50)"
expect_grep "$TMP/flood.out" " closed_slow [1-9][0-9]*$" \
    "the launcher closed the slow garbage connections"
expect_grep "$TMP/job.err" "^fhrun: closed [0-9]+ unauthenticated connection" \
    "fhrun reports the connections it closed"
# fhrun logs at most 10 refusals a second (then a count of the others).
n=$(grep -c "^fhrun: refused a connection" "$TMP/job.err")
if [ "$(echo "$n <= 10 * ($ELAPSED + 1)" | bc)" = 1 ]; then
    pass "refusals logged at a bounded rate ($n lines in ${ELAPSED}s)"
else fail "refusals logged at a bounded rate: $n lines in ${ELAPSED}s"; fi
no_orphans "listen flood"
finish
