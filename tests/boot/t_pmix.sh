#!/bin/bash
# The PMIx bootstrap under Open MPI's mpirun (skipped, exit 77, if not
# built/installed).
. "$(dirname "$0")/lib.sh"
PMIX_TEST=${PMIX_TEST:-$BUILD/boot_test.pmix}
if [ ! -x "$PMIX_TEST" ] || ! command -v mpirun >/dev/null; then
    echo "SKIP [$NAME]: no $PMIX_TEST or no mpirun"; exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LSAN_OPTIONS=suppressions=$HERE/lsan.supp
# -k: mpirun 4.1.4 can ignore SIGTERM when it hangs (see the abort case).
MPIRUN="timeout -k 5 90 mpirun --oversubscribe --mca osc ^rdma"
for n in 1 4; do
    LAST=p$n; run p$n $MPIRUN -np $n "$PMIX_TEST"
    expect_rc 0 "mpirun -np $n"
    expect_count "$TMP/p$n.out" "^boot_test: rank [0-9]+: ok$" $n "np $n: ranks ok"
    expect_count "$TMP/p$n.out" "^boot_test: rank [0-9]+/$n \(local [0-9]+/$n\) via pmix$" $n "np $n: via pmix, local ranks"
done
# mpirun_ended: fails unless mpirun itself ended (not killed by the
# `timeout` of $MPIRUN: 124, or 137 at the limit).
mpirun_ended() {  # what
    if [ "$RC" -eq 124 ] || [ "$(echo "$ELAPSED >= 90" | bc)" = 1 ]; then
        fail "$1: mpirun did not end within 90 s (timeout killed it, exit $RC)"; show "$LAST"
        return 1
    fi
}
# no_orphans_pmix: every boot_test.pmix process is gone within 30 s.
no_orphans_pmix() {
    local i
    for i in $(seq 300); do pgrep -f "^$PMIX_TEST" >/dev/null || break; sleep 0.1; done
    if pgrep -f "^$PMIX_TEST" >/dev/null; then fail "processes left 30 s after the job"; pkill -9 -f "^$PMIX_TEST"
    else pass "no boot_test.pmix process left"; fi
}

LAST=pd; run pd $MPIRUN -np 4 "$PMIX_TEST" die 3
# 70: a survivor's exit (FH_EXIT_PEER_DEAD); 137: mpirun passing on rank 3's
# SIGKILL.  Anything else -- 0, a crash of mpirun, a timeout -- is a failure.
if mpirun_ended "dead rank under mpirun"; then
    case $RC in
    70|137) pass "dead rank under mpirun: exit $RC" ;;
    # ORTE may complete the fence without the dead rank (below): the
    # survivors' boot_test then fails its own check (status 1) and mpirun
    # ends the job -- the launcher's doing, seen in CI 1 run in ~20.
    1) if grep -q "barrier after rank 3 left returned 0" "$TMP/pd.err"; then
           pass "dead rank under mpirun: exit 1, ORTE completed the fence without rank 3 (survivors said so)"
       else
           fail "dead rank under mpirun: expected exit 70 or 137, saw 1"; show pd
       fi ;;
    *) fail "dead rank under mpirun: expected exit 70 or 137, saw $RC"; show pd ;;
    esac
fi
expect_lt "$ELAPSED" 60 "dead rank under mpirun: job ended"
# Open MPI 4.1.4 (ORTE) sends no PMIx event for a dead peer, and its fence
# may fail (PARTIAL SUCCESS: firehose exits 70) or even succeed without the
# dead rank; either way mpirun itself kills the job.  (The runtime's own
# dead-peer path, with no launcher help, is tests/integ/dead_rank.sh's
# "mpirun" part.)
if grep -q "a peer died during the barrier" "$TMP/pd.err"; then
    pass "a survivor reported the dead peer"
else
    echo "     note: no survivor saw the death in PMIx_Fence (ORTE completed the fence); mpirun ended the job"
fi
no_orphans_pmix

# The abort: what firehose does is asserted (the message, every rank gone).
# Open MPI 4.1.4's mpirun itself, after a PMIx_Abort, often crashes in its
# PMIx_server_finalize (139) or never returns although every rank has
# exited (timeout): its exit status is then NOT verified -- said so, and not
# counted as a pass; any other status than 5 fails.
LAST=pa; run pa $MPIRUN -np 3 "$PMIX_TEST" abort 1 5
expect_grep "$TMP/pa.err" "^firehose\[1\]: aborting the job \(code 5\): test abort from rank 1$" "abort message"
no_orphans_pmix
if [ "$RC" -eq 5 ]; then
    pass "abort under mpirun: exit 5"
elif [ "$RC" -eq 139 ] && grep -q "PMIx_server_finalize" "$TMP/pa.err"; then
    echo "     NOT VERIFIED [$NAME]: mpirun's exit status after the abort: mpirun crashed in its own PMIx_server_finalize (exit 139; known Open MPI 4.1.4 bug)"
elif [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
    echo "     NOT VERIFIED [$NAME]: mpirun's exit status after the abort: every rank ended, mpirun hung afterwards and timeout killed it (exit $RC; known Open MPI 4.1.4 bug)"
else
    expect_rc 5 "abort under mpirun"
fi
finish
