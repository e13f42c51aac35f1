#!/bin/bash
# A rank killed with SIGKILL ends the job quickly with messages naming it,
# and leaves no process behind; same when fhrun itself is killed -9.
. "$(dirname "$0")/lib.sh"
for n in 2 4 8; do
    r=$((n - 1))
    LAST=die$n; run die$n "$FHRUN" -n $n "$BOOT_TEST" die $r
    expect_rc 137 "N=$n: rank $r killed by SIGKILL -> 128+9"
    expect_lt "$ELAPSED" 60 "N=$n: job ended"
    echo "     measured: N=$n dead-rank job total ${ELAPSED}s"
    expect_grep "$TMP/die$n.err" "^fhrun: rank $r \(pid [0-9]+\) killed by signal 9 \(Killed\)$" "N=$n: fhrun names rank $r"
    expect_count "$TMP/die$n.err" "^firehose\[[0-9]+\]: rank $r \(pid [0-9]+\) died: killed by signal 9 \(Killed\); aborting$" $((n - 1)) "N=$n: every survivor names rank $r"
    no_orphans "N=$n die"
done

# Survivors not inside a bootstrap call (blocked in pause()) are ended too.
"$FHRUN" -n 4 -v "$BOOT_TEST" hang >"$TMP/h.out" 2>"$TMP/h.err" &
FP=$!
for i in $(seq 100); do grep -q ready "$TMP/h.out" && break; sleep 0.1; done
victim=$(sed -n 's/^fhrun: rank 2 connected (pid \([0-9]*\))$/\1/p' "$TMP/h.err")
t0=$(date +%s.%N)
kill -9 "$victim"
for i in $(seq 600); do kill -0 $FP 2>/dev/null || break; sleep 0.1; done
kill -0 $FP 2>/dev/null && kill -9 $FP
wait $FP; RC=$?; ELAPSED=$(echo "$(date +%s.%N) - $t0" | bc)
LAST=h; expect_rc 137 "hang: rank 2 killed from outside"
expect_lt "$ELAPSED" 60 "hang: survivors gone after the death"
echo "     measured: kill -9 of rank 2 (others in pause()) -> fhrun exit in ${ELAPSED}s"
expect_count "$TMP/h.err" "^firehose\[[013]\]: rank 2 \(pid $victim\) died: killed by signal 9 \(Killed\); aborting$" 3 "hang: survivors name rank 2 and its pid"
no_orphans "hang die"

# fhrun killed with SIGKILL: PR_SET_PDEATHSIG takes the ranks down.
"$FHRUN" -n 3 "$BOOT_TEST" hang >"$TMP/k.out" 2>"$TMP/k.err" &
FP=$!
for i in $(seq 100); do grep -q ready "$TMP/k.out" && break; sleep 0.1; done
kill -9 $FP; wait $FP 2>/dev/null
no_orphans "fhrun killed -9"
finish
