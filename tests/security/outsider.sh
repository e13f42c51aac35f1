#!/bin/sh
# outsider.sh -- a stranger on the host attacks a running firehose job.
#
# What it tests: that a process which is not part of a firehose job cannot
# read or write a rank's segment over the ofi conduit (tcp on loopback:
# the job listens with message endpoints that refuse every connection
# request that does not authenticate; the outsider speaks tcp;ofi_rxm, and
# is refused), cannot make a rank run an active-message handler, and cannot
# kill or hang a rank with runt, oversized, mis-sourced or garbage messages.
#
# Over tcp (FH_OFI_PROVIDER=tcp, FI_TCP_IFACE=lo), for every registration
# strategy in SEC_STRATEGIES (default "pin-everything default":
# pin-everything registers the whole segment at once, so a remote key
# exists to guess; "default" leaves FH_REG_STRATEGY unset) and every attack
# in SEC_ATTACKS (default "rma am big badsrc garbage runt", see outsider.c),
# one job per case so that an attack that kills a rank does not hide the
# others, it
#   1. starts a fresh 2-rank job `fhrun -n 2 tests/security/victim DIR`
#      in the background and waits for DIR/victim.0 (rank 0's pid, segment
#      address, pattern seed);
#   2. lists rank 0's listening TCP ports (outsider --list-ports, as the
#      invoking user, who can read /proc/<pid>/fd) and runs
#      tests/security/outsider against them AS ANOTHER USER (nobody, via
#      setpriv or runuser) when we are root; otherwise as the same user,
#      without the job's key (fhrun's), which the outsider never has anyway;
#   3. creates DIR/done, which ends the victim's attack window, and waits
#      for the job.
# A case passes only when all of these hold:
#   - the outsider saw no breach (exit 0: no fi_read/fi_write with a guessed
#     key completed; a read that returns the victim's pattern is the worst
#     case) and found at least one port of the victim to attack;
#   - the job exited 0 and rank 0 printed "PASS sec_victim" (every rank
#     alive, segment unchanged byte for byte, SEC_HANDLER never ran) --
#     a rank that died, or a job that hung until its timeout, fails.
# Otherwise it prints what the outsider achieved (its BREACH lines, the
# victim's FAIL / FORGED lines and the runtime's fatal messages).
#
# net (the default provider, libfabric's other TCP-sockets provider): the
# same attacks on a victim over net, strategy "default" only (the
# strategies differ in the keys there are to guess, not in how the ports
# answer); the outsider speaks tcp;ofi_rxm to net's ports as to tcp's.
#
# shm (SEC_PROVIDERS, default "net tcp shm"): one more job under
# pin-everything, attacked with every attack at once.  firehose names shm
# endpoints fh_<pid>_<path>_<64 random bits>, which cannot be guessed, but
# the shm provider backs each with a file of that name in /dev/shm, which
# anyone can list; the outsider reads the names there.  The files are mode
# 0600, so another uid cannot map them.  A process of the job's own uid can,
# and then reads the segment with any key (shm 1.17 reads by CMA,
# process_vm_readv, without checking the key) -- but the same uid can
# ptrace the ranks anyway, so that is no boundary: the shm case runs only
# when the outsider runs as another user, and is skipped otherwise.
#
# Exit: 0 all cases passed, 1 a case failed, 77 a prerequisite is missing
# (fhrun or the programs not built, no tcp provider).
. "$(dirname "$0")/../integ/common.sh"
need_fhrun

: "${FI_TCP_IFACE:=lo}"
export FI_TCP_IFACE
export FH_CONDUIT=ofi FH_OFI_PROVIDER=tcp

sec_bin() {
    first_exe "${top_builddir:+$top_builddir/tests/security/$1}" \
        "./tests/security/$1" "./$1" "$here/$1"
}
victim=$(sec_bin victim) || { echo "SKIP: tests/security/victim not built"; exit 77; }
outsider=$(sec_bin outsider) || { echo "SKIP: tests/security/outsider not built"; exit 77; }
if command -v fi_info >/dev/null 2>&1 && ! fi_info -p tcp >/dev/null 2>&1; then
    echo "SKIP: libfabric offers no tcp provider (fi_info -p tcp finds nothing)"
    exit 77
fi

PROVIDERS=${SEC_PROVIDERS:-"net tcp shm"}
STRATEGIES=${SEC_STRATEGIES:-"pin-everything default"}
ATTACKS=${SEC_ATTACKS:-"rma am big badsrc garbage runt"}
WAIT=${SEC_WAIT:-120}              # victim's attack window, at most (s)
OTIMEOUT=${SEC_OUTSIDER_TIMEOUT:-300}
GRACE=${SEC_GRACE:-30}             # job's time to finish once DIR/done exists

# --- who the outsider runs as ------------------------------------------
# The outsider binary is copied where any user can run it (the build tree
# may sit in a directory other users cannot enter).
odir=$tmpd/outsider-bin
mkdir -p "$odir" && cp "$outsider" "$odir/outsider" || exit 1
chmod 755 "$tmpd" "$odir" "$odir/outsider"
. "$(dirname "$0")/../stranger.sh"
if [ -z "$as" ]; then
    echo "NOTE: cannot switch users (need root and a 'nobody' user): the" \
         "outsider runs as the same user as the job, without the job key"
fi
echo "outsider runs as $as_desc; victim runs as uid $(id -u)"

# kv FILE KEY -> value of KEY=value in FILE
kv() { sed -n "s/^$2=//p" "$1" | head -1; }

# run_attack PROVIDER STRATEGY ATTACK
run_attack() {
    p=$1; s=$2; a=$3
    op=$p                 # the outsider's provider: tcp's sockets for net too
    [ "$p" = net ] && op=tcp
    desc="FH_OFI_PROVIDER=$p FH_REG_STRATEGY=$s attack=$a"
    d=$tmpd/$p-$s-$a
    mkdir -p "$d"
    ran=$((ran + 1))
    t0=$(date +%s)
    if [ "$s" = default ]; then
        (unset FH_REG_STRATEGY; FH_OFI_PROVIDER=$p SEC_WAIT=$WAIT exec timeout -k 10 \
            $((WAIT + 90)) "$FHRUN" -n 2 --timeout $((WAIT + 60)) "$victim" "$d") \
            >"$d/victim.log" 2>&1 &
    else
        (FH_REG_STRATEGY=$s FH_OFI_PROVIDER=$p SEC_WAIT=$WAIT exec timeout -k 10 \
            $((WAIT + 90)) "$FHRUN" -n 2 --timeout $((WAIT + 60)) "$victim" "$d") \
            >"$d/victim.log" 2>&1 &
    fi
    job=$!
    i=0
    while [ ! -f "$d/victim.0" ] || [ ! -f "$d/victim.1" ]; do
        i=$((i + 1))
        if [ $i -gt 600 ] || ! kill -0 "$job" 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    if [ ! -f "$d/victim.0" ] || [ ! -f "$d/victim.1" ]; then
        touch "$d/done"
        wait "$job"
        fail=$((fail + 1))
        echo "FAIL $desc: the victim job did not start (no $d/victim.0 and .1 within 60 s)"
        sed 's/^/     victim: /' "$d/victim.log" | tail -n 20
        return
    fi
    pid=$(kv "$d/victim.0" pid)
    seg=$(kv "$d/victim.0" seg)
    seed=$(kv "$d/victim.0" seed)
    # The outsider attacks only rank 0's own ports (listed here by us, who
    # can read /proc/<pid>/fd; it checks that /proc/net/tcp shows them to
    # it): a stranger would scan every listening port of the uid, but on a
    # shared host that would hit other people's jobs.
    ports_opt=
    if [ "$op" = tcp ]; then
        ports=$("$outsider" --list-ports --pid "$pid" 2>"$d/ports.err")
        if [ -n "$ports" ]; then
            ports_opt="--ports $ports"
        else
            echo "     (could not list rank 0's ports: $(cat "$d/ports.err"))"
            ports_opt="--ports 0"
        fi
    fi
    # shellcheck disable=SC2086  # $as and $ports_opt are word lists
    (cd / && exec timeout -k 5 "$OTIMEOUT" $as "$odir/outsider" --provider "$op" \
        --pid "$pid" $ports_opt --seg "$seg" --seed "$seed" --attack "$a") \
        >"$d/outsider.log" 2>&1
    orc=$?
    touch "$d/done"
    # The ranks check DIR/done every few ms; a job still running GRACE s
    # later is hung (e.g. a rank deadlocked after the attack).
    hung=0
    i=0
    while kill -0 "$job" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt $((GRACE * 10)) ]; then
            hung=1
            kill -TERM "$job" 2>/dev/null
            break
        fi
        sleep 0.1
    done
    wait "$job"
    vrc=$?
    t1=$(date +%s)

    why=
    nports=$(grep -c '^discovery: \(target listens\|/dev/shm lists\)' "$d/outsider.log")
    case $orc in
        0) ;;
        1) why="$why; the outsider achieved $(grep -c '^BREACH' "$d/outsider.log") breach(es) (its BREACH lines below)" ;;
        77) echo "SKIP $desc: $(grep SKIP "$d/outsider.log")"
            skipped=1; ran=$((ran - 1)); return ;;
        124|137) why="$why; the outsider did not finish within $OTIMEOUT s" ;;
        *) why="$why; the outsider failed to run (exit $orc)" ;;
    esac
    if [ "$nports" -eq 0 ]; then
        why="$why; expected the outsider to find rank 0's endpoints (ports or /dev/shm names), saw none (the test attacked nothing)"
    fi
    nalive=$(grep -c '^\[[0-9]*\] alive after the attack' "$d/victim.log")
    if [ $hung -eq 1 ]; then
        why="$why; the victim job HUNG: still running $GRACE s after the attack ended (killed; alive lines: $nalive of 2)"
    elif [ "$nalive" -lt 2 ]; then
        why="$why; a victim rank DIED during the attack (job exit $vrc; alive lines: $nalive of 2)"
    elif [ $vrc -ne 0 ] || ! grep -q '^PASS sec_victim' "$d/victim.log"; then
        why="$why; the victim saw the attack succeed (job exit $vrc, no 'PASS sec_victim')"
    fi
    if [ -z "$why" ]; then
        echo "ok   $desc ($((t1 - t0)) s): outsider found $nports endpoint(s), no breach; victim: $(grep '^PASS sec_victim' "$d/victim.log")"
        { grep '^discovery: /dev/shm' "$d/outsider.log" | head -n 3
          grep -m 1 'fi_av_insert' "$d/outsider.log"; } | sed 's/^/     | /'
        return
    fi
    fail=$((fail + 1))
    echo "FAIL $desc ($((t1 - t0)) s):${why#;}"
    echo "     expected: no BREACH from the outsider, victim exit 0 with 'PASS sec_victim'"
    echo "     ---- what the outsider did (as $as_desc) ----"
    grep -E '^(BREACH|rma:|am:|  |outsider: (uid|done))' "$d/outsider.log" | sed 's/^/     | /' | head -n 40
    echo "     ---- what the victim saw ----"
    grep -E 'FAIL|FORGED|NOTE|alive|firehose\[|fhrun:|PASS' "$d/victim.log" | sed 's/^/     | /' | head -n 30
    # a sanitizer's report (an ASan build exits 1 after fh_finalize on one)
    grep -E -A12 '^==[0-9]+==ERROR|^SUMMARY: |runtime error:' "$d/victim.log" | sed 's/^/     | /' | head -n 60
}

for p in $PROVIDERS; do
    if command -v fi_info >/dev/null 2>&1 && ! fi_info -p "$p" >/dev/null 2>&1; then
        echo "SKIP provider $p: fi_info -p $p finds nothing"
        continue
    fi
    case $p in
    net)
        for a in $ATTACKS; do
            run_attack net default "$a"
        done ;;
    tcp)
        for s in $STRATEGIES; do
            for a in $ATTACKS; do
                run_attack tcp "$s" "$a"
            done
        done ;;
    shm)
        if [ -z "$as" ]; then
            echo "SKIP provider shm: the outsider would run as the job's own uid, which"
            echo "     can read the ranks' memory anyway (ptrace, process_vm_readv); the shm"
            echo "     boundary is the 0600 mode of the /dev/shm files, which needs another uid"
            continue
        fi
        run_attack shm pin-everything "$(echo "$ATTACKS" | tr ' ' ',')" ;;
    *)
        echo "SKIP provider $p: the outsider knows how to find tcp, net and shm endpoints only" ;;
    esac
done
finish
