#!/bin/bash
# Exit status propagation and launcher-side failures.
. "$(dirname "$0")/lib.sh"
LAST=ex; run ex "$FHRUN" -n 4 "$BOOT_TEST" exit 1 3
expect_rc 3 "rank 1 exits 3 before finalize"
expect_grep "$TMP/ex.err" "^fhrun: rank 1 \(pid [0-9]+\) exited with status 3$" "fhrun names rank 1"
expect_count "$TMP/ex.err" "^firehose\[[023]\]: rank 1 \(pid [0-9]+\) died: exited with status 3; aborting$" 3 "survivors name rank 1"

LAST=exa; run exa "$FHRUN" -n 4 "$BOOT_TEST" exitafter 2 3
expect_rc 3 "rank 2 exits 3 after finalize"
expect_count "$TMP/exa.out" "^boot_test: rank [0-9]+: ok$" 4 "all ranks finished"

LAST=ab; run ab "$FHRUN" -n 3 "$BOOT_TEST" abort 0 5
expect_rc 5 "rank 0 aborts with code 5"
expect_grep "$TMP/ab.err" "^fhrun: rank 0 \(pid [0-9]+\) aborted the job \(code 5\): test abort from rank 0$" "abort reported"
expect_count "$TMP/ab.err" "^firehose\[[12]\]: rank 0 \(pid [0-9]+\) died: aborted the job" 2 "survivors told"

LAST=ni; run ni "$FHRUN" -n 3 "$BOOT_TEST" noinit 1
expect_rc 70 "rank 1 exits 0 without fh_init"
expect_grep "$TMP/ni.err" "^fhrun: rank 1 \(pid [0-9]+\) exited with status 0 before fh_finalize$" "exit 0 before finalize is a death"

LAST=mm; run mm "$FHRUN" -n 3 "$BOOT_TEST" mismatch
expect_rc 1 "mismatched allgather lengths"
expect_grep "$TMP/mm.err" "^fhrun: allgather length mismatch: rank [0-9] contributed (8|16) bytes but rank [0-9] contributed (8|16); aborting the job$" "mismatch message"
expect_count "$TMP/mm.err" "^firehose\[[0-2]\]: the launcher aborted the job: allgather length mismatch" 3 "ranks told"

LAST=sh; run sh "$FHRUN" -n 3 sh -c '[ $FH_RANK = 1 ] && exit 4; sleep 0.3'
expect_rc 4 "first non-zero status of a plain program"
no_orphans "exit status tests"
finish
