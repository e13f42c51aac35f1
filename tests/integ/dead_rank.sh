#!/bin/sh
# dead_rank.sh -- a rank SIGKILLs itself after a barrier while the others loop
# in fh_barrier / fh_get / AM requests.  For N = 2 and 4 and every provider it
# asserts: fhrun exits non-zero (within 60 s: a bound against a hang, not a
# measure of speed; the time is printed); fhrun reports
# "rank D ... killed by signal 9"; some survivor prints a line naming rank D;
# no process of the run remains afterwards.
# Then kill -9 from outside, while a 4-rank job holds its segments
# (node_local_test --hold; with FH_SHM=auto in groups of 2, so the victim's
# memory is mapped by its group peer): of rank 1, of fhrun itself, and of
# fhrun whose ranks run under a forking --prefix-cmd (timeout), so that
# the launcher's PR_SET_PDEATHSIG does not reach them and they must notice
# its death themselves.  Within KILL_BOUND seconds every process of the job
# must be gone; for the rank, fhrun exits non-zero naming it and a survivor
# names it too; behind the forking prefix every rank says it lost the
# launcher.  Nothing may be left: the job's private $TMPDIR empty (fhrun's
# socket directory), nothing in /dev/shm named after a pid of the job or
# mapped/opened by it during the hold.
. "$(dirname "$0")/common.sh"
need_fhrun
bin=$(fh_bin dead_rank) || { echo "SKIP: dead_rank not built"; exit 77; }

check_dead() {
    n=$1; mode=$2
    d=$((n - 1))
    marker="--marker=fhdr$$.$n.$mode.$FH_OFI_PROVIDER"
    desc="dead_rank -n $n $mode FH_OFI_PROVIDER=$FH_OFI_PROVIDER"
    ran=$((ran + 1))
    t0=$(date +%s%N)
    timeout -k 5 90 "$FHRUN" -n "$n" --timeout 80 "$bin" "$mode" "$marker" \
        >"$tmpd/out" 2>"$tmpd/err"
    rc=$?
    tend=$(date +%s%N)
    total=$(( (tend - t0) / 1000000 ))
    # time from the victim's kill to fhrun's exit
    kms=$(sed -n 's/.*SIGKILL) at epoch_ms=\([0-9]*\).*/\1/p' "$tmpd/out" | head -1)
    if [ -n "$kms" ]; then ms=$(( tend / 1000000 - kms )); else ms=$total; fi
    bad=
    [ $rc -ne 0 ] || bad="$bad; fhrun exited 0 (expected non-zero)"
    [ $rc -ne 124 ] || bad="$bad; fhrun did not end within 90 s (timeout killed it)"
    [ -n "$kms" ] || bad="$bad; the victim never reached its kill"
    [ $ms -le 60000 ] || bad="$bad; fhrun ended $ms ms after the kill (bound: 60000)"
    grep -Eq "^fhrun: .*rank $d .*killed by signal 9" "$tmpd/err" ||
        bad="$bad; no 'fhrun: rank $d (pid P) killed by signal 9' line on stderr"
    cat "$tmpd/err" "$tmpd/out" | grep -v '^fhrun:' |
        grep -Eiq "rank $d([^0-9]|\$)" ||
        bad="$bad; no survivor message naming rank $d"
    if grep -q 'FAIL' "$tmpd/out" "$tmpd/err"; then
        bad="$bad; a survivor reported FAIL"
    fi
    sleep 1
    left=$(pgrep -f -- "$marker")
    if [ -n "$left" ]; then
        bad="$bad; processes left behind: $(echo $left)"
        ps -o pid,stat,etime,args -p "$(echo $left | tr ' ' ,)" 2>/dev/null
        kill -9 $left 2>/dev/null   # ours: they carry this run's marker
    fi
    if [ -z "$bad" ]; then
        echo "ok   $desc: exit $rc, $ms ms after the kill ($total ms in all)"
        grep -E "rank $d" "$tmpd/err" | head -3 | sed 's/^/     stderr: /'
    else
        fail=$((fail + 1))
        echo "FAIL $desc: exit $rc, $ms ms after the kill ($total ms in all)${bad}"
        echo "---- stdout ----"; tail -n 20 "$tmpd/out"
        echo "---- stderr ----"; tail -n 20 "$tmpd/err"
        echo "----------------"
    fi
}

KILL_BOUND=10
hold_bin=$(fh_bin node_local_test)

# alive PID...: those of PID... that still run (zombies are gone for us:
# their memory and files are released).
alive() {
    for q in "$@"; do
        st=$(sed -n 's/^[0-9]* (.*) \([A-Z]\) .*/\1/p' /proc/"$q"/stat 2>/dev/null)
        [ -n "$st" ] && [ "$st" != Z ] && printf '%s ' "$q"
    done
}

# kill_held WHO: WHO = rank (kill -9 rank 1), launcher (kill -9 fhrun) or
# launcher-prefix (kill -9 fhrun, ranks behind "timeout 300").
kill_held() {
    who=$1
    n=4
    marker="--marker=fhkill$$.$who.$FH_OFI_PROVIDER"
    desc="kill -9 of ${who} while 4 ranks hold their segments FH_SHM=$FH_SHM FH_OFI_PROVIDER=$FH_OFI_PROVIDER"
    ran=$((ran + 1))
    group=0 extra=
    if [ "$FH_SHM" != off ]; then group=2; extra="FH_SHM_MAX_GROUP=2"; fi
    prefix=
    [ "$who" = launcher-prefix ] && prefix="timeout 300"
    jt="$tmpd/jobtmp.$who.$FH_OFI_PROVIDER"
    rm -rf "$jt"; mkdir -p "$jt"
    # /dev/shm before the job: a name there already is not the job's (an
    # earlier process of another test may have had one of its pids)
    shm_before=" $(ls /dev/shm 2>/dev/null | tr '\n' ' ') "
    env TMPDIR="$jt" $extra "$FHRUN" -n $n --timeout 60 ${prefix:+--prefix-cmd "$prefix"} \
        "$hold_bin" --group $group --hold 30 "$marker" >"$tmpd/out" 2>"$tmpd/err" &
    job=$!
    bad=
    # the ranks: processes of the job that map libfirehose; wait (10 s at
    # most) until all n are up and, on the node path, map their segment
    ranks= i=0
    while [ $i -lt 100 ]; do
        ranks=
        for q in $(pgrep -f -- "$marker"); do
            [ "$q" = "$job" ] && continue
            grep -q libfirehose /proc/"$q"/maps 2>/dev/null && ranks="$ranks $q"
        done
        set -- $ranks
        if [ $# -eq $n ]; then
            if [ "$group" -eq 0 ]; then sleep 2; break; fi
            mapped=0
            for q in $ranks; do
                grep -q 'memfd:firehose-segment' /proc/"$q"/maps 2>/dev/null && mapped=$((mapped + 1))
            done
            [ $mapped -eq $n ] && { sleep 0.5; break; }
        fi
        sleep 0.1; i=$((i + 1))
    done
    set -- $ranks
    [ $# -eq $n ] || bad="$bad; expected $n ranks holding their segments, found $# ($ranks)"
    all="$job $(pgrep -f -- "$marker" | tr '\n' ' ')"
    # what the job has in /dev/shm: mapped, open, or named after its pids
    shm=
    for q in $all; do
        shm="$shm $(grep -o '/dev/shm/[^ ]*' /proc/"$q"/maps 2>/dev/null)"
        shm="$shm $(ls -l /proc/"$q"/fd 2>/dev/null | grep -o '/dev/shm/[^ ]*')"
    done
    victim=
    case $who in
    rank)
        for q in $ranks; do
            tr '\0' '\n' <"/proc/$q/environ" 2>/dev/null | grep -qx FH_RANK=1 && victim=$q
        done
        [ -n "$victim" ] || bad="$bad; found no process of rank 1"
        ;;
    *) victim=$job ;;
    esac
    t0=$(date +%s%N)
    [ -n "$victim" ] && kill -9 "$victim"
    left=$(alive $all)
    while [ -n "$left" ] && [ $(( ($(date +%s%N) - t0) / 1000000 )) -lt $((KILL_BOUND * 1000)) ]; do
        sleep 0.1
        left=$(alive $all)
    done
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    if [ -n "$left" ]; then
        bad="$bad; processes of the job still running ${KILL_BOUND} s after the kill: $left"
        ps -o pid,stat,etime,args -p "$(echo $left | tr ' ' ,)" 2>/dev/null | sed 's/^/     /'
        kill -9 $left 2>/dev/null   # ours: the job's pids, recorded above
    fi
    wait "$job"
    rc=$?
    case $who in
    rank)
        [ $rc -ne 0 ] || bad="$bad; fhrun exited 0 (expected non-zero)"
        grep -Eq "^fhrun: .*rank 1 .*killed by signal 9" "$tmpd/err" ||
            bad="$bad; no 'fhrun: rank 1 (pid P) killed by signal 9' line on stderr"
        cat "$tmpd/err" "$tmpd/out" | grep -v '^fhrun:' | grep -Eiq 'rank 1([^0-9]|$)' ||
            bad="$bad; no survivor message naming rank 1"
        ;;
    launcher-prefix)
        lost=$(grep -c 'lost the launcher' "$tmpd/err")
        [ "$lost" -eq $n ] ||
            bad="$bad; expected each of the $n ranks to say 'lost the launcher', $lost did"
        ;;
    esac
    grep -q 'FAIL' "$tmpd/out" "$tmpd/err" && bad="$bad; a rank reported FAIL"
    # nothing left behind
    sleep 0.2
    tleft=$(cd "$jt" && find . -mindepth 1 | head -5 | tr '\n' ' ' | sed 's/ *$//')
    [ -z "$tleft" ] || bad="$bad; left in the job's TMPDIR: $tleft"
    sleft=
    for f in $shm; do [ -e "$f" ] && sleft="$sleft $f"; done
    for q in $all; do
        for f in /dev/shm/fh_"$q"_*; do
            case $shm_before in *" ${f#/dev/shm/} "*) continue ;; esac
            [ -e "$f" ] && sleft="$sleft $f"
        done
    done
    sleft=$(for f in $sleft; do echo "$f"; done | sort -u | tr '\n' ' ' | sed 's/ *$//')
    if [ -n "$sleft" ]; then
        bad="$bad; left in /dev/shm: $sleft"
        rm -f $sleft     # the job's: named after its pids or mapped by it
    fi
    rm -rf "$jt"
    if [ -z "$bad" ]; then
        echo "ok   $desc: everything gone $ms ms after the kill, fhrun exit $rc, nothing left"
        grep -E "rank 1|lost the launcher" "$tmpd/err" | head -2 | sed 's/^/     stderr: /'
    else
        fail=$((fail + 1))
        echo "FAIL $desc (fhrun exit $rc, $ms ms)${bad}"
        echo "---- stdout ----"; tail -n 10 "$tmpd/out"
        echo "---- stderr ----"; tail -n 10 "$tmpd/err"
        echo "----------------"
    fi
}

for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    check_dead 2 barrier
    check_dead 2 get
    check_dead 4 mixed
    check_dead 4 am
    if [ -n "$hold_bin" ]; then
        kill_held rank
        kill_held launcher
        kill_held launcher-prefix
    fi
done
[ -n "$hold_bin" ] || echo "SKIP kill -9 of a holding job: node_local_test not built"
finish
