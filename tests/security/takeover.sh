#!/bin/sh
# takeover.sh -- a stranger on the host tries to pass for a member of a
# running firehose job (issue 26; docs/security.md).
#
# What it tests: that a process of another user who knows a rank's
# listening port cannot become that rank: it receives none of the job's
# messages or RMA requests, gets no connection of its own accepted and
# usable, and neither connecting nor replaying a member's bytes disturbs the
# job.  Over tcp (FH_OFI_PROVIDER=tcp, FI_TCP_IFACE=lo), one fresh 2-rank
# job per attack in SEC_TAKEOVER_ATTACKS (default "takeover msgconn
# replay"; see impostor.c), each job `fhrun -n 2 victim DIR` with
# SEC_TRAFFIC=1: the ranks ping each other and put/get each other's
# segment every few ms through the attack, so an impostor has traffic to
# steal and a diverted message shows as a lost ping.
#
#   takeover  [rxm generation] impostor, with LD_PRELOAD=libsec_shim.so,
#             opens tcp;ofi_rxm endpoints announcing rank 1's ports and
#             connects to rank 0's; BREACH on any message it receives, or
#             an RMA request its libfabric logged ("invalid rma iov
#             received": rank 0's put/get meant for rank 1).
#   msgconn   [MSG generation] raw FI_EP_MSG connection requests (struct
#             ofi_cm_req claiming each member, and malformed ones) to every
#             port of both ranks, then proof, AM and RMA on any connection;
#             the job id comes from a rank's captured connection request
#             when the job speaks that handshake.
#   replay    [both] the ranks run with the capture shim (SEC_SHIM_CAPTURE:
#             the first bytes written on every connection a rank opens, a
#             root sniffer's view; fhrun itself runs without it); impostor
#             replays each captured connection to every port of the job
#             over raw TCP and keeps it open; BREACH on any byte beyond the
#             provider's connection response.
#
# A case passes only when the impostor saw no breach and found ports to
# attack, and the job exited 0 with "PASS sec_victim" (every rank alive,
# segments unchanged, SEC_HANDLER never ran, every ping and pong delivered
# once, every put/get right).  The impostor runs as user nobody when we are
# root (setpriv/runuser), else as our uid without the job key.
#
# Exit: 0 all cases passed, 1 a case failed, 77 a prerequisite is missing.
. "$(dirname "$0")/../integ/common.sh"
need_fhrun

: "${FI_TCP_IFACE:=lo}"
export FI_TCP_IFACE
export FH_CONDUIT=ofi FH_OFI_PROVIDER=tcp
unset FH_REG_STRATEGY

sec_bin() {
    first_exe "${top_builddir:+$top_builddir/tests/security/$1}" \
        "./tests/security/$1" "./$1" "$here/$1"
}
victim=$(sec_bin victim) || { echo "SKIP: tests/security/victim not built"; exit 77; }
impostor=$(sec_bin impostor) || { echo "SKIP: tests/security/impostor not built"; exit 77; }
outsider=$(sec_bin outsider) || { echo "SKIP: tests/security/outsider not built"; exit 77; }
shim=
for c in "${top_builddir:+$top_builddir/tests/security/.libs/libsec_shim.so}" \
         ./tests/security/.libs/libsec_shim.so "$here/.libs/libsec_shim.so"; do
    [ -n "$c" ] && [ -f "$c" ] && { shim=$c; break; }
done
[ -n "$shim" ] || { echo "SKIP: tests/security/.libs/libsec_shim.so not built"; exit 77; }
if command -v fi_info >/dev/null 2>&1 && ! fi_info -p tcp >/dev/null 2>&1; then
    echo "SKIP: libfabric offers no tcp provider"
    exit 77
fi

ATTACKS=${SEC_TAKEOVER_ATTACKS:-"takeover msgconn replay"}
WAIT=${SEC_WAIT:-60}               # victim's attack window, at most (s)
LISTEN=${SEC_LISTEN:-3}            # impostor's listening time per attack (s)
GRACE=${SEC_GRACE:-15}             # job's time to finish once DIR/done exists
# A preloaded shim comes before an ASan runtime in the library list.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
export ASAN_OPTIONS

# --- who the impostor runs as (as in outsider.sh) ----------------------
odir=$tmpd/impostor-bin
mkdir -p "$odir" && cp "$impostor" "$odir/impostor" && cp "$shim" "$odir/libsec_shim.so" || exit 1
chmod 755 "$tmpd" "$odir" "$odir/impostor" "$odir/libsec_shim.so"
. "$(dirname "$0")/../stranger.sh"
echo "impostor runs as $as_desc; victim runs as uid $(id -u)"

kv() { sed -n "s/^$2=//p" "$1" | head -1; }

# run_attack ATTACK
run_attack() {
    a=$1
    d=$tmpd/$a
    mkdir -p "$d"
    chmod 755 "$d"
    ran=$((ran + 1))
    t0=$(date +%s)
    # The ranks (not fhrun) run with the capture shim: msgconn reads the job
    # id from a connection request, replay replays them.  Which rank
    # connects to which is the conduit's choice, so both record.
    (SEC_TRAFFIC=1 SEC_WAIT=$WAIT SEC_CAP="$d/cap" SEC_SHIM="$shim" exec timeout -k 10 \
        $((WAIT + 90)) "$FHRUN" -n 2 --timeout $((WAIT + 60)) /bin/sh -c \
        'export SEC_SHIM_CAPTURE="$SEC_CAP" LD_PRELOAD="$SEC_SHIM"; exec "$0" "$@"' \
        "$victim" "$d") >"$d/victim.log" 2>&1 &
    job=$!
    i=0
    while [ ! -f "$d/victim.0" ] || [ ! -f "$d/victim.1" ]; do
        i=$((i + 1))
        if [ $i -gt 600 ] || ! kill -0 "$job" 2>/dev/null; then break; fi
        sleep 0.1
    done
    if [ ! -f "$d/victim.0" ] || [ ! -f "$d/victim.1" ]; then
        touch "$d/done"; wait "$job"
        fail=$((fail + 1))
        echo "FAIL attack=$a: the victim job did not start"
        tail -n 20 "$d/victim.log" | sed 's/^/     victim: /'
        return
    fi
    pid0=$(kv "$d/victim.0" pid); pid1=$(kv "$d/victim.1" pid)
    seg=$(kv "$d/victim.0" seg)
    p0=$("$outsider" --list-ports --pid "$pid0" 2>/dev/null)
    p1=$("$outsider" --list-ports --pid "$pid1" 2>/dev/null)
    cap=
    if ls "$d"/cap.* >/dev/null 2>&1; then
        cat "$d"/cap.* >"$odir/cap-$a"; chmod 644 "$odir/cap-$a"
        cap="--capture $odir/cap-$a"
    fi
    pre=
    [ "$a" = takeover ] && pre="LD_PRELOAD=$odir/libsec_shim.so"
    # shellcheck disable=SC2086
    (cd / && FI_LOG_LEVEL=warn FI_LOG_PROV=tcp exec timeout -k 5 60 $as env $pre \
        "$odir/impostor" --attack "$a" --ports0 "${p0:-0}" --ports1 "${p1:-0}" \
        --seg "$seg" --listen "$LISTEN" $cap) >"$d/impostor.log" 2>"$d/impostor.err"
    irc=$?
    touch "$d/done"
    hung=0; i=0
    while kill -0 "$job" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt $((GRACE * 10)) ]; then hung=1; kill -TERM "$job" 2>/dev/null; break; fi
        sleep 0.1
    done
    wait "$job"
    vrc=$?
    t1=$(date +%s)

    why=
    nrma=$(grep -c 'invalid rma iov received' "$d/impostor.err")
    if [ "$nrma" -gt 0 ]; then
        echo "BREACH takeover: the impostor's libfabric received $nrma RMA request(s) it could not serve (rank 0's put/get meant for rank 1)" >>"$d/impostor.log"
        irc=1
    fi
    case $irc in
        0) ;;
        1) why="$why; the impostor achieved $(grep -c '^BREACH' "$d/impostor.log") breach(es)" ;;
        77) echo "SKIP attack=$a: $(grep SKIP "$d/impostor.log")"; ran=$((ran - 1)); skipped=1; return ;;
        124|137) why="$why; the impostor did not finish within 60 s" ;;
        *) why="$why; the impostor failed to run (exit $irc)" ;;
    esac
    [ -z "$p0" ] && why="$why; expected to list rank 0's listening ports, saw none"
    nalive=$(grep -c '^\[[0-9]*\] alive after the attack' "$d/victim.log")
    if [ $hung -eq 1 ]; then
        why="$why; the victim job HUNG (killed $GRACE s after the attack; alive lines: $nalive of 2)"
    elif [ "$nalive" -lt 2 ]; then
        why="$why; a victim rank DIED during the attack (job exit $vrc; alive lines: $nalive of 2)"
    elif [ $vrc -ne 0 ] || ! grep -q '^PASS sec_victim' "$d/victim.log"; then
        why="$why; the victim saw the attack succeed (job exit $vrc, no 'PASS sec_victim')"
    fi
    if [ -z "$why" ]; then
        echo "ok   attack=$a ($((t1 - t0)) s): no breach; victim: $(grep '^PASS sec_victim' "$d/victim.log")"
        grep -E '^(msgconn|replay|takeover): .*(requests|answered|as rank 1)' "$d/impostor.log" |
            head -n 6 | sed 's/^/     | /'
        return
    fi
    fail=$((fail + 1))
    echo "FAIL attack=$a ($((t1 - t0)) s):${why#;}"
    echo "     expected: no BREACH from the impostor, victim exit 0 with 'PASS sec_victim'"
    echo "     ---- what the impostor did (as $as_desc; rank 0 ports $p0, rank 1 ports $p1) ----"
    grep -v '^msgconn: .*: refused' "$d/impostor.log" | sed 's/^/     | /' | head -n 40
    echo "     ---- what the victim saw ----"
    grep -E 'FAIL|FORGED|NOTE|alive|traffic|firehose\[|fhrun:|PASS' "$d/victim.log" | sed 's/^/     | /' | head -n 30
    grep -E -A12 '^==[0-9]+==ERROR|^SUMMARY: |runtime error:' "$d/victim.log" | sed 's/^/     | /' | head -n 40
}

for a in $ATTACKS; do
    run_attack "$a"
done
finish
