#!/bin/sh
# pmix.sh -- rma_integrity and am_test with 4 ranks started by Open MPI's
# mpirun (PMIx bootstrap instead of fhrun).  Skips (77) when mpirun is missing
# or firehose was built without PMIx.  Checks that the ranks really formed one
# 4-rank job (not 4 singletons).
#
# Then the runtime's own dead-peer path, with no launcher help: dead_rank on
# 2 ranks under `mpirun --enable-recovery` (mpirun does not end the job when
# a rank dies, and Open MPI 4.1 sends no PMIx event), rank 1 SIGKILLs itself
# while rank 0 is in fh_put, fh_atomic, fh_get_nb + fh_wait, fh_barrier,
# fh_finalize (as it dies, or after rank 0 saw its connection lost:
# finalize_seen) or an AM request to it (and, with FH_SHM=auto, in the node
# group's shared barrier).  Passes when rank 0's call returned
# FH_ERR_PEER_DEAD or the runtime ended rank 0 with a message naming rank 1,
# within dead_rank's --bound (30 s; it fails "stuck in <call>" otherwise),
# and no process is left.  Over tcp also on 8 ranks in fh_barrier: every
# survivor must fail naming rank 7 -- the leader that lost its connection
# with it tells the others (coll.c pass_on_failure), so none names instead
# a survivor that gave up before it (as before that report existed).
. "$(dirname "$0")/common.sh"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }

pmix=no
for lib in "${top_builddir:+$top_builddir/.libs/libfirehose.so}" \
           ./.libs/libfirehose.so ../../.libs/libfirehose.so; do
    if [ -n "$lib" ] && [ -f "$lib" ]; then
        ldd "$lib" 2>/dev/null | grep -q pmix && pmix=yes
        break
    fi
done
FHINFO=${FHINFO:-${top_builddir:+$top_builddir/tools/fhinfo}}
if [ $pmix = no ] && [ -n "$FHINFO" ] && [ -x "$FHINFO" ] &&
   "$FHINFO" 2>/dev/null | grep -iq '^ *launchers:.*pmix'; then
    pmix=yes
fi
[ $pmix = yes ] || { echo "SKIP: firehose built without PMIx"; exit 77; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for prog in rma_integrity am_test; do
        bin=$(fh_bin $prog) || { echo "SKIP: $prog not built"; continue; }
        case $prog in rma_integrity) args="--iters 4";; *) args="--msgs 300";; esac
        before=$fail
        run_case "mpirun -np 4 $prog FH_OFI_PROVIDER=$p" "$prog" \
            mpirun --oversubscribe -np 4 --mca osc ^rdma -x FH_OFI_PROVIDER \
            "$bin" $args
        if [ "$fail" -eq "$before" ] && ! grep -q "^$prog: 4 ranks" "$tmpd/run.log"; then
            fail=$((fail + 1))
            echo "FAIL mpirun -np 4 $prog: expected the line '$prog: 4 ranks"\
                 "...' (one job), saw:"
            grep -E "^$prog: " "$tmpd/run.log" | head -5
        fi
    done
done

# dead_peer MODE [NP]: see above.
dead_peer() {
    mode=$1 np=${2:-2}
    victim=$((np - 1))
    bin=$(fh_bin dead_rank) || { echo "SKIP: dead_rank not built"; return; }
    desc="mpirun --enable-recovery -np $np dead_rank $mode FH_OFI_PROVIDER=$p FH_SHM=$FH_SHM FH_PEER_WATCH=$FH_PEER_WATCH"
    marker="fhdp$$.$mode.$p.$np"
    ran=$((ran + 1))
    t0=$(date +%s)
    timeout -k 5 90 mpirun --oversubscribe -np "$np" --mca osc ^rdma --enable-recovery \
        -x FH_OFI_PROVIDER -x FH_SHM -x FH_PEER_WATCH "$bin" "$mode" --bound 30 "--marker=$marker" \
        >"$tmpd/dp.out" 2>"$tmpd/dp.err"
    rc=$?
    dt=$(($(date +%s) - t0))
    bad=
    [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || bad="$bad; mpirun did not end within 90 s"
    grep -q 'FAIL' "$tmpd/dp.out" && bad="$bad; $(grep -h FAIL "$tmpd/dp.out" | head -1)"
    grep -q 'kill(getpid(), SIGKILL)' "$tmpd/dp.out" || bad="$bad; the victim never reached its kill"
    r=0
    while [ "$r" -lt "$victim" ]; do
        if ! grep -Eq "^\\[$r\\] dead_rank: .* returned FH_ERR_PEER_DEAD" "$tmpd/dp.out" &&
           ! grep -Eq "^firehose\\[$r\\]: .*rank $victim([^0-9].*)? (died|unreachable)" "$tmpd/dp.err"; then
            bad="$bad; rank $r neither got FH_ERR_PEER_DEAD nor a message naming rank $victim"
        elif [ "$np" -gt 2 ] &&
             ! grep -Eq "^\\[$r\\] dead_rank: .* returned FH_ERR_PEER_DEAD .*rank $victim[^0-9]" "$tmpd/dp.out"; then
            bad="$bad; rank $r's error does not name rank $victim: $(grep "^\\[$r\\]" "$tmpd/dp.out" | tail -n 1)"
        fi
        r=$((r + 1))
    done
    sleep 1
    left=$(pgrep -f -- "$marker")
    if [ -n "$left" ]; then
        bad="$bad; processes left behind: $(echo $left)"
        kill -9 $left 2>/dev/null     # ours: they carry this run's marker
    fi
    if [ -z "$bad" ]; then
        echo "ok   $desc ($dt s): $(cat "$tmpd/dp.err" "$tmpd/dp.out" |
            grep -E '^(firehose)?\[0\]' | grep -E "rank $victim|PEER_DEAD" | head -1)"
    else
        fail=$((fail + 1))
        echo "FAIL $desc ($dt s, exit $rc)${bad}"
        echo "---- stdout ----"; tail -n 10 "$tmpd/dp.out"
        echo "---- stderr ----"; grep -v '^ *\[' "$tmpd/dp.err" | tail -n 10
    fi
}
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    # tcp: the lost connections alone must tell (as for a peer on another
    # host), not the check of this host's processes (peer.c), which ends the
    # survivor within a second and would hide a wait that never ends.  shm
    # (rdm endpoints) loses no connection: there only that check tells.
    FH_PEER_WATCH=1
    [ "$p" = tcp ] && FH_PEER_WATCH=0
    export FH_PEER_WATCH
    for mode in put atomic wait barrier finalize finalize_seen am; do
        dead_peer "$mode"
    done
    [ "$p" = tcp ] && dead_peer barrier 8
done
# The node path: rank 0 waits in the group's shared-memory barrier
# (node_coll.c), which no message from the dead rank will ever end.
p=tcp FH_OFI_PROVIDER=tcp FH_SHM=auto FH_PEER_WATCH=1
export FH_OFI_PROVIDER FH_SHM FH_PEER_WATCH
dead_peer barrier
finish
