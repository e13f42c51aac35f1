#!/bin/sh
# node_local.sh -- the node path: ranks of one node group reach each
# other's segments with loads and stores (firehose/node/, FH_SHM).
#
# Three ways, each over tcp (the AMs and the ranks outside the group still
# use the conduit):
#   one group   FH_SHM=auto, every rank of the host in one group;
#   mixed       FH_SHM=auto FH_SHM_MAX_GROUP=2 on 4 ranks: {0,1} and {2,3}
#               share, the pairs talk through the network;
#   off         FH_SHM=off: nobody shares (fh_addr_local of a peer is NULL).
# node_local_test checks fh_addr_local, stores through it, every put/get
# form and atomics mixed over both paths; rma_integrity, atomic_test,
# atomic_stats_test (node-path puts and atomics counted per peer),
# barrier_test and am_test (AMs through the node rings) run one group and
# mixed too (the rest of the integration suite runs with FH_SHM=off, as
# before the node path); barrier_test also checks which barrier stages ran
# (one group: shared memory only, no AM; mixed: the leaders' network
# stage; FH_NODE_BARRIER: both algorithms of a one-group job);
# coll_mismatch_test checks that disagreeing collectives fail on every
# rank; dead_rank.sh runs with FH_SHM=auto.
# Then, while a job holds its segment: the ranks map it as a memfd and map
# nothing from /dev/shm (so nothing can be left there); and, when we are
# root, another user cannot open it through /proc.
. "$(dirname "$0")/common.sh"
need_fhrun
export FH_OFI_PROVIDER=tcp

FH_SHM=auto; export FH_SHM
for n in 2 4; do
    run_np node_local_test "$n" --group "$n"
done
# The AMs of a one-group job take the rings, to every other rank.
ran=$((ran + 1))
if FH_VERBOSE=2 "$FHRUN" -n 3 --timeout 60 "$(fh_bin node_local_test)" --group 3 \
       >"$tmpd/rings.log" 2>&1 &&
   [ "$(grep -c 'AMs to 2 rank(s) through shared rings (all of them)' "$tmpd/rings.log")" -eq 3 ]; then
    echo "ok   rings: every rank of a 3-rank group sends its AMs to the other two through rings"
else
    echo "FAIL rings: expected each of 3 ranks to log 'AMs to 2 rank(s) through shared rings (all of them)':"
    grep -E 'node group|FAIL' "$tmpd/rings.log" | head -10
    fail=$((fail + 1))
fi
FH_SHM_MAX_GROUP=2; export FH_SHM_MAX_GROUP
run_np node_local_test 4 --group 2
unset FH_SHM_MAX_GROUP
FH_SHM=off
run_np node_local_test 3 --group 0

FH_SHM=auto
# The barrier (node_coll.c): barrier_test NP [FH_SHM_MAX_GROUP] LEADERS --
# every rank logs (FH_VERBOSE=2) that its group meets in shared memory and
# that LEADERS ranks take part in the network stage; with one (the job is
# one group) rank 0 sent no AM at all (FH_STATS=1: am_sent 0).
barrier_stages() {
    [ -n "$2" ] && { FH_SHM_MAX_GROUP=$2; export FH_SHM_MAX_GROUP; }
    FH_VERBOSE=2 FH_STATS=1; export FH_VERBOSE FH_STATS
    run_np barrier_test "$1"
    unset FH_SHM_MAX_GROUP FH_VERBOSE FH_STATS
    c=$(grep -c "node barrier: shared memory.*; $3 rank(s) in the network stage" "$log")
    if [ "$c" -ne "$1" ]; then
        echo "FAIL barrier_test -n $1${2:+ FH_SHM_MAX_GROUP=$2}: expected $1 ranks to log" \
             "'node barrier: shared memory ...; $3 rank(s) in the network stage', saw $c"
        grep 'node barrier' "$log" | head -8
        fail=$((fail + 1))
    fi
    [ "$3" -eq 1 ] && expect_stat total am_sent -eq 0
}
# 8 ranks on 2 cores in one group: waits sleep on the inboxes' futexes.
barrier_stages 8 "" 1
barrier_stages 3 "" 1
barrier_stages 4 2 2
# Both barriers of a one-group job (FH_NODE_BARRIER): the dissemination
# (auto's choice when every rank has a CPU) and the shared count (when
# ranks outnumber CPUs), a power of two of ranks and not, with disagreeing
# collectives through each.
FH_NODE_BARRIER=dissemination; export FH_NODE_BARRIER
run_np barrier_test 3
run_np coll_mismatch_test 5
FH_NODE_BARRIER=count
run_np barrier_test 2
run_np coll_mismatch_test 2
unset FH_NODE_BARRIER
ran=$((ran + 1))
if FH_VERBOSE=2 "$FHRUN" -n 2 --timeout 60 "$(fh_bin barrier_test)" >"$tmpd/bar.log" 2>&1 &&
   [ "$(grep -c 'node barrier: shared memory.*(dissemination)' "$tmpd/bar.log")" -eq 2 ]; then
    echo "ok   a 2-rank job on $(nproc) CPUs meets by dissemination"
else
    echo "FAIL a 2-rank job on $(nproc) CPUs: expected both ranks to log '(dissemination)':"
    grep -E 'node barrier|FAIL' "$tmpd/bar.log" | head -5
    fail=$((fail + 1))
fi
# More ranks than cores (FH_WAIT_SPIN unset): every rank's waits yield at
# once (path.c, fh_wait_init); with FH_WAIT_SPIN set, its value holds.
cores=$(nproc 2>/dev/null || echo 0)
if [ "$cores" -gt 0 ] && [ "$cores" -lt 8 ]; then
    ran=$((ran + 1))
    if (unset FH_WAIT_SPIN; FH_VERBOSE=1 "$FHRUN" -n 8 --timeout 60 "$(fh_bin barrier_test)") \
           >"$tmpd/spin.log" 2>&1 &&
       [ "$(grep -c "8 ranks on $cores cores here: waits yield at once" "$tmpd/spin.log")" -eq 8 ] &&
       FH_WAIT_SPIN=32 FH_VERBOSE=1 "$FHRUN" -n 8 --timeout 60 "$(fh_bin barrier_test)" \
           >"$tmpd/spin2.log" 2>&1 && ! grep -q 'waits yield at once' "$tmpd/spin2.log"; then
        echo "ok   8 ranks on $cores cores: waits yield at once, unless FH_WAIT_SPIN is set"
    else
        echo "FAIL 8 ranks on $cores cores: expected every rank to log 'waits yield at once'"
        echo "     (and none with FH_WAIT_SPIN=32):"
        grep -E 'yield|FAIL' "$tmpd/spin.log" "$tmpd/spin2.log" | head -10
        fail=$((fail + 1))
    fi
fi
for t in rma_integrity atomic_test atomic_stats_test am_test; do
    run_np "$t" 3
    FH_SHM_MAX_GROUP=2; export FH_SHM_MAX_GROUP
    run_np "$t" 4
    unset FH_SHM_MAX_GROUP
done
# Collectives that disagree fail on every rank (FH_ERR_STATE), whichever
# rank differs: the signature range is combined in the groups' shared
# barrier, then among the leaders -- one group, two groups of two, a group
# of three with a group of one.
run_np coll_mismatch_test 3
for g in 2 3; do
    FH_SHM_MAX_GROUP=$g; export FH_SHM_MAX_GROUP
    run_np coll_mismatch_test 4
done
unset FH_SHM_MAX_GROUP

# FH_SEGMENT=everything: a member's heap, static data and stack, outside
# every segment, by cross-memory attach (FH_SHM_CMA=auto: no Yama here, or
# scope 0/1), or through the network (FH_SHM_CMA=off); mixed groups: CMA
# inside, the network across.  Yama scope 1 itself is tested in the rxe VM
# (tests/vm/cma-yama.sh, in make check-rxe), where the kernel has Yama.
cma_run() {  # cma_run NP EXPECT GROUP VERBOSE-PATTERN [ENV...]
    np=$1 expect=$2 group=$3 pat=$4
    shift 4
    ran=$((ran + 1))
    if env FH_SEGMENT=everything FH_REG_STRATEGY=firehose FH_VERBOSE=1 FH_STATS=0 "$@" \
           "$FHRUN" -n "$np" --timeout 120 "$(fh_bin node_cma_test)" --expect "$expect" \
           --group "$group" >"$tmpd/cma.log" 2>&1 &&
       grep -q "PASS node_cma_test ($expect)" "$tmpd/cma.log" &&
       [ "$(grep -c "$pat" "$tmpd/cma.log")" -eq "$np" ]; then
        echo "ok   node_cma_test -n $np --expect $expect --group $group $*"
    else
        echo "FAIL node_cma_test -n $np --expect $expect --group $group $* (want each rank"
        echo "     to log '$pat'):"
        grep -E 'cross-memory|FAIL|error' "$tmpd/cma.log" | head -10
        echo "     its last lines:"
        tail -n 5 "$tmpd/cma.log" | sed 's/^/     /'
        fail=$((fail + 1))
    fi
}
# What fhinfo --node finds (it tries CMA between two siblings, as fh_init
# does) decides what the runtime must have chosen.
fhinfo=$(first_exe "${FHINFO:-}" "${top_builddir:+$top_builddir/tools/fhinfo}" \
    ./tools/fhinfo "$here/../../tools/fhinfo") || fhinfo=
ran=$((ran + 1))
if [ -n "$fhinfo" ] && "$fhinfo" --node >"$tmpd/fhinfo.log" 2>&1 &&
   grep -q '^    shared memory: usable' "$tmpd/fhinfo.log"; then
    echo "ok   fhinfo --node: $(sed -n 's/^        //p' "$tmpd/fhinfo.log")"
else
    echo "FAIL fhinfo --node: expected 'shared memory: usable':"
    cat "$tmpd/fhinfo.log" 2>/dev/null
    fail=$((fail + 1))
fi
if grep -q '^        usable' "$tmpd/fhinfo.log" 2>/dev/null; then
    cma_run 2 cma 2 'cross-memory attach to 1 of 1 node member'
    cma_run 3 cma 3 'cross-memory attach to 2 of 2 node member'
    cma_run 4 cma 2 'cross-memory attach to 1 of 1 node member' FH_SHM_MAX_GROUP=2
else
    cma_run 2 net 2 'cross-memory attach to 0 of 1 node member'
fi
cma_run 2 net 2 'routes: self, node to 1' FH_SHM_CMA=off

# A member killed with SIGKILL: the survivors, waiting on its rings or its
# memory, end the job naming it (dead_rank.sh's checks, on the node path).
ran=$((ran + 1))
if FH_TEST_PROVIDERS=tcp sh "$here/dead_rank.sh" >"$tmpd/dead.log" 2>&1; then
    echo "ok   dead_rank.sh with FH_SHM=auto: $(tail -n 1 "$tmpd/dead.log")"
else
    echo "FAIL dead_rank.sh with FH_SHM=auto:"
    tail -n 30 "$tmpd/dead.log"
    fail=$((fail + 1))
fi

# A held job: its ranks' memory maps and, as another user, their memfds.
# The memfd is reachable only as /proc/<pid>/fd/<n>, which the kernel opens
# for the same user only.
other=""
if [ "$(id -u)" -eq 0 ]; then
    if command -v setpriv >/dev/null 2>&1; then
        other="setpriv --reuid=65534 --regid=65534 --clear-groups"
    elif command -v runuser >/dev/null 2>&1; then
        other="runuser -u nobody --"
    fi
fi
bin=$(fh_bin node_local_test)
FH_SHM=auto "$FHRUN" -n 2 --timeout 60 "$bin" --group 2 --hold 3 >"$tmpd/hold.log" 2>&1 &
job=$!
sleep 1.5
pids=$(pgrep -f "node_local_test --group 2 --hold" 2>/dev/null)
memfd=0 devshm=0
for pid in $pids; do
    grep -q 'memfd:firehose-segment' /proc/"$pid"/maps 2>/dev/null && memfd=$((memfd + 1))
    grep -q '/dev/shm/' /proc/"$pid"/maps 2>/dev/null && devshm=$((devshm + 1))
done
ran=$((ran + 1))
if [ "$memfd" -ne 2 ] || [ "$devshm" -ne 0 ]; then
    echo "FAIL maps: expected 2 ranks mapping a firehose-segment memfd and none mapping"
    echo "     /dev/shm, saw $memfd and $devshm (pids: $pids)"
    fail=$((fail + 1))
else
    echo "ok   maps: both ranks map their segments as memfds, nothing from /dev/shm"
fi
if [ -n "$other" ]; then
    tried=0 opened=0
    for pid in $pids; do
        for fd in /proc/"$pid"/fd/*; do
            case $(readlink "$fd" 2>/dev/null) in
            /memfd:firehose-segment*)
                tried=$((tried + 1))
                if $other sh -c "exec 3<>'$fd'" 2>/dev/null; then opened=$((opened + 1)); fi ;;
            esac
        done
    done
    ran=$((ran + 1))
    if [ "$tried" -eq 0 ]; then
        echo "FAIL outsider: found no firehose-segment memfd of the job to try"
        fail=$((fail + 1))
    elif [ "$opened" -ne 0 ]; then
        echo "FAIL outsider: user nobody opened $opened of $tried segment memfds"
        fail=$((fail + 1))
    else
        echo "ok   outsider: user nobody opened none of the job's $tried segment memfds"
    fi
else
    echo "SKIP outsider: not root (no second user to try with)"
fi
wait "$job" || { echo "FAIL the held job failed:"; tail -20 "$tmpd/hold.log"; fail=$((fail + 1)); }
finish
