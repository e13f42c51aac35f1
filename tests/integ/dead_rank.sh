#!/bin/sh
# dead_rank.sh -- a rank SIGKILLs itself after a barrier while the others loop
# in fh_barrier / fh_get / AM requests.  For N = 2 and 4 and every provider it
# asserts: fhrun exits non-zero (within 60 s: a bound against a hang, not a
# measure of speed; the time is printed); fhrun reports
# "rank D ... killed by signal 9"; some survivor prints a line naming rank D;
# no process of the run remains afterwards.
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

for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    check_dead 2 barrier
    check_dead 2 get
    check_dead 4 mixed
    check_dead 4 am
done
finish
