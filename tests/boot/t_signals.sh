#!/bin/bash
# SIGTERM / SIGINT to fhrun end every rank (SIGTERM, then SIGKILL after 2 s);
# --timeout ends the job with 124.  fhrun -v says which signal ended each
# rank: that is what is asserted; times are only bounds against a hang
# (tests/boot/lib.sh).
. "$(dirname "$0")/lib.sh"
# start_hang NAME ARGS...: starts fhrun in the background, waits for "ready".
start_hang() {
    local o=$1; shift
    "$FHRUN" "$@" >"$TMP/$o.out" 2>"$TMP/$o.err" &
    FP=$!
    for i in $(seq 100); do grep -q ready "$TMP/$o.out" && break; sleep 0.1; done
}
stop() {  # signal: sends it, waits (bounded) for fhrun to end
    local t0 i; t0=$(date +%s.%N)
    kill -"$1" $FP
    for i in $(seq 600); do kill -0 $FP 2>/dev/null || break; sleep 0.1; done
    kill -0 $FP 2>/dev/null && kill -9 $FP
    wait $FP; RC=$?
    ELAPSED=$(echo "$(date +%s.%N) - $t0" | bc)
}
start_hang term -v -n 4 "$BOOT_TEST" hang
stop TERM; LAST=term
expect_rc 143 "SIGTERM to fhrun"
expect_lt "$ELAPSED" 60 "SIGTERM: job ended"
expect_count "$TMP/term.err" "^fhrun: rank [0-3] \(pid [0-9]+\) killed by signal 15 \(Terminated\)$" 4 "SIGTERM: every rank ended by SIGTERM"
expect_nogrep "$TMP/term.err" "killed by signal 9|still running 2 s after SIGTERM" "SIGTERM: no rank needed the SIGKILL"
expect_grep "$TMP/term.err" "^fhrun: got Terminated; terminating the job$" "SIGTERM message"
no_orphans "SIGTERM"

start_hang int -n 3 "$BOOT_TEST" hang
stop INT; LAST=int
expect_rc 130 "SIGINT to fhrun"
no_orphans "SIGINT"

start_hang noterm -v -n 3 "$BOOT_TEST" hang noterm
stop TERM; LAST=noterm
expect_rc 143 "SIGTERM, ranks ignoring SIGTERM"
expect_lt "$ELAPSED" 60 "SIGTERM ignored: job ended"
expect_grep "$TMP/noterm.err" "^fhrun: killing rank 0, rank 1, rank 2 \(still running 2 s after SIGTERM\)$" "ranks ignoring SIGTERM are SIGKILLed after 2 s"
expect_count "$TMP/noterm.err" "^fhrun: rank [0-2] \(pid [0-9]+\) killed by signal 9 \(Killed\)$" 3 "SIGTERM ignored: every rank ended by SIGKILL"
if [ "$(echo "$ELAPSED >= 1.9" | bc)" = 1 ]; then pass "waited the 2 s grace (${ELAPSED}s)"; else fail "no grace: ${ELAPSED}s"; fi
no_orphans "SIGTERM ignored"

LAST=tmo; run tmo "$FHRUN" -n 3 --timeout 1 "$BOOT_TEST" hang
expect_rc 124 "--timeout 1"
expect_lt "$ELAPSED" 60 "--timeout: job ended"
if [ "$(echo "$ELAPSED >= 0.9" | bc)" = 1 ]; then pass "--timeout: not before 1 s (${ELAPSED}s)"; else fail "--timeout 1 ended the job after ${ELAPSED}s"; fi
expect_grep "$TMP/tmo.err" "^fhrun: job timed out after 1 s \(--timeout\); terminating it$" "--timeout message"
no_orphans "--timeout"
finish
