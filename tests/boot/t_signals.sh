#!/bin/bash
# SIGTERM / SIGINT to fhrun end every rank (SIGTERM, then SIGKILL after 2 s);
# --timeout ends the job with 124.
. "$(dirname "$0")/lib.sh"
# start_hang NAME ARGS...: starts fhrun in the background, waits for "ready".
start_hang() {
    local o=$1; shift
    "$FHRUN" "$@" >"$TMP/$o.out" 2>"$TMP/$o.err" &
    FP=$!
    for i in $(seq 100); do grep -q ready "$TMP/$o.out" && break; sleep 0.1; done
}
stop() {  # signal
    local t0; t0=$(date +%s.%N)
    kill -"$1" $FP
    wait $FP; RC=$?
    ELAPSED=$(echo "$(date +%s.%N) - $t0" | bc)
}
start_hang term -n 4 "$BOOT_TEST" hang
stop TERM; LAST=term
expect_rc 143 "SIGTERM to fhrun"
expect_lt "$ELAPSED" 1.5 "SIGTERM: ranks ended by SIGTERM"
expect_grep "$TMP/term.err" "^fhrun: got Terminated; terminating the job$" "SIGTERM message"
no_orphans "SIGTERM"

start_hang int -n 3 "$BOOT_TEST" hang
stop INT; LAST=int
expect_rc 130 "SIGINT to fhrun"
no_orphans "SIGINT"

start_hang noterm -n 3 "$BOOT_TEST" hang noterm
stop TERM; LAST=noterm
expect_rc 143 "SIGTERM, ranks ignoring SIGTERM"
expect_lt "$ELAPSED" 4 "ranks ignoring SIGTERM are SIGKILLed after 2 s"
if [ "$(echo "$ELAPSED >= 1.9" | bc)" = 1 ]; then pass "waited the 2 s grace (${ELAPSED}s)"; else fail "no grace: ${ELAPSED}s"; fi
no_orphans "SIGTERM ignored"

LAST=tmo; run tmo "$FHRUN" -n 3 --timeout 1 "$BOOT_TEST" hang
expect_rc 124 "--timeout 1"
expect_lt "$ELAPSED" 3 "--timeout: job ended"
expect_grep "$TMP/tmo.err" "^fhrun: job timed out after 1 s \(--timeout\); terminating it$" "--timeout message"
no_orphans "--timeout"
finish
