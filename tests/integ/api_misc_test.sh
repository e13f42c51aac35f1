#!/bin/sh
# api_misc_test.sh -- runs api_misc_test (fh_stats_print after fh_init,
# replacing an AM handler) on 1, 2 and 3 ranks over every provider, then
# checks fh_abort: called from main (code 7) and from an AM handler (code
# 9), and with code 0 (documented nonzero: the job exits 1).  Each abort
# run must end within its time limit with fhrun's exit status equal to the
# code, fhrun naming the rank and the message, and no rank left running.
. "$(dirname "$0")/common.sh"
need_fhrun
bin=$(fh_bin api_misc_test) || { echo "SKIP: api_misc_test not built"; exit 77; }
for p in $(providers); do
    export FH_OFI_PROVIDER=$p
    for n in 1 2 3; do
        run_np api_misc_test "$n"
    done
done
export FH_OFI_PROVIDER=tcp

# abort_case DESC NP OPTION CODE EXPECTED_STATUS WHERE
abort_case() {
    ran=$((ran + 1))
    log="$tmpd/abort.log"
    timeout -k 10 120 "$FHRUN" -n "$2" --timeout 100 "$bin" "$3" "$4" >"$log" 2>&1
    rc=$?
    last=$(($2 - 1))
    ok=1
    [ "$rc" -eq "$5" ] || { echo "FAIL $1: expected exit status $5, saw $rc"; ok=0; }
    grep -q "^fhrun: rank $last (pid [0-9]*) aborted the job (code $5): api_misc_test: deliberate fh_abort from $6\$" "$log" ||
        { echo "FAIL $1: expected fhrun to name rank $last, code $5 and the message"; ok=0; }
    grep -q "calling fh_abort($4) from $6" "$log" ||
        { echo "FAIL $1: expected rank $last to reach fh_abort"; ok=0; }
    grep -q "saw fh_barrier return" "$log" && { echo "FAIL $1: a rank left fh_barrier"; ok=0; }
    i=0
    while pgrep -f "^$bin" >/dev/null 2>&1 && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
    if pgrep -f "^$bin" >/dev/null 2>&1; then
        echo "FAIL $1: ranks still running after the abort"; ok=0
    fi
    if [ $ok -eq 1 ]; then
        echo "ok   $1 (exit status $rc)"
    else
        fail=$((fail + 1))
        echo "---- output ----"; tail -n 30 "$log"; echo "----------------"
    fi
}
abort_case "fh_abort(7) from main, 3 ranks" 3 --abort-main 7 7 main
abort_case "fh_abort(9) from an AM handler, 2 ranks" 2 --abort-handler 9 9 "an AM handler"
abort_case "fh_abort(0) from main: exit status 1" 2 --abort-main 0 1 main
finish
