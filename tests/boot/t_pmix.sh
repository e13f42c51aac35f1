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
LAST=pd; run pd $MPIRUN -np 4 "$PMIX_TEST" die 3
if [ "$RC" -ne 0 ]; then pass "dead rank under mpirun: exit $RC"; else fail "dead rank: exit 0"; show pd; fi
expect_lt "$ELAPSED" 10 "dead rank under mpirun: job ended"
# Open MPI 4.1.4 (ORTE) sends no PMIx event for a dead peer, and its fence
# may fail (PARTIAL SUCCESS: firehose exits 70) or even succeed without the
# dead rank; either way mpirun itself kills the job, which is what matters.
if grep -q "a peer rank died during the barrier" "$TMP/pd.err"; then
    pass "a survivor reported the dead peer"
else
    echo "     note: no survivor saw the death in PMIx_Fence (ORTE completed the fence); mpirun ended the job"
fi
no_orphans_pmix() {
    sleep 0.5
    if pgrep -f "^$PMIX_TEST" >/dev/null; then fail "processes left"; pkill -9 -f "^$PMIX_TEST"
    else pass "no boot_test.pmix process left"; fi
}
no_orphans_pmix
LAST=pa; run pa $MPIRUN -np 3 "$PMIX_TEST" abort 1 5
if [ "$RC" -ne 5 ] && grep -q "PMIx_server_finalize" "$TMP/pa.err"; then
    # Open MPI 4.1.4's mpirun sometimes segfaults in its own PMIx server
    # finalize after a PMIx_Abort; the job still ended.
    pass "abort under mpirun: exit $RC (mpirun crashed in PMIx_server_finalize: known mpirun 4.1.4 bug)"
elif [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
    # The other face of the same bug: every rank has exited (they sit as
    # zombies under mpirun) but mpirun never returns; timeout killed it.  The
    # abort message and no_orphans_pmix below still check what firehose did.
    pass "abort under mpirun: ranks ended, mpirun hung afterwards and timeout killed it (exit $RC; known mpirun 4.1.4 bug)"
else
    expect_rc 5 "abort under mpirun"
fi
expect_grep "$TMP/pa.err" "^firehose\[1\]: aborting the job \(code 5\): test abort from rank 1$" "abort message"
no_orphans_pmix
finish
